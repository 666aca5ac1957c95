//! Output renderers: the findings of a run in the formats users read (a rich terminal view, one
//! line per finding) and machines read (JSON). Renderers know formats, not parsers or rules'
//! internals: they receive findings with byte spans and the source they point into.

mod full;
mod json;

use std::io::{self, Write};

use streamlint_rules::Finding;
pub use streamlint_rules::{LineIndex, Position};

/// The findings of one file, with the text their spans point into.
pub struct FileFindings<'a> {
    /// The path as the user gave it (relative paths stay relative).
    pub path: &'a str,
    pub source: &'a str,
    pub findings: &'a [Finding],
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    Full,
    Concise,
    Json,
}

impl Format {
    pub const NAMES: &'static [&'static str] = &["full", "concise", "json"];

    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "full" => Some(Format::Full),
            "concise" => Some(Format::Concise),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Where a rule's page is published.
pub fn rule_url(code: &str) -> String {
    format!("https://github.com/streamlint/streamlint/blob/main/rules/{code}.md")
}

/// Render every file's findings in `format`; `color` applies to the full format only.
pub fn render(
    format: Format,
    files: &[FileFindings<'_>],
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Full => full::render(files, color, out),
        Format::Concise => {
            for file in files {
                let index = LineIndex::new(file.source);
                for f in file.findings {
                    let p = index.position(f.span.start);
                    writeln!(
                        out,
                        "{}:{}:{}: {} {}",
                        file.path, p.row, p.column, f.code, f.message
                    )?;
                }
            }
            Ok(())
        }
        Format::Json => json::render(files, out),
    }
}

/// The closing summary line of a human-readable run.
pub fn summary_line(findings: usize, files: usize) -> String {
    match findings {
        0 => format!(
            "All checks passed ({files} file{} checked).",
            if files == 1 { "" } else { "s" }
        ),
        n => format!(
            "Found {n} problem{} in {files} file{} checked.",
            if n == 1 { "" } else { "s" },
            if files == 1 { "" } else { "s" }
        ),
    }
}
