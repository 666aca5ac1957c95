//! Flags: names whose tests agree on every path (`if overlap:` ... `if overlap:`), so that
//! paths taking one branch of the first and the other of the second are not lowered.

use super::*;
use crate::syntax::is_name_byte;

/// Names a function body binds exactly once, to `True` or `False` (a disabled experiment, a
/// feature switch): the branches they guard are decided. Nested functions are scopes of their
/// own and are not looked into.
pub(super) fn constant_flags(body: &[Stmt]) -> FxHashMap<String, bool> {
    bindings(body)
        .into_iter()
        .filter_map(|(name, (count, value))| (count == 1).then_some((name, value?)))
        .collect()
}

/// Every name `body` binds (assignments, loop and `with` targets, at any depth), with how many
/// bindings and, for an assignment, the `True`/`False` it binds (if it is one).
pub(super) fn bindings(body: &[Stmt]) -> FxHashMap<String, (usize, Option<bool>)> {
    fn bind(
        bound: &mut FxHashMap<String, (usize, Option<bool>)>,
        target: &Expr,
        value: Option<bool>,
    ) {
        match target {
            Expr::Name { id, .. } => bound.entry(id.clone()).or_insert((0, value)).0 += 1,
            // Unpacking binds each name to something not known here.
            Expr::Collection { elts, .. } => elts.iter().for_each(|e| bind(bound, e, None)),
            _ => {}
        }
    }
    fn walk(stmts: &[Stmt], bound: &mut FxHashMap<String, (usize, Option<bool>)>) {
        for s in stmts {
            match s {
                Stmt::Assign {
                    targets,
                    value,
                    augmented,
                    ..
                } => {
                    let constant = match value {
                        Expr::Constant {
                            value: Constant::Bool(b),
                            ..
                        } if !augmented => Some(*b),
                        _ => None,
                    };
                    targets.iter().for_each(|t| bind(bound, t, constant));
                }
                Stmt::For { target, .. } => bind(bound, target, None),
                Stmt::With { items, .. } => items
                    .iter()
                    .filter_map(|i| i.var.as_ref())
                    .for_each(|v| bind(bound, v, None)),
                // `global`/`nonlocal` and other statements bind nothing the walk can see;
                // a name that is also bound elsewhere is not a flag.
                _ => {}
            }
            s.blocks().into_iter().for_each(|block| walk(block, bound));
        }
    }
    let mut bound = FxHashMap::default();
    walk(body, &mut bound);
    bound
}

/// The flags that `if` and `elif` tests of `stmts` are made of (`if overlap:`, `if not overlap:`,
/// `if self.indexer is not None and side is not None:`), at any depth of nested blocks but not
/// in nested functions.
pub(super) fn tested_flags(stmts: &[Stmt], cx: &ModuleContext, out: &mut Vec<String>) {
    for s in stmts {
        // `stream = self.side if self.use_streams else current`: a choice made by a flag.
        if let Stmt::Assign {
            value: Expr::IfExp { test, .. },
            ..
        } = s
        {
            flags_of_test(test, cx, out);
        }
        if let Stmt::If {
            test, body, orelse, ..
        } = s
        {
            let mut found = Vec::new();
            flags_of_test(test, cx, &mut found);
            // `if side is not None: main.wait_stream(side)` is taken as run (see
            // `orders_only_what_it_tests`).
            if orelse.is_empty() && orders_only_what_it_tests(test, body, &FxHashMap::default()) {
                found.retain(|key| !key.ends_with(IS_NONE));
            }
            out.extend(found);
        }
        s.blocks()
            .into_iter()
            .for_each(|block| tested_flags(block, cx, out));
    }
}

/// The flags a test is made of: itself, what it negates, and each operand of an `and`.
fn flags_of_test(test: &Expr, cx: &ModuleContext, out: &mut Vec<String>) {
    match test {
        Expr::Operator {
            op: Operator::Not | Operator::And,
            operands,
            ..
        } => operands.iter().for_each(|o| flags_of_test(o, cx, out)),
        other => out.extend(flag_key(other, cx)),
    }
}

/// The conjuncts of a test that are flags, each with the value its flag takes where the
/// conjunct holds: `a and not b and x is not None` gives `(a, true)`, `(b, false)`,
/// `(x is None, false)`. Conjuncts that are not flags are left out.
fn conjunct_literals(test: &Expr, cx: &ModuleContext, out: &mut Vec<(String, bool)>) {
    match test {
        Expr::Operator {
            op: Operator::And,
            operands,
            ..
        } => operands.iter().for_each(|o| conjunct_literals(o, cx, out)),
        Expr::Operator {
            op: Operator::Not,
            operands,
            ..
        } => {
            if let [atom] = operands.as_slice() {
                out.extend(flag_key(atom, cx).map(|k| (k, false)));
            }
        }
        Expr::Operator {
            op: Operator::IsNot,
            ..
        } => out.extend(flag_key(test, cx).map(|k| (k, false))),
        other => out.extend(flag_key(other, cx).map(|k| (k, true))),
    }
}

/// The tests of `stmt` (its `if`/`elif` tests at any depth, a conditional expression choosing
/// what it assigns), in the order they run.
fn tests_of<'s>(stmt: &'s Stmt, out: &mut Vec<&'s Expr>) {
    match stmt {
        Stmt::Assign {
            value: Expr::IfExp { test, .. },
            ..
        } => out.push(test),
        Stmt::If { test, .. } => out.push(test),
        _ => {}
    }
    for block in stmt.blocks() {
        block.iter().for_each(|s| tests_of(s, out));
    }
}

/// The name under which a test is a flag: a local name (`overlap`), an attribute of the object
/// (`self.overlap_comm`: a setting where the class assigns it only when it is built, see
/// `Lowerer::setting`), a setting's getter (`envs.USE_MULTI_STREAM.get()`), a question asked
/// without arguments (`is_capturing()`, `get_accelerator().resolves_data_dependency()`), or
/// whether a name or an attribute is `None` (`self.indexer is not None`: a part the object was
/// built with or without). Two tests with one key agree within a block that does not assign what
/// they test; other attributes and calls can change in between, so they are not flags.
pub(super) fn flag_key(test: &Expr, cx: &ModuleContext) -> Option<String> {
    match test {
        Expr::Name { id, .. } => Some(id.clone()),
        // `self.overlap_comm`, and a part's setting (`self.rotary_emb.is_neox_style`): the
        // object holds the part for its lifetime (see `Lowerer::setting`).
        Expr::Attribute { .. } => test.dotted().filter(|d| d.starts_with("self.")),
        Expr::Operator {
            op: Operator::Arithmetic,
            operands,
            ..
        } => comparison_key(operands, cx),
        Expr::Call {
            func,
            args,
            keywords,
            ..
        } if args.is_empty() && keywords.is_empty() => {
            if let Some(getter) = func
                .dotted()
                .filter(|d| !d.starts_with("self.") && d.ends_with(".get"))
            {
                return Some(format!("{getter}()"));
            }
            question_key(test)
        }
        Expr::Operator {
            op: Operator::Is | Operator::IsNot,
            operands,
            ..
        } => match operands.as_slice() {
            [x, Expr::Constant {
                value: Constant::None,
                ..
            }] => Some(format!("{}{IS_NONE}", x.dotted()?)),
            _ => None,
        },
        _ => None,
    }
}

/// `k > 0`, `x.shape[0] == 0`, `self.num_shared == 0`, `len(batch) > 1`: a comparison of a value
/// the function does not change with a constant, keyed by its text without spaces. Two such
/// tests agree like two tests of one flag.
fn comparison_key(operands: &[Expr], cx: &ModuleContext) -> Option<String> {
    fn constant(e: &Expr) -> bool {
        matches!(
            e,
            Expr::Constant {
                value: Constant::Int(_) | Constant::Str(_) | Constant::Bool(_),
                ..
            }
        )
    }
    fn subject(e: &Expr) -> bool {
        match e {
            Expr::Subscript { value, index, .. } => constant(index) && subject(value),
            Expr::Call {
                func,
                args,
                keywords,
                ..
            } => {
                matches!(func.as_ref(), Expr::Name { id, .. } if id == "len")
                    && keywords.is_empty()
                    && matches!(args.as_slice(), [arg] if subject(arg))
            }
            other => other.dotted().is_some(),
        }
    }
    let [left, right] = operands else {
        return None;
    };
    if !(subject(left) && constant(right) || constant(left) && subject(right)) {
        return None;
    }
    let operator = cx.text(Span::new(left.span().end, right.span().start));
    let operator: Vec<u8> = operator
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    const COMPARISONS: [&[u8]; 6] = [b"==", b"!=", b"<", b"<=", b">", b">="];
    if !COMPARISONS.contains(&operator.as_slice()) {
        return None;
    }
    let text = cx.text(Span::new(left.span().start, right.span().end));
    let key: String = String::from_utf8_lossy(text)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (!key.is_empty()).then_some(key)
}

/// What a flag's key is about: the name or attribute chain it starts with (`self.overlap_comm`
/// for `self.overlap_comm`, `x.shape` for `x.shape[0]>0`, `self.indexer` for `self.indexer is
/// None`).
fn key_subject(key: &str) -> &str {
    let key = key.strip_suffix(IS_NONE).unwrap_or(key);
    let end = key
        .bytes()
        .position(|b| !(is_name_byte(b) || b == b'.'))
        .unwrap_or(key.len());
    &key[..end]
}

/// A call without arguments whose name asks a question of the configuration or the device
/// (`is_in_graph_capture()`, `get_accelerator().resolves_data_dependency()`), written out as its
/// chain of names and empty calls: asked twice in one function, it answers the same.
fn question_key(call: &Expr) -> Option<String> {
    fn chain(e: &Expr, out: &mut String) -> bool {
        match e {
            Expr::Name { id, .. } => {
                out.push_str(id);
                true
            }
            Expr::Attribute { value, attr, .. } => {
                let ok = chain(value, out);
                out.push('.');
                out.push_str(attr);
                ok
            }
            Expr::Call {
                func,
                args,
                keywords,
                ..
            } if args.is_empty() && keywords.is_empty() => {
                let ok = chain(func, out);
                out.push_str("()");
                ok
            }
            _ => false,
        }
    }
    let Expr::Call { func, .. } = call else {
        return None;
    };
    let name = match func.as_ref() {
        Expr::Name { id, .. } => id.as_str(),
        Expr::Attribute { attr, .. } => attr.as_str(),
        _ => return None,
    };
    const QUESTIONS: [&str; 8] = [
        "is_",
        "has_",
        "use_",
        "uses_",
        "should_",
        "can_",
        "supports_",
        "resolves_",
    ];
    if !QUESTIONS.iter().any(|q| name.starts_with(q)) {
        return None;
    }
    let mut out = String::new();
    (chain(call, &mut out) && !out.starts_with("self.")).then_some(out)
}

/// How the key of a `None` test ends: the flag is true where the subject is `None`.
const IS_NONE: &str = " is None";

/// Does any statement of `stmts` bind what the flag `key` tests (a name, or the attribute a
/// `None` test is about)?
pub(super) fn assigns(stmts: &[Stmt], key: &str) -> bool {
    let subject = key_subject(key);
    let root = subject.split('.').next().unwrap_or(subject);
    if root != "self" && bindings(stmts).contains_key(root) {
        return true;
    }
    let mut found = false;
    visit_assignments(stmts, &mut |target| {
        found |= target
            .dotted()
            .is_some_and(|t| t == subject || subject.starts_with(&format!("{t}.")));
    });
    found
}

/// Every assignment target of `stmts`, at any depth but not in nested functions.
fn visit_assignments(stmts: &[Stmt], f: &mut impl FnMut(&Expr)) {
    for s in stmts {
        if let Stmt::Assign { targets, .. } = s {
            targets.iter().for_each(&mut *f);
        }
        s.blocks()
            .into_iter()
            .for_each(|block| visit_assignments(block, f));
    }
}

/// Correlated tests split a path at most this many times, one split inside the other (each
/// split lowers the rest of its block twice, so the nesting is what costs).
pub(super) const MAX_FLAG_SPLITS: usize = 2;

/// And a body at most this many times in all: a long function with many pairs of tests would
/// otherwise be lowered over and over.
pub(super) const MAX_SPLITS_PER_BODY: usize = 4;

impl<'a> Lowerer<'a> {
    /// The value a test of flags (`overlap`, `not overlap`, `overlap and x`) takes on the path
    /// being lowered, if the flags decide it without evaluating anything else: `and` and `or`
    /// only by their first operand (which short-circuits the rest) or by all of them.
    pub(super) fn decided_flag(&self, test: &Expr) -> Option<bool> {
        let Expr::Operator { op, operands, .. } = test else {
            return self.flags.get(&flag_key(test, &self.cx)?).copied();
        };
        let short_circuit = match op {
            Operator::Not => return self.decided_flag(operands.first()?).map(|v| !v),
            Operator::Is | Operator::IsNot => {
                let is_none = self
                    .decided_none_test(operands)
                    .or_else(|| self.flags.get(&flag_key(test, &self.cx)?).copied());
                return if *op == Operator::Is {
                    is_none
                } else {
                    is_none.map(|v| !v)
                };
            }
            Operator::Arithmetic => return self.flags.get(&flag_key(test, &self.cx)?).copied(),
            Operator::And => false,
            Operator::Or => true,
            _ => return None,
        };
        // Flags do not change while the test runs, so one operand that decides an `and` (false)
        // or an `or` (true) decides it wherever it stands.
        let values: Vec<Option<bool>> = operands.iter().map(|e| self.decided_flag(e)).collect();
        if values.contains(&Some(short_circuit)) {
            return Some(short_circuit);
        }
        values.iter().all(Option::is_some).then_some(!short_circuit)
    }

    /// `x is None` where the name holds a stream (`stream = get_side_stream()`) or `None`. A
    /// stream that may be `None` on some path counts as there: such tests guard whether the
    /// program uses a side stream at all, and the paths without it have no stream work to judge.
    /// Other values (events, tensors) keep both paths.
    pub(super) fn decided_none_test(&self, operands: &[Expr]) -> Option<bool> {
        let [x, Expr::Constant {
            value: Constant::None,
            ..
        }] = operands
        else {
            return None;
        };
        self.decided_none(&x.dotted()?)
    }

    /// Is the name `None`, as far as what it holds decides (see [`Self::decided_none_test`])?
    fn decided_none(&self, name: &str) -> Option<bool> {
        match self.env.get(name) {
            Some(Value::Stream(_)) => Some(false),
            Some(Value::None) => Some(true),
            // A name already used as a stream here (`with torch.cuda.stream(self._stream)`).
            None if self.named_streams.contains_key(name) => Some(false),
            _ => None,
        }
    }

    /// Flags that the first of `stmts` tests (`if overlap:`, also in a nested `if` or an
    /// `elif`) and a later test of the same block tests again, with no assignment to them in the
    /// block: the tests agree, so the paths that take one branch of the first and the other of
    /// the second cannot run. The flags come as the later test's conjuncts, each with the value
    /// under which it holds (`if a and not b:` gives `(a, true)`, `(b, false)`), to be split on
    /// together (see [`Self::split_on`]).
    pub(super) fn correlated_flags(&self, stmts: &[Stmt]) -> Option<Vec<(String, bool)>> {
        if self.flag_splits >= MAX_FLAG_SPLITS || self.splits_made >= MAX_SPLITS_PER_BODY {
            return None;
        }
        let (first, rest) = stmts.split_first()?;
        let mut here = Vec::new();
        tested_flags(std::slice::from_ref(first), &self.cx, &mut here);
        // Tests already decided (a name holding a stream is not `None`) need no split, nor do
        // tests of whether a stream exists: a stream that may be `None` counts as there (see
        // `decided_none_test`). `None` tests are everywhere (`if bias is not None:`): a split on
        // one is worth its cost only where the first test guards stream code.
        // So are the object's settings and questions to the configuration.
        let guards_stream_code = || self.touches_streams(first);
        here.retain(|n| {
            let needless_split = match n.strip_suffix(IS_NONE) {
                Some(subject) => {
                    self.decided_none(subject).is_some()
                        || inline::stream_like(subject, "")
                        || !guards_stream_code()
                }
                None => (n.starts_with("self.") || n.contains(')')) && !guards_stream_code(),
            };
            !self.flags.contains_key(n) && !needless_split && self.setting(n)
        });
        if here.is_empty() {
            return None;
        }
        // A split pays only where a later test of the flag guards stream code: other tests of it
        // (`if flag: x = x * 2`) decide nothing the rules look at, and splitting on them would
        // use up the splits that correlated stream code needs.
        let mut tests = Vec::new();
        for stmt in rest.iter().filter(|s| self.touches_streams(s)) {
            tests_of(stmt, &mut tests);
        }
        tests.into_iter().find_map(|test| {
            let mut literals = Vec::new();
            conjunct_literals(test, &self.cx, &mut literals);
            literals.retain(|(key, _)| here.contains(key) && !assigns(stmts, key));
            literals.dedup_by(|a, b| a.0 == b.0);
            literals.truncate(MAX_SPLITS_PER_BODY);
            (!literals.is_empty()).then_some(literals)
        })
    }

    /// Does the statement (an `if`, or an assignment choosing by a flag) mention a stream or
    /// an event, or order work (`s.wait_event(e)`, `x.record_stream(s)`, `e.record()`)? A loop,
    /// `with` or `try` does where a statement it holds does.
    fn touches_streams(&self, stmt: &Stmt) -> bool {
        fn orders(stmts: &[Stmt]) -> bool {
            stmts.iter().any(|s| {
                super::is_ordering_stmt(s)
                    || matches!(s, Stmt::Expr(Expr::Call { func, .. })
                        if matches!(func.as_ref(), Expr::Attribute { attr, .. } if attr == "record"))
                    || s.blocks().into_iter().any(orders)
            })
        }
        let chooses_stream = |t: &Expr| {
            let named = match t {
                Expr::Call { func, .. } => func.dotted(),
                other => other.dotted(),
            };
            named.is_some_and(|n| inline::stream_like(n.rsplit('.').next().unwrap_or(&n), ""))
        };
        match stmt {
            // `stream = self.side if overlap else current`: a choice of stream, by the name it
            // is bound to or by what it chooses between (`chosen = self.copy_stream if
            // self.use_streams else self.compute_stream`).
            Stmt::Assign { targets, .. } if targets.iter().any(chooses_stream) => true,
            Stmt::Assign {
                value: Expr::IfExp { body, orelse, .. },
                ..
            } if chooses_stream(body) || chooses_stream(orelse) => true,
            Stmt::If { span, .. } | Stmt::Assign { span, .. } => {
                self.cx.prefilter.admits(self.cx.text(*span)) || orders(std::slice::from_ref(stmt))
            }
            other => other
                .blocks()
                .into_iter()
                .any(|block| block.iter().any(|s| self.touches_streams(s))),
        }
    }

    /// Can a flag keyed `key` change while the body runs, other than by an assignment the body
    /// shows? An attribute of the object (`self.overlap_comm`) is a setting only where its
    /// class assigns it in no method but the constructor: a method called in between could
    /// otherwise flip it.
    fn setting(&self, key: &str) -> bool {
        if !key.starts_with("self.") || key.ends_with(IS_NONE) {
            return true;
        }
        // `self.rotary_emb.is_neox_style`: the part `self.rotary_emb` is what the class holds.
        let subject = key_subject(key);
        let attribute = subject
            .match_indices('.')
            .nth(1)
            .map_or(subject, |(end, _)| &subject[..end]);
        self.class
            .is_some_and(|c| !c.reassigned.iter().any(|r| r == attribute))
    }

    /// Lower `stmts` once per way the conjunction of `literals` can turn out, and join: the
    /// tests of each flag agree on each path. The paths are: all literals hold, or the first `i`
    /// hold and the next fails (the flags after it are left open, both ways lowered where they
    /// are tested). One literal gives the two paths of one flag.
    pub(super) fn split_on(&mut self, literals: Vec<(String, bool)>, stmts: &[Stmt]) {
        // Every path may split as often again: the limit is on splits one inside the other.
        let outer_splits = self.flag_splits;
        self.splits_made += literals.len();
        let from = self.b.current();
        let (env, current, produced) = (self.env.clone(), self.current, self.produced.clone());
        let mut ends = Vec::new();
        let mut produced_on_some_path = produced.clone();
        for failing in (0..=literals.len()).rev() {
            self.branch(from);
            self.env = env.clone();
            self.current = current;
            self.produced = produced.clone();
            for (i, (key, holds)) in literals.iter().enumerate().take(failing + 1) {
                if i < literals.len() {
                    self.flags
                        .insert(key.clone(), if i == failing { !holds } else { *holds });
                }
            }
            self.flag_splits = outer_splits + 1;
            self.stmts(stmts);
            for (key, _) in &literals {
                self.flags.remove(key);
            }
            produced_on_some_path.extend(self.produced.iter().copied());
            ends.push((self.b.current(), std::mem::take(&mut self.env)));
        }
        let join = self.b.new_block();
        for (end, _) in &ends {
            self.b.edge(*end, join);
        }
        self.b.switch_to(join);
        let mut envs = ends.into_iter().map(|(_, env)| env);
        let first = envs.next().unwrap_or_default();
        self.env = envs.fold(first, |merged, env| merge_env(&merged, &env));
        self.produced = produced_on_some_path;
        self.flag_splits = outer_splits;
    }
}

/// How a value is not a device tensor on a branch (see `absent_on_branch`).
#[derive(Copy, Clone, PartialEq, Eq)]
pub(super) enum Absent {
    None,
    HostMemory,
}

/// What a test says is not a device tensor on one of its branches: `None` (`x is not None` on the
/// branch not taken, `x is None` on the branch taken) or host memory (`x.is_cuda`,
/// `x.device.type == "cuda"` on the branch not taken; `not x.is_cuda`, `x.device.type == "cpu"`
/// on the branch taken). `text` is the test's source, which tells `==` from `!=`.
pub(super) fn absent_on_branch(test: &Expr, taken: bool, text: &[u8]) -> Option<(String, Absent)> {
    if let Some((subject, on_device_if_true)) = residence_test(test, text) {
        return (on_device_if_true != taken).then_some((subject, Absent::HostMemory));
    }
    none_on_branch(test, taken).map(|subject| (subject, Absent::None))
}

/// `x.is_cuda` (true: on the device), `not x.is_cuda`, `x.device.type == "cuda"` / `!= "cpu"`
/// and the reverse: the value tested, and whether the test is true where it is on the device.
fn residence_test(test: &Expr, text: &[u8]) -> Option<(String, bool)> {
    match test {
        Expr::Attribute { value, attr, .. } if attr == "is_cuda" => Some((value.dotted()?, true)),
        Expr::Operator {
            op: Operator::Not,
            operands,
            ..
        } => match operands.as_slice() {
            [Expr::Attribute { value, attr, .. }] if attr == "is_cuda" => {
                Some((value.dotted()?, false))
            }
            _ => None,
        },
        Expr::Operator {
            op: Operator::Arithmetic,
            operands,
            ..
        } => {
            let [device_type, kind] = operands.as_slice() else {
                return None;
            };
            let subject = device_type
                .dotted()?
                .strip_suffix(".device.type")?
                .to_string();
            let on_device = match kind.as_str()? {
                "cuda" => true,
                "cpu" => false,
                _ => return None,
            };
            let equal = memchr::memmem::find(text, b"==").is_some();
            let not_equal = memchr::memmem::find(text, b"!=").is_some();
            match (equal, not_equal) {
                (true, false) => Some((subject, on_device)),
                (false, true) => Some((subject, !on_device)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What a test says is `None` on one of its branches (see `absent_on_branch`).
fn none_on_branch(test: &Expr, taken: bool) -> Option<String> {
    let Expr::Operator {
        op: op @ (Operator::Is | Operator::IsNot),
        operands,
        ..
    } = test
    else {
        return None;
    };
    let [subject, Expr::Constant {
        value: Constant::None,
        ..
    }] = operands.as_slice()
    else {
        return None;
    };
    ((*op == Operator::Is) == taken).then(|| subject.dotted())?
}

/// `if side is not None: main.wait_stream(side)`: a body that only orders, under a test that
/// its orderings' own streams, events or handles are there (`is not None`, `isinstance(side,
/// torch.cuda.Stream)`) or are not the current stream (`torch.cuda.current_stream() != side`),
/// directly or through a name bound to such a test (`guards`). Where the stream is `None` or is
/// the current stream, the work a `with stream(side):` queued ran on the current stream and needs
/// no wait: whether a stream exists is not a switch its waits follow. Any other test (`if
/// sync:`) is a path without the ordering.
pub(super) fn orders_only_what_it_tests(
    test: &Expr,
    body: &[Stmt],
    guards: &FxHashMap<String, Vec<String>>,
) -> bool {
    let mut subjects = Vec::new();
    crate::guards::guarded_subjects(test, guards, &mut subjects);
    !subjects.is_empty()
        && !body.is_empty()
        && body.iter().all(|stmt| {
            is_ordering_stmt(stmt) && ordering_operands(stmt).iter().any(|o| subjects.contains(o))
        })
}

/// The dotted names an ordering statement acts on: its receiver's root chain and its arguments
/// (`main.wait_stream(side)`: `main`, `side`).
fn ordering_operands(stmt: &Stmt) -> Vec<String> {
    let Stmt::Expr(Expr::Call { func, args, .. }) = stmt else {
        return Vec::new();
    };
    let mut out: Vec<String> = args.iter().filter_map(Expr::dotted).collect();
    if let Expr::Attribute { value, .. } = func.as_ref() {
        out.extend(value.dotted());
    }
    out
}
