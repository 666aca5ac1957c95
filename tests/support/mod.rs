//! Shared helpers of the end-to-end tests: fixture discovery, inline expectations, running the
//! command line in-process.
#![allow(dead_code)] // each test file uses its own part of the helpers

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

/// Where `findings` on `source` differ from its inline expectations: `line: missing CODE` and
/// `line: unexpected CODE message`.
pub fn mismatches(source: &str, findings: &[streamlint_rules::Finding]) -> Vec<String> {
    let expected = expectations(source);
    let index = streamlint_render::LineIndex::new(source);
    let actual: BTreeSet<(usize, String)> = findings
        .iter()
        .map(|f| (index.position(f.span.start).row, f.code.to_string()))
        .collect();
    let mut out: Vec<String> = expected
        .difference(&actual)
        .map(|(line, code)| format!("{line}: missing {code}"))
        .collect();
    for f in findings {
        let row = index.position(f.span.start).row;
        if !expected.contains(&(row, f.code.to_string())) {
            out.push(format!("{row}: unexpected {} {}", f.code, f.message));
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

/// Every Python and Rust fixture file, Python first.
pub fn all_fixture_files() -> Vec<PathBuf> {
    let mut out = fixture_files("python", "py");
    out.extend(fixture_files("rust", "rs"));
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

/// Run the command line in-process (without the program name) with an empty stdin; returns
/// (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    run_stdin(args, "")
}

/// Run the command line in-process with `input` on stdin.
pub fn run_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = std::iter::once("streamlint").chain(args.iter().copied());
    let code = streamlint_cli::run_with_stdin(argv, &mut input.as_bytes(), &mut out, &mut err);
    (
        code,
        String::from_utf8(out).expect("UTF-8 output"),
        String::from_utf8(err).expect("UTF-8 errors"),
    )
}

/// A directory of its own for one test, removed when the test is done with it.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("streamlint-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory can be made");
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `bin` folder of a Python environment holding the pinned tools in
/// `tests/tools-requirements.txt`, created under `target/test-tools` on first use (it needs
/// `python3` with `venv` and access to PyPI). Tests that drive real consumers call this, and fail
/// with the reason when the environment cannot be made: they never skip silently.
pub fn python_tools() -> PathBuf {
    static TOOLS: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    TOOLS
        .get_or_init(make_python_tools)
        .clone()
        .unwrap_or_else(|e| panic!("cannot set up the test tools: {e}"))
}

fn make_python_tools() -> Result<PathBuf, String> {
    let requirements = repo_root().join("tests/tools-requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).map_err(|e| e.to_string())?;
    let root = repo_root().join("target/test-tools");
    let bin = root.join("venv/bin");
    let stamp = root.join("installed-requirements.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|have| have == wanted) {
        return Ok(bin);
    }
    let status = |cmd: &mut std::process::Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    status(
        std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(root.join("venv")),
    )?;
    status(
        std::process::Command::new(bin.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements),
    )?;
    std::fs::write(&stamp, wanted).map_err(|e| e.to_string())?;
    Ok(bin)
}

/// Run git in `dir` with a test identity; panics with its message when it fails.
pub fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=streamlint tests",
            "-c",
            "user.email=tests@streamlint.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
