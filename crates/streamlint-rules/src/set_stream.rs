//! SL008 unrestored-set-stream: `set_stream` that is not undone on every path.

use streamlint_graph::{Op, OpId, OpKind, State};

use crate::{Context, Finding, Rule, Severity};

pub struct UnrestoredSetStream;

impl Rule for UnrestoredSetStream {
    fn code(&self) -> &'static str {
        "SL008"
    }

    fn visit(&self, cx: &mut Context<'_>, _id: OpId, op: &Op, _state: &State) {
        let OpKind::SetStream { stream, restored } = op.kind else {
            return;
        };
        if restored || stream == cx.body.ambient {
            return;
        }
        let s = cx.stream_name(stream).to_string();
        cx.report(Finding {
            fix: None,
            code: "SL008",
            severity: Severity::Warning,
            message: format!("the current stream is set to {s} and not restored on every path: all later work of this thread (and of callers) runs on {s}, unordered with the stream they expect"),
            span: op.span,
            labels: Vec::new(),
            help: Some(format!("use `with torch.cuda.stream({}):`, or restore the previous stream in a `finally`", cx.body.stream(stream).expr)),
        });
    }
}
