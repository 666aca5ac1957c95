//! File discovery: Python files under the given paths, respecting `.gitignore` and skipping
//! hidden folders and virtual environments; files named explicitly are always checked.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::Settings;

/// The files to check, sorted by path, and the given paths that do not exist.
#[derive(Debug, Default)]
pub struct Discovery {
    pub files: Vec<PathBuf>,
    pub missing: Vec<PathBuf>,
    /// The files among `files` named explicitly (see `Settings::named_files`).
    pub named: Vec<PathBuf>,
}

fn is_source(path: &Path) -> bool {
    crate::Language::of(path).is_some()
}

fn is_virtualenv(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file()
}

/// Python and Rust files under `paths`. Files named explicitly are checked unless
/// `settings.force_exclude` (a hook or an editor passes every changed file, and the project's
/// excludes must still hold); under directories, excluded paths and virtual environments are
/// skipped.
pub fn discover(paths: &[PathBuf], settings: &Settings) -> Discovery {
    let respect_gitignore = settings.respect_gitignore;
    let mut out = Discovery::default();
    for root in paths {
        if !root.exists() {
            out.missing.push(root.clone());
            continue;
        }
        if root.is_file() {
            if !(settings.force_exclude && settings.excludes_file(root)) {
                out.files.push(root.clone());
                out.named.push(root.clone());
            }
            continue;
        }
        // The walker's filter must own what it uses.
        let excluded = settings.clone();
        let found = Mutex::new(Vec::new());
        // Directories are read on all cores: a large tree has tens of thousands of entries.
        ignore::WalkBuilder::new(root)
            .hidden(true)
            .git_ignore(respect_gitignore)
            .git_exclude(respect_gitignore)
            .git_global(respect_gitignore)
            .ignore(respect_gitignore)
            .require_git(false)
            .follow_links(false)
            .filter_entry(move |e| {
                let is_dir = e.file_type().is_some_and(|t| t.is_dir());
                e.depth() == 0
                    || !(excluded.is_excluded(e.path()) || is_dir && is_virtualenv(e.path()))
            })
            .build_parallel()
            .run(|| {
                let found = &found;
                Box::new(move |entry| {
                    if let Ok(entry) = entry {
                        if entry.file_type().is_some_and(|t| t.is_file()) && is_source(entry.path())
                        {
                            found
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(entry.into_path());
                        }
                    }
                    ignore::WalkState::Continue
                })
            });
        out.files
            .extend(found.into_inner().unwrap_or_else(|e| e.into_inner()));
    }
    // Sorted as paths compare, component by component, on a key made once per path: a
    // component-wise comparison costs more than the rest of a run's single-threaded work.
    out.files.sort_by_cached_key(|p| order_key(p));
    out.files.dedup();
    out
}

/// Bytes that compare as `path` does among paths: each component in turn, its kind first (a
/// root before `.` before `..` before names, as `Component` orders them), then its name ended by
/// a 0 byte, which sorts a name before every longer name it begins.
fn order_key(path: &Path) -> Vec<u8> {
    use std::path::Component;
    let mut key = Vec::with_capacity(path.as_os_str().len() + 8);
    for c in path.components() {
        let kind = match c {
            Component::Prefix(_) => 0,
            Component::RootDir => 1,
            Component::CurDir => 2,
            Component::ParentDir => 3,
            Component::Normal(_) => 4,
        };
        key.push(kind);
        key.extend_from_slice(c.as_os_str().as_encoded_bytes());
        key.push(0);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_sort_as_their_paths_compare() {
        let paths: Vec<PathBuf> = [
            "pkg/a.py",
            "pkg-extra/b.py",
            "pkg.d/c.py",
            "pkg/a/b.py",
            "pkg/ab.py",
            "pkg/a.pyi",
            "/abs/x.py",
            "./rel/y.py",
            "../up/z.py",
            "../-dash/z.py",
            "../.hidden/z.py",
            "pkg/é.py",
            "pkg/e.py",
            "a b/c.py",
            "a/c.py",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let mut by_path = paths.clone();
        by_path.sort();
        let mut by_key = paths;
        by_key.sort_by_cached_key(|p| order_key(p));
        assert_eq!(by_key, by_path);
    }
}
