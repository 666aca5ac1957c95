//! The fork/join discipline. Model code that runs part of a layer on a second stream
//! (`self.alt_stream`) usually forks it from the current stream (`alt.wait_stream(current)`),
//! joins it back after the block, and drops the block's results without `record_stream`. At
//! the drop the memory goes back to the second stream's pool while the current stream may still
//! read it: a real gap (SL001), closed by a rule that holds outside the function instead. When
//! every block of work on that stream, anywhere in the project, starts with a wait on the
//! current stream, the stream's next allocation is queued after everything the current stream
//! did before the block, the reads of the dropped results included: reuse is ordered.
//!
//! A body reports its blocks on long-lived streams ([`Region`]s) and which of its SL001
//! findings are about memory of such a stream read only by the current stream; the module's
//! bodies together decide: a discipline holds when every region of its stream starts with the
//! wait. An object's streams are known in their module by name (`self.alt_stream` of every
//! class of the module is one stream), which also joins unrelated streams of one name: that
//! only makes a discipline harder to hold. A stream kept in a module global is one stream
//! wherever it is used: its blocks in every file decide.

use streamlint_graph::{BlockId, Body, OpId, OpKind, Span, StreamId, StreamOrigin};

/// How a long-lived stream is known beyond the body that uses it (see [`stream_key`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StreamKey {
    /// An object's stream, by name within its module (`alt_stream` for `self.alt_stream`).
    Module(String),
    /// A stream held in a module global, by the global's qualified name (`pkg.streams._side`):
    /// the same stream in every file that uses it.
    Project(String),
}

/// A block of work on a long-lived stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub key: StreamKey,
    /// The expression that makes the stream current (`torch.cuda.stream(self.alt_stream)`).
    pub header: Span,
    /// The stream, as messages name it (`` `self.alt_stream` ``).
    pub display: String,
    /// The wait the block would start with, as the language spells it.
    pub wait: String,
    /// Every path into the block passes a wait of the stream on the current stream, with no
    /// memory of the stream freed after that wait.
    pub waits_first: bool,
}

/// The name a long-lived stream is known by: the qualified name of the module global that holds
/// it, or in its module an attribute's last name (`alt_stream` for `self.alt_stream`) or a
/// getter's name (`get_alt_stream()`). A stream the body makes, is passed, takes from an
/// expression it does not name, or that is current on entry has none: its other blocks are not
/// the module's.
pub fn stream_key(body: &Body, s: StreamId) -> Option<StreamKey> {
    let stream = body.stream(s);
    if let Some(home) = &stream.home {
        return Some(StreamKey::Project(home.clone()));
    }
    // A stream passed in as an argument is the caller's: its other blocks are not seen.
    if !matches!(
        stream.origin,
        StreamOrigin::Attribute | StreamOrigin::Global | StreamOrigin::Cached
    ) {
        return None;
    }
    let expr = stream.expr.trim();
    if let Some((callee, _)) = expr.split_once('(') {
        let name = callee.rsplit('.').next().unwrap_or(callee);
        return (!name.is_empty()).then(|| StreamKey::Module(format!("{name}()")));
    }
    let last = expr.rsplit('.').next().unwrap_or(expr);
    let name = last.split('[').next().unwrap_or(last);
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| StreamKey::Module(name.to_string()))
}

/// The body's blocks of work on long-lived streams.
pub fn regions(body: &Body) -> Vec<Region> {
    let blocks = &body.rewrites.stream_blocks;
    if blocks.is_empty() {
        return Vec::new();
    }
    let located = op_blocks(body);
    let preds = body.predecessors();
    blocks
        .iter()
        .filter_map(|b| {
            let key = stream_key(body, b.stream)?;
            // An empty block queues nothing.
            (b.ops.0 < b.ops.1).then(|| Region {
                key,
                header: b.header,
                display: body.stream(b.stream).display.clone(),
                wait: (body.spelling.wait_stream)(
                    &body.stream(b.stream).expr,
                    &body.stream(body.ambient).expr,
                ),
                waits_first: opens_with_wait(body, b.stream, b.ops)
                    || waits_first(body, &located, &preds, b.stream, b.ops.0),
            })
        })
        .collect()
}

/// Does the block itself start with the wait, before any work on its stream (`with
/// torch.cuda.stream(alt): alt.wait_stream(main)`, `main` taken outside)?
fn opens_with_wait(body: &Body, stream: StreamId, (first, end): (OpId, OpId)) -> bool {
    for i in first.index()..end.index() {
        let op = body.op(OpId(i as u32));
        match scan_back(body, &[OpId(i as u32)], stream) {
            Some(verdict) => return verdict,
            None if op.kind.work_stream() == Some(stream) => return false,
            None => {}
        }
    }
    false
}

/// Each op's control-flow block and position in it.
fn op_blocks(body: &Body) -> Vec<Option<(BlockId, usize)>> {
    let mut located = vec![None; body.ops.len()];
    for (i, block) in body.blocks.iter().enumerate() {
        for (at, op) in block.ops.iter().enumerate() {
            located[op.index()] = Some((BlockId(i as u32), at));
        }
    }
    located
}

/// Does every path to `first` (the block's first op) pass a wait of `stream` on the stream
/// current on entry (or a host wait for it), with no memory of `stream` freed after it? A path
/// that goes round a loop back to the block first does not: the wait before the loop orders
/// nothing of the loop's earlier turns.
fn waits_first(
    body: &Body,
    located: &[Option<(BlockId, usize)>],
    preds: &[Vec<BlockId>],
    stream: StreamId,
    first: OpId,
) -> bool {
    let Some((block, at)) = located[first.index()] else {
        return false;
    };
    let mut seen = vec![false; body.blocks.len()];
    // (block, ops of it before this position to scan, backwards)
    let mut work = vec![(block, at)];
    while let Some((b, end)) = work.pop() {
        match scan_back(body, &body.blocks[b.index()].ops[..end], stream) {
            Some(true) => continue,
            Some(false) => return false,
            None => {}
        }
        let from = &preds[b.index()];
        if from.is_empty() {
            if b == body.entry {
                // The entry, reached with no wait.
                return false;
            }
            // Code nothing reaches (after a `return` or a `raise`).
            continue;
        }
        for &p in from {
            if p == block {
                // Round a loop back to the block.
                return false;
            }
            if !std::mem::replace(&mut seen[p.index()], true) {
                work.push((p, body.blocks[p.index()].ops.len()));
            }
        }
    }
    true
}

/// Scan `ops` backwards: `Some(true)` at a wait of `stream` on the entry's current stream (or a
/// host wait for that stream, or for the device), `Some(false)` at a free of memory made on
/// `stream`, `None` if neither is there.
fn scan_back(body: &Body, ops: &[OpId], stream: StreamId) -> Option<bool> {
    let ambient = body.ambient;
    for &id in ops.iter().rev() {
        match body.op(id).kind {
            OpKind::WaitStream { waiter, waitee }
                if waiter == stream && waitee == ambient && !body.assumed_waits.contains(&id) =>
            {
                return Some(true);
            }
            OpKind::WaitEvent { event, stream: s }
                if s == stream && recorded_on(body, event, ambient) =>
            {
                return Some(true);
            }
            OpKind::SyncDevice => return Some(true),
            OpKind::SyncStream { stream: s } if s == ambient => return Some(true),
            OpKind::Release { buffer, .. } if made_on(body, buffer, stream) => return Some(false),
            _ => {}
        }
    }
    None
}

/// Is `event` recorded on `stream` anywhere in the body?
fn recorded_on(body: &Body, event: streamlint_graph::EventId, stream: StreamId) -> bool {
    body.ops.iter().any(|op| {
        matches!(op.kind, OpKind::RecordEvent { event: e, stream: s } if e == event && s == stream)
    })
}

/// Was `buffer` made by work on `stream`?
fn made_on(body: &Body, buffer: streamlint_graph::BufferId, stream: StreamId) -> bool {
    body.ops.iter().any(|op| {
        matches!(op.kind, OpKind::Produce { buffer: b, stream: s, .. } if b == buffer && s == stream)
    })
}
