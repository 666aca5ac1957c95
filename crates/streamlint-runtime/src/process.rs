//! Running a child process, reading its output as it comes, with an optional time limit: a
//! harness that hangs (a wait on work that never finishes) must not hang the validation.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// What a finished (or stopped) child left.
pub struct Finished {
    /// `None` when it ran out of time and was killed.
    pub status: Option<ExitStatus>,
    /// Empty when stdout was passed through.
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The end of stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr, 20)
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Where the child's stdout goes.
pub enum Stdout<'a> {
    /// To this process's stdout (and the child reads this process's stdin): a user's program.
    PassThrough,
    /// Line by line to the callback (stdin closed): a harness.
    Lines(&'a mut dyn FnMut(&str)),
}

/// A line read from the child.
enum Line {
    Out(String),
    Err(String),
}

/// How long output is still read after the child has exited (a grandchild may hold the pipes).
const GRACE: Duration = Duration::from_secs(2);

/// Run `command`, handing each stderr line to `on_stderr` as it arrives; kill it once `limit`
/// has passed.
pub fn run(
    command: &mut Command,
    stdout: Stdout<'_>,
    on_stderr: &mut dyn FnMut(&str),
    limit: Option<Duration>,
) -> std::io::Result<Finished> {
    let (mut on_stdout, passed_through) = match stdout {
        Stdout::PassThrough => (None, true),
        Stdout::Lines(f) => (Some(f), false),
    };
    if passed_through {
        command.stdin(Stdio::inherit()).stdout(Stdio::inherit());
    } else {
        command.stdin(Stdio::null()).stdout(Stdio::piped());
    }
    let mut child = command.stderr(Stdio::piped()).spawn()?;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        thread::spawn(move || forward(out, &tx, Line::Out));
    }
    if let Some(err) = child.stderr.take() {
        let tx = tx.clone();
        thread::spawn(move || forward(err, &tx, Line::Err));
    }
    drop(tx);
    let deadline = limit.map(|l| Instant::now() + l);
    let mut finished = Finished {
        status: None,
        stdout: String::new(),
        stderr: String::new(),
    };
    let mut exited_at: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Line::Out(line)) => {
                if let Some(f) = on_stdout.as_mut() {
                    f(&line);
                }
                finished.stdout.push_str(&line);
                finished.stdout.push('\n');
            }
            Ok(Line::Err(line)) => {
                on_stderr(&line);
                finished.stderr.push_str(&line);
                finished.stderr.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if exited_at.is_none() {
            if let Ok(Some(status)) = child.try_wait() {
                finished.status = Some(status);
                exited_at = Some(Instant::now());
            }
        }
        if exited_at.is_some_and(|t| t.elapsed() > GRACE) {
            break;
        }
        if exited_at.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
            stop(&mut child);
            return Ok(finished);
        }
    }
    if finished.status.is_none() {
        finished.status = Some(child.wait()?);
    }
    Ok(finished)
}

/// Send each line of `from` (invalid UTF-8 replaced) until it closes.
fn forward(from: impl Read, to: &mpsc::Sender<Line>, wrap: fn(String) -> Line) {
    let mut reader = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end_matches(['\n', '\r']).to_string();
                if to.send(wrap(line)).is_err() {
                    return;
                }
            }
        }
    }
}

/// Kill the child (ours, by its handle) and reap it.
fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_status_come_back_line_by_line() {
        let mut lines = Vec::new();
        let mut errors = Vec::new();
        let done = run(
            Command::new("sh").args(["-c", "echo one; echo oops >&2; echo two; exit 3"]),
            Stdout::Lines(&mut |l| lines.push(l.to_string())),
            &mut |l| errors.push(l.to_string()),
            Some(Duration::from_secs(30)),
        )
        .unwrap();
        assert_eq!(lines, ["one", "two"]);
        assert_eq!(errors, ["oops"]);
        assert_eq!(done.stdout, "one\ntwo\n");
        assert_eq!(done.stderr, "oops\n");
        assert_eq!(done.status.and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn a_child_that_runs_too_long_is_stopped() {
        let started = Instant::now();
        let done = run(
            Command::new("sh").args(["-c", "echo started; exec sleep 30"]),
            Stdout::Lines(&mut |_| {}),
            &mut |_| {},
            Some(Duration::from_millis(300)),
        )
        .unwrap();
        assert!(done.status.is_none());
        assert_eq!(done.stdout, "started\n");
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn a_grandchild_holding_the_pipes_does_not_keep_the_run_waiting() {
        let started = Instant::now();
        let done = run(
            Command::new("sh").args(["-c", "sleep 8 & echo parent done"]),
            Stdout::Lines(&mut |_| {}),
            &mut |_| {},
            None,
        )
        .unwrap();
        assert_eq!(done.status.and_then(|s| s.code()), Some(0));
        assert_eq!(done.stdout, "parent done\n");
        assert!(started.elapsed() < Duration::from_secs(6));
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let result = run(
            &mut Command::new("/nonexistent/streamlint-no-such-program"),
            Stdout::Lines(&mut |_| {}),
            &mut |_| {},
            None,
        );
        assert!(result.is_err());
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(tail("", 5), "");
    }
}
