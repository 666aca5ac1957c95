//! The argument of an unpack hook: what its pack hook returned (see `crate::hooks`), made at
//! entry as pack left it, tensors written on its streams and events recorded after that work.
//! A use in unpack that no wait orders after those writes is a race, whatever pack returned
//! alongside: an event handed over orders only the code that waits on it.

use super::*;
use crate::hooks::{Packed, PackedArgument};

impl<'a> Lowerer<'a> {
    /// The parameter `name` at `span` stands for pack's work there: places there are named
    /// as inside pack (see `Body::inlined_calls`).
    pub(super) fn unpack_argument(
        &mut self,
        name: &str,
        span: Span,
        packed: &PackedArgument,
    ) -> Value {
        let items = &packed.items;
        self.b.note_callee_at(span, &packed.pack);
        let item_name = |i: usize| {
            if items.len() == 1 {
                name.to_string()
            } else {
                format!("{name}[{i}]")
            }
        };
        let mut values = vec![Value::Unknown; items.len()];
        // The writes first, then the events recorded after them.
        for (i, item) in items.iter().enumerate() {
            if let Packed::Written { stream, host, name } = item {
                let memory = if *host {
                    Memory::PinnedHost
                } else {
                    Memory::Device
                };
                let tag = format!("packed {i}");
                // Messages call it as pack does; code here reaches it by unpack's own names.
                let buffer = self.buffer_at(span, &tag, name, memory, Owner::Caller);
                self.b.buffer_mut(buffer).spelled = false;
                let stream = self.named_stream(stream);
                let how = Production::Compute;
                let produce = OpKind::Produce {
                    buffer,
                    stream,
                    how,
                };
                self.entry_ops.push((produce, span));
                values[i] = Value::Tensors(vec![buffer]);
            }
        }
        for (i, item) in items.iter().enumerate() {
            if let Packed::Event { stream } = item {
                let event = self.event_at(span, &item_name(i), false);
                let stream = self.named_stream(stream);
                self.entry_ops
                    .push((OpKind::RecordEvent { event, stream }, span));
                values[i] = Value::Event(event);
            }
        }
        match <[Value; 1]>::try_from(values) {
            Ok([one]) => one,
            Err(values) => Value::Group(values),
        }
    }
}
