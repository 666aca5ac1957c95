//! The rule catalogue: codes, names and default severities, and the documentation pages in
//! `rules/*.md`, which are the single source of each rule's text.

use crate::Severity;

#[derive(Copy, Clone, Debug)]
pub struct RuleInfo {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// The rule's page: front matter and sections.
    pub doc: &'static str,
}

impl RuleInfo {
    /// The one-line summary from the page's front matter.
    pub fn summary(&self) -> &'static str {
        front_matter(self.doc, "summary").unwrap_or("")
    }

    /// The page without its front matter, as a person reads it.
    pub fn page(&self) -> &'static str {
        self.doc
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n"))
            .map_or(self.doc, |(_, body)| body.trim_start())
    }
}

/// Files that cannot be read or parsed are reported under this code.
pub const PARSE_ERROR: RuleInfo = RuleInfo {
    code: "SL900",
    name: "parse-error",
    severity: Severity::Error,
    doc: include_str!("../../../rules/SL900.md"),
};

/// A suppression comment that suppressed nothing.
pub const UNUSED_SUPPRESSION: RuleInfo = RuleInfo {
    code: "SL901",
    name: "unused-suppression",
    severity: Severity::Warning,
    doc: include_str!("../../../rules/SL901.md"),
};

/// Codes that are not rules about stream code but about the run itself.
pub const META: &[RuleInfo] = &[PARSE_ERROR, UNUSED_SUPPRESSION];

pub const RULES: &[RuleInfo] = &[
    RuleInfo {
        code: "SL001",
        name: "missing-record-stream",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL001.md"),
    },
    RuleInfo {
        code: "SL002",
        name: "record-stream-wrong-stream",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL002.md"),
    },
    RuleInfo {
        code: "SL003",
        name: "missing-stream-wait",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL003.md"),
    },
    RuleInfo {
        code: "SL004",
        name: "transfer-in-side-stream",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL004.md"),
    },
    RuleInfo {
        code: "SL005",
        name: "temporary-stream",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL005.md"),
    },
    RuleInfo {
        code: "SL006",
        name: "wait-before-record",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL006.md"),
    },
    RuleInfo {
        code: "SL007",
        name: "unsynchronized-host-access",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL007.md"),
    },
    RuleInfo {
        code: "SL008",
        name: "unrestored-set-stream",
        severity: Severity::Warning,
        doc: include_str!("../../../rules/SL008.md"),
    },
    RuleInfo {
        code: "SL009",
        name: "cuda-in-dataloader-worker",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL009.md"),
    },
    RuleInfo {
        code: "SL010",
        name: "sync-guard-dropped-early",
        severity: Severity::Error,
        doc: include_str!("../../../rules/SL010.md"),
    },
];

/// Look a rule up by code (`SL001`) or name (`missing-record-stream`), SL900 and SL901 included.
pub fn rule(code_or_name: &str) -> Option<&'static RuleInfo> {
    RULES
        .iter()
        .chain(META)
        .find(|r| r.code.eq_ignore_ascii_case(code_or_name) || r.name == code_or_name)
}

/// A `key: value` line of a page's front matter.
fn front_matter(doc: &'static str, key: &str) -> Option<&'static str> {
    let rest = doc.strip_prefix("---\n")?;
    let end = rest.find("\n---")?;
    rest[..end]
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':').map(str::trim))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalogue and the pages must agree, or docs and output drift apart.
    #[test]
    fn pages_match_the_catalogue() {
        for r in RULES.iter().chain(META) {
            assert_eq!(front_matter(r.doc, "code"), Some(r.code));
            assert_eq!(front_matter(r.doc, "name"), Some(r.name));
            assert_eq!(front_matter(r.doc, "severity"), Some(r.severity.as_str()));
            assert!(!r.summary().is_empty(), "{} has no summary", r.code);
            for section in [
                "## What it does",
                "## Why is this bad?",
                "## Example",
                "## Use instead",
                "## Known problems",
                "## GPU evidence",
            ] {
                if !META.iter().any(|m| m.code == r.code) {
                    assert!(r.doc.contains(section), "{} lacks {section}", r.code);
                }
            }
        }
    }

    #[test]
    fn pages_are_read_without_their_front_matter() {
        for r in RULES.iter().chain(META) {
            assert!(
                r.page().starts_with(&format!("# {} {}", r.code, r.name)),
                "{}",
                r.code
            );
        }
    }

    #[test]
    fn lookup_by_code_or_name() {
        assert_eq!(rule("sl003").map(|r| r.name), Some("missing-stream-wait"));
        assert_eq!(
            rule("transfer-in-side-stream").map(|r| r.code),
            Some("SL004")
        );
        assert!(rule("SL999").is_none());
    }
}
