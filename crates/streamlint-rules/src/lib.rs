//! The rules: each one reads the analysed graph of a body and reports the hazards it knows.
//! Rules never see syntax; names and fix spellings come from the graph's entities.

mod catalog;
mod discipline;
mod events;
mod fix;
mod guard;
mod host;
mod lifetime;
mod line_index;
mod ordering;
mod record;
mod set_stream;
mod temporary;
mod transfer;
mod worker;

use rustc_hash::FxHashSet;

use streamlint_graph::{
    Analysis, Body, BufferId, BufferState, EscapeKind, Op, OpId, OpKind, Production, Recorded,
    Span, State, StreamId, StreamOrigin,
};

pub use catalog::{rule, RuleInfo, META, PARSE_ERROR, RULES, UNUSED_SUPPRESSION};
pub use discipline::{Region, StreamKey};
pub use fix::{apply_edits, Applicability, Edit, Fix, TextEdit};
pub use line_index::{LineIndex, Position};

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// A secondary location with its own message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One reported problem, located in the source the body was lowered from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    /// Where the hazard becomes real.
    pub span: Span,
    pub labels: Vec<Label>,
    /// The minimal change that removes the hazard, in words and code.
    pub help: Option<String>,
    /// That change as source edits, where it is mechanical.
    pub fix: Option<Fix>,
}

/// What a finding is about, for reporting each root cause once.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Subject {
    Buffer(BufferId),
    /// A buffer's use on one stream: a tensor two streams each race on is two hazards, each
    /// with its own wait to add.
    BufferOn(BufferId, StreamId),
    Stream(StreamId),
    Span(Span),
}

/// Where the statements a help asks for go, in the user's terms.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Place {
    /// Before the use the finding is about.
    Use,
    /// Before the value is returned or handed to another thread.
    HandOff,
    /// Before the function returns: the value stays on an object, used after the call.
    Return,
}

/// What a rule sees while the analysis walks a body.
pub struct Context<'b> {
    pub body: &'b Body,
    analysis: &'b Analysis<'b>,
    findings: Vec<Finding>,
    /// (code, subject) pairs already reported: one finding per root cause.
    reported: FxHashSet<(&'static str, Subject)>,
    /// Lifetime findings, by span and rule, about memory of a long-lived stream that only the
    /// current stream reads: safe if that stream keeps the fork/join discipline (see
    /// `discipline`).
    relies_on: Vec<(Span, &'static str, StreamKey)>,
    /// Findings, by span and rule, about what the caller does with the function's results or
    /// arguments, in a function judged at its calls (see `Body::judged_at_calls`).
    about_callers: Vec<(Span, &'static str, AtTheCall)>,
}

/// What a call of a function judged at its calls must show for a finding about its callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtTheCall {
    /// What the caller queued before the call (memory taken on a stream it passes): the call
    /// lowered in place shows it.
    Before,
    /// What the caller does with what the call made or used, to the end: the caller's
    /// analysis must follow it whole (nothing of it handed to code it does not see).
    After,
}

impl<'b> Context<'b> {
    /// A finding that an ordering of the body would have prevented, had it run on this path
    /// (one `wanted` picks out, placed after `after`: one before the work it would order orders
    /// nothing of it): say under which test it does not run, at the ordering too.
    fn name_the_skipping_test(
        &self,
        finding: &mut Finding,
        after: OpId,
        wanted: impl Fn(&OpKind) -> bool,
    ) {
        let Some((op, when)) = self
            .body
            .conditional
            .iter()
            .find(|(op, _)| *op > after && wanted(&self.body.op(*op).kind))
        else {
            return;
        };
        finding.message.push_str(&format!(" (when {when})"));
        let span = self.body.op(*op).span;
        let message = format!("this does not run when {when}");
        // It replaces what another label says of the same ordering ("does not cover").
        match finding.labels.iter_mut().find(|l| l.span == span) {
            Some(label) => label.message = message,
            None => finding.labels.push(Label { span, message }),
        }
    }

    /// Report once per rule and buffer.
    fn report_once(&mut self, buffer: BufferId, finding: Finding) {
        self.report_about(Subject::Buffer(buffer), finding);
    }

    /// Report once per rule and subject.
    fn report_about(&mut self, subject: Subject, finding: Finding) {
        if self.reported.insert((finding.code, subject)) {
            self.findings.push(finding);
        }
    }

    /// A `record_stream` of this buffer that protects nothing was reported: that is the root
    /// cause of any lifetime hazard that follows.
    fn wrong_record_reported(&self, buffer: BufferId) -> bool {
        self.reported.contains(&("SL002", Subject::Buffer(buffer)))
    }

    /// A producer stream whose last handle went away: SL005 reports what that causes.
    fn stream_ended(&self, state: &State, s: StreamId) -> bool {
        state.ended(s).is_some()
    }

    fn is_temporary(&self, s: StreamId) -> bool {
        self.body.stream(s).origin == StreamOrigin::Temporary
    }

    /// Did `consumer` last wait on something that ordered nothing, a root cause reported where
    /// it stands? In a loop, a wait on an event recorded later in the loop gets the previous
    /// iteration's record: unless SL006 reported the wait itself, it explains nothing about
    /// this iteration's work, and the unordered use is the finding.
    fn noop_wait_explains(&self, state: &State, consumer: StreamId) -> bool {
        let reported_stale = |wait: OpId| {
            self.reported
                .contains(&("SL006", Subject::Span(self.body.op(wait).span)))
        };
        if state.last_wait(consumer).is_some_and(reported_stale) {
            return true;
        }
        let Some(wait) = state.noop_wait(consumer) else {
            return false;
        };
        let op = self.body.op(wait);
        match op.kind {
            OpKind::WaitEvent { event, .. }
                if self.analysis.in_cycle(wait)
                    && state
                        .event(event)
                        .is_some_and(|e| e.recorded != Recorded::Never) =>
            {
                reported_stale(wait)
            }
            // An event another method records on some paths only: no record here for SL006 to
            // point at, so the unordered use is the finding.
            OpKind::WaitEvent { event, .. }
                if !self.body.ops_iter().any(|(_, o)| {
                    matches!(o.kind, OpKind::RecordEvent { event: e, .. } if e == event)
                }) && self.body.ops_iter().any(|(_, o)| {
                    matches!(o.kind, OpKind::RecordedOnSomePaths { event: e, .. } if e == event)
                }) =>
            {
                false
            }
            _ => true,
        }
    }

    /// A stream the caller passed in: what this body returns made on it is the caller's to
    /// order, as they hold the stream (the contract of `*_async(.., &stream)` constructors).
    fn is_callers_stream(&self, s: StreamId) -> bool {
        self.body.stream(s).origin == StreamOrigin::Parameter
    }

    /// Does this body make `s` wait for the current stream (`side.wait_stream(current)`), so
    /// that it runs work beside it?
    fn forks_from_ambient(&self, s: StreamId) -> bool {
        let ambient = self.body.ambient;
        self.body.ops_iter().any(|(_, op)| {
            matches!(op.kind, OpKind::WaitStream { waiter, waitee } if waiter == s && waitee == ambient)
        })
    }

    fn report(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    /// The `code` finding at `span`, about memory of `alloc` read only by the current stream
    /// after it, is safe if `alloc` keeps the fork/join discipline.
    fn relies_on_discipline(&mut self, span: Span, code: &'static str, alloc: StreamId) {
        if let Some(key) = discipline::stream_key(self.body, alloc) {
            self.relies_on.push((span, code, key));
        }
    }

    /// The `code` finding at `span` says what a caller must do with the function's results or
    /// arguments: where the function is judged at its calls, so are the callers.
    fn about_callers(&mut self, span: Span, code: &'static str, needs: AtTheCall) {
        if self.body.judged_at_calls {
            self.about_callers.push((span, code, needs));
        }
    }

    fn span(&self, op: OpId) -> Span {
        self.body.op(op).span
    }

    /// Is the op, on `stream`, work of a callee lowered in place on a stream that callee made
    /// (everything a callee makes carries the call's span)? The callee, judged on its own,
    /// reports what it does there; on the caller's stream it sees nothing of it.
    fn callees_own_work(&self, stream: StreamId, op: OpId) -> bool {
        let at = self.span(op);
        self.body.inlined_callee(at).is_some() && self.body.stream(stream).span == Some(at)
    }

    fn stream_name(&self, s: streamlint_graph::StreamId) -> &str {
        &self.body.stream(s).display
    }

    fn buffer_name(&self, b: BufferId) -> &str {
        &self.body.buffer(b).name
    }

    /// The call that tells the allocator about a use, where the language has one:
    /// `b.record_stream(s)` as a statement inserted before `at`, where a name holds `b` there
    /// (the name the code uses for it at that point, not one rebound since).
    fn record_stream_fix(&self, b: BufferId, s: StreamId, at: OpId) -> Option<String> {
        let spell = self.body.spelling.record_stream?;
        let name = self.body.name_at(b, at)?;
        Some(spell(name, &self.body.stream(s).expr))
    }

    fn wait_stream_fix(&self, waiter: StreamId, waitee: StreamId) -> String {
        (self.body.spelling.wait_stream)(
            &self.body.stream(waiter).expr,
            &self.body.stream(waitee).expr,
        )
    }

    /// Can `s` be spelled in code inserted where `current` is the current stream? A stream
    /// the code names can; the ambient one only where it is current (its spelling asks for the
    /// current stream), and only in a language that has a current stream.
    fn spellable(&self, s: StreamId, current: Option<StreamId>) -> bool {
        let stream = self.body.stream(s);
        if matches!(
            stream.origin,
            StreamOrigin::OtherThread | StreamOrigin::Collective
        ) {
            // Another thread's copy of a stream, a process group's: no code here can name it.
            return false;
        }
        let named = stream.origin != StreamOrigin::Ambient || stream.span.is_some();
        named || (self.body.returns_to_ambient && current == Some(s))
    }

    /// The wait as a statement inserted before the line of `before`, where `current` is the
    /// current stream (the consumer's, before one of its uses).
    fn wait_stream_edit(
        &self,
        waiter: StreamId,
        waitee: StreamId,
        before: Span,
        current: Option<StreamId>,
    ) -> Option<Fix> {
        if !self.spellable(waiter, current) || !self.spellable(waitee, current) {
            return None;
        }
        let spelling = &self.body.spelling;
        let safe =
            !spelling.wait_can_fail && self.always_bound(waiter) && self.always_bound(waitee);
        Some(Fix {
            message: format!(
                "make {} wait for {}",
                self.stream_name(waiter),
                self.stream_name(waitee)
            ),
            applicability: if safe {
                Applicability::Safe
            } else {
                Applicability::Unsafe
            },
            edits: vec![Edit::InsertLineBefore {
                before,
                statement: format!(
                    "{}{}",
                    self.wait_stream_fix(waiter, waitee),
                    spelling.statement_end
                ),
            }],
        })
    }

    /// The wait that orders `consumer` after `producer` for its use at `at`, as an edit: before
    /// the use, or where the stream current there cannot be spelled (inside the block that
    /// makes `consumer` current, `current_stream()` is `consumer`), before that block's header.
    /// Callers offer none where the wait would serialize a loop (see
    /// [`Self::wait_holds_back_later_work`]).
    fn ordering_edit(&self, consumer: StreamId, producer: StreamId, at: OpId) -> Option<Fix> {
        self.wait_stream_edit(consumer, producer, self.span(at), Some(consumer))
            .or_else(|| {
                let block = self.body.block_making_current(at, consumer)?;
                self.wait_stream_edit(consumer, producer, block.header, Some(block.outer))
            })
    }

    /// In a loop, would a wait for all of `producer`'s work before `at` also wait for work it
    /// queued after `access` for later (the next batch's copy, issued before this use of the
    /// previous one)? The loop's overlap would be gone: only an event recorded right after
    /// `access` orders this use and no more. Work on what the same statement uses is needed
    /// there anyway (the labels queued with the images).
    fn wait_holds_back_later_work(&self, producer: StreamId, access: OpId, at: OpId) -> bool {
        if !self.analysis.in_cycle(at) {
            return false;
        }
        let statement = self.span(at);
        let used_here: Vec<BufferId> = self
            .body
            .ops_iter()
            .filter(|(_, op)| op.span == statement)
            .filter_map(|(_, op)| op.kind.buffer())
            .collect();
        self.body.ops_iter().any(|(id, op)| {
            let between = if access < at {
                access < id && id < at
            } else {
                id < at
            };
            between
                && id != access
                && op.kind.work_stream() == Some(producer)
                && !op.kind.buffer().is_some_and(|b| used_here.contains(&b))
                && self.analysis.in_cycle(id)
        })
    }

    /// Where advice about the op `at` applies.
    fn place(&self, at: OpId) -> Place {
        match self.body.op(at).kind {
            OpKind::Escape {
                kind: EscapeKind::LeftOnObject | EscapeKind::LeftOnArgument,
                ..
            } => Place::Return,
            OpKind::Escape { kind, .. } if kind.consumed_on_ambient() => Place::HandOff,
            _ => Place::Use,
        }
    }

    /// The words for `place`: "before this hand-off", "before `f` returns".
    fn place_words(&self, place: Place) -> String {
        match place {
            Place::Use => "before this use".into(),
            Place::HandOff => "before this hand-off".into(),
            Place::Return => format!("before `{}` returns", self.body.name),
        }
    }

    /// `record_stream` of the current stream before `at`, where the value is handed on and
    /// that stream is current there.
    fn record_before_hand_off(&self, buffer: BufferId, how: Production, at: OpId) -> Option<Fix> {
        let ambient = self.body.ambient;
        if self.body.current_at(at) != Some(ambient) || !self.body.returns_to_ambient {
            return None;
        }
        self.record_stream_edit(buffer, how, &[(ambient, at)])
    }

    /// Does the stream's expression name a stream wherever the body runs? The current stream
    /// and an attribute's or a module's stream do (a module's global only in that module, or
    /// through the call that gets it); a parameter may be `None` (a default), a local name may
    /// be bound on some paths only. Fixes that write the others need review.
    fn always_bound(&self, s: StreamId) -> bool {
        let stream = self.body.stream(s);
        match stream.origin {
            StreamOrigin::Ambient | StreamOrigin::Attribute => true,
            StreamOrigin::Global | StreamOrigin::Cached => {
                stream.expr.contains('(')
                    || stream.home.as_deref().is_none_or(|home| {
                        home.rsplit_once('.')
                            .is_some_and(|(module, _)| module == self.body.module)
                    })
            }
            _ => false,
        }
    }

    /// `record_stream` calls for `buffer`, one before the last use on each stream in `uses`
    /// (there the stream is current), where the language has the call. Safe for a tensor a
    /// PyTorch operator made, on streams that are always bound.
    fn record_stream_edit(
        &self,
        buffer: BufferId,
        how: Production,
        uses: &[(StreamId, OpId)],
    ) -> Option<Fix> {
        let mut last: Vec<(StreamId, OpId)> = Vec::new();
        for &(s, u) in uses {
            match last.iter_mut().find(|(t, _)| *t == s) {
                Some(entry) => entry.1 = entry.1.max(u),
                None => last.push((s, u)),
            }
        }
        let mut edits = Vec::new();
        let mut names = Vec::new();
        for &(s, u) in &last {
            if !self.spellable(s, Some(s)) {
                return None;
            }
            names.push(self.body.name_at(buffer, u)?);
            let statement = format!(
                "{}{}",
                self.record_stream_fix(buffer, s, u)?,
                self.body.spelling.statement_end
            );
            edits.push(Edit::InsertLineBefore {
                before: self.span(u),
                statement,
            });
        }
        let streams: Vec<&str> = last.iter().map(|(s, _)| self.stream_name(*s)).collect();
        let tensor = how == Production::Compute || how.allocates();
        let safe = tensor && last.iter().all(|(s, _)| self.always_bound(*s));
        Some(Fix {
            message: format!("record `{}` on {}", names[0], streams.join(" and ")),
            applicability: if safe {
                Applicability::Safe
            } else {
                Applicability::Unsafe
            },
            edits,
        })
    }
}

/// A rule visits every reachable op with the state before it, then may look at the body once.
trait Rule {
    fn code(&self) -> &'static str;
    /// Could the rule report anything in `body`? Bodies no enabled rule applies to are not
    /// analysed at all (most functions of a file run all their work on one stream).
    fn applies_to(&self, body: &Body) -> bool;
    fn visit(&self, cx: &mut Context<'_>, id: OpId, op: &Op, state: &State);
    fn finish(&self, _cx: &mut Context<'_>) {}
}

/// A tensor copied from the host while a side stream was current: SL004 owns its hazards.
fn is_side_stream_transfer(body: &Body, b: &BufferState) -> bool {
    matches!(b.how, Production::HostToDevice { .. }) && b.alloc_stream != body.ambient
}

/// SL004 also owns the lifetime of such a copy where the language tells the allocator about
/// uses (`record_stream`); elsewhere its lifetime is SL001's.
fn transfer_lifetime_is_sl004(body: &Body, b: &BufferState) -> bool {
    is_side_stream_transfer(body, b) && body.spelling.record_stream.is_some()
}

/// The local buffers a scope end releases: allocated in the body, live, and never escaped.
fn released_at_scope_end(body: &Body, state: &State) -> Vec<BufferId> {
    state
        .live_buffers()
        .filter(|(id, b)| !b.escaped && body.buffer(*id).owner == streamlint_graph::Owner::Local)
        .map(|(id, _)| id)
        .collect()
}

/// Places of a finding that are a call lowered in place stand for work inside the callee: say
/// which function did it, so the chain from the caller's line to the helper can be followed.
fn name_inlined_callees(body: &Body, finding: &mut Finding) {
    for label in &mut finding.labels {
        if let Some(callee) = body.inlined_callee(label.span) {
            label.message = format!("{} (inside `{callee}`)", label.message);
        }
    }
    if let Some(callee) = body.inlined_callee(finding.span) {
        let described = finding.labels.iter().any(|l| l.span == finding.span);
        if !described {
            finding.labels.push(Label {
                span: finding.span,
                message: format!("the work is done inside `{callee}`, called here"),
            });
        }
    }
}

/// What judging one body found.
#[derive(Debug, Default)]
pub struct Judgement {
    pub findings: Vec<Finding>,
    /// Findings (by span and rule) that are safe if the named stream keeps the fork/join
    /// discipline, which only the whole run can tell.
    pub relies_on: Vec<(Span, &'static str, StreamKey)>,
    /// The body's blocks of work on long-lived streams, for the run to tell that.
    pub regions: Vec<Region>,
    /// Findings (by span and rule) about the hand-off to callers of a function judged at its
    /// calls (see `Body::judged_at_calls`), with the function's name: the run tells whether
    /// every call of it was judged.
    pub about_callers: Vec<(Span, &'static str, String, AtTheCall)>,
    /// Streams kept in module globals that the body lets go by other names (see
    /// `Body::aliased_streams`): their blocks there are not all seen.
    pub aliased: Vec<StreamKey>,
}

/// Run every enabled rule over one body.
pub fn check_body(body: &Body, enabled: &dyn Fn(&str) -> bool) -> Judgement {
    let all: [&dyn Rule; 10] = [
        &lifetime::MissingRecordStream,
        &record::RecordStreamWrongStream,
        &ordering::MissingStreamWait,
        &transfer::TransferInSideStream,
        &temporary::TemporaryStream,
        &events::WaitBeforeRecord,
        &host::UnsynchronizedHostAccess,
        &set_stream::UnrestoredSetStream,
        &worker::CudaInDataloaderWorker,
        &guard::SyncGuardDroppedEarly,
    ];
    let rules: Vec<&dyn Rule> = all
        .into_iter()
        .filter(|r| enabled(r.code()) && r.applies_to(body))
        .collect();
    if rules.is_empty() {
        return Judgement::default();
    }
    let analysis = Analysis::run(body);
    let mut cx = Context {
        body,
        analysis: &analysis,
        findings: Vec::new(),
        reported: FxHashSet::default(),
        relies_on: Vec::new(),
        about_callers: Vec::new(),
    };
    analysis.walk(|id, op, state| {
        for rule in &rules {
            rule.visit(&mut cx, id, op, state);
        }
    });
    for rule in &rules {
        rule.finish(&mut cx);
    }
    let mut findings = cx.findings;
    // A hazard wholly inside a callee lowered in place is the callee's, reported there.
    findings.retain(|f| {
        !body.inside_one_call(std::iter::once(f.span).chain(f.labels.iter().map(|l| l.span)))
    });
    for f in &mut findings {
        name_inlined_callees(body, f);
    }
    findings.sort_by_key(|f| (f.span, f.code));
    findings.dedup_by(|a, b| a.span == b.span && a.code == b.code);
    let relies_on = cx
        .relies_on
        .into_iter()
        .filter(|(span, code, _)| findings.iter().any(|f| f.span == *span && f.code == *code))
        .collect();
    let regions = if enabled("SL001") {
        discipline::regions(body)
    } else {
        Vec::new()
    };
    let about_callers = cx
        .about_callers
        .iter()
        .filter(|(span, code, _)| findings.iter().any(|f| f.span == *span && f.code == *code))
        .map(|&(span, code, needs)| (span, code, body.name.clone(), needs))
        .collect();
    let aliased = body
        .aliased_streams
        .iter()
        .filter_map(|&s| discipline::stream_key(body, s))
        .collect();
    Judgement {
        findings,
        relies_on,
        regions,
        aliased,
        about_callers,
    }
}
