//! Which of an object's streams a method may make wait for other work.
//!
//! A stream a class makes for itself (`self.gather = torch.cuda.Stream()`) that no code ever
//! makes wait runs what is queued on it as soon as it can: a method that reads its caller's
//! tensors there without waiting races the caller's work, and no caller can have ordered it
//! (see `ClassSummary::unordered_own_stream`). Which streams a method may order is read from its
//! syntax: a wait on the stream (`self.s.wait_stream(..)`, `self.s.wait_event(e)`, `e.wait(self.s)`,
//! a wait on the current stream inside a block of it), through local names bound to it
//! (`stream = self.s`), and any use that hands the stream to code not followed (an argument of
//! an unknown call, an item of a collection, a return value, an attribute of another object),
//! where it may be ordered out of sight. Attributes assigned anything but a new stream (or a
//! constant, `None` until first use) may hold a stream someone else orders: they count too.

use std::sync::OnceLock;

use memchr::memmem;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::api::{ApiCall, ApiModel};
use crate::names::Imports;
use crate::summary::call_kind;
use crate::syntax::is_name_byte;
use crate::syntax::{visit_exprs, visit_statement_exprs, Expr, FunctionDef, Stmt};

/// Calls that take a stream as an argument without ordering it after other work: entering it,
/// waiting for it, recording it.
const STREAM_TAKING: &[&str] = &[
    "wait_stream",
    "record_stream",
    "record",
    "record_event",
    "set_stream",
];

/// Those of the stream attributes `streams` (`self.<name>`, by name) that method `f` may make
/// wait for other work, hands on, or assigns something other than a new stream (see the module
/// doc), as `self.<name>`.
pub fn streams_it_may_order(
    f: &FunctionDef,
    api: &ApiModel,
    imports: &Imports,
    streams: &FxHashSet<&str>,
) -> FxHashSet<String> {
    let mut scan = OrderScan {
        api,
        imports,
        streams,
        aliases: FxHashMap::default(),
        blocks: Vec::new(),
        out: FxHashSet::default(),
        mentions: FxHashMap::default(),
    };
    scan.bind_aliases(&f.body);
    scan.stmts(&f.body);
    // A mention not accounted for by a use that leaves the stream unordered hands it on.
    let mut all: FxHashMap<String, usize> = FxHashMap::default();
    visit_statement_exprs(&f.body, true, &mut |e, _| {
        visit_exprs(e, &mut |x| {
            if let Some(attr) = scan.stream_of(x) {
                *all.entry(attr).or_default() += 1;
            }
        });
    });
    for (attr, n) in all {
        if scan.mentions.get(&attr).copied().unwrap_or(0) < n {
            scan.out.insert(attr);
        }
    }
    scan.out
}

struct OrderScan<'a> {
    api: &'a ApiModel,
    imports: &'a Imports,
    /// The stream attributes asked about, by name.
    streams: &'a FxHashSet<&'a str>,
    /// Local names bound to a stream attribute (`stream = self.reduction_stream`).
    aliases: FxHashMap<String, String>,
    /// The attributes whose stream blocks enclose the statement.
    blocks: Vec<String>,
    out: FxHashSet<String>,
    /// Mentions of each attribute (directly or through an alias) in uses that do not order it.
    mentions: FxHashMap<String, usize>,
}

impl OrderScan<'_> {
    /// The attribute a name or `self.x` expression denotes, as `self.x`.
    fn stream_of(&self, e: &Expr) -> Option<String> {
        stream_of(self.streams, &self.aliases, e)
    }

    /// `stream = self.s` and `stream = self.s if overlap else current`: local names for it.
    fn bind_aliases(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Assign { targets, value, .. } => {
                    if let [Expr::Name { id, .. }] = targets.as_slice() {
                        if let Some(attr) = alias_value(value)
                            .into_iter()
                            .find_map(|v| self.stream_of(v))
                        {
                            self.aliases.insert(id.clone(), attr);
                        }
                    }
                }
                Stmt::Def(d) => self.bind_aliases(&d.body),
                other => other
                    .blocks()
                    .into_iter()
                    .for_each(|b| self.bind_aliases(b)),
            }
        }
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Def(d) => self.stmts(&d.body),
            Stmt::Assign { targets, value, .. } => {
                for t in targets {
                    let Some(attr) = self.stream_of(t) else {
                        continue;
                    };
                    // `self.s = ...` binds it: to a new stream, or to one that may be another's.
                    // `self.s = None` until it is made on first use binds no stream. A stream a
                    // new object of the module hands out (`SideStream().get()`) is judged where
                    // the module's classes are known (`ClassSummary::resolve_held_streams`).
                    let kept = matches!(value, Expr::Constant { .. })
                        || call_kind(self.api, self.imports, value) == Some(ApiCall::StreamFactory)
                        || crate::summary::method_of_new_object(value).is_some();
                    if matches!(t, Expr::Attribute { .. }) && !kept {
                        self.out.insert(attr.clone());
                    }
                    *self.mentions.entry(attr).or_default() += 1;
                }
                // An alias's value.
                if let [Expr::Name { id, .. }] = targets.as_slice() {
                    if self.aliases.contains_key(id) {
                        for v in alias_value(value) {
                            if let Some(attr) = self.stream_of(v) {
                                *self.mentions.entry(attr).or_default() += 1;
                            }
                        }
                    }
                }
                self.expr(value);
            }
            Stmt::With { items, body } => {
                let mut pushed = 0;
                for item in items {
                    let entered = match &item.context {
                        Expr::Call { args, .. } => args.first().and_then(|a| self.stream_of(a)),
                        _ => None,
                    };
                    let kind = call_kind(self.api, self.imports, &item.context);
                    if let (Some(ApiCall::StreamContext), Some(attr)) = (kind, entered) {
                        self.blocks.push(attr);
                        pushed += 1;
                    }
                    self.expr(&item.context);
                }
                self.stmts(body);
                self.blocks.truncate(self.blocks.len() - pushed);
            }
            Stmt::If { test, .. } | Stmt::While { test, .. } | Stmt::Assert { test, .. } => {
                // `if self.s is not None:`: a test of the object, not a use of the stream.
                visit_exprs(test, &mut |x| {
                    if let Some(attr) = stream_of(self.streams, &self.aliases, x) {
                        *self.mentions.entry(attr).or_default() += 1;
                    }
                });
                stmt.blocks().into_iter().for_each(|b| self.stmts(b));
            }
            Stmt::Return { value: Some(v), .. } => self.expr(v),
            Stmt::Expr(e) => self.expr(e),
            Stmt::For { iter, .. } => {
                self.expr(iter);
                stmt.blocks().into_iter().for_each(|b| self.stmts(b));
            }
            other => other.blocks().into_iter().for_each(|b| self.stmts(b)),
        }
    }

    /// The calls in `e`: waits that order a stream attribute, and uses that do not.
    fn expr(&mut self, e: &Expr) {
        let cx = CallContext {
            api: self.api,
            imports: self.imports,
            streams: self.streams,
            aliases: &self.aliases,
            block: self.blocks.last().map(String::as_str),
        };
        let (out, mentions) = (&mut self.out, &mut self.mentions);
        visit_exprs(e, &mut |x| cx.call(x, out, mentions));
    }
}

/// What a call needs to know of where it stands.
struct CallContext<'a> {
    api: &'a ApiModel,
    imports: &'a Imports,
    streams: &'a FxHashSet<&'a str>,
    aliases: &'a FxHashMap<String, String>,
    /// The attribute whose stream block encloses the call.
    block: Option<&'a str>,
}

impl CallContext<'_> {
    /// A wait that orders a stream attribute goes to `out`; a use that does not, to `mentions`.
    fn call(
        &self,
        call: &Expr,
        out: &mut FxHashSet<String>,
        mentions: &mut FxHashMap<String, usize>,
    ) {
        let Expr::Call {
            func,
            args,
            keywords,
            ..
        } = call
        else {
            return;
        };
        let method = match func.as_ref() {
            Expr::Attribute { value, attr, .. } => Some((value.as_ref(), attr.as_str())),
            _ => None,
        };
        let in_block = self.block.map(str::to_string);
        if let Some((receiver, name)) = method {
            let current =
                call_kind(self.api, self.imports, receiver) == Some(ApiCall::CurrentStream);
            match (name, stream_of(self.streams, self.aliases, receiver)) {
                ("wait_stream" | "wait_event", Some(attr)) => {
                    out.insert(attr);
                }
                ("wait_stream" | "wait_event", None) if current => out.extend(in_block),
                ("wait", event) => {
                    // `self.ready.wait(..)`: the event is not handed on.
                    if let Some(event) = event {
                        *mentions.entry(event).or_default() += 1;
                    }
                    match args
                        .first()
                        .and_then(|a| stream_of(self.streams, self.aliases, a))
                    {
                        Some(attr) => {
                            out.insert(attr);
                        }
                        None if args.is_empty() => out.extend(in_block),
                        None => {}
                    }
                }
                // `self.s.query()`, `self.s.synchronize()`: the receiver is not handed on.
                (_, Some(attr)) => *mentions.entry(attr).or_default() += 1,
                _ => {}
            }
        }
        let takes_streams = method.is_some_and(|(_, name)| STREAM_TAKING.contains(&name))
            || matches!(
                call_kind(self.api, self.imports, call),
                Some(ApiCall::StreamContext | ApiCall::SetStream)
            );
        if takes_streams {
            let passed = args.iter().chain(keywords.iter().map(|k| &k.value));
            for attr in passed.filter_map(|a| stream_of(self.streams, self.aliases, a)) {
                *mentions.entry(attr).or_default() += 1;
            }
        }
    }
}

/// The stream attribute a name or `self.x` expression denotes, as `self.x`: one of `streams`.
fn stream_of(
    streams: &FxHashSet<&str>,
    aliases: &FxHashMap<String, String>,
    e: &Expr,
) -> Option<String> {
    match e {
        Expr::Name { id, .. } => aliases.get(id).cloned(),
        Expr::Attribute { value, attr, .. }
            if streams.contains(attr.as_str())
                && matches!(value.as_ref(), Expr::Name { id, .. } if id == "self") =>
        {
            Some(format!("self.{attr}"))
        }
        _ => None,
    }
}

/// The expressions an assignment to a local name may bind it to: both sides of `a if c else b`.
fn alias_value(value: &Expr) -> Vec<&Expr> {
    match value {
        Expr::IfExp { body, orelse, .. } => vec![body, orelse],
        other => vec![other],
    }
}

/// The stream attributes a module's text may order on objects other than `self`: the last
/// name of `obj.x` in `obj.x.wait_stream(`, `obj.x.wait_event(`, `e.wait(obj.x)` and
/// `.stream(obj.x)` (a block of another object's stream, where a wait orders it). A byte scan,
/// as generous as the call index: a class whose own stream of that name is never ordered by
/// its own code may still be ordered by these.
pub fn streams_of_others_ordered(text: &[u8]) -> Vec<String> {
    static WAIT: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    static STREAM: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    let wait = WAIT.get_or_init(|| memmem::Finder::new(".wait"));
    let stream = STREAM.get_or_init(|| memmem::Finder::new(".stream("));
    let mut out: Vec<String> = Vec::new();
    let mut add = |chain: &[u8]| {
        let chain = std::str::from_utf8(chain).unwrap_or_default().trim();
        let Some((owner, last)) = chain.rsplit_once('.') else {
            return;
        };
        let identifier = |s: &str| !s.is_empty() && s.bytes().all(is_name_byte);
        if owner != "self" && identifier(last) && !out.iter().any(|o| o == last) {
            out.push(last.to_string());
        }
    };
    // The first argument of a call whose `(` is at `open`.
    let first_argument = |open: usize| {
        let args = &text[open + 1..];
        let end = args
            .iter()
            .position(|&b| matches!(b, b',' | b')' | b'\n'))
            .unwrap_or(0);
        &args[..end]
    };
    for at in wait.find_iter(text) {
        let rest = &text[at + ".wait".len()..];
        if rest.starts_with(b"_stream(") || rest.starts_with(b"_event(") {
            add(chain_before(text, at));
        } else if rest.starts_with(b"(") {
            add(first_argument(at + ".wait".len()));
        }
    }
    for at in stream.find_iter(text) {
        add(first_argument(at + ".stream".len()));
    }
    out
}

/// The dotted chain (`self.engine.stream`) that ends just before `at`.
fn chain_before(text: &[u8], at: usize) -> &[u8] {
    let start = text[..at]
        .iter()
        .rposition(|&b| !(is_name_byte(b) || b == b'.'))
        .map_or(0, |p| p + 1);
    &text[start..at]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{first_method, parse_module};

    /// What the first method of the first class in `source` may order, sorted.
    fn ordered(source: &str) -> Vec<String> {
        let module = parse_module(source).unwrap();
        let f = first_method(&module);
        let imports = Imports::collect(&module);
        let streams: FxHashSet<&str> = ["side", "other"].into_iter().collect();
        let mut found: Vec<String> =
            streams_it_may_order(f, &ApiModel::default(), &imports, &streams)
                .into_iter()
                .collect();
        found.sort();
        found
    }

    fn method(body: &str) -> String {
        format!("import torch\nclass C:\n    def m(self, x):\n{body}")
    }

    #[test]
    fn entering_recording_and_testing_a_stream_order_nothing() {
        let body = "        if self.side is None:\n            self.side = torch.cuda.Stream()\n        with torch.cuda.stream(self.side):\n            y = x * 2\n            self.done.record(self.side)\n        x.record_stream(self.side)\n        torch.cuda.current_stream().wait_stream(self.side)\n        return y\n";
        assert!(ordered(&method(body)).is_empty());
    }

    #[test]
    fn waits_on_the_stream_order_it_also_through_a_local_name_and_inside_its_block() {
        let direct = "        self.side.wait_stream(torch.cuda.current_stream())\n";
        assert_eq!(ordered(&method(direct)), ["self.side"]);
        let aliased = "        s = self.side if x else torch.cuda.current_stream()\n        s.wait_event(self.ready)\n";
        assert_eq!(ordered(&method(aliased)), ["self.side"]);
        let in_block = "        with torch.cuda.stream(self.side):\n            torch.cuda.current_stream().wait_stream(self.main)\n";
        assert_eq!(ordered(&method(in_block)), ["self.side"]);
        let event = "        self.ready.wait(self.side)\n";
        assert_eq!(ordered(&method(event)), ["self.side"]);
    }

    #[test]
    fn a_stream_handed_on_or_rebound_may_be_ordered_out_of_sight() {
        let handed = "        register(self.side)\n";
        assert_eq!(ordered(&method(handed)), ["self.side"]);
        let returned = "        return self.side\n";
        assert_eq!(ordered(&method(returned)), ["self.side"]);
        let rebound = "        self.side = x\n";
        assert_eq!(ordered(&method(rebound)), ["self.side"]);
        let listed = "        self.streams = [self.side, self.other]\n";
        assert_eq!(ordered(&method(listed)), ["self.other", "self.side"]);
    }

    #[test]
    fn other_objects_streams_ordered_in_a_module_are_found_by_name() {
        let text = b"pipe.normalizer.side.wait_stream(cur)\nself.own.wait_stream(cur)\nev.wait(worker.copy_stream)\nwith torch.cuda.stream(self.mine):\n    pass\nwith torch.cuda.stream(engine.comm, ):\n    pass\ntorch.cuda.current_stream().wait_event(e)\n";
        let mut found = streams_of_others_ordered(text);
        found.sort();
        assert_eq!(found, ["comm", "copy_stream", "side"]);
    }
}
