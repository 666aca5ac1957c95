//! Help text that a user can follow word for word: every value its code names is live where
//! the advice applies. A tensor whose `record_stream` it asks for is held by that name there
//! (by the graph's bindings, not an attribute rebound since); a stream it waits on or records
//! is bound there.

mod support;

use streamlint_graph::{Body, BufferId, OpId, StreamOrigin};
use support::{all_fixture_files, fixture_files};

/// A dotted name in a help's code, and what the code does with it.
#[derive(Debug, PartialEq)]
enum Reference {
    /// `t.record_stream(..)`: a tensor.
    Recorded(String),
    /// Any other name: a stream, an event, a function.
    Named(String),
}

/// The text between backticks: what the help spells as code.
fn code_spans(help: &str) -> impl Iterator<Item = &str> {
    help.split('`').skip(1).step_by(2)
}

/// The dotted names a piece of code refers to; the methods called on them are not names.
fn references(code: &str) -> Vec<Reference> {
    let bytes = code.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts =
            (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') && (i == 0 || !word(bytes[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word(bytes[i]) {
            i += 1;
        }
        let chain = code[start..i].trim_end_matches('.');
        let called = bytes.get(i) == Some(&b'(');
        match (called, chain.rsplit_once('.')) {
            (true, Some((receiver, "record_stream"))) => {
                out.push(Reference::Recorded(receiver.to_string()))
            }
            (true, Some((receiver, _))) => out.push(Reference::Named(receiver.to_string())),
            // A function the module defines (`aux_stream()`).
            (true, None) => {}
            (false, _) => out.push(Reference::Named(chain.to_string())),
        }
    }
    out
}

/// Names the help itself introduces (`event`, `s = torch.cuda.Stream()`), the language's
/// keywords and the APIs' names, not values of the program.
fn introduced(help: &str, name: &str) -> bool {
    const WORDS: &[&str] = &[
        "torch",
        "self",
        "event",
        "_guard",
        "ptr",
        "with",
        "let",
        "finally",
        "record_stream",
        "wait_stream",
        "synchronize",
        "non_blocking",
        "False",
        "True",
        "None",
        "DataLoader",
        "pin_memory",
        "join",
        "cur",
        "__init__",
    ];
    let root = name.split('.').next().unwrap_or(name);
    (WORDS.contains(&root) && (root != "self" || name == "self"))
        || help.contains(&format!("`{name} = "))
        || help.contains(&format!("({name}, "))
}

/// The tensors `name` holds just before `at`, by the graph's bindings: its latest binding.
fn held_at(body: &Body, name: &str, at: OpId) -> Option<Vec<BufferId>> {
    body.bindings
        .iter()
        .rfind(|n| n.from <= at && &*n.name == name)
        .map(|n| n.tensors.clone())
}

/// What is wrong with the name `reference` in a help given at `at` about the ops `touched`.
fn dead_reference(
    body: &Body,
    help: &str,
    reference: &Reference,
    at: OpId,
    touched: &[BufferId],
) -> Option<String> {
    match reference {
        Reference::Recorded(name) => {
            let held = match held_at(body, name, at) {
                Some(held) => held,
                // A name the frontend never bound to a tensor: the buffer's own spelled name.
                None => body
                    .buffers
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.spelled && b.name == *name)
                    .map(|(i, _)| BufferId(i as u32))
                    .filter(|b| !body.bindings.iter().any(|n| n.tensors.contains(b)))
                    .collect(),
            };
            (!held.iter().any(|b| touched.contains(b)))
                .then(|| format!("`{name}` does not hold the tensor there"))
        }
        Reference::Named(name) if introduced(help, name) || *name == body.name => None,
        // `_branch_stream(q.device)`: a stream the help names by the getter call that gave
        // it, spelled as the function wrote that call; its arguments are the function's there.
        Reference::Named(name)
            if body.streams.iter().any(|s| {
                s.expr.contains('(') && s.expr.contains(name.as_str()) && help.contains(&*s.expr)
            }) =>
        {
            None
        }
        Reference::Named(name) => {
            let position = body.op(at).span.start;
            // `self.alt_streams[1]`, `ctx.per_thread_stream()`: named by their container.
            let stream = body.streams.iter().find(|s| {
                s.expr == *name
                    || s.expr
                        .strip_prefix(name.as_str())
                        .is_some_and(|r| r.starts_with('[') || r.starts_with('.'))
            });
            let event = body.events.iter().find(|e| e.expr == *name);
            let live = match (stream, event) {
                (Some(s), _) => match s.origin {
                    StreamOrigin::Created | StreamOrigin::Temporary | StreamOrigin::Unknown => {
                        s.span.is_none_or(|made| made.start <= position)
                    }
                    _ => true,
                },
                (None, Some(e)) => e.created.is_none_or(|made| made.start <= position),
                // A tensor named as a whole (`x` in "call `x.record_stream(s)`" is above), or
                // the container the finding's item was taken from (`pending` for `pending[…]`).
                (None, None) => {
                    held_at(body, name, at).is_some_and(|h| !h.is_empty())
                        || touched.iter().any(|b| {
                            body.buffer(*b).name.strip_suffix("[…]") == Some(name.as_str())
                        })
                }
            };
            (!live).then(|| format!("`{name}` is not bound there"))
        }
    }
}

/// The ops a finding shows (at its place and its labels): where its advice applies. Else the
/// last op before its place.
fn finding_ops(body: &Body, finding: &streamlint_rules::Finding) -> Vec<OpId> {
    let shown = |span| span == finding.span || finding.labels.iter().any(|l| l.span == span);
    let ops = || {
        body.ops
            .iter()
            .enumerate()
            .map(|(i, op)| (OpId(i as u32), op))
    };
    let at: Vec<OpId> = ops()
        .filter(|(_, op)| shown(op.span))
        .map(|(i, _)| i)
        .collect();
    if !at.is_empty() {
        return at;
    }
    ops()
        .filter(|(_, op)| op.span.start <= finding.span.start && op.span != Default::default())
        .max_by_key(|(_, op)| op.span.start)
        .map(|(i, _)| i)
        .into_iter()
        .collect()
}

#[test]
fn help_names_only_values_live_where_it_applies() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in all_fixture_files() {
        let is_python = path.extension().is_some_and(|x| x == "py");
        let source = std::fs::read_to_string(&path).unwrap();
        let deadline = streamlint_graph::Deadline::NONE;
        let bodies = if is_python {
            let api = streamlint_python::ApiModel::default();
            streamlint_python::lower_source(&source, &api, deadline).ok()
        } else {
            streamlint_rust::lower_source(&source, deadline).ok()
        };
        let Some(bodies) = bodies else { continue };
        for body in &bodies {
            for finding in streamlint_rules::check_body(body, &|_| true).findings {
                let Some(help) = &finding.help else { continue };
                let at = finding_ops(body, &finding);
                let touched: Vec<BufferId> = at
                    .iter()
                    .filter_map(|&i| body.op(i).kind.buffer())
                    .collect();
                for reference in code_spans(help).flat_map(references) {
                    checked += 1;
                    let dead = at
                        .iter()
                        .map(|&i| dead_reference(body, help, &reference, i, &touched))
                        .reduce(|a, b| a.and(b))
                        .flatten();
                    if let Some(why) = dead {
                        failures.push(format!(
                            "{}: {} in `{}`: {why}\n    help: {help}",
                            path.display(),
                            finding.code,
                            body.name
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 200, "only {checked} names checked");
    assert!(
        failures.is_empty(),
        "{} help texts name values not live where they apply:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn references_are_read_from_code() {
    use Reference::*;
    assert_eq!(
        references("batch.record_stream(torch.cuda.current_stream())"),
        [Recorded("batch".into()), Named("torch.cuda".into())]
    );
    assert_eq!(
        references("self.copy.wait_stream(side)"),
        [Named("self.copy".into()), Named("side".into())]
    );
    assert_eq!(
        references("main.join(&side)?"),
        [Named("main".into()), Named("side".into())]
    );
    assert_eq!(references("aux_stream()"), []);
}

/// Where a help text places the statements it spells, as a line of the file: before the line of
/// the finding, or before the `with` line of the block around it. `None` where the help says it
/// in words only (or places it somewhere a line number does not capture).
fn help_line(help: &str, source: &str, line: usize) -> Option<usize> {
    let lines: Vec<&str> = source.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    if help.contains("before the `with` block") {
        let own = indent(lines.get(line)?);
        return (0..line)
            .rev()
            .find(|&i| lines[i].trim_start().starts_with("with ") && indent(lines[i]) < own);
    }
    let here = [
        "before this use",
        "before using the tensor",
        "before this hand-off",
        "before it is freed or handed on",
        "before handing it over",
    ];
    // A part said in words cannot be followed word for word.
    let in_words = help.contains("`record_stream` of");
    (!in_words && here.iter().any(|p| help.contains(p))).then_some(line)
}

/// The statements a help spells, in order: its code that calls a stream or a tensor method.
fn help_statements(help: &str) -> Vec<&str> {
    const CALLS: &[&str] = &[".record_stream(", ".wait_stream(", ".wait_event("];
    code_spans(help)
        .filter(|c| c.ends_with(')') && CALLS.iter().any(|m| c.contains(m)))
        .collect()
}

/// Following a help that spells its statements and says where they go removes the finding and
/// brings none: the statements inserted there as written, the file checked again. The helps of
/// findings on one line are followed together (a hand-off of two tensors needs both records).
#[test]
fn help_followed_word_for_word_removes_its_finding() {
    let settings = streamlint_linter::Settings::default();
    let mut failures = Vec::new();
    let mut followed = 0;
    for path in fixture_files("python", "py") {
        let source = std::fs::read_to_string(&path).unwrap();
        let before = streamlint_linter::check_source(&path, &source, &settings);
        let index = streamlint_rules::LineIndex::new(&source);
        // Line of the finding → (where the statements go, the statements, the findings).
        let mut groups: std::collections::BTreeMap<usize, (usize, Vec<&str>, Vec<&str>)> =
            Default::default();
        for finding in before.iter().filter(|f| f.fix.is_none()) {
            let Some(help) = &finding.help else { continue };
            let line = index.position(finding.span.start).row - 1;
            let Some(at) = help_line(help, &source, line) else {
                continue;
            };
            // Alternatives (`..., or ...`) are each enough: the first is followed.
            let statements = help_statements(&help[..help.find(", or").unwrap_or(help.len())]);
            if statements.is_empty() {
                continue;
            }
            let group = groups.entry(line).or_insert((at, Vec::new(), Vec::new()));
            for s in statements {
                if !group.1.contains(&s) {
                    group.1.push(s);
                }
            }
            group.2.push(finding.code);
        }
        for (at, statements, codes) in groups.values() {
            let mut lines: Vec<String> = source.lines().map(str::to_string).collect();
            let indent: String = lines[*at]
                .chars()
                .take_while(|c| c.is_whitespace())
                .collect();
            for (k, s) in statements.iter().enumerate() {
                lines.insert(at + k, format!("{indent}{s}"));
            }
            let after = lines.join("\n") + "\n";
            let again = streamlint_linter::check_source(&path, &after, &settings);
            followed += 1;
            let count = |fs: &[streamlint_rules::Finding], code: &str| {
                fs.iter().filter(|f| f.code == code).count()
            };
            for code in codes {
                let fixed = codes.iter().filter(|c| *c == code).count();
                if count(&again, code) + fixed > count(&before, code) {
                    failures.push(format!(
                        "{}: {code} remains after following {statements:?}",
                        path.display()
                    ));
                }
            }
            for new in again
                .iter()
                .filter(|f| !before.iter().any(|b| b.code == f.code))
            {
                failures.push(format!(
                    "{}: following {statements:?} brings {}: {}",
                    path.display(),
                    new.code,
                    new.message
                ));
            }
        }
    }
    assert!(followed >= 15, "only {followed} helps followed");
    assert!(
        failures.is_empty(),
        "{} helps do not hold when followed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
