//! Which findings a run reports: `--select` and `--ignore` by code, code prefix, name or `ALL`,
//! and `--severity` by how sure the verdict is.

use streamlint_rules::Severity;

#[derive(Clone, Debug)]
pub struct Selection {
    /// Selected codes or prefixes; empty means every rule.
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    /// The least severity reported: `error` keeps the findings seen whole and drops those that
    /// rest on the contract at function boundaries (warnings) and the hints (info).
    pub min_severity: Severity,
}

impl Default for Selection {
    fn default() -> Selection {
        Selection {
            select: Vec::new(),
            ignore: Vec::new(),
            min_severity: Severity::Info,
        }
    }
}

/// A severity as users spell it (`error`, `warning`, `info`).
pub fn parse_severity(text: &str) -> Option<Severity> {
    match text.trim().to_ascii_lowercase().as_str() {
        "error" => Some(Severity::Error),
        "warning" => Some(Severity::Warning),
        "info" => Some(Severity::Info),
        _ => None,
    }
}

/// Does a selector (code, prefix, name or `ALL`) match a code?
pub fn matches(pattern: &str, code: &str) -> bool {
    let pattern = pattern.trim();
    pattern.eq_ignore_ascii_case("ALL")
        || code.starts_with(&pattern.to_ascii_uppercase())
        || streamlint_rules::rule(pattern).is_some_and(|r| r.code == code)
}

impl Selection {
    /// Is a finding of this severity reported?
    pub fn shows(&self, severity: Severity) -> bool {
        severity >= self.min_severity
    }

    pub fn enabled(&self, code: &str) -> bool {
        let selected = self.select.is_empty() || self.select.iter().any(|p| matches(p, code));
        selected && !self.ignore.iter().any(|p| matches(p, code))
    }

    /// Patterns that name no rule: a typo the user should hear about.
    pub fn unknown_patterns(&self) -> Vec<String> {
        let codes: Vec<&str> = streamlint_rules::RULES
            .iter()
            .chain(streamlint_rules::META)
            .map(|r| r.code)
            .collect();
        self.select
            .iter()
            .chain(&self.ignore)
            .filter(|p| !codes.iter().any(|c| matches(p, c)))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_and_ignore() {
        let s = Selection {
            select: vec!["SL00".into()],
            ignore: vec!["missing-stream-wait".into()],
            ..Selection::default()
        };
        assert!(s.enabled("SL001") && !s.enabled("SL003") && !s.enabled("SL900"));
        assert!(Selection::default().enabled("SL900"));
        let typo = Selection {
            select: vec!["SL0O1".into()],
            ignore: vec![],
            ..Selection::default()
        };
        assert_eq!(typo.unknown_patterns(), vec!["SL0O1".to_string()]);
    }

    #[test]
    fn severity_threshold() {
        let errors = Selection {
            min_severity: parse_severity("Error").unwrap(),
            ..Selection::default()
        };
        assert!(errors.shows(Severity::Error) && !errors.shows(Severity::Warning));
        assert!(Selection::default().shows(Severity::Info));
        assert_eq!(parse_severity("fatal"), None);
    }
}
