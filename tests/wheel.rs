//! The Python package: the wheel maturin builds from this working tree installs into a fresh
//! virtual environment with no Rust toolchain on `PATH`, its `streamlint` command and
//! `python -m streamlint` work on the fixtures, and the pre-commit configuration of
//! docs/pre-commit.md (`language: python`, streamlint from a package index), read from that page,
//! fails on a buggy file and passes on a correct one, run by the real pre-commit against the
//! local wheel.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

use support::{git, python_tools, repo_root, Scratch};

/// The version the wheel carries: the crate's.
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Build the wheel for this platform into `dir` (the release build of the workspace is reused);
/// its path.
fn build_wheel(dir: &Path) -> PathBuf {
    let out = Command::new(python_tools().join("maturin"))
        .args(["build", "--release", "--quiet", "--out"])
        .arg(dir)
        .current_dir(repo_root())
        .output()
        .expect("maturin runs");
    assert!(out.status.success(), "maturin build:\n{}", text(&out));
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    wheels[0].clone()
}

/// A `PATH` of `first` and the system's own folders, where the Rust toolchain cannot be run:
/// `cargo` and `rustc` are found first in `blocked`, as commands that fail, whatever the machine
/// has installed.
fn path_without_rust(first: &Path, blocked: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(blocked).unwrap();
    for tool in ["cargo", "rustc", "rustup"] {
        let script = blocked.join(tool);
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho \"{tool} was run: the install needs Rust\" >&2\nexit 127\n"),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    [blocked, first]
        .iter()
        .map(|p| p.display().to_string())
        .chain(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from))
        .collect::<Vec<_>>()
        .join(":")
}

/// Run `program args` in the repository with only `path` to find programs.
fn run_with_path(path: &str, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(repo_root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"))
}

#[test]
fn the_wheel_installs_without_rust_and_its_pre_commit_hook_works() {
    let scratch = Scratch::new("wheel");
    let wheels = scratch.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let wheel = build_wheel(&wheels);

    // A fresh environment; the wheel installs from the file alone.
    let venv = scratch.join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let pip = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--no-index",
            "--disable-pip-version-check",
        ])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(pip.status.success(), "{}", text(&pip));

    let path = path_without_rust(&venv.join("bin"), &scratch.join("no-rust"));
    let version = run_with_path(&path, "streamlint", &["--version"]);
    assert_eq!(text(&version).trim(), format!("streamlint {VERSION}"));
    let module = run_with_path(&path, "python", &["-m", "streamlint", "--version"]);
    assert_eq!(text(&module).trim(), format!("streamlint {VERSION}"));

    let bad = "fixtures/python/SL001/bad_runtime_side_features_del.py";
    let out = run_with_path(
        &path,
        "streamlint",
        &["check", "--isolated", "--output-format", "concise", bad],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{bad}:16:5: SL001")),
        "{}",
        text(&out)
    );
    let good = "fixtures/python/SL001/good_runtime_side_features_del.py";
    let out = run_with_path(
        &path,
        "python",
        &["-m", "streamlint", "check", "--isolated", good],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // The documented hook: streamlint installed by pre-commit from a package index (here, the
    // folder holding the wheel, with the build tools pre-commit's own environment needs), no
    // Rust anywhere.
    let fetched = Command::new(python_tools().join("pip"))
        .args([
            "download",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "-d",
        ])
        .arg(&wheels)
        .args(["setuptools", "wheel"])
        .output()
        .unwrap();
    assert!(fetched.status.success(), "{}", text(&fetched));
    let project = scratch.join("project");
    std::fs::create_dir_all(&project).unwrap();
    // The configuration exactly as docs/pre-commit.md gives it (its first YAML block), which
    // must pin this version.
    let docs = std::fs::read_to_string(repo_root().join("docs/pre-commit.md")).unwrap();
    let config = docs
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/pre-commit.md gives a YAML configuration");
    assert!(
        config.contains(&format!("streamlint=={VERSION}")),
        "docs/pre-commit.md pins another version:\n{config}"
    );
    std::fs::write(project.join(".pre-commit-config.yaml"), config).unwrap();
    let fixture = |rel: &str| std::fs::read_to_string(repo_root().join(rel)).unwrap();
    std::fs::write(project.join("features.py"), fixture(bad)).unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);
    let pre_commit = || {
        let tools = python_tools();
        Command::new(tools.join("pre-commit"))
            .args(["run", "--all-files", "--color", "never"])
            .current_dir(&project)
            .env_clear()
            .env("PATH", format!("{}:{path}", tools.display()))
            .env("HOME", scratch.join("home"))
            .env("PRE_COMMIT_HOME", scratch.join("cache"))
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", &wheels)
            .output()
            .expect("pre-commit runs")
    };
    let out = pre_commit();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the buggy file fails:\n{}",
        text(&out)
    );
    let shown = text(&out);
    assert!(
        shown.contains("error[SL001]") && shown.contains("features.py:16:5"),
        "{shown}"
    );
    std::fs::write(project.join("features.py"), fixture(good)).unwrap();
    git(&project, &["add", "-A"]);
    let out = pre_commit();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the correct file passes:\n{}",
        text(&out)
    );
}
