//! Expressions: what each kind of expression evaluates to (names, attributes of the object,
//! subscripts, operators, comprehensions) and the operations it emits.

use super::*;

impl<'a> Lowerer<'a> {
    pub(super) fn eval(&mut self, expr: &Expr) -> Value {
        match expr {
            Expr::Name { id, .. } => match self.env.get(id.as_str()) {
                Some(v) => v.clone(),
                None => match self.module_global(id) {
                    Value::Unknown if self.cx.imports.binds(id) => self.imported_value(expr),
                    known => known,
                },
            },
            Expr::Attribute { value, attr, .. } => self.attribute(expr, value, attr),
            Expr::Call {
                func,
                args,
                keywords,
                span,
            } => self.call(func, args, keywords, *span),
            Expr::Constant {
                value: Constant::None,
                ..
            } => Value::None,
            Expr::Constant {
                value: Constant::Str(s),
                ..
            } => Value::Text(s.clone()),
            Expr::Constant { .. } => Value::Unknown,
            Expr::Operator { op, operands, span } => {
                let vals: Vec<Value> = operands.iter().map(|o| self.eval(o)).collect();
                match op {
                    Operator::MatMul | Operator::Arithmetic => {
                        if *op == Operator::MatMul {
                            self.confirm(&vals);
                        } else if self.current != self.b.ambient()
                            && self.keyword_value != Some(*span)
                            && operands.iter().zip(&vals).all(|(o, v)| {
                                matches!(v, Value::Param(_) | Value::Tensors(_))
                                    || matches!(
                                        o,
                                        Expr::Constant {
                                            value: Constant::Int(_) | Constant::Number,
                                            ..
                                        }
                                    )
                            })
                        {
                            // A side-stream block is there to enqueue device work: arithmetic
                            // there on arguments, tensors and numbers only (`y = x * 2`,
                            // `(images - mean) / std`) is; `items + more` on lists is not
                            // told apart from it otherwise. Not a keyword's value, which is a
                            // scalar option nearly always (`add_(p, alpha=1 - decay)`).
                            self.confirm_arguments(&vals);
                        }
                        if !vals.iter().any(|v| self.is_tensor(v)) {
                            return Value::Unknown;
                        }
                        // `held | more`, `staged + extra` on lists or dicts the function made:
                        // one container holding what both hold, no device work.
                        if vals.iter().any(|v| matches!(v, Value::Group(_))) {
                            return Value::Group(vals);
                        }
                        let inputs = self.tensor_buffers(&vals);
                        self.read_all(&inputs, *span);
                        self.produce_result(&inputs, *span)
                    }
                    Operator::Identity | Operator::Is | Operator::IsNot => Value::Unknown,
                    Operator::And | Operator::Or | Operator::Not => {
                        for v in &vals {
                            if !v.local_tensors().is_empty() {
                                self.host_read(v, *span);
                            }
                        }
                        Value::Unknown
                    }
                }
            }
            Expr::Subscript { value, index, span } => {
                let v = self.eval(value);
                let i = self.eval(index);
                if matches!(v, Value::Unknown) {
                    if let Some(text) = indexed_stream(value, index) {
                        return Value::Stream(self.named_stream(&text));
                    }
                    if let Some(item) = self.container_item(value, *span) {
                        return item;
                    }
                }
                // A list or dict the function made (`buckets[key]`) hands back what it holds:
                // a lookup touches no device memory.
                let container = matches!(v, Value::Group(_));
                if !container && self.is_tensor(&v) && self.is_tensor(&i) {
                    // Indexing with a tensor gathers: a kernel that reads both.
                    let mut inputs = v.buffers();
                    inputs.extend(i.buffers());
                    self.read_all(&inputs, *span);
                    let name = self.value_name("result");
                    let result = self.produce(*span, &name, Memory::Device, Production::Compute);
                    // With a boolean mask (`x[x > 0]`) the size of the result depends on the
                    // data: the host waits for the current stream to learn it.
                    if self.is_comparison(index) {
                        self.sync_current(*span);
                    }
                    return result;
                }
                if !container && self.is_tensor(&v) && matches!(i, Value::Param(_)) {
                    // `blocks[slots]` with indices from the caller may gather (a read); the
                    // result is kept as a view so that writes through it reach `blocks`.
                    let inputs = self.tensor_buffers(std::slice::from_ref(&v));
                    self.read_all(&inputs, *span);
                }
                match v {
                    Value::Group(ref items) => {
                        group_item(items, index).unwrap_or_else(|| Value::tensors(v.buffers()))
                    }
                    Value::Tensors(_) | Value::Param(_) | Value::Stream(_) => v,
                    _ => Value::Unknown,
                }
            }
            Expr::Collection { elts, .. } => {
                Value::Group(elts.iter().map(|e| self.eval(e)).collect())
            }
            Expr::Starred { value, .. } | Expr::Await { value, .. } => self.eval(value),
            Expr::Yield { value, span } => {
                if let Some(v) = value {
                    let v = self.eval(v);
                    self.hand_to_caller(&v, *span);
                }
                Value::Unknown
            }
            Expr::IfExp {
                test, body, orelse, ..
            } => match self.decided_flag(test) {
                Some(true) => self.eval(body),
                Some(false) => self.eval(orelse),
                None => {
                    self.eval(test);
                    let a = self.eval(body);
                    let b = self.eval(orelse);
                    a.merge(&b)
                }
            },
            Expr::Walrus {
                target,
                value,
                span,
            } => {
                let v = self.eval(value);
                self.assign(target, v.clone(), *span);
                v
            }
            Expr::Comprehension {
                elts, generators, ..
            } => {
                // `{s for s in (cur, target) if s is not None}`: the streams themselves.
                if let ([g], [Expr::Name { id, .. }]) = (generators.as_slice(), elts.as_slice()) {
                    if matches!(&g.target, Expr::Name { id: t, .. } if t == id) {
                        if let Some(streams) = self.known_streams(&g.iter) {
                            return Value::Group(streams.into_iter().map(Value::Stream).collect());
                        }
                    }
                }
                for g in generators {
                    // As a `for` statement binds its names: `enumerate`, `zip`, `d.items()`.
                    let element = self.loop_element(&g.iter, &g.target);
                    self.assign(&g.target, element, g.target.span());
                    for c in &g.conditions {
                        self.eval(c);
                    }
                }
                Value::Group(elts.iter().map(|e| self.eval(e)).collect())
            }
            Expr::Opaque { parts, .. } => {
                for p in parts {
                    self.eval(p);
                }
                Value::Unknown
            }
            Expr::Lambda { .. } => Value::Unknown,
        }
    }

    /// `a > b`, `x == 0`: an elementwise comparison, whose result is a boolean mask.
    fn is_comparison(&self, expr: &Expr) -> bool {
        let Expr::Operator {
            op: Operator::Arithmetic,
            span,
            ..
        } = expr
        else {
            return false;
        };
        let text = self.cx.text(*span);
        let shifts = memchr::memmem::find(text, b"<<").is_some()
            || memchr::memmem::find(text, b">>").is_some();
        let equality = memchr::memmem::find(text, b"==").is_some()
            || memchr::memmem::find(text, b"!=").is_some();
        !shifts && (equality || text.iter().any(|&c| matches!(c, b'<' | b'>')))
    }

    /// Confirm the arguments themselves among `values` as tensors; not their elements or
    /// attributes, whose arithmetic is as often on sizes and offsets.
    pub(super) fn confirm_arguments(&mut self, values: &[Value]) {
        for v in values {
            if let Value::Param(b) = v {
                let whole = !self.b.body().buffer(*b).name.contains(['[', '.']);
                if whole && self.param_buffers.contains(b) {
                    self.confirmed.insert(*b);
                }
            }
        }
    }

    /// An imported name used as a value: a data-parallel wrapper class is followed to where it
    /// is called (`DP = DistributedDataParallel if ddp else FullyShardedDataParallel`).
    fn imported_value(&self, name: &Expr) -> Value {
        let qualified = self.cx.imports.qualify(name);
        match qualified.and_then(|q| self.cx.api.classify(&q)) {
            Some(ApiCall::DataParallelWrap) => Value::DataParallelWrapper,
            _ => Value::Unknown,
        }
    }

    pub(super) fn attribute(&mut self, expr: &Expr, owner: &Expr, attr: &str) -> Value {
        if let Some(d) = expr.dotted() {
            if let Some(v) = self.env.get(d.as_str()) {
                return v.clone();
            }
            if let Some(v) = self.class_attribute(&d, expr.span()) {
                self.bind(d, v.clone());
                return v;
            }
        }
        let base = self.eval(owner);
        match attr {
            // `pair.np`, `pair.cpu`: the host memory of a host/device buffer pair.
            "np" | "cpu" if self.holds_host_memory(&base) => base,
            "data" | "T" | "mT" | "H" => match base {
                Value::Tensors(_) | Value::Param(_) => base,
                _ => Value::Unknown,
            },
            "grad" => match self.env.get(GRADIENTS) {
                Some(g) => g.clone(),
                None => match base {
                    Value::Param(_) | Value::Tensors(_) => base,
                    _ => Value::Unknown,
                },
            },
            _ => match (base, expr.dotted()) {
                (Value::Param(owner), Some(d)) => self
                    .argument_attribute(&d, owner, attr, expr.span())
                    .unwrap_or(Value::Unknown),
                _ => Value::Unknown,
            },
        }
    }

    /// For a statement that calls a module function only forwarding to other calls, those
    /// calls (see `wrappers`).
    pub(super) fn forwarded_statements(&self, e: &Expr) -> Option<Vec<Stmt>> {
        let Expr::Call {
            func,
            args,
            keywords,
            span,
        } = e
        else {
            return None;
        };
        self.wrapper(func)?.inline_stmts(args, keywords, *span)
    }

    /// The module's forwarding function a call names (not shadowed by a local name).
    pub(super) fn wrapper(&self, func: &Expr) -> Option<&'a Wrapper> {
        let Expr::Name { id, .. } = func else {
            return None;
        };
        if self.env.contains_key(id.as_str()) {
            return None;
        }
        self.cx.wrappers.get(id)
    }
}

/// `events[slot]`, `streams[0]`: the stream or event a list of them holds at `index`, when the
/// index is a constant or every item is the same one (events made at one site are one event,
/// so a ring of events waited on by a computed slot is a wait on it). `None` for other lists.
fn group_item(items: &[Value], index: &Expr) -> Option<Value> {
    let item = match index {
        Expr::Constant {
            value: Constant::Int(k),
            ..
        } => items.get(usize::try_from(*k).ok()?)?,
        _ => {
            let first = items.first()?;
            items.iter().all(|i| i == first).then_some(first)?
        }
    };
    matches!(item, Value::Event(_) | Value::Stream(_)).then(|| item.clone())
}
