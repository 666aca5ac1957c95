//! The shape generator: every single-file Python fixture rewritten in ways whose effect on the
//! verdict is known, and the verdict checked.
//!
//! - Rewrites that keep the meaning (locals renamed, `torch` imported another way, a function's
//!   body under a condition, module functions as methods of a class, the file split in two, the
//!   stream owned by a small project class) must keep every finding on its line and add none.
//! - In a good fixture, each ordering statement the program needs (its removal is flagged) is
//!   put under a condition, alone and with another statement beside it: the path that skips it
//!   has the hazard, so something must be flagged.
//!
//! The table of kept/applicable per rewrite is printed (`cargo test --test shapes --
//! --nocapture`). Cases the analysis does not yet hold are listed in
//! `tests/data/shape-gaps.txt`; the test fails on a case that breaks and is not listed, and on a
//! listed case that now holds (remove it: the list only shrinks). `STREAMLINT_BLESS_SHAPES=1`
//! rewrites the list.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use streamlint_linter::{check_files, check_source, Settings};
use streamlint_rules::Finding;

mod shape_rewrites;
mod support;

use shape_rewrites::{Files, Variant};
use support::{expectations, fixture_files, mismatches, repo_root};

/// A rewrite that must keep the verdict.
type Rewrite = fn(&str, &[ruff_python_ast::Stmt]) -> Vec<Variant>;

const SAME_VERDICT: &[(&str, Rewrite)] = &[
    ("rename-locals", shape_rewrites::rename_locals),
    ("import-alias", shape_rewrites::import_alias),
    ("from-import", shape_rewrites::from_import),
    ("body-under-flag", shape_rewrites::body_under_flag),
    ("functions-into-class", shape_rewrites::functions_into_class),
    ("split-file", shape_rewrites::split_file),
    ("stream-wrapper", shape_rewrites::stream_wrapper),
];

const SYNC_UNDER_FLAG: &str = "sync-under-flag";
const SYNC_UNDER_FLAG_BESIDE: &str = "sync-under-flag-beside";

/// One rewritten case: which rewrite, which fixture, which variant, and what went wrong (if it
/// did).
struct Outcome {
    rewrite: &'static str,
    fixture: String,
    variant: String,
    failure: Option<String>,
}

#[test]
fn rewrites_keep_or_change_verdicts_as_expected() {
    let fixtures: Vec<PathBuf> = fixture_files("python", "py")
        .into_iter()
        .filter(|p| !in_case_folder(p))
        .collect();
    assert!(fixtures.len() >= 300, "found {} fixtures", fixtures.len());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunks: Vec<&[PathBuf]> = fixtures.chunks(fixtures.len().div_ceil(workers)).collect();
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shapes");
    let _ = std::fs::remove_dir_all(&scratch);
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let dir = scratch.join(i.to_string());
                scope.spawn(move || {
                    let settings = Settings::default();
                    chunk
                        .iter()
                        .flat_map(|path| outcomes_of(path, &settings, &dir))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a shape worker panicked"))
            .collect()
    });
    print_table(&outcomes);
    compare_with_known_gaps(&outcomes);
}

fn in_case_folder(path: &Path) -> bool {
    path.ancestors().skip(1).any(|dir| {
        dir.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("bad_") || n.starts_with("good_"))
    })
}

/// Every rewrite of the fixture at `path`, checked.
fn outcomes_of(path: &Path, settings: &Settings, scratch: &Path) -> Vec<Outcome> {
    let source = std::fs::read_to_string(path).expect("fixture is readable UTF-8");
    let Some(module) = shape_rewrites::parse(&source) else {
        return Vec::new();
    };
    let fixture = path
        .strip_prefix(repo_root().join("fixtures/python"))
        .unwrap_or(path)
        .display()
        .to_string();
    let mut out = Vec::new();
    for (rewrite, make) in SAME_VERDICT {
        for variant in make(&source, &module) {
            let failure = same_verdict(path, &variant.files, settings, scratch);
            out.push(Outcome {
                rewrite,
                fixture: fixture.clone(),
                variant: variant.id,
                failure,
            });
        }
    }
    let good = expectations(&source).is_empty()
        && path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("good_"));
    if good {
        for stmt in shape_rewrites::ordering_statements(&source, &module) {
            let removed = shape_rewrites::without(&source, stmt);
            if check_source(path, &removed, settings).is_empty() {
                continue; // not needed by the program: nothing to learn from a condition
            }
            let line = source[..stmt.range.start().to_usize()].lines().count() + 1;
            let text =
                source[stmt.range.start().to_usize()..stmt.range.end().to_usize()].to_string();
            for (rewrite, beside) in [(SYNC_UNDER_FLAG, false), (SYNC_UNDER_FLAG_BESIDE, true)] {
                let rewritten = shape_rewrites::under_flag(&source, stmt, beside);
                let flagged = !check_source(path, &rewritten, settings).is_empty();
                out.push(Outcome {
                    rewrite,
                    fixture: fixture.clone(),
                    variant: format!("line {line}"),
                    failure: (!flagged).then(|| format!("`{text}` under a condition: silent")),
                });
            }
        }
    }
    out
}

/// Where the rewritten files' findings differ from their inline expectations, if anywhere.
fn same_verdict(
    original: &Path,
    files: &Files,
    settings: &Settings,
    scratch: &Path,
) -> Option<String> {
    let mut problems = Vec::new();
    if let [(_, source)] = files.as_slice() {
        let findings = check_source(original, source, settings);
        problems.extend(mismatches(source, &findings));
    } else {
        let dir = scratch.join(
            original
                .file_stem()
                .map_or("case".into(), |s| s.to_string_lossy().into_owned()),
        );
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let paths: Vec<PathBuf> = files
            .iter()
            .map(|(name, text)| {
                let p = dir.join(name);
                std::fs::write(&p, text).expect("scratch file");
                p
            })
            .collect();
        let reports = check_files(&paths, settings);
        for (name, text) in files {
            let findings: Vec<Finding> = reports
                .iter()
                .filter(|r| r.path.file_name().is_some_and(|n| n == name.as_str()))
                .flat_map(|r| r.findings.clone())
                .collect();
            problems.extend(
                mismatches(text, &findings)
                    .into_iter()
                    .map(|m| format!("{name}:{m}")),
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

fn print_table(outcomes: &[Outcome]) {
    let mut table: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for o in outcomes {
        let row = table.entry(o.rewrite).or_default();
        row.1 += 1;
        if o.failure.is_none() {
            row.0 += 1;
        }
    }
    println!("| rewrite | kept / applicable | kept |");
    println!("|---|---|---|");
    for (rewrite, (kept, all)) in table {
        println!(
            "| {rewrite} | {kept} / {all} | {:.1}% |",
            100.0 * kept as f64 / all.max(1) as f64
        );
    }
}

fn gaps_file() -> PathBuf {
    repo_root().join("tests/data/shape-gaps.txt")
}

fn key(o: &Outcome) -> String {
    format!("{}\t{}\t{}", o.rewrite, o.fixture, o.variant)
}

/// The test fails on a broken case not listed as a known gap, and on a listed gap that holds.
fn compare_with_known_gaps(outcomes: &[Outcome]) {
    let failing: BTreeMap<String, &str> = outcomes
        .iter()
        .filter_map(|o| Some((key(o), o.failure.as_deref()?)))
        .collect();
    if std::env::var_os("STREAMLINT_BLESS_SHAPES").is_some() {
        let mut text = String::from(
            "# Rewrites the analysis does not yet hold (tests/shapes.rs): rewrite, fixture, variant.\n\
             # This list only shrinks; a case that breaks must be fixed, not added.\n",
        );
        for k in failing.keys() {
            text.push_str(k);
            text.push('\n');
        }
        std::fs::write(gaps_file(), text).expect("the gaps file is writable");
        return;
    }
    let known_text = std::fs::read_to_string(gaps_file()).unwrap_or_default();
    let known: std::collections::BTreeSet<&str> = known_text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let mut problems = Vec::new();
    for (k, why) in &failing {
        if !known.contains(k.as_str()) {
            problems.push(format!("broke: {k}: {why}"));
        }
    }
    let applicable: std::collections::BTreeSet<String> = outcomes.iter().map(key).collect();
    for k in &known {
        if !failing.contains_key(*k) {
            let state = if applicable.contains(*k) {
                "now holds"
            } else {
                "no longer applies"
            };
            problems.push(format!(
                "{state}, remove it from tests/data/shape-gaps.txt: {k}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} shape cases differ from tests/data/shape-gaps.txt:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
