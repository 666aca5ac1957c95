//! A whole run: every file is read and prefiltered, the Python files worth parsing are parsed,
//! indexed together as one project (so a call in one file sees its callee in another), and then
//! each file is lowered and judged. Every step runs on all cores; a file that cannot be read,
//! decoded or parsed gets a finding of its own and the others go on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use streamlint_graph::{Body, Deadline};
use streamlint_python::{module_name, Parsed, Project};
use streamlint_rules::Finding;

use crate::{error_finding, judge, worth_parsing, FileReport, Language, Settings, MAX_FILE_BYTES};

/// A file after reading.
enum Loaded {
    /// Its text, to check.
    Text(Text),
    /// Its report already (skipped, unreadable, not UTF-8, no stream code).
    Done(FileReport),
    /// A package's `__init__.py` with no stream code: nothing to judge, but the names it
    /// re-exports (`from .streams import side_stream`) may be what another file calls.
    Package(PathBuf),
}

struct Text {
    path: PathBuf,
    source: String,
    language: Language,
}

/// The message of the finding for a file whose analysis panicked.
const INTERNAL_ERROR: &str =
    "internal error while analysing this file; please report it with the file";

fn report(path: &Path, source: String, findings: Vec<Finding>) -> FileReport {
    FileReport {
        path: path.to_path_buf(),
        // Only the text of files with findings is kept: it is what will be shown.
        source: if findings.is_empty() {
            String::new()
        } else {
            source
        },
        findings,
    }
}

fn load(path: &Path, settings: &Settings) -> Loaded {
    let done = |findings| Loaded::Done(report(path, String::new(), findings));
    // Generated or vendored giants (a minified bundle, a dumped table) would cost more than the
    // whole rest of a run; they are skipped with a finding that says so.
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.len() > MAX_FILE_BYTES {
            let mb = |bytes: u64| bytes as f64 / 1e6;
            let message = format!(
                "skipped: the file is {:.1} MB, over the {:.0} MB limit for one file",
                mb(meta.len()),
                mb(MAX_FILE_BYTES)
            );
            return done(error_finding(settings, message));
        }
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            return done(error_finding(
                settings,
                format!("could not read the file: {e}"),
            ))
        }
    };
    let language = Language::of(path).unwrap_or(Language::Python);
    if !worth_parsing(language, &bytes, settings) {
        if language == Language::Python && path.file_name().is_some_and(|n| n == "__init__.py") {
            return Loaded::Package(path.to_path_buf());
        }
        return done(Vec::new());
    }
    match String::from_utf8(bytes) {
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

/// Run `f`, turning a panic (always a bug) into the internal-error finding.
fn guarded(settings: &Settings, f: impl FnOnce() -> Vec<Finding>) -> Vec<Finding> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| error_finding(settings, INTERNAL_ERROR.into()))
}

/// A Python file's parse: the module, the parser's error, or `None` where the parser panicked.
type Parse = Option<Result<Parsed, (u32, String)>>;

/// Check `files` as one run (see the module's documentation).
pub fn check_run(files: &[PathBuf], settings: &Settings) -> Vec<FileReport> {
    let mut reports = Vec::new();
    let mut texts = Vec::new();
    let mut packages = Vec::new();
    for loaded in files
        .par_iter()
        .map(|p| load(p, settings))
        .collect::<Vec<_>>()
    {
        match loaded {
            Loaded::Text(t) => texts.push(t),
            Loaded::Done(r) => reports.push(r),
            Loaded::Package(path) => {
                packages.push((module_name(&path), path.clone()));
                reports.push(report(&path, String::new(), Vec::new()));
            }
        }
    }
    // Parsing a Python file depends on nothing else.
    let parses: Vec<Parse> = texts
        .par_iter()
        .map(|t| {
            (t.language == Language::Python).then(|| {
                catch_unwind(AssertUnwindSafe(|| {
                    streamlint_python::parse(&t.source).map_err(|e| (e.offset, e.message))
                }))
                .ok()
            })?
        })
        .collect();
    // The project: every Python file that parsed, by the module name its path gives.
    let mut module_of = Vec::with_capacity(texts.len());
    let mut modules = Vec::new();
    for (t, parse) in texts.iter().zip(&parses) {
        module_of.push(match parse {
            Some(Ok(parsed)) => {
                modules.push((module_name(&t.path), t.source.as_str(), parsed));
                Some(modules.len() - 1)
            }
            _ => None,
        });
    }
    let project = Project::new(modules, packages, &settings.api);
    // The bodies of one file, or its parse error; `None` where the parser panicked.
    let lower = |t: &Text, parse: &Parse, module: Option<usize>| {
        let deadline = Deadline::after(settings.file_time_limit);
        let lowered: Result<Vec<Body>, (u32, String)> = match (t.language, module, parse) {
            (Language::Rust, ..) => streamlint_rust::lower_source(&t.source, deadline)
                .map_err(|e| (e.offset, e.message)),
            (_, Some(m), _) => Ok(project.lower(m, deadline)),
            (_, None, Some(Err(e))) => Err(e.clone()),
            (_, None, _) => return None,
        };
        Some(lowered)
    };
    reports.par_extend(
        texts
            .par_iter()
            .zip(parses.par_iter())
            .zip(module_of.par_iter())
            .map(|((t, parse), module)| {
                let mut findings = guarded(settings, || match lower(t, parse, *module) {
                    Some(lowered) => judge(&t.source, t.language, lowered, settings),
                    None => error_finding(settings, INTERNAL_ERROR.into()),
                });
                let ignored = settings.ignored_here(&t.path);
                findings.retain(|f| !ignored.iter().any(|p| crate::select::matches(p, f.code)));
                report(&t.path, t.source.clone(), findings)
            }),
    );
    reports
}

/// Read and check one file from disk, on its own.
pub fn check_file(path: &Path, settings: &Settings) -> FileReport {
    check_run(&[path.to_path_buf()], settings)
        .pop()
        .expect("one report per file")
}
