//! The cudarc and cust APIs: method and function calls on streams, slices, events and host
//! buffers.

use super::*;

impl Lowerer<'_> {
    pub(super) fn stream_arg(
        &mut self,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>,
        i: usize,
    ) -> Option<StreamId> {
        match args.iter().nth(i).map(|a| self.expr(a)) {
            Some(Value::Stream(s)) => Some(s),
            _ => None,
        }
    }

    pub(super) fn buffer_arg(&mut self, arg: Option<&syn::Expr>) -> Option<BufferId> {
        match arg.map(|a| self.expr(a)) {
            Some(Value::Slice(b) | Value::Host(b)) => Some(b),
            _ => None,
        }
    }

    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall, sp: Span) -> Value {
        let method = m.method.to_string();
        // `self.upload(&s, &mut w)`: another method of the `impl`, through its summary (its
        // parameters by position, `self` first).
        let on_self = matches!(m.receiver.as_ref(), syn::Expr::Path(p) if p.path.is_ident("self"));
        let summary = self.impl_of.filter(|_| on_self).and_then(|ty| {
            self.summaries
                .get(&crate::crate_index::method_key(ty, &method))
        });
        if let Some(summary) = summary {
            let vals: Vec<Value> = std::iter::once(Value::Unknown)
                .chain(m.args.iter().map(|a| self.expr(a)))
                .collect();
            return self.call_summarized(&summary.clone(), &vals, sp);
        }
        let recv = self.expr(&m.receiver);
        let receiver_name = Self::local_name(&m.receiver);
        let first = m.args.first();
        match (&recv, method.as_str()) {
            (_, f) if OWNED_STREAM_FACTORIES.contains(&f) => {
                // The first owned stream switches tracking on; cudarc synchronizes the context
                // then, so work enqueued before is complete.
                if self.tracking_enabled && self.owned_alive.is_empty() && !self.owned_elsewhere {
                    self.b.push(OpKind::SyncDevice, sp);
                }
                let s = self.new_stream("a new stream", StreamOrigin::Temporary, sp);
                self.owned_alive.push(s);
                Value::Stream(s)
            }
            (Value::Stream(parent), "fork") => {
                let parent = *parent;
                let s = self.new_stream("a forked stream", StreamOrigin::Temporary, sp);
                self.owned_alive.push(s);
                self.b.push(
                    OpKind::WaitStream {
                        waiter: s,
                        waitee: parent,
                    },
                    sp,
                );
                Value::Stream(s)
            }
            // The per-thread default stream is a blocking stream: it and the legacy default stream
            // (`default_stream()`, where stream-less driver calls run) wait for each other's
            // earlier work, so for ordering they are one stream.
            (Value::Context | Value::Unknown, "default_stream") => Value::Stream(self.b.ambient()),
            (Value::Context | Value::Unknown, "per_thread_stream") => {
                let spelled = self.spelled(m);
                self.name_default_stream_as(spelled.clone(), Some(format!("`{spelled}`")), None);
                Value::Stream(self.b.ambient())
            }
            (Value::Context | Value::Unknown, f)
                if BORROWED_STREAMS.contains(&f) && m.args.is_empty() =>
            {
                // One stream however it is reached (candle: the device's, each slice's): code
                // that borrows streams this way runs everything on the one it was given.
                let key = "borrowed stream";
                let s = self.named_stream(key, StreamOrigin::Unknown);
                if self.b.body().stream(s).expr == key {
                    let spelled = self.spelled(m);
                    let stream = self.b.stream_mut(s);
                    stream.display = format!("`{spelled}`");
                    stream.expr = spelled;
                }
                Value::Stream(s)
            }
            (Value::Context | Value::Unknown, "alloc_pinned" | "alloc_pinned_with_flags") => {
                let tracked = self.tracking_enabled;
                let h = self.new_buffer(
                    "the pinned buffer",
                    Memory::PinnedHost,
                    Owner::Local,
                    tracked,
                );
                let ambient = self.b.ambient();
                self.b.push(
                    OpKind::Produce {
                        buffer: h,
                        stream: ambient,
                        how: Production::Host,
                    },
                    sp,
                );
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
                let e = self.b.add_event(Event {
                    name: "the event".into(),
                    expr: "ev".into(),
                    created: Some(sp),
                    internal: false,
                });
                self.b.push(OpKind::NewEvent { event: e }, sp);
                Value::Event(e)
            }
            (
                Value::Slice(_) | Value::Host(_) | Value::Event(_) | Value::Stream(_),
                "take" | "unwrap" | "expect" | "as_ref" | "as_mut",
            ) => recv,
            (Value::Stream(s), "clone") => Value::Stream(*s),
            (Value::Stream(s), _) => self.stream_method(*s, &method, &m.args, sp),
            (Value::Event(e), "record") => {
                let e = *e;
                if let Some(s) = self.stream_arg(&m.args, 0) {
                    self.b.push(
                        OpKind::RecordEvent {
                            event: e,
                            stream: s,
                        },
                        sp,
                    );
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
            (
                Value::Slice(_) | Value::Unknown,
                "device_ptr" | "device_ptr_mut" | "view_ptr" | "view_ptr_mut",
            ) => self.pointer_of(recv, &method, m, sp),
            (
                Value::Slice(x),
                "slice" | "slice_mut" | "as_view" | "as_view_mut" | "try_slice" | "try_slice_mut",
            ) => Value::Slice(*x),
            // The slice's allocating stream, known only by that name.
            (Value::Slice(_), "stream") => {
                let owner = receiver_name.unwrap_or_else(|| "the slice".into());
                Value::Stream(
                    self.named_stream(&format!("{owner}.stream()"), StreamOrigin::Unknown),
                )
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
                let Some(s) = self.stream_arg(&m.args, 1) else {
                    return Value::Unknown;
                };
                let to_device = method == "async_copy_from";
                if let Some(h) = host {
                    let kind = if to_device {
                        OpKind::Read {
                            buffer: h,
                            stream: s,
                        }
                    } else {
                        OpKind::Write {
                            buffer: h,
                            stream: s,
                        }
                    };
                    self.b.push(kind, sp);
                }
                if to_device {
                    self.upload_into(x, s, sp);
                } else {
                    self.b.push(
                        OpKind::Read {
                            buffer: x,
                            stream: s,
                        },
                        sp,
                    );
                }
                Value::Unknown
            }
            (Value::Slice(x), "copy_from" | "copy_to") => {
                // cust's synchronous copies wait for the device, and are done when they return.
                let x = *x;
                let ambient = self.b.ambient();
                self.buffer_arg(first);
                self.b.push(OpKind::SyncDevice, sp);
                let kind = if method == "copy_from" {
                    OpKind::Write {
                        buffer: x,
                        stream: ambient,
                    }
                } else {
                    OpKind::Read {
                        buffer: x,
                        stream: ambient,
                    }
                };
                self.b.push(kind, sp);
                self.b.push(OpKind::SyncDevice, sp);
                Value::Unknown
            }
            (Value::Slice(x), "leak") => {
                let x = *x;
                self.b.push(
                    OpKind::Escape {
                        buffer: x,
                        kind: EscapeKind::UnknownCallee,
                    },
                    sp,
                );
                Value::Unknown
            }
            (Value::Host(h), "as_slice" | "as_mut_slice" | "as_ptr" | "as_mut_ptr") => {
                let h = *h;
                if let Some(&e) = self.pinned_events.get(&h) {
                    self.b.push(OpKind::SyncEvent { event: e }, sp);
                }
                let kind = if method.contains("mut") {
                    OpKind::HostWrite { buffer: h }
                } else {
                    OpKind::HostRead { buffer: h }
                };
                self.b.push(kind, sp);
                Value::Unknown
            }
            (Value::Host(h), _) => {
                // Any other use of a host buffer reads (or, for `_mut`/`fill`/`copy_from_slice`, writes) it.
                let h = *h;
                for a in &m.args {
                    self.expr(a);
                }
                let write = method.contains("mut")
                    || method.starts_with("fill")
                    || method == "copy_from_slice";
                self.b.push(
                    if write {
                        OpKind::HostWrite { buffer: h }
                    } else {
                        OpKind::HostRead { buffer: h }
                    },
                    sp,
                );
                Value::Unknown
            }
            (Value::Builder { stream, args }, "arg") => {
                let (stream, mut args) = (*stream, args.clone());
                if let Some(a) = first {
                    let write = matches!(a, syn::Expr::Reference(r) if r.mutability.is_some())
                        || matches!(a, syn::Expr::Path(p) if p.path.get_ident()
                            .and_then(|n| self.lookup(&n.to_string()))
                            .is_some_and(|l| l.mutable_borrow));
                    match self.expr(a) {
                        Value::Slice(b) => args.push((b, write)),
                        Value::Ptr { buffer, write } => {
                            // A raw pointer argument escapes tracking.
                            self.b.push(
                                OpKind::Raw {
                                    buffer,
                                    stream,
                                    write,
                                },
                                sp,
                            );
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
                    let kind = if write {
                        OpKind::Write { buffer: b, stream }
                    } else {
                        OpKind::Read { buffer: b, stream }
                    };
                    self.b.push(kind, sp);
                }
                for &(b, write) in &args {
                    self.tracked_record(b, stream, write, sp);
                }
                Value::Unknown
            }
            (Value::Slice(_) | Value::Context | Value::Event(_), "clone") => recv,
            _ => {
                let vals: Vec<Value> = std::iter::once(recv)
                    .chain(m.args.iter().map(|a| self.expr(a)))
                    .collect();
                // A method of the crate's, on a value whose type is not followed (a trait
                // method, a generic receiver, a struct of the crate held in a local), when
                // every type defining a method of this name does the same.
                let key = crate::crate_index::method_name_key(&method);
                let value = match self.summaries.get(&key) {
                    Some(summary) => self.call_summarized(&summary.clone(), &vals, sp),
                    None => {
                        self.run_handed_closures(&vals, sp);
                        Value::Unknown
                    }
                };
                // `pending.push(buf)`: the slice is the collection's now.
                self.move_into_callee(&m.args, sp);
                value
            }
        }
    }

    /// A call to a summarized function with `vals` for its arguments: closures handed to it run
    /// in it, then its effects happen here.
    fn call_summarized(&mut self, summary: &Summary, vals: &[Value], sp: Span) -> Value {
        self.run_handed_closures(vals, sp);
        self.apply_summary(summary, vals, sp)
    }

    /// The closures among a call's values `vals` (its receiver and arguments) run at the call
    /// (see [`Self::run_handed_closure`]), given the call's stream when it has exactly one.
    pub(super) fn run_handed_closures(&mut self, vals: &[Value], sp: Span) {
        let mut streams = vals.iter().filter_map(|v| match v {
            Value::Stream(s) => Some(*s),
            _ => None,
        });
        let given = streams.next().filter(|&s| streams.all(|t| t == s));
        for v in vals {
            self.run_handed_closure(v, given, sp);
        }
    }

    /// A closure handed to code the model does not know (`dev.with_stream(|s| ..)`,
    /// `self.launch(move |args| ..)`) runs there, once, before the call returns, when it uses a
    /// raw pointer: that use is the work the pointer's guard had to cover. (Closures that use
    /// no raw pointer, iterator adapters' among them, are left alone.) A launcher given one
    /// stream (`on_stream(&side, |s| ..)`, `side.scoped(|s| ..)`) hands that stream to the
    /// closure's parameters that are streams: typed as one, or used as one in its body.
    fn run_handed_closure(&mut self, v: &Value, given: Option<StreamId>, sp: Span) {
        let Value::Closure(c) = v else {
            return;
        };
        if self.pointers_in([c.0.body.as_ref()]).is_empty() {
            return;
        }
        let body = c.0.body.as_ref();
        let args: Vec<Value> =
            c.0.inputs
                .iter()
                .map(|input| match (given, input) {
                    (Some(s), syn::Pat::Type(t))
                        if type_kind_in(&t.ty, self.aliases) == Some(TypeKind::Stream) =>
                    {
                        Value::Stream(s)
                    }
                    (Some(s), syn::Pat::Ident(id)) if used_as_stream(body, &id.ident) => {
                        Value::Stream(s)
                    }
                    _ => Value::Unknown,
                })
                .collect();
        self.call_closure(&c.clone(), &args, sp);
    }

    /// The closure's body, run at a call with `args` for its parameters, in a scope of its own.
    pub(super) fn call_closure(&mut self, c: &Closure, args: &[Value], sp: Span) -> Value {
        self.scopes.push(Vec::new());
        for (i, input) in c.0.inputs.iter().enumerate() {
            let pat = match input {
                syn::Pat::Type(t) => t.pat.as_ref(),
                other => other,
            };
            if let syn::Pat::Ident(id) = pat {
                let value = args.get(i).cloned().unwrap_or(Value::Unknown);
                self.bind(&id.ident.to_string(), value);
            }
        }
        let value = self.expr(&c.0.body);
        self.pop_scope(sp);
        value
    }

    pub(super) fn stream_method(
        &mut self,
        s: StreamId,
        method: &str,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>,
        sp: Span,
    ) -> Value {
        let first = args.first();
        match method {
            "alloc_zeros" | "alloc" | "alloc_zeros_async" => {
                let records = method != "alloc";
                Value::Slice(self.produce("the allocation", s, Production::Allocate, records, sp))
            }
            "clone_htod" | "htod_copy" | "htod_sync_copy" | "clone_htod_async" => {
                if let Some(h) = self.buffer_arg(first) {
                    self.b.push(
                        OpKind::Read {
                            buffer: h,
                            stream: s,
                        },
                        sp,
                    );
                }
                Value::Slice(self.produce(
                    "the upload",
                    s,
                    Production::HostToDevice { non_blocking: true },
                    true,
                    sp,
                ))
            }
            "memcpy_htod" | "htod_copy_into" => {
                if let Some(h) = self.buffer_arg(first) {
                    self.b.push(
                        OpKind::Read {
                            buffer: h,
                            stream: s,
                        },
                        sp,
                    );
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
                        self.b.push(
                            OpKind::Write {
                                buffer: h,
                                stream: s,
                            },
                            sp,
                        );
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
                Value::Builder {
                    stream: s,
                    args: Vec::new(),
                }
            }
            "join" => {
                if let Some(o) = self.stream_arg(args, 0) {
                    if o != s {
                        self.b.push(
                            OpKind::WaitStream {
                                waiter: s,
                                waitee: o,
                            },
                            sp,
                        );
                    }
                }
                Value::Unknown
            }
            "wait" | "wait_event" => {
                for event in first
                    .map(|a| self.expr(a))
                    .map(|v| v.events())
                    .unwrap_or_default()
                {
                    self.b.push(OpKind::WaitEvent { event, stream: s }, sp);
                }
                Value::Unknown
            }
            "record_event" => {
                let e = self.b.add_event(Event {
                    name: "the event".into(),
                    expr: "ev".into(),
                    created: None,
                    internal: false,
                });
                self.b.push(
                    OpKind::RecordEvent {
                        event: e,
                        stream: s,
                    },
                    sp,
                );
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

    pub(super) fn call(&mut self, c: &syn::ExprCall, sp: Span) -> Value {
        let path = match c.func.as_ref() {
            syn::Expr::Path(p) => p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let last = path.last().map(String::as_str).unwrap_or("");
        let owner = path
            .len()
            .checked_sub(2)
            .map(|i| path[i].as_str())
            .unwrap_or("");
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
                return c
                    .args
                    .first()
                    .map(|a| self.expr(a))
                    .unwrap_or(Value::Unknown);
            }
            ("Stream", "new") => {
                return Value::Stream(self.new_stream("a new stream", StreamOrigin::Temporary, sp))
            }
            ("Event", "new") => {
                let e = self.b.add_event(Event {
                    name: "the event".into(),
                    expr: "ev".into(),
                    created: Some(sp),
                    internal: false,
                });
                self.b.push(OpKind::NewEvent { event: e }, sp);
                return Value::Event(e);
            }
            ("LockedBuffer", _) => {
                let h =
                    self.new_buffer("the pinned buffer", Memory::PinnedHost, Owner::Local, false);
                let ambient = self.b.ambient();
                self.b.push(
                    OpKind::Produce {
                        buffer: h,
                        stream: ambient,
                        how: Production::Host,
                    },
                    sp,
                );
                return Value::Host(h);
            }
            ("DeviceBuffer" | "DeviceBox", f) => {
                let vals: Vec<Value> = c.args.iter().map(|a| self.expr(a)).collect();
                let stream = vals.iter().find_map(|v| match v {
                    Value::Stream(s) => Some(*s),
                    _ => None,
                });
                let ambient = self.b.ambient();
                let buffer =
                    self.new_buffer("the device buffer", Memory::Device, Owner::Local, false);
                self.synchronous_free.insert(buffer);
                self.b.push(
                    OpKind::Produce {
                        buffer,
                        stream: stream.unwrap_or(ambient),
                        how: Production::Allocate,
                    },
                    sp,
                );
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
            if let Some(Value::Closure(closure)) = self.lookup(name).map(|l| l.value.clone()) {
                return self.call_closure(&closure, &vals, sp);
            }
            if let Some(summary) = self.summaries.get(name) {
                return self.call_summarized(&summary.clone(), &vals, sp);
            }
        }
        let raw_stream = super::raw::raw_stream_among(&vals);
        match (owner, last, raw_stream) {
            // The host waits for a stream or for the whole context.
            ("stream", "synchronize", Some(s)) | (_, "cuStreamSynchronize", Some(s)) => {
                self.b.push(OpKind::SyncStream { stream: s }, sp);
                return Value::Unknown;
            }
            ("ctx", "synchronize", _) | (_, "cuCtxSynchronize", _) => {
                self.b.push(OpKind::SyncDevice, sp);
                return Value::Unknown;
            }
            // The legacy default stream, which is the context's default stream in cudarc
            // (`ctx.default_stream()`, the body's ambient stream): it is ordered with it, and not
            // with the non-blocking streams `new_stream()` makes.
            (_, f, None) if crate::model::on_legacy_stream(f) => {
                let legacy = self.b.ambient();
                self.raw_call(f, legacy, &c.args, sp);
                if crate::model::returns_when_done(f) {
                    self.b.push(OpKind::SyncStream { stream: legacy }, sp);
                }
                return Value::Unknown;
            }
            _ => {}
        }
        // A function of the crate reached through its modules (`ops::copy_into(..)`,
        // `crate::ops::copy_into(..)`); the API's own paths are matched above. A path through
        // a type (`Engine::new`) names an associated function, which is not summarized by name.
        let through_modules = path.len() > 1
            && path[..path.len() - 1]
                .iter()
                .all(|m| m.starts_with(|c: char| c.is_ascii_lowercase() || c == '_'));
        if let Some(summary) = self.summaries.get(last).filter(|_| through_modules) {
            return self.call_summarized(&summary.clone(), &vals, sp);
        }
        // Raw work: a call given a stream's raw handle runs on that stream, through the raw
        // pointers it is given.
        if let Some(stream) = raw_stream {
            return self.raw_call(last, stream, &c.args, sp);
        }
        self.run_handed_closures(&vals, sp);
        self.move_into_callee(&c.args, sp);
        Value::Unknown
    }

    /// Slices passed by value to code the model does not know move into it: their drop is
    /// no longer this function's.
    pub(super) fn move_into_callee<'e>(
        &mut self,
        args: impl IntoIterator<Item = &'e syn::Expr>,
        sp: Span,
    ) {
        for a in args {
            if !matches!(a, syn::Expr::Reference(_)) {
                if let Some(n) = Self::local_name(a) {
                    if let Some(Value::Slice(b)) = self.lookup(&n).map(|l| l.value.clone()) {
                        self.b.push(
                            OpKind::Escape {
                                buffer: b,
                                kind: EscapeKind::UnknownCallee,
                            },
                            sp,
                        );
                        self.mark_gone(&n);
                    }
                }
            }
        }
    }

    /// `x.device_ptr(&s)` / `x.device_ptr_mut(&s)`: tracked waits for the stream, then the raw
    /// pointer and the guard that records the stream's later work when it drops.
    fn pointer_of(
        &mut self,
        recv: Value,
        method: &str,
        m: &syn::ExprMethodCall,
        sp: Span,
    ) -> Value {
        let Some(s) = self.stream_arg(&m.args, 0) else {
            return Value::Unknown;
        };
        let x = match recv {
            Value::Slice(x) => x,
            // An element of a collection or a split half has no name the lowering follows, but
            // taking its pointer for a stream says it is cudarc device memory made earlier.
            Value::Unknown if method.starts_with("device_ptr") => {
                let kind = if self.tracking_enabled {
                    TypeKind::TrackedSlice
                } else {
                    TypeKind::UntrackedBuffer
                };
                let name = self.spelled(&m.receiver);
                match self.entry_value(&name, kind, StreamOrigin::Attribute, Owner::Attribute, sp) {
                    Value::Slice(x) => x,
                    _ => return Value::Unknown,
                }
            }
            _ => return Value::Unknown,
        };
        let write = method.ends_with("_mut");
        self.tracked_wait(x, s, write, sp);
        // Only a tracked slice's guard records anything when it drops; an untracked one's raw
        // work is ordered by the code or not at all.
        if self.slice_events.contains_key(&x) {
            self.b.push(
                OpKind::GuardTaken {
                    buffer: x,
                    stream: s,
                },
                sp,
            );
        }
        Value::PtrGuard {
            buffer: x,
            write,
            stream: s,
        }
    }
}

/// Does `body` use `name` as a cudarc stream (`s.cu_stream()`, `s.launch_builder(..)`, ...)?
fn used_as_stream(body: &syn::Expr, name: &proc_macro2::Ident) -> bool {
    /// Methods only a stream has.
    const STREAM_ONLY: &[&str] = &[
        "cu_stream",
        "launch_builder",
        "memcpy_htod",
        "memcpy_dtoh",
        "memcpy_dtod",
        "clone_htod",
        "clone_dtoh",
        "alloc_zeros",
        "memset_zeros",
        "record_event",
        "join",
    ];
    struct Uses<'n> {
        name: &'n proc_macro2::Ident,
        found: bool,
    }
    impl<'ast> syn::visit::Visit<'ast> for Uses<'_> {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            let on_name =
                matches!(m.receiver.as_ref(), syn::Expr::Path(p) if p.path.is_ident(self.name));
            self.found |= on_name && STREAM_ONLY.iter().any(|s| m.method == s);
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut uses = Uses { name, found: false };
    syn::visit::Visit::visit_expr(&mut uses, body);
    uses.found
}
