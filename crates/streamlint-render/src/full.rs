//! The rich terminal view: source snippets with the primary span and labelled secondary spans.

use std::io::{self, Write};

use codespan_reporting::diagnostic::{Diagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor::Ansi, Config};
use streamlint_rules::{rule, Severity};

use crate::{rule_url, FileFindings};

pub fn render(files: &[FileFindings<'_>], color: bool, out: &mut dyn Write) -> io::Result<()> {
    let mut db = SimpleFiles::new();
    let config = Config::default();
    for file in files {
        let id = db.add(file.path, file.source);
        for f in file.findings {
            let name = rule(f.code).map(|r| r.name).unwrap_or("");
            let mut labels = vec![Label::primary(id, range(f.span, file.source))];
            labels.extend(f.labels.iter().map(|l| {
                Label::secondary(id, range(l.span, file.source)).with_message(&l.message)
            }));
            let mut notes = Vec::new();
            if let Some(help) = &f.help {
                notes.push(format!("help: {help}"));
            }
            notes.push(format!("see {} ({name})", rule_url(f.code)));
            let diagnostic = Diagnostic::new(severity(f.severity))
                .with_code(f.code)
                .with_message(&f.message)
                .with_labels(labels)
                .with_notes(notes);
            let mut buf = Vec::new();
            let result = if color {
                term::emit_to_write_style(&mut Ansi::new(&mut buf), &config, &db, &diagnostic)
            } else {
                term::emit_to_io_write(&mut buf, &config, &db, &diagnostic)
            };
            result.map_err(io::Error::other)?;
            out.write_all(&buf)?;
        }
    }
    Ok(())
}

/// A span as a byte range codespan accepts (inside the text, on character boundaries).
fn range(span: streamlint_graph::Span, source: &str) -> std::ops::Range<usize> {
    let clamp = |mut i: usize| {
        i = i.min(source.len());
        while !source.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = clamp(span.start as usize);
    start..clamp(span.end as usize).max(start)
}

fn severity(s: Severity) -> CsSeverity {
    match s {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
        Severity::Info => CsSeverity::Note,
    }
}
