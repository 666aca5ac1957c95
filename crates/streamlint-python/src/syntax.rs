//! The small Python syntax tree the frontend lowers from. It keeps only what stream analysis
//! needs and normalizes async and sync forms, so the parser behind `parser.rs` can be replaced
//! without touching the lowering.

use streamlint_graph::Span;

#[derive(Clone, Debug)]
pub enum Stmt {
    Def(FunctionDef),
    Class(ClassDef),
    Return {
        value: Option<Expr>,
        span: Span,
    },
    Delete {
        targets: Vec<Expr>,
        span: Span,
    },
    /// `a = b = value`, `a: T = value`, and `a += value` (with `augmented`).
    Assign {
        targets: Vec<Expr>,
        value: Expr,
        augmented: bool,
        span: Span,
    },
    For {
        target: Expr,
        iter: Expr,
        body: Vec<Stmt>,
        orelse: Vec<Stmt>,
        span: Span,
    },
    While {
        test: Expr,
        body: Vec<Stmt>,
        orelse: Vec<Stmt>,
        span: Span,
    },
    If {
        test: Expr,
        body: Vec<Stmt>,
        orelse: Vec<Stmt>,
        span: Span,
    },
    With {
        items: Vec<WithItem>,
        body: Vec<Stmt>,
    },
    Try {
        body: Vec<Stmt>,
        handlers: Vec<Vec<Stmt>>,
        orelse: Vec<Stmt>,
        finalbody: Vec<Stmt>,
    },
    /// `match` with the bodies of its cases.
    Match {
        subject: Expr,
        cases: Vec<Vec<Stmt>>,
    },
    Raise,
    /// `import a.b as c`: (module path, bound name).
    Import {
        names: Vec<(String, Option<String>)>,
    },
    /// `from m import a as b`: module, (name, bound name).
    ImportFrom {
        module: String,
        names: Vec<(String, Option<String>)>,
    },
    Expr(Expr),
    /// `assert test`: the test's truth is read on the host (the message only on failure).
    Assert {
        test: Expr,
        span: Span,
    },
    Break,
    Continue,
    /// `global a, b`: names the function binds at the top of its module.
    Global(Vec<String>),
    /// `pass`, `nonlocal`, type aliases: nothing the analysis follows.
    Other,
}

#[derive(Clone, Debug)]
pub struct FunctionDef {
    pub name: String,
    /// Positional parameters first (`self` included), then keyword-only ones, then `*args` and
    /// `**kwargs`.
    pub params: Vec<Param>,
    /// How many of `params` a call can pass by position.
    pub positional: usize,
    /// The name of its `**kwargs` parameter, if it has one.
    pub keywords_param: Option<String>,
    pub decorators: Vec<Expr>,
    pub body: Vec<Stmt>,
    pub span: Span,
    /// The `def name(...)` header, for messages about the function as a whole.
    pub name_span: Span,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    /// `*args` or `**kwargs`: what it holds is gathered from the call, not one argument.
    pub variadic: bool,
    pub default: Option<Expr>,
    pub annotation: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct ClassDef {
    pub name: String,
    pub bases: Vec<Expr>,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug)]
pub struct WithItem {
    pub context: Expr,
    pub var: Option<Expr>,
}

/// One `for target in iter if cond` clause of a comprehension.
#[derive(Clone, Debug)]
pub struct Generator {
    pub target: Expr,
    pub iter: Expr,
    pub conditions: Vec<Expr>,
}

#[derive(Clone, Debug)]
pub struct Keyword {
    pub name: Option<String>,
    pub value: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Constant {
    Str(String),
    Bool(bool),
    None,
    Int(i64),
    Number,
    Other,
}

/// What kind of operator combines an [`Expr::Operator`]'s operands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Operator {
    /// Arithmetic, bitwise, matmul, unary minus, comparisons: a tensor op when an operand is a
    /// tensor.
    Arithmetic,
    /// `a @ b`: only tensors multiply this way.
    MatMul,
    /// `in`, `not in`, chains of identity tests: about objects, not elements.
    Identity,
    /// `a is b` (one test): about objects.
    Is,
    /// `a is not b` (one test): about objects.
    IsNot,
    /// `and`, `or`, `not`: truth tests, which read a tensor on the host.
    And,
    Or,
    Not,
}

#[derive(Clone, Debug)]
pub enum Expr {
    Name {
        id: String,
        span: Span,
    },
    Attribute {
        value: Box<Expr>,
        attr: String,
        span: Span,
    },
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        keywords: Vec<Keyword>,
        span: Span,
    },
    Constant {
        value: Constant,
        span: Span,
    },
    Operator {
        op: Operator,
        operands: Vec<Expr>,
        span: Span,
    },
    Subscript {
        value: Box<Expr>,
        index: Box<Expr>,
        span: Span,
    },
    /// Tuple, list, set, dict (keys and values flattened).
    Collection {
        elts: Vec<Expr>,
        span: Span,
    },
    Starred {
        value: Box<Expr>,
        span: Span,
    },
    Yield {
        value: Option<Box<Expr>>,
        span: Span,
    },
    Await {
        value: Box<Expr>,
        span: Span,
    },
    IfExp {
        test: Box<Expr>,
        body: Box<Expr>,
        orelse: Box<Expr>,
        span: Span,
    },
    Walrus {
        target: Box<Expr>,
        value: Box<Expr>,
        span: Span,
    },
    /// `[elt for target in iter if cond ...]`: generators bind their targets in order.
    Comprehension {
        elts: Vec<Expr>,
        generators: Vec<Generator>,
        span: Span,
    },
    /// `lambda t: body`: its positional parameters and its body, which runs when the lambda is
    /// called (by a helper that maps it over a structure of tensors, say), not here.
    Lambda {
        params: Vec<String>,
        body: Box<Expr>,
        span: Span,
    },
    /// F-strings, slices: their sub-expressions, evaluated in order; the expression has no
    /// value the analysis follows.
    Opaque {
        parts: Vec<Expr>,
        span: Span,
    },
}

impl Stmt {
    /// The statement lists a compound statement runs in this scope (loop and branch bodies,
    /// `with`, `try` and `match` blocks); nested `def`s and `class`es are scopes of their own.
    pub fn blocks(&self) -> Vec<&[Stmt]> {
        match self {
            Stmt::For { body, orelse, .. }
            | Stmt::While { body, orelse, .. }
            | Stmt::If { body, orelse, .. } => vec![body, orelse],
            Stmt::With { body, .. } => vec![body],
            Stmt::Try {
                body,
                handlers,
                orelse,
                finalbody,
            } => {
                let mut blocks: Vec<&[Stmt]> = vec![body];
                blocks.extend(handlers.iter().map(Vec::as_slice));
                blocks.extend([orelse.as_slice(), finalbody.as_slice()]);
                blocks
            }
            Stmt::Match { cases, .. } => cases.iter().map(Vec::as_slice).collect(),
            _ => Vec::new(),
        }
    }
}

/// Can the byte be part of a Python identifier (ASCII; other letters are rare in code)?
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Does the function's own body (not a function nested in it) yield? A generator's body runs
/// as its caller iterates it, not where it is called.
pub fn is_generator(def: &FunctionDef) -> bool {
    let mut found = false;
    visit_statement_exprs(&def.body, false, &mut |e, _| {
        visit_exprs(e, &mut |x| found |= matches!(x, Expr::Yield { .. }));
    });
    found
}

/// The functions `stmts` define in their own scope (in branches, loops, `with` and `try` blocks
/// too, not inside other functions or classes): the local helpers of a function's body.
pub fn local_functions(stmts: &[Stmt]) -> Vec<&FunctionDef> {
    let mut out = Vec::new();
    let mut pending = vec![stmts];
    while let Some(stmts) = pending.pop() {
        for s in stmts {
            match s {
                Stmt::Def(f) => out.push(f),
                other => pending.extend(other.blocks()),
            }
        }
    }
    out
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Name { span, .. }
            | Expr::Attribute { span, .. }
            | Expr::Call { span, .. }
            | Expr::Constant { span, .. }
            | Expr::Operator { span, .. }
            | Expr::Subscript { span, .. }
            | Expr::Collection { span, .. }
            | Expr::Starred { span, .. }
            | Expr::Yield { span, .. }
            | Expr::Await { span, .. }
            | Expr::IfExp { span, .. }
            | Expr::Walrus { span, .. }
            | Expr::Comprehension { span, .. }
            | Expr::Lambda { span, .. }
            | Expr::Opaque { span, .. } => *span,
        }
    }

    /// `a.b.c` for a name or a chain of attributes on one.
    pub fn dotted(&self) -> Option<String> {
        let mut out = String::with_capacity(48);
        self.push_dotted(&mut out).then_some(out)
    }

    /// Append the dotted name to `out` (one string for the whole chain: this is asked of most
    /// expressions a body has); false, with `out` left part-written, if there is none.
    fn push_dotted(&self, out: &mut String) -> bool {
        match self {
            Expr::Name { id, .. } => {
                out.push_str(id);
                true
            }
            Expr::Attribute { value, attr, .. } => {
                if !value.push_dotted(out) {
                    return false;
                }
                out.push('.');
                out.push_str(attr);
                true
            }
            _ => false,
        }
    }

    /// A call's callee, positional arguments and keywords.
    pub fn call_parts(&self) -> Option<(&Expr, &[Expr], &[Keyword])> {
        match self {
            Expr::Call {
                func,
                args,
                keywords,
                ..
            } => Some((func, args, keywords)),
            _ => None,
        }
    }

    pub fn keyword<'k>(keywords: &'k [Keyword], name: &str) -> Option<&'k Expr> {
        keywords
            .iter()
            .find(|k| k.name.as_deref() == Some(name))
            .map(|k| &k.value)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Expr::Constant {
                value: Constant::Str(s),
                ..
            } => Some(s),
            _ => None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(
            self,
            Expr::Constant {
                value: Constant::None,
                ..
            }
        )
    }
}

/// Call `f` on every call expression in `stmts`, in nested expressions and statements;
/// `into_defs` also enters nested functions and classes.
pub fn visit_calls(stmts: &[Stmt], into_defs: bool, f: &mut dyn FnMut(&Expr)) {
    visit_statement_exprs(stmts, into_defs, &mut |e, _| visit_expr_calls(e, f));
}

/// Call `f` on each expression the statements of `stmts` hold (not the expressions inside
/// those), in nested statements too, with whether it is a target the statement binds or
/// deletes; `into_defs` also enters nested functions (their decorators) and classes.
pub fn visit_statement_exprs(stmts: &[Stmt], into_defs: bool, f: &mut dyn FnMut(&Expr, bool)) {
    for s in stmts {
        match s {
            Stmt::Def(d) => {
                if into_defs {
                    d.decorators.iter().for_each(|e| f(e, false));
                    visit_statement_exprs(&d.body, into_defs, f);
                }
            }
            Stmt::Class(c) => {
                if into_defs {
                    visit_statement_exprs(&c.body, into_defs, f);
                }
            }
            Stmt::Return { value, .. } => value.iter().for_each(|e| f(e, false)),
            Stmt::Delete { targets, .. } => targets.iter().for_each(|e| f(e, true)),
            Stmt::Assign { targets, value, .. } => {
                targets.iter().for_each(|e| f(e, true));
                f(value, false);
            }
            Stmt::For {
                target,
                iter,
                body,
                orelse,
                ..
            } => {
                f(target, true);
                f(iter, false);
                visit_statement_exprs(body, into_defs, f);
                visit_statement_exprs(orelse, into_defs, f);
            }
            Stmt::While {
                test, body, orelse, ..
            }
            | Stmt::If {
                test, body, orelse, ..
            } => {
                f(test, false);
                visit_statement_exprs(body, into_defs, f);
                visit_statement_exprs(orelse, into_defs, f);
            }
            Stmt::With { items, body } => {
                items.iter().for_each(|i| f(&i.context, false));
                visit_statement_exprs(body, into_defs, f);
            }
            Stmt::Try {
                body,
                handlers,
                orelse,
                finalbody,
            } => {
                visit_statement_exprs(body, into_defs, f);
                handlers
                    .iter()
                    .for_each(|h| visit_statement_exprs(h, into_defs, f));
                visit_statement_exprs(orelse, into_defs, f);
                visit_statement_exprs(finalbody, into_defs, f);
            }
            Stmt::Match { subject, cases } => {
                f(subject, false);
                cases
                    .iter()
                    .for_each(|c| visit_statement_exprs(c, into_defs, f));
            }
            Stmt::Expr(e) | Stmt::Assert { test: e, .. } => f(e, false),
            Stmt::Raise
            | Stmt::Import { .. }
            | Stmt::ImportFrom { .. }
            | Stmt::Break
            | Stmt::Continue
            | Stmt::Global(_)
            | Stmt::Other => {}
        }
    }
}

/// The names whose every mention in `stmts` (nested functions included) is a call of them by
/// name, and that are called at least once: functions so named never leave the code that calls
/// them.
pub fn names_only_called(stmts: &[Stmt]) -> rustc_hash::FxHashSet<String> {
    use rustc_hash::FxHashMap;
    fn count(e: &Expr, uses: &mut FxHashMap<String, (usize, usize)>) {
        visit_exprs(e, &mut |e| match e {
            Expr::Name { id, .. } => uses.entry(id.clone()).or_default().0 += 1,
            Expr::Call { func, .. } => {
                if let Expr::Name { id, .. } = func.as_ref() {
                    uses.entry(id.clone()).or_default().1 += 1;
                }
            }
            Expr::Lambda { body, .. } => count(body, uses),
            _ => {}
        })
    }
    let mut uses: FxHashMap<String, (usize, usize)> = FxHashMap::default();
    visit_statement_exprs(stmts, true, &mut |e, _| count(e, &mut uses));
    uses.into_iter()
        .filter(|(_, (mentions, calls))| *calls > 0 && mentions == calls)
        .map(|(name, _)| name)
        .collect()
}

/// Call `f` with `expr` and, depth first, each expression inside it.
pub fn visit_exprs(expr: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(expr);
    match expr {
        Expr::Attribute { value, .. } | Expr::Starred { value, .. } | Expr::Await { value, .. } => {
            visit_exprs(value, f)
        }
        Expr::Call {
            func,
            args,
            keywords,
            ..
        } => {
            visit_exprs(func, f);
            args.iter().for_each(|a| visit_exprs(a, f));
            keywords.iter().for_each(|k| visit_exprs(&k.value, f));
        }
        Expr::Operator {
            operands: parts, ..
        }
        | Expr::Collection { elts: parts, .. }
        | Expr::Opaque { parts, .. } => parts.iter().for_each(|p| visit_exprs(p, f)),
        Expr::Subscript { value, index, .. } => {
            visit_exprs(value, f);
            visit_exprs(index, f);
        }
        // Its body runs where the lambda is called, not where it is written.
        Expr::Lambda { .. } => {}
        Expr::Yield { value, .. } => value.iter().for_each(|v| visit_exprs(v, f)),
        Expr::IfExp {
            test, body, orelse, ..
        } => {
            visit_exprs(test, f);
            visit_exprs(body, f);
            visit_exprs(orelse, f);
        }
        Expr::Walrus { target, value, .. } => {
            visit_exprs(target, f);
            visit_exprs(value, f);
        }
        Expr::Comprehension {
            elts, generators, ..
        } => {
            elts.iter().for_each(|e| visit_exprs(e, f));
            for g in generators {
                visit_exprs(&g.iter, f);
                g.conditions.iter().for_each(|c| visit_exprs(c, f));
            }
        }
        Expr::Name { .. } | Expr::Constant { .. } => {}
    }
}

fn visit_expr_calls(expr: &Expr, f: &mut dyn FnMut(&Expr)) {
    visit_exprs(expr, &mut |e| {
        if matches!(e, Expr::Call { .. }) {
            f(e);
        }
    });
}
