//! SL001 missing-record-stream: memory used on another stream goes back to the allocator while
//! that stream's work may still be pending.

use streamlint_graph::{
    Body, BufferId, EscapeKind, Memory, Op, OpId, OpKind, Owner, Production, ReleaseCause, Span,
    State, StreamId,
};

use crate::{
    released_at_scope_end, transfer_lifetime_is_sl004, AtTheCall, Context, Finding, Label, Rule,
    Severity,
};

pub struct MissingRecordStream;

impl Rule for MissingRecordStream {
    fn code(&self) -> &'static str {
        "SL001"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Memory is only at risk when another stream uses it.
        body.has_other_streams()
    }

    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State) {
        match op.kind {
            OpKind::Release { buffer, cause } => {
                let (site, free_stream) = match cause {
                    ReleaseCause::FreeOn(s) => (ReleaseSite::Here, Some(s)),
                    ReleaseCause::ScopeDrop => (ReleaseSite::ScopeEnd(op.span), None),
                    ReleaseCause::CallReturn => (ReleaseSite::CallReturn(op.span), None),
                    _ => (ReleaseSite::Here, None),
                };
                self.check_release(cx, state, buffer, op.span, site, free_stream)
            }
            OpKind::ScopeEnd => {
                for buffer in released_at_scope_end(cx.body, state) {
                    self.check_release(
                        cx,
                        state,
                        buffer,
                        op.span,
                        ReleaseSite::FunctionEnd(op.span),
                        None,
                    );
                }
                for buffer in callers_tensors(cx.body, state) {
                    self.check_release(
                        cx,
                        state,
                        buffer,
                        op.span,
                        ReleaseSite::BackToCaller(op.span),
                        None,
                    );
                }
                for buffer in received_tensors(cx.body, state) {
                    self.check_release(
                        cx,
                        state,
                        buffer,
                        op.span,
                        ReleaseSite::BackToUnseenCode(op.span),
                        None,
                    );
                }
            }
            OpKind::Escape { buffer, kind } if kind.reaches_a_user_on_ambient() => {
                self.check_hand_off(cx, state, buffer, kind, id)
            }
            OpKind::Escape {
                buffer,
                kind: EscapeKind::Attribute | EscapeKind::LeftOnArgument,
            } => self.check_consumer_shown(cx, state, buffer, id),
            _ => {}
        }
    }
}

/// Where a release happens, as the finding tells it.
#[derive(Copy, Clone)]
enum ReleaseSite {
    /// A statement that frees (`del x`, `drop(x)`, `x.drop_async(&s)`).
    Here,
    /// The function returns (Python: the frame's references go away).
    FunctionEnd(Span),
    /// The owner goes out of scope at this closing brace (Rust).
    ScopeEnd(Span),
    /// Freed as the call at this span returns (see `ReleaseCause::CallReturn`).
    CallReturn(Span),
    /// A tensor the caller passed in goes back to it when the function returns: from then on
    /// the caller may free or overwrite it on its current stream.
    BackToCaller(Span),
    /// A tensor code not seen returned (a getter's, `next(it)`'s) goes back to that code when
    /// the function returns: by the contract it may be freed or overwritten there, on the
    /// current stream.
    BackToUnseenCode(Span),
}

/// The caller's tensors (arguments) still live at the function's end. By the contract at
/// function boundaries, an argument is the caller's memory on the caller's current stream; work
/// the function queued on it elsewhere must be joined or recorded before it is handed back.
fn callers_tensors(body: &Body, state: &State) -> Vec<BufferId> {
    still_held(&body.arguments, state)
}

/// The tensors code not seen returned, still live at the function's end (see
/// [`Body::received`]).
fn received_tensors(body: &Body, state: &State) -> Vec<BufferId> {
    still_held(&body.received, state)
}

fn still_held(buffers: &[BufferId], state: &State) -> Vec<BufferId> {
    buffers
        .iter()
        .copied()
        .filter(|id| {
            state
                .buffer(*id)
                .is_some_and(|b| !b.escaped && b.how == Production::Entry)
        })
        .collect()
}

impl MissingRecordStream {
    /// A release: an explicit one is reported where it stands, an implicit one at the last
    /// use it races with.
    fn check_release(
        &self,
        cx: &mut Context<'_>,
        state: &State,
        buffer: BufferId,
        span: Span,
        site: ReleaseSite,
        free_stream: Option<StreamId>,
    ) {
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        // Host memory under pending copies is SL007's; here only device memory.
        let device = cx.body.buffer(buffer).memory == Memory::Device;
        // What an unseen call returned may not even be a tensor allocated there.
        let unknown_allocation = b.how == Production::Call;
        if !device
            || unknown_allocation
            || b.escaped
            || transfer_lifetime_is_sl004(cx.body, b)
            || cx.wrong_record_reported(buffer)
        {
            return;
        }
        // Work on a stream without a name is SL005's.
        // Memory allocated on another stream on some path goes back to that stream's pool there:
        // the first pool with a use it does not cover is the one the finding is about.
        let pools = match free_stream {
            Some(stream) => vec![stream],
            None => state.pools(buffer),
        };
        let uncovered_in = |alloc: StreamId| -> Vec<_> {
            state
                .uncovered_uses_on(buffer, alloc)
                .into_iter()
                .filter(|(s, _)| !cx.is_temporary(*s))
                .filter(|&(s, u)| match site {
                    // An event recorded after the work and handed to the caller hands the
                    // ordering over; work of a callee lowered in place on a stream it made itself
                    // is the callee's finding (on the caller's stream, made current around the
                    // call, the callee alone sees nothing).
                    ReleaseSite::BackToCaller(_) => {
                        !state.handed_off(u) && !cx.callees_own_work(s, u)
                    }
                    // An event handed to the caller is not given to the code the value goes
                    // back to.
                    ReleaseSite::BackToUnseenCode(_) => !cx.callees_own_work(s, u),
                    _ => true,
                })
                .collect()
        };
        let (alloc, uncovered) = pools
            .iter()
            .map(|&pool| (pool, uncovered_in(pool)))
            .find(|(_, uncovered)| !uncovered.is_empty())
            .unwrap_or((b.alloc_stream, Vec::new()));
        if cx.is_temporary(alloc) {
            return;
        }
        let Some(&(user, last_use)) = uncovered.iter().max_by_key(|(_, u)| *u) else {
            return;
        };
        let name = cx.buffer_name(buffer).to_string();
        // What would have covered the use, had it run on this path.
        let covers = |k: &OpKind| match *k {
            OpKind::RecordStream { buffer: b, stream } => b == buffer && stream == user,
            OpKind::WaitStream { waiter, waitee } => waiter == alloc && waitee == user,
            OpKind::SyncStream { stream } => stream == user,
            OpKind::SyncEvent { .. } | OpKind::SyncDevice => true,
            _ => false,
        };
        let (primary, how) = match site {
            ReleaseSite::FunctionEnd(_) => (
                cx.span(last_use),
                format!("`{name}` is freed when the function returns"),
            ),
            ReleaseSite::ScopeEnd(_) => (
                cx.span(last_use),
                format!("`{name}` is dropped at the end of its scope"),
            ),
            ReleaseSite::CallReturn(_) => (
                cx.span(last_use),
                format!("`{name}` is freed when the call returns"),
            ),
            ReleaseSite::Here => (span, format!("`{name}` is freed here")),
            ReleaseSite::BackToCaller(_) => (
                cx.span(last_use),
                format!(
                    "`{name}` is the caller's tensor and goes back to it when the function returns, so the caller can free or overwrite it"
                ),
            ),
            ReleaseSite::BackToUnseenCode(_) => (
                cx.span(last_use),
                format!(
                    "`{name}` came from code the analysis does not see, which by the contract at function boundaries keeps it on its current stream and can free or overwrite it once this function returns"
                ),
            ),
        };
        let mut labels = vec![Label {
            span: cx.span(b.produced_at),
            message: format!("allocated on {}", cx.stream_name(alloc)),
        }];
        for &(s, u) in &uncovered {
            if cx.span(u) != primary {
                labels.push(Label {
                    span: cx.span(u),
                    message: format!("used on {} here", cx.stream_name(s)),
                });
            }
        }
        match site {
            ReleaseSite::FunctionEnd(end) => labels.push(Label {
                span: end,
                message: "freed at the end of this function".into(),
            }),
            ReleaseSite::ScopeEnd(end) => labels.push(Label {
                span: end,
                message: "dropped here".into(),
            }),
            ReleaseSite::CallReturn(call) => labels.push(Label {
                span: call,
                message: "freed when this call returns".into(),
            }),
            ReleaseSite::BackToCaller(end) => labels.push(Label {
                span: end,
                message: "handed back to the caller here, with that work still pending".into(),
            }),
            ReleaseSite::BackToUnseenCode(end) => labels.push(Label {
                span: end,
                message: "the function returns here, with that work still pending".into(),
            }),
            ReleaseSite::Here => {}
        }
        // Rust frees have no record call: the allocating stream waits for the user before an
        // explicit free.
        if let ReleaseSite::BackToCaller(_) | ReleaseSite::BackToUnseenCode(_) = site {
            // Where only the contract says what the unseen code does next, the finding says so
            // as a warning.
            let (severity, whose) = match site {
                ReleaseSite::BackToCaller(_) => (Severity::Error, "the caller's stream"),
                _ => (Severity::Warning, "that code's stream"),
            };
            let mut finding = Finding {
                fix: None,
                code: "SL001",
                severity,
                message: format!(
                    "{how} while {} may still be using it: nothing orders {whose} after that work",
                    cx.stream_name(user),
                ),
                span: primary,
                labels,
                help: Some(format!(
                    "make the current stream wait for {} before returning (`{}`){}",
                    cx.stream_name(user),
                    cx.wait_stream_fix(alloc, user),
                    match cx.record_stream_fix(buffer, user, last_use) {
                        Some(record) => format!(", or, if the caller never writes it, call `{record}` after its last use on {}", cx.stream_name(user)),
                        None => String::new(),
                    }
                )),
            };
            // Not left to the callers, even where they are judged with this function in place:
            // what a caller passes often comes from code the analysis does not follow (a data
            // loader's batch), whose release it does not judge.
            cx.name_the_skipping_test(&mut finding, last_use, covers);
            cx.report_once(buffer, finding);
            return;
        }
        let fix = match (site, cx.record_stream_fix(buffer, user, last_use)) {
            (_, Some(_)) => cx.record_stream_edit(buffer, b.how, &uncovered),
            (ReleaseSite::Here, None) => cx.wait_stream_edit(alloc, user, span, None),
            _ => None,
        };
        let mut finding = Finding {
            fix,
            code: "SL001",
            severity: Severity::Error,
            message: if cx.body.buffer(buffer).owner == Owner::Graph {
                format!(
                    "{how}, during a CUDA graph's capture, while {} may still be using it: its memory returns to the graph's pool, where a later allocation of the capture can take it, and every replay then overwrites it before that work finishes",
                    cx.stream_name(user),
                )
            } else {
                format!(
                    "{how} while {} may still be using it: its memory returns to {}'s pool and can be reused before that work finishes",
                    cx.stream_name(user),
                    cx.stream_name(alloc)
                )
            },
            span: primary,
            labels,
            help: Some(match cx.record_stream_fix(buffer, user, last_use) {
                Some(record) => format!(
                    "call `{record}` after its last use on {}, before it is freed, or make {} wait for {} first (`{}`)",
                    cx.stream_name(user),
                    cx.stream_name(alloc),
                    cx.stream_name(user),
                    cx.wait_stream_fix(alloc, user)
                ),
                None => format!(
                    "make {} wait for {} before the memory is freed (`{}`)",
                    cx.stream_name(alloc),
                    cx.stream_name(user),
                    cx.wait_stream_fix(alloc, user)
                ),
            }),
        };
        if uncovered.iter().all(|&(s, _)| s == cx.body.ambient) {
            cx.relies_on_discipline(primary, "SL001", alloc);
        }
        cx.name_the_skipping_test(&mut finding, last_use, covers);
        cx.report_once(buffer, finding);
    }

    /// A value handed out on an object (`batch.order = order`), allocated on a stream where the
    /// function records another value it hands out for a consumer stream
    /// (`indptr.record_stream(consumer)`): the code itself shows who uses what it hands out from
    /// that pool. Unless the value is recorded for that consumer on this path, before the
    /// hand-off or on every path after it, it goes back to the pool as soon as the consumer
    /// drops it, while the consumer may still read it.
    fn check_consumer_shown(
        &self,
        cx: &mut Context<'_>,
        state: &State,
        buffer: BufferId,
        at: OpId,
    ) {
        let body = cx.body;
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        if body.spelling.record_stream.is_none()
            || body.buffer(buffer).memory != Memory::Device
            || body.buffer(buffer).owner != Owner::Local
        {
            return;
        }
        let alloc = b.alloc_stream;
        let made_on = |r: BufferId| {
            body.ops_iter().any(|(_, op)| {
                matches!(op.kind, OpKind::Produce { buffer: p, stream, .. } if p == r && stream == alloc)
            })
        };
        let handed_out = |r: BufferId| {
            body.ops_iter().any(|(_, op)| {
                matches!(op.kind, OpKind::Escape { buffer: e, kind } if e == r && kind != EscapeKind::UnknownCallee)
            })
        };
        // A record for a stream that uses the value here is for that use, not for whoever
        // receives it.
        let used_here_on = |r: BufferId, s: StreamId| {
            body.ops_iter().any(|(_, op)| match op.kind {
                OpKind::Read { buffer: u, stream } | OpKind::Write { buffer: u, stream } => {
                    u == r && stream == s
                }
                _ => false,
            })
        };
        let consumer = body.ops_iter().find_map(|(_, op)| match op.kind {
            OpKind::RecordStream { buffer: r, stream }
                if r != buffer
                    && stream != alloc
                    && made_on(r)
                    && handed_out(r)
                    && !used_here_on(r, stream) =>
            {
                Some((r, stream))
            }
            _ => None,
        });
        let Some((shown, consumer)) = consumer else {
            return;
        };
        let recorded_at_end = || {
            cx.analysis
                .end_state()
                .and_then(|end| end.buffer(buffer).map(|e| e.recorded.contains(&consumer)))
                .unwrap_or(false)
        };
        if b.recorded.contains(&consumer) || recorded_at_end() {
            return;
        }
        let name = cx.buffer_name(buffer).to_string();
        let mut finding = Finding {
            fix: None,
            code: "SL001",
            severity: Severity::Error,
            message: format!(
                "`{name}` is handed out like `{}`, which this function records for {} as the stream that uses what it makes on {}, but `{name}` is not recorded for it: its memory returns to {}'s pool as soon as {} drops it",
                cx.buffer_name(shown),
                cx.stream_name(consumer),
                cx.stream_name(alloc),
                cx.stream_name(alloc),
                cx.stream_name(consumer),
            ),
            span: cx.span(at),
            labels: vec![Label {
                span: cx.span(b.produced_at),
                message: format!("allocated on {}", cx.stream_name(alloc)),
            }],
            help: cx
                .record_stream_fix(buffer, consumer, at)
                .map(|fix| format!("call `{fix}` before handing it out")),
        };
        cx.name_the_skipping_test(&mut finding, at, |k| {
            matches!(k, OpKind::RecordStream { buffer: r, stream } if *r == buffer && *stream == consumer)
        });
        cx.report_once(buffer, finding);
    }

    /// A side-stream tensor handed to the caller after the function ordered the current stream
    /// after it: the caller will use and free it on the current stream, which the allocator does
    /// not know about.
    fn check_hand_off(
        &self,
        cx: &mut Context<'_>,
        state: &State,
        buffer: BufferId,
        kind: EscapeKind,
        at: OpId,
    ) {
        let span = cx.span(at);
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        let ambient: StreamId = cx.body.ambient;
        // A value also kept by the object (or a container) is still the caller's to use on
        // its stream, and whoever frees it later does not wait for that use. Host memory,
        // pinned included, is in no stream's pool: the host allocator reuses a pinned block
        // only once the copies that used it are done; nor is a CUDA graph's memory, which
        // lives as long as the graph.
        // Memory taken on a stream the caller passed in for it is in the pool the caller chose
        // (`out_alloc_stream`, its consumer's): the caller knows where it lives. Not so for a
        // stream the function itself forks from the current one: it runs side work there.
        let callers_pool = kind == EscapeKind::Caller
            && cx.is_callers_stream(b.alloc_stream)
            && !cx.forks_from_ambient(b.alloc_stream);
        if b.alloc_stream == ambient
            || callers_pool
            || cx.body.buffer(buffer).memory != Memory::Device
            || cx.body.buffer(buffer).owner == Owner::Graph
            || cx.body.spelling.record_stream.is_none()
            || b.how == Production::Call
            || b.recorded.contains(&ambient)
            || transfer_lifetime_is_sl004(cx.body, b)
            || cx.wrong_record_reported(buffer)
        {
            return;
        }
        // Kept for another method of the object, the order of the user's work is the class's
        // protocol (a join in some method); the memory's way back to the pool is judged here.
        let ordered = kind == EscapeKind::HandedOutByObject
            || state.unordered_writes(buffer, ambient).is_empty();
        let handed_off = b.writes.iter().any(|&(_, w)| state.handed_off(w));
        if !ordered || handed_off {
            return;
        }
        let name = cx.buffer_name(buffer).to_string();
        let alloc = b.alloc_stream;
        let finding = Finding {
            fix: cx.record_before_hand_off(buffer, b.how, at),
            code: "SL001",
            severity: Severity::Error,
            message: format!(
                "`{name}` was allocated on {} and is {} uses it on the current stream; without `record_stream` its memory returns to {}'s pool as soon as {} drops it",
                cx.stream_name(alloc),
                kind.hand_off(),
                cx.stream_name(alloc),
                kind.holder(),
            ),
            span,
            labels: vec![Label { span: cx.span(b.produced_at), message: format!("allocated on {}", cx.stream_name(alloc)) }],
            help: cx.record_stream_fix(buffer, ambient, at).map(|fix| format!("call `{fix}` before handing it over")),
        };
        if kind.reaches_a_user_on_ambient() {
            cx.relies_on_discipline(span, "SL001", alloc);
        }
        if kind == EscapeKind::Caller {
            cx.about_callers(span, "SL001", AtTheCall::After);
        }
        cx.report_once(buffer, finding);
    }
}
