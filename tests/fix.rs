//! `--fix`, `--diff`, `--unsafe-fixes`, stdin and the reporting options, end to end.

use std::path::Path;

mod support;

use support::{repo_root, run, run_stdin, Scratch};

/// Copies fixtures into a scratch project and returns their paths there.
fn project(name: &str, fixtures: &[&str]) -> (Scratch, Vec<String>) {
    let dir = Scratch::new(&format!("fix-{name}"));
    let paths = fixtures
        .iter()
        .map(|rel| {
            let from = repo_root().join("fixtures").join(rel);
            let to = dir.join(Path::new(rel).file_name().unwrap());
            std::fs::copy(&from, &to).unwrap();
            to.to_string_lossy().into_owned()
        })
        .collect();
    (dir, paths)
}

const PY_FIXABLE: &[&str] = &[
    "python/SL001/bad_kv_offload_del_block.py",
    "python/SL003/bad_self_wait_inside_block.py",
    "python/SL003/bad_current_reads_side_output.py",
    "python/SL008/bad_set_stream_early_return.py",
];

#[test]
fn fix_rewrites_files_until_the_fixed_findings_are_gone() {
    let (dir, paths) = project("python", PY_FIXABLE);
    let (code, out, err) = run(&[
        "check",
        "--isolated",
        "--output-format",
        "concise",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    let (code, out, err) = run(&["check", "--isolated", "--fix", &dir.to_string_lossy()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Applied 4 fixes"), "{out}");
    let text = |i: usize| std::fs::read_to_string(&paths[i]).unwrap();
    assert!(
        text(0).contains(
            "            block.record_stream(self.offload_stream)\n            host.copy_(block"
        ),
        "{}",
        text(0)
    );
    assert!(
        text(1).contains("        self.cast_stream.wait_stream(torch.cuda.current_stream())"),
        "{}",
        text(1)
    );
    assert!(
        text(2).contains("torch.cuda.current_stream().wait_stream(self.router_stream)"),
        "{}",
        text(2)
    );
    assert!(
        text(3).contains("    with torch.cuda.stream(prefill_stream):"),
        "{}",
        text(3)
    );
    assert!(!text(3).contains("torch.cuda.set_stream("), "{}", text(3));
    let (code, out, _) = run(&["check", "--isolated", &dir.to_string_lossy()]);
    assert_eq!(code, 0, "the fixed project is clean:\n{out}");
}

#[test]
fn diff_shows_the_fixes_and_changes_nothing() {
    let (dir, paths) = project("diff", PY_FIXABLE);
    let before: Vec<String> = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let (code, out, err) = run(&["check", "--isolated", "--diff", &dir.to_string_lossy()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("+            block.record_stream(self.offload_stream)\n"),
        "{out}"
    );
    assert!(
        out.contains("-    torch.cuda.set_stream(prefill_stream)"),
        "{out}"
    );
    assert!(
        out.contains("--- a/") && out.contains("+++ b/") && out.contains("@@ "),
        "{out}"
    );
    assert!(err.contains("Would apply 4 fixes"), "{err}");
    let after: Vec<String> = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(before, after);
    let clean = repo_root().join("fixtures/python/SL001/good_aux_head_record_both_ways.py");
    let (code, out, _) = run(&["check", "--isolated", "--diff", &clean.to_string_lossy()]);
    assert_eq!((code, out.as_str()), (0, ""));
    // A diff that holds back the fixes needing review says so.
    let review = repo_root().join("fixtures/python/SL004/bad_side_upload_used_without_wait.py");
    let (_, _, err) = run(&["check", "--isolated", "--diff", &review.to_string_lossy()]);
    assert!(err.contains("(1 more with `--unsafe-fixes`)"), "{err}");
}

#[test]
fn unsafe_fixes_need_the_flag() {
    let (dir, paths) = project("unsafe", &["rust/SL003/bad_untracked_pipeline_no_join.rs"]);
    let original = std::fs::read_to_string(&paths[0]).unwrap();
    let (code, out, _) = run(&["check", "--isolated", "--fix", &dir.to_string_lossy()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(1 more with `--unsafe-fixes`)"), "{out}");
    assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), original);
    let (code, out, _) = run(&[
        "check",
        "--isolated",
        "--fix",
        "--unsafe-fixes",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(std::fs::read_to_string(&paths[0])
        .unwrap()
        .contains(".join(&"));
}

#[test]
fn stdin_is_checked_under_the_given_name_and_fixed_to_stdout() {
    let source = std::fs::read_to_string(repo_root().join("fixtures").join(PY_FIXABLE[0])).unwrap();
    let (code, out, _) = run_stdin(
        &[
            "check",
            "--isolated",
            "--output-format",
            "concise",
            "--stdin-filename",
            "pkg/kv.py",
            "-",
        ],
        &source,
    );
    assert_eq!(code, 1);
    assert!(out.starts_with("pkg/kv.py:20:9: SL001 "), "{out}");
    let (code, out, err) = run_stdin(
        &["check", "--isolated", "--fix", "--stdin-filename", "kv.py"],
        &source,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("block.record_stream(self.offload_stream)") && out.len() > source.len(),
        "{out}"
    );
    assert!(err.contains("Applied 1 fix"), "{err}");
    let (code, _, err) = run_stdin(&["check", "--isolated", "-"], "\u{0}\u{ff}");
    assert_eq!(
        code, 0,
        "NUL and non-ASCII text is valid UTF-8 and holds no stream code: {err}"
    );
}

#[test]
fn statistics_and_output_file() {
    let (dir, _) = project("stats", PY_FIXABLE);
    let (code, out, _) = run(&[
        "check",
        "--isolated",
        "--statistics",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0]
            .trim_start()
            .starts_with("2  SL003  [*] missing-stream-wait"),
        "{out}"
    );
    let report = dir.join("report.json");
    let (code, out, _) = run(&[
        "check",
        "--isolated",
        "--output-format",
        "json",
        "--output-file",
        &report.to_string_lossy(),
        &dir.to_string_lossy(),
    ]);
    assert_eq!((code, out.as_str()), (1, ""));
    let items: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(items.as_array().map(Vec::len), Some(4));
}

/// The help texts of a fixture's findings, in order.
fn helps(fixture: &str) -> Vec<String> {
    let path = repo_root().join("fixtures").join(fixture);
    let (_, out, _) = run(&[
        "check",
        "--isolated",
        "--output-format",
        "json",
        path.to_str().unwrap(),
    ]);
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["help"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The help of a `record_stream` of the allocation stream, written where that stream is current,
/// places the right call outside the block; the tensor is called by the name that holds it
/// there: one name of a tuple unpacked (`top_p, top_i = ..`), the local a prefetcher hands out
/// rather than the attribute `preload()` has rebound to the next batch, whose wait is there.
#[test]
fn record_stream_help_is_right_where_it_is_followed() {
    let help = &helps("python/SL002/bad_augment_record_own_stream.py")[0];
    assert!(help.contains("outside the `with` block"), "{help}");
    let help = &helps("python/SL002/bad_record_own_stream_in_block.py")[0];
    assert!(
        help.ends_with("`top_p.record_stream(torch.cuda.current_stream())`"),
        "{help}"
    );
    let help = &helps("python/SL004/bad_prefetcher_next_without_record.py")[0];
    assert_eq!(
        help,
        "call `batch.record_stream(torch.cuda.current_stream())` before it is freed or handed on"
    );
}

/// A wait on the current stream, for a use inside a side-stream block, goes before the block:
/// inside it, `current_stream()` is the side stream and the wait would be on itself.
#[test]
fn wait_help_places_a_wait_on_the_current_stream_before_the_block() {
    let help = &helps("python/SL003/bad_side_reads_input_without_wait.py")[0];
    assert!(help.contains("before the `with` block"), "{help}");
}

#[test]
fn rules_are_listed_as_json_for_tools() {
    let (code, out, _) = run(&["rules", "--output-format", "json"]);
    assert_eq!(code, 0);
    let rules: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sl001 = rules
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == "SL001")
        .unwrap();
    assert_eq!(sl001["name"], "missing-record-stream");
    assert!(sl001["explanation"]
        .as_str()
        .unwrap()
        .contains("## Why is this bad?"));
    assert!(sl001["url"].as_str().unwrap().ends_with("rules/SL001.md"));
}

/// A stream that is a parameter (maybe `None` by default) or a name bound on some paths only
/// is not written into code by `--fix`: `wait_stream(None)` or an unbound name would raise.
#[test]
fn waits_on_streams_that_may_be_unbound_need_review() {
    let dir = Scratch::new("fix-unbound");
    let optional = "import torch\n\n\ndef lora_a(x: torch.Tensor, weight: torch.Tensor, out_alloc_stream=None) -> torch.Tensor:\n    if out_alloc_stream is not None:\n        with torch.cuda.stream(out_alloc_stream):\n            output = torch.empty(x.shape[0], weight.shape[0], device=x.device)\n    else:\n        output = torch.empty(x.shape[0], weight.shape[0], device=x.device)\n    torch.matmul(x, weight.t(), out=output)\n    return output\n";
    let branch = "import torch\n\n\ndef get_side_stream():\n    return torch.cuda.Stream()\n\n\ndef moe_lora(h: torch.Tensor, w: torch.Tensor, overlap: bool) -> torch.Tensor:\n    if overlap:\n        side_stream = get_side_stream()\n        side_stream.wait_stream(torch.cuda.current_stream())\n        with torch.cuda.stream(side_stream):\n            delta = torch.relu(h @ w)\n    else:\n        delta = torch.relu(h @ w)\n    return h + delta\n";
    std::fs::write(dir.join("optional.py"), optional).unwrap();
    std::fs::write(dir.join("branch.py"), branch).unwrap();
    let (code, out, _) = run(&["check", "--isolated", "--fix", &dir.to_string_lossy()]);
    assert_eq!(code, 1, "the SL003 findings remain:\n{out}");
    assert!(out.contains("more with `--unsafe-fixes`"), "{out}");
    let fixed = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    // The output is taken on the stream the caller passes for it, in the pool the caller chose:
    // there is no hand-off to record, and the wait the SL003 asks for is left for review.
    assert!(
        !fixed("optional.py").contains("wait_stream(out_alloc_stream)")
            && !fixed("optional.py").contains("record_stream"),
        "{}",
        fixed("optional.py")
    );
    assert!(
        !fixed("branch.py").contains("wait_stream(side_stream)"),
        "{}",
        fixed("branch.py")
    );
}

/// A loop that uses the previous step's upload after starting the next one: a wait for the whole
/// copy stream there would also wait for the new upload and end the overlap. No fix is offered;
/// the help asks for an event recorded after each upload.
#[test]
fn no_fix_serializes_a_loop_that_overlaps_copies() {
    let path =
        repo_root().join("fixtures/python/SL004/bad_prefetch_loop_uses_previous_batch_unwaited.py");
    let (_, out, _) = run(&[
        "check",
        "--isolated",
        "--unsafe-fixes",
        "--output-format",
        "json",
        path.to_str().unwrap(),
    ]);
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    let finding = &items[0];
    assert_eq!(finding["code"], "SL004", "{items:#}");
    assert!(finding["fix"].is_null(), "{items:#}");
    let help = finding["help"].as_str().unwrap();
    assert!(
        help.contains("wait on an event recorded on `copy_stream` right after the copy"),
        "{help}"
    );
}

/// After `--fix`, what remains is what a run over the fixed files finds: a finding another file
/// decides (here a keep-alive helper in another module that records the wrong stream) is still
/// reported, although a file fixed on its own does not see it.
#[test]
fn findings_other_files_decide_remain_after_fixing() {
    let dir = Scratch::new("fix-across-files");
    let case = repo_root().join("fixtures/python/SL002/bad_keep_alive_helper_in_another_module");
    for name in ["loader.py", "memory.py"] {
        std::fs::copy(case.join(name), dir.join(name)).unwrap();
    }
    let (code, out, err) = run(&[
        "check",
        "--isolated",
        "--fix",
        "--unsafe-fixes",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("Applied 1 fix."), "{out}");
    assert!(out.contains("SL002"), "{out}");
    assert!(!out.contains("All checks passed"), "{out}");
}

/// A stream a helper in another module keeps in its global is not a name in the caller's file:
/// a wait fix that writes it there needs review.
#[test]
fn waits_on_another_modules_global_need_review() {
    let dir = Scratch::new("fix-foreign-global");
    let case =
        repo_root().join("fixtures/python/SL003/bad_split_fork_join_helper_caller_never_joins");
    for name in ["moe.py", "overlap.py"] {
        std::fs::copy(case.join(name), dir.join(name)).unwrap();
    }
    let (code, out, err) = run(&["check", "--isolated", &dir.to_string_lossy()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("No fix is safe to apply without review")
            || out.contains("No fix is safe to apply without review"),
        "{out}{err}"
    );
}
