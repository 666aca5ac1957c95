//! The fixture harness: every fixture must produce exactly the findings its inline
//! `streamlint-expect` markers name, on those lines; files without markers must be clean.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use streamlint_linter::{check_files, check_source, Settings};
use streamlint_rules::{Applicability, Finding};
mod support;

use support::{all_fixture_files, expectations, fixture_files, mismatches, repo_root};

#[test]
fn python_fixtures_match_their_expectations() {
    let files = fixture_files("python", "py");
    assert!(
        files.len() >= 108,
        "expected the SL001-SL009 fixtures, found {}",
        files.len()
    );
    check_fixtures(&files);
}

#[test]
fn rust_fixtures_match_their_expectations() {
    let files = fixture_files("rust", "rs");
    assert!(
        files.len() >= 64,
        "expected the Rust fixtures, found {}",
        files.len()
    );
    check_fixtures(&files);
}

/// A fixture file is a case of its own, or one module of a case folder (`bad_*/`, `good_*/`):
/// a small project whose files are checked together, as a run checks a project.
fn check_fixtures(files: &[PathBuf]) {
    let settings = Settings::default();
    let mut failures = Vec::new();
    let mut cases: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for path in files {
        match case_folder(path) {
            Some(folder) => cases.entry(folder).or_default().push(path.clone()),
            None => {
                let source = std::fs::read_to_string(path).expect("fixture is readable UTF-8");
                let findings = check_source(path, &source, &settings);
                compare(path, &source, &findings, &mut failures);
            }
        }
    }
    for case in cases.values() {
        for report in check_files(case, &settings) {
            let source = std::fs::read_to_string(&report.path).expect("readable UTF-8");
            compare(&report.path, &source, &report.findings, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Record where `findings` on the fixture at `path` differ from its expectations.
fn compare(path: &Path, source: &str, findings: &[Finding], failures: &mut Vec<String>) {
    let rel = path
        .strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string();
    for m in mismatches(source, findings) {
        failures.push(format!("{rel}:{m}"));
    }
}

/// The case folder (`bad_*` or `good_*`) a fixture file belongs to, if any.
fn case_folder(path: &Path) -> Option<PathBuf> {
    path.ancestors().skip(1).find_map(|dir| {
        let name = dir.file_name()?.to_str()?;
        (name.starts_with("bad_") || name.starts_with("good_")).then(|| dir.to_path_buf())
    })
}

/// Every rule with a page has bad and good fixtures in each of its languages, and every bad file
/// expects something.
#[test]
fn every_rule_has_bad_and_good_fixtures() {
    for (rule, language, least) in rule_languages() {
        let dir = repo_root().join("fixtures").join(&language).join(&rule);
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|_| panic!("{} has no fixture folder", rule))
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let bad = names.iter().filter(|n| n.starts_with("bad_")).count();
        let good = names.iter().filter(|n| n.starts_with("good_")).count();
        assert!(
            bad >= least && good >= least,
            "{language}/{rule}: {bad} bad and {good} good fixtures, want at least {least} each"
        );
        for n in names.iter().filter(|n| n.starts_with("bad_")) {
            // A case folder expects something in one of its files.
            let case = dir.join(n);
            let source = if case.is_dir() {
                let extension = if language == "python" { "py" } else { "rs" };
                fixture_files(&language, extension)
                    .iter()
                    .filter(|f| f.starts_with(&case))
                    .map(|f| std::fs::read_to_string(f).unwrap())
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                std::fs::read_to_string(&case).unwrap()
            };
            assert!(
                expectations(&source).iter().any(|(_, c)| *c == rule),
                "{rule}/{n} is a bad fixture without an expectation of {rule}"
            );
        }
    }
}

/// (rule, language, fewest fixtures of each kind) from the front matter of every rule page (two
/// of each for the codes about the run itself, SL900 and SL901, whose cases are few).
fn rule_languages() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for page in std::fs::read_dir(repo_root().join("rules"))
        .expect("rules/ exists")
        .flatten()
    {
        let name = page.file_name().to_string_lossy().into_owned();
        let Some(code) = name.strip_suffix(".md") else {
            continue;
        };
        let about_the_run = streamlint_rules::META.iter().any(|m| m.code == code);
        let text = std::fs::read_to_string(page.path()).unwrap();
        let languages = text
            .lines()
            .find_map(|l| l.strip_prefix("languages:"))
            .expect("front matter lists languages");
        for language in languages
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
        {
            let language = language.trim().to_string();
            let least = match (about_the_run, language.as_str()) {
                (true, _) => 2,
                (false, "python") => 6,
                (false, _) => 4,
            };
            out.push((code.to_string(), language, least));
        }
    }
    out
}

/// Every fix offered on a fixture keeps the file parsing, removes the finding it is for and
/// brings no new one; and the fixes users rely on exist: `record_stream` (SL001, and before a
/// hand-off in SL004), an inserted wait (before the use, or before the block that makes the
/// waiting stream current) and a hoisted self-wait (SL003), a stream block (SL008), `join` in
/// Rust.
#[test]
fn fixes_remove_their_findings_and_add_none() {
    let settings = Settings::default();
    let mut fixed: Vec<(String, String, Applicability)> = Vec::new();
    let mut failures = Vec::new();
    for path in all_fixture_files() {
        let source = std::fs::read_to_string(&path).expect("fixture is readable UTF-8");
        let before = check_source(&path, &source, &settings);
        let rel = path
            .strip_prefix(repo_root())
            .unwrap_or(&path)
            .display()
            .to_string();
        for finding in &before {
            let Some(fix) = &finding.fix else { continue };
            // A fix orders what needs ordering; it never stalls the host to do it.
            let stalls = fix
                .text_edits(&source)
                .iter()
                .any(|e| e.content.contains("synchronize("));
            if stalls {
                failures.push(format!("{rel}: `{}` adds a host synchronize", fix.message));
            }
            let after = fix.apply(&source);
            let again = check_source(&path, &after, &settings);
            if again.iter().any(|f| f.code == "SL900") {
                failures.push(format!("{rel}: the fixed file does not parse"));
            }
            if again.iter().filter(|f| f.code == finding.code).count()
                >= before.iter().filter(|f| f.code == finding.code).count()
            {
                failures.push(format!(
                    "{rel}: {} remains after `{}`",
                    finding.code, fix.message
                ));
            }
            for new in again
                .iter()
                .filter(|f| !before.iter().any(|b| b.code == f.code))
            {
                failures.push(format!(
                    "{rel}: `{}` brings {}: {}",
                    fix.message, new.code, new.message
                ));
            }
            fixed.push((rel.clone(), fix.message.clone(), fix.applicability));
        }
    }
    assert!(
        failures.is_empty(),
        "{} fix failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let offered = |dir: &str, message: &str, applicability: Applicability| {
        fixed.iter().any(|(rel, m, a)| {
            rel.starts_with(dir) && m.starts_with(message) && *a == applicability
        })
    };
    use Applicability::{Safe, Unsafe};
    assert!(
        offered("fixtures/python/SL001", "record `", Safe),
        "{fixed:#?}"
    );
    assert!(
        offered("fixtures/python/SL003", "make ", Safe),
        "{fixed:#?}"
    );
    assert!(
        offered("fixtures/python/SL003", "move the wait before", Safe),
        "{fixed:#?}"
    );
    // The wait before the block that makes the waiting stream current, and the record of the
    // current stream before a hand-off.
    assert!(
        offered(
            "fixtures/python/SL003",
            "make `self.copy_stream` wait for the current stream",
            Safe
        ),
        "{fixed:#?}"
    );
    assert!(
        offered(
            "fixtures/python/SL004",
            "record `batch` on the current stream",
            Unsafe
        ),
        "{fixed:#?}"
    );
    assert!(
        offered("fixtures/python/SL008", "turn the set/restore pair", Safe),
        "{fixed:#?}"
    );
    assert!(
        offered("fixtures/rust/SL003", "make ", Unsafe),
        "{fixed:#?}"
    );
    assert!(
        fixed.len() >= 50,
        "expected fixes on the bad fixtures, found {}",
        fixed.len()
    );
}

/// SL010 is an error where another stream can observe the early event, a note with one stream.
#[test]
fn guard_dropped_early_is_a_note_with_one_stream() {
    let severity = |name: &str| {
        let path = repo_root().join("fixtures/rust/SL010").join(name);
        let source = std::fs::read_to_string(&path).expect("fixture is readable UTF-8");
        let findings = check_source(&path, &source, &Settings::default());
        assert_eq!(findings.len(), 1, "{name}: {findings:?}");
        findings[0].severity
    };
    use streamlint_rules::Severity;
    assert_eq!(severity("bad_single_stream_dot0_note.rs"), Severity::Info);
    assert_eq!(
        severity("bad_dot0_mut_split_vec_element.rs"),
        Severity::Error
    );
}

/// `--fix` and `--fix --unsafe-fixes` on each bad fixture as a whole: the fixed file parses,
/// every finding whose fix applies is gone, and no code appears that was not there before.
#[test]
fn fixing_each_fixture_safe_then_unsafe_leaves_no_fixable_finding() {
    let settings = Settings::default();
    let mut failures = Vec::new();
    for path in all_fixture_files() {
        let source = std::fs::read_to_string(&path).expect("fixture is readable UTF-8");
        let before = check_source(&path, &source, &settings);
        if before.iter().all(|f| f.fix.is_none()) {
            continue;
        }
        for unsafe_fixes in [false, true] {
            let fixed = streamlint_linter::fix_source(&path, &source, &settings, unsafe_fixes);
            let flags = if unsafe_fixes {
                "--fix --unsafe-fixes"
            } else {
                "--fix"
            };
            let path = path.display();
            if fixed.remaining.iter().any(|f| f.code == "SL900") {
                failures.push(format!("{path}: {flags} leaves a file that does not parse"));
            }
            for f in &fixed.remaining {
                if streamlint_linter::applicable(f, unsafe_fixes) {
                    failures.push(format!("{path}: {flags} leaves a fixable {}", f.code));
                }
                if !before.iter().any(|b| b.code == f.code) {
                    failures.push(format!("{path}: {flags} brings {}: {}", f.code, f.message));
                }
            }
            if fixed.remaining.len() > before.len() {
                failures.push(format!(
                    "{path}: {flags} leaves more findings than it found"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
