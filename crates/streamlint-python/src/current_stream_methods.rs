//! Methods a project writes to hand out the calling thread's current stream.
//!
//! Projects wrap `current_stream()` in a method of their own (`def producer_stream(self):
//! return self.device_module.current_stream(self.device)`) and order their side streams
//! against it: `gather.wait_stream(buffer.producer_stream())` makes `gather` wait for the
//! current stream, whatever object `buffer` is. The method is found from the module's text, as
//! the rest of the index is: a `def` whose whole body (a docstring aside) returns a call of
//! `current_stream`. A name counts only where every method of that name in the project is such
//! a getter (see `Names`), so another class's `producer_stream` doing something else keeps the
//! call unknown.

use crate::syntax::is_name_byte;

/// The methods defined in `source` whose name says they give a stream, each with whether its
/// whole body returns the current stream. Only names holding `stream` are kept: they are the
/// ones a wait or a `with` block is given, and few enough to index.
pub fn stream_methods(source: &str) -> Vec<(String, bool)> {
    let bytes = source.as_bytes();
    // The lines, made only once a method named for a stream is found (few modules have one).
    let mut lines: Option<(Vec<usize>, Vec<&str>)> = None;
    let mut out = Vec::new();
    for at in memchr::memmem::find_iter(bytes, b"def ") {
        let line_start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |nl| nl + 1);
        let before = &source[line_start..at];
        let lead = before.trim_start_matches([' ', '\t']);
        if !(lead.is_empty() || lead == "async ") {
            continue;
        }
        let rest = &source[at + 4..];
        let name_len = rest.bytes().take_while(|&b| is_name_byte(b)).count();
        let name = &rest[..name_len];
        if !name.contains("stream") {
            continue;
        }
        let (starts, lines) = lines.get_or_insert_with(|| {
            let mut starts = vec![0];
            starts.extend(memchr::memchr_iter(b'\n', bytes).map(|at| at + 1));
            let lines = source
                .split('\n')
                .map(|l| l.trim_end_matches('\r'))
                .collect();
            (starts, lines)
        });
        let line_no = starts.partition_point(|&s| s <= at) - 1;
        let indent = before.len() - lead.len();
        let Some(body_start) = header_end(lines, line_no) else {
            continue;
        };
        let body = body_lines(lines, body_start + 1, indent);
        out.push((name.to_string(), returns_current_stream(&body)));
    }
    out
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The index of the line that ends the `def` header starting at line `start`: the first whose
/// parentheses are balanced and which ends with `:`. None for a one-line body (`def f(): ...`),
/// which is not a getter worth knowing.
fn header_end(lines: &[&str], start: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, line) in lines.iter().enumerate().skip(start).take(40) {
        let code = line.split('#').next().unwrap_or(line);
        for b in code.bytes() {
            match b {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                _ => {}
            }
        }
        if depth <= 0 {
            return code.trim_end().ends_with(':').then_some(k);
        }
    }
    None
}

/// The statements of the body that starts at line `from`, deeper than `indent`: blank lines,
/// comments and a leading docstring left out, continuation lines joined.
fn body_lines(lines: &[&str], from: usize, indent: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_docstring: Option<&str> = None;
    let mut depth = 0i32;
    for line in lines.iter().skip(from) {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indentation(line) <= indent && in_docstring.is_none() && depth == 0 {
            break;
        }
        if let Some(quote) = in_docstring {
            if trimmed.contains(quote) {
                in_docstring = None;
            }
            continue;
        }
        if out.is_empty() && depth == 0 {
            let quote = ["\"\"\"", "'''"]
                .into_iter()
                .find(|q| trimmed.starts_with(q));
            if let Some(quote) = quote {
                let after = &trimmed[3..];
                if !after.contains(quote) {
                    in_docstring = Some(quote);
                }
                continue;
            }
        }
        for b in trimmed.bytes() {
            match b {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                _ => {}
            }
        }
        match out.last_mut() {
            Some(last) if depth > 0 || last.ends_with('(') || last.ends_with(',') => {
                last.push_str(trimmed)
            }
            _ => out.push(trimmed.to_string()),
        }
        if out.len() > 1 {
            break;
        }
    }
    out
}

/// Is the body one `return` of a `current_stream(...)` call, on a plain chain of names
/// (`torch.cuda.current_stream()`, `self.device_module.current_stream(self.device)`)?
fn returns_current_stream(body: &[String]) -> bool {
    let [only] = body else {
        return false;
    };
    let Some(value) = only.strip_prefix("return ") else {
        return false;
    };
    let Some(open) = value.find('(') else {
        return false;
    };
    let (callee, args) = value.split_at(open);
    let plain_chain = callee.bytes().all(|b| is_name_byte(b) || b == b'.');
    let last = callee.rsplit('.').next().unwrap_or(callee);
    plain_chain && last == "current_stream" && args.ends_with(')') && args.matches('(').count() <= 2
}

#[cfg(test)]
mod tests {
    use super::stream_methods;

    #[test]
    fn finds_methods_that_return_the_current_stream() {
        let source = r#"
class StagingBuffer:
    def producer_stream(self) -> torch.Stream:
        """The calling thread's current stream.

        More words.
        """
        return self.device_module.current_stream(self.device)

    def gather_stream(self):
        if self._gather is None:
            self._gather = torch.cuda.Stream()
        return self._gather

    def compute_stream(
        self,
    ):
        # the stream compute runs on
        return torch.cuda.current_stream()

    def size(self):
        return self.n
"#;
        assert_eq!(
            stream_methods(source),
            vec![
                ("producer_stream".to_string(), true),
                ("gather_stream".to_string(), false),
                ("compute_stream".to_string(), true),
            ]
        );
    }

    #[test]
    fn a_getter_that_does_more_is_not_one() {
        let source = "def current_stream_of(dev):\n    torch.cuda.set_device(dev)\n    return torch.cuda.current_stream()\n";
        assert_eq!(
            stream_methods(source),
            vec![("current_stream_of".to_string(), false)]
        );
        let nested =
            "def side_stream(self):\n    return self.pool.current_stream(self.other_stream())\n";
        assert_eq!(
            stream_methods(nested),
            vec![("side_stream".to_string(), true)]
        );
    }
}
