//! `streamlint validate --run -- COMMAND`: run a user's program under PyTorch's CUDA sanitizer
//! and streamlint's lifetime checker, and set what they report against streamlint's findings in
//! the program's files.
//!
//! The program's files are the `.py` files named on the command line and every file under the
//! current folder (outside `site-packages`) that a report's stack traces pass through. The
//! sanitizer sees races between streams; the lifetime checker sees what the sanitizer cannot:
//! memory freed while another stream may use it (SL001, SL004), a `record_stream` that does
//! nothing (SL002), host access to the buffer of a pending `non_blocking` copy (SL007). A finding
//! is *confirmed at run time* when a report of a check that sees its kind of hazard has a frame on
//! one of its lines (where the hazard becomes real, or one of its labels: the producer, the
//! allocation, the missing edge), or, for a race, when the racing access happens in the finding's
//! function (a wait placed before its record is reported by the sanitizer at the read it failed
//! to order). Every other finding is *not observed*; a report that confirms no finding is *seen
//! only at run time*.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use streamlint_linter::{check_file, Config, Settings};
use streamlint_rules::{Finding, LineIndex};

use crate::checker::Installed;
use crate::process::{self, Stdout};
use crate::python::CheckerReport;
use crate::report::CHECKER_RULES;
use crate::sanitizer::{self, Frame, Race};

/// Rules whose hazard PyTorch's sanitizer cannot see: allocator reuse (it forgets a tensor at
/// deallocation and skips `record_stream`), host-side reads and writes, and stream setup.
const INVISIBLE_TO_SANITIZER: &[&str] = &["SL001", "SL002", "SL007", "SL008", "SL009"];

/// The lifetime checker's codes for one kind of hazard: a free under a consumer is SL001, or
/// SL004 when the block came from a transfer, whichever the static rule called it.
fn same_hazard(checker_code: &str, finding_code: &str) -> bool {
    fn family(code: &str) -> &str {
        if code == "SL004" {
            "SL001"
        } else {
            code
        }
    }
    family(checker_code) == family(finding_code)
}

/// Run `command` and report; the exit code is 2 when it cannot be started, 1 when there are
/// findings or races, 0 otherwise.
pub fn run_program(
    command: &[OsString],
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<i32> {
    let Some((program, rest)) = command.split_first() else {
        writeln!(stderr, "error: `--run` needs a command after `--`")?;
        return Ok(2);
    };
    let cwd = std::env::current_dir()?;
    let settings = match Config::discover(&cwd).and_then(|c| Settings::from_config(c.as_ref())) {
        Ok(s) => s,
        Err(e) => {
            writeln!(stderr, "error: {}", e.0)?;
            return Ok(2);
        }
    };
    let checker = match Installed::new() {
        Ok(c) => c,
        Err(e) => {
            writeln!(stderr, "error: cannot write the lifetime checker: {e}")?;
            return Ok(2);
        }
    };
    let mut child = Command::new(program);
    child.args(rest).env("TORCH_CUDA_SANITIZER", "1");
    checker.apply(&mut child);
    let mut echo_failed = None;
    let finished = process::run(
        &mut child,
        Stdout::PassThrough,
        &mut |line| {
            if echo_failed.is_none() {
                echo_failed = writeln!(stderr, "{line}").err();
            }
        },
        None,
    );
    let finished = match finished {
        Ok(f) => f,
        Err(e) => {
            writeln!(
                stderr,
                "error: cannot run `{}`: {e}",
                program.to_string_lossy()
            )?;
            return Ok(2);
        }
    };
    if let Some(e) = echo_failed {
        return Err(e);
    }
    let races = sanitizer::parse(&finished.stderr);
    let reports = checker.reports();
    let files = program_files(command, &races, &reports, &cwd);
    let mut findings = Vec::new();
    for file in &files {
        let report = check_file(file, &settings);
        let index = LineIndex::new(&report.source);
        for f in report.findings.iter().filter(|f| f.code.starts_with("SL0")) {
            findings.push(Located::new(file, &report.source, f, &index));
        }
    }
    let outcome = Outcome::new(&findings, &races, &reports, &cwd);
    write!(stdout, "{}", outcome.render(&cwd))?;
    let status = match finished.status.and_then(|s| s.code()) {
        Some(0) => "the program exited normally".to_string(),
        Some(code) => format!("the program exited with status {code}"),
        None => "the program was stopped by a signal".to_string(),
    };
    writeln!(
        stdout,
        "{} confirmed at run time, {} not observed, {} seen only at run time; {status}",
        outcome.confirmed.len(),
        outcome.not_observed.len(),
        outcome.runtime_only.len() + outcome.checker_only.len()
    )?;
    Ok(
        if findings.is_empty() && races.is_empty() && reports.is_empty() {
            0
        } else {
            1
        },
    )
}

/// A finding with the lines it is about.
#[derive(Clone, Debug)]
struct Located {
    file: PathBuf,
    row: usize,
    column: usize,
    code: &'static str,
    message: String,
    /// The primary line and the lines of every label.
    lines: BTreeSet<usize>,
    /// The name of the function the finding is in.
    function: Option<String>,
}

impl Located {
    fn new(file: &Path, source: &str, f: &Finding, index: &LineIndex<'_>) -> Located {
        let at = index.position(f.span.start);
        let mut lines: BTreeSet<usize> = f
            .labels
            .iter()
            .map(|l| index.position(l.span.start).row)
            .collect();
        lines.insert(at.row);
        Located {
            file: file.to_path_buf(),
            row: at.row,
            column: at.column,
            code: f.code,
            message: f.message.clone(),
            lines,
            function: enclosing_function(source, at.row),
        }
    }

    /// Can the sanitizer see this finding's hazard?
    fn observable(&self) -> bool {
        !INVISIBLE_TO_SANITIZER.contains(&self.code)
    }

    /// Does the lifetime checker's `report` show this finding's hazard?
    fn confirmed_by_checker(&self, report: &CheckerReport, cwd: &Path) -> bool {
        same_hazard(&report.code, self.code)
            && checker_frames(report).any(|fr| {
                self.lines.contains(&(fr.line as usize)) && same_file(&fr.file, &self.file, cwd)
            })
    }

    /// Does `race` show this finding's hazard?
    fn confirmed_by(&self, race: &Race, cwd: &Path) -> bool {
        if !self.observable() {
            return false;
        }
        let on_a_line = race.frames().any(|fr| {
            self.lines.contains(&(fr.line as usize)) && same_file(&fr.file, &self.file, cwd)
        });
        let in_the_function = program_frames(&race.current.frames, cwd)
            .last()
            .is_some_and(|fr| {
                same_file(&fr.file, &self.file, cwd)
                    && self.function.as_deref() == Some(short_name(&fr.function))
            });
        on_a_line || in_the_function
    }
}

/// The Python function whose body holds line `row` (one-based): the nearest `def` above it that
/// is indented less.
fn enclosing_function(source: &str, row: usize) -> Option<String> {
    let lines: Vec<&str> = source.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut limit = indent(lines.get(row.checked_sub(1)?)?);
    for line in lines[..row - 1].iter().rev() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || indent(line) >= limit {
            continue;
        }
        let def = trimmed
            .strip_prefix("async ")
            .unwrap_or(trimmed)
            .strip_prefix("def ");
        if let Some(rest) = def {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return (!name.is_empty()).then_some(name);
        }
        limit = indent(line);
    }
    None
}

/// A frame's function name without its qualification (`Model.forward` → `forward`).
fn short_name(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// Every frame of a lifetime checker report.
fn checker_frames(report: &CheckerReport) -> impl Iterator<Item = &Frame> {
    report.stacks.iter().flat_map(|stack| &stack.frames)
}

/// The three verdicts.
struct Outcome<'a> {
    confirmed: Vec<&'a Located>,
    not_observed: Vec<&'a Located>,
    /// Each race with the program frame it is shown at.
    runtime_only: Vec<(&'a Race, Frame)>,
    /// Each lifetime checker report that confirms no finding, with the program frame it is
    /// shown at (the innermost of its first stack that has one: the free, the host access).
    checker_only: Vec<(&'a CheckerReport, Frame)>,
}

impl<'a> Outcome<'a> {
    fn new(
        findings: &'a [Located],
        races: &'a [Race],
        reports: &'a [CheckerReport],
        cwd: &Path,
    ) -> Outcome<'a> {
        let confirmed_by = |f: &Located| {
            races.iter().any(|r| f.confirmed_by(r, cwd))
                || reports.iter().any(|r| f.confirmed_by_checker(r, cwd))
        };
        let (confirmed, not_observed) = findings.iter().partition(|f| confirmed_by(f));
        let runtime_only = races
            .iter()
            .filter(|r| !findings.iter().any(|f| f.confirmed_by(r, cwd)))
            .filter_map(|r| program_frame(r, cwd).map(|fr| (r, fr)))
            .collect();
        let checker_only = reports
            .iter()
            .filter(|r| !findings.iter().any(|f| f.confirmed_by_checker(r, cwd)))
            .filter_map(|r| {
                // The first stack with a place in the program: a free on autograd's thread has
                // none, the use or the allocation before it has.
                let at = r.stacks.iter().find_map(|stack| {
                    program_frames(&stack.frames, cwd)
                        .last()
                        .map(|f| (*f).clone())
                })?;
                Some((r, at))
            })
            .collect();
        Outcome {
            confirmed,
            not_observed,
            runtime_only,
            checker_only,
        }
    }

    fn render(&self, cwd: &Path) -> String {
        let mut out = String::new();
        let shown = |p: &Path| p.strip_prefix(cwd).unwrap_or(p).display().to_string();
        for f in &self.confirmed {
            out.push_str(&format!(
                "{}:{}:{}: {} confirmed at run time: {}\n",
                shown(&f.file),
                f.row,
                f.column,
                f.code,
                f.message
            ));
        }
        for f in &self.not_observed {
            let why = if CHECKER_RULES.contains(&f.code) {
                "the lifetime checker saw no such hazard here; the path may not have run"
            } else if !f.observable() {
                "no run-time check can see this kind of hazard"
            } else {
                "no race was reported here; the path may not have run"
            };
            out.push_str(&format!(
                "{}:{}:{}: {} not observed at run time ({why}): {}\n",
                shown(&f.file),
                f.row,
                f.column,
                f.code,
                f.message
            ));
        }
        for (race, at) in &self.runtime_only {
            let previous = program_frames(&race.previous.frames, cwd)
                .last()
                .map(|fr| format!(" at {}:{}", shown(&resolve(&fr.file, cwd)), fr.line))
                .unwrap_or_default();
            out.push_str(&format!(
                "{}:{}: race seen only at run time (tensor data pointer {}): {} on stream {} ({}) is not ordered after {} on stream {} ({}){previous}\n",
                shown(&resolve(&at.file, cwd)),
                at.line,
                race.data_ptr,
                race.current.kind,
                race.current.stream,
                operator_name(&race.current.operator),
                race.previous.kind,
                race.previous.stream,
                operator_name(&race.previous.operator),
            ));
        }
        for (report, at) in &self.checker_only {
            out.push_str(&format!(
                "{}:{}: {} seen only at run time: {}\n",
                shown(&resolve(&at.file, cwd)),
                at.line,
                report.code,
                report.message
            ));
        }
        out
    }
}

/// `aten::mul.Tensor(Tensor self, Tensor other) -> Tensor` → `aten::mul.Tensor`.
fn operator_name(schema: &str) -> &str {
    schema.split('(').next().unwrap_or(schema).trim()
}

/// `path` as written in a frame or on the command line, made absolute against `cwd`.
fn resolve(path: &str, cwd: &Path) -> PathBuf {
    let p = cwd.join(path);
    p.canonicalize().unwrap_or(p)
}

fn same_file(frame_file: &str, file: &Path, cwd: &Path) -> bool {
    resolve(frame_file, cwd) == resolve(&file.to_string_lossy(), cwd)
}

/// Is `path` one of the program's own files: an existing file under `cwd`, not installed
/// packages?
fn is_program_file(path: &Path, cwd: &Path) -> bool {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    path.is_file()
        && path.starts_with(&cwd)
        && !path
            .iter()
            .any(|c| c == "site-packages" || c == "dist-packages")
}

/// The frames of `frames` in the program's files.
fn program_frames<'f>(frames: &'f [Frame], cwd: &Path) -> Vec<&'f Frame> {
    frames
        .iter()
        .filter(|fr| is_program_file(&resolve(&fr.file, cwd), cwd))
        .collect()
}

/// Where to show a race: the innermost program frame of the racing access (or else of the
/// earlier one).
fn program_frame(race: &Race, cwd: &Path) -> Option<Frame> {
    program_frames(&race.current.frames, cwd)
        .last()
        .or(program_frames(&race.previous.frames, cwd).last())
        .map(|f| (*f).clone())
}

/// The `.py` files named in the command, and the program files the reports pass through.
fn program_files(
    command: &[OsString],
    races: &[Race],
    reports: &[CheckerReport],
    cwd: &Path,
) -> Vec<PathBuf> {
    let named = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .filter(|a| a.ends_with(".py"))
        .map(|a| resolve(&a, cwd))
        .filter(|p| p.is_file());
    let traced = races
        .iter()
        .flat_map(Race::frames)
        .chain(reports.iter().flat_map(checker_frames))
        .map(|fr| resolve(&fr.file, cwd))
        .filter(|p| is_program_file(p, cwd));
    let set: BTreeSet<PathBuf> = named.chain(traced).collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch folder holding `train.py`.
    struct Project {
        dir: PathBuf,
    }

    impl Project {
        fn new(name: &str) -> Project {
            let dir =
                std::env::temp_dir().join(format!("streamlint-run-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("train.py"), PROGRAM).unwrap();
            Project {
                dir: dir.canonicalize().unwrap(),
            }
        }
    }

    impl Drop for Project {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Line 17 reads `logits` on the current stream after a side stream wrote it at line 16
    /// (SL003); line 18 frees a side-stream tensor still read on the current stream (SL001);
    /// `log_stats` races on a tensor streamlint cannot see the origin of.
    const PROGRAM: &str = "\
import torch


def step(n):
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    logits = torch.empty(n, device=\"cuda\")
    side.wait_stream(main)
    with torch.cuda.stream(side):
        logits.fill_(1.0)
        feats = torch.ones(n, device=\"cuda\")
    main.wait_stream(side)
    main.wait_stream(side)
    extra = feats * 3
    with torch.cuda.stream(side):
        logits.fill_(2.0)
    probs = logits * 2
    del feats
    with torch.cuda.stream(side):
        torch.zeros(n, device=\"cuda\")
    return probs, extra


def log_stats(stats, side):
    with torch.cuda.stream(side):
        stats.add_(1)


step(4)
";

    /// A sanitizer report: the racing access at `now` (line, function), the earlier one at
    /// `before`.
    fn report(now: (u32, &str), before: (u32, &str)) -> String {
        format!(
            "============================\n\
             CSAN detected a possible data race on tensor with data pointer 1\n\
             Access by stream 7 during kernel:\n\
             aten::mul.Tensor(Tensor self, Tensor other) -> Tensor\n\
             reading from argument(s) self\n\
             With stack trace:\n  \
             File \"train.py\", line 29, in <module>\n    step(4)\n  \
             File \"train.py\", line {}, in {}\n    x\n  \
             File \"/usr/lib/python3/site-packages/torch/cuda/_sanitizer.py\", line 1, in f\n    y\n\n\
             Previous access by stream 9 during kernel:\n\
             aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)\n\
             writing to argument(s) self, and to the output\n\
             With stack trace:\n  \
             File \"train.py\", line {}, in {}\n    z\n\n\
             Trace for tensor allocation not found.\n",
            now.0, now.1, before.0, before.1
        )
    }

    fn findings(p: &Project) -> Vec<Located> {
        let file = p.dir.join("train.py");
        let r = check_file(&file, &Settings::default());
        let index = LineIndex::new(&r.source);
        r.findings
            .iter()
            .map(|f| Located::new(&file, &r.source, f, &index))
            .collect()
    }

    #[test]
    fn findings_are_confirmed_or_not_observed_and_other_races_are_runtime_only() {
        let p = Project::new("verdicts");
        let found = findings(&p);
        let codes: Vec<(&str, usize)> = found.iter().map(|f| (f.code, f.row)).collect();
        assert!(codes.contains(&("SL003", 17)), "{codes:?}");
        assert!(codes.contains(&("SL001", 18)), "{codes:?}");
        let mut text = report((17, "step"), (16, "step"));
        text.push_str(&report((26, "log_stats"), (14, "step")));
        let races = sanitizer::parse(&text);
        let outcome = Outcome::new(&found, &races, &[], &p.dir);
        let confirmed: Vec<&str> = outcome.confirmed.iter().map(|f| f.code).collect();
        assert_eq!(confirmed, ["SL003"]);
        assert!(outcome.not_observed.iter().all(|f| f.code == "SL001"));
        assert_eq!(outcome.runtime_only.len(), 1);
        let shown = outcome.render(&p.dir);
        assert!(
            shown.contains("train.py:17:13: SL003 confirmed at run time: "),
            "{shown}"
        );
        assert!(
            shown.contains("train.py:18:5: SL001 not observed at run time (the lifetime checker saw no such hazard here; the path may not have run): "),
            "{shown}"
        );
        assert!(
            shown.contains("train.py:26: race seen only at run time (tensor data pointer 1): reading from argument(s) self on stream 7 (aten::mul.Tensor) is not ordered after writing to argument(s) self, and to the output on stream 9 (aten::fill_.Scalar) at train.py:14\n"),
            "{shown}"
        );
    }

    /// A lifetime checker report of the free at line 18 (or of the hazard's family: SL004 is a
    /// free under a consumer too) confirms the SL001 there; one of another kind, or at a line no
    /// finding names (19), is seen only at run time, shown at its free.
    #[test]
    fn lifetime_checker_reports_confirm_frees_and_others_are_runtime_only() {
        let p = Project::new("checker");
        let found = findings(&p);
        let file = p.dir.join("train.py").display().to_string();
        let report = |code: &str, freed: u32| -> CheckerReport {
            let text = format!(
                "{{\"code\": \"{code}\", \"message\": \"memory is freed while another stream may use it\", \"stacks\": [{{\"label\": \"freed\", \"frames\": [{{\"file\": \"{file}\", \"line\": 29, \"function\": \"<module>\"}}, {{\"file\": \"{file}\", \"line\": {freed}, \"function\": \"step\"}}]}}]}}"
            );
            serde_json::from_str(&text).unwrap()
        };
        for code in ["SL001", "SL004"] {
            let reports = [report(code, 18)];
            let outcome = Outcome::new(&found, &[], &reports, &p.dir);
            let confirmed: Vec<&str> = outcome.confirmed.iter().map(|f| f.code).collect();
            assert_eq!(confirmed, ["SL001"], "{code}");
            assert!(outcome.checker_only.is_empty());
            let shown = outcome.render(&p.dir);
            assert!(
                shown.contains("train.py:18:5: SL001 confirmed at run time: "),
                "{shown}"
            );
        }
        let reports = [report("SL002", 18), report("SL001", 19)];
        let outcome = Outcome::new(&found, &[], &reports, &p.dir);
        assert!(outcome.confirmed.is_empty());
        assert_eq!(outcome.checker_only.len(), 2);
        let shown = outcome.render(&p.dir);
        assert!(
            shown.contains("train.py:19: SL001 seen only at run time: memory is freed while another stream may use it\n"),
            "{shown}"
        );
        assert_eq!(
            program_files(&[], &[], &reports, &p.dir),
            [p.dir.join("train.py")]
        );
    }

    /// A wait placed before its record is reported by the sanitizer at the read it failed to
    /// order: a race whose racing access is in the finding's function confirms it.
    #[test]
    fn a_race_in_the_findings_function_confirms_it() {
        let p = Project::new("function");
        let found = findings(&p);
        let races = sanitizer::parse(&report((20, "step"), (19, "step")));
        let outcome = Outcome::new(&found, &races, &[], &p.dir);
        assert!(outcome.confirmed.iter().any(|f| f.code == "SL003"));
        assert!(outcome.runtime_only.is_empty());
        let elsewhere = sanitizer::parse(&report((26, "log_stats"), (26, "log_stats")));
        let outcome = Outcome::new(&found, &elsewhere, &[], &p.dir);
        assert!(outcome.confirmed.is_empty());
        assert_eq!(outcome.runtime_only.len(), 1);
    }

    #[test]
    fn the_enclosing_function_is_the_nearest_def_indented_less() {
        assert_eq!(enclosing_function(PROGRAM, 17).as_deref(), Some("step"));
        assert_eq!(
            enclosing_function(PROGRAM, 26).as_deref(),
            Some("log_stats")
        );
        assert_eq!(enclosing_function(PROGRAM, 29), None);
        assert_eq!(enclosing_function(PROGRAM, 999), None);
        let method =
            "class M:\n    async def forward(self, x):\n        if x:\n            y = x\n";
        assert_eq!(enclosing_function(method, 4).as_deref(), Some("forward"));
        assert_eq!(short_name("M.forward"), "forward");
    }

    #[test]
    fn program_files_are_named_or_traced_and_not_installed_packages() {
        let p = Project::new("files");
        let races = sanitizer::parse(&report((17, "step"), (16, "step")));
        let command = ["python".into(), "-u".into(), "train.py".into()];
        assert_eq!(
            program_files(&command, &races, &[], &p.dir),
            [p.dir.join("train.py")]
        );
        assert_eq!(
            program_files(&[], &races, &[], &p.dir),
            [p.dir.join("train.py")]
        );
        let none = program_files(&["python".into(), "missing.py".into()], &[], &[], &p.dir);
        assert!(none.is_empty());
        let installed = Path::new("/usr/lib/python3/site-packages/torch/cuda/_sanitizer.py");
        assert!(!is_program_file(installed, &p.dir));
    }

    #[test]
    fn operator_names_drop_the_signature() {
        assert_eq!(
            operator_name("aten::mul.Tensor(Tensor self) -> Tensor"),
            "aten::mul.Tensor"
        );
        assert_eq!(operator_name("schema"), "schema");
    }
}
