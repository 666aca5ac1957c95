//! The language server: diagnostics and quick fixes for open Python and Rust documents, over
//! LSP on stdin/stdout.
//!
//! The server is synchronous. One thread reads and frames the input; the calling thread
//! handles the messages in order, writes every reply and log line, and runs each lint on a
//! pool of threads with large stacks (a large file's functions are lowered side by side). Linting is CPU-bound and takes milliseconds, so an
//! async runtime would buy nothing; what matters is that a burst of edits is linted once, at
//! its end, which the handler gets by draining every queued message before it lints.
//!
//! Modules: `transport` (framing on the byte stream), `message` (JSON-RPC envelopes), `server`
//! (lifecycle and dispatch), `documents` and `positions` (the editor's text and its
//! coordinates), `config` (settings per document), `lint`, `diagnostics` and `actions`.

mod actions;
mod caps;
mod config;
mod diagnostics;
mod documents;
mod lint;
mod message;
mod positions;
mod server;
mod transport;

use std::io::{self, BufReader, Read, Write};
use std::sync::mpsc::{self, Sender};
use std::thread;

use lint::LintFn;
use transport::{Frame, FrameReader};

/// Serve one editor session over stdin/stdout until the client exits; returns the exit code
/// the protocol asks for (0 after `shutdown` then `exit`, 1 otherwise).
pub fn run_stdio() -> io::Result<i32> {
    serve(io::stdin(), io::BufWriter::new(io::stdout()))
}

/// Serve one session on any byte streams; returns the exit code the protocol asks for (0 after
/// `shutdown` then `exit`, 1 when the session ended otherwise). The input is read on a thread
/// of its own, which is left behind when the session ends while the input stays open.
pub fn serve(input: impl Read + Send + 'static, output: impl Write) -> io::Result<i32> {
    serve_with(input, output, lint::analyse)
}

fn serve_with(
    input: impl Read + Send + 'static,
    mut output: impl Write,
    lint: LintFn,
) -> io::Result<i32> {
    let (sender, frames) = mpsc::channel();
    thread::Builder::new()
        .name("streamlint-lsp-reader".into())
        .spawn(move || read_frames(input, sender))?;
    server::Server::new(&mut output, lint).run(frames)
}

/// Frame the input until it ends, fails (the error is passed on, to be logged by the handler),
/// or the handler stops listening.
fn read_frames(input: impl Read, frames: Sender<io::Result<Frame>>) {
    let mut reader = FrameReader::new(BufReader::new(input));
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if frames.send(Ok(frame)).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                let _ = frames.send(Err(e));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
