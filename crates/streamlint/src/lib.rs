//! The command-line interface: argument parsing, the `check`, `rule`, `rules` and `server`
//! commands, and exit codes (0 clean, 1 findings, 2 when the run cannot proceed as asked).

mod check;
mod rules;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use streamlint_render::Format;

#[derive(Parser, Debug)]
#[command(
    name = "streamlint",
    version,
    about = "Find CUDA stream-lifetime bugs in PyTorch and Rust GPU code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check files or directories (default: the current directory); `-` reads stdin.
    Check(CheckArgs),
    /// Print the documentation of one rule.
    Rule {
        /// A rule code (SL001) or name (missing-record-stream).
        code: String,
    },
    /// List every rule.
    Rules {
        /// `text` (a table) or `json`.
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        output_format: String,
    },
    /// Run the language server on stdin/stdout (for editors).
    Server,
    /// Run the runtime cases on this machine's GPU and write docs/validation.{json,md}; with
    /// `--run -- COMMAND`, run a program under PyTorch's CUDA sanitizer instead.
    Validate(streamlint_runtime::ValidateArgs),
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Files or directories to check; `-` reads the source from stdin.
    paths: Vec<PathBuf>,
    /// How findings are printed.
    #[arg(long, default_value = "full", value_parser = clap::builder::PossibleValuesParser::new(Format::NAMES))]
    output_format: String,
    /// Write the output to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    output_file: Option<PathBuf>,
    /// Print how many findings each rule reported instead of the findings.
    #[arg(long)]
    statistics: bool,
    /// Also list, as information, the findings proven safe elsewhere in the program (every
    /// block on the stream starts with a wait on the current stream, or every caller is
    /// judged with the function in place), each saying why.
    #[arg(long)]
    show_proven: bool,
    /// Apply the safe fixes to the files (and the unsafe ones with `--unsafe-fixes`).
    #[arg(long)]
    fix: bool,
    /// Print the changes the fixes would make as a unified diff, and change nothing.
    #[arg(long, conflicts_with = "fix")]
    diff: bool,
    /// Also apply (or show) fixes that need review.
    #[arg(long)]
    unsafe_fixes: bool,
    /// The name of the file whose source comes from stdin: its language, the configuration
    /// found from it, and the name findings carry.
    #[arg(long, value_name = "NAME")]
    stdin_filename: Option<PathBuf>,
    /// Only report these rules (codes, prefixes, names or ALL), comma-separated.
    #[arg(long, value_delimiter = ',')]
    select: Vec<String>,
    /// Do not report these rules, comma-separated.
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    /// Only report findings of this severity or higher: `error` leaves out the findings that
    /// rest on the contract at function boundaries (warnings) and the hints (info).
    #[arg(long, value_name = "LEVEL", value_parser = severity_level)]
    severity: Option<streamlint_rules::Severity>,
    /// Exit with 0 even when there are findings.
    #[arg(long)]
    exit_zero: bool,
    /// Check files that .gitignore excludes too.
    #[arg(long)]
    no_respect_gitignore: bool,
    /// Apply the configured excludes to files named on the command line too (for pre-commit
    /// and other tools that pass every changed file).
    #[arg(long)]
    force_exclude: bool,
    /// Use this configuration file (a `streamlint.toml` or a `pyproject.toml`) instead of the
    /// one found from the checked path upward.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Ignore every configuration file.
    #[arg(long)]
    isolated: bool,
}

/// A severity as `--severity` takes it.
fn severity_level(text: &str) -> Result<streamlint_rules::Severity, String> {
    streamlint_linter::parse_severity(text)
        .ok_or_else(|| format!("`{text}` is not a severity: use error, warning or info"))
}

/// Run the command line `args` (including the program name) with `stdin` as the source for
/// `-`; returns the exit code.
pub fn run_with_stdin<I, T>(
    args: I,
    stdin: &mut dyn std::io::Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render();
            let _ = if e.use_stderr() {
                write!(stderr, "{text}")
            } else {
                write!(stdout, "{text}")
            };
            return code;
        }
    };
    let result = match cli.command {
        Command::Check(args) => check::check(args, stdin, stdout, stderr),
        Command::Rule { code } => rules::print_rule(&code, stdout, stderr),
        Command::Rules { output_format } => rules::print_rules(&output_format, stdout),
        Command::Server => match streamlint_server::run_stdio() {
            Ok(code) => Ok(code),
            Err(e) => writeln!(stderr, "error: language server: {e}").map(|_| 2),
        },
        Command::Validate(args) => streamlint_runtime::validate(args, stdout, stderr),
    };
    result.unwrap_or(2)
}

/// Run the command line `args` (including the program name) with the process's stdin. The
/// standard streams are not held locked: the language server reads and writes them from
/// threads of its own.
pub fn run<I, T>(args: I, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_with_stdin(args, &mut std::io::stdin(), stdout, stderr)
}
