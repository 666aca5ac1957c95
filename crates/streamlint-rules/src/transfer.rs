//! SL004 transfer-in-side-stream: a host-to-device copy made while a side stream is current,
//! whose result is used elsewhere without a wait, or freed without `record_stream` of the stream
//! that consumed it.

use streamlint_graph::{Body, BufferId, EscapeKind, Op, OpId, OpKind, State, StreamId};

use crate::{
    is_side_stream_transfer, released_at_scope_end, transfer_lifetime_is_sl004, Context, Finding,
    Label, Place, Rule, Severity,
};

pub struct TransferInSideStream;

impl Rule for TransferInSideStream {
    fn code(&self) -> &'static str {
        "SL004"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // A side stream is needed.
        body.has_other_streams()
    }

    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State) {
        match op.kind {
            OpKind::Read { buffer, stream }
            | OpKind::Write { buffer, stream }
            | OpKind::Raw { buffer, stream, .. } => {
                self.check_wait(cx, state, buffer, stream, id, false);
            }
            OpKind::Escape {
                buffer,
                kind: EscapeKind::LeftOnArgument,
            } => {
                let ambient = cx.body.ambient;
                if !self.check_wait(cx, state, buffer, ambient, id, true) {
                    self.check_record(cx, state, buffer, id, &[ambient], true);
                }
            }
            OpKind::Escape { buffer, kind } if kind.consumed_on_ambient() => {
                // The caller orders its uses after a copy on the stream it passed in.
                let callers = !cx.body.returns_to_ambient
                    || state
                        .buffer(buffer)
                        .is_some_and(|b| cx.is_callers_stream(b.alloc_stream));
                let ambient = cx.body.ambient;
                if callers || !self.check_wait(cx, state, buffer, ambient, id, true) {
                    self.check_record(cx, state, buffer, id, &[ambient], true);
                }
            }
            OpKind::Escape {
                buffer,
                kind: EscapeKind::HandedOutByObject,
            } => {
                // Kept for another method to hand out: ordered by the class's protocol, judged
                // here for the stream its user reads it on.
                let ambient = cx.body.ambient;
                self.check_record(cx, state, buffer, id, &[ambient], true);
            }
            OpKind::Release { buffer, .. } => {
                let users: Vec<StreamId> = state
                    .uncovered_uses(buffer)
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
                self.check_record(cx, state, buffer, id, &users, false);
            }
            OpKind::ScopeEnd => {
                for buffer in released_at_scope_end(cx.body, state) {
                    let uncovered = state.uncovered_uses(buffer);
                    if let Some(&(_, last)) = uncovered.iter().max_by_key(|(_, u)| *u) {
                        let users: Vec<StreamId> = uncovered.iter().map(|(s, _)| *s).collect();
                        self.check_record(cx, state, buffer, last, &users, false);
                    }
                }
            }
            _ => {}
        }
    }
}

impl TransferInSideStream {
    /// The copy's result used on another stream before that stream waited for the copy.
    fn check_wait(
        &self,
        cx: &mut Context<'_>,
        state: &State,
        buffer: BufferId,
        consumer: StreamId,
        at: OpId,
        returned: bool,
    ) -> bool {
        let op = cx.body.op(at);
        let Some(b) = state.buffer(buffer) else {
            return false;
        };
        // What an event handed over with the value covers is the receiver's to wait for.
        let pending = state
            .unordered_writes(buffer, consumer)
            .iter()
            .any(|&(_, w)| !(returned && state.handed_off(w)));
        // A wait that ordered nothing (self-wait, unrecorded event) is the root cause there.
        if !is_side_stream_transfer(cx.body, b)
            || cx.is_temporary(b.alloc_stream)
            || cx.noop_wait_explains(state, consumer)
            || cx.stream_ended(state, b.alloc_stream)
            || !pending
        {
            return false;
        }
        let name = cx.buffer_name(buffer).to_string();
        let (side, c) = (
            cx.stream_name(b.alloc_stream).to_string(),
            cx.stream_name(consumer).to_string(),
        );
        let span = op.span;
        // Where the language has no `record_stream` (Rust), only the wait is missing.
        let recorded = records(cx, buffer, consumer) || cx.body.spelling.record_stream.is_none();
        let missing = if recorded {
            "a wait".to_string()
        } else {
            format!("a wait and `record_stream` of {c}")
        };
        let on_argument = matches!(
            op.kind,
            OpKind::Escape {
                kind: EscapeKind::LeftOnArgument,
                ..
            }
        );
        let use_text = match op.kind {
            _ if on_argument => {
                format!("left on the caller's object, which the caller uses on {c}")
            }
            OpKind::Escape { kind, .. } if returned => {
                format!("{} uses it on {c}", kind.hand_off())
            }
            _ => format!("used on {c}"),
        };
        // The edit adds the wait only: offered where that is all that is missing.
        let copy = state
            .unordered_writes(buffer, consumer)
            .first()
            .map_or(b.produced_at, |&(_, w)| w);
        let serializes = cx.wait_holds_back_later_work(b.alloc_stream, copy, at);
        let edit = if returned || !recorded || serializes {
            None
        } else {
            cx.ordering_edit(consumer, b.alloc_stream, at)
        };
        cx.report_once(buffer, Finding {
            fix: edit,
            code: "SL004",
            severity: Severity::Error,
            message: format!("`{name}` is copied to the device on {side} and {use_text} without {missing}: {c} can read it before the copy has landed"),
            span,
            labels: std::iter::once(Label { span: cx.span(b.produced_at), message: format!("copied on {side} here") })
                .chain(state.last_wait(consumer).map(|w| Label { span: cx.span(w), message: "this wait does not cover the copy".into() }))
                .collect(),
            help: Some(help(cx, buffer, b.alloc_stream, consumer, Missing { wait: true, record: !recorded, wait_serializes: serializes }, at)),
        });
        true
    }

    /// The copy's result freed (or handed out) while consumers other than the side stream are
    /// unknown to the allocator. `later`: the users will use it from here on (the caller), so
    /// only a `record_stream` made on every path covers them; otherwise they used it already,
    /// and a record on the path of each use does.
    fn check_record(
        &self,
        cx: &mut Context<'_>,
        state: &State,
        buffer: BufferId,
        at: OpId,
        users: &[StreamId],
        later: bool,
    ) {
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        let op = cx.body.op(at);
        // A value the object (or a container) also keeps is still handed to the caller, who
        // uses it on its own stream: whoever frees it later does not wait for that use.
        let to_caller =
            matches!(op.kind, OpKind::Escape { kind, .. } if kind.reaches_a_user_on_ambient());
        if !transfer_lifetime_is_sl004(cx.body, b) || (b.escaped && !to_caller) {
            return;
        }
        // An event handed over with the value gives its receiver the ordering, and with it the
        // lifetime: the receiver records its stream once it has waited (as for SL001).
        if to_caller && b.writes.iter().any(|&(_, w)| state.handed_off(w)) {
            return;
        }
        let Some(&consumer) = users.iter().find(|s| {
            **s != b.alloc_stream
                && (b.unrecorded.contains(s) || (later && !b.recorded.contains(s)))
        }) else {
            return;
        };
        let name = cx.buffer_name(buffer).to_string();
        let (side, c) = (
            cx.stream_name(b.alloc_stream).to_string(),
            cx.stream_name(consumer).to_string(),
        );
        let unordered = state.unordered_writes(buffer, consumer);
        let missing = Missing {
            wait: !unordered.is_empty(),
            record: true,
            wait_serializes: unordered
                .first()
                .is_some_and(|&(s, w)| cx.wait_holds_back_later_work(s, w, at)),
        };
        let what = match op.kind {
            OpKind::Escape { kind, .. } => format!("handed to {}", kind.holder()),
            _ => "freed".to_string(),
        };
        // Handed on after the wait: what is missing is the record, before the hand-off.
        let fix = match op.kind {
            OpKind::Escape { .. } if !missing.wait => cx.record_before_hand_off(buffer, b.how, at),
            _ => None,
        };
        cx.report_once(buffer, Finding {
            fix,
            code: "SL004",
            severity: Severity::Error,
            message: format!("`{name}` is copied to the device on {side}, used on {c} and {what} without `record_stream` of {c}: its memory returns to {side}'s pool while {c} may still read it"),
            span: op.span,
            labels: vec![Label { span: cx.span(b.produced_at), message: format!("copied on {side} here") }],
            help: Some(help(cx, buffer, b.alloc_stream, consumer, missing, at)),
        });
    }
}

fn records(cx: &Context<'_>, buffer: BufferId, stream: StreamId) -> bool {
    cx.body
        .ops_iter()
        .any(|(_, op)| op.kind == OpKind::RecordStream { buffer, stream })
}

/// What a consumer lacks for a copy made on a side stream.
#[derive(Copy, Clone)]
struct Missing {
    /// The consumer does not wait for the copy.
    wait: bool,
    /// The allocator does not know the consumer uses it.
    record: bool,
    /// A wait for the whole side stream would also wait for copies a loop queues there later.
    wait_serializes: bool,
}

/// The help for what is missing, with the calls spelled as code inserted before `at`.
fn help(
    cx: &Context<'_>,
    buffer: BufferId,
    side: StreamId,
    consumer: StreamId,
    missing: Missing,
    at: OpId,
) -> String {
    let (c, s) = (cx.stream_name(consumer), cx.stream_name(side));
    let record = cx.record_stream_fix(buffer, consumer, at);
    if missing.wait && missing.wait_serializes {
        let record = match (missing.record, record) {
            (false, _) => String::new(),
            (true, Some(record)) => format!(", and call `{record}`"),
            (true, None) => format!(", and call `record_stream` of {c} on it"),
        };
        return format!(
            "make {c} wait on an event recorded on {s} right after the copy before using the tensor{record}; waiting for all of {s} here would also wait for the copies it queues later in this loop, and the loop would no longer overlap"
        );
    }
    let wait = cx.wait_stream_fix(consumer, side);
    let place = cx.place(at);
    // Before a use, the consumer runs outside the side-stream block; a value left on an
    // object is ordered before the function returns, outside the block too.
    let (before, after) = match place {
        Place::Use => (
            "after the side-stream block, ".to_string(),
            "before using the tensor".to_string(),
        ),
        Place::HandOff => (String::new(), cx.place_words(place)),
        Place::Return => (
            String::new(),
            format!("{}, outside the side-stream block", cx.place_words(place)),
        ),
    };
    match (missing.wait, missing.record, record) {
        (true, true, Some(record)) => format!("{before}call `{wait}` and `{record}` {after}"),
        (true, true, None) => format!(
            "{before}call `{wait}` {after}, and call `record_stream` of {c} on it before it is freed or handed on"
        ),
        (true, false, _) if place == Place::Use => {
            format!("make the consumer wait for the copy before using it: `{wait}`")
        }
        (true, false, _) => format!("call `{wait}` {after}"),
        (false, _, Some(record)) => format!("call `{record}` before it is freed or handed on"),
        (false, _, None) => format!(
            "call `record_stream` of {c} on the tensor before it is freed or handed on"
        ),
    }
}
