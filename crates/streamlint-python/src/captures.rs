//! CUDA graphs an object captures in one method and replays in another (an inference engine
//! captures one graph per batch size in `capture()`, keeps it in `self.graphs[bs]`, and
//! replays it in `forward()` after copying the batch into the static inputs). A replay runs
//! the captured work again, on the stream current where `replay()` is called, reading and
//! writing the tensors the capture used; those the other methods can reach are the object's
//! attributes. So the class summary keeps, per graph attribute, which attributes of `self` the
//! capture reads and which it writes, and a replay anywhere in the class repeats those
//! accesses (see `lower::graphs`).

use rustc_hash::FxHashSet;

use streamlint_graph::Span;

use crate::api::{ApiCall, ApiModel};
use crate::names::Imports;
use crate::syntax::{visit_exprs, visit_statement_exprs, Expr, FunctionDef, Stmt};

/// The attributes of `self` one graph's capture reads and writes, by [`attribute_key`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapturedAttributes {
    pub reads: Vec<String>,
    pub writes: Vec<String>,
}

impl CapturedAttributes {
    pub fn extend(&mut self, other: CapturedAttributes) {
        for (mine, theirs) in [
            (&mut self.reads, other.reads),
            (&mut self.writes, other.writes),
        ] {
            for key in theirs {
                if !mine.contains(&key) {
                    mine.push(key);
                }
            }
        }
    }
}

/// An attribute of `self` as every method names it: `self.static_input`, and `self.graphs[…]`
/// for any item of a container attribute (the key is not followed).
pub fn attribute_key(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Attribute { value, attr, .. } => {
            let owner = match value.as_ref() {
                Expr::Name { id, .. } if id == "self" => "self".to_string(),
                other => attribute_key(other)?,
            };
            Some(format!("{owner}.{attr}"))
        }
        Expr::Subscript { value, .. } => Some(format!("{}[…]", attribute_key(value)?)),
        _ => None,
    }
}

/// The graph a `with` item captures into when it is `torch.cuda.graph(g, ..)` (or
/// `graph(cuda_graph=g)`, or an accelerator's `capture_to_graph(g)`); `classify` says what API
/// a callee names.
pub fn captured_graph<'e>(
    context: &'e Expr,
    classify: &dyn Fn(&Expr) -> Option<ApiCall>,
) -> Option<&'e Expr> {
    let (func, args, keywords) = context.call_parts()?;
    // Every `with` item comes here: resolve the name only when it could be a capture.
    let named_capture = match func {
        Expr::Attribute { attr, .. } => attr == "graph" || attr == "capture_to_graph",
        Expr::Name { id, .. } => id == "graph",
        _ => false,
    };
    if !named_capture {
        return None;
    }
    if classify(func) != Some(ApiCall::GraphCapture) {
        return None;
    }
    args.first()
        .or_else(|| Expr::keyword(keywords, "cuda_graph"))
}

/// The parameter whose graph the context a function returns captures
/// (`def capture_context(graph, pool): return torch.cuda.graph(graph, pool=pool)`, or through a
/// device module bound to a local name, `dm = torch.get_device_module(); return dm.graph(g)`).
pub fn returned_capture(def: &FunctionDef, api: &ApiModel, imports: &Imports) -> Option<usize> {
    let Some(Stmt::Return {
        value: Some(returned),
        ..
    }) = def.body.last()
    else {
        return None;
    };
    let graph = captured_graph(returned, &by_imports(api, imports)).or_else(|| {
        // `dm.graph(g)` with `dm = torch.get_device_module()` earlier in the function.
        let Expr::Call { func, args, .. } = returned else {
            return None;
        };
        let Expr::Attribute { value, attr, .. } = func.as_ref() else {
            return None;
        };
        let Expr::Name { id: local, .. } = value.as_ref() else {
            return None;
        };
        let module = def.body.iter().find_map(|s| match s {
            Stmt::Assign {
                targets,
                value: Expr::Call { func, .. },
                ..
            } if matches!(targets.as_slice(), [Expr::Name { id, .. }] if id == local) => {
                imports.qualify(func).map(|q| format!("{q}()"))
            }
            _ => None,
        })?;
        let capture = api.classify(&format!("{module}.{attr}")) == Some(ApiCall::GraphCapture);
        capture.then(|| args.first()).flatten()
    })?;
    let Expr::Name { id, .. } = graph else {
        return None;
    };
    def.params.iter().position(|p| p.name == *id)
}

/// What API a callee names, through the module's imports.
fn by_imports<'a>(
    api: &'a ApiModel,
    imports: &'a Imports,
) -> impl Fn(&Expr) -> Option<ApiCall> + 'a {
    move |func| imports.qualify(func).and_then(|q| api.classify(&q))
}

/// The graphs method `f` captures that the object keeps (`with torch.cuda.graph(self.graph):`,
/// or a local graph then stored as `self.graphs[bs] = g`), each with what its capture does to
/// the object's attributes.
pub fn method_captures(
    f: &FunctionDef,
    api: &ApiModel,
    imports: &Imports,
) -> Vec<(String, CapturedAttributes)> {
    let mut out: Vec<(String, CapturedAttributes)> = Vec::new();
    let mut add =
        |key: String, captured: CapturedAttributes| match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, known)) => known.extend(captured),
            None => out.push((key, captured)),
        };
    for_each_capture(&f.body, api, imports, &mut |graph, body| {
        if let Some(key) = kept_as(graph, &f.body) {
            add(key, accesses(body));
        }
    });
    out
}

/// Call `found` with the graph and the statements of each capture in `stmts`: the body of a
/// capture `with`, or the statements between `g.capture_begin()` and `g.capture_end()`.
fn for_each_capture<'s>(
    stmts: &'s [Stmt],
    api: &ApiModel,
    imports: &Imports,
    found: &mut dyn FnMut(&'s Expr, &'s [Stmt]),
) {
    for (i, s) in stmts.iter().enumerate() {
        if let Stmt::With { items, body } = s {
            if let Some(graph) = items
                .iter()
                .find_map(|item| captured_graph(&item.context, &by_imports(api, imports)))
            {
                found(graph, body);
                continue;
            }
        }
        if let Some((graph, end)) = capture_between(stmts, i) {
            found(graph, &stmts[i + 1..end]);
            continue;
        }
        for block in s.blocks() {
            for_each_capture(block, api, imports, found);
        }
    }
}

/// `g.capture_begin()` at `stmts[i]`, with its `g.capture_end()` later in the same block: the
/// graph, and the index of the `capture_end` (the statements between are the capture).
pub fn capture_between(stmts: &[Stmt], i: usize) -> Option<(&Expr, usize)> {
    let graph = graph_method_receiver(&stmts[i], "capture_begin")?;
    let end = stmts[i + 1..].iter().position(|later| {
        graph_method_receiver(later, "capture_end").is_some_and(|g| same(g, graph))
    })?;
    Some((graph, i + 1 + end))
}

/// The receiver of a statement `g.<method>()`.
fn graph_method_receiver<'s>(stmt: &'s Stmt, method: &str) -> Option<&'s Expr> {
    let Stmt::Expr(Expr::Call { func, .. }) = stmt else {
        return None;
    };
    match func.as_ref() {
        Expr::Attribute { value, attr, .. } if attr == method => Some(value),
        _ => None,
    }
}

/// Do two expressions name the same thing (`g` and `g`, `self.graphs[bs]` and
/// `self.graphs[bs]`)? Compared by structure, not by text.
fn same(a: &Expr, b: &Expr) -> bool {
    match (a, b) {
        (Expr::Name { id: x, .. }, Expr::Name { id: y, .. }) => x == y,
        (
            Expr::Attribute {
                value: v, attr: x, ..
            },
            Expr::Attribute {
                value: w, attr: y, ..
            },
        ) => x == y && same(v, w),
        (
            Expr::Subscript {
                value: v, index: i, ..
            },
            Expr::Subscript {
                value: w, index: j, ..
            },
        ) => same(v, w) && same(i, j),
        _ => false,
    }
}

/// The attribute the object keeps a captured graph in: the graph expression itself when it is
/// one, or the attribute a local graph is assigned to somewhere in the method.
fn kept_as(graph: &Expr, method_body: &[Stmt]) -> Option<String> {
    match graph {
        Expr::Name { id: local, .. } => stored_in(method_body, local),
        other => attribute_key(other),
    }
}

/// The attribute `self.x = local` (or `self.x[k] = local`) stores `local` in, anywhere in
/// `stmts`.
fn stored_in(stmts: &[Stmt], local: &str) -> Option<String> {
    stmts.iter().find_map(|s| {
        let stored = match s {
            Stmt::Assign {
                targets,
                value: Expr::Name { id, .. },
                ..
            } if id == local => targets.iter().find_map(attribute_key),
            _ => None,
        };
        stored.or_else(|| s.blocks().into_iter().find_map(|b| stored_in(b, local)))
    })
}

/// What the statements of a capture do to the object's attributes: those assigned, written in
/// place (`self.out.copy_(y)`, `out=self.out`) and, of the rest, those read (the outermost
/// attribute expression: `self.inputs[bs]`, not `self.inputs`). Attributes called
/// (`self.model(x)`) are code, not data.
fn accesses(body: &[Stmt]) -> CapturedAttributes {
    let mut captured = CapturedAttributes::default();
    let mut keyed: Vec<(Span, String)> = Vec::new();
    let mut excluded: FxHashSet<Span> = FxHashSet::default();
    visit_statement_exprs(body, false, &mut |expr, target| {
        if target {
            if let Some(key) = attribute_key(expr) {
                captured.writes.push(key);
            }
            return;
        }
        visit_exprs(expr, &mut |e| {
            if let Some(key) = attribute_key(e) {
                keyed.push((e.span(), key));
            }
            let Expr::Call { func, keywords, .. } = e else {
                return;
            };
            excluded.insert(func.span());
            if let Expr::Attribute { value, attr, .. } = func.as_ref() {
                if attr.ends_with('_') && !attr.starts_with('_') {
                    captured.writes.extend(attribute_key(value));
                }
            }
            if let Some(out) = Expr::keyword(keywords, "out") {
                captured.writes.extend(attribute_key(out));
            }
        });
    });
    keyed.retain(|(span, _)| !excluded.contains(span));
    let outermost = |span: Span| {
        !keyed
            .iter()
            .any(|(s, _)| *s != span && s.start <= span.start && span.end <= s.end)
    };
    for (span, key) in &keyed {
        if outermost(*span) && !captured.reads.contains(key) {
            captured.reads.push(key.clone());
        }
    }
    captured.writes.sort();
    captured.writes.dedup();
    captured
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{first_method, parse_module};

    fn captures(source: &str) -> Vec<(String, CapturedAttributes)> {
        let module = parse_module(source).unwrap();
        let f = first_method(&module);
        let imports = Imports::collect(&module);
        method_captures(f, &ApiModel::default(), &imports)
    }

    #[test]
    fn a_local_graph_kept_in_a_container_is_known_by_the_container() {
        let source = "import torch\nclass Runner:\n    def capture(self, bs):\n        g = torch.cuda.CUDAGraph()\n        with torch.cuda.graph(g):\n            self.outputs[bs] = self.model(self.inputs[bs], out_ws=self.ws)\n            self.outputs[bs].mul_(self.scale)\n        self.graphs[bs] = g\n";
        let found = captures(source);
        assert_eq!(found.len(), 1);
        let (key, captured) = &found[0];
        assert_eq!(key, "self.graphs[…]");
        assert_eq!(captured.writes, ["self.outputs[…]"]);
        assert_eq!(
            captured.reads,
            ["self.inputs[…]", "self.ws", "self.outputs[…]", "self.scale"]
        );
    }

    #[test]
    fn a_capture_between_begin_and_end_on_an_attribute() {
        let source = "class Runner:\n    def capture(self):\n        self.graph.capture_begin()\n        torch.add(self.x, 1, out=self.y)\n        self.graph.capture_end()\n";
        let found = captures(source);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "self.graph");
        assert_eq!(found[0].1.writes, ["self.y"]);
        assert_eq!(found[0].1.reads, ["self.x", "self.y"]);
    }

    #[test]
    fn functions_returning_a_capture_context_of_a_parameter() {
        let direct = "import torch\ndef capture(pool, graph):\n    return torch.cuda.graph(graph, pool=pool)\n";
        let through_module = "import torch\ndef capture(graph, stream):\n    dm = torch.get_device_module()\n    kwargs = {'stream': stream}\n    return dm.graph(graph, **kwargs)\n";
        let other =
            "import torch\ndef capture(graph, stream):\n    return torch.cuda.stream(stream)\n";
        let param = |source: &str| {
            let module = parse_module(source).unwrap();
            let Some(Stmt::Def(f)) = module.last() else {
                panic!("a function expected");
            };
            returned_capture(f, &ApiModel::default(), &Imports::collect(&module))
        };
        assert_eq!(param(direct), Some(1));
        assert_eq!(param(through_module), Some(0));
        assert_eq!(param(other), None);
    }

    #[test]
    fn a_graph_the_object_does_not_keep_is_not_summarized() {
        let source = "import torch\nclass Runner:\n    def run(self):\n        g = torch.cuda.CUDAGraph()\n        with torch.cuda.graph(g):\n            self.y = self.x * 2\n        g.replay()\n";
        assert!(captures(source).is_empty());
    }
}
