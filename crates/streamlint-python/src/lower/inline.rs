//! Calls into the project's own functions, lowered in place. The callee's statements run in the
//! caller's context: its current stream (a helper called inside `with torch.cuda.stream(s):`
//! queues its work on `s`, and its `current_stream()` is `s`), the caller's values for its
//! parameters, and the caller's entities for what it returns. So a helper that records, waits,
//! allocates or switches streams (`return torch.cuda.stream(s)`) has those effects where it is
//! called, with no configuration.
//!
//! This is a function's summary computed at the call with the caller's context, the most
//! precise kind there is; the caps below keep it cheap (a callee is lowered at most once per
//! call site and level). What lies wholly inside the callee is judged where the callee is
//! lowered on its own: the graph drops such findings from the caller
//! (`Body::inlined_calls`).

use rustc_hash::{FxHashMap, FxHashSet};

use streamlint_graph::{BufferId, Memory, OpKind, Owner, ReleaseCause, Span};

use super::{constant_flags, Env, Lowerer, Value};
use crate::context::ModuleContext;
use crate::project::{Resolved, MAX_INLINE_BYTES, SMALL_CALLEE_BYTES};
use crate::syntax::{is_generator, Constant, Expr, FunctionDef, Keyword};

/// Calls lowered in place inside calls lowered in place, at most.
const MAX_INLINE_DEPTH: usize = 3;

/// What the caller had while the callee is lowered.
pub(super) struct CallerState<'a> {
    env: Env,
    cx: crate::context::ModuleContext<'a>,
    class: Option<&'a crate::summary::ClassSummary>,
    flags: FxHashMap<String, bool>,
    flag_splits: usize,
    exit: streamlint_graph::BlockId,
    loops: Vec<(streamlint_graph::BlockId, streamlint_graph::BlockId)>,
    binding: Option<String>,
    params: Vec<String>,
    named_streams: FxHashMap<String, streamlint_graph::StreamId>,
    forwarded: Option<(String, Vec<Keyword>)>,
    result: Option<Value>,
    restores_stream: bool,
    declared_globals: Vec<String>,
    dict_locals: FxHashSet<String>,
}

/// What the callee's `**kwargs` receives from a call: the keywords no named parameter takes, and
/// what the caller itself forwards with `**`.
fn forwarded_keywords(def: &FunctionDef, keywords: &[Keyword]) -> Option<(String, Vec<Keyword>)> {
    let param = def.keywords_param.clone()?;
    let taken = |k: &Keyword| {
        k.name
            .as_deref()
            .is_some_and(|n| def.params.iter().any(|p| !p.variadic && p.name == n))
    };
    Some((
        param,
        keywords.iter().filter(|k| !taken(k)).cloned().collect(),
    ))
}

/// Does the parameter look like it takes a stream (by annotation or name)?
pub(super) fn stream_like(name: &str, annotation: &str) -> bool {
    annotation.ends_with("Stream") || name == "stream" || name.ends_with("_stream")
}

/// Where a call lowered in place began, in the body's buffers and ops.
struct CallStart {
    /// The first buffer the caller made for the call's arguments.
    arguments: usize,
    /// The first buffer the callee made.
    callee: usize,
    /// The first op of the call, arguments included.
    ops: usize,
}

impl<'a> Lowerer<'a> {
    /// Is a project function lowered in place at this call? Small functions (getters and
    /// setters of a cached stream, wrappers of one call) are cheap to lower whatever they do; a
    /// larger one (with stream code: the index keeps no other) only where it makes the context
    /// of a `with` (a function returning `torch.cuda.stream(s)`). Larger helpers called
    /// elsewhere are summarized once instead (see `summaries`).
    pub(super) fn lowered_in_place(&self, callee: Resolved<'a>) -> bool {
        let size = (callee.def.span.end - callee.def.span.start) as usize;
        let in_side_block = self.current != self.b.ambient();
        size <= SMALL_CALLEE_BYTES
            || self.entering_context
            || (in_side_block && size <= MAX_INLINE_BYTES)
    }

    /// Does the call pass `callee` a stream the caller holds (a name bound to one) for one of
    /// its stream parameters (`f(x, out_stream=s)`)? How the caller ordered that stream only
    /// the call shows: such a callee is lowered in place whatever its size (within the index's
    /// cap).
    pub(super) fn passes_stream(
        &self,
        callee: Resolved<'a>,
        args: &[Expr],
        keywords: &[Keyword],
    ) -> bool {
        let params = &callee.def.params;
        params.iter().enumerate().any(|(i, p)| {
            let annotation = p
                .annotation
                .as_ref()
                .and_then(Expr::dotted)
                .unwrap_or_default();
            // Positional arguments fill the parameters before the first `*args`.
            let positional = || {
                (!params[..=i].iter().any(|q| q.variadic))
                    .then(|| args.get(i))
                    .flatten()
            };
            !p.variadic
                && stream_like(&p.name, &annotation)
                && Expr::keyword(keywords, &p.name)
                    .or_else(positional)
                    .is_some_and(|e| self.holds_stream(e))
        })
    }

    /// Is `e` a name bound to a stream here?
    fn holds_stream(&self, e: &Expr) -> bool {
        matches!(e, Expr::Name { id, .. } if matches!(self.env.get(id.as_str()), Some(Value::Stream(_))))
    }

    /// The project function a call names: defined in a checked file, not a local name, not a
    /// generator, within the size cap (the index keeps no other), not already being lowered
    /// (recursion), within the depth cap.
    pub(super) fn project_callee(&self, func: &Expr) -> Option<Resolved<'a>> {
        self.project_function(func)
            .filter(|callee| !is_generator(callee.def))
    }

    /// [`Self::project_callee`], generators included (see `context_managers`).
    pub(super) fn project_function(&self, func: &Expr) -> Option<Resolved<'a>> {
        if self.inline_stack.len() >= MAX_INLINE_DEPTH {
            return None;
        }
        if let Some(def) = self
            .local_function(func)
            .or_else(|| self.module_static(func))
        {
            let module = self.home_module;
            return (!self.inline_stack.contains(&(module, def.span)))
                .then_some(Resolved { module, def });
        }
        let root = super::root_name(func)?;
        if root == "self" || self.env.contains_key(root) || matches!(func, Expr::Call { .. }) {
            return None;
        }
        let qualified = self.cx.imports.qualify(func)?;
        let callee = self.cx.project.resolve(self.cx.module, &qualified)?;
        (!self
            .inline_stack
            .contains(&(callee.module, callee.def.span)))
        .then_some(callee)
    }

    /// The helper a call names when the function defines it in its own body or is a closure
    /// whose enclosing function does (`def _fill(t): ...` beside `def run(x): ... _fill(x)`): a
    /// name no local value rebinds, defined once there, called from the body's own code (not
    /// from inside a callee of another scope), and not a generator.
    fn local_function(&self, func: &Expr) -> Option<&'a FunctionDef> {
        let Expr::Name { id, .. } = func else {
            return None;
        };
        let mut named = self.local_functions.iter().filter(|d| d.name == *id);
        let def = *named.next()?;
        if named.next().is_some()
            || !matches!(self.env.get(id.as_str()), None | Some(Value::Unknown))
        {
            return None;
        }
        (self.in_own_scope() && !is_generator(def)).then_some(def)
    }

    /// The method of the body's own class a call `self.m(..)` names, to be lowered in place as a
    /// helper of the module is: its code runs on the same object, so what it does to `self`'s
    /// streams, events and tensors happens at the call. Plain and static methods only (not a
    /// property, a class method, a generator, or one with local helpers), not already being
    /// lowered, within the depth cap, and only where `self` is the body's own object.
    pub(super) fn own_method(&self, func: &Expr) -> Option<Resolved<'a>> {
        let Expr::Attribute { value, attr, .. } = func else {
            return None;
        };
        if !matches!(value.as_ref(), Expr::Name { id, .. } if id == "self")
            || self.inline_stack.len() >= MAX_INLINE_DEPTH
            || !self.sees_own_self()
        {
            return None;
        }
        let mut named = self.own_methods.iter().filter(|d| d.name == *attr);
        let def = *named.next()?;
        let plain = lowers_at_own_calls(def);
        let module = self.home_module;
        (plain && named.next().is_none() && !self.inline_stack.contains(&(module, def.span)))
            .then_some(Resolved { module, def })
    }

    /// Is `def` a method of the body's own class (see `own_method`)?
    fn is_own_method(&self, def: &FunctionDef) -> bool {
        self.own_methods.iter().any(|d| std::ptr::eq(*d, def))
    }

    /// Is `self` in the code being lowered the body's own object: the body's code, a local
    /// helper's or a method of its class lowered in place?
    fn sees_own_self(&self) -> bool {
        self.inline_stack.iter().all(|&(module, span)| {
            module == self.home_module
                && (self.local_functions.iter().any(|d| d.span == span)
                    || self.own_methods.iter().any(|d| d.span == span))
        })
    }

    /// Is the code being lowered the body's own, or a local helper's (which sees the same
    /// enclosing names)? Inside a callee from another scope, the body's local names mean nothing.
    pub(super) fn in_own_scope(&self) -> bool {
        self.inline_stack.iter().all(|&(module, span)| {
            module == self.home_module && self.local_functions.iter().any(|d| d.span == span)
        })
    }

    /// Is `name` a parameter or local of an enclosing function, seen from a closure (`model` in
    /// `def make(model): def step(x): return model(x)`)? A callable held there is the caller's
    /// value, like a parameter, not a function of some other module.
    pub(super) fn is_captured(&self, name: &str) -> bool {
        self.captured_names.iter().any(|c| c == name) && self.in_own_scope()
    }

    /// The static method a call `Class.method(..)` names, of a class of the body's own module
    /// that no local name hides, called from the module's own code.
    fn module_static(&self, func: &Expr) -> Option<&'a FunctionDef> {
        let Expr::Attribute { value, attr, .. } = func else {
            return None;
        };
        let Expr::Name { id: class, .. } = value.as_ref() else {
            return None;
        };
        if self.env.contains_key(class.as_str()) || !self.in_own_scope() {
            return None;
        }
        let def = self
            .static_methods
            .iter()
            .find(|(c, d)| c == class && d.name == *attr)
            .map(|(_, d)| *d)?;
        (!is_generator(def)).then_some(def)
    }

    /// Is `def` a static method of the body's own module (see `module_static`)?
    fn is_module_static(&self, def: &FunctionDef) -> bool {
        self.static_methods
            .iter()
            .any(|(_, d)| std::ptr::eq(*d, def))
    }

    /// Is `def` one of the body's local helpers (see `local_function`)?
    pub(super) fn is_local_function(&self, def: &FunctionDef) -> bool {
        self.local_functions.iter().any(|d| std::ptr::eq(*d, def))
    }

    /// Lower `callee` in place of the call at `span` and give back what it returns.
    pub(super) fn inline_call(
        &mut self,
        callee: Resolved<'a>,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        self.inline_call_around(callee, args, keywords, span, None)
    }

    /// [`Self::inline_call`], for a context manager written as a generator: the caller's `with`
    /// block (`around`) runs where the callee yields (see `context_managers`).
    pub(super) fn inline_call_around(
        &mut self,
        callee: Resolved<'a>,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
        around: Option<super::context_managers::WithBlock>,
    ) -> Value {
        let def = callee.def;
        // The caller evaluates the arguments, in its own context.
        let first_argument = self.b.body().buffers.len();
        let first_op = self.b.body().ops.len();
        // What the arguments make is not the call's value: not named after its binding.
        let binding = self.binding.take();
        let method = self.is_own_method(def);
        // A method's first parameter is the object the call is made on; a static method has none.
        let receiver = usize::from(method && !def.decorators.iter().any(is_staticmethod));
        let bound = self.bind_arguments(def, receiver, args, keywords);
        self.binding = binding;
        // `side = helper(x)`: the name the call's value goes to.
        let assigned_to = self
            .binding
            .clone()
            .filter(|_| self.binding_value == Some(span) && !self.inlining());
        let callee_name = format!(
            "{}.{}",
            self.cx.project.module(callee.module).name,
            def.name
        );
        let outer = self.b.begin_inline(span, &callee_name);
        let exit = self.b.new_block();
        // A local helper shares the caller's module and, inside a method, its `self`; a method
        // of the class shares both.
        let closure = self.is_local_function(def);
        let local = closure || method || self.is_module_static(def);
        let callee_cx = if local {
            self.cx
        } else {
            ModuleContext::callee(self.cx.project, callee.module, self.cx.deadline)
                .with_function_text(&def.name)
        };
        let mut saved = CallerState {
            env: std::mem::take(&mut self.env),
            cx: std::mem::replace(&mut self.cx, callee_cx),
            class: if local { self.class } else { self.class.take() },
            flags: std::mem::replace(&mut self.flags, constant_flags(&def.body)),
            flag_splits: std::mem::take(&mut self.flag_splits),
            exit: std::mem::replace(&mut self.exit, exit),
            loops: std::mem::take(&mut self.loops),
            binding: self.binding.take(),
            params: std::mem::take(&mut self.params),
            named_streams: std::mem::take(&mut self.named_streams),
            forwarded: {
                let received = forwarded_keywords(def, &self.expand_forwarded(keywords));
                std::mem::replace(&mut self.forwarded, received)
            },
            result: self.inline_result.take(),
            restores_stream: std::mem::replace(&mut self.restores_stream, false),
            declared_globals: std::mem::take(&mut self.declared_globals),
            dict_locals: std::mem::take(&mut self.dict_locals),
        };
        // From here on names are the callee's; a method sees the object's attributes as they are.
        let mut closure_names = None;
        if method {
            self.env = object_names(&saved.env);
            self.named_streams = object_streams(&saved.named_streams);
        } else if closure {
            // A closure reads the enclosing function's names it does not bind itself
            // (`stream` in `def gather(): with torch.cuda.stream(stream): ...`): the same values,
            // the same streams. They are moved in, the closure's own names set aside.
            let own = OwnNames::of(def);
            self.env = std::mem::take(&mut saved.env);
            self.named_streams = std::mem::take(&mut saved.named_streams);
            let aside = own.set_aside(&mut self.env, &mut self.named_streams);
            closure_names = Some((own, aside));
        }
        self.inline_stack.push((callee.module, def.span));
        let saved = self.suspend_caller(saved, around, outer);
        for (name, value, flag) in bound {
            if let Some(flag) = flag {
                self.flags.insert(name.clone(), flag);
            }
            self.bind(name, value);
        }
        let first_buffer = self.b.body().buffers.len();
        let first_stream = self.b.body().streams.len();
        self.stmts(&def.body);
        self.inline_stack.pop();
        let Some((saved, unreached)) = self.resume_caller(saved) else {
            return Value::Unknown;
        };
        let last = self.b.current();
        self.b.edge(last, exit);
        self.b.switch_to(exit);
        // A function that ends without `return` returns `None`.
        let result =
            std::mem::replace(&mut self.inline_result, saved.result).unwrap_or(Value::None);
        let callee_env = std::mem::replace(&mut self.env, saved.env);
        let callee_streams = std::mem::replace(&mut self.named_streams, saved.named_streams);
        if method {
            // What the method bound on `self` stays bound after the call.
            self.env.extend(object_names(&callee_env));
            self.named_streams.extend(object_streams(&callee_streams));
        } else if let Some((own, aside)) = closure_names {
            // What the closure did to the objects it shares with the enclosing function (an
            // attribute set on a loop's item, a tensor appended to its list) stays done; its
            // own names go, and the enclosing function's of the same names come back.
            self.env = callee_env;
            self.named_streams = callee_streams;
            own.set_aside(&mut self.env, &mut self.named_streams);
            aside.restore(&mut self.env, &mut self.named_streams);
        }
        self.cx = saved.cx;
        self.class = saved.class;
        self.flags = saved.flags;
        self.flag_splits = saved.flag_splits;
        self.exit = saved.exit;
        self.loops = saved.loops;
        self.binding = saved.binding;
        self.params = saved.params;
        self.forwarded = saved.forwarded;
        self.restores_stream = saved.restores_stream;
        self.declared_globals = saved.declared_globals;
        self.dict_locals = saved.dict_locals;
        let start = CallStart {
            arguments: first_argument,
            callee: first_buffer,
            ops: first_op,
        };
        self.release_callee_locals(start, &result, span);
        self.b.end_inline(outer);
        if let Some(block) = unreached {
            self.stmts(&block.body);
        }
        self.name_returned_stream(&result, first_stream, span);
        if let Some(name) = assigned_to {
            self.name_returned_tensors(&result, first_buffer, name);
        }
        result
    }

    /// Exchange the names and scope of the code being lowered with `other`'s: the callee's for
    /// the caller's, or back.
    pub(super) fn swap_caller_state(&mut self, other: &mut CallerState<'a>) {
        std::mem::swap(&mut self.env, &mut other.env);
        std::mem::swap(&mut self.cx, &mut other.cx);
        std::mem::swap(&mut self.class, &mut other.class);
        std::mem::swap(&mut self.flags, &mut other.flags);
        std::mem::swap(&mut self.flag_splits, &mut other.flag_splits);
        std::mem::swap(&mut self.exit, &mut other.exit);
        std::mem::swap(&mut self.loops, &mut other.loops);
        std::mem::swap(&mut self.binding, &mut other.binding);
        std::mem::swap(&mut self.params, &mut other.params);
        std::mem::swap(&mut self.named_streams, &mut other.named_streams);
        std::mem::swap(&mut self.forwarded, &mut other.forwarded);
        std::mem::swap(&mut self.inline_result, &mut other.result);
        std::mem::swap(&mut self.restores_stream, &mut other.restores_stream);
        std::mem::swap(&mut self.declared_globals, &mut other.declared_globals);
        std::mem::swap(&mut self.dict_locals, &mut other.dict_locals);
    }

    /// Tensors the callee made and returned are named by the name the call's value is assigned
    /// to (`side = _compute(x)`), which the caller's code uses, not by the callee's local name.
    fn name_returned_tensors(&mut self, result: &Value, first_buffer: usize, name: String) {
        for b in result.buffers() {
            if b.0 as usize >= first_buffer {
                let buffer = self.b.buffer_mut(b);
                buffer.name = name.clone();
                buffer.spelled = true;
            }
        }
    }

    /// A stream the callee made and returned (`get_side_stream()`) is named in messages and
    /// fixes by the call that gives it, which the caller can write; the callee's own name for
    /// it (a module global, a local) may not even be visible there.
    fn name_returned_stream(&mut self, result: &Value, first_stream: usize, span: Span) {
        let Value::Stream(s) = result else {
            return;
        };
        if s.index() < first_stream || self.inlining() {
            return;
        }
        let Some(call) = std::str::from_utf8(self.cx.text(span))
            .ok()
            .filter(|t| !t.contains('\n'))
            .map(str::to_string)
        else {
            return;
        };
        let stream = self.b.stream_mut(*s);
        stream.display = format!("`{call}`");
        stream.expr = call;
    }

    /// A value the code never names (`x.clone()` passed to a call) is named in messages by the
    /// expression that makes it, where that is short.
    fn name_by_source(&mut self, buffer: BufferId) {
        if self.b.body().buffer(buffer).spelled {
            return;
        }
        let made_at = self.b.body().ops.iter().find_map(|op| match op.kind {
            OpKind::Produce { buffer: b, .. } if b == buffer => Some(op.span),
            _ => None,
        });
        let text = made_at
            .and_then(|span| std::str::from_utf8(self.cx.text(span)).ok())
            .filter(|t| !t.contains('\n') && t.len() <= 60)
            .map(str::to_string);
        if let Some(text) = text {
            self.b.buffer_mut(buffer).name = text;
        }
    }

    /// `return v` inside a callee lowered in place: `v` is the call's value (merged over the
    /// callee's returns).
    pub(super) fn inline_return(&mut self, value: Value) {
        let merged = match self.inline_result.take() {
            Some(earlier) => earlier.merge(&value),
            None => value,
        };
        self.inline_result = Some(merged);
        let exit = self.exit;
        self.jump(exit);
    }

    /// The call's keywords with the `**kwargs` the function itself received (see `forwarded`)
    /// written out.
    fn expand_forwarded(&self, keywords: &[Keyword]) -> Vec<Keyword> {
        let mut out = Vec::with_capacity(keywords.len());
        for k in keywords {
            match self.forwarded_by(k) {
                Some(received) => out.extend(received.iter().cloned()),
                None => out.push(k.clone()),
            }
        }
        out
    }

    /// What a `**name` keyword of a call passes on, when `name` is the `**kwargs` the function
    /// received from a call lowered in place.
    pub(super) fn forwarded_by(&self, keyword: &Keyword) -> Option<&[Keyword]> {
        let (param, received) = self.forwarded.as_ref()?;
        let splats_it = keyword.name.is_none()
            && matches!(&keyword.value, Expr::Name { id, .. } if id == param);
        splats_it.then_some(received.as_slice())
    }

    pub(super) fn inlining(&self) -> bool {
        !self.inline_stack.is_empty()
    }

    /// A callee assigns a name its module binds at the top level: a module global (a stream
    /// made on first use and cached), kept for the rest of the caller's body.
    pub(super) fn remember_global(&mut self, name: &str, value: &Value) {
        if self.inlining()
            && self
                .cx
                .project
                .module(self.cx.module)
                .globals
                .contains(name)
        {
            self.globals
                .insert((self.cx.module, name.to_string()), value.clone());
        }
    }

    /// What a name not bound in the function holds: a module global a callee assigned
    /// earlier in this body, else nothing known.
    pub(super) fn module_global(&self, name: &str) -> Value {
        self.globals
            .get(&(self.cx.module, name.to_string()))
            .cloned()
            .unwrap_or(Value::Unknown)
    }

    /// The callee's parameters with the caller's values: by position, by keyword, or the
    /// default. A `True`/`False` given or defaulted decides the callee's tests of it. A
    /// stream-like parameter given a name the caller knows only by its text (`self.stream`)
    /// gets the caller's stream of that name.
    fn bind_arguments(
        &mut self,
        def: &FunctionDef,
        receiver: usize,
        args: &[Expr],
        keywords: &[Keyword],
    ) -> Vec<(String, Value, Option<bool>)> {
        let starred = args.iter().any(|a| matches!(a, Expr::Starred { .. }));
        let positional: Vec<(&Expr, Value)> = args.iter().map(|a| (a, self.eval(a))).collect();
        let named: Vec<(&Keyword, Value)> =
            keywords.iter().map(|k| (k, self.eval(&k.value))).collect();
        let mut out = Vec::with_capacity(def.params.len());
        // A method's first parameter is the object the call is made on, not an argument.
        for (i, p) in def.params.iter().enumerate().skip(receiver) {
            let at = i - receiver;
            let given = if p.variadic {
                None
            } else if i < def.positional && at < positional.len() && !starred {
                Some(positional[at].clone())
            } else {
                named
                    .iter()
                    .find(|(k, _)| k.name.as_deref() == Some(p.name.as_str()))
                    .map(|(k, v)| (&k.value, v.clone()))
            };
            let was_given = given.is_some();
            let (expr, value) = match given {
                Some((e, v)) => (Some(e), v),
                None => (p.default.as_ref(), Value::Unknown),
            };
            let flag = match expr {
                Some(Expr::Constant {
                    value: Constant::Bool(b),
                    ..
                }) => Some(*b),
                _ => None,
            };
            let annotation = p
                .annotation
                .as_ref()
                .and_then(Expr::dotted)
                .unwrap_or_default();
            // What the caller does not know as a tensor, passed for a stream parameter, is the
            // stream the caller's expression names (one code not seen handed it, perhaps).
            let untyped = |v: &Value| match v {
                Value::Unknown => true,
                Value::Param(b) => !self.confirmed.contains(b),
                _ => false,
            };
            let value = match (value, was_given) {
                (v, true) if untyped(&v) && stream_like(&p.name, &annotation) => expr
                    .and_then(Expr::dotted)
                    .map_or(v, |d| Value::Stream(self.named_stream(&d))),
                (v, _) => v,
            };
            // `def _scale(t: torch.Tensor, ..)`: what the caller passes there is a tensor.
            if annotation.ends_with("Tensor") {
                self.confirm_arguments(std::slice::from_ref(&value));
            }
            out.push((p.name.clone(), value, flag));
        }
        out
    }

    /// The callee's frame goes away: device tensors it made, and those the caller made only to
    /// pass to it (`helper(x.clone())`), neither returned, kept elsewhere nor left with the
    /// caller's names, are freed at the call.
    fn release_callee_locals(&mut self, start: CallStart, result: &Value, span: Span) {
        // Kept by someone else since the call began.
        let escaped: Vec<BufferId> = self.b.body().ops[start.ops..]
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Escape { buffer, .. } => Some(buffer),
                _ => None,
            })
            .collect();
        let made: Vec<BufferId> = (start.arguments..self.b.body().buffers.len())
            .map(|i| BufferId(i as u32))
            .filter(|b| {
                let buffer = self.b.body().buffer(*b);
                buffer.owner == Owner::Local
                    && buffer.memory == Memory::Device
                    && self.produced.contains(b)
                    && !result.holds(*b)
                    && !self.env.values().any(|v| v.holds(*b))
                    && !escaped.contains(b)
            })
            .collect();
        for buffer in made {
            if (buffer.0 as usize) < start.callee {
                self.name_by_source(buffer);
            }
            self.b.push(
                OpKind::Release {
                    buffer,
                    cause: ReleaseCause::CallReturn,
                },
                span,
            );
        }
    }
}

/// The names of an environment that reach into `self` (`self`, `self.stream`, `self.buf.data`).
fn object_names(env: &super::Env) -> super::Env {
    env.range::<str, _>((
        std::ops::Bound::Included("self"),
        std::ops::Bound::Excluded("self/"),
    ))
    .filter(|(k, _)| k.as_ref() == "self" || k.starts_with("self."))
    .map(|(k, v)| (k.clone(), v.clone()))
    .collect()
}

/// The streams an object's attributes name (`self.side`), by name.
fn object_streams(
    streams: &FxHashMap<String, streamlint_graph::StreamId>,
) -> FxHashMap<String, streamlint_graph::StreamId> {
    streams
        .iter()
        .filter(|(k, _)| k.starts_with("self."))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// Is the method one that `self.m(..)` calls of its class lower in place (see
/// `Lowerer::own_method`): a plain or static method, not a generator, defining no helpers of its
/// own (those are known only where it is lowered alone)?
pub(super) fn lowers_at_own_calls(def: &FunctionDef) -> bool {
    def.decorators.iter().all(is_staticmethod)
        && crate::syntax::local_functions(&def.body).is_empty()
        && !is_generator(def)
}

/// Is the decorator `@staticmethod`?
pub(crate) fn is_staticmethod(decorator: &Expr) -> bool {
    decorator.dotted().as_deref() == Some("staticmethod")
}

/// The names a closure binds itself: its parameters and locals. The rest of what it reads is
/// the enclosing function's.
struct OwnNames(Vec<String>);

/// Entries of the enclosing function's scope a closure's own names hide while it runs.
struct SetAside {
    env: Vec<(std::rc::Rc<str>, Value)>,
    streams: Vec<(String, streamlint_graph::StreamId)>,
}

impl OwnNames {
    fn of(def: &FunctionDef) -> OwnNames {
        let mut own: Vec<String> = super::flags::bindings(&def.body).into_keys().collect();
        own.extend(def.params.iter().map(|p| p.name.clone()));
        own.sort_unstable();
        own.dedup();
        OwnNames(own)
    }

    /// Take out of the scope the entries of the closure's own names (`x`, `x.attr`), and give
    /// them back.
    fn set_aside(
        &self,
        env: &mut Env,
        streams: &mut FxHashMap<String, streamlint_graph::StreamId>,
    ) -> SetAside {
        let under = |key: &str, name: &str| {
            key.strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        };
        let mut aside = SetAside {
            env: Vec::new(),
            streams: Vec::new(),
        };
        for name in &self.0 {
            let keys: Vec<std::rc::Rc<str>> = env
                .range::<str, _>((
                    std::ops::Bound::Included(name.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(k, _)| k.starts_with(name.as_str()))
                .filter(|(k, _)| under(k, name))
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                if let Some(v) = env.remove(&k) {
                    aside.env.push((k, v));
                }
            }
        }
        if !streams.is_empty() {
            let hidden: Vec<String> = streams
                .keys()
                .filter(|k| self.0.iter().any(|name| under(k, name)))
                .cloned()
                .collect();
            for k in hidden {
                if let Some(s) = streams.remove(&k) {
                    aside.streams.push((k, s));
                }
            }
        }
        aside
    }
}

impl SetAside {
    fn restore(self, env: &mut Env, streams: &mut FxHashMap<String, streamlint_graph::StreamId>) {
        env.extend(self.env);
        streams.extend(self.streams);
    }
}
