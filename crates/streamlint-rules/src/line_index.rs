//! Byte offsets to one-based rows and columns (columns count Unicode scalar values).

/// A one-based position.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub row: usize,
    pub column: usize,
}

pub struct LineIndex<'a> {
    source: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(source: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { source, starts }
    }

    pub fn position(&self, offset: u32) -> Position {
        let offset = (offset as usize).min(self.source.len());
        let row = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[row];
        let mut end = offset;
        while !self.source.is_char_boundary(end) {
            end -= 1;
        }
        Position {
            row: row + 1,
            column: self.source[start..end].chars().count() + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_columns() {
        let idx = LineIndex::new("ab\nçd\n\nx");
        assert_eq!(idx.position(0), Position { row: 1, column: 1 });
        assert_eq!(idx.position(3), Position { row: 2, column: 1 });
        assert_eq!(
            idx.position(5),
            Position { row: 2, column: 2 },
            "ç is one column"
        );
        assert_eq!(idx.position(8), Position { row: 4, column: 1 });
        assert_eq!(idx.position(99), Position { row: 4, column: 2 });
    }
}
