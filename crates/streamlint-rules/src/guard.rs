//! SL010 sync-guard-dropped-early: the guard that orders raw work on a buffer with its stream is
//! gone before the raw work is enqueued, so the ordering it records refers to nothing.

use streamlint_graph::{Body, Op, OpId, OpKind, State};

use crate::{Context, Finding, Label, Rule, Severity, Subject};

pub struct SyncGuardDroppedEarly;

impl Rule for SyncGuardDroppedEarly {
    fn code(&self) -> &'static str {
        "SL010"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Pointer guards only.
        body.has_op(|k| matches!(k, OpKind::GuardTaken { .. }))
    }

    fn visit(&self, cx: &mut Context<'_>, _id: OpId, op: &Op, state: &State) {
        let OpKind::Raw { buffer, .. } = op.kind else {
            return;
        };
        let Some((stream, taken, Some(released))) = state.guard(buffer) else {
            return;
        };
        let name = cx.buffer_name(buffer).to_string();
        // With one stream, stream order covers the work anyway: a note, not an error.
        let several_streams = cx.body.streams_in_use() > 1;
        let severity = if several_streams {
            Severity::Error
        } else {
            Severity::Info
        };
        let span = cx.span(released);
        cx.report_about(Subject::Span(span), Finding {
            fix: None,
            code: "SL010",
            severity,
            message: format!(
                "the synchronization guard of `{name}` is dropped here, before the raw work that uses its pointer: the event it records on {} marks a point before that work, so later users of `{name}` {}",
                cx.stream_name(stream),
                if several_streams {
                    "are not ordered after it"
                } else {
                    "on another stream would not be ordered after it (this function uses one stream, so stream order covers it here)"
                }
            ),
            span,
            labels: vec![
                Label { span: cx.span(taken), message: "pointer and guard taken here".into() },
                Label { span: op.span, message: "raw work enqueued here".into() },
            ],
            help: Some("keep the guard alive until the raw work is enqueued: bind it to a name (`let (ptr, _guard) = ...`) in the scope that enqueues the work, and let it go after".into()),
        });
    }
}
