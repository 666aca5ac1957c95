//! Lowering of one Python function into a graph [`Body`]: a structured walk over the syntax tree
//! that keeps an environment of what each name holds (tensors by allocation site, streams,
//! events) and the stream that is current, and emits the stream operations in program order.

mod calls;
mod context_managers;
mod evidence;
mod expressions;
mod flags;
mod graphs;
mod hooks;
mod inline;
pub(crate) use inline::is_staticmethod;
mod loops;
mod modules;
mod object;
mod per_thread;
mod statements;
mod streams;
mod summaries;
mod tensors;
mod value;

use flags::*;
use loops::*;
use streams::*;
use tensors::*;
use value::*;

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};

use streamlint_graph::{
    is_dotted_name, BlockId, Body, BodyBuilder, Buffer, BufferId, CarriedAccesses, EscapeKind,
    Event, EventId, Memory, OpId, OpKind, Owner, Production, ReleaseCause, Span, Spelling, Stream,
    StreamBlock, StreamId, StreamOrigin,
};

use crate::api::{
    ApiCall, DATA_DEPENDENT_SHAPES, HOST_READ_BUILTINS, HOST_READ_METHODS, METADATA_METHODS,
    NEUTRAL_BUILTINS, TENSOR_METHODS, TENSOR_PROPERTIES, THREAD_HAND_OFFS, THREAD_QUEUE_GETS,
    THREAD_QUEUE_PUTS, VIEW_METHODS,
};
use crate::context::{ModuleContext, Role};
use crate::summary::{AttrKind, ClassSummary};
use crate::syntax::{local_functions, Constant, Expr, FunctionDef, Keyword, Operator, Stmt};
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

/// Can an argument annotated `annotation` be a tensor or hold tensors (`torch.Tensor`,
/// `nn.Parameter`, `List[Tensor]`, `list`, `Optional[Sequence[...]]`)? `int`, `ForwardBatch`
/// and the like cannot.
fn annotation_may_hold_tensors(annotation: &str) -> bool {
    const CONTAINERS: &[&str] = &[
        "list", "List", "tuple", "Tuple", "Sequence", "Iterable", "dict", "Dict", "Mapping",
    ];
    let inner = annotation
        .trim()
        .trim_start_matches("typing.")
        .trim_start_matches("Optional[");
    annotation.contains("Tensor")
        || annotation.contains("Parameter")
        || CONTAINERS.iter().any(|c| inner.starts_with(c))
}

/// By convention `host_*`, `*_cpu` and `pinned_*` values live in host memory, so no stream work
/// made them; their place is still not known for sure.
fn host_named(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["host", "cpu", "pinned"].iter().any(|w| lower.contains(w))
}

/// Does the expression call a class other than the tensor types (`Net()`, `nn.Linear(4, 4)`),
/// making an object? `.cuda()` or `.to(device)` on one moves a module's parameters and returns
/// the module, not a tensor. A choice between two such calls (`(A() if native else B())`) makes
/// one either way, and so does a module method that returns the module (`Net().cuda().eval()`).
fn constructs_object(expr: &Expr) -> bool {
    match expr {
        Expr::Call { func, .. } => match func.as_ref() {
            Expr::Attribute { value, attr, .. } if returns_the_module(attr) => {
                constructs_object(value)
            }
            other => other.dotted().is_some_and(|name| names_a_class(&name)),
        },
        Expr::IfExp { body, orelse, .. } => constructs_object(body) && constructs_object(orelse),
        _ => false,
    }
}

/// Methods of `nn.Module` that return the module itself, moved or switched.
pub(super) fn returns_the_module(method: &str) -> bool {
    matches!(
        method,
        "cuda" | "to" | "eval" | "train" | "half" | "float" | "bfloat16" | "requires_grad_"
    )
}

/// Is `name` (`Net`, `nn.Linear`, `_Holder`) spelled as a class other than the tensor types?
fn names_a_class(name: &str) -> bool {
    let last = name
        .rsplit('.')
        .next()
        .unwrap_or(name)
        .trim_start_matches('_');
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

/// Name under which the gradients written by `backward()` are kept in the environment.
const GRADIENTS: &str = "<gradients>";

/// What kind of callee an unseen call goes to.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Callee {
    /// A submodule or callable object (`self.encoder(x)`, `model(x)`): a tensor computed on the
    /// current stream.
    Module,
    /// A method or class that files its arguments away (`group.push_tensor(tag, t)`,
    /// `optimizer_class(params)`): a module call that computes on device inputs only.
    Keeping,
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
    /// Names the function declares `global`: a stream it assigns to one is the module's.
    declared_globals: Vec<String>,
    /// For each enclosing statement list: does a `try` whose `finally` restores the stream
    /// follow the statement being lowered?
    restore_follows: Vec<bool>,
    /// The stream blocks (`with torch.cuda.stream(s):`) around the statement being lowered:
    /// the stream each makes current, its header's span, and the CFG block its body starts in.
    stream_blocks: Vec<(StreamId, Span, BlockId)>,
    /// CUDA graphs captured in this body, by name: what a replay reads and writes.
    captures: FxHashMap<String, graphs::Captured>,
    /// A capture begun in one block, to end in another: the graph, where it began.
    open_capture: Option<(String, OpId, BlockId)>,
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
    /// (name, list) of the enclosing `for name in list:` loops: what a body learns in place
    /// about the name (a module moved to the device) holds for the list's items too.
    iterated: Vec<(String, String)>,
    /// Entities by allocation site, so a trial pass and the real pass agree on identities.
    sites: FxHashMap<(Span, String), u32>,
    named_streams: FxHashMap<String, StreamId>,
    /// Entities held by attributes, by the attribute's dotted name.
    attribute_buffers: FxHashMap<String, BufferId>,
    attribute_events: FxHashMap<String, EventId>,
    params: Vec<String>,
    /// Values stored on objects the caller passed in (`batch.x = t`), with where.
    left_on_arguments: Vec<(BufferId, Span)>,
    /// Caller values seen used as tensors (annotated, passed to torch, tensor methods called).
    confirmed: FxHashSet<BufferId>,
    /// Local names bound once and used as tensors somewhere in the body: what code not seen
    /// returns into one is a tensor from there on (see `evidence`).
    tensor_locals: FxHashSet<String>,
    /// Local names last bound to a dict the function made (see `makes_a_dict`).
    dict_locals: FxHashSet<String>,
    /// Tensors made only from values of unknown place (the caller's values, `torch.load(..)`,
    /// `pad_sequence(..)` of untracked lists).
    unplaced: FxHashSet<BufferId>,
    entry_ops: Vec<(OpKind, Span)>,
    /// Buffers some site has produced already: only those can have a previous instance.
    produced: FxHashSet<BufferId>,
    /// The instances moved aside so far, in order: (buffer, previous instance).
    carried: Vec<(BufferId, BufferId)>,
    /// The keyword argument's value being evaluated, if one is.
    keyword_value: Option<Span>,
    /// How many times each buffer was bound to a name (never decreases; see `bind`).
    placements: FxHashMap<BufferId, u32>,
    /// Lowering a loop body only to learn what its names hold at the end of an iteration.
    in_trial: bool,
    /// Local flags bound once to `True` or `False` (`overlap = False`), and names whose
    /// correlated tests split the paths (see `split_on`): their `if`s are decided.
    flags: FxHashMap<String, bool>,
    /// The call a statement makes for its effect alone (`optimizer.step()`): what it returns is
    /// dropped at once, so code not seen hands nothing over there.
    discarded: Option<Span>,
    /// The module's classes that hand out a stream of their own (see `Role::stream_getters`).
    stream_getters: Option<&'a crate::summary::StreamGetters>,
    /// Local names bound to a test of streams (`on_side = current_stream() != self.side`), with
    /// what the test says is there (see `flags::guarded_subjects`).
    stream_guards: FxHashMap<String, Vec<String>>,
    /// Splits on correlated tests the path being lowered is inside (each doubles what follows
    /// it).
    flag_splits: usize,
    /// Correlated tests split so far in this body, at any depth (see `flags::MAX_SPLITS_PER_BODY`).
    splits_made: usize,
    /// The name being assigned, to give a created stream a readable name.
    binding: Option<String>,
    /// The expression whose value `binding` receives.
    binding_value: Option<Span>,
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
    globals: FxHashMap<(usize, String), Value>,
    /// The callees being lowered in place (by module and span), innermost last (see `inline`).
    inline_stack: Vec<(usize, Span)>,
    /// Generator context managers being lowered around a caller's `with` block, innermost last
    /// (see `context_managers`).
    suspended: Vec<context_managers::Suspended<'a>>,
    /// The functions the body's own scope and its enclosing functions' scopes define, which it
    /// calls by name as helpers (see `inline::local_function`).
    local_functions: Vec<&'a FunctionDef>,
    /// The methods of the class whose `self` the body sees (see `inline::own_method`).
    own_methods: Vec<&'a FunctionDef>,
    /// Lowering a function to summarize it (see `Role::summarizing`).
    summarizing: bool,
    /// In a callee lowered in place: its `**kwargs` parameter's name, and the keywords it
    /// received from the call, as the caller wrote them.
    forwarded: Option<(String, Vec<Keyword>)>,
    /// What the innermost callee lowered in place returns, over the returns seen so far.
    inline_result: Option<Value>,
    /// The buffers of the function's own parameters (see [`Body::arguments`]).
    param_buffers: Vec<BufferId>,
    /// The buffers of values code not seen returned (see [`Body::received`]).
    received_buffers: BTreeSet<BufferId>,
    /// Streams held by module globals, by module and name (see `named_stream`).
    global_streams: FxHashMap<(usize, String), StreamId>,
    /// Thread-local streams and the containers the threads share (see `per_thread`).
    per_thread: per_thread::PerThread,
    /// See [`Role::captured_names`].
    captured_names: Vec<String>,
    /// See [`Role::static_methods`].
    static_methods: &'a [(String, &'a FunctionDef)],
}

impl<'a> Lowerer<'a> {
    /// Lower a function (or, with `def` = `None`, the module's top-level statements) in the
    /// role the module gives it.
    pub fn lower(
        cx: ModuleContext<'a>,
        role: Role<'a>,
        def: Option<&'a FunctionDef>,
        module_body: &[Stmt],
    ) -> Body {
        let ambient = Stream {
            display: "the current stream".into(),
            expr: cx.imports.current_stream_call(),
            origin: StreamOrigin::Ambient,
            span: None,
            home: None,
        };
        let (name, span) = match def {
            Some(d) => (d.name.clone(), d.span),
            None => ("<module>".to_string(), Span::default()),
        };
        let mut b = BodyBuilder::new(name.clone(), span, SPELLING, ambient);
        b.in_module(&cx.project.module(cx.module).name);
        if let Some(reason) = role.device_forbidden.clone() {
            b.forbid_device(reason);
        }
        if def.is_some_and(converts_to_host) {
            b.caller_reads_on_host();
        }
        let exit = b.new_block();
        let current = b.ambient();
        let mut l = Lowerer {
            cx,
            class: role.class,
            restores_stream: role.restores_stream,
            declared_globals: Vec::new(),
            restore_follows: Vec::new(),
            stream_blocks: Vec::new(),
            captures: FxHashMap::default(),
            open_capture: None,
            restoring_try: 0,
            at_import: def.is_none(),
            main_guard: 0,
            method: name,
            b,
            env: role
                .attr_text
                .iter()
                .map(|(k, v)| (k.as_str().into(), Value::Text(v.clone())))
                .collect(),
            current,
            exit,
            loops: Vec::new(),
            loop_depth: 0,
            iterated: Vec::new(),
            sites: FxHashMap::default(),
            named_streams: FxHashMap::default(),
            attribute_buffers: FxHashMap::default(),
            attribute_events: FxHashMap::default(),
            params: Vec::new(),
            left_on_arguments: Vec::new(),
            confirmed: FxHashSet::default(),
            dict_locals: FxHashSet::default(),
            tensor_locals: def.map_or_else(FxHashSet::default, |d| {
                evidence::bound_once_and_used_as_tensors(&d.body)
            }),
            unplaced: FxHashSet::default(),
            entry_ops: Vec::new(),
            produced: FxHashSet::default(),
            carried: Vec::new(),
            keyword_value: None,
            placements: FxHashMap::default(),
            flags: def.map(|d| constant_flags(&d.body)).unwrap_or_default(),
            stream_guards: FxHashMap::default(),
            stream_getters: role.stream_getters,
            discarded: None,
            flag_splits: 0,
            splits_made: 0,
            in_trial: false,
            binding: None,
            binding_value: None,
            fresh_value: false,
            home_module: cx.module,
            globals: FxHashMap::default(),
            entering_context: false,
            inline_stack: Vec::new(),
            suspended: Vec::new(),
            local_functions: role
                .enclosing_functions
                .iter()
                .copied()
                .chain(def.map_or_else(Vec::new, |d| local_functions(&d.body)))
                .collect(),
            own_methods: role.own_methods.clone(),
            summarizing: role.summarizing,
            forwarded: None,
            inline_result: None,
            param_buffers: Vec::new(),
            received_buffers: BTreeSet::new(),
            global_streams: FxHashMap::default(),
            per_thread: per_thread::PerThread::new(&role),
            captured_names: role.captured_names,
            static_methods: role.static_methods,
        };
        match def {
            Some(d) => {
                l.bind_params(d, role.is_method);
                for name in &role.captured_lists {
                    if !l.env.contains_key(name.as_str()) {
                        l.bind(name.clone(), Value::Group(Vec::new()));
                    }
                }
                l.stmts(&d.body);
            }
            None => l.stmts(module_body),
        }
        let last = l.b.current();
        l.b.edge(last, exit);
        l.b.switch_to(exit);
        if let Some(d) = def {
            l.leave_attributes(d.name_span);
            l.leave_on_arguments();
            // Where the function's values die: its last statement (a `return`, most often).
            let end = statements::last_statement_span(&d.body).unwrap_or(d.name_span);
            l.b.push(OpKind::ScopeEnd, end);
        }
        let arguments = std::mem::take(&mut l.param_buffers);
        for &buffer in &arguments {
            if l.confirmed.contains(&buffer) {
                l.b.argument(buffer);
            }
        }
        for buffer in std::mem::take(&mut l.received_buffers) {
            if l.confirmed.contains(&buffer) {
                l.b.received(buffer);
            }
        }
        // Values that exist at entry first, then what orders them (events, waits).
        // A loop's trial pass and its real pass may find the same one.
        let mut unique: Vec<(OpKind, Span)> = Vec::new();
        for (kind, span) in std::mem::take(&mut l.entry_ops) {
            if !unique.iter().any(|(k, _)| *k == kind) {
                unique.push((kind, span));
            }
        }
        // The caller made the arguments after whatever the object's other methods did: an
        // event one of them recorded does not cover them (the contract: an argument is ready on
        // the caller's current stream, no more).
        let (unique, made_by_caller): (Vec<_>, Vec<_>) = unique.into_iter().partition(
            |(k, _)| !matches!(k, OpKind::Produce { buffer, .. } if arguments.contains(buffer)),
        );
        // Writes left pending by other methods come before the events recorded after them.
        let (mut entry_ops, rest): (Vec<_>, Vec<_>) = unique
            .into_iter()
            .partition(|(k, _)| matches!(k, OpKind::Produce { .. }));
        let (writes, ordering): (Vec<_>, Vec<_>) = rest
            .into_iter()
            .partition(|(k, _)| matches!(k, OpKind::Write { .. }));
        entry_ops.extend(writes);
        entry_ops.extend(ordering);
        entry_ops.extend(made_by_caller);
        l.b.prepend_to_entry(entry_ops);
        l.b.finish()
    }

    fn bind_params(&mut self, def: &FunctionDef, is_method: bool) {
        let is_static = def
            .decorators
            .iter()
            .any(|d| d.dotted().as_deref() == Some("staticmethod"));
        let mut stream_param = false;
        let unannotated: Vec<&str> = def
            .params
            .iter()
            .filter(|p| p.annotation.is_none() && !p.variadic && p.name != "self")
            .map(|p| p.name.as_str())
            .collect();
        let evident = if unannotated.is_empty() {
            Vec::new()
        } else {
            evidence::used_as_tensors(&def.body, &unannotated)
        };
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
            let default_stream = p.default.as_ref().filter(|d| self.makes_stream(d));
            let packed = (self.params.len() == 1)
                .then(|| self.class.and_then(|c| c.unpack_arguments.get(&def.name)))
                .flatten();
            let value = if let Some(packed) = packed {
                self.unpack_argument(&p.name, p.span, packed)
            } else if let Some(d) = default_stream {
                // Evaluated once, when the `def` runs: one stream for every call.
                let stream = Stream {
                    display: format!("`{}`", p.name),
                    expr: p.name.clone(),
                    origin: StreamOrigin::Global,
                    span: Some(d.span()),
                    // Only this function sees it.
                    home: None,
                };
                Value::Stream(self.b.add_stream(stream))
            } else if inline::stream_like(&p.name, &annotation) {
                stream_param = true;
                Value::Stream(self.named_stream(&p.name))
            } else if annotation.ends_with("Event") {
                Value::Event(self.event_at(p.span, &p.name, false))
            } else {
                // The annotation as written (`layer_id: int`, `batch: ForwardBatch`,
                // `mask: np.ndarray | None`).
                let annotation_text = p.annotation.as_ref().map(|a| {
                    let span = a.span();
                    self.cx
                        .source
                        .get(span.start as usize..span.end as usize)
                        .unwrap_or("Tensor")
                });
                // A NumPy array is host memory, whatever a callee turns it into.
                let host_array =
                    annotation_text.is_some_and(|t| t.contains("ndarray") && !t.contains("Tensor"));
                let how = if host_named(&p.name) || host_array {
                    Production::Host
                } else {
                    Production::Entry
                };
                let memory = if host_array {
                    Memory::PageableHost
                } else {
                    Memory::Device
                };
                let buf = self.buffer_at(p.span, "param", &p.name, memory, Owner::Caller);
                // An annotation says what the argument is; `*args` gathers several.
                let annotated_other =
                    annotation_text.is_some_and(|t| !annotation_may_hold_tensors(t));
                if !p.variadic && !annotated_other {
                    self.param_buffers.push(buf);
                }
                if annotation.ends_with("Tensor") || evident.contains(&p.name.as_str()) {
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
        // Which streams callers pass, and how they ordered them, is judged where a call of the
        // project is lowered with the callee in place; with no such call, by the contract (see
        // `Body::uncalled`). Dunder methods and `forward` are called by the framework.
        let framework_called = def.name.starts_with("__") || def.name == "forward";
        if stream_param && !framework_called && !self.cx.project.is_called(&def.name) {
            self.b.uncalled();
        }
        // A top-level function the index may lower in place is judged at the calls that do,
        // and so is a method that its class's `self.m(..)` calls lower in place (whether all of
        // them do, the run tells: a call on another object is not lowered).
        let module = self.cx.project.module(self.cx.module);
        let top_level_in_place =
            !is_method && self.class.is_none() && module.lowers_in_place(&def.name, def.span.start);
        let method_in_place = is_method
            && self.class.is_some()
            && !framework_called
            && inline::lowers_at_own_calls(def);
        if top_level_in_place || method_in_place {
            self.b.judged_at_calls();
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
        // An event bound to a name (`done = side.record_event()` in both arms of an `if`) is
        // one object to the code after the branches: it is known by the name, not the site.
        if self.binding.as_deref() == Some(name) {
            let tag = format!("event {name}");
            return EventId(self.site(Span::default(), &tag, |b| b.add_event(event).0));
        }
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
        self.carry(buffer, previous, span);
        self.carried.push((buffer, previous));
    }

    /// The instance of `buffer` the names hold is `previous` from here on, with its accesses.
    fn carry(&mut self, buffer: BufferId, previous: BufferId, span: Span) {
        for part in [CarriedAccesses::Writes, CarriedAccesses::Reads] {
            let carry = OpKind::Carry {
                from: buffer,
                into: previous,
                part,
            };
            self.b.push(carry, span);
        }
        let mut holders = Vec::new();
        for (name, v) in self.env.iter_mut() {
            if v.holds(buffer) {
                v.replace(buffer, previous);
                if names_tensors(v) {
                    holders.push((name.clone(), v.buffers()));
                }
            }
        }
        // The names that held the instance hold the previous one now.
        for (name, tensors) in holders {
            self.note_binding(name, tensors, None);
        }
        // Every holder of `buffer` now holds the previous instance: take it as shared.
        self.placements.insert(previous, 2);
    }

    /// A branch of an `if` made new instances (`carried`) that the other branch, which ends
    /// here, did not (`own`): its names still hold the old instances, so they are moved to the
    /// same previous buffers. After the join a name then holds the previous instance whichever
    /// way the code went, and the new instance's accesses are never taken for the old one's
    /// (`weight = full` above `if more: nxt = new_empty(..)`, with `full = nxt` at the end of
    /// each iteration of the loop).
    fn carry_as_the_other_branch(
        &mut self,
        carried: &[(BufferId, BufferId)],
        own: &[(BufferId, BufferId)],
        span: Span,
    ) {
        for &(buffer, previous) in carried {
            if !own.contains(&(buffer, previous)) && self.env.values().any(|v| v.holds(buffer)) {
                self.carry(buffer, previous, span);
            }
        }
    }

    /// PyTorch's blocking copies between host and device end with a synchronize of the
    /// current stream (`memcpy_and_sync`): everything queued on it before is complete.
    fn sync_current(&mut self, span: Span) {
        self.sync_stream(self.current, span);
    }

    /// Is the value known to hold a tensor?
    fn is_tensor(&self, value: &Value) -> bool {
        !self.tensor_buffers(std::slice::from_ref(value)).is_empty()
    }

    /// A caller's value (an argument, or what code not seen returned) not yet used as a
    /// tensor: it may be anything.
    fn unconfirmed(&self, buffer: BufferId) -> bool {
        !self.confirmed.contains(&buffer)
            && (self.received_buffers.contains(&buffer) || self.param_buffers.contains(&buffer))
    }

    /// The buffers of values known to be tensors (caller values only once confirmed, also
    /// where two paths bound one name to two of them).
    fn tensor_buffers(&self, values: &[Value]) -> Vec<BufferId> {
        let mut out = Vec::new();
        for v in values {
            match v {
                Value::Param(b) if self.confirmed.contains(b) => out.push(*b),
                Value::Param(_) => {}
                Value::Group(items) => out.extend(self.tensor_buffers(items)),
                other => out.extend(
                    other
                        .local_tensors()
                        .into_iter()
                        .filter(|b| !self.unconfirmed(*b)),
                ),
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The value is used where only a tensor fits (also where two paths bound it to two
    /// caller values).
    fn confirm(&mut self, values: &[Value]) {
        for v in values {
            match v {
                Value::Param(b) => {
                    self.confirmed.insert(*b);
                }
                Value::Tensors(buffers) => {
                    let callers: Vec<BufferId> = buffers
                        .iter()
                        .copied()
                        .filter(|&b| self.unconfirmed(b))
                        .collect();
                    self.confirmed.extend(callers);
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
        self.produce_like(inputs, Production::Compute, span)
    }

    /// A new tensor where `inputs` are, made by `how` (`Compute`, or `Allocate` for memory left
    /// unfilled: `x.new_empty(n)`); on the host when they all are.
    fn produce_like(&mut self, inputs: &[BufferId], how: Production, span: Span) -> Value {
        let name = self.value_name("result");
        if !inputs.is_empty() && inputs.iter().all(|b| self.on_host(*b)) {
            return self.produce(span, &name, Memory::PageableHost, Production::Host);
        }
        let unknown_place = |b: &BufferId| {
            self.unplaced.contains(b) || self.b.body().buffer(*b).owner == Owner::Caller
        };
        let unplaced = inputs.iter().all(unknown_place);
        let how = if unplaced && how == Production::Allocate {
            Production::AllocateLike
        } else {
            how
        };
        let v = self.produce(span, &name, Memory::Device, how);
        if unplaced {
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
        self.sync_stream(self.current, span);
    }

    fn escape(&mut self, value: &Value, kind: EscapeKind, span: Span) {
        // A stream returned (by a getter) keeps its name: the call that gets it.
        if kind != EscapeKind::Caller {
            self.alias_streams(std::slice::from_ref(value));
        }
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
        let buffers = value.buffers();
        for &buffer in &buffers {
            *self.placements.entry(buffer).or_default() += 1;
        }
        let tensors = if names_tensors(&value) {
            buffers
        } else {
            Vec::new()
        };
        let name: Rc<str> = name.into();
        let old = self.env.insert(name.clone(), value);
        self.note_binding(name, tensors, old.as_ref());
    }

    /// Forget what `name` holds (`del x`, an attribute a method reassigned unseen).
    fn unbind(&mut self, name: &str) {
        if let Some((name, old)) = self.env.remove_entry(name) {
            self.note_binding(name, Vec::new(), Some(&old));
        }
    }

    /// Tell the graph which tensors a name of this function holds from here on (see
    /// `Body::name_at`), where that changes: fixes and help call values by these names. The
    /// names of a callee lowered in place are not the caller's.
    fn note_binding(&mut self, name: Rc<str>, tensors: Vec<BufferId>, old: Option<&Value>) {
        if self.inlining() || (tensors.is_empty() && !old.is_some_and(names_tensors)) {
            return;
        }
        self.b.bind_name(&name, tensors);
    }

    /// Is `buffer` held by a name other than `except`? A buffer bound only once is held by one
    /// name at most, which spares a scan of every name on each rebinding (a long function
    /// binds thousands).
    fn held_elsewhere(&self, buffer: BufferId, except: &str) -> bool {
        self.placements.get(&buffer).is_some_and(|&n| n > 1)
            && self
                .env
                .iter()
                .any(|(k, v)| &**k != except && v.holds(buffer))
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
        let mut captured_until = 0;
        for (i, (s, later)) in stmts.iter().zip(later).enumerate() {
            if self.cx.deadline.passed() {
                self.b.cut_short();
                return;
            }
            if i < captured_until {
                continue;
            }
            if let Some(end) = self.capture_statements(stmts, i) {
                captured_until = end + 1;
                continue;
            }
            if let Some(literals) = self.correlated_flags(&stmts[i..]) {
                return self.split_on(literals, &stmts[i..]);
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

    // ----- expressions ----------------------------------------------------------------------
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
