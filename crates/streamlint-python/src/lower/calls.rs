//! Calls: the stream API, project functions, methods of the class, unknown code.

use super::*;

/// Methods that store their arguments in a container.
const CONTAINER_METHODS: &[&str] = &[
    "append",
    "extend",
    "insert",
    "add",
    "appendleft",
    "setdefault",
    "update",
    "push",
];

impl<'a> Lowerer<'a> {
    pub(super) fn call(
        &mut self,
        func: &Expr,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        // A call through a name or attribute chain rooted at a value (a local, `self`, a module
        // global: any root that no import or `def` of the module binds) is a method call on that
        // value; otherwise the callee is resolved through the imports.
        if let Some(mapped) = self.map_over_tensors(func, args, keywords, span) {
            return mapped;
        }
        let root = root_name(func);
        // `DP(module=m)` for `DP` bound to a data-parallel wrapper class.
        if let (Some(Value::DataParallelWrapper), Expr::Name { .. }) =
            (root.and_then(|r| self.env.get(r)), func)
        {
            return self.data_parallel_wrap(args, keywords, span);
        }
        let api = self.classify_callee(func);
        if let Some((call, qualified)) = api {
            if !(matches!(func, Expr::Name { id, .. } if self.env.contains_key(id.as_str()))) {
                return self.api_call(call, &qualified, args, keywords, span);
            }
        }
        if let Some(call) = self
            .wrapper(func)
            .and_then(|w| w.inline_expr(args, keywords, span))
        {
            return self.eval(&call);
        }
        // `torch.device(f"cuda:{i}")`: no tensor comes of it.
        let local_root = root.is_some_and(|r| self.env.contains_key(r) || r == "self");
        let qualified = (!local_root)
            .then(|| self.cx.imports.qualify(func))
            .flatten();
        if qualified.is_some_and(|q| crate::ApiModel::makes_no_tensor(&q)) {
            self.eval_args(args, keywords);
            return Value::Unknown;
        }
        // A method of the object's own class, as a helper of the module would be: small, or
        // called inside a side-stream block (others apply the class's summary below).
        if let Some(method) = self.own_method(func).filter(|&m| self.lowered_in_place(m)) {
            return self.inline_call(method, args, keywords, span);
        }
        // A function of the project: lowered in place, or applied through its summary.
        let callee = self.project_callee(func);
        if let Some(callee) =
            callee.filter(|&c| self.lowered_in_place(c) || self.passes_stream(c, args, keywords))
        {
            return self.inline_call(callee, args, keywords, span);
        }
        let summarized = callee.and_then(|c| Some((c, self.callee_summary(c)?)));
        match func {
            Expr::Attribute {
                value: receiver,
                attr,
                ..
            } => {
                if let (Some(class), Expr::Name { id, .. }) = (self.class, receiver.as_ref()) {
                    if id == "self" && class.methods.contains_key(attr) {
                        return self.self_method_call(attr, args, keywords, span);
                    }
                }
                match attr.as_str() {
                    "replay" if args.is_empty() && self.replay(receiver, span) => {
                        return Value::Unknown;
                    }
                    "capture_begin" => self.begin_capture(receiver),
                    "capture_end" => self.end_capture(receiver, span),
                    _ => {}
                }
                // `self.assertEqual(out, expected)` in a test case compares on the host.
                let on_self = matches!(receiver.as_ref(), Expr::Name { id, .. } if id == "self");
                if self.class.is_some() && on_self && attr.starts_with("assert") {
                    let vals = self.eval_args(args, keywords);
                    self.host_compare(&vals, span);
                    return Value::Unknown;
                }
                let recv = self.eval(receiver);
                let recv = self.duck_type(recv, receiver, attr, args, keywords.len());
                self.method_call(recv, receiver, attr, args, keywords, span)
            }
            Expr::Name { id, .. }
                if !self.env.contains_key(id.as_str()) && !self.is_captured(id) =>
            {
                let vals = self.eval_args(args, keywords);
                if let Some((callee, summary)) = summarized {
                    self.apply_callee_summary(callee.def, summary, (args, keywords), &vals, span);
                }
                if HOST_READ_BUILTINS.contains(&id.as_str()) {
                    for v in &vals {
                        if !v.local_tensors().is_empty() {
                            self.host_read(v, span);
                        }
                    }
                    return Value::Unknown;
                }
                if NEUTRAL_BUILTINS.contains(&id.as_str()) {
                    return match id.as_str() {
                        "list" | "tuple" | "iter" | "next" | "reversed" | "sorted"
                        | "enumerate" | "zip" => {
                            Value::tensors(vals.iter().flat_map(Value::local_tensors).collect())
                        }
                        _ => Value::Unknown,
                    };
                }
                let local = self.cx.defined.contains(id);
                if !local && names_a_class(id) {
                    // `Net()`: a new object of a class, not a value handed over.
                    for v in &vals {
                        self.escape(v, EscapeKind::UnknownCallee, span);
                    }
                    return Value::Unknown;
                }
                self.opaque_call(
                    vals,
                    span,
                    if local {
                        Callee::LocalFunction
                    } else {
                        Callee::Foreign
                    },
                )
            }
            _ => {
                self.eval(func);
                let vals = self.eval_args(args, keywords);
                if let Some((callee, summary)) = summarized {
                    self.apply_callee_summary(callee.def, summary, (args, keywords), &vals, span);
                }
                self.module_call(func.dotted(), vals, args.len(), span)
            }
        }
    }

    /// What a call gives for keyword `name`: written there, or forwarded through the `**kwargs`
    /// a callee lowered in place received (`def to_host(t, **kw): ... copy_(t, **kw)` called
    /// with `non_blocking=True`).
    pub(super) fn keyword_arg(&self, keywords: &[Keyword], name: &str) -> Option<Expr> {
        if let Some(given) = Expr::keyword(keywords, name) {
            return Some(given.clone());
        }
        keywords
            .iter()
            .find_map(|k| Expr::keyword(self.forwarded_by(k)?, name).cloned())
    }

    pub(super) fn eval_args(&mut self, args: &[Expr], keywords: &[Keyword]) -> Vec<Value> {
        let mut vals: Vec<Value> = args.iter().map(|a| self.eval(a)).collect();
        for k in keywords {
            let outer = self.keyword_value.replace(k.value.span());
            vals.push(self.eval(&k.value));
            self.keyword_value = outer;
        }
        vals
    }

    /// A call whose body is not known. A module or local helper reads its tensor arguments on
    /// the current stream and makes a tensor; a callee from elsewhere may keep what it is given.
    pub(super) fn opaque_call(&mut self, vals: Vec<Value>, span: Span, callee: Callee) -> Value {
        self.alias_streams(&vals);
        if callee == Callee::Foreign {
            // Nothing says it runs device work, but it may keep what it is given.
            for v in &vals {
                self.escape(v, EscapeKind::UnknownCallee, span);
            }
            return self.received_from_unseen_code(span);
        }
        // Device inputs are read on the current stream. A module computes on what it is given,
        // on the host for host tensors (`expert(x.to("cpu", non_blocking=True))`); what a
        // helper does with host tensors (keep them, hand them on) is not known to read them.
        let inputs: Vec<BufferId> = self
            .tensor_buffers(&vals)
            .into_iter()
            .filter(|b| callee == Callee::Module || !self.on_host(*b))
            .collect();
        if inputs.is_empty() {
            return Value::Unknown;
        }
        // An event recorded here and given with the tensors (`combine(out, out_ready)`) is there
        // for the callee to wait on before it reads them, as when the two are returned together:
        // the current stream waits on it. An event not recorded yet is the callee's to record.
        for event in vals.iter().flat_map(Value::events) {
            let recorded = self.b.body().ops_iter().any(
                |(_, op)| matches!(op.kind, OpKind::RecordEvent { event: e, .. } if e == event),
            );
            if recorded {
                let stream = self.current;
                self.b.push(OpKind::WaitEvent { stream, event }, span);
            }
        }
        self.read_all(&inputs, span);
        let name = self.value_name("result");
        let how = if matches!(callee, Callee::Module | Callee::Keeping) {
            Production::Module
        } else {
            Production::Call
        };
        self.produce(span, &name, Memory::Device, how)
    }

    /// Is `receiver.method()` a stream a class of the module makes and hands out, on a new
    /// object of it (`SideStream().get()`)?
    fn hands_out_a_new_stream(&self, receiver: &Expr, method: &str) -> bool {
        let Expr::Call { func, .. } = receiver else {
            return false;
        };
        let Expr::Name { id: class, .. } = func.as_ref() else {
            return false;
        };
        self.stream_getters
            .and_then(|g| g.get(class.as_str()))
            .is_some_and(|methods| methods.contains(method))
    }

    /// Does `expr` make a new stream (`torch.cuda.Stream()`, `SideStream().get()`)?
    pub(super) fn makes_stream(&self, expr: &Expr) -> bool {
        if self.api_kind(expr) == Some(ApiCall::StreamFactory) {
            return true;
        }
        match expr {
            Expr::Call { func, .. } => match func.as_ref() {
                Expr::Attribute { value, attr, .. } => self.hands_out_a_new_stream(value, attr),
                _ => false,
            },
            _ => false,
        }
    }

    /// What code not seen returns (`store.get_flat()`, `next(batches)`): by the contract at every
    /// boundary, a value ready on the stream current at the call, judged like an argument if it
    /// is used as a tensor (until then it may be anything: a number, a list, a module).
    fn received_from_unseen_code(&mut self, span: Span) -> Value {
        if self.discarded == Some(span) {
            return Value::Unknown;
        }
        let name = self.value_name("result");
        let buffer = self.buffer_at(span, "received", &name, Memory::Device, Owner::Caller);
        self.b.push(
            OpKind::Produce {
                buffer,
                stream: self.current,
                how: Production::Entry,
            },
            span,
        );
        self.received_buffers.insert(buffer);
        let bound_to_a_tensor = self.binding_value == Some(span)
            && !self.inlining()
            && self
                .binding
                .as_ref()
                .is_some_and(|n| self.tensor_locals.contains(n));
        if bound_to_a_tensor {
            self.confirmed.insert(buffer);
        }
        Value::Param(buffer)
    }

    /// The stream asynchronous collectives run on (see [`StreamOrigin::Collective`]): one for
    /// the body, as a process group runs its collectives one after the other. Known by the name
    /// their work handles are bound to, while they share one.
    fn collective_stream(&mut self) -> StreamId {
        let handle = self.binding.clone().unwrap_or_default();
        let known = self
            .b
            .body()
            .streams
            .iter()
            .position(|s| s.origin == StreamOrigin::Collective);
        if let Some(i) = known {
            let stream = StreamId(i as u32);
            if self.b.body().stream(stream).expr != handle {
                self.b.stream_mut(stream).expr = String::new();
            }
            return stream;
        }
        self.b.add_stream(Stream {
            display: "the process group's stream".into(),
            expr: handle,
            origin: StreamOrigin::Collective,
            span: None,
            home: None,
        })
    }

    /// `self.m(..)` for a method of this class: its effects on the object's attributes.
    pub(super) fn self_method_call(
        &mut self,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let vals = self.eval_args(args, keywords);
        let Some(summary) = self.class.and_then(|c| c.methods.get(method)) else {
            return Value::Unknown;
        };
        // `self._store(key, (indices, lens))`: the object keeps what it is given.
        if summary.keeps_arguments {
            for v in &vals {
                self.escape(v, EscapeKind::Attribute, span);
            }
        }
        // The current stream waits on the streams the method joins, and the streams it forks
        // (`self._fork()`) on the current stream.
        let current = self.current;
        let joins = summary.waits_on.iter().map(|s| (true, s));
        for (joined, stream) in joins.chain(summary.forks.iter().map(|s| (false, s))) {
            let s = self.named_stream(stream);
            if s != current {
                let (waiter, waitee) = if joined { (current, s) } else { (s, current) };
                self.b.push(OpKind::WaitStream { waiter, waitee }, span);
            }
        }
        for name in summary.syncs.clone() {
            if self.class.is_some_and(|c| {
                matches!(
                    c.attrs.get(&name),
                    Some(AttrKind::Stream | AttrKind::StreamCache)
                )
            }) {
                let s = self.named_stream(&name);
                self.sync_stream(s, span);
            }
        }
        for (attr, kind) in summary.assigns.clone() {
            if let AttrKind::Tensor { stream, transfer } = kind {
                if stream.is_empty() {
                    self.unbind(&attr);
                    continue;
                }
                let s = self.named_stream(&stream);
                let buf = self.buffer_at(span, "staged", &attr, Memory::Device, Owner::Attribute);
                let how = staged_production(transfer);
                self.b.push(
                    OpKind::Produce {
                        buffer: buf,
                        stream: s,
                        how,
                    },
                    span,
                );
                self.bind(attr, Value::Tensors(vec![buf]));
            } else {
                self.unbind(&attr);
            }
        }
        self.pair_effects_of_method(summary, &vals, args.len(), span);
        // Device inputs are read on the current stream, but for those it only asks their size
        // (`self._num_bytes(t)`); whether it reads host ones or only files them away is known, as
        // for a helper, only where it is lowered in place.
        let asked_size_only = |i: usize| i < args.len() && summary.sizes_only.contains(&i);
        let read: Vec<Value> = vals
            .iter()
            .enumerate()
            .filter(|&(i, _)| !asked_size_only(i))
            .map(|(_, v)| v.clone())
            .collect();
        let inputs: Vec<BufferId> = self
            .tensor_buffers(&read)
            .into_iter()
            .filter(|b| !self.on_host(*b))
            .collect();
        self.read_all(&inputs, span);
        // `self.producer_stream()` returning `torch.cuda.current_stream()` or `self.side`.
        match summary.returns_stream.clone().as_deref() {
            Some("") => return Value::Stream(self.current),
            Some(attr) => {
                if let Some(stream) = self.class_attribute(attr, span) {
                    return stream;
                }
            }
            None => {}
        }
        // `self._to(device="cpu", non_blocking=True)`: the object's own transfer helper.
        self.host_transfer_call(&Value::Unknown, method, args, keywords, span)
            .unwrap_or(Value::Unknown)
    }

    /// `tree_map(lambda t: t.to("cuda", non_blocking=True), batch)`: the lambda's body run on
    /// the structure's tensors, as a loop over them would; the result holds what it made. A
    /// named function of the project (`tree_map(to_device, batch)`) small enough to be lowered
    /// in place is lowered on them the same way; any other is an unknown call.
    fn map_over_tensors(
        &mut self,
        func: &Expr,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Option<Value> {
        use crate::api::MappedFunction;
        let mapped = crate::api::mapped_call(func, args, keywords, self.cx.imports)?;
        let (param, site, callee) = match mapped.function {
            MappedFunction::Lambda { params, span, .. } => (params.first()?.clone(), span, None),
            MappedFunction::Named(f) => {
                let callee = self
                    .project_callee(f)
                    .filter(|c| self.lowered_in_place(*c))?;
                (
                    callee.def.params.first()?.name.clone(),
                    f.span(),
                    Some(callee),
                )
            }
        };
        let tree = self.eval(mapped.structure);
        let element_name = Expr::Name {
            id: param.clone(),
            span: site,
        };
        let element = self.element_of(&tree, &element_name);
        let shadowed = self.env.get(param.as_str()).cloned();
        self.bind(param.clone(), element);
        let result = match (mapped.function, callee) {
            (MappedFunction::Lambda { body, .. }, _) => self.eval(body),
            (_, Some(callee)) => {
                self.inline_call(callee, std::slice::from_ref(&element_name), &[], span)
            }
            (MappedFunction::Named(_), None) => Value::Unknown,
        };
        match shadowed {
            Some(v) => self.bind(param.clone(), v),
            None => {
                self.unbind(&param);
            }
        }
        Some(match result {
            v @ (Value::Tensors(_) | Value::Param(_)) => v,
            other => Value::tensors(other.local_tensors()),
        })
    }

    /// `out = make_output(n)` from code the analysis does not see, then `out.copy_(x)`: an
    /// in-place tensor op says the name holds a device tensor (see `made_elsewhere`).
    fn made_elsewhere_by_method(
        &mut self,
        receiver: &Expr,
        recv: &Value,
        method: &str,
        span: Span,
    ) -> Option<Value> {
        let Expr::Name { id, .. } = receiver else {
            return None;
        };
        let in_place = method.ends_with('_') && !method.starts_with('_');
        if !in_place || !TENSOR_METHODS.contains(&method) || !matches!(recv, Value::Unknown) {
            return None;
        }
        self.made_elsewhere(id, span)
    }

    /// The API a callee names, with its qualified name: through the imports, or through a
    /// value holding a device module (a local `dm = torch.get_device_module()`, an attribute
    /// `self.device_module`). A call through a name or attribute chain rooted at another value
    /// (a local, `self`, a module global: any root that no import or `def` of the module binds)
    /// is a method call on that value, not an API call.
    pub(super) fn classify_callee(&self, func: &Expr) -> Option<(ApiCall, String)> {
        let root = root_name(func);
        let root_is_local = root.is_some_and(|r| {
            self.env.contains_key(r)
                || r == "self"
                || !(self.cx.imports.binds(r) || self.cx.defined.contains(r))
        });
        // `self.device_module.synchronize()` for an attribute holding a device module.
        let held_module = match func {
            Expr::Attribute { value, attr, .. } => {
                value
                    .dotted()
                    .and_then(|d| match self.class?.attrs.get(&d)? {
                        AttrKind::DeviceModule(module) => Some(format!("{module}.{attr}")),
                        _ => None,
                    })
            }
            _ => None,
        };
        if let Some(q) = held_module {
            return self.cx.api.classify(&q).map(|c| (c, q));
        }
        // `buffer.producer_stream()`: a method the project writes to give the current stream.
        if let Expr::Attribute { attr, .. } = func {
            if root_is_local && self.cx.project.returns_current_stream(attr) {
                return Some((ApiCall::CurrentStream, attr.clone()));
            }
        }
        match root.and_then(|r| self.env.get(r)) {
            // `dm.current_stream()` for `dm` bound to a device module.
            Some(Value::Module(module)) => {
                let rest = func
                    .dotted()
                    .and_then(|d| d.split_once('.').map(|(_, rest)| rest.to_string()));
                rest.map(|rest| format!("{module}.{rest}"))
                    .and_then(|q| self.cx.api.classify(&q).map(|c| (c, q)))
            }
            _ if root_is_local && !matches!(func, Expr::Name { .. }) => None,
            _ => self
                .cx
                .imports
                .qualify(func)
                .and_then(|q| self.cx.api.classify(&q).map(|c| (c, q))),
        }
    }

    /// A name holding what code the analysis does not see returned, found to be a device
    /// tensor (an in-place op on it, a collective given it). From then on it is one, made
    /// before this point with nothing known to be pending on it, and not this body's to free
    /// (whoever made it may keep it): its order is judged, not its lifetime.
    pub(super) fn made_elsewhere(&mut self, id: &str, span: Span) -> Option<Value> {
        if !matches!(self.env.get(id), Some(Value::Unknown)) {
            return None;
        }
        let buffer = self.buffer_at(span, "made-elsewhere", id, Memory::Device, Owner::Caller);
        self.unplaced.insert(buffer);
        // Where it was allocated is not known; it was made under the caller's current stream,
        // not the block's this point may be in.
        let stream = self.b.ambient();
        self.b.push(
            OpKind::Produce {
                buffer,
                stream,
                how: Production::Host,
            },
            span,
        );
        let value = Value::Tensors(vec![buffer]);
        self.bind(id.to_string(), value.clone());
        Some(value)
    }

    pub(super) fn api_call(
        &mut self,
        call: ApiCall,
        qualified: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let first = args.first();
        match call {
            ApiCall::StreamFactory => {
                self.eval_args(args, keywords);
                let display = match &self.binding {
                    Some(n) => format!("`{n}`"),
                    None => "a temporary stream".to_string(),
                };
                let expr = self
                    .binding
                    .clone()
                    .unwrap_or_else(|| "torch.cuda.Stream()".into());
                // Made at import, or cached in a module global by a getter
                // (`global _alt; if _alt is None: _alt = torch.cuda.Stream()`).
                let cached = self
                    .binding
                    .as_ref()
                    .is_some_and(|n| self.declared_globals.contains(n));
                let origin = if self.at_import && self.main_guard == 0 {
                    StreamOrigin::Global
                } else if cached {
                    StreamOrigin::Cached
                } else if self.binding.is_some() {
                    StreamOrigin::Created
                } else {
                    StreamOrigin::Temporary
                };
                let home = match (origin, &self.binding) {
                    (StreamOrigin::Global | StreamOrigin::Cached, Some(n)) => {
                        Some(self.global_home(n))
                    }
                    _ => None,
                };
                let stream = Stream {
                    display,
                    expr,
                    origin,
                    span: Some(span),
                    home,
                };
                Value::Stream(StreamId(
                    self.site(span, "stream", |b| b.add_stream(stream).0),
                ))
            }
            ApiCall::StreamContext => {
                let Some(arg) = first.or_else(|| Expr::keyword(keywords, "stream")) else {
                    return Value::StreamContext(None);
                };
                // `ctx = torch.cuda.stream(torch.cuda.Stream())`: the name is the context's;
                // the stream made in its argument has none.
                let binding = self.binding.take();
                let v = self.eval(arg);
                self.binding = binding;
                Value::StreamContext(self.stream_of(&v, arg))
            }
            ApiCall::CurrentStream => Value::Stream(self.current),
            ApiCall::DefaultStream => Value::Stream(self.b.ambient()),
            ApiCall::SetStream => {
                if let Some(arg) = first {
                    let v = self.eval(arg);
                    if let Some(s) = self.stream_of(&v, arg) {
                        let restored = self.restores_stream
                            || self.restoring_try > 0
                            || self.restore_follows.iter().any(|l| *l);
                        self.b.push(
                            OpKind::SetStream {
                                stream: s,
                                restored,
                            },
                            span,
                        );
                        self.current = s;
                    }
                }
                Value::Unknown
            }
            ApiCall::EventFactory => {
                self.eval_args(args, keywords);
                let name = self.value_name("event");
                let e = self.event_at(span, &name, true);
                self.b.push(OpKind::NewEvent { event: e }, span);
                Value::Event(e)
            }
            ApiCall::DeviceSynchronize | ApiCall::SynchronizeWrapper => {
                self.eval_args(args, keywords);
                self.b.push(OpKind::SyncDevice, span);
                Value::Unknown
            }
            ApiCall::TensorFactory | ApiCall::TensorFromData => {
                let vals = self.eval_args(args, keywords);
                // `zeros_like(x)` follows `x`; a tensor of unknown place is taken to be on the device.
                let like_host = vals.first().is_some_and(|v| {
                    let b = v.buffers();
                    !b.is_empty()
                        && b.iter()
                            .all(|b| self.b.body().buffer(*b).memory != Memory::Device)
                });
                // `torch.cuda.FloatTensor(n)`: the device module's typed constructor.
                let typed = qualified.ends_with("Tensor");
                let device = match Expr::keyword(keywords, "device") {
                    Some(d) => self.target_of(d) == Target::Device,
                    None => typed || (qualified.ends_with("_like") && !like_host),
                };
                let name = self.value_name("tensor");
                // Placed on the device by an explicit `device=`, or like a tensor known to be there.
                let explicit = typed
                    || Expr::keyword(keywords, "device").is_some()
                    || vals.first().is_some_and(|v| {
                        let b = v.local_tensors();
                        !b.is_empty() && b.iter().all(|b| !self.unplaced.contains(b))
                    });
                if device {
                    let non_blocking = is_true(self.keyword_arg(keywords, "non_blocking").as_ref());
                    let how = if call == ApiCall::TensorFromData {
                        Production::HostToDevice { non_blocking }
                    } else if explicit {
                        Production::Allocate
                    } else if qualified.ends_with("empty_like") {
                        Production::AllocateLike
                    } else {
                        Production::Compute
                    };
                    let v = self.produce(span, &name, Memory::Device, how);
                    // Data from the host is copied in, blocking unless asked otherwise.
                    if call == ApiCall::TensorFromData && !non_blocking {
                        self.sync_current(span);
                    }
                    if !explicit {
                        self.unplaced.extend(v.buffers());
                    }
                    v
                } else {
                    let pinned = is_true(Expr::keyword(keywords, "pin_memory"));
                    let memory = if pinned {
                        Memory::PinnedHost
                    } else {
                        Memory::PageableHost
                    };
                    self.produce(span, &name, memory, Production::Host)
                }
            }
            ApiCall::TensorOp => {
                // `torch.mm(a, b, out=c)` writes `c` in place and returns it: no new memory.
                let out = Expr::keyword(keywords, "out").map(|o| self.eval(o));
                let keywords: Vec<Keyword> = keywords
                    .iter()
                    .filter(|k| k.name.as_deref() != Some("out"))
                    .cloned()
                    .collect();
                let vals = self.eval_args(args, &keywords);
                if !args.is_empty() {
                    self.confirm(&vals[..1]);
                }
                // `torch.split(x, ..)`, `torch.transpose(x, ..)`: views of `x`, as the methods.
                let function = qualified.rsplit('.').next().unwrap_or(qualified);
                if VIEW_METHODS.contains(&function)
                    && !self.tensor_buffers(&vals[..vals.len().min(1)]).is_empty()
                {
                    return vals[0].clone();
                }
                let inputs = self.tensor_buffers(&vals);
                self.read_all(&inputs, span);
                let result = match out {
                    Some(out) if !self.tensor_buffers(std::slice::from_ref(&out)).is_empty() => {
                        let written = self.tensor_buffers(std::slice::from_ref(&out));
                        self.write_all(&written, span);
                        out
                    }
                    _ => self.produce_result(&inputs, span),
                };
                if DATA_DEPENDENT_SHAPES.contains(&function) {
                    self.sync_current(span);
                }
                result
            }
            ApiCall::Collective => {
                let tensor_args = crate::api::collective_tensor_args(qualified);
                // `dist.all_reduce(buf)` on what an unseen call returned: a device tensor.
                for arg in args.iter().take(tensor_args) {
                    if let Expr::Name { id, .. } = arg {
                        self.made_elsewhere(id, span);
                    }
                }
                let vals = self.eval_args(args, keywords);
                let firsts: Vec<Value> = vals.iter().take(tensor_args).cloned().collect();
                self.confirm(&firsts);
                let function = qualified.rsplit('.').next().unwrap_or(qualified);
                // Asynchronous where the code says so in so many words (a flag passed on may
                // be false at every call).
                let asynchronous = matches!(
                    Expr::keyword(keywords, "async_op"),
                    Some(Expr::Constant {
                        value: Constant::Bool(true),
                        ..
                    })
                ) || matches!(function, "isend" | "irecv");
                if !asynchronous {
                    let tensors = self.tensor_buffers(&vals);
                    self.read_all(&tensors, span);
                    self.write_all(&tensors, span);
                    return Value::Unknown;
                }
                // The tensors it sends and fills, by position or by name, where the code names
                // them: the items of a list (`bufs[i]`) are one value, which a collective on one
                // of them would tie to all the others.
                let named_value = |e: &Expr| e.dotted().is_some();
                let positional = args
                    .iter()
                    .zip(&vals)
                    .take(tensor_args)
                    .filter(|(e, _)| named_value(e))
                    .map(|(_, v)| v.clone());
                let named = keywords
                    .iter()
                    .zip(&vals[args.len()..])
                    .filter(|(k, _)| {
                        matches!(
                            k.name.as_deref(),
                            Some("tensor" | "input" | "output" | "input_tensor" | "output_tensor")
                        ) && named_value(&k.value)
                    })
                    .map(|(_, v)| v.clone());
                let given: Vec<Value> = positional.chain(named).collect();
                let tensors: Vec<BufferId> = self
                    .tensor_buffers(&given)
                    .into_iter()
                    .filter(|&b| !self.b.body().buffer(b).name.ends_with("[…]"))
                    .collect();
                let launched = self.current;
                let collective = self.collective_stream();
                self.b.push(
                    OpKind::WaitStream {
                        waiter: collective,
                        waitee: launched,
                    },
                    span,
                );
                self.current = collective;
                // A send only reads its tensor, a receive only writes it.
                if function != "irecv" {
                    self.read_all(&tensors, span);
                }
                if function != "isend" {
                    self.write_all(&tensors, span);
                }
                self.current = launched;
                // The process group keeps the tensors alive until the work completes.
                for v in &vals {
                    self.escape(v, EscapeKind::Container, span);
                }
                Value::Work(vec![collective])
            }
            ApiCall::DataParallelWrap => self.data_parallel_wrap(args, keywords, span),
            ApiCall::GraphCapture => {
                // A capture context made apart from a `with`: its block is not known here.
                self.eval_args(args, keywords);
                Value::Unknown
            }
            ApiCall::GraphReplay => {
                match args {
                    [graph] if keywords.is_empty() && self.replay(graph, span) => {}
                    _ => {
                        self.eval_args(args, keywords);
                    }
                }
                Value::Unknown
            }
            ApiCall::GraphedCallables => {
                let vals = self.eval_args(args, keywords);
                self.b.push(OpKind::SyncDevice, span);
                // The graphs hold the sample tensors for as long as they live.
                for v in &vals {
                    self.escape(v, EscapeKind::Container, span);
                }
                Value::Unknown
            }
            ApiCall::HostComparison => {
                let vals = self.eval_args(args, keywords);
                self.host_compare(&vals, span);
                Value::Unknown
            }
            ApiCall::RecordStreamWrapper => {
                let vals = self.eval_args(args, keywords);
                if let (Some(t), Some(s_expr)) = (vals.first(), args.get(1)) {
                    if let Some(s) = self.stream_of(&vals[1], s_expr) {
                        for buffer in t.buffers() {
                            self.b
                                .push(OpKind::RecordStream { buffer, stream: s }, span);
                        }
                    }
                }
                Value::Unknown
            }
            ApiCall::WaitStreamWrapper => {
                let vals = self.eval_args(args, keywords);
                if let (Some(a), Some(b)) = (args.first(), args.get(1)) {
                    if let (Some(waiter), Some(waitee)) =
                        (self.stream_of(&vals[0], a), self.stream_of(&vals[1], b))
                    {
                        self.b.push(OpKind::WaitStream { waiter, waitee }, span);
                    }
                }
                Value::Unknown
            }
        }
    }

    /// Where a device argument (`"cuda:0"`, `torch.device("cpu")`, `device`, a dtype) points.
    pub(super) fn target_of(&mut self, expr: &Expr) -> Target {
        // `"cuda:0"`, and f-strings such as `f"cuda:{rank}"` by their leading text.
        let bound = expr.dotted().and_then(|d| match self.env.get(d.as_str()) {
            Some(Value::Text(t)) => Some(t.clone()),
            _ => None,
        });
        let text = match expr {
            Expr::Opaque { parts, .. } => parts.first().and_then(Expr::as_str).map(str::to_string),
            other => other.as_str().map(str::to_string).or(bound),
        };
        if let Some(s) = text {
            return if s.starts_with("cpu") {
                Target::Host
            } else {
                Target::Device
            };
        }
        if let Expr::Call { func, args, .. } = expr {
            if func.dotted().is_some_and(|d| d.ends_with("device")) {
                return args
                    .first()
                    .map(|a| self.target_of(a))
                    .unwrap_or(Target::Device);
            }
        }
        if let Some(d) = expr.dotted() {
            let last = d.rsplit('.').next().unwrap_or(&d).to_ascii_lowercase();
            if last.contains("cpu") || last.contains("host") {
                return Target::Host;
            }
            if d.starts_with("torch.") && !d.contains("device") {
                return Target::SameDevice;
            }
            if ["device", "dev", "gpu", "cuda", "rank"]
                .iter()
                .any(|k| last.contains(k))
            {
                return Target::Device;
            }
        }
        match self.env.get(expr.dotted().unwrap_or_default().as_str()) {
            Some(Value::Tensors(_)) => Target::Device,
            _ => Target::SameDevice,
        }
    }

    pub(super) fn method_call(
        &mut self,
        recv: Value,
        receiver: &Expr,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        if matches!(method, "discard" | "remove") && self.shrink_local_list(receiver, &recv, args) {
            return Value::Unknown;
        }
        // `SideStream().get()` for a class of the module that makes a stream and hands it out:
        // a new stream, as `torch.cuda.Stream()` would be (a temporary unless bound to a name).
        if self.hands_out_a_new_stream(receiver, method) {
            return self.api_call(ApiCall::StreamFactory, "torch.cuda.Stream", &[], &[], span);
        }
        if let Some(theirs) = self.take_from_shared(receiver, method) {
            self.eval_args(args, keywords);
            return theirs;
        }
        if THREAD_QUEUE_PUTS.contains(&method)
            && !matches!(recv, Value::Stream(_) | Value::Event(_))
        {
            // `frames.put(t)`, `future.set_result(t)`: a consumer on another thread takes the
            // value (with any event given along) and uses it on its current stream.
            let vals = self.eval_args(args, keywords);
            self.put_in_shared(receiver, method, &vals, span);
            if let Some(item) = vals.first() {
                self.escape(item, EscapeKind::OtherThread, span);
            }
            return Value::Unknown;
        }
        if THREAD_QUEUE_GETS.contains(&method)
            && args.is_empty()
            && matches!(recv, Value::Unknown | Value::Param(_))
        {
            self.eval_args(args, keywords);
            return self.handed_over_by_thread(span);
        }
        if CONTAINER_METHODS.contains(&method)
            && !matches!(recv, Value::Stream(_) | Value::Event(_))
        {
            // `outputs.append(t)`, `queue.put(t)`: kept, not read.
            let vals = self.eval_args(args, keywords);
            self.put_in_shared(receiver, method, &vals, span);
            if self.grow_local_list(receiver, &recv, method, &vals) {
                return Value::Unknown;
            }
            // `groups[key].append(t)`, `groups.setdefault(key, []).append(t)` on a container
            // this function made: the outer container holds `t` (its items are one value).
            if let Some(outer) = item_of_container(receiver) {
                let held = self.eval(outer);
                if matches!(held, Value::Group(_))
                    && self.grow_local_list(outer, &held, method, &vals)
                {
                    return Value::Unknown;
                }
            }
            for v in &vals {
                self.escape(v, EscapeKind::Container, span);
            }
            return Value::Unknown;
        }
        if let (Expr::Name { id, .. }, "set_") = (receiver, method) {
            // `t.set_(other_storage, ...)`: the name now views another tensor's memory.
            let vals = self.eval_args(args, keywords);
            let viewed = match vals.first() {
                Some(Value::Storage(b)) => Value::Tensors(b.clone()),
                Some(v @ (Value::Tensors(_) | Value::Param(_))) => v.clone(),
                _ => Value::Unknown,
            };
            self.bind(id.clone(), viewed.clone());
            return viewed;
        }
        // `kjt = request.wait()` inside a side-stream block: an awaitable's result (a
        // KeyedJaggedTensor, a gathered tensor) is made by work on that stream.
        if method == "wait"
            && args.is_empty()
            && keywords.is_empty()
            && matches!(recv, Value::Unknown | Value::Param(_))
            && self.current != self.b.ambient()
        {
            let name = self.value_name("result");
            return self.produce(span, &name, Memory::Device, Production::Compute);
        }
        match recv {
            Value::Stream(s) => self.stream_method(s, receiver, method, args, keywords, span),
            Value::Event(e) => self.event_method(e, method, args, keywords, span),
            Value::Storage(buffers) => {
                let vals = self.eval_args(args, keywords);
                let to_zero = matches!(
                    args.first(),
                    Some(Expr::Constant {
                        value: Constant::Int(0),
                        ..
                    })
                );
                if method == "resize_" && to_zero {
                    for buffer in buffers {
                        self.b.push(
                            OpKind::Release {
                                buffer,
                                cause: ReleaseCause::StorageResize,
                            },
                            span,
                        );
                    }
                }
                drop(vals);
                Value::Unknown
            }
            Value::Work(collectives) => {
                self.eval_args(args, keywords);
                // `work.wait()` makes the current stream wait for the collectives.
                if method == "wait" {
                    for waitee in collectives {
                        if waitee != self.current {
                            let waiter = self.current;
                            self.b.push(OpKind::WaitStream { waiter, waitee }, span);
                        }
                    }
                }
                Value::Unknown
            }
            Value::Tensors(_) if method == "copy_to_gpu" && self.holds_host_memory(&recv) => {
                self.eval_args(args, keywords);
                self.pair_copy_to_device(&recv, span);
                Value::Unknown
            }
            Value::Tensors(_) => self.tensor_method(recv, method, args, keywords, span),
            Value::Param(_)
                if TENSOR_METHODS.contains(&method) || VIEW_METHODS.contains(&method) =>
            {
                self.tensor_method(recv, method, args, keywords, span)
            }
            // `staged.clear()`: the list lets go of its tensors, which are freed here unless
            // another name holds them.
            Value::Group(_) if method == "clear" && args.is_empty() => {
                if let Expr::Name { id, .. } = receiver {
                    self.release_name(id, &[], ReleaseCause::Delete, span);
                    self.bind(id.clone(), Value::Group(Vec::new()));
                }
                Value::Unknown
            }
            Value::Group(_) if matches!(method, "values" | "items" | "keys" | "copy") => {
                self.eval_args(args, keywords);
                let held = Value::tensors(recv.buffers());
                match method {
                    // Pairs whose keys are not followed: `for name, t in d.items()`.
                    "items" => Value::Group(vec![Value::Group(vec![Value::Unknown, held])]),
                    "keys" => Value::Unknown,
                    _ => held,
                }
            }
            Value::Unknown if makes_tensor(method) && !constructs_object(receiver) => {
                // `self.next_input.cuda()`, `self.shard.new_empty(n)`: a tensor method on a
                // value the analysis does not track makes a tensor it does.
                self.tensor_method(Value::Unknown, method, args, keywords, span)
            }
            _ => {
                if let Some(made) = self.made_elsewhere_by_method(receiver, &recv, method, span) {
                    return self.tensor_method(made, method, args, keywords, span);
                }
                let vals = self.eval_args(args, keywords);
                if method == "pin_memory" {
                    let name = self.value_name("pinned");
                    return self.produce(span, &name, Memory::PinnedHost, Production::Host);
                }
                if let Some(copy) = self.host_transfer_call(&recv, method, args, keywords, span) {
                    return copy;
                }
                // `self.pending.get(key)`, `self.stash.pop(key)`: an item of the object's.
                if matches!(recv, Value::Unknown) {
                    if let Some(item) = self.container_call(receiver, method, span) {
                        return item;
                    }
                }
                if method == "record_stream" {
                    // `obj.record_stream(s)` on something not known as a tensor: not ours to judge.
                    return Value::Unknown;
                }
                if returns_the_module(method) && constructs_object(receiver) {
                    // `Net().cuda().eval()`: the module just built, not a value of the contract.
                    return Value::Unknown;
                }
                if matches!(receiver, Expr::Name { id, .. } if id == "self") {
                    // `self.encoder(x)`: a submodule.
                    return self.module_call(Some(method.to_string()), vals, args.len(), span);
                }
                if method.ends_with('_')
                    && !method.starts_with('_')
                    && TENSOR_METHODS.contains(&method)
                {
                    // `param._cpu_grad.copy_(g)`: an in-place tensor op on a tensor we do not
                    // track; it reads its tensor arguments on the current stream.
                    let inputs = self.tensor_buffers(&vals);
                    self.read_all(&inputs, span);
                    return Value::Unknown;
                }
                if THREAD_HAND_OFFS.contains(&method) {
                    // `pool.submit(fn, t, event)`: the values go to code on another thread,
                    // which orders its own streams; nothing runs on this one.
                    for v in &vals {
                        self.escape(v, EscapeKind::UnknownCallee, span);
                    }
                    return Value::Unknown;
                }
                if !self.tensor_buffers(&vals).is_empty() {
                    // `attn.norm_out(h)`: a method given tensors, most often a submodule. Its
                    // other arguments are not known to be tensors (`cache.run(model, key, x)`).
                    return self.module_call(Some(method.to_string()), vals, 0, span);
                }
                // A method of some other object: it may keep its arguments.
                for v in &vals {
                    self.escape(v, EscapeKind::UnknownCallee, span);
                }
                self.received_from_unseen_code(span)
            }
        }
    }

    /// Is `name` (the last part of a callee's name) named for keeping its arguments
    /// (`push_tensor`, `enqueue_copy`, `store`), or a class (`Adam`, `optimizer_class`: a
    /// constructor keeps what it is given)? (The class's own methods are applied through its
    /// summary before this.)
    fn stores_rather_than_computes(name: &str) -> bool {
        const KEEPING: [&str; 13] = [
            "push", "put", "append", "add", "set", "store", "save", "register", "stash", "insert",
            "cache", "extend", "enqueue",
        ];
        let class = names_a_class(name) || name.ends_with("class") || name.ends_with("cls");
        let name = name.trim_start_matches('_');
        class || KEEPING.iter().any(|verb| name.starts_with(verb))
    }

    /// A call of a module or callable object (`self.encoder(x)`, `model(x)`): its first
    /// positional argument is a tensor. A backward function's results come from the streams the
    /// forward ops ran on, not from the current one.
    pub(super) fn module_call(
        &mut self,
        callee: Option<String>,
        vals: Vec<Value>,
        positional: usize,
        span: Span,
    ) -> Value {
        self.alias_streams(&vals);
        // What code not seen returned is a tensor only where it is used as one for sure: a
        // callable held in a name may be a class (`gossiper_class(flatten(params), ..)`).
        let received =
            |v: &Value| matches!(v, Value::Param(b) if self.received_buffers.contains(b));
        if positional > 0 && !received(&vals[0]) {
            self.confirm(&vals[..1]);
        }
        let last = callee
            .as_deref()
            .and_then(|c| c.rsplit('.').next())
            .unwrap_or("");
        let kind = if last.contains("backward") || last == "grad" {
            Callee::LocalFunction
        } else if Self::stores_rather_than_computes(last) {
            // `group.push_tensor(tag, state)`, `optimizer_class(params)`: what files its
            // arguments away is not a module computing on them.
            Callee::Keeping
        } else {
            Callee::Module
        };
        self.opaque_call(vals, span, kind)
    }
}

/// The container a receiver is an item of (`groups` in `groups[key]` and in
/// `groups.setdefault(key, [])` or `groups.get(key)`), where it is a plain name.
fn item_of_container(receiver: &Expr) -> Option<&Expr> {
    let outer = match receiver {
        Expr::Subscript { value, .. } => value.as_ref(),
        Expr::Call { func, .. } => match func.as_ref() {
            Expr::Attribute { value, attr, .. } if attr == "setdefault" || attr == "get" => {
                value.as_ref()
            }
            _ => return None,
        },
        _ => return None,
    };
    matches!(outer, Expr::Name { .. }).then_some(outer)
}
