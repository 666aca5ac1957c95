//! JUnit XML, the test-report format GitLab merge requests and Jenkins display: one test suite
//! per file, one failing test case per finding (its failure names the code, the position and
//! the message). A run without findings still reports one passing test case, because CI
//! services read a report with no test cases as a broken report rather than a clean run.

use std::io::{self, Write};
use std::path::Path;

use crate::{code_and_name, paths, with_help, FileFindings, LineIndex};

pub fn render(files: &[FileFindings<'_>], base: &Path, out: &mut dyn Write) -> io::Result<()> {
    let total: usize = files.iter().map(|f| f.findings.len()).sum();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="streamlint" tests="{}" failures="{total}" errors="0">"#,
        total.max(1)
    )?;
    if total == 0 {
        writeln!(
            out,
            r#"  <testsuite name="streamlint" tests="1" failures="0" errors="0" skipped="0">"#
        )?;
        writeln!(
            out,
            r#"    <testcase name="no findings" classname="streamlint"/>"#
        )?;
        writeln!(out, "  </testsuite>")?;
    }
    for file in files.iter().filter(|f| !f.findings.is_empty()) {
        let shown = paths::display(file.path, base);
        let path = escape(&shown);
        let count = file.findings.len();
        writeln!(
            out,
            r#"  <testsuite name="{path}" tests="{count}" failures="{count}" errors="0" skipped="0">"#
        )?;
        let index = LineIndex::new(file.source);
        for f in file.findings {
            let p = index.position(f.span.start);
            writeln!(
                out,
                r#"    <testcase name="{} ({}:{})" classname="{path}" file="{path}" line="{}">"#,
                escape(&code_and_name(f.code)),
                p.row,
                p.column,
                p.row
            )?;
            let body = format!("{shown}:{}:{}: {} {}", p.row, p.column, f.code, f.message);
            writeln!(
                out,
                r#"      <failure type="{}" message="{}">{}</failure>"#,
                escape(f.code),
                escape(&f.message),
                escape(&with_help(body, f))
            )?;
            writeln!(out, "    </testcase>")?;
        }
        writeln!(out, "  </testsuite>")?;
    }
    writeln!(out, "</testsuites>")
}

/// Text safe in XML 1.0 attribute values and content. Markup characters become entities;
/// tab, line feed and carriage return become character references, as a parser would turn them
/// into spaces inside attributes (and a lone CR into LF anywhere); characters XML 1.0 forbids
/// outright (other C0 controls, U+FFFE, U+FFFF), which not even a reference may carry, become
/// U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamlint_graph::Span;
    use streamlint_rules::{Finding, Severity};

    fn junit(files: &[FileFindings<'_>]) -> String {
        let mut out = Vec::new();
        render(files, Path::new("/repo"), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape("a<b>&\"c\" 'd'\t\n\r\u{1}\u{1b}\u{ffff}é"),
            "a&lt;b&gt;&amp;&quot;c&quot; &apos;d&apos;&#9;&#10;&#13;\u{fffd}\u{fffd}\u{fffd}é"
        );
    }

    #[test]
    fn one_suite_per_file_one_failing_case_per_finding() {
        let findings = [Finding {
            code: "SL003",
            severity: Severity::Error,
            message: "`a` & `b` <race>\u{7}".into(),
            span: Span::new(2, 3),
            labels: Vec::new(),
            help: Some("wait".into()),
            fix: None,
        }];
        let xml = junit(&[FileFindings {
            path: "/repo/src/a&b.py",
            source: "x\ny\n",
            findings: &findings,
        }]);
        assert!(xml.contains(r#"<testsuites name="streamlint" tests="1" failures="1" errors="0">"#));
        assert!(
            xml.contains(r#"<testsuite name="src/a&amp;b.py" tests="1" failures="1""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<testcase name="SL003 missing-stream-wait (2:1)" classname="src/a&amp;b.py" file="src/a&amp;b.py" line="2">"#),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<failure type=\"SL003\" message=\"`a` &amp; `b` &lt;race&gt;\u{fffd}\">\
                 src/a&amp;b.py:2:1: SL003 `a` &amp; `b` &lt;race&gt;\u{fffd}&#10;help: wait</failure>"
            ),
            "{xml}"
        );
    }

    #[test]
    fn a_clean_run_is_one_passing_case() {
        let xml = junit(&[]);
        assert!(xml.contains(r#"tests="1" failures="0""#), "{xml}");
        assert!(xml.contains(r#"<testcase name="no findings" classname="streamlint"/>"#));
        assert!(!xml.contains("<failure"));
    }
}
