//! The wire: messages framed by a `Content-Length` header on a byte stream.
//!
//! The reader is written for a client that misbehaves. A frame that cannot be read (no or a bad
//! `Content-Length`, a body that is not JSON, stray bytes) is returned as [`Frame::Malformed`]
//! at once, so that the client hears about it, and the reader then skips to the next line that
//! carries a `Content-Length` header instead of stopping: one bad message costs that message,
//! not the session. Header lines and bodies have size limits, so garbage cannot grow memory.

use std::io::{self, BufRead, Read, Write};

use serde_json::Value;

/// The largest body accepted; a larger `Content-Length` is taken for corruption, not allocated.
const MAX_BODY: usize = 256 << 20;

/// Header lines longer than this are garbage; only their tail is kept (where a header that
/// follows garbage on the same line would be).
const MAX_LINE: usize = 4 << 10;

const LENGTH_HEADER: &[u8] = b"content-length:";

/// What was read from the stream.
#[derive(Debug)]
pub enum Frame {
    /// A message body that is a JSON value.
    Message(Value),
    /// Something that is not a readable message; says why, for the log and the client.
    Malformed(String),
}

pub struct FrameReader<R> {
    input: R,
    /// A line already read that is to be looked at again (a header found after garbage).
    pushed_back: Option<Vec<u8>>,
    /// After a bad frame: skip everything up to the next `Content-Length` header.
    resyncing: bool,
}

impl<R: BufRead> FrameReader<R> {
    pub fn new(input: R) -> Self {
        FrameReader {
            input,
            pushed_back: None,
            resyncing: false,
        }
    }

    /// The next frame, or `None` at the end of the input.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        let frame = self.read_frame()?;
        if matches!(frame, Some(Frame::Malformed(_))) {
            self.resyncing = true;
        }
        Ok(frame)
    }

    fn read_frame(&mut self) -> io::Result<Option<Frame>> {
        let mut length: Option<Result<usize, String>> = None;
        let mut in_headers = false;
        loop {
            let Some(line) = self.next_line()? else {
                return Ok(in_headers.then(|| Frame::Malformed("input ended in a header".into())));
            };
            let header_at = find_ignoring_case(&line, LENGTH_HEADER);
            if self.resyncing {
                if let Some(at) = header_at {
                    self.resyncing = false;
                    self.pushed_back = Some(line[at..].to_vec());
                }
                continue;
            }
            if line.is_empty() {
                if !in_headers {
                    // Blank lines between messages are harmless.
                    continue;
                }
                break;
            }
            in_headers = true;
            match header_at {
                Some(0) => {
                    length = Some(parse_length(&line[LENGTH_HEADER.len()..]));
                }
                Some(at) => {
                    self.pushed_back = Some(line[at..].to_vec());
                    return Ok(Some(Frame::Malformed(format!(
                        "unexpected bytes before a header: {}",
                        preview(&line[..at])
                    ))));
                }
                None if is_header(&line) => {}
                None => {
                    return Ok(Some(Frame::Malformed(format!(
                        "expected a header, got {}",
                        preview(&line)
                    ))));
                }
            }
        }
        let length = match length {
            Some(Ok(n)) => n,
            Some(Err(why)) => return Ok(Some(Frame::Malformed(why))),
            None => {
                return Ok(Some(Frame::Malformed(
                    "a message without a Content-Length header".into(),
                )))
            }
        };
        let mut body = Vec::new();
        let read = (&mut self.input)
            .take(length as u64)
            .read_to_end(&mut body)?;
        if read < length {
            return Ok(Some(Frame::Malformed(format!(
                "input ended {read} bytes into a {length}-byte message"
            ))));
        }
        Ok(Some(match serde_json::from_slice(&body) {
            Ok(value) => Frame::Message(value),
            Err(e) => Frame::Malformed(format!("the message is not JSON: {e}")),
        }))
    }

    /// The next line without its terminator, or `None` at the end of the input. Of a line
    /// longer than [`MAX_LINE`], only the last [`MAX_LINE`] bytes are kept.
    fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        if let Some(line) = self.pushed_back.take() {
            return Ok(Some(line));
        }
        let mut line = Vec::new();
        let mut any = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(any.then_some(line));
            }
            any = true;
            let (chunk, done) = match find_byte(b'\n', available) {
                Some(i) => (&available[..i], i + 1),
                None => (available, available.len()),
            };
            line.extend_from_slice(chunk);
            if line.len() > 2 * MAX_LINE {
                line.drain(..line.len() - MAX_LINE);
            }
            let ended = done > chunk.len();
            self.input.consume(done);
            if ended {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Some(line));
            }
        }
    }
}

/// Write one message with its header, and flush: the client waits for it.
pub fn write_frame(output: &mut impl Write, message: &Value) -> io::Result<()> {
    let body = serde_json::to_vec(message)?;
    write!(output, "Content-Length: {}\r\n\r\n", body.len())?;
    output.write_all(&body)?;
    output.flush()
}

fn parse_length(value: &[u8]) -> Result<usize, String> {
    let text = String::from_utf8_lossy(value);
    match text.trim().parse::<usize>() {
        Ok(n) if n <= MAX_BODY => Ok(n),
        Ok(n) => Err(format!(
            "Content-Length {n} is over the limit of {MAX_BODY} bytes"
        )),
        Err(_) => Err(format!("bad Content-Length: {}", preview(value))),
    }
}

/// `Name: value`, with a name of the characters HTTP allows in one.
fn is_header(line: &[u8]) -> bool {
    let Some(colon) = find_byte(b':', line) else {
        return false;
    };
    colon > 0
        && line[..colon]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

fn find_ignoring_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

fn find_byte(byte: u8, bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == byte)
}

/// The start of some bytes, for a log line.
fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]);
    let more = if bytes.len() > 60 { "…" } else { "" };
    format!("{:?}{more}", text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Result<Value, String>> {
        let mut reader = FrameReader::new(input);
        let mut out = Vec::new();
        while let Some(frame) = reader.next_frame().unwrap() {
            out.push(match frame {
                Frame::Message(v) => Ok(v),
                Frame::Malformed(why) => Err(why),
            });
        }
        out
    }

    fn framed(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    #[test]
    fn well_formed_messages_with_other_headers() {
        let input = format!(
            "{}content-length: 4\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n[10]",
            framed("{\"a\":1}")
        );
        let got = frames(input.as_bytes());
        assert_eq!(
            got,
            [Ok(serde_json::json!({"a": 1})), Ok(serde_json::json!([10]))]
        );
    }

    #[test]
    fn each_bad_frame_is_reported_and_the_next_good_one_read() {
        let good = framed("{\"ok\":true}");
        let cases = [
            // Not JSON.
            format!("{}{good}", framed("{oops")),
            // No Content-Length.
            format!("Content-Type: x\r\n\r\n{{}}{good}"),
            // A Content-Length that is not a number, or too large.
            format!("Content-Length: ten\r\n\r\n{{}}\r\n{good}"),
            format!("Content-Length: 999999999999\r\n\r\n{{}}\r\n{good}"),
            // Too short: the rest of the body runs into the next header.
            format!("Content-Length: 3\r\n\r\n{{\"x\": 1}}{good}"),
            // Garbage lines.
            format!("hello there\r\n\r\n{good}"),
        ];
        for input in cases {
            let got = frames(input.as_bytes());
            assert!(
                got.len() >= 2
                    && got[..got.len() - 1].iter().all(Result::is_err)
                    && got.last() == Some(&Ok(serde_json::json!({"ok": true}))),
                "{input:?} gave {got:?}"
            );
        }
    }

    #[test]
    fn truncated_input_is_reported_then_ends() {
        let got = frames(b"Content-Length: 50\r\n\r\n{\"a\"");
        assert!(
            matches!(&got[..], [Err(why)] if why.contains("4 bytes into")),
            "{got:?}"
        );
        assert!(frames(b"Content-Length: 5\r\n").iter().all(Result::is_err));
        assert!(frames(b"").is_empty());
    }

    #[test]
    fn a_long_garbage_line_stays_bounded_and_a_header_after_it_is_found() {
        let mut input = vec![b'x'; 10 * MAX_LINE];
        input.extend_from_slice(framed("{}").as_bytes());
        let got = frames(&input);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1], Ok(serde_json::json!({})));
    }
}
