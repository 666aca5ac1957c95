//! The object a method works on: what its attributes hold when the method is entered (from the
//! class summary, which reads every method), and what the contract at function boundaries asks
//! of those the method leaves behind.

use super::*;

/// Methods that hand back an item of a dict and leave it there.
const CONTAINER_LOOKUPS: &[&str] = &["get", "setdefault"];

/// Methods that take an item out of a dict, list or deque: it is then the method's.
const CONTAINER_REMOVALS: &[&str] = &["pop", "popleft", "popitem"];

impl<'a> Lowerer<'a> {
    /// `param.grad_buffer`, `batch.images`: an attribute of an object the caller passed in is
    /// the caller's value too, a tensor if it is used as one, ready on the caller's current
    /// stream by the contract at function boundaries; what the function leaves on it on
    /// another stream goes back to the caller with the argument.
    pub(super) fn argument_attribute(
        &mut self,
        dotted: &str,
        owner: BufferId,
        attr: &str,
        span: Span,
    ) -> Option<Value> {
        if !self.param_buffers.contains(&owner)
            || self.confirmed.contains(&owner)
            || TENSOR_PROPERTIES.contains(&attr)
            || attr.starts_with("__")
        {
            return None;
        }
        let buffer = self.buffer_at(
            Span::default(),
            "argument-attribute",
            dotted,
            Memory::Device,
            Owner::Caller,
        );
        if !self.param_buffers.contains(&buffer) {
            self.param_buffers.push(buffer);
        }
        self.unplaced.insert(buffer);
        self.entry_ops.push((
            OpKind::Produce {
                buffer,
                stream: self.b.ambient(),
                how: Production::Entry,
            },
            span,
        ));
        let value = Value::Param(buffer);
        self.bind(dotted.to_string(), value.clone());
        Some(value)
    }

    /// `batch = frames.get()`, `future.result()`: a value another thread handed over, made
    /// on its current stream (the default stream unless it set one, the ambient stream here)
    /// and ready there, by the contract its producer is judged by (see
    /// `EscapeKind::OtherThread`). A tensor if used as one; its order is judged, not its
    /// lifetime.
    pub(super) fn handed_over_by_thread(&mut self, span: Span) -> Value {
        let name = self.value_name("item");
        self.ready_on_ambient(span, "from-thread", &name, Owner::Caller)
    }

    /// A value that comes into the body here, ready on the ambient stream, of unknown place,
    /// a tensor if it is used as one.
    fn ready_on_ambient(&mut self, span: Span, tag: &str, name: &str, owner: Owner) -> Value {
        let buffer = self.buffer_at(span, tag, name, Memory::Device, owner);
        self.unplaced.insert(buffer);
        let ambient = self.b.ambient();
        self.b.push(
            OpKind::Produce {
                buffer,
                stream: ambient,
                how: Production::Entry,
            },
            span,
        );
        Value::Param(buffer)
    }

    /// `x = other`: what `x.attr` held was an attribute of the object `x` named before.
    pub(super) fn forget_attributes_of(&mut self, name: &str) {
        use std::ops::Bound;
        // Keys that extend `name` with a character up to '.' follow it in the map's order,
        // those with '.' among them; no key of an identifier extends it with one before.
        let stale: Vec<std::rc::Rc<str>> = self
            .env
            .range::<str, _>((Bound::Excluded(name), Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| {
                k.strip_prefix(name)
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(|c| c <= '.')
            })
            .filter(|k| k[name.len()..].starts_with('.'))
            .cloned()
            .collect();
        for key in stale {
            self.unbind(&key);
        }
    }

    /// What `self.x` holds at entry, from the class summary.
    pub(super) fn class_attribute(&mut self, dotted: &str, span: Span) -> Option<Value> {
        // `self.compute_stream` for a property that returns `torch.cuda.current_stream()`.
        let property = dotted
            .strip_prefix("self.")
            .and_then(|name| self.class?.methods.get(name))
            .filter(|m| m.is_property);
        if let Some(returned) = property.and_then(|m| m.returns_stream.as_deref()) {
            return match returned {
                "" => Some(Value::Stream(self.current)),
                attr if attr != dotted => self.class_attribute(attr, span),
                _ => None,
            };
        }
        let kind = self.class?.attrs.get(dotted)?.clone();
        Some(match kind {
            AttrKind::Stream | AttrKind::StreamCache => Value::Stream(self.named_stream(dotted)),
            AttrKind::AmbientStream => Value::Stream(self.b.ambient()),
            AttrKind::DeviceModule(module) => Value::Module(module),
            AttrKind::Event => {
                let e = self.attribute_event(dotted);
                // Recorded by another method after what it stages: known as recorded at entry.
                if let Some(stream) = self.class?.event_streams.get(dotted).cloned() {
                    let s = if stream.is_empty() {
                        self.b.ambient()
                    } else {
                        self.named_stream(&stream)
                    };
                    let every_path = self.class?.events_recorded_on_every_path.contains(dotted);
                    let record = if every_path {
                        OpKind::RecordEvent {
                            event: e,
                            stream: s,
                        }
                    } else {
                        OpKind::RecordedOnSomePaths {
                            event: e,
                            stream: s,
                        }
                    };
                    self.entry_ops.push((record, span));
                }
                Value::Event(e)
            }
            AttrKind::Host { pinned } => {
                let memory = if pinned {
                    Memory::PinnedHost
                } else {
                    Memory::PageableHost
                };
                let buf = self.attribute_buffer(dotted, memory);
                let ambient = self.b.ambient();
                let class = self.class?;
                let Some((stream, filled_at)) = class.pending_fill(dotted, &self.method) else {
                    self.entry_ops.push((
                        OpKind::Produce {
                            buffer: buf,
                            stream: ambient,
                            how: Production::Host,
                        },
                        span,
                    ));
                    return Some(Value::Tensors(vec![buf]));
                };
                // Another method left a copy from the device landing in it.
                let s = if stream.is_empty() {
                    ambient
                } else {
                    self.named_stream(stream)
                };
                let how = Production::DeviceToHost { non_blocking: true };
                let fill = OpKind::Produce {
                    buffer: buf,
                    stream: s,
                    how,
                };
                self.entry_ops.push((fill, filled_at));
                if class.synced_elsewhere(stream, &self.method) {
                    // A third method waits for it on the host: assume the caller calls it first.
                    self.entry_ops
                        .push((OpKind::SyncStream { stream: s }, span));
                }
                Value::Tensors(vec![buf])
            }
            AttrKind::Tensor { stream, .. } if stream.is_empty() => {
                let buf = self.attribute_buffer(dotted, Memory::Device);
                let ambient = self.b.ambient();
                self.entry_ops.push((
                    OpKind::Produce {
                        buffer: buf,
                        stream: ambient,
                        how: Production::Entry,
                    },
                    span,
                ));
                let class = self.class?;
                if let Some((stream, written_at)) =
                    class.written_in_place_elsewhere(dotted, &self.method)
                {
                    // Another method writes it in place on a side stream and leaves that
                    // write for whoever uses it next to wait for.
                    let s = self.named_stream(stream);
                    let write = OpKind::Write {
                        buffer: buf,
                        stream: s,
                    };
                    self.entry_ops.push((write, written_at));
                    self.ordered_by_another_method(stream, s, span);
                }
                Value::Tensors(vec![buf])
            }
            AttrKind::Tensor { stream, transfer } => {
                let s = self.named_stream(&stream);
                let buf = self.attribute_buffer(dotted, Memory::Device);
                let how = staged_production(transfer);
                self.entry_ops.push((
                    OpKind::Produce {
                        buffer: buf,
                        stream: s,
                        how,
                    },
                    span,
                ));
                self.ordered_by_another_method(&stream, s, span);
                Value::Tensors(vec![buf])
            }
        })
    }

    /// An item of one of the object's containers (`self.pending[key]`), which the class summary
    /// does not know: a value from outside the body, a tensor if it is used as one, held by the
    /// object. The items of one container are one value, whichever key the code reaches; named
    /// `self.pending[…]` in messages, which says the value was followed through a container.
    /// Nothing is known of how each item was stored (a host table, a shard another method made
    /// on its own stream), so none is taken to have work pending at entry: what a method
    /// leaves in them unordered is judged (`leave_attributes`), what it finds there is not.
    pub(super) fn container_item(&mut self, container: &Expr, span: Span) -> Option<Value> {
        let dotted = container.dotted()?;
        if !dotted.starts_with("self.") {
            return None;
        }
        Some(Value::Param(
            self.held_by_object(&format!("{dotted}[…]"), span),
        ))
    }

    /// The buffer of a value the object holds under `name` (`self.pending[…]`, or an attribute
    /// the class summary knows nothing of), with no work pending on it at entry.
    pub(super) fn held_by_object(&mut self, name: &str, span: Span) -> BufferId {
        if let Some(&buffer) = self.attribute_buffers.get(name) {
            return buffer;
        }
        let buffer = self.attribute_buffer(name, Memory::Device);
        self.unplaced.insert(buffer);
        let ambient = self.b.ambient();
        self.entry_ops.push((
            OpKind::Produce {
                buffer,
                stream: ambient,
                how: Production::Host,
            },
            span,
        ));
        buffer
    }

    /// A method of one of the object's containers that hands back an item: a lookup
    /// (`self.pending.get(key)`) or a removal (`self.stash.pop(key)`).
    pub(super) fn container_call(
        &mut self,
        container: &Expr,
        method: &str,
        span: Span,
    ) -> Option<Value> {
        if CONTAINER_LOOKUPS.contains(&method) {
            self.container_item(container, span)
        } else if CONTAINER_REMOVALS.contains(&method) {
            self.taken_item(container, span)
        } else {
            None
        }
    }

    /// An item taken out of one of the object's containers (`self.stash.pop(key)`): the object
    /// no longer holds it, so it is this body's, freed when the body lets go of it, a tensor if
    /// used as one. By the contract for what a method leaves on its object, it is ready on the
    /// current stream; its memory is taken to be in that stream's pool (where it was allocated
    /// is not known, so a `record_stream` on it is never judged useless).
    fn taken_item(&mut self, container: &Expr, span: Span) -> Option<Value> {
        let dotted = container.dotted()?;
        if !dotted.starts_with("self.") {
            return None;
        }
        let name = format!("{dotted}[…]");
        if let Some(item) = self.item_left_on_stream(&dotted, &name, span) {
            return Some(item);
        }
        Some(self.ready_on_ambient(span, "taken", &name, Owner::Local))
    }

    /// An item another method stored in the object's container inside a block of one of the
    /// object's streams, without ordering the current stream after it (see
    /// `ClassSummary::stored_on_stream_elsewhere`): made on that stream, pending at entry.
    fn item_left_on_stream(&mut self, container: &str, name: &str, span: Span) -> Option<Value> {
        let class = self.class?;
        let (stream, host, stored_at) =
            class.stored_on_stream_elsewhere(container, &self.method)?;
        let s = self.named_stream(stream);
        let (memory, how) = if host {
            let how = Production::DeviceToHost { non_blocking: true };
            (Memory::PinnedHost, how)
        } else {
            (Memory::Device, Production::Compute)
        };
        let buffer = self.buffer_at(span, "left-on-stream", name, memory, Owner::Caller);
        self.entry_ops.push((
            OpKind::Produce {
                buffer,
                stream: s,
                how,
            },
            stored_at,
        ));
        self.ordered_by_another_method(stream, s, span);
        Some(Value::Tensors(vec![buffer]))
    }

    /// Work another method left pending on the object's stream `stream` (`s` here) at entry:
    /// when this method does not order the current stream after it but a third method does (a
    /// wait, or a host sync), the caller is taken to call that one first.
    fn ordered_by_another_method(&mut self, stream: &str, s: StreamId, span: Span) {
        let Some(class) = self.class else {
            return;
        };
        let waits_here = class
            .methods
            .get(&self.method)
            .is_some_and(|m| m.orders(stream));
        if !waits_here
            && (class.waited_elsewhere(stream, &self.method)
                || class.synced_elsewhere(stream, &self.method))
        {
            let waiter = self.b.ambient();
            let wait = OpKind::WaitStream { waiter, waitee: s };
            self.entry_ops.push((wait, span));
        }
    }

    /// By the contract at function boundaries, a value stored on an object the caller passed in
    /// (`batch.images = x.cuda(non_blocking=True)`) goes back to the caller, who uses it on its
    /// current stream. Written on a stream only this body can name (one it made), nothing but
    /// this body can order that use after the write: it is judged where the body ends. Work on a
    /// stream the caller can name (an attribute, an argument) may be joined by the caller.
    pub(super) fn leave_on_arguments(&mut self) {
        let body = self.b.body();
        let ambient = body.ambient;
        let local_stream = |s: StreamId| {
            s != ambient
                && matches!(
                    body.stream(s).origin,
                    StreamOrigin::Created | StreamOrigin::Temporary
                )
        };
        let mut left: Vec<(BufferId, Span)> = self
            .left_on_arguments
            .iter()
            .copied()
            .filter(|&(buffer, _)| {
                body.ops.iter().any(|op| match op.kind {
                    OpKind::Write { buffer: b, stream }
                    | OpKind::Raw {
                        buffer: b,
                        stream,
                        write: true,
                    }
                    | OpKind::Produce {
                        buffer: b, stream, ..
                    } => b == buffer && local_stream(stream),
                    _ => false,
                })
            })
            .collect();
        // A loop's trial pass and its real pass store the same value.
        left.sort_unstable();
        left.dedup();
        for (buffer, span) in left {
            self.b.push(
                OpKind::Escape {
                    buffer,
                    kind: EscapeKind::LeftOnArgument,
                },
                span,
            );
        }
    }

    /// By the contract at function boundaries, what a method leaves on its object must be
    /// ready on the current stream when it returns (or be covered by an event it stores): the
    /// next reader, in this or another method, uses it on its current stream. A method that
    /// hands its work to the current stream (makes it wait on a stream or an event) is checked
    /// at its end: attributes it wrote on another stream must be covered by that ordering,
    /// unless another method of the class makes the current stream wait for that stream (a
    /// prefetcher's `next()` waiting for what `preload()` staged). A method that leaves its
    /// side-stream work unjoined on purpose (a bucket filled and reduced on its own stream) is
    /// not judged here: its readers, wherever they are, are.
    pub(super) fn leave_attributes(&mut self, span: Span) {
        let Some(class) = self.class else {
            return;
        };
        let ambient = self.b.ambient();
        let body = self.b.body();
        let hands_to_current = body.ops.iter().any(|op| match op.kind {
            OpKind::WaitStream { waiter, waitee } => waiter == ambient && waitee != ambient,
            OpKind::WaitEvent { stream, .. } => stream == ambient,
            _ => false,
        });
        if !hands_to_current {
            return;
        }
        let mut left: Vec<BufferId> = self
            .attribute_buffers
            .values()
            .copied()
            .filter(|&buffer| {
                let written_on = body.ops.iter().filter_map(|op| match op.kind {
                    OpKind::Write { buffer: b, stream }
                    | OpKind::Raw {
                        buffer: b,
                        stream,
                        write: true,
                    } if b == buffer => Some(stream),
                    OpKind::Produce {
                        buffer: b,
                        stream,
                        how,
                    } if b == buffer && !matches!(how, Production::Entry | Production::Host) => {
                        Some(stream)
                    }
                    _ => None,
                });
                let mut others = written_on.filter(|&s| s != ambient).peekable();
                others.peek().is_some()
                    && others.all(|s| !class.waited_elsewhere(&body.stream(s).expr, &self.method))
            })
            .collect();
        left.sort_unstable();
        for buffer in left {
            self.b.push(
                OpKind::Escape {
                    buffer,
                    kind: EscapeKind::LeftOnObject,
                },
                span,
            );
        }
    }
}
