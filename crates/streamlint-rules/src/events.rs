//! SL006 wait-before-record: a wait on an event no record reaches. PyTorch creates the CUDA
//! event on the first record, so such a wait silently does nothing.

use streamlint_graph::{Op, OpId, OpKind, Recorded, State};

use crate::{Context, Finding, Label, Rule, Severity, Subject};

pub struct WaitBeforeRecord;

impl Rule for WaitBeforeRecord {
    fn code(&self) -> &'static str {
        "SL006"
    }

    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State) {
        let (OpKind::WaitEvent { event, .. } | OpKind::SyncEvent { event }) = op.kind else {
            return;
        };
        let e = cx.body.event(event);
        let Some(created) = e.created else { return };
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
            message: format!("waits on event {name}, but {what}: waiting on an event that was never recorded does nothing"),
            span: op.span,
            labels: vec![Label { span: created, message: "created here".into() }],
            help: Some(format!("record {name} on the producing stream after the work to wait for, before this wait")),
        });
    }
}
