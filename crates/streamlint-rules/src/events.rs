//! SL006 wait-before-record: a wait on an event no record reaches. PyTorch creates the CUDA
//! event on the first record, so such a wait silently does nothing.

use streamlint_graph::{Body, EventId, Op, OpId, OpKind, Recorded, State, StreamId};

use crate::{Context, Finding, Label, Rule, Severity, Subject};

pub struct WaitBeforeRecord;

impl Rule for WaitBeforeRecord {
    fn code(&self) -> &'static str {
        "SL006"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Events only.
        !body.events.is_empty()
    }

    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State) {
        let (OpKind::WaitEvent { event, .. } | OpKind::SyncEvent { event }) = op.kind else {
            return;
        };
        let e = cx.body.event(event);
        let Some(created) = e.created else {
            // Tracking events belong to the library, which records before it waits.
            if !e.internal {
                stale_wait_before_record(cx, id, op, event);
            }
            return;
        };
        let what = match state.event(event).map(|e| e.recorded) {
            Some(Recorded::Never) => "no `record` of it happens before this point",
            // In a loop, the first iteration waiting before the first record is the usual
            // "wait for the previous iteration" shape, not a bug.
            Some(Recorded::Maybe) if !cx.analysis.in_cycle(id) => {
                "it is not recorded on every path that reaches this point"
            }
            // Not created on any path here (or an event from elsewhere): nothing to judge.
            _ => return,
        };
        let name = e.name.clone();
        cx.report_about(Subject::Span(op.span), Finding {
            fix: None,
            code: "SL006",
            severity: Severity::Error,
            message: format!("waits on {name}, but {what}: waiting on an event that was never recorded does nothing"),
            span: op.span,
            labels: vec![Label { span: created, message: "created here".into() }],
            help: Some(format!("record {name} on the producing stream after the work to wait for, before this wait")),
        });
    }
}

/// An event from elsewhere (a field, a parameter) may hold an earlier record, so a wait on it is
/// not empty. It is stale when the same straight-line code records it right after the wait, on
/// a stream whose work the function queued before the wait and nothing after: the record meant
/// for this wait comes too late, and the wait returns on the previous one.
fn stale_wait_before_record(cx: &mut Context<'_>, wait: OpId, op: &Op, event: EventId) {
    let body = cx.body;
    let Some(block) = body.blocks.iter().find(|b| b.ops.contains(&wait)) else {
        return;
    };
    let after = block.ops.iter().skip_while(|&&o| o != wait).skip(1);
    let mut busy: Vec<StreamId> = Vec::new();
    for &later in after {
        let later_op = body.op(later);
        if let Some(s) = later_op.kind.work_stream() {
            busy.push(s);
        }
        let OpKind::RecordEvent { event: e, stream } = later_op.kind else {
            continue;
        };
        if e != event {
            continue;
        }
        // Earlier in the source: blocks of other branches and entry ops do not follow op order.
        let queued_before = body
            .ops
            .iter()
            .any(|o| o.kind.work_stream() == Some(stream) && o.span.start < op.span.start);
        if busy.contains(&stream) || !queued_before {
            return;
        }
        let name = body.event(event).name.clone();
        cx.report_about(Subject::Span(op.span), Finding {
            fix: None,
            code: "SL006",
            severity: Severity::Error,
            message: format!(
                "waits on {name} before it is recorded on {} below: the wait returns on an earlier record, not on the work queued before it",
                cx.stream_name(stream)
            ),
            span: op.span,
            labels: vec![Label { span: later_op.span, message: "recorded here, after the wait".into() }],
            help: Some(format!("record {name} before waiting on it")),
        });
        return;
    }
}
