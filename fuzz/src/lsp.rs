//! Language-server sessions built from `arbitrary` data: every lifecycle message in any order,
//! documents in Python and Rust (generated programs or junk), full and ranged edits with
//! positions anywhere, code actions, configuration changes, unknown methods, and frames with
//! wrong headers or bodies that are not JSON.

use arbitrary::Arbitrary;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
pub struct Session {
    messages: Vec<Message>,
}

#[derive(Arbitrary, Debug)]
enum Message {
    Initialize {
        utf8: Option<bool>,
        settings: Option<Settings>,
    },
    Initialized,
    Open {
        doc: Doc,
        version: i32,
        text: Text,
    },
    ChangeFull {
        doc: Doc,
        version: i32,
        text: Text,
    },
    ChangeRange {
        doc: Doc,
        version: i32,
        range: Range,
        text: String,
    },
    Save(Doc),
    Close(Doc),
    CodeAction {
        doc: Doc,
        range: Range,
    },
    Configuration(Settings),
    WatchedFiles,
    Cancel(u8),
    UnknownRequest(String),
    UnknownNotification(String),
    Shutdown,
    Exit,
    /// A frame whose body is not what its method needs (or not JSON at all).
    Junk(Vec<u8>),
    /// A header that lies about the length, or is not a header.
    BadHeader(Vec<u8>),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Doc {
    Python,
    Rust,
    Untitled,
    Config,
    NotAUri,
}

#[derive(Arbitrary, Debug)]
enum Text {
    Python(crate::python::Module),
    Rust(crate::rust::File),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Range {
    start: (u32, u32),
    end: (u32, u32),
}

#[derive(Arbitrary, Debug)]
struct Settings {
    select: Vec<String>,
    ignore: Vec<String>,
    odd: Option<String>,
}

impl Doc {
    fn uri(self) -> &'static str {
        match self {
            Doc::Python => "file:///streamlint-fuzz/pkg/train.py",
            Doc::Rust => "file:///streamlint-fuzz/pkg/kernels.rs",
            Doc::Untitled => "untitled:Untitled-1",
            Doc::Config => "file:///streamlint-fuzz/pyproject.toml",
            Doc::NotAUri => "::not a uri::",
        }
    }

    fn language(self) -> &'static str {
        match self {
            Doc::Rust => "rust",
            Doc::Config => "toml",
            _ => "python",
        }
    }
}

impl Text {
    fn render(&self) -> String {
        match self {
            Text::Python(m) => m.render(),
            Text::Rust(f) => f.render(),
            Text::Raw(s) => s.clone(),
        }
    }
}

impl Range {
    fn json(&self) -> Value {
        json!({
            "start": {"line": self.start.0, "character": self.start.1},
            "end": {"line": self.end.0, "character": self.end.1},
        })
    }
}

impl Settings {
    fn json(&self) -> Value {
        let mut v = json!({"streamlint": {"select": self.select, "ignore": self.ignore}});
        if let Some(odd) = &self.odd {
            v["streamlint"]["select"] = json!(odd);
        }
        v
    }
}

fn frame(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
}

fn request(out: &mut Vec<u8>, id: usize, method: &str, params: Value) {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    frame(out, msg.to_string().as_bytes());
}

fn notification(out: &mut Vec<u8>, method: &str, params: Value) {
    let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
    frame(out, msg.to_string().as_bytes());
}

impl Session {
    /// The session as the bytes a client would write.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (id, m) in self.messages.iter().enumerate() {
            match m {
                Message::Initialize { utf8, settings } => {
                    let encodings = match utf8 {
                        Some(true) => json!(["utf-8", "utf-16"]),
                        Some(false) => json!(["utf-16"]),
                        None => Value::Null,
                    };
                    let mut params = json!({
                        "processId": null,
                        "rootUri": "file:///streamlint-fuzz",
                        "capabilities": {"general": {"positionEncodings": encodings}},
                    });
                    if let Some(s) = settings {
                        params["initializationOptions"] = s.json()["streamlint"].clone();
                    }
                    request(&mut out, id, "initialize", params);
                }
                Message::Initialized => notification(&mut out, "initialized", json!({})),
                Message::Open { doc, version, text } => notification(
                    &mut out,
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": doc.uri(), "languageId": doc.language(), "version": version, "text": text.render()}}),
                ),
                Message::ChangeFull { doc, version, text } => notification(
                    &mut out,
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": doc.uri(), "version": version}, "contentChanges": [{"text": text.render()}]}),
                ),
                Message::ChangeRange {
                    doc,
                    version,
                    range,
                    text,
                } => notification(
                    &mut out,
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": doc.uri(), "version": version}, "contentChanges": [{"range": range.json(), "text": text}]}),
                ),
                Message::Save(doc) => notification(
                    &mut out,
                    "textDocument/didSave",
                    json!({"textDocument": {"uri": doc.uri()}}),
                ),
                Message::Close(doc) => notification(
                    &mut out,
                    "textDocument/didClose",
                    json!({"textDocument": {"uri": doc.uri()}}),
                ),
                Message::CodeAction { doc, range } => request(
                    &mut out,
                    id,
                    "textDocument/codeAction",
                    json!({"textDocument": {"uri": doc.uri()}, "range": range.json(), "context": {"diagnostics": []}}),
                ),
                Message::Configuration(s) => notification(
                    &mut out,
                    "workspace/didChangeConfiguration",
                    json!({"settings": s.json()}),
                ),
                Message::WatchedFiles => notification(
                    &mut out,
                    "workspace/didChangeWatchedFiles",
                    json!({"changes": [{"uri": "file:///streamlint-fuzz/pyproject.toml", "type": 2}]}),
                ),
                Message::Cancel(n) => notification(&mut out, "$/cancelRequest", json!({"id": n})),
                Message::UnknownRequest(m) => request(&mut out, id, m, json!({})),
                Message::UnknownNotification(m) => notification(&mut out, m, json!([1, 2])),
                Message::Shutdown => request(&mut out, id, "shutdown", Value::Null),
                Message::Exit => notification(&mut out, "exit", Value::Null),
                Message::Junk(bytes) => frame(&mut out, bytes),
                Message::BadHeader(bytes) => {
                    out.extend_from_slice(b"Content-Length: ");
                    out.extend_from_slice(bytes);
                    out.extend_from_slice(b"\r\n\r\n{}");
                }
            }
        }
        out
    }
}
