//! Shared helpers of the end-to-end tests: fixture discovery and inline expectations.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The marker that puts an expectation on a line: `# streamlint-expect: SL001, SL003`.
pub const EXPECT_MARKER: &str = "streamlint-expect:";

/// (line, code) pairs a fixture expects, from its inline markers.
pub fn expectations(source: &str) -> BTreeSet<(usize, String)> {
    let mut out = BTreeSet::new();
    for (i, line) in source.lines().enumerate() {
        if let Some((_, codes)) = line.split_once(EXPECT_MARKER) {
            for code in codes.split(',') {
                let code = code.trim();
                if !code.is_empty() {
                    out.insert((i + 1, code.to_string()));
                }
            }
        }
    }
    out
}

/// The repository root (where `fixtures/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every fixture file with `extension` under `fixtures/<language>/`, sorted.
pub fn fixture_files(language: &str, extension: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(
        &repo_root().join("fixtures").join(language),
        extension,
        &mut out,
    );
    out.sort();
    out
}

fn collect(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, extension, out);
        } else if p.extension().is_some_and(|x| x == extension) {
            out.push(p);
        }
    }
}

/// Run the command line in-process (without the program name); returns (exit code, stdout,
/// stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = std::iter::once("streamlint").chain(args.iter().copied());
    let code = streamlint_cli::run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).expect("UTF-8 output"),
        String::from_utf8(err).expect("UTF-8 errors"),
    )
}
