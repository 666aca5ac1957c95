//! SL005 temporary-stream: work on a stream nothing can wait on or order (a stream expression
//! never bound to a name), and streams created once when the code is loaded.

use streamlint_graph::{Body, Op, OpId, OpKind, State, StreamId, StreamOrigin};

use crate::{Context, Finding, Label, Rule, Severity, Subject};

pub struct TemporaryStream;

impl Rule for TemporaryStream {
    fn code(&self) -> &'static str {
        "SL005"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Streams made or ended here.
        body.has_other_streams() || body.has_op(|k| matches!(k, OpKind::EndStream { .. }))
    }

    fn visit(&self, cx: &mut Context<'_>, _id: OpId, op: &Op, state: &State) {
        if let OpKind::EndStream { stream, .. } = op.kind {
            return self.check_end(cx, stream, op, state);
        }
        let (buffer, consumer, write) = match op.kind {
            OpKind::Read { buffer, stream } => (buffer, stream, false),
            OpKind::Write { buffer, stream } => (buffer, stream, true),
            OpKind::Raw {
                buffer,
                stream,
                write,
            } => (buffer, stream, write),
            OpKind::Escape { buffer, kind } if kind.consumed_on_ambient() => {
                (buffer, cx.body.ambient, false)
            }
            _ => return,
        };
        let mut races = state.unordered_writes(buffer, consumer);
        if write {
            races.extend(state.unordered_reads(buffer, consumer));
        }
        let name = cx.buffer_name(buffer).to_string();
        if cx.is_temporary(consumer) {
            if let Some(&(producer, _)) = races.first() {
                let why = format!(
                    "it reads `{name}`, made on {}, and nothing makes it wait: a stream without a name cannot be told to",
                    cx.stream_name(producer)
                );
                self.report_temporary(cx, consumer, op, why);
            }
            return;
        }
        if let Some(&(producer, _)) = races.iter().find(|(s, _)| cx.is_temporary(*s)) {
            let why = format!(
                "`{name}`, made on it, is used on {} here with no wait: there is no handle to wait on",
                cx.stream_name(consumer)
            );
            self.report_temporary(cx, producer, op, why);
        }
    }

    fn finish(&self, cx: &mut Context<'_>) {
        let global: Vec<(StreamId, streamlint_graph::Span)> = cx
            .body
            .streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.origin == StreamOrigin::Global)
            .filter_map(|(i, s)| s.span.map(|span| (StreamId(i as u32), span)))
            .collect();
        for (id, span) in global {
            cx.report_about(Subject::Stream(id), Finding {
                fix: None,
                code: "SL005",
                severity: Severity::Error,
                message: format!(
                    "{} is created when the module is loaded: it initialises CUDA at import and is one stream shared by every caller",
                    cx.stream_name(id)
                ),
                span,
                labels: Vec::new(),
                help: Some("create the stream where it is used (or once per object, in `__init__`) and keep it on `self`".into()),
            });
        }
    }
}

impl TemporaryStream {
    /// The last owned stream goes away while its writes to buffers that live on are not ordered
    /// with the default stream: automatic tracking stops, and later users are not ordered.
    fn check_end(&self, cx: &mut Context<'_>, stream: StreamId, op: &Op, state: &State) {
        let ambient = cx.body.ambient;
        let pending = state.live_buffers().find_map(|(id, b)| {
            b.writes
                .iter()
                .find(|(s, w)| *s == stream && !state.ordered(ambient, *s, *w))
                .map(|(_, w)| (id, *w))
        });
        let Some((buffer, write)) = pending else {
            return;
        };
        let (s, name) = (
            cx.stream_name(stream).to_string(),
            cx.buffer_name(buffer).to_string(),
        );
        // A stream dropped at a closing brace is reported where it was made, the brace labelled.
        let made = cx.body.stream(stream).span;
        let (span, gone, mut labels) = match (&op.kind, made) {
            (
                OpKind::EndStream {
                    at_scope_end: true, ..
                },
                Some(made),
            ) => (
                made,
                "goes away at the end of its scope",
                vec![Label {
                    span: op.span,
                    message: format!("{s} is dropped here"),
                }],
            ),
            _ => (op.span, "goes away here", Vec::new()),
        };
        labels.push(Label {
            span: cx.span(write),
            message: format!("written on {s} here"),
        });
        cx.report_about(Subject::Stream(stream), Finding {
            fix: None,
            code: "SL005",
            severity: Severity::Error,
            message: format!("{s} {gone} while its write to `{name}` may be pending: with no owned stream left, automatic tracking stops and later users of `{name}` are not ordered after that write"),
            span,
            labels,
            help: Some(if cx.is_temporary(stream) {
                format!("bind the stream to a variable that lives until the consumers are enqueued, and make {} wait for it before it goes", cx.stream_name(ambient))
            } else {
                format!("keep {s} alive until the consumers are enqueued, or `{}` before it goes", cx.wait_stream_fix(ambient, stream))
            }),
        });
    }

    fn report_temporary(&self, cx: &mut Context<'_>, stream: StreamId, op: &Op, why: String) {
        let Some(span) = cx.body.stream(stream).span else {
            return;
        };
        cx.report_about(Subject::Stream(stream), Finding {
            fix: None,
            code: "SL005",
            severity: Severity::Error,
            message: format!("work is enqueued on a stream that is never bound to a name: {why}"),
            span,
            labels: vec![Label { span: op.span, message: "unordered use here".into() }],
            help: Some("bind the stream to a name, `s = torch.cuda.Stream()` (or keep it on `self`), make it wait for the current stream before the block (`s.wait_stream(torch.cuda.current_stream())`) and make the consumer wait for it after".into()),
        });
    }
}
