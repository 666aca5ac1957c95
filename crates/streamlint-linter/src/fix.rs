//! Applying fixes: as many as fit together per round, then lint again (a fix can change what
//! the next one should be), until nothing applicable is left.

use std::path::Path;

use streamlint_rules::{apply_edits, Applicability, Finding, TextEdit};

use crate::{check_source, Settings};

/// Rounds after which fixing stops: each round removes findings, so real files settle in one
/// or two; the bound only guards against fixes that undo each other.
const MAX_ROUNDS: usize = 8;

/// The outcome of fixing one source text.
#[derive(Debug)]
pub struct Fixed {
    pub source: String,
    /// Codes of the fixes applied, one per fix.
    pub applied: Vec<&'static str>,
    /// The findings of the fixed text.
    pub remaining: Vec<Finding>,
}

/// Is the fix of `finding` one to apply, given whether unsafe fixes are allowed?
pub fn applicable(finding: &Finding, unsafe_fixes: bool) -> bool {
    finding
        .fix
        .as_ref()
        .is_some_and(|f| unsafe_fixes || f.applicability == Applicability::Safe)
}

/// Lints `source` and applies its applicable fixes until none is left.
pub fn fix_source(path: &Path, source: &str, settings: &Settings, unsafe_fixes: bool) -> Fixed {
    let mut text = source.to_string();
    let mut applied = Vec::new();
    let mut findings = check_source(path, &text, settings);
    for _ in 0..MAX_ROUNDS {
        let mut edits: Vec<TextEdit> = Vec::new();
        for finding in findings.iter().filter(|f| applicable(f, unsafe_fixes)) {
            let Some(fix) = &finding.fix else { continue };
            let fix_edits = fix.text_edits(&text);
            // Two findings often ask for the same statement at the same place: once is enough.
            let fresh: Vec<TextEdit> = fix_edits
                .into_iter()
                .filter(|e| !edits.contains(e))
                .collect();
            if fresh.iter().all(|e| !edits.iter().any(|o| overlaps(o, e))) {
                edits.extend(fresh);
                applied.push(finding.code);
            }
        }
        if edits.is_empty() {
            break;
        }
        edits.sort_by_key(|e| (e.start, e.end));
        text = apply_edits(&text, &edits);
        findings = check_source(path, &text, settings);
    }
    Fixed {
        source: text,
        applied,
        remaining: findings,
    }
}

/// Do two edits touch the same text? Insertions at one point are allowed to pile up only if they
/// are not both inside a replaced range.
fn overlaps(a: &TextEdit, b: &TextEdit) -> bool {
    a.start < b.end && b.start < a.end
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAD: &str = "import torch\n\n\nclass Head:\n    def __init__(self):\n        self.side = torch.cuda.Stream()\n\n    def forward(self, x):\n        self.side.wait_stream(torch.cuda.current_stream())\n        with torch.cuda.stream(self.side):\n            y = torch.relu(x)\n        z = y + 1\n        y.record_stream(torch.cuda.current_stream())\n        return z\n";

    #[test]
    fn safe_fixes_are_applied_until_clean() {
        let fixed = fix_source(Path::new("f.py"), BAD, &Settings::default(), false);
        assert!(!fixed.applied.is_empty(), "{fixed:?}");
        assert!(fixed.remaining.iter().all(|f| f.fix.is_none()), "{fixed:?}");
        assert!(
            fixed
                .source
                .contains("torch.cuda.current_stream().wait_stream(self.side)\n        z = y + 1"),
            "{}",
            fixed.source
        );
    }

    #[test]
    fn clean_source_is_left_alone() {
        let clean = "import torch\n\n\ndef f(x):\n    return x + 1\n";
        let fixed = fix_source(Path::new("f.py"), clean, &Settings::default(), true);
        assert_eq!(fixed.source, clean);
        assert!(fixed.applied.is_empty());
    }
}
