//! Summaries of a file's free functions, so calls to them are seen through.

use super::*;

/// What a call to a free function of the same file does, as its body shows: reads and writes of
/// its slice parameters on its stream parameters, and a slice it returns made on one of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// (slice parameter, stream parameter, written), by argument position.
    pub accesses: Vec<(usize, usize, bool)>,
    /// The stream parameter a returned slice was made on.
    pub returns_on: Option<usize>,
    /// The stream parameter a returned event was recorded on, after the accesses.
    pub returns_event_on: Option<usize>,
    /// (event parameter, stream parameter, recorded rather than waited on), in body order.
    pub event_uses: Vec<(usize, usize, bool)>,
}

impl Summary {
    pub fn is_empty(&self) -> bool {
        self.accesses.is_empty()
            && self.returns_on.is_none()
            && self.returns_event_on.is_none()
            && self.event_uses.is_empty()
    }
}

impl Lowerer<'_> {
    /// What callers need to know of this body: see [`Summary`].
    pub(super) fn summary(&self, returned: &Value) -> Summary {
        let slice_param = |b: BufferId| {
            self.params
                .iter()
                .position(|p| matches!(p, Value::Slice(x) if *x == b))
        };
        let stream_param = |s: StreamId| {
            self.params
                .iter()
                .position(|p| matches!(p, Value::Stream(x) if *x == s))
        };
        let event_param = |e: EventId| {
            self.params
                .iter()
                .position(|p| matches!(p, Value::Event(x) if *x == e))
        };
        let mut accesses = Vec::new();
        let mut event_uses = Vec::new();
        for op in &self.b.body().ops {
            if let OpKind::WaitEvent { event, stream } | OpKind::RecordEvent { event, stream } =
                op.kind
            {
                if let (Some(e), Some(s)) = (event_param(event), stream_param(stream)) {
                    event_uses.push((e, s, matches!(op.kind, OpKind::RecordEvent { .. })));
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
            if let (Some(b), Some(s)) = (slice_param(buffer), stream_param(stream)) {
                if !accesses.contains(&(b, s, write)) {
                    accesses.push((b, s, write));
                }
            }
        }
        let returns_on = match *returned {
            Value::Slice(b) if self.b.body().buffer(b).owner == Owner::Local => {
                self.alloc_stream(b).and_then(stream_param)
            }
            _ => None,
        };
        let returns_event_on = match *returned {
            Value::Event(e) => self.b.body().ops.iter().rev().find_map(|op| match op.kind {
                OpKind::RecordEvent { event, stream } if event == e => stream_param(stream),
                _ => None,
            }),
            _ => None,
        };
        Summary {
            accesses,
            returns_on,
            returns_event_on,
            event_uses,
        }
    }

    /// A call to a summarized function of the file: its accesses are safe cudarc work on the
    /// streams it is given, as if written here.
    pub(super) fn apply_summary(&mut self, summary: &Summary, args: &[Value], sp: Span) -> Value {
        let stream_at = |i: usize| match args.get(i) {
            Some(Value::Stream(s)) => Some(*s),
            _ => None,
        };
        for &(slice, stream, write) in &summary.accesses {
            if let (Some(Value::Slice(b)), Some(s)) = (args.get(slice), stream_at(stream)) {
                self.safe_access(*b, s, write, sp);
            }
        }
        for &(event, stream, record) in &summary.event_uses {
            let (Some(v), Some(s)) = (args.get(event), stream_at(stream)) else {
                continue;
            };
            for event in v.events() {
                let kind = if record {
                    OpKind::RecordEvent { event, stream: s }
                } else {
                    OpKind::WaitEvent { event, stream: s }
                };
                self.b.push(kind, sp);
            }
        }
        if let Some(s) = summary.returns_event_on.and_then(stream_at) {
            let event = self.b.add_event(Event {
                name: "the event".into(),
                expr: "ev".into(),
                created: Some(sp),
                internal: false,
            });
            self.b.push(OpKind::NewEvent { event }, sp);
            self.b.push(OpKind::RecordEvent { event, stream: s }, sp);
            return Value::Event(event);
        }
        match summary.returns_on.and_then(stream_at) {
            Some(s) => Value::Slice(self.produce("the result", s, Production::Call, true, sp)),
            None => Value::Unknown,
        }
    }
}
