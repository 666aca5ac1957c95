//! What a name holds while a body is lowered, and how two paths' values meet.

use std::rc::Rc;

use super::*;

/// What a name or expression holds.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    /// Tensors made in this body (or views of them), by allocation site.
    Tensors(Vec<BufferId>),
    /// A value from outside the body (an argument, an element of one, an item of one of the
    /// object's containers): a tensor produced before entry, if it is used as one.
    Param(BufferId),
    Stream(StreamId),
    /// A `torch.cuda.stream(..)` context; `None` for `stream(None)`, which does nothing.
    StreamContext(Option<StreamId>),
    Event(EventId),
    /// `t.untyped_storage()`.
    Storage(Vec<BufferId>),
    /// The handle of an asynchronous collective (of several, kept in one list), by the streams
    /// the collectives run on: its `wait()` orders the current stream after each.
    Work(Vec<StreamId>),
    /// A tuple, list or dict literal.
    Group(Vec<Value>),
    /// The constant `None`.
    None,
    /// A string constant (`"cuda:0"`, `"cpu"`).
    Text(String),
    /// A device module bound to a name (`dm = torch.get_device_module(dev)`), by its qualified
    /// name.
    Module(String),
    /// A data-parallel wrapper class bound to a name (`DP = DistributedDataParallel`).
    DataParallelWrapper,
    Unknown,
}

impl Value {
    /// Every buffer the value holds, including the caller's values.
    /// Does the value hold an event or a stream (at any depth of a tuple or list)?
    pub(super) fn has_ordering(&self) -> bool {
        match self {
            Value::Event(_) | Value::Stream(_) => true,
            Value::Group(items) => items.iter().any(Value::has_ordering),
            _ => false,
        }
    }

    pub(super) fn buffers(&self) -> Vec<BufferId> {
        let mut out = Vec::new();
        self.collect_buffers(&mut out, true);
        out
    }

    /// Does the value hold `buffer` (a caller's value included)? Asked of every name at each
    /// assignment, so it allocates nothing.
    pub(super) fn holds(&self, buffer: BufferId) -> bool {
        match self {
            Value::Tensors(b) | Value::Storage(b) => b.contains(&buffer),
            Value::Param(b) => *b == buffer,
            Value::Group(items) => items.iter().any(|v| v.holds(buffer)),
            _ => false,
        }
    }

    /// Buffers known to be tensors made in this body.
    pub(super) fn local_tensors(&self) -> Vec<BufferId> {
        let mut out = Vec::new();
        self.collect_buffers(&mut out, false);
        out
    }

    pub(super) fn collect_buffers(&self, out: &mut Vec<BufferId>, with_params: bool) {
        match self {
            Value::Tensors(b) | Value::Storage(b) => out.extend(b),
            Value::Param(b) if with_params => out.push(*b),
            Value::Group(items) => items
                .iter()
                .for_each(|v| v.collect_buffers(out, with_params)),
            _ => {}
        }
        out.sort();
        out.dedup();
    }

    /// Refer to `to` wherever the value refers to `from`.
    pub(super) fn replace(&mut self, from: BufferId, to: BufferId) {
        match self {
            Value::Tensors(b) | Value::Storage(b) => {
                for x in b.iter_mut().filter(|x| **x == from) {
                    *x = to;
                }
                b.sort();
                b.dedup();
            }
            Value::Param(b) if *b == from => *b = to,
            Value::Group(items) => items.iter_mut().for_each(|v| v.replace(from, to)),
            _ => {}
        }
    }

    pub(super) fn events(&self) -> Vec<EventId> {
        match self {
            Value::Event(e) => vec![*e],
            Value::Group(items) => items.iter().flat_map(Value::events).collect(),
            _ => Vec::new(),
        }
    }

    pub(super) fn tensors(buffers: Vec<BufferId>) -> Value {
        if buffers.is_empty() {
            Value::Unknown
        } else {
            Value::Tensors(buffers)
        }
    }

    /// The value a name holds after two paths meet.
    pub(super) fn merge(&self, other: &Value) -> Value {
        match (self, other) {
            (a, b) if a == b => a.clone(),
            // `x = None` on one path: what the other path bound may still be there.
            (Value::None, known) | (known, Value::None) => known.clone(),
            // Handles of collectives launched at different places.
            (Value::Work(a), Value::Work(b)) => {
                let mut all = a.clone();
                all.extend(b.iter().filter(|s| !a.contains(s)));
                Value::Work(all)
            }
            // What code not seen returned on one path (a cache's `get(key)`) and a stream or
            // an event on the other: the same kind of object (a tensor only if used as one).
            (
                known @ (Value::Stream(_) | Value::Event(_) | Value::StreamContext(Some(_))),
                Value::Param(_),
            )
            | (
                Value::Param(_),
                known @ (Value::Stream(_) | Value::Event(_) | Value::StreamContext(Some(_))),
            ) => known.clone(),
            // A tensor on one path and something untracked on the other: the tensor may be there.
            (t @ (Value::Tensors(_) | Value::Param(_)), Value::Unknown)
            | (Value::Unknown, t @ (Value::Tensors(_) | Value::Param(_))) => t.clone(),
            // `torch.cuda.Stream() if multi_stream else nullcontext()`: a side stream on one
            // path and no stream context on the other.
            (Value::Stream(s), Value::Unknown) | (Value::Unknown, Value::Stream(s)) if s.0 != 0 => {
                Value::Stream(*s)
            }
            // An event found to be one (`ready.record()`) on one path is the same object on
            // the other.
            (Value::Event(e), Value::Unknown) | (Value::Unknown, Value::Event(e)) => {
                Value::Event(*e)
            }
            // `return nullcontext()` on one path, `return torch.cuda.stream(s)` on the other.
            (Value::StreamContext(Some(s)), Value::Unknown | Value::StreamContext(None))
            | (Value::Unknown | Value::StreamContext(None), Value::StreamContext(Some(s))) => {
                Value::StreamContext(Some(*s))
            }
            // A list of tensors on one path and something untracked on the other: the tensors
            // may be there.
            (g @ Value::Group(_), Value::Unknown) | (Value::Unknown, g @ Value::Group(_))
                if !g.buffers().is_empty() =>
            {
                g.clone()
            }
            // A list still empty on one path holds on the other what was put in it.
            (Value::Group(none), g @ Value::Group(_))
            | (g @ Value::Group(_), Value::Group(none))
                if none.is_empty() =>
            {
                g.clone()
            }
            // Tuples (or lists) of one shape: position by position.
            (Value::Group(a), Value::Group(b)) if a.len() == b.len() => {
                Value::Group(a.iter().zip(b).map(|(x, y)| x.merge(y)).collect())
            }
            (
                Value::Tensors(_) | Value::Param(_) | Value::Group(_),
                Value::Tensors(_) | Value::Param(_) | Value::Group(_),
            ) if !self.buffers().is_empty() || !other.buffers().is_empty() => {
                let mut all = self.buffers();
                all.extend(other.buffers());
                all.sort();
                all.dedup();
                Value::Tensors(all)
            }
            _ => Value::Unknown,
        }
    }
}

/// Does a name holding `value` name a tensor (rather than a list or a storage of some)?
pub(super) fn names_tensors(value: &Value) -> bool {
    matches!(value, Value::Tensors(_) | Value::Param(_))
}

/// Names are shared between the copies an environment makes at every branch and loop.
pub(super) type Env = BTreeMap<Rc<str>, Value>;

/// The names two paths bound where they meet: the names of both, each name's two values
/// merged. Both maps are sorted by name, so they are walked side by side and the result is
/// built from sorted pairs in one pass.
pub(super) fn merge_env(a: &Env, b: &Env) -> Env {
    use std::cmp::Ordering;
    let mut merged: Vec<(Rc<str>, Value)> = Vec::with_capacity(a.len().max(b.len()));
    let (mut left, mut right) = (a.iter().peekable(), b.iter().peekable());
    loop {
        let next = match (left.peek(), right.peek()) {
            (Some(&(ka, va)), Some(&(kb, vb))) => match ka.cmp(kb) {
                Ordering::Less => {
                    left.next();
                    (ka.clone(), va.clone())
                }
                Ordering::Greater => {
                    right.next();
                    (kb.clone(), vb.clone())
                }
                Ordering::Equal => {
                    left.next();
                    right.next();
                    // Most names hold the same value on both paths: nothing to merge.
                    let v = if va == vb { va.clone() } else { va.merge(vb) };
                    (ka.clone(), v)
                }
            },
            (Some(&(k, v)), None) => {
                left.next();
                (k.clone(), v.clone())
            }
            (None, Some(&(k, v))) => {
                right.next();
                (k.clone(), v.clone())
            }
            (None, None) => break,
        };
        merged.push(next);
    }
    merged.into_iter().collect()
}
