//! Lowering of one Rust function into a graph [`Body`]. Locals live in lexical scopes and are
//! dropped at their end in reverse order, as Rust does; moves end a local's responsibility.
//! cudarc's automatic tracking is lowered into explicit graph operations: each tracked slice has a
//! read and a write event that safe uses wait on and record, exactly as the library does, while
//! an owned stream is alive and tracking is enabled.

use rustc_hash::FxHashMap;

use proc_macro2::TokenTree;
use streamlint_graph::{
    BlockId, Body, BodyBuilder, Buffer, BufferId, Deadline, EscapeKind, Event, EventId, Memory,
    OpKind, Owner, Production, ReleaseCause, Span, Stream, StreamId, StreamOrigin,
};
use syn::spanned::Spanned;

use crate::model::{type_kind_in, TypeKind, BORROWED_STREAMS, OWNED_STREAM_FACTORIES};

mod calls;
mod raw;
mod spelling;
mod statements;
mod summary;

use spelling::SPELLING;

pub use streamlint_graph::Summary;

fn span_of(s: proc_macro2::Span) -> Span {
    let r = crate::offsets::byte_range(s);
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
    Ptr {
        buffer: BufferId,
        write: bool,
    },
    /// Something built from raw pointers (a kernel parameter array).
    Ptrs(Vec<(BufferId, bool)>),
    /// `x.device_ptr(&s)`: the pointer and its guard, before the tuple is taken apart.
    PtrGuard {
        buffer: BufferId,
        write: bool,
        stream: StreamId,
    },
    Guard {
        buffer: BufferId,
        write: bool,
        stream: StreamId,
    },
    /// `s.launch_builder(&f)` with the arguments pushed so far: (buffer, written).
    Builder {
        stream: StreamId,
        args: Vec<(BufferId, bool)>,
    },
    /// One of several events, by path (`let ev = if c { s.record_event(None)? } else { .. }`).
    Events(Vec<EventId>),
    /// A closure: its body runs where it is called (`run(&stream)`), or where it is handed to
    /// code that calls it (`with_stream(|s| ..)`).
    Closure(Closure),
    Unknown,
}

/// A closure's syntax, shared by the values that hold it.
#[derive(Clone)]
struct Closure(std::rc::Rc<syn::ExprClosure>);

impl std::fmt::Debug for Closure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Closure")
    }
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
    /// A mutable borrow (a `&mut CudaSlice<T>` parameter): handing it on as it is lets the
    /// callee write through it.
    mutable_borrow: bool,
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
    slice_events: FxHashMap<BufferId, (EventId, EventId)>,
    /// Per pinned host buffer cudarc tracks: its event.
    pinned_events: FxHashMap<BufferId, EventId>,
    /// cust buffers: their plain drop frees with `cuMemFree`, which waits for the device.
    synchronous_free: rustc_hash::FxHashSet<BufferId>,
    named_streams: FxHashMap<String, StreamId>,
    summaries: &'f FxHashMap<String, Summary>,
    /// The type of the `impl` being lowered, whose methods `self.m(..)` calls.
    impl_of: Option<&'f str>,
    aliases: &'f FxHashMap<String, TypeKind>,
    /// Each parameter's value at entry, by position.
    params: Vec<Value>,
    deadline: Deadline,
    source: &'f str,
}

/// What the rest of the file tells about a function before its body is read.
pub struct FileContext<'s> {
    /// The file's text: expressions are named as they are written.
    pub source: &'s str,
    /// The typed fields of the `impl`'s struct, reachable as `self.field`.
    pub fields: Vec<(String, TypeKind)>,
    /// Another method of the same `impl` turns tracking off for good (typically the constructor
    /// calls `disable_event_tracking`), so this one starts with it off.
    pub tracking_disabled: bool,
    /// Summaries of the functions a call may reach, by the keys of
    /// [`crate::CrateSummaries`]: free functions by name, methods by `Type::method` and by
    /// `.method`.
    pub summaries: FxHashMap<String, Summary>,
    /// The type of the `impl` the function is a method of.
    pub impl_of: Option<String>,
    /// Aliases of GPU types (`type Queue = Arc<CudaStream>;`), by name.
    pub aliases: &'s FxHashMap<String, TypeKind>,
    /// When lowering stops (checked between statements).
    pub deadline: Deadline,
}

/// Lower one function, and summarize it for its callers.
pub fn lower_fn(
    sig: &syn::Signature,
    block: &syn::Block,
    whole: proc_macro2::Span,
    file: &FileContext<'_>,
) -> (Body, Summary) {
    let ambient = Stream {
        display: "the default stream".into(),
        expr: "stream".into(),
        origin: StreamOrigin::Ambient,
        span: None,
        home: None,
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
        slice_events: FxHashMap::default(),
        pinned_events: FxHashMap::default(),
        synchronous_free: rustc_hash::FxHashSet::default(),
        named_streams: FxHashMap::default(),
        summaries: &file.summaries,
        impl_of: file.impl_of.as_deref(),
        aliases: file.aliases,
        params: Vec::new(),
        deadline: file.deadline,
        source: file.source,
    };
    l.bind_params(sig);
    l.bind_fields(sig, &file.fields);
    let v = l.block_value(block);
    let tail = match block.stmts.last() {
        Some(syn::Stmt::Expr(e, None)) => e.span(),
        // The closing brace: printing the block to find its span would cost a pass over it.
        _ => block.brace_token.span.close(),
    };
    l.hand_to_caller(&v, span_of(tail));
    l.drop_scope_all();
    let end = l.b.current();
    l.b.edge(end, exit);
    let summary = l.summary(&v);
    (l.b.finish(), summary)
}

impl Lowerer<'_> {
    /// An expression as the file spells it.
    fn spelled(&self, expr: &(impl quote::ToTokens + syn::spanned::Spanned)) -> String {
        spelling::spelled(self.source, expr)
    }

    // ----- entities and tracking -------------------------------------------------------------

    fn tracking_active(&self) -> bool {
        self.tracking_enabled && (!self.owned_alive.is_empty() || self.owned_elsewhere)
    }

    /// A stream made at `span`: `name` is the variable it is bound to, or for a temporary, a
    /// description in words (it has no name code could write).
    fn new_stream(&mut self, name: &str, origin: StreamOrigin, span: Span) -> StreamId {
        let display = if origin == StreamOrigin::Temporary {
            name.to_string()
        } else {
            format!("`{name}`")
        };
        self.b.add_stream(Stream {
            display,
            expr: name.to_string(),
            origin,
            span: Some(span),
            home: None,
        })
    }

    fn named_stream(&mut self, name: &str, origin: StreamOrigin) -> StreamId {
        if let Some(s) = self.named_streams.get(name) {
            return *s;
        }
        let id = self.b.add_stream(Stream {
            display: format!("`{name}`"),
            expr: name.to_string(),
            origin,
            span: None,
            home: None,
        });
        self.named_streams.insert(name.to_string(), id);
        id
    }

    fn new_buffer(&mut self, name: &str, memory: Memory, owner: Owner, tracked: bool) -> BufferId {
        let id = self.b.add_buffer(Buffer {
            name: name.to_string(),
            spelled: streamlint_graph::is_dotted_name(name),
            memory,
            owner,
        });
        if tracked {
            let ev = |b: &mut BodyBuilder, what: &str| {
                b.add_event(Event {
                    name: format!("`{name}`'s {what} event"),
                    expr: format!("{name}.{what}"),
                    created: None,
                    internal: true,
                })
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
                self.b.push(
                    OpKind::WaitEvent {
                        event: read,
                        stream,
                    },
                    span,
                );
            }
        }
    }

    fn tracked_record(&mut self, buffer: BufferId, stream: StreamId, write: bool, span: Span) {
        if !self.tracking_active() {
            return;
        }
        if let Some(&(read, w)) = self.slice_events.get(&buffer) {
            self.b.push(
                OpKind::RecordEvent {
                    event: if write { w } else { read },
                    stream,
                },
                span,
            );
        }
        if let Some(&e) = self.pinned_events.get(&buffer) {
            self.b.push(OpKind::RecordEvent { event: e, stream }, span);
        }
    }

    /// A safe device access through cudarc (or an untracked one through cust).
    fn safe_access(&mut self, buffer: BufferId, stream: StreamId, write: bool, span: Span) {
        self.tracked_wait(buffer, stream, write, span);
        let kind = if write {
            OpKind::Write { buffer, stream }
        } else {
            OpKind::Read { buffer, stream }
        };
        self.b.push(kind, span);
        self.tracked_record(buffer, stream, write, span);
    }

    /// A host-to-device copy over a whole buffer: its contents are a new upload on `stream`.
    fn upload_into(&mut self, buffer: BufferId, stream: StreamId, span: Span) {
        self.tracked_wait(buffer, stream, true, span);
        // Overwriting what earlier work may still read or write.
        self.b.push(OpKind::Write { buffer, stream }, span);
        self.b.push(
            OpKind::Produce {
                buffer,
                stream,
                how: Production::HostToDevice { non_blocking: true },
            },
            span,
        );
        self.tracked_record(buffer, stream, true, span);
    }

    fn produce(
        &mut self,
        name: &str,
        stream: StreamId,
        how: Production,
        records: bool,
        span: Span,
    ) -> BufferId {
        let tracked = self.tracking_enabled;
        let buffer = self.new_buffer(name, Memory::Device, Owner::Local, tracked);
        self.b.push(
            OpKind::Produce {
                buffer,
                stream,
                how,
            },
            span,
        );
        if records {
            self.tracked_record(buffer, stream, true, span);
        }
        buffer
    }

    // ----- locals and scopes ------------------------------------------------------------------

    fn bind(&mut self, name: &str, value: Value) {
        self.scopes.last_mut().expect("a scope").push(Local {
            name: name.to_string(),
            value,
            gone: false,
            mutable_borrow: false,
        });
    }

    fn lookup(&self, name: &str) -> Option<&Local> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|l| l.name == name && !l.gone)
    }

    fn lookup_mut(&mut self, name: &str) -> Option<&mut Local> {
        self.scopes
            .iter_mut()
            .rev()
            .flat_map(|s| s.iter_mut().rev())
            .find(|l| l.name == name && !l.gone)
    }

    /// The local an expression names (`x`, `&x`, `&mut x`, `x.clone()` is not one).
    fn local_name(expr: &syn::Expr) -> Option<String> {
        match expr {
            syn::Expr::Path(p) if p.path.segments.len() == 1 => {
                Some(p.path.segments[0].ident.to_string())
            }
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
            (syn::Expr::Path(p), syn::Member::Named(field)) if p.path.is_ident("self") => {
                Some(format!("self.{field}"))
            }
            (syn::Expr::Path(p), syn::Member::Unnamed(index)) if p.path.is_ident("self") => {
                Some(format!("self.{}", index.index))
            }
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
        let (Value::Slice(b) | Value::Host(b)) = *value else {
            return Vec::new();
        };
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
                            self.b.push(
                                OpKind::WaitEvent {
                                    event: read,
                                    stream: alloc,
                                },
                                span,
                            );
                            self.b.push(
                                OpKind::WaitEvent {
                                    event: write,
                                    stream: alloc,
                                },
                                span,
                            );
                        }
                    }
                }
                if let Some(&e) = self.pinned_events.get(&buffer) {
                    self.b.push(OpKind::SyncEvent { event: e }, span);
                }
                if self.synchronous_free.contains(&buffer) {
                    self.b.push(OpKind::SyncDevice, span);
                }
                let cause = if implicit {
                    ReleaseCause::ScopeDrop
                } else {
                    ReleaseCause::Drop
                };
                self.b.push(OpKind::Release { buffer, cause }, span);
            }
            Value::Stream(s) => {
                if let Some(pos) = self.owned_alive.iter().position(|o| *o == s) {
                    self.owned_alive.remove(pos);
                    if self.owned_alive.is_empty()
                        && !self.owned_elsewhere
                        && self.tracking_enabled
                        && (!self.exiting || self.caller_sees_buffers())
                    {
                        self.b.push(
                            OpKind::EndStream {
                                stream: s,
                                at_scope_end: implicit,
                            },
                            span,
                        );
                    }
                }
            }
            Value::Guard {
                buffer,
                write,
                stream,
            } => self.release_guard(buffer, stream, write, span),
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
            OpKind::Produce {
                buffer: b, stream, ..
            } if b == buffer => Some(stream),
            _ => None,
        })
    }

    /// Owned streams made by a statement and bound to no local are temporaries: they go away
    /// at the end of the statement.
    fn drop_temporary_streams(&mut self, before: usize, span: Span) {
        let made: Vec<StreamId> = self.owned_alive.iter().skip(before).copied().collect();
        for s in made {
            let bound = self
                .scopes
                .iter()
                .flatten()
                .any(|l| !l.gone && matches!(l.value, Value::Stream(b) if b == s));
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
            || body.ops.iter().any(|op| {
                matches!(
                    op.kind,
                    OpKind::Escape {
                        kind: EscapeKind::Caller,
                        ..
                    }
                )
            })
    }

    /// Drops of every live local, for leaving the function early (without popping the scopes).
    fn drop_scope_all(&mut self) {
        let values: Vec<Value> = self
            .scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .filter(|l| !l.gone)
            .map(|l| l.value.clone())
            .collect();
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
            self.b.push(
                OpKind::Escape {
                    buffer,
                    kind: EscapeKind::Caller,
                },
                span,
            );
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
            let value = match type_kind_in(&pt.ty, self.aliases) {
                Some(kind) => self.entry_value(
                    &name,
                    kind,
                    StreamOrigin::Parameter,
                    Owner::Caller,
                    span_of(pt.span()),
                ),
                None => Value::Unknown,
            };
            if matches!(value, Value::Context) {
                self.name_default_stream(&name);
            }
            self.params.push(value.clone());
            self.bind(&name, value);
            if let syn::Type::Reference(syn::TypeReference {
                mutability: Some(_),
                ..
            }) = pt.ty.as_ref()
            {
                if let Some(local) = self.lookup_mut(&name) {
                    local.mutable_borrow = true;
                }
            }
        }
    }

    /// The context is named `ctx`: fixes spell its default stream `ctx.default_stream()` (the
    /// stream driver calls given no stream run on), unless the code already named it.
    pub(super) fn name_default_stream(&mut self, ctx: &str) {
        let ambient = self.b.ambient();
        let stream = self.b_stream_mut(ambient);
        if stream.expr == "stream" {
            stream.expr = format!("{ctx}.default_stream()");
        }
    }

    /// The default stream as the code names it (`let main = ctx.default_stream();`,
    /// `ctx.per_thread_stream()`), unless the code named it already: the name fixes write.
    pub(super) fn name_default_stream_as(
        &mut self,
        expr: String,
        display: Option<String>,
        sp: Option<Span>,
    ) {
        let ambient = self.b.ambient();
        let stream = self.b_stream_mut(ambient);
        if stream.expr == "stream" || stream.expr.ends_with(".default_stream()") {
            stream.expr = expr;
            if let Some(display) = display {
                stream.display = display;
            }
            if sp.is_some() {
                stream.span = sp;
            }
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
            let value =
                self.entry_value(&name, *kind, StreamOrigin::Attribute, Owner::Attribute, sp);
            self.bind(&name, value);
        }
    }

    /// The value of something that exists when the function is entered: a parameter or a field.
    fn entry_value(
        &mut self,
        name: &str,
        kind: TypeKind,
        origin: StreamOrigin,
        owner: Owner,
        sp: Span,
    ) -> Value {
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
                self.b.push(
                    OpKind::Produce {
                        buffer,
                        stream: ambient,
                        how: Production::Host,
                    },
                    sp,
                );
                if let Some(&(read, write)) = self.slice_events.get(&buffer) {
                    self.b.push(
                        OpKind::RecordEvent {
                            event: read,
                            stream: ambient,
                        },
                        sp,
                    );
                    self.b.push(
                        OpKind::RecordEvent {
                            event: write,
                            stream: ambient,
                        },
                        sp,
                    );
                }
                Value::Slice(buffer)
            }
            TypeKind::UntrackedBuffer => {
                let buffer = self.new_buffer(name, Memory::Device, owner, false);
                self.synchronous_free.insert(buffer);
                let ambient = self.b.ambient();
                self.b.push(
                    OpKind::Produce {
                        buffer,
                        stream: ambient,
                        how: Production::Host,
                    },
                    sp,
                );
                Value::Slice(buffer)
            }
            TypeKind::PinnedHost => {
                let buffer = self.new_buffer(name, Memory::PinnedHost, owner, false);
                let ambient = self.b.ambient();
                self.b.push(
                    OpKind::Produce {
                        buffer,
                        stream: ambient,
                        how: Production::Host,
                    },
                    sp,
                );
                Value::Host(buffer)
            }
            TypeKind::Event => Value::Event(self.b.add_event(Event {
                name: format!("`{name}`"),
                expr: name.to_string(),
                created: None,
                internal: false,
            })),
        }
    }
}
