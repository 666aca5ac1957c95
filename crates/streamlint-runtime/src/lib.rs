//! `streamlint validate`: proof on a real GPU that what streamlint flags corrupts data and what
//! it accepts does not.
//!
//! The runtime cases are fixture files (`fixtures/<language>/<RULE>/{bad,good}_runtime_*`), so
//! the fixture harness checks their static verdict and this crate runs the very same code: the
//! Python cases through a harness this crate ships (warm-up, then trials, then once more under
//! PyTorch's CUDA sanitizer), the Rust cases compiled in (cudarc with the driver loaded at run
//! time, kernels as PTX text, so neither this machine nor the GPU machine needs a CUDA toolkit).
//! The result is written to `docs/validation.json` and `docs/validation.md`.
//!
//! `streamlint validate --run -- python train.py ...` instead runs a user's program under the
//! sanitizer and sets its reports against streamlint's findings in the program's files.

mod cases;
mod checker;
mod device;
mod environment;
mod kit;
mod process;
mod python;
mod report;
mod rust_cases;
mod rust_runs;
mod sanitizer;
mod user_run;
mod validate;
mod verdict;

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;

/// The arguments of `streamlint validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Counted trials per case variant (after the warm-up).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub trials: u32,
    /// Uncounted trials per case variant before the counted ones.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub warmup: u32,
    /// Elements per buffer.
    #[arg(long, default_value_t = 1 << 22, value_parser = clap::value_parser!(u64).range(1..=1 << 28))]
    pub elements: u64,
    /// Clock cycles a delayed stream spins before its producer runs.
    #[arg(long, default_value_t = 100_000_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
    pub cycles: u64,
    /// The Python interpreter with PyTorch, for the Python cases.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub python: PathBuf,
    /// The repository root: where `fixtures/` is read and `docs/validation.*` are written.
    #[arg(long, value_name = "DIR", default_value = ".", conflicts_with = "run")]
    pub root: PathBuf,
    /// Run COMMAND under PyTorch's CUDA sanitizer instead, and set its reports against
    /// streamlint's findings in the program's files.
    #[arg(long, requires = "command")]
    pub run: bool,
    /// The program to run with `--run`, after `--` (`-- python train.py --epochs 1`).
    #[arg(last = true, value_name = "COMMAND", requires = "run")]
    pub command: Vec<OsString>,
}

/// Run `streamlint validate`; returns the exit code: 0 when everything is as expected, 1 when a
/// row of the matrix is not (or, with `--run`, when there are findings or races), 2 when the run
/// cannot proceed (no GPU, no PyTorch, not in the repository).
pub fn validate(
    args: ValidateArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<i32> {
    if args.run {
        return user_run::run_program(&args.command, stdout, stderr);
    }
    validate::validate_cases(&args, device::probe, stdout, stderr)
}

/// The repository root, for tests that read the fixtures.
#[cfg(test)]
fn repository_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}
