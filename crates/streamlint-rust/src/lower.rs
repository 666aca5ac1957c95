//! Lowering of one Rust function into a graph [`Body`]. Locals live in lexical scopes and are
//! dropped at their end in reverse order, as Rust does; moves end a local's responsibility.
//! cudarc's automatic tracking is lowered into explicit graph operations: each tracked slice has a
//! read and a write event that safe uses wait on and record, exactly as the library does, while
//! an owned stream is alive and tracking is enabled.

use std::collections::HashMap;

use proc_macro2::TokenTree;
use streamlint_graph::{
    BlockId, Body, BodyBuilder, Buffer, BufferId, EscapeKind, Event, EventId, Memory, OpKind, Owner, Production,
    ReleaseCause, Span, Spelling, Stream, StreamId, StreamOrigin,
};
use syn::spanned::Spanned;

use crate::model::{type_kind, TypeKind, BORROWED_STREAMS, OWNED_STREAM_FACTORIES};

const SPELLING: Spelling = Spelling {
    record_stream: None,
    wait_stream: "{waiter}.join(&{waitee})?",
    line_comment: "//",
    statement_end: Some(";"),
};

fn span_of(s: proc_macro2::Span) -> Span {
    let r = s.byte_range();
    Span::new(r.start as u32, r.end as u32)
}

/// What a local or expression holds.
#[derive(Clone, Debug)]
enum Value {
    Context,
    Stream(StreamId),
    /// The raw handle of a stream (`s.cu_stream()`): raw work names its stream with it.
    RawStream(StreamId),
    Slice(BufferId),
    Host(BufferId),
    Event(EventId),
    /// A raw device pointer into a buffer.
    Ptr { buffer: BufferId, write: bool },
    /// Something built from raw pointers (a kernel parameter array).
    Ptrs(Vec<(BufferId, bool)>),
    /// `x.device_ptr(&s)`: the pointer and its guard, before the tuple is taken apart.
    PtrGuard { buffer: BufferId, write: bool, stream: StreamId },
    Guard { buffer: BufferId, write: bool, stream: StreamId },
    /// `s.launch_builder(&f)` with the arguments pushed so far: (buffer, written).
    Builder { stream: StreamId, args: Vec<(BufferId, bool)> },
    /// One of several events, by path (`let ev = if c { s.record_event(None)? } else { .. }`).
    Events(Vec<EventId>),
    Unknown,
}

impl Value {
    /// The events the value may be.
    fn events(&self) -> Vec<EventId> {
        match self {
            Value::Event(e) => vec![*e],
            Value::Events(v) => v.clone(),
            _ => Vec::new(),
        }
    }

    /// The value after two paths meet.
    fn merge(self, other: Value) -> Value {
        match (self, other) {
            (Value::Slice(a), Value::Slice(b)) if a == b => Value::Slice(a),
            (Value::Stream(a), Value::Stream(b)) if a == b => Value::Stream(a),
            (a, b) if !a.events().is_empty() && !b.events().is_empty() => {
                let mut all = a.events();
                all.extend(b.events());
                Value::Events(all)
            }
            (Value::Unknown, v) | (v, Value::Unknown) => v,
            _ => Value::Unknown,
        }
    }
}

struct Local {
    name: String,
    value: Value,
    /// Moved out, or dropped explicitly: no drop at scope end.
    gone: bool,
}

struct Lowerer<'f> {
    b: BodyBuilder,
    scopes: Vec<Vec<Local>>,
    exit: BlockId,
    loops: Vec<(BlockId, BlockId)>,
    /// Event tracking is enabled on the context (`disable_event_tracking` turns it off).
    tracking_enabled: bool,
    /// Owned streams created here and still alive.
    owned_alive: Vec<StreamId>,
    /// Dropping everything at the function's end: only what outlives the call follows.
    exiting: bool,
    /// The function works with streams or slices it was given: an owned stream is taken to be
    /// alive elsewhere.
    owned_elsewhere: bool,
    /// Per tracked slice: its (read, write) events.
    slice_events: HashMap<BufferId, (EventId, EventId)>,
    /// Per pinned host buffer cudarc tracks: its event.
    pinned_events: HashMap<BufferId, EventId>,
    /// cust buffers: their plain drop frees with `cuMemFree`, which waits for the device.
    synchronous_free: std::collections::HashSet<BufferId>,
    named_streams: HashMap<String, StreamId>,
    summaries: &'f HashMap<String, Summary>,
    /// Each parameter's value at entry, by position.
    params: Vec<Value>,
}

/// What the rest of the file tells about a function before its body is read.
#[derive(Default)]
pub struct FileContext {
    /// The typed fields of the `impl`'s struct, reachable as `self.field`.
    pub fields: Vec<(String, TypeKind)>,
    /// Another method of the same `impl` turns tracking off for good (typically the constructor
    /// calls `disable_event_tracking`), so this one starts with it off.
    pub tracking_disabled: bool,
    /// Summaries of the file's free functions, by name.
    pub summaries: HashMap<String, Summary>,
}

/// What a call to a free function of the same file does, as its body shows: reads and writes of
/// its slice parameters on its stream parameters, and a slice it returns made on one of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// (slice parameter, stream parameter, written), by argument position.
    pub accesses: Vec<(usize, usize, bool)>,
    /// The stream parameter a returned slice was made on.
    pub returns_on: Option<usize>,
    /// The stream parameter a returned event was recorded on, after the accesses.
    pub returns_event_on: Option<usize>,
    /// (event parameter, stream parameter, recorded rather than waited on), in body order.
    pub event_uses: Vec<(usize, usize, bool)>,
}

impl Summary {
    pub fn is_empty(&self) -> bool {
        self.accesses.is_empty() && self.returns_on.is_none() && self.returns_event_on.is_none() && self.event_uses.is_empty()
    }
}

/// Lower one function, and summarize it for its callers.
pub fn lower_fn(sig: &syn::Signature, block: &syn::Block, whole: proc_macro2::Span, file: &FileContext) -> (Body, Summary) {
    let ambient = Stream {
        display: "the default stream".into(),
        expr: "stream".into(),
        origin: StreamOrigin::Ambient,
        span: None,
    };
    let mut b = BodyBuilder::new(sig.ident.to_string(), span_of(whole), SPELLING, ambient);
    b.caller_picks_stream();
    let exit = b.new_block();
    let mut l = Lowerer {
        b,
        scopes: vec![Vec::new()],
        exit,
        loops: Vec::new(),
        tracking_enabled: !file.tracking_disabled,
        owned_alive: Vec::new(),
        exiting: false,
        owned_elsewhere: false,
        slice_events: HashMap::new(),
        pinned_events: HashMap::new(),
        synchronous_free: std::collections::HashSet::new(),
        named_streams: HashMap::new(),
        summaries: &file.summaries,
        params: Vec::new(),
    };
    l.bind_params(sig);
    l.bind_fields(sig, &file.fields);
    let v = l.block_value(block);
    let tail = match block.stmts.last() {
        Some(syn::Stmt::Expr(e, None)) => e.span(),
        _ => block.span(),
    };
    l.hand_to_caller(&v, span_of(tail));
    l.drop_scope_all();
    let end = l.b.current();
    l.b.edge(end, exit);
    let summary = l.summary(&v);
    (l.b.finish(), summary)
}

impl Lowerer<'_> {
    // ----- entities and tracking -------------------------------------------------------------

    fn tracking_active(&self) -> bool {
        self.tracking_enabled && (!self.owned_alive.is_empty() || self.owned_elsewhere)
    }

    fn new_stream(&mut self, name: &str, origin: StreamOrigin, span: Span) -> StreamId {
        self.b.add_stream(Stream { display: format!("`{name}`"), expr: name.to_string(), origin, span: Some(span) })
    }

    fn named_stream(&mut self, name: &str, origin: StreamOrigin) -> StreamId {
        if let Some(s) = self.named_streams.get(name) {
            return *s;
        }
        let id = self.b.add_stream(Stream { display: format!("`{name}`"), expr: name.to_string(), origin, span: None });
        self.named_streams.insert(name.to_string(), id);
        id
    }

    fn new_buffer(&mut self, name: &str, memory: Memory, owner: Owner, tracked: bool) -> BufferId {
        let id = self.b.add_buffer(Buffer { name: name.to_string(), memory, owner });
        if tracked {
            let ev = |b: &mut BodyBuilder, what: &str| {
                b.add_event(Event { name: format!("`{name}`'s {what} event"), expr: format!("{name}.{what}"), created: None, internal: true })
            };
            let read = ev(&mut self.b, "read");
            let write = ev(&mut self.b, "write");
            if memory == Memory::Device {
                self.slice_events.insert(id, (read, write));
            } else {
                self.pinned_events.insert(id, write);
            }
        }
        id
    }

    /// A safe use of a tracked slice on `stream`: wait for what it must follow (before), record
    /// what later users must follow (after).
    fn tracked_wait(&mut self, buffer: BufferId, stream: StreamId, write: bool, span: Span) {
        if !self.tracking_active() {
            return;
        }
        if let Some(&(read, w)) = self.slice_events.get(&buffer) {
            self.b.push(OpKind::WaitEvent { event: w, stream }, span);
            if write {
                self.b.push(OpKind::WaitEvent { event: read, stream }, span);
            }
        }
    }

    fn tracked_record(&mut self, buffer: BufferId, stream: StreamId, write: bool, span: Span) {
        if !self.tracking_active() {
            return;
        }
        if let Some(&(read, w)) = self.slice_events.get(&buffer) {
            self.b.push(OpKind::RecordEvent { event: if write { w } else { read }, stream }, span);
        }
        if let Some(&e) = self.pinned_events.get(&buffer) {
            self.b.push(OpKind::RecordEvent { event: e, stream }, span);
        }
    }

    /// A safe device access through cudarc (or an untracked one through cust).
    fn safe_access(&mut self, buffer: BufferId, stream: StreamId, write: bool, span: Span) {
        self.tracked_wait(buffer, stream, write, span);
        let kind = if write { OpKind::Write { buffer, stream } } else { OpKind::Read { buffer, stream } };
        self.b.push(kind, span);
        self.tracked_record(buffer, stream, write, span);
    }

    /// A host-to-device copy over a whole buffer: its contents are a new upload on `stream`.
    fn upload_into(&mut self, buffer: BufferId, stream: StreamId, span: Span) {
        self.tracked_wait(buffer, stream, true, span);
        // Overwriting what earlier work may still read or write.
        self.b.push(OpKind::Write { buffer, stream }, span);
        self.b.push(OpKind::Produce { buffer, stream, how: Production::HostToDevice { non_blocking: true } }, span);
        self.tracked_record(buffer, stream, true, span);
    }

    fn produce(&mut self, name: &str, stream: StreamId, how: Production, records: bool, span: Span) -> BufferId {
        let tracked = self.tracking_enabled;
        let buffer = self.new_buffer(name, Memory::Device, Owner::Local, tracked);
        self.b.push(OpKind::Produce { buffer, stream, how }, span);
        if records {
            self.tracked_record(buffer, stream, true, span);
        }
        buffer
    }

    // ----- locals and scopes ------------------------------------------------------------------

    fn bind(&mut self, name: &str, value: Value) {
        self.scopes.last_mut().expect("a scope").push(Local { name: name.to_string(), value, gone: false });
    }

    fn lookup(&self, name: &str) -> Option<&Local> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|l| l.name == name && !l.gone)
    }

    fn lookup_mut(&mut self, name: &str) -> Option<&mut Local> {
        self.scopes.iter_mut().rev().flat_map(|s| s.iter_mut().rev()).find(|l| l.name == name && !l.gone)
    }

    /// The local an expression names (`x`, `&x`, `&mut x`, `x.clone()` is not one).
    fn local_name(expr: &syn::Expr) -> Option<String> {
        match expr {
            syn::Expr::Path(p) if p.path.segments.len() == 1 => Some(p.path.segments[0].ident.to_string()),
            syn::Expr::Reference(r) => Self::local_name(&r.expr),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => Self::local_name(&u.expr),
            syn::Expr::Paren(p) => Self::local_name(&p.expr),
            syn::Expr::Field(f) => Self::field_of_self(f),
            _ => None,
        }
    }

    /// The local a chain of `.arg(..)` calls extends (`b` in `b.arg(x).arg(y)`).
    fn builder_local(receiver: &syn::Expr) -> Option<String> {
        match receiver {
            syn::Expr::MethodCall(m) if m.method == "arg" => Self::builder_local(&m.receiver),
            other => Self::local_name(other),
        }
    }

    /// `self.name` as the name its binding has (`"self.name"`).
    fn field_of_self(f: &syn::ExprField) -> Option<String> {
        match (f.base.as_ref(), &f.member) {
            (syn::Expr::Path(p), syn::Member::Named(field)) if p.path.is_ident("self") => Some(format!("self.{field}")),
            _ => None,
        }
    }

    /// The local is moved away (passed by value, returned): no drop here.
    fn mark_gone(&mut self, name: &str) {
        if let Some(l) = self.lookup_mut(name) {
            l.gone = true;
        }
    }

    /// The value leaves the scope (returned, the block's value): the locals holding its buffer
    /// no longer drop it. Returns where they are.
    fn move_out(&mut self, value: &Value) -> Vec<(usize, usize)> {
        let (Value::Slice(b) | Value::Host(b)) = *value else { return Vec::new() };
        let mut moved = Vec::new();
        for (scope, locals) in self.scopes.iter_mut().enumerate() {
            for (i, l) in locals.iter_mut().enumerate() {
                if !l.gone && matches!(l.value, Value::Slice(x) | Value::Host(x) if x == b) {
                    l.gone = true;
                    moved.push((scope, i));
                }
            }
        }
        moved
    }

    /// Drop a value: explicitly (`drop(x)`, an overwrite) or, `implicit`, at the end of its scope.
    fn drop_value(&mut self, value: &Value, span: Span, implicit: bool) {
        match *value {
            Value::Slice(buffer) | Value::Host(buffer) => {
                if self.b.body().buffer(buffer).owner != Owner::Local {
                    return;
                }
                // cudarc: the allocating stream waits on the slice's events, then frees there.
                if let Some(&(read, write)) = self.slice_events.get(&buffer) {
                    if self.tracking_active() {
                        if let Some(alloc) = self.alloc_stream(buffer) {
                            self.b.push(OpKind::WaitEvent { event: read, stream: alloc }, span);
                            self.b.push(OpKind::WaitEvent { event: write, stream: alloc }, span);
                        }
                    }
                }
                if let Some(&e) = self.pinned_events.get(&buffer) {
                    self.b.push(OpKind::SyncEvent { event: e }, span);
                }
                if self.synchronous_free.contains(&buffer) {
                    self.b.push(OpKind::SyncDevice, span);
                }
                let cause = if implicit { ReleaseCause::ScopeDrop } else { ReleaseCause::Drop };
                self.b.push(OpKind::Release { buffer, cause }, span);
            }
            Value::Stream(s) => {
                if let Some(pos) = self.owned_alive.iter().position(|o| *o == s) {
                    self.owned_alive.remove(pos);
                    if self.owned_alive.is_empty() && !self.owned_elsewhere && self.tracking_enabled && (!self.exiting || self.caller_sees_buffers()) {
                        self.b.push(OpKind::EndStream { stream: s, at_scope_end: implicit }, span);
                    }
                }
            }
            Value::Guard { buffer, write, stream } => self.release_guard(buffer, stream, write, span),
            _ => {}
        }
    }

    fn release_guard(&mut self, buffer: BufferId, stream: StreamId, write: bool, span: Span) {
        self.tracked_record(buffer, stream, write, span);
        self.b.push(OpKind::GuardReleased { buffer }, span);
    }

    /// The stream a buffer was produced on, from its `Produce` op.
    fn alloc_stream(&self, buffer: BufferId) -> Option<StreamId> {
        self.b.body().ops.iter().find_map(|op| match op.kind {
            OpKind::Produce { buffer: b, stream, .. } if b == buffer => Some(stream),
            _ => None,
        })
    }

    /// Owned streams made by a statement and bound to no local are temporaries: they go away
    /// at the end of the statement.
    fn drop_temporary_streams(&mut self, before: usize, span: Span) {
        let made: Vec<StreamId> = self.owned_alive.iter().skip(before).copied().collect();
        for s in made {
            let bound = self.scopes.iter().flatten().any(|l| !l.gone && matches!(l.value, Value::Stream(b) if b == s));
            if !bound {
                self.drop_value(&Value::Stream(s), span, true);
            }
        }
    }

    fn pop_scope(&mut self, span: Span) {
        let scope = self.scopes.pop().unwrap_or_default();
        for local in scope.into_iter().rev().filter(|l| !l.gone) {
            self.drop_value(&local.value, span, true);
        }
    }

    /// Does a buffer of this body outlive it (the caller's, a field, one returned)? Then what
    /// happens to tracking at the exit matters to later users.
    fn caller_sees_buffers(&self) -> bool {
        let body = self.b.body();
        body.buffers.iter().any(|b| b.owner != Owner::Local)
            || body.ops.iter().any(|op| matches!(op.kind, OpKind::Escape { kind: EscapeKind::Caller, .. }))
    }

    /// Drops of every live local, for leaving the function early (without popping the scopes).
    fn drop_scope_all(&mut self) {
        let values: Vec<Value> = self.scopes.iter().rev().flat_map(|s| s.iter().rev()).filter(|l| !l.gone).map(|l| l.value.clone()).collect();
        let span = self.b.body().span;
        let end = Span::new(span.end.saturating_sub(1), span.end);
        let was = std::mem::replace(&mut self.exiting, true);
        for v in values {
            self.drop_value(&v, end, true);
        }
        self.exiting = was;
    }

    fn hand_to_caller(&mut self, value: &Value, span: Span) {
        if let Value::Slice(buffer) | Value::Host(buffer) = *value {
            // The caller's uses of a tracked slice wait for its last write, as any use does.
            let ambient = self.b.ambient();
            self.tracked_wait(buffer, ambient, false, span);
            self.b.push(OpKind::Escape { buffer, kind: EscapeKind::Caller }, span);
        }
    }

    // ----- parameters -------------------------------------------------------------------------

    fn bind_params(&mut self, sig: &syn::Signature) {
        for input in &sig.inputs {
            let syn::FnArg::Typed(pt) = input else {
                self.params.push(Value::Unknown);
                continue;
            };
            let syn::Pat::Ident(id) = pt.pat.as_ref() else {
                self.params.push(Value::Unknown);
                continue;
            };
            let name = id.ident.to_string();
            let value = match type_kind(&pt.ty) {
                Some(kind) => self.entry_value(&name, kind, StreamOrigin::Parameter, Owner::Caller, span_of(pt.span())),
                None => Value::Unknown,
            };
            self.params.push(value.clone());
            self.bind(&name, value);
        }
    }

    /// A method's view of its struct's fields: `self.field`, alive before and after the call.
    fn bind_fields(&mut self, sig: &syn::Signature, fields: &[(String, TypeKind)]) {
        if sig.receiver().is_none() {
            return;
        }
        let sp = span_of(sig.span());
        for (field, kind) in fields {
            let name = format!("self.{field}");
            let value = self.entry_value(&name, *kind, StreamOrigin::Attribute, Owner::Attribute, sp);
            self.bind(&name, value);
        }
    }

    /// The value of something that exists when the function is entered: a parameter or a field.
    fn entry_value(&mut self, name: &str, kind: TypeKind, origin: StreamOrigin, owner: Owner, sp: Span) -> Value {
        match kind {
            TypeKind::Context => Value::Context,
            TypeKind::Stream => {
                self.owned_elsewhere = true;
                Value::Stream(self.named_stream(name, origin))
            }
            TypeKind::TrackedSlice => {
                // What was done with it before is the caller's to order (its events capture it
                // under tracking); no stream work of this function made it.
                let buffer = self.new_buffer(name, Memory::Device, owner, true);
                let ambient = self.b.ambient();
                self.b.push(OpKind::Produce { buffer, stream: ambient, how: Production::Host }, sp);
                if let Some(&(read, write)) = self.slice_events.get(&buffer) {
                    self.b.push(OpKind::RecordEvent { event: read, stream: ambient }, sp);
                    self.b.push(OpKind::RecordEvent { event: write, stream: ambient }, sp);
                }
                Value::Slice(buffer)
            }
            TypeKind::UntrackedBuffer => {
                let buffer = self.new_buffer(name, Memory::Device, owner, false);
                self.synchronous_free.insert(buffer);
                let ambient = self.b.ambient();
                self.b.push(OpKind::Produce { buffer, stream: ambient, how: Production::Host }, sp);
                Value::Slice(buffer)
            }
            TypeKind::PinnedHost => {
                let buffer = self.new_buffer(name, Memory::PinnedHost, owner, false);
                let ambient = self.b.ambient();
                self.b.push(OpKind::Produce { buffer, stream: ambient, how: Production::Host }, sp);
                Value::Host(buffer)
            }
            TypeKind::Event => Value::Event(self.b.add_event(Event { name: format!("`{name}`"), expr: name.to_string(), created: None, internal: false })),
        }
    }

    /// What callers need to know of this body: see [`Summary`].
    fn summary(&self, returned: &Value) -> Summary {
        let slice_param = |b: BufferId| self.params.iter().position(|p| matches!(p, Value::Slice(x) if *x == b));
        let stream_param = |s: StreamId| self.params.iter().position(|p| matches!(p, Value::Stream(x) if *x == s));
        let event_param = |e: EventId| self.params.iter().position(|p| matches!(p, Value::Event(x) if *x == e));
        let mut accesses = Vec::new();
        let mut event_uses = Vec::new();
        for op in &self.b.body().ops {
            if let OpKind::WaitEvent { event, stream } | OpKind::RecordEvent { event, stream } = op.kind {
                if let (Some(e), Some(s)) = (event_param(event), stream_param(stream)) {
                    event_uses.push((e, s, matches!(op.kind, OpKind::RecordEvent { .. })));
                }
            }
            let (buffer, stream, write) = match op.kind {
                OpKind::Read { buffer, stream } => (buffer, stream, false),
                OpKind::Write { buffer, stream } | OpKind::Produce { buffer, stream, .. } => (buffer, stream, true),
                OpKind::Raw { buffer, stream, write } => (buffer, stream, write),
                _ => continue,
            };
            if let (Some(b), Some(s)) = (slice_param(buffer), stream_param(stream)) {
                if !accesses.contains(&(b, s, write)) {
                    accesses.push((b, s, write));
                }
            }
        }
        let returns_on = match *returned {
            Value::Slice(b) if self.b.body().buffer(b).owner == Owner::Local => self.alloc_stream(b).and_then(stream_param),
            _ => None,
        };
        let returns_event_on = match *returned {
            Value::Event(e) => self.b.body().ops.iter().rev().find_map(|op| match op.kind {
                OpKind::RecordEvent { event, stream } if event == e => stream_param(stream),
                _ => None,
            }),
            _ => None,
        };
        Summary { accesses, returns_on, returns_event_on, event_uses }
    }

    // ----- statements -------------------------------------------------------------------------

    /// Lower a block in its own scope; its value is its tail expression's.
    fn block_value(&mut self, block: &syn::Block) -> Value {
        self.scopes.push(Vec::new());
        let mut value = Value::Unknown;
        for (i, stmt) in block.stmts.iter().enumerate() {
            let last = i + 1 == block.stmts.len();
            let streams_before = self.owned_alive.len();
            match stmt {
                syn::Stmt::Local(local) => self.local(local),
                syn::Stmt::Expr(e, semi) => {
                    let v = self.expr(e);
                    if last && semi.is_none() {
                        // The tail value (`x`, `Ok(x)`) moves its locals out of the block.
                        self.move_out(&v);
                        value = v;
                    }
                }
                syn::Stmt::Macro(m) => self.macro_call(&m.mac),
                syn::Stmt::Item(_) => {}
            }
            self.drop_temporary_streams(streams_before, span_of(stmt.span()));
        }
        let end = block.brace_token.span.close();
        // The function's own block: its end is the function's exit.
        let exiting = self.exiting || self.scopes.len() == 2;
        let was = std::mem::replace(&mut self.exiting, exiting);
        self.pop_scope(span_of(end));
        self.exiting = was;
        value
    }

    fn local(&mut self, local: &syn::Local) {
        let sp = span_of(local.span());
        // `let (a, b) = (x, y);` binds element by element.
        if let (syn::Pat::Tuple(pats), Some(syn::Expr::Tuple(exprs))) = (&local.pat, local.init.as_ref().map(|i| i.expr.as_ref())) {
            if pats.elems.len() == exprs.elems.len() {
                for (pat, expr) in pats.elems.iter().zip(&exprs.elems) {
                    let value = self.expr(expr);
                    if let (false, Some(src)) = (matches!(expr, syn::Expr::Reference(_)), Self::local_name(expr)) {
                        self.mark_gone(&src);
                    }
                    self.bind_pattern(pat, value, sp);
                }
                return;
            }
        }
        let init = local.init.as_ref().map(|i| (self.expr(&i.expr), Self::local_name(&i.expr)));
        if let Some((_, Some(src))) = &init {
            // `let y = x;` moves `x`.
            if !matches!(local.init.as_ref().map(|i| i.expr.as_ref()), Some(syn::Expr::Reference(_))) {
                self.mark_gone(src);
            }
        }
        let mut value = init.map(|(v, _)| v).unwrap_or(Value::Unknown);
        if let (Value::Unknown, Some(i)) = (&value, &local.init) {
            // `let params = [&ptr as *const _ as *mut c_void, ...]` carries the pointers.
            let expr = &i.expr;
            let mut ptrs = Vec::new();
            self.pointers_in_tokens(quote::quote!(#expr), &mut ptrs);
            if !ptrs.is_empty() {
                value = Value::Ptrs(ptrs);
            }
        }
        self.bind_pattern(&local.pat, value, sp);
    }

    fn bind_pattern(&mut self, pat: &syn::Pat, value: Value, sp: Span) {
        match pat {
            syn::Pat::Ident(id) => {
                let name = id.ident.to_string();
                let value = match value {
                    Value::Stream(s) => {
                        let stream = self.b.body().stream(s).clone();
                        if stream.origin == StreamOrigin::Temporary {
                            let sm = self.b_stream_mut(s);
                            sm.origin = StreamOrigin::Created;
                            sm.display = format!("`{name}`");
                            sm.expr = name.clone();
                        } else if stream.origin == StreamOrigin::Ambient && stream.expr == "stream" {
                            // `let main = ctx.default_stream();`: fixes name it as the code does.
                            let sm = self.b_stream_mut(s);
                            sm.expr = name.clone();
                            sm.span = Some(sp);
                        }
                        Value::Stream(s)
                    }
                    Value::PtrGuard { buffer, write, .. } => Value::Ptr { buffer, write },
                    v => v,
                };
                // A value made by this statement takes the name it is bound to.
                if let Value::Slice(b) | Value::Host(b) = value {
                    let buffer = self.b.buffer_mut(b);
                    if buffer.name.starts_with("the ") {
                        buffer.name = name.clone();
                    }
                }
                self.bind(&name, value);
            }
            syn::Pat::Type(pt) => {
                let value = match (&value, type_kind(&pt.ty)) {
                    (Value::Unknown, Some(TypeKind::PinnedHost)) => {
                        let b = self.new_buffer("host", Memory::PinnedHost, Owner::Local, false);
                        let ambient = self.b.ambient();
                        self.b.push(OpKind::Produce { buffer: b, stream: ambient, how: Production::Host }, sp);
                        Value::Host(b)
                    }
                    _ => value,
                };
                self.bind_pattern(&pt.pat, value, sp);
            }
            syn::Pat::Tuple(t) => match value {
                Value::PtrGuard { buffer, write, stream } => {
                    let mut elems = t.elems.iter();
                    if let Some(p) = elems.next() {
                        self.bind_pattern(p, Value::Ptr { buffer, write }, sp);
                    }
                    match elems.next() {
                        Some(syn::Pat::Ident(g)) => self.bind(&g.ident.to_string(), Value::Guard { buffer, write, stream }),
                        // `_` does not bind: the guard is dropped at once.
                        _ => self.release_guard(buffer, stream, write, sp),
                    }
                }
                _ => {
                    for p in &t.elems {
                        self.bind_pattern(p, Value::Unknown, sp);
                    }
                }
            },
            _ => {}
        }
    }

    fn b_stream_mut(&mut self, s: StreamId) -> &mut Stream {
        self.b.stream_mut(s)
    }

    // ----- expressions ------------------------------------------------------------------------

    fn expr(&mut self, e: &syn::Expr) -> Value {
        use syn::Expr as E;
        let sp = span_of(e.span());
        match e {
            E::Path(p) => match p.path.get_ident() {
                Some(id) => self.lookup(&id.to_string()).map(|l| l.value.clone()).unwrap_or(Value::Unknown),
                None => Value::Unknown,
            },
            E::Reference(r) => self.expr(&r.expr),
            E::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => self.expr(&u.expr),
            E::Paren(p) => self.expr(&p.expr),
            E::Group(g) => self.expr(&g.expr),
            E::Try(t) => self.expr(&t.expr),
            E::Await(a) => self.expr(&a.base),
            E::Cast(c) => self.expr(&c.expr),
            E::Unsafe(u) => self.block_value(&u.block),
            E::Block(b) => self.block_value(&b.block),
            E::MethodCall(m) => self.method_call(m, sp),
            E::Call(c) => self.call(c, sp),
            E::Field(f) => {
                if let Some(name) = Self::field_of_self(f) {
                    return self.lookup(&name).map(|l| l.value.clone()).unwrap_or(Value::Unknown);
                }
                let base = self.expr(&f.base);
                match (base, &f.member) {
                    // `x.device_ptr(&s).0`: the guard is a temporary, dropped at the end of the
                    // statement, before the pointer is used.
                    (Value::PtrGuard { buffer, write, stream }, syn::Member::Unnamed(i)) if i.index == 0 => {
                        self.release_guard(buffer, stream, write, sp);
                        Value::Ptr { buffer, write }
                    }
                    _ => Value::Unknown,
                }
            }
            E::Index(i) => {
                // `h[0]`: the host reads a host buffer.
                if let Value::Host(h) = self.expr(&i.expr) {
                    self.b.push(OpKind::HostRead { buffer: h }, sp);
                }
                self.expr(&i.index);
                Value::Unknown
            }
            E::Assign(a) if matches!(a.left.as_ref(), syn::Expr::Index(_)) => {
                // `h[i] = v`: the host writes it.
                self.expr(&a.right);
                if let syn::Expr::Index(i) = a.left.as_ref() {
                    if let Value::Host(h) = self.expr(&i.expr) {
                        self.b.push(OpKind::HostWrite { buffer: h }, sp);
                    }
                    self.expr(&i.index);
                }
                Value::Unknown
            }
            E::Assign(a) => {
                let v = self.expr(&a.right);
                if let Some(name) = Self::local_name(&a.left) {
                    if let Some(old) = self.lookup(&name).map(|l| l.value.clone()) {
                        self.drop_value(&old, sp, false);
                    }
                    if let Some(l) = self.lookup_mut(&name) {
                        l.value = v;
                    }
                }
                Value::Unknown
            }
            E::If(i) => {
                self.expr(&i.cond);
                let from = self.b.current();
                let then = self.b.new_block();
                self.b.edge(from, then);
                self.b.switch_to(then);
                let then_value = self.block_value(&i.then_branch);
                let then_end = self.b.current();
                let other = self.b.new_block();
                self.b.edge(from, other);
                self.b.switch_to(other);
                let else_value = match &i.else_branch {
                    Some((_, else_branch)) => self.expr(else_branch),
                    None => Value::Unknown,
                };
                let join = self.b.new_block();
                let other_end = self.b.current();
                self.b.edge(then_end, join);
                self.b.edge(other_end, join);
                self.b.switch_to(join);
                then_value.merge(else_value)
            }
            E::Match(m) => {
                self.expr(&m.expr);
                let from = self.b.current();
                let join = self.b.new_block();
                let mut value = Value::Unknown;
                for arm in &m.arms {
                    let start = self.b.new_block();
                    self.b.edge(from, start);
                    self.b.switch_to(start);
                    let v = self.expr(&arm.body);
                    value = value.merge(v);
                    let end = self.b.current();
                    self.b.edge(end, join);
                }
                self.b.edge(from, join);
                self.b.switch_to(join);
                value
            }
            E::While(w) => {
                self.loop_of(Some(&w.cond), &w.body);
                Value::Unknown
            }
            E::ForLoop(f) => {
                self.expr(&f.expr);
                self.loop_of(None, &f.body);
                Value::Unknown
            }
            E::Loop(l) => {
                self.loop_of(None, &l.body);
                Value::Unknown
            }
            E::Return(r) => {
                let mut moved = Vec::new();
                if let Some(v) = &r.expr {
                    let value = self.expr(v);
                    self.hand_to_caller(&value, sp);
                    moved = self.move_out(&value);
                }
                self.drop_scope_all();
                // Only this path returned them: the code after the `if` still owns them.
                for (scope, i) in moved {
                    self.scopes[scope][i].gone = false;
                }
                let from = self.b.current();
                self.b.edge(from, self.exit);
                let dead = self.b.new_block();
                self.b.switch_to(dead);
                Value::Unknown
            }
            E::Break(_) | E::Continue(_) => {
                if let Some(&(head, after)) = self.loops.last() {
                    let to = if matches!(e, E::Break(_)) { after } else { head };
                    let from = self.b.current();
                    self.b.edge(from, to);
                    let dead = self.b.new_block();
                    self.b.switch_to(dead);
                }
                Value::Unknown
            }
            E::Macro(m) => {
                self.macro_call(&m.mac);
                Value::Unknown
            }
            E::Tuple(t) => {
                for el in &t.elems {
                    self.expr(el);
                }
                Value::Unknown
            }
            E::Let(l) => {
                let v = self.expr(&l.expr);
                self.bind_pattern(&l.pat, v, sp);
                Value::Unknown
            }
            _ => Value::Unknown,
        }
    }

    fn loop_of(&mut self, cond: Option<&syn::Expr>, body: &syn::Block) {
        let from = self.b.current();
        let head = self.b.new_block();
        self.b.edge(from, head);
        self.b.switch_to(head);
        if let Some(c) = cond {
            self.expr(c);
        }
        let head_end = self.b.current();
        let after = self.b.new_block();
        self.b.edge(head_end, after);
        let start = self.b.new_block();
        self.b.edge(head_end, start);
        self.b.switch_to(start);
        self.loops.push((head, after));
        self.block_value(body);
        self.loops.pop();
        let end = self.b.current();
        self.b.edge(end, head);
        self.b.switch_to(after);
    }

    fn stream_arg(&mut self, args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>, i: usize) -> Option<StreamId> {
        match args.iter().nth(i).map(|a| self.expr(a)) {
            Some(Value::Stream(s)) => Some(s),
            _ => None,
        }
    }

    fn buffer_arg(&mut self, arg: Option<&syn::Expr>) -> Option<BufferId> {
        match arg.map(|a| self.expr(a)) {
            Some(Value::Slice(b) | Value::Host(b)) => Some(b),
            _ => None,
        }
    }

    fn method_call(&mut self, m: &syn::ExprMethodCall, sp: Span) -> Value {
        let method = m.method.to_string();
        let recv = self.expr(&m.receiver);
        let receiver_name = Self::local_name(&m.receiver);
        let first = m.args.first();
        match (&recv, method.as_str()) {
            (_, f) if OWNED_STREAM_FACTORIES.contains(&f) => {
                let s = self.new_stream("a new stream", StreamOrigin::Temporary, sp);
                self.owned_alive.push(s);
                Value::Stream(s)
            }
            (Value::Stream(parent), "fork") => {
                let parent = *parent;
                let s = self.new_stream("a forked stream", StreamOrigin::Temporary, sp);
                self.owned_alive.push(s);
                self.b.push(OpKind::WaitStream { waiter: s, waitee: parent }, sp);
                Value::Stream(s)
            }
            (Value::Context | Value::Unknown, "default_stream") => Value::Stream(self.b.ambient()),
            (Value::Context | Value::Unknown, f) if BORROWED_STREAMS.contains(&f) && m.args.is_empty() => {
                Value::Stream(self.named_stream("the per-thread stream", StreamOrigin::Unknown))
            }
            (Value::Context | Value::Unknown, "alloc_pinned" | "alloc_pinned_with_flags") => {
                let tracked = self.tracking_enabled;
                let h = self.new_buffer("the pinned buffer", Memory::PinnedHost, Owner::Local, tracked);
                let ambient = self.b.ambient();
                self.b.push(OpKind::Produce { buffer: h, stream: ambient, how: Production::Host }, sp);
                Value::Host(h)
            }
            (_, "disable_event_tracking") => {
                self.tracking_enabled = false;
                Value::Unknown
            }
            (_, "enable_event_tracking") => {
                self.tracking_enabled = true;
                Value::Unknown
            }
            (_, "new_event") => {
                let e = self.b.add_event(Event { name: "the event".into(), expr: "ev".into(), created: Some(sp), internal: false });
                self.b.push(OpKind::NewEvent { event: e }, sp);
                Value::Event(e)
            }
            (Value::Slice(_) | Value::Host(_) | Value::Event(_) | Value::Stream(_), "take" | "unwrap" | "expect" | "as_ref" | "as_mut") => recv,
            (Value::Stream(s), "clone") => Value::Stream(*s),
            (Value::Stream(s), _) => self.stream_method(*s, &method, &m.args, sp),
            (Value::Event(e), "record") => {
                let e = *e;
                if let Some(s) = self.stream_arg(&m.args, 0) {
                    self.b.push(OpKind::RecordEvent { event: e, stream: s }, sp);
                }
                Value::Unknown
            }
            (Value::Event(e), "synchronize") => {
                let e = *e;
                self.b.push(OpKind::SyncEvent { event: e }, sp);
                Value::Unknown
            }
            (Value::Context, "synchronize") => {
                self.b.push(OpKind::SyncDevice, sp);
                Value::Unknown
            }
            (Value::Slice(x), "device_ptr" | "device_ptr_mut" | "view_ptr" | "view_ptr_mut") => {
                let x = *x;
                let write = method.ends_with("_mut");
                let Some(s) = self.stream_arg(&m.args, 0) else { return Value::Unknown };
                self.tracked_wait(x, s, write, sp);
                self.b.push(OpKind::GuardTaken { buffer: x, stream: s }, sp);
                Value::PtrGuard { buffer: x, write, stream: s }
            }
            (Value::Slice(x), "slice" | "slice_mut" | "as_view" | "as_view_mut" | "try_slice" | "try_slice_mut") => Value::Slice(*x),
            // The slice's allocating stream, known only by that name.
            (Value::Slice(_), "stream") => {
                let owner = receiver_name.unwrap_or_else(|| "the slice".into());
                Value::Stream(self.named_stream(&format!("{owner}.stream()"), StreamOrigin::Unknown))
            }
            (Value::Slice(x), "drop_async") => {
                let x = *x;
                let cause = match self.stream_arg(&m.args, 0) {
                    Some(s) => ReleaseCause::FreeOn(s),
                    None => ReleaseCause::Drop,
                };
                self.b.push(OpKind::Release { buffer: x, cause }, sp);
                if let Some(n) = receiver_name {
                    self.mark_gone(&n);
                }
                Value::Unknown
            }
            (Value::Slice(x), "async_copy_from" | "async_copy_to") => {
                let x = *x;
                let host = self.buffer_arg(first);
                let Some(s) = self.stream_arg(&m.args, 1) else { return Value::Unknown };
                let to_device = method == "async_copy_from";
                if let Some(h) = host {
                    let kind = if to_device { OpKind::Read { buffer: h, stream: s } } else { OpKind::Write { buffer: h, stream: s } };
                    self.b.push(kind, sp);
                }
                if to_device {
                    self.upload_into(x, s, sp);
                } else {
                    self.b.push(OpKind::Read { buffer: x, stream: s }, sp);
                }
                Value::Unknown
            }
            (Value::Slice(x), "copy_from" | "copy_to") => {
                // cust's synchronous copies wait for the device, and are done when they return.
                let x = *x;
                let ambient = self.b.ambient();
                self.buffer_arg(first);
                self.b.push(OpKind::SyncDevice, sp);
                let kind = if method == "copy_from" { OpKind::Write { buffer: x, stream: ambient } } else { OpKind::Read { buffer: x, stream: ambient } };
                self.b.push(kind, sp);
                self.b.push(OpKind::SyncDevice, sp);
                Value::Unknown
            }
            (Value::Slice(x), "leak") => {
                let x = *x;
                self.b.push(OpKind::Escape { buffer: x, kind: EscapeKind::UnknownCallee }, sp);
                Value::Unknown
            }
            (Value::Host(h), "as_slice" | "as_mut_slice" | "as_ptr" | "as_mut_ptr") => {
                let h = *h;
                if let Some(&e) = self.pinned_events.get(&h) {
                    self.b.push(OpKind::SyncEvent { event: e }, sp);
                }
                let kind = if method.contains("mut") { OpKind::HostWrite { buffer: h } } else { OpKind::HostRead { buffer: h } };
                self.b.push(kind, sp);
                Value::Unknown
            }
            (Value::Host(h), _) => {
                // Any other use of a host buffer reads (or, for `_mut`/`fill`/`copy_from_slice`, writes) it.
                let h = *h;
                for a in &m.args {
                    self.expr(a);
                }
                let write = method.contains("mut") || method.starts_with("fill") || method == "copy_from_slice";
                self.b.push(if write { OpKind::HostWrite { buffer: h } } else { OpKind::HostRead { buffer: h } }, sp);
                Value::Unknown
            }
            (Value::Builder { stream, args }, "arg") => {
                let (stream, mut args) = (*stream, args.clone());
                if let Some(a) = first {
                    let write = matches!(a, syn::Expr::Reference(r) if r.mutability.is_some());
                    match self.expr(a) {
                        Value::Slice(b) => args.push((b, write)),
                        Value::Ptr { buffer, write } => {
                            // A raw pointer argument escapes tracking.
                            self.b.push(OpKind::Raw { buffer, stream, write }, sp);
                        }
                        _ => {}
                    }
                }
                let v = Value::Builder { stream, args };
                if let Some(n) = Self::builder_local(&m.receiver) {
                    if let Some(l) = self.lookup_mut(&n) {
                        l.value = v.clone();
                    }
                }
                v
            }
            (Value::Builder { stream, args }, "launch" | "launch_cooperative") => {
                let (stream, args) = (*stream, args.clone());
                for &(b, write) in &args {
                    self.tracked_wait(b, stream, write, sp);
                }
                for &(b, write) in &args {
                    let kind = if write { OpKind::Write { buffer: b, stream } } else { OpKind::Read { buffer: b, stream } };
                    self.b.push(kind, sp);
                }
                for &(b, write) in &args {
                    self.tracked_record(b, stream, write, sp);
                }
                Value::Unknown
            }
            (Value::Slice(_) | Value::Context | Value::Event(_), "clone") => recv,
            _ => {
                for a in &m.args {
                    self.expr(a);
                }
                Value::Unknown
            }
        }
    }

    fn stream_method(&mut self, s: StreamId, method: &str, args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>, sp: Span) -> Value {
        let first = args.first();
        match method {
            "alloc_zeros" | "alloc" | "alloc_zeros_async" => {
                let records = method != "alloc";
                Value::Slice(self.produce("the allocation", s, Production::Allocate, records, sp))
            }
            "clone_htod" | "htod_copy" | "htod_sync_copy" | "clone_htod_async" => {
                if let Some(h) = self.buffer_arg(first) {
                    self.b.push(OpKind::Read { buffer: h, stream: s }, sp);
                }
                Value::Slice(self.produce("the upload", s, Production::HostToDevice { non_blocking: true }, true, sp))
            }
            "memcpy_htod" | "htod_copy_into" => {
                if let Some(h) = self.buffer_arg(first) {
                    self.b.push(OpKind::Read { buffer: h, stream: s }, sp);
                }
                if let Some(d) = self.buffer_arg(args.iter().nth(1)) {
                    self.upload_into(d, s, sp);
                }
                Value::Unknown
            }
            "clone_dtoh" | "dtoh_sync_copy" | "memcpy_dtov" => {
                if let Some(d) = self.buffer_arg(first) {
                    self.safe_access(d, s, false, sp);
                }
                // Into pageable memory: the copy is complete when the call returns.
                self.b.push(OpKind::SyncStream { stream: s }, sp);
                Value::Unknown
            }
            "memcpy_dtoh" | "dtoh_sync_copy_into" => {
                if let Some(d) = self.buffer_arg(first) {
                    self.safe_access(d, s, false, sp);
                }
                match self.buffer_arg(args.iter().nth(1)) {
                    Some(h) if self.b.body().buffer(h).memory == Memory::PinnedHost => {
                        self.b.push(OpKind::Write { buffer: h, stream: s }, sp);
                        self.tracked_record(h, s, true, sp);
                    }
                    _ => {
                        self.b.push(OpKind::SyncStream { stream: s }, sp);
                    }
                }
                Value::Unknown
            }
            "memcpy_dtod" | "dtod_copy" => {
                if let Some(src) = self.buffer_arg(first) {
                    self.safe_access(src, s, false, sp);
                }
                if let Some(dst) = self.buffer_arg(args.iter().nth(1)) {
                    self.safe_access(dst, s, true, sp);
                }
                Value::Unknown
            }
            "clone_dtod" => {
                if let Some(src) = self.buffer_arg(first) {
                    self.safe_access(src, s, false, sp);
                }
                Value::Slice(self.produce("the copy", s, Production::Compute, true, sp))
            }
            "memset_zeros" => {
                if let Some(d) = self.buffer_arg(first) {
                    self.safe_access(d, s, true, sp);
                }
                Value::Unknown
            }
            "launch_builder" => {
                if let Some(f) = first {
                    self.expr(f);
                }
                Value::Builder { stream: s, args: Vec::new() }
            }
            "join" => {
                if let Some(o) = self.stream_arg(args, 0) {
                    if o != s {
                        self.b.push(OpKind::WaitStream { waiter: s, waitee: o }, sp);
                    }
                }
                Value::Unknown
            }
            "wait" | "wait_event" => {
                for event in first.map(|a| self.expr(a)).map(|v| v.events()).unwrap_or_default() {
                    self.b.push(OpKind::WaitEvent { event, stream: s }, sp);
                }
                Value::Unknown
            }
            "record_event" => {
                let e = self.b.add_event(Event { name: "the event".into(), expr: "ev".into(), created: None, internal: false });
                self.b.push(OpKind::RecordEvent { event: e, stream: s }, sp);
                Value::Event(e)
            }
            "synchronize" => {
                self.b.push(OpKind::SyncStream { stream: s }, sp);
                Value::Unknown
            }
            "cu_stream" => Value::RawStream(s),
            _ => {
                for a in args {
                    self.expr(a);
                }
                Value::Unknown
            }
        }
    }

    fn call(&mut self, c: &syn::ExprCall, sp: Span) -> Value {
        let path = match c.func.as_ref() {
            syn::Expr::Path(p) => p.path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let last = path.last().map(String::as_str).unwrap_or("");
        let owner = path.len().checked_sub(2).map(|i| path[i].as_str()).unwrap_or("");
        match (owner, last) {
            (_, "drop") | ("mem", "forget") => {
                let dropped: Vec<&syn::Expr> = c
                    .args
                    .iter()
                    .flat_map(|a| match a {
                        syn::Expr::Tuple(t) => t.elems.iter().collect::<Vec<_>>(),
                        other => vec![other],
                    })
                    .collect();
                for a in dropped {
                    let v = self.expr(a);
                    self.drop_value(&v, sp, false);
                    if let Some(n) = Self::local_name(a) {
                        self.mark_gone(&n);
                    }
                }
                return Value::Unknown;
            }
            ("CudaContext", "new") => return Value::Context,
            // Wrappers that hand their argument on.
            (_, "Some" | "Ok") | ("Arc" | "Box" | "Rc", "new") => {
                return c.args.first().map(|a| self.expr(a)).unwrap_or(Value::Unknown);
            }
            ("Stream", "new") => return Value::Stream(self.new_stream("a new stream", StreamOrigin::Temporary, sp)),
            ("Event", "new") => {
                let e = self.b.add_event(Event { name: "the event".into(), expr: "ev".into(), created: Some(sp), internal: false });
                self.b.push(OpKind::NewEvent { event: e }, sp);
                return Value::Event(e);
            }
            ("LockedBuffer", _) => {
                let h = self.new_buffer("the pinned buffer", Memory::PinnedHost, Owner::Local, false);
                let ambient = self.b.ambient();
                self.b.push(OpKind::Produce { buffer: h, stream: ambient, how: Production::Host }, sp);
                return Value::Host(h);
            }
            ("DeviceBuffer" | "DeviceBox", f) => {
                let vals: Vec<Value> = c.args.iter().map(|a| self.expr(a)).collect();
                let stream = vals.iter().find_map(|v| match v {
                    Value::Stream(s) => Some(*s),
                    _ => None,
                });
                let ambient = self.b.ambient();
                let buffer = self.new_buffer("the device buffer", Memory::Device, Owner::Local, false);
                self.synchronous_free.insert(buffer);
                self.b.push(OpKind::Produce { buffer, stream: stream.unwrap_or(ambient), how: Production::Allocate }, sp);
                if !f.ends_with("_async") {
                    // Synchronous allocation and copy.
                    self.b.push(OpKind::SyncDevice, sp);
                }
                return Value::Slice(buffer);
            }
            _ => {}
        }
        let vals: Vec<Value> = c.args.iter().map(|a| self.expr(a)).collect();
        if let [name] = path.as_slice() {
            if let Some(summary) = self.summaries.get(name) {
                return self.apply_summary(&summary.clone(), &vals, sp);
            }
        }
        // Raw work: a call given a stream's raw handle runs on that stream, through the raw
        // pointers it is given.
        if let Some(stream) = vals.iter().find_map(|v| match v {
            Value::RawStream(s) => Some(*s),
            _ => None,
        }) {
            return self.raw_call(last, stream, &c.args, sp);
        }
        // Slices passed by value move into the callee.
        for a in &c.args {
            if !matches!(a, syn::Expr::Reference(_)) {
                if let Some(n) = Self::local_name(a) {
                    if let Some(Value::Slice(b)) = self.lookup(&n).map(|l| l.value.clone()) {
                        self.b.push(OpKind::Escape { buffer: b, kind: EscapeKind::UnknownCallee }, sp);
                        self.mark_gone(&n);
                    }
                }
            }
        }
        Value::Unknown
    }

    /// A call to a summarized function of the file: its accesses are safe cudarc work on the
    /// streams it is given, as if written here.
    fn apply_summary(&mut self, summary: &Summary, args: &[Value], sp: Span) -> Value {
        let stream_at = |i: usize| match args.get(i) {
            Some(Value::Stream(s)) => Some(*s),
            _ => None,
        };
        for &(slice, stream, write) in &summary.accesses {
            if let (Some(Value::Slice(b)), Some(s)) = (args.get(slice), stream_at(stream)) {
                self.safe_access(*b, s, write, sp);
            }
        }
        for &(event, stream, record) in &summary.event_uses {
            let (Some(v), Some(s)) = (args.get(event), stream_at(stream)) else { continue };
            for event in v.events() {
                let kind = if record { OpKind::RecordEvent { event, stream: s } } else { OpKind::WaitEvent { event, stream: s } };
                self.b.push(kind, sp);
            }
        }
        if let Some(s) = summary.returns_event_on.and_then(stream_at) {
            let event = self.b.add_event(Event { name: "the event".into(), expr: "ev".into(), created: Some(sp), internal: false });
            self.b.push(OpKind::NewEvent { event }, sp);
            self.b.push(OpKind::RecordEvent { event, stream: s }, sp);
            return Value::Event(event);
        }
        match summary.returns_on.and_then(stream_at) {
            Some(s) => Value::Slice(self.produce("the result", s, Production::Call, true, sp)),
            None => Value::Unknown,
        }
    }

    /// A driver call given a stream's raw handle (`result::malloc_async(s.cu_stream(), n)`,
    /// `result::launch_kernel(.., s.cu_stream(), &mut params)`): raw work on that stream.
    fn raw_call(&mut self, function: &str, stream: StreamId, args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>, sp: Span) -> Value {
        match function {
            // Stream-ordered memory nothing tracks; a kernel given it may write it.
            "malloc_async" | "mem_alloc_async" => {
                let buffer = self.new_buffer("the raw allocation", Memory::Device, Owner::Local, false);
                self.b.push(OpKind::Produce { buffer, stream, how: Production::Allocate }, sp);
                Value::Ptr { buffer, write: true }
            }
            "free_async" | "mem_free_async" => {
                for (buffer, _) in self.pointers_in(args) {
                    self.b.push(OpKind::Release { buffer, cause: ReleaseCause::FreeOn(stream) }, sp);
                }
                Value::Unknown
            }
            _ => {
                // A device-to-host copy only reads its device pointer.
                let reads_only = function.contains("dtoh");
                for (buffer, write) in self.pointers_in(args) {
                    self.b.push(OpKind::Raw { buffer, stream, write: write && !reads_only }, sp);
                }
                Value::Unknown
            }
        }
    }

    /// Raw pointers named anywhere in the arguments: (buffer, written).
    fn pointers_in(&self, args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>) -> Vec<(BufferId, bool)> {
        let mut out = Vec::new();
        for a in args {
            let tokens = quote::quote!(#a);
            self.pointers_in_tokens(tokens, &mut out);
        }
        out
    }

    fn pointers_in_tokens(&self, tokens: proc_macro2::TokenStream, out: &mut Vec<(BufferId, bool)>) {
        for t in tokens {
            match t {
                TokenTree::Ident(id) => {
                    let found = match self.lookup(&id.to_string()).map(|l| l.value.clone()) {
                        Some(Value::Ptr { buffer, write }) => vec![(buffer, write)],
                        Some(Value::Ptrs(p)) => p,
                        _ => Vec::new(),
                    };
                    for p in found {
                        if !out.contains(&p) {
                            out.push(p);
                        }
                    }
                }
                TokenTree::Group(g) => self.pointers_in_tokens(g.stream(), out),
                _ => {}
            }
        }
    }

    /// `launch!(module.kernel<<<grid, block, shmem, stream>>>(buf.as_device_ptr(), ..))` (cust):
    /// raw work on `stream` through every buffer whose pointer it passes.
    fn macro_call(&mut self, mac: &syn::Macro) {
        let name = mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if name != "launch" {
            return;
        }
        let tokens: Vec<TokenTree> = mac.tokens.clone().into_iter().collect();
        let sp = span_of(mac.span());
        // The stream is the last identifier before `>>>`.
        let mut stream = None;
        let mut buffers = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            if let TokenTree::Ident(id) = t {
                let name = id.to_string();
                match self.lookup(&name).map(|l| l.value.clone()) {
                    Some(Value::Stream(s)) => {
                        let closes = tokens[i + 1..].iter().take(3).all(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '>'));
                        if closes {
                            stream = Some(s);
                        }
                    }
                    Some(Value::Slice(b)) => buffers.push(b),
                    _ => {}
                }
            }
            if let TokenTree::Group(g) = t {
                for inner in g.stream() {
                    if let TokenTree::Ident(id) = inner {
                        if let Some(Value::Slice(b)) = self.lookup(&id.to_string()).map(|l| l.value.clone()) {
                            buffers.push(b);
                        }
                    }
                }
            }
        }
        let Some(stream) = stream else { return };
        for b in buffers {
            self.b.push(OpKind::Raw { buffer: b, stream, write: true }, sp);
        }
    }
}
