//! `streamlint validate` without `--run`: every runtime case on the local GPU, then the matrix
//! written to `docs/`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::cases::{self, CaseId, Language};
use crate::device::{self, Gpu, NoGpu};
use crate::environment;
use crate::kit::Kernels;
use crate::python::{Harness, Params};
use crate::report::{
    CaseResult, CheckerResult, Environment, GpuResult, SanitizerResult, Validation,
};
use crate::rust_cases::RUST_CASES;
use crate::rust_runs::Runner;
use crate::verdict::static_findings;
use crate::ValidateArgs;

/// Run every case with `args`, on the GPU `probe` finds.
pub fn validate_cases(
    args: &ValidateArgs,
    probe: impl FnOnce() -> Result<Gpu, NoGpu>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<i32> {
    let gpu = match probe() {
        Ok(gpu) => gpu,
        Err(why) => {
            writeln!(
                stderr,
                "error: {why}.\n`streamlint validate` runs the runtime cases on this machine's NVIDIA GPU \
                 (it needs the driver and, for the Python cases, PyTorch; no CUDA toolkit). \
                 Run it on a machine with a GPU."
            )?;
            return Ok(2);
        }
    };
    let root = args.root.as_path();
    let python_cases = match cases::on_disk(root, Language::Python) {
        Ok(c) => c,
        Err(e) => {
            writeln!(
                stderr,
                "error: cannot read {}: {e}; run `streamlint validate` from the repository root or pass --root",
                root.join("fixtures/python").display()
            )?;
            return Ok(2);
        }
    };
    let rust_cases: Vec<CaseId> = RUST_CASES
        .iter()
        .filter_map(|c| CaseId::from_path(c.path().as_ref()))
        .collect();
    let all: Vec<CaseId> = python_cases.iter().chain(&rust_cases).cloned().collect();
    let lonely = cases::unpaired(&all);
    if !lonely.is_empty() {
        for c in lonely {
            writeln!(
                stderr,
                "error: {} has no {} twin",
                c.path().display(),
                match c.variant {
                    cases::Variant::Bad => "good",
                    cases::Variant::Good => "bad",
                }
            )?;
        }
        return Ok(2);
    }
    let mut python_sources = Vec::new();
    for id in &python_cases {
        let file = root.join(id.path());
        match std::fs::read_to_string(&file) {
            Ok(text) => python_sources.push(PythonCase {
                id: id.clone(),
                file,
                text,
            }),
            Err(e) => {
                writeln!(stderr, "error: cannot read {}: {e}", file.display())?;
                return Ok(2);
            }
        }
    }
    let harness = match Harness::install(&args.python) {
        Ok(h) => h,
        Err(e) => {
            writeln!(
                stderr,
                "error: cannot write the Python harness to a temporary folder: {e}"
            )?;
            return Ok(2);
        }
    };
    let torch = match harness.torch() {
        Ok(t) => t,
        Err(e) => {
            writeln!(stderr, "error: {e}")?;
            return Ok(2);
        }
    };
    let params = Params {
        trials: args.trials,
        warmup: args.warmup,
        elements: usize::try_from(args.elements).unwrap_or(usize::MAX),
        cycles: args.cycles,
    };
    let environment = Environment {
        gpu: gpu.name.clone(),
        driver: device::local_driver_version(),
        cuda: gpu.cuda.clone(),
        torch: torch.torch.clone(),
        cudarc: environment::CUDARC.into(),
        date: environment::today(),
        command: command_line(args),
    };
    writeln!(
        stderr,
        "validating on {} (driver {}, CUDA {}; PyTorch {} for CUDA {}): {} trials after {} warm-up per variant",
        environment.gpu,
        environment.driver,
        environment.cuda,
        environment.torch,
        torch.cuda.as_deref().unwrap_or("none"),
        args.trials,
        args.warmup
    )?;
    let mut results = match run_rust(gpu, params, stderr)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    results.extend(run_python(&harness, &python_sources, params, stderr)?);
    results.sort_by(|a, b| {
        (a.language, &a.rule, &a.case, a.variant).cmp(&(b.language, &b.rule, &b.case, b.variant))
    });
    let training_step = match harness.training_step_cost(50) {
        Ok(t) => {
            writeln!(
                stderr,
                "lifetime checker on a training step: {:.2}x slower, {} reports",
                t.slowdown, t.reports
            )?;
            Some(t)
        }
        Err(e) => {
            writeln!(stderr, "lifetime checker on a training step: failed: {e}")?;
            None
        }
    };
    let validation = Validation {
        environment,
        cases: results,
        checker_training_step: training_step,
    };
    let markdown = validation.to_markdown();
    write!(stdout, "{markdown}")?;
    let docs = root.join("docs");
    let (json_path, md_path) = (docs.join("validation.json"), docs.join("validation.md"));
    let written = std::fs::create_dir_all(&docs)
        .and_then(|()| std::fs::write(&json_path, validation.to_json()))
        .and_then(|()| std::fs::write(&md_path, &markdown));
    if let Err(e) = written {
        writeln!(stderr, "error: cannot write {}: {e}", docs.display())?;
        return Ok(2);
    }
    writeln!(
        stderr,
        "wrote {} and {}",
        json_path.display(),
        md_path.display()
    )?;
    let all_right = validation.cases.iter().all(CaseResult::as_expected)
        && validation
            .checker_training_step
            .as_ref()
            .is_some_and(|t| t.reports == 0);
    Ok(if all_right { 0 } else { 1 })
}

/// The command that reproduces this run.
fn command_line(args: &ValidateArgs) -> String {
    format!(
        "streamlint validate --trials {} --warmup {} --elements {} --cycles {}",
        args.trials, args.warmup, args.elements, args.cycles
    )
}

/// Every compiled Rust case; `Err(exit code)` when the kernels cannot be loaded.
fn run_rust(
    gpu: Gpu,
    params: Params,
    stderr: &mut dyn Write,
) -> io::Result<Result<Vec<CaseResult>, i32>> {
    let kernels = match Kernels::load(&gpu.ctx) {
        Ok(k) => k,
        Err(e) => {
            writeln!(stderr, "error: the driver cannot load the PTX kernels: {e}")?;
            return Ok(Err(2));
        }
    };
    let mut runner = Runner {
        ctx: &gpu.ctx,
        kernels: &kernels,
        trials: params.trials,
        warmup: params.warmup,
        elements: params.elements,
        cycles: params.cycles,
        next_value: 1.0,
    };
    let mut results = Vec::new();
    for case in RUST_CASES {
        let Some(id) = CaseId::from_path(case.path().as_ref()) else {
            continue;
        };
        let gpu_result = runner.run(case);
        progress(stderr, &id, &gpu_result)?;
        results.push(CaseResult {
            static_findings: static_findings(Path::new(case.path()), case.source),
            gpu: gpu_result,
            sanitizer: None,
            checker: None,
            language: id.language,
            rule: id.rule,
            case: id.name,
            variant: id.variant,
        });
    }
    Ok(Ok(results))
}

/// A Python case and its file's text.
struct PythonCase {
    id: CaseId,
    file: PathBuf,
    text: String,
}

/// Every Python case: trials in one process, then the sanitizer, one fresh process per case.
fn run_python(
    harness: &Harness,
    cases: &[PythonCase],
    params: Params,
    stderr: &mut dyn Write,
) -> io::Result<Vec<CaseResult>> {
    let files: Vec<PathBuf> = cases.iter().map(|c| c.file.clone()).collect();
    let mut failed_write = None;
    let (lines, problem) = harness.trials(&files, params, &mut |line| {
        let result = gpu_result(line.corrupted.as_deref(), line.error.clone());
        let id = CaseId::from_path(Path::new(&line.case));
        if let (Some(id), None) = (id, &failed_write) {
            failed_write = progress(stderr, &id, &result).err();
        }
    });
    if let Some(e) = failed_write {
        return Err(e);
    }
    if let Some(p) = &problem {
        writeln!(stderr, "error: {p}")?;
    }
    let mut checked = harness.check(&files, params).into_iter();
    let mut results = Vec::new();
    for case in cases {
        let reported = lines.iter().find(|l| Path::new(&l.case) == case.file);
        let gpu = match reported {
            Some(l) => gpu_result(l.corrupted.as_deref(), l.error.clone()),
            None => GpuResult::failed(
                problem
                    .clone()
                    .unwrap_or_else(|| "the harness did not report on it".into()),
            ),
        };
        let sanitizer = match harness.sanitize(&case.file, params) {
            Ok(s) => SanitizerResult {
                detected: s.detected(),
                error: None,
            },
            Err(e) => SanitizerResult {
                detected: false,
                error: Some(e),
            },
        };
        writeln!(
            stderr,
            "{}: sanitizer {}",
            case.id,
            match (&sanitizer.error, sanitizer.detected) {
                (Some(e), _) => format!("failed: {e}"),
                (None, true) => "reported a race".into(),
                (None, false) => "reported nothing".into(),
            }
        )?;
        let checker = checker_result(
            checked
                .next()
                .unwrap_or_else(|| Err("the harness did not check it".into())),
        );
        writeln!(
            stderr,
            "{}: lifetime checker {}",
            case.id,
            match (&checker.error, checker.reported) {
                (Some(e), _) => format!("failed: {e}"),
                (None, true) => format!("reported {}", checker.codes.join(", ")),
                (None, false) => "reported nothing".into(),
            }
        )?;
        results.push(CaseResult {
            language: case.id.language,
            rule: case.id.rule.clone(),
            case: case.id.name.clone(),
            variant: case.id.variant,
            static_findings: static_findings(&case.id.path(), &case.text),
            gpu,
            sanitizer: Some(sanitizer),
            checker: Some(checker),
        });
    }
    Ok(results)
}

/// The matrix's view of a checked case: whether it reported, and which rules.
fn checker_result(checked: Result<crate::python::Checked, String>) -> CheckerResult {
    match checked {
        Ok(c) => {
            let mut codes: Vec<String> = c.reports.into_iter().map(|r| r.code).collect();
            codes.sort();
            codes.dedup();
            CheckerResult {
                reported: !codes.is_empty(),
                codes,
                slowdown: c.slowdown,
                error: None,
            }
        }
        Err(e) => CheckerResult {
            reported: false,
            codes: Vec::new(),
            slowdown: 0.0,
            error: Some(e),
        },
    }
}

fn gpu_result(corrupted: Option<&[u64]>, error: Option<String>) -> GpuResult {
    match (corrupted, error) {
        (_, Some(e)) => GpuResult::failed(e),
        (Some(counts), None) => GpuResult::from_counts(counts),
        (None, None) => GpuResult::failed("the harness reported no trials".into()),
    }
}

fn progress(stderr: &mut dyn Write, id: &CaseId, result: &GpuResult) -> io::Result<()> {
    match &result.error {
        Some(e) => writeln!(stderr, "{id}: failed: {e}"),
        None => writeln!(
            stderr,
            "{id}: {} of {} trials corrupted (at most {} elements)",
            result.corrupted_trials, result.trials, result.max_corrupted_elements
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ValidateArgs,
    }

    fn run_without_gpu(why: NoGpu) -> (i32, String, String) {
        let cli = Cli::try_parse_from(["validate"]).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = validate_cases(&cli.args, || Err(why), &mut out, &mut err).unwrap();
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    /// With no driver or no GPU, `validate` says so plainly, writes nothing and exits 2.
    #[test]
    fn without_a_gpu_it_says_so_and_exits_2() {
        let (code, out, err) = run_without_gpu(NoGpu::NoDriver);
        assert_eq!(code, 2);
        assert_eq!(out, "");
        assert!(err.starts_with("error: no NVIDIA driver"), "{err}");
        assert!(err.contains("Run it on a machine with a GPU."), "{err}");
        let (code, _, err) = run_without_gpu(NoGpu::NoDevice);
        assert_eq!(code, 2);
        assert!(err.starts_with("error: no GPU"), "{err}");
    }

    #[test]
    fn the_recorded_command_reproduces_the_run() {
        let cli = Cli::try_parse_from([
            "validate", "--trials", "3", "--cycles", "5000", "--root", "/r",
        ])
        .unwrap();
        assert_eq!(
            command_line(&cli.args),
            "streamlint validate --trials 3 --warmup 2 --elements 4194304 --cycles 5000"
        );
    }

    #[test]
    fn harness_results_become_gpu_results() {
        assert_eq!(gpu_result(Some(&[0, 9]), None).corrupted_trials, 1);
        assert_eq!(
            gpu_result(Some(&[0]), Some("boom".into())).error.as_deref(),
            Some("boom")
        );
        assert!(gpu_result(None, None).error.is_some());
    }
}
