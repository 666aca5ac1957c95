//! Fixes: the source changes that remove a finding, and how they become byte edits.

use streamlint_graph::Span;

/// Whether a fix may be applied without review (`--fix`) or only when asked (`--unsafe-fixes`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Applicability {
    /// Keeps the program's meaning apart from removing the hazard: applied by `--fix`.
    Safe,
    /// Orders or keeps alive work in a way that may not be what the author meant (or costs
    /// overlap): offered, applied only with `--unsafe-fixes`.
    Unsafe,
}

impl Applicability {
    pub fn as_str(self) -> &'static str {
        match self {
            Applicability::Safe => "safe",
            Applicability::Unsafe => "unsafe",
        }
    }
}

/// One change of a fix, in terms of the program rather than of bytes: edits that work on whole
/// lines take their indentation from the source when they are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Insert `statement` on a line of its own before the line where `before` starts,
    /// indented as that line is.
    InsertLineBefore { before: Span, statement: String },
    /// Replace the text of `span` by `content`.
    Replace { span: Span, content: String },
    /// Remove the lines `span` covers; they must hold nothing else.
    DeleteLines { span: Span },
    /// Move the statement `what` (alone on its lines) to a line of its own before the line
    /// where `before` starts, indented as that line is.
    MoveBefore { what: Span, before: Span },
    /// Indent the lines strictly between the line of `after` and the line of `before` one level
    /// deeper (the unit the file uses: a tab where it indents with tabs, else four spaces).
    /// Refused where a line may sit inside a multi-line string, whose text would change.
    IndentBetween { after: Span, before: Span },
}

/// A change of the source that removes a finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fix {
    pub message: String,
    pub applicability: Applicability,
    pub edits: Vec<Edit>,
}

/// A byte-range replacement in a source text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEdit {
    pub start: usize,
    pub end: usize,
    pub content: String,
}

impl Fix {
    /// The fix as byte-range replacements in `source`, ordered and not overlapping; empty when
    /// the fix does not fit the source (the linter drops such fixes before anyone sees them).
    pub fn text_edits(&self, source: &str) -> Vec<TextEdit> {
        self.try_text_edits(source).unwrap_or_default()
    }

    /// The byte edits, or `None` where an edit does not fit the source (a line that holds more
    /// than the statement to move, overlapping edits).
    pub fn try_text_edits(&self, source: &str) -> Option<Vec<TextEdit>> {
        let text = Lines { source };
        let mut edits = Vec::new();
        for edit in &self.edits {
            match edit {
                Edit::InsertLineBefore { before, statement } => {
                    let at = text.line_start(before.start);
                    let content = format!("{}{statement}\n", text.indent_at(at));
                    edits.push(TextEdit {
                        start: at,
                        end: at,
                        content,
                    });
                }
                Edit::Replace { span, content } => {
                    let (start, end) = text.range(*span)?;
                    edits.push(TextEdit {
                        start,
                        end,
                        content: content.clone(),
                    });
                }
                Edit::DeleteLines { span } => edits.push(text.delete_lines(*span)?),
                Edit::MoveBefore { what, before } => {
                    let removed = text.delete_lines(*what)?;
                    let moved = source[removed.start..removed.end].trim();
                    let at = text.line_start(before.start);
                    let content = format!("{}{moved}\n", text.indent_at(at));
                    edits.push(TextEdit {
                        start: at,
                        end: at,
                        content,
                    });
                    edits.push(removed);
                }
                Edit::IndentBetween { after, before } => {
                    let first = text.line_end(after.end);
                    let last = text.line_start(before.start);
                    if first > last
                        || source[first..last].contains("\"\"\"")
                        || source[first..last].contains("\'\'\'")
                    {
                        return None;
                    }
                    let unit = if text.indent_at(first).starts_with('\t') {
                        "\t"
                    } else {
                        "    "
                    };
                    let mut at = first;
                    while at < last {
                        let end = text.line_end(at as u32);
                        if !source[at..end].trim().is_empty() {
                            edits.push(TextEdit {
                                start: at,
                                end: at,
                                content: unit.to_string(),
                            });
                        }
                        at = end;
                    }
                }
            }
        }
        edits.sort_by_key(|e| (e.start, e.end));
        let overlapping = edits.windows(2).any(|w| w[1].start < w[0].end);
        (!overlapping).then_some(edits)
    }

    /// `source` with the fix applied.
    pub fn apply(&self, source: &str) -> String {
        apply_edits(source, &self.text_edits(source))
    }
}

/// Line arithmetic over a source text, for edits that work on whole lines.
struct Lines<'a> {
    source: &'a str,
}

impl Lines<'_> {
    fn clamp(&self, offset: u32) -> usize {
        let mut at = (offset as usize).min(self.source.len());
        while !self.source.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    fn range(&self, span: Span) -> Option<(usize, usize)> {
        let (start, end) = (self.clamp(span.start), self.clamp(span.end));
        (start <= end).then_some((start, end))
    }

    /// The start of the line holding `offset`.
    fn line_start(&self, offset: u32) -> usize {
        let at = self.clamp(offset);
        self.source[..at].rfind('\n').map_or(0, |i| i + 1)
    }

    /// Just past the newline that ends the line holding `offset` (or the end of the text).
    fn line_end(&self, offset: u32) -> usize {
        let at = self.clamp(offset);
        self.source[at..]
            .find('\n')
            .map_or(self.source.len(), |i| at + i + 1)
    }

    /// The indentation of the line starting at `line_start`.
    fn indent_at(&self, line_start: usize) -> &str {
        let line = &self.source[line_start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    /// Removes the whole lines of `span`, which must hold nothing else but a trailing comment.
    fn delete_lines(&self, span: Span) -> Option<TextEdit> {
        let (start, end) = self.range(span)?;
        let (first, last) = (self.line_start(span.start), self.line_end(span.end));
        let after = self.source[end..last].trim();
        let alone = self.source[first..start].trim().is_empty()
            && (after.is_empty() || after.starts_with('#') || after.starts_with("//"));
        alone.then(|| TextEdit {
            start: first,
            end: last,
            content: String::new(),
        })
    }
}

/// Applies ordered, non-overlapping edits (an edit overlapping the previous one is skipped).
pub fn apply_edits(source: &str, edits: &[TextEdit]) -> String {
    let mut out = String::with_capacity(source.len());
    let mut done = 0;
    for e in edits {
        if e.start < done || !source.is_char_boundary(e.start) || !source.is_char_boundary(e.end) {
            continue;
        }
        out.push_str(&source[done..e.start]);
        out.push_str(&e.content);
        done = e.end;
    }
    out.push_str(&source[done..]);
    out
}
