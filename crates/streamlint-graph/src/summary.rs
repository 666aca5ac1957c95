//! Function summaries, for every frontend: what a call does to the buffers, streams and events
//! it is given, read once from the callee's lowered body and applied at each call with the
//! caller's values. Which of its buffer parameters it reads or writes on which of its stream
//! parameters, which of its event parameters it records or waits on, and what it hands back (a
//! buffer it made on one of its streams, an event recorded on one after its work).
//!
//! The summary speaks of parameters by position, so it outlives the callee's body; at a call,
//! [`Summary::effects`] names the caller's entities. How an effect becomes ops is the caller's
//! frontend's business (a cudarc access is tracked work, which a frontend writes differently
//! from raw work), so the summary hands effects over rather than pushing ops.

use crate::ir::{Body, BufferId, EventId, OpKind, Owner, StreamId};

/// A value passed to a function, as the body holding it names it: a parameter inside the
/// callee, an argument at the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Passed {
    Buffer(BufferId),
    Stream(StreamId),
    /// An event, or at a call any of several (a value that is one of two events).
    Events(Vec<EventId>),
    /// Anything the summary does not follow.
    Other,
}

impl Passed {
    fn buffer(&self) -> Option<BufferId> {
        match self {
            Passed::Buffer(b) => Some(*b),
            _ => None,
        }
    }

    fn stream(&self) -> Option<StreamId> {
        match self {
            Passed::Stream(s) => Some(*s),
            _ => None,
        }
    }

    fn events(&self) -> &[EventId] {
        match self {
            Passed::Events(e) => e,
            _ => &[],
        }
    }
}

/// A buffer parameter used on a stream parameter, by position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Access {
    buffer: usize,
    stream: usize,
    write: bool,
}

/// An event parameter recorded (or waited on) on a stream parameter, by position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EventUse {
    event: usize,
    stream: usize,
    record: bool,
}

/// What the function hands back, by the stream parameter it is tied to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Returns {
    #[default]
    Untracked,
    /// A buffer the function made on this stream.
    BufferMadeOn(usize),
    /// An event recorded on this stream after the function's work.
    EventRecordedOn(usize),
}

/// What a call does, in terms of its parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    accesses: Vec<Access>,
    event_uses: Vec<EventUse>,
    returns: Returns,
}

/// One effect of a call, in the caller's entities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Device work on `stream` reads (or writes) `buffer`.
    Access {
        buffer: BufferId,
        stream: StreamId,
        write: bool,
    },
    /// `event` is recorded on `stream` (or `stream` waits on it).
    Event {
        event: EventId,
        stream: StreamId,
        record: bool,
    },
}

impl Effect {
    /// The op that does it, as plain device work (a frontend whose accesses carry more, such as
    /// cudarc's tracked ones, writes those its own way).
    pub fn op(self) -> OpKind {
        match self {
            Effect::Access {
                buffer,
                stream,
                write: false,
            } => OpKind::Read { buffer, stream },
            Effect::Access { buffer, stream, .. } => OpKind::Write { buffer, stream },
            Effect::Event {
                event,
                stream,
                record: true,
            } => OpKind::RecordEvent { event, stream },
            Effect::Event { event, stream, .. } => OpKind::WaitEvent { event, stream },
        }
    }
}

/// What a call hands back, in the caller's entities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handed {
    /// A fresh buffer, made on this stream.
    BufferMadeOn(StreamId),
    /// A fresh event, recorded on this stream after the call's work.
    EventRecordedOn(StreamId),
}

impl Summary {
    /// Summarize `body`, whose parameters hold `params` (in order) and which returns `returned`.
    pub fn of(body: &Body, params: &[Passed], returned: &Passed) -> Summary {
        let position = |wanted: &Passed| params.iter().position(|p| p == wanted);
        let buffer_param = |b: BufferId| position(&Passed::Buffer(b));
        let stream_param = |s: StreamId| position(&Passed::Stream(s));
        let event_param = |e: EventId| position(&Passed::Events(vec![e]));
        let mut summary = Summary::default();
        for op in &body.ops {
            if let OpKind::WaitEvent { event, stream } | OpKind::RecordEvent { event, stream } =
                op.kind
            {
                if let (Some(event), Some(stream)) = (event_param(event), stream_param(stream)) {
                    let record = matches!(op.kind, OpKind::RecordEvent { .. });
                    summary.event_uses.push(EventUse {
                        event,
                        stream,
                        record,
                    });
                }
            }
            let (buffer, stream, write) = match op.kind {
                OpKind::Read { buffer, stream } => (buffer, stream, false),
                OpKind::Write { buffer, stream } | OpKind::Produce { buffer, stream, .. } => {
                    (buffer, stream, true)
                }
                OpKind::Raw {
                    buffer,
                    stream,
                    write,
                } => (buffer, stream, write),
                _ => continue,
            };
            if let (Some(buffer), Some(stream)) = (buffer_param(buffer), stream_param(stream)) {
                let access = Access {
                    buffer,
                    stream,
                    write,
                };
                if !summary.accesses.contains(&access) {
                    summary.accesses.push(access);
                }
            }
        }
        summary.returns = match returned {
            Passed::Buffer(b) if body.buffer(*b).owner == Owner::Local => body
                .ops
                .iter()
                .find_map(|op| match op.kind {
                    OpKind::Produce { buffer, stream, .. } if buffer == *b => stream_param(stream),
                    _ => None,
                })
                .map_or(Returns::Untracked, Returns::BufferMadeOn),
            Passed::Events(events) => match events.as_slice() {
                [e] => body
                    .ops
                    .iter()
                    .rev()
                    .find_map(|op| match op.kind {
                        OpKind::RecordEvent { event, stream } if event == *e => {
                            stream_param(stream)
                        }
                        _ => None,
                    })
                    .map_or(Returns::Untracked, Returns::EventRecordedOn),
                _ => Returns::Untracked,
            },
            _ => Returns::Untracked,
        };
        summary
    }

    /// Does a call do anything the summary follows?
    pub fn is_empty(&self) -> bool {
        self.accesses.is_empty() && self.event_uses.is_empty() && self.returns == Returns::Untracked
    }

    /// The effects of a call given `args`, in the order the callee has them: accesses first,
    /// then event records and waits. Arguments that do not hold what the parameter did (a
    /// value the caller does not follow) have none.
    pub fn effects(&self, args: &[Passed]) -> Vec<Effect> {
        let stream_at = |i: usize| args.get(i).and_then(Passed::stream);
        let mut effects = Vec::new();
        for a in &self.accesses {
            if let (Some(buffer), Some(stream)) = (
                args.get(a.buffer).and_then(Passed::buffer),
                stream_at(a.stream),
            ) {
                effects.push(Effect::Access {
                    buffer,
                    stream,
                    write: a.write,
                });
            }
        }
        for u in &self.event_uses {
            let (Some(events), Some(stream)) = (args.get(u.event), stream_at(u.stream)) else {
                continue;
            };
            effects.extend(events.events().iter().map(|&event| Effect::Event {
                event,
                stream,
                record: u.record,
            }));
        }
        effects
    }

    /// What a call given `args` hands back, when the summary follows it.
    pub fn handed(&self, args: &[Passed]) -> Option<Handed> {
        let stream_at = |i: usize| args.get(i).and_then(Passed::stream);
        match self.returns {
            Returns::Untracked => None,
            Returns::BufferMadeOn(s) => stream_at(s).map(Handed::BufferMadeOn),
            Returns::EventRecordedOn(s) => stream_at(s).map(Handed::EventRecordedOn),
        }
    }
}
