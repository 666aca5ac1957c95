//! A test client: runs a session in-process on pipes, sends framed messages and waits for
//! the server's, with a timeout so that a server that hangs fails the test instead of
//! hanging it.

use std::collections::VecDeque;
use std::io::{PipeWriter, Write};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::lint::LintFn;
use crate::transport::{write_frame, Frame, FrameReader};

const PATIENCE: Duration = Duration::from_secs(20);

pub struct Client {
    to_server: Option<PipeWriter>,
    from_server: Receiver<Value>,
    /// Messages received but not yet looked for.
    unread: VecDeque<Value>,
    session: Option<JoinHandle<std::io::Result<i32>>>,
    next_id: i64,
}

impl Client {
    pub fn start() -> Client {
        Client::start_with(crate::lint::analyse)
    }

    pub fn start_with(lint: LintFn) -> Client {
        let (server_in, to_server) = std::io::pipe().unwrap();
        let (from_server_pipe, server_out) = std::io::pipe().unwrap();
        let session = std::thread::spawn(move || crate::serve_with(server_in, server_out, lint));
        let (sender, from_server) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = FrameReader::new(std::io::BufReader::new(from_server_pipe));
            while let Ok(Some(frame)) = reader.next_frame() {
                let Frame::Message(value) = frame else {
                    panic!("the server sent a malformed frame: {frame:?}")
                };
                if sender.send(value).is_err() {
                    return;
                }
            }
        });
        Client {
            to_server: Some(to_server),
            from_server,
            unread: VecDeque::new(),
            session: Some(session),
            next_id: 1,
        }
    }

    /// Start and initialize with these client capabilities.
    pub fn initialized(capabilities: Value) -> (Client, Value) {
        let mut client = Client::start();
        let result = client.initialize(capabilities);
        (client, result)
    }

    pub fn initialize(&mut self, capabilities: Value) -> Value {
        self.initialize_in(capabilities, Value::Null)
    }

    /// Initialize with a workspace folder (its `file:` URI), or none with `null`.
    pub fn initialize_in(&mut self, capabilities: Value, root_uri: Value) -> Value {
        let reply = self.request(
            "initialize",
            json!({"processId": null, "rootUri": root_uri, "capabilities": capabilities}),
        );
        self.notify("initialized", json!({}));
        reply["result"].clone()
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        let pipe = self.to_server.as_mut().expect("input open");
        pipe.write_all(bytes).unwrap();
        pipe.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        let mut bytes = Vec::new();
        write_frame(&mut bytes, message).unwrap();
        self.raw(&bytes);
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request and wait for its reply (the whole reply: `result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.expect(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The next message the predicate accepts; those it skips stay for later calls.
    pub fn expect(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.unread.iter().position(&wanted) {
            return self.unread.remove(i).unwrap();
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.from_server.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no expected message within {PATIENCE:?}; unread: {:?}",
                    self.unread
                )
            });
            if wanted(&message) {
                return message;
            }
            self.unread.push_back(message);
        }
    }

    /// The next diagnostics published for `uri`.
    pub fn diagnostics(&mut self, uri: &str) -> Value {
        self.expect(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
        })["params"]
            .clone()
    }

    /// Every message the server sent in reply to what was sent so far that the predicate
    /// accepts, taken out of the unread ones. Two request round trips make sure of "every":
    /// the first is handled with what came before it, and diagnostics are published once such
    /// a batch of messages is handled, before the second is read.
    pub fn drain(&mut self, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.request("streamlint/sync", Value::Null);
        self.request("streamlint/sync", Value::Null);
        let (taken, kept): (Vec<Value>, Vec<Value>) =
            self.unread.drain(..).partition(|m| wanted(m));
        self.unread = kept.into();
        taken
    }

    /// Close the input and wait for the session's exit code.
    pub fn finish(mut self) -> i32 {
        self.to_server.take();
        self.session.take().unwrap().join().unwrap().unwrap()
    }

    /// The exit code after the client sent `exit`, without closing the input.
    pub fn exit(mut self) -> i32 {
        self.notify("exit", Value::Null);
        self.session.take().unwrap().join().unwrap().unwrap()
    }
}
