//! The parser adapter: the only module that knows rustpython-parser. It turns the parser's tree
//! into [`crate::syntax`] and its errors into a [`ParseError`] with a byte offset.

use rustpython_parser::ast::{self, Ranged};
use rustpython_parser::text_size::TextRange;
use streamlint_graph::Span;

use crate::syntax::{
    ClassDef, Constant, Expr, FunctionDef, Generator, Keyword, Operator, Param, Stmt, WithItem,
};

/// A syntax error, at a byte offset of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub offset: u32,
    pub message: String,
}

/// Parse a whole module.
pub fn parse_module(source: &str, path: &str) -> Result<Vec<Stmt>, ParseError> {
    match rustpython_parser::parse(source, rustpython_parser::Mode::Module, path) {
        Ok(ast::Mod::Module(m)) => Ok(stmts(&m.body)),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ParseError {
            offset: e.offset.to_u32(),
            message: e.error.to_string(),
        }),
    }
}

fn span(r: TextRange) -> Span {
    Span::new(r.start().to_u32(), r.end().to_u32())
}

fn stmts(body: &[ast::Stmt]) -> Vec<Stmt> {
    body.iter().map(stmt).collect()
}

fn exprs(list: &[ast::Expr]) -> Vec<Expr> {
    list.iter().map(expr).collect()
}

fn boxed(e: &ast::Expr) -> Box<Expr> {
    Box::new(expr(e))
}

fn function(
    name: &str,
    args: &ast::Arguments,
    decorators: &[ast::Expr],
    body: &[ast::Stmt],
    range: TextRange,
) -> FunctionDef {
    let mut params = Vec::new();
    for a in args
        .posonlyargs
        .iter()
        .chain(&args.args)
        .chain(&args.kwonlyargs)
    {
        params.push(Param {
            name: a.def.arg.to_string(),
            default: a.default.as_deref().map(expr),
            annotation: a.def.annotation.as_deref().map(expr),
            span: span(a.def.range),
        });
    }
    for a in args.vararg.iter().chain(&args.kwarg) {
        params.push(Param {
            name: a.arg.to_string(),
            default: None,
            annotation: None,
            span: span(a.range),
        });
    }
    let start = range.start().to_u32();
    let header_end = body
        .first()
        .map(|s| s.range().start().to_u32())
        .unwrap_or(range.end().to_u32());
    FunctionDef {
        name: name.to_string(),
        params,
        decorators: exprs(decorators),
        body: stmts(body),
        span: span(range),
        name_span: Span::new(start, header_end.max(start)),
    }
}

fn with_items(items: &[ast::WithItem]) -> Vec<WithItem> {
    items
        .iter()
        .map(|i| WithItem {
            context: expr(&i.context_expr),
            var: i.optional_vars.as_deref().map(expr),
        })
        .collect()
}

fn handlers(list: &[ast::ExceptHandler]) -> Vec<Vec<Stmt>> {
    list.iter()
        .map(|h| match h {
            ast::ExceptHandler::ExceptHandler(h) => stmts(&h.body),
        })
        .collect()
}

fn aliases(names: &[ast::Alias]) -> Vec<(String, Option<String>)> {
    names
        .iter()
        .map(|a| (a.name.to_string(), a.asname.as_ref().map(|n| n.to_string())))
        .collect()
}

fn stmt(s: &ast::Stmt) -> Stmt {
    use ast::Stmt as S;
    let sp = span(s.range());
    match s {
        S::FunctionDef(f) => Stmt::Def(function(
            &f.name,
            &f.args,
            &f.decorator_list,
            &f.body,
            f.range,
        )),
        S::AsyncFunctionDef(f) => Stmt::Def(function(
            &f.name,
            &f.args,
            &f.decorator_list,
            &f.body,
            f.range,
        )),
        S::ClassDef(c) => Stmt::Class(ClassDef {
            name: c.name.to_string(),
            bases: exprs(&c.bases),
            body: stmts(&c.body),
        }),
        S::Return(r) => Stmt::Return {
            value: r.value.as_deref().map(expr),
            span: sp,
        },
        S::Delete(d) => Stmt::Delete {
            targets: exprs(&d.targets),
            span: sp,
        },
        S::Assign(a) => Stmt::Assign {
            targets: exprs(&a.targets),
            value: expr(&a.value),
            augmented: false,
            span: sp,
        },
        S::AugAssign(a) => Stmt::Assign {
            targets: vec![expr(&a.target)],
            value: expr(&a.value),
            augmented: true,
            span: sp,
        },
        S::AnnAssign(a) => match &a.value {
            Some(v) => Stmt::Assign {
                targets: vec![expr(&a.target)],
                value: expr(v),
                augmented: false,
                span: sp,
            },
            None => Stmt::Other,
        },
        S::For(f) => Stmt::For {
            target: expr(&f.target),
            iter: expr(&f.iter),
            body: stmts(&f.body),
            orelse: stmts(&f.orelse),
            span: sp,
        },
        S::AsyncFor(f) => Stmt::For {
            target: expr(&f.target),
            iter: expr(&f.iter),
            body: stmts(&f.body),
            orelse: stmts(&f.orelse),
            span: sp,
        },
        S::While(w) => Stmt::While {
            test: expr(&w.test),
            body: stmts(&w.body),
            orelse: stmts(&w.orelse),
            span: sp,
        },
        S::If(i) => Stmt::If {
            test: expr(&i.test),
            body: stmts(&i.body),
            orelse: stmts(&i.orelse),
            span: sp,
        },
        S::With(w) => Stmt::With {
            items: with_items(&w.items),
            body: stmts(&w.body),
        },
        S::AsyncWith(w) => Stmt::With {
            items: with_items(&w.items),
            body: stmts(&w.body),
        },
        S::Try(t) => Stmt::Try {
            body: stmts(&t.body),
            handlers: handlers(&t.handlers),
            orelse: stmts(&t.orelse),
            finalbody: stmts(&t.finalbody),
        },
        S::TryStar(t) => Stmt::Try {
            body: stmts(&t.body),
            handlers: handlers(&t.handlers),
            orelse: stmts(&t.orelse),
            finalbody: stmts(&t.finalbody),
        },
        S::Match(m) => Stmt::Match {
            subject: expr(&m.subject),
            cases: m.cases.iter().map(|c| stmts(&c.body)).collect(),
        },
        S::Raise(_) => Stmt::Raise,
        S::Import(i) => Stmt::Import {
            names: aliases(&i.names),
        },
        S::ImportFrom(i) => Stmt::ImportFrom {
            module: i.module.as_ref().map(|m| m.to_string()).unwrap_or_default(),
            names: aliases(&i.names),
        },
        S::Expr(e) => Stmt::Expr(expr(&e.value)),
        S::Break(_) => Stmt::Break,
        S::Continue(_) => Stmt::Continue,
        S::TypeAlias(_) | S::Pass(_) | S::Global(_) | S::Nonlocal(_) | S::Assert(_) => Stmt::Other,
    }
}

fn constant(c: &ast::Constant) -> Constant {
    match c {
        ast::Constant::Str(s) => Constant::Str(s.clone()),
        ast::Constant::Bool(b) => Constant::Bool(*b),
        ast::Constant::None => Constant::None,
        ast::Constant::Int(i) => i
            .to_string()
            .parse()
            .map(Constant::Int)
            .unwrap_or(Constant::Number),
        ast::Constant::Float(_) | ast::Constant::Complex { .. } => Constant::Number,
        _ => Constant::Other,
    }
}

fn comprehension(elts: Vec<Expr>, generators: &[ast::Comprehension], span: Span) -> Expr {
    let generators = generators
        .iter()
        .map(|g| Generator {
            target: expr(&g.target),
            iter: expr(&g.iter),
            conditions: exprs(&g.ifs),
        })
        .collect();
    Expr::Comprehension {
        elts,
        generators,
        span,
    }
}

fn expr(e: &ast::Expr) -> Expr {
    use ast::Expr as E;
    let sp = span(e.range());
    let operator = |op, operands| Expr::Operator {
        op,
        operands,
        span: sp,
    };
    match e {
        E::Name(n) => Expr::Name {
            id: n.id.to_string(),
            span: sp,
        },
        E::Attribute(a) => Expr::Attribute {
            value: boxed(&a.value),
            attr: a.attr.to_string(),
            span: sp,
        },
        E::Call(c) => Expr::Call {
            func: boxed(&c.func),
            args: exprs(&c.args),
            keywords: c
                .keywords
                .iter()
                .map(|k| Keyword {
                    name: k.arg.as_ref().map(|a| a.to_string()),
                    value: expr(&k.value),
                })
                .collect(),
            span: sp,
        },
        E::Constant(c) => Expr::Constant {
            value: constant(&c.value),
            span: sp,
        },
        E::BinOp(b) if b.op == ast::Operator::MatMult => {
            operator(Operator::MatMul, vec![expr(&b.left), expr(&b.right)])
        }
        E::BinOp(b) => operator(Operator::Arithmetic, vec![expr(&b.left), expr(&b.right)]),
        E::UnaryOp(u) if u.op == ast::UnaryOp::Not => {
            operator(Operator::Logical, vec![expr(&u.operand)])
        }
        E::UnaryOp(u) => operator(Operator::Arithmetic, vec![expr(&u.operand)]),
        E::BoolOp(b) => operator(Operator::Logical, exprs(&b.values)),
        E::Compare(c) => {
            let mut operands = vec![expr(&c.left)];
            operands.extend(exprs(&c.comparators));
            let identity = c.ops.iter().all(|o| {
                matches!(
                    o,
                    ast::CmpOp::Is | ast::CmpOp::IsNot | ast::CmpOp::In | ast::CmpOp::NotIn
                )
            });
            operator(
                if identity {
                    Operator::Identity
                } else {
                    Operator::Arithmetic
                },
                operands,
            )
        }
        E::Subscript(s) => Expr::Subscript {
            value: boxed(&s.value),
            index: boxed(&s.slice),
            span: sp,
        },
        E::Tuple(t) => Expr::Collection {
            elts: exprs(&t.elts),
            span: sp,
        },
        E::List(l) => Expr::Collection {
            elts: exprs(&l.elts),
            span: sp,
        },
        E::Set(s) => Expr::Collection {
            elts: exprs(&s.elts),
            span: sp,
        },
        E::Dict(d) => {
            let mut elts: Vec<Expr> = d.keys.iter().flatten().map(expr).collect();
            elts.extend(exprs(&d.values));
            Expr::Collection { elts, span: sp }
        }
        E::Starred(s) => Expr::Starred {
            value: boxed(&s.value),
            span: sp,
        },
        E::Yield(y) => Expr::Yield {
            value: y.value.as_deref().map(boxed),
            span: sp,
        },
        E::YieldFrom(y) => Expr::Yield {
            value: Some(boxed(&y.value)),
            span: sp,
        },
        E::Await(a) => Expr::Await {
            value: boxed(&a.value),
            span: sp,
        },
        E::IfExp(i) => Expr::IfExp {
            test: boxed(&i.test),
            body: boxed(&i.body),
            orelse: boxed(&i.orelse),
            span: sp,
        },
        E::NamedExpr(n) => Expr::Walrus {
            target: boxed(&n.target),
            value: boxed(&n.value),
            span: sp,
        },
        E::ListComp(c) => comprehension(vec![expr(&c.elt)], &c.generators, sp),
        E::SetComp(c) => comprehension(vec![expr(&c.elt)], &c.generators, sp),
        E::GeneratorExp(c) => comprehension(vec![expr(&c.elt)], &c.generators, sp),
        E::DictComp(c) => comprehension(vec![expr(&c.key), expr(&c.value)], &c.generators, sp),
        E::Lambda(_) => Expr::Opaque {
            parts: Vec::new(),
            span: sp,
        },
        E::JoinedStr(j) => Expr::Opaque {
            parts: exprs(&j.values),
            span: sp,
        },
        E::FormattedValue(f) => Expr::Opaque {
            parts: vec![expr(&f.value)],
            span: sp,
        },
        E::Slice(s) => Expr::Opaque {
            parts: [&s.lower, &s.upper, &s.step]
                .into_iter()
                .flatten()
                .map(|e| expr(e))
                .collect(),
            span: sp,
        },
    }
}
