//! The validation matrix: its data (`docs/validation.json`) and its rendering as a markdown
//! table (`docs/validation.md`).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::cases::{Language, Variant};
use crate::python::TrainingStep;

/// Where and how the cases ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    pub gpu: String,
    /// The NVIDIA kernel driver's version.
    pub driver: String,
    /// The CUDA version the driver supports.
    pub cuda: String,
    /// PyTorch's version and the CUDA it was built for.
    pub torch: String,
    pub cudarc: String,
    /// UTC, `YYYY-MM-DD`.
    pub date: String,
    pub command: String,
}

/// What the GPU did with one case.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuResult {
    pub trials: u32,
    pub corrupted_trials: u32,
    pub max_corrupted_elements: u64,
    /// Why the case did not run (or stopped) on the GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl GpuResult {
    /// The result of the counted trials (corrupted elements per trial).
    pub fn from_counts(counts: &[u64]) -> GpuResult {
        GpuResult {
            trials: counts.len() as u32,
            corrupted_trials: counts.iter().filter(|c| **c > 0).count() as u32,
            max_corrupted_elements: counts.iter().copied().max().unwrap_or(0),
            error: None,
        }
    }

    /// A case that did not run.
    pub fn failed(error: String) -> GpuResult {
        GpuResult {
            trials: 0,
            corrupted_trials: 0,
            max_corrupted_elements: 0,
            error: Some(error),
        }
    }
}

/// What PyTorch's CUDA sanitizer made of a Python case.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizerResult {
    pub detected: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What streamlint's lifetime checker made of a Python case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckerResult {
    /// It reported a hazard.
    pub reported: bool,
    /// The rule codes of its reports, sorted, each once.
    pub codes: Vec<String>,
    /// A trial's time with the checker over its time without.
    pub slowdown: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The rules whose hazards the lifetime checker sees at run time (the sanitizer sees none).
pub const CHECKER_RULES: &[&str] = &["SL001", "SL002", "SL004", "SL007"];

/// One row of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub language: Language,
    pub rule: String,
    pub case: String,
    pub variant: Variant,
    /// The codes streamlint reports on the case's file, sorted, each once.
    pub static_findings: Vec<String>,
    pub gpu: GpuResult,
    /// `null` for Rust cases (the sanitizer is PyTorch's).
    pub sanitizer: Option<SanitizerResult>,
    /// `null` for Rust cases (the checker watches PyTorch).
    #[serde(default)]
    pub checker: Option<CheckerResult>,
}

impl CaseResult {
    /// Does the row show what the linter claims? A bad case is flagged with its rule and
    /// corrupts data in most trials; a good case is clean and never corrupts.
    pub fn as_expected(&self) -> bool {
        if self.gpu.error.is_some() || self.gpu.trials == 0 {
            return false;
        }
        // The lifetime checker is silent on a good case, and reports a bad case of a rule it
        // sees.
        if let Some(checker) = &self.checker {
            let fits = match self.variant {
                Variant::Bad => checker.reported || !CHECKER_RULES.contains(&self.rule.as_str()),
                Variant::Good => !checker.reported,
            };
            if checker.error.is_some() || !fits {
                return false;
            }
        }
        match self.variant {
            Variant::Bad => {
                self.static_findings.contains(&self.rule)
                    && 2 * self.gpu.corrupted_trials > self.gpu.trials
            }
            Variant::Good => self.static_findings.is_empty() && self.gpu.corrupted_trials == 0,
        }
    }
}

/// The whole matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub environment: Environment,
    pub cases: Vec<CaseResult>,
    /// The lifetime checker on a training step with correct stream code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker_training_step: Option<TrainingStep>,
}

impl Validation {
    /// `docs/validation.json`.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// `docs/validation.md`.
    pub fn to_markdown(&self) -> String {
        let e = &self.environment;
        let mut out = String::from(
            "# GPU validation\n\n\
             <!-- Written by `streamlint validate`; edit the cases or the command, not this file. -->\n\n\
             Every runtime case under `fixtures/` (files named `bad_runtime_*` and `good_runtime_*`), run on a GPU. \
             A bad case has the hazard its rule describes; its good twin is the same code with the fix. \
             Each variant runs warm-up trials, then the counted trials; a trial is corrupted when any element \
             comes out wrong after a full synchronize. The Python cases also run once, in a fresh process, \
             under PyTorch's CUDA sanitizer (`TORCH_CUDA_SANITIZER=1`), and once more, in another fresh \
             process, under streamlint's lifetime checker (`validate --run` uses it too), whose slowdown is a \
             trial's time with it over its time without. A row is as expected when a bad case is flagged \
             with its rule and corrupts data in most trials (and, for SL001, SL002, SL004 and SL007, the \
             checker reports it), and a good case has no finding, never corrupts and the checker reports \
             nothing.\n\n",
        );
        let _ = write!(
            out,
            "| | |\n|---|---|\n| GPU | {} |\n| driver | {} |\n| CUDA | {} |\n| PyTorch | {} |\n| cudarc | {} |\n| date | {} |\n| command | `{}` |\n\n",
            cell(&e.gpu),
            cell(&e.driver),
            cell(&e.cuda),
            cell(&e.torch),
            cell(&e.cudarc),
            cell(&e.date),
            e.command.replace('|', "\\|"),
        );
        out.push_str(
            "| language | rule | case | variant | static findings | corrupted trials | most corrupted elements | sanitizer | lifetime checker | as expected |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for c in &self.cases {
            let findings = if c.static_findings.is_empty() {
                "none".to_string()
            } else {
                c.static_findings.join(", ")
            };
            let corrupted = match &c.gpu.error {
                Some(e) => format!("error: {}", cell(e)),
                None => format!("{} / {}", c.gpu.corrupted_trials, c.gpu.trials),
            };
            let sanitizer = match &c.sanitizer {
                None => "n/a".to_string(),
                Some(SanitizerResult { error: Some(e), .. }) => format!("error: {}", cell(e)),
                Some(s) if s.detected => "race reported".to_string(),
                Some(_) => "nothing reported".to_string(),
            };
            let checker = match &c.checker {
                None => "n/a".to_string(),
                Some(CheckerResult { error: Some(e), .. }) => format!("error: {}", cell(e)),
                Some(k) if k.reported => {
                    format!("{} ({:.2}x)", k.codes.join(", "), k.slowdown)
                }
                Some(k) => format!("nothing reported ({:.2}x)", k.slowdown),
            };
            let _ = writeln!(
                out,
                "| {} | {} | `{}` | {} | {} | {} | {} | {} | {} | {} |",
                c.language,
                c.rule,
                c.case,
                c.variant,
                findings,
                corrupted,
                c.gpu.max_corrupted_elements,
                sanitizer,
                checker,
                if c.as_expected() { "yes" } else { "**no**" },
            );
        }
        if let Some(t) = &self.checker_training_step {
            let _ = writeln!(
                out,
                "\nThe lifetime checker on a training step with correct stream code (an MLP of six \
                 1024-wide layers with AdamW, its next batch prefetched on a side stream and recorded \
                 for the current stream; `harness.py cost`): {} steps in {:.2} s without it, {:.2} s \
                 with it, **{:.2}x**; {} hazards reported there.",
                t.steps, t.plain_seconds, t.checked_seconds, t.slowdown, t.reports
            );
        }
        let wrong = self.cases.iter().filter(|c| !c.as_expected()).count();
        let _ = writeln!(
            out,
            "\n{} of {} rows as expected.",
            self.cases.len() - wrong,
            self.cases.len()
        );
        out
    }
}

/// Text safe inside a table cell: one line, no column breaks.
fn cell(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variant: Variant, findings: &[&str], counts: &[u64]) -> CaseResult {
        CaseResult {
            language: Language::Python,
            rule: "SL001".into(),
            case: "side_features_del".into(),
            variant,
            static_findings: findings.iter().map(|s| s.to_string()).collect(),
            gpu: GpuResult::from_counts(counts),
            sanitizer: Some(SanitizerResult {
                detected: false,
                error: None,
            }),
            checker: Some(CheckerResult {
                reported: variant == Variant::Bad,
                codes: match variant {
                    Variant::Bad => vec!["SL001".into()],
                    Variant::Good => Vec::new(),
                },
                slowdown: 1.25,
                error: None,
            }),
        }
    }

    fn training_step() -> TrainingStep {
        TrainingStep {
            steps: 50,
            plain_seconds: 2.0,
            checked_seconds: 3.0,
            slowdown: 1.5,
            reports: 0,
        }
    }

    fn environment() -> Environment {
        Environment {
            gpu: "NVIDIA H200".into(),
            driver: "580.159.04".into(),
            cuda: "13.0".into(),
            torch: "2.11.0+cu130 (CUDA 13.0)".into(),
            cudarc: "0.19.10".into(),
            date: "2026-11-30".into(),
            command: "streamlint validate --trials 3".into(),
        }
    }

    #[test]
    fn counts_become_corrupted_trials_and_the_worst_trial() {
        let g = GpuResult::from_counts(&[4194304, 0, 17]);
        assert_eq!(
            (g.trials, g.corrupted_trials, g.max_corrupted_elements),
            (3, 2, 4194304)
        );
        assert_eq!(GpuResult::from_counts(&[]).trials, 0);
    }

    #[test]
    fn a_bad_case_must_be_flagged_and_corrupt_most_trials() {
        assert!(row(Variant::Bad, &["SL001"], &[5, 5, 0]).as_expected());
        assert!(row(Variant::Bad, &["SL001", "SL003"], &[5, 5, 5]).as_expected());
        assert!(!row(Variant::Bad, &["SL001"], &[5, 0, 0]).as_expected());
        assert!(!row(Variant::Bad, &["SL001"], &[5, 5, 0, 0]).as_expected());
        assert!(!row(Variant::Bad, &["SL003"], &[5, 5, 5]).as_expected());
        assert!(!row(Variant::Bad, &[], &[5, 5, 5]).as_expected());
    }

    #[test]
    fn a_good_case_must_be_clean_and_never_corrupt() {
        assert!(row(Variant::Good, &[], &[0, 0, 0]).as_expected());
        assert!(!row(Variant::Good, &[], &[0, 1, 0]).as_expected());
        assert!(!row(Variant::Good, &["SL001"], &[0, 0, 0]).as_expected());
        assert!(!row(Variant::Good, &[], &[]).as_expected());
        let mut failed = row(Variant::Good, &[], &[]);
        failed.gpu = GpuResult::failed("CUDA_ERROR_INVALID_PTX".into());
        assert!(!failed.as_expected());
    }

    /// The lifetime checker must report a bad case of a rule it sees, and stay silent on a
    /// good case; it does not judge rules it cannot see.
    #[test]
    fn the_checker_reports_what_it_sees_and_nothing_on_good_cases() {
        let mut missed = row(Variant::Bad, &["SL001"], &[5, 5]);
        missed.checker.as_mut().unwrap().reported = false;
        assert!(!missed.as_expected());
        let mut sl003 = missed.clone();
        sl003.rule = "SL003".into();
        sl003.static_findings = vec!["SL003".into()];
        assert!(sl003.as_expected());
        let mut noisy = row(Variant::Good, &[], &[0, 0]);
        noisy.checker.as_mut().unwrap().reported = true;
        assert!(!noisy.as_expected());
        let mut failed = row(Variant::Good, &[], &[0, 0]);
        failed.checker.as_mut().unwrap().error = Some("ImportError".into());
        assert!(!failed.as_expected());
    }

    /// The JSON has exactly the documented shape, and reads back.
    #[test]
    fn the_json_has_the_documented_shape() {
        let mut rust = row(Variant::Bad, &["SL010"], &[7]);
        rust.language = Language::Rust;
        rust.rule = "SL010".into();
        rust.sanitizer = None;
        rust.checker = None;
        let v = Validation {
            environment: environment(),
            cases: vec![row(Variant::Good, &[], &[0, 0]), rust],
            checker_training_step: Some(training_step()),
        };
        let value: serde_json::Value = serde_json::from_str(&v.to_json()).unwrap();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(&value),
            ["cases", "checker_training_step", "environment"]
        );
        assert_eq!(value["checker_training_step"]["slowdown"], 1.5);
        assert_eq!(
            keys(&value["environment"]),
            ["command", "cuda", "cudarc", "date", "driver", "gpu", "torch"]
        );
        let first = &value["cases"][0];
        assert_eq!(
            keys(first),
            [
                "case",
                "checker",
                "gpu",
                "language",
                "rule",
                "sanitizer",
                "static_findings",
                "variant"
            ]
        );
        assert_eq!(
            first["checker"],
            serde_json::json!({"reported": false, "codes": [], "slowdown": 1.25})
        );
        assert_eq!(value["cases"][1]["checker"], serde_json::Value::Null);
        assert_eq!(first["language"], "python");
        assert_eq!(first["variant"], "good");
        assert_eq!(
            keys(&first["gpu"]),
            ["corrupted_trials", "max_corrupted_elements", "trials"]
        );
        assert_eq!(first["sanitizer"], serde_json::json!({"detected": false}));
        assert_eq!(value["cases"][1]["sanitizer"], serde_json::Value::Null);
        assert_eq!(
            value["cases"][1]["static_findings"],
            serde_json::json!(["SL010"])
        );
        let back: Validation = serde_json::from_str(&v.to_json()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_markdown_has_the_environment_and_a_row_per_case() {
        let mut failed = row(Variant::Good, &[], &[]);
        failed.gpu = GpuResult::failed("RuntimeError: CUDA error | line\nnext".into());
        let v = Validation {
            environment: environment(),
            cases: vec![
                row(Variant::Bad, &["SL001"], &[4194304, 4194304]),
                row(Variant::Good, &[], &[0, 0]),
                failed,
            ],
            checker_training_step: Some(training_step()),
        };
        let md = v.to_markdown();
        assert!(md.starts_with("# GPU validation\n"));
        assert!(md.contains("| GPU | NVIDIA H200 |\n"));
        assert!(md.contains("| command | `streamlint validate --trials 3` |\n"));
        assert!(md.contains(
            "| python | SL001 | `side_features_del` | bad | SL001 | 2 / 2 | 4194304 | nothing reported | SL001 (1.25x) | yes |\n"
        ));
        assert!(md.contains(
            "| python | SL001 | `side_features_del` | good | none | 0 / 2 | 0 | nothing reported | nothing reported (1.25x) | yes |\n"
        ));
        assert!(md.contains("| error: RuntimeError: CUDA error \\| line next | 0 |"));
        assert!(md.contains("| **no** |\n"));
        assert!(md.contains("50 steps in 2.00 s without it, 3.00 s with it, **1.50x**; 0 hazards"));
        assert!(md.trim_end().ends_with("2 of 3 rows as expected."));
        let table_rows = md.lines().filter(|l| l.starts_with("| python")).count();
        assert_eq!(table_rows, 3);
    }
}
