//! This repository as a pre-commit hook, run by the real `pre-commit` tool: a project that
//! points its `.pre-commit-config.yaml` here fails on a buggy file, naming the rule, and passes
//! on a correct one. pre-commit builds the hook with `cargo install`, as users' machines do.

use std::path::Path;
use std::process::Command;

mod support;

use support::{git, python_tools, repo_root, Scratch};

/// A git repository holding this working tree as it is now (committed or not), so the hook
/// under test is the code under test.
fn hook_repository(dir: &Path) -> String {
    let listed = git(
        &repo_root(),
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    );
    for rel in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).expect("UTF-8 paths"));
        let from = repo_root().join(rel);
        if !from.is_file() {
            continue;
        }
        let to = dir.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "hook under test"]);
    String::from_utf8(git(dir, &["rev-parse", "HEAD"]).stdout)
        .unwrap()
        .trim()
        .to_string()
}

/// Runs `pre-commit run --all-files` in `project`; returns its exit code and all it printed.
fn pre_commit(project: &Path, cache: &Path) -> (Option<i32>, String) {
    let out = Command::new(python_tools().join("pre-commit"))
        .args(["run", "--all-files", "--color", "never"])
        .current_dir(project)
        .env("PRE_COMMIT_HOME", cache)
        // One build shared by the hook's install and later runs of this test.
        .env(
            "CARGO_TARGET_DIR",
            repo_root().join("target/pre-commit-build"),
        )
        .output()
        .expect("pre-commit runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn pre_commit_runs_the_hook_and_fails_only_on_buggy_files() {
    let scratch = Scratch::new("pre-commit");
    let hooks = scratch.join("hook-repo");
    let project = scratch.join("project");
    let cache = scratch.join("cache");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let rev = hook_repository(&hooks);
    std::fs::write(
        project.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: {}\n    rev: {rev}\n    hooks:\n      - id: streamlint\n",
            hooks.display()
        ),
    )
    .unwrap();
    let fixture =
        |rel: &str| std::fs::read_to_string(repo_root().join("fixtures/python").join(rel)).unwrap();
    std::fs::write(
        project.join("offload.py"),
        fixture("SL001/bad_kv_offload_del_block.py"),
    )
    .unwrap();
    std::fs::write(project.join("README.txt"), "not Python, not checked\n").unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);

    let (code, text) = pre_commit(&project, &cache);
    assert_eq!(code, Some(1), "the buggy file fails the hook:\n{text}");
    assert!(
        text.contains("offload.py:20:9: SL001"),
        "the failure names file, line and rule:\n{text}"
    );

    std::fs::write(
        project.join("offload.py"),
        fixture("SL001/good_aux_head_record_both_ways.py"),
    )
    .unwrap();
    git(&project, &["add", "-A"]);
    let (code, text) = pre_commit(&project, &cache);
    assert_eq!(code, Some(0), "the correct file passes:\n{text}");
    assert!(
        text.contains("streamlint") && text.contains("Passed"),
        "{text}"
    );
}
