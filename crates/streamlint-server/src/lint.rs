//! Linting one open document: the editor's text checked in its project (the other files'
//! kept summaries, see `Workspace`) or on its own, plus what the command line adds for files on
//! disk: the configuration's exclusions and per-file ignores, and a panic in the analysis
//! turned into a finding instead of the end of the run (here: of the server). The document
//! keeps its findings until its text, its settings or a callee's summary change.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::rc::Rc;
use std::sync::OnceLock;

use streamlint_linter::{Settings, Workspace};
use streamlint_rules::{Finding, PARSE_ERROR};

use crate::documents::Document;

/// The analysis of one text, in its project where it has one; [`analyse`] but for tests,
/// which need one that fails.
pub type LintFn = fn(&Path, &str, &Settings, Option<&Workspace>) -> Vec<Finding>;

/// Check a text in its project, or on its own.
pub fn analyse(
    path: &Path,
    text: &str,
    settings: &Settings,
    project: Option<&Workspace>,
) -> Vec<Finding> {
    match project {
        Some(project) => project.check(path, text, settings),
        None => streamlint_linter::check_source(path, text, settings),
    }
}

/// The findings of the document's current text, linted only if it changed since last time.
pub fn findings(doc: &mut Document, lint: LintFn, project: Option<&Workspace>) -> Rc<[Finding]> {
    if let Some(findings) = &doc.findings {
        return findings.clone();
    }
    let findings: Rc<[Finding]> = run(doc, lint, project).into();
    doc.findings = Some(findings.clone());
    findings
}

/// Stack of the lint's threads: deeply nested code makes the parser and the lowering recurse (the
/// command line gives its workers as much), and an overflow would abort the server.
const STACK: usize = 256 << 20;

/// The threads lints run on, made on first use; the analysis spreads a large file's functions
/// over them.
fn workers() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("streamlint-lint-{i}"))
            .stack_size(STACK)
            .build()
            .ok()
    })
    .as_ref()
}

/// Run `f` on the lint threads (see [`workers`]), or here where there are none.
pub fn on_workers<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match workers() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

fn run(doc: &Document, lint: LintFn, project: Option<&Workspace>) -> Vec<Finding> {
    let settings: &Settings = &doc.settings;
    // Exclusions are the project's: without a configuration file, the default patterns
    // (`build`, `dist`, ...) would silence files for a mere folder name on their path.
    if doc.configured && doc.path.as_deref().is_some_and(|p| settings.is_excluded(p)) {
        return Vec::new();
    }
    let (path, text) = (doc.lint_path(), doc.text.as_str());
    // A panic ends the lint, not the server; where no threads can be had, the lint runs here,
    // still with panics caught.
    let outcome =
        on_workers(|| catch_unwind(AssertUnwindSafe(|| lint(&path, text, settings, project))));
    let mut findings = outcome.unwrap_or_else(|_| {
        eprintln!(
            "streamlint: internal error while analysing {} (the panic is above); please report it with the file",
            doc.uri.as_str()
        );
        internal_error(settings)
    });
    if let Some(path) = &doc.path {
        findings.retain(|f| !settings.ignores(path, f.code));
    }
    findings
}

/// What the user sees of a panic: the file is not analysed, as with one that does not parse.
fn internal_error(settings: &Settings) -> Vec<Finding> {
    if !settings.selection.enabled(PARSE_ERROR.code) {
        return Vec::new();
    }
    vec![Finding {
        code: PARSE_ERROR.code,
        severity: PARSE_ERROR.severity,
        message: "internal error while analysing this file; please report it with the file".into(),
        span: Default::default(),
        labels: Vec::new(),
        help: None,
        fix: None,
    }]
}
