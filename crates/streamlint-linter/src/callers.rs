//! Verdicts on helpers judged at their calls (see `Body::judged_at_calls`): a small top-level
//! function that hands its side-stream result back to its caller unjoined is lowered in place
//! at every call the analysis lowers, and each caller is judged there with that work in its own
//! code. The helper's own findings then only say what every caller must do: they are proven
//! where the function is called and every call of it was lowered with it in place, and kept,
//! naming a call that was not, otherwise. (Findings about the caller's arguments stay at the
//! helper: what callers pass often comes from code the analysis does not follow.)

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use streamlint_graph::{Body, EscapeKind, OpKind, Span};
use streamlint_python::{call_offsets, defines_itself, Project};
use streamlint_rules::{AtTheCall, Severity};

use crate::disciplines::Decided;
use crate::run::Checked;

/// A call of a helper: how far the caller's analysis judged it, and where it is, as a message
/// names it.
struct Call {
    judged: Judged,
    place: String,
}

/// How far a call of a helper was judged.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Judged {
    /// Lowered with the helper in place and followed as far as the finding needs.
    Whole,
    /// Lowered in place, but what it made or used was handed to code the analysis does not see.
    NotFollowed,
    /// Not lowered with the helper in place.
    NotLowered,
}

/// Decide the findings about callers of every file of a run, with the calls of every file
/// (`files`: every file of the run, those with no stream code included).
pub(crate) fn settle_run(project: &Project<'_>, done: &mut [Checked], files: &[PathBuf]) {
    if done.iter().all(|(_, _, d)| d.about_callers.is_empty()) {
        return;
    }
    // Each module's file, by its place in the project.
    let checked: FxHashMap<usize, usize> = done
        .iter()
        .enumerate()
        .filter_map(|(i, (_, m, _))| Some(((*m)?, i)))
        .collect();
    // The run's files by file name, for the modules the project does not hold.
    let mut by_file_name: FxHashMap<&std::ffi::OsStr, Vec<&PathBuf>> = FxHashMap::default();
    for file in files {
        if let Some(name) = file.file_name() {
            by_file_name.entry(name).or_default().push(file);
        }
    }
    // First every verdict, from the calls each file lowered; then each file's findings move.
    let verdicts: Vec<Vec<Verdict>> = done
        .par_iter()
        .map(|(_, home, decided)| {
            decided
                .about_callers
                .iter()
                .map(|(_, function, needs)| {
                    let Some(home) = *home else {
                        return verdict(function, &[], "in the checked files", *needs);
                    };
                    let path_of = |m: usize| checked.get(&m).map(|&i| done[i].0.path.as_path());
                    let elsewhere = |caller: usize, qualified: &str| {
                        defines_elsewhere(path_of(caller), path_of(home), qualified, &by_file_name)
                    };
                    let calls: Vec<Call> = project
                        .calls_of(function, home, &elsewhere)
                        .into_iter()
                        .map(|(module, at, block)| {
                            let file = checked.get(&module).map(|&i| &done[i]);
                            let path =
                                file.map_or(String::new(), |(t, ..)| t.path.display().to_string());
                            Call {
                                judged: file.map_or(Judged::NotLowered, |(.., d)| {
                                    lowered_with(d, at, function, *needs)
                                }),
                                place: match block {
                                    Some(block) => format!("`{block}` ({path})"),
                                    None => format!("the module code of {path}"),
                                },
                            }
                        })
                        .collect();
                    verdict(function, &calls, "in the checked files", *needs)
                })
                .collect()
        })
        .collect();
    for ((_, _, decided), verdicts) in done.iter_mut().zip(verdicts) {
        apply(decided, verdicts);
    }
}

/// Does the name a caller's imports qualify as `qualified` (`pkg.mod.f`; bare `f`: the
/// caller's own module, at `caller`) denote a function of another module than `home`, one that
/// module defines itself? Asked of modules the project does not hold (no stream code): their
/// file is found among the run's files (`by_file_name`) by its dotted path and read. Unknown
/// counts as no.
fn defines_elsewhere(
    caller: Option<&Path>,
    home: Option<&Path>,
    qualified: &str,
    by_file_name: &FxHashMap<&std::ffi::OsStr, Vec<&PathBuf>>,
) -> bool {
    let (file, name) = match qualified.rsplit_once('.') {
        None => (caller.map(Path::to_path_buf), qualified),
        Some((module, name)) => {
            let stem = PathBuf::from(module.replace('.', "/"));
            let (plain, package) = (stem.with_extension("py"), stem.join("__init__.py"));
            let mut found = [&plain, &package].into_iter().flat_map(|wanted| {
                let candidates = wanted
                    .file_name()
                    .and_then(|n| by_file_name.get(n))
                    .map_or(&[][..], Vec::as_slice);
                candidates.iter().filter(move |p| p.ends_with(wanted))
            });
            match (found.next(), found.next()) {
                (Some(one), None) => (Some(one.to_path_buf()), name),
                _ => (None, name),
            }
        }
    };
    let Some(file) = file.filter(|f| Some(f.as_path()) != home) else {
        return false;
    };
    std::fs::read_to_string(&file).is_ok_and(|text| defines_itself(&text, name))
}

/// Decide the findings about callers of a file checked on its own, the whole of its run: its
/// calls are all there are.
pub(crate) fn settle_file(decided: &mut Decided, source: &str) {
    let verdicts = decided
        .about_callers
        .iter()
        .map(|(_, function, needs)| {
            let calls: Vec<Call> = call_offsets(source, function)
                .into_iter()
                .map(|at| Call {
                    judged: lowered_with(decided, at, function, *needs),
                    place: format!(
                        "line {}",
                        memchr::memchr_iter(b'\n', &source.as_bytes()[..at as usize]).count() + 1
                    ),
                })
                .collect();
            verdict(function, &calls, "in this file", *needs)
        })
        .collect();
    apply(decided, verdicts);
}

/// The calls of `body` lowered with their callee in place, each with whether the body's
/// analysis follows its values to the end: none of the tensors the call made or used is handed
/// to code it does not see (an unknown function, a container, an object, another thread),
/// where a use before the join would not be judged. Those calls judge the callee's hand-offs;
/// every call judges what its caller queued before it.
pub(crate) fn judged_calls(body: &Body) -> Vec<(Span, String, bool)> {
    if body.inlined_calls.is_empty() {
        return Vec::new();
    }
    let unseen: FxHashSet<_> = body
        .ops
        .iter()
        .filter_map(|op| match op.kind {
            OpKind::Escape { buffer, kind } if kind != EscapeKind::Caller => Some(buffer),
            _ => None,
        })
        .collect();
    // Where the body touches those tensors.
    let touched: Vec<Span> = body
        .ops
        .iter()
        .filter(|op| op.kind.buffer().is_some_and(|b| unseen.contains(&b)))
        .map(|op| op.span)
        .collect();
    body.inlined_calls
        .iter()
        .map(|(call, callee)| {
            let followed = !touched
                .iter()
                .any(|s| s.start >= call.start && s.end <= call.end);
            (*call, callee.clone(), followed)
        })
        .collect()
}

/// Was the call whose `(` is at `at` lowered with `function` in place, and followed as far as
/// `needs` asks?
fn lowered_with(decided: &Decided, at: u32, function: &str, needs: AtTheCall) -> Judged {
    let call = decided.inlined.iter().find(|(span, callee, _)| {
        (span.start..span.end).contains(&at)
            && callee
                .strip_suffix(function)
                .is_some_and(|module| module.ends_with('.'))
    });
    match call {
        None => Judged::NotLowered,
        Some((.., followed)) if *followed || needs == AtTheCall::Before => Judged::Whole,
        Some(_) => Judged::NotFollowed,
    }
}

/// The proof, or what keeps the findings: no call at all, or the calls not judged (named).
type Verdict = Result<String, Option<String>>;

fn verdict(function: &str, calls: &[Call], scope: &str, needs: AtTheCall) -> Verdict {
    if calls.is_empty() {
        return Err(None);
    }
    let what = match needs {
        AtTheCall::Before => "what the caller queued on the stream before the call",
        AtTheCall::After => "what the caller does with the result",
    };
    let unjudged: Vec<&Call> = calls.iter().filter(|c| c.judged != Judged::Whole).collect();
    match unjudged.as_slice() {
        [] => Ok(format!(
            "proven safe here: `{function}` is lowered in place at each of its calls {scope} ({}), where {what} is judged",
            calls.len()
        )),
        [first, rest @ ..] => {
            let why = match first.judged {
                Judged::NotFollowed => "is lowered with it in place, but the result is handed to code the analysis does not see",
                _ => "is in code the analysis does not lower with it in place (code that names no stream, or a call it does not resolve)",
            };
            Err(Some(format!(
                "the call in {}{} {why}, where {what} is not judged",
                first.place,
                if rest.is_empty() {
                    String::new()
                } else {
                    format!(" (and {} more)", rest.len())
                },
            )))
        }
    }
}

/// Move each finding about callers to the proven ones or the reported ones, by its verdict.
fn apply(decided: &mut Decided, verdicts: Vec<Verdict>) {
    let findings = std::mem::take(&mut decided.about_callers);
    for ((mut finding, ..), verdict) in findings.into_iter().zip(verdicts) {
        match verdict {
            Ok(proof) => {
                finding.severity = Severity::Info;
                finding.help = Some(proof);
                decided.proven.push(finding);
            }
            Err(unjudged) => {
                if let Some(unjudged) = unjudged {
                    let help = finding.help.take().unwrap_or_default();
                    finding.help = Some(format!(
                        "{help}{}every caller must; {unjudged}",
                        if help.is_empty() { "" } else { "; " },
                    ));
                }
                decided.findings.push(finding);
            }
        }
    }
    decided.findings.sort_by_key(|f| (f.span, f.code));
    decided.proven.sort_by_key(|f| (f.span, f.code));
}
