//! A whole run: every file is read and prefiltered, the Python files worth parsing are parsed,
//! indexed together as one project (so a call in one file sees its callee in another), and then
//! each file is lowered and judged. Every step runs on all cores; a file that cannot be read,
//! decoded or parsed gets a finding of its own and the others go on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use streamlint_graph::{Body, Deadline};
use streamlint_python::{module_name, ModuleIndex, Project};
use streamlint_rules::Finding;
use streamlint_rust::{CrateSummaries, CrateTypes, LoweredFile};

use crate::disciplines::Decided;
use crate::{error_finding, judge, worth_parsing, FileReport, Language, Settings, MAX_FILE_BYTES};

/// A file after reading.
pub(crate) enum Loaded {
    /// Its text, to check.
    Text(Text),
    /// Its report already (skipped, unreadable, not UTF-8, no stream code).
    Done(FileReport),
    /// A package's `__init__.py` with no stream code: nothing to judge, but the names it
    /// re-exports (`from .streams import side_stream`) may be what another file calls.
    Package(PathBuf),
}

pub(crate) struct Text {
    pub path: PathBuf,
    pub source: String,
    pub language: Language,
}

/// A file checked in a run: its text, its module in the project (Python), and its findings
/// before the run decides those that rest on other files.
pub(crate) type Checked = (Text, Option<usize>, Decided);

/// A file after indexing: its text is not kept.
enum Indexed {
    /// A Python file to check, with its index.
    PythonToCheck(PathBuf, Arc<ModuleIndex>),
    /// A Rust file to check, with the structs it declares for the other files' methods.
    RustToCheck(PathBuf, CrateTypes),
    /// Done, with the names a Python file with no stream code imports (see
    /// `load_noting_imports`).
    Done(FileReport, Vec<(String, String)>),
    Package(PathBuf),
}

/// A file's bodies, or where and why its parse stopped.
type Lowered = Result<Vec<Body>, (u32, String)>;

/// A Rust file's lowering with the crate's types, before any file is judged (a panic in it is
/// kept, to be reported when the file is judged).
type FirstLowering = std::thread::Result<Result<LoweredFile, (u32, String)>>;

/// Files a thread reads and indexes as one piece of work, at most (see `check_run`).
const INDEX_PIECE: usize = 16;

/// The message of the finding for a file whose analysis panicked.
const INTERNAL_ERROR: &str =
    "internal error while analysing this file; please report it with the file";

fn report(path: &Path, source: String, findings: Vec<Finding>) -> FileReport {
    decided_report(
        path,
        source,
        Decided {
            findings,
            ..Decided::default()
        },
    )
}

fn decided_report(path: &Path, source: String, decided: Decided) -> FileReport {
    FileReport {
        path: path.to_path_buf(),
        // Only the text of files with findings is kept: it is what will be shown.
        source: if decided.findings.is_empty() && decided.proven.is_empty() {
            String::new()
        } else {
            source
        },
        findings: decided.findings,
        proven: decided.proven,
    }
}

/// Read a file and decide whether it is worth parsing; `admitted` when a first read already did.
pub(crate) fn load(path: &Path, settings: &Settings, admitted: bool) -> Loaded {
    load_noting_imports(path, settings, admitted, None)
}

/// [`load`], noting in `imports` the names a Python file with no stream code imports from other
/// modules (`from .ops import to_host`): it may call a helper of the project that has some.
fn load_noting_imports(
    path: &Path,
    settings: &Settings,
    admitted: bool,
    imports: Option<&mut Vec<(String, String)>>,
) -> Loaded {
    let done = |findings| Loaded::Done(report(path, String::new(), findings));
    let bytes = match read_within_limit(path) {
        Ok(Ok(b)) => b,
        Ok(Err(len)) => {
            // Generated or vendored giants (a minified bundle, a dumped table) would cost more
            // than the whole rest of a run; they are skipped with a finding that says so.
            let mb = |bytes: u64| bytes as f64 / 1e6;
            let message = format!(
                "skipped: the file is {:.1} MB, over the {:.0} MB limit for one file",
                mb(len),
                mb(MAX_FILE_BYTES)
            );
            return done(error_finding(settings, message));
        }
        Err(e) => {
            return done(error_finding(
                settings,
                format!("could not read the file: {e}"),
            ))
        }
    };
    let language = Language::of(path).unwrap_or(Language::Python);
    let no_stream_code = !admitted && !worth_parsing(language, &bytes, settings);
    if let (true, Language::Python, Some(imports)) = (no_stream_code, language, imports) {
        *imports = streamlint_python::names_imported_from(&bytes);
    }
    if no_stream_code && !settings.named_files.iter().any(|n| n == path) {
        if language == Language::Python && path.file_name().is_some_and(|n| n == "__init__.py") {
            return Loaded::Package(path.to_path_buf());
        }
        return done(Vec::new());
    }
    match String::from_utf8(bytes) {
        // A file named on the command line with no stream code: only whether it parses.
        Ok(source) if no_stream_code => {
            let findings = match language.syntax_error(&source) {
                Some(error) => judge(&source, language, Err(error), settings).findings,
                None => Vec::new(),
            };
            Loaded::Done(report(path, source, findings))
        }
        Ok(source) => Loaded::Text(Text {
            path: path.to_path_buf(),
            source,
            language,
        }),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            done(error_finding(
                settings,
                format!("the file is not valid UTF-8 (invalid byte at offset {at})"),
            ))
        }
    }
}

/// The bytes of a file, or its length when it is over [`MAX_FILE_BYTES`]. The file is opened
/// once: its size comes from the open file, not from a second lookup of its path, and is not
/// asked again (`File::read_to_end` would, and seek, for every one of thousands of files). The
/// buffer is not zeroed first: most files are read only to be turned away.
fn read_within_limit(path: &Path) -> std::io::Result<Result<Vec<u8>, u64>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len > MAX_FILE_BYTES {
        return Ok(Err(len));
    }
    // Read through `take`, which asks nothing of the file; one byte more than its size tells
    // whether it grew since.
    let mut bytes = Vec::with_capacity(len as usize + 1);
    let read = (&mut file).take(len + 1).read_to_end(&mut bytes)?;
    if read as u64 > len {
        file.read_to_end(&mut bytes)?;
    }
    Ok(Ok(bytes))
}

/// Run `f`, turning a panic (always a bug) into the internal-error finding.
fn guarded(settings: &Settings, f: impl FnOnce() -> Decided) -> Decided {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Decided {
        findings: error_finding(settings, INTERNAL_ERROR.into()),
        ..Decided::default()
    })
}

/// Check `files` as one run (see the module's documentation).
pub fn check_run(files: &[PathBuf], settings: &Settings) -> Vec<FileReport> {
    let mut reports = Vec::new();
    // Files to check, with their place in the project (Python) or none (Rust).
    let mut to_check = Vec::new();
    let mut modules = Vec::new();
    let mut packages = Vec::new();
    // Each Python file is indexed from its text alone (no parse: see `ModuleIndex`); the text
    // is not kept, but read again when the file is checked, so that a run holds one file's
    // text and tree per thread, not every file's.
    // Small pieces, so that a core left without work can take some from the other: rayon's
    // default split leaves long runs of files that only the thread holding them can do.
    let indexed: Vec<Indexed> = files
        .par_iter()
        .with_max_len(INDEX_PIECE)
        .map(|p| {
            let mut imports = Vec::new();
            let loaded = load_noting_imports(p, settings, false, Some(&mut imports));
            (loaded, imports)
        })
        .map(|(loaded, imports)| match loaded {
            Loaded::Text(t) if t.language == Language::Rust => {
                let structs = CrateTypes::of_file(&t.source);
                Indexed::RustToCheck(t.path, structs)
            }
            Loaded::Text(t) => {
                let index = Arc::new(ModuleIndex::new(
                    module_name(&t.path),
                    &t.source,
                    &settings.api,
                    &settings.python_prefilter,
                ));
                Indexed::PythonToCheck(t.path, index)
            }
            Loaded::Done(r) => Indexed::Done(r, imports),
            Loaded::Package(path) => Indexed::Package(path),
        })
        .collect();
    let mut crate_structs = CrateTypes::default();
    // Python files with no stream code of their own, which the checked files may import
    // helpers from, with the names they import.
    let mut without_stream_code = Vec::new();
    let mut importing = Vec::new();
    for indexed in indexed {
        match indexed {
            Indexed::RustToCheck(path, structs) => {
                crate_structs.merge(structs);
                to_check.push((path, None));
            }
            Indexed::PythonToCheck(path, index) => {
                modules.push(index);
                to_check.push((path, Some(modules.len() - 1)));
            }
            Indexed::Done(r, imports) => {
                if r.findings.is_empty() && Language::of(&r.path) == Some(Language::Python) {
                    without_stream_code.push(r.path.clone());
                    if !imports.is_empty() {
                        importing.push((reports.len(), imports));
                    }
                }
                reports.push(r);
            }
            Indexed::Package(path) => {
                packages.push((module_name(&path), path.clone()));
                reports.push(report(&path, String::new(), Vec::new()));
            }
        }
    }
    // A file with no stream code that imports a helper of the project with some
    // (`from .ops import to_host`, then `to_host(out)` read on the host) is checked too: the
    // helper is lowered in place at its calls there.
    let callers = callers_of_stream_helpers(&modules, &importing, &reports, settings);
    let called_here: rustc_hash::FxHashSet<&Path> =
        callers.iter().map(|(p, _)| p.as_path()).collect();
    reports.retain(|r| !called_here.contains(r.path.as_path()));
    without_stream_code.retain(|p| !called_here.contains(p.as_path()));
    for (path, index) in callers {
        modules.push(index);
        to_check.push((path, Some(modules.len() - 1)));
    }
    modules.extend(imported_helper_modules(
        &modules,
        &without_stream_code,
        settings,
    ));
    let project = Project::new(modules, packages, &settings.api, &settings.python_prefilter);
    // Read again; a file changed since (now unreadable, say) is reported as it is now.
    let check =
        |at: usize, lower: Box<dyn FnOnce(&Text) -> Lowered + '_>| -> Result<Checked, FileReport> {
            let (path, module) = &to_check[at];
            let t = match load(path, settings, true) {
                Loaded::Text(t) => t,
                Loaded::Done(r) => return Err(r),
                Loaded::Package(path) => return Err(report(&path, String::new(), Vec::new())),
            };
            let mut decided = guarded(settings, || {
                judge(&t.source, t.language, lower(&t), settings)
            });
            let ignored = settings.ignored_here(&t.path);
            let kept = |f: &Finding| !ignored.iter().any(|p| crate::select::matches(p, f.code));
            decided.findings.retain(kept);
            decided.proven.retain(kept);
            decided.pending.retain(|(f, _)| kept(f));
            decided.about_callers.retain(|(f, ..)| kept(f));
            // Only the text of files whose findings will be shown, or that hold blocks or
            // findings the whole run decides, is kept.
            let mut t = t;
            if decided.findings.is_empty()
                && decided.proven.is_empty()
                && decided.pending.is_empty()
                && decided.shared_regions.is_empty()
                && decided.aliased.is_empty()
                && decided.about_callers.is_empty()
            {
                t.source = String::new();
            }
            Ok((t, *module, decided))
        };
    let (python, rust): (Vec<usize>, Vec<usize>) =
        (0..to_check.len()).partition(|&at| to_check[at].1.is_some());
    // The Rust files are lowered with the crate's types while the Python files, each in its
    // place in the project, are checked: the two share the cores, and only the judging of the
    // Rust files waits for what every Rust file's functions do.
    let (mut checked, (first_lowerings, crate_summaries)) = rayon::join(
        || {
            python
                .par_iter()
                .with_max_len(1)
                .map(|&at| {
                    let module = to_check[at].1.expect("a Python file has a module");
                    let lower = |t: &Text| {
                        let deadline = Deadline::after(settings.file_time_limit);
                        lower_in_project(&project, module, &t.source, deadline)
                    };
                    (at, check(at, Box::new(lower)))
                })
                .collect::<Vec<_>>()
        },
        || lower_rust_files(&rust, &to_check, settings, &crate_structs),
    );
    // A Rust file was lowered once, and is lowered again only if it calls a function another
    // file of the crate summarizes.
    let callees = crate_summaries.callees();
    let rust_checked: Vec<(usize, Result<Checked, FileReport>)> = rust
        .into_par_iter()
        .zip(first_lowerings)
        .with_max_len(1)
        .map(|(at, first)| {
            let lower = |t: &Text| match first {
                Some(Ok(Ok(f))) if !callees.called_from(&t.source, &f.summaries) => Ok(f.bodies),
                Some(Ok(Err(parse_error))) => Err(parse_error),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                _ => streamlint_rust::lower_source_in(
                    &t.source,
                    Deadline::after(settings.file_time_limit),
                    &crate_structs,
                    &crate_summaries,
                )
                .map(|f| f.bodies)
                .map_err(|e| (e.offset, e.message)),
            };
            (at, check(at, Box::new(lower)))
        })
        .collect();
    checked.extend(rust_checked);
    checked.sort_unstable_by_key(|(at, _)| *at);
    let checked = checked.into_iter().map(|(_, c)| c);
    let (mut done, errors): (Vec<_>, Vec<_>) = checked.partition(Result::is_ok);
    reports.extend(errors.into_iter().filter_map(Result::err));
    let mut done: Vec<Checked> = done.drain(..).filter_map(Result::ok).collect();
    crate::callers::settle_run(&project, &mut done, files);
    // Streams kept in module globals: decided with the blocks of every file.
    let mut files: Vec<(&Path, &str, &mut Decided)> = done
        .iter_mut()
        .map(|(t, _, d)| (t.path.as_path(), t.source.as_str(), d))
        .collect();
    crate::disciplines::settle(&mut files);
    reports.extend(
        done.into_iter()
            .map(|(t, _, decided)| decided_report(&t.path, t.source, decided)),
    );
    reports
}

/// The files with no stream code (`importing`: each one's place among `reports`, with the names
/// it imports) that import a function of the checked `modules` with stream code by name, indexed
/// to be checked themselves.
fn callers_of_stream_helpers(
    modules: &[Arc<ModuleIndex>],
    importing: &[(usize, Vec<(String, String)>)],
    reports: &[FileReport],
    settings: &Settings,
) -> Vec<(PathBuf, Arc<ModuleIndex>)> {
    // Each helper by the last part of its module's name and its own.
    let helpers: rustc_hash::FxHashSet<(&str, &str)> = modules
        .iter()
        .flat_map(|m| {
            let last = m.name.rsplit('.').next().unwrap_or(&m.name);
            m.stream_function_names().map(move |f| (last, f))
        })
        .collect();
    if helpers.is_empty() {
        return Vec::new();
    }
    importing
        .par_iter()
        .filter(|(_, imports)| {
            imports
                .iter()
                .any(|(m, n)| helpers.contains(&(m.as_str(), n.as_str())))
        })
        .filter_map(|(at, _)| {
            let path = &reports[*at].path;
            let Loaded::Text(t) = load(path, settings, true) else {
                return None;
            };
            let index = ModuleIndex::new(
                module_name(&t.path),
                &t.source,
                &settings.api,
                &settings.python_prefilter,
            );
            Some((t.path, Arc::new(index)))
        })
        .collect()
}

/// The modules among `candidates` (files with no stream code) that the checked `modules`
/// import, indexed: a helper such a file defines (`from .ops import scale`, `scale(x)` inside a
/// side-stream block) is lowered in place at its calls as a helper of the same file would be.
/// Their own code is not checked: it has no stream code.
fn imported_helper_modules(
    modules: &[Arc<ModuleIndex>],
    candidates: &[PathBuf],
    settings: &Settings,
) -> Vec<Arc<ModuleIndex>> {
    if candidates.is_empty() || modules.is_empty() {
        return Vec::new();
    }
    let imported = ImportedModules::of(modules.iter().map(|m| m.as_ref()));
    candidates
        .par_iter()
        .with_max_len(INDEX_PIECE)
        .filter_map(|path| {
            let name = module_name(path);
            if !imported.names(&name) {
                return None;
            }
            let Loaded::Text(t) = load(path, settings, true) else {
                return None;
            };
            Some(Arc::new(helper_module(name, &t.source, settings)))
        })
        .collect()
}

/// The index of a module kept only for the helpers other modules call from it.
pub(crate) fn helper_module(name: String, source: &str, settings: &Settings) -> ModuleIndex {
    ModuleIndex::of_helpers(name, source, &settings.api, &settings.python_prefilter)
}

/// The modules that checked modules call functions of by a bare imported name.
#[derive(Default)]
pub(crate) struct ImportedModules(rustc_hash::FxHashSet<String>);

impl ImportedModules {
    pub(crate) fn of<'m>(modules: impl Iterator<Item = &'m ModuleIndex>) -> Self {
        ImportedModules(
            modules
                .flat_map(|m| m.modules_of_called_imports())
                .map(str::to_string)
                .collect(),
        )
    }

    /// Is the module of dotted name `name` one of them? A module is known by its dotted
    /// suffixes (`src.pkg.ops` as `pkg.ops`, `ops`).
    pub(crate) fn names(&self, name: &str) -> bool {
        let mut rest = name;
        loop {
            if self.0.contains(rest) {
                return true;
            }
            match rest.split_once('.') {
                Some((_, tail)) => rest = tail,
                None => return false,
            }
        }
    }
}

/// Lower the Rust files of `to_check` at the places `rust` with the crate's types, and gather
/// what their functions do: (each file's lowering, in the order of `rust`, `None` for a file no
/// longer readable; the crate's summaries).
fn lower_rust_files(
    rust: &[usize],
    to_check: &[(PathBuf, Option<usize>)],
    settings: &Settings,
    types: &CrateTypes,
) -> (Vec<Option<FirstLowering>>, CrateSummaries) {
    let first: Vec<Option<FirstLowering>> = rust
        .par_iter()
        .with_max_len(1)
        .map(|&at| {
            let Loaded::Text(t) = load(&to_check[at].0, settings, true) else {
                return None;
            };
            let deadline = Deadline::after(settings.file_time_limit);
            Some(catch_unwind(|| {
                streamlint_rust::lower_source_in(
                    &t.source,
                    deadline,
                    types,
                    &CrateSummaries::default(),
                )
                .map_err(|e| (e.offset, e.message))
            }))
        })
        .collect();
    let mut summaries = CrateSummaries::default();
    for lowered in first.iter().flatten() {
        if let Ok(Ok(f)) = lowered {
            summaries.merge(f.summaries.clone());
        }
    }
    (first, summaries)
}

/// Parse module `m` of the project from its text and lower it, calls into the other modules
/// seeing their callees; or the offset and message of the error that stopped the parse.
pub(crate) fn lower_in_project(
    project: &Project<'_>,
    m: usize,
    source: &str,
    deadline: Deadline,
) -> Result<Vec<Body>, (u32, String)> {
    project
        .parse(m, source)
        .map(|parsed| project.lower(m, source, &parsed, deadline))
        .map_err(|e| (e.offset, e.message))
}

/// Read and check one file from disk, on its own.
pub fn check_file(path: &Path, settings: &Settings) -> FileReport {
    check_run(&[path.to_path_buf()], settings)
        .pop()
        .expect("one report per file")
}
