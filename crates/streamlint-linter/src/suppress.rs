//! Suppression comments: `# noqa` / `# noqa: SL001` (flake8-compatible), `# streamlint:
//! ignore[SL001]` on the flagged line, and `# streamlint: file-ignore[SL001]` anywhere in the file
//! (these two also take rule names: `ignore[missing-record-stream]`).
//! A comment naming a rule that reports nothing there is itself reported (SL901).

use streamlint_graph::Span;
use streamlint_rules::{Finding, LineIndex, UNUSED_SUPPRESSION};

/// One suppression comment.
#[derive(Debug)]
struct Directive {
    /// The line it applies to; `None` for a file-level directive.
    line: Option<usize>,
    /// Codes it names; empty for a bare `# noqa`.
    codes: Vec<String>,
    span: Span,
    /// Codes it suppressed something of.
    used: Vec<&'static str>,
}

impl Directive {
    fn covers(&self, code: &str) -> bool {
        self.codes.is_empty() || self.codes.iter().any(|c| c == code)
    }

    fn unused_codes(&self) -> Vec<&str> {
        self.codes
            .iter()
            .map(String::as_str)
            .filter(|c| !self.used.contains(c))
            .collect()
    }
}

/// Find the suppression comments of a source (the text after the first comment marker of each
/// line). Lines are found from the markers, not read one by one: most lines have no comment, and
/// most comments are not directives.
fn directives(source: &str, marker: &str) -> Vec<Directive> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    if !may_be_directive(source) {
        return out;
    }
    // Rows are counted from the last directive's line on.
    let (mut row, mut counted_to) = (1, 0);
    let mut from = 0;
    while from < bytes.len() {
        let Some(hit) = memchr::memmem::find(&bytes[from..], marker.as_bytes()) else {
            break;
        };
        let at = from + hit;
        let line_end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
        from = line_end + 1;
        let comment = &source[at + marker.len()..line_end];
        if may_be_directive(comment) {
            row += memchr::memchr_iter(b'\n', &bytes[counted_to..at]).count();
            counted_to = at;
            let span = Span::new(
                at as u32,
                (at + source[at..line_end].trim_end().len()) as u32,
            );
            out.extend(parse_comment(comment, row, span));
        }
    }
    out
}

/// Could the text hold a directive (`noqa` in any case, or `streamlint:`)? Most files hold none,
/// and the rare letter `q` is where a `noqa` is looked for.
fn may_be_directive(text: &str) -> bool {
    let text = text.as_bytes();
    memchr::memmem::find(text, b"streamlint:").is_some()
        || memchr::memchr2_iter(b'q', b'Q', text).any(|q| {
            q >= 2
                && text
                    .get(q - 2..q + 2)
                    .is_some_and(|w| w.eq_ignore_ascii_case(b"noqa"))
        })
}

fn parse_comment(comment: &str, row: usize, span: Span) -> Vec<Directive> {
    let mut out = Vec::new();
    for part in comment.split('#') {
        let part = part.trim();
        if let Some(rest) = strip_prefix_ci(part, "noqa") {
            let rest = rest.trim_start();
            let codes: Vec<String> = match rest.strip_prefix(':') {
                Some(list) => list
                    .split([',', ' '])
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_ascii_uppercase)
                    .collect(),
                None => Vec::new(),
            };
            // A noqa for other tools' codes only is not ours.
            let ours: Vec<String> = codes
                .iter()
                .filter(|c| c.starts_with("SL"))
                .cloned()
                .collect();
            if codes.is_empty() || !ours.is_empty() {
                out.push(Directive {
                    line: Some(row),
                    codes: ours,
                    span,
                    used: Vec::new(),
                });
            }
        } else if let Some(rest) = part.strip_prefix("streamlint:") {
            let rest = rest.trim();
            let (line, list) = if let Some(list) = rest.strip_prefix("ignore") {
                (Some(row), list)
            } else if let Some(list) = rest.strip_prefix("file-ignore") {
                (None, list)
            } else {
                continue;
            };
            // By code or by name, as `--select` takes them; the list ends at its `]` (another
            // comment may follow on the line).
            let list = list.trim().trim_start_matches('[');
            let codes = list
                .split_once(']')
                .map_or(list, |(inside, _)| inside)
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| {
                    streamlint_rules::rule(c)
                        .map_or_else(|| c.to_ascii_uppercase(), |r| r.code.to_string())
                })
                .collect();
            out.push(Directive {
                line,
                codes,
                span,
                used: Vec::new(),
            });
        }
    }
    out
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// Drop suppressed findings; add one SL901 per directive that suppressed nothing (bare `# noqa`
/// excepted: other tools use it too). `report_unused` is off when SL901 is not selected.
pub fn apply(
    source: &str,
    comment: &str,
    findings: Vec<Finding>,
    report_unused: bool,
) -> Vec<Finding> {
    let mut directives = directives(source, comment);
    if directives.is_empty() {
        return findings;
    }
    let index = LineIndex::new(source);
    let mut kept = Vec::new();
    for f in findings {
        let row = index.position(f.span.start).row;
        let matching = directives
            .iter_mut()
            .find(|d| d.line.is_none_or(|l| l == row) && d.covers(f.code));
        match matching {
            Some(d) => d.used.push(f.code),
            None => kept.push(f),
        }
    }
    if report_unused {
        for d in &directives {
            let unused = d.unused_codes();
            if unused.is_empty() {
                continue;
            }
            kept.push(Finding {
                fix: None,
                code: UNUSED_SUPPRESSION.code,
                severity: UNUSED_SUPPRESSION.severity,
                message: format!(
                    "unused suppression of {}: nothing is reported here",
                    unused.join(", ")
                ),
                span: d.span,
                labels: Vec::new(),
                help: Some("remove the comment".into()),
            });
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamlint_rules::Severity;

    fn finding(code: &'static str, source: &str, line: usize) -> Finding {
        let start = source
            .split_inclusive('\n')
            .take(line - 1)
            .map(str::len)
            .sum::<usize>() as u32;
        Finding {
            code,
            severity: Severity::Error,
            message: String::new(),
            span: Span::new(start, start + 1),
            labels: Vec::new(),
            help: None,
            fix: None,
        }
    }

    fn codes(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.code).collect()
    }

    #[test]
    fn line_suppressions() {
        let src =
            "a  # noqa: SL001\nb  # streamlint: ignore[SL003, SL001]\nc  # noqa\nd  # NOQA:SL002\n";
        let fs = vec![
            finding("SL001", src, 1),
            finding("SL001", src, 2),
            finding("SL004", src, 3),
            finding("SL003", src, 4),
        ];
        let kept = apply(src, "#", fs, true);
        // Line 4 keeps its SL003 (the noqa names SL002), and that noqa and line 2's SL003 are unused.
        assert_eq!(codes(&kept), ["SL003", "SL901", "SL901"]);
        assert!(
            kept[1].message.contains("of SL003:") && kept[2].message.contains("of SL002:"),
            "{kept:?}"
        );
    }

    #[test]
    fn directives_take_rule_names_as_select_does() {
        let src =
            "a  # streamlint: ignore[missing-stream-wait]\n# streamlint: file-ignore[SL002]\n";
        let found = directives(src, "#");
        assert_eq!(found[0].codes, ["SL003"]);
        assert_eq!(found[1].codes, ["SL002"]);
        // The list ends at its bracket, whatever comment follows.
        let found = directives("x // streamlint: ignore[SL003] // why\n", "//");
        assert_eq!(found[0].codes, ["SL003"]);
    }

    #[test]
    fn file_suppression_and_foreign_noqa() {
        let src = "# streamlint: file-ignore[SL002]\nx  # noqa: E501\ny\n";
        let fs = vec![finding("SL002", src, 3), finding("SL001", src, 2)];
        assert_eq!(codes(&apply(src, "#", fs, true)), ["SL001"]);
    }

    #[test]
    fn comments_with_wide_characters() {
        let src = "x = 1  # ── √k ─\ny  #√\n";
        assert!(apply(src, "#", vec![finding("SL001", src, 1)], true).len() == 1);
    }

    #[test]
    fn rust_comments() {
        let src = "let x = 1; // streamlint: ignore[SL003]\n";
        assert!(apply(src, "//", vec![finding("SL003", src, 1)], true).is_empty());
    }

    #[test]
    fn unused_reports_can_be_turned_off() {
        let src = "x  # noqa: SL001\n";
        assert!(apply(src, "#", Vec::new(), false).is_empty());
        assert_eq!(codes(&apply(src, "#", Vec::new(), true)), ["SL901"]);
    }
}
