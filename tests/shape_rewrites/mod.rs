//! Rewrites of a Python module whose effect on the linter's verdict is known in advance: the
//! instrument that tells whether a rule follows the hazard or only the spelling it was shown.
//!
//! Each rewrite works on the source text, guided by the parse tree (ruff's parser), so that
//! everything it does not touch (comments, the inline `streamlint-expect` markers) keeps its
//! place on its line: the expectations travel with the code they are about.

use std::collections::{BTreeSet, HashSet};

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ExprContext, Parameters, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

/// A module as one or more files: (file name, source).
pub type Files = Vec<(String, String)>;

/// A rewritten module and what it is named by in the report (a function, a line).
pub struct Variant {
    pub id: String,
    pub files: Files,
}

/// The name every rewrite tests where it needs a condition the analysis cannot decide.
pub const FLAG: &str = "shape_flag";

pub fn parse(source: &str) -> Option<Vec<Stmt>> {
    ruff_python_parser::parse_module(source)
        .ok()
        .map(|p| p.into_suite().into_iter().collect())
}

// ---------------------------------------------------------------------------------------------
// Text edits

struct Edit {
    start: usize,
    end: usize,
    text: String,
}

impl Edit {
    fn insert(at: usize, text: impl Into<String>) -> Edit {
        Edit {
            start: at,
            end: at,
            text: text.into(),
        }
    }
    fn replace(range: impl Ranged, text: impl Into<String>) -> Edit {
        Edit {
            start: range.start().to_usize(),
            end: range.end().to_usize(),
            text: text.into(),
        }
    }
}

/// Apply edits that do not overlap (insertions at one offset keep their order).
fn apply(source: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(source.len() + 256);
    let mut at = 0;
    for e in edits {
        assert!(e.start >= at, "overlapping rewrite edits");
        out.push_str(&source[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&source[at..]);
    out
}

fn line_start(source: &str, offset: usize) -> usize {
    source[..offset].rfind('\n').map_or(0, |i| i + 1)
}

fn line_end(source: &str, offset: usize) -> usize {
    source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i + 1)
}

/// The indentation before `offset`, if only whitespace stands between the line's start and it.
fn indentation(source: &str, offset: usize) -> Option<&str> {
    let before = &source[line_start(source, offset)..offset];
    before
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(before)
}

/// Insert `by` at the start of every non-blank line from the line holding `start` to the line
/// holding `end - 1`.
fn indent_lines(source: &str, start: usize, end: usize, by: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    let mut at = line_start(source, start);
    while at < end {
        let next = line_end(source, at);
        if !source[at..next].trim().is_empty() {
            edits.push(Edit::insert(at, by));
        }
        at = next;
    }
    edits
}

fn apply_slice(source: &str, from: usize, to: usize, edits: Vec<Edit>) -> String {
    let shifted = edits
        .into_iter()
        .map(|e| Edit {
            start: e.start - from,
            end: e.end - from,
            text: e.text,
        })
        .collect();
    apply(&source[from..to], shifted)
}

// ---------------------------------------------------------------------------------------------
// Walks

/// Every function definition of a module, at any depth, with its dotted name.
fn functions(body: &[Stmt]) -> Vec<(String, &StmtFunctionDef)> {
    fn walk<'a>(body: &'a [Stmt], prefix: &str, out: &mut Vec<(String, &'a StmtFunctionDef)>) {
        for s in body {
            match s {
                Stmt::FunctionDef(f) => {
                    let name = format!("{prefix}{}", f.name.id);
                    out.push((name.clone(), f));
                    walk(&f.body, &format!("{name}."), out);
                }
                Stmt::ClassDef(c) => walk(&c.body, &format!("{prefix}{}.", c.name.id), out),
                other => {
                    for block in blocks(other) {
                        walk(block, prefix, out);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(body, "", &mut out);
    out
}

/// The statement lists nested directly in a compound statement (not functions or classes).
fn blocks(stmt: &Stmt) -> Vec<&[Stmt]> {
    match stmt {
        Stmt::For(s) => vec![&s.body, &s.orelse],
        Stmt::While(s) => vec![&s.body, &s.orelse],
        Stmt::If(s) => {
            let mut v: Vec<&[Stmt]> = vec![&s.body];
            v.extend(s.elif_else_clauses.iter().map(|c| c.body.as_slice()));
            v
        }
        Stmt::With(s) => vec![&s.body],
        Stmt::Try(s) => {
            let mut v: Vec<&[Stmt]> = vec![&s.body, &s.orelse, &s.finalbody];
            for h in &s.handlers {
                let ast::ExceptHandler::ExceptHandler(h) = h;
                v.push(&h.body);
            }
            v
        }
        Stmt::Match(s) => s.cases.iter().map(|c| c.body.as_slice()).collect(),
        _ => Vec::new(),
    }
}

/// Every `Name` node under a subtree, whatever its scope.
#[derive(Default)]
struct AllNames<'a> {
    names: Vec<&'a ast::ExprName>,
}

impl<'a> Visitor<'a> for AllNames<'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Name(n) = expr {
            self.names.push(n);
        }
        visitor::walk_expr(self, expr);
    }
}

fn names_in_stmts(body: &[Stmt]) -> Vec<&ast::ExprName> {
    let mut v = AllNames::default();
    v.visit_body(body);
    v.names
}

/// The names a scope binds by assignment (`Name` targets), and those it binds otherwise (a
/// parameter, `import`, `def`, `class`, `except … as`, `global`/`nonlocal`, a pattern), which
/// a rename cannot follow by renaming `Name` nodes alone. Nested scopes are not entered.
#[derive(Default)]
struct ScopeBindings {
    assigned: HashSet<String>,
    other: HashSet<String>,
}

impl<'a> Visitor<'a> for ScopeBindings {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                self.other.insert(f.name.id.to_string());
                for d in &f.decorator_list {
                    self.visit_expr(&d.expression);
                }
            }
            Stmt::ClassDef(c) => {
                self.other.insert(c.name.id.to_string());
            }
            Stmt::Import(i) => {
                for a in &i.names {
                    let bound = a.asname.as_ref().unwrap_or(&a.name).id.to_string();
                    self.other
                        .insert(bound.split('.').next().unwrap_or("").to_string());
                }
            }
            Stmt::ImportFrom(i) => {
                for a in &i.names {
                    self.other
                        .insert(a.asname.as_ref().unwrap_or(&a.name).id.to_string());
                }
            }
            Stmt::Global(g) => self.other.extend(g.names.iter().map(|n| n.id.to_string())),
            Stmt::Nonlocal(g) => self.other.extend(g.names.iter().map(|n| n.id.to_string())),
            Stmt::Try(t) => {
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    if let Some(n) = &h.name {
                        self.other.insert(n.id.to_string());
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
            Stmt::Match(_) => {
                // Patterns bind names without `Name` nodes: give up on the names of this scope.
                self.other.insert("*".to_string());
                visitor::walk_stmt(self, stmt);
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(n) if n.ctx != ExprContext::Load => {
                self.assigned.insert(n.id.to_string());
            }
            Expr::Lambda(_)
            | Expr::ListComp(_)
            | Expr::SetComp(_)
            | Expr::DictComp(_)
            | Expr::Generator(_) => {}
            _ => visitor::walk_expr(self, expr),
        }
    }
}

fn parameter_names(p: &Parameters) -> Vec<String> {
    p.iter().map(|p| p.name().id.to_string()).collect()
}

/// Every name some scope nested in `body` binds (its parameters and assignments, a
/// comprehension's targets): a rename of the enclosing scope's name must not reach it.
#[derive(Default)]
struct NestedBindings {
    names: HashSet<String>,
    depth: usize,
}

impl<'a> Visitor<'a> for NestedBindings {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                self.names.extend(parameter_names(&f.parameters));
                let mut inner = ScopeBindings::default();
                inner.visit_body(&f.body);
                self.names.extend(inner.assigned);
                self.names.extend(inner.other);
                self.depth += 1;
                visitor::walk_stmt(self, stmt);
                self.depth -= 1;
            }
            Stmt::ClassDef(_) => {
                let mut inner = ScopeBindings::default();
                if let Stmt::ClassDef(c) = stmt {
                    inner.visit_body(&c.body);
                }
                self.names.extend(inner.assigned);
                self.names.extend(inner.other);
                visitor::walk_stmt(self, stmt);
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Lambda(l) => {
                if let Some(p) = &l.parameters {
                    self.names.extend(parameter_names(p));
                }
            }
            Expr::ListComp(ast::ExprListComp { generators, .. })
            | Expr::SetComp(ast::ExprSetComp { generators, .. })
            | Expr::Generator(ast::ExprGenerator { generators, .. })
            | Expr::DictComp(ast::ExprDictComp { generators, .. }) => {
                for g in generators {
                    for n in names_in_expr(&g.target) {
                        self.names.insert(n);
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

fn names_in_expr(expr: &Expr) -> Vec<String> {
    let mut v = AllNames::default();
    v.visit_expr(expr);
    v.names.iter().map(|n| n.id.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// The rewrites

/// Every local name of every function renamed (`batch` → `batch_rn`): a verdict that changes
/// follows a name, not what the code does.
pub fn rename_locals(source: &str, module: &[Stmt]) -> Vec<Variant> {
    let mut edits = Vec::new();
    for (_, f) in functions(module) {
        let mut scope = ScopeBindings::default();
        scope.visit_body(&f.body);
        if scope.other.contains("*") {
            continue;
        }
        let mut nested = NestedBindings::default();
        nested.visit_body(&f.body);
        let params: HashSet<String> = parameter_names(&f.parameters).into_iter().collect();
        let renamed: HashSet<&String> = scope
            .assigned
            .iter()
            .filter(|n| {
                !params.contains(*n) && !scope.other.contains(*n) && !nested.names.contains(*n)
            })
            .collect();
        for n in names_in_stmts(&f.body) {
            if renamed.contains(&n.id.to_string()) {
                edits.push(Edit::replace(n.range, format!("{}_rn", n.id)));
            }
        }
    }
    if edits.is_empty() {
        return Vec::new();
    }
    vec![Variant {
        id: "all functions".into(),
        files: vec![("module.py".into(), apply(source, edits))],
    }]
}

/// `import torch` spelled `import torch as tch`, every use of the name with it.
pub fn import_alias(source: &str, module: &[Stmt]) -> Vec<Variant> {
    let mut edits = Vec::new();
    for s in module {
        match s {
            Stmt::Import(i) => {
                for a in &i.names {
                    let binds_torch = a.asname.as_ref().map_or_else(
                        || a.name.id.split('.').next() == Some("torch"),
                        |n| n.id == "torch",
                    );
                    if !binds_torch {
                        continue;
                    }
                    if a.asname.is_some() || a.name.id != "torch" {
                        return Vec::new();
                    }
                    edits.push(Edit::replace(a.range, "torch as tch"));
                }
            }
            Stmt::ImportFrom(i)
                if i.names
                    .iter()
                    .any(|a| a.asname.as_ref().unwrap_or(&a.name).id == "torch") =>
            {
                return Vec::new()
            }
            _ => {}
        }
    }
    if edits.is_empty() {
        return Vec::new();
    }
    let mut binds = ScopeBindings::default();
    binds.visit_body(module);
    let mut nested = NestedBindings::default();
    nested.visit_body(module);
    if binds.assigned.contains("torch") || nested.names.contains("torch") {
        return Vec::new();
    }
    for n in names_in_stmts(module) {
        if n.id == "torch" {
            edits.push(Edit::replace(n.range, "tch"));
        }
    }
    vec![Variant {
        id: "import torch as tch".into(),
        files: vec![("module.py".into(), apply(source, edits))],
    }]
}

/// The `torch.cuda` functions and classes a module can import by name instead.
const CUDA_NAMES: &[&str] = &[
    "Stream",
    "Event",
    "current_stream",
    "default_stream",
    "stream",
    "synchronize",
    "set_stream",
];

/// `torch.cuda.current_stream()` spelled `current_stream()` after `from torch.cuda import
/// current_stream` (for each of the stream API's names the module uses).
pub fn from_import(source: &str, module: &[Stmt]) -> Vec<Variant> {
    let Some(anchor) = module.iter().find_map(|s| match s {
        Stmt::Import(i)
            if i.names
                .iter()
                .any(|a| a.name.id == "torch" && a.asname.is_none()) =>
        {
            Some(s.range().end().to_usize())
        }
        _ => None,
    }) else {
        return Vec::new();
    };
    #[derive(Default)]
    struct Uses<'a> {
        found: Vec<(&'a ast::ExprAttribute, &'a str)>,
    }
    impl<'a> Visitor<'a> for Uses<'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Attribute(a) = expr {
                if let Expr::Attribute(inner) = a.value.as_ref() {
                    if let Expr::Name(n) = inner.value.as_ref() {
                        if n.id == "torch" && inner.attr.id == "cuda" {
                            if let Some(name) = CUDA_NAMES.iter().find(|c| **c == a.attr.id) {
                                self.found.push((a, name));
                                return;
                            }
                        }
                    }
                }
            }
            visitor::walk_expr(self, expr);
        }
    }
    let mut uses = Uses::default();
    uses.visit_body(module);
    if uses.found.is_empty() {
        return Vec::new();
    }
    let mut binds = ScopeBindings::default();
    binds.visit_body(module);
    let mut nested = NestedBindings::default();
    nested.visit_body(module);
    let used: BTreeSet<&str> = uses.found.iter().map(|(_, n)| *n).collect();
    if used.iter().any(|n| {
        binds.assigned.contains(*n) || binds.other.contains(*n) || nested.names.contains(*n)
    }) || names_in_stmts(module)
        .iter()
        .any(|n| used.contains(n.id.as_str()))
    {
        return Vec::new();
    }
    let mut edits: Vec<Edit> = uses
        .found
        .iter()
        .map(|(a, n)| Edit::replace(a.range, *n))
        .collect();
    let list: Vec<&str> = used.into_iter().collect();
    edits.push(Edit::insert(
        anchor,
        format!("\nfrom torch.cuda import {}", list.join(", ")),
    ));
    vec![Variant {
        id: "from torch.cuda import".into(),
        files: vec![("module.py".into(), apply(source, edits))],
    }]
}

/// The body of one function (after its docstring) under `if shape_flag:`: one variant per
/// function that the module's own code does not name (an entry point: `forward`, `train`). The
/// other path does nothing, so the verdict stays; a helper's callers, on the other hand, would
/// lose what it does for them on that path (a `record_stream`), which is another case.
pub fn body_under_flag(source: &str, module: &[Stmt]) -> Vec<Variant> {
    #[derive(Default)]
    struct Named<'a> {
        names: HashSet<&'a str>,
    }
    impl<'a> Visitor<'a> for Named<'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Name(n) => {
                    self.names.insert(n.id.as_str());
                }
                Expr::Attribute(a) => {
                    self.names.insert(a.attr.id.as_str());
                }
                _ => {}
            }
            visitor::walk_expr(self, expr);
        }
    }
    let mut named = Named::default();
    named.visit_body(module);
    let mut out = Vec::new();
    for (name, f) in functions(module) {
        if named.names.contains(f.name.id.as_str()) {
            continue;
        }
        let body = match f.body.first() {
            Some(Stmt::Expr(e)) if e.value.is_string_literal_expr() => &f.body[1..],
            _ => &f.body[..],
        };
        let (Some(first), Some(last)) = (body.first(), body.last()) else {
            continue;
        };
        let start = first.range().start().to_usize();
        let Some(indent) = indentation(source, start) else {
            continue;
        };
        if line_start(source, start) <= f.range.start().to_usize() {
            continue;
        }
        let end = last.range().end().to_usize();
        let mut edits = indent_lines(source, start, end, "    ");
        edits.insert(
            0,
            Edit::insert(line_start(source, start), format!("{indent}if {FLAG}:\n")),
        );
        out.push(Variant {
            id: name,
            files: vec![("module.py".into(), apply(source, edits))],
        });
    }
    out
}

/// The methods whose call orders streams or keeps memory alive: the synchronizations a
/// correct program may need.
const ORDERING_METHODS: &[&str] = &[
    "wait_stream",
    "wait_event",
    "record_stream",
    "synchronize",
    "wait",
    "record",
];

/// Every statement of the module that only calls an ordering method, starting its own line (so
/// that a condition can be put around it).
pub fn ordering_statements<'a>(source: &str, module: &'a [Stmt]) -> Vec<&'a ast::StmtExpr> {
    #[derive(Default)]
    struct Found<'a> {
        stmts: Vec<&'a ast::StmtExpr>,
    }
    impl<'a> Visitor<'a> for Found<'a> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Expr(e) = stmt {
                if let Expr::Call(c) = e.value.as_ref() {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        if ORDERING_METHODS.contains(&a.attr.id.as_str()) {
                            self.stmts.push(e);
                        }
                    }
                }
            }
            visitor::walk_stmt(self, stmt);
        }
    }
    let mut found = Found::default();
    found.visit_body(module);
    found
        .stmts
        .into_iter()
        .filter(|s| indentation(source, s.range.start().to_usize()).is_some())
        .collect()
}

/// `stmt` replaced by `pass` (does the program need it?).
pub fn without(source: &str, stmt: &ast::StmtExpr) -> String {
    apply(source, vec![Edit::replace(stmt.range, "pass")])
}

/// `stmt` put under `if shape_flag:`, alone or with another statement beside it.
pub fn under_flag(source: &str, stmt: &ast::StmtExpr, beside: bool) -> String {
    let start = stmt.range.start().to_usize();
    let indent = indentation(source, start).unwrap_or("");
    let text = &source[start..stmt.range.end().to_usize()];
    let mut new = format!("if {FLAG}:\n{indent}    {text}");
    if beside {
        new.push_str(&format!("\n{indent}    print(\"ordered\")"));
    }
    apply(source, vec![Edit::replace(stmt.range, new)])
}

/// The module's top-level functions moved into one class, each called as a method
/// (`self.helper(x)` between them, `_Shapes().main()` from the module's own code).
pub fn functions_into_class(source: &str, module: &[Stmt]) -> Vec<Variant> {
    let defs: Vec<&StmtFunctionDef> = module
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) => Some(f),
            _ => None,
        })
        .collect();
    if defs.is_empty() {
        return Vec::new();
    }
    let moved: HashSet<String> = defs.iter().map(|f| f.name.id.to_string()).collect();
    // Each use of a moved name must be a plain call, in a moved function or at the module's
    // top level: a function passed as a value or named from another class is another shape.
    #[derive(Default)]
    struct Calls<'a> {
        callees: Vec<&'a ast::ExprName>,
        others: Vec<&'a ast::ExprName>,
    }
    impl<'a> Visitor<'a> for Calls<'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Call(c) => {
                    if let Expr::Name(n) = c.func.as_ref() {
                        self.callees.push(n);
                    } else {
                        self.visit_expr(&c.func);
                    }
                    visitor::walk_arguments(self, &c.arguments);
                }
                Expr::Name(n) => self.others.push(n),
                _ => visitor::walk_expr(self, expr),
            }
        }
    }
    let mut edits = Vec::new();
    let first_def = defs[0].range.start().to_usize();
    let Some(class_indent) = indentation(source, first_def) else {
        return Vec::new();
    };
    if !class_indent.is_empty() {
        return Vec::new();
    }
    let mut class_text = String::from("class _Shapes:\n");
    for s in module {
        let inside = matches!(s, Stmt::FunctionDef(_));
        if let Stmt::ClassDef(c) = s {
            let mut calls = Calls::default();
            calls.visit_body(&c.body);
            if calls
                .callees
                .iter()
                .chain(&calls.others)
                .any(|n| moved.contains(n.id.as_str()))
            {
                return Vec::new();
            }
            continue;
        }
        let mut calls = Calls::default();
        calls.visit_stmt(s);
        if calls.others.iter().any(|n| moved.contains(n.id.as_str())) {
            return Vec::new();
        }
        let receiver = if inside { "self." } else { "_Shapes()." };
        let mut local = Vec::new();
        for n in calls.callees {
            if moved.contains(n.id.as_str()) {
                local.push(Edit::insert(n.range.start().to_usize(), receiver));
            }
        }
        let Stmt::FunctionDef(f) = s else {
            edits.extend(local);
            continue;
        };
        // `def f(a)` → `def f(self, a)`.
        let open = f.parameters.range.start().to_usize();
        if !source[open..].starts_with('(') {
            return Vec::new();
        }
        let self_text = if f.parameters.is_empty() {
            "self"
        } else {
            "self, "
        };
        local.push(Edit::insert(open + 1, self_text));
        if f.parameters
            .posonlyargs
            .iter()
            .chain(&f.parameters.args)
            .any(|p| p.parameter.name.id == "self")
        {
            return Vec::new();
        }
        let start = f.range.start().to_usize();
        let end = line_end(source, f.range.end().to_usize() - 1);
        let mut all = local;
        all.extend(indent_lines(source, start, end, "    "));
        class_text.push_str(&apply_slice(source, start, end, all));
        if !class_text.ends_with('\n') {
            class_text.push('\n');
        }
        class_text.push('\n');
        edits.push(Edit {
            start,
            end,
            text: String::new(),
        });
    }
    edits.push(Edit::insert(first_def, class_text));
    vec![Variant {
        id: "module functions".into(),
        files: vec![("module.py".into(), apply(source, edits))],
    }]
}

/// The module split in two: the last top-level function or class (and what follows it) in
/// `main_shape.py`, which imports what it uses from `shape_lib.py`, holding the rest.
pub fn split_file(source: &str, module: &[Stmt]) -> Vec<Variant> {
    let Some(last) = module
        .iter()
        .rposition(|s| matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)))
    else {
        return Vec::new();
    };
    let defs = module
        .iter()
        .filter(|s| matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)))
        .count();
    if defs < 2 {
        return Vec::new();
    }
    let (lib, main) = module.split_at(last);
    let is_import = |s: &Stmt| matches!(s, Stmt::Import(_) | Stmt::ImportFrom(_));
    // Names the main part binds must not be used by the library part.
    let mut main_binds = ScopeBindings::default();
    main_binds.visit_body(main);
    let main_names: HashSet<String> = main_binds
        .assigned
        .union(&main_binds.other)
        .cloned()
        .collect();
    if names_in_stmts(lib)
        .iter()
        .any(|n| main_names.contains(n.id.as_str()))
    {
        return Vec::new();
    }
    let mut lib_binds = ScopeBindings::default();
    for s in lib.iter().filter(|s| !is_import(s)) {
        lib_binds.visit_stmt(s);
    }
    let lib_names: HashSet<String> = lib_binds
        .assigned
        .union(&lib_binds.other)
        .cloned()
        .collect();
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    for n in names_in_stmts(main) {
        if lib_names.contains(n.id.as_str()) {
            wanted.insert(n.id.to_string());
        }
    }
    let split_at = line_start(source, main[0].range().start().to_usize());
    // Leading comments of the main part go with it.
    let split_at = leading_comment_start(source, split_at);
    let mut main_text = String::new();
    for s in lib.iter().filter(|s| is_import(s)) {
        if indentation(source, s.range().start().to_usize()) != Some("") {
            return Vec::new();
        }
        main_text.push_str(&source[s.range().start().to_usize()..s.range().end().to_usize()]);
        main_text.push('\n');
    }
    if !wanted.is_empty() {
        let list: Vec<&str> = wanted.iter().map(String::as_str).collect();
        main_text.push_str(&format!("from shape_lib import {}\n", list.join(", ")));
    }
    main_text.push_str("\n\n");
    main_text.push_str(&source[split_at..]);
    vec![Variant {
        id: "last definition".into(),
        files: vec![
            ("shape_lib.py".into(), source[..split_at].to_string()),
            ("main_shape.py".into(), main_text),
        ],
    }]
}

/// The start of the comment lines directly above the line starting at `at`.
fn leading_comment_start(source: &str, mut at: usize) -> usize {
    while at > 0 {
        let prev = line_start(source, at - 1);
        if source[prev..at].trim_start().starts_with('#') {
            at = prev;
        } else {
            break;
        }
    }
    at
}

/// Each `torch.cuda.Stream(..)` made by a small project class that owns the stream and hands
/// it out by a getter (`_ShapeStream(..).get()`).
pub fn stream_wrapper(source: &str, module: &[Stmt]) -> Vec<Variant> {
    #[derive(Default)]
    struct Makes<'a> {
        calls: Vec<&'a ast::ExprCall>,
    }
    impl<'a> Visitor<'a> for Makes<'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if let Expr::Attribute(inner) = a.value.as_ref() {
                        if let Expr::Name(n) = inner.value.as_ref() {
                            if n.id == "torch" && inner.attr.id == "cuda" && a.attr.id == "Stream" {
                                self.calls.push(c);
                            }
                        }
                    }
                }
            }
            visitor::walk_expr(self, expr);
        }
    }
    let mut makes = Makes::default();
    makes.visit_body(module);
    if makes.calls.is_empty() {
        return Vec::new();
    }
    let plain_torch = module.iter().any(|s| match s {
        Stmt::Import(i) => i
            .names
            .iter()
            .any(|a| a.name.id == "torch" && a.asname.is_none()),
        _ => false,
    });
    if !plain_torch {
        return Vec::new();
    }
    // The class goes after the module's leading imports.
    let Some(after) = module
        .iter()
        .take_while(|s| {
            matches!(s, Stmt::Import(_) | Stmt::ImportFrom(_))
                || matches!(s, Stmt::Expr(e) if e.value.is_string_literal_expr())
        })
        .last()
    else {
        return Vec::new();
    };
    let mut edits: Vec<Edit> = Vec::new();
    for c in &makes.calls {
        let args =
            &source[c.arguments.range.start().to_usize()..c.arguments.range.end().to_usize()];
        edits.push(Edit::replace(
            c.range(),
            format!("_ShapeStream{args}.get()"),
        ));
    }
    // Nested makes (a stream made in the arguments of another) would overlap.
    edits.sort_by_key(|e| e.start);
    if edits.windows(2).any(|w| w[1].start < w[0].end) {
        return Vec::new();
    }
    edits.push(Edit::insert(
        after.range().end().to_usize(),
        "\n\n\nclass _ShapeStream:\n    \"\"\"Owns a stream and hands it out.\"\"\"\n\n    \
         def __init__(self, *args, **kwargs):\n        \
         self._stream = torch.cuda.Stream(*args, **kwargs)\n\n    \
         def get(self):\n        return self._stream\n",
    ));
    vec![Variant {
        id: "torch.cuda.Stream".into(),
        files: vec![("module.py".into(), apply(source, edits))],
    }]
}
