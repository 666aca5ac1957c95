//! SARIF 2.1.0, the format GitHub code scanning (and other dashboards) ingest. Beyond what the
//! schema requires, the log follows what code scanning relies on:
//!
//! - every rule of the catalogue is described, not only those that fired, so that alert pages
//!   show the rule's help (its page, as markdown) even for a run that found nothing new;
//! - paths are relative to the repository root (`%SRCROOT%`), which is how code scanning
//!   matches a result to a file of the checkout;
//! - columns are counted in UTF-16 code units, code scanning's default, and declared so;
//! - each result carries a fingerprint that does not change when unrelated lines move, so an
//!   alert keeps its identity (and its dismissal) from run to run;
//! - labels become related locations linked from the message, as code scanning only shows
//!   related locations that the message links to.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value};
use streamlint_graph::Span;
use streamlint_rules::{Finding, Fix, RuleInfo, Severity, META, RULES};

use crate::fingerprint::Fingerprints;
use crate::paths::{self, Place};
use crate::{rule_url, FileFindings, LineIndex, REPOSITORY_URL};

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The base URI id that relative artifact locations are relative to.
const SRCROOT: &str = "%SRCROOT%";

/// Code scanning rejects longer descriptions.
const DESCRIPTION_LIMIT: usize = 1024;

pub fn render(files: &[FileFindings<'_>], base: &Path, out: &mut dyn Write) -> io::Result<()> {
    let catalogue: Vec<&RuleInfo> = RULES.iter().chain(META).collect();
    let mut results = Vec::new();
    for file in files {
        let artifact = Artifact::new(file, base);
        let mut fingerprints = Fingerprints::new(file.source);
        for f in file.findings {
            let row = artifact.index.position(f.span.start).row;
            let fingerprint = fingerprints.next(f.code, &artifact.key, row);
            let rule_index = catalogue.iter().position(|r| r.code == f.code);
            results.push(artifact.result(f, rule_index, fingerprint));
        }
    }
    let mut run = json!({
        "tool": {"driver": {
            "name": "streamlint",
            "version": env!("CARGO_PKG_VERSION"),
            "semanticVersion": env!("CARGO_PKG_VERSION"),
            "informationUri": REPOSITORY_URL,
            "rules": catalogue.iter().copied().map(descriptor).collect::<Vec<_>>(),
        }},
        "columnKind": "utf16CodeUnits",
        "results": results,
    });
    if let Some(root) = paths::absolute(base) {
        run["originalUriBaseIds"] = json!({SRCROOT: {"uri": paths::file_uri(&root, true)}});
    }
    let log = json!({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]});
    serde_json::to_writer_pretty(&mut *out, &log)?;
    writeln!(out)
}

/// A reported file: its location object, and what its results are computed from.
struct Artifact<'a> {
    source: &'a str,
    index: LineIndex<'a>,
    location: Value,
    /// The file's name in fingerprints: its repository-relative path where it has one, so
    /// that fingerprints agree between checkouts in different directories.
    key: String,
}

impl<'a> Artifact<'a> {
    fn new(file: &FileFindings<'a>, base: &Path) -> Self {
        let (location, key) = match paths::place(file.path, base) {
            Some(Place::Under(rel)) => (
                json!({"uri": paths::relative_uri(&rel), "uriBaseId": SRCROOT}),
                rel,
            ),
            Some(Place::Elsewhere(abs)) => {
                let uri = paths::file_uri(&abs, false);
                (json!({ "uri": uri }), uri)
            }
            None => (
                json!({"uri": paths::relative_uri(file.path)}),
                file.path.to_string(),
            ),
        };
        Artifact {
            source: file.source,
            index: LineIndex::new(file.source),
            location,
            key,
        }
    }

    fn result(&self, f: &Finding, rule_index: Option<usize>, fingerprint: String) -> Value {
        let related: Vec<Value> = f
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({
                    "id": i + 1,
                    "physicalLocation": self.physical(l.span),
                    "message": {"text": l.message},
                })
            })
            .collect();
        let mut result = json!({
            "ruleId": f.code,
            "level": level(f.severity),
            "message": {"text": message(f)},
            "locations": [{"physicalLocation": self.physical(f.span)}],
            "relatedLocations": related,
            "partialFingerprints": {"primaryLocationLineHash": fingerprint},
        });
        if let Some(index) = rule_index {
            result["ruleIndex"] = json!(index);
        }
        if let Some(fix) = f.fix.as_ref().and_then(|fix| self.fix(fix)) {
            result["fixes"] = json!([fix]);
        }
        result
    }

    fn physical(&self, span: Span) -> Value {
        json!({
            "artifactLocation": self.location,
            "region": self.region(span.start as usize, span.end as usize),
        })
    }

    /// A byte range as a region, in the run's column unit.
    fn region(&self, start: usize, end: usize) -> Value {
        let end = end.max(start);
        let row = |offset: usize| self.index.position(offset as u32).row;
        json!({
            "startLine": row(start),
            "startColumn": utf16_column(self.source, start),
            "endLine": row(end),
            "endColumn": utf16_column(self.source, end),
        })
    }

    /// The fix as replacements; `None` when it resolves to no edit (SARIF needs one).
    fn fix(&self, fix: &Fix) -> Option<Value> {
        let replacements: Vec<Value> = fix
            .text_edits(self.source)
            .iter()
            .map(|e| {
                json!({
                    "deletedRegion": self.region(e.start, e.end),
                    "insertedContent": {"text": e.content},
                })
            })
            .collect();
        (!replacements.is_empty()).then(|| {
            json!({
                "description": {"text": fix.message},
                "artifactChanges": [{"artifactLocation": self.location, "replacements": replacements}],
                "properties": {"applicability": fix.applicability.as_str()},
            })
        })
    }
}

/// The one-based column of byte `offset`, in UTF-16 code units: a character outside the
/// Basic Multilingual Plane (an emoji) counts two, as editors and code scanning count it.
fn utf16_column(source: &str, offset: usize) -> usize {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = source[..offset].rfind('\n').map_or(0, |i| i + 1);
    source[line_start..offset].encode_utf16().count() + 1
}

/// The finding's message with links to its labels (`[text](id)` names a related location).
fn message(f: &Finding) -> String {
    if f.labels.is_empty() {
        return f.message.clone();
    }
    let links: Vec<String> = f
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| format!("[{}]({})", escape_link_text(&l.message), i + 1))
        .collect();
    format!("{} (see {})", f.message, links.join(", "))
}

/// Brackets inside a link's text would end it early: SARIF escapes them with a backslash.
fn escape_link_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A rule's description: its page is the help; its summary and first paragraph describe it.
fn descriptor(rule: &RuleInfo) -> Value {
    let page = rule.page().trim();
    let meta = META.iter().any(|m| m.code == rule.code);
    json!({
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": first_paragraph(page).unwrap_or_else(|| rule.summary().to_string())},
        "help": {"text": page, "markdown": page},
        "helpUri": rule_url(rule.code),
        "defaultConfiguration": {"level": level(rule.severity)},
        "properties": {
            // Stream rules are about correctness of GPU concurrency; the others about the run.
            "tags": if meta { json!(["streamlint"]) } else { json!(["correctness", "concurrency", "cuda"]) },
            // The analysis prefers silence where code does not say (docs/analysis.md); a file
            // that does not parse, or a suppression that suppresses nothing, is certain.
            "precision": if meta { "very-high" } else { "high" },
            "problem.severity": match rule.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "recommendation",
            },
        },
    })
}

/// The page's first paragraph of prose (headings skipped, lines joined), cut to the length
/// code scanning accepts.
fn first_paragraph(page: &str) -> Option<String> {
    let lines: Vec<&str> = page
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty() || l.starts_with('#'))
        .take_while(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let text = lines.join(" ");
    if text.chars().count() <= DESCRIPTION_LIMIT {
        return Some(text);
    }
    let mut cut: String = text.chars().take(DESCRIPTION_LIMIT - 1).collect();
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamlint_rules::{Applicability, Edit, Label};

    fn finding(code: &'static str, span: (u32, u32)) -> Finding {
        Finding {
            code,
            severity: Severity::Error,
            message: "`x` is freed".into(),
            span: Span {
                start: span.0,
                end: span.1,
            },
            labels: Vec::new(),
            help: None,
            fix: None,
        }
    }

    fn sarif(files: &[FileFindings<'_>], base: &Path) -> Value {
        let mut out = Vec::new();
        render(files, base, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn columns_count_utf16_code_units() {
        // `é` is one code unit (two bytes), `🚀` two (four bytes): `del` is the 11th character
        // but starts at the 12th code unit.
        let source = "s = \"é🚀\"; del x\n";
        let start = source.find("del").unwrap() as u32;
        let findings = [finding("SL001", (start, start + 5))];
        let log = sarif(
            &[FileFindings {
                path: "/repo/a.py",
                source,
                findings: &findings,
            }],
            Path::new("/repo"),
        );
        let region = &log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"];
        assert_eq!(region["startColumn"], 12, "{region}");
        assert_eq!(region["endColumn"], 17, "{region}");
        assert_eq!(log["runs"][0]["columnKind"], "utf16CodeUnits");
        let rocket = source.find('🚀').unwrap();
        assert_eq!(
            utf16_column(source, rocket + 1),
            7,
            "inside a character: its start"
        );
    }

    #[test]
    fn locations_are_relative_to_the_base() {
        let findings = [finding("SL001", (0, 1))];
        let file = |path| FileFindings {
            path,
            source: "x\n",
            findings: &findings,
        };
        let log = sarif(
            &[file("/repo/src/my model.py"), file("/elsewhere/b.py")],
            Path::new("/repo"),
        );
        let run = &log["runs"][0];
        let location =
            |i: usize| &run["results"][i]["locations"][0]["physicalLocation"]["artifactLocation"];
        assert_eq!(
            location(0),
            &json!({"uri": "src/my%20model.py", "uriBaseId": "%SRCROOT%"})
        );
        assert_eq!(location(1), &json!({"uri": "file:///elsewhere/b.py"}));
        assert_eq!(
            run["originalUriBaseIds"],
            json!({"%SRCROOT%": {"uri": "file:///repo/"}})
        );
    }

    #[test]
    fn every_rule_is_described_and_results_point_at_theirs() {
        let findings = [finding("SL003", (0, 1))];
        let log = sarif(
            &[FileFindings {
                path: "a.py",
                source: "x\n",
                findings: &findings,
            }],
            Path::new("."),
        );
        let rules = log["runs"][0]["tool"]["driver"]["rules"]
            .as_array()
            .unwrap();
        assert_eq!(rules.len(), RULES.len() + META.len());
        for r in rules {
            let markdown = r["help"]["markdown"].as_str().unwrap();
            assert!(markdown.starts_with(&format!("# {}", r["id"].as_str().unwrap())));
            assert!(!markdown.contains("summary:"), "front matter left in");
            let full = r["fullDescription"]["text"].as_str().unwrap();
            assert!(!full.is_empty() && full.chars().count() <= DESCRIPTION_LIMIT);
        }
        let result = &log["runs"][0]["results"][0];
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], "SL003");
        assert_eq!(result["level"], "error");
    }

    #[test]
    fn fingerprints_survive_a_line_inserted_above() {
        let fingerprint = |source: &str| {
            let start = source.find("del x").unwrap() as u32;
            let findings = [finding("SL001", (start, start + 5))];
            let log = sarif(
                &[FileFindings {
                    path: "/repo/a.py",
                    source,
                    findings: &findings,
                }],
                Path::new("/repo"),
            );
            log["runs"][0]["results"][0]["partialFingerprints"]["primaryLocationLineHash"].clone()
        };
        let source = "def f(x):\n    del x\n";
        assert_eq!(
            fingerprint(source),
            fingerprint(&format!("import os\n{source}"))
        );
        assert_ne!(
            fingerprint(source),
            fingerprint("def f(x):\n    del x  # gone\n")
        );
    }

    #[test]
    fn labels_become_linked_related_locations() {
        let mut f = finding("SL001", (6, 7));
        f.labels.push(Label {
            span: Span { start: 0, end: 1 },
            message: "used on `s[0]` here".into(),
        });
        let findings = [f];
        let log = sarif(
            &[FileFindings {
                path: "/repo/a.py",
                source: "y = 1\nx\n",
                findings: &findings,
            }],
            Path::new("/repo"),
        );
        let result = &log["runs"][0]["results"][0];
        assert_eq!(
            result["message"]["text"],
            "`x` is freed (see [used on `s\\[0\\]` here](1))"
        );
        assert_eq!(result["relatedLocations"][0]["id"], 1);
        assert_eq!(
            result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"],
            1
        );
    }

    #[test]
    fn fixes_become_replacements() {
        let source = "def f():\n    del x\n";
        let at = source.find("del").unwrap() as u32;
        let mut f = finding("SL001", (at, at + 5));
        f.fix = Some(Fix {
            message: "record first".into(),
            applicability: Applicability::Unsafe,
            edits: vec![Edit::InsertLineBefore {
                before: Span { start: at, end: at },
                statement: "x.record_stream(s)".into(),
            }],
        });
        let findings = [f];
        let log = sarif(
            &[FileFindings {
                path: "/repo/a.py",
                source,
                findings: &findings,
            }],
            Path::new("/repo"),
        );
        let fix = &log["runs"][0]["results"][0]["fixes"][0];
        assert_eq!(fix["description"]["text"], "record first");
        let change = &fix["artifactChanges"][0];
        assert_eq!(change["artifactLocation"]["uri"], "a.py");
        assert_eq!(
            change["replacements"][0],
            json!({
                "deletedRegion": {"startLine": 2, "startColumn": 1, "endLine": 2, "endColumn": 1},
                "insertedContent": {"text": "    x.record_stream(s)\n"},
            })
        );
    }

    #[test]
    fn a_page_is_described_by_its_first_paragraph() {
        assert_eq!(
            first_paragraph("# X\n\n## What it does\n\nFlags a\nthing.\n\nMore.").as_deref(),
            Some("Flags a thing.")
        );
    }
}
