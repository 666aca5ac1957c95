//! The fixture harness: every fixture must produce exactly the findings its inline
//! `streamlint-expect` markers name, on those lines; files without markers must be clean.

use std::collections::BTreeSet;

use streamlint_linter::{check_source, Settings};
use streamlint_render::LineIndex;
use streamlint_tests::{expectations, fixture_files, repo_root};

#[test]
fn python_fixtures_match_their_expectations() {
    let files = fixture_files("python", "py");
    assert!(files.len() >= 48, "expected the SL001-SL004 fixtures, found {}", files.len());
    let settings = Settings::default();
    let mut failures = Vec::new();
    for path in &files {
        let source = std::fs::read_to_string(path).expect("fixture is readable UTF-8");
        let expected = expectations(&source);
        let index = LineIndex::new(&source);
        let findings = check_source(path, &source, &settings);
        let actual: BTreeSet<(usize, String)> =
            findings.iter().map(|f| (index.position(f.span.start).row, f.code.to_string())).collect();
        let rel = path.strip_prefix(repo_root()).unwrap_or(path).display().to_string();
        for (line, code) in expected.difference(&actual) {
            failures.push(format!("{rel}:{line}: missing {code}"));
        }
        for f in &findings {
            let row = index.position(f.span.start).row;
            if !expected.contains(&(row, f.code.to_string())) {
                failures.push(format!("{rel}:{row}: unexpected {} {}", f.code, f.message));
            }
        }
    }
    assert!(failures.is_empty(), "{} fixture mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Every rule with a page has bad and good fixtures, and every bad file expects something.
#[test]
fn every_rule_has_bad_and_good_fixtures() {
    for rule in streamlint_rules_codes() {
        let dir = repo_root().join("fixtures/python").join(&rule);
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|_| panic!("{} has no fixture folder", rule))
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let bad = names.iter().filter(|n| n.starts_with("bad_")).count();
        let good = names.iter().filter(|n| n.starts_with("good_")).count();
        assert!(bad >= 6 && good >= 6, "{rule}: {bad} bad and {good} good fixtures, want at least 6 each");
        for n in names.iter().filter(|n| n.starts_with("bad_")) {
            let source = std::fs::read_to_string(dir.join(n)).unwrap();
            assert!(
                expectations(&source).iter().any(|(_, c)| *c == rule),
                "{rule}/{n} is a bad fixture without an expectation of {rule}"
            );
        }
    }
}

fn streamlint_rules_codes() -> Vec<String> {
    std::fs::read_dir(repo_root().join("rules"))
        .expect("rules/ exists")
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().strip_suffix(".md").map(str::to_string))
        .collect()
}
