//! File discovery: Python files under the given paths, respecting `.gitignore` and skipping
//! hidden folders and virtual environments; files named explicitly are always checked.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::Settings;

/// The files to check, and the given paths that do not exist.
#[derive(Debug, Default)]
pub struct Discovery {
    pub files: Vec<PathBuf>,
    pub missing: Vec<PathBuf>,
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
    out.files.sort();
    out.files.dedup();
    out
}
