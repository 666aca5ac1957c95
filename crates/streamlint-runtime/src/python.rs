//! Running the Python cases through the harness this crate ships (`harness/harness.py`, written
//! to a temporary folder at run time with the lifetime checker it loads): trials in one process,
//! and each case once more in a fresh process under PyTorch's CUDA sanitizer, and once more
//! under streamlint's lifetime checker.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::process::{self, Finished, Stdout};
use crate::sanitizer::{self, Frame};

/// The harness script.
pub const HARNESS: &str = include_str!("../harness/harness.py");

/// The lifetime checker: its bookkeeping, and its hooks into PyTorch (see `harness/`).
pub const CHECKER_FILES: &[(&str, &str)] = &[
    ("lifetime.py", include_str!("../harness/lifetime.py")),
    ("checker.py", include_str!("../harness/checker.py")),
];

/// How every trial is run.
#[derive(Copy, Clone, Debug)]
pub struct Params {
    pub trials: u32,
    pub warmup: u32,
    pub elements: usize,
    pub cycles: u64,
}

/// The PyTorch build the harness runs under.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Torch {
    pub torch: String,
    /// The CUDA version PyTorch was built for.
    pub cuda: Option<String>,
    pub available: bool,
}

/// One case's trials, as the harness reports them.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct TrialsLine {
    pub case: String,
    /// Corrupted elements per counted trial.
    #[serde(default)]
    pub corrupted: Option<Vec<u64>>,
    #[serde(default)]
    pub error: Option<String>,
}

/// A hazard the lifetime checker saw, as it reports it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CheckerReport {
    pub code: String,
    pub message: String,
    #[serde(default)]
    pub stacks: Vec<CheckerStack>,
}

/// Where in the program one side of a checker report happened.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CheckerStack {
    /// `freed`, `last used`, `record_stream`, `host access`, `copy`.
    pub label: String,
    /// Outermost first.
    pub frames: Vec<Frame>,
}

/// One case's trials under the lifetime checker, as the harness reports them.
#[derive(Clone, Debug, Deserialize, PartialEq)]
struct CheckLine {
    #[serde(default)]
    reports: Vec<CheckerReport>,
    #[serde(default)]
    slowdown: Option<f64>,
    #[serde(default)]
    error: Option<String>,
}

/// What the lifetime checker made of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub reports: Vec<CheckerReport>,
    /// A trial's time with the checker over its time without.
    pub slowdown: f64,
}

/// One case's sanitized trial, as the harness reports it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
struct SanitizeLine {
    #[serde(default)]
    raised: bool,
    #[serde(default)]
    error: Option<String>,
}

/// What the sanitizer made of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sanitized {
    /// Races reported on stderr.
    pub races: usize,
    /// The sanitizer raised `CUDASanitizerErrors` in the case.
    pub raised: bool,
}

impl Sanitized {
    pub fn detected(&self) -> bool {
        self.races > 0 || self.raised
    }
}

/// The harness, written to a folder of its own that is removed when this value drops.
pub struct Harness {
    dir: PathBuf,
    python: PathBuf,
}

impl Harness {
    /// Write the harness to a new temporary folder; it runs with `python`.
    pub fn install(python: &Path) -> std::io::Result<Harness> {
        let dir = fresh_folder("streamlint-harness")?;
        let harness = Harness {
            dir,
            python: python.to_path_buf(),
        };
        std::fs::write(harness.script(), HARNESS)?;
        for (name, text) in CHECKER_FILES {
            std::fs::write(harness.dir.join(name), text)?;
        }
        Ok(harness)
    }

    fn script(&self) -> PathBuf {
        self.dir.join("harness.py")
    }

    /// `python harness.py <args>`, without the sanitizer unless asked, and without writing
    /// bytecode next to the case files.
    fn command(&self, args: &[String], sanitize: bool) -> Command {
        let mut c = Command::new(&self.python);
        c.arg(self.script())
            .args(args)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1");
        if sanitize {
            c.env("TORCH_CUDA_SANITIZER", "1");
        } else {
            // The variable's presence alone switches the sanitizer on.
            c.env_remove("TORCH_CUDA_SANITIZER");
        }
        c
    }

    fn run(
        &self,
        args: &[String],
        sanitize: bool,
        limit: Duration,
        on_line: &mut dyn FnMut(&str),
    ) -> Result<Finished, String> {
        process::run(
            &mut self.command(args, sanitize),
            Stdout::Lines(on_line),
            &mut |_| {},
            Some(limit),
        )
        .map_err(|e| format!("cannot run `{}`: {e}", self.python.display()))
    }

    /// The PyTorch build, which must see a GPU.
    pub fn torch(&self) -> Result<Torch, String> {
        let done = self.run(
            &["env".into()],
            false,
            Duration::from_secs(300),
            &mut |_| {},
        )?;
        let found = lines::<Torch>(&done.stdout).into_iter().next();
        match found {
            Some(t) if t.available => Ok(t),
            Some(t) => Err(format!(
                "PyTorch {} under `{}` sees no GPU (torch.cuda.is_available() is false)",
                t.torch,
                self.python.display()
            )),
            None => Err(format!(
                "`{}` cannot import PyTorch:\n{}",
                self.python.display(),
                done.stderr_tail()
            )),
        }
    }

    /// Run every case in `cases` (warm-up, then counted trials) in one process; `progress` sees
    /// each case's result as it arrives. A case the harness never reported on is missing from
    /// the result, and the error says why.
    pub fn trials(
        &self,
        cases: &[PathBuf],
        params: Params,
        progress: &mut dyn FnMut(&TrialsLine),
    ) -> (Vec<TrialsLine>, Option<String>) {
        let mut args = vec![
            "trials".to_string(),
            format!("--trials={}", params.trials),
            format!("--warmup={}", params.warmup),
            format!("--elements={}", params.elements),
            format!("--cycles={}", params.cycles),
        ];
        args.extend(cases.iter().map(|c| c.display().to_string()));
        let runs = u64::from(params.trials + params.warmup) * cases.len() as u64;
        let limit = Duration::from_secs(120 + 5 * runs);
        let mut seen = Vec::new();
        let result = self.run(&args, false, limit, &mut |line| {
            if let Some(t) = lines::<TrialsLine>(line).pop() {
                progress(&t);
                seen.push(t);
            }
        });
        let problem = match result {
            Err(e) => Some(e),
            Ok(done) if seen.len() < cases.len() => Some(stopped(&done)),
            Ok(_) => None,
        };
        (seen, problem)
    }

    /// Run `case` once in a fresh process under the sanitizer.
    pub fn sanitize(&self, case: &Path, params: Params) -> Result<Sanitized, String> {
        let args = [
            "sanitize".to_string(),
            format!("--elements={}", params.elements),
            format!("--cycles={}", params.cycles),
            case.display().to_string(),
        ];
        let done = self.run(&args, true, Duration::from_secs(300), &mut |_| {})?;
        let Some(line) = lines::<SanitizeLine>(&done.stdout).pop() else {
            return Err(stopped(&done));
        };
        if let Some(error) = line.error {
            return Err(error);
        }
        Ok(Sanitized {
            races: sanitizer::parse(&done.stderr).len(),
            raised: line.raised,
        })
    }
}

impl Harness {
    /// Run every case in `cases` in one fresh process: trials without the lifetime checker,
    /// then with it. Each case's result, in the order of `cases`; a case the harness never
    /// reported on has the reason.
    pub fn check(&self, cases: &[PathBuf], params: Params) -> Vec<Result<Checked, String>> {
        let mut args = vec![
            "check".to_string(),
            format!("--elements={}", params.elements),
            format!("--cycles={}", params.cycles),
        ];
        args.extend(cases.iter().map(|c| c.display().to_string()));
        let limit = Duration::from_secs(120 + 10 * cases.len() as u64);
        let mut seen: Vec<(String, CheckLine)> = Vec::new();
        let result = self.run(&args, false, limit, &mut |line| {
            if let (Some(case), Some(checked)) = (
                lines::<CaseName>(line).pop(),
                lines::<CheckLine>(line).pop(),
            ) {
                seen.push((case.case, checked));
            }
        });
        let problem = match &result {
            Err(e) => e.clone(),
            Ok(done) => stopped(done),
        };
        cases
            .iter()
            .map(|case| {
                let line = seen.iter().find(|(c, _)| Path::new(c) == case);
                match line.map(|(_, l)| l.clone()) {
                    Some(CheckLine {
                        error: Some(error), ..
                    }) => Err(error),
                    Some(CheckLine {
                        reports,
                        slowdown: Some(slowdown),
                        ..
                    }) => Ok(Checked { reports, slowdown }),
                    Some(_) => Err("the harness reported no timing".into()),
                    None => Err(problem.clone()),
                }
            })
            .collect()
    }
}

impl Harness {
    /// The lifetime checker's cost on a training step with correct stream code (see the
    /// harness's `cost`): its time over `steps` steps without and with the checker.
    pub fn training_step_cost(&self, steps: u32) -> Result<TrainingStep, String> {
        let args = ["cost".to_string(), format!("--steps={steps}")];
        let done = self.run(&args, false, Duration::from_secs(300), &mut |_| {})?;
        let Some(line) = lines::<CostLine>(&done.stdout).pop() else {
            return Err(stopped(&done));
        };
        match line {
            CostLine {
                error: Some(error), ..
            } => Err(error),
            CostLine {
                plain: Some(plain),
                checked: Some(checked),
                reports,
                ..
            } => Ok(TrainingStep {
                steps,
                plain_seconds: plain,
                checked_seconds: checked,
                slowdown: checked / plain,
                reports: reports.len(),
            }),
            _ => Err("the harness reported no timing".into()),
        }
    }
}

#[derive(Deserialize)]
struct CostLine {
    #[serde(default)]
    plain: Option<f64>,
    #[serde(default)]
    checked: Option<f64>,
    #[serde(default)]
    reports: Vec<CheckerReport>,
    #[serde(default)]
    error: Option<String>,
}

/// The lifetime checker on a training step whose stream code is correct.
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct TrainingStep {
    pub steps: u32,
    pub plain_seconds: f64,
    pub checked_seconds: f64,
    /// `checked_seconds / plain_seconds`.
    pub slowdown: f64,
    /// Hazards it reported there (a correct step: each one would be a false alarm).
    pub reports: usize,
}

/// The case a harness line is about.
#[derive(Deserialize)]
struct CaseName {
    case: String,
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A new empty folder under the system's temporary folder, named for this process and moment.
pub(crate) fn fresh_folder(prefix: &str) -> std::io::Result<PathBuf> {
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{unique}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Why a harness process stopped before reporting everything.
fn stopped(done: &Finished) -> String {
    let how = match done.status {
        None => "ran out of time and was stopped".to_string(),
        Some(s) => format!("stopped ({s})"),
    };
    format!("the harness {how}:\n{}", done.stderr_tail())
}

/// The JSON objects among `text`'s lines (anything else a library prints is skipped).
fn lines<T: DeserializeOwned>(text: &str) -> Vec<T> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_lines_are_read_and_other_output_is_skipped() {
        let out = "\
Warning: something a library printed\n\
{\"case\": \"/r/fixtures/python/SL001/bad_runtime_a.py\", \"corrupted\": [4194304, 4194304, 0]}\n\
{\"case\": \"/r/fixtures/python/SL001/good_runtime_a.py\", \"error\": \"RuntimeError: CUDA error (a.py:3)\"}\n\
{not json\n";
        let parsed = lines::<TrialsLine>(out);
        assert_eq!(parsed.len(), 2);
        assert_eq!(
            parsed[0].corrupted.as_deref(),
            Some(&[4194304, 4194304, 0][..])
        );
        assert_eq!(parsed[0].error, None);
        assert_eq!(parsed[1].corrupted, None);
        assert_eq!(
            parsed[1].error.as_deref(),
            Some("RuntimeError: CUDA error (a.py:3)")
        );
    }

    #[test]
    fn the_environment_line_is_read() {
        let t = lines::<Torch>(
            "{\"torch\": \"2.11.0+cu130\", \"cuda\": \"13.0\", \"available\": true}\n",
        );
        assert_eq!(
            t,
            [Torch {
                torch: "2.11.0+cu130".into(),
                cuda: Some("13.0".into()),
                available: true,
            }]
        );
    }

    /// The lifetime checker's bookkeeping passes its own tests: recorded event sequences, in
    /// plain Python (no PyTorch, no GPU).
    #[test]
    fn the_checker_bookkeeping_passes_its_tests() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("harness/test_lifetime.py");
        let out = Command::new("python3")
            .arg(&script)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn a_checked_trial_gives_its_reports_and_slowdown() {
        let line = lines::<CheckLine>(
            "{\"case\": \"c.py\", \"reports\": [{\"code\": \"SL001\", \"message\": \"m\", \"stacks\": [{\"label\": \"freed\", \"frames\": [{\"file\": \"c.py\", \"line\": 9, \"function\": \"case\"}]}]}], \"slowdown\": 1.5}\n",
        );
        assert_eq!(line[0].reports[0].code, "SL001");
        assert_eq!(line[0].reports[0].stacks[0].frames[0].line, 9);
        assert_eq!(line[0].slowdown, Some(1.5));
    }

    #[test]
    fn a_sanitized_trial_is_detected_by_reports_or_by_the_raise() {
        let line = lines::<SanitizeLine>("{\"case\": \"c.py\", \"raised\": true}\n");
        assert!(line[0].raised);
        assert!(Sanitized {
            races: 0,
            raised: true
        }
        .detected());
        assert!(Sanitized {
            races: 2,
            raised: false
        }
        .detected());
        assert!(!Sanitized {
            races: 0,
            raised: false
        }
        .detected());
    }

    /// The harness runs under the machine's Python (without PyTorch it must say so, not crash
    /// the caller); it is written and removed with its folder.
    #[test]
    fn the_harness_is_installed_and_removed() {
        let h = Harness::install(Path::new("python3")).unwrap();
        let dir = h.dir.clone();
        assert_eq!(std::fs::read_to_string(h.script()).unwrap(), HARNESS);
        for (name, text) in CHECKER_FILES {
            assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), *text);
        }
        drop(h);
        assert!(!dir.exists());
    }

    #[test]
    fn a_missing_interpreter_is_reported() {
        let h = Harness::install(Path::new("/nonexistent/python-for-streamlint")).unwrap();
        let e = h.torch().unwrap_err();
        assert!(e.contains("/nonexistent/python-for-streamlint"), "{e}");
    }

    /// A folder with a stand-in `torch` package (enough of its API for the harness, no GPU), an
    /// interpreter wrapper that puts it on the path, and case files.
    struct Stub {
        dir: PathBuf,
    }

    const STUB_TORCH: &str = "\
from types import SimpleNamespace
__version__ = \"0.0+stub\"
version = SimpleNamespace(cuda=\"13.0\")
cuda = SimpleNamespace(
    _sleep=lambda cycles: None,
    synchronize=lambda: None,
    is_available=lambda: True,
)


class Tensor:
    def __init__(self, values):
        self.values = list(values)

    def __ne__(self, other):
        return Tensor(float(v != other) for v in self.values)

    def sum(self):
        return Tensor([sum(self.values)])

    def item(self):
        return self.values[0]


def full(shape, value, device=None):
    return Tensor([value] * shape[0])
";

    impl Stub {
        fn new(name: &str) -> Stub {
            let dir =
                std::env::temp_dir().join(format!("streamlint-stub-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("torch")).unwrap();
            std::fs::create_dir_all(dir.join("fixtures/python/SL001")).unwrap();
            std::fs::write(dir.join("torch/__init__.py"), STUB_TORCH).unwrap();
            let wrapper = dir.join("python");
            std::fs::write(
                &wrapper,
                format!(
                    "#!/bin/sh\nPYTHONPATH='{}' exec python3 \"$@\"\n",
                    dir.display()
                ),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
            Stub { dir }
        }

        fn case(&self, name: &str, body: &str) -> PathBuf {
            let path = self.dir.join(format!("fixtures/python/SL001/{name}.py"));
            std::fs::write(&path, body).unwrap();
            path
        }
    }

    impl Drop for Stub {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    const PARAMS: Params = Params {
        trials: 2,
        warmup: 1,
        elements: 8,
        cycles: 10,
    };

    /// The shipped harness, end to end: it reports the interpreter's PyTorch, counts only the
    /// trials after the warm-up, gives every trial a new value, calls the helpers the cases
    /// use, and reports a failing case without stopping.
    #[test]
    fn the_harness_runs_warm_up_and_counted_trials() {
        let stub = Stub::new("trials");
        let counting = stub.case(
            "bad_runtime_counting",
            "import torch\n\n\ndef case(harness):\n    harness.delay()\n    harness.reuse()\n    t = torch.full((harness.n,), harness.value)\n    return harness.wrong(t, 1.0) + int(harness.value)\n",
        );
        let failing = stub.case(
            "good_runtime_failing",
            "def case(harness):\n    raise ValueError(\"no GPU here\")\n",
        );
        let h = Harness::install(&stub.dir.join("python")).unwrap();
        let torch = h.torch().unwrap();
        assert_eq!(torch.torch, "0.0+stub");
        assert_eq!(torch.cuda.as_deref(), Some("13.0"));
        let mut seen = Vec::new();
        let (lines, problem) = h.trials(&[counting.clone(), failing.clone()], PARAMS, &mut |l| {
            seen.push(l.case.clone())
        });
        assert_eq!(problem, None);
        assert_eq!(seen.len(), 2);
        assert_eq!(lines[0].case, counting.display().to_string());
        // The warm-up writes 1 (nothing wrong); the counted trials write 2 and 3, so all 8
        // elements are wrong, plus the value.
        assert_eq!(lines[0].corrupted.as_deref(), Some(&[10, 11][..]));
        let error = lines[1].error.as_deref().unwrap();
        assert!(error.starts_with("ValueError: no GPU here"), "{error}");
    }

    /// Under a PyTorch without the GPU trace hooks the checker is built on, every case gets a
    /// clear error; a case that fails on its own keeps its own error, in the cases' order.
    #[test]
    fn the_checker_says_why_it_cannot_start() {
        let stub = Stub::new("check");
        let quiet = stub.case("good_runtime_quiet", "def case(harness):\n    return 0\n");
        let broken = stub.case(
            "good_runtime_broken",
            "def case(harness):\n    return 1 / 0\n",
        );
        let h = Harness::install(&stub.dir.join("python")).unwrap();
        let results = h.check(&[broken, quiet], PARAMS);
        assert_eq!(results.len(), 2);
        let first = results[0].as_ref().unwrap_err();
        assert!(first.starts_with("ZeroDivisionError"), "{first}");
        let second = results[1].as_ref().unwrap_err();
        assert!(
            second.starts_with("the lifetime checker cannot start: ModuleNotFoundError"),
            "{second}"
        );
    }

    /// The training step needs a real PyTorch: under the stand-in it says what failed.
    #[test]
    fn the_training_step_cost_says_why_it_failed() {
        let stub = Stub::new("cost");
        let h = Harness::install(&stub.dir.join("python")).unwrap();
        let e = h.training_step_cost(2).unwrap_err();
        assert!(e.starts_with("AttributeError"), "{e}");
    }

    /// A case the sanitizer stops: its report on stderr is read, and the raise is seen.
    #[test]
    fn the_harness_reports_what_the_sanitizer_raised() {
        let stub = Stub::new("sanitize");
        std::fs::write(
            stub.dir.join("report.txt"),
            include_str!("testdata/csan_no_allocation_trace.txt"),
        )
        .unwrap();
        let racing = stub.case(
            "bad_runtime_racing",
            "import os, sys\n\n\nclass CUDASanitizerErrors(Exception):\n    pass\n\n\ndef case(harness):\n    assert os.environ.get(\"TORCH_CUDA_SANITIZER\") == \"1\"\n    with open(os.path.join(os.path.dirname(__file__), \"../../../report.txt\")) as f:\n        sys.stderr.write(f.read())\n    raise CUDASanitizerErrors(\"detected 1 errors\")\n",
        );
        let quiet = stub.case("good_runtime_quiet", "def case(harness):\n    return 0\n");
        let broken = stub.case(
            "good_runtime_broken",
            "def case(harness):\n    return 1 / 0\n",
        );
        let h = Harness::install(&stub.dir.join("python")).unwrap();
        assert_eq!(
            h.sanitize(&racing, PARAMS).unwrap(),
            Sanitized {
                races: 1,
                raised: true
            }
        );
        assert_eq!(
            h.sanitize(&quiet, PARAMS).unwrap(),
            Sanitized {
                races: 0,
                raised: false
            }
        );
        let e = h.sanitize(&broken, PARAMS).unwrap_err();
        assert!(e.starts_with("ZeroDivisionError"), "{e}");
    }
}
