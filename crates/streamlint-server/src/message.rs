//! JSON-RPC 2.0 envelopes: what a received value is, and the messages the server sends.
//! Classification never fails on odd input; it says what is wrong, for an InvalidRequest reply.

use serde_json::{json, Value};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub use lsp_types::error_codes::SERVER_NOT_INITIALIZED;

/// A message from the client.
#[derive(Debug)]
pub enum Incoming {
    /// Wants a reply with the same `id` (a number or a string).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The client's reply to a request of the server's.
    Response,
}

/// A value that is not a message: the id to answer with (`null` when there is none to trust)
/// and why.
#[derive(Debug)]
pub struct Invalid {
    pub id: Value,
    pub reason: String,
}

pub fn classify(value: Value) -> Result<Incoming, Invalid> {
    let Value::Object(mut object) = value else {
        return Err(Invalid {
            id: Value::Null,
            reason: format!("a message must be a JSON object, not {}", kind(&value)),
        });
    };
    let id = object.remove("id");
    let valid_id = match &id {
        None => None,
        Some(v @ Value::String(_)) => Some(v.clone()),
        Some(v @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(v.clone()),
        Some(other) => {
            return Err(Invalid {
                id: Value::Null,
                reason: format!("an id must be an integer or a string, not {}", kind(other)),
            })
        }
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), valid_id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(other), id) => Err(Invalid {
            id: id.unwrap_or(Value::Null),
            reason: format!("a method must be a string, not {}", kind(&other)),
        }),
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Ok(Incoming::Response)
        }
        (None, id) => Err(Invalid {
            id: id.unwrap_or(Value::Null),
            reason: "a message without a method".into(),
        }),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub fn response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub fn notification(method: &str, params: impl serde::Serialize) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

pub fn request(id: &str, method: &str, params: impl serde::Serialize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses() {
        let r = classify(json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})).unwrap();
        assert!(matches!(r, Incoming::Request { ref method, .. } if method == "shutdown"));
        let n = classify(json!({"method": "exit"})).unwrap();
        assert!(matches!(
            n,
            Incoming::Notification {
                params: Value::Null,
                ..
            }
        ));
        let r = classify(json!({"id": "a", "result": null})).unwrap();
        assert!(matches!(r, Incoming::Response));
    }

    #[test]
    fn invalid_messages_say_why() {
        for (value, id) in [
            (json!([1, 2]), Value::Null),
            (json!("x"), Value::Null),
            (json!({"id": 1.5, "method": "m"}), Value::Null),
            (json!({"id": {}, "method": "m"}), Value::Null),
            (json!({"id": 7, "method": 3}), json!(7)),
            (json!({"id": 8}), json!(8)),
            (json!({}), Value::Null),
        ] {
            let err = classify(value.clone()).unwrap_err();
            assert_eq!(err.id, id, "{value}");
            assert!(!err.reason.is_empty());
        }
    }
}
