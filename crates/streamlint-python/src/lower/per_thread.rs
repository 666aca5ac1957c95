//! Code that several threads run at once, each on a stream of its own.
//!
//! A stream kept on a `threading.local()` object (`tls.stream`, `getattr(tls, device)`) is one
//! per thread: the function that uses it runs on several threads at the same time, each
//! queueing the same work on its own copy. A container those calls share (a list the enclosing
//! function made, an attribute of the object, a module global) then mixes the threads' values:
//! what one call takes out may be what another thread put in, written on that thread's stream,
//! which nothing orders with this thread's. A put made on the thread-local stream gives the
//! container an item made on another thread's copy of it; a take gets that item back. Each
//! thread runs the same code, so a host synchronization of its own stream between its put and
//! its take stands for every thread's: the other thread's copy is synchronized with it.

use super::*;

/// Methods that put an item into a list, deque or queue.
const PUTS: &[&str] = &["append", "appendleft", "insert", "put", "put_nowait"];

/// Methods that take one out.
const TAKES: &[&str] = &["pop", "popleft", "get", "get_nowait"];

/// What the body knows of threads that share it (see the module's documentation).
#[derive(Default)]
pub(super) struct PerThread {
    /// Objects bound to `threading.local()`, and names bound to what they hold.
    objects: FxHashSet<String>,
    /// Streams kept on them: each thread has its own.
    streams: FxHashSet<StreamId>,
    /// For each such stream, the stream that stands for another thread's copy of it.
    peers: FxHashMap<StreamId, StreamId>,
    /// Shared containers a value made on a thread-local stream was put in: what another
    /// thread's call left there.
    items: FxHashMap<String, Value>,
    /// The lists the enclosing function makes, which every call of a closure shares.
    captured_lists: Vec<String>,
}

impl PerThread {
    pub(super) fn new(role: &Role<'_>) -> Self {
        PerThread {
            objects: role.thread_locals.iter().cloned().collect(),
            captured_lists: role.captured_lists.clone(),
            ..PerThread::default()
        }
    }

    /// Does the expression read a thread-local object (`tls.stream`, `getattr(tls, key)`, either
    /// side of `a or b`, either branch of `a if c else b`)?
    fn reads_thread_local(&self, expr: &Expr) -> bool {
        if self.objects.is_empty() {
            return false;
        }
        match expr {
            Expr::Call { func, args, .. } if matches!(func.as_ref(), Expr::Name { id, .. } if id == "getattr") => {
                args.first().is_some_and(|a| self.reads_thread_local(a))
            }
            Expr::Operator {
                op: Operator::Or | Operator::And,
                operands,
                ..
            } => operands.iter().any(|o| self.reads_thread_local(o)),
            Expr::IfExp { body, orelse, .. } => {
                self.reads_thread_local(body) || self.reads_thread_local(orelse)
            }
            other => other.dotted().is_some_and(|d| self.holds_thread_local(&d)),
        }
    }

    /// Is `dotted` a thread-local object, or something kept on one?
    fn holds_thread_local(&self, dotted: &str) -> bool {
        self.objects.iter().any(|o| {
            dotted == o
                || dotted
                    .strip_prefix(o.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

impl<'a> Lowerer<'a> {
    /// `stream = getattr(tls, device)`: the names now hold a thread's own value.
    pub(super) fn note_thread_local_binding(
        &mut self,
        targets: &[Expr],
        value: &Expr,
        bound: &Value,
    ) {
        if !self.per_thread.reads_thread_local(value) {
            return;
        }
        if let Value::Stream(s) = bound {
            self.per_thread.streams.insert(*s);
        }
        for t in targets {
            if let Some(name) = t.dotted() {
                self.per_thread.objects.insert(name);
            }
        }
    }

    /// A stream known by `name` is a thread's own when the name holds one.
    pub(super) fn note_thread_local_stream(&mut self, name: &str, s: StreamId) {
        if self.per_thread.holds_thread_local(name) {
            self.per_thread.streams.insert(s);
        }
    }

    /// Is `container` shared by the threads that run this code? Not one kept on the
    /// thread-local object itself (`self._local.pending`), which each thread has its own of.
    fn shared_container(&self, container: &str) -> bool {
        if self.per_thread.holds_thread_local(container) {
            return false;
        }
        container.starts_with("self.")
            || self
                .per_thread
                .captured_lists
                .iter()
                .any(|c| c == container)
            || (!container.contains('.')
                && !self.env.contains_key(container)
                && self
                    .cx
                    .project
                    .module(self.cx.module)
                    .globals
                    .contains(container))
    }

    /// `pending.append((x, pts))` on the thread-local stream, in a container the threads share:
    /// another thread's call puts the same kind of value there, made on its copy of the stream.
    pub(super) fn put_in_shared(
        &mut self,
        receiver: &Expr,
        method: &str,
        vals: &[Value],
        span: Span,
    ) {
        if !PUTS.contains(&method) || !self.per_thread.streams.contains(&self.current) {
            return;
        }
        let (Some(container), Some(item)) = (receiver.dotted(), vals.last()) else {
            return;
        };
        if !self.shared_container(&container) {
            return;
        }
        if item.has_ordering() {
            // An event or stream put along with the value is the threads' own hand-off.
            self.per_thread.items.remove(&container);
            return;
        }
        let peer = self.peer_stream(self.current);
        let theirs = self.made_by_peer(item, peer, &container, span);
        let merged = match self.per_thread.items.get(&container) {
            Some(before) => before.merge(&theirs),
            None => theirs,
        };
        self.per_thread.items.insert(container, merged);
    }

    /// `older = pending.pop(0)` from a container values made on a thread-local stream were put
    /// in: the item may be another thread's.
    pub(super) fn take_from_shared(&self, receiver: &Expr, method: &str) -> Option<Value> {
        if !TAKES.contains(&method) || self.per_thread.items.is_empty() {
            return None;
        }
        self.per_thread.items.get(&receiver.dotted()?).cloned()
    }

    /// The host waits for `s` (and, for a thread's own stream, every thread does the same for
    /// its copy at this point of the code).
    pub(super) fn sync_stream(&mut self, s: StreamId, span: Span) {
        self.b.push(OpKind::SyncStream { stream: s }, span);
        if let Some(&peer) = self.per_thread.peers.get(&s) {
            self.b.push(OpKind::SyncStream { stream: peer }, span);
        }
    }

    /// The stream that stands for another thread's copy of `own`.
    fn peer_stream(&mut self, own: StreamId) -> StreamId {
        if let Some(&peer) = self.per_thread.peers.get(&own) {
            return peer;
        }
        let stream = self.b.body().stream(own);
        let peer = Stream {
            display: format!("another thread's {}", stream.display),
            expr: stream.expr.clone(),
            origin: StreamOrigin::OtherThread,
            span: None,
            home: None,
        };
        let peer = self.b.add_stream(peer);
        self.per_thread.peers.insert(own, peer);
        peer
    }

    /// The value another thread puts where this one puts `item`: its device tensors, written
    /// on `peer`. Host memory and values not known to be tensors are left as they are.
    fn made_by_peer(&mut self, item: &Value, peer: StreamId, container: &str, span: Span) -> Value {
        match item {
            Value::Group(items) => Value::Group(
                items
                    .iter()
                    .map(|v| self.made_by_peer(v, peer, container, span))
                    .collect(),
            ),
            Value::Tensors(_) | Value::Param(_)
                if item.buffers().iter().all(|&b| !self.on_host(b)) =>
            {
                let name = format!("{container}[…]");
                let buffer = self.buffer_at(span, "peer", &name, Memory::Device, Owner::Caller);
                self.b.push(
                    OpKind::Produce {
                        buffer,
                        stream: peer,
                        how: Production::Call,
                    },
                    span,
                );
                // What is known to be a tensor here is one in the other thread too.
                if matches!(item, Value::Tensors(_)) {
                    Value::Tensors(vec![buffer])
                } else {
                    self.unplaced.insert(buffer);
                    Value::Param(buffer)
                }
            }
            _ => Value::Unknown,
        }
    }
}
