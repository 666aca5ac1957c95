//! End-to-end tests of the command line: exit codes, output formats, bad input.

use std::path::Path;

mod support;

use support::{repo_root, run, Scratch};

fn fixture(rel: &str) -> String {
    repo_root()
        .join("fixtures/python")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("cli-{name}"))
}

fn write(dir: &Path, name: &str, content: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_string_lossy().into_owned()
}

const BUGGY: &str = "import torch\n\ndef f(x: torch.Tensor):\n    side = torch.cuda.Stream()\n    y = x * 2\n    with torch.cuda.stream(side):\n        z = y + 1\n    return z.sum().item()\n";

#[test]
fn findings_exit_one_and_clean_files_exit_zero() {
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        &fixture("SL001/bad_docs_pattern_del_without_record.py"),
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("SL001"), "{out}");
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        &fixture("SL001/good_docs_pattern.py"),
    ]);
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, _, _) = run(&[
        "check",
        "--exit-zero",
        &fixture("SL001/bad_docs_pattern_del_without_record.py"),
    ]);
    assert_eq!(code, 0);
}

#[test]
fn concise_lines_name_file_position_and_code() {
    let dir = scratch("concise");
    let file = write(&dir, "train.py", BUGGY.as_bytes());
    let (code, out, _) = run(&["check", "--output-format", "concise", &file]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with(&format!(
            "{file}:7:13: SL001 `y` is freed when the function returns"
        )),
        "{out}"
    );
    assert!(
        lines[1].starts_with(&format!("{file}:7:13: SL003 `y` is read on `side`")),
        "{out}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "{file}:8:12: SL003 `z` is read on the current stream"
        )),
        "{out}"
    );
}

#[test]
fn json_has_the_documented_shape() {
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "json",
        &fixture("SL002/bad_record_own_stream_in_block.py"),
    ]);
    assert_eq!(code, 1);
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    let first = &items.as_array().unwrap()[0];
    assert_eq!(first["code"], "SL002");
    assert_eq!(first["name"], "record-stream-wrong-stream");
    assert_eq!(first["severity"], "error");
    assert!(first["message"].as_str().unwrap().contains("does nothing"));
    assert!(first["filename"]
        .as_str()
        .unwrap()
        .ends_with("bad_record_own_stream_in_block.py"));
    assert!(
        first["location"]["row"].as_u64().unwrap() > 0
            && first["location"]["column"].as_u64().unwrap() > 0
    );
    assert!(first["end_location"]["row"].is_u64());
    assert!(first["fix"].is_null());
    assert!(first["url"].as_str().unwrap().ends_with("rules/SL002.md"));
    assert!(first["related"]
        .as_array()
        .is_some_and(|r| !r.is_empty() && r[0]["location"]["row"].is_u64()));
}

#[test]
fn findings_through_a_helper_name_the_helper_and_the_callers_names() {
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "json",
        &fixture("SL003/bad_helper_called_on_two_streams.py"),
    ]);
    assert_eq!(code, 1);
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    let first = &items.as_array().unwrap()[0];
    // The tensor is named as the caller's code names it, not by the helper's local name.
    assert!(first["message"]
        .as_str()
        .unwrap()
        .starts_with("`side_result`"));
    // The write the race is with happened inside the helper, at the call on line 18.
    let related = first["related"].as_array().unwrap();
    let through_helper = related
        .iter()
        .find(|r| r["location"]["row"] == 18)
        .expect("the helper's call is a related location");
    assert!(through_helper["message"]
        .as_str()
        .unwrap()
        .ends_with("bad_helper_called_on_two_streams._compute`)"));
}

#[test]
fn full_output_shows_the_snippet_and_the_fix() {
    let (_, out, _) = run(&["check", &fixture("SL003/bad_self_wait_inside_block.py")]);
    assert!(out.contains("error[SL003]"), "{out}");
    assert!(
        out.contains("help:") && out.contains("Found 1 problem"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "no colour when not on a terminal");
}

#[test]
fn unparsable_and_undecodable_files_are_reported_and_others_still_checked() {
    let dir = scratch("badinput");
    write(&dir, "broken.py", b"import torch\ns = torch.cuda.Stream(\n");
    write(
        &dir,
        "latin1.py",
        b"# stream \xe9\xff\nside = torch.cuda.Stream()\n",
    );
    write(&dir, "train.py", BUGGY.as_bytes());
    let (code, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        out.contains("broken.py:") && out.contains("SL900 could not parse"),
        "{out}"
    );
    assert!(
        out.contains("latin1.py:1:1: SL900 the file is not valid UTF-8"),
        "{out}"
    );
    assert!(out.contains("train.py:7:13: SL003"), "{out}");
}

/// Found under a folder, a file without stream code is not read as source at all.
#[test]
fn files_without_stream_code_are_not_parsed() {
    let dir = scratch("prefilter");
    write(&dir, "plain.py", b"def f(:\n    return 1\n");
    let (code, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn missing_paths_exit_two_but_report_the_rest() {
    let dir = scratch("missing");
    let file = write(&dir, "train.py", BUGGY.as_bytes());
    let (code, out, err) = run(&[
        "check",
        "--output-format",
        "concise",
        &file,
        "does/not/exist.py",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("does/not/exist.py: no such file or directory"),
        "{err}"
    );
    assert!(out.contains("SL003"), "{out}");
    // Nothing to check at all is not a pass either.
    let (code, out, _) = run(&["check", "does/not/exist.py"]);
    assert_eq!(code, 2);
    assert!(!out.contains("All checks passed"), "{out}");
    assert!(out.contains("1 path given does not exist"), "{out}");
}

#[test]
fn selection_filters_rules_and_rejects_unknown_codes() {
    let bad = fixture("SL002/bad_record_own_stream_in_block.py");
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--select",
        "SL003",
        &bad,
    ]);
    assert_eq!((code, out.as_str()), (0, ""));
    // With SL002 off, the hazard it explains is still reported as the free that it leaves unprotected.
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--select",
        "SL001",
        &bad,
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("SL001"), "{out}");
    let (code, _, _) = run(&[
        "check",
        "--ignore",
        "record-stream-wrong-stream,SL001",
        &bad,
    ]);
    assert_eq!(code, 0);
    let (code, _, err) = run(&["check", "--select", "SL0O1", &bad]);
    assert_eq!(code, 2);
    assert!(err.contains("SL0O1"), "{err}");
}

#[test]
fn a_named_file_that_does_not_parse_is_reported_even_without_stream_code() {
    let dir = scratch("named-syntax-error");
    let file = write(&dir, "util.py", b"def scale(x)\n    return x * 2\n");
    let (code, out, _) = run(&["check", &file]);
    assert_eq!(code, 1);
    assert!(
        out.contains("SL900") && out.contains("could not parse"),
        "{out}"
    );
    assert!(out.contains("Found 1 problem in 0 files checked."), "{out}");
}

#[test]
fn rule_pages_are_printed() {
    let (code, out, _) = run(&["rule", "SL001"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("# SL001 missing-record-stream") && out.contains("## Use instead"));
    let (code, out, _) = run(&["rule", "unused-suppression"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("# SL901 unused-suppression"), "{out}");
    let (code, out, _) = run(&["rules"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), streamlint_rules_count());
    let (code, _, err) = run(&["rule", "SL999"]);
    assert_eq!(code, 2);
    assert!(err.contains("SL999"));
}

#[test]
fn directories_skip_hidden_and_virtualenv_folders() {
    let dir = scratch("discovery");
    std::fs::create_dir_all(dir.join(".hidden")).unwrap();
    std::fs::create_dir_all(dir.join("env")).unwrap();
    std::fs::write(dir.join("env/pyvenv.cfg"), "home = /usr\n").unwrap();
    write(&dir.join(".hidden"), "a.py", BUGGY.as_bytes());
    write(&dir.join("env"), "b.py", BUGGY.as_bytes());
    let (code, out, _) = run(&["check", "--output-format", "concise", dir.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn suppression_comments_hide_findings_and_unused_ones_are_reported() {
    let dir = scratch("suppress");
    let suppressed = BUGGY
        .replace(
            "        z = y + 1\n",
            "        z = y + 1  # noqa: SL001, SL003\n",
        )
        .replace(
            "    return z.sum().item()\n",
            "    return z.sum().item()  # streamlint: ignore[SL003]\n",
        );
    let file = write(&dir, "train.py", suppressed.as_bytes());
    let (code, out, _) = run(&["check", "--output-format", "concise", &file]);
    assert_eq!((code, out.as_str()), (0, ""));
    let stale = BUGGY.replace(
        "    y = x * 2\n",
        "    y = x * 2  # streamlint: ignore[SL002]\n",
    );
    let file = write(&dir, "stale.py", stale.as_bytes());
    let (_, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        "--select",
        "SL901",
        &file,
    ]);
    assert!(
        out.contains(":5:") && out.contains("SL901 unused suppression of SL002"),
        "{out}"
    );
}

const BUGGY_RS: &str =
    "use cudarc::driver::{CudaContext, CudaFunction, DriverError, LaunchConfig, PushKernelArg};

pub fn step(f: &CudaFunction, g: &CudaFunction) -> Result<Vec<f32>, DriverError> {
    let ctx = CudaContext::new(0)?;
    unsafe { ctx.disable_event_tracking() };
    let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
    let mut x = a.alloc_zeros::<f32>(1024)?;
    let cfg = LaunchConfig::for_num_elems(1024);
    unsafe { a.launch_builder(f).arg(&mut x).launch(cfg) }?;
    unsafe { b.launch_builder(g).arg(&mut x).launch(cfg) }?;
    b.clone_dtoh(&x)
}
";

#[test]
fn rust_findings_carry_a_join_fix_and_honour_suppressions() {
    let dir = scratch("rust");
    let file = write(&dir, "step.rs", BUGGY_RS.as_bytes());
    let (code, out, _) = run(&["check", "--output-format", "json", &file]);
    assert_eq!(code, 1, "{out}");
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sl003 = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["code"] == "SL003")
        .expect("an SL003 finding");
    assert_eq!(sl003["location"]["row"], 10);
    let edit = &sl003["fix"]["edits"][0];
    assert_eq!(edit["content"], "    b.join(&a)?;\n");
    assert_eq!(
        (
            edit["location"]["row"].as_u64(),
            edit["location"]["column"].as_u64()
        ),
        (Some(10), Some(1))
    );
    let fixed = BUGGY_RS.replace(
        "    unsafe { b.launch",
        "    b.join(&a)?;\n    unsafe { b.launch",
    );
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        &write(&dir, "fixed.rs", fixed.as_bytes()),
    ]);
    assert_eq!((code, out.as_str()), (0, ""));
    let suppressed = BUGGY_RS.replace(
        "launch(cfg) }?;\n    b.clone",
        "launch(cfg) }?; // streamlint: ignore[SL003]\n    b.clone",
    );
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "concise",
        &write(&dir, "quiet.rs", suppressed.as_bytes()),
    ]);
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn a_fix_that_would_split_a_statement_is_not_offered() {
    // The racing use sits on the second line of a statement: a join inserted before that line
    // would land inside the call, so the finding comes without a fix.
    let split = BUGGY_RS.replace(
        "    unsafe { b.launch_builder(g).arg(&mut x).launch(cfg) }?;\n",
        "    let _ = std::convert::identity(\n        unsafe { b.launch_builder(g).arg(&mut x).launch(cfg) }?,\n    );\n",
    );
    let dir = scratch("split");
    let (code, out, _) = run(&[
        "check",
        "--output-format",
        "json",
        &write(&dir, "split.rs", split.as_bytes()),
    ]);
    assert_eq!(code, 1, "{out}");
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sl003 = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["code"] == "SL003")
        .expect("an SL003 finding");
    assert_eq!(sl003["location"]["row"], 11);
    assert!(sl003["fix"].is_null(), "{sl003}");
}

fn streamlint_rules_count() -> usize {
    std::fs::read_dir(repo_root().join("rules"))
        .unwrap()
        .count()
}

#[test]
fn findings_proven_by_a_stream_discipline_are_counted_and_listed_on_request() {
    let good = fixture("SL001/good_fork_join_discipline_kept_by_every_block.py");
    let (code, out, _) = run(&["check", &good]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("3 more findings are proven safe by a stream discipline or at their callers"),
        "{out}"
    );
    let (code, out, _) = run(&["check", "--show-proven", &good]);
    assert_eq!(code, 0, "proven findings are not problems: {out}");
    assert_eq!(out.matches("note[SL001]").count(), 3, "{out}");
    assert!(
        out.contains("proven safe: every block of work on `self.alt_stream` in this module (3 blocks) starts with a wait on the current stream"),
        "{out}"
    );
    // One block that does not wait, and the finding is reported with that block marked.
    let bad = fixture("SL001/bad_fork_join_discipline_broken_by_one_block.py");
    let (code, out, _) = run(&["check", &bad]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("this block on `self.alt_stream` does not start with that wait"),
        "{out}"
    );
    assert!(!out.contains("proven safe"), "{out}");
}

/// `--severity error` leaves out the findings that rest on the contract at function boundaries
/// (warnings); the configuration's `severity` does the same; an unknown level is an error.
#[test]
fn severity_selects_how_sure_a_finding_is() {
    let contract = fixture("SL003/bad_pooled_output_taken_after_side_stream_waited.py");
    let seen_whole = fixture("SL001/bad_docs_pattern_del_without_record.py");
    let args = |extra: &[&str]| {
        let mut a = vec!["check", "--isolated", "--output-format", "concise"];
        a.extend_from_slice(extra);
        a.extend([contract.as_str(), seen_whole.as_str()]);
        run(&a)
    };
    let (code, all, _) = args(&[]);
    assert_eq!(code, 1);
    assert!(all.contains("SL003") && all.contains("SL001"), "{all}");
    let (code, errors, _) = args(&["--severity", "error"]);
    assert_eq!(code, 1);
    assert!(
        !errors.contains("SL003") && errors.contains("SL001"),
        "{errors}"
    );
    let (code, _, err) = args(&["--severity", "fatal"]);
    assert_eq!(code, 2, "{err}");

    let dir = scratch("severity");
    write(
        &dir,
        "pyproject.toml",
        b"[tool.streamlint]\nseverity = \"error\"\n",
    );
    let file = write(
        &dir,
        "pooled.py",
        &std::fs::read(&contract).expect("fixture is readable"),
    );
    let (code, out, _) = run(&["check", "--output-format", "concise", &file]);
    assert_eq!(code, 0, "{out}");
    write(
        &dir,
        "pyproject.toml",
        b"[tool.streamlint]\nseverity = \"loud\"\n",
    );
    let (code, _, err) = run(&["check", &file]);
    assert_eq!(code, 2);
    assert!(err.contains("severity"), "{err}");
}

/// A finding that holds because an ordering runs under a test says which case skips it, and
/// marks the ordering.
#[test]
fn findings_on_one_path_name_the_test_that_leads_there() {
    let (code, out, _) = run(&[
        "check",
        "--isolated",
        &fixture("SL007/bad_host_read_synced_only_on_logging_steps.py"),
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("(when `step % log_every == 0` is false)")
            && out.contains("this does not run when `step % log_every == 0` is false"),
        "{out}"
    );
}
