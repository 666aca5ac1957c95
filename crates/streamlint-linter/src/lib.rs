//! The linter engine: finds the files to check, skips those that cannot contain stream code
//! without parsing them, runs the frontend and the rules on the rest in parallel, and turns
//! unreadable or unparsable files into findings of their own.

mod callers;
mod config;
mod disciplines;
mod discover;
mod fix;
mod run;
mod rust_crate;
mod select;
mod suppress;
mod workspace;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rayon::prelude::*;
use streamlint_graph::{Body, Deadline, Span};
use streamlint_python::{ApiModel, Prefilter};
use streamlint_rules::{Finding, Judgement, Severity, StreamKey, PARSE_ERROR, UNUSED_SUPPRESSION};

use disciplines::Decided;

pub use config::{Config, ConfigError, Options};
pub use discover::{discover, Discovery};
pub use fix::{applicable, fix_source, Fixed};
pub use run::check_file;
pub use select::{parse_severity, Selection};
pub use workspace::Workspace;

use globset::GlobSet;

/// Everything a run is configured with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub selection: Selection,
    pub api: ApiModel,
    pub respect_gitignore: bool,
    /// The folder relative patterns are matched against.
    pub root: PathBuf,
    /// Paths not checked when found under a directory (files named explicitly are checked).
    pub exclude: GlobSet,
    /// Apply `exclude` to files named explicitly too (for hooks and editors that pass files).
    pub force_exclude: bool,
    /// Codes not reported in files matching a pattern.
    pub per_file_ignores: Vec<(GlobSet, Vec<String>)>,
    /// Tells the Python files worth parsing (it knows the project's own API names too).
    pub python_prefilter: Prefilter,
    /// How long one file's analysis may take before it stops with a finding.
    pub file_time_limit: Duration,
    /// Files named on the command line: one that cannot hold stream code is still parsed, so
    /// that a syntax error in a file the user asked about is reported, not passed over.
    pub named_files: Vec<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_config(None).expect("the defaults are valid")
    }
}

impl Settings {
    /// The settings a configuration file (or none) asks for.
    pub fn from_config(config: Option<&Config>) -> Result<Settings, ConfigError> {
        let mut api = ApiModel::default();
        let defaults = || {
            config::DEFAULT_EXCLUDE
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        };
        let Some(config) = config else {
            let exclude = config::glob_set(&defaults()).map_err(ConfigError)?;
            let root = std::env::current_dir().unwrap_or_default();
            return Ok(Settings {
                selection: Selection::default(),
                respect_gitignore: true,
                force_exclude: false,
                root,
                exclude,
                per_file_ignores: Vec::new(),
                python_prefilter: Prefilter::new(&api),
                file_time_limit: DEFAULT_FILE_TIME_LIMIT,
                named_files: Vec::new(),
                api,
            });
        };
        config.extend_api(&mut api);
        let exclude = config::glob_set(&config.exclude_patterns())
            .map_err(|e| config.invalid("exclude", &e))?;
        let mut selection = config.selection();
        if let Some(text) = &config.options.severity {
            selection.min_severity = parse_severity(text).ok_or_else(|| {
                config.invalid(
                    "severity",
                    &format!("`{text}` is not a severity: use error, warning or info"),
                )
            })?;
        }
        let unknown = selection.unknown_patterns();
        if !unknown.is_empty() {
            return Err(config.invalid(
                "select/ignore",
                &format!("unknown rule selector(s) {}", unknown.join(", ")),
            ));
        }
        Ok(Settings {
            selection,
            respect_gitignore: config.options.respect_gitignore.unwrap_or(true),
            force_exclude: false,
            root: std::path::absolute(config.root())
                .unwrap_or_else(|_| config.root().to_path_buf()),
            exclude,
            per_file_ignores: config.per_file_ignores()?,
            python_prefilter: Prefilter::new(&api),
            file_time_limit: config.file_time_limit()?,
            named_files: Vec::new(),
            api,
        })
    }

    /// `path` relative to the settings' root, for matching patterns.
    fn relative<'p>(&self, path: &'p Path) -> std::borrow::Cow<'p, Path> {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        match absolute.strip_prefix(&self.root) {
            Ok(rel) => std::borrow::Cow::Owned(rel.to_path_buf()),
            Err(_) => std::borrow::Cow::Borrowed(path),
        }
    }

    /// Is a path found under a checked directory excluded?
    pub fn is_excluded(&self, path: &Path) -> bool {
        self.exclude.is_match(self.relative(path).as_ref())
    }

    /// Is a file named explicitly excluded, by a pattern for it or for a folder it is in?
    pub fn excludes_file(&self, path: &Path) -> bool {
        self.relative(path)
            .ancestors()
            .filter(|p| !p.as_os_str().is_empty())
            .any(|p| self.exclude.is_match(p))
    }

    /// Does a per-file ignore turn `code` off in `path`? (For callers of `check_source`, which
    /// checks text without knowing where it is going to be saved.)
    pub fn ignores(&self, path: &Path, code: &str) -> bool {
        self.ignored_here(path)
            .iter()
            .any(|p| select::matches(p, code))
    }

    fn ignored_here(&self, path: &Path) -> Vec<&str> {
        let rel = self.relative(path);
        self.per_file_ignores
            .iter()
            .filter(|(set, _)| set.is_match(rel.as_ref()))
            .flat_map(|(_, codes)| codes.iter().map(String::as_str))
            .collect()
    }
}

/// Drops the fixes that do not fit `source` or that leave it unparsable (an insertion before a
/// line that continues a statement). Fixes are tried together, one parse for all of them in the
/// usual case; a group that fails is split in halves, so a large file with many findings costs
/// a few parses, not one per fix.
fn keep_fixes_that_parse(findings: &mut [Finding], source: &str, language: Language) {
    let mut candidates = Vec::new();
    for (i, f) in findings.iter_mut().enumerate() {
        match f.fix.as_ref().map(|fix| fix.try_text_edits(source)) {
            Some(Some(edits)) => candidates.push((i, edits)),
            Some(None) => f.fix = None,
            None => {}
        }
    }
    let mut broken = Vec::new();
    find_broken_fixes(&candidates, source, language, &mut broken);
    for i in broken {
        findings[i].fix = None;
    }
}

/// Collects into `broken` the fixes of `group` that break the syntax on their own.
fn find_broken_fixes(
    group: &[(usize, Vec<streamlint_rules::TextEdit>)],
    source: &str,
    language: Language,
    broken: &mut Vec<usize>,
) {
    if group.is_empty() {
        return;
    }
    let mut edits: Vec<streamlint_rules::TextEdit> =
        group.iter().flat_map(|(_, e)| e.iter().cloned()).collect();
    edits.sort_by_key(|e| (e.start, e.end));
    edits.dedup();
    let overlapping = edits.windows(2).any(|w| w[1].start < w[0].end);
    if !overlapping
        && language
            .syntax_error(&streamlint_rules::apply_edits(source, &edits))
            .is_none()
    {
        return;
    }
    if let [(i, _)] = group {
        // Alone, its edits are exactly the ones that just failed.
        broken.push(*i);
        return;
    }
    let (left, right) = group.split_at(group.len() / 2);
    find_broken_fixes(left, source, language, broken);
    find_broken_fixes(right, source, language, broken);
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileReport {
    pub path: PathBuf,
    /// The text the findings' spans point into (empty when there are none: a whole-project run
    /// keeps only the text it will show).
    pub source: String,
    pub findings: Vec<Finding>,
    /// Findings the run proved safe under a stream discipline, each saying why (shown on
    /// request, as information).
    pub proven: Vec<Finding>,
}

/// How long one file's analysis may take by default: real files take milliseconds; a generated
/// giant may take seconds, and nothing should take longer.
pub const DEFAULT_FILE_TIME_LIMIT: Duration = Duration::from_secs(10);

/// Files larger than this are not analysed (hand-written stream code is never this large).
const MAX_FILE_BYTES: u64 = 20_000_000;

/// Stack for the worker threads: deeply nested code makes the parser and the lowering recurse.
const WORKER_STACK: usize = 256 << 20;

/// The languages streamlint reads, by file extension.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Language {
    Python,
    Rust,
}

impl Language {
    pub fn of(path: &Path) -> Option<Language> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("py" | "pyi") => Some(Language::Python),
            Some("rs") => Some(Language::Rust),
            _ => None,
        }
    }

    /// What starts a line comment.
    fn comment(self) -> &'static str {
        match self {
            Language::Python => "#",
            Language::Rust => "//",
        }
    }

    /// Where and why `source` does not parse, if it does not.
    pub(crate) fn syntax_error(self, source: &str) -> Option<(u32, String)> {
        match self {
            Language::Python => {
                streamlint_python::syntax_error(source).map(|e| (e.offset, e.message))
            }
            Language::Rust => streamlint_rust::syntax_error(source).map(|e| (e.offset, e.message)),
        }
    }
}

/// Could the file hold code any rule looks at? Files that cannot are never parsed.
fn worth_parsing(language: Language, source: &[u8], settings: &Settings) -> bool {
    match language {
        Language::Python => settings.python_prefilter.admits(source),
        Language::Rust => streamlint_rust::may_contain_gpu_code(source),
    }
}

/// Check one file's text on its own: calls into other files keep the model of unknown code.
pub fn check_source(path: &Path, source: &str, settings: &Settings) -> Vec<Finding> {
    check_text(path, source, settings).0
}

/// [`check_source`], with the findings proven safe by a stream discipline too: (findings,
/// proven). The file is the whole run: its own calls judge its helpers.
pub fn check_text(path: &Path, source: &str, settings: &Settings) -> (Vec<Finding>, Vec<Finding>) {
    let language = Language::of(path).unwrap_or(Language::Python);
    if !worth_parsing(language, source.as_bytes(), settings) {
        return (Vec::new(), Vec::new());
    }
    let deadline = Deadline::after(settings.file_time_limit);
    let lowered = match language {
        Language::Python => streamlint_python::lower_source(source, &settings.api, deadline)
            .map_err(|e| (e.offset, e.message)),
        Language::Rust => {
            streamlint_rust::lower_source(source, deadline).map_err(|e| (e.offset, e.message))
        }
    };
    let mut decided = judge(source, language, lowered, settings);
    disciplines::settle_alone(&mut decided, Some(source));
    (decided.findings, decided.proven)
}

/// The findings of one file from its lowered bodies (or the error that stopped its parse), with
/// those proven safe by a stream discipline apart and those that rest on other files left for
/// the run (see `disciplines`).
fn judge(
    source: &str,
    language: Language,
    lowered: Result<Vec<Body>, (u32, String)>,
    settings: &Settings,
) -> Decided {
    let bodies = match lowered {
        Ok(bodies) => bodies,
        Err((offset, message)) => {
            let findings = settings
                .selection
                .enabled(PARSE_ERROR.code)
                .then(|| {
                    parse_error(
                        Span::new(offset, offset),
                        format!("could not parse the file: {message}"),
                    )
                })
                .into_iter()
                .collect();
            return Decided {
                findings,
                ..Decided::default()
            };
        }
    };
    let enabled = |code: &str| settings.selection.enabled(code);
    // A body cut short at the deadline holds only part of its function: the wait or
    // `record_stream` a finding would miss may be in the part not lowered, so it is not judged.
    // Complete bodies are, whenever their lowering ended: judging costs less than lowering.
    let (cut_short, complete): (Vec<&Body>, Vec<&Body>) = bodies.iter().partition(|b| b.cut_short);
    let judge = |b: &&Body| streamlint_rules::check_body(b, &enabled);
    // Bodies are judged independently: in parallel within the caller's thread pool.
    let judgements: Vec<Judgement> = if rayon::current_thread_index().is_some() {
        complete.par_iter().map(judge).collect()
    } else {
        complete.iter().map(judge).collect()
    };
    let mut findings = Vec::new();
    let mut relies_on = Vec::new();
    let mut regions = Vec::new();
    let mut aliased = Vec::new();
    let mut about_callers = Vec::new();
    for j in judgements {
        findings.extend(j.findings);
        relies_on.extend(j.relies_on);
        regions.extend(j.regions);
        aliased.extend(j.aliased);
        about_callers.extend(j.about_callers);
    }
    keep_fixes_that_parse(&mut findings, source, language);
    if !cut_short.is_empty() && enabled(PARSE_ERROR.code) {
        findings.push(out_of_time(&cut_short, settings.file_time_limit));
    }
    findings.sort_by_key(|f| (f.span, f.code));
    findings.dedup_by(|a, b| a.span == b.span && a.code == b.code);
    // Findings that rest on a stream discipline, with the stream, apart from the others.
    let mut relying = Vec::new();
    let findings: Vec<Finding> = findings
        .into_iter()
        .filter_map(|f| {
            let key = relies_on
                .iter()
                .find(|(span, code, _)| f.code == *code && *span == f.span);
            match key {
                Some((_, _, key)) => {
                    relying.push((f, key.clone()));
                    None
                }
                None => Some(f),
            }
        })
        .collect();
    let mut decided = disciplines::decide(findings, relying, regions);
    decided.aliased = aliased;
    // The calls lowered with their callee in place and judged whole, for a whole run to tell
    // whether every call of a function judged at its calls was.
    decided.inlined = complete
        .iter()
        .flat_map(|b| callers::judged_calls(b))
        .collect();
    // Suppression comments apply to every finding, those proven safe or left to the run to
    // decide included (their comment is then in use).
    let proven: Vec<(Span, &str)> = decided.proven.iter().map(|f| (f.span, f.code)).collect();
    let pending: Vec<(Span, &str, StreamKey)> = decided
        .pending
        .iter()
        .map(|(f, key)| (f.span, f.code, key.clone()))
        .collect();
    let mut all = std::mem::take(&mut decided.findings);
    all.append(&mut decided.proven);
    all.extend(decided.pending.drain(..).map(|(f, _)| f));
    for f in suppress::apply(
        source,
        language.comment(),
        all,
        enabled(UNUSED_SUPPRESSION.code),
    ) {
        if let Some((_, _, key)) = pending
            .iter()
            .find(|(span, code, _)| *span == f.span && *code == f.code)
        {
            decided.pending.push((f, key.clone()));
        } else if f.severity == Severity::Info && proven.contains(&(f.span, f.code)) {
            decided.proven.push(f);
        } else if let Some((_, _, function, needs)) = about_callers
            .iter()
            .find(|(span, code, ..)| *span == f.span && *code == f.code)
        {
            decided.about_callers.push((f, function.clone(), *needs));
        } else {
            decided.findings.push(f);
        }
    }
    decided.findings.sort_by_key(|f| (f.span, f.code));
    // Findings below the severity asked for are left out wherever the run may report them.
    let shows = |f: &Finding| settings.selection.shows(f.severity);
    decided.findings.retain(shows);
    decided.pending.retain(|(f, _)| shows(f));
    decided.about_callers.retain(|(f, ..)| shows(f));
    decided
}

/// The finding for a file whose analysis ran out of time, at the first function not finished.
fn out_of_time(unfinished: &[&Body], limit: Duration) -> Finding {
    let name = |b: &Body| match b.name.as_str() {
        "<module>" => "the module's top level".to_string(),
        name => format!("`{name}`"),
    };
    let (what, them) = match unfinished {
        [one] => (format!("{} was", name(one)), "it"),
        [first, rest @ ..] => (
            format!("{} and {} more were", name(first), rest.len()),
            "them",
        ),
        [] => ("nothing was".to_string(), "it"),
    };
    let span = unfinished.first().map(|b| b.span).unwrap_or_default();
    parse_error(
        Span::new(span.start, span.start),
        format!(
            "analysis stopped at the time limit for one file ({} s): {what} not checked; \
             raise `file-time-limit` in the configuration to check {them}",
            limit.as_secs_f64()
        ),
    )
}

fn parse_error(span: Span, message: String) -> Finding {
    Finding {
        code: PARSE_ERROR.code,
        severity: Severity::Error,
        message,
        span,
        labels: Vec::new(),
        help: None,
        fix: None,
    }
}

fn error_finding(settings: &Settings, message: String) -> Vec<Finding> {
    if settings.selection.enabled(PARSE_ERROR.code) {
        vec![parse_error(Span::default(), message)]
    } else {
        Vec::new()
    }
}

/// Check every file in parallel, the Python files as one project (calls from one file into
/// another see the callee); a report for each file, in the order of `files` (discovery's is
/// sorted by path).
pub fn check_files(files: &[PathBuf], settings: &Settings) -> Vec<FileReport> {
    let pool = rayon::ThreadPoolBuilder::new()
        .stack_size(WORKER_STACK)
        .build();
    match pool {
        Ok(pool) => pool.install(|| run::check_run(files, settings)),
        Err(_) => run::check_run(files, settings),
    }
}
