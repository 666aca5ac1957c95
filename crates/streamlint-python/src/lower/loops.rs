//! Loops and what they bind: elements of the caller's containers, lists the function filled,
//! `zip` and `enumerate`.

use super::*;

/// What a `for` loop binds on each iteration.
#[derive(Clone)]
pub(super) struct LoopTarget<'e> {
    pub(super) target: &'e Expr,
    pub(super) element: Value,
    /// The iterated collection is known to hold items (a list the function filled).
    pub(super) at_least_once: bool,
}

/// Loops nested deeper than this are lowered in one pass (no trial pass for loop-carried names).
pub(super) const MAX_TRIAL_LOOP_DEPTH: usize = 3;

impl<'a> Lowerer<'a> {
    pub(super) fn lower_loop(
        &mut self,
        test: Option<&Expr>,
        target: Option<LoopTarget<'_>>,
        body: &[Stmt],
        orelse: &[Stmt],
        span: Span,
    ) {
        // A trial pass finds what names hold at the end of an iteration, so that reads at the
        // top of the body see values from the previous iteration too.
        // Loops nested in a trial pass get no trial of their own: the outer trial only needs an
        // approximate end-of-iteration environment, and nested trials would double the work at
        // every level.
        if self.loop_depth < MAX_TRIAL_LOOP_DEPTH && !self.in_trial {
            let cp = self.b.checkpoint();
            let before = self.env.clone();
            let splits = self.flag_splits;
            self.in_trial = true;
            let _ = self.loop_body(test, target.clone(), body, span);
            self.in_trial = false;
            // The real pass may split where the trial did.
            self.flag_splits = splits;
            let carried = merge_env(&before, &self.env);
            // What the trial found at entry (an attribute first read in the loop) stays: the
            // real pass takes its value from the carried environment and does not look again.
            self.b.rollback(cp);
            self.env = carried;
        }
        let (after, done) = self.loop_body(test, target, body, span);
        let exit_env = self.env.clone();
        self.b.switch_to(after);
        self.stmts(orelse);
        let join = self.b.new_block();
        let end = self.b.current();
        self.b.edge(end, join);
        self.b.edge(done, join);
        self.b.switch_to(join);
        self.env = merge_env(&exit_env, &self.env);
    }

    /// Lower one loop: head, body, back edge. Returns the block where the loop exits normally
    /// (its `else` clause runs there) and the block `break` jumps to.
    pub(super) fn loop_body(
        &mut self,
        test: Option<&Expr>,
        target: Option<LoopTarget<'_>>,
        body: &[Stmt],
        span: Span,
    ) -> (BlockId, BlockId) {
        let from = self.b.current();
        let head = self.branch(from);
        if let Some(t) = test {
            self.truth_test(t, span);
        }
        let head_end = self.b.current();
        let head_env = self.env.clone();
        let after = self.b.new_block();
        let done = self.b.new_block();
        let at_least_once = target.as_ref().is_some_and(|t| t.at_least_once);
        if !at_least_once {
            self.b.edge(head_end, after);
        }
        self.branch(head_end);
        if let Some(t) = target {
            self.assign(t.target, t.element, t.target.span());
        }
        self.loops.push((head, done));
        self.loop_depth += 1;
        self.stmts(body);
        self.loop_depth -= 1;
        self.loops.pop();
        let end = self.b.current();
        self.b.edge(end, head);
        if at_least_once {
            // The loop ends after an iteration, never before the first.
            self.b.edge(end, after);
        }
        self.env = merge_env(&head_env, &self.env);
        (after, done)
    }

    /// `consumer_streams.discard(source_stream)` on a local collection of streams: the stream is
    /// no longer in it.
    pub(super) fn shrink_local_list(
        &mut self,
        receiver: &Expr,
        list: &Value,
        args: &[Expr],
    ) -> bool {
        let (Expr::Name { id, .. }, Value::Group(items), [arg]) = (receiver, list, args) else {
            return false;
        };
        let Value::Stream(gone) = self.eval(arg) else {
            return false;
        };
        let kept = items
            .iter()
            .filter(|v| **v != Value::Stream(gone))
            .cloned()
            .collect();
        self.bind(id.clone(), Value::Group(kept));
        true
    }

    /// The streams a collection expression holds, when it holds only known streams, at most
    /// four (`(cur, target)`, a local set of them); `None` values in it are left out.
    pub(super) fn known_streams(&self, iter: &Expr) -> Option<Vec<StreamId>> {
        // What the names hold, without evaluating anything (the loop evaluates its iterable).
        let items: Vec<Value> = match iter {
            Expr::Name { id, .. } => match self.env.get(id.as_str())? {
                Value::Group(items) => items.clone(),
                _ => return None,
            },
            Expr::Collection { elts, .. } => elts
                .iter()
                .map(|e| match e {
                    Expr::Constant {
                        value: Constant::None,
                        ..
                    } => Some(Value::None),
                    other => self.env.get(other.dotted()?.as_str()).cloned(),
                })
                .collect::<Option<_>>()?,
            _ => return None,
        };
        let mut streams = Vec::new();
        for item in items {
            match item {
                Value::Stream(s) if !streams.contains(&s) => streams.push(s),
                Value::Stream(_) | Value::None => {}
                _ => return None,
            }
        }
        (!streams.is_empty() && streams.len() <= 4).then_some(streams)
    }

    /// `for s in (cur, target): t.record_stream(s)`: the body once per stream, in order (no
    /// `break` or `continue` in it).
    pub(super) fn unrolled_stream_loop(
        &mut self,
        target: &Expr,
        iter: &Expr,
        body: &[Stmt],
    ) -> bool {
        if jumps(body) {
            return false;
        }
        let Some(streams) = self.known_streams(iter) else {
            return false;
        };
        if matches!(iter, Expr::Collection { .. }) {
            self.eval(iter);
        }
        for s in streams {
            self.assign(target, Value::Stream(s), target.span());
            self.stmts(body);
        }
        true
    }

    /// Does a `for` loop over `iter` go through a list this function filled (`for t in outs`,
    /// `for t, d in zip(outs, devices)`)?
    pub(super) fn iterates_filled_list(&mut self, iter: &Expr) -> bool {
        let sequences: &[Expr] = match iter {
            Expr::Call { func, args, .. }
                if matches!(func.dotted().as_deref(), Some("zip" | "enumerate")) =>
            {
                args
            }
            other => std::slice::from_ref(other),
        };
        sequences.iter().any(|seq| match seq {
            Expr::Name { id, .. } => {
                matches!(self.env.get(id.as_str()), Some(Value::Group(items)) if !items.is_empty())
            }
            // `for t in (logits, scores):` runs once per item written there.
            Expr::Collection { elts, .. } => {
                !elts.is_empty() && !elts.iter().any(|e| matches!(e, Expr::Starred { .. }))
            }
            _ => false,
        })
    }

    /// What a `for` loop over `iter` binds to `target`. `zip(a, b)`, `enumerate(a)` and
    /// `d.items()` give each name of a tuple target the elements of its own sequence.
    pub(super) fn loop_element(&mut self, iter: &Expr, target: &Expr) -> Value {
        // `for key in groups`: a dict's keys, not what it holds.
        if let Expr::Name { id, .. } = iter {
            if self.dict_locals.contains(id.as_str()) {
                self.eval(iter);
                return Value::Unknown;
            }
        }
        let call = match iter {
            Expr::Call {
                func,
                args,
                keywords,
                ..
            } if keywords.is_empty() => Some((func.dotted(), args)),
            _ => None,
        };
        let names = match target {
            Expr::Collection { elts, .. } => elts.as_slice(),
            _ => &[],
        };
        // `for t in tree_leaves(batch)`: the tensors of the structure.
        if let Expr::Call { func, args, .. } = iter {
            let leaves = self
                .cx
                .imports
                .qualify(func)
                .is_some_and(|q| crate::api::is_leaves_helper(&q));
            if let (true, [structure]) = (leaves, args.as_slice()) {
                let tree = self.eval(structure);
                return self.element_of(&tree, target);
            }
        }
        // `for name, t in d.items()`: the keys are not followed, the values are the dict's.
        if let (Expr::Call { func, args, .. }, [_, value_name]) = (iter, names) {
            if let Expr::Attribute {
                value: dict, attr, ..
            } = func.as_ref()
            {
                if attr == "items" && args.is_empty() {
                    let value = match self.object_items(dict) {
                        Some(item) => item,
                        None => match self.eval(dict) {
                            group @ Value::Group(_) => Value::tensors(group.buffers()),
                            other => self.element_of(&other, value_name),
                        },
                    };
                    return Value::Group(vec![Value::Unknown, value]);
                }
            }
        }
        // `for t in d.values()` on the caller's dict: its items, as `d.items()` gives them.
        if let Some((Some(f), args)) = &call {
            let dict = f.strip_suffix(".values").filter(|d| !d.contains('.'));
            if let (Some(Value::Param(dict)), true) =
                (dict.and_then(|d| self.env.get(d)), args.is_empty())
            {
                let dict = Value::Param(*dict);
                return self.element_of(&dict, target);
            }
        }
        match call {
            Some((Some(f), _)) if f == "range" => {
                self.eval(iter);
                Value::Unknown
            }
            Some((Some(f), args)) if f == "zip" && args.len() == names.len() => {
                let parts = args
                    .iter()
                    .zip(names)
                    .map(|(a, n)| {
                        self.object_items(a).unwrap_or_else(|| {
                            let seq = self.eval(a);
                            self.element_of(&seq, n)
                        })
                    })
                    .collect();
                Value::Group(parts)
            }
            Some((Some(f), args)) if f == "enumerate" && args.len() == 1 && names.len() == 2 => {
                let seq = self.eval(&args[0]);
                Value::Group(vec![Value::Unknown, self.element_of(&seq, &names[1])])
            }

            _ => match self.object_items(iter) {
                Some(item) => item,
                None => {
                    let it = self.eval(iter);
                    self.element_of(&it, target)
                }
            },
        }
    }

    /// What a loop over one of the object's containers that the class summary does not know
    /// gets (`for t in self.staged`, `self.stash.values()`): its items (see `container_item`).
    fn object_items(&mut self, seq: &Expr) -> Option<Value> {
        let container = match seq {
            Expr::Call { func, args, .. } if args.is_empty() => match func.as_ref() {
                Expr::Attribute { value, attr, .. } if attr == "values" => value.as_ref(),
                _ => return None,
            },
            other => other,
        };
        if !container.dotted()?.starts_with("self.")
            || !matches!(self.eval(container), Value::Unknown)
        {
            return None;
        }
        self.container_item(container, seq.span())
    }

    /// What iterating `it` binds to `target`: elements of our tensors, or values the caller
    /// made before the call.
    pub(super) fn element_of(&mut self, it: &Value, target: &Expr) -> Value {
        match it {
            // A list of tuples (`staged.append((t, host))`): a tuple target takes each
            // position from every item.
            Value::Group(items) if matches!(target, Expr::Collection { .. }) => {
                let width = match items.first() {
                    Some(Value::Group(first)) => first.len(),
                    _ => 0,
                };
                let same_width = width > 0
                    && items
                        .iter()
                        .all(|i| matches!(i, Value::Group(g) if g.len() == width));
                if !same_width {
                    return Value::tensors(it.buffers());
                }
                Value::Group(
                    (0..width)
                        .map(|k| {
                            // `for work, out in inflight: work.wait()`: the handles at k.
                            let handles = items.iter().filter_map(|i| match i {
                                Value::Group(g) if matches!(g[k], Value::Work(_)) => Some(&g[k]),
                                _ => None,
                            });
                            if let Some(all) = handles.cloned().reduce(|a, b| a.merge(&b)) {
                                return all;
                            }
                            let mut held: Vec<BufferId> = items
                                .iter()
                                .flat_map(|i| match i {
                                    Value::Group(g) => g[k].buffers(),
                                    _ => Vec::new(),
                                })
                                .collect();
                            held.sort();
                            held.dedup();
                            Value::tensors(held)
                        })
                        .collect(),
                )
            }
            // `for h in handles: h.wait()`: the handles of the collectives launched into it.
            Value::Group(items) if items.iter().any(|i| matches!(i, Value::Work(_))) => items
                .iter()
                .filter(|i| matches!(i, Value::Work(_)))
                .fold(Value::Work(Vec::new()), |all, w| all.merge(w)),
            Value::Tensors(_) | Value::Group(_) => Value::tensors(it.buffers()),
            Value::Param(_) | Value::Unknown => {
                // Elements of one caller container are one value, however many loops visit it
                // and whatever each loop calls it.
                let (name, site) = match it {
                    Value::Param(container) => (
                        format!("{}[…]", self.b.body().buffer(*container).name),
                        (Span::default(), format!("element-of:{}", container.0)),
                    ),
                    _ => (
                        binding_name(target).unwrap_or_else(|| "element".into()),
                        (target.span(), "element".to_string()),
                    ),
                };
                let buf = self.buffer_at(site.0, &site.1, &name, Memory::Device, Owner::Caller);
                // The elements of an argument are the caller's too.
                if let Value::Param(container) = it {
                    if self.param_buffers.contains(container) && !self.param_buffers.contains(&buf)
                    {
                        self.param_buffers.push(buf);
                    }
                }
                let ambient = self.b.ambient();
                let host = binding_name(target).is_some_and(|n| host_named(&n));
                let produce = OpKind::Produce {
                    buffer: buf,
                    stream: ambient,
                    how: if host {
                        Production::Host
                    } else {
                        Production::Entry
                    },
                };
                if !self.entry_ops.iter().any(|(k, _)| *k == produce) {
                    self.entry_ops.push((produce, target.span()));
                }
                Value::Param(buf)
            }
            _ => Value::Unknown,
        }
    }

    /// `staged.append((t, host))` on a list this function made (`staged = []`), or
    /// `staged[key] = t` on one of its dicts or lists: the container now holds the value, so a
    /// later loop over it or lookup in it gets it back (a free through it is a free of the
    /// tensor). Where the container goes, its items go (returned, stored, passed on).
    pub(super) fn grow_local_list(
        &mut self,
        receiver: &Expr,
        list: &Value,
        method: &str,
        vals: &[Value],
    ) -> bool {
        let Expr::Name { id, .. } = receiver else {
            return false;
        };
        let added: Vec<Value> = match (method, vals) {
            ("append", [v]) | ("insert", [_, v]) => vec![v.clone()],
            ("extend", [Value::Group(items)]) => items.clone(),
            _ => return false,
        };
        let grown = match list {
            Value::Group(items) => {
                // Abstract items: one per shape (a tuple of n, or a single value), so that what
                // a loop appends on every iteration is one item holding what any of them held.
                let mut items = items.clone();
                for v in added {
                    let width = |x: &Value| match x {
                        Value::Group(g) => Some(g.len()),
                        _ => None,
                    };
                    match items.iter_mut().find(|i| width(i) == width(&v)) {
                        Some(same) => *same = same.merge(&v),
                        None => items.push(v),
                    }
                }
                Value::Group(items)
            }
            Value::Tensors(held) => {
                let mut all = held.clone();
                all.extend(added.iter().flat_map(Value::buffers));
                all.sort();
                all.dedup();
                Value::Tensors(all)
            }
            _ => return false,
        };
        self.bind(id.clone(), grown);
        true
    }
}

/// Do the statements `break` or `continue` out of the loop they are in (not a nested one)?
fn jumps(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Break | Stmt::Continue => true,
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Def(_) | Stmt::Class(_) => false,
        other => other.blocks().into_iter().any(jumps),
    })
}
