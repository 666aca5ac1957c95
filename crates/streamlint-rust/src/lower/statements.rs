//! Statements and expressions: scopes, bindings, control flow.

use super::*;

impl Lowerer<'_> {
    /// Lower a block in its own scope; its value is its tail expression's.
    pub(super) fn block_value(&mut self, block: &syn::Block) -> Value {
        self.scopes.push(Vec::new());
        let mut value = Value::Unknown;
        for (i, stmt) in block.stmts.iter().enumerate() {
            if self.deadline.passed() {
                self.b.cut_short();
                break;
            }
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
            // A span is found by printing the statement: only when a stream needs one.
            if self.owned_alive.len() > streams_before {
                self.drop_temporary_streams(streams_before, span_of(stmt.span()));
            }
        }
        let end = block.brace_token.span.close();
        // The function's own block: its end is the function's exit.
        let exiting = self.exiting || self.scopes.len() == 2;
        let was = std::mem::replace(&mut self.exiting, exiting);
        self.pop_scope(span_of(end));
        self.exiting = was;
        value
    }

    pub(super) fn local(&mut self, local: &syn::Local) {
        // From `let` to `;`, without printing the statement to find its ends.
        let whole = local.let_token.span.join(local.semi_token.span);
        let sp = span_of(whole.unwrap_or_else(|| local.span()));
        // `let (a, b) = (x, y);` binds element by element.
        if let (syn::Pat::Tuple(pats), Some(syn::Expr::Tuple(exprs))) =
            (&local.pat, local.init.as_ref().map(|i| i.expr.as_ref()))
        {
            if pats.elems.len() == exprs.elems.len() {
                for (pat, expr) in pats.elems.iter().zip(&exprs.elems) {
                    let value = self.expr(expr);
                    if let (false, Some(src)) = (
                        matches!(expr, syn::Expr::Reference(_)),
                        Self::local_name(expr),
                    ) {
                        self.mark_gone(&src);
                    }
                    self.bind_pattern(pat, value, sp);
                }
                return;
            }
        }
        let init = local
            .init
            .as_ref()
            .map(|i| (self.expr(&i.expr), Self::local_name(&i.expr)));
        if let Some((_, Some(src))) = &init {
            // `let y = x;` moves `x`.
            if !matches!(
                local.init.as_ref().map(|i| i.expr.as_ref()),
                Some(syn::Expr::Reference(_))
            ) {
                self.mark_gone(src);
            }
        }
        let mut value = init.map(|(v, _)| v).unwrap_or(Value::Unknown);
        if let (Value::Unknown, Some(i)) = (&value, &local.init) {
            // `let params = [&ptr as *const _ as *mut c_void, ...]` carries the pointers.
            let ptrs = self.pointers_in([i.expr.as_ref()]);
            if !ptrs.is_empty() {
                value = Value::Ptrs(ptrs);
            }
        }
        self.bind_pattern(&local.pat, value, sp);
    }

    pub(super) fn bind_pattern(&mut self, pat: &syn::Pat, value: Value, sp: Span) {
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
                        } else if stream.origin == StreamOrigin::Ambient {
                            // `let main = ctx.default_stream();`: fixes name it as the code does.
                            self.name_default_stream_as(name.clone(), None, Some(sp));
                        }
                        Value::Stream(s)
                    }
                    Value::PtrGuard { buffer, write, .. } => Value::Ptr { buffer, write },
                    Value::Context => {
                        self.name_default_stream(&name);
                        Value::Context
                    }
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
                let value = match (&value, type_kind_in(&pt.ty, self.aliases)) {
                    (Value::Unknown, Some(TypeKind::PinnedHost)) => {
                        let b = self.new_buffer("host", Memory::PinnedHost, Owner::Local, false);
                        let ambient = self.b.ambient();
                        self.b.push(
                            OpKind::Produce {
                                buffer: b,
                                stream: ambient,
                                how: Production::Host,
                            },
                            sp,
                        );
                        Value::Host(b)
                    }
                    _ => value,
                };
                self.bind_pattern(&pt.pat, value, sp);
            }
            syn::Pat::Tuple(t) => match value {
                Value::PtrGuard {
                    buffer,
                    write,
                    stream,
                } => {
                    let mut elems = t.elems.iter();
                    if let Some(p) = elems.next() {
                        self.bind_pattern(p, Value::Ptr { buffer, write }, sp);
                    }
                    match elems.next() {
                        Some(syn::Pat::Ident(g)) => self.bind(
                            &g.ident.to_string(),
                            Value::Guard {
                                buffer,
                                write,
                                stream,
                            },
                        ),
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

    pub(super) fn b_stream_mut(&mut self, s: StreamId) -> &mut Stream {
        self.b.stream_mut(s)
    }

    // ----- expressions ------------------------------------------------------------------------

    pub(super) fn expr(&mut self, e: &syn::Expr) -> Value {
        use syn::Expr as E;
        // syn finds an expression's span by walking all its tokens: computed only where an op
        // needs it, so nested parentheses and operators stay linear.
        let sp = || span_of(e.span());
        match e {
            E::Path(p) => match p.path.get_ident() {
                Some(id) => self
                    .lookup(&id.to_string())
                    .map(|l| l.value.clone())
                    .unwrap_or(Value::Unknown),
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
            E::Closure(c) => Value::Closure(Closure(std::rc::Rc::new(c.clone()))),
            E::MethodCall(m) => {
                let whole = call_span(&m.receiver, m.paren_token.span.close());
                self.method_call(m, whole.unwrap_or_else(sp))
            }
            E::Call(c) => {
                let whole = call_span(&c.func, c.paren_token.span.close());
                self.call(c, whole.unwrap_or_else(sp))
            }
            E::Field(f) => {
                if let Some(name) = Self::field_of_self(f) {
                    return self
                        .lookup(&name)
                        .map(|l| l.value.clone())
                        .unwrap_or(Value::Unknown);
                }
                let base = self.expr(&f.base);
                match (base, &f.member) {
                    // `x.device_ptr(&s).0`: the guard is a temporary, dropped at the end of the
                    // statement, before the pointer is used.
                    (
                        Value::PtrGuard {
                            buffer,
                            write,
                            stream,
                        },
                        syn::Member::Unnamed(i),
                    ) if i.index == 0 => {
                        self.release_guard(buffer, stream, write, sp());
                        Value::Ptr { buffer, write }
                    }
                    _ => Value::Unknown,
                }
            }
            E::Index(i) => {
                // `h[0]`: the host reads a host buffer.
                if let Value::Host(h) = self.expr(&i.expr) {
                    self.b.push(OpKind::HostRead { buffer: h }, sp());
                }
                self.expr(&i.index);
                Value::Unknown
            }
            E::Assign(a) if matches!(a.left.as_ref(), syn::Expr::Index(_)) => {
                // `h[i] = v`: the host writes it.
                self.expr(&a.right);
                if let syn::Expr::Index(i) = a.left.as_ref() {
                    if let Value::Host(h) = self.expr(&i.expr) {
                        self.b.push(OpKind::HostWrite { buffer: h }, sp());
                    }
                    self.expr(&i.index);
                }
                Value::Unknown
            }
            E::Assign(a) => {
                let v = self.expr(&a.right);
                if let Some(name) = Self::local_name(&a.left) {
                    if let Some(old) = self.lookup(&name).map(|l| l.value.clone()) {
                        self.drop_value(&old, sp(), false);
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
                    self.hand_to_caller(&value, sp());
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
                    let to = if matches!(e, E::Break(_)) {
                        after
                    } else {
                        head
                    };
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
                self.bind_pattern(&l.pat, v, sp());
                Value::Unknown
            }
            _ => Value::Unknown,
        }
    }

    pub(super) fn loop_of(&mut self, cond: Option<&syn::Expr>, body: &syn::Block) {
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
}

/// A call's span, from the first token of `callee` (the function, or the receiver of a method)
/// to its closing parenthesis `close`, without printing the call (as `Spanned::span` does).
fn call_span(callee: &syn::Expr, close: proc_macro2::Span) -> Option<Span> {
    first_token(callee)?.join(close).map(span_of)
}

/// The first token of an expression, down its left side; `None` where that takes more than a
/// few steps to tell (attributes, qualified paths, other shapes).
fn first_token(e: &syn::Expr) -> Option<proc_macro2::Span> {
    use syn::Expr as E;
    match e {
        E::MethodCall(m) if m.attrs.is_empty() => first_token(&m.receiver),
        E::Call(c) if c.attrs.is_empty() => first_token(&c.func),
        E::Field(f) if f.attrs.is_empty() => first_token(&f.base),
        E::Index(i) if i.attrs.is_empty() => first_token(&i.expr),
        E::Try(t) if t.attrs.is_empty() => first_token(&t.expr),
        E::Await(a) if a.attrs.is_empty() => first_token(&a.base),
        E::Paren(p) if p.attrs.is_empty() => Some(p.paren_token.span.open()),
        E::Reference(r) if r.attrs.is_empty() => Some(r.and_token.span),
        E::Path(p) if p.attrs.is_empty() && p.qself.is_none() => match p.path.leading_colon {
            Some(colons) => Some(colons.spans[0]),
            None => p.path.segments.first().map(|s| s.ident.span()),
        },
        _ => None,
    }
}
