//! Verdicts on the fork/join discipline (see `streamlint_rules`' `discipline`): an SL001
//! finding about memory of a long-lived stream that only the current stream reads is safe when
//! every block of work on that stream starts with a wait on the current stream. Such findings
//! are not reported but kept as proven, with the reason, for `--show-proven`. Where the stream
//! keeps the discipline in some blocks and not in others, the findings are reported with the
//! blocks that do not wait marked. (Those blocks are not findings of their own: a block that
//! continues work a waiting block forked, as a pipeline's later stages do, is ordered by that
//! wait, which the analysis of one function cannot see.)
//!
//! An object's stream is known by name within its module (`self.alt_stream` of a layer and the
//! `alt_stream` its model passes it): a stream handed to another module is judged there by
//! that module's blocks alone, so an editor checking one file decides as a whole run does. A
//! stream kept in a module global is one stream in every file: a whole run decides its
//! findings with the blocks of every file ([`settle`]); a file checked on its own, with its
//! own blocks.

use std::path::Path;

use streamlint_rules::{AtTheCall, Finding, Label, Region, Severity, StreamKey};

/// A file's findings once its disciplines are decided: reported, proven safe, and left for the
/// whole run to decide.
#[derive(Debug, Default)]
pub(crate) struct Decided {
    pub findings: Vec<Finding>,
    pub proven: Vec<Finding>,
    /// Findings that rest on the discipline of a stream kept in a module global, with its key.
    pub pending: Vec<(Finding, StreamKey)>,
    /// The file's blocks of work on streams kept in module globals.
    pub shared_regions: Vec<Region>,
    /// Streams kept in module globals that the file stores in objects or hands to code not
    /// followed: their blocks under the other names are not seen, so no discipline of theirs
    /// is proven.
    pub aliased: Vec<StreamKey>,
    /// Findings about the hand-off to callers of a function judged at its calls, with the
    /// function's name (see `Body::judged_at_calls`): a whole run proves them where every call
    /// of the function is lowered.
    pub about_callers: Vec<(Finding, String, AtTheCall)>,
    /// The file's calls lowered with the callee in place, with the callee's qualified name and
    /// whether the analysis follows what the call made and used to the end (see
    /// `callers::judged_calls`).
    pub inlined: Vec<(streamlint_graph::Span, String, bool)>,
}

impl Decided {
    fn sort(&mut self) {
        self.findings.sort_by_key(|f| (f.span, f.code));
        self.proven.sort_by_key(|f| (f.span, f.code));
    }
}

/// A block of work on a stream, and where it is when not in the file being decided.
struct Block<'a> {
    region: &'a Region,
    /// `path:line`, for a block in another file.
    elsewhere: Option<String>,
}

/// Decide the findings of one module: `relying` are the findings that are safe if the named
/// stream keeps the discipline, `regions` the module's blocks of work on long-lived streams.
/// Findings about streams kept in module globals are left pending, for [`settle`].
pub(crate) fn decide(
    findings: Vec<Finding>,
    relying: Vec<(Finding, StreamKey)>,
    regions: Vec<Region>,
) -> Decided {
    let (shared_regions, regions): (Vec<Region>, Vec<Region>) = regions
        .into_iter()
        .partition(|r| matches!(r.key, StreamKey::Project(_)));
    let mut decided = Decided {
        findings,
        shared_regions,
        ..Decided::default()
    };
    for (finding, key) in relying {
        if matches!(key, StreamKey::Project(_)) {
            decided.pending.push((finding, key));
            continue;
        }
        place(
            &mut decided,
            finding,
            &here(&regions, &key),
            "in this module",
        );
    }
    decided
}

/// Decide the pending findings of each file with the blocks of every file: `files` are each
/// file's path, text and decisions so far.
pub(crate) fn settle<'t>(files: &mut [(&'t Path, &'t str, &mut Decided)]) {
    let places: Vec<(&Path, &str)> = files.iter().map(|(path, text, _)| (*path, *text)).collect();
    let aliased: Vec<StreamKey> = files
        .iter()
        .flat_map(|(_, _, d)| d.aliased.iter().cloned())
        .collect();
    let all: Vec<(usize, Region)> = files
        .iter()
        .enumerate()
        .flat_map(|(i, (_, _, d))| d.shared_regions.iter().map(move |r| (i, r.clone())))
        .collect();
    for (i, (_, _, decided)) in files.iter_mut().enumerate() {
        let pending = std::mem::take(&mut decided.pending);
        for (finding, key) in pending {
            if aliased.contains(&key) {
                decided.findings.push(finding);
                continue;
            }
            let blocks: Vec<Block> = all
                .iter()
                .filter(|(_, r)| r.key == key)
                .map(|(file, region)| Block {
                    region,
                    elsewhere: (*file != i).then(|| {
                        let (path, text) = &places[*file];
                        let before = &text.as_bytes()[..region.header.start as usize];
                        let line = memchr::memchr_iter(b'\n', before).count() + 1;
                        format!("{}:{line}", path.display())
                    }),
                })
                .collect();
            place(decided, finding, &blocks, "in the checked files");
        }
        decided.sort();
    }
}

/// Decide the pending findings of a file checked on its own, with its own blocks. With its
/// `source`, the file is the whole of its run, and its own calls of its helpers decide their
/// hand-offs to callers; without (a file among others the check does not lower, as in the
/// editor), those stay reported.
pub(crate) fn settle_alone(decided: &mut Decided, source: Option<&str>) {
    match source {
        Some(source) => crate::callers::settle_file(decided, source),
        None => {
            let about_callers = std::mem::take(&mut decided.about_callers);
            decided
                .findings
                .extend(about_callers.into_iter().map(|(f, ..)| f));
        }
    }
    let regions = std::mem::take(&mut decided.shared_regions);
    for (finding, key) in std::mem::take(&mut decided.pending) {
        if decided.aliased.contains(&key) {
            decided.findings.push(finding);
            continue;
        }
        place(decided, finding, &here(&regions, &key), "in this file");
    }
    decided.sort();
}

/// The blocks of the stream `key` among `regions`, all in the file being decided.
fn here<'r>(regions: &'r [Region], key: &StreamKey) -> Vec<Block<'r>> {
    regions
        .iter()
        .filter(|r| r.key == *key)
        .map(|region| Block {
            region,
            elsewhere: None,
        })
        .collect()
}

/// Report `finding`, or keep it as proven, by the blocks of its stream.
fn place(decided: &mut Decided, mut finding: Finding, blocks: &[Block], scope: &str) {
    let broken: Vec<&Block> = blocks.iter().filter(|b| !b.region.waits_first).collect();
    if blocks.is_empty() || broken.len() == blocks.len() {
        // No block of the stream is seen, or none keeps the discipline: nothing to rely on.
        decided.findings.push(finding);
    } else if broken.is_empty() {
        finding.severity = Severity::Info;
        finding.help = Some(format!(
            "proven safe: every block of work on {} {scope} ({}) starts with a wait on the current stream, so the stream's next allocation is queued after this use",
            display(blocks),
            count(blocks.len(), "block"),
        ));
        decided.proven.push(finding);
    } else {
        let help = finding.help.take().unwrap_or_default();
        let first = broken[0].region;
        finding.help = Some(format!(
            "{help}{}the other blocks on {} start with a wait on the current stream, which would make this safe; {} not (`{}`)",
            if help.is_empty() { "" } else { "; " },
            first.display,
            which_do_not(&broken),
            first.wait,
        ));
        finding.labels.extend(
            broken
                .iter()
                .filter(|b| b.elsewhere.is_none())
                .map(|b| Label {
                    span: b.region.header,
                    message: format!(
                        "this block on {} does not start with that wait",
                        b.region.display
                    ),
                }),
        );
        decided.findings.push(finding);
    }
}

/// The blocks that break the discipline, as the help names them: "the block marked here
/// does", "the blocks marked here and the block at other.py:12 do".
fn which_do_not(broken: &[&Block]) -> String {
    let here = broken.iter().filter(|b| b.elsewhere.is_none()).count();
    let elsewhere: Vec<&str> = broken
        .iter()
        .filter_map(|b| b.elsewhere.as_deref())
        .collect();
    let blocks = |n: usize| if n == 1 { "the block" } else { "the blocks" };
    let mut parts = Vec::new();
    if here > 0 {
        parts.push(format!("{} marked here", blocks(here)));
    }
    if !elsewhere.is_empty() {
        parts.push(format!(
            "{} at {}",
            blocks(elsewhere.len()),
            elsewhere.join(", ")
        ));
    }
    let verb = if broken.len() == 1 { "does" } else { "do" };
    format!("{} {verb}", parts.join(" and "))
}

/// The stream as messages name it: the blocks' own spelling, or, where they name different
/// items of one container (`self.alt_streams[1]`, `self.alt_streams[2]`) or spell it
/// differently in different places, the first one's container or spelling.
fn display(blocks: &[Block]) -> String {
    let first = &blocks[0].region.display;
    if blocks.iter().all(|b| &b.region.display == first) {
        return first.clone();
    }
    match first.split_once('[') {
        Some((container, _)) => format!("{container}[…]`"),
        None => first.clone(),
    }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
