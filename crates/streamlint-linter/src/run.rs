//! A whole run: every file is read and prefiltered, the Python files worth parsing are parsed,
//! indexed together as one project (so a call in one file sees its callee in another), and then
//! each file is lowered and judged. Every step runs on all cores; a file that cannot be read,
//! decoded or parsed gets a finding of its own and the others go on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use streamlint_graph::Deadline;
use streamlint_python::{module_name, Parsed, Project};
use streamlint_rules::Finding;

use crate::{error_finding, judge, worth_parsing, FileReport, Language, Settings, MAX_FILE_BYTES};

/// A file after reading: its text to check, or its report already (skipped, unreadable).
enum Loaded {
    Text {
        path: PathBuf,
        source: String,
        language: Language,
    },
    Done(FileReport),
    /// A package's `__init__.py` with no stream code: nothing to judge, but the names it
    /// re-exports (`from .streams import side_stream`) may be what another file calls.
    Package(PathBuf),
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
        Err(e) => return done(error_finding(settings, format!("could not read the file: {e}"))),
    };
    let language = Language::of(path).unwrap_or(Language::Python);
    if !worth_parsing(language, &bytes, settings) {
        if language == Language::Python && path.file_name().is_some_and(|n| n == "__init__.py") {
            return Loaded::Package(path.to_path_buf());
        }
        return done(Vec::new());
    }
    match String::from_utf8(bytes) {
        Ok(source) => Loaded::Text {
            path: path.to_path_buf(),
            source,
            language,
        },
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

/// Check `files` as one run (see the module's documentation).
pub fn check_run(files: &[PathBuf], settings: &Settings) -> Vec<FileReport> {
    let loaded: Vec<Loaded> = files.par_iter().map(|p| load(p, settings)).collect();
    // Parsing a Python file depends on nothing else; a parser panic is kept apart as `None`.
    let parsed: Vec<Option<Result<Parsed, (u32, String)>>> = loaded
        .par_iter()
        .map(|l| match l {
            Loaded::Text {
                source,
                language: Language::Python,
                ..
            } => catch_unwind(AssertUnwindSafe(|| {
                streamlint_python::parse(source).map_err(|e| (e.offset, e.message))
            }))
            .ok(),
            _ => None,
        })
        .collect();
    // The project: every Python file that parsed, by the module name its path gives.
    let mut module_of = vec![None; loaded.len()];
    let mut modules = Vec::new();
    for (i, (l, p)) in loaded.iter().zip(&parsed).enumerate() {
        if let (Loaded::Text { path, source, .. }, Some(Ok(parsed))) = (l, p) {
            module_of[i] = Some(modules.len());
            modules.push((module_name(path), source.as_str(), parsed));
        }
    }
    let packages = loaded
        .iter()
        .filter_map(|l| match l {
            Loaded::Package(path) => Some((module_name(path), path.clone())),
            _ => None,
        })
        .collect();
    let project = Project::new(modules, packages, &settings.api);
    loaded
        .par_iter()
        .zip(parsed.par_iter())
        .zip(module_of.par_iter())
        .map(|((l, p), module)| match l {
            Loaded::Package(path) => report(path, String::new(), Vec::new()),
            Loaded::Done(r) => FileReport {
                path: r.path.clone(),
                source: r.source.clone(),
                findings: r.findings.clone(),
            },
            Loaded::Text {
                path,
                source,
                language,
            } => {
                let findings = guarded(settings, || {
                    let lowered = match (language, p, module) {
                        (Language::Rust, ..) => {
                            let deadline = Deadline::after(settings.file_time_limit);
                            streamlint_rust::lower_source(source, deadline)
                                .map_err(|e| (e.offset, e.message))
                        }
                        (_, _, Some(m)) => {
                            let deadline = Deadline::after(settings.file_time_limit);
                            Ok(project.lower(*m, deadline))
                        }
                        (_, Some(Err(e)), _) => Err(e.clone()),
                        // The parser panicked.
                        _ => return error_finding(settings, INTERNAL_ERROR.into()),
                    };
                    judge(source, *language, lowered, settings)
                });
                let ignored = settings.ignored_here(path);
                let findings: Vec<Finding> = findings
                    .into_iter()
                    .filter(|f| !ignored.iter().any(|p| crate::select::matches(p, f.code)))
                    .collect();
                report(path, source.clone(), findings)
            }
        })
        .collect()
}

/// Read and check one file from disk, on its own.
pub fn check_file(path: &Path, settings: &Settings) -> FileReport {
    check_run(&[path.to_path_buf()], settings)
        .pop()
        .expect("one report per file")
}
