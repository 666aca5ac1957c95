//! Calls to the file's free functions, seen through their summaries (`streamlint_graph::Summary`,
//! the same for every frontend): what the callee does to its slices, streams and events happens
//! at the call, to the caller's.

use super::*;
use streamlint_graph::{Effect, Handed, Passed, Summary};

/// A value as a summary follows it.
fn passed(value: &Value) -> Passed {
    match value {
        Value::Slice(b) => Passed::Buffer(*b),
        Value::Stream(s) => Passed::Stream(*s),
        Value::Event(_) | Value::Events(_) => Passed::Events(value.events()),
        _ => Passed::Other,
    }
}

impl Lowerer<'_> {
    /// What callers need to know of this body, which returns `returned`.
    pub(super) fn summary(&self, returned: &Value) -> Summary {
        let params: Vec<Passed> = self.params.iter().map(passed).collect();
        Summary::of(self.b.body(), &params, &passed(returned))
    }

    /// A call to a summarized function of the file: its accesses are safe cudarc work on the
    /// streams it is given, as if written here.
    pub(super) fn apply_summary(&mut self, summary: &Summary, args: &[Value], sp: Span) -> Value {
        let args: Vec<Passed> = args.iter().map(passed).collect();
        for effect in summary.effects(&args) {
            match effect {
                Effect::Access {
                    buffer,
                    stream,
                    write,
                } => self.safe_access(buffer, stream, write, sp),
                Effect::Event { .. } => {
                    self.b.push(effect.op(), sp);
                }
            }
        }
        match summary.handed(&args) {
            Some(Handed::EventRecordedOn(s)) => {
                let event = self.b.add_event(Event {
                    name: "the event".into(),
                    expr: "ev".into(),
                    created: Some(sp),
                    internal: false,
                });
                self.b.push(OpKind::NewEvent { event }, sp);
                self.b.push(OpKind::RecordEvent { event, stream: s }, sp);
                Value::Event(event)
            }
            Some(Handed::BufferMadeOn(s)) => {
                Value::Slice(self.produce("the result", s, Production::Call, true, sp))
            }
            None => Value::Unknown,
        }
    }
}
