//! Stream and event methods (`wait_stream`, `record_event`, `record`, `wait`), and values that
//! are streams or events by the methods called on them.

use super::*;

/// `streams[i]`, `self.comm_streams[rank]`: one stream of a collection of streams, named by the
/// text of the indexing, so that indexing again with the same name gives the same stream.
pub(super) fn indexed_stream(container: &Expr, index: &Expr) -> Option<String> {
    let base = container.dotted()?;
    let last = base.rsplit('.').next().unwrap_or(&base);
    if !last.to_ascii_lowercase().contains("stream") {
        return None;
    }
    let key = match index {
        Expr::Constant {
            value: Constant::Int(n),
            ..
        } => n.to_string(),
        other => other.dotted()?,
    };
    Some(format!("{base}[{key}]"))
}

/// Is the expression, by its spelling, a stream (`side_stream`, `self.aux_stream`,
/// `torch.cuda.current_stream()`)?
fn names_a_stream(expr: &Expr) -> bool {
    let spelled = match expr {
        Expr::Call { func, .. } => func.dotted(),
        other => other.dotted(),
    };
    spelled.is_some_and(|s| {
        let last = s.rsplit('.').next().unwrap_or(&s).to_ascii_lowercase();
        last.contains("stream")
    })
}

impl<'a> Lowerer<'a> {
    /// A receiver whose kind is not known, classified by the method called on it: only streams
    /// have `wait_stream`, and an event-named value that is recorded or waited on is an event.
    pub(super) fn duck_type(
        &mut self,
        recv: Value,
        receiver: &Expr,
        method: &str,
        args: &[Expr],
        keywords_len: usize,
    ) -> Value {
        let args_len = args.len() + keywords_len;
        if !matches!(recv, Value::Unknown | Value::Param(_)) {
            return recv;
        }
        let Some(name) = receiver.dotted() else {
            return recv;
        };
        let last = name
            .rsplit('.')
            .next()
            .unwrap_or(&name)
            .to_ascii_lowercase();
        let stream_like = last.contains("stream");
        let event_like = last.contains("event")
            || last == "ev"
            || last.ends_with("_ev")
            || last.ends_with("_evt")
            // `ready.record()` on a local: only events record themselves with no argument.
            || (method == "record" && args_len == 0 && !name.contains('.'))
            // `fork.record(current_stream())`, `fork.wait(side_stream)`: only events are
            // recorded on, or waited for by, a stream given as the one argument.
            || (matches!(method, "record" | "wait")
                && args_len == 1
                && args.first().is_some_and(names_a_stream));
        match method {
            "wait_stream" | "wait_event" | "record_event" => {
                Value::Stream(self.named_stream(&name))
            }
            "synchronize" if stream_like => Value::Stream(self.named_stream(&name)),
            "record" | "wait" | "synchronize" | "query" if event_like => {
                let event = Value::Event(self.attribute_event(&name));
                // `ev = make_event(); ev.record(s); return ev`: the name holds the event from
                // here on.
                if let Expr::Name { id, .. } = receiver {
                    self.bind(id.clone(), event.clone());
                }
                event
            }
            _ => recv,
        }
    }

    /// `s.wait_stream(torch.cuda.current_stream())` directly in `with torch.cuda.stream(s):`
    /// waits on itself; before the block's header the argument means the stream it was
    /// written for.
    pub(super) fn note_hoistable_wait(
        &mut self,
        waiter: StreamId,
        waitee: StreamId,
        receiver: &Expr,
        arg: &Expr,
        span: Span,
    ) {
        let asks_current = |e: &Expr| self.api_kind(e) == Some(ApiCall::CurrentStream);
        let named_waiter = !asks_current(receiver);
        // Only straight-line code at the top of the block: hoisting out of a branch or a loop
        // would change how often the wait runs.
        if let Some(&(block_stream, header, start)) = self.stream_blocks.last() {
            let straight = self.b.current() == start;
            if waiter == waitee
                && waiter == block_stream
                && asks_current(arg)
                && named_waiter
                && straight
            {
                self.b.rewrites_mut().hoistable_waits.push((span, header));
            }
        }
    }

    /// The stream blocks of a `with` statement whose body emitted the ops from `first_op` on:
    /// where fixes can tell the current stream (see `Rewrites::stream_blocks`). A trial pass
    /// over a loop is undone, and so are its blocks; a callee's blocks are not the caller's code.
    pub(super) fn note_stream_blocks(
        &mut self,
        made_current: &[(StreamId, Span)],
        outside: StreamId,
        first_op: OpId,
    ) {
        if self.in_trial || self.inlining() {
            return;
        }
        let end = self.b.next_op();
        let mut outer = outside;
        for &(stream, header) in made_current {
            self.b.rewrites_mut().stream_blocks.push(StreamBlock {
                header,
                stream,
                outer,
                ops: (first_op, end),
            });
            outer = stream;
        }
    }

    /// The stream a wait on `arg` orders after. A library function does not know that its
    /// caller runs on the device's default stream: gradient hooks run on the backward op's
    /// stream, callers may be inside `with torch.cuda.stream(...)`. So a wait on
    /// `default_stream()` written in a function orders nothing the function's current stream
    /// did; it stands for a stream of its own. Script entry points (module code, `main`) do run
    /// on the default stream.
    pub(super) fn wait_target(&mut self, stream: StreamId, arg: &Expr) -> StreamId {
        let script = self.at_import || self.main_guard > 0 || self.method == "main";
        if script
            || stream != self.b.ambient()
            || self.api_kind(arg) != Some(ApiCall::DefaultStream)
        {
            return stream;
        }
        let stream = Stream {
            display: "the default stream".into(),
            expr: "torch.cuda.default_stream()".into(),
            origin: StreamOrigin::Unknown,
            span: Some(arg.span()),
            home: None,
        };
        StreamId(self.site(arg.span(), "default-stream", |b| b.add_stream(stream).0))
    }

    pub(super) fn stream_method(
        &mut self,
        s: StreamId,
        receiver: &Expr,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let vals = self.eval_args(args, keywords);
        let arg = args.first();
        match method {
            "wait_stream" => {
                if let (Some(a), Some(v)) = (arg, vals.first()) {
                    if let Some(other) = self.stream_of(v, a) {
                        let other = self.wait_target(other, a);
                        self.note_hoistable_wait(s, other, receiver, a, span);
                        self.b.push(
                            OpKind::WaitStream {
                                waiter: s,
                                waitee: other,
                            },
                            span,
                        );
                    }
                }
                Value::Unknown
            }
            "wait_event" => {
                if let (Some(a), Some(v)) = (arg, vals.first()) {
                    if let Some(e) = self.event_of(v, a) {
                        self.b.push(
                            OpKind::WaitEvent {
                                event: e,
                                stream: s,
                            },
                            span,
                        );
                    }
                }
                Value::Unknown
            }
            "record_event" => {
                let e = match vals.first() {
                    Some(Value::Event(e)) => *e,
                    _ => {
                        // Made here and recorded as it is made: no wait can come before its
                        // record.
                        let name = self.value_name("event");
                        self.event_at(span, &name, true)
                    }
                };
                self.b.push(
                    OpKind::RecordEvent {
                        event: e,
                        stream: s,
                    },
                    span,
                );
                Value::Event(e)
            }
            "synchronize" => {
                self.sync_stream(s, span);
                Value::Unknown
            }
            "get" | "setdefault" | "__getitem__" => Value::Stream(s),
            _ => Value::Unknown,
        }
    }

    pub(super) fn event_method(
        &mut self,
        e: EventId,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let vals = self.eval_args(args, keywords);
        let stream_arg = args.first().or_else(|| Expr::keyword(keywords, "stream"));
        let stream = match (stream_arg, vals.first()) {
            (Some(a), Some(v)) => self.stream_of(v, a).unwrap_or(self.current),
            _ => self.current,
        };
        match method {
            "record" => {
                self.b.push(OpKind::RecordEvent { event: e, stream }, span);
                // Recording an event the function received (a parameter, an attribute) hands
                // the ordering to whoever holds it: the receiver waits on it.
                if self.b.body().events[e.0 as usize].created.is_none() {
                    self.b.push(OpKind::HandOffEvent { event: e }, span);
                }
            }
            "wait" => drop(self.b.push(OpKind::WaitEvent { event: e, stream }, span)),
            "synchronize" => drop(self.b.push(OpKind::SyncEvent { event: e }, span)),
            _ => {}
        }
        Value::Unknown
    }

    /// A stream known by its source text: an attribute, a parameter, a cached stream.
    pub(super) fn named_stream(&mut self, name: &str) -> StreamId {
        let is_param = self.params.iter().any(|p| p == name);
        // A module global (`copy_stream = ...` at the top of the module) is one stream for the
        // function and every callee of its module lowered in place; other names are the
        // function's own.
        let plain = !name.contains(['.', '[']) && !is_param;
        // A global another module of the project binds, imported here by name
        // (`from .streams import copy_stream`): that module's stream, the same in its code.
        let imported = plain
            .then(|| self.cx.imports.bound(name))
            .flatten()
            .and_then(|q| {
                let m = self.cx.project.module_of_global(self.cx.module, q)?;
                Some((m, q.rsplit('.').next().unwrap_or(q).to_string()))
            });
        let global = imported.is_some()
            || (plain
                && self
                    .cx
                    .project
                    .module(self.cx.module)
                    .globals
                    .contains(name));
        let global_key = imported.unwrap_or_else(|| (self.cx.module, name.to_string()));
        let known = if global {
            self.global_streams.get(&global_key)
        } else {
            self.named_streams.get(name)
        };
        if let Some(s) = known {
            return *s;
        }
        let origin = if global {
            StreamOrigin::Global
        } else if name.starts_with("self.") {
            StreamOrigin::Attribute
        } else if is_param {
            StreamOrigin::Parameter
        } else {
            StreamOrigin::Unknown
        };
        let home = global.then(|| self.global_home(name));
        let id = self.b.add_stream(Stream {
            display: format!("`{name}`"),
            expr: name.to_string(),
            origin,
            span: None,
            home,
        });
        self.note_thread_local_stream(name, id);
        if origin == StreamOrigin::Attribute && self.unordered_own_stream(name) {
            self.b.unordered_on_entry(id);
        }
        if global {
            self.global_streams.insert(global_key, id);
        } else {
            self.named_streams.insert(name.to_string(), id);
        }
        id
    }

    /// Is `self.x` a stream the object makes for itself that nothing in the checked files
    /// orders after other work (see `ClassSummary::unordered_own_stream`)?
    fn unordered_own_stream(&self, name: &str) -> bool {
        let last = name.rsplit('.').next().unwrap_or(name);
        self.class.is_some_and(|c| c.unordered_own_stream(name))
            && !self.cx.project.orders_stream_of_others(last)
    }

    /// `_STREAMS[device] = stream` in a dict the module binds at the top level: a getter that
    /// makes one stream per device and caches it, which is one long-lived stream as much as
    /// `global _side; _side = torch.cuda.Stream()` is (known by the dict's qualified name).
    /// The store is the cache, not a hand-off of the stream to code not followed: says
    /// whether it was one.
    pub(super) fn cache_stream_in_global(&mut self, s: StreamId, container: &str) -> bool {
        let module_dict = !self.env.contains_key(container)
            && self
                .cx
                .project
                .module(self.cx.module)
                .globals
                .contains(container);
        if !module_dict || self.b.body().stream(s).origin != StreamOrigin::Created {
            return false;
        }
        let home = self.global_home(container);
        let stream = self.b.stream_mut(s);
        stream.origin = StreamOrigin::Cached;
        stream.home = Some(home);
        true
    }

    /// The qualified name of the module global `name` (of the module being lowered, or the one
    /// it was imported from): how every file knows the stream it holds.
    pub(super) fn global_home(&self, name: &str) -> String {
        match self.cx.imports.bound(name) {
            Some(qualified) => qualified.to_string(),
            None => format!("{}.{name}", self.cx.project.module(self.cx.module).name),
        }
    }

    /// Streams among `values` go to code that is not followed, under other names.
    pub(super) fn alias_streams(&mut self, values: &[Value]) {
        for v in values {
            if let Value::Stream(s) = v {
                self.b.alias_stream(*s);
            }
        }
    }
}
