//! CUDA graphs. Work issued while a graph is captured (`with torch.cuda.graph(g):`, or between
//! `g.capture_begin()` and `g.capture_end()`) does not run: it is recorded, and runs each time
//! `g.replay()` is called, in one piece on the stream current at the replay, reading and
//! writing the same (static) tensors. Tensors made during the capture come from the graph's
//! private pool and live as long as the graph, in no stream's pool.
//!
//! Inside the graph, work keeps the order the capture gave it: work forked to a second stream
//! during the capture is a branch of the graph, joined where the capture joined it, and memory
//! freed during the capture goes back to the graph's pool, where a later allocation of the same
//! capture can take it while a branch still uses it (measured on an H200: every replay then
//! corrupts; a `record_stream` during the capture holds the block back, as in eager code). So
//! the capture is lowered where it is written, as the graph's own order, and ends with nothing
//! pending for the code after it, which none of the captured work ran before. Its ops that
//! touch tensors and events the graph outlives are kept per graph, in order, and a replay puts
//! them back on its current stream.
//! `torch.cuda.graph(..)` also synchronizes the device on entry (it waits for all streams before
//! capturing). A graph captured in this body is known by the text naming it (`g`,
//! `self.graphs[bs]`); one the object keeps, captured in another method, by the class summary's
//! record of the attributes its capture reads and writes (see `captures`). A project function
//! that returns a capture context of the graph it is given
//! (`def capture_context(graph, pool): return torch.cuda.graph(graph, pool=pool)`) captures the
//! caller's graph.

use super::*;
use crate::captures;
use streamlint_graph::Op;

/// What a replay of a graph does, in order: the captured ops that touch tensors and events,
/// each to run on the replaying stream.
pub(super) type Captured = Vec<OpKind>;

/// The captured op `kind` as it runs on `stream` when the graph is replayed; `None` for what
/// has no effect outside the graph (ordering between the graph's own nodes, releases of graph
/// memory).
fn replayed(kind: &OpKind, stream: StreamId) -> Option<OpKind> {
    Some(match *kind {
        OpKind::Read { buffer, .. } => OpKind::Read { buffer, stream },
        OpKind::Write { buffer, .. } | OpKind::Produce { buffer, .. } => {
            OpKind::Write { buffer, stream }
        }
        OpKind::Raw { buffer, write, .. } => OpKind::Raw {
            buffer,
            stream,
            write,
        },
        OpKind::RecordEvent { event, .. } => OpKind::RecordEvent { event, stream },
        OpKind::WaitEvent { event, .. } => OpKind::WaitEvent { event, stream },
        _ => return None,
    })
}

impl<'a> Lowerer<'a> {
    /// `with torch.cuda.graph(g, ..):` (or `graph(cuda_graph=g, ..)`, an accelerator's
    /// `capture_to_graph(g)`, a project function returning one of those) — is this item a graph
    /// capture? The graph's name if so.
    pub(super) fn graph_capture(&self, context: &Expr) -> Option<String> {
        let classify = |func: &Expr| self.classify_callee(func).map(|(call, _)| call);
        let graph = captures::captured_graph(context, &classify)
            .or_else(|| self.wrapped_capture(context))?;
        Some(self.graph_name(graph))
    }

    /// `with capture_context(g, ..):` for a project function that returns a capture context of
    /// one of its parameters: the caller's argument for that parameter.
    fn wrapped_capture<'e>(&self, context: &'e Expr) -> Option<&'e Expr> {
        let (func, args, keywords) = context.call_parts()?;
        if !matches!(func, Expr::Name { .. } | Expr::Attribute { .. }) {
            return None;
        }
        let callee = self.project_callee(func)?;
        let module = self.cx.project.module(callee.module);
        let param = captures::returned_capture(callee.def, self.cx.api, &module.imports)?;
        let def = callee.def;
        if param < def.positional && param < args.len() {
            return args
                .get(param)
                .filter(|a| !matches!(a, Expr::Starred { .. }));
        }
        Expr::keyword(keywords, &def.params[param].name)
    }

    /// The name a graph is known by: the text of the expression.
    fn graph_name(&self, graph: &Expr) -> String {
        String::from_utf8_lossy(self.cx.text(graph.span())).into_owned()
    }

    /// Lower `body` as the capture of the graph `name`: its work is recorded, not run here.
    pub(super) fn capture(&mut self, name: String, body: &[Stmt], span: Span) {
        let start = self.b.next_op();
        self.stmts(body);
        self.keep_capture(name, start, span);
    }

    /// `g.capture_begin()` whose `capture_end()` is in another block (the capture forks work
    /// to a second stream in between, each part in its own `with` block): the capture runs
    /// from here to that call, if the code between stays in one straight line.
    pub(super) fn begin_capture(&mut self, graph: &Expr) {
        let name = self.graph_name(graph);
        let block = self.b.current();
        self.open_capture = Some((name, self.b.next_op(), block));
    }

    /// `g.capture_end()` of the capture [`Self::begin_capture`] opened.
    pub(super) fn end_capture(&mut self, graph: &Expr, span: Span) {
        let name = self.graph_name(graph);
        let open = self.open_capture.take();
        match open {
            Some((begun, start, block)) if begun == name && block == self.b.current() => {
                self.keep_capture(name, start, span);
            }
            // A branch or a loop in between: left as it ran.
            other => self.open_capture = other.filter(|(begun, ..)| *begun != name),
        }
    }

    /// Keep the work lowered from `start` on as the graph's, and end the capture: tensors made
    /// in it are the graph's (memory of its pool, not freed with the function), and nothing it
    /// queued runs before the code after it.
    fn keep_capture(&mut self, name: String, start: OpId, span: Span) {
        let recorded = self.b.body().ops_from(start);
        let freed: Vec<BufferId> = recorded
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Release { buffer, .. } => Some(buffer),
                _ => None,
            })
            .collect();
        let mut made: Vec<BufferId> = recorded
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Produce { buffer, .. } => Some(buffer),
                _ => None,
            })
            .collect();
        // A loop's values of the iteration before, made in the capture too.
        for op in recorded {
            if let OpKind::Carry { from, into, .. } = op.kind {
                if made.contains(&from) && !made.contains(&into) {
                    made.push(into);
                }
            }
        }
        let mut work: Captured = Vec::new();
        for Op { kind, .. } in recorded {
            // Memory freed in the capture is internal to the graph: nothing outside sees it.
            let internal = kind.buffer().is_some_and(|b| freed.contains(&b));
            if !internal && replayed(kind, self.current).is_some() {
                work.push(kind.clone());
            }
        }
        for buffer in made {
            self.b.buffer_mut(buffer).owner = Owner::Graph;
        }
        self.b.push(OpKind::SyncDevice, span);
        self.captures.insert(name, work);
    }

    /// `g.capture_begin()` at `stmts[i]`, with its `g.capture_end()` later in the same block:
    /// the statements between are the capture. Returns the index of the `capture_end`.
    pub(super) fn capture_statements(&mut self, stmts: &[Stmt], i: usize) -> Option<usize> {
        let (graph, end) = captures::capture_between(stmts, i)?;
        let span = match &stmts[i] {
            Stmt::Expr(e) => e.span(),
            _ => Span::default(),
        };
        self.capture(self.graph_name(graph), &stmts[i + 1..end], span);
        Some(end)
    }

    /// `g.replay()`: the work of a graph captured in this body, in order, or the accesses of
    /// one the object keeps to its attributes, on the current stream, after everything that
    /// stream did before. False for a graph whose capture is not known.
    pub(super) fn replay(&mut self, graph: &Expr, span: Span) -> bool {
        let stream = self.current;
        if let Some(work) = self.captures.get(&self.graph_name(graph)).cloned() {
            for kind in work.iter().filter_map(|k| replayed(k, stream)) {
                self.b.push(kind, span);
            }
            return true;
        }
        let kept = captures::attribute_key(graph).and_then(|key| self.class?.graphs.get(&key));
        let Some(captured) = kept else {
            return false;
        };
        for (keys, write) in [(&captured.reads, false), (&captured.writes, true)] {
            for key in keys {
                for buffer in self.replayed_attribute(key, write, span) {
                    let kind = if write {
                        OpKind::Write { buffer, stream }
                    } else {
                        OpKind::Read { buffer, stream }
                    };
                    self.b.push(kind, span);
                }
            }
        }
        true
    }

    /// The tensors an attribute a kept graph's capture used holds here: what this method
    /// knows it to hold; for one the capture writes, its output, whatever else is known of it
    /// (a graph's outputs are device memory).
    fn replayed_attribute(&mut self, key: &str, write: bool, span: Span) -> Vec<BufferId> {
        let known = match self.env.get(key) {
            Some(v) => Some(v.clone()),
            None if key.ends_with("[…]") => {
                self.attribute_buffers.get(key).map(|&b| Value::Param(b))
            }
            None => {
                let value = self.class_attribute(key, span);
                if let Some(v) = &value {
                    self.bind(key.to_string(), v.clone());
                }
                value
            }
        };
        let tensors = known
            .as_ref()
            .map(|v| self.tensor_buffers(std::slice::from_ref(v)))
            .unwrap_or_default();
        if !tensors.is_empty() || !write {
            return tensors;
        }
        let buffer = self.held_by_object(key, span);
        self.confirmed.insert(buffer);
        if !key.ends_with("[…]") {
            self.bind(key.to_string(), Value::Tensors(vec![buffer]));
        }
        vec![buffer]
    }

    /// `torch.cuda.graph(..)` waits for the whole device before it captures.
    pub(super) fn capture_entry_sync(&mut self, span: Span) {
        self.b.push(OpKind::SyncDevice, span);
    }
}
