//! Byte offsets of syn's spans, found cheaply. proc_macro2 keeps positions in characters and
//! finds a span's bytes by counting characters from the nearest position it found before
//! (thousands of instructions a span, and a lowering asks for many), while a span's line and
//! column come from a binary search. So the lines of the text being parsed are noted once: on
//! a line of ASCII text a column is a byte count, and only spans on other lines (a string
//! literal with an accent) are left to proc_macro2.

use std::cell::RefCell;
use std::ops::Range;

/// Where each line of the parsed text starts, and whether it is all ASCII.
struct Lines {
    starts: Vec<usize>,
    ascii: Vec<bool>,
}

thread_local! {
    /// The lines of the text this thread is parsing, while it is.
    static LINES: RefCell<Option<Lines>> = const { RefCell::new(None) };
}

impl Lines {
    fn of(text: &str) -> Lines {
        let mut starts = vec![0];
        let mut ascii = Vec::new();
        let bytes = text.as_bytes();
        for end in memchr::memchr_iter(b'\n', bytes).chain([bytes.len()]) {
            let start = *starts.last().expect("a first line");
            ascii.push(bytes[start..end].is_ascii());
            starts.push(end + 1);
        }
        Lines { starts, ascii }
    }

    /// The byte offset of a line and column (in characters, lines from 1), if the line is
    /// ASCII.
    fn offset(&self, at: proc_macro2::LineColumn) -> Option<usize> {
        let line = at.line.checked_sub(1)?;
        self.ascii
            .get(line)
            .copied()
            .filter(|&ascii| ascii)
            .map(|_| self.starts[line] + at.column)
    }
}

/// Run `parse_and_lower` with the lines of `text`, the text it parses, noted for
/// [`byte_range`].
pub(crate) fn with_lines_of<T>(text: &str, parse_and_lower: impl FnOnce() -> T) -> T {
    /// Forgets the lines when the parse ends, however it ends.
    struct Noted;
    impl Drop for Noted {
        fn drop(&mut self) {
            LINES.with(|l| *l.borrow_mut() = None);
        }
    }
    LINES.with(|l| *l.borrow_mut() = Some(Lines::of(text)));
    let _noted = Noted;
    parse_and_lower()
}

/// The bytes of `span` in the text being parsed.
pub(crate) fn byte_range(span: proc_macro2::Span) -> Range<usize> {
    let noted = LINES.with(|l| {
        let lines = l.borrow();
        let lines = lines.as_ref()?;
        Some(lines.offset(span.start())?..lines.offset(span.end())?)
    });
    noted.unwrap_or_else(|| span.byte_range())
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::spanned::Spanned;

    #[test]
    fn offsets_agree_with_proc_macro2_on_ascii_and_other_lines() {
        let text = "fn a() {\n    let s = \"héllo\"; let t = 1;\n    b(t)\n}\n";
        let file = syn::parse_file(text).unwrap();
        let syn::Item::Fn(f) = &file.items[0] else {
            panic!("a function")
        };
        with_lines_of(text, || {
            for stmt in &f.block.stmts {
                let span = stmt.span();
                assert_eq!(byte_range(span), span.byte_range());
            }
            assert_eq!(byte_range(f.block.span()), f.block.span().byte_range());
        });
        proc_macro2::extra::invalidate_current_thread_spans();
    }
}
