//! The intermediate representation: entities (streams, buffers, events), the operations a
//! function performs on them in program order, and the control-flow graph that orders those
//! operations. Frontends build a [`Body`] per function through [`BodyBuilder`]; the analysis and
//! the rules only ever read it.

use std::fmt;

/// A byte range in the source file the body was lowered from.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: u32, end: u32) -> Self {
        Span { start, end }
    }
}

/// Replace `text` by spaces, its line breaks kept: code a frontend need not parse is blanked
/// this way, so that every span and line of the rest of the file stays where it was.
pub fn blank_keeping_lines(text: &mut [u8]) {
    let mut from = 0;
    while from < text.len() {
        let at = memchr::memchr2(b'\n', b'\r', &text[from..]).map_or(text.len(), |i| from + i);
        text[from..at].fill(b' ');
        from = at + 1;
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// An abstract stream of one body.
    StreamId
);
id_type!(
    /// An abstract buffer (tensor, slice, host buffer): one per allocation site or entry value.
    BufferId
);
id_type!(
    /// An abstract event.
    EventId
);
id_type!(
    /// One operation; also the identity of the device access it performs.
    OpId
);
id_type!(
    /// A basic block of the control-flow graph.
    BlockId
);

/// Where a stream value comes from; decides how sure the analysis can be about its identity.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StreamOrigin {
    /// The stream that is current when the function is entered (and the device's default stream).
    Ambient,
    /// Created by a stream factory in this body and bound to a name.
    Created,
    /// Read from an object attribute (`self.stream`) or a per-device cache.
    Attribute,
    /// Received as a function parameter.
    Parameter,
    /// A stream expression that is never bound to a name.
    Temporary,
    /// Created when the code is loaded (at import, as a default argument): one stream shared
    /// by every caller.
    Global,
    /// Made on first use and kept in a module global by a getter (`global _alt; if _alt is
    /// None: _alt = torch.cuda.Stream()`): like [`Self::Global`], one stream for every later
    /// call, but made when the program first asks for it.
    Cached,
    /// Another thread's copy of a stream each thread keeps for itself (a stream on a
    /// `threading.local()`): the same code runs on it in every thread, and nothing orders one
    /// thread's copy with another's. Values other threads put in a container the threads share
    /// were made on it.
    OtherThread,
    /// The process group's own stream, on which an asynchronous collective (`async_op=True`,
    /// `isend`, `irecv`) reads and writes its tensors after waiting for the stream that launched
    /// it: only the work handle's `wait()` orders later work after it. `expr` is the handle's
    /// name, empty when the call's result is not kept.
    Collective,
    /// Any other stream-valued expression.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Stream {
    /// How a message refers to the stream, e.g. "`self.copy_stream`" or "the current stream".
    pub display: String,
    /// Source text that denotes the stream in a fix suggestion.
    pub expr: String,
    pub origin: StreamOrigin,
    pub span: Option<Span>,
    /// For a stream kept at module level ([`StreamOrigin::Global`], [`StreamOrigin::Cached`]):
    /// the qualified name of the global that holds it (`pkg.streams._side`), the same in every
    /// file that uses it, however each spells it.
    pub home: Option<String>,
}

/// Where a buffer's memory lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Memory {
    Device,
    PinnedHost,
    PageableHost,
}

/// Who is responsible for freeing a buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Allocated in this body: freed at scope end unless it escapes.
    Local,
    /// Received from the caller: the caller frees it.
    Caller,
    /// Held by an object attribute that outlives the call.
    Attribute,
    /// Allocated while a CUDA graph was captured: from the graph's private pool, freed with
    /// the graph, in no stream's pool.
    Graph,
}

#[derive(Clone, Debug)]
pub struct Buffer {
    /// The name the source uses for the value, e.g. `x` or `self.next_input`, or a word for
    /// it where the code has none (`result`).
    pub name: String,
    /// `name` is how the code itself refers to the value, so a fix may write it.
    pub spelled: bool,
    pub memory: Memory,
    pub owner: Owner,
}

/// Is `text` a plain reference a fix can write: a name or a chain of attributes (`self.rows`)?
pub fn is_dotted_name(text: &str) -> bool {
    !text.is_empty()
        && text.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}

#[derive(Clone, Debug)]
pub struct Event {
    pub name: String,
    pub expr: String,
    /// Where the body creates it; `None` for an event it receives (parameter, attribute).
    pub created: Option<Span>,
    /// Bookkeeping of a runtime (cudarc's per-slice events), not an event the code names:
    /// waiting on it before any record is normal, not a mistake.
    pub internal: bool,
}

/// How a buffer was produced.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Production {
    /// A kernel or operator writing a fresh result.
    Compute,
    /// A factory asked for memory on the device (`torch.empty(.., device="cuda")`).
    Allocate,
    /// Memory taken like a tensor whose place is not known (`torch.empty_like(x)`,
    /// `x.new_empty(n)`): an allocation with no kernel where that tensor is on the device, and
    /// nothing a stream does where it is on the host.
    AllocateLike,
    /// Returned by a call the analysis does not see into: its work ran on the stream, but where
    /// (and whether) it allocated is not known.
    Call,
    /// Returned by a submodule: computed on the stream.
    Module,
    /// A copy from host memory into a fresh device buffer.
    HostToDevice { non_blocking: bool },
    /// A copy from device memory into a fresh host buffer.
    DeviceToHost { non_blocking: bool },
    /// A value that exists when the body is entered (parameter, attribute).
    Entry,
    /// Host memory filled by the host: no stream work is involved.
    Host,
    /// Memory of a CUDA graph's pool, taken when the graph is captured: no stream work is
    /// involved until the graph is replayed, whose work writes it.
    GraphPool,
}

impl Production {
    /// Fresh memory and no kernel: the block's previous owner is the only hazard.
    pub fn allocates(self) -> bool {
        matches!(self, Production::Allocate | Production::AllocateLike)
    }
}

/// Why a buffer's memory goes back to the allocator.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReleaseCause {
    Delete,
    Rebind,
    DataAssign,
    StorageResize,
    Drop,
    /// The owner went out of scope (a Rust drop at a closing brace): no line of its own.
    ScopeDrop,
    /// Freed as a call lowered in place returns: the callee's locals, and what the caller made
    /// only to pass to it (`helper(x.clone())`).
    CallReturn,
    /// Freed in stream order on this stream (`drop_async(&s)`, `cuMemFreeAsync`).
    FreeOn(StreamId),
}

/// Where a value goes when it leaves the body's control.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EscapeKind {
    /// Returned or yielded: the caller consumes it on the ambient stream.
    Caller,
    /// Stored on an object that outlives the call.
    Attribute,
    /// Put into a container.
    Container,
    /// Passed to a callee the frontend does not know.
    UnknownCallee,
    /// The body ends with the value held by an object that outlives it (an attribute it wrote):
    /// whoever uses it next does so on their current stream.
    LeftOnObject,
    /// The body ends with the value stored on an object the caller passed in (`batch.x = t`),
    /// written on a stream only this body can name: the caller uses it on its current stream.
    LeftOnArgument,
    /// Stored in one of the object's containers that another method of the class takes items
    /// out of and returns (`self.stash[key] = t` here, `return self.stash.pop(key)` there):
    /// whoever calls that method uses it on their current stream. The class orders that use by
    /// its own protocol (a join in some method); what is judged here is where the memory goes
    /// back when that user drops it.
    HandedOutByObject,
    /// Handed to code on another thread (a queue's `put`, a future's `set_result`), which uses
    /// it on its current stream: the default stream unless that thread sets one, which is the
    /// ambient stream here.
    OtherThread,
}

impl EscapeKind {
    /// Does the value reach a user who reads it on the ambient stream and drops it there: one
    /// outside this body ([`Self::consumed_on_ambient`]), or the caller of the object's method
    /// that hands it out later? Its memory's way back to the pool is judged where it leaves.
    pub fn reaches_a_user_on_ambient(self) -> bool {
        self.consumed_on_ambient() || self == EscapeKind::HandedOutByObject
    }

    /// Is the value next used on the ambient stream by code outside this body (the caller, or
    /// another thread), which needs it ordered and recorded for that stream?
    pub fn consumed_on_ambient(self) -> bool {
        matches!(self, EscapeKind::Caller | EscapeKind::OtherThread)
    }

    /// How the value leaves, for a message to continue with "uses it on ..."
    /// (`returned to the caller, who`).
    pub fn hand_off(self) -> &'static str {
        match self {
            EscapeKind::OtherThread => "handed to another thread, which",
            EscapeKind::HandedOutByObject => {
                "kept in the object for another method to hand out, whose caller"
            }
            _ => "returned to the caller, who",
        }
    }

    /// Who holds the value once it has left (`the caller`).
    pub fn holder(self) -> &'static str {
        match self {
            EscapeKind::OtherThread => "that thread",
            EscapeKind::HandedOutByObject => "that caller",
            _ => "the caller",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// A fresh value of `buffer` is written on `stream`.
    Produce {
        buffer: BufferId,
        stream: StreamId,
        how: Production,
    },
    /// Device work on `stream` reads `buffer`.
    Read { buffer: BufferId, stream: StreamId },
    /// Device work on `stream` writes `buffer` in place.
    Write { buffer: BufferId, stream: StreamId },
    /// Work enqueued on `stream` through a raw pointer to `buffer` (outside any tracking).
    Raw {
        buffer: BufferId,
        stream: StreamId,
        write: bool,
    },
    /// A guard that orders raw work on `buffer` with `stream` is taken (the pointer is handed
    /// out); the raw work must be enqueued while it is held.
    GuardTaken { buffer: BufferId, stream: StreamId },
    /// The guard is released (dropped, discarded).
    GuardReleased { buffer: BufferId },
    /// The last handle of a stream goes away (with consequences for automatic tracking).
    EndStream {
        stream: StreamId,
        at_scope_end: bool,
    },
    /// The host reads a host buffer.
    HostRead { buffer: BufferId },
    /// The host writes a host buffer.
    HostWrite { buffer: BufferId },
    /// The code tests where `buffer` lives (`t.is_cuda`, `t.device == d`): past the test it
    /// knows whether the value is device memory, and may act on that.
    DeviceTest { buffer: BufferId },
    /// The allocator is told that `stream` uses `buffer` (PyTorch `record_stream`).
    RecordStream { buffer: BufferId, stream: StreamId },
    /// `waiter` waits for all work enqueued on `waitee` so far.
    WaitStream { waiter: StreamId, waitee: StreamId },
    /// `event` captures the work enqueued on `stream` so far.
    RecordEvent { event: EventId, stream: StreamId },
    /// A fresh, never recorded event is made (an event factory runs again in a loop).
    NewEvent { event: EventId },
    /// At entry: `event` was recorded on `stream` on some paths only (another method of the
    /// object records it under a condition), so a wait on it may order nothing.
    RecordedOnSomePaths { event: EventId, stream: StreamId },
    /// `stream` waits for the work captured by `event`.
    WaitEvent { event: EventId, stream: StreamId },
    /// The host waits for `stream`.
    SyncStream { stream: StreamId },
    /// The host waits for `event`.
    SyncEvent { event: EventId },
    /// The host waits for every stream of the device.
    SyncDevice,
    /// The memory of `buffer` is returned to the allocator.
    Release {
        buffer: BufferId,
        cause: ReleaseCause,
    },
    /// The value leaves the body's control.
    Escape { buffer: BufferId, kind: EscapeKind },
    /// An event leaves the body (returned or stored): whoever receives it can order later work
    /// after what it captured.
    HandOffEvent { event: EventId },
    /// A name still holds the previous instance of `from` while the same site makes a new one:
    /// that instance lives on as `into`. Two ops in a row move it, one for its writes and one
    /// for its reads, each giving them its own identity (see `State::carry`).
    Carry {
        from: BufferId,
        into: BufferId,
        part: CarriedAccesses,
    },
    /// The current stream is replaced until further notice (`set_stream`). `restored`: the code
    /// puts the previous stream back on every path, exceptions included.
    SetStream { stream: StreamId, restored: bool },
    /// The body ends: every local buffer that did not escape is released.
    ScopeEnd,
    /// On this path the value is not there (`if t is None:`): no work of it is pending and
    /// nothing of it needs keeping alive, so its state on the other paths decides.
    Absent { buffer: BufferId },
}

impl OpKind {
    /// Does the op order streams or keep memory alive (a wait, a record, a host sync)?
    pub fn orders(&self) -> bool {
        matches!(
            self,
            OpKind::RecordStream { .. }
                | OpKind::WaitStream { .. }
                | OpKind::RecordEvent { .. }
                | OpKind::WaitEvent { .. }
                | OpKind::SyncStream { .. }
                | OpKind::SyncEvent { .. }
                | OpKind::SyncDevice
        )
    }

    /// The buffer the op is about, if it is about one.
    pub fn buffer(&self) -> Option<BufferId> {
        match *self {
            OpKind::Produce { buffer, .. }
            | OpKind::Read { buffer, .. }
            | OpKind::Write { buffer, .. }
            | OpKind::Raw { buffer, .. }
            | OpKind::GuardTaken { buffer, .. }
            | OpKind::GuardReleased { buffer }
            | OpKind::HostRead { buffer }
            | OpKind::HostWrite { buffer }
            | OpKind::DeviceTest { buffer }
            | OpKind::RecordStream { buffer, .. }
            | OpKind::Release { buffer, .. }
            | OpKind::Escape { buffer, .. } => Some(buffer),
            _ => None,
        }
    }

    /// The stream this op queues device work on, if it does (a value that existed on entry,
    /// or host-made memory, took no work here).
    pub fn work_stream(&self) -> Option<StreamId> {
        match *self {
            OpKind::Produce { stream, how, .. }
                if !matches!(
                    how,
                    Production::Host | Production::Entry | Production::GraphPool
                ) =>
            {
                Some(stream)
            }
            OpKind::Read { stream, .. }
            | OpKind::Write { stream, .. }
            | OpKind::Raw { stream, .. } => Some(stream),
            _ => None,
        }
    }
}

/// Which accesses of a carried instance a [`OpKind::Carry`] moves.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CarriedAccesses {
    Writes,
    Reads,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub kind: OpKind,
    pub span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct Block {
    pub ops: Vec<OpId>,
    pub succs: Vec<BlockId>,
}

/// How a frontend's language spells the calls rules suggest, so that rules can propose fixes
/// without knowing the language. Each function gets the source expressions of its operands.
#[derive(Clone, Debug)]
pub struct Spelling {
    /// `(buffer, stream)` → the call telling the allocator about a use; `None` where the
    /// language has no such call (the allocator is told nothing).
    pub record_stream: Option<fn(&str, &str) -> String>,
    /// `(waiter, waitee)` → the call making `waiter` wait for the work queued on `waitee`.
    pub wait_stream: fn(&str, &str) -> String,
    pub line_comment: &'static str,
    /// What turns a spelled call into a statement on a line of its own (`;` in Rust, nothing
    /// in Python).
    pub statement_end: &'static str,
    /// The spelled wait returns an error to propagate (`?`), which the enclosing function may
    /// not allow: fixes inserting it need review.
    pub wait_can_fail: bool,
    /// `stream` → the header of a block with `stream` current (`with torch.cuda.stream(s):`),
    /// where the language has one.
    pub stream_block: Option<fn(&str) -> String>,
}

/// Why a body runs in a process that must not use the device (a data-loading worker).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceForbidden {
    /// The code and where it runs, for a message to continue with ("`collate`, the
    /// `collate_fn` of a DataLoader with worker processes").
    pub why: String,
    /// The code runs there by the contract, not by what the code shows (a loader made where the
    /// analysis does not see its `num_workers`).
    pub assumed: bool,
}

/// One analysed unit: a function or method, lowered to a CFG of stream operations.
#[derive(Clone, Debug)]
pub struct Body {
    pub name: String,
    pub span: Span,
    pub spelling: Spelling,
    pub streams: Vec<Stream>,
    pub buffers: Vec<Buffer>,
    pub events: Vec<Event>,
    pub ops: Vec<Op>,
    pub blocks: Vec<Block>,
    pub entry: BlockId,
    /// The stream current at entry; returned values are consumed on it.
    pub ambient: StreamId,
    /// Why the body runs in a process that must not use the device (a data-loading worker),
    /// if it does.
    pub device_forbidden: Option<DeviceForbidden>,
    /// The caller consumes returned values on the ambient stream (PyTorch's current stream).
    /// Not so where the language has no current stream (cudarc, cust): the caller picks one.
    pub returns_to_ambient: bool,
    /// The caller reads returned host memory on the host at once: the function is a conversion
    /// to host data (a class's `cpu()`), which for a tensor finishes its copy before returning.
    pub returns_to_host: bool,
    pub rewrites: Rewrites,
    /// Lowering stopped at the file's deadline: the body holds only part of the function and is
    /// not judged (a missing `record_stream` might be in the part not lowered).
    pub cut_short: bool,
    /// Calls whose callee was lowered in place, in the caller's context (its current stream,
    /// its arguments): every op and entity the callee made carries the call's span. A hazard
    /// all of whose places are one such call lies inside the callee, which is judged on its own.
    /// Each call's span with the callee, as a message names it (`pkg.streams.switch_to`).
    pub inlined_calls: Vec<(Span, String)>,
    /// The caller's tensors the function received as arguments (those the frontend knows are
    /// tensors). By the contract at function boundaries they go back to the caller when it
    /// returns, and the caller then uses, overwrites and frees them on the ambient stream.
    pub arguments: Vec<BufferId>,
    /// Tensors the function received from code the analysis does not see (what `obj.get()` or
    /// `next(it)` returned): by the contract at every boundary they arrive ready on the stream
    /// current at the call and, like arguments, go back to that code when the function returns.
    pub received: Vec<BufferId>,
    /// Orderings (waits, records, host syncs) that run only where a test holds, with the case
    /// where they do not run in words (`` `sync` is false ``): a finding on that path says so.
    pub conditional: Vec<(OpId, String)>,
    /// No call in the checked files reaches the function: nothing shows which streams its
    /// callers pass or how they ordered them, so its stream parameters are judged by the
    /// contract at function boundaries (an argument is ready on the caller's current stream and
    /// on no other) rather than given the benefit of a caller's ordering.
    pub uncalled: bool,
    /// Streams the function's object made for itself that no code of the checked files makes
    /// wait for other work (`self.gather = torch.cuda.Stream()`, never waited on): no caller
    /// can have ordered them after its work, so the contract at function boundaries judges the
    /// arguments read there, as for a stream the function creates.
    pub unordered_streams: Vec<StreamId>,
    /// Streams kept in module globals ([`Stream::home`]) that the body stores in an object or a
    /// container, or hands to code that is not followed: there they go by other names, whose
    /// blocks of work cannot be told to be on them.
    pub aliased_streams: Vec<StreamId>,
    /// Waits the analysis assumes rather than sees: on entry to a context manager it does not
    /// know, handed a stream, the stream is taken to wait for the current one. Enough not to
    /// report a race on the helper's word, not to prove a stream discipline with.
    pub assumed_waits: Vec<OpId>,
    /// A top-level function the project index may lower in place (a small one at every call, a
    /// larger one with stream code where a call passes it a stream): at those calls it is
    /// lowered in the caller's context, so what a caller does around it is judged there. Its
    /// own findings about that hand-off only say what a caller must do; the run keeps them
    /// where some call of it is not lowered in place.
    pub judged_at_calls: bool,
    /// The qualified name of the module the body's function is written in, where the frontend
    /// has modules: a module global of another module is not a name there.
    pub module: String,
    /// Names bound to tensors while the body was lowered, in program order, where the frontend
    /// tracks them (see [`Body::name_at`]).
    pub bindings: Vec<NameBinding>,
}

/// `name` holds `tensors` from the op `from` on (until a later binding of the name): code
/// inserted there can call them by it. No tensors: the name holds none any more.
#[derive(Clone, Debug)]
pub struct NameBinding {
    pub from: OpId,
    pub name: Box<str>,
    pub tensors: Vec<BufferId>,
}

impl Body {
    /// The ops made from `start` on, in the order made (a CUDA graph's capture, say).
    pub fn ops_from(&self, start: OpId) -> &[Op] {
        &self.ops[start.index()..]
    }

    /// The name code inserted before `at` can use for `buffer`: the name bound to it last
    /// before `at` and not rebound since (after `batch = self.next; self.preload()`, `batch`,
    /// not the attribute that now holds the next batch). `None` when no name holds it there.
    /// A buffer the frontend bound to no name is called by its own name, where the code uses it.
    pub fn name_at(&self, buffer: BufferId, at: OpId) -> Option<&str> {
        let bound = self.bindings.iter().any(|n| n.tensors.contains(&buffer));
        if !bound {
            let b = self.buffer(buffer);
            return b.spelled.then_some(b.name.as_str());
        }
        let before: &[NameBinding] = {
            let end = self.bindings.partition_point(|n| n.from <= at);
            &self.bindings[..end]
        };
        before.iter().enumerate().rev().find_map(|(i, n)| {
            let holds = n.tensors.contains(&buffer)
                && !before[i + 1..].iter().any(|later| later.name == n.name);
            holds.then_some(&*n.name)
        })
    }

    /// The callee lowered in place at the call `span`, if one was.
    pub fn inlined_callee(&self, span: Span) -> Option<&str> {
        self.inlined_calls
            .iter()
            .find(|(s, _)| *s == span)
            .map(|(_, callee)| callee.as_str())
    }

    /// Do all these places lie inside one inlined call (see [`Body::inlined_calls`])?
    pub fn inside_one_call(&self, mut spans: impl Iterator<Item = Span>) -> bool {
        let Some(first) = spans.next() else {
            return false;
        };
        self.inlined_callee(first).is_some() && spans.all(|s| s == first)
    }
}

/// Places where the syntax allows a mechanical rewrite with stream scoping, as the frontend saw
/// them: fixes are built from these, since rules never see syntax.
#[derive(Clone, Debug, Default)]
pub struct Rewrites {
    /// A wait inside a stream block on the block's own stream for the stream current outside
    /// (`s.wait_stream(current_stream())` in `with stream(s):`): (the wait statement, the
    /// block's header). Placed before the header, it orders what it was written for.
    pub hoistable_waits: Vec<(Span, Span)>,
    /// `set_stream(s)` that a later statement of the same block undoes by setting back the stream
    /// current before: (the set, the restore). The statements between can become a block.
    pub scoped_set_streams: Vec<(Span, Span)>,
    /// Blocks that make a stream current (`with torch.cuda.stream(s):`), where the language has
    /// them: code inserted in or before one can tell which stream `current_stream()` is there.
    pub stream_blocks: Vec<StreamBlock>,
}

/// A block that makes `stream` current over the ops `ops` (start inclusive, end exclusive).
#[derive(Clone, Debug)]
pub struct StreamBlock {
    /// The expression that makes it current (`torch.cuda.stream(s)`), on the block's first line.
    pub header: Span,
    pub stream: StreamId,
    /// The stream current outside the block, at its header.
    pub outer: StreamId,
    pub ops: (OpId, OpId),
}

impl Body {
    /// The stream current where `op` runs, as far as stream blocks tell (`None` where a
    /// statement sets the current stream, which blocks do not show).
    pub fn current_at(&self, op: OpId) -> Option<StreamId> {
        if self
            .ops
            .iter()
            .any(|o| matches!(o.kind, OpKind::SetStream { .. }))
        {
            return None;
        }
        let inside = |b: &&StreamBlock| b.ops.0 <= op && op < b.ops.1;
        let innermost = self
            .rewrites
            .stream_blocks
            .iter()
            .filter(inside)
            .max_by_key(|b| b.ops.0);
        Some(innermost.map_or(self.ambient, |b| b.stream))
    }

    /// The outermost block around `op` that makes `stream` current: code before its header
    /// runs before `stream` is current there.
    pub fn block_making_current(&self, op: OpId, stream: StreamId) -> Option<&StreamBlock> {
        self.rewrites
            .stream_blocks
            .iter()
            .filter(|b| b.stream == stream && b.ops.0 <= op && op < b.ops.1)
            .min_by_key(|b| b.ops.0)
    }
}

impl Body {
    /// How many streams the body uses: every stream its code names, and the ambient one where
    /// device work runs on it (values that existed on entry were the caller's work).
    pub fn streams_in_use(&self) -> usize {
        let ambient_works = self.ops.iter().any(|op| match op.kind {
            OpKind::GuardTaken { stream, .. } => stream == self.ambient,
            ref kind => kind.work_stream() == Some(self.ambient),
        });
        let named = self
            .streams
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.ambient.index())
            .count();
        named + usize::from(ambient_works)
    }

    pub fn stream(&self, id: StreamId) -> &Stream {
        &self.streams[id.index()]
    }
    pub fn buffer(&self, id: BufferId) -> &Buffer {
        &self.buffers[id.index()]
    }
    pub fn event(&self, id: EventId) -> &Event {
        &self.events[id.index()]
    }
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.index()]
    }
    /// Every op in storage order (not control-flow order).
    /// Does any op of the body satisfy `pred`?
    pub fn has_op(&self, pred: impl Fn(&OpKind) -> bool) -> bool {
        self.ops.iter().any(|op| pred(&op.kind))
    }

    /// Does the body use a stream besides the ambient one?
    pub fn has_other_streams(&self) -> bool {
        self.streams.len() > 1
    }

    pub fn ops_iter(&self) -> impl Iterator<Item = (OpId, &Op)> {
        self.ops
            .iter()
            .enumerate()
            .map(|(i, op)| (OpId(i as u32), op))
    }
    /// Predecessor lists, computed on demand.
    pub fn predecessors(&self) -> Vec<Vec<BlockId>> {
        let mut preds = vec![Vec::new(); self.blocks.len()];
        for (i, b) in self.blocks.iter().enumerate() {
            for s in &b.succs {
                preds[s.index()].push(BlockId(i as u32));
            }
        }
        preds
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream#{}", self.0)
    }
}

/// A saved control-flow graph; see [`BodyBuilder::checkpoint`].
pub struct Checkpoint {
    ops: usize,
    bindings: usize,
    blocks: Vec<Block>,
    current: BlockId,
}

/// Builds a [`Body`]: entities are interned on first use, ops are appended to the current block.
pub struct BodyBuilder {
    body: Body,
    current: BlockId,
    /// The outermost call being inlined: what is built meanwhile carries its span.
    inlined_at: Option<Span>,
}

impl BodyBuilder {
    /// A new body whose ambient stream is described by `ambient`.
    pub fn new(name: impl Into<String>, span: Span, spelling: Spelling, ambient: Stream) -> Self {
        let body = Body {
            name: name.into(),
            span,
            spelling,
            streams: vec![ambient],
            buffers: Vec::new(),
            events: Vec::new(),
            ops: Vec::new(),
            blocks: vec![Block::default()],
            entry: BlockId(0),
            ambient: StreamId(0),
            device_forbidden: None,
            returns_to_ambient: true,
            returns_to_host: false,
            rewrites: Rewrites::default(),
            cut_short: false,
            inlined_calls: Vec::new(),
            arguments: Vec::new(),
            received: Vec::new(),
            conditional: Vec::new(),
            uncalled: false,
            unordered_streams: Vec::new(),
            aliased_streams: Vec::new(),
            assumed_waits: Vec::new(),
            judged_at_calls: false,
            module: String::new(),
            bindings: Vec::new(),
        };
        BodyBuilder {
            body,
            current: BlockId(0),
            inlined_at: None,
        }
    }

    pub fn ambient(&self) -> StreamId {
        self.body.ambient
    }

    /// `buffer` is a tensor the caller passed in (see [`Body::arguments`]).
    pub fn argument(&mut self, buffer: BufferId) {
        self.body.arguments.push(buffer);
    }

    /// `buffer` is a tensor code not seen returned (see [`Body::received`]).
    pub fn received(&mut self, buffer: BufferId) {
        self.body.received.push(buffer);
    }

    /// The orderings among the ops from `first` on run only where a test holds; `skipped` says
    /// when they do not (see [`Body::conditional`]). Those a branch inside already named keep
    /// its words.
    pub fn conditional_from(&mut self, first: usize, skipped: impl FnOnce() -> String) {
        // Branches inside this one were noted after it began: theirs are the last entries.
        let inner = self
            .body
            .conditional
            .iter()
            .rev()
            .take_while(|(op, _)| op.0 as usize >= first)
            .count();
        let known_from = self.body.conditional.len() - inner;
        let new: Vec<OpId> = (first..self.body.ops.len())
            .map(|i| OpId(i as u32))
            .filter(|id| self.body.ops[id.0 as usize].kind.orders())
            .filter(|id| {
                !self.body.conditional[known_from..]
                    .iter()
                    .any(|(op, _)| op == id)
            })
            .collect();
        if new.is_empty() {
            return;
        }
        let skipped = skipped();
        self.body
            .conditional
            .extend(new.into_iter().map(|id| (id, skipped.clone())));
    }
    /// No call in the checked files reaches the function (see [`Body::uncalled`]).
    pub fn uncalled(&mut self) {
        self.body.uncalled = true;
    }

    /// `stream` is one of [`Body::unordered_streams`].
    pub fn unordered_on_entry(&mut self, stream: StreamId) {
        self.body.unordered_streams.push(stream);
    }

    /// See [`Body::module`].
    pub fn in_module(&mut self, module: &str) {
        self.body.module = module.to_string();
    }

    /// See [`Body::judged_at_calls`].
    pub fn judged_at_calls(&mut self) {
        self.body.judged_at_calls = true;
    }
    /// Where the syntax allows rewrites (see [`Rewrites`]).
    pub fn rewrites_mut(&mut self) -> &mut Rewrites {
        &mut self.body.rewrites
    }

    pub fn body(&self) -> &Body {
        &self.body
    }
    /// The id the next op will get.
    pub fn next_op(&self) -> OpId {
        OpId(self.body.ops.len() as u32)
    }
    /// `name` holds `tensors` from the next op on (see [`Body::name_at`]).
    pub fn bind_name(&mut self, name: &str, tensors: Vec<BufferId>) {
        let from = OpId(self.body.ops.len() as u32);
        self.body.bindings.push(NameBinding {
            from,
            name: name.into(),
            tensors,
        });
    }
    /// Lower a callee in place at the call `span` (see [`Body::inlined_calls`]), until
    /// [`Self::end_inline`] with what this returns. Nested calls keep the outermost call's span:
    /// that is where the caller's code is.
    pub fn begin_inline(&mut self, span: Span, callee: &str) -> Option<Span> {
        let outer = self.inlined_at;
        if outer.is_none() {
            self.inlined_at = Some(span);
            if self.body.inlined_callee(span).is_none() {
                self.body.inlined_calls.push((span, callee.to_string()));
            }
        }
        outer
    }
    /// Work done by `callee` reaches the body at `span` (an unpack hook's argument, made by
    /// its pack hook): places there are named as inside it (see [`Body::inlined_calls`]).
    pub fn note_callee_at(&mut self, span: Span, callee: &str) {
        if self.body.inlined_callee(span).is_none() {
            self.body.inlined_calls.push((span, callee.to_string()));
        }
    }
    /// The call whose callee is being lowered in place, if one is.
    pub fn inlined_at(&self) -> Option<Span> {
        self.inlined_at
    }
    pub fn end_inline(&mut self, outer: Option<Span>) {
        self.inlined_at = outer;
    }
    fn place(&self, span: Span) -> Span {
        self.inlined_at.unwrap_or(span)
    }

    pub fn add_stream(&mut self, mut stream: Stream) -> StreamId {
        stream.span = stream.span.map(|s| self.place(s));
        self.body.streams.push(stream);
        StreamId(self.body.streams.len() as u32 - 1)
    }
    pub fn add_buffer(&mut self, buffer: Buffer) -> BufferId {
        self.body.buffers.push(buffer);
        BufferId(self.body.buffers.len() as u32 - 1)
    }
    pub fn add_event(&mut self, mut event: Event) -> EventId {
        event.created = event.created.map(|s| self.place(s));
        self.body.events.push(event);
        EventId(self.body.events.len() as u32 - 1)
    }
    pub fn buffer_mut(&mut self, id: BufferId) -> &mut Buffer {
        &mut self.body.buffers[id.index()]
    }
    pub fn new_block(&mut self) -> BlockId {
        self.body.blocks.push(Block::default());
        BlockId(self.body.blocks.len() as u32 - 1)
    }
    pub fn current(&self) -> BlockId {
        self.current
    }
    /// Continue appending ops to `block`.
    pub fn switch_to(&mut self, block: BlockId) {
        self.current = block;
    }
    pub fn edge(&mut self, from: BlockId, to: BlockId) {
        let succs = &mut self.body.blocks[from.index()].succs;
        if !succs.contains(&to) {
            succs.push(to);
        }
    }
    /// Append an op to the current block.
    pub fn push(&mut self, kind: OpKind, span: Span) -> OpId {
        let id = OpId(self.body.ops.len() as u32);
        let span = self.place(span);
        self.body.ops.push(Op { kind, span });
        self.body.blocks[self.current.index()].ops.push(id);
        id
    }
    /// Mark the body as running where the device must not be used, and why.
    pub fn forbid_device(&mut self, reason: DeviceForbidden) {
        self.body.device_forbidden = Some(reason);
    }

    /// The caller may use returned values on any stream: see [`Body::returns_to_ambient`].
    pub fn caller_picks_stream(&mut self) {
        self.body.returns_to_ambient = false;
    }

    /// The caller reads returned host memory at once: see [`Body::returns_to_host`].
    pub fn caller_reads_on_host(&mut self) {
        self.body.returns_to_host = true;
    }
    pub fn stream_mut(&mut self, id: StreamId) -> &mut Stream {
        &mut self.body.streams[id.index()]
    }

    /// `op` is a wait the analysis assumes (see [`Body::assumed_waits`]).
    pub fn assume_wait(&mut self, op: OpId) {
        self.body.assumed_waits.push(op);
    }

    /// The stream goes where other names reach it (see [`Body::aliased_streams`]).
    pub fn alias_stream(&mut self, id: StreamId) {
        if self.body.streams[id.index()].home.is_some() && !self.body.aliased_streams.contains(&id)
        {
            self.body.aliased_streams.push(id);
        }
    }
    /// Add ops at the start of the entry block: values that exist before the body runs.
    pub fn prepend_to_entry(&mut self, ops: Vec<(OpKind, Span)>) {
        let mut ids = Vec::with_capacity(ops.len());
        for (kind, span) in ops {
            ids.push(OpId(self.body.ops.len() as u32));
            self.body.ops.push(Op { kind, span });
        }
        let entry = &mut self.body.blocks[self.body.entry.index()].ops;
        ids.append(entry);
        *entry = ids;
    }
    /// Remember the control-flow graph as it is, to undo a trial lowering (entities stay).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            ops: self.body.ops.len(),
            bindings: self.body.bindings.len(),
            blocks: self.body.blocks.clone(),
            current: self.current,
        }
    }
    pub fn rollback(&mut self, cp: Checkpoint) {
        self.body.ops.truncate(cp.ops);
        self.body
            .conditional
            .retain(|(op, _)| (op.0 as usize) < cp.ops);
        self.body.bindings.truncate(cp.bindings);
        self.body.blocks = cp.blocks;
        self.current = cp.current;
    }
    /// The deadline passed before the function was lowered to its end.
    pub fn cut_short(&mut self) {
        self.body.cut_short = true;
    }

    pub fn finish(self) -> Body {
        self.body
    }
}
