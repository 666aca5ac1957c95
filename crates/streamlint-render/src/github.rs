//! GitHub Actions workflow commands: one `::error file=…,line=…::message` line per finding,
//! which the runner turns into annotations on the pull request's diff and the run's summary,
//! with no upload step and no permissions. The runner parses these lines itself, so values are
//! escaped its way: `%`, CR and LF in the message; also `:` and `,` in properties, where they
//! would end a value.

use std::io::{self, Write};
use std::path::Path;

use streamlint_rules::Severity;

use crate::{code_and_name, paths, with_help, FileFindings, LineIndex};

pub fn render(files: &[FileFindings<'_>], base: &Path, out: &mut dyn Write) -> io::Result<()> {
    for file in files {
        // Annotations attach to a file of the checkout by its path from the repository root.
        let path = paths::display(file.path, base);
        let index = LineIndex::new(file.source);
        for f in file.findings {
            let start = index.position(f.span.start);
            let end = index.position(f.span.end.max(f.span.start));
            let mut properties = format!("file={},line={}", property(&path), start.row);
            // GitHub takes columns only for a span on one line.
            if start.row == end.row {
                properties += &format!(
                    ",col={},endLine={},endColumn={}",
                    start.column, end.row, end.column
                );
            } else {
                properties += &format!(",endLine={}", end.row);
            }
            let title = format!("streamlint ({})", code_and_name(f.code));
            let message = with_help(format!("{} {}", f.code, f.message), f);
            writeln!(
                out,
                "::{} {properties},title={}::{}",
                command(f.severity),
                property(&title),
                data(&message)
            )?;
        }
    }
    Ok(())
}

fn command(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    }
}

/// A command's message: a line break would end the command.
fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A property value: `:` and `,` separate properties and the message.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamlint_graph::Span;
    use streamlint_rules::Finding;

    fn render_one(path: &str, source: &str, f: Finding) -> String {
        let findings = [f];
        let mut out = Vec::new();
        render(
            &[FileFindings {
                path,
                source,
                findings: &findings,
            }],
            Path::new("/repo"),
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    fn finding(severity: Severity, span: Span, message: &str, help: Option<&str>) -> Finding {
        Finding {
            code: "SL001",
            severity,
            message: message.into(),
            span,
            labels: Vec::new(),
            help: help.map(Into::into),
            fix: None,
        }
    }

    #[test]
    fn one_command_per_finding_with_position_and_title() {
        let source = "a = 1\nb = é + x\n";
        let f = finding(Severity::Error, Span::new(15, 16), "`x` is freed", None);
        assert_eq!(
            render_one("/repo/src/a.py", source, f),
            "::error file=src/a.py,line=2,col=9,endLine=2,endColumn=10,\
             title=streamlint (SL001 missing-record-stream)::SL001 `x` is freed\n"
        );
    }

    #[test]
    fn severities_map_to_commands_and_multi_line_spans_drop_columns() {
        let source = "a = (\n  1)\n";
        let f = finding(Severity::Info, Span::new(4, 10), "m", None);
        let line = render_one("/repo/a.py", source, f);
        assert!(
            line.starts_with("::notice file=a.py,line=1,endLine=2,title="),
            "{line}"
        );
        let f = finding(Severity::Warning, Span::new(0, 1), "m", None);
        assert!(render_one("/repo/a.py", source, f).starts_with("::warning "));
    }

    #[test]
    fn messages_and_properties_are_escaped() {
        let f = finding(
            Severity::Error,
            Span::new(0, 1),
            "100% sure: a,b\r\nnext",
            Some("add `x.record_stream(s)`"),
        );
        let line = render_one("/elsewhere/we:ird,name.py", "x\n", f);
        assert_eq!(
            line,
            "::error file=/elsewhere/we%3Aird%2Cname.py,line=1,col=1,endLine=1,endColumn=2,\
             title=streamlint (SL001 missing-record-stream)\
             ::SL001 100%25 sure: a,b%0D%0Anext%0Ahelp: add `x.record_stream(s)`\n"
        );
        assert_eq!(line.lines().count(), 1);
    }
}
