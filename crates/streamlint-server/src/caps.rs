//! The few client capabilities that change what the server sends. They are read from the raw
//! `initialize` parameters, one path at a time, rather than by decoding the whole capability
//! tree: a client whose capabilities stray from the protocol types somewhere the server does
//! not care about still gets a working session.

use serde_json::Value;

use crate::positions::Encoding;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientCaps {
    pub encoding: Encoding,
    /// Diagnostics may carry `relatedInformation` (else the labels go into the message).
    pub related_information: bool,
    /// Diagnostics may carry tags (SL901's comment is shown faded, as unnecessary).
    pub diagnostic_tags: bool,
    /// Workspace edits may name the document version they were computed for.
    pub document_changes: bool,
    /// The server may ask to be told about changes of configuration files.
    pub watch_files: bool,
}

impl ClientCaps {
    pub fn from_initialize(params: &Value) -> ClientCaps {
        let caps = params.get("capabilities").unwrap_or(&Value::Null);
        let flag = |pointer: &str| {
            caps.pointer(pointer)
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let encodings = caps
            .pointer("/general/positionEncodings")
            .and_then(Value::as_array)
            .map(|kinds| kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default();
        ClientCaps {
            encoding: Encoding::negotiate(encodings),
            related_information: flag("/textDocument/publishDiagnostics/relatedInformation"),
            diagnostic_tags: caps
                .pointer("/textDocument/publishDiagnostics/tagSupport")
                .is_some_and(Value::is_object),
            document_changes: flag("/workspace/workspaceEdit/documentChanges"),
            watch_files: flag("/workspace/didChangeWatchedFiles/dynamicRegistration"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capabilities_from_a_full_and_an_odd_client() {
        let full = json!({"capabilities": {
            "general": {"positionEncodings": ["utf-16", "utf-8"]},
            "textDocument": {"publishDiagnostics": {"relatedInformation": true, "tagSupport": {"valueSet": [1, 2]}}},
            "workspace": {"workspaceEdit": {"documentChanges": true}, "didChangeWatchedFiles": {"dynamicRegistration": true}},
        }});
        let caps = ClientCaps::from_initialize(&full);
        assert_eq!(
            caps,
            ClientCaps {
                encoding: Encoding::Utf8,
                related_information: true,
                diagnostic_tags: true,
                document_changes: true,
                watch_files: true,
            }
        );
        let odd =
            json!({"capabilities": {"general": {"positionEncodings": "utf-8"}, "textDocument": 3}});
        let caps = ClientCaps::from_initialize(&odd);
        assert_eq!(caps.encoding, Encoding::Utf16);
        assert!(!caps.related_information && !caps.watch_files);
        assert_eq!(ClientCaps::from_initialize(&Value::Null), caps);
    }
}
