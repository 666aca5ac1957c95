//! Which rules a run reports: `--select` and `--ignore` by code, code prefix, name or `ALL`.

#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Selected codes or prefixes; empty means every rule.
    pub select: Vec<String>,
    pub ignore: Vec<String>,
}

/// Does a selector (code, prefix, name or `ALL`) match a code?
pub fn matches(pattern: &str, code: &str) -> bool {
    let pattern = pattern.trim();
    pattern.eq_ignore_ascii_case("ALL")
        || code.starts_with(&pattern.to_ascii_uppercase())
        || streamlint_rules::rule(pattern).is_some_and(|r| r.code == code)
}

impl Selection {
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
        };
        assert!(s.enabled("SL001") && !s.enabled("SL003") && !s.enabled("SL900"));
        assert!(Selection::default().enabled("SL900"));
        let typo = Selection {
            select: vec!["SL0O1".into()],
            ignore: vec![],
        };
        assert_eq!(typo.unknown_patterns(), vec!["SL0O1".to_string()]);
    }
}
