//! SL002 record-stream-wrong-stream: a `record_stream` that protects nothing.

use streamlint_graph::{
    Body, BufferId, BufferState, EscapeKind, Memory, Op, OpId, OpKind, Owner, Production, State,
    StreamId, StreamOrigin,
};

use crate::{Context, Finding, Label, Rule, Severity};

pub struct RecordStreamWrongStream;

impl Rule for RecordStreamWrongStream {
    fn code(&self) -> &'static str {
        "SL002"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Judges `record_stream` calls and raw work under pointer guards.
        body.has_op(|k| matches!(k, OpKind::RecordStream { .. } | OpKind::Raw { .. }))
    }

    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State) {
        if let OpKind::Raw { buffer, stream, .. } = op.kind {
            return guard_on_other_stream(cx, buffer, stream, op, state);
        }
        let OpKind::RecordStream { buffer, stream } = op.kind else {
            return;
        };
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        let name = cx.buffer_name(buffer).to_string();
        let alloc = b.alloc_stream;
        let alloc_label = Label {
            span: cx.span(b.produced_at),
            message: format!("allocated on {}", cx.stream_name(alloc)),
        };
        let mut labels = vec![alloc_label];
        let (message, help) = if cx.body.buffer(buffer).memory != Memory::Device {
            (
                format!("`record_stream` on `{name}`, a host tensor: only device memory from the caching allocator can be recorded, and a CPU tensor raises at run time"),
                "remove the call; if a non-blocking copy reads this buffer, keep the buffer alive until an event recorded after the copy has completed".to_string(),
            )
        } else if let Some(test) = residence_in_doubt(cx.body, buffer, b) {
            // The caller's values, whose residence the code itself tests elsewhere: on this
            // path it records one it has not tested.
            labels = vec![Label {
                span: cx.span(test),
                message: "tested here, on another path".to_string(),
            }];
            (
                format!("`record_stream` on `{name}`, which may be a host tensor: the code tests where these values live on another path but not on this one, and `record_stream` raises on a CPU tensor"),
                "record only values known to be on the device: test this one on this path too (`.is_cuda`, or its `.device`) before recording it".to_string(),
            )
        } else if stream == alloc
            && known_allocation(b.how)
            && crosses_streams(cx.body, buffer, alloc)
        {
            // Read only by the current stream besides its own: the fork/join discipline, if
            // the stream keeps it, orders the memory's reuse without the call.
            if read_by_current_only(cx.body, buffer, alloc) {
                cx.relies_on_discipline(op.span, "SL002", alloc);
            }
            (
                format!("`record_stream` of {} on `{name}` does nothing: `{name}` was allocated on that stream, and the allocator ignores uses on the allocation stream", cx.stream_name(stream)),
                consumer_help(cx, buffer, alloc, stream, id),
            )
        } else if known_allocation(b.how)
            && !used_on(cx.body, buffer, stream)
            && knows_all_uses(cx.body, buffer, stream)
        {
            (
                format!(
                    "`record_stream` of {} on `{name}`, which is never used on that stream",
                    cx.stream_name(stream)
                ),
                consumer_help(cx, buffer, alloc, stream, id),
            )
        } else {
            return;
        };
        cx.report_once(
            buffer,
            Finding {
                fix: None,
                code: "SL002",
                severity: Severity::Error,
                message,
                span: op.span,
                labels,
                help: Some(help),
            },
        );
    }
}

/// Where the code tests the residence of `buffer`, a value the caller made, on another path
/// than this one: the code does not trust it to be device memory.
fn residence_in_doubt(body: &Body, buffer: BufferId, state: &BufferState) -> Option<OpId> {
    let received = state.how == Production::Entry && body.buffer(buffer).owner == Owner::Caller;
    state
        .device_tested
        .only_on_some_paths()
        .filter(|_| received)
}

/// Was the buffer allocated here, on a known stream (not received, not returned by an unseen
/// call)?
fn known_allocation(how: Production) -> bool {
    !matches!(how, Production::Entry | Production::Call)
}

/// Raw work on one stream through a pointer whose guard was taken for another: that stream
/// never waited for the buffer's producers, and the guard records the wrong stream.
fn guard_on_other_stream(
    cx: &mut Context<'_>,
    buffer: BufferId,
    stream: StreamId,
    op: &Op,
    state: &State,
) {
    let Some((guarded, taken, None)) = state.guard(buffer) else {
        return;
    };
    if guarded == stream {
        return;
    }
    let name = cx.buffer_name(buffer).to_string();
    let (g, s) = (
        cx.stream_name(guarded).to_string(),
        cx.stream_name(stream).to_string(),
    );
    cx.report_once(buffer, Finding {
        fix: None,
        code: "SL002",
        severity: Severity::Error,
        message: format!("the pointer to `{name}` is taken for {g}, but the raw work using it runs on {s}: {s} never waits for `{name}`'s producers and the use is recorded on the wrong stream"),
        span: cx.span(taken),
        labels: vec![Label { span: op.span, message: format!("raw work on {s} here") }],
        help: Some(format!("take the pointer for the stream that runs the work (`{}`)", cx.body.stream(stream).expr)),
    });
}

/// Suggest recording the stream(s) that really use the buffer.
/// What to record instead of `recorded`: the stream that consumes the tensor, spelled where the
/// call can go. The current stream, recorded where the allocation stream is current (inside its
/// `with` block, `current_stream()` is that stream), is spelled outside the block.
fn consumer_help(
    cx: &Context<'_>,
    buffer: BufferId,
    alloc: StreamId,
    recorded: StreamId,
    at: OpId,
) -> String {
    let consumers: Vec<StreamId> = streams_using(cx.body, buffer)
        .into_iter()
        .filter(|s| *s != alloc)
        .collect();
    let Some(&consumer) = consumers.first() else {
        return "record the stream that consumes the tensor, not the one that allocated it"
            .to_string();
    };
    let inside_block = consumer == cx.body.ambient && recorded == alloc && alloc != consumer;
    match cx.record_stream_fix(buffer, consumer, at) {
        Some(fix) if inside_block => format!(
            "record the stream that consumes it, outside the `with` block that makes {} current (there `current_stream()` is the consumer's): `{fix}`",
            cx.stream_name(alloc),
        ),
        Some(fix) => format!("record the stream that consumes it: `{fix}`"),
        None => format!(
            "record the stream that consumes the tensor ({}), not the one that allocated it",
            cx.stream_name(consumer)
        ),
    }
}

/// Every stream the body uses the buffer on (the caller's stream for returned values), with
/// the uses of its instances a name carries into a loop's next iteration.
fn streams_using(body: &Body, buffer: BufferId) -> Vec<StreamId> {
    let instances = carried_instances(body, buffer);
    let mut out = Vec::new();
    for (_, op) in body.ops_iter() {
        let s = match op.kind {
            OpKind::Read { buffer: b, stream } | OpKind::Write { buffer: b, stream }
                if instances.contains(&b) =>
            {
                stream
            }
            // Returned, or published on the object for its other methods (or threads): used
            // there on their current stream.
            OpKind::Escape {
                buffer: b,
                kind: EscapeKind::Caller | EscapeKind::OtherThread | EscapeKind::Attribute,
            } if instances.contains(&b) => body.ambient,
            _ => continue,
        };
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// `buffer` and the buffers its previous instances live on as (`OpKind::Carry`): in a loop,
/// `pending = staged` before the next `staged` is made holds this iteration's value then.
fn carried_instances(body: &Body, buffer: BufferId) -> Vec<BufferId> {
    let mut out = vec![buffer];
    loop {
        let more: Vec<BufferId> = body
            .ops_iter()
            .filter_map(|(_, op)| match op.kind {
                OpKind::Carry { from, into, .. } if out.contains(&from) && !out.contains(&into) => {
                    Some(into)
                }
                _ => None,
            })
            .collect();
        if more.is_empty() {
            return out;
        }
        out.extend(more);
        out.sort();
        out.dedup();
    }
}

/// Is the buffer used away from its allocation stream here? If not, recording the allocation
/// stream is pointless but leaves nothing unprotected that this body can see.
fn crosses_streams(body: &Body, buffer: BufferId, alloc: StreamId) -> bool {
    streams_using(body, buffer).iter().any(|s| *s != alloc)
}

/// Is the buffer used only on `alloc` and the current stream, and kept nowhere another stream
/// could reach it?
fn read_by_current_only(body: &Body, buffer: BufferId, alloc: StreamId) -> bool {
    let kept = body.ops_iter().any(|(_, op)| {
        matches!(op.kind, OpKind::Escape { buffer: b, kind } if b == buffer && !kind.consumed_on_ambient())
    });
    !kept
        && streams_using(body, buffer)
            .iter()
            .all(|&s| s == alloc || s == body.ambient)
}

fn used_on(body: &Body, buffer: BufferId, stream: StreamId) -> bool {
    streams_using(body, buffer).contains(&stream)
}

/// Can the body see every use of the buffer on `stream`? Not when the value is kept somewhere
/// (other code may use it there) or the stream came from elsewhere. A returned value is used
/// by the caller on the current stream.
fn knows_all_uses(body: &Body, buffer: BufferId, stream: StreamId) -> bool {
    let kept = body.ops_iter().any(|(_, op)| {
        matches!(op.kind, OpKind::Escape { buffer: b, kind } if b == buffer && !kind.consumed_on_ambient())
    });
    let local_stream = matches!(
        body.stream(stream).origin,
        StreamOrigin::Created
            | StreamOrigin::Cached
            | StreamOrigin::Ambient
            | StreamOrigin::Attribute
    );
    let local_value = body.buffer(buffer).owner == Owner::Local;
    !kept && local_stream && local_value
}
