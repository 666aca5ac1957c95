//! A project kept in memory between lints, for the language server. Every Python file under a
//! root is indexed once ([`ModuleIndex`]: what other files' calls read of it, their summary),
//! then kept up to date one file at a time, as the editor changes a document or the disk
//! changes a file. An open document is linted against the other files' kept indexes, so a call
//! into another file sees its callee as `streamlint check` does, without reading the project
//! again at each keystroke.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use streamlint_graph::Deadline;
use streamlint_python::{module_name, ModuleIndex, Names, Project};
use streamlint_rules::Finding;

use crate::run::{helper_module, ImportedModules};
use crate::run::{load, lower_in_project, Loaded};
use crate::rust_crate::RustFiles;
use crate::{check_source, discover, judge, worth_parsing, Language, Settings};

/// What the project keeps of one Python file.
enum Slot {
    /// A module with stream code: its index.
    Module(Arc<ModuleIndex>),
    /// A package's `__init__.py` without stream code, by dotted name: it may re-export names.
    Package(String),
}

struct Entry {
    slot: Slot,
    /// A digest of the text the slot was made from.
    text: u64,
}

pub struct Workspace {
    root: PathBuf,
    files: HashMap<PathBuf, Entry>,
    /// The modules in a fixed order, with the names that find them: made when a check first
    /// needs them, kept while files change only in their text.
    snapshot: OnceLock<Snapshot>,
    /// See [`Workspace::imported`].
    imported: OnceLock<ImportedModules>,
    /// The Rust files, as one crate.
    rust: RustFiles,
}

/// The project's modules as one list, and its [`Names`], which cost a walk over every module to
/// make (some milliseconds for thousands of files: too long to repeat at each keystroke).
struct Snapshot {
    modules: Vec<Arc<ModuleIndex>>,
    /// Each module's place in `modules`, by path.
    position: HashMap<PathBuf, usize>,
    names: Arc<Names>,
}

/// A package's `__init__.py` without stream code: its dotted name and path (see `Names::new`).
type Package = (String, PathBuf);

pub(crate) fn text_digest(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl Workspace {
    /// Index the Python and Rust files under `root` (as `check` would find them: exclusions, ignore
    /// files and virtual environments are honoured), on the calling thread pool's cores.
    pub fn scan(root: &Path, settings: &Settings) -> Workspace {
        let mut workspace = Workspace {
            root: root.to_path_buf(),
            files: HashMap::new(),
            snapshot: OnceLock::new(),
            imported: OnceLock::new(),
            rust: RustFiles::default(),
        };
        let found = discover(&[root.to_path_buf()], settings).files;
        workspace.rust = RustFiles::scan(&found, settings);
        let entries: Vec<(PathBuf, Entry)> = found
            .par_iter()
            .filter(|p| Language::of(p) == Some(Language::Python))
            .filter_map(|path| {
                let entry = match load(path, settings, false) {
                    Loaded::Text(t) => workspace.entry(path, &t.source, settings),
                    Loaded::Package(_) => Some(workspace.package_entry(path, None)),
                    Loaded::Done(_) => None,
                };
                entry.map(|e| (path.clone(), e))
            })
            .collect();
        workspace.files.extend(entries);
        // Files with no stream code that the modules call helpers of, as a run indexes them
        // (from all the modules now there, not from what the pass above may have asked).
        workspace.imported = OnceLock::new();
        let imported = workspace.imported();
        let helpers: Vec<(PathBuf, Entry)> = found
            .par_iter()
            .filter(|p| Language::of(p) == Some(Language::Python))
            .filter(|p| !workspace.files.contains_key(p.as_path()))
            .filter_map(|path| {
                let entry = workspace.helper_from_disk(path, imported, settings)?;
                Some((path.clone(), entry))
            })
            .collect();
        workspace.files.extend(helpers);
        workspace
    }

    /// The modules the project's modules with stream code call helpers of (made when first
    /// needed, and again after a module's index changes).
    fn imported(&self) -> &ImportedModules {
        self.imported.get_or_init(|| {
            ImportedModules::of(self.files.values().filter_map(|e| match &e.slot {
                Slot::Module(m) if !m.helpers_only() => Some(m.as_ref()),
                _ => None,
            }))
        })
    }

    /// The entry of the file at `path`, which has no stream code, if the project's modules call
    /// helpers of it.
    fn helper_from_disk(
        &self,
        path: &Path,
        imported: &ImportedModules,
        settings: &Settings,
    ) -> Option<Entry> {
        if !imported.names(&self.module_name(path)) {
            return None;
        }
        match load(path, settings, true) {
            Loaded::Text(t) => Some(self.helper_entry(path, &t.source, settings)),
            _ => None,
        }
    }

    /// The entry of a file with no stream code kept for the helpers other modules call.
    fn helper_entry(&self, path: &Path, text: &str, settings: &Settings) -> Entry {
        Entry {
            slot: Slot::Module(Arc::new(helper_module(
                self.module_name(path),
                text,
                settings,
            ))),
            text: text_digest(text),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Does the project hold the file at `path`, or would it (the file is under its root)?
    pub fn contains(&self, path: &Path) -> bool {
        path.starts_with(&self.root)
    }

    /// The dotted module name of a file, from its path under the root.
    fn module_name(&self, path: &Path) -> String {
        module_name(path.strip_prefix(&self.root).unwrap_or(path))
    }

    fn package_entry(&self, path: &Path, text: Option<&str>) -> Entry {
        Entry {
            slot: Slot::Package(self.module_name(path)),
            text: text.map_or(0, text_digest),
        }
    }

    /// What the project keeps of a Python file with this text, if anything.
    fn entry(&self, path: &Path, text: &str, settings: &Settings) -> Option<Entry> {
        if worth_parsing(Language::Python, text.as_bytes(), settings) {
            let index = ModuleIndex::new(
                self.module_name(path),
                text,
                &settings.api,
                &settings.python_prefilter,
            );
            return Some(Entry {
                slot: Slot::Module(Arc::new(index)),
                text: text_digest(text),
            });
        }
        let is_init = path.file_name().is_some_and(|n| n == "__init__.py");
        if is_init {
            return Some(self.package_entry(path, Some(text)));
        }
        // A module the project's modules call helpers of (see `Workspace::scan`).
        self.imported()
            .names(&self.module_name(path))
            .then(|| self.helper_entry(path, text, settings))
    }

    /// Index the file at `path` again, from `text` (an open document's) or, with `None`, from
    /// the disk (a file closed, changed, created or deleted there). Returns whether what other
    /// files see of it changed: their findings may have changed with it.
    pub fn update(&mut self, path: &Path, text: Option<&str>, settings: &Settings) -> bool {
        if !self.contains(path) {
            return false;
        }
        match Language::of(path) {
            Some(Language::Rust) => return self.rust.update(path, text, settings),
            Some(Language::Python) => {}
            None => return false,
        }
        // The text it was indexed from (a file linted again because a callee changed, a save):
        // nothing to do.
        if let (Some(text), Some(kept)) = (text, self.files.get(path)) {
            if kept.text == text_digest(text) {
                return false;
            }
        }
        let entry = match text {
            Some(text) => self.entry(path, text, settings),
            None => match load(path, settings, false) {
                Loaded::Text(t) => self.entry(path, &t.source, settings),
                Loaded::Package(_) => Some(self.package_entry(path, None)),
                Loaded::Done(_) => self.helper_from_disk(path, self.imported(), settings),
            },
        };
        let interface = |e: Option<&Entry>| match e.map(|e| &e.slot) {
            Some(Slot::Module(m)) => Some(m.interface_digest()),
            Some(Slot::Package(name)) => Some(text_digest(name)),
            None => None,
        };
        let before = interface(self.files.get(path));
        let after = interface(entry.as_ref());
        // What the modules with stream code call helpers of may have changed with this one.
        let checked = |e: Option<&Entry>| matches!(e.map(|e| &e.slot), Some(Slot::Module(m)) if !m.helpers_only());
        if checked(self.files.get(path)) || checked(entry.as_ref()) {
            self.imported = OnceLock::new();
        }
        self.keep_snapshot(path, entry.as_ref());
        match entry {
            Some(entry) => self.files.insert(path.to_path_buf(), entry),
            None => self.files.remove(path),
        };
        before != after
    }

    /// Put a file's new index in the snapshot, or drop the snapshot where its names no longer
    /// hold: a module added or removed, a package changed, or a function its names do not know.
    fn keep_snapshot(&mut self, path: &Path, entry: Option<&Entry>) {
        let Some(snapshot) = self.snapshot.get_mut() else {
            return;
        };
        let kept = match (entry.map(|e| &e.slot), snapshot.position.get(path)) {
            (Some(Slot::Module(m)), Some(&i)) if snapshot.names.knows_functions_of(m) => {
                snapshot.modules[i] = m.clone();
                true
            }
            // Still no module of the project's (no stream code, not a package).
            (None, None) => !self.files.contains_key(path),
            _ => false,
        };
        if !kept {
            self.snapshot = OnceLock::new();
        }
    }

    fn snapshot(&self) -> &Snapshot {
        self.snapshot.get_or_init(|| {
            let (found, packages) = self.parts(None);
            let position = found
                .iter()
                .enumerate()
                .map(|(i, (path, _))| (path.to_path_buf(), i))
                .collect();
            let modules: Vec<Arc<ModuleIndex>> = found.into_iter().map(|(_, m)| m).collect();
            let names = Arc::new(Names::new(&modules, packages));
            Snapshot {
                modules,
                position,
                names,
            }
        })
    }

    /// The project's modules (with their paths) and its packages (dotted name, path), without
    /// the file at `leave_out`.
    fn parts(&self, leave_out: Option<&Path>) -> (Vec<(&Path, Arc<ModuleIndex>)>, Vec<Package>) {
        let mut modules = Vec::new();
        let mut packages = Vec::new();
        for (path, entry) in self
            .files
            .iter()
            .filter(|(p, _)| Some(p.as_path()) != leave_out)
        {
            match &entry.slot {
                Slot::Module(m) => modules.push((path.as_path(), m.clone())),
                Slot::Package(name) => packages.push((name.clone(), path.clone())),
            }
        }
        (modules, packages)
    }

    /// Can a change of the file at `changed` change the findings of the file at `path`? When
    /// either may import the other (see [`ModuleIndex::may_import`]): the file calls into the
    /// changed one, or the changed one calls into it (whether its functions are called at all
    /// decides how their stream parameters are judged). A file without stream code has no
    /// findings to change.
    pub fn depends_on(&self, path: &Path, changed: &Path) -> bool {
        // Rust files are one crate: any of them may call, or implement, what another declares.
        let rust = |p: &Path| Language::of(p) == Some(Language::Rust);
        if rust(path) || rust(changed) {
            return rust(path) && rust(changed) && path != changed && self.rust.holds(path);
        }
        let module = |p: &Path| match self.files.get(p).map(|e| &e.slot) {
            Some(Slot::Module(m)) => Some(m),
            _ => None,
        };
        let Some(here) = module(path).filter(|_| path != changed) else {
            return false;
        };
        here.may_import(&self.module_name(changed))
            || module(changed).is_some_and(|m| m.may_import(&self.module_name(path)))
    }

    /// Check `source` as the file at `path`, its calls into the project's other files seeing
    /// their callees (a Rust file sees the crate's other Rust files). A file outside the root
    /// is checked on its own.
    pub fn check(&self, path: &Path, source: &str, settings: &Settings) -> Vec<Finding> {
        if !self.contains(path) {
            return check_source(path, source, settings);
        }
        match Language::of(path) {
            Some(Language::Rust) => return self.rust.check(path, source, settings),
            Some(Language::Python) => {}
            None => return check_source(path, source, settings),
        }
        let here = match self.files.get(path) {
            Some(e) if e.text == text_digest(source) => match &e.slot {
                Slot::Module(m) => m.clone(),
                Slot::Package(_) => return Vec::new(),
            },
            _ => match self.entry(path, source, settings).map(|e| e.slot) {
                Some(Slot::Module(m)) => m,
                _ => return Vec::new(),
            },
        };
        let snapshot = self.snapshot();
        let (project, at) = match snapshot.position.get(path) {
            // The text checked may be newer than the project's (a check before the update),
            // and define functions the names do not know yet.
            Some(&i) if snapshot.names.knows_functions_of(&here) => {
                let mut modules = snapshot.modules.clone();
                modules[i] = here;
                let names = snapshot.names.clone();
                (
                    Project::with_names(modules, names, &settings.api, &settings.python_prefilter),
                    i,
                )
            }
            _ => (self.project_with(path, here, settings), 0),
        };
        let deadline = Deadline::after(settings.file_time_limit);
        let lowered = lower_in_project(&project, at, source, deadline);
        let mut decided = judge(source, Language::Python, lowered, settings);
        crate::disciplines::settle_alone(&mut decided, None);
        decided.findings
    }

    /// The project of the other files and of `here` (module 0) for the file at `path`, made
    /// afresh.
    fn project_with<'s>(
        &self,
        path: &Path,
        here: Arc<ModuleIndex>,
        settings: &'s Settings,
    ) -> Project<'s> {
        let (others, packages) = self.parts(Some(path));
        let modules = std::iter::once(here)
            .chain(others.into_iter().map(|(_, m)| m))
            .collect();
        Project::new(modules, packages, &settings.api, &settings.python_prefilter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller of helpers from a module with no stream code gets the same findings from the
    /// editor's project as from a run over the folder.
    #[test]
    fn helpers_of_modules_without_stream_code_are_seen_as_in_a_run() {
        let case = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/python/SL003/bad_plain_helper_module_called_inside_side_block");
        let root = std::env::temp_dir().join(format!("streamlint-ws-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        for name in ["block.py", "mixing.py"] {
            std::fs::copy(case.join(name), root.join(name)).unwrap();
        }
        let settings = Settings::default();
        let block = root.join("block.py");
        let source = std::fs::read_to_string(&block).unwrap();
        let workspace = Workspace::scan(&root, &settings);
        let in_editor: Vec<(u32, String)> = workspace
            .check(&block, &source, &settings)
            .iter()
            .map(|f| (f.span.start, f.code.to_string()))
            .collect();
        let in_run: Vec<(u32, String)> =
            crate::run::check_run(&discover(&[root.clone()], &settings).files, &settings)
                .into_iter()
                .filter(|r| r.path.ends_with("block.py"))
                .flat_map(|r| r.findings)
                .map(|f| (f.span.start, f.code.to_string()))
                .collect();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(in_run.len(), 2, "{in_run:?}");
        assert_eq!(in_editor, in_run);
    }
}
