//! The command-line interface: argument parsing, the `check`, `rule` and `rules` commands, and
//! exit codes (0 clean, 1 findings, 2 when the run cannot proceed as asked).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use streamlint_linter::{check_files, discover, Config, ConfigError, Selection, Settings};
use streamlint_render::{render, FileFindings, Format};

#[derive(Parser, Debug)]
#[command(
    name = "streamlint",
    version,
    about = "Find CUDA stream-lifetime bugs in PyTorch code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check files or directories (default: the current directory).
    Check(CheckArgs),
    /// Print the documentation of one rule.
    Rule {
        /// A rule code (SL001) or name (missing-record-stream).
        code: String,
    },
    /// List every rule.
    Rules,
    /// Run the language server on stdin/stdout (for editors).
    Server,
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Files or directories to check.
    paths: Vec<PathBuf>,
    /// Output format: full, concise or json.
    #[arg(long, default_value = "full", value_parser = clap::builder::PossibleValuesParser::new(Format::NAMES))]
    output_format: String,
    /// Only report these rules (codes, prefixes, names or ALL), comma-separated.
    #[arg(long, value_delimiter = ',')]
    select: Vec<String>,
    /// Do not report these rules, comma-separated.
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    /// Exit with 0 even when there are findings.
    #[arg(long)]
    exit_zero: bool,
    /// Check files that .gitignore excludes too.
    #[arg(long)]
    no_respect_gitignore: bool,
    /// Use this configuration file (a `streamlint.toml` or a `pyproject.toml`) instead of the
    /// one found from the checked path upward.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Ignore every configuration file.
    #[arg(long)]
    isolated: bool,
}

/// Run the command line `args` (including the program name); returns the exit code.
pub fn run<I, T>(args: I, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32
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
        Command::Check(args) => check(args, stdout, stderr),
        Command::Rule { code } => match streamlint_rules::rule(&code) {
            Some(r) => writeln!(stdout, "{}", r.doc.trim_end()).map(|_| 0),
            None => writeln!(
                stderr,
                "error: no rule named `{code}`; `streamlint rules` lists them"
            )
            .map(|_| 2),
        },
        Command::Server => match streamlint_server::run_stdio() {
            Ok(()) => Ok(0),
            Err(e) => writeln!(stderr, "error: language server: {e}").map(|_| 2),
        },
        Command::Rules => streamlint_rules::RULES
            .iter()
            .try_for_each(|r| {
                writeln!(
                    stdout,
                    "{}  {:<28} {:<7} {}",
                    r.code,
                    r.name,
                    r.severity.as_str(),
                    r.summary()
                )
            })
            .map(|_| 0),
    };
    result.unwrap_or(2)
}

/// The settings for a run: the configuration file's, with the command line on top.
fn settings(args: &CheckArgs, paths: &[PathBuf]) -> Result<Settings, ConfigError> {
    let config = if args.isolated {
        None
    } else if let Some(file) = &args.config {
        Some(Config::load(file)?)
    } else {
        Config::discover(&paths[0])?
    };
    let mut settings = Settings::from_config(config.as_ref())?;
    if !args.select.is_empty() {
        settings.selection.select = args.select.clone();
    }
    if !args.ignore.is_empty() {
        settings.selection.ignore = args.ignore.clone();
    }
    if args.no_respect_gitignore {
        settings.respect_gitignore = false;
    }
    Ok(settings)
}

fn check(args: CheckArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> std::io::Result<i32> {
    let unknown = Selection {
        select: args.select.clone(),
        ignore: args.ignore.clone(),
    }
    .unknown_patterns();
    if !unknown.is_empty() {
        writeln!(
            stderr,
            "error: unknown rule selector(s): {}; `streamlint rules` lists the codes",
            unknown.join(", ")
        )?;
        return Ok(2);
    }
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let settings = match settings(&args, &paths) {
        Ok(s) => s,
        Err(e) => {
            writeln!(stderr, "error: {e}")?;
            return Ok(2);
        }
    };
    let found = discover(&paths, &settings);
    for missing in &found.missing {
        writeln!(
            stderr,
            "error: {}: no such file or directory",
            missing.display()
        )?;
    }
    let reports = check_files(&found.files, &settings);
    let paths: Vec<String> = reports
        .iter()
        .map(|r| r.path.to_string_lossy().into_owned())
        .collect();
    let files: Vec<FileFindings<'_>> = reports
        .iter()
        .zip(&paths)
        .filter(|(r, _)| !r.findings.is_empty())
        .map(|(r, p)| FileFindings {
            path: p,
            source: &r.source,
            findings: &r.findings,
        })
        .collect();
    let format = Format::parse(&args.output_format).unwrap_or(Format::Full);
    let color = format == Format::Full
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    render(format, &files, color, stdout)?;
    if format == Format::Full {
        let total = files.iter().map(|f| f.findings.len()).sum();
        writeln!(
            stdout,
            "{}",
            streamlint_render::summary_line(total, reports.len())
        )?;
    }
    let any = files.iter().any(|f| !f.findings.is_empty());
    Ok(if !found.missing.is_empty() {
        2
    } else if any && !args.exit_zero {
        1
    } else {
        0
    })
}
