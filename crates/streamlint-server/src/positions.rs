//! Positions as the client counts them (a line and a character offset in the negotiated
//! encoding) to and from the byte offsets the linter works in. Client positions are never
//! trusted: any line or character is accepted and clamped onto the text.

use lsp_types::{Position, PositionEncodingKind, Range};

/// How the client counts the characters of a line.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Bytes: no conversion at all, so preferred whenever the client offers it.
    Utf8,
    /// UTF-16 code units: the protocol's default, which every client understands.
    Utf16,
}

impl Encoding {
    /// The encoding to use given what the client offers (`general.positionEncodings`).
    pub fn negotiate<'a>(offered: impl IntoIterator<Item = &'a str>) -> Encoding {
        if offered.into_iter().any(|kind| kind == "utf-8") {
            Encoding::Utf8
        } else {
            Encoding::Utf16
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
        }
    }

    fn width(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
        }
    }
}

/// Where the lines of a text start. Lines end at `\n`, `\r\n` or a lone `\r`, as the protocol
/// says, so that line numbers agree with the client's.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            let ends_line = b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
            if ends_line {
                starts.push(i + 1);
            }
        }
        LineIndex { text, starts }
    }

    /// The zero-based line holding a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset) - 1
    }

    /// The byte range of a line's text, without its terminator (empty past the last line).
    pub fn line_range(&self, line: usize) -> (usize, usize) {
        let Some(&start) = self.starts.get(line) else {
            return (self.text.len(), self.text.len());
        };
        let next = self
            .starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        let content = &self.text[start..next];
        let content = content.strip_suffix('\n').unwrap_or(content);
        let content = content.strip_suffix('\r').unwrap_or(content);
        (start, start + content.len())
    }

    /// The client position of a byte offset. An offset past the text means its end; one inside
    /// a character or a line terminator means the nearest earlier place a client can point at.
    pub fn position(&self, offset: usize, encoding: Encoding) -> Position {
        let offset = offset.min(self.text.len());
        let line = self.line_of(offset);
        let (start, end) = self.line_range(line);
        let mut at = offset.min(end);
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let character = match encoding {
            Encoding::Utf8 => at - start,
            Encoding::Utf16 => self.text[start..at].chars().map(char::len_utf16).sum(),
        };
        Position::new(to_u32(line), to_u32(character))
    }

    pub fn range(&self, start: usize, end: usize, encoding: Encoding) -> Range {
        Range::new(self.position(start, encoding), self.position(end, encoding))
    }

    /// The byte offset of a client position. A line past the last one means the end of the
    /// text, a character past the end of its line the end of that line (the protocol's rule),
    /// and a character inside a multi-unit character (half a surrogate pair, part of a UTF-8
    /// sequence) that character's start.
    pub fn offset(&self, position: Position, encoding: Encoding) -> usize {
        let line = position.line as usize;
        if line >= self.starts.len() {
            return self.text.len();
        }
        let (start, end) = self.line_range(line);
        let wanted = position.character as usize;
        let mut counted = 0;
        for (i, c) in self.text[start..end].char_indices() {
            let next = counted + encoding.width(c);
            if next > wanted {
                return start + i;
            }
            counted = next;
        }
        end
    }

    /// The byte range of a client range, its ends put in order.
    pub fn byte_range(&self, range: Range, encoding: Encoding) -> (usize, usize) {
        let a = self.offset(range.start, encoding);
        let b = self.offset(range.end, encoding);
        (a.min(b), a.max(b))
    }
}

/// Texts past 4 GiB do not occur in editors; saturate rather than wrap if one does.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_prefers_utf8_and_defaults_to_utf16() {
        assert_eq!(Encoding::negotiate(["utf-16", "utf-8"]), Encoding::Utf8);
        assert_eq!(Encoding::negotiate(["utf-32", "utf-16"]), Encoding::Utf16);
        assert_eq!(Encoding::negotiate([]), Encoding::Utf16);
    }

    #[test]
    fn columns_in_each_encoding() {
        // "é" is 2 bytes and 1 UTF-16 unit; "𝄞" is 4 bytes and 2 UTF-16 units.
        let text = "é𝄞x = 1\nnext";
        let index = LineIndex::new(text);
        let x = text.find('x').unwrap();
        assert_eq!(index.position(x, Encoding::Utf8), Position::new(0, 6));
        assert_eq!(index.position(x, Encoding::Utf16), Position::new(0, 3));
        assert_eq!(index.offset(Position::new(0, 6), Encoding::Utf8), x);
        assert_eq!(index.offset(Position::new(0, 3), Encoding::Utf16), x);
        // Half a surrogate pair, or the middle of a UTF-8 sequence, means the character's start.
        assert_eq!(index.offset(Position::new(0, 2), Encoding::Utf16), 2);
        assert_eq!(index.offset(Position::new(0, 1), Encoding::Utf8), 0);
    }

    #[test]
    fn out_of_range_positions_are_clamped() {
        let text = "ab\r\ncd\n";
        let index = LineIndex::new(text);
        assert_eq!(index.offset(Position::new(0, 99), Encoding::Utf16), 2);
        assert_eq!(index.offset(Position::new(1, 1), Encoding::Utf16), 5);
        assert_eq!(
            index.offset(Position::new(7, 0), Encoding::Utf16),
            text.len()
        );
        assert_eq!(index.position(999, Encoding::Utf8), Position::new(2, 0));
        // The terminator is not part of the line.
        assert_eq!(index.position(3, Encoding::Utf8), Position::new(0, 2));
    }

    #[test]
    fn every_line_terminator_counts() {
        let index = LineIndex::new("a\rb\r\nc\nd");
        let lines: Vec<_> = (0..4).map(|l| index.line_range(l)).collect();
        assert_eq!(lines, [(0, 1), (2, 3), (5, 6), (7, 8)]);
        assert_eq!(index.line_range(9), (8, 8));
    }
}
