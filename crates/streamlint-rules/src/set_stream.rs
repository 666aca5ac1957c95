//! SL008 unrestored-set-stream: `set_stream` that is not undone on every path.

use streamlint_graph::{Body, Op, OpId, OpKind, State, StreamId};

use crate::{Applicability, Context, Edit, Finding, Fix, Rule, Severity};

pub struct UnrestoredSetStream;

impl Rule for UnrestoredSetStream {
    fn code(&self) -> &'static str {
        "SL008"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // `set_stream` calls only.
        body.has_op(|k| matches!(k, OpKind::SetStream { .. }))
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
            fix: stream_block_fix(cx, op, stream),
            code: "SL008",
            severity: Severity::Warning,
            message: format!("the current stream is set to {s} and not restored on every path: all later work of this thread (and of callers) runs on {s}, unordered with the stream they expect"),
            span: op.span,
            labels: Vec::new(),
            help: Some(format!("use `with torch.cuda.stream({}):`, or restore the previous stream in a `finally`", cx.body.stream(stream).expr)),
        });
    }
}

/// `set_stream(s)` undone later in the same block becomes a stream block around the statements
/// between: the block also puts the stream back on early returns and exceptions.
fn stream_block_fix(cx: &Context<'_>, op: &Op, stream: StreamId) -> Option<Fix> {
    let header = cx.body.spelling.stream_block?;
    let &(set, restore) = cx
        .body
        .rewrites
        .scoped_set_streams
        .iter()
        .find(|(set, _)| *set == op.span)?;
    Some(Fix {
        message: "turn the set/restore pair into a stream block".into(),
        applicability: Applicability::Safe,
        edits: vec![
            Edit::Replace {
                span: set,
                content: header(&cx.body.stream(stream).expr),
            },
            Edit::IndentBetween {
                after: set,
                before: restore,
            },
            Edit::DeleteLines { span: restore },
        ],
    })
}
