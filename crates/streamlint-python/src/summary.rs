//! Per-class summaries: what each `self.x` holds, from whichever method assigns it, and what each
//! method does to the object's streams. A class is one unit of analysis: a tensor staged on a side
//! stream in `preload()` and handed out in `next()` is the same value.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::api::{ApiCall, ApiModel};
use crate::captures::{self, CapturedAttributes};
use crate::names::Imports;
use crate::syntax::{visit_exprs, Expr, FunctionDef, Stmt};
use streamlint_graph::Span;

/// What an attribute of `self` holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// A stream created for the object.
    Stream,
    /// The stream that was current when it was assigned (usually the default stream).
    AmbientStream,
    /// A dict or list of streams (per-device caches).
    StreamCache,
    Event,
    /// A tensor in host memory (made without a device).
    Host {
        pinned: bool,
    },
    /// A tensor produced while the stream named by the dotted expression was current (empty:
    /// the stream current in the caller); `transfer` when it is a copy from the host
    /// (`.cuda()`, `.to(device)`).
    Tensor {
        stream: String,
        transfer: bool,
    },
    /// A device module (`torch.get_device_module(dev)`, `torch.cuda`, `get_accelerator()`), by
    /// its qualified name: `self.device_module.synchronize()` synchronizes the device.
    DeviceModule(String),
}

impl AttrKind {
    /// Does the attribute carry stream state from one method to another? Host memory that is
    /// not pinned and tensors made on the caller's stream carry none.
    pub fn carries_stream_state(&self) -> bool {
        match self {
            AttrKind::Host { pinned } => *pinned,
            AttrKind::Tensor { stream, .. } => !stream.is_empty(),
            AttrKind::DeviceModule(_) => false,
            AttrKind::Stream
            | AttrKind::AmbientStream
            | AttrKind::StreamCache
            | AttrKind::Event => true,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct MethodSummary {
    /// Attributes the method assigns, with what they hold.
    pub assigns: Vec<(String, AttrKind)>,
    /// Stream attributes the method makes the current stream wait on.
    pub waits_on: FxHashSet<String>,
    /// Stream attributes the method makes wait on the current stream on every path, outside
    /// any stream block (`self.alt.wait_stream(torch.cuda.current_stream())`): it forks them
    /// for the caller's next work on them.
    pub forks: FxHashSet<String>,
    /// Stream attributes the method waits for on the host (directly, or through an event
    /// attribute recorded on the stream).
    pub syncs: FxHashSet<String>,
    /// The method stores an argument on the object (`self.cache[key] = value`,
    /// `self.pending.append(value)`): what a caller passes it lives on there.
    pub keeps_arguments: bool,
    /// Host/device pairs on the object the method sends to the device (`self.x.copy_to_gpu()`):
    /// the copies may still read their host memory when it returns.
    pub copies_to_device: Vec<String>,
    /// Positions (after `self`) of the arguments whose host memory the method writes
    /// (`buf.np[i] = v` on a host/device pair it is given).
    pub writes_host_of: Vec<usize>,
    /// Positions (after `self`) of the tensor arguments the method only asks for their size,
    /// shape or device (`def _num_bytes(t): return t.numel() * t.element_size()`): it does not
    /// read their memory.
    pub sizes_only: Vec<usize>,
    /// The method is a `@property`: read as an attribute (`self.compute_stream`).
    pub is_property: bool,
    /// Host attributes the method fills with a non-blocking copy from the device
    /// (`self.ids_cpu.copy_(ids, non_blocking=True)`, `self.out = t.to("cpu", non_blocking=True)`),
    /// with the stream the copy runs on (empty: the caller's current stream) and where: the host
    /// may read them only once that copy is waited for.
    pub fills_from_device: Vec<(String, String, Span)>,
    /// The method waits for the whole device on the host (`torch.cuda.synchronize()`).
    pub syncs_device: bool,
    /// Tensor attributes the method writes in place inside a block of a stream of the object
    /// (`self.k[slot].copy_(k, non_blocking=True)` under `with torch.cuda.stream(self.copy)`),
    /// with that stream and where.
    pub writes_in_place: Vec<(String, String, Span)>,
    /// Containers of the object the method stores items in inside a block of one of the
    /// object's streams (`self.stash[key] = t.to("cpu", non_blocking=True)`), with that stream,
    /// whether the item is a copy to the host, and where.
    pub stores_on_stream: Vec<(String, String, bool, Span)>,
    /// The method makes a stream of its own (a warm-up stream before a graph capture): setup
    /// code, which runs before the methods that keep the object's streams busy.
    pub makes_streams: bool,
    /// Attributes the method binds to a stream that an object of another class of the module
    /// hands out (`self.side = SideStream().get()`), with that class and method: resolved once
    /// every class is summarized (see `resolve_held_streams`).
    pub held_streams: Vec<(String, String, String)>,
    /// Containers of the object the method takes an item out of and returns it
    /// (`t = self.stash.pop(key)` … `return t`): whoever called it uses the item.
    pub hands_out_items: Vec<String>,
    /// Containers of the object the method records an item of for a stream
    /// (`self.stash[key].record_stream(s)`, or through a name bound to one).
    pub records_items: Vec<String>,
    /// The stream every `return` of the method hands back, where all of them return one: the
    /// caller's current stream (empty: `def producer_stream(self): return
    /// torch.cuda.current_stream()`) or a stream attribute of the object (`self.side`).
    pub returns_stream: Option<String>,
}

impl MethodSummary {
    /// Does the method order the current stream (or the host) after `stream`?
    pub fn orders(&self, stream: &str) -> bool {
        self.waits_on.contains(stream) || self.syncs.contains(stream)
    }
}

#[derive(Clone, Debug, Default)]
pub struct ClassSummary {
    pub attrs: FxHashMap<String, AttrKind>,
    /// Event attributes and the stream attribute each is recorded on (on some path).
    pub event_streams: FxHashMap<String, String>,
    /// The event attributes of `event_streams` whose record runs on every path of its method
    /// that issues the work it captures.
    pub events_recorded_on_every_path: FxHashSet<String>,
    pub methods: FxHashMap<String, MethodSummary>,
    /// The class's unpack hooks, with what their argument holds (see `hooks`).
    pub unpack_arguments: FxHashMap<String, crate::hooks::PackedArgument>,
    /// CUDA graphs the object keeps, by attribute, with what their captures do to the
    /// object's other attributes (see `captures`).
    pub graphs: FxHashMap<String, CapturedAttributes>,
    /// The attributes some method writes in place inside a block of one of the object's
    /// streams (see [`MethodSummary::writes_in_place`]).
    pub written_on_streams: FxHashSet<String>,
    /// The stream attributes some method may make wait for other work (see
    /// `ordered_streams`); computed for classes that make streams of their own.
    pub may_be_ordered: FxHashSet<String>,
    /// The attributes (`self.step`) some method other than the constructor assigns: the others
    /// are settings that no call of the object changes while a method runs.
    pub reassigned: FxHashSet<String>,
    /// The stream attributes that only the class's stream getters hand on (no other method
    /// orders them).
    pub getters_only_hand_out: FxHashSet<String>,
}

impl ClassSummary {
    pub fn build(body: &[Stmt], api: &ApiModel, imports: &Imports) -> ClassSummary {
        let mut summary = ClassSummary::default();
        let mut recorded_on = FxHashMap::default();
        let mut recorded_on_every_path = FxHashMap::default();
        let methods: FxHashSet<String> = body
            .iter()
            .filter_map(|s| match s {
                Stmt::Def(f) => Some(f.name.clone()),
                _ => None,
            })
            .collect();
        for stmt in body {
            if let Stmt::Def(f) = stmt {
                let mut scan = Scan {
                    api,
                    imports,
                    with_streams: Vec::new(),
                    conditional: 0,
                    branches: Vec::new(),
                    branch_count: 0,
                    handlers: 0,
                    work_branches: Vec::new(),
                    orderings: Vec::new(),
                    returns: Vec::new(),
                    events_made: Vec::new(),
                    after_early_return: None,
                    current_names: FxHashSet::default(),
                    stream_classes: FxHashSet::default(),
                    items_taken: FxHashMap::default(),
                    method: MethodSummary::default(),
                    recorded_on: &mut recorded_on,
                    recorded_on_every_path: &mut recorded_on_every_path,
                    methods: &methods,
                };
                scan.stmts(&f.body);
                scan.settle();
                scan.method.returns_stream = match scan.returns.as_slice() {
                    [first, rest @ ..] if rest.iter().all(|r| r == first) => first.clone(),
                    _ => None,
                };
                scan.method.keeps_arguments = keeps_arguments(f);
                scan.method.writes_host_of = writes_host_of(f);
                scan.method.sizes_only = sizes_only(f);
                scan.method.is_property = f
                    .decorators
                    .iter()
                    .any(|d| d.dotted().as_deref() == Some("property"));
                for (attr, kind) in &scan.method.assigns {
                    let known = summary.attrs.get(attr);
                    let stronger = matches!(
                        kind,
                        AttrKind::Stream | AttrKind::Event | AttrKind::StreamCache
                    );
                    if known.is_none() || stronger {
                        summary.attrs.insert(attr.clone(), kind.clone());
                    }
                }
                for (graph, captured) in captures::method_captures(f, api, imports) {
                    summary.graphs.entry(graph).or_default().extend(captured);
                }
                let written = scan.method.writes_in_place.iter().map(|(a, ..)| a.clone());
                summary.written_on_streams.extend(written);
                summary.methods.insert(f.name.clone(), scan.method);
            }
        }
        summary.reassigned = reassigned_attributes(body);
        summary.resolve_event_syncs(&recorded_on_every_path);
        summary.events_recorded_on_every_path = recorded_on_every_path.into_keys().collect();
        summary.event_streams = recorded_on;
        // A method returns a stream of the object only where the attribute holds one.
        let attrs = &summary.attrs;
        // Attributes bound to a stream a class of the module hands out are known as streams
        // only once every class is summarized (`resolve_held_streams`).
        let held_streams: FxHashSet<String> = summary
            .methods
            .values()
            .flat_map(|m| m.held_streams.iter().map(|(attr, ..)| attr.clone()))
            .collect();
        for m in summary.methods.values_mut() {
            let held = |a: &String| {
                a.is_empty()
                    || held_streams.contains(a)
                    || matches!(
                        attrs.get(a),
                        Some(AttrKind::Stream | AttrKind::AmbientStream)
                    )
            };
            if !m.returns_stream.as_ref().is_some_and(held) {
                m.returns_stream = None;
            }
        }
        // Streams held from a class of the module that makes them count too: they are the
        // object's own once resolved (see `resolve_held_streams`).
        let own: FxHashSet<&str> = summary
            .attrs
            .iter()
            .filter(|(_, kind)| **kind == AttrKind::Stream)
            .map(|(attr, _)| attr)
            .chain(&held_streams)
            .filter_map(|attr| attr.strip_prefix("self."))
            .collect();
        let mut may_be_ordered = FxHashSet::default();
        let mut ordered_by_getters = FxHashSet::default();
        if !own.is_empty() {
            for stmt in body {
                if let Stmt::Def(f) = stmt {
                    let ordered =
                        crate::ordered_streams::streams_it_may_order(f, api, imports, &own);
                    let getter = summary
                        .methods
                        .get(&f.name)
                        .is_some_and(|m| m.returns_stream.is_some());
                    if getter {
                        ordered_by_getters.extend(ordered);
                    } else {
                        may_be_ordered.extend(ordered);
                    }
                }
            }
        }
        // What only a getter hands out is ordered by whoever takes it (see
        // `hands_out_unordered_stream`).
        summary.getters_only_hand_out = ordered_by_getters
            .difference(&may_be_ordered)
            .cloned()
            .collect();
        may_be_ordered.extend(ordered_by_getters);
        summary.may_be_ordered = may_be_ordered;
        summary
    }

    /// Does the getter `method` hand out a stream the object makes for itself and that nothing
    /// else in the class orders, so that only the code that takes it can order it?
    pub fn hands_out_unordered_stream(&self, method: &str) -> bool {
        let Some(attr) = self
            .methods
            .get(method)
            .and_then(|m| m.returns_stream.as_ref())
        else {
            return false;
        };
        self.attrs.get(attr) == Some(&AttrKind::Stream)
            && self.getters_only_hand_out.contains(attr)
            && !self.methods.values().any(|m| m.syncs_device)
    }

    /// Is `attr` a stream the object makes for itself (and binds to nothing else) that none of
    /// its methods ever makes wait for other work, nor hands to code that might, nor orders by
    /// waiting for the whole device? Work queued on it then runs as soon as it can.
    pub fn unordered_own_stream(&self, attr: &str) -> bool {
        self.attrs.get(attr) == Some(&AttrKind::Stream)
            && !self.may_be_ordered.contains(attr)
            && !self.methods.values().any(|m| m.syncs_device)
    }

    /// The copy from the device another method than `except` leaves pending in host attribute
    /// `attr` (it does not wait for it on the host itself): its stream and place.
    pub fn pending_fill(&self, attr: &str, except: &str) -> Option<(&str, Span)> {
        // An attribute some method points at device memory is not known to be host memory.
        let on_device = self.methods.values().any(|m| {
            m.assigns
                .iter()
                .any(|(a, kind)| a == attr && !matches!(kind, AttrKind::Host { .. }))
        });
        if on_device {
            return None;
        }
        self.methods
            .iter()
            .filter(|(name, _)| *name != except)
            .flat_map(|(_, m)| {
                m.fills_from_device
                    .iter()
                    .filter(|(a, s, _)| a == attr && !m.syncs_device && !m.syncs.contains(s))
            })
            .map(|(_, s, span)| (s.as_str(), *span))
            .min_by_key(|(_, span)| span.start)
    }

    /// Does some method write attribute `attr` in place inside a stream block?
    pub fn written_on_a_stream(&self, attr: &str) -> bool {
        self.written_on_streams.contains(attr)
    }

    /// The methods whose work on the object's streams may still be pending when `reader`
    /// starts: the others, each only on streams it does not itself order the current stream
    /// after; none when `reader` is setup code (see [`MethodSummary::makes_streams`]).
    fn left_pending_for<'s>(
        &'s self,
        reader: &str,
    ) -> impl Iterator<Item = (&'s MethodSummary, impl Fn(&str) -> bool + 's)> + 's {
        let setup = self.methods.get(reader).is_some_and(|m| m.makes_streams);
        let reader = reader.to_string();
        self.methods
            .iter()
            .filter(move |(name, _)| !setup && **name != reader)
            .map(|(_, m)| (m, move |s: &str| !m.orders(s) && !m.syncs_device))
    }

    /// The stream another method than `except` writes tensor attribute `attr` in place on,
    /// without ordering the current stream after it itself: the write may still be pending when
    /// another method starts.
    pub fn written_in_place_elsewhere(&self, attr: &str, except: &str) -> Option<(&str, Span)> {
        self.left_pending_for(except)
            .flat_map(|(m, pending)| {
                m.writes_in_place
                    .iter()
                    .filter(move |(a, s, _)| a == attr && pending(s))
            })
            .map(|(_, s, span)| (s.as_str(), *span))
            .min_by_key(|(_, span)| span.start)
    }

    /// The stream (and whether the items are copies to the host) another method than `except`
    /// stores items of container `container` on without ordering the current stream after it,
    /// and with no event of the object recorded on it: an event recorded on that stream hands
    /// the ordering over with the items (`self.events[layer] = self.swap.record_event()`), and
    /// who waits on which is not followed through the containers.
    pub fn stored_on_stream_elsewhere(
        &self,
        container: &str,
        except: &str,
    ) -> Option<(&str, bool, Span)> {
        self.left_pending_for(except)
            .flat_map(|(m, pending)| {
                m.stores_on_stream
                    .iter()
                    .filter(move |(c, s, ..)| c == container && pending(s))
            })
            .filter(|(_, s, ..)| !self.event_streams.values().any(|e| e == s))
            .map(|(_, s, host, span)| (s.as_str(), *host, *span))
            .min_by_key(|(.., span)| span.start)
    }

    /// Does some method other than `except` wait on the host for `stream` (directly or through
    /// an event recorded on it)?
    pub fn synced_elsewhere(&self, stream: &str, except: &str) -> bool {
        self.methods
            .iter()
            .any(|(name, m)| name != except && (m.syncs_device || m.syncs.contains(stream)))
    }

    /// Does some method other than `except` take items out of `container` and return them, with
    /// no method of the class recording an item of it for a stream?
    pub fn hands_out_unrecorded_items(&self, container: &str, except: &str) -> bool {
        let hands_out = self
            .methods
            .iter()
            .any(|(name, m)| name != except && m.hands_out_items.iter().any(|c| c == container));
        let records = self
            .methods
            .values()
            .any(|m| m.records_items.iter().any(|c| c == container));
        hands_out && !records
    }

    /// Does some method other than `except` make the current stream wait on `stream`?
    pub fn waited_elsewhere(&self, stream: &str, except: &str) -> bool {
        self.methods
            .iter()
            .any(|(name, m)| name != except && m.orders(stream))
    }

    /// Resolve host syncs of event attributes to the streams the events are recorded on.
    fn resolve_event_syncs(&mut self, recorded_on: &FxHashMap<String, String>) {
        for m in self.methods.values_mut() {
            let streams: Vec<String> = m
                .syncs
                .iter()
                .filter_map(|e| recorded_on.get(e).cloned())
                .collect();
            m.syncs.extend(streams);
        }
    }
}

/// Classes of a module that make a stream of their own and hand it out from a method
/// (`class SideStream: def __init__(self): self._s = torch.cuda.Stream()` / `def get(self):
/// return self._s`), by class name, with those methods: `SideStream().get()` makes a stream.
pub type StreamGetters = FxHashMap<String, FxHashSet<String>>;

/// Of the classes in [`StreamGetters`], those that never order the stream they hand out (see
/// `ClassSummary::unordered_own_stream`): a holder of it orders it only by its own methods.
pub type UnorderedHolders = FxHashSet<String>;

/// The classes of `classes` whose every getter hands out a stream the class never orders.
pub fn unordered_holders<'c>(
    classes: impl Iterator<Item = (&'c str, &'c ClassSummary)>,
    getters: &StreamGetters,
) -> UnorderedHolders {
    classes
        .filter(|(name, class)| {
            getters
                .get(*name)
                .is_some_and(|methods| methods.iter().all(|m| class.hands_out_unordered_stream(m)))
        })
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The stream getters of a module's classes, from their summaries.
pub fn stream_getters<'c>(
    classes: impl Iterator<Item = (&'c str, &'c ClassSummary)>,
) -> StreamGetters {
    let mut out = StreamGetters::default();
    for (name, class) in classes {
        let getters: FxHashSet<String> = class
            .methods
            .iter()
            .filter(|(_, m)| {
                m.returns_stream
                    .as_ref()
                    .is_some_and(|a| class.attrs.get(a) == Some(&AttrKind::Stream))
            })
            .map(|(method, _)| method.clone())
            .collect();
        if !getters.is_empty() {
            out.insert(name.to_string(), getters);
        }
    }
    out
}

impl ClassSummary {
    /// Attributes bound to a stream an object of the module hands out (`self.side =
    /// SideStream().get()`) are streams of this object.
    /// A stream from a holder that itself may order it stays one someone else may order (see
    /// `unordered_own_stream`); one from a holder that never does is ordered only where this
    /// class's methods order it (computed with the class's own streams, `may_be_ordered`).
    pub fn resolve_held_streams(&mut self, getters: &StreamGetters, unordered: &UnorderedHolders) {
        let held: Vec<(String, bool)> = self
            .methods
            .values()
            .flat_map(|m| &m.held_streams)
            .filter(|(_, class, method)| getters.get(class).is_some_and(|g| g.contains(method)))
            .map(|(attr, class, _)| (attr.clone(), unordered.contains(class)))
            .collect();
        for (attr, holder_never_orders) in held {
            if !holder_never_orders {
                self.may_be_ordered.insert(attr.clone());
            }
            self.attrs.insert(attr, AttrKind::Stream);
        }
    }
}

/// `C(..).m()`: a method called on a new object of a class named `C`, as (class, method).
pub(crate) fn method_of_new_object(expr: &Expr) -> Option<(&str, &str)> {
    let Expr::Call { func, .. } = expr else {
        return None;
    };
    let Expr::Attribute { value, attr, .. } = func.as_ref() else {
        return None;
    };
    let Expr::Call { func: class, .. } = value.as_ref() else {
        return None;
    };
    let Expr::Name { id, .. } = class.as_ref() else {
        return None;
    };
    Some((id.as_str(), attr.as_str()))
}

/// An ordering a method makes that other methods may count on.
enum Ordering {
    /// The current stream waits on a stream attribute.
    WaitsOn(String),
    /// The host waits for a stream attribute (empty: the caller's current stream).
    Syncs(String),
    /// The host waits for the whole device.
    SyncsDevice,
    /// An event attribute is recorded on a stream.
    Records { event: String, stream: String },
}

struct Scan<'a> {
    api: &'a ApiModel,
    imports: &'a Imports,
    /// Dotted stream expressions of the enclosing `with torch.cuda.stream(..)` blocks.
    with_streams: Vec<String>,
    /// How many enclosing statements run their body on some paths only (`if`, loops, `except`).
    conditional: usize,
    /// The enclosing branches (`if` or `else` blocks), innermost last: an id for each, and what
    /// its test says is there (`if self.side is not None:`).
    branches: Vec<(usize, Vec<String>)>,
    /// Branch ids handed out so far.
    branch_count: usize,
    /// How many enclosing `except` blocks there are: what runs there runs on some paths only.
    handlers: usize,
    /// The branches each piece of the method's stream work (a fill, an in-place write, an
    /// item stored) runs in.
    work_branches: Vec<Vec<usize>>,
    /// The orderings the method makes, with the branches they run in; settled when the method
    /// ends (see `Scan::settle`).
    orderings: Vec<(Ordering, Vec<usize>)>,
    /// Event attributes the method makes, with the branches it makes them in.
    events_made: Vec<(String, Vec<usize>)>,
    /// What each `return` of the method hands back, where it is a stream (see
    /// `MethodSummary::returns_stream`; attributes are checked against the class later).
    returns: Vec<Option<String>>,
    /// From the first `return` on some path on, what runs is on some paths only, under one more
    /// condition (that the method went on): its id, like a branch's.
    after_early_return: Option<usize>,
    /// Local names bound to the current stream (`cur = torch.cuda.current_stream()`).
    current_names: FxHashSet<String>,
    /// Local names bound to an item taken from one of the object's containers
    /// (`t = self.stash.pop(key)`), with the containers (on some path, each).
    items_taken: FxHashMap<String, Vec<String>>,
    /// Local names bound to a stream class, not called (`stream_cls =
    /// get_accelerator().Stream`): calling one makes a stream.
    stream_classes: FxHashSet<String>,
    method: MethodSummary,
    /// Event attributes and the stream attribute they are recorded on, across the class, on
    /// some path.
    recorded_on: &'a mut FxHashMap<String, String>,
    /// The same, where the record runs on every path of its method that issues the work it
    /// captures: a host wait on the event waits for that work.
    recorded_on_every_path: &'a mut FxHashMap<String, String>,
    /// The class's own methods: what they return is not known to be a tensor.
    methods: &'a FxHashSet<String>,
}

impl Scan<'_> {
    fn call_kind(&self, expr: &Expr) -> Option<ApiCall> {
        match expr {
            Expr::Call { func, .. } if matches!(func.as_ref(), Expr::Name { id, .. } if self.stream_classes.contains(id)) => {
                Some(ApiCall::StreamFactory)
            }
            Expr::IfExp { body, orelse, .. } => {
                self.call_kind(body).or_else(|| self.call_kind(orelse))
            }
            _ => call_kind(self.api, self.imports, expr),
        }
    }

    /// Is `expr` a stream class itself, not called (`torch.cuda.Stream`,
    /// `get_accelerator().Stream`), or one where a device has streams (`torch.cuda.Stream if
    /// torch.cuda.is_available() else None`)?
    fn is_stream_class(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Attribute { .. } => self
                .imports
                .qualify(expr)
                .is_some_and(|q| self.api.classify(&q) == Some(ApiCall::StreamFactory)),
            Expr::IfExp { body, orelse, .. } => {
                self.is_stream_class(body) || self.is_stream_class(orelse)
            }
            _ => false,
        }
    }

    /// The body of the lambda a mapping helper applies (`tree_map(lambda t: .., batch)`).
    fn mapped_lambda<'e>(&self, expr: &'e Expr) -> Option<&'e Expr> {
        let Expr::Call {
            func,
            args,
            keywords,
            ..
        } = expr
        else {
            return None;
        };
        match crate::api::mapped_call(func, args, keywords, self.imports)?.function {
            crate::api::MappedFunction::Lambda { body, .. } => Some(body),
            crate::api::MappedFunction::Named(_) => None,
        }
    }

    /// `self.m` for a method `m` of this class.
    fn is_own_method(&self, func: &Expr) -> bool {
        matches!(func, Expr::Attribute { value, attr, .. }
            if matches!(value.as_ref(), Expr::Name { id, .. } if id == "self") && self.methods.contains(attr))
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Assign { targets, value, .. } => {
                if self.call_kind(value) == Some(ApiCall::StreamFactory) {
                    self.method.makes_streams = true;
                }
                for t in targets {
                    if let Expr::Name { id, .. } = t {
                        if self.is_current_stream(value) {
                            self.current_names.insert(id.clone());
                        } else if !self.current_names.is_empty() {
                            self.current_names.remove(id);
                        }
                        if self.is_stream_class(value) {
                            self.stream_classes.insert(id.clone());
                        } else if !self.stream_classes.is_empty() {
                            self.stream_classes.remove(id);
                        }
                        // Kept across other bindings: on some path the name may still hold it.
                        if let Some(container) = item_of_container(value) {
                            let taken = self.items_taken.entry(id.clone()).or_default();
                            if !taken.contains(&container) {
                                taken.push(container);
                            }
                        }
                    }
                    self.assign(t, value);
                }
                self.expr(value);
            }
            Stmt::Return { value, .. } => {
                if self.conditional > 0 && self.after_early_return.is_none() {
                    self.branch_count += 1;
                    self.after_early_return = Some(self.branch_count);
                }
                let stream = match value {
                    Some(v) if self.is_current_stream(v) => Some(String::new()),
                    Some(v) => v.dotted().filter(|d| d.starts_with("self.")),
                    None => None,
                };
                self.returns.push(stream);
                let handed = value.as_ref().map_or_else(Vec::new, |v| match v {
                    Expr::Name { id, .. } => self.items_taken.get(id).cloned().unwrap_or_default(),
                    other => item_of_container(other).into_iter().collect(),
                });
                self.method.hands_out_items.extend(handed);
            }
            Stmt::Expr(e) => self.expr(e),
            Stmt::With { items, body, .. } => {
                // A context manager the model does not know, given a stream, is taken to order
                // that stream with the current one (as the frontend does).
                for item in items {
                    if let (Expr::Call { args, .. }, None) =
                        (&item.context, self.call_kind(&item.context))
                    {
                        let streams = args.iter().filter_map(stream_named);
                        self.method.waits_on.extend(streams.collect::<Vec<_>>());
                    }
                }
                // A context manager the model does not know, given streams, is taken to make
                // the first of them current (`with stream(copy_stream, main_stream):`).
                let pushed = items
                    .iter()
                    .filter_map(|i| match (&i.context, self.call_kind(&i.context)) {
                        (Expr::Call { args, .. }, Some(ApiCall::StreamContext)) => {
                            args.first().and_then(Expr::dotted)
                        }
                        (Expr::Call { args, .. }, None) => args.first().and_then(stream_named),
                        _ => None,
                    })
                    .collect::<Vec<_>>();
                let n = pushed.len();
                self.with_streams.extend(pushed);
                self.stmts(body);
                self.with_streams.truncate(self.with_streams.len() - n);
            }
            Stmt::Try {
                body,
                handlers,
                orelse,
                finalbody,
            } => {
                self.stmts(body);
                self.conditional += 1;
                self.handlers += 1;
                handlers.iter().for_each(|h| self.stmts(h));
                self.handlers -= 1;
                self.stmts(orelse);
                self.conditional -= 1;
                self.stmts(finalbody);
            }
            Stmt::If {
                test, body, orelse, ..
            } => {
                let mut guarded = Vec::new();
                crate::guards::guarded_subjects(test, &FxHashMap::default(), &mut guarded);
                self.conditional += 1;
                for (block, guarded) in [(body, guarded), (orelse, Vec::new())] {
                    self.branch_count += 1;
                    self.branches.push((self.branch_count, guarded));
                    self.stmts(block);
                    self.branches.pop();
                }
                self.conditional -= 1;
            }
            other => {
                self.conditional += 1;
                other.blocks().into_iter().for_each(|b| self.stmts(b));
                self.conditional -= 1;
            }
        }
    }

    /// An ordering of `subject` (a stream, an event) made here, to be settled when the method
    /// ends. In an `except` block it runs on some paths only and is dropped at once; after a
    /// `return` on some path, that the method went on is one of its conditions; the branches
    /// whose test is about the subject itself (`if self.side is not None:`) are not.
    fn order(&mut self, ordering: Ordering, subject: &str) {
        if let Ordering::Records { event, stream } = &ordering {
            self.recorded_on.insert(event.clone(), stream.clone());
        }
        if self.handlers > 0 {
            return;
        }
        let conditions = self
            .branches
            .iter()
            .filter(|(_, guarded)| !guarded.iter().any(|s| s == subject))
            .map(|&(id, _)| id)
            .chain(self.after_early_return)
            .collect();
        self.orderings.push((ordering, conditions));
    }

    /// An event attribute is made here, under the enclosing branches (lazily, `if self.ready is
    /// None:`).
    fn event_made(&mut self, attr: &str) {
        let here = self.here();
        self.events_made.push((attr.to_string(), here));
    }

    /// The conditions of what runs here: the enclosing branches, and that no early `return`
    /// was taken.
    fn here(&self) -> Vec<usize> {
        self.branches
            .iter()
            .map(|&(id, _)| id)
            .chain(self.after_early_return)
            .collect()
    }

    /// Note that stream work the method's orderings may be for runs in the enclosing branches.
    fn work(&mut self) {
        let here = self.here();
        self.work_branches.push(here);
    }

    /// Keep the orderings that run on every path on which the method's stream work runs: their
    /// conditions hold wherever that work was issued (`if overlap: <copy>; <record>` under one
    /// `if`), or they have none. Other methods count on these, so one that holds on some paths
    /// only (`if sync: self.done.record()`) orders nothing for them.
    fn settle(&mut self) {
        for (ordering, conditions) in std::mem::take(&mut self.orderings) {
            // An event made under the same conditions as its record exists only where it is
            // recorded (`if spec: if self.ready is None: self.ready = Event(); self.ready.record()`).
            let made_with_it = match &ordering {
                Ordering::Records { event, .. } => self
                    .events_made
                    .iter()
                    .any(|(made, at)| made == event && conditions.iter().all(|c| at.contains(c))),
                _ => false,
            };
            let holds = conditions.is_empty()
                || made_with_it
                || (!self.work_branches.is_empty()
                    && self
                        .work_branches
                        .iter()
                        .all(|work| conditions.iter().all(|c| work.contains(c))));
            if !holds {
                continue;
            }
            match ordering {
                Ordering::WaitsOn(s) => {
                    self.method.waits_on.insert(s);
                }
                Ordering::Syncs(s) => {
                    self.method.syncs.insert(s);
                }
                Ordering::SyncsDevice => self.method.syncs_device = true,
                Ordering::Records { event, stream } => {
                    self.recorded_on_every_path.insert(event, stream);
                }
            }
        }
    }

    /// Is `expr` the current stream (`torch.cuda.current_stream()`, or a name bound to it)?
    fn is_current_stream(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Name { id, .. } => self.current_names.contains(id),
            // Named so, before the name is resolved (most calls are not).
            Expr::Call { func, .. } => {
                let named = match func.as_ref() {
                    Expr::Attribute { attr, .. } => attr.as_str(),
                    Expr::Name { id, .. } => id.as_str(),
                    _ => "",
                };
                named.ends_with("current_stream")
                    && self.call_kind(expr) == Some(ApiCall::CurrentStream)
            }
            _ => false,
        }
    }

    fn assign(&mut self, target: &Expr, value: &Expr) {
        let (attr, cache) = match target {
            Expr::Attribute { .. } => (target.dotted(), false),
            Expr::Subscript {
                value: container, ..
            } => (container.dotted(), true),
            _ => (None, false),
        };
        let Some(attr) = attr.filter(|a| a.starts_with("self.")) else {
            return;
        };
        let device_module = crate::context::device_module_of(value, self.imports, self.api);
        // For a mapping helper's lambda: whether it moves each tensor to the device.
        let mapped_transfer = self
            .mapped_lambda(value)
            .map(|body| is_method_call(body, "cuda") || is_method_call(body, "to"));
        let kind = match self.call_kind(value) {
            _ if device_module.is_some() && !cache => device_module.map(AttrKind::DeviceModule),
            Some(ApiCall::StreamFactory) if cache => Some(AttrKind::StreamCache),
            Some(ApiCall::StreamFactory) => Some(AttrKind::Stream),
            Some(ApiCall::CurrentStream | ApiCall::DefaultStream) => Some(AttrKind::AmbientStream),
            Some(ApiCall::EventFactory) => {
                self.event_made(&attr);
                Some(AttrKind::Event)
            }
            // `torch.get_device_module(dev).Event()`: an event of whatever device.
            _ if matches!(value, Expr::Call { func, .. }
                if matches!(func.as_ref(), Expr::Attribute { attr, .. } if attr == "Event")) =>
            {
                self.event_made(&attr);
                Some(AttrKind::Event)
            }
            _ if is_method_call(value, "record_event") => {
                if let Some(stream) = method_receiver(value).and_then(Expr::dotted) {
                    let event = attr.clone();
                    self.order(Ordering::Records { event, stream }, &attr);
                }
                Some(AttrKind::Event)
            }
            _ if is_method_call(value, "pin_memory") => Some(AttrKind::Host { pinned: true }),
            // A non-blocking copy to the host lands in pinned memory, filled on the stream.
            _ if !cache && copies_to_host_async(value) => {
                let stream = self.with_streams.last().cloned().unwrap_or_default();
                let fill = (attr.clone(), stream, value.span());
                self.method.fills_from_device.push(fill);
                self.work();
                Some(AttrKind::Host { pinned: true })
            }
            _ if crate::api::makes_host_device_pair(value) => Some(AttrKind::Host { pinned: true }),
            Some(ApiCall::TensorFactory | ApiCall::TensorFromData) if makes_host_tensor(value) => {
                Some(AttrKind::Host {
                    pinned: keyword_true(value, "pin_memory"),
                })
            }
            _ if cache => {
                // `self.stash[key] = t.to("cpu", non_blocking=True)` in a block of one of the
                // object's streams: an item left pending there for another method to take.
                if let Some(stream) = self.with_streams.last().filter(|s| s.starts_with("self.")) {
                    let host = copies_to_host_async(value);
                    let store = (attr.clone(), stream.clone(), host, value.span());
                    self.method.stores_on_stream.push(store);
                    self.work();
                }
                None
            }
            _ => match (self.with_streams.last(), value) {
                // `tree_map(lambda t: t.to("cuda", non_blocking=True), batch)`: what the lambda
                // makes, for every tensor of the structure.
                (Some(stream), _) if mapped_transfer.is_some() => Some(AttrKind::Tensor {
                    stream: stream.clone(),
                    transfer: mapped_transfer == Some(true),
                }),
                // Literals, and what free functions return (`cast(..)`, `SomeAwaitable(..)`,
                // helpers that move data to the host) are not known to be device tensors.
                (Some(_), Expr::Constant { .. } | Expr::Collection { .. }) => None,
                (Some(_), Expr::Call { func, .. })
                    if matches!(func.as_ref(), Expr::Name { .. }) =>
                {
                    None
                }
                (Some(_), Expr::Call { func, .. }) if self.is_own_method(func) => None,
                (Some(stream), _) => Some(AttrKind::Tensor {
                    stream: stream.clone(),
                    transfer: is_method_call(value, "cuda") || is_method_call(value, "to"),
                }),
                (None, _) => {
                    let tensor_call = matches!(
                        self.call_kind(value),
                        Some(ApiCall::TensorFactory | ApiCall::TensorFromData | ApiCall::TensorOp)
                    );
                    let transfer = is_method_call(value, "cuda") || is_method_call(value, "to");
                    (tensor_call || transfer).then(|| AttrKind::Tensor {
                        stream: String::new(),
                        transfer: false,
                    })
                }
            },
        };
        if let Some(kind) = kind {
            if matches!(&kind, AttrKind::Tensor { stream, .. } if !stream.is_empty()) {
                self.work();
            }
            self.method.assigns.push((attr, kind));
        } else if let Some((class, method)) = method_of_new_object(value).filter(|_| !cache) {
            let held = (attr, class.to_string(), method.to_string());
            self.method.held_streams.push(held);
        }
    }

    fn expr(&mut self, expr: &Expr) {
        let Expr::Call { func, args, .. } = expr else {
            return;
        };
        let Expr::Attribute {
            value: receiver,
            attr,
            ..
        } = func.as_ref()
        else {
            return;
        };
        let outside_side_stream = self.with_streams.is_empty();
        match attr.as_str() {
            "wait_stream" if outside_side_stream => {
                let forked = receiver.dotted().filter(|r| r.starts_with("self."));
                match (forked, args.first()) {
                    (Some(stream), Some(arg)) if self.is_current_stream(arg) => {
                        if self.conditional == 0 && self.after_early_return.is_none() {
                            self.method.forks.insert(stream);
                        }
                    }
                    _ => {
                        if let Some(s) = args.first().and_then(Expr::dotted) {
                            self.order(Ordering::WaitsOn(s.clone()), &s);
                        }
                    }
                }
            }
            "synchronize" => {
                if self.is_current_stream(receiver) {
                    // The caller's current stream, spelled as an empty stream name.
                    self.order(Ordering::Syncs(String::new()), "");
                } else if self.call_kind(expr) == Some(ApiCall::DeviceSynchronize) {
                    self.order(Ordering::SyncsDevice, "");
                } else if let Some(s) = receiver.dotted() {
                    self.order(Ordering::Syncs(s.clone()), &s);
                }
            }
            name if name.ends_with('_') && crate::api::TENSOR_METHODS.contains(&name) => {
                let target = attribute_written(receiver);
                if name == "copy_" && keyword_true(expr, "non_blocking") {
                    // `self.ids_cpu[:n].copy_(ids, non_blocking=True)`: a fill of the attribute,
                    // from the device when the attribute is host memory.
                    if let Some(attr) = target.clone() {
                        let stream = self.with_streams.last().cloned().unwrap_or_default();
                        let fill = (attr, stream, expr.span());
                        self.method.fills_from_device.push(fill);
                        self.work();
                    }
                }
                // On a stream of the object's: one every method can name.
                let stream = self.with_streams.last().filter(|s| s.starts_with("self."));
                if let (Some(attr), Some(stream)) = (target, stream) {
                    let write = (attr, stream.clone(), expr.span());
                    self.method.writes_in_place.push(write);
                    self.work();
                }
            }
            "copy_to_gpu" => {
                if let Some(pair) = receiver.dotted().filter(|d| d.starts_with("self.")) {
                    self.method.copies_to_device.push(pair);
                }
            }
            "record" => {
                // `self.done.record(self.copy_stream)` / `.record()` inside a stream block; the
                // caller's current stream (an empty name) outside any.
                let stream = match args.first() {
                    Some(arg) if self.is_current_stream(arg) => Some(String::new()),
                    Some(arg) => arg.dotted(),
                    None => Some(self.with_streams.last().cloned().unwrap_or_default()),
                };
                if let (Some(event), Some(stream)) = (receiver.dotted(), stream) {
                    let subject = event.clone();
                    self.order(Ordering::Records { event, stream }, &subject);
                }
            }
            "record_stream" => {
                let containers = match receiver.as_ref() {
                    Expr::Name { id, .. } => self.items_taken.get(id).cloned().unwrap_or_default(),
                    other => item_of_container(other).into_iter().collect(),
                };
                self.method.records_items.extend(containers);
            }
            // `cur.record_event(self.done)`: the same record, spelled from the stream's side.
            "record_event" => {
                let stream = if self.is_current_stream(receiver) {
                    Some(String::new())
                } else {
                    receiver.dotted()
                };
                let event = args.first().and_then(Expr::dotted);
                if let (Some(event), Some(stream)) = (event, stream) {
                    let subject = event.clone();
                    self.order(Ordering::Records { event, stream }, &subject);
                }
            }
            _ => {}
        }
    }
}

/// The container of the object an expression takes an item of (`self.stash.pop(key)`,
/// `self.stash[key]`, `self.stash.get(key)`), by its dotted name.
fn item_of_container(expr: &Expr) -> Option<String> {
    let container = match expr {
        Expr::Subscript { value, .. } => value.as_ref(),
        Expr::Call { func, .. } => match func.as_ref() {
            Expr::Attribute { value, attr, .. }
                if matches!(attr.as_str(), "pop" | "get" | "popleft") =>
            {
                value.as_ref()
            }
            _ => return None,
        },
        _ => return None,
    };
    container.dotted().filter(|d| d.starts_with("self."))
}

/// What call makes the value; for `a if c else b`, the call in either branch.
pub(crate) fn call_kind(api: &ApiModel, imports: &Imports, expr: &Expr) -> Option<ApiCall> {
    match expr {
        Expr::Call { func, .. } => imports.qualify(func).and_then(|q| api.classify(&q)),
        Expr::IfExp { body, orelse, .. } => {
            call_kind(api, imports, body).or_else(|| call_kind(api, imports, orelse))
        }
        _ => None,
    }
}

/// An expression naming a stream by its last part (`copy_stream`, `self.side_stream`).
fn stream_named(e: &Expr) -> Option<String> {
    e.dotted()
        .filter(|d| d.rsplit('.').next().is_some_and(|l| l.contains("stream")))
}

/// The attribute of `self` a method call on `receiver` writes in place (`self.k[slot]`: `self.k`).
fn attribute_written(receiver: &Expr) -> Option<String> {
    let mut target = receiver;
    while let Expr::Subscript { value, .. } = target {
        target = value;
    }
    target.dotted().filter(|d| d.starts_with("self."))
}

/// `t.to("cpu", non_blocking=True)` (or `device="cpu"`): a copy to the host the host must wait
/// for.
fn copies_to_host_async(value: &Expr) -> bool {
    let Expr::Call { args, keywords, .. } = value else {
        return false;
    };
    let device = args.first().or_else(|| Expr::keyword(keywords, "device"));
    is_method_call(value, "to")
        && keyword_true(value, "non_blocking")
        && device
            .and_then(Expr::as_str)
            .is_some_and(|d| d.starts_with("cpu"))
}

/// A factory call that makes a CPU tensor: no `device=`, or `device="cpu"` (not `*_like`, which
/// follows its argument).
pub(crate) fn makes_host_tensor(call: &Expr) -> bool {
    let Expr::Call { func, keywords, .. } = call else {
        return false;
    };
    if func.dotted().is_some_and(|d| d.ends_with("_like")) {
        return false;
    }
    match Expr::keyword(keywords, "device") {
        None => true,
        Some(d) => d.as_str().is_some_and(|s| s.starts_with("cpu")),
    }
}

pub(crate) fn keyword_true(call: &Expr, name: &str) -> bool {
    matches!(call, Expr::Call { keywords, .. }
        if matches!(Expr::keyword(keywords, name), Some(Expr::Constant { value: crate::syntax::Constant::Bool(true), .. })))
}

/// The receiver of a method call expression.
pub(crate) fn method_receiver(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Call { func, .. } => match func.as_ref() {
            Expr::Attribute { value, .. } => Some(value),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn is_method_call(expr: &Expr, method: &str) -> bool {
    matches!(expr, Expr::Call { func, .. } if matches!(func.as_ref(), Expr::Attribute { attr, .. } if attr == method))
}

/// Does the method store one of its arguments on the object (see
/// [`MethodSummary::keeps_arguments`])?
/// The arguments (by position after `self`) whose host memory the method writes: an item of
/// `p.np` or `p.cpu` assigned, for a host/device pair `p` it is given.
fn writes_host_of(f: &FunctionDef) -> Vec<usize> {
    fn walk(stmts: &[Stmt], params: &[&str], out: &mut Vec<usize>) {
        for s in stmts {
            if let Stmt::Assign { targets, .. } = s {
                for t in targets {
                    let Expr::Subscript { value, .. } = t else {
                        continue;
                    };
                    let Expr::Attribute {
                        value: owner, attr, ..
                    } = value.as_ref()
                    else {
                        continue;
                    };
                    let Expr::Name { id, .. } = owner.as_ref() else {
                        continue;
                    };
                    let at = params.iter().position(|p| p == id);
                    if let Some(i) =
                        at.filter(|_| crate::api::PAIR_HOST_VIEWS.contains(&attr.as_str()))
                    {
                        if !out.contains(&i) {
                            out.push(i);
                        }
                    }
                }
            }
            if !matches!(s, Stmt::Def(_) | Stmt::Class(_)) {
                for b in s.blocks() {
                    walk(b, params, out);
                }
            }
        }
    }
    let params: Vec<&str> = f.params.iter().skip(1).map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    walk(&f.body, &params, &mut out);
    out
}

fn keeps_arguments(f: &FunctionDef) -> bool {
    const STORING: &[&str] = &[
        "append",
        "extend",
        "insert",
        "add",
        "put",
        "update",
        "setdefault",
        "appendleft",
    ];
    let params: Vec<&str> = f.params.iter().skip(1).map(|p| p.name.as_str()).collect();
    let mentions_param = |e: &Expr| {
        let mut found = false;
        visit_exprs(e, &mut |x| {
            found |= matches!(x, Expr::Name { id, .. } if params.contains(&id.as_str()));
        });
        found
    };
    let on_self = |e: &Expr| {
        let base = match e {
            Expr::Subscript { value, .. } => value.dotted(),
            other => other.dotted(),
        };
        base.is_some_and(|d| d.starts_with("self."))
    };
    fn walk(stmts: &[Stmt], keeps: &mut dyn FnMut(&Stmt) -> bool) -> bool {
        stmts.iter().any(|s| {
            keeps(s)
                || (!matches!(s, Stmt::Def(_) | Stmt::Class(_))
                    && s.blocks().into_iter().any(|b| walk(b, keeps)))
        })
    }
    walk(&f.body, &mut |s| match s {
        Stmt::Assign { targets, value, .. } => targets.iter().any(on_self) && mentions_param(value),
        Stmt::Expr(Expr::Call { func, args, .. }) => match func.as_ref() {
            Expr::Attribute {
                value: owner, attr, ..
            } => {
                STORING.contains(&attr.as_str())
                    && on_self(owner)
                    && args.iter().any(mentions_param)
            }
            _ => false,
        },
        _ => false,
    })
}

/// The attributes of `self` that the class's methods other than `__init__` assign, augment or
/// delete, also in their nested functions and by tuple unpacking.
fn reassigned_attributes(class_body: &[Stmt]) -> FxHashSet<String> {
    fn targets(e: &Expr, out: &mut FxHashSet<String>) {
        match e {
            Expr::Collection { elts, .. } => elts.iter().for_each(|t| targets(t, out)),
            Expr::Starred { value, .. } => targets(value, out),
            _ => out.extend(e.dotted().filter(|d| d.starts_with("self."))),
        }
    }
    fn walk(stmts: &[Stmt], out: &mut FxHashSet<String>) {
        for s in stmts {
            match s {
                Stmt::Assign { targets: ts, .. } | Stmt::Delete { targets: ts, .. } => {
                    ts.iter().for_each(|t| targets(t, out))
                }
                Stmt::For { target, .. } => targets(target, out),
                Stmt::Def(f) => walk(&f.body, out),
                _ => {}
            }
            s.blocks().into_iter().for_each(|b| walk(b, out));
        }
    }
    let mut out = FxHashSet::default();
    for s in class_body {
        if let Stmt::Def(f) = s {
            if f.name != "__init__" {
                walk(&f.body, &mut out);
            }
        }
    }
    out
}

/// The positions (after `self`, for a method that takes one) of the parameters `f` uses only
/// through a tensor's metadata (`t.numel()`, `t.shape`, `t.device`).
fn sizes_only(f: &FunctionDef) -> Vec<usize> {
    use crate::api::{METADATA_METHODS, TENSOR_PROPERTIES};
    let is_static = f.decorators.iter().any(crate::lower::is_staticmethod);
    let receiver = usize::from(!is_static);
    let params: Vec<&str> = f
        .params
        .iter()
        .skip(receiver)
        .map(|p| if p.variadic { "" } else { p.name.as_str() })
        .collect();
    if params.iter().all(|p| p.is_empty()) {
        return Vec::new();
    }
    let at = |id: &str| params.iter().position(|p| !p.is_empty() && *p == id);
    // Per parameter: its uses, and those that only ask for metadata.
    let mut uses = vec![(0usize, 0usize); params.len()];
    let mut opaque = false;
    crate::syntax::visit_statement_exprs(&f.body, true, &mut |e, _| {
        crate::syntax::visit_exprs(e, &mut |e| match e {
            Expr::Name { id, .. } => {
                if let Some(i) = at(id) {
                    uses[i].0 += 1;
                }
            }
            Expr::Attribute { value, attr, .. } => {
                let metadata = METADATA_METHODS.contains(&attr.as_str())
                    || TENSOR_PROPERTIES.contains(&attr.as_str());
                if let (true, Expr::Name { id, .. }) = (metadata, value.as_ref()) {
                    if let Some(i) = at(id) {
                        uses[i].1 += 1;
                    }
                }
            }
            // A lambda's body is not visited: its uses are not counted.
            Expr::Lambda { .. } => opaque = true,
            _ => {}
        })
    });
    if opaque {
        return Vec::new();
    }
    (0..params.len())
        .filter(|&i| !params[i].is_empty() && uses[i].0 == uses[i].1)
        .collect()
}
