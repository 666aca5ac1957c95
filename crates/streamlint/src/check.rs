//! `streamlint check`: files or stdin in, findings (or fixes, or a diff) out.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use streamlint_linter::{
    applicable, check_files, check_text, discover, fix_source, Config, ConfigError, Selection,
    Settings,
};
use streamlint_render::{render, statistics, FileFindings, Format, RenderOptions};
use streamlint_rules::{Finding, PARSE_ERROR};

use crate::CheckArgs;

/// One checked text and what remains to report about it.
struct Checked {
    path: String,
    source: String,
    findings: Vec<Finding>,
    /// Findings proven safe by a stream discipline or at their callers: shown with
    /// `--show-proven` only.
    proven: Vec<Finding>,
}

/// What fixing did over the run.
#[derive(Default)]
struct FixTally {
    /// Fixes applied (or, with `--diff`, that would be).
    applied: usize,
    /// Files whose fixed text could not be written.
    write_errors: usize,
}

pub fn check(
    args: CheckArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<i32> {
    let unknown = Selection {
        select: args.select.clone(),
        ignore: args.ignore.clone(),
        ..Selection::default()
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
    let from_stdin = args.paths.iter().any(|p| p == Path::new("-"))
        || (args.paths.is_empty() && args.stdin_filename.is_some());
    if from_stdin && args.paths.len() > 1 {
        writeln!(
            stderr,
            "error: `-` (stdin) cannot be combined with other paths"
        )?;
        return Ok(2);
    }
    let mut file_out;
    let out: &mut dyn Write = match &args.output_file {
        Some(path) => match File::create(path) {
            Ok(f) => {
                file_out = io::BufWriter::new(f);
                &mut file_out
            }
            Err(e) => {
                writeln!(
                    stderr,
                    "error: {}: cannot write the output: {e}",
                    path.display()
                )?;
                return Ok(2);
            }
        },
        None => stdout,
    };
    if from_stdin {
        check_stdin(&args, stdin, out, stderr)
    } else {
        check_paths(&args, out, stderr)
    }
}

/// The settings for a run: the configuration file's (found from `anchor` upward), with the
/// command line on top.
fn settings(args: &CheckArgs, anchor: &Path) -> Result<Settings, ConfigError> {
    let config = if args.isolated {
        None
    } else if let Some(file) = &args.config {
        Some(Config::load(file)?)
    } else {
        Config::discover(anchor)?
    };
    let mut settings = Settings::from_config(config.as_ref())?;
    if !args.select.is_empty() {
        settings.selection.select = args.select.clone();
    }
    if !args.ignore.is_empty() {
        settings.selection.ignore = args.ignore.clone();
    }
    if let Some(severity) = args.severity {
        settings.selection.min_severity = severity;
    }
    if args.no_respect_gitignore {
        settings.respect_gitignore = false;
    }
    settings.force_exclude = args.force_exclude;
    Ok(settings)
}

fn check_paths(args: &CheckArgs, out: &mut dyn Write, stderr: &mut dyn Write) -> io::Result<i32> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut settings = match settings(args, &paths[0]) {
        Ok(s) => s,
        Err(e) => {
            writeln!(stderr, "error: {e}")?;
            return Ok(2);
        }
    };
    let found = discover(&paths, &settings);
    settings.named_files = found.named.clone();
    for missing in &found.missing {
        writeln!(
            stderr,
            "error: {}: no such file or directory",
            missing.display()
        )?;
    }
    let mut tally = FixTally::default();
    let reports = check_files(&found.files, &settings);
    for report in &reports {
        let wants_fix = (args.fix || args.diff)
            && report
                .findings
                .iter()
                .any(|f| applicable(f, args.unsafe_fixes));
        if !wants_fix {
            continue;
        }
        // Fixed on its own, a file may not see the findings other files decide: those are
        // reported, not fixed.
        let fixed = fix_source(&report.path, &report.source, &settings, args.unsafe_fixes);
        if fixed.applied.is_empty() {
            continue;
        }
        tally.applied += fixed.applied.len();
        let path = display_path(&report.path);
        if args.diff {
            write_diff(out, &path, &report.source, &fixed.source)?;
        } else if let Err(e) = std::fs::write(&report.path, &fixed.source) {
            writeln!(stderr, "error: {path}: cannot write the fixed file: {e}")?;
            tally.write_errors += 1;
        }
    }
    // What remains after fixes were written is what a run over the fixed files finds.
    let reports = if args.fix && !args.diff && tally.applied > 0 {
        check_files(&found.files, &settings)
    } else {
        reports
    };
    let checked: Vec<Checked> = reports
        .into_iter()
        .map(|report| Checked {
            path: display_path(&report.path),
            source: report.source,
            findings: report.findings,
            proven: report.proven,
        })
        .collect();
    let failed = !found.missing.is_empty() || tally.write_errors > 0;
    if args.diff {
        let held_back = checked
            .iter()
            .flat_map(|c| &c.findings)
            .filter(|f| applicable(f, true) && !applicable(f, args.unsafe_fixes))
            .count();
        writeln!(stderr, "{}", would_fix_line(tally.applied, held_back))?;
        return Ok(if failed {
            2
        } else {
            i32::from(tally.applied > 0)
        });
    }
    // A file that could not be read, parsed or finished was not checked.
    let unchecked = checked
        .iter()
        .filter(|c| c.findings.iter().any(|f| f.code == PARSE_ERROR.code))
        .count();
    let files = found.files.len() - unchecked;
    report(args, &checked, (files, found.missing.len()), &tally, out)?;
    let any = checked.iter().any(|c| !c.findings.is_empty());
    Ok(if failed {
        2
    } else {
        i32::from(any && !args.exit_zero)
    })
}

fn check_stdin(
    args: &CheckArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<i32> {
    let name = args
        .stdin_filename
        .clone()
        .unwrap_or_else(|| PathBuf::from("-"));
    let mut bytes = Vec::new();
    stdin.read_to_end(&mut bytes)?;
    let Ok(source) = String::from_utf8(bytes) else {
        writeln!(
            stderr,
            "error: {}: the input is not valid UTF-8",
            name.display()
        )?;
        return Ok(2);
    };
    let anchor = match name.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let settings = match settings(args, &anchor) {
        Ok(s) => s,
        Err(e) => {
            writeln!(stderr, "error: {e}")?;
            return Ok(2);
        }
    };
    let path = name.to_string_lossy().into_owned();
    if settings.force_exclude && settings.excludes_file(&name) {
        // Excluded: nothing to report, and a fixing pipe gets its text back unchanged.
        if args.fix {
            out.write_all(source.as_bytes())?;
        }
        return Ok(0);
    }
    let (findings, proven) = check_text(&name, &source, &settings);
    let mut tally = FixTally::default();
    if args.fix || args.diff {
        let fixed = fix_source(&name, &source, &settings, args.unsafe_fixes);
        tally.applied = fixed.applied.len();
        if args.diff {
            write_diff(out, &path, &source, &fixed.source)?;
            let held_back = findings
                .iter()
                .filter(|f| applicable(f, true) && !applicable(f, args.unsafe_fixes))
                .count();
            writeln!(stderr, "{}", would_fix_line(tally.applied, held_back))?;
            return Ok(i32::from(tally.applied > 0));
        }
        // The fixed source is the output (an editor or a pipe replaces the buffer with it);
        // what remains goes to stderr.
        out.write_all(fixed.source.as_bytes())?;
        let remaining = [Checked {
            path,
            source: fixed.source,
            findings: fixed.remaining,
            proven: Vec::new(),
        }];
        report(args, &remaining, (1, 0), &tally, stderr)?;
        let any = !remaining[0].findings.is_empty();
        return Ok(i32::from(any && !args.exit_zero));
    }
    let checked = [Checked {
        path,
        source,
        findings,
        proven,
    }];
    report(args, &checked, (1, 0), &tally, out)?;
    Ok(i32::from(
        !checked[0].findings.is_empty() && !args.exit_zero,
    ))
}

/// Print the findings (or their statistics) in the requested format, with the closing summary
/// for people.
fn report(
    args: &CheckArgs,
    checked: &[Checked],
    (files_checked, missing): (usize, usize),
    tally: &FixTally,
    out: &mut dyn Write,
) -> io::Result<()> {
    let format = Format::parse(&args.output_format).unwrap_or(Format::Full);
    // With `--show-proven`, the findings proven safe are listed among the others.
    let shown: Vec<Cow<'_, [Finding]>> = checked
        .iter()
        .map(|c| {
            if !args.show_proven || c.proven.is_empty() {
                return Cow::Borrowed(c.findings.as_slice());
            }
            let mut all = c.findings.clone();
            all.extend(c.proven.iter().cloned());
            all.sort_by_key(|f| (f.span, f.code));
            Cow::Owned(all)
        })
        .collect();
    let files: Vec<FileFindings<'_>> = checked
        .iter()
        .zip(&shown)
        .filter(|(_, findings)| !findings.is_empty())
        .map(|(c, findings)| FileFindings {
            path: &c.path,
            source: &c.source,
            findings,
        })
        .collect();
    if args.statistics {
        return statistics(&files, format, args.unsafe_fixes, out);
    }
    let base_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let color = format == Format::Full
        && args.output_file.is_none()
        && io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    render(
        format,
        &files,
        &RenderOptions {
            color,
            base_dir: &base_dir,
        },
        out,
    )?;
    if format == Format::Full {
        // Findings proven safe are not problems, even where they are listed.
        let findings: Vec<&Finding> = checked.iter().flat_map(|c| c.findings.iter()).collect();
        let summary = streamlint_render::summary_line(findings.len(), files_checked, missing);
        if tally.applied > 0 {
            let s = if tally.applied == 1 { "" } else { "es" };
            writeln!(out, "Applied {} fix{s}. {summary}", tally.applied)?;
        } else {
            writeln!(out, "{summary}")?;
        }
        if let Some(hint) = fix_hint(&findings, args.unsafe_fixes) {
            writeln!(out, "{hint}")?;
        }
        let proven: usize = checked.iter().map(|c| c.proven.len()).sum();
        if proven > 0 && !args.show_proven {
            let (s, are) = if proven == 1 {
                ("", "is")
            } else {
                ("s", "are")
            };
            writeln!(
                out,
                "{proven} more finding{s} {are} proven safe by a stream discipline or at their callers (`--show-proven` lists them, with why)."
            )?;
        }
    }
    Ok(())
}

/// How many findings `--fix` would fix, and how many more `--unsafe-fixes` would.
fn fix_hint(findings: &[&Finding], unsafe_fixes: bool) -> Option<String> {
    let safe = findings
        .iter()
        .filter(|f| applicable(f, unsafe_fixes))
        .count();
    let hidden = findings.iter().filter(|f| applicable(f, true)).count() - safe;
    let more = match hidden {
        0 => String::new(),
        n => format!(" ({n} more with `--unsafe-fixes`)"),
    };
    match (safe, hidden) {
        (0, 0) => None,
        (0, _) => Some(format!("No fix is safe to apply without review{more}.")),
        (n, _) => Some(format!("[*] {n} fixable with `--fix`{more}.")),
    }
}

/// What `--diff` would apply, and how many fixes need `--unsafe-fixes` on top.
fn would_fix_line(n: usize, held_back: usize) -> String {
    let more = match held_back {
        0 => String::new(),
        n => format!(" ({n} more with `--unsafe-fixes`)"),
    };
    match n {
        0 => format!("No fixes available{more}."),
        1 => format!("Would apply 1 fix{more}."),
        n => format!("Would apply {n} fixes{more}."),
    }
}

/// A unified diff of one file's fixes, in the form `patch` and `git apply` take.
fn write_diff(out: &mut dyn Write, path: &str, before: &str, after: &str) -> io::Result<()> {
    if before == after {
        return Ok(());
    }
    let diff = similar::TextDiff::from_lines(before, after);
    let unified = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    out.write_all(unified.as_bytes())
}

/// A path as the user wrote it, without the `./` that walking `.` puts in front.
fn display_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    text.strip_prefix("./").unwrap_or(&text).to_string()
}
