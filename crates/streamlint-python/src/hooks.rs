//! Saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`): autograd keeps what the pack
//! hook returns and hands it to the unpack hook in the backward pass, on whatever stream is
//! current then. An offloading pack hook returns a host buffer its copy on a side stream is
//! still filling, often with an event recorded after that copy: both reach unpack as its
//! argument. Unpack is judged with them, as a caller of pack would be, so that handing the
//! event over counts only where unpack waits on it.
//!
//! Read from the syntax of the class: which methods it registers as the pair, and what pack
//! returns item by item (what a `with torch.cuda.stream(s):` block wrote, events recorded).

use rustc_hash::FxHashMap;

use crate::api::{ApiCall, ApiModel};
use crate::names::Imports;
use crate::summary::{is_method_call, keyword_true, makes_host_tensor, method_receiver};
use crate::syntax::{visit_calls, ClassDef, Expr, FunctionDef, Stmt};

/// One item of what a pack hook returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packed {
    /// A tensor written on the stream attribute `stream` (host memory where `host`), called
    /// `name` in pack.
    Written {
        stream: String,
        host: bool,
        name: String,
    },
    /// An event recorded on the stream attribute `stream` after that work.
    Event { stream: String },
    /// Anything else.
    Other,
}

/// What an unpack hook receives: what the pack method `pack` returns, item by item (one item
/// where pack returns a single value).
#[derive(Clone, Debug)]
pub struct PackedArgument {
    pub pack: String,
    pub items: Vec<Packed>,
}

/// For each unpack method of the class's hook pairs, what its argument holds.
pub fn unpack_arguments(
    class: &ClassDef,
    api: &ApiModel,
    imports: &Imports,
) -> FxHashMap<String, PackedArgument> {
    let methods: FxHashMap<&str, &FunctionDef> = class
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Def(f) => Some((f.name.as_str(), f)),
            _ => None,
        })
        .collect();
    let mut out = FxHashMap::default();
    for (pack, unpack) in hook_pairs(class, imports) {
        if let (Some(p), true) = (
            methods.get(pack.as_str()),
            methods.contains_key(unpack.as_str()),
        ) {
            let items = PackScan::new(api, imports).returned(p);
            if items.iter().any(|i| *i != Packed::Other) {
                out.insert(unpack, PackedArgument { pack, items });
            }
        }
    }
    out
}

/// (pack, unpack) method names the class registers: `super().__init__(self.pack, self.unpack)`
/// in a subclass of `saved_tensors_hooks`, or a `saved_tensors_hooks(self.pack, self.unpack)`
/// one of its methods makes.
fn hook_pairs(class: &ClassDef, imports: &Imports) -> Vec<(String, String)> {
    let is_hooks = |func: &Expr| {
        imports
            .qualify(func)
            .is_some_and(|q| q.ends_with("saved_tensors_hooks"))
    };
    let subclass = class.bases.iter().any(is_hooks);
    let mut out = Vec::new();
    visit_calls(&class.body, true, &mut |call| {
        let Expr::Call {
            func,
            args,
            keywords,
            ..
        } = call
        else {
            return;
        };
        let registers = is_hooks(func) || (subclass && is_super_init(func));
        let hook = |i: usize, name: &str| {
            args.get(i)
                .or_else(|| Expr::keyword(keywords, name))
                .and_then(Expr::dotted)
                .and_then(|d| d.strip_prefix("self.").map(str::to_string))
        };
        if let (true, Some(pack), Some(unpack)) =
            (registers, hook(0, "pack_hook"), hook(1, "unpack_hook"))
        {
            out.push((pack, unpack));
        }
    });
    out
}

/// `super().__init__`
fn is_super_init(func: &Expr) -> bool {
    matches!(func, Expr::Attribute { value, attr, .. }
        if attr == "__init__"
            && matches!(value.as_ref(), Expr::Call { func, .. } if func.dotted().as_deref() == Some("super")))
}

/// What a pack method's names hold as its statements run, enough to read its `return`.
struct PackScan<'a> {
    api: &'a ApiModel,
    imports: &'a Imports,
    /// Stream attributes of the enclosing `with torch.cuda.stream(self.s):` blocks.
    streams: Vec<String>,
    /// Names written inside a stream block, with that stream.
    written: FxHashMap<String, String>,
    /// Names bound to host tensors.
    host: Vec<String>,
    /// Event names, with the stream they were recorded on.
    events: FxHashMap<String, String>,
    returned: Option<Vec<Packed>>,
}

impl<'a> PackScan<'a> {
    fn new(api: &'a ApiModel, imports: &'a Imports) -> Self {
        PackScan {
            api,
            imports,
            streams: Vec::new(),
            written: FxHashMap::default(),
            host: Vec::new(),
            events: FxHashMap::default(),
            returned: None,
        }
    }

    fn returned(mut self, pack: &FunctionDef) -> Vec<Packed> {
        self.stmts(&pack.body);
        self.returned.unwrap_or_default()
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Assign { targets, value, .. } => {
                for t in targets {
                    if let Expr::Name { id, .. } = t {
                        self.assign(id, value);
                    }
                }
                self.effects(value);
            }
            Stmt::Expr(e) => self.effects(e),
            Stmt::With { items, body } => {
                let pushed: Vec<String> = items
                    .iter()
                    .filter_map(|i| match &i.context {
                        Expr::Call { func, args, .. }
                            if self.classify(func) == Some(ApiCall::StreamContext) =>
                        {
                            args.first().and_then(Expr::dotted)
                        }
                        _ => None,
                    })
                    .collect();
                let n = pushed.len();
                self.streams.extend(pushed);
                self.stmts(body);
                self.streams.truncate(self.streams.len() - n);
            }
            Stmt::Return { value: Some(v), .. } if self.returned.is_none() => {
                let items = match v {
                    Expr::Collection { elts, .. } => elts.iter().map(|e| self.item(e)).collect(),
                    one => vec![self.item(one)],
                };
                self.returned = Some(items);
            }
            other => other.blocks().into_iter().for_each(|b| self.stmts(b)),
        }
    }

    fn classify(&self, func: &Expr) -> Option<ApiCall> {
        self.imports
            .qualify(func)
            .and_then(|q| self.api.classify(&q))
    }

    /// `name = value`: a host tensor, an event made on a stream, or a value written inside a
    /// stream block.
    fn assign(&mut self, name: &str, value: &Expr) {
        if let Expr::Call { func, .. } = value {
            let kind = self.classify(func);
            let pinned = is_method_call(value, "pin_memory") || keyword_true(value, "pin_memory");
            if pinned || (matches!(kind, Some(ApiCall::TensorFactory)) && makes_host_tensor(value))
            {
                self.host.push(name.to_string());
                return;
            }
            if is_method_call(value, "record_event") {
                if let Some(stream) = method_receiver(value).and_then(Expr::dotted) {
                    self.events.insert(name.to_string(), stream);
                }
                return;
            }
        }
        if let Some(stream) = self.streams.last() {
            self.written.insert(name.to_string(), stream.clone());
            // `t.to("cpu", non_blocking=True)`, `t.cpu()`: host memory the copy fills.
            if moves_to_host(value) {
                self.host.push(name.to_string());
            }
        }
    }

    /// `host.copy_(t, non_blocking=True)` in a stream block writes `host` there;
    /// `done.record()` there (or `done.record(s)`) records `done` on it.
    fn effects(&mut self, expr: &Expr) {
        let Expr::Call { func, args, .. } = expr else {
            return;
        };
        let Expr::Attribute { value, attr, .. } = func.as_ref() else {
            return;
        };
        let Expr::Name { id, .. } = value.as_ref() else {
            return;
        };
        let stream = match attr.as_str() {
            "record" => args
                .first()
                .and_then(Expr::dotted)
                .or_else(|| self.streams.last().cloned()),
            a if a.ends_with('_') && !a.starts_with('_') => self.streams.last().cloned(),
            _ => None,
        };
        if let Some(stream) = stream {
            if attr == "record" {
                self.events.insert(id.clone(), stream);
            } else {
                self.written.insert(id.clone(), stream);
            }
        }
    }

    fn item(&self, expr: &Expr) -> Packed {
        let Expr::Name { id, .. } = expr else {
            return Packed::Other;
        };
        if let Some(stream) = self.events.get(id).filter(|s| s.starts_with("self.")) {
            return Packed::Event {
                stream: stream.clone(),
            };
        }
        match self.written.get(id) {
            Some(stream) if stream.starts_with("self.") => Packed::Written {
                stream: stream.clone(),
                host: self.host.contains(id),
                name: id.clone(),
            },
            _ => Packed::Other,
        }
    }
}

/// `t.cpu()`, `t.to("cpu", ..)`, `t.to(device="cpu", ..)`.
fn moves_to_host(value: &Expr) -> bool {
    let Expr::Call { args, keywords, .. } = value else {
        return false;
    };
    let cpu = |e: &Expr| e.as_str().is_some_and(|s| s.starts_with("cpu"));
    is_method_call(value, "cpu")
        || (is_method_call(value, "to")
            && (args.first().is_some_and(cpu)
                || Expr::keyword(keywords, "device").is_some_and(cpu)))
}
