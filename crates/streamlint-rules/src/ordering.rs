//! SL003 missing-stream-wait: a stream uses a tensor another stream writes (or reads, for a
//! write) with no ordering edge in between; and waits that order nothing.

use streamlint_graph::{
    Body, BufferId, EscapeKind, Memory, Op, OpId, OpKind, Production, Span, State, StreamId,
    StreamOrigin,
};

use crate::{
    is_side_stream_transfer, Applicability, AtTheCall, Context, Edit, Finding, Fix, Label, Place,
    Rule, Severity, Subject,
};

pub struct MissingStreamWait;

impl Rule for MissingStreamWait {
    fn code(&self) -> &'static str {
        "SL003"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Ordering is only missing between two streams.
        body.has_other_streams()
    }

    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State) {
        match op.kind {
            // Only where the wait orders nothing on every path it is lowered on: a join written
            // for a stream chosen by a flag waits on itself only where the flag chose the
            // current stream.
            OpKind::WaitStream { waiter, waitee }
                if waiter == waitee && self_wait_on_every_path(cx.body, op.span) =>
            {
                let s = cx.stream_name(waiter).to_string();
                let hoist = cx
                    .body
                    .rewrites
                    .hoistable_waits
                    .iter()
                    .find(|(wait, _)| *wait == op.span);
                let fix = hoist.map(|&(what, before)| Fix {
                    message: "move the wait before the stream block".into(),
                    applicability: Applicability::Safe,
                    edits: vec![Edit::MoveBefore { what, before }],
                });
                cx.report(Finding {
                    fix,
                    code: "SL003",
                    severity: Severity::Error,
                    message: format!("{s} waits on itself: inside its own stream context the current stream is {s}, so this wait orders nothing"),
                    span: op.span,
                    labels: Vec::new(),
                    help: Some("take the stream to wait on before entering the stream context (`cur = torch.cuda.current_stream()` outside the `with`), or move the wait before the `with`".into()),
                });
            }
            OpKind::Read { buffer, stream } => self.check_use(cx, state, buffer, stream, id, false),
            OpKind::Write { buffer, stream } => self.check_use(cx, state, buffer, stream, id, true),
            OpKind::Raw {
                buffer,
                stream,
                write,
            } => self.check_use(cx, state, buffer, stream, id, write),
            // Host memory handed on is not read on the receiver's stream as it stands: the
            // receiver reads it on the host (SL007 judges that) or copies it, and orders that
            // copy where it makes it.
            OpKind::Escape { buffer, .. } if cx.body.buffer(buffer).memory != Memory::Device => {}
            OpKind::Escape { buffer, kind }
                if kind.consumed_on_ambient() && cx.body.returns_to_ambient =>
            {
                self.check_use(cx, state, buffer, cx.body.ambient, id, false)
            }
            OpKind::Escape {
                buffer,
                kind: EscapeKind::LeftOnObject | EscapeKind::LeftOnArgument,
            } => self.check_use(cx, state, buffer, cx.body.ambient, id, false),
            _ => {}
        }
    }
}

impl MissingStreamWait {
    /// Does this body decide when `consumer` runs: did it create the stream, or does it make it
    /// wait on something? Not for a stream whose identity is unknown (a name bound to different
    /// streams on different paths).
    fn owns_ordering(&self, cx: &Context<'_>, consumer: StreamId) -> bool {
        let body = cx.body;
        match body.stream(consumer).origin {
            StreamOrigin::Created | StreamOrigin::Temporary => return true,
            // With no caller in sight, the contract decides: the argument is not ready there.
            StreamOrigin::Parameter if body.uncalled => return true,
            StreamOrigin::Unknown => return false,
            _ if body.unordered_streams.contains(&consumer) => return true,
            _ => {}
        }
        Self::waits_here(body, consumer)
    }

    /// What this body makes `consumer` wait on: each other stream, directly or through an
    /// event this body records only on that stream; `None` for another event.
    fn waits_of(
        body: &streamlint_graph::Body,
        consumer: StreamId,
    ) -> impl Iterator<Item = Option<StreamId>> + '_ {
        body.ops_iter().filter_map(move |(_, op)| match op.kind {
            OpKind::WaitStream { waiter, waitee } if waiter == consumer && waitee != consumer => {
                Some(Some(waitee))
            }
            OpKind::WaitEvent { stream, event } if stream == consumer => {
                Some(Self::recorded_only_on(body, event).filter(|&s| s != consumer))
            }
            _ => None,
        })
    }

    /// The one stream this body records `event` on, if it records it at all and on one only.
    fn recorded_only_on(
        body: &streamlint_graph::Body,
        event: streamlint_graph::EventId,
    ) -> Option<StreamId> {
        let mut streams = body.ops_iter().filter_map(|(_, op)| match op.kind {
            OpKind::RecordEvent { event: e, stream } if e == event => Some(stream),
            _ => None,
        });
        let first = streams.next()?;
        streams.all(|s| s == first).then_some(first)
    }

    /// Does this body make `consumer` wait on a stream passed in as a parameter?
    fn waits_on_passed_stream(body: &streamlint_graph::Body, consumer: StreamId) -> bool {
        Self::waits_of(body, consumer)
            .flatten()
            .any(|s| body.stream(s).origin == StreamOrigin::Parameter)
    }

    /// Does this body make `consumer` wait on some other stream or an event?
    fn waits_here(body: &streamlint_graph::Body, consumer: StreamId) -> bool {
        Self::waits_of(body, consumer).next().is_some()
    }

    fn check_use(
        &self,
        cx: &mut Context<'_>,
        state: &State,
        buffer: BufferId,
        consumer: StreamId,
        at: OpId,
        write: bool,
    ) {
        let op = cx.body.op(at);
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        if cx.callees_own_work(consumer, at) {
            return;
        }
        if is_side_stream_transfer(cx.body, b) {
            return;
        }
        let mut races = state.unordered_writes(buffer, consumer);
        if write {
            races.extend(state.unordered_reads(buffer, consumer));
        }
        // A value that existed before the call was made by the caller, who may well have
        // ordered the consumer after it. Only judge when the consumer cannot have been ordered
        // by anyone else (it was created here) or when this body orders the consumer itself.
        // A wait on a stream the caller passes (`copy_stream.wait_stream(main_stream)`) may be
        // on the caller's current stream itself: callers hand their main stream in by name.
        // A value code not seen returned inside another stream's block arrived there, during
        // this body: no caller can have ordered anything after it.
        let arrived_here = cx.body.received.contains(&buffer) && b.alloc_stream != cx.body.ambient;
        if b.how == Production::Entry
            && !arrived_here
            && (!self.owns_ordering(cx, consumer)
                || Self::waits_on_passed_stream(cx.body, consumer))
        {
            races.retain(|(_, a)| *a != b.produced_at);
        }
        // A stream without a handle cannot be waited on or wait: SL005 reports those.
        if cx.is_temporary(consumer) {
            return;
        }
        races.retain(|(s, _)| !cx.is_temporary(*s) && !cx.stream_ended(state, *s));
        if matches!(op.kind, OpKind::Escape { .. }) {
            // Writes covered by an event handed over with the value are the receiver's to wait
            // for (`return out, done`); so is an asynchronous collective, whose work handle
            // whoever keeps it waits on.
            races.retain(|(s, a)| {
                !cx.is_callers_stream(*s)
                    && !state.handed_off(*a)
                    && cx.body.stream(*s).origin != StreamOrigin::Collective
            });
        }
        // Raw work through a guarded pointer: a guard dropped early (SL010) or taken for the
        // wrong stream (SL002) is the root cause.
        if let Some((guarded_for, ..)) = state.guard(buffer) {
            races.retain(|(_, a)| !matches!(cx.body.op(*a).kind, OpKind::Raw { .. }));
            if guarded_for != consumer && matches!(op.kind, OpKind::Raw { .. }) {
                return;
            }
        }
        let raw = races.iter().any(|r| b.writes.contains(r));
        let Some(&(producer, access)) = races.first() else {
            return;
        };
        // A self-wait on the consumer is the root cause; it is reported where it stands.
        if cx.noop_wait_explains(state, consumer) {
            return;
        }
        let name = cx.buffer_name(buffer).to_string();
        let (c, p) = (
            cx.stream_name(consumer).to_string(),
            cx.stream_name(producer).to_string(),
        );
        let returned = matches!(op.kind, OpKind::Escape { .. });
        let allocated = raw && allocated_at(cx.body, access);
        // Say where the verdict on a stream the caller passes comes from, when the contract
        // made it.
        let by_contract = b.how == Production::Entry
            && access == b.produced_at
            && !Self::waits_here(cx.body, consumer);
        let contract = if by_contract
            && cx.body.uncalled
            && cx.body.stream(consumer).origin == StreamOrigin::Parameter
        {
            format!(" (no call in the checked files passes {c}, so the contract at function boundaries applies: an argument is ready on the caller's current stream only)")
        } else if b.how == Production::Entry
            && access == b.produced_at
            && cx.body.received.contains(&buffer)
        {
            format!(" (it comes from code the analysis does not see, which by the contract at function boundaries leaves it ready on {p} where it returns, and only there)")
        } else if by_contract && cx.body.unordered_streams.contains(&consumer) {
            format!(" (the object makes {c} for itself and nothing in the checked files makes it wait for other work, so the contract at function boundaries applies: an argument is ready on the caller's current stream only)")
        } else {
            String::new()
        };
        let left = match op.kind {
            OpKind::Escape { kind, .. } => kind,
            _ => EscapeKind::Caller,
        };
        let message = if left == EscapeKind::LeftOnObject {
            format!("`{name}` is written on {p} and left on the object when `{}` returns, but {c} never waits for {p} and no other method of the class does: whoever uses it next, on their current stream, can read it before the write has finished", cx.body.name)
        } else if left == EscapeKind::LeftOnArgument {
            format!("`{name}` is written on {p} and left on the caller's object when `{}` returns, but {c} never waits for {p}, which the caller cannot name: it uses the value on its current stream, where the write may not have finished", cx.body.name)
        } else if returned {
            format!(
                "`{name}` is {} uses it on {c}, but {c} never waits for {p}, which produces it",
                left.hand_off()
            )
        } else if allocated {
            // Taking memory queues no work: the race is with the block's previous owner.
            format!("`{name}` is {} on {c} but its memory was taken on {p} after work {c} did not wait for: the block's previous owner on {p} may still be using it{contract}", if write { "written" } else { "read" })
        } else if cx.body.stream(producer).origin == StreamOrigin::Collective {
            format!("`{name}` is {} on {c} while an asynchronous collective may still be {} it: nothing waits on its work handle before this use", if write { "written" } else { "read" }, if raw { "writing" } else { "reading" })
        } else if raw && cx.body.stream(producer).origin == StreamOrigin::OtherThread {
            let own = format!("`{}`", cx.body.stream(producer).expr);
            format!("`{name}` may be an item another thread put there, written on that thread's own {own}: it is {} on {c} with nothing ordering {c} after the other thread's work", if write { "written" } else { "read" })
        } else if raw {
            format!("`{name}` is {} on {c} but was written on {p} with no wait in between: {c} can run before {p} has finished{contract}", if write { "written" } else { "read" })
        } else {
            format!("`{name}` is overwritten on {c} while {p} may still be reading it: nothing orders {c} after that read")
        };
        let (done, deed) = match (allocated, raw) {
            (true, _) => ("allocated", "work before the allocation"),
            (false, true) => ("written", "write"),
            (false, false) => ("read", "read"),
        };
        let mut labels = vec![Label {
            span: cx.span(access),
            message: format!("{done} on {p} here"),
        }];
        if let Some(w) = state.last_wait(consumer) {
            labels.push(Label {
                span: cx.span(w),
                message: format!("this wait does not cover the {deed} on {p}"),
            });
        }
        let race = Race {
            buffer,
            consumer,
            producer,
            raw,
            allocated,
            serializes: cx.wait_holds_back_later_work(producer, access, at),
            // Memory the producer allocated, whose use by the receiver the allocator is not
            // told.
            unrecorded: b.alloc_stream == producer
                && !matches!(b.how, Production::Entry | Production::Call)
                && cx.body.buffer(buffer).memory == Memory::Device
                && !b.recorded.contains(&consumer),
        };
        // Handed on, a value may need more than the wait (its record, a wait where the object
        // is used next): said in words.
        // So is memory taken on a stream the caller passes: what the caller queued on it
        // before the call is the previous owner's work, and only the call site shows it.
        let callers_queue = allocated && cx.body.stream(producer).origin == StreamOrigin::Parameter;
        if callers_queue {
            cx.about_callers(op.span, "SL003", AtTheCall::Before);
        } else if returned && left == EscapeKind::Caller {
            cx.about_callers(op.span, "SL003", AtTheCall::After);
        }
        let fix = if returned || race.serializes {
            None
        } else {
            cx.ordering_edit(consumer, producer, at)
        };
        let mut finding = Finding {
            fix,
            code: "SL003",
            // A verdict that rests on callers the run did not see is a warning: the contract
            // at function boundaries is an assumption about them.
            severity: if contract.is_empty() {
                Severity::Error
            } else {
                Severity::Warning
            },
            message,
            span: op.span,
            labels,
            help: Some(wait_help(cx, &race, at)),
        };
        cx.name_the_skipping_test(&mut finding, access, |k| match *k {
            OpKind::WaitStream { waiter, waitee } => waiter == consumer && waitee == producer,
            OpKind::WaitEvent { stream, .. } => stream == consumer,
            OpKind::SyncStream { stream } => stream == producer,
            OpKind::SyncEvent { .. } | OpKind::SyncDevice => true,
            _ => false,
        });
        cx.report_about(Subject::BufferOn(buffer, consumer), finding);
    }
}

/// A use of `buffer` on `consumer` that nothing orders after an access on `producer` (a write,
/// or with `raw` false a read the use overwrites).
#[derive(Copy, Clone)]
struct Race {
    buffer: BufferId,
    consumer: StreamId,
    producer: StreamId,
    raw: bool,
    /// The racing access is the allocation itself: its block's previous owner's work.
    allocated: bool,
    /// A wait for all of `producer` there would also hold back work a loop queues later.
    serializes: bool,
    unrecorded: bool,
}

/// Where and how to make `consumer` wait for `producer`. The current stream at entry is spelled
/// `current_stream()`, which inside the `with` block that makes `consumer` current is
/// `consumer` itself: there the wait goes before the block. A value handed on that `producer`
/// also allocated needs its record there too (SL001 would say so next).
fn wait_help(cx: &Context<'_>, race: &Race, at: OpId) -> String {
    let Race {
        buffer,
        consumer,
        producer,
        raw,
        allocated,
        serializes,
        unrecorded,
    } = *race;
    let (c, p) = (cx.stream_name(consumer), cx.stream_name(producer));
    let wait = cx.wait_stream_fix(consumer, producer);
    let after = match (allocated, raw) {
        (true, _) => "allocation",
        (false, true) => "write",
        (false, false) => "read",
    };
    let ambient = cx.body.ambient;
    let place = cx.place(at);
    if cx.body.stream(producer).origin == StreamOrigin::Collective {
        let handle = &cx.body.stream(producer).expr;
        return if handle.is_empty() {
            "keep the work handle the collective returns (`work = dist.all_reduce(..., async_op=True)`) and call `work.wait()` before this use: until then the collective runs on the process group's stream, in parallel with the current one".to_string()
        } else {
            format!("call `{handle}.wait()` before this use: until then the collective runs on the process group's stream, in parallel with {c}")
        };
    }
    if cx.body.stream(producer).origin == StreamOrigin::OtherThread {
        let own = &cx.body.stream(producer).expr;
        let name = cx.buffer_name(buffer);
        let container = name.strip_suffix("[…]").unwrap_or(name);
        return format!(
            "every thread that runs this code puts what it makes on its own `{own}` into `{container}`, and may take out another thread's item: synchronize the stream after the put and before any item is taken (`{own}.synchronize()`), so that each thread's work is done before others can take its values, or put an event recorded after the write in with the value and make {c} wait on it before this use"
        );
    }
    if serializes {
        return format!(
            "record an event on {p} right after the {after} and make {c} wait on that event before this use; waiting for all of {p} here would also wait for the work it queues later in this loop, and the loop would no longer overlap"
        );
    }
    if place == Place::Use
        && producer == ambient
        && consumer != ambient
        && cx.body.returns_to_ambient
    {
        return format!(
            "make {c} wait for {p} after the {after} and before the `with` block that makes {c} current (inside it, `current_stream()` is {c} itself): `{wait}` (or wait on an event recorded on {p} after it)"
        );
    }
    let record = match cx.record_stream_fix(buffer, consumer, at) {
        Some(record) if place == Place::HandOff && unrecorded => {
            format!(", and call `{record}` there too, so that its memory waits for that use")
        }
        _ => String::new(),
    };
    format!(
        "make {c} wait for {p} after the {after} and {}: `{wait}` (or wait on an event recorded on {p} after it){record}",
        cx.place_words(place)
    )
}

/// Is the access at `op` the allocation of fresh memory (`torch.empty`), which queues no work?
fn allocated_at(body: &Body, op: OpId) -> bool {
    matches!(body.op(op).kind, OpKind::Produce { how, .. } if how.allocates())
}

/// Is every wait lowered from the source at `span` a wait of a stream on itself?
fn self_wait_on_every_path(body: &Body, span: Span) -> bool {
    body.ops_iter()
        .filter(|(_, op)| op.span == span)
        .all(|(_, op)| match op.kind {
            OpKind::WaitStream { waiter, waitee } => waiter == waitee,
            _ => true,
        })
}
