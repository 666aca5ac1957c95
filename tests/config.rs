//! Configuration files and suppressions, end to end: discovery, precedence, every key.

use std::path::Path;

mod support;

use support::{run, Scratch};

fn project(name: &str) -> Scratch {
    let dir = Scratch::new(&format!("config-{name}"));
    std::fs::create_dir_all(dir.join("pkg/gen")).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Two hazards: SL003 (read on `side` without a wait) and SL001 (`y` freed while `side` uses it).
const BUGGY: &str = "import torch\n\ndef f(x: torch.Tensor):\n    side = torch.cuda.Stream()\n    y = x * 2\n    with torch.cuda.stream(side):\n        z = y + 1\n    del y\n    torch.cuda.current_stream().wait_stream(side)\n    z.record_stream(torch.cuda.current_stream())\n    return z\n";

fn codes(out: &str) -> Vec<String> {
    let mut c: Vec<String> = out
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|s| s.split(' ').next().unwrap().to_string())
        .collect();
    c.sort();
    c
}

#[test]
fn pyproject_select_and_ignore_apply_and_the_command_line_wins() {
    let dir = project("select");
    write(
        &dir.join("pyproject.toml"),
        "[project]\nname = \"demo\"\n\n[tool.streamlint]\nignore = [\"SL001\"]\n",
    );
    write(&dir.join("pkg/train.py"), BUGGY);
    let target = dir.join("pkg");
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        target.to_str().unwrap(),
    ]);
    assert_eq!((code, codes(&out)), (1, vec!["SL003".to_string()]), "{out}");
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--ignore",
        "SL003",
        target.to_str().unwrap(),
    ]);
    assert_eq!(
        codes(&out),
        vec!["SL001".to_string()],
        "the command line replaces the file's ignore list"
    );
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--isolated",
        target.to_str().unwrap(),
    ]);
    assert_eq!(
        codes(&out),
        vec!["SL001".to_string(), "SL003".to_string()],
        "--isolated ignores the file"
    );
}

#[test]
fn streamlint_toml_is_preferred_and_can_be_named_explicitly() {
    let dir = project("own-file");
    write(
        &dir.join("pyproject.toml"),
        "[tool.streamlint]\nselect = [\"SL001\"]\n",
    );
    write(&dir.join("pkg/streamlint.toml"), "select = [\"SL003\"]\n");
    write(&dir.join("pkg/train.py"), BUGGY);
    let file = dir.join("pkg/train.py");
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        file.to_str().unwrap(),
    ]);
    assert_eq!(codes(&out), vec!["SL003".to_string()]);
    let config = dir.join("pyproject.toml");
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--config",
        config.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(codes(&out), vec!["SL001".to_string()]);
}

#[test]
fn per_file_ignores_exclude_and_extend_exclude() {
    let dir = project("paths");
    write(
        &dir.join("streamlint.toml"),
        "extend-exclude = [\"gen\"]\n\n[per-file-ignores]\n\"pkg/legacy_*.py\" = [\"SL003\"]\n",
    );
    write(&dir.join("pkg/legacy_train.py"), BUGGY);
    write(&dir.join("pkg/gen/generated.py"), BUGGY);
    write(&dir.join("pkg/build.py"), BUGGY);
    let (_, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert!(
        out.contains("legacy_train.py") && out.contains("SL001"),
        "{out}"
    );
    assert!(
        !out.contains("legacy_train.py:7:13: SL003"),
        "per-file ignore: {out}"
    );
    assert!(!out.contains("generated.py"), "extend-exclude: {out}");
    assert!(
        out.contains("pkg/build.py"),
        "the default exclude of `build` folders does not hide files named build.py: {out}"
    );
    write(&dir.join("streamlint.toml"), "exclude = [\"legacy_*\"]\n");
    let (_, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert!(
        !out.contains("legacy_train.py") && out.contains("generated.py"),
        "exclude replaces the defaults: {out}"
    );
}

#[test]
fn respect_gitignore_can_be_turned_off() {
    let dir = project("gitignore");
    write(&dir.join(".gitignore"), "ignored/\n");
    std::fs::create_dir_all(dir.join("ignored")).unwrap();
    write(&dir.join("ignored/train.py"), BUGGY);
    let (code, _, _) = run(&["check", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    write(&dir.join("streamlint.toml"), "respect-gitignore = false\n");
    let (code, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn api_names_teach_the_model_project_wrappers() {
    let dir = project("api");
    let src = "import torch\nfrom mylib import keep_alive, acc\n\ndef f():\n    side = acc.Stream()\n    side.wait_stream(acc.current_stream())\n    with acc.stream(side):\n        y = torch.ones(4, device=\"cuda\") * 2\n    acc.current_stream().wait_stream(side)\n    keep_alive(y, side)\n    return y + 1\n";
    write(&dir.join("pkg/train.py"), src);
    let file = dir.join("pkg/train.py");
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--isolated",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        codes(&out),
        Vec::<String>::new(),
        "without the names nothing is known: {out}"
    );
    write(
        &dir.join("streamlint.toml"),
        "[api]\ndevice-modules = [\"mylib.acc\"]\n",
    );
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        codes(&out),
        Vec::<String>::new(),
        "an unknown helper may keep `y`: {out}"
    );
    write(&dir.join("streamlint.toml"), "[api]\ndevice-modules = [\"mylib.acc\"]\nrecord-stream-wrappers = [\"mylib.keep_alive\"]\n");
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.contains(":10:5: SL002"),
        "the wrapper records `side`, where `y` was allocated: {out}"
    );
}

#[test]
fn malformed_configuration_is_an_error_naming_file_line_and_key() {
    let dir = project("malformed");
    write(
        &dir.join("pyproject.toml"),
        "[tool.streamlint]\nselect = [\"SL001\"]\nrespect_gitignore = true\n",
    );
    write(&dir.join("pkg/train.py"), BUGGY);
    let (code, out, err) = run(&["check", dir.join("pkg").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("pyproject.toml:3:1") && err.contains("respect_gitignore"),
        "{err}"
    );
    write(
        &dir.join("pyproject.toml"),
        "[tool.streamlint]\nselect = [\"SL0001\"]\n",
    );
    let (code, _, err) = run(&["check", dir.join("pkg").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("pyproject.toml") && err.contains("SL0001"),
        "{err}"
    );
}

#[test]
fn force_exclude_applies_excludes_to_files_named_explicitly() {
    let dir = project("force");
    write(&dir.join("streamlint.toml"), "extend-exclude = [\"gen\"]\n");
    let generated = dir.join("pkg/gen/model.py");
    write(&generated, BUGGY);
    let file = generated.to_string_lossy().into_owned();
    let (code, out, _) = run(&["check", "--output-format", "concise", &file]);
    assert_eq!(code, 1, "a file named explicitly is checked: {out}");
    let (code, out, _) = run(&[
        "check",
        "--force-exclude",
        "--output-format",
        "concise",
        &file,
    ]);
    assert_eq!((code, out.as_str()), (0, ""), "--force-exclude skips it");
    let stdin_name = dir.join("pkg/gen/other.py").to_string_lossy().into_owned();
    let (code, out, _) = support::run_stdin(
        &[
            "check",
            "--force-exclude",
            "--output-format",
            "concise",
            "--stdin-filename",
            &stdin_name,
        ],
        BUGGY,
    );
    assert_eq!((code, out.as_str()), (0, ""), "and stdin named into it");
}

/// A per-file ignore holds for findings the whole run decides too: a helper's hand-off, kept
/// because its caller hands the result to code the analysis does not see, is not reported in a
/// file that ignores its rule.
#[test]
fn per_file_ignores_hold_for_findings_the_run_decides() {
    let dir = project("run-decided");
    let case = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/python/SL003/bad_split_fork_join_result_handed_to_unseen_code");
    for name in ["overlap.py", "moe.py"] {
        write(
            &dir.join(name),
            &std::fs::read_to_string(case.join(name)).unwrap(),
        );
    }
    let (_, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert!(out.contains("overlap.py") && out.contains("SL003"), "{out}");
    write(
        &dir.join("streamlint.toml"),
        "[per-file-ignores]\n\"overlap.py\" = [\"SL003\"]\n",
    );
    let (_, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert!(!out.contains("SL003"), "per-file ignore: {out}");
}
