//! The session: the protocol's lifecycle, each message handed to its handler, and the open
//! documents. Messages are handled in the order they come; linting waits until every message
//! already queued has been handled, so that a burst of edits to a document costs one lint of
//! its last text, and diagnostics are published for what the client has now.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc::Receiver;

use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionParams, CodeActionProviderCapability,
    DidChangeTextDocumentParams, DidChangeWatchedFilesParams,
    DidChangeWatchedFilesRegistrationOptions, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, FileSystemWatcher, GlobPattern,
    InitializeResult, MessageType, PublishDiagnosticsParams, Registration, RegistrationParams,
    SaveOptions, ServerCapabilities, ServerInfo, ShowMessageParams, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions, Uri,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use streamlint_linter::{Settings, Workspace};
use streamlint_rules::Finding;

use crate::actions::code_actions;
use crate::caps::ClientCaps;
use crate::config::{resolve, ClientSettings};
use crate::diagnostics::diagnostic;
use crate::documents::{file_path, Document};
use crate::lint::{findings, on_workers, LintFn};
use crate::message::{self, Incoming};
use crate::positions::LineIndex;
use crate::transport::{write_frame, Frame};

/// The configuration files whose changes the server asks to hear about.
const CONFIG_FILES: [&str; 2] = ["streamlint.toml", "pyproject.toml"];

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Before `initialize`: only `initialize` and `exit` are answered.
    Uninitialized,
    Running,
    /// After `shutdown`: only `exit` is.
    ShutDown,
}

pub struct Server<'w> {
    output: &'w mut dyn Write,
    lint: LintFn,
    phase: Phase,
    caps: ClientCaps,
    client_settings: ClientSettings,
    /// By URI text; ordered, so that diagnostics go out in a stable order.
    documents: BTreeMap<String, Document>,
    /// The client's workspace folders: a document with no configuration file is linted in the
    /// innermost one that holds it.
    folders: Vec<PathBuf>,
    /// The projects of the open documents, by root, indexed when a document first needs one.
    projects: HashMap<PathBuf, Workspace>,
}

impl<'w> Server<'w> {
    pub fn new(output: &'w mut dyn Write, lint: LintFn) -> Self {
        Server {
            output,
            lint,
            phase: Phase::Uninitialized,
            caps: ClientCaps::from_initialize(&Value::Null),
            client_settings: ClientSettings::default(),
            documents: BTreeMap::new(),
            folders: Vec::new(),
            projects: HashMap::new(),
        }
    }

    /// Serve until `exit` or the end of the input; returns the process's exit code: 0 when the
    /// client shut the server down first, 1 when it did not.
    pub fn run(mut self, frames: Receiver<io::Result<Frame>>) -> io::Result<i32> {
        while let Ok(first) = frames.recv() {
            let queued: Vec<_> = std::iter::once(first).chain(frames.try_iter()).collect();
            for frame in queued {
                let frame = match frame {
                    Ok(frame) => frame,
                    Err(e) => {
                        eprintln!("streamlint: cannot read the input: {e}");
                        return Ok(self.exit_code());
                    }
                };
                if let Some(code) = self.handle(frame)? {
                    return Ok(code);
                }
            }
            self.publish()?;
        }
        eprintln!("streamlint: the input ended without an exit notification");
        Ok(self.exit_code())
    }

    fn exit_code(&self) -> i32 {
        if self.phase == Phase::ShutDown {
            0
        } else {
            1
        }
    }

    /// Handle one frame; `Some(code)` when the session is over.
    fn handle(&mut self, frame: Frame) -> io::Result<Option<i32>> {
        let value = match frame {
            Frame::Message(value) => value,
            Frame::Malformed(why) => {
                eprintln!("streamlint: malformed message: {why}");
                let reply = message::error_response(Value::Null, message::PARSE_ERROR, &why);
                return self.send(reply).map(|_| None);
            }
        };
        match message::classify(value) {
            Ok(Incoming::Request { id, method, params }) => {
                self.request(id, &method, params).map(|_| None)
            }
            Ok(Incoming::Notification { method, params }) => {
                if method == "exit" {
                    return Ok(Some(self.exit_code()));
                }
                self.notification(&method, params).map(|_| None)
            }
            Ok(Incoming::Response) => Ok(None),
            Err(invalid) => {
                eprintln!("streamlint: invalid message: {}", invalid.reason);
                let reply =
                    message::error_response(invalid.id, message::INVALID_REQUEST, &invalid.reason);
                self.send(reply).map(|_| None)
            }
        }
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> io::Result<()> {
        if (self.phase, method) == (Phase::Uninitialized, "initialize") {
            let result = self.initialize(&params);
            self.send(message::response(id, result))?;
            // Problems with the options can be shown once the reply is out.
            let options = params.get("initializationOptions").cloned();
            return self
                .take_client_settings(options.unwrap_or_default())
                .map(|_| ());
        }
        let refuse = |code, text: &str| Err((code, text.to_string()));
        let result: Result<Value, (i64, String)> = match (self.phase, method) {
            (Phase::Uninitialized, _) => refuse(
                message::SERVER_NOT_INITIALIZED,
                "the server is not initialized",
            ),
            (Phase::ShutDown, _) => refuse(message::INVALID_REQUEST, "the server is shut down"),
            (Phase::Running, "initialize") => refuse(
                message::INVALID_REQUEST,
                "the server is already initialized",
            ),
            (Phase::Running, "shutdown") => {
                self.phase = Phase::ShutDown;
                Ok(Value::Null)
            }
            (Phase::Running, "textDocument/codeAction") => parse(params)
                .map(|p| self.code_action(&p))
                .map_err(|e| (message::INVALID_PARAMS, e)),
            (Phase::Running, _) => refuse(
                message::METHOD_NOT_FOUND,
                &format!("unknown method {method}"),
            ),
        };
        self.send(match result {
            Ok(value) => message::response(id, value),
            Err((code, text)) => message::error_response(id, code, &text),
        })
    }

    fn initialize(&mut self, params: &Value) -> Value {
        self.caps = ClientCaps::from_initialize(params);
        self.folders = workspace_folders(params);
        self.phase = Phase::Running;
        let sync = TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::INCREMENTAL),
            save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                include_text: Some(false),
            })),
            ..TextDocumentSyncOptions::default()
        };
        let capabilities = ServerCapabilities {
            position_encoding: Some(self.caps.encoding.kind()),
            text_document_sync: Some(TextDocumentSyncCapability::Options(sync)),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                resolve_provider: Some(false),
                ..CodeActionOptions::default()
            })),
            ..ServerCapabilities::default()
        };
        to_json(InitializeResult {
            capabilities,
            server_info: Some(ServerInfo {
                name: "streamlint".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
        })
    }

    fn notification(&mut self, method: &str, params: Value) -> io::Result<()> {
        if self.phase != Phase::Running {
            // Before `initialize` notifications are dropped; after `shutdown` only exit counts.
            return Ok(());
        }
        match method {
            "initialized" => self.watch_files(),
            "textDocument/didOpen" => self.with_params(params, Self::did_open),
            "textDocument/didChange" => self.with_params(params, Self::did_change),
            "textDocument/didSave" => self.with_params(params, Self::did_save),
            "textDocument/didClose" => self.with_params(params, Self::did_close),
            "workspace/didChangeConfiguration" => {
                let settings = params.get("settings").cloned().unwrap_or_default();
                self.did_change_configuration(settings)
            }
            "workspace/didChangeWatchedFiles" => {
                self.with_params(params, Self::did_change_watched_files)
            }
            // Unknown notifications, `$/cancelRequest` and `$/setTrace` among them, need nothing.
            _ => Ok(()),
        }
    }

    /// Decode a notification's parameters and handle them; bad parameters are only logged, as
    /// a notification has no reply to carry an error.
    fn with_params<P: DeserializeOwned>(
        &mut self,
        params: Value,
        handler: fn(&mut Self, P) -> io::Result<()>,
    ) -> io::Result<()> {
        match parse(params) {
            Ok(p) => handler(self, p),
            Err(why) => {
                eprintln!("streamlint: ignoring a notification: {why}");
                Ok(())
            }
        }
    }

    fn did_open(&mut self, params: DidOpenTextDocumentParams) -> io::Result<()> {
        let item = params.text_document;
        let path = file_path(&item.uri);
        let Some(language) = Document::language(&item.language_id, path.as_deref()) else {
            return Ok(());
        };
        let key = item.uri.as_str().to_string();
        let doc = Document::new(item.uri, language, item.version, item.text, path);
        self.documents.insert(key.clone(), doc);
        self.configure(&[key])
    }

    fn did_change(&mut self, params: DidChangeTextDocumentParams) -> io::Result<()> {
        let encoding = self.caps.encoding;
        match self.documents.get_mut(params.text_document.uri.as_str()) {
            Some(doc) => {
                doc.version = params.text_document.version;
                doc.apply(params.content_changes, encoding);
            }
            None => eprintln!(
                "streamlint: a change to {}, which is not open",
                params.text_document.uri.as_str()
            ),
        }
        Ok(())
    }

    /// A save publishes diagnostics again, with the configuration found afresh: a client that
    /// cannot watch files still picks up an edited configuration this way.
    fn did_save(&mut self, params: DidSaveTextDocumentParams) -> io::Result<()> {
        let key = params.text_document.uri.as_str().to_string();
        if self.documents.contains_key(&key) {
            self.configure(&[key])?;
        }
        Ok(())
    }

    fn did_close(&mut self, params: DidCloseTextDocumentParams) -> io::Result<()> {
        let uri = params.text_document.uri;
        if let Some(doc) = self.documents.remove(uri.as_str()) {
            self.send_diagnostics(uri, Vec::new(), None)?;
            // Its callers now see the file as it is on disk.
            if let (Some(root), Some(path)) = (doc.root, doc.path) {
                self.file_changed(&root, &path, None, &doc.settings);
            }
        }
        Ok(())
    }

    fn did_change_configuration(&mut self, settings: Value) -> io::Result<()> {
        if self.take_client_settings(settings)? {
            self.configure_all()?;
        }
        Ok(())
    }

    /// Use the editor's settings if they are valid (else say why and keep the old ones);
    /// returns whether they were taken. Selectors that name no rule are warned about.
    fn take_client_settings(&mut self, settings: Value) -> io::Result<bool> {
        let settings = match ClientSettings::from_json(settings) {
            Ok(settings) => settings,
            Err(why) => {
                self.show(MessageType::ERROR, &format!("streamlint: {why}"))?;
                return Ok(false);
            }
        };
        let unknown = settings.unknown_selectors();
        if !unknown.is_empty() {
            let text = format!(
                "streamlint: the editor settings name no rule with {}",
                unknown.join(", ")
            );
            self.show(MessageType::WARNING, &text)?;
        }
        self.client_settings = settings;
        Ok(true)
    }

    fn did_change_watched_files(&mut self, params: DidChangeWatchedFilesParams) -> io::Result<()> {
        let is_config = |uri: &Uri| {
            let name = uri.as_str().rsplit('/').next().unwrap_or("");
            CONFIG_FILES.contains(&name)
        };
        if params.changes.iter().any(|c| is_config(&c.uri)) {
            return self.configure_all();
        }
        // A source file changed on disk (a checkout, a formatter, another editor): the
        // projects that hold it index it again, unless it is open (the editor's text counts).
        for change in &params.changes {
            let Some(path) = file_path(&change.uri) else {
                continue;
            };
            let open = self
                .documents
                .values()
                .any(|d| d.path.as_deref() == Some(path.as_path()));
            if open {
                continue;
            }
            // Each project with the settings of its documents.
            let holders: Vec<(PathBuf, Rc<Settings>)> = self
                .projects
                .values()
                .filter(|p| p.contains(&path))
                .filter_map(|p| {
                    let root = p.root();
                    let doc = self
                        .documents
                        .values()
                        .find(|d| d.root.as_deref() == Some(root))?;
                    Some((root.to_path_buf(), doc.settings.clone()))
                })
                .collect();
            for (root, settings) in holders {
                self.file_changed(&root, &path, None, &settings);
            }
        }
        Ok(())
    }

    /// Index a file of a project again (from `text`, or from the disk); where what its callers
    /// see of it changed, the open documents that may call into it are linted again.
    fn file_changed(&mut self, root: &Path, path: &Path, text: Option<&str>, settings: &Settings) {
        let Some(project) = self.projects.get_mut(root) else {
            return;
        };
        if !project.update(path, text, settings) {
            return;
        }
        for doc in self.documents.values_mut() {
            let depends = doc.root.as_deref() == Some(root)
                && doc
                    .path
                    .as_deref()
                    .is_some_and(|p| project.depends_on(p, path));
            if depends {
                doc.stale();
            }
        }
    }

    /// Ask the client to report changes of configuration files and of Python and Rust files (a
    /// helper of an open file changed on disk), where it can be asked.
    fn watch_files(&mut self) -> io::Result<()> {
        if !self.caps.watch_files {
            return Ok(());
        }
        let watchers = CONFIG_FILES
            .iter()
            .chain(&["*.py", "*.rs"])
            .map(|name| FileSystemWatcher {
                glob_pattern: GlobPattern::String(format!("**/{name}")),
                kind: None,
            })
            .collect();
        let registration = Registration {
            id: "streamlint-watched-files".into(),
            method: "workspace/didChangeWatchedFiles".into(),
            register_options: Some(to_json(DidChangeWatchedFilesRegistrationOptions {
                watchers,
            })),
        };
        self.send(message::request(
            "streamlint-watch-files",
            "client/registerCapability",
            RegistrationParams {
                registrations: vec![registration],
            },
        ))
    }

    fn configure_all(&mut self) -> io::Result<()> {
        // Projects were indexed with the settings of before (their exclusions, their API).
        self.projects.clear();
        let keys: Vec<String> = self.documents.keys().cloned().collect();
        self.configure(&keys)
    }

    /// Find the settings of these documents again and have them linted anew. A configuration
    /// error is shown when it is new: not while another open document already has it.
    fn configure(&mut self, keys: &[String]) -> io::Result<()> {
        let mut new_errors = Vec::new();
        for key in keys {
            let Some(doc) = self.documents.get(key) else {
                continue;
            };
            let resolved = resolve(doc.path.as_deref(), &self.client_settings);
            if let Some(error) = &resolved.error {
                let known = self
                    .documents
                    .values()
                    .any(|d| d.config_error.as_ref() == Some(error));
                if !known && !new_errors.contains(error) {
                    new_errors.push(error.clone());
                }
            }
            let folder = doc.path.as_deref().and_then(|p| self.folder_of(p));
            if let Some(doc) = self.documents.get_mut(key) {
                doc.settings = Rc::new(resolved.settings);
                doc.configured = resolved.root.is_some();
                doc.root = resolved.root.or(folder);
                doc.config_error = resolved.error;
                doc.stale();
            }
        }
        for error in new_errors {
            self.show(
                MessageType::ERROR,
                &format!("streamlint: {error} (using the default settings)"),
            )?;
        }
        Ok(())
    }

    /// The innermost workspace folder that holds `path`.
    fn folder_of(&self, path: &Path) -> Option<PathBuf> {
        self.folders
            .iter()
            .filter(|f| path.starts_with(f))
            .max_by_key(|f| f.components().count())
            .cloned()
    }

    fn code_action(&mut self, params: &CodeActionParams) -> Value {
        let key = params.text_document.uri.as_str();
        let Some(findings) = self.lint_document(key) else {
            return Value::Array(Vec::new());
        };
        let doc = &self.documents[key];
        to_json(code_actions(doc, &findings, params, &self.caps))
    }

    /// The findings of an open document. A document with a project is linted in it, once the
    /// project has the document's current text (which makes the open files that call into it
    /// stale, when what they see of it changed).
    fn lint_document(&mut self, key: &str) -> Option<Rc<[Finding]>> {
        let doc = self.documents.get(key)?;
        if let (None, Some(root), Some(path)) = (&doc.findings, &doc.root, &doc.path) {
            let (root, path, text) = (root.clone(), path.clone(), doc.text.clone());
            let settings = doc.settings.clone();
            if !self.projects.contains_key(&root) {
                let scan_settings: &Settings = &settings;
                let project = on_workers(|| Workspace::scan(&root, scan_settings));
                self.projects.insert(root.clone(), project);
            }
            self.file_changed(&root, &path, Some(&text), &settings);
        }
        let doc = self.documents.get_mut(key)?;
        let project = doc.root.as_ref().and_then(|r| self.projects.get(r));
        Some(findings(doc, self.lint, project))
    }

    /// Lint what changed and publish its diagnostics, one document at a time in URI order.
    /// An edit that changes what other open files see of the document makes them stale as it
    /// is linted: they are linted and published after it, in the same pass.
    fn publish(&mut self) -> io::Result<()> {
        while let Some(key) = self
            .documents
            .iter()
            .find(|(_, d)| d.needs_publish)
            .map(|(k, _)| k.clone())
        {
            let Some(findings) = self.lint_document(&key) else {
                break;
            };
            let doc = self.documents.get_mut(&key).expect("linted above");
            doc.needs_publish = false;
            let index = LineIndex::new(&doc.text);
            let diagnostics = findings
                .iter()
                .map(|f| diagnostic(f, &doc.uri, &index, &self.caps))
                .collect();
            let (uri, version) = (doc.uri.clone(), doc.version);
            self.send_diagnostics(uri, diagnostics, Some(version))?;
        }
        Ok(())
    }

    fn send_diagnostics(
        &mut self,
        uri: Uri,
        diagnostics: Vec<lsp_types::Diagnostic>,
        version: Option<i32>,
    ) -> io::Result<()> {
        let params = PublishDiagnosticsParams {
            uri,
            diagnostics,
            version,
        };
        self.send(message::notification(
            "textDocument/publishDiagnostics",
            params,
        ))
    }

    fn show(&mut self, typ: MessageType, text: &str) -> io::Result<()> {
        eprintln!("{text}");
        let params = ShowMessageParams {
            typ,
            message: text.to_string(),
        };
        self.send(message::notification("window/showMessage", params))
    }

    fn send(&mut self, message: Value) -> io::Result<()> {
        write_frame(&mut self.output, &message)
    }
}

/// The workspace folders the client opened (`workspaceFolders`, else the older `rootUri`).
fn workspace_folders(params: &Value) -> Vec<PathBuf> {
    let uris: Vec<&str> = match params.get("workspaceFolders").and_then(Value::as_array) {
        Some(folders) => folders
            .iter()
            .filter_map(|f| f.get("uri").and_then(Value::as_str))
            .collect(),
        None => params
            .get("rootUri")
            .and_then(Value::as_str)
            .into_iter()
            .collect(),
    };
    uris.into_iter()
        .filter_map(|u| u.parse::<Uri>().ok())
        .filter_map(|u| file_path(&u))
        .collect()
}

fn parse<P: DeserializeOwned>(params: Value) -> Result<P, String> {
    serde_json::from_value(params).map_err(|e| format!("invalid parameters: {e}"))
}

/// The protocol types always serialize.
fn to_json(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}
