//! Calls to project functions too large to be lowered at every call. Each is lowered once on
//! its own and summarized (`streamlint_graph::Summary`: which of its tensor parameters it reads
//! or writes on which of its stream parameters, which event parameters it records or waits on),
//! and the summary's effects happen at every call, on the caller's values: a helper that gathers
//! its argument on the stream it is given makes the caller's stream read the caller's tensor,
//! judged there with the caller's waits. What else such a call does keeps the model of unknown
//! code. A summary is made without other summaries inside it (so no cycle of calls can recur).

use streamlint_graph::{Body, Passed, StreamOrigin, Summary};

use super::inline::stream_like;
use super::{Lowerer, Value};
use crate::context::{ModuleContext, Role};
use crate::project::Resolved;
use crate::syntax::{Expr, FunctionDef, Keyword};

impl<'a> Lowerer<'a> {
    /// The summary of a project function not lowered in place at the call, when it does
    /// something a summary follows.
    pub(super) fn callee_summary(&self, callee: Resolved<'a>) -> Option<&'a Summary> {
        // Summaries are kept by the module's function names: a local helper has none.
        if self.summarizing || self.is_local_function(callee.def) {
            return None;
        }
        // A summary speaks of work on the streams a function is given: one given none has
        // nothing to say, and is not lowered for it.
        let takes_a_stream = callee.def.params.iter().any(|p| {
            let annotation = p.annotation.as_ref().and_then(Expr::dotted);
            stream_like(&p.name, annotation.as_deref().unwrap_or_default())
        });
        if !takes_a_stream {
            return None;
        }
        let project = self.cx.project;
        let summary = project
            .module(callee.module)
            .summary(&callee.def.name, || {
                Some(summarize(project, callee, self.cx.deadline))
            })?;
        (!summary.is_empty()).then_some(summary)
    }

    /// The summary's effects, at the call, on the caller's values: `vals` are the call's
    /// arguments as evaluated, positional ones first, then keyword ones in order.
    pub(super) fn apply_callee_summary(
        &mut self,
        def: &FunctionDef,
        summary: &Summary,
        (args, keywords): (&[Expr], &[Keyword]),
        vals: &[Value],
        span: streamlint_graph::Span,
    ) {
        let starred = args.iter().any(|a| matches!(a, Expr::Starred { .. }));
        let passed: Vec<Passed> = def
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let value = if p.variadic {
                    None
                } else if i < def.positional && i < args.len() && !starred {
                    vals.get(i)
                } else {
                    keywords
                        .iter()
                        .position(|k| k.name.as_deref() == Some(p.name.as_str()))
                        .and_then(|k| vals.get(args.len() + k))
                };
                value.map_or(Passed::Other, passed)
            })
            .collect();
        for effect in summary.effects(&passed) {
            self.b.push(effect.op(), span);
        }
    }
}

/// A value as a summary follows it: one tensor, a stream, an event.
fn passed(value: &Value) -> Passed {
    match value {
        Value::Param(b) => Passed::Buffer(*b),
        Value::Tensors(bufs) if bufs.len() == 1 => Passed::Buffer(bufs[0]),
        Value::Stream(s) => Passed::Stream(*s),
        Value::Event(e) => Passed::Events(vec![*e]),
        _ => Passed::Other,
    }
}

/// Lower the callee on its own, as its module would, and summarize it by its parameters.
fn summarize<'a>(
    project: &'a crate::Project<'a>,
    callee: Resolved<'a>,
    deadline: streamlint_graph::Deadline,
) -> Summary {
    let cx = ModuleContext::callee(project, callee.module, deadline);
    let role = Role {
        summarizing: true,
        ..Role::default()
    };
    let body = Lowerer::lower(cx, role, Some(callee.def), &[]);
    let params: Vec<Passed> = callee
        .def
        .params
        .iter()
        .map(|p| parameter(&body, &p.name))
        .collect();
    Summary::of(&body, &params, &Passed::Other)
}

/// What a parameter holds in a body lowered on its own: the stream or the caller's tensor of
/// that name.
fn parameter(body: &Body, name: &str) -> Passed {
    if let Some(i) = body
        .streams
        .iter()
        .position(|s| s.origin == StreamOrigin::Parameter && s.expr == name)
    {
        return Passed::Stream(streamlint_graph::StreamId(i as u32));
    }
    body.buffers
        .iter()
        .position(|b| b.owner == streamlint_graph::Owner::Caller && b.name == name)
        .map_or(Passed::Other, |i| {
            Passed::Buffer(streamlint_graph::BufferId(i as u32))
        })
}
