//! Hand-built event sequences: the happens-before model on its own, with no parser involved.

use crate::*;

fn spelling() -> Spelling {
    Spelling {
        record_stream: Some(|buffer, stream| format!("{buffer}.record_stream({stream})")),
        wait_stream: |waiter, waitee| format!("{waiter}.wait_stream({waitee})"),
        line_comment: "#",
        statement_end: "",
        wait_can_fail: false,
        stream_block: None,
    }
}

fn stream(name: &str, origin: StreamOrigin) -> Stream {
    Stream {
        display: name.into(),
        expr: name.into(),
        origin,
        span: None,
        home: None,
    }
}

/// A builder with the ambient stream and one side stream.
fn builder() -> (BodyBuilder, StreamId, StreamId) {
    let mut b = BodyBuilder::new(
        "f",
        Span::default(),
        spelling(),
        stream("main", StreamOrigin::Ambient),
    );
    let main = b.ambient();
    let side = b.add_stream(stream("side", StreamOrigin::Created));
    (b, main, side)
}

fn tensor(b: &mut BodyBuilder, name: &str) -> BufferId {
    b.add_buffer(Buffer {
        name: name.into(),
        spelled: true,
        memory: Memory::Device,
        owner: Owner::Local,
    })
}

fn produce(b: &mut BodyBuilder, buffer: BufferId, stream: StreamId) -> OpId {
    b.push(
        OpKind::Produce {
            buffer,
            stream,
            how: Production::Compute,
        },
        Span::default(),
    )
}

fn read(b: &mut BodyBuilder, buffer: BufferId, stream: StreamId) -> OpId {
    b.push(OpKind::Read { buffer, stream }, Span::default())
}

/// The state just before `op`.
fn before(body: &Body, op: OpId) -> State {
    let mut found = None;
    Analysis::run(body).walk(|id, _, state| {
        if id == op {
            found = Some(state.clone());
        }
    });
    found.expect("op is reachable")
}

#[test]
fn cross_stream_read_needs_a_wait() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    let r = read(&mut b, x, side);
    let body = b.finish();
    assert_eq!(before(&body, r).unordered_writes(x, side).len(), 1);
}

#[test]
fn wait_stream_orders_earlier_work_only() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    let y = tensor(&mut b, "y");
    produce(&mut b, x, main);
    b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: main,
        },
        Span::default(),
    );
    produce(&mut b, y, main);
    let r = read(&mut b, x, side);
    let r2 = read(&mut b, y, side);
    let body = b.finish();
    assert!(before(&body, r).unordered_writes(x, side).is_empty());
    assert_eq!(
        before(&body, r2).unordered_writes(y, side).len(),
        1,
        "wait_stream is a snapshot"
    );
}

#[test]
fn waits_are_transitive() {
    let (mut b, main, side) = builder();
    let third = b.add_stream(stream("third", StreamOrigin::Created));
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: main,
        },
        Span::default(),
    );
    b.push(
        OpKind::WaitStream {
            waiter: third,
            waitee: side,
        },
        Span::default(),
    );
    let r = read(&mut b, x, third);
    let body = b.finish();
    assert!(before(&body, r).unordered_writes(x, third).is_empty());
}

#[test]
fn events_capture_the_recording_point() {
    let (mut b, main, side) = builder();
    let early = b.add_event(Event {
        name: "early".into(),
        expr: "early".into(),
        created: None,
        internal: false,
    });
    let late = b.add_event(Event {
        name: "late".into(),
        expr: "late".into(),
        created: None,
        internal: false,
    });
    let x = tensor(&mut b, "x");
    b.push(
        OpKind::RecordEvent {
            event: early,
            stream: main,
        },
        Span::default(),
    );
    produce(&mut b, x, main);
    b.push(
        OpKind::WaitEvent {
            event: early,
            stream: side,
        },
        Span::default(),
    );
    let r1 = read(&mut b, x, side);
    b.push(
        OpKind::RecordEvent {
            event: late,
            stream: main,
        },
        Span::default(),
    );
    b.push(
        OpKind::WaitEvent {
            event: late,
            stream: side,
        },
        Span::default(),
    );
    let r2 = read(&mut b, x, side);
    let body = b.finish();
    assert_eq!(before(&body, r1).unordered_writes(x, side).len(), 1);
    assert!(before(&body, r2).unordered_writes(x, side).is_empty());
}

#[test]
fn event_recorded_on_the_wrong_stream_orders_nothing() {
    let (mut b, main, side) = builder();
    let third = b.add_stream(stream("third", StreamOrigin::Created));
    let e = b.add_event(Event {
        name: "e".into(),
        expr: "e".into(),
        created: None,
        internal: false,
    });
    let x = tensor(&mut b, "x");
    produce(&mut b, x, side);
    b.push(
        OpKind::RecordEvent {
            event: e,
            stream: third,
        },
        Span::default(),
    );
    b.push(
        OpKind::WaitEvent {
            event: e,
            stream: main,
        },
        Span::default(),
    );
    let r = read(&mut b, x, main);
    let body = b.finish();
    assert_eq!(before(&body, r).unordered_writes(x, main).len(), 1);
}

#[test]
fn self_wait_is_noted_and_orders_nothing() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    let w = b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: side,
        },
        Span::default(),
    );
    let r = read(&mut b, x, side);
    let body = b.finish();
    let s = before(&body, r);
    assert_eq!(s.noop_wait(side), Some(w));
    assert_eq!(s.unordered_writes(x, side).len(), 1);
}

#[test]
fn host_syncs_order_everything_they_cover() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    let y = tensor(&mut b, "y");
    produce(&mut b, x, main);
    produce(&mut b, y, side);
    b.push(OpKind::SyncStream { stream: main }, Span::default());
    let r1 = read(&mut b, x, side);
    let r2 = read(&mut b, y, main);
    b.push(OpKind::SyncDevice, Span::default());
    let r3 = read(&mut b, y, main);
    let body = b.finish();
    assert!(before(&body, r1).unordered_writes(x, side).is_empty());
    assert_eq!(before(&body, r2).unordered_writes(y, main).len(), 1);
    assert!(before(&body, r3).unordered_writes(y, main).is_empty());
}

#[test]
fn write_after_read_needs_ordering() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: main,
        },
        Span::default(),
    );
    read(&mut b, x, side);
    let w = b.push(
        OpKind::Write {
            buffer: x,
            stream: main,
        },
        Span::default(),
    );
    let body = b.finish();
    assert_eq!(before(&body, w).unordered_reads(x, main).len(), 1);
}

/// Release coverage: record_stream, a reverse wait, or a host sync; nothing else.
#[test]
fn release_needs_record_stream_reverse_wait_or_sync() {
    for cover in ["none", "record", "reverse_wait", "sync", "wait_before_use"] {
        let (mut b, main, side) = builder();
        let x = tensor(&mut b, "x");
        produce(&mut b, x, main);
        b.push(
            OpKind::WaitStream {
                waiter: side,
                waitee: main,
            },
            Span::default(),
        );
        if cover == "wait_before_use" {
            b.push(
                OpKind::WaitStream {
                    waiter: main,
                    waitee: side,
                },
                Span::default(),
            );
        }
        read(&mut b, x, side);
        match cover {
            "record" => drop(b.push(
                OpKind::RecordStream {
                    buffer: x,
                    stream: side,
                },
                Span::default(),
            )),
            "reverse_wait" => drop(b.push(
                OpKind::WaitStream {
                    waiter: main,
                    waitee: side,
                },
                Span::default(),
            )),
            "sync" => drop(b.push(OpKind::SyncStream { stream: side }, Span::default())),
            _ => {}
        }
        let rel = b.push(
            OpKind::Release {
                buffer: x,
                cause: ReleaseCause::Delete,
            },
            Span::default(),
        );
        let body = b.finish();
        let uncovered = before(&body, rel).uncovered_uses(x);
        let expect_hazard = matches!(cover, "none" | "wait_before_use");
        assert_eq!(!uncovered.is_empty(), expect_hazard, "cover = {cover}");
    }
}

/// `if c: <what>`: `what` builds the branch taken on one path; the builder ends at the join.
fn on_one_branch<T>(b: &mut BodyBuilder, what: impl FnOnce(&mut BodyBuilder) -> T) -> T {
    let entry = b.current();
    let then = b.new_block();
    let join = b.new_block();
    b.edge(entry, then);
    b.edge(entry, join);
    b.switch_to(then);
    let made = what(b);
    let end = b.current();
    b.edge(end, join);
    b.switch_to(join);
    made
}

#[test]
fn a_sync_on_one_branch_does_not_count_after_the_join() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    on_one_branch(&mut b, |b| {
        b.push(
            OpKind::WaitStream {
                waiter: side,
                waitee: main,
            },
            Span::default(),
        );
    });
    let r = read(&mut b, x, side);
    let body = b.finish();
    assert_eq!(before(&body, r).unordered_writes(x, side).len(), 1);
}

/// A `record_stream` covers the uses on the paths that make it: recorded on one branch only, a
/// use before the branch is uncovered on the other; a path that used and recorded the stream
/// and one that did neither meet as covered; where the value is `None` (`Absent`) the other
/// path decides.
#[test]
fn a_record_on_one_branch_covers_only_that_path() {
    let record = |b: &mut BodyBuilder, x: BufferId, side: StreamId| {
        b.push(
            OpKind::RecordStream {
                buffer: x,
                stream: side,
            },
            Span::default(),
        );
    };
    for case in [
        "use_then_record_on_one_branch",
        "use_and_record_on_one_branch",
        "absent_on_the_other",
    ] {
        let (mut b, main, side) = builder();
        let x = tensor(&mut b, "x");
        produce(&mut b, x, main);
        match case {
            "use_then_record_on_one_branch" => {
                read(&mut b, x, side);
                on_one_branch(&mut b, |b| record(b, x, side));
            }
            "use_and_record_on_one_branch" => on_one_branch(&mut b, |b| {
                read(b, x, side);
                record(b, x, side);
            }),
            _ => {
                read(&mut b, x, side);
                let entry = b.current();
                let (then, other, join) = (b.new_block(), b.new_block(), b.new_block());
                b.edge(entry, then);
                b.edge(entry, other);
                b.switch_to(then);
                record(&mut b, x, side);
                b.edge(then, join);
                b.switch_to(other);
                b.push(OpKind::Absent { buffer: x }, Span::default());
                b.edge(other, join);
                b.switch_to(join);
            }
        }
        let rel = b.push(
            OpKind::Release {
                buffer: x,
                cause: ReleaseCause::Delete,
            },
            Span::default(),
        );
        let body = b.finish();
        let uncovered = before(&body, rel).uncovered_uses(x);
        let expect_hazard = case == "use_then_record_on_one_branch";
        assert_eq!(!uncovered.is_empty(), expect_hazard, "case = {case}");
    }
}

/// A residence test on one branch only is a test on some paths after the join; one before the
/// branch is a test on every path.
#[test]
fn a_device_test_on_one_branch_is_not_on_every_path() {
    let (mut b, main, _side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    let test = on_one_branch(&mut b, |b| {
        b.push(OpKind::DeviceTest { buffer: x }, Span::default())
    });
    let r = read(&mut b, x, main);
    b.push(OpKind::DeviceTest { buffer: x }, Span::default());
    let after = read(&mut b, x, main);
    let body = b.finish();
    let tested = |op| before(&body, op).buffer(x).unwrap().device_tested;
    assert_eq!(tested(r).only_on_some_paths(), Some(test));
    assert_eq!(tested(after).only_on_some_paths(), None);
}

/// A write in a loop body after the only wait: the next iteration's read races with it.
#[test]
fn loop_carried_hazards_are_found() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: main,
        },
        Span::default(),
    );
    let entry = b.current();
    let head = b.new_block();
    let body_block = b.new_block();
    let exit = b.new_block();
    b.edge(entry, head);
    b.edge(head, body_block);
    b.edge(head, exit);
    b.switch_to(body_block);
    let r = read(&mut b, x, side);
    b.push(
        OpKind::Write {
            buffer: x,
            stream: main,
        },
        Span::default(),
    );
    b.edge(body_block, head);
    let body = b.finish();
    assert_eq!(before(&body, r).unordered_writes(x, side).len(), 1);
}

/// The same loop with the wait inside the body, before the read: clean on every iteration.
#[test]
fn loop_with_wait_each_iteration_is_clean() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    let entry = b.current();
    let head = b.new_block();
    let body_block = b.new_block();
    let exit = b.new_block();
    b.edge(entry, head);
    b.edge(head, body_block);
    b.edge(head, exit);
    b.switch_to(body_block);
    b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: main,
        },
        Span::default(),
    );
    let r = read(&mut b, x, side);
    b.push(
        OpKind::WaitStream {
            waiter: main,
            waitee: side,
        },
        Span::default(),
    );
    b.push(
        OpKind::Write {
            buffer: x,
            stream: main,
        },
        Span::default(),
    );
    b.edge(body_block, head);
    let body = b.finish();
    assert!(before(&body, r).unordered_writes(x, side).is_empty());
}

#[test]
fn event_recorded_on_one_path_is_maybe_recorded() {
    let (mut b, main, _) = builder();
    let e = b.add_event(Event {
        name: "e".into(),
        expr: "e".into(),
        created: None,
        internal: false,
    });
    b.push(OpKind::NewEvent { event: e }, Span::default());
    on_one_branch(&mut b, |b| {
        b.push(
            OpKind::RecordEvent {
                event: e,
                stream: main,
            },
            Span::default(),
        );
    });
    let w = b.push(
        OpKind::WaitEvent {
            event: e,
            stream: main,
        },
        Span::default(),
    );
    let body = b.finish();
    assert_eq!(
        before(&body, w).event(e).map(|e| e.recorded),
        Some(Recorded::Maybe)
    );
}

#[test]
fn scope_end_releases_local_buffers_that_did_not_escape() {
    let (mut b, main, _) = builder();
    let kept = tensor(&mut b, "kept");
    let dropped = tensor(&mut b, "dropped");
    let param = b.add_buffer(Buffer {
        name: "p".into(),
        spelled: true,
        memory: Memory::Device,
        owner: Owner::Caller,
    });
    produce(&mut b, kept, main);
    produce(&mut b, dropped, main);
    b.push(
        OpKind::Produce {
            buffer: param,
            stream: main,
            how: Production::Entry,
        },
        Span::default(),
    );
    b.push(
        OpKind::Escape {
            buffer: kept,
            kind: EscapeKind::Caller,
        },
        Span::default(),
    );
    b.push(OpKind::ScopeEnd, Span::default());
    let last = b.push(OpKind::SyncDevice, Span::default());
    let body = b.finish();
    let s = before(&body, last);
    assert!(s.buffer(kept).is_some() && s.buffer(param).is_some() && s.buffer(dropped).is_none());
}

#[test]
fn unbounded_loops_terminate() {
    // Nested loops with rebinding writes on alternating streams reach a fixed point quickly.
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    let mut prev = b.current();
    for depth in 0..20 {
        let head = b.new_block();
        b.edge(prev, head);
        b.switch_to(head);
        let s = if depth % 2 == 0 { main } else { side };
        b.push(
            OpKind::Write {
                buffer: x,
                stream: s,
            },
            Span::default(),
        );
        b.edge(head, head);
        prev = head;
    }
    let body = b.finish();
    let mut n = 0;
    Analysis::run(&body).walk(|_, _, _| n += 1);
    assert_eq!(n, 21);
}

#[test]
fn ops_in_loops_are_known() {
    let (mut b, main, _) = builder();
    let before = b.push(OpKind::SyncDevice, Span::default());
    let entry = b.current();
    let head = b.new_block();
    let exit = b.new_block();
    b.edge(entry, head);
    b.switch_to(head);
    let inside = b.push(OpKind::SyncStream { stream: main }, Span::default());
    b.edge(head, head);
    b.edge(head, exit);
    let body = b.finish();
    let a = Analysis::run(&body);
    assert!(a.in_cycle(inside) && !a.in_cycle(before));
}

#[test]
fn a_host_sync_on_one_path_and_a_wait_on_the_other_both_order() {
    let (mut b, main, side) = builder();
    let x = tensor(&mut b, "x");
    produce(&mut b, x, main);
    let (synced, waited, join) = (b.new_block(), b.new_block(), b.new_block());
    let entry = b.current();
    b.edge(entry, synced);
    b.edge(entry, waited);
    b.switch_to(synced);
    b.push(OpKind::SyncStream { stream: main }, Span::default());
    b.edge(synced, join);
    b.switch_to(waited);
    b.push(
        OpKind::WaitStream {
            waiter: side,
            waitee: main,
        },
        Span::default(),
    );
    b.edge(waited, join);
    b.switch_to(join);
    let r = read(&mut b, x, side);
    let body = b.finish();
    assert!(before(&body, r).unordered_writes(x, side).is_empty());
}

fn event(b: &mut BodyBuilder, name: &str) -> EventId {
    b.add_event(Event {
        name: name.into(),
        expr: name.into(),
        created: None,
        internal: false,
    })
}

/// A helper `fn scale(x: &CudaSlice, s: &CudaStream, done: &CudaEvent) -> CudaSlice` that
/// reads `x` on `s`, makes its result there and records `done` after: at a call, those effects
/// land on the caller's slice, stream and event, and the result is a buffer made on the
/// caller's stream.
#[test]
fn a_summary_applies_a_helpers_effects_to_the_callers_values() {
    let (mut b, _, s) = builder();
    let x = tensor(&mut b, "x");
    b.buffer_mut(x).owner = Owner::Caller;
    let y = tensor(&mut b, "y");
    let done = event(&mut b, "done");
    read(&mut b, x, s);
    produce(&mut b, y, s);
    b.push(
        OpKind::RecordEvent {
            event: done,
            stream: s,
        },
        Span::default(),
    );
    let body = b.finish();
    let params = [
        Passed::Buffer(x),
        Passed::Stream(s),
        Passed::Events(vec![done]),
    ];
    let summary = Summary::of(&body, &params, &Passed::Buffer(y));
    assert!(!summary.is_empty());

    // The caller's own entities, numbered differently.
    let (mut caller, main, side) = builder();
    let other = tensor(&mut caller, "other");
    let input = tensor(&mut caller, "input");
    let ready = event(&mut caller, "ready");
    let args = [
        Passed::Buffer(input),
        Passed::Stream(side),
        Passed::Events(vec![ready]),
    ];
    assert_eq!(
        summary.effects(&args),
        [
            Effect::Access {
                buffer: input,
                stream: side,
                write: false
            },
            Effect::Event {
                event: ready,
                stream: side,
                record: true
            },
        ]
    );
    assert_eq!(summary.handed(&args), Some(Handed::BufferMadeOn(side)));
    // A value the caller does not follow has no effect; the buffer made on a stream the
    // caller does not follow is not handed back as tracked.
    let unfollowed = [Passed::Other, Passed::Buffer(other), Passed::Stream(main)];
    assert_eq!(summary.effects(&unfollowed), []);
    assert_eq!(summary.handed(&unfollowed), None);
}

/// `batch = self.next; self.next = <next batch>`: before the rebinding both names hold the
/// first batch (the latest binding is preferred); after it only `batch` does. A tensor bound
/// to no name is called by its own name.
#[test]
fn the_name_of_a_tensor_is_the_one_holding_it_there() {
    let (mut b, _, side) = builder();
    let first = tensor(&mut b, "self.next");
    let next = tensor(&mut b, "self.next");
    let unbound = tensor(&mut b, "scratch");
    b.bind_name("self.next", vec![first]);
    produce(&mut b, first, side);
    b.bind_name("batch", vec![first]);
    let before = read(&mut b, first, side);
    b.bind_name("self.next", vec![next]);
    let after = read(&mut b, first, side);
    b.bind_name("batch", Vec::new());
    let gone = read(&mut b, first, side);
    let body = b.finish();
    assert_eq!(body.name_at(first, before), Some("batch"));
    assert_eq!(body.name_at(first, after), Some("batch"));
    assert_eq!(body.name_at(next, after), Some("self.next"));
    assert_eq!(body.name_at(first, gone), None);
    assert_eq!(body.name_at(unbound, gone), Some("scratch"));
}
