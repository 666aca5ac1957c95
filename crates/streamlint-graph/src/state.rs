//! The abstract state at one program point and how each operation changes it.
//!
//! Happens-before follows the run-time model of vector clocks over streams: every stream knows
//! the set of accesses it is ordered after (`visible`); a wait merges the waitee's knowledge into
//! the waiter's; an event snapshots the recording stream's knowledge; a host synchronization makes
//! the synced work visible to all later work (`host`). At control-flow joins ordering facts are
//! intersected (a sync counts only if it happens on every path) while the facts that can make a
//! hazard (pending accesses, uses) are united (a hazard on any path is a hazard).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::access_set::AccessSet;
use crate::ir::{
    Body, BufferId, CarriedAccesses, EventId, OpId, OpKind, Owner, Production, StreamId,
};

/// Whether an event has been recorded on the paths reaching a point (among the paths where it
/// exists: an event created under a condition is only waited on under it).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Created and not recorded yet.
    Never,
    /// On some paths but not all.
    Maybe,
    /// On every path.
    Always,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventState {
    pub recorded: Recorded,
    /// The accesses the event captured (intersection over the recording paths).
    pub snapshot: AccessSet,
    /// Streams the event was recorded on.
    pub streams: BTreeSet<StreamId>,
    /// The body received the event (a parameter, an attribute) rather than made it: on a path
    /// with no record of it, it exists all the same, recorded or not by someone else.
    pub received: bool,
}

/// What is known about one live buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferState {
    /// The stream whose allocator pool the memory belongs to.
    pub alloc_stream: StreamId,
    /// The allocation streams of other paths that meet here (`stream = side if overlap else
    /// current` before the allocation): a later use on any of them may be on another stream than
    /// the pool's.
    pub alloc_elsewhere: BTreeSet<StreamId>,
    pub produced_at: OpId,
    pub how: Production,
    /// The write(s) the next reader must be ordered after (several after a join).
    pub writes: BTreeSet<(StreamId, OpId)>,
    /// Reads since the last write; the next writer must be ordered after them.
    pub reads: BTreeSet<(StreamId, OpId)>,
    /// The latest use per stream since production, for lifetime coverage.
    pub uses: BTreeSet<(StreamId, OpId)>,
    /// Streams `record_stream` was called with on every path here: later uses on them are
    /// covered.
    pub recorded: BTreeSet<StreamId>,
    /// Streams with a use that, on some path here, no `record_stream` of that stream covers
    /// (before or after the use on that path). Kept apart from `recorded` so that a path that
    /// neither used nor recorded a stream and one that did both meet as covered.
    pub unrecorded: BTreeSet<StreamId>,
    /// The value may have left the body's control.
    pub escaped: bool,
    /// Where the code tests where the value lives, on the paths here.
    pub device_tested: DeviceTested,
}

/// Whether the code has tested where a value lives (`t.is_cuda`): a value from the caller may be
/// host or device memory, and a function that tests that on some path but not on another acts,
/// on the other, on a value it itself does not trust to be on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceTested {
    /// The first test on some path here.
    pub somewhere: Option<OpId>,
    /// Every path here passes a test.
    pub on_every_path: bool,
}

impl DeviceTested {
    /// Tested on some path here, but not on all of them.
    pub fn only_on_some_paths(&self) -> Option<OpId> {
        self.somewhere.filter(|_| !self.on_every_path)
    }

    fn meet(&mut self, other: &DeviceTested) {
        self.somewhere = match (self.somewhere, other.somewhere) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.on_every_path &= other.on_every_path;
    }
}

impl BufferState {
    /// Does the meet with `other` leave this state as it is?
    fn within(&self, other: &BufferState) -> bool {
        self.alloc_stream == other.alloc_stream
            && self.alloc_elsewhere.is_subset(&other.alloc_elsewhere)
            && self.writes.is_subset(&other.writes)
            && self.reads.is_subset(&other.reads)
            && self.uses.is_subset(&other.uses)
            && other.recorded.is_subset(&self.recorded)
            && self.unrecorded.is_subset(&other.unrecorded)
            && (other.escaped || !self.escaped)
            && (other.device_tested.somewhere.is_some() || self.device_tested.somewhere.is_none())
            && (!other.device_tested.on_every_path || self.device_tested.on_every_path)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    visible: BTreeMap<StreamId, AccessSet>,
    /// Every access performed on the paths reaching here (their latest instances).
    performed: AccessSet,
    host: AccessSet,
    handed_off: AccessSet,
    events: BTreeMap<EventId, EventState>,
    /// Shared between the states of consecutive program points until one of them changes it:
    /// most operations touch one buffer, and a block starts from a copy of its predecessor's.
    buffers: BTreeMap<BufferId, Rc<BufferState>>,
    /// Waits that ordered nothing (a stream waiting on itself), by waiting stream.
    noop_waits: BTreeMap<StreamId, OpId>,
    /// The latest wait each stream performed.
    last_waits: BTreeMap<StreamId, OpId>,
    /// Guards on buffers: (stream, where taken, where released if it was).
    guards: BTreeMap<BufferId, (StreamId, OpId, Option<OpId>)>,
    /// Streams whose last handle went away, and where.
    ended: BTreeMap<StreamId, OpId>,
    /// (waiter, waitee): the waiter waited for the waitee, which has queued no work since.
    caught_up: BTreeSet<(StreamId, StreamId)>,
}

static EMPTY: AccessSet = AccessSet::new();

impl State {
    pub fn buffer(&self, id: BufferId) -> Option<&BufferState> {
        self.buffers.get(&id).map(Rc::as_ref)
    }

    pub fn event(&self, id: EventId) -> Option<&EventState> {
        self.events.get(&id)
    }

    /// The accesses `stream` is ordered after.
    pub fn visible(&self, stream: StreamId) -> &AccessSet {
        self.visible.get(&stream).unwrap_or(&EMPTY)
    }

    /// Is an `access` made on `on` ordered before new work enqueued on `consumer`?
    pub fn ordered(&self, consumer: StreamId, on: StreamId, access: OpId) -> bool {
        on == consumer || self.visible(consumer).contains(access) || self.host.contains(access)
    }

    /// Is an access ordered before work the host does now (a host read)?
    pub fn host_ordered(&self, access: OpId) -> bool {
        self.host.contains(access)
    }

    /// Is an access covered by an event that was handed to the caller?
    pub fn handed_off(&self, access: OpId) -> bool {
        self.handed_off.contains(access)
    }

    /// Writes of `buffer` that work on `consumer` would race with.
    pub fn unordered_writes(&self, buffer: BufferId, consumer: StreamId) -> Vec<(StreamId, OpId)> {
        self.buffer(buffer)
            .map(|b| {
                b.writes
                    .iter()
                    .copied()
                    .filter(|&(s, a)| !self.ordered(consumer, s, a))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Reads of `buffer` that a write on `consumer` would race with.
    pub fn unordered_reads(&self, buffer: BufferId, consumer: StreamId) -> Vec<(StreamId, OpId)> {
        self.buffer(buffer)
            .map(|b| {
                b.reads
                    .iter()
                    .copied()
                    .filter(|&(s, a)| !self.ordered(consumer, s, a))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Uses of `buffer` on streams other than its allocation stream that a release now would
    /// not cover: no `record_stream` of that stream, no host sync after the use, and no wait of
    /// the allocation stream on the use (the reverse-wait discipline).
    pub fn uncovered_uses(&self, buffer: BufferId) -> Vec<(StreamId, OpId)> {
        let mut uses: Vec<_> = self
            .pools(buffer)
            .into_iter()
            .flat_map(|pool| self.uncovered_uses_on(buffer, pool))
            .collect();
        uses.sort_unstable();
        uses.dedup();
        uses
    }

    /// The streams whose pool the buffer's memory belongs to, on the paths here: its allocation
    /// stream, then those of other paths that met here (`stream = side if overlap else current`
    /// before the allocation).
    pub fn pools(&self, buffer: BufferId) -> Vec<StreamId> {
        self.buffer(buffer).map_or_else(Vec::new, |b| {
            std::iter::once(b.alloc_stream)
                .chain(b.alloc_elsewhere.iter().copied())
                .collect()
        })
    }

    /// The same, for memory freed in stream order on `free_stream`.
    pub fn uncovered_uses_on(
        &self,
        buffer: BufferId,
        free_stream: StreamId,
    ) -> Vec<(StreamId, OpId)> {
        let Some(b) = self.buffer(buffer) else {
            return Vec::new();
        };
        b.uses
            .iter()
            .copied()
            .filter(|&(s, u)| {
                s != free_stream && b.unrecorded.contains(&s) && !self.ordered(free_stream, s, u)
            })
            .collect()
    }

    /// The guard on `buffer`: (stream, where taken, where released if it was).
    pub fn guard(&self, buffer: BufferId) -> Option<(StreamId, OpId, Option<OpId>)> {
        self.guards.get(&buffer).copied()
    }

    /// Where the stream's last handle went away, if it did.
    pub fn ended(&self, stream: StreamId) -> Option<OpId> {
        self.ended.get(&stream).copied()
    }

    /// A wait on `stream` that ordered nothing, if one happened on the paths here.
    pub fn noop_wait(&self, stream: StreamId) -> Option<OpId> {
        self.noop_waits.get(&stream).copied()
    }

    /// The latest wait `stream` performed.
    pub fn last_wait(&self, stream: StreamId) -> Option<OpId> {
        self.last_waits.get(&stream).copied()
    }

    /// Buffers live here.
    pub fn live_buffers(&self) -> impl Iterator<Item = (BufferId, &BufferState)> {
        self.buffers.iter().map(|(k, v)| (*k, v.as_ref()))
    }

    /// Record a device access: a new instance of `access` on `stream`. Other streams' knowledge
    /// of an earlier instance of the same op (a previous loop iteration) no longer applies.
    fn access(&mut self, access: OpId, stream: StreamId) {
        if !self.caught_up.is_empty() {
            self.caught_up.retain(|&(_, waitee)| waitee != stream);
        }
        self.happens_on(access, stream);
    }

    /// `access` takes place on `stream` without queuing work there (a value that arrives ready,
    /// as a parameter or an item another thread hands over): a stream that caught up with
    /// `stream` stays caught up.
    fn happens_on(&mut self, access: OpId, stream: StreamId) {
        for (s, set) in self.visible.iter_mut() {
            if *s != stream {
                set.remove(access);
            }
        }
        for e in self.events.values_mut() {
            e.snapshot.remove(access);
        }
        self.host.remove(access);
        self.handed_off.remove(access);
        self.visible.entry(stream).or_default().insert(access);
        self.performed.insert(access);
    }

    /// Memory taken from `stream`'s pool. Taking it queues no work: what makes using it on
    /// another stream a race is work on `stream` that touched the block before (its previous
    /// owner's). A stream that waited for `stream` with nothing queued on `stream` since is
    /// ordered after that work too: a wait placed before the allocation covers it.
    fn allocate(&mut self, allocation: OpId, stream: StreamId) {
        let waiters: Vec<StreamId> = self
            .caught_up
            .iter()
            .filter(|&&(_, waitee)| waitee == stream)
            .map(|&(waiter, _)| waiter)
            .collect();
        self.access(allocation, stream);
        for waiter in waiters {
            self.visible.entry(waiter).or_default().insert(allocation);
            self.caught_up.insert((waiter, stream));
        }
    }

    /// Move the current instance of `from` to `into`, its writes (then, at the next op, its
    /// reads). Those accesses get the carry op's identity, known as ordered where all of them
    /// were, because the next instance of `from` will perform the same ops again and must not
    /// be mistaken for this one. Writes and reads get separate identities: a stream that waited
    /// for the writes (through an event recorded after the copy) need not have seen the reads
    /// other streams made, and is still ordered after the writes.
    fn carry(&mut self, carry: OpId, from: BufferId, into: BufferId, part: CarriedAccesses) {
        let source = match part {
            CarriedAccesses::Writes => from,
            CarriedAccesses::Reads => into,
        };
        let Some(mut b) = self.buffers.get(&source).map(|b| BufferState::clone(b)) else {
            return;
        };
        let moved = |(_, a): &(StreamId, OpId)| match part {
            CarriedAccesses::Writes => b.writes.iter().any(|(_, w)| w == a),
            // The writes carry the first op's identity by now.
            CarriedAccesses::Reads => a.index() + 1 != carry.index(),
        };
        let accesses: Vec<OpId> = b
            .writes
            .iter()
            .chain(&b.reads)
            .chain(&b.uses)
            .filter(|x| moved(x))
            .map(|(_, a)| *a)
            .collect();
        let rename = |set: &mut AccessSet| {
            if accesses.iter().all(|a| set.contains(*a)) {
                set.insert(carry);
            }
        };
        self.visible.values_mut().for_each(rename);
        self.events
            .values_mut()
            .for_each(|e| rename(&mut e.snapshot));
        rename(&mut self.host);
        rename(&mut self.handed_off);
        self.performed.insert(carry);
        let relabel = |set: &BTreeSet<(StreamId, OpId)>| {
            set.iter()
                .map(|&(s, a)| if moved(&(s, a)) { (s, carry) } else { (s, a) })
                .collect()
        };
        let (writes, reads, uses) = (relabel(&b.writes), relabel(&b.reads), relabel(&b.uses));
        b.writes = writes;
        b.reads = reads;
        b.uses = uses;
        if part == CarriedAccesses::Writes {
            b.produced_at = carry;
        }
        self.buffers.insert(into, Rc::new(b));
    }

    /// Apply one operation.
    pub fn apply(&mut self, body: &Body, id: OpId) {
        match body.op(id).kind {
            OpKind::Produce {
                buffer,
                stream,
                how,
            } => {
                let one = if matches!(how, Production::Host | Production::GraphPool) {
                    BTreeSet::new()
                } else if how.allocates() {
                    self.allocate(id, stream);
                    BTreeSet::from([(stream, id)])
                } else if how == Production::Entry {
                    self.happens_on(id, stream);
                    BTreeSet::from([(stream, id)])
                } else {
                    self.access(id, stream);
                    BTreeSet::from([(stream, id)])
                };
                self.buffers.insert(
                    buffer,
                    Rc::new(BufferState {
                        alloc_stream: stream,
                        alloc_elsewhere: BTreeSet::new(),
                        produced_at: id,
                        how,
                        writes: one.clone(),
                        reads: BTreeSet::new(),
                        unrecorded: one.iter().map(|&(s, _)| s).collect(),
                        uses: one,
                        recorded: BTreeSet::new(),
                        escaped: false,
                        device_tested: DeviceTested::default(),
                    }),
                );
            }
            OpKind::Read { buffer, stream }
            | OpKind::Write { buffer, stream }
            | OpKind::Raw { buffer, stream, .. } => {
                if !self.buffers.contains_key(&buffer) {
                    return;
                }
                self.access(id, stream);
                let b = Rc::make_mut(self.buffers.get_mut(&buffer).expect("checked above"));
                b.uses.retain(|(s, _)| *s != stream);
                b.uses.insert((stream, id));
                if !b.recorded.contains(&stream) {
                    b.unrecorded.insert(stream);
                }
                if matches!(
                    body.op(id).kind,
                    OpKind::Write { .. } | OpKind::Raw { write: true, .. }
                ) {
                    b.writes = BTreeSet::from([(stream, id)]);
                    b.reads.clear();
                } else {
                    b.reads.retain(|(s, _)| *s != stream);
                    b.reads.insert((stream, id));
                }
            }
            OpKind::HostRead { .. } | OpKind::HostWrite { .. } | OpKind::SetStream { .. } => {}
            OpKind::DeviceTest { buffer } => {
                if let Some(b) = self.buffers.get_mut(&buffer) {
                    let tested = &mut Rc::make_mut(b).device_tested;
                    tested.somewhere.get_or_insert(id);
                    tested.on_every_path = true;
                }
            }
            OpKind::GuardTaken { buffer, stream } => {
                self.guards.insert(buffer, (stream, id, None));
            }
            OpKind::GuardReleased { buffer } => {
                if let Some(g) = self.guards.get_mut(&buffer) {
                    g.2 = Some(id);
                }
            }
            OpKind::EndStream { stream, .. } => {
                self.ended.insert(stream, id);
            }
            OpKind::RecordStream { buffer, stream } => {
                if let Some(b) = self.buffers.get_mut(&buffer) {
                    if !b.recorded.contains(&stream) || b.unrecorded.contains(&stream) {
                        let b = Rc::make_mut(b);
                        b.recorded.insert(stream);
                        b.unrecorded.remove(&stream);
                    }
                }
            }
            OpKind::WaitStream { waiter, waitee } => {
                self.last_waits.insert(waiter, id);
                if waiter == waitee {
                    self.noop_waits.insert(waiter, id);
                } else {
                    let known = self.visible(waitee).clone();
                    self.visible.entry(waiter).or_default().union_with(&known);
                    self.caught_up.insert((waiter, waitee));
                }
            }
            OpKind::RecordEvent { event, stream } => {
                let snapshot = self.visible(stream).clone();
                self.events.insert(
                    event,
                    EventState {
                        recorded: Recorded::Always,
                        snapshot,
                        streams: BTreeSet::from([stream]),
                        received: body.event(event).created.is_none()
                            && !body.event(event).internal,
                    },
                );
            }
            OpKind::WaitEvent { event, stream } => {
                self.last_waits.insert(stream, id);
                match self.events.get(&event) {
                    None if body.event(event).internal => {}
                    // Waiting on an event never recorded orders nothing; nor is anything known
                    // of what an event from elsewhere captured.
                    None => {
                        self.noop_waits.insert(stream, id);
                    }
                    Some(e) if e.recorded == Recorded::Never => {
                        self.noop_waits.insert(stream, id);
                    }
                    Some(e) => {
                        // Recorded on some paths only: on the others the wait does nothing.
                        if e.recorded == Recorded::Maybe {
                            self.noop_waits.insert(stream, id);
                        }
                        let known = e.snapshot.clone();
                        self.visible.entry(stream).or_default().union_with(&known);
                    }
                }
            }
            OpKind::RecordedOnSomePaths { event, stream } => {
                let maybe = EventState {
                    recorded: Recorded::Maybe,
                    snapshot: AccessSet::new(),
                    streams: BTreeSet::from([stream]),
                    received: true,
                };
                self.events.insert(event, maybe);
            }
            OpKind::NewEvent { event } => {
                let fresh = EventState {
                    recorded: Recorded::Never,
                    snapshot: AccessSet::new(),
                    streams: BTreeSet::new(),
                    received: body.event(event).created.is_none() && !body.event(event).internal,
                };
                self.events.insert(event, fresh);
            }
            OpKind::SyncStream { stream } => {
                let known = self.visible(stream).clone();
                self.host.union_with(&known);
            }
            OpKind::SyncEvent { event } => {
                if let Some(e) = self
                    .events
                    .get(&event)
                    .filter(|e| e.recorded != Recorded::Never)
                {
                    let known = e.snapshot.clone();
                    self.host.union_with(&known);
                }
            }
            OpKind::SyncDevice => {
                for set in self.visible.values() {
                    self.host.union_with(set);
                }
            }
            OpKind::Release { buffer, .. } => {
                self.buffers.remove(&buffer);
            }
            OpKind::Escape { buffer, .. } => {
                if let Some(b) = self.buffers.get_mut(&buffer) {
                    if !b.escaped {
                        Rc::make_mut(b).escaped = true;
                    }
                }
            }
            OpKind::HandOffEvent { event } => {
                if let Some(e) = self.events.get(&event) {
                    let known = e.snapshot.clone();
                    self.handed_off.union_with(&known);
                }
            }
            OpKind::Carry { from, into, part } => self.carry(id, from, into, part),
            OpKind::Absent { buffer } => {
                // Its accesses did not happen on this path either: where the paths meet, what
                // they are ordered after is the other path's to say.
                if let Some(b) = self.buffers.remove(&buffer) {
                    for &(_, access) in b.writes.iter().chain(&b.reads).chain(&b.uses) {
                        self.performed.remove(access);
                    }
                }
            }
            OpKind::ScopeEnd => {
                self.buffers
                    .retain(|id, b| b.escaped || body.buffer(*id).owner != Owner::Local);
            }
        }
    }

    /// Combine the states of two paths that meet.
    pub fn meet(&mut self, other: &State) {
        let (mine, theirs_done) = (self.performed.clone(), &other.performed);
        let meet = |a: &mut AccessSet, b: &AccessSet| a.meet_ordered(&mine, b, theirs_done);
        // Work the host waited for precedes anything enqueued later, on every stream: a stream
        // may know an access by a wait on one path and through a host sync on the other.
        let streams: BTreeSet<StreamId> = self
            .visible
            .keys()
            .chain(other.visible.keys())
            .copied()
            .collect();
        for s in streams {
            let mut theirs = other.visible(s).clone();
            theirs.union_with(&other.host);
            let host = self.host.clone();
            let ours = self.visible.entry(s).or_default();
            ours.union_with(&host);
            meet(ours, &theirs);
        }
        meet(&mut self.host, &other.host);
        meet(&mut self.handed_off, &other.handed_off);
        self.caught_up.retain(|pair| other.caught_up.contains(pair));
        for (id, ours) in self.events.iter_mut() {
            if ours.received && !other.events.contains_key(id) {
                ours.recorded = Recorded::Maybe;
                ours.snapshot = AccessSet::new();
            }
        }
        for (id, theirs) in &other.events {
            match self.events.get_mut(id) {
                Some(ours) => {
                    if theirs.recorded != ours.recorded {
                        ours.recorded = Recorded::Maybe;
                    }
                    meet(&mut ours.snapshot, &theirs.snapshot);
                    ours.streams.extend(theirs.streams.iter().copied());
                }
                // Received, and not recorded on our path: what a wait on it orders there is
                // not known, so nothing after the join counts on it.
                None if theirs.received => {
                    let unknown = EventState {
                        recorded: Recorded::Maybe,
                        snapshot: AccessSet::new(),
                        ..theirs.clone()
                    };
                    self.events.insert(*id, unknown);
                }
                // Not created on our path: nothing there can wait on it.
                None => {
                    self.events.insert(*id, theirs.clone());
                }
            }
        }
        for (id, theirs) in &other.buffers {
            match self.buffers.get_mut(id) {
                Some(ours) if Rc::ptr_eq(ours, theirs) || theirs.within(ours) => {}
                Some(ours) => {
                    let ours = Rc::make_mut(ours);
                    let mut their_uses = theirs.uses.clone();
                    if ours.alloc_stream != theirs.alloc_stream {
                        // One value allocated on two streams, by path: what each path used it
                        // for on its own pool's stream is freed in that order there, and is no
                        // use on another stream for the path allocating elsewhere.
                        ours.uses.retain(|(s, _)| *s != ours.alloc_stream);
                        their_uses.retain(|(s, _)| *s != theirs.alloc_stream);
                        ours.alloc_elsewhere.insert(theirs.alloc_stream);
                    }
                    ours.alloc_elsewhere
                        .extend(theirs.alloc_elsewhere.iter().copied());
                    let alloc = ours.alloc_stream;
                    ours.alloc_elsewhere.remove(&alloc);
                    ours.writes.extend(theirs.writes.iter().copied());
                    ours.reads.extend(theirs.reads.iter().copied());
                    ours.uses.extend(their_uses);
                    // A `record_stream` keeps the memory only on the paths that make it; where the
                    // value is `None` instead (`if t is not None: t.record_stream(s)`), that path
                    // holds no state of it (`OpKind::Absent`) and this one decides.
                    ours.recorded.retain(|s| theirs.recorded.contains(s));
                    ours.unrecorded.extend(theirs.unrecorded.iter().copied());
                    ours.escaped |= theirs.escaped;
                    ours.device_tested.meet(&theirs.device_tested);
                }
                None => {
                    self.buffers.insert(*id, theirs.clone());
                }
            }
        }
        self.performed.union_with(&other.performed);
        meet_map(&mut self.noop_waits, &other.noop_waits, |_, _| {});
        meet_map(&mut self.guards, &other.guards, |a, b| {
            if a.2.is_none() {
                a.2 = b.2;
            }
        });
        meet_map(&mut self.ended, &other.ended, |_, _| {});
        meet_map(&mut self.last_waits, &other.last_waits, |a, b| {
            *a = (*a).max(*b)
        });
    }
}

/// Meet two maps of may-facts key by key: keys on both sides are combined with `both`; keys on
/// one side only are kept.
fn meet_map<K: Ord + Copy, V: Clone>(
    ours: &mut BTreeMap<K, V>,
    theirs: &BTreeMap<K, V>,
    both: impl Fn(&mut V, &V),
) {
    for (k, v) in theirs {
        ours.entry(*k).or_insert_with(|| v.clone());
    }
    for (k, v) in ours.iter_mut() {
        if let Some(t) = theirs.get(k) {
            both(v, t);
        }
    }
}
