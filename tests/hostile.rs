//! Hostile input: every file a CI run or an editor may meet. Each case sits beside a normal file
//! with a real bug, which must still be reported; no case may crash or hang the run, and the
//! exit code is the documented one (1 when findings remain, 2 only when the run cannot proceed).

use std::path::Path;
use std::time::{Duration, Instant};

mod support;

use support::{run, run_stdin, Scratch};

/// A real hazard (SL003 at 7:13) that must be reported whatever lies beside it.
const BUGGY: &str = "import torch\n\ndef f(x: torch.Tensor):\n    side = torch.cuda.Stream()\n    y = x * 2\n    with torch.cuda.stream(side):\n        z = y + 1\n    return z.sum().item()\n";

/// Checks `dir` (holding `case` files and `train.py`) and returns (exit code, output, errors),
/// asserting that the real bug is reported and the run took a bounded time.
fn check_beside(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    std::fs::write(dir.join("train.py"), BUGGY).unwrap();
    let start = Instant::now();
    let mut args = vec!["check", "--isolated", "--output-format", "concise"];
    args.extend_from_slice(extra);
    let path = dir.to_string_lossy().into_owned();
    args.push(&path);
    let (code, out, err) = run(&args);
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        out.contains("train.py:7:13: SL003"),
        "the real bug is still reported:\n{out}\n{err}"
    );
    (code, out, err)
}

fn case(name: &str, files: &[(&str, &[u8])]) -> (i32, String, String) {
    let dir = Scratch::new(&format!("hostile-{name}"));
    for (file, bytes) in files {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    check_beside(&dir, &[])
}

#[test]
fn undecodable_and_binary_files_are_reported_not_fatal() {
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let (code, out, _) = case(
        "bytes",
        &[
            (
                "latin1.py",
                b"# stream \xe9\xff\nside = torch.cuda.Stream()\n",
            ),
            ("junk.py", &junk),
            ("junk.rs", &junk),
        ],
    );
    assert_eq!(code, 1);
    assert!(out.contains("latin1.py:1:1: SL900"), "{out}");
}

#[test]
fn nul_bytes_bom_and_crlf() {
    let crlf = BUGGY.replace('\n', "\r\n");
    let bom = format!("\u{feff}{BUGGY}");
    let (code, out, _) = case(
        "encodings",
        &[
            ("nul.py", b"import torch\nx = torch.cuda.Stream()\x00\n"),
            ("crlf.py", crlf.as_bytes()),
            ("bom.py", bom.as_bytes()),
        ],
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("crlf.py:7:13: SL003"),
        "CRLF files are checked: {out}"
    );
    assert!(
        out.contains("bom.py:7:13: SL003"),
        "a BOM does not shift columns: {out}"
    );
}

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    let parens = format!(
        "import torch\nx = {}1{}\n",
        "(".repeat(20_000),
        ")".repeat(20_000)
    );
    let mut indented = String::from("import torch\n");
    for depth in 0..3_000 {
        indented.push_str(&format!("{}if x{depth}:\n", " ".repeat(depth)));
    }
    indented.push_str(&format!("{}s = torch.cuda.Stream()\n", " ".repeat(3_000)));
    let rust = format!(
        "fn f() {{ let s = cudarc::driver::CudaContext::new(0); {}1{} }}\n",
        "(".repeat(20_000),
        ")".repeat(20_000)
    );
    let (code, _, _) = case(
        "nesting",
        &[
            ("parens.py", parens.as_bytes()),
            ("indent.py", indented.as_bytes()),
            ("parens.rs", rust.as_bytes()),
        ],
    );
    assert_eq!(code, 1);
}

#[test]
fn a_hundred_thousand_lines_in_a_few_seconds() {
    let mut big = String::from("import torch\n\n\nclass Big:\n    def __init__(self):\n        self.side = torch.cuda.Stream()\n\n");
    let mut i = 0;
    while big.lines().count() < 100_000 {
        big.push_str(&format!(
            "    def step_{i}(self, x):\n        self.side.wait_stream(torch.cuda.current_stream())\n        with torch.cuda.stream(self.side):\n            y = torch.relu(x)\n        torch.cuda.current_stream().wait_stream(self.side)\n        y.record_stream(torch.cuda.current_stream())\n        return y + {i}\n\n"
        ));
        i += 1;
    }
    let start = Instant::now();
    let (code, out, _) = case("big", &[("big.py", big.as_bytes())]);
    assert_eq!(code, 1);
    assert!(!out.contains("big.py"), "the large file is correct: {out}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "100k lines took {:?}",
        start.elapsed()
    );
}

#[test]
fn a_file_over_the_time_limit_stops_with_a_finding() {
    let dir = Scratch::new("hostile-slow");
    std::fs::write(
        dir.join("pyproject.toml"),
        "[tool.streamlint]\nfile-time-limit = 1\n",
    )
    .unwrap();
    // One function of 80,000 lines in three nested loops (each loop body is lowered again to
    // learn what its names hold after an iteration): lowering it takes many seconds.
    let mut giant = String::from(
        "import torch\n\n\ndef giant(x: torch.Tensor, side: torch.cuda.Stream, n: int):\n    for a in range(n):\n        for b in range(n):\n            for c in range(n):\n",
    );
    for i in 0..20_000 {
        giant.push_str(&format!(
            "                side.wait_stream(torch.cuda.current_stream())\n                with torch.cuda.stream(side):\n                    y{i} = x * {i}\n                x = y{i} + 1\n"
        ));
    }
    giant.push_str("    return x\n");
    std::fs::write(dir.join("giant.py"), giant).unwrap();
    std::fs::write(dir.join("train.py"), BUGGY).unwrap();
    let start = Instant::now();
    let (code, out, err) = run(&[
        "check",
        "--output-format",
        "concise",
        &dir.to_string_lossy(),
    ]);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("giant.py:4:1: SL900 analysis stopped at the time limit for one file (1 s): `giant` was not checked"),
        "{out}"
    );
    // What was lowered of `giant` is not judged: its findings would be guesses.
    assert_eq!(out.matches("giant.py").count(), 1, "{out}");
    assert!(out.contains("train.py:7:13: SL003"), "{out}");
}

#[test]
fn syntax_errors_newest_syntax_and_empty_files() {
    let newest = "import torch\n\ntype Vec[T] = list[T]\n\ndef first[T](xs: Vec[T]) -> T:\n    match xs:\n        case [x, *_]:\n            return x\n        case _:\n            raise ValueError(f\"{'empty'!r:>{10}}\")\n\ntry:\n    pass\nexcept* ValueError:\n    pass\n";
    let (code, out, _) = case(
        "syntax",
        &[
            ("broken.py", b"import torch\ns = torch.cuda.Stream(\n"),
            ("newest.py", newest.as_bytes()),
            ("empty.py", b""),
            ("empty.rs", b""),
            ("broken.rs", b"fn f( { let s = stream; }\n"),
        ],
    );
    assert_eq!(code, 1);
    assert!(out.contains("broken.py:") && out.contains("SL900"), "{out}");
    assert!(
        !out.contains("newest.py"),
        "PEP 695, PEP 701, match and except* parse: {out}"
    );
}

#[test]
fn odd_paths_are_reported_and_skipped() {
    let dir = Scratch::new("hostile-paths");
    std::fs::create_dir_all(dir.join("folder.py")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&*dir, dir.join("loop")).unwrap();
        std::os::unix::fs::symlink(dir.join("nowhere.py"), dir.join("dangling.py")).unwrap();
    }
    let (code, _, _) = check_beside(&dir, &[]);
    assert_eq!(code, 1);
    let missing = dir.join("missing.py").to_string_lossy().into_owned();
    let train = dir.join("train.py").to_string_lossy().into_owned();
    let (code, out, err) = run(&[
        "check",
        "--isolated",
        "--output-format",
        "concise",
        &train,
        &missing,
    ]);
    assert_eq!(
        code, 2,
        "a missing path stops the run being complete: {err}"
    );
    assert!(
        err.contains("missing.py: no such file or directory"),
        "{err}"
    );
    assert!(out.contains("SL003"), "{out}");
}

/// A file that exists but cannot be read (reading `/proc/self/mem` at offset 0 fails even for
/// root, where a mode of 000 would not) is reported and the rest is still checked.
#[cfg(target_os = "linux")]
#[test]
fn unreadable_files_are_reported() {
    let dir = Scratch::new("hostile-unreadable");
    std::os::unix::fs::symlink("/proc/self/mem", dir.join("unreadable.py")).unwrap();
    std::fs::write(dir.join("train.py"), BUGGY).unwrap();
    let unreadable = dir.join("unreadable.py").to_string_lossy().into_owned();
    let train = dir.join("train.py").to_string_lossy().into_owned();
    let args = ["check", "--isolated", "--output-format", "concise"];
    let (code, out, err) = run(&[&args[..], &[&unreadable, &train]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("unreadable.py:1:1: SL900 could not read the file"),
        "{out}"
    );
    assert!(out.contains("train.py:7:13: SL003"), "{out}");
}

#[test]
fn bad_configuration_and_selectors_exit_two_with_a_message() {
    let dir = Scratch::new("hostile-config");
    std::fs::write(
        dir.join("streamlint.toml"),
        "select = [\"SL001\"\nignore = 3\n",
    )
    .unwrap();
    std::fs::write(dir.join("train.py"), BUGGY).unwrap();
    let (code, _, err) = run(&["check", &dir.to_string_lossy()]);
    assert_eq!(code, 2);
    assert!(err.contains("streamlint.toml"), "{err}");
    let (code, _, err) = run(&[
        "check",
        "--isolated",
        "--select",
        "SL0X1",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("SL0X1"), "{err}");
    for limit in ["0", "-3", "\"soon\""] {
        std::fs::write(
            dir.join("streamlint.toml"),
            format!("file-time-limit = {limit}\n"),
        )
        .unwrap();
        let (code, _, err) = run(&["check", &dir.to_string_lossy()]);
        assert_eq!(code, 2, "{limit}: {err}");
        assert!(err.contains("streamlint.toml"), "{limit}: {err}");
    }
}

#[test]
fn stdin_junk_is_handled() {
    let (code, _, err) = run_stdin(&["check", "--isolated", "-"], "\u{feff}\r\n\u{0}((((\n");
    assert_ne!(code, 2, "{err}");
    let (code, out, _) = run_stdin(
        &["check", "--isolated", "--output-format", "concise", "-"],
        BUGGY,
    );
    assert_eq!(code, 1);
    assert!(out.contains("-:7:13: SL003"), "{out}");
}

#[test]
fn oversized_files_are_skipped_with_a_finding() {
    let line = format!("x = [{}]\n", vec!["1"; 2000].join(","));
    let huge = format!(
        "import torch\ns = torch.cuda.Stream()\n{}",
        line.repeat(5200)
    );
    let (code, out, _) = case("huge", &[("generated.py", huge.as_bytes())]);
    assert_eq!(code, 1);
    assert!(
        out.contains("generated.py:1:1: SL900 skipped: the file is 20.8 MB"),
        "{out}"
    );
}
