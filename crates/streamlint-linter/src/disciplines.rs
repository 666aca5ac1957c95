//! Verdicts on the fork/join discipline (see `streamlint_rules`' `discipline`): an SL001
//! finding about memory of a long-lived stream that only the current stream reads is safe when
//! every block of work on that stream in the module starts with a wait on the current stream.
//! Such findings are not reported but kept as proven, with the reason, for `--show-proven`.
//! Where the module keeps the discipline in some blocks and not in others, the findings are
//! reported with the blocks that do not wait marked. (Those blocks are not findings of their
//! own: a block that continues work a waiting block forked, as a pipeline's later stages do, is
//! ordered by that wait, which the analysis of one function cannot see.)
//!
//! A stream is known by name within its module (`self.alt_stream` of a layer and the
//! `alt_stream` its model passes it): a stream handed to another module is judged there by
//! that module's blocks alone, so an editor checking one file decides as a whole run does.

use streamlint_rules::{Finding, Label, Region, Severity};

/// A file's findings once its disciplines are decided: reported, and proven safe.
#[derive(Debug, Default)]
pub(crate) struct Decided {
    pub findings: Vec<Finding>,
    pub proven: Vec<Finding>,
}

/// Decide the findings of one module: `relying` are the findings that are safe if the named
/// stream keeps the discipline, `regions` the module's blocks of work on long-lived streams.
pub(crate) fn decide(
    mut findings: Vec<Finding>,
    relying: Vec<(Finding, String)>,
    regions: &[Region],
) -> Decided {
    let mut proven = Vec::new();
    for (mut finding, key) in relying {
        let of_stream: Vec<&Region> = regions.iter().filter(|r| r.key == key).collect();
        let broken: Vec<&Region> = of_stream
            .iter()
            .copied()
            .filter(|r| !r.waits_first)
            .collect();
        if of_stream.is_empty() || broken.len() == of_stream.len() {
            // No block of the stream is seen, or none keeps the discipline: nothing to rely on.
            findings.push(finding);
        } else if broken.is_empty() {
            finding.severity = Severity::Info;
            finding.help = Some(format!(
                "proven safe: every block of work on {} in this module ({}) starts with a wait on the current stream, so the stream's next allocation is queued after this use",
                display(&of_stream),
                count(of_stream.len(), "block"),
            ));
            proven.push(finding);
        } else {
            let help = finding.help.take().unwrap_or_default();
            finding.help = Some(format!(
                "{help}{}the other blocks on {} start with a wait on the current stream, which would make this safe; {} marked here {} not (`{}`)",
                if help.is_empty() { "" } else { "; " },
                broken[0].display,
                if broken.len() == 1 { "the block" } else { "the blocks" },
                if broken.len() == 1 { "does" } else { "do" },
                broken[0].wait,
            ));
            finding.labels.extend(broken.iter().map(|r| Label {
                span: r.header,
                message: format!("this block on {} does not start with that wait", r.display),
            }));
            findings.push(finding);
        }
    }
    Decided { findings, proven }
}

/// The stream as messages name it: the blocks' own spelling, or, where they name different
/// items of one container (`self.alt_streams[1]`, `self.alt_streams[2]`), the container's.
fn display(regions: &[&Region]) -> String {
    let first = &regions[0].display;
    if regions.iter().all(|r| &r.display == first) {
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
