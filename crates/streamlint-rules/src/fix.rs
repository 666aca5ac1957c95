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

/// One change of a fix, in terms of the program rather than of bytes: edits that insert whole
/// lines take their indentation from the source when they are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Insert `statement` on a line of its own before the line where `before` starts,
    /// indented as that line is.
    InsertLineBefore { before: Span, statement: String },
    /// Replace the text of `span` by `content`.
    Replace { span: Span, content: String },
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
    /// The fix as byte-range replacements in `source`, ordered and not overlapping.
    pub fn text_edits(&self, source: &str) -> Vec<TextEdit> {
        let clamp = |offset: u32| (offset as usize).min(source.len());
        let mut edits: Vec<TextEdit> = self
            .edits
            .iter()
            .map(|edit| match edit {
                Edit::InsertLineBefore { before, statement } => {
                    let at = clamp(before.start);
                    let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
                    let line = &source[line_start..];
                    let indent = &line[..line.len() - line.trim_start_matches([' ', '\t']).len()];
                    TextEdit {
                        start: line_start,
                        end: line_start,
                        content: format!("{indent}{statement}\n"),
                    }
                }
                Edit::Replace { span, content } => TextEdit {
                    start: clamp(span.start),
                    end: clamp(span.end),
                    content: content.clone(),
                },
            })
            .collect();
        edits.sort_by_key(|e| (e.start, e.end));
        edits
    }

    /// `source` with the fix applied.
    pub fn apply(&self, source: &str) -> String {
        apply_edits(source, &self.text_edits(source))
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
