//! Output renderers: the findings of a run in the formats users read (a rich terminal view, one
//! line per finding) and the formats machines read (JSON, JSON lines, SARIF for code scanning,
//! GitHub Actions annotations, JUnit XML for CI test reports). Renderers know formats, not
//! parsers or rules' internals: they receive findings with byte spans and the source they point
//! into.

mod concise;
mod fingerprint;
mod full;
mod github;
mod json;
mod json_lines;
mod junit;
mod paths;
mod sarif;
mod statistics;

use std::io::{self, Write};
use std::path::Path;

use streamlint_rules::Finding;
pub use streamlint_rules::{LineIndex, Position};

pub use statistics::statistics;

/// The findings of one file, with the text their spans point into.
pub struct FileFindings<'a> {
    /// The path as the user gave it: relative paths are relative to the working directory, and
    /// the full, concise and JSON formats show them unchanged.
    pub path: &'a str,
    pub source: &'a str,
    pub findings: &'a [Finding],
}

/// What a renderer needs to know about the run besides the findings.
#[derive(Copy, Clone, Debug)]
pub struct RenderOptions<'a> {
    /// Colour the full format (for a terminal); the other formats never colour.
    pub color: bool,
    /// The root the machine formats (SARIF, GitHub annotations, JUnit) report paths against:
    /// CI services match findings to the files of a checkout by repository-relative paths,
    /// whatever the paths the tool was given. Usually the working directory (a relative base is
    /// taken from it). Files outside it keep their own paths (`file://` URIs in SARIF).
    pub base_dir: &'a Path,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    Full,
    Concise,
    Json,
    JsonLines,
    Sarif,
    Github,
    Junit,
}

impl Format {
    pub const NAMES: &'static [&'static str] = &[
        "full",
        "concise",
        "json",
        "json-lines",
        "sarif",
        "github",
        "junit",
    ];

    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "full" => Some(Format::Full),
            "concise" => Some(Format::Concise),
            "json" => Some(Format::Json),
            "json-lines" => Some(Format::JsonLines),
            "sarif" => Some(Format::Sarif),
            "github" => Some(Format::Github),
            "junit" => Some(Format::Junit),
            _ => None,
        }
    }
}

/// Where the project lives: SARIF names it as the tool's home.
pub const REPOSITORY_URL: &str = "https://github.com/streamlint/streamlint";

/// Where a rule's page is published.
pub fn rule_url(code: &str) -> String {
    format!("{REPOSITORY_URL}/blob/main/rules/{code}.md")
}

/// Render every file's findings in `format`.
pub fn render(
    format: Format,
    files: &[FileFindings<'_>],
    options: &RenderOptions<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Full => full::render(files, options.color, out),
        Format::Concise => concise::render(files, out),
        Format::Json => json::render(files, out),
        Format::JsonLines => json_lines::render(files, out),
        Format::Sarif => sarif::render(files, options.base_dir, out),
        Format::Github => github::render(files, options.base_dir, out),
        Format::Junit => junit::render(files, options.base_dir, out),
    }
}

/// A finding's code and its rule's name (`SL001 missing-record-stream`), to title it where a
/// format has room for one line.
fn code_and_name(code: &str) -> String {
    match streamlint_rules::rule(code) {
        Some(r) => format!("{code} {}", r.name),
        None => code.to_string(),
    }
}

/// `text`, then the finding's help on a line of its own: for formats with a single text field.
fn with_help(text: String, f: &Finding) -> String {
    match &f.help {
        Some(help) => format!("{text}\nhelp: {help}"),
        None => text,
    }
}

/// The closing summary line of a human-readable run; `missing` paths given on the command line
/// do not exist, and a run with any is not said to have passed.
pub fn summary_line(findings: usize, files: usize, missing: usize) -> String {
    let plural = |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
    let checked = format!("{files} file{} checked", plural(files, "", "s"));
    let absent = format!(
        "{missing} path{} given {} not exist",
        plural(missing, "", "s"),
        plural(missing, "does", "do")
    );
    match (findings, missing) {
        (0, 0) => format!("All checks passed ({checked})."),
        (0, _) => format!("No problems in the {checked}, but {absent}."),
        (n, 0) => format!("Found {n} problem{} in {checked}.", plural(n, "", "s")),
        (n, _) => format!(
            "Found {n} problem{} in {checked}; {absent}.",
            plural(n, "", "s")
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_with_missing_paths_is_not_said_to_pass() {
        assert_eq!(
            summary_line(0, 3, 0),
            "All checks passed (3 files checked)."
        );
        assert_eq!(
            summary_line(0, 0, 1),
            "No problems in the 0 files checked, but 1 path given does not exist."
        );
        assert_eq!(
            summary_line(2, 1, 2),
            "Found 2 problems in 1 file checked; 2 paths given do not exist."
        );
    }

    use super::*;

    #[test]
    fn every_format_name_parses() {
        for name in Format::NAMES {
            assert!(Format::parse(name).is_some(), "{name}");
        }
        assert_eq!(Format::parse("json-lines"), Some(Format::JsonLines));
        assert_eq!(Format::parse("xml"), None);
    }
}
