//! Statements: assignments, `with` blocks, returns, deletes, branches.

use super::*;

impl<'a> Lowerer<'a> {
    pub(super) fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Def(f) => {
                self.bind(f.name.clone(), Value::Unknown);
            }
            Stmt::Class(c) => {
                self.bind(c.name.clone(), Value::Unknown);
            }
            Stmt::Return { value, .. } if self.inlining() => {
                let v = value.as_ref().map_or(Value::None, |v| self.eval(v));
                self.inline_return(v);
            }
            Stmt::Return { value, span } => {
                if let Some(v) = value {
                    let v = self.eval(v);
                    self.hand_to_caller(&v, *span);
                }
                self.jump(self.exit);
            }
            Stmt::Delete { targets, span } => {
                for t in targets {
                    if let Expr::Name { id, .. } = t {
                        self.release_name(id, &[], ReleaseCause::Delete, *span);
                        self.unbind(id);
                    }
                }
            }
            Stmt::Assign {
                targets,
                value,
                augmented,
                span,
            } => self.assign_stmt(targets, value, *augmented, *span),
            Stmt::For {
                target,
                iter,
                body,
                orelse,
                span,
            } => {
                if orelse.is_empty() && self.unrolled_stream_loop(target, iter, body) {
                    return;
                }
                // A loop over a list known to hold items runs its body at least once. So, as
                // for an `if` that only waits, does a loop that only waits (one wait per device
                // of the inputs): when it runs no time, nothing needed a wait.
                let only_orders =
                    orelse.is_empty() && !body.is_empty() && body.iter().all(is_ordering_stmt);
                let at_least_once = only_orders || self.iterates_filled_list(iter);
                let element = self.loop_element(iter, target);
                let loop_target = LoopTarget {
                    target,
                    element,
                    at_least_once,
                };
                let iterated = match (target, iter) {
                    (Expr::Name { id: name, .. }, Expr::Name { id: list, .. }) => {
                        Some((name.clone(), list.clone()))
                    }
                    _ => None,
                };
                let named = iterated.is_some();
                self.iterated.extend(iterated);
                self.lower_loop(None, Some(loop_target), body, orelse, *span);
                if named {
                    self.iterated.pop();
                }
            }
            Stmt::While {
                test,
                body,
                orelse,
                span,
            } => self.lower_loop(Some(test), None, body, orelse, *span),
            Stmt::If {
                test,
                body,
                orelse,
                span,
            } => {
                // `if side is not None: main.wait_stream(side)`: see `orders_only_what_it_tests`.
                // Also where a split or a constant decides the test: on its false path the stream
                // is absent or current, and a wait there orders nothing.
                if orelse.is_empty()
                    && flags::orders_only_what_it_tests(test, body, &self.stream_guards)
                {
                    self.eval(test);
                    return self.stmts(body);
                }
                // Guards that are constant on CUDA: lower only the branch CUDA takes.
                let decided = self
                    .cx
                    .api
                    .cuda_truth(test, self.cx.imports)
                    .or_else(|| self.decided_flag(test));
                match decided {
                    Some(true) => return self.stmts(body),
                    Some(false) => return self.stmts(orelse),
                    None => {}
                }
                if is_main_guard(test) {
                    self.main_guard += 1;
                    self.stmts(body);
                    self.main_guard -= 1;
                    return self.stmts(orelse);
                }
                self.truth_test(test, *span);
                self.note_device_tests(test, test.span());
                let from = self.b.current();
                let before = self.env.clone();
                let before_current = self.current;
                let carried_before = self.carried.len();
                let test_text = self.cx.text(test.span());
                let first_op = self.b.body().ops.len();
                self.branch(from);
                self.leave_out_absent_value(test, true, *span);
                self.stmts(body);
                // (A callee whose text is not at hand is lowered without words for its tests.)
                if !test_text.is_empty() {
                    self.b.conditional_from(first_op, || {
                        format!("`{}` is false", one_line(test_text))
                    });
                }
                let then_carried = self.carried[carried_before..].to_vec();
                let then_env = std::mem::replace(&mut self.env, before);
                let then_current = std::mem::replace(&mut self.current, before_current);
                let then_end = self.b.current();
                let first_op = self.b.body().ops.len();
                self.branch(from);
                self.leave_out_absent_value(test, false, *span);
                self.stmts(orelse);
                if !test_text.is_empty() {
                    self.b.conditional_from(first_op, || {
                        format!("`{}` is true", one_line(test_text))
                    });
                }
                let else_carried = self.carried[carried_before + then_carried.len()..].to_vec();
                // The new instances each branch made, made at the other's end as well.
                self.carry_as_the_other_branch(&then_carried, &else_carried, *span);
                let else_end = self.b.current();
                let else_env = std::mem::replace(&mut self.env, then_env);
                self.b.switch_to(then_end);
                self.carry_as_the_other_branch(&else_carried, &then_carried, *span);
                let then_end = self.b.current();
                let then_env = std::mem::replace(&mut self.env, else_env);
                // A stream set on one branch only (a first call making its own stream current)
                // is not known to be current after the `if`: keep the one before it.
                if then_current != self.current {
                    self.current = before_current;
                }
                let join = self.b.new_block();
                self.b.edge(then_end, join);
                self.b.edge(else_end, join);
                self.b.switch_to(join);
                self.env = merge_env(&then_env, &self.env);
            }
            Stmt::With { items, body, .. } => {
                // `with on_side(s):` of a project's generator context manager: its code, with
                // the block where it yields.
                if let [item] = items.as_slice() {
                    if let Some((callee, args, keywords)) =
                        self.context_manager_callee(&item.context)
                    {
                        let block = context_managers::WithBlock {
                            body: body.clone(),
                            var: item.var.clone(),
                        };
                        let span = item.context.span();
                        self.inline_call_around(callee, args, keywords, span, Some(block));
                        return;
                    }
                }
                // `with torch.cuda.graph(g), torch.inference_mode():` captures the block; the
                // other contexts only shape work that does not run here.
                let graph = items
                    .iter()
                    .find_map(|i| Some((self.graph_capture(&i.context)?, i.context.span())));
                if let Some((graph, span)) = graph {
                    self.capture_entry_sync(span);
                    self.capture(graph, body, span);
                    return;
                }
                let saved = self.current;
                let outer_blocks = self.stream_blocks.len();
                let mut acquired = Vec::new();
                let mut made_current = Vec::new();
                for item in items {
                    self.entering_context = true;
                    let v = self.eval(&item.context);
                    self.entering_context = false;
                    let v = self.stream_context_by_shape(v, &item.context);
                    match v {
                        Value::StreamContext(Some(s)) | Value::Stream(s) => {
                            self.current = s;
                            let start = self.b.current();
                            self.stream_blocks.push((s, item.context.span(), start));
                            made_current.push((s, item.context.span()));
                        }
                        _ => {
                            acquired.extend(self.acquired_streams(&item.context));
                            if let Some(var) = &item.var {
                                self.assign(var, Value::Unknown, item.context.span());
                            }
                        }
                    }
                }
                acquired.retain(|(s, _)| *s != saved);
                for &(s, span) in &acquired {
                    let wait = self.b.push(
                        OpKind::WaitStream {
                            waiter: s,
                            waitee: saved,
                        },
                        span,
                    );
                    self.b.assume_wait(wait);
                }
                let first_op = self.b.next_op();
                self.stmts(body);
                self.note_stream_blocks(&made_current, saved, first_op);
                self.stream_blocks.truncate(outer_blocks);
                self.current = saved;
                for &(s, span) in &acquired {
                    self.b.push(
                        OpKind::WaitStream {
                            waiter: saved,
                            waitee: s,
                        },
                        span,
                    );
                }
            }
            Stmt::Try {
                body,
                handlers,
                orelse,
                finalbody,
                ..
            } => {
                let restoring = self.cx.sets_stream(finalbody);
                self.restoring_try += usize::from(restoring);
                let from = self.b.current();
                let before = self.env.clone();
                self.branch(from);
                self.stmts(body);
                self.stmts(orelse);
                let body_end = self.b.current();
                let mut ends = vec![body_end];
                let mut envs = vec![self.env.clone()];
                let handler_env = merge_env(&before, &self.env);
                for h in handlers {
                    self.env = handler_env.clone();
                    let start = self.branch(from);
                    self.b.edge(body_end, start);
                    self.stmts(h);
                    ends.push(self.b.current());
                    envs.push(self.env.clone());
                }
                let join = self.b.new_block();
                for e in ends {
                    self.b.edge(e, join);
                }
                self.b.switch_to(join);
                self.env = envs
                    .iter()
                    .skip(1)
                    .fold(envs[0].clone(), |acc, e| merge_env(&acc, e));
                self.stmts(finalbody);
                self.restoring_try -= usize::from(restoring);
            }
            Stmt::Match { subject, cases } => {
                self.eval(subject);
                let from = self.b.current();
                let before = self.env.clone();
                let join = self.b.new_block();
                let mut merged: Option<Env> = None;
                for case in cases {
                    self.env = before.clone();
                    self.branch(from);
                    self.stmts(case);
                    let end = self.b.current();
                    self.b.edge(end, join);
                    merged = Some(match merged {
                        Some(m) => merge_env(&m, &self.env),
                        None => self.env.clone(),
                    });
                }
                self.b.edge(from, join);
                self.b.switch_to(join);
                self.env = merge_env(&before, &merged.unwrap_or_default());
            }
            Stmt::Raise => self.dead_end(),
            Stmt::Import { names } | Stmt::ImportFrom { names, .. } => {
                for (name, alias) in names {
                    let bound = alias
                        .clone()
                        .unwrap_or_else(|| name.split('.').next().unwrap_or(name).to_string());
                    self.unbind(&bound);
                }
            }
            // The `yield` of a context manager lowered around a `with` block lowers the block.
            Stmt::Expr(Expr::Yield { value, span })
                if self.yield_to_with_block(value.as_deref(), *span) => {}
            Stmt::Expr(e) => match self.forwarded_statements(e) {
                Some(stmts) => self.stmts(&stmts),
                None => {
                    if !self.moved_module(e) {
                        let outer = self.discarded.replace(e.span());
                        self.eval(e);
                        self.discarded = outer;
                    }
                }
            },
            Stmt::Break => {
                if let Some(&(_, brk)) = self.loops.last() {
                    self.jump(brk);
                }
            }
            Stmt::Continue => {
                if let Some(&(head, _)) = self.loops.last() {
                    self.jump(head);
                }
            }
            Stmt::Assert { test, span } => self.truth_test(test, *span),
            Stmt::Global(names) => self.declared_globals.extend(names.iter().cloned()),
            Stmt::Other => {}
        }
    }

    /// Could `value` be a test of what a stream is (`s is not None`, `isinstance(s, ..)`,
    /// `current != s`)? Most assignments are not, and are not looked into further.
    fn may_test_streams(&self, value: &Expr) -> bool {
        match value {
            Expr::Operator {
                op: Operator::Is | Operator::IsNot | Operator::And,
                ..
            } => true,
            Expr::Operator {
                op: Operator::Arithmetic,
                operands,
                span,
            } => {
                operands.len() == 2 && {
                    let text = self.cx.text(*span);
                    memchr::memmem::find(text, b"!=").is_some()
                        || memchr::memmem::find(text, b"==").is_some()
                }
            }
            Expr::Call { func, .. } => {
                matches!(func.as_ref(), Expr::Name { id, .. } if id == "isinstance")
            }
            _ => false,
        }
    }

    /// On the branch where a test says a value is `None` or host memory, the device tensor it
    /// held elsewhere is not there: its pending work and keep-alive needs are the other
    /// branch's.
    fn leave_out_absent_value(&mut self, test: &Expr, taken: bool, span: Span) {
        let text = self.cx.text(test.span());
        let Some((name, absent)) = flags::absent_on_branch(test, taken, text) else {
            return;
        };
        let Some(value) = self.env.get(name.as_str()) else {
            return;
        };
        for buffer in value.buffers() {
            self.b.push(OpKind::Absent { buffer }, span);
        }
        // A host value keeps its name (it is still read and written there, on the host).
        if absent == flags::Absent::None {
            self.env.insert(name.into(), Value::None);
        }
    }

    /// The test of an `if`, `while` or `assert`: a tensor's truth is read on the host, which
    /// waits for the current stream (`if torch.isnan(loss).any():`, `assert (a == b).all()`).
    pub(super) fn truth_test(&mut self, test: &Expr, span: Span) {
        let value = self.eval(test);
        if !value.local_tensors().is_empty() {
            self.host_read(&value, span);
        }
    }

    /// `with device_module.stream(s):` through a handle the model does not know: a `.stream(..)`
    /// method given a stream is a stream context; so is a callable parameter named for one
    /// (`with stream_context(source_stream):`, the caller passing `torch.cuda.stream`).
    pub(super) fn stream_context_by_shape(&mut self, value: Value, context: &Expr) -> Value {
        if !matches!(value, Value::Unknown) {
            return value;
        }
        let Expr::Call { func, args, .. } = context else {
            return value;
        };
        let Some(arg) = args.first() else {
            return value;
        };
        let shaped = match func.as_ref() {
            Expr::Attribute { attr, .. } => attr == "stream",
            Expr::Name { id, .. } => {
                let lower = id.to_ascii_lowercase();
                self.params.iter().any(|p| p == id)
                    && lower.contains("stream")
                    && (lower.contains("context") || lower.contains("ctx"))
            }
            _ => false,
        };
        if !shaped {
            return value;
        }
        let stream = match arg.dotted().and_then(|d| self.env.get(d.as_str()).cloned()) {
            Some(Value::Stream(s)) => Some(s),
            _ => arg
                .dotted()
                .filter(|d| d.to_ascii_lowercase().contains("stream"))
                .map(|d| self.named_stream(&d)),
        };
        stream.map_or(value, |s| Value::StreamContext(Some(s)))
    }

    /// Streams handed to a context manager the analysis does not know
    /// (`with stream_acquire_context(self.stream, self.event):`). Such helpers exist to order
    /// the stream with the caller's; the analysis takes them to wait for the current stream on
    /// entry and to make the current stream wait for them on exit.
    pub(super) fn acquired_streams(&mut self, context: &Expr) -> Vec<(StreamId, Span)> {
        let Expr::Call {
            args,
            keywords,
            span,
            ..
        } = context
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for a in args.iter().chain(keywords.iter().map(|k| &k.value)) {
            if let Some(Value::Stream(s)) =
                a.dotted().and_then(|d| self.env.get(d.as_str()).cloned())
            {
                out.push((s, *span));
            } else if let Some(d) = a
                .dotted()
                .filter(|d| d.rsplit('.').next().is_some_and(|l| l.contains("stream")))
            {
                let s = self.named_stream(&d);
                out.push((s, *span));
            }
        }
        out
    }

    /// Does the expression make a dict (`{}`, `{k: v}`, `dict()`, `defaultdict(list)`)? A loop
    /// over one goes over its keys.
    fn makes_a_dict(&self, value: &Expr) -> bool {
        match value {
            Expr::Collection { span, .. } | Expr::Comprehension { span, .. } => {
                let text = self.cx.text(*span);
                text.starts_with(b"{") && (text == b"{}" || memchr::memchr(b':', text).is_some())
            }
            Expr::Call { func, .. } => func.dotted().is_some_and(|d| {
                let last = d.rsplit('.').next().unwrap_or(&d);
                matches!(last, "dict" | "defaultdict" | "OrderedDict" | "Counter")
            }),
            _ => false,
        }
    }

    pub(super) fn assign_stmt(
        &mut self,
        targets: &[Expr],
        value: &Expr,
        augmented: bool,
        span: Span,
    ) {
        if augmented {
            let v = self.eval(value);
            let mut t = self.eval(&targets[0]);
            // `flat /= world_size` on a value from outside the body (code not seen, an argument)
            // is an in-place write, as `flat.div_(world_size)` is, and says the value is a
            // tensor; so is an update of some of its elements (`emb[idx] -= step`). `ptr +=
            // offset` and `count -= 1` on a name are as often on numbers.
            let text = self.cx.text(span);
            let scales = [&b"*="[..], b"/="]
                .iter()
                .any(|op| memchr::memmem::find(text, op).is_some());
            if scales || matches!(targets[0], Expr::Subscript { .. }) {
                if let Expr::Name { id, .. } = &targets[0] {
                    if let Some(made) = self.made_elsewhere(id, span) {
                        t = made;
                    }
                }
                if let Value::Param(_) = t {
                    self.confirm(std::slice::from_ref(&t));
                }
            }
            let written = self.tensor_buffers(std::slice::from_ref(&t));
            if !written.is_empty() {
                self.read_all(&v.buffers(), span);
                self.write_all(&written, span);
            }
            return;
        }
        if let [Expr::Name { id, .. }] = targets {
            if self.makes_a_dict(value) {
                self.dict_locals.insert(id.clone());
            } else {
                self.dict_locals.remove(id.as_str());
            }
        }
        // `a, b = x, y`: pair the elements.
        if let (Some(Expr::Collection { elts: names, .. }), Expr::Collection { elts: values, .. }) =
            (targets.first(), value)
        {
            if targets.len() == 1 && names.len() == values.len() {
                let vals: Vec<Value> = values.iter().map(|v| self.eval(v)).collect();
                for (n, v) in names.iter().zip(vals) {
                    self.assign(n, v, span);
                }
                return;
            }
        }
        if let Some(module) = self.cx.device_module(value) {
            for t in targets {
                if let Expr::Name { id, .. } = t {
                    self.bind(id.clone(), Value::Module(module.clone()));
                }
            }
            return;
        }
        // `on_side = torch.cuda.current_stream() != self.copy_stream`: a later `if on_side:`
        // tests what this tests.
        if let [Expr::Name { id, .. }] = targets {
            let mut subjects = Vec::new();
            if self.may_test_streams(value) {
                crate::guards::guarded_subjects(value, &self.stream_guards, &mut subjects);
            }
            if subjects.is_empty() {
                self.stream_guards.remove(id);
            } else {
                self.stream_guards.insert(id.clone(), subjects);
            }
            // `side = torch.cuda.Stream() if use_side else nullcontext()`: `use_side` says
            // whether `side` is a stream, so `if use_side:` guards its waits.
            if let Expr::IfExp { test, .. } = value {
                if let Expr::Name { id: flag, .. } = test.as_ref() {
                    let guarded = self
                        .stream_guards
                        .entry(flag.clone())
                        .or_insert_with(|| vec![flag.clone()]);
                    guarded.push(id.clone());
                }
            }
        }
        self.binding = targets.first().and_then(binding_name);
        self.binding_value = Some(value.span());
        let v = self.eval(value);
        self.note_thread_local_binding(targets, value, &v);
        self.binding = None;
        self.binding_value = None;
        self.fresh_value = true;
        for t in targets {
            self.assign(t, v.clone(), span);
        }
        self.fresh_value = false;
    }

    pub(super) fn assign(&mut self, target: &Expr, value: Value, span: Span) {
        match target {
            Expr::Name { id, .. } => {
                if let Value::Stream(s) = value {
                    let stream = self.b.stream_mut(s);
                    if stream.origin == StreamOrigin::Temporary {
                        stream.origin = StreamOrigin::Created;
                        stream.display = format!("`{id}`");
                        stream.expr = id.clone();
                    }
                }
                let keep = value.buffers();
                self.release_name(id, &keep, ReleaseCause::Rebind, span);
                self.remember_global(id, &value);
                self.forget_attributes_of(id);
                self.bind(id.clone(), value);
            }
            Expr::Attribute {
                value: owner, attr, ..
            } => {
                if attr == "data" {
                    if let Expr::Name { id, .. } = owner.as_ref() {
                        if let Some(old) = self.env.get(id.as_str()).cloned() {
                            for buffer in old.buffers() {
                                self.b.push(
                                    OpKind::Release {
                                        buffer,
                                        cause: ReleaseCause::DataAssign,
                                    },
                                    span,
                                );
                            }
                            self.bind(id.clone(), value);
                            return;
                        }
                    }
                }
                self.escape(&value, EscapeKind::Attribute, span);
                // `batch.x = t` on an object the caller passed in: the caller gets it back.
                let root = root_name(target);
                if root.is_some_and(|r| {
                    r != "self" && r != "cls" && self.params.iter().any(|p| p == r)
                }) {
                    for buffer in value.local_tensors() {
                        self.left_on_arguments.push((buffer, span));
                    }
                }
                if let Some(d) = target.dotted() {
                    self.bind(d, value);
                }
            }
            Expr::Subscript {
                value: container,
                index,
                ..
            } => {
                let c = self.eval(container);
                self.eval(index);
                if let (Value::Stream(s), Expr::Name { id, .. }) = (&value, container.as_ref()) {
                    if self.cache_stream_in_global(*s, id) {
                        return;
                    }
                }
                // `staged[key] = t` in a dict or list this function made: it holds `t` now, as
                // after `append`.
                if matches!(c, Value::Group(_))
                    && self.grow_local_list(container, &c, "append", std::slice::from_ref(&value))
                {
                    return;
                }
                self.keep_for_another_method(container, &value, span);
                let written = c.local_tensors();
                if written.is_empty() {
                    self.escape(&value, EscapeKind::Container, span);
                } else {
                    let inputs = self.tensor_buffers(std::slice::from_ref(&value));
                    self.read_all(&inputs, span);
                    self.write_all(&written, span);
                }
            }
            Expr::Collection { elts, .. } => {
                let parts = match &value {
                    Value::Group(items) if items.len() == elts.len() => items.clone(),
                    Value::Tensors(b) if b.len() == 1 && self.fresh_value => {
                        self.split_result(b[0], elts, span)
                    }
                    other => vec![other.clone(); elts.len()],
                };
                for (e, v) in elts.iter().zip(parts) {
                    self.assign(e, v, span);
                }
            }
            Expr::Starred { value: inner, .. } => self.assign(inner, value, span),
            _ => {}
        }
    }

    /// `self.stash[key] = t` inside a block of another stream than the caller's current one, in a
    /// class whose other method takes items out of `self.stash` and returns them (and no method
    /// records one for a stream): what this body made on that stream is handed, through the
    /// object, to that method's caller, who uses it on their current stream.
    fn keep_for_another_method(&mut self, container: &Expr, value: &Value, span: Span) {
        let Some(class) = self.class else {
            return;
        };
        let Some(dotted) = container.dotted().filter(|d| d.starts_with("self.")) else {
            return;
        };
        if self.current == self.b.ambient()
            || !class.hands_out_unrecorded_items(&dotted, &self.method)
        {
            return;
        }
        let current = self.current;
        let made_here: Vec<BufferId> = value
            .buffers()
            .into_iter()
            .filter(|&b| {
                self.b.body().ops.iter().any(|op| {
                    matches!(op.kind, OpKind::Produce { buffer, stream, .. } if buffer == b && stream == current)
                })
            })
            .collect();
        for buffer in made_here {
            self.b.push(
                OpKind::Escape {
                    buffer,
                    kind: EscapeKind::HandedOutByObject,
                },
                span,
            );
        }
    }

    /// `values, indices = x.topk(k)`: an op that returns several tensors makes one buffer per
    /// name, each produced where the first one was.
    pub(super) fn split_result(
        &mut self,
        first: BufferId,
        names: &[Expr],
        span: Span,
    ) -> Vec<Value> {
        // Only a result made by this very statement; views (`unbind`, `split`) share memory.
        // A host wait the call ends with (`unique` learning its size) is not a new value.
        let last = self
            .b
            .body()
            .ops
            .iter()
            .rev()
            .find(|op| !matches!(op.kind, OpKind::SyncStream { .. }));
        let just_made = match last.map(|op| &op.kind) {
            Some(OpKind::Produce {
                buffer,
                stream,
                how,
            }) if *buffer == first => Some((*stream, *how)),
            _ => None,
        };
        let Some((stream, how)) = just_made else {
            return vec![Value::Tensors(vec![first]); names.len()];
        };
        let info = self.b.body().buffer(first).clone();
        let mut parts = vec![Value::Tensors(vec![first])];
        for (i, n) in names.iter().enumerate().skip(1) {
            let name = n.dotted().unwrap_or_else(|| format!("{}[{i}]", info.name));
            let buf = self.buffer_at(n.span(), "part", &name, info.memory, info.owner);
            self.b.push(
                OpKind::Produce {
                    buffer: buf,
                    stream,
                    how,
                },
                span,
            );
            if self.unplaced.contains(&first) {
                self.unplaced.insert(buf);
            }
            parts.push(Value::Tensors(vec![buf]));
        }
        parts
    }
}

/// The span of the last simple statement a block runs (inside the last branch of a compound
/// one): where a function that ends with the block lets go of its values.
pub(super) fn last_statement_span(stmts: &[Stmt]) -> Option<Span> {
    stmts.iter().rev().find_map(|s| match s {
        Stmt::Return { span, .. } | Stmt::Delete { span, .. } | Stmt::Assign { span, .. } => {
            Some(*span)
        }
        Stmt::Expr(e) => Some(e.span()),
        Stmt::If { body, orelse, .. } => {
            last_statement_span(orelse).or_else(|| last_statement_span(body))
        }
        Stmt::For { body, orelse, .. } | Stmt::While { body, orelse, .. } => {
            last_statement_span(orelse).or_else(|| last_statement_span(body))
        }
        Stmt::With { body, .. } => last_statement_span(body),
        Stmt::Try {
            body,
            handlers,
            orelse,
            finalbody,
        } => last_statement_span(finalbody)
            .or_else(|| last_statement_span(orelse))
            .or_else(|| last_statement_span(body))
            .or_else(|| handlers.iter().rev().find_map(|h| last_statement_span(h))),
        Stmt::Match { cases, .. } => cases.iter().rev().find_map(|c| last_statement_span(c)),
        _ => None,
    })
}

/// A test written over several lines (in parentheses), as one line for a message.
fn one_line(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("( ", "(")
        .replace(" )", ")")
}
