//! Code actions: a finding's fix as a quick fix (preferred when it is safe), and a quick fix
//! that suppresses the finding with a comment on its line.

use std::collections::HashMap;

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, DocumentChanges, OneOf,
    OptionalVersionedTextDocumentIdentifier, TextDocumentEdit, TextEdit, WorkspaceEdit,
};
use streamlint_linter::Language;
use streamlint_rules::{Applicability, Finding, PARSE_ERROR, UNUSED_SUPPRESSION};

use crate::caps::ClientCaps;
use crate::diagnostics::diagnostic;
use crate::documents::Document;
use crate::positions::LineIndex;

/// A byte-range replacement, before it is put in the client's positions.
struct Replace {
    start: usize,
    end: usize,
    content: String,
}

/// The actions for the findings under the requested range, or named by the diagnostics the
/// client sends along (clients send the diagnostics of the cursor's line with a cursor range).
pub fn code_actions(
    doc: &Document,
    findings: &[Finding],
    params: &CodeActionParams,
    caps: &ClientCaps,
) -> Vec<CodeActionOrCommand> {
    if !wants_quick_fixes(params.context.only.as_deref()) {
        return Vec::new();
    }
    let index = LineIndex::new(&doc.text);
    let (start, end) = index.byte_range(params.range, caps.encoding);
    let mut actions = Vec::new();
    let mut suppressed = Vec::new();
    for finding in findings {
        let diagnostic = diagnostic(finding, &doc.uri, &index, caps);
        let named = params
            .context
            .diagnostics
            .iter()
            .any(|d| d.range == diagnostic.range && d.code == diagnostic.code);
        let under = finding.span.start as usize <= end && start <= finding.span.end as usize;
        if !named && !under {
            continue;
        }
        if let Some(fix) = &finding.fix {
            let edits: Vec<Replace> = fix
                .text_edits(&doc.text)
                .into_iter()
                .map(|e| Replace {
                    start: e.start,
                    end: e.end,
                    content: e.content,
                })
                .collect();
            if !edits.is_empty() {
                let title = format!("{} ({})", capitalized(&fix.message), finding.code);
                let preferred = fix.applicability == Applicability::Safe;
                let edit = workspace_edit(doc, &index, edits, caps);
                actions.push(action(title, &diagnostic, edit, preferred));
            }
        }
        let line = index.line_of(finding.span.start as usize);
        if suppressed.contains(&(finding.code, line)) {
            continue;
        }
        if let Some(replace) = suppression(doc, &index, line, finding.code) {
            suppressed.push((finding.code, line));
            let title = format!("Suppress {} on this line", finding.code);
            let edit = workspace_edit(doc, &index, vec![replace], caps);
            actions.push(action(title, &diagnostic, edit, false));
        }
    }
    actions
}

/// Does the client's `only` filter let quick fixes through? Kinds are hierarchical: asking for
/// `quickfix` gets `quickfix.x` too, and the empty kind gets everything.
fn wants_quick_fixes(only: Option<&[CodeActionKind]>) -> bool {
    let quickfix = CodeActionKind::QUICKFIX;
    let ours = quickfix.as_str();
    only.is_none_or(|kinds| {
        kinds.iter().any(|k| {
            let k = k.as_str();
            k.is_empty() || ours == k || ours.starts_with(&format!("{k}."))
        })
    })
}

fn action(
    title: String,
    diagnostic: &lsp_types::Diagnostic,
    edit: WorkspaceEdit,
    preferred: bool,
) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics: Some(vec![diagnostic.clone()]),
        edit: Some(edit),
        is_preferred: preferred.then_some(true),
        ..CodeAction::default()
    })
}

/// The edits in the client's positions; tied to the document's version where the client
/// supports that, so that it refuses them if the text has moved on.
fn workspace_edit(
    doc: &Document,
    index: &LineIndex<'_>,
    edits: Vec<Replace>,
    caps: &ClientCaps,
) -> WorkspaceEdit {
    let edits: Vec<TextEdit> = edits
        .into_iter()
        .map(|e| TextEdit::new(index.range(e.start, e.end, caps.encoding), e.content))
        .collect();
    if caps.document_changes {
        WorkspaceEdit {
            document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier {
                    uri: doc.uri.clone(),
                    version: Some(doc.version),
                },
                edits: edits.into_iter().map(OneOf::Left).collect(),
            }])),
            ..WorkspaceEdit::default()
        }
    } else {
        WorkspaceEdit::new(HashMap::from([(doc.uri.clone(), edits)]))
    }
}

/// The edit that makes a suppression comment on `line` name `code`: the code added to the
/// line's `streamlint: ignore[...]` list, or a new comment at the end of the line. `None` for
/// the codes about the run itself, and where a comment added at the end of the line might not
/// be one or might not be read as a suppression: the line may end inside a string or continue
/// on the next one, or (in Rust) already ends in a comment that the new one would be part of.
fn suppression(doc: &Document, index: &LineIndex<'_>, line: usize, code: &str) -> Option<Replace> {
    if code == PARSE_ERROR.code || code == UNUSED_SUPPRESSION.code {
        return None;
    }
    let (start, end) = index.line_range(line);
    let text = &doc.text[start..end];
    const LIST: &str = "streamlint: ignore[";
    if let Some(at) = text.find(LIST) {
        let list_start = at + LIST.len();
        let close = list_start + text[list_start..].find(']')?;
        let listed = text[list_start..close].split(',').any(|c| c.trim() == code);
        return (!listed).then(|| Replace {
            start: start + close,
            end: start + close,
            content: format!(", {code}"),
        });
    }
    let marker = match doc.language {
        Language::Python => {
            let odd = |quotes: &str| text.matches(quotes).count() % 2 == 1;
            if text.trim_end().ends_with('\\') || odd("\"\"\"") || odd("'''") {
                return None;
            }
            "#"
        }
        Language::Rust => {
            if text.contains("//") || text.matches('"').count() % 2 == 1 || text.contains("r#") {
                return None;
            }
            "//"
        }
    };
    let content_end = start + text.trim_end().len();
    Some(Replace {
        start: content_end,
        end,
        content: format!("  {marker} streamlint: ignore[{code}]"),
    })
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suppressed(language: Language, text: &str, code: &str) -> Option<String> {
        let d = Document::new(
            "untitled:x".parse().unwrap(),
            language,
            1,
            text.into(),
            None,
        );
        let index = LineIndex::new(&d.text);
        let r = suppression(&d, &index, 0, code)?;
        let mut out = d.text.clone();
        out.replace_range(r.start..r.end, &r.content);
        Some(out)
    }

    #[test]
    fn suppression_comments() {
        use Language::{Python, Rust};
        let py = |t| suppressed(Python, t, "SL001");
        assert_eq!(
            py("del a  \nx\n").as_deref(),
            Some("del a  # streamlint: ignore[SL001]\nx\n")
        );
        assert_eq!(
            py("del a  # streamlint: ignore[SL003]\n").as_deref(),
            Some("del a  # streamlint: ignore[SL003, SL001]\n")
        );
        assert_eq!(
            py("x = f()  # note\r\n").as_deref(),
            Some("x = f()  # note  # streamlint: ignore[SL001]\r\n")
        );
        assert_eq!(py("del a  # streamlint: ignore[SL001]"), None);
        assert_eq!(py("x = 1 + \\\n 2"), None);
        assert_eq!(py("x = f('''\n'''"), None);
        assert_eq!(suppressed(Python, "x", "SL901"), None);
        assert_eq!(
            suppressed(Rust, "drop(a);", "SL003").as_deref(),
            Some("drop(a);  // streamlint: ignore[SL003]")
        );
        assert_eq!(suppressed(Rust, "drop(a); // why", "SL003"), None);
        assert_eq!(suppressed(Rust, "let s = \"a", "SL003"), None);
    }

    #[test]
    fn only_filters() {
        let kind = CodeActionKind::from;
        assert!(wants_quick_fixes(None));
        assert!(wants_quick_fixes(Some(&[kind("quickfix")])));
        assert!(wants_quick_fixes(Some(&[kind("")])));
        assert!(!wants_quick_fixes(Some(&[kind("source.fixAll")])));
        assert!(!wants_quick_fixes(Some(&[kind("quick")])));
    }

    #[test]
    fn titles() {
        assert_eq!(capitalized("make s wait"), "Make s wait");
        assert_eq!(capitalized(""), "");
    }
}
