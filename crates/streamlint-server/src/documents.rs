//! The open documents: their text as the editor has it (the file on disk may be older), kept
//! up to date from incremental or full changes, and the findings of the text's last lint.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use lsp_types::{TextDocumentContentChangeEvent, Uri};
use streamlint_linter::{Language, Settings};
use streamlint_rules::Finding;

use crate::positions::{Encoding, LineIndex};

pub struct Document {
    pub uri: Uri,
    pub language: Language,
    pub version: i32,
    pub text: String,
    /// The file the document is, where it has one: configuration is found from it and path
    /// patterns match it. `None` for an unsaved buffer.
    pub path: Option<PathBuf>,
    /// The settings that apply to this document.
    pub settings: Rc<Settings>,
    /// Whether a configuration file applies (its exclusions are honoured only then).
    pub configured: bool,
    /// The project the document is linted in: its configuration file's folder, else the
    /// innermost workspace folder that holds it. `None`: it is linted on its own.
    pub root: Option<PathBuf>,
    /// Why the configuration that should apply could not be used, if it could not.
    pub config_error: Option<String>,
    /// The findings of the current text; `None` once the text or settings changed.
    pub findings: Option<Rc<[Finding]>>,
    /// The client has not seen diagnostics for the current text and settings.
    pub needs_publish: bool,
}

impl Document {
    /// A document just opened, with the default settings until its own are found.
    pub fn new(
        uri: Uri,
        language: Language,
        version: i32,
        text: String,
        path: Option<PathBuf>,
    ) -> Document {
        Document {
            uri,
            language,
            version,
            text,
            path,
            settings: Rc::new(Settings::default()),
            configured: false,
            root: None,
            config_error: None,
            findings: None,
            needs_publish: true,
        }
    }

    /// A document of a language streamlint reads, or `None`. The client's language id decides;
    /// the file extension is the fallback for ids we do not know.
    pub fn language(language_id: &str, path: Option<&Path>) -> Option<Language> {
        match language_id {
            "python" => Some(Language::Python),
            "rust" => Some(Language::Rust),
            _ => path.and_then(Language::of),
        }
    }

    /// The path handed to the linter: the file's when its extension names the language (so
    /// that messages name the file), else a stand-in with the right extension, since the linter
    /// picks the language by extension.
    pub fn lint_path(&self) -> PathBuf {
        let extension = match self.language {
            Language::Python => "py",
            Language::Rust => "rs",
        };
        match &self.path {
            Some(path) if Language::of(path) == Some(self.language) => path.clone(),
            Some(path) => path.with_extension(extension),
            None => PathBuf::from(format!("untitled.{extension}")),
        }
    }

    /// Apply the client's changes in order; positions in each refer to the text the previous
    /// one left. A change without a range replaces the whole text.
    pub fn apply(&mut self, changes: Vec<TextDocumentContentChangeEvent>, encoding: Encoding) {
        for change in changes {
            match change.range {
                None => self.text = change.text,
                Some(range) => {
                    let (start, end) = LineIndex::new(&self.text).byte_range(range, encoding);
                    self.text.replace_range(start..end, &change.text);
                }
            }
        }
        self.stale();
    }

    /// The text or the settings changed: lint again, and tell the client.
    pub fn stale(&mut self) {
        self.findings = None;
        self.needs_publish = true;
    }
}

/// The file a `file:` URI names, or `None` for other schemes (an unsaved buffer) and URIs that
/// do not decode to a path.
pub fn file_path(uri: &Uri) -> Option<PathBuf> {
    let text = uri.as_str();
    let scheme = text.get(..7)?;
    if !scheme.eq_ignore_ascii_case("file://") {
        return None;
    }
    let rest = &text[7..];
    let path_start = rest.find('/')?;
    let authority = &rest[..path_start];
    if !authority.is_empty() && !authority.eq_ignore_ascii_case("localhost") {
        return None;
    }
    let path = rest[path_start..].split(['?', '#']).next()?;
    let decoded = String::from_utf8(percent_decode(path)).ok()?;
    // `file:///C:/x` is `C:/x` on Windows.
    let decoded = match decoded.as_bytes() {
        [b'/', drive, b':', ..] if cfg!(windows) && drive.is_ascii_alphabetic() => &decoded[1..],
        _ => &decoded,
    };
    Some(PathBuf::from(decoded))
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{Position, Range};

    fn uri(text: &str) -> Uri {
        text.parse().unwrap()
    }

    #[test]
    fn file_uris_become_paths() {
        let path = file_path(&uri("file:///home/me/a%20b/%C3%A9.py")).unwrap();
        assert_eq!(path, PathBuf::from("/home/me/a b/é.py"));
        assert_eq!(
            file_path(&uri("file://localhost/x.rs")),
            Some(PathBuf::from("/x.rs"))
        );
        assert_eq!(file_path(&uri("untitled:Untitled-1")), None);
        assert_eq!(file_path(&uri("file://server/share/x.py")), None);
    }

    #[test]
    fn incremental_and_full_changes() {
        let text = "x = 'é'\ny = 2\n".to_string();
        let mut doc = Document::new(uri("untitled:a"), Language::Python, 1, text, None);
        doc.needs_publish = false;
        let edit = |line, from, to, text: &str| TextDocumentContentChangeEvent {
            range: Some(Range::new(
                Position::new(line, from),
                Position::new(line, to),
            )),
            range_length: None,
            text: text.into(),
        };
        // Replace `2` (after the é on line 0 the columns differ per encoding; line 1 has none).
        doc.apply(vec![edit(1, 4, 5, "3"), edit(0, 6, 7, "")], Encoding::Utf16);
        assert_eq!(doc.text, "x = 'é\ny = 3\n");
        doc.apply(vec![edit(0, 7, 7, "'")], Encoding::Utf8);
        assert_eq!(doc.text, "x = 'é'\ny = 3\n");
        assert!(doc.needs_publish && doc.findings.is_none());
        doc.apply(
            vec![TextDocumentContentChangeEvent {
                range: None,
                range_length: None,
                text: "z".into(),
            }],
            Encoding::Utf16,
        );
        assert_eq!(doc.text, "z");
        // Ranges past the end are clamped, not a panic.
        doc.apply(vec![edit(40, 2, 90, "!")], Encoding::Utf16);
        assert_eq!(doc.text, "z!");
    }

    #[test]
    fn languages_by_id_then_extension() {
        let path = Some(PathBuf::from("/p/script"));
        assert_eq!(Document::language("rust", None), Some(Language::Rust));
        assert_eq!(
            Document::language("plaintext", Some(Path::new("/a.py"))),
            Some(Language::Python)
        );
        assert_eq!(Document::language("plaintext", path.as_deref()), None);
    }
}
