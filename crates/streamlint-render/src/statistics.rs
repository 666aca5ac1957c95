//! Counts of findings per rule, for adopting the linter on an existing codebase: which rules
//! fire most (to fix or configure first) and which of them carry fixes. Text for people; a
//! JSON array when the run asked for JSON, so scripts get the same numbers.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::json;
use streamlint_rules::{rule, Applicability};

use crate::{FileFindings, Format};

/// One rule's line of the statistics.
#[derive(Debug, PartialEq, Eq)]
struct RuleCount {
    code: &'static str,
    count: usize,
    /// Some of the rule's findings carry a fix that `--fix` applies with the run's flags.
    fixable: bool,
}

/// Print how many findings each rule reported, most frequent first (ties by code): a JSON array
/// of `{code, name, count, fixable}` for the JSON formats, aligned lines
/// (`   12  SL001  [*] missing-record-stream`, `[*]` where `--fix` would fix some: safe fixes,
/// and the others too with `unsafe_fixes`) otherwise.
pub fn statistics(
    files: &[FileFindings<'_>],
    format: Format,
    unsafe_fixes: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let counts = count(files, unsafe_fixes);
    let name = |code: &str| rule(code).map_or("", |r| r.name);
    if matches!(format, Format::Json | Format::JsonLines) {
        let items: Vec<_> = counts
            .iter()
            .map(|c| json!({"code": c.code, "name": name(c.code), "count": c.count, "fixable": c.fixable}))
            .collect();
        serde_json::to_writer_pretty(&mut *out, &items)?;
        return writeln!(out);
    }
    let count_width = counts
        .iter()
        .map(|c| c.count.to_string().len())
        .max()
        .unwrap_or(0)
        .max(5);
    let code_width = counts.iter().map(|c| c.code.len()).max().unwrap_or(0);
    let any_fixable = counts.iter().any(|c| c.fixable);
    for c in &counts {
        let marker = match (any_fixable, c.fixable) {
            (_, true) => "[*] ",
            (true, false) => "    ",
            (false, false) => "",
        };
        writeln!(
            out,
            "{:>count_width$}  {:<code_width$}  {marker}{}",
            c.count,
            c.code,
            name(c.code)
        )?;
    }
    Ok(())
}

fn count(files: &[FileFindings<'_>], unsafe_fixes: bool) -> Vec<RuleCount> {
    let mut by_code: BTreeMap<&'static str, RuleCount> = BTreeMap::new();
    for f in files.iter().flat_map(|file| file.findings) {
        let entry = by_code.entry(f.code).or_insert(RuleCount {
            code: f.code,
            count: 0,
            fixable: false,
        });
        entry.count += 1;
        entry.fixable |= f
            .fix
            .as_ref()
            .is_some_and(|fix| unsafe_fixes || fix.applicability == Applicability::Safe);
    }
    let mut counts: Vec<RuleCount> = by_code.into_values().collect();
    counts.sort_by(|a, b| b.count.cmp(&a.count).then(a.code.cmp(b.code)));
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamlint_graph::Span;
    use streamlint_rules::{Finding, Fix, Severity};

    fn finding(code: &'static str, fixable: bool) -> Finding {
        with_fix(code, fixable.then_some(Applicability::Safe))
    }

    fn with_fix(code: &'static str, applicability: Option<Applicability>) -> Finding {
        Finding {
            code,
            severity: Severity::Error,
            message: String::new(),
            span: Span::new(0, 0),
            labels: Vec::new(),
            help: None,
            fix: applicability.map(|applicability| Fix {
                message: String::new(),
                applicability,
                edits: Vec::new(),
            }),
        }
    }

    fn stats(findings: &[Finding], format: Format) -> String {
        stats_with(findings, format, false)
    }

    fn stats_with(findings: &[Finding], format: Format, unsafe_fixes: bool) -> String {
        let (a, b) = findings.split_at(findings.len() / 2);
        let files = [
            FileFindings {
                path: "a.py",
                source: "",
                findings: a,
            },
            FileFindings {
                path: "b.rs",
                source: "",
                findings: b,
            },
        ];
        let mut out = Vec::new();
        statistics(&files, format, unsafe_fixes, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn sorted_by_count_then_code_with_fix_markers() {
        let findings = [
            finding("SL005", false),
            finding("SL003", false),
            finding("SL001", false),
            finding("SL003", true),
            finding("SL001", false),
            finding("SL002", false),
        ];
        assert_eq!(
            stats(&findings, Format::Concise),
            "    2  SL001      missing-record-stream\n    \
                 2  SL003  [*] missing-stream-wait\n    \
                 1  SL002      record-stream-wrong-stream\n    \
                 1  SL005      temporary-stream\n"
        );
    }

    /// `[*]` says what `--fix` does: a fix that needs review counts only with `--unsafe-fixes`.
    #[test]
    fn unsafe_fixes_are_marked_only_when_they_would_be_applied() {
        let findings = [with_fix("SL004", Some(Applicability::Unsafe))];
        assert_eq!(
            stats_with(&findings, Format::Concise, false),
            "    1  SL004  transfer-in-side-stream\n"
        );
        assert_eq!(
            stats_with(&findings, Format::Concise, true),
            "    1  SL004  [*] transfer-in-side-stream\n"
        );
    }

    #[test]
    fn no_markers_when_nothing_is_fixable() {
        let findings = [finding("SL008", false), finding("SL008", false)];
        assert_eq!(
            stats(&findings, Format::Full),
            "    2  SL008  unrestored-set-stream\n"
        );
    }

    #[test]
    fn json_formats_get_an_array() {
        let findings = [finding("SL004", true), finding("SL001", false)];
        let expected = json!([
            {"code": "SL001", "name": "missing-record-stream", "count": 1, "fixable": false},
            {"code": "SL004", "name": "transfer-in-side-stream", "count": 1, "fixable": true},
        ]);
        for format in [Format::Json, Format::JsonLines] {
            let value: serde_json::Value = serde_json::from_str(&stats(&findings, format)).unwrap();
            assert_eq!(value, expected);
        }
        assert_eq!(stats(&[], Format::Json), "[]\n");
        assert_eq!(stats(&[], Format::Concise), "");
    }
}
