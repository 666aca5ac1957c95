//! The parser adapter: the only module that knows the Python parser, ruff's
//! `ruff_python_parser`. It turns the parser's tree into [`crate::syntax`] and its first error
//! into a [`ParseError`] with a byte offset.

use ruff_python_ast::token::{TokenKind, Tokens};
use ruff_python_ast::{self as ast, FStringPart, InterpolatedStringElement};
use ruff_text_size::{Ranged, TextRange, TextSize};
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

/// Parse a whole module. Syntax newer than the parser's default target version is accepted:
/// the linter reads code, it does not judge which interpreter can run it.
pub fn parse_module(source: &str) -> Result<Vec<Stmt>, ParseError> {
    match ruff_python_parser::parse_module(source) {
        Ok(parsed) => {
            let convert = Convert {
                source,
                tokens: parsed.tokens(),
                base: 0,
            };
            Ok(convert.stmts(parsed.suite()))
        }
        Err(e) => Err(ParseError {
            offset: e.location.start().to_u32(),
            message: e.error.to_string(),
        }),
    }
}

/// The first method of the first class in a parsed module (for tests of per-method scans).
#[cfg(test)]
pub(crate) fn first_method(module: &[Stmt]) -> &FunctionDef {
    let Some(Stmt::Class(class)) = module.iter().find(|s| matches!(s, Stmt::Class(_))) else {
        panic!("a class expected");
    };
    let Some(Stmt::Def(f)) = class.body.first() else {
        panic!("a method expected");
    };
    f
}

/// Parse the text of one top-level function (from its `def` or `async` to its end), which
/// starts at byte `start` of its module, with spans where a parse of the whole module puts them.
/// `None` if the text is not one function (the scan that cut it was wrong).
pub fn parse_function_at(text: &str, start: u32) -> Option<FunctionDef> {
    let parsed = ruff_python_parser::parse_module(text).ok()?;
    let [ast::Stmt::FunctionDef(f)] = parsed.suite().as_slice() else {
        return None;
    };
    let convert = Convert {
        source: text,
        tokens: parsed.tokens(),
        base: start,
    };
    Some(convert.function(f))
}

/// The conversion of one module's tree (or of one function's, cut from the module at `base`);
/// the tokens locate what the tree has no node for.
struct Convert<'a> {
    source: &'a str,
    tokens: &'a Tokens,
    /// Where the parsed text starts in the module: spans are offsets in the module.
    base: u32,
}

impl Convert<'_> {
    fn span(&self, r: TextRange) -> Span {
        Span::new(self.base + r.start().to_u32(), self.base + r.end().to_u32())
    }

    fn stmts(&self, body: &[ast::Stmt]) -> Vec<Stmt> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    fn exprs(&self, list: &[ast::Expr]) -> Vec<Expr> {
        list.iter().map(|e| self.expr(e)).collect()
    }

    fn boxed(&self, e: &ast::Expr) -> Box<Expr> {
        Box::new(self.expr(e))
    }

    fn optional(&self, e: Option<&ast::Expr>) -> Option<Expr> {
        e.map(|e| self.expr(e))
    }

    fn function(&self, f: &ast::StmtFunctionDef) -> FunctionDef {
        let args = &f.parameters;
        let positional = args.posonlyargs.len() + args.args.len();
        let mut params: Vec<Param> = args
            .posonlyargs
            .iter()
            .chain(&args.args)
            .chain(&args.kwonlyargs)
            .map(|a| Param {
                name: a.parameter.name.as_str().to_owned(),
                variadic: false,
                default: self.optional(a.default.as_deref()),
                annotation: self.optional(a.parameter.annotation.as_deref()),
                span: self.span(a.parameter.range),
            })
            .collect();
        // `*args` and `**kwargs` hold a tuple and a dict whatever their annotation says; their
        // span starts at the name, after the stars.
        params.extend(args.vararg.iter().chain(&args.kwarg).map(|a| Param {
            name: a.name.as_str().to_owned(),
            variadic: true,
            default: None,
            annotation: None,
            span: self.span(TextRange::new(a.name.start(), a.range.end())),
        }));
        let start = self.base + self.function_start(f).to_u32();
        let end = self.base + f.range.end().to_u32();
        let header_end = f
            .body
            .first()
            .map_or(end, |s| self.base + self.stmt_start(s).to_u32());
        FunctionDef {
            name: f.name.as_str().to_owned(),
            params,
            positional,
            keywords_param: args.kwarg.as_ref().map(|a| a.name.as_str().to_owned()),
            decorators: f
                .decorator_list
                .iter()
                .map(|d| self.expr(&d.expression))
                .collect(),
            body: self.stmts(&f.body),
            span: Span::new(start, end),
            name_span: Span::new(start, header_end.max(start)),
        }
    }

    /// Where a statement starts in the tree: a decorated function or class at its keyword, after
    /// the decorators (the parser's range starts at the first decorator).
    fn stmt_start(&self, s: &ast::Stmt) -> TextSize {
        match s {
            ast::Stmt::FunctionDef(f) => self.function_start(f),
            ast::Stmt::ClassDef(c) => {
                self.keyword_start(&c.decorator_list, &c.name, TokenKind::Class, c.start())
            }
            _ => s.start(),
        }
    }

    fn function_start(&self, f: &ast::StmtFunctionDef) -> TextSize {
        let keyword = if f.is_async {
            TokenKind::Async
        } else {
            TokenKind::Def
        };
        self.keyword_start(&f.decorator_list, &f.name, keyword, f.start())
    }

    /// The start of the last `keyword` token before a definition's name when decorators come
    /// first; `start` otherwise.
    fn keyword_start(
        &self,
        decorators: &[ast::Decorator],
        name: &ast::Identifier,
        keyword: TokenKind,
        start: TextSize,
    ) -> TextSize {
        if decorators.is_empty() {
            return start;
        }
        let before = self.tokens.partition_point(|t| t.start() < name.start());
        self.tokens[..before]
            .iter()
            .rev()
            .find(|t| t.kind() == keyword)
            .map_or(start, Ranged::start)
    }

    fn with_items(&self, items: &[ast::WithItem]) -> Vec<WithItem> {
        items
            .iter()
            .map(|i| WithItem {
                context: self.expr(&i.context_expr),
                var: self.optional(i.optional_vars.as_deref()),
            })
            .collect()
    }

    fn handlers(&self, list: &[ast::ExceptHandler]) -> Vec<Vec<Stmt>> {
        list.iter()
            .map(|h| match h {
                ast::ExceptHandler::ExceptHandler(h) => self.stmts(&h.body),
            })
            .collect()
    }

    /// An `if` with its `elif` and `else` clauses: each `elif` becomes an `if` nested in the
    /// `else` branch of the one before, spanning from its keyword to the end of the statement.
    fn if_chain(&self, i: &ast::StmtIf) -> Stmt {
        let end = i.range.end();
        let mut orelse = Vec::new();
        for clause in i.elif_else_clauses.iter().rev() {
            let body = self.stmts(&clause.body);
            orelse = match &clause.test {
                Some(test) => vec![Stmt::If {
                    test: self.expr(test),
                    body,
                    orelse,
                    span: self.span(TextRange::new(clause.start(), end)),
                }],
                None => body,
            };
        }
        Stmt::If {
            test: self.expr(&i.test),
            body: self.stmts(&i.body),
            orelse,
            span: self.span(i.range),
        }
    }

    fn stmt(&self, s: &ast::Stmt) -> Stmt {
        use ast::Stmt as S;
        let sp = self.span(s.range());
        match s {
            S::FunctionDef(f) => Stmt::Def(self.function(f)),
            S::ClassDef(c) => Stmt::Class(ClassDef {
                name: c.name.as_str().to_owned(),
                bases: c
                    .arguments
                    .as_deref()
                    .map_or_else(Vec::new, |a| self.exprs(&a.args)),
                body: self.stmts(&c.body),
            }),
            S::Return(r) => Stmt::Return {
                value: self.optional(r.value.as_deref()),
                span: sp,
            },
            S::Delete(d) => Stmt::Delete {
                targets: self.exprs(&d.targets),
                span: sp,
            },
            S::Assign(a) => Stmt::Assign {
                targets: self.exprs(&a.targets),
                value: self.expr(&a.value),
                augmented: false,
                span: sp,
            },
            S::AugAssign(a) => Stmt::Assign {
                targets: vec![self.expr(&a.target)],
                value: self.expr(&a.value),
                augmented: true,
                span: sp,
            },
            S::AnnAssign(a) => match &a.value {
                Some(v) => Stmt::Assign {
                    targets: vec![self.expr(&a.target)],
                    value: self.expr(v),
                    augmented: false,
                    span: sp,
                },
                None => Stmt::Other,
            },
            S::For(f) => Stmt::For {
                target: self.expr(&f.target),
                iter: self.expr(&f.iter),
                body: self.stmts(&f.body),
                orelse: self.stmts(&f.orelse),
                span: sp,
            },
            S::While(w) => Stmt::While {
                test: self.expr(&w.test),
                body: self.stmts(&w.body),
                orelse: self.stmts(&w.orelse),
                span: sp,
            },
            S::If(i) => self.if_chain(i),
            S::With(w) => Stmt::With {
                items: self.with_items(&w.items),
                body: self.stmts(&w.body),
            },
            S::Try(t) => Stmt::Try {
                body: self.stmts(&t.body),
                handlers: self.handlers(&t.handlers),
                orelse: self.stmts(&t.orelse),
                finalbody: self.stmts(&t.finalbody),
            },
            S::Match(m) => Stmt::Match {
                subject: self.expr(&m.subject),
                cases: m.cases.iter().map(|c| self.stmts(&c.body)).collect(),
            },
            S::Raise(_) => Stmt::Raise,
            S::Import(i) => Stmt::Import {
                names: aliases(&i.names),
            },
            S::ImportFrom(i) => Stmt::ImportFrom {
                // A relative import keeps its dots (`from ..utils import f`: `..utils`); the
                // project index resolves them against the importing module's package.
                module: format!(
                    "{}{}",
                    ".".repeat(i.level as usize),
                    i.module
                        .as_ref()
                        .map(|m| m.as_str().to_owned())
                        .unwrap_or_default()
                ),
                names: aliases(&i.names),
            },
            S::Expr(e) => Stmt::Expr(self.expr(&e.value)),
            S::Assert(a) => Stmt::Assert {
                test: self.expr(&a.test),
                span: sp,
            },
            S::Break(_) => Stmt::Break,
            S::Continue(_) => Stmt::Continue,
            S::Global(g) => Stmt::Global(g.names.iter().map(|n| n.as_str().to_owned()).collect()),
            S::TypeAlias(_) | S::Pass(_) | S::Nonlocal(_) | S::IpyEscapeCommand(_) => Stmt::Other,
        }
    }

    /// Out of line, like the other helpers for rarer expressions: see [`Self::expr`].
    #[inline(never)]
    fn comprehension(
        &self,
        elts: Vec<Expr>,
        generators: &[ast::Comprehension],
        span: Span,
    ) -> Expr {
        let generators = generators
            .iter()
            .map(|g| Generator {
                target: self.expr(&g.target),
                iter: self.expr(&g.iter),
                conditions: self.exprs(&g.ifs),
            })
            .collect();
        Expr::Comprehension {
            elts,
            generators,
            span,
        }
    }

    /// An f-string as its pieces in order: runs of literal text (joined across implicitly
    /// concatenated parts, with the `x=` of a self-documenting `{x=}`) as string constants
    /// spanning the whole expression, and each replacement field's value wrapped in a piece
    /// spanning its own part. Leading text is how a device such as `f"cuda:{rank}"` is
    /// recognised.
    #[inline(never)]
    fn f_string(&self, f: &ast::ExprFString) -> Vec<Expr> {
        let original = pieces(f);
        // Read again, the f-string has the same pieces in the same order: its texts replace the
        // original ones, while the values keep their spans in the file.
        let reread = self.reread(f.range);
        let texts = match &reread {
            Some(ast::Expr::FString(r)) => pieces(r),
            _ => Vec::new(),
        };
        let reread_texts = texts.len() == original.len();
        let mut joined = Joined {
            whole: self.span(f.range),
            parts: Vec::new(),
            text: None,
        };
        for (i, piece) in original.iter().enumerate() {
            match (piece, texts.get(i)) {
                (Piece::Text(_), Some(Piece::Text(read))) if reread_texts => joined.text(read),
                (Piece::Text(text), _) => joined.text(text),
                (Piece::Value(value, part), _) => joined.value(self.expr(value), self.span(*part)),
            }
        }
        joined.finish()
    }

    /// A string literal's value, its line breaks read as Python reads them.
    #[inline(never)]
    fn string_value(&self, s: &ast::ExprStringLiteral) -> String {
        match self.reread(s.range) {
            Some(ast::Expr::StringLiteral(r)) => r.value.to_str().to_owned(),
            _ => s.value.to_str().to_owned(),
        }
    }

    /// The string expression at `range` parsed again with `\r\n` and `\r` made `\n`, when it
    /// has one. The parser keeps a line break inside a literal as written (a file with Windows
    /// line endings gives `\r\n`), but Python reads every line break as `\n`; an escaped `\r`
    /// is two other characters in the source, so it is kept.
    fn reread(&self, range: TextRange) -> Option<ast::Expr> {
        let text = self.source.get(range.to_std_range())?;
        if !text.contains('\r') {
            return None;
        }
        // In parentheses: implicitly concatenated parts may stand on several lines.
        let normalized = format!("({})", text.replace("\r\n", "\n").replace('\r', "\n"));
        ruff_python_parser::parse_expression(&normalized)
            .ok()
            .map(|p| p.into_expr())
    }

    /// A t-string's replacement values; it builds a template, not text, so its literal parts
    /// carry nothing the analysis reads.
    #[inline(never)]
    fn t_string(&self, t: &ast::ExprTString) -> Vec<Expr> {
        t.value
            .elements()
            .filter_map(|e| match e {
                InterpolatedStringElement::Interpolation(i) => Some(self.expr(&i.expression)),
                InterpolatedStringElement::Literal(_) => None,
            })
            .collect()
    }

    /// An expression. Its frame is repeated at every level of nesting, so the helpers for rarer
    /// expressions stay out of line to keep it small: its size bounds how deeply nested code can
    /// be before the stack runs out.
    fn expr(&self, e: &ast::Expr) -> Expr {
        use ast::Expr as E;
        let sp = self.span(e.range());
        let operator = |op, operands| Expr::Operator {
            op,
            operands,
            span: sp,
        };
        let constant = |value| Expr::Constant { value, span: sp };
        let opaque = |parts| Expr::Opaque { parts, span: sp };
        match e {
            E::Name(n) => Expr::Name {
                id: n.id.as_str().to_owned(),
                span: sp,
            },
            E::Attribute(a) => Expr::Attribute {
                value: self.boxed(&a.value),
                attr: a.attr.as_str().to_owned(),
                span: sp,
            },
            E::Call(c) => Expr::Call {
                func: self.boxed(&c.func),
                args: self.exprs(&c.arguments.args),
                keywords: c
                    .arguments
                    .keywords
                    .iter()
                    .map(|k| Keyword {
                        name: k.arg.as_ref().map(|a| a.as_str().to_owned()),
                        value: self.expr(&k.value),
                    })
                    .collect(),
                span: sp,
            },
            E::StringLiteral(s) => constant(Constant::Str(self.string_value(s))),
            E::BooleanLiteral(b) => constant(Constant::Bool(b.value)),
            E::NoneLiteral(_) => constant(Constant::None),
            E::NumberLiteral(n) => constant(number(&n.value)),
            E::BytesLiteral(_) | E::EllipsisLiteral(_) => constant(Constant::Other),
            E::BinOp(b) if b.op == ast::Operator::MatMult => operator(
                Operator::MatMul,
                vec![self.expr(&b.left), self.expr(&b.right)],
            ),
            E::BinOp(b) => operator(
                Operator::Arithmetic,
                vec![self.expr(&b.left), self.expr(&b.right)],
            ),
            E::UnaryOp(u) if u.op == ast::UnaryOp::Not => {
                operator(Operator::Not, vec![self.expr(&u.operand)])
            }
            E::UnaryOp(u) => operator(Operator::Arithmetic, vec![self.expr(&u.operand)]),
            E::BoolOp(b) => {
                let op = match b.op {
                    ast::BoolOp::And => Operator::And,
                    ast::BoolOp::Or => Operator::Or,
                };
                operator(op, self.exprs(&b.values))
            }
            E::Compare(c) => {
                let mut operands = vec![self.expr(&c.left)];
                operands.extend(self.exprs(&c.comparators));
                operator(comparison(&c.ops), operands)
            }
            E::Subscript(s) => Expr::Subscript {
                value: self.boxed(&s.value),
                index: self.boxed(&s.slice),
                span: sp,
            },
            E::Tuple(t) => Expr::Collection {
                elts: self.exprs(&t.elts),
                span: sp,
            },
            E::List(l) => Expr::Collection {
                elts: self.exprs(&l.elts),
                span: sp,
            },
            E::Set(s) => Expr::Collection {
                elts: self.exprs(&s.elts),
                span: sp,
            },
            E::Dict(d) => {
                // Keys first, then values; `**mapping` entries have no key.
                let mut elts: Vec<Expr> = d.iter_keys().flatten().map(|k| self.expr(k)).collect();
                elts.extend(d.iter_values().map(|v| self.expr(v)));
                Expr::Collection { elts, span: sp }
            }
            E::Starred(s) => Expr::Starred {
                value: self.boxed(&s.value),
                span: sp,
            },
            E::Yield(y) => Expr::Yield {
                value: y.value.as_deref().map(|v| self.boxed(v)),
                span: sp,
            },
            E::YieldFrom(y) => Expr::Yield {
                value: Some(self.boxed(&y.value)),
                span: sp,
            },
            E::Await(a) => Expr::Await {
                value: self.boxed(&a.value),
                span: sp,
            },
            E::If(i) => Expr::IfExp {
                test: self.boxed(&i.test),
                body: self.boxed(&i.body),
                orelse: self.boxed(&i.orelse),
                span: sp,
            },
            E::Named(n) => Expr::Walrus {
                target: self.boxed(&n.target),
                value: self.boxed(&n.value),
                span: sp,
            },
            E::ListComp(c) => self.comprehension(vec![self.expr(&c.elt)], &c.generators, sp),
            E::SetComp(c) => self.comprehension(vec![self.expr(&c.elt)], &c.generators, sp),
            E::Generator(c) => self.comprehension(vec![self.expr(&c.elt)], &c.generators, sp),
            E::DictComp(c) => {
                let mut elts: Vec<Expr> = c.key.iter().map(|k| self.expr(k)).collect();
                elts.push(self.expr(&c.value));
                self.comprehension(elts, &c.generators, sp)
            }
            E::Lambda(l) => Expr::Lambda {
                params: l
                    .parameters
                    .as_deref()
                    .map(|p| {
                        p.posonlyargs
                            .iter()
                            .chain(&p.args)
                            .map(|a| a.parameter.name.as_str().to_owned())
                            .collect()
                    })
                    .unwrap_or_default(),
                body: Box::new(self.expr(&l.body)),
                span: sp,
            },
            E::IpyEscapeCommand(_) => opaque(Vec::new()),
            E::FString(f) => opaque(self.f_string(f)),
            E::TString(t) => opaque(self.t_string(t)),
            E::Slice(s) => opaque(
                [&s.lower, &s.upper, &s.step]
                    .into_iter()
                    .flatten()
                    .map(|e| self.expr(e))
                    .collect(),
            ),
        }
    }
}

/// A piece of an f-string, in source order.
enum Piece<'t> {
    /// Literal text, or the source text of a self-documenting field (`x=` of `{x=}`).
    Text(&'t str),
    /// A replacement field's value, with the range of the f-string part it is in.
    Value(&'t ast::Expr, TextRange),
}

fn pieces(f: &ast::ExprFString) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    for part in f.value.iter() {
        match part {
            FStringPart::Literal(s) => pieces.push(Piece::Text(s)),
            FStringPart::FString(fs) => {
                for element in fs.elements.iter() {
                    match element {
                        InterpolatedStringElement::Literal(l) if l.is_empty() => {}
                        InterpolatedStringElement::Literal(l) => pieces.push(Piece::Text(l)),
                        InterpolatedStringElement::Interpolation(i) => {
                            if let Some(debug) = &i.debug_text {
                                pieces.push(Piece::Text(debug.as_str()));
                            }
                            pieces.push(Piece::Value(&i.expression, fs.range));
                        }
                    }
                }
            }
        }
    }
    pieces
}

/// An f-string's converted pieces as they are collected: adjacent texts join into one constant.
struct Joined {
    whole: Span,
    parts: Vec<Expr>,
    /// The text since the last replacement field, once there is any (even an empty literal).
    text: Option<String>,
}

impl Joined {
    fn text(&mut self, text: &str) {
        self.text.get_or_insert_default().push_str(text);
    }

    fn value(&mut self, value: Expr, span: Span) {
        self.flush();
        self.parts.push(Expr::Opaque {
            parts: vec![value],
            span,
        });
    }

    fn flush(&mut self) {
        if let Some(text) = self.text.take() {
            self.parts.push(Expr::Constant {
                value: Constant::Str(text),
                span: self.whole,
            });
        }
    }

    fn finish(mut self) -> Vec<Expr> {
        self.flush();
        self.parts
    }
}

fn aliases(names: &[ast::Alias]) -> Vec<(String, Option<String>)> {
    names
        .iter()
        .map(|a| {
            (
                a.name.as_str().to_owned(),
                a.asname.as_ref().map(|n| n.as_str().to_owned()),
            )
        })
        .collect()
}

/// An integer that fits `i64` keeps its value; any other number is just a number.
fn number(n: &ast::Number) -> Constant {
    match n {
        ast::Number::Int(i) => i.as_i64().map_or(Constant::Number, Constant::Int),
        ast::Number::Float(_) | ast::Number::Complex { .. } => Constant::Number,
    }
}

/// A chain of comparisons by identity or membership only is about objects; any other
/// comparison is elementwise on tensors.
fn comparison(ops: &[ast::CmpOp]) -> Operator {
    match ops {
        [ast::CmpOp::Is] => return Operator::Is,
        [ast::CmpOp::IsNot] => return Operator::IsNot,
        _ => {}
    }
    let identity = ops.iter().all(|o| {
        matches!(
            o,
            ast::CmpOp::Is | ast::CmpOp::IsNot | ast::CmpOp::In | ast::CmpOp::NotIn
        )
    });
    if identity {
        Operator::Identity
    } else {
        Operator::Arithmetic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(source: &str) -> Vec<Stmt> {
        parse_module(source).expect("the source parses")
    }

    fn at(source: &str, text: &str) -> u32 {
        source.find(text).expect("the text is in the source") as u32
    }

    #[test]
    fn a_decorated_function_spans_from_its_keyword() {
        let src = "@dec\n# note\nasync def f(a, *args: int, **kw):\n    @wrap\n    class K:\n        pass\n";
        let [Stmt::Def(f)] = &parse(src)[..] else {
            panic!("one function")
        };
        assert_eq!(f.span.start, at(src, "async"));
        assert_eq!(f.name_span.end, at(src, "class"));
        let starts: Vec<u32> = f.params.iter().map(|p| p.span.start).collect();
        assert_eq!(starts, [at(src, "a,"), at(src, "args"), at(src, "kw")]);
    }

    #[test]
    fn elif_nests_in_else_up_to_the_end_of_the_statement() {
        let src = "if a:\n    pass\nelif b:\n    pass\nelse:\n    x = 1\n";
        let [Stmt::If { orelse, span, .. }] = &parse(src)[..] else {
            panic!("one if")
        };
        let [Stmt::If {
            orelse: last,
            span: elif,
            ..
        }] = &orelse[..]
        else {
            panic!("an elif")
        };
        assert_eq!((elif.start, elif.end), (at(src, "elif"), span.end));
        assert!(matches!(&last[..], [Stmt::Assign { .. }]));
    }

    #[test]
    fn line_breaks_in_strings_read_as_newlines() {
        let src = "x = \"\"\"a\r\nb\\r\"\"\"\r\ny = f\"\"\"c\r\n{d}\"\"\"\r\n";
        let stmts = parse(src);
        let [Stmt::Assign { value: x, .. }, Stmt::Assign { value: y, .. }] = &stmts[..] else {
            panic!("two assignments")
        };
        assert_eq!(x.as_str(), Some("a\nb\r"));
        let Expr::Opaque { parts, .. } = y else {
            panic!("an f-string")
        };
        assert_eq!(parts[0].as_str(), Some("c\n"));
        let Expr::Opaque { parts: value, .. } = &parts[1] else {
            panic!("a replacement field")
        };
        assert_eq!(value[0].span().start, at(src, "d}"));
    }

    #[test]
    fn f_strings_keep_their_text_and_values_in_order() {
        let src = "d = \"cu\" f\"da:{rank}{n=}\"\n";
        let [Stmt::Assign { value, .. }] = &parse(src)[..] else {
            panic!("one assignment")
        };
        let Expr::Opaque { parts, .. } = value else {
            panic!("an f-string")
        };
        let texts: Vec<Option<&str>> = parts.iter().map(Expr::as_str).collect();
        assert_eq!(texts, [Some("cuda:"), None, Some("n="), None]);
    }

    #[test]
    fn current_syntax_parses() {
        for src in [
            "def f[T](x: T) -> T:\n    return x\n",
            "type Pair[T] = tuple[T, T]\n",
            "s = f\"{'a' + f\"{x}\"}\"\n",
            "try:\n    pass\nexcept* ValueError:\n    pass\n",
            "match p:\n    case [x, *rest] if x:\n        pass\n",
        ] {
            assert!(parse_module(src).is_ok(), "{src}");
        }
    }

    #[test]
    fn an_error_is_at_its_offset_with_a_message() {
        let src = "import torch\nprint \"x\"\n";
        let err = parse_module(src).expect_err("a Python 2 print");
        assert_eq!(err.offset, at(src, "\"x"));
        assert!(!err.message.is_empty());
    }
}
