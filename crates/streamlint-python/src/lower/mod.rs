//! Lowering of one Python function into a graph [`Body`]: a structured walk over the syntax tree
//! that keeps an environment of what each name holds (tensors by allocation site, streams,
//! events) and the stream that is current, and emits the stream operations in program order.

pub(crate) mod inline;

use std::collections::{BTreeMap, HashMap, HashSet};

use streamlint_graph::{
    is_dotted_name, BlockId, Body, BodyBuilder, Buffer, BufferId, EscapeKind, Event, EventId,
    Memory, OpKind, Owner, Production, ReleaseCause, Span, Spelling, Stream, StreamId,
    StreamOrigin,
};

use crate::api::{
    ApiCall, HOST_READ_BUILTINS, HOST_READ_METHODS, METADATA_METHODS, NEUTRAL_BUILTINS,
    TENSOR_METHODS, THREAD_HAND_OFFS, VIEW_METHODS,
};
use crate::module::{ModuleContext, Role};
use crate::summary::{AttrKind, ClassSummary};
use crate::syntax::{Constant, Expr, FunctionDef, Keyword, Operator, Stmt};
use crate::wrappers::Wrapper;

const SPELLING: Spelling = Spelling {
    record_stream: Some(|buffer, stream| format!("{buffer}.record_stream({stream})")),
    wait_stream: |waiter, waitee| format!("{waiter}.wait_stream({waitee})"),
    line_comment: "#",
    statement_end: "",
    wait_can_fail: false,
    stream_block: Some(|stream| format!("with torch.cuda.stream({stream}):")),
};

/// How messages name what an assignment or a loop binds: the name, or the names a tuple
/// unpacks into (`uniq, inverse`), which the code reads one by one and a fix cannot write.
fn binding_name(target: &Expr) -> Option<String> {
    match target {
        Expr::Collection { elts, .. } => {
            let names: Option<Vec<String>> = elts.iter().map(Expr::dotted).collect();
            names.filter(|n| !n.is_empty()).map(|n| n.join(", "))
        }
        other => other.dotted(),
    }
}

/// Names a function body binds exactly once, to `True` or `False` (a disabled experiment, a
/// feature switch): the branches they guard are decided. Nested functions are scopes of their
/// own and are not looked into.
fn constant_flags(body: &[Stmt]) -> HashMap<String, bool> {
    bindings(body)
        .into_iter()
        .filter_map(|(name, (count, value))| (count == 1).then_some((name, value?)))
        .collect()
}

/// Every name `body` binds (assignments, loop and `with` targets, at any depth), with how many
/// bindings and, for an assignment, the `True`/`False` it binds (if it is one).
fn bindings(body: &[Stmt]) -> HashMap<String, (usize, Option<bool>)> {
    fn bind(
        bound: &mut HashMap<String, (usize, Option<bool>)>,
        target: &Expr,
        value: Option<bool>,
    ) {
        match target {
            Expr::Name { id, .. } => bound.entry(id.clone()).or_insert((0, value)).0 += 1,
            // Unpacking binds each name to something not known here.
            Expr::Collection { elts, .. } => elts.iter().for_each(|e| bind(bound, e, None)),
            _ => {}
        }
    }
    fn walk(stmts: &[Stmt], bound: &mut HashMap<String, (usize, Option<bool>)>) {
        for s in stmts {
            match s {
                Stmt::Assign {
                    targets,
                    value,
                    augmented,
                    ..
                } => {
                    let constant = match value {
                        Expr::Constant {
                            value: Constant::Bool(b),
                            ..
                        } if !augmented => Some(*b),
                        _ => None,
                    };
                    targets.iter().for_each(|t| bind(bound, t, constant));
                }
                Stmt::For { target, .. } => bind(bound, target, None),
                Stmt::With { items, .. } => items
                    .iter()
                    .filter_map(|i| i.var.as_ref())
                    .for_each(|v| bind(bound, v, None)),
                // `global`/`nonlocal` and other statements bind nothing the walk can see;
                // a name that is also bound elsewhere is not a flag.
                _ => {}
            }
            s.blocks().into_iter().for_each(|block| walk(block, bound));
        }
    }
    let mut bound = HashMap::new();
    walk(body, &mut bound);
    bound
}

/// The names that `if` and `elif` tests of `stmts` are (`if overlap:`, `if not overlap:`), at
/// any depth of nested blocks but not in nested functions.
fn tested_flags(stmts: &[Stmt], out: &mut Vec<String>) {
    for s in stmts {
        if let Stmt::If { test, .. } = s {
            let flag = match test {
                Expr::Operator {
                    op: Operator::Not,
                    operands,
                    ..
                } => operands.first(),
                other => Some(other),
            };
            if let Some(key) = flag.and_then(flag_key) {
                out.push(key);
            }
        }
        s.blocks()
            .into_iter()
            .for_each(|block| tested_flags(block, out));
    }
}

/// The name under which a test is a flag: a local name (`overlap`) or a setting's getter
/// (`envs.USE_MULTI_STREAM.get()`). Two tests with one key agree within a block that does not
/// assign it; attributes and other calls can change in between, so they are not flags.
fn flag_key(test: &Expr) -> Option<String> {
    match test {
        Expr::Name { id, .. } => Some(id.clone()),
        Expr::Call {
            func,
            args,
            keywords,
            ..
        } if args.is_empty() && keywords.is_empty() => {
            let getter = func
                .dotted()
                .filter(|d| !d.starts_with("self.") && d.ends_with(".get"))?;
            Some(format!("{getter}()"))
        }
        _ => None,
    }
}

/// Does any statement of `stmts` bind `name`?
/// Can an argument annotated `annotation` be a tensor or hold tensors (`torch.Tensor`,
/// `List[Tensor]`, `list`, `Optional[Sequence[...]]`)? `int`, `ForwardBatch` and the like cannot.
fn annotation_may_hold_tensors(annotation: &str) -> bool {
    const CONTAINERS: &[&str] = &[
        "list", "List", "tuple", "Tuple", "Sequence", "Iterable", "dict", "Dict", "Mapping",
    ];
    let inner = annotation
        .trim()
        .trim_start_matches("typing.")
        .trim_start_matches("Optional[");
    annotation.contains("Tensor") || CONTAINERS.iter().any(|c| inner.starts_with(c))
}

/// By convention `host_*`, `*_cpu` and `pinned_*` values live in host memory, so no stream work
/// made them; their place is still not known for sure.
fn host_named(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["host", "cpu", "pinned"].iter().any(|w| lower.contains(w))
}

/// `streams[i]`, `self.comm_streams[rank]`: one stream of a collection of streams, named by the
/// text of the indexing, so that indexing again with the same name gives the same stream.
fn indexed_stream(container: &Expr, index: &Expr) -> Option<String> {
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

fn assigns(stmts: &[Stmt], name: &str) -> bool {
    bindings(stmts).contains_key(name)
}

/// Does the expression call a class other than the tensor types (`Net()`, `nn.Linear(4, 4)`),
/// making an object? `.cuda()` or `.to(device)` on one moves a module's parameters and returns
/// the module, not a tensor.
fn constructs_object(expr: &Expr) -> bool {
    let Expr::Call { func, .. } = expr else {
        return false;
    };
    let Some(name) = func.dotted() else {
        return false;
    };
    let last = name.rsplit('.').next().unwrap_or(&name);
    let class_like = last.starts_with(|c: char| c.is_ascii_uppercase())
        && last.chars().any(|c| c.is_ascii_lowercase());
    let tensor_type = last.ends_with("Tensor")
        || last.ends_with("Storage")
        || matches!(last, "Parameter" | "Buffer" | "Variable");
    class_like && !tensor_type
}

/// Words that name values the code leaves unnamed (a call's tuple result, a loop element bound to
/// a pattern): not spellings of the value.
const DESCRIBED_VALUES: &[&str] = &[
    "result",
    "element",
    "tensor",
    "pinned",
    "event",
    "gradients",
];

/// Two `set_stream` statements of one block, by index and span (see `set_stream_pairs`).
struct SetStreamPair {
    set: usize,
    restore: usize,
    set_span: Span,
    restore_span: Span,
}

/// Loops nested deeper than this are lowered in one pass (no trial pass for loop-carried names).
const MAX_TRIAL_LOOP_DEPTH: usize = 3;

/// Correlated tests split the paths at most this many times per function (each split lowers
/// the rest of its block twice).
const MAX_FLAG_SPLITS: usize = 2;

/// Name under which the gradients written by `backward()` are kept in the environment.
const GRADIENTS: &str = "<gradients>";

/// What a name or expression holds.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    /// Tensors made in this body (or views of them), by allocation site.
    Tensors(Vec<BufferId>),
    /// A value the caller passed in: a tensor produced before entry, if it is used as one.
    Param(BufferId),
    Stream(StreamId),
    /// A `torch.cuda.stream(..)` context; `None` for `stream(None)`, which does nothing.
    StreamContext(Option<StreamId>),
    Event(EventId),
    /// `t.untyped_storage()`.
    Storage(Vec<BufferId>),
    /// The handle of an asynchronous collective launched while this stream was current.
    Work(StreamId),
    /// A tuple, list or dict literal.
    Group(Vec<Value>),
    /// The constant `None`.
    None,
    /// A string constant (`"cuda:0"`, `"cpu"`).
    Text(String),
    /// A device module bound to a name (`dm = torch.get_device_module(dev)`), by its qualified
    /// name.
    Module(String),
    Unknown,
}

impl Value {
    /// Every buffer the value holds, including the caller's values.
    fn buffers(&self) -> Vec<BufferId> {
        let mut out = Vec::new();
        self.collect_buffers(&mut out, true);
        out
    }

    /// Does the value hold `buffer` (a caller's value included)? Asked of every name at each
    /// assignment, so it allocates nothing.
    fn holds(&self, buffer: BufferId) -> bool {
        match self {
            Value::Tensors(b) | Value::Storage(b) => b.contains(&buffer),
            Value::Param(b) => *b == buffer,
            Value::Group(items) => items.iter().any(|v| v.holds(buffer)),
            _ => false,
        }
    }

    /// Buffers known to be tensors made in this body.
    fn local_tensors(&self) -> Vec<BufferId> {
        let mut out = Vec::new();
        self.collect_buffers(&mut out, false);
        out
    }

    fn collect_buffers(&self, out: &mut Vec<BufferId>, with_params: bool) {
        match self {
            Value::Tensors(b) | Value::Storage(b) => out.extend(b),
            Value::Param(b) if with_params => out.push(*b),
            Value::Group(items) => items
                .iter()
                .for_each(|v| v.collect_buffers(out, with_params)),
            _ => {}
        }
        out.sort();
        out.dedup();
    }

    /// Refer to `to` wherever the value refers to `from`.
    fn replace(&mut self, from: BufferId, to: BufferId) {
        match self {
            Value::Tensors(b) | Value::Storage(b) => {
                for x in b.iter_mut().filter(|x| **x == from) {
                    *x = to;
                }
                b.sort();
                b.dedup();
            }
            Value::Param(b) if *b == from => *b = to,
            Value::Group(items) => items.iter_mut().for_each(|v| v.replace(from, to)),
            _ => {}
        }
    }

    fn events(&self) -> Vec<EventId> {
        match self {
            Value::Event(e) => vec![*e],
            Value::Group(items) => items.iter().flat_map(Value::events).collect(),
            _ => Vec::new(),
        }
    }

    fn tensors(buffers: Vec<BufferId>) -> Value {
        if buffers.is_empty() {
            Value::Unknown
        } else {
            Value::Tensors(buffers)
        }
    }

    /// The value a name holds after two paths meet.
    fn merge(&self, other: &Value) -> Value {
        match (self, other) {
            (a, b) if a == b => a.clone(),
            // `x = None` on one path: what the other path bound may still be there.
            (Value::None, known) | (known, Value::None) => known.clone(),
            // A tensor on one path and something untracked on the other: the tensor may be there.
            (t @ (Value::Tensors(_) | Value::Param(_)), Value::Unknown)
            | (Value::Unknown, t @ (Value::Tensors(_) | Value::Param(_))) => t.clone(),
            // `torch.cuda.Stream() if multi_stream else nullcontext()`: a side stream on one
            // path and no stream context on the other.
            (Value::Stream(s), Value::Unknown) | (Value::Unknown, Value::Stream(s)) if s.0 != 0 => {
                Value::Stream(*s)
            }
            // An event found to be one (`ready.record()`) on one path is the same object on
            // the other.
            (Value::Event(e), Value::Unknown) | (Value::Unknown, Value::Event(e)) => {
                Value::Event(*e)
            }
            // `return nullcontext()` on one path, `return torch.cuda.stream(s)` on the other.
            (Value::StreamContext(Some(s)), Value::Unknown | Value::StreamContext(None))
            | (Value::Unknown | Value::StreamContext(None), Value::StreamContext(Some(s))) => {
                Value::StreamContext(Some(*s))
            }
            // A list still empty on one path holds on the other what was put in it.
            (Value::Group(none), g @ Value::Group(_))
            | (g @ Value::Group(_), Value::Group(none))
                if none.is_empty() =>
            {
                g.clone()
            }
            // Tuples (or lists) of one shape: position by position.
            (Value::Group(a), Value::Group(b)) if a.len() == b.len() => {
                Value::Group(a.iter().zip(b).map(|(x, y)| x.merge(y)).collect())
            }
            (
                Value::Tensors(_) | Value::Param(_) | Value::Group(_),
                Value::Tensors(_) | Value::Param(_) | Value::Group(_),
            ) if !self.buffers().is_empty() || !other.buffers().is_empty() => {
                let mut all = self.buffers();
                all.extend(other.buffers());
                all.sort();
                all.dedup();
                Value::Tensors(all)
            }
            _ => Value::Unknown,
        }
    }
}

/// What a `for` loop binds on each iteration.
#[derive(Clone)]
struct LoopTarget<'e> {
    target: &'e Expr,
    element: Value,
    /// The iterated collection is known to hold items (a list the function filled).
    at_least_once: bool,
}

type Env = BTreeMap<String, Value>;

fn merge_env(a: &Env, b: &Env) -> Env {
    let mut out = a.clone();
    for (k, v) in b {
        match out.get_mut(k) {
            // Most names hold the same value on both paths: nothing to merge or copy.
            Some(ours) if ours == v => {}
            Some(ours) => *ours = ours.merge(v),
            None => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// What kind of callee an unseen call goes to.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Callee {
    /// A submodule or callable object (`self.encoder(x)`, `model(x)`): a tensor computed on the
    /// current stream.
    Module,
    /// A function of this module: work on the current stream, returning who knows what.
    LocalFunction,
    /// A function from elsewhere: nothing known but that it may keep its arguments.
    Foreign,
}

/// Where a `.to(..)`/`.cuda()` sends a tensor.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Target {
    Device,
    Host,
    /// A dtype or something unknown: a conversion on the same device.
    SameDevice,
}

pub struct Lowerer<'a> {
    cx: ModuleContext<'a>,
    class: Option<&'a ClassSummary>,
    /// The function puts back the stream it changes by protocol (`__enter__`/`__exit__`, a
    /// context-manager generator that restores in `finally`).
    restores_stream: bool,
    /// For each enclosing statement list: does a `try` whose `finally` restores the stream
    /// follow the statement being lowered?
    restore_follows: Vec<bool>,
    /// The stream blocks (`with torch.cuda.stream(s):`) around the statement being lowered:
    /// the stream each makes current, its header's span, and the CFG block its body starts in.
    stream_blocks: Vec<(StreamId, Span, BlockId)>,
    /// How many enclosing `try` statements restore the stream in their `finally`.
    restoring_try: usize,
    /// Lowering the module's top level (code that runs at import).
    at_import: bool,
    /// How many enclosing `if __name__ == "__main__":` blocks.
    main_guard: usize,
    method: String,
    b: BodyBuilder,
    env: Env,
    current: StreamId,
    exit: BlockId,
    /// (continue target, break target) of the enclosing loops.
    loops: Vec<(BlockId, BlockId)>,
    loop_depth: usize,
    /// Entities by allocation site, so a trial pass and the real pass agree on identities.
    sites: HashMap<(Span, String), u32>,
    named_streams: HashMap<String, StreamId>,
    /// Entities held by attributes, by the attribute's dotted name.
    attribute_buffers: HashMap<String, BufferId>,
    attribute_events: HashMap<String, EventId>,
    params: Vec<String>,
    /// Caller values seen used as tensors (annotated, passed to torch, tensor methods called).
    confirmed: HashSet<BufferId>,
    /// Tensors made only from values of unknown place (the caller's values, `torch.load(..)`,
    /// `pad_sequence(..)` of untracked lists).
    unplaced: HashSet<BufferId>,
    entry_ops: Vec<(OpKind, Span)>,
    /// Buffers some site has produced already: only those can have a previous instance.
    produced: HashSet<BufferId>,
    /// How many times each buffer was bound to a name (never decreases; see `bind`).
    placements: HashMap<BufferId, u32>,
    /// Lowering a loop body only to learn what its names hold at the end of an iteration.
    in_trial: bool,
    /// Local flags bound once to `True` or `False` (`overlap = False`), and names whose
    /// correlated tests split the paths (see `split_on`): their `if`s are decided.
    flags: HashMap<String, bool>,
    /// Splits made on correlated tests so far (each doubles what follows it).
    flag_splits: usize,
    /// The name being assigned, to give a created stream a readable name.
    binding: Option<String>,
    /// The value being assigned was just computed by the statement (so `a, b = op(..)` may
    /// split it); loop and comprehension targets take existing values.
    fresh_value: bool,
    /// The module whose function this body is (calls lowered in place switch `cx`).
    home_module: usize,
    /// The expression being evaluated is a `with` item's context: a project function called
    /// there may make its stream current (see `inline`).
    entering_context: bool,
    /// Module-level names (by module and name) that a callee lowered in place assigned
    /// (`global _SIDE; _SIDE = torch.cuda.Stream()`): later calls that read them see the value.
    globals: HashMap<(usize, String), Value>,
    /// The callees being lowered in place (by module and span), innermost last (see `inline`).
    inline_stack: Vec<(usize, Span)>,
    /// What the innermost callee lowered in place returns, over the returns seen so far.
    inline_result: Option<Value>,
    /// The buffers of the function's own parameters (see [`Body::arguments`]).
    param_buffers: Vec<BufferId>,
}

impl<'a> Lowerer<'a> {
    /// Lower a function (or, with `def` = `None`, the module's top-level statements) in the
    /// role the module gives it.
    pub fn lower(
        cx: ModuleContext<'a>,
        role: Role<'a>,
        def: Option<&FunctionDef>,
        module_body: &[Stmt],
    ) -> Body {
        let ambient = Stream {
            display: "the current stream".into(),
            expr: "torch.cuda.current_stream()".into(),
            origin: StreamOrigin::Ambient,
            span: None,
        };
        let (name, span) = match def {
            Some(d) => (d.name.clone(), d.span),
            None => ("<module>".to_string(), Span::default()),
        };
        let mut b = BodyBuilder::new(name.clone(), span, SPELLING, ambient);
        if let Some(reason) = role.device_forbidden {
            b.forbid_device(reason);
        }
        let exit = b.new_block();
        let current = b.ambient();
        let mut l = Lowerer {
            cx,
            class: role.class,
            restores_stream: role.restores_stream,
            restore_follows: Vec::new(),
            stream_blocks: Vec::new(),
            restoring_try: 0,
            at_import: def.is_none(),
            main_guard: 0,
            method: name,
            b,
            env: role
                .attr_text
                .iter()
                .map(|(k, v)| (k.clone(), Value::Text(v.clone())))
                .collect(),
            current,
            exit,
            loops: Vec::new(),
            loop_depth: 0,
            sites: HashMap::new(),
            named_streams: HashMap::new(),
            attribute_buffers: HashMap::new(),
            attribute_events: HashMap::new(),
            params: Vec::new(),
            confirmed: HashSet::new(),
            unplaced: HashSet::new(),
            entry_ops: Vec::new(),
            produced: HashSet::new(),
            placements: HashMap::new(),
            flags: def.map(|d| constant_flags(&d.body)).unwrap_or_default(),
            flag_splits: 0,
            in_trial: false,
            binding: None,
            fresh_value: false,
            home_module: cx.module,
            globals: HashMap::new(),
            entering_context: false,
            inline_stack: Vec::new(),
            inline_result: None,
            param_buffers: Vec::new(),
        };
        match def {
            Some(d) => {
                l.bind_params(d, role.is_method);
                l.stmts(&d.body);
            }
            None => l.stmts(module_body),
        }
        let last = l.b.current();
        l.b.edge(last, exit);
        l.b.switch_to(exit);
        if let Some(d) = def {
            l.b.push(OpKind::ScopeEnd, d.name_span);
        }
        for buffer in std::mem::take(&mut l.param_buffers) {
            if l.confirmed.contains(&buffer) {
                l.b.argument(buffer);
            }
        }
        // Values that exist at entry first, then what orders them (events, waits).
        let (mut entry_ops, ordering): (Vec<_>, Vec<_>) = std::mem::take(&mut l.entry_ops)
            .into_iter()
            .partition(|(k, _)| matches!(k, OpKind::Produce { .. }));
        entry_ops.extend(ordering);
        l.b.prepend_to_entry(entry_ops);
        l.b.finish()
    }

    fn bind_params(&mut self, def: &FunctionDef, is_method: bool) {
        let is_static = def
            .decorators
            .iter()
            .any(|d| d.dotted().as_deref() == Some("staticmethod"));
        for (i, p) in def.params.iter().enumerate() {
            if i == 0 && is_method && !is_static {
                continue;
            }
            self.params.push(p.name.clone());
            let annotation = p
                .annotation
                .as_ref()
                .and_then(Expr::dotted)
                .unwrap_or_default();
            let default_stream = p
                .default
                .as_ref()
                .filter(|d| self.api_kind(d) == Some(ApiCall::StreamFactory));
            let value = if let Some(d) = default_stream {
                // Evaluated once, when the `def` runs: one stream for every call.
                let stream = Stream {
                    display: format!("`{}`", p.name),
                    expr: p.name.clone(),
                    origin: StreamOrigin::Global,
                    span: Some(d.span()),
                };
                Value::Stream(self.b.add_stream(stream))
            } else if inline::stream_like(&p.name, &annotation) {
                Value::Stream(self.named_stream(&p.name))
            } else if annotation.ends_with("Event") {
                Value::Event(self.event_at(p.span, &p.name, false))
            } else {
                let how = if host_named(&p.name) {
                    Production::Host
                } else {
                    Production::Entry
                };
                let buf = self.buffer_at(p.span, "param", &p.name, Memory::Device, Owner::Caller);
                // An annotation says what the argument is (`layer_id: int`, `batch: ForwardBatch`);
                // `*args` gathers several.
                let annotated_other = p.annotation.as_ref().is_some_and(|a| {
                    let span = a.span();
                    let text = self
                        .cx
                        .source
                        .get(span.start as usize..span.end as usize)
                        .unwrap_or("Tensor");
                    !annotation_may_hold_tensors(text)
                });
                if !p.variadic && !annotated_other {
                    self.param_buffers.push(buf);
                }
                if annotation.ends_with("Tensor") {
                    self.confirmed.insert(buf);
                }
                self.entry_ops.push((
                    OpKind::Produce {
                        buffer: buf,
                        stream: self.b.ambient(),
                        how,
                    },
                    p.span,
                ));
                self.unplaced.insert(buf);
                Value::Param(buf)
            };
            self.bind(p.name.clone(), value);
        }
    }

    // ----- entities -------------------------------------------------------------------------

    /// The entity made at `span` (one per tag and name there), created on first use.
    fn site(&mut self, span: Span, tag: &str, make: impl FnOnce(&mut BodyBuilder) -> u32) -> u32 {
        // Spans of a callee in another module are offsets in that module's text. Tensors and
        // events a callee lowered in place makes are made anew at each call; a stream it makes
        // is one stream (helpers that make streams cache them: `_S = _S or Stream()`).
        let mut key = (span, tag.to_string());
        if self.cx.module != self.home_module {
            key.1 = format!("{tag}@{}", self.cx.module);
        }
        if let Some(call) = self.b.inlined_at().filter(|_| tag != "stream") {
            key.1 = format!("{}@call{}", key.1, call.start);
        }
        if let Some(id) = self.sites.get(&key) {
            return *id;
        }
        let id = make(&mut self.b);
        self.sites.insert(key, id);
        id
    }

    fn buffer_at(
        &mut self,
        span: Span,
        tag: &str,
        name: &str,
        memory: Memory,
        owner: Owner,
    ) -> BufferId {
        let buffer = Buffer {
            name: name.to_string(),
            spelled: is_dotted_name(name) && !DESCRIBED_VALUES.contains(&name),
            memory,
            owner,
        };
        let key = if tag.starts_with("element-of:") {
            tag.to_string()
        } else {
            format!("{tag}:{name}")
        };
        BufferId(self.site(span, &key, |b| b.add_buffer(buffer).0))
    }

    /// The event created at `span` (`created`), or received there (a parameter).
    fn event_at(&mut self, span: Span, name: &str, created: bool) -> EventId {
        let event = Event {
            name: format!("`{name}`"),
            expr: name.to_string(),
            created: created.then_some(span),
            internal: false,
        };
        EventId(self.site(span, "event", |b| b.add_event(event).0))
    }

    fn attribute_buffer(&mut self, dotted: &str, memory: Memory) -> BufferId {
        if let Some(b) = self.attribute_buffers.get(dotted) {
            return *b;
        }
        let id = self.b.add_buffer(Buffer {
            name: dotted.to_string(),
            spelled: is_dotted_name(dotted),
            memory,
            owner: Owner::Attribute,
        });
        self.attribute_buffers.insert(dotted.to_string(), id);
        id
    }

    fn attribute_event(&mut self, dotted: &str) -> EventId {
        if let Some(e) = self.attribute_events.get(dotted) {
            return *e;
        }
        let id = self.b.add_event(Event {
            name: format!("`{dotted}`"),
            expr: dotted.to_string(),
            created: None,
            internal: false,
        });
        self.attribute_events.insert(dotted.to_string(), id);
        id
    }

    /// A stream known by its source text: an attribute, a parameter, a cached stream.
    fn named_stream(&mut self, name: &str) -> StreamId {
        if let Some(s) = self.named_streams.get(name) {
            return *s;
        }
        let origin = if name.starts_with("self.") {
            StreamOrigin::Attribute
        } else if self.params.iter().any(|p| p == name) {
            StreamOrigin::Parameter
        } else {
            StreamOrigin::Unknown
        };
        let id = self.b.add_stream(Stream {
            display: format!("`{name}`"),
            expr: name.to_string(),
            origin,
            span: None,
        });
        self.named_streams.insert(name.to_string(), id);
        id
    }

    /// A name for the value being produced: the assigned name, else the source text.
    fn value_name(&self, fallback: &str) -> String {
        self.binding.clone().unwrap_or_else(|| fallback.to_string())
    }

    fn produce(&mut self, span: Span, name: &str, memory: Memory, how: Production) -> Value {
        let buf = self.buffer_at(span, "value", name, memory, Owner::Local);
        self.new_instance(buf, span);
        self.b.push(
            OpKind::Produce {
                buffer: buf,
                stream: self.current,
                how,
            },
            span,
        );
        Value::Tensors(vec![buf])
    }

    /// Before a site makes a new instance (a loop's next iteration), names that still hold the
    /// previous one are moved to a buffer of their own, so the two are not confused.
    fn new_instance(&mut self, buffer: BufferId, span: Span) {
        // A site's first instance has no predecessor; skip the scan of every name.
        if self.produced.insert(buffer) || !self.env.values().any(|v| v.holds(buffer)) {
            return;
        }
        let b = self.b.body().buffer(buffer).clone();
        let previous = self.buffer_at(span, "previous", &b.name, b.memory, b.owner);
        self.b.push(
            OpKind::Carry {
                from: buffer,
                into: previous,
            },
            span,
        );
        for v in self.env.values_mut() {
            v.replace(buffer, previous);
        }
        // Every holder of `buffer` now holds the previous instance: take it as shared.
        self.placements.insert(previous, 2);
    }

    /// PyTorch's blocking copies between host and device end with a synchronize of the
    /// current stream (`memcpy_and_sync`): everything queued on it before is complete.
    fn sync_current(&mut self, span: Span) {
        self.b.push(
            OpKind::SyncStream {
                stream: self.current,
            },
            span,
        );
    }

    /// Is the value known to hold a tensor?
    fn is_tensor(&self, value: &Value) -> bool {
        match value {
            Value::Param(b) => self.confirmed.contains(b),
            other => !other.local_tensors().is_empty(),
        }
    }

    /// The buffers of values known to be tensors (caller values only once confirmed).
    fn tensor_buffers(&self, values: &[Value]) -> Vec<BufferId> {
        let mut out = Vec::new();
        for v in values {
            match v {
                Value::Param(b) if self.confirmed.contains(b) => out.push(*b),
                Value::Param(_) => {}
                Value::Group(items) => out.extend(self.tensor_buffers(items)),
                other => out.extend(other.local_tensors()),
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The value is used where only a tensor fits.
    fn confirm(&mut self, values: &[Value]) {
        for v in values {
            match v {
                Value::Param(b) => {
                    self.confirmed.insert(*b);
                }
                Value::Group(items) => self.confirm(items),
                _ => {}
            }
        }
    }

    fn on_host(&self, buffer: BufferId) -> bool {
        self.b.body().buffer(buffer).memory != Memory::Device
    }

    /// An operation reads its inputs: device tensors on the current stream, host tensors on
    /// the host (a CPU operation).
    fn read_all(&mut self, buffers: &[BufferId], span: Span) {
        for &buffer in buffers {
            let kind = if self.on_host(buffer) {
                OpKind::HostRead { buffer }
            } else {
                OpKind::Read {
                    buffer,
                    stream: self.current,
                }
            };
            self.b.push(kind, span);
        }
    }

    /// An operation writes its outputs in place: device tensors on the current stream, host
    /// tensors on the host.
    fn write_all(&mut self, buffers: &[BufferId], span: Span) {
        for &buffer in buffers {
            let kind = if self.on_host(buffer) {
                OpKind::HostWrite { buffer }
            } else {
                OpKind::Write {
                    buffer,
                    stream: self.current,
                }
            };
            self.b.push(kind, span);
        }
    }

    /// A copy engine reads or writes host memory as work of the current stream.
    fn copy_access(&mut self, buffers: &[BufferId], write: bool, span: Span) {
        for &buffer in buffers {
            let kind = if write {
                OpKind::Write {
                    buffer,
                    stream: self.current,
                }
            } else {
                OpKind::Read {
                    buffer,
                    stream: self.current,
                }
            };
            self.b.push(kind, span);
        }
    }

    /// The result of an operation on `inputs`: on the host when all of them are host tensors.
    /// Made only from values of unknown place, it is taken to be on the device but is not known
    /// to be there (`.cuda()` of it is still a transfer).
    fn produce_result(&mut self, inputs: &[BufferId], span: Span) -> Value {
        let name = self.value_name("result");
        if !inputs.is_empty() && inputs.iter().all(|b| self.on_host(*b)) {
            return self.produce(span, &name, Memory::PageableHost, Production::Host);
        }
        let v = self.produce(span, &name, Memory::Device, Production::Compute);
        let unknown_place = |b: &BufferId| {
            self.unplaced.contains(b) || self.b.body().buffer(*b).owner == Owner::Caller
        };
        if inputs.iter().all(unknown_place) {
            self.unplaced.extend(v.buffers());
        }
        v
    }

    /// The host reads device tensors: it waits for the current stream first.
    fn host_read(&mut self, value: &Value, span: Span) {
        let device: Vec<_> = value
            .buffers()
            .into_iter()
            .filter(|b| self.b.body().buffer(*b).memory == Memory::Device)
            .collect();
        if device.is_empty() {
            for buffer in value.buffers() {
                self.b.push(OpKind::HostRead { buffer }, span);
            }
            return;
        }
        self.read_all(&device, span);
        self.b.push(
            OpKind::SyncStream {
                stream: self.current,
            },
            span,
        );
    }

    fn escape(&mut self, value: &Value, kind: EscapeKind, span: Span) {
        // Events first: an event handed over with a tensor (`return out, done`, stored on the
        // object, given to a pending-work record or a queue) is how the receiver orders itself
        // after the tensor's writes.
        for event in value.events() {
            self.b.push(OpKind::HandOffEvent { event }, span);
        }
        for buffer in value.buffers() {
            self.b.push(OpKind::Escape { buffer, kind }, span);
        }
    }

    /// `return v` / `yield v`: the caller consumes the value. What the object still holds
    /// outlives the caller's use, so it is marked as kept by the object first.
    fn hand_to_caller(&mut self, value: &Value, span: Span) {
        for buffer in value.buffers() {
            let held = self
                .env
                .iter()
                .any(|(k, v)| k.starts_with("self.") && v.holds(buffer));
            if held {
                self.b.push(
                    OpKind::Escape {
                        buffer,
                        kind: EscapeKind::Attribute,
                    },
                    span,
                );
            }
        }
        self.escape(value, EscapeKind::Caller, span);
    }

    /// Bind `name` to `value`: every name gets its value here (or by merging and restoring
    /// environments made here), so `placements` counts every way a buffer came to be held.
    fn bind(&mut self, name: String, value: Value) {
        for buffer in value.buffers() {
            *self.placements.entry(buffer).or_default() += 1;
        }
        self.env.insert(name, value);
    }

    /// Is `buffer` held by a name other than `except`? A buffer bound only once is held by one
    /// name at most, which spares a scan of every name on each rebinding (a long function
    /// binds thousands).
    fn held_elsewhere(&self, buffer: BufferId, except: &str) -> bool {
        self.placements.get(&buffer).is_some_and(|&n| n > 1)
            && self.env.iter().any(|(k, v)| k != except && v.holds(buffer))
    }

    /// Release what a name held when it is deleted or rebound (unless it is kept by the new
    /// value or another name).
    fn release_name(&mut self, name: &str, keep: &[BufferId], cause: ReleaseCause, span: Span) {
        let Some(old) = self.env.get(name).cloned() else {
            return;
        };
        for buffer in old.local_tensors() {
            let local = self.b.body().buffer(buffer).owner == Owner::Local;
            // Freed host memory waits in PyTorch's caching host allocator until the copies
            // that use it finish: only device memory is released in stream order.
            let device = !self.on_host(buffer);
            if local && device && !keep.contains(&buffer) && !self.held_elsewhere(buffer, name) {
                self.b.push(OpKind::Release { buffer, cause }, span);
            }
        }
    }

    fn event_of(&mut self, value: &Value, expr: &Expr) -> Option<EventId> {
        match value {
            Value::Event(e) => Some(*e),
            _ => expr.dotted().map(|d| self.attribute_event(&d)),
        }
    }

    fn stream_of(&mut self, value: &Value, expr: &Expr) -> Option<StreamId> {
        match value {
            Value::Stream(s) => Some(*s),
            _ if expr.is_none() => None,
            _ => expr.dotted().map(|d| self.named_stream(&d)),
        }
    }

    // ----- statements -----------------------------------------------------------------------

    fn stmts(&mut self, stmts: &[Stmt]) {
        // For each statement: does a `try` that restores the stream in `finally` come later?
        let mut later = vec![false; stmts.len()];
        for i in (0..stmts.len().saturating_sub(1)).rev() {
            later[i] = later[i + 1] || self.finally_restores_stream(&stmts[i + 1]);
        }
        let scoped = self.set_stream_pairs(stmts);
        let mut before_set: Vec<Option<StreamId>> = vec![None; stmts.len()];
        for (i, (s, later)) in stmts.iter().zip(later).enumerate() {
            if self.cx.deadline.passed() {
                self.b.cut_short();
                return;
            }
            if let Some(flag) = self.correlated_flag(&stmts[i..]) {
                return self.split_on(flag, &stmts[i..]);
            }
            if scoped.iter().any(|p| p.set == i) {
                before_set[i] = Some(self.current);
            }
            self.restore_follows.push(later);
            self.stmt(s);
            self.restore_follows.pop();
            for p in &scoped {
                if p.restore == i && before_set[p.set] == Some(self.current) {
                    let spans = (p.set_span, p.restore_span);
                    self.b.rewrites_mut().scoped_set_streams.push(spans);
                }
            }
        }
    }

    /// The value a test of flags (`overlap`, `not overlap`, `overlap and x`) takes on the path
    /// being lowered, if the flags decide it without evaluating anything else: `and` and `or`
    /// only by their first operand (which short-circuits the rest) or by all of them.
    fn decided_flag(&self, test: &Expr) -> Option<bool> {
        let Expr::Operator { op, operands, .. } = test else {
            return self.flags.get(&flag_key(test)?).copied();
        };
        let short_circuit = match op {
            Operator::Not => return self.decided_flag(operands.first()?).map(|v| !v),
            Operator::Is => return self.decided_none_test(operands),
            Operator::IsNot => return self.decided_none_test(operands).map(|v| !v),
            Operator::And => false,
            Operator::Or => true,
            _ => return None,
        };
        let first = self.decided_flag(operands.first()?);
        if first == Some(short_circuit) {
            return first;
        }
        let all: Option<Vec<bool>> = operands.iter().map(|e| self.decided_flag(e)).collect();
        all.map(|values| values.contains(&short_circuit) == short_circuit)
    }

    /// `x is None` where the name holds a stream (`stream = get_side_stream()`) or `None`. A
    /// stream that may be `None` on some path counts as there: such tests guard whether the
    /// program uses a side stream at all, and the paths without it have no stream work to judge.
    /// Other values (events, tensors) keep both paths.
    fn decided_none_test(&self, operands: &[Expr]) -> Option<bool> {
        let [x, Expr::Constant {
            value: Constant::None,
            ..
        }] = operands
        else {
            return None;
        };
        match self.env.get(&x.dotted()?)? {
            Value::Stream(_) => Some(false),
            Value::None => Some(true),
            _ => None,
        }
    }

    /// A name that the first of `stmts` tests (`if overlap:`, also in a nested `if` or an
    /// `elif`) and a later statement of the same block tests again, with no assignment to it in
    /// the block: the two tests agree, so the paths that take one branch of the first and the
    /// other of the second cannot run.
    fn correlated_flag(&self, stmts: &[Stmt]) -> Option<String> {
        if self.flag_splits >= MAX_FLAG_SPLITS {
            return None;
        }
        let (first, rest) = stmts.split_first()?;
        let mut here = Vec::new();
        tested_flags(std::slice::from_ref(first), &mut here);
        here.retain(|n| !self.flags.contains_key(n));
        if here.is_empty() {
            return None;
        }
        let mut later = Vec::new();
        tested_flags(rest, &mut later);
        here.into_iter()
            .find(|n| later.contains(n) && !assigns(stmts, n))
    }

    /// Lower `stmts` once with `flag` true and once with it false, and join: its tests agree
    /// on each path.
    fn split_on(&mut self, flag: String, stmts: &[Stmt]) {
        self.flag_splits += 1;
        let from = self.b.current();
        let (env, current, produced) = (self.env.clone(), self.current, self.produced.clone());
        let mut ends = Vec::new();
        let mut produced_on_some_path = produced.clone();
        for value in [true, false] {
            self.branch(from);
            self.env = env.clone();
            self.current = current;
            self.produced = produced.clone();
            self.flags.insert(flag.clone(), value);
            self.stmts(stmts);
            self.flags.remove(&flag);
            produced_on_some_path.extend(self.produced.iter().copied());
            ends.push((self.b.current(), std::mem::take(&mut self.env)));
        }
        let join = self.b.new_block();
        for (end, _) in &ends {
            self.b.edge(*end, join);
        }
        self.b.switch_to(join);
        self.env = merge_env(&ends[0].1, &ends[1].1);
        self.produced = produced_on_some_path;
    }

    /// (set, restore) indices of `torch.cuda.set_stream(..)` statements followed in the same
    /// block by another `set_stream` statement with none between: if the second puts back the
    /// stream current before the first (checked while lowering), the pair is a stream block.
    fn set_stream_pairs(&self, stmts: &[Stmt]) -> Vec<SetStreamPair> {
        let set_stream_span = |s: &Stmt| match s {
            Stmt::Expr(e @ Expr::Call { func, .. })
                if self.api_kind(e) == Some(ApiCall::SetStream)
                    && self
                        .cx
                        .imports
                        .qualify(func)
                        .is_some_and(|q| q == "torch.cuda.set_stream") =>
            {
                Some(e.span())
            }
            _ => None,
        };
        let sets: Vec<(usize, Span)> = stmts
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, set_stream_span(s)?)))
            .collect();
        sets.windows(2)
            .map(|w| SetStreamPair {
                set: w[0].0,
                restore: w[1].0,
                set_span: w[0].1,
                restore_span: w[1].1,
            })
            .collect()
    }

    /// The API meaning of a call expression, if it is a known one.
    fn api_kind(&self, expr: &Expr) -> Option<ApiCall> {
        let Expr::Call { func, .. } = expr else {
            return None;
        };
        self.cx
            .imports
            .qualify(func)
            .and_then(|q| self.cx.api.classify(&q))
    }

    /// A `try` whose `finally` calls `set_stream`.
    fn finally_restores_stream(&self, stmt: &Stmt) -> bool {
        matches!(stmt, Stmt::Try { finalbody, .. } if self.cx.sets_stream(finalbody))
    }

    /// Continue in a block nothing reaches (after return, raise, break, continue).
    fn dead_end(&mut self) {
        let dead = self.b.new_block();
        self.b.switch_to(dead);
    }

    fn jump(&mut self, to: BlockId) {
        let from = self.b.current();
        self.b.edge(from, to);
        self.dead_end();
    }

    fn branch(&mut self, from: BlockId) -> BlockId {
        let block = self.b.new_block();
        self.b.edge(from, block);
        self.b.switch_to(block);
        block
    }

    fn stmt(&mut self, stmt: &Stmt) {
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
                        self.env.remove(id);
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
                // A loop over a list known to hold items runs its body at least once.
                let at_least_once = self.iterates_filled_list(iter);
                let element = self.loop_element(iter, target);
                let loop_target = LoopTarget {
                    target,
                    element,
                    at_least_once,
                };
                self.lower_loop(None, Some(loop_target), body, orelse, *span);
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
                // `if use_side_stream: main.wait_stream(side)`: the guard goes with whether the
                // stream exists at all, which the analysis cannot see; take the edge as made.
                if orelse.is_empty() && !body.is_empty() && body.iter().all(is_ordering_stmt) {
                    self.eval(test);
                    return self.stmts(body);
                }
                let t = self.eval(test);
                if !t.local_tensors().is_empty() {
                    self.host_read(&t, *span);
                }
                let from = self.b.current();
                let before = self.env.clone();
                let before_current = self.current;
                self.branch(from);
                self.stmts(body);
                let (then_end, then_env) =
                    (self.b.current(), std::mem::replace(&mut self.env, before));
                let then_current = std::mem::replace(&mut self.current, before_current);
                self.branch(from);
                self.stmts(orelse);
                let else_end = self.b.current();
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
                let saved = self.current;
                let outer_blocks = self.stream_blocks.len();
                let mut acquired = Vec::new();
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
                    self.b.push(
                        OpKind::WaitStream {
                            waiter: s,
                            waitee: saved,
                        },
                        span,
                    );
                }
                self.stmts(body);
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
                    self.env.remove(&bound);
                }
            }
            Stmt::Expr(e) => match self.forwarded_statements(e) {
                Some(stmts) => self.stmts(&stmts),
                None => {
                    self.eval(e);
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
            Stmt::Other => {}
        }
    }

    /// `with device_module.stream(s):` through a handle the model does not know: a `.stream(..)`
    /// method given a stream is a stream context.
    fn stream_context_by_shape(&mut self, value: Value, context: &Expr) -> Value {
        if !matches!(value, Value::Unknown) {
            return value;
        }
        let Expr::Call { func, args, .. } = context else {
            return value;
        };
        let (Expr::Attribute { attr, .. }, Some(arg)) = (func.as_ref(), args.first()) else {
            return value;
        };
        if attr != "stream" {
            return value;
        }
        let stream = match arg.dotted().and_then(|d| self.env.get(&d).cloned()) {
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
    fn acquired_streams(&mut self, context: &Expr) -> Vec<(StreamId, Span)> {
        let Expr::Call {
            func,
            args,
            keywords,
            span,
        } = context
        else {
            return Vec::new();
        };
        if self
            .cx
            .imports
            .qualify(func)
            .is_some_and(|q| q.ends_with("cuda.graph"))
        {
            // Graph capture synchronizes the device before it starts.
            self.b.push(OpKind::SyncDevice, *span);
        }
        let mut out = Vec::new();
        for a in args.iter().chain(keywords.iter().map(|k| &k.value)) {
            if let Some(Value::Stream(s)) = a.dotted().and_then(|d| self.env.get(&d).cloned()) {
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

    fn lower_loop(
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
            let entry_ops = self.entry_ops.len();
            let splits = self.flag_splits;
            self.in_trial = true;
            let _ = self.loop_body(test, target.clone(), body, span);
            self.in_trial = false;
            // The real pass may split where the trial did.
            self.flag_splits = splits;
            let carried = merge_env(&before, &self.env);
            self.b.rollback(cp);
            self.entry_ops.truncate(entry_ops);
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
    fn loop_body(
        &mut self,
        test: Option<&Expr>,
        target: Option<LoopTarget<'_>>,
        body: &[Stmt],
        span: Span,
    ) -> (BlockId, BlockId) {
        let from = self.b.current();
        let head = self.branch(from);
        if let Some(t) = test {
            let v = self.eval(t);
            if !v.local_tensors().is_empty() {
                self.host_read(&v, span);
            }
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

    fn assign_stmt(&mut self, targets: &[Expr], value: &Expr, augmented: bool, span: Span) {
        if augmented {
            let v = self.eval(value);
            let t = self.eval(&targets[0]);
            let written = t.local_tensors();
            if !written.is_empty() {
                self.read_all(&v.buffers(), span);
                self.write_all(&written, span);
            }
            return;
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
        self.binding = targets.first().and_then(binding_name);
        let v = self.eval(value);
        self.binding = None;
        self.fresh_value = true;
        for t in targets {
            self.assign(t, v.clone(), span);
        }
        self.fresh_value = false;
    }

    fn assign(&mut self, target: &Expr, value: Value, span: Span) {
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
                self.bind(id.clone(), value);
            }
            Expr::Attribute {
                value: owner, attr, ..
            } => {
                if attr == "data" {
                    if let Expr::Name { id, .. } = owner.as_ref() {
                        if let Some(old) = self.env.get(id).cloned() {
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

    /// `values, indices = x.topk(k)`: an op that returns several tensors makes one buffer per
    /// name, each produced where the first one was.
    fn split_result(&mut self, first: BufferId, names: &[Expr], span: Span) -> Vec<Value> {
        // Only a result made by this very statement; views (`unbind`, `split`) share memory.
        let just_made = match self.b.body().ops.last().map(|op| &op.kind) {
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

    // ----- expressions ----------------------------------------------------------------------

    fn eval(&mut self, expr: &Expr) -> Value {
        match expr {
            Expr::Name { id, .. } => match self.env.get(id) {
                Some(v) => v.clone(),
                None => self.module_global(id),
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
                        }
                        if !vals.iter().any(|v| self.is_tensor(v)) {
                            return Value::Unknown;
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
                }
                if self.is_tensor(&v) && self.is_tensor(&i) {
                    // Indexing with a tensor gathers: a kernel that reads both.
                    let mut inputs = v.buffers();
                    inputs.extend(i.buffers());
                    self.read_all(&inputs, *span);
                    let name = self.value_name("result");
                    return self.produce(*span, &name, Memory::Device, Production::Compute);
                }
                if self.is_tensor(&v) && matches!(i, Value::Param(_)) {
                    // `blocks[slots]` with indices from the caller may gather (a read); the
                    // result is kept as a view so that writes through it reach `blocks`.
                    let inputs = self.tensor_buffers(std::slice::from_ref(&v));
                    self.read_all(&inputs, *span);
                }
                match v {
                    Value::Group(_) => Value::tensors(v.buffers()),
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
                for g in generators {
                    let it = self.eval(&g.iter);
                    let element = self.element_of(&it, &g.target);
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
        }
    }

    /// Does a `for` loop over `iter` go through a list this function filled (`for t in outs`,
    /// `for t, d in zip(outs, devices)`)?
    fn iterates_filled_list(&mut self, iter: &Expr) -> bool {
        let sequences: &[Expr] = match iter {
            Expr::Call { func, args, .. }
                if matches!(func.dotted().as_deref(), Some("zip" | "enumerate")) =>
            {
                args
            }
            other => std::slice::from_ref(other),
        };
        sequences.iter().any(|seq| {
            matches!(seq, Expr::Name { id, .. }
                if matches!(self.env.get(id), Some(Value::Group(items)) if !items.is_empty()))
        })
    }

    /// What a `for` loop over `iter` binds to `target`. `zip(a, b)` and `enumerate(a)` give
    /// each name of a tuple target the elements of its own sequence.
    fn loop_element(&mut self, iter: &Expr, target: &Expr) -> Value {
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
                        let seq = self.eval(a);
                        self.element_of(&seq, n)
                    })
                    .collect();
                Value::Group(parts)
            }
            Some((Some(f), args)) if f == "enumerate" && args.len() == 1 && names.len() == 2 => {
                let seq = self.eval(&args[0]);
                Value::Group(vec![Value::Unknown, self.element_of(&seq, &names[1])])
            }
            _ => {
                let it = self.eval(iter);
                self.element_of(&it, target)
            }
        }
    }

    /// What iterating `it` binds to `target`: elements of our tensors, or values the caller
    /// made before the call.
    fn element_of(&mut self, it: &Value, target: &Expr) -> Value {
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

    fn attribute(&mut self, expr: &Expr, owner: &Expr, attr: &str) -> Value {
        if let Some(d) = expr.dotted() {
            if let Some(v) = self.env.get(&d) {
                return v.clone();
            }
            if let Some(v) = self.class_attribute(&d, expr.span()) {
                self.bind(d, v.clone());
                return v;
            }
        }
        let base = self.eval(owner);
        match attr {
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
            _ => Value::Unknown,
        }
    }

    /// What `self.x` holds at entry, from the class summary.
    fn class_attribute(&mut self, dotted: &str, span: Span) -> Option<Value> {
        let kind = self.class?.attrs.get(dotted)?.clone();
        Some(match kind {
            AttrKind::Stream | AttrKind::StreamCache => Value::Stream(self.named_stream(dotted)),
            AttrKind::AmbientStream => Value::Stream(self.b.ambient()),
            AttrKind::Event => {
                let e = self.attribute_event(dotted);
                // Recorded by another method after what it stages: known as recorded at entry.
                if let Some(stream) = self.class?.event_streams.get(dotted).cloned() {
                    let s = self.named_stream(&stream);
                    self.entry_ops.push((
                        OpKind::RecordEvent {
                            event: e,
                            stream: s,
                        },
                        span,
                    ));
                }
                Value::Event(e)
            }
            AttrKind::Host { pinned } => {
                let memory = if pinned {
                    Memory::PinnedHost
                } else {
                    Memory::PageableHost
                };
                let buf = self.attribute_buffer(dotted, memory);
                let ambient = self.b.ambient();
                self.entry_ops.push((
                    OpKind::Produce {
                        buffer: buf,
                        stream: ambient,
                        how: Production::Host,
                    },
                    span,
                ));
                Value::Tensors(vec![buf])
            }
            AttrKind::Tensor { stream, .. } if stream.is_empty() => {
                let buf = self.attribute_buffer(dotted, Memory::Device);
                let ambient = self.b.ambient();
                self.entry_ops.push((
                    OpKind::Produce {
                        buffer: buf,
                        stream: ambient,
                        how: Production::Entry,
                    },
                    span,
                ));
                Value::Tensors(vec![buf])
            }
            AttrKind::Tensor { stream, transfer } => {
                let s = self.named_stream(&stream);
                let buf = self.attribute_buffer(dotted, Memory::Device);
                let how = staged_production(transfer);
                self.entry_ops.push((
                    OpKind::Produce {
                        buffer: buf,
                        stream: s,
                        how,
                    },
                    span,
                ));
                let class = self.class?;
                let waits_here = class
                    .methods
                    .get(&self.method)
                    .is_some_and(|m| m.orders(&stream));
                if !waits_here && class.waited_elsewhere(&stream, &self.method) {
                    // Another method orders the current stream after the producer; assume the
                    // caller calls it first.
                    let ambient = self.b.ambient();
                    self.entry_ops.push((
                        OpKind::WaitStream {
                            waiter: ambient,
                            waitee: s,
                        },
                        span,
                    ));
                }
                Value::Tensors(vec![buf])
            }
        })
    }

    /// For a statement that calls a module function only forwarding to other calls, those
    /// calls (see `wrappers`).
    fn forwarded_statements(&self, e: &Expr) -> Option<Vec<Stmt>> {
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
    fn wrapper(&self, func: &Expr) -> Option<&'a Wrapper> {
        let Expr::Name { id, .. } = func else {
            return None;
        };
        if self.env.contains_key(id) {
            return None;
        }
        self.cx.wrappers.get(id)
    }

    fn call(&mut self, func: &Expr, args: &[Expr], keywords: &[Keyword], span: Span) -> Value {
        // A call through a local name or attribute chain rooted at a local is a method call on a
        // value; otherwise the callee is resolved through the imports.
        let root = root_name(func);
        let root_is_local = root.is_some_and(|r| self.env.contains_key(r) || r == "self");
        let api = match root.and_then(|r| self.env.get(r)) {
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
        };
        if let Some((call, qualified)) = api {
            if !(matches!(func, Expr::Name { id, .. } if self.env.contains_key(id))) {
                return self.api_call(call, &qualified, args, keywords, span);
            }
        }
        if let Some(call) = self
            .wrapper(func)
            .and_then(|w| w.inline_expr(args, keywords, span))
        {
            return self.eval(&call);
        }
        if let Some(callee) = self.inline_target(func) {
            return self.inline_call(callee, args, keywords, span);
        }
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
                let recv = self.eval(receiver);
                let recv = self.duck_type(recv, receiver, attr, args.len() + keywords.len());
                self.method_call(recv, receiver, attr, args, keywords, span)
            }
            Expr::Name { id, .. } if !self.env.contains_key(id) => {
                let vals = self.eval_args(args, keywords);
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
                self.module_call(func.dotted(), vals, args.len(), span)
            }
        }
    }

    fn eval_args(&mut self, args: &[Expr], keywords: &[Keyword]) -> Vec<Value> {
        let mut vals: Vec<Value> = args.iter().map(|a| self.eval(a)).collect();
        vals.extend(keywords.iter().map(|k| self.eval(&k.value)));
        vals
    }

    /// A call whose body is not known. A module or local helper reads its tensor arguments on
    /// the current stream and makes a tensor; a callee from elsewhere may keep what it is given.
    fn opaque_call(&mut self, vals: Vec<Value>, span: Span, callee: Callee) -> Value {
        if callee == Callee::Foreign {
            // Nothing says it runs device work, but it may keep what it is given.
            for v in &vals {
                self.escape(v, EscapeKind::UnknownCallee, span);
            }
            return Value::Unknown;
        }
        // Device inputs are read on the current stream; what such a callee does with host
        // tensors (keep them, hand them on) is not known to read them.
        let inputs: Vec<BufferId> = self
            .tensor_buffers(&vals)
            .into_iter()
            .filter(|b| !self.on_host(*b))
            .collect();
        if inputs.is_empty() {
            return Value::Unknown;
        }
        self.read_all(&inputs, span);
        let name = self.value_name("result");
        let how = if callee == Callee::Module {
            Production::Module
        } else {
            Production::Call
        };
        self.produce(span, &name, Memory::Device, how)
    }

    /// `self.m(..)` for a method of this class: its effects on the object's attributes.
    fn self_method_call(
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
        for stream in summary.waits_on.clone() {
            let s = self.named_stream(&stream);
            let current = self.current;
            if s != current {
                self.b.push(
                    OpKind::WaitStream {
                        waiter: current,
                        waitee: s,
                    },
                    span,
                );
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
                self.b.push(OpKind::SyncStream { stream: s }, span);
            }
        }
        for (attr, kind) in summary.assigns.clone() {
            if let AttrKind::Tensor { stream, transfer } = kind {
                if stream.is_empty() {
                    self.env.remove(&attr);
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
                self.env.remove(&attr);
            }
        }
        let inputs = self.tensor_buffers(&vals);
        self.read_all(&inputs, span);
        Value::Unknown
    }

    fn api_call(
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
                let origin = if self.at_import && self.main_guard == 0 {
                    StreamOrigin::Global
                } else if self.binding.is_some() {
                    StreamOrigin::Created
                } else {
                    StreamOrigin::Temporary
                };
                let stream = Stream {
                    display,
                    expr,
                    origin,
                    span: Some(span),
                };
                Value::Stream(StreamId(
                    self.site(span, "stream", |b| b.add_stream(stream).0),
                ))
            }
            ApiCall::StreamContext => {
                let Some(arg) = first.or_else(|| Expr::keyword(keywords, "stream")) else {
                    return Value::StreamContext(None);
                };
                let v = self.eval(arg);
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
                let device = match Expr::keyword(keywords, "device") {
                    Some(d) => self.target_of(d) == Target::Device,
                    None => qualified.ends_with("_like") && !like_host,
                };
                let name = self.value_name("tensor");
                // Placed on the device by an explicit `device=`, or like a tensor known to be there.
                let explicit = Expr::keyword(keywords, "device").is_some()
                    || vals.first().is_some_and(|v| {
                        let b = v.local_tensors();
                        !b.is_empty() && b.iter().all(|b| !self.unplaced.contains(b))
                    });
                if device {
                    let non_blocking = is_true(Expr::keyword(keywords, "non_blocking"));
                    let how = if call == ApiCall::TensorFromData {
                        Production::HostToDevice { non_blocking }
                    } else if explicit {
                        Production::Allocate
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
                match out {
                    Some(out) if !self.tensor_buffers(std::slice::from_ref(&out)).is_empty() => {
                        let written = self.tensor_buffers(std::slice::from_ref(&out));
                        self.write_all(&written, span);
                        out
                    }
                    _ => self.produce_result(&inputs, span),
                }
            }
            ApiCall::Collective => {
                let vals = self.eval_args(args, keywords);
                let tensor_args = crate::api::collective_tensor_args(qualified);
                let firsts: Vec<Value> = vals.iter().take(tensor_args).cloned().collect();
                self.confirm(&firsts);
                let tensors = self.tensor_buffers(&vals);
                self.read_all(&tensors, span);
                self.write_all(&tensors, span);
                if !is_true(Expr::keyword(keywords, "async_op")) {
                    return Value::Unknown;
                }
                // The process group keeps the tensors alive until the work completes.
                for v in &vals {
                    self.escape(v, EscapeKind::Container, span);
                }
                Value::Work(self.current)
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
    fn target_of(&mut self, expr: &Expr) -> Target {
        // `"cuda:0"`, and f-strings such as `f"cuda:{rank}"` by their leading text.
        let bound = expr.dotted().and_then(|d| match self.env.get(&d) {
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
        match self.env.get(&expr.dotted().unwrap_or_default()) {
            Some(Value::Tensors(_)) => Target::Device,
            _ => Target::SameDevice,
        }
    }

    /// A receiver whose kind is not known, classified by the method called on it: only streams
    /// have `wait_stream`, and an event-named value that is recorded or waited on is an event.
    fn duck_type(&mut self, recv: Value, receiver: &Expr, method: &str, args_len: usize) -> Value {
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
            || (method == "record" && args_len == 0 && !name.contains('.'));
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

    /// `staged.append((t, host))` on a list this function made (`staged = []`): the list now
    /// holds the value, so a later loop over it gets it back (a free through the list is a
    /// free of the tensor). Where the list goes, its items go (returned, stored, passed on).
    fn grow_local_list(
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

    fn method_call(
        &mut self,
        recv: Value,
        receiver: &Expr,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        if CONTAINER_METHODS.contains(&method)
            && !matches!(recv, Value::Stream(_) | Value::Event(_))
        {
            // `outputs.append(t)`, `queue.put(t)`: kept, not read.
            let vals = self.eval_args(args, keywords);
            if self.grow_local_list(receiver, &recv, method, &vals) {
                return Value::Unknown;
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
            Value::Work(launched) => {
                self.eval_args(args, keywords);
                // `work.wait()` makes the current stream wait for the collective, which itself
                // waited for the stream it was launched from.
                if method == "wait" && launched != self.current {
                    self.b.push(
                        OpKind::WaitStream {
                            waiter: self.current,
                            waitee: launched,
                        },
                        span,
                    );
                }
                Value::Unknown
            }
            Value::Tensors(_) => self.tensor_method(recv, method, args, keywords, span),
            Value::Param(_)
                if TENSOR_METHODS.contains(&method) || VIEW_METHODS.contains(&method) =>
            {
                self.tensor_method(recv, method, args, keywords, span)
            }
            Value::Group(_) if matches!(method, "values" | "items" | "keys" | "copy") => {
                self.eval_args(args, keywords);
                Value::tensors(recv.buffers())
            }
            Value::Unknown if makes_tensor(method) && !constructs_object(receiver) => {
                // `self.next_input.cuda()`, `self.shard.new_empty(n)`: a tensor method on a
                // value the analysis does not track makes a tensor it does.
                self.tensor_method(Value::Unknown, method, args, keywords, span)
            }
            _ => {
                let vals = self.eval_args(args, keywords);
                if method == "pin_memory" {
                    let name = self.value_name("pinned");
                    return self.produce(span, &name, Memory::PinnedHost, Production::Host);
                }
                if method == "record_stream" {
                    // `obj.record_stream(s)` on something not known as a tensor: not ours to judge.
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
                    // `attn.norm_out(h)`: a method given tensors, most often a submodule.
                    return self.module_call(Some(method.to_string()), vals, args.len(), span);
                }
                // A method of some other object: it may keep its arguments.
                for v in &vals {
                    self.escape(v, EscapeKind::UnknownCallee, span);
                }
                Value::Unknown
            }
        }
    }

    /// A call of a module or callable object (`self.encoder(x)`, `model(x)`): its first
    /// positional argument is a tensor. A backward function's results come from the streams the
    /// forward ops ran on, not from the current one.
    fn module_call(
        &mut self,
        callee: Option<String>,
        vals: Vec<Value>,
        positional: usize,
        span: Span,
    ) -> Value {
        if positional > 0 {
            self.confirm(&vals[..1]);
        }
        let last = callee
            .as_deref()
            .and_then(|c| c.rsplit('.').next())
            .unwrap_or("");
        let kind = if last.contains("backward") || last == "grad" {
            Callee::LocalFunction
        } else {
            Callee::Module
        };
        self.opaque_call(vals, span, kind)
    }

    /// `s.wait_stream(torch.cuda.current_stream())` directly in `with torch.cuda.stream(s):`
    /// waits on itself; before the block's header the argument means the stream it was
    /// written for.
    fn note_hoistable_wait(
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

    /// The stream a wait on `arg` orders after. A library function does not know that its
    /// caller runs on the device's default stream: gradient hooks run on the backward op's
    /// stream, callers may be inside `with torch.cuda.stream(...)`. So a wait on
    /// `default_stream()` written in a function orders nothing the function's current stream
    /// did; it stands for a stream of its own. Script entry points (module code, `main`) do run
    /// on the default stream.
    fn wait_target(&mut self, stream: StreamId, arg: &Expr) -> StreamId {
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
        };
        StreamId(self.site(arg.span(), "default-stream", |b| b.add_stream(stream).0))
    }

    fn stream_method(
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
                        // Recorded as it is made: no wait can come before its record.
                        let name = self.value_name("event");
                        self.event_at(span, &name, false)
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
                self.b.push(OpKind::SyncStream { stream: s }, span);
                Value::Unknown
            }
            "get" | "setdefault" | "__getitem__" => Value::Stream(s),
            _ => Value::Unknown,
        }
    }

    fn event_method(
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

    fn tensor_method(
        &mut self,
        recv: Value,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let vals = self.eval_args(args, keywords);
        self.confirm(std::slice::from_ref(&recv));
        // What a tensor is copied from is a tensor too.
        if method == "copy_" {
            self.confirm(&vals[..vals.len().min(1)]);
        }
        let own = recv.buffers();
        let arg_buffers = self.tensor_buffers(&vals);
        let non_blocking = is_true(Expr::keyword(keywords, "non_blocking"))
            || (method == "cuda"
                && matches!(
                    args.get(1),
                    Some(Expr::Constant {
                        value: Constant::Bool(true),
                        ..
                    })
                ));
        let on_device = own
            .iter()
            .all(|b| self.b.body().buffer(*b).memory == Memory::Device);
        let known_device = on_device
            && matches!(recv, Value::Tensors(_))
            && !own.iter().all(|b| self.unplaced.contains(b));
        match method {
            "record_stream" => {
                if let (Some(a), Some(v)) = (args.first(), vals.first()) {
                    if let Some(s) = self.stream_of(v, a) {
                        for &buffer in &own {
                            self.b
                                .push(OpKind::RecordStream { buffer, stream: s }, span);
                        }
                    }
                }
                Value::Unknown
            }
            "cuda" | "to" | "cpu" => {
                let target = match method {
                    "cuda" => Target::Device,
                    "cpu" => Target::Host,
                    _ => match args.first().or_else(|| Expr::keyword(keywords, "device")) {
                        // `.to(other)`: onto `other`'s device.
                        Some(_)
                            if !args.is_empty()
                                && matches!(vals.first(), Some(Value::Tensors(_))) =>
                        {
                            Target::Device
                        }
                        Some(d) => self.target_of(d),
                        None if non_blocking => Target::Device,
                        None => Target::SameDevice,
                    },
                };
                let source = own
                    .first()
                    .map(|b| self.b.body().buffer(*b).name.clone())
                    .unwrap_or_else(|| "tensor".into());
                let name = self.value_name(&source);
                match target {
                    Target::Device if known_device => recv,
                    Target::Device => {
                        let host: Vec<BufferId> =
                            own.iter().copied().filter(|b| self.on_host(*b)).collect();
                        self.copy_access(&host, false, span);
                        let v = self.produce(
                            span,
                            &name,
                            Memory::Device,
                            Production::HostToDevice { non_blocking },
                        );
                        // A blocking copy of host memory synchronizes the current stream.
                        if !non_blocking && !host.is_empty() {
                            self.sync_current(span);
                        }
                        v
                    }
                    Target::Host if !on_device => recv,
                    Target::Host => {
                        self.read_all(&own, span);
                        let memory = if non_blocking {
                            Memory::PinnedHost
                        } else {
                            Memory::PageableHost
                        };
                        let v = self.produce(
                            span,
                            &name,
                            memory,
                            Production::DeviceToHost { non_blocking },
                        );
                        if !non_blocking {
                            self.sync_current(span);
                        }
                        v
                    }
                    Target::SameDevice if known_device || matches!(recv, Value::Param(_)) => {
                        self.read_all(&own, span);
                        self.produce(span, &name, Memory::Device, Production::Compute)
                    }
                    Target::SameDevice => recv,
                }
            }
            "pin_memory" => {
                let name = self.value_name("pinned");
                self.produce(span, &name, Memory::PinnedHost, Production::Host)
            }
            "untyped_storage" | "storage" => Value::Storage(own),
            "copy_" => {
                let from_device = arg_buffers.iter().any(|b| !self.on_host(*b));
                let to_device = own.iter().any(|b| !self.on_host(*b));
                let from_host = arg_buffers.iter().any(|b| self.on_host(*b));
                let to_host = own.iter().any(|b| self.on_host(*b));
                // Only a copy that touches host memory is a transfer; device to device is an
                // ordinary kernel on the current stream, asynchronous to the host whatever
                // `non_blocking` says.
                if (from_device && to_host) || (from_host && to_device) {
                    // A transfer: the copy engine reads and writes host memory on the stream.
                    self.copy_access(&arg_buffers, false, span);
                    self.copy_access(&own, true, span);
                    // Into pageable memory the copy completes before the call returns.
                    let into_pageable = own
                        .iter()
                        .all(|b| self.b.body().buffer(*b).memory == Memory::PageableHost);
                    if !non_blocking || (from_device && into_pageable) {
                        self.b.push(
                            OpKind::SyncStream {
                                stream: self.current,
                            },
                            span,
                        );
                    }
                } else {
                    self.read_all(&arg_buffers, span);
                    self.write_all(&own, span);
                }
                recv
            }
            "backward" => {
                self.read_all(&own, span);
                let grads =
                    self.buffer_at(span, "grad", "gradients", Memory::Device, Owner::Caller);
                self.b.push(
                    OpKind::Produce {
                        buffer: grads,
                        stream: self.current,
                        how: Production::Compute,
                    },
                    span,
                );
                self.env
                    .insert(GRADIENTS.into(), Value::Tensors(vec![grads]));
                Value::Unknown
            }
            // A numpy array shares the tensor's memory: reading happens where it is used.
            "numpy" => recv,
            m if HOST_READ_METHODS.contains(&m) => {
                self.host_read(&recv, span);
                Value::Unknown
            }
            m if VIEW_METHODS.contains(&m) => recv,
            m if METADATA_METHODS.contains(&m) => Value::Unknown,
            m if m.ends_with('_') && !m.starts_with('_') => {
                self.read_all(&arg_buffers, span);
                self.write_all(&own, span);
                recv
            }
            _ => {
                let mut inputs = own;
                inputs.extend(arg_buffers);
                self.read_all(&inputs, span);
                self.produce_result(&inputs, span)
            }
        }
    }
}

/// How a tensor staged on an attribute by another method was made.
fn staged_production(transfer: bool) -> Production {
    if transfer {
        Production::HostToDevice { non_blocking: true }
    } else {
        Production::Compute
    }
}

/// Methods that store their arguments in a container.
const CONTAINER_METHODS: &[&str] = &[
    "append",
    "extend",
    "insert",
    "add",
    "put",
    "put_nowait",
    "appendleft",
    "setdefault",
    "update",
    "push",
];

/// Tensor methods that make a new tensor (not views, in-place ops, host reads or stream calls).
fn makes_tensor(method: &str) -> bool {
    TENSOR_METHODS.contains(&method)
        && !method.ends_with('_')
        && !HOST_READ_METHODS.contains(&method)
        && !matches!(
            method,
            "record_stream" | "backward" | "data" | "grad" | "split" | "chunk"
        )
}

/// `if __name__ == "__main__":`
fn is_main_guard(test: &Expr) -> bool {
    matches!(test, Expr::Operator { operands, .. }
        if operands.len() == 2 && operands[0].dotted().as_deref() == Some("__name__") && operands[1].as_str() == Some("__main__"))
}

/// A statement that only adds ordering: a wait, a `record_stream`, a synchronize. (Not an event
/// record: a record guarded by a flag is exactly how waits on unrecorded events happen.)
fn is_ordering_stmt(stmt: &Stmt) -> bool {
    let Stmt::Expr(Expr::Call { func, .. }) = stmt else {
        return false;
    };
    let Expr::Attribute { attr, .. } = func.as_ref() else {
        return false;
    };
    matches!(
        attr.as_str(),
        "wait_stream" | "wait_event" | "record_stream" | "synchronize" | "wait"
    )
}

fn root_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Name { id, .. } => Some(id),
        Expr::Attribute { value, .. }
        | Expr::Call { func: value, .. }
        | Expr::Subscript { value, .. } => root_name(value),
        _ => None,
    }
}

fn is_true(expr: Option<&Expr>) -> bool {
    match expr {
        Some(Expr::Constant {
            value: Constant::Bool(b),
            ..
        }) => *b,
        Some(Expr::Constant { .. }) | None => false,
        Some(_) => true,
    }
}
