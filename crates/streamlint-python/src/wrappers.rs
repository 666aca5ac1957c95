//! Module functions that only forward their parameters to method calls
//! (`def _wait_on(stream, event): stream.wait_event(event)`), possibly choosing between two
//! spellings (`if hasattr(stream, "wait_event"): ... else: event.wait(stream)`). Projects wrap
//! event records and waits this way; a call of such a function is lowered as the calls it
//! forwards to, written at the call site, so the wait it hides is seen where it happens.

use rustc_hash::FxHashMap;

use streamlint_graph::Span;

use crate::syntax::{Constant, Expr, FunctionDef, Keyword, Stmt};

/// What a forwarding function passes on: one of its parameters (by position) or a constant.
#[derive(Debug)]
enum Forwarded {
    Param(usize),
    Constant(Constant),
}

/// `param.method(..)` or `builtin(..)` with forwarded arguments.
#[derive(Debug)]
struct Call {
    callee: Callee,
    args: Vec<Forwarded>,
    keywords: Vec<(String, Forwarded)>,
}

#[derive(Debug)]
enum Callee {
    Method {
        receiver: usize,
        method: String,
    },
    /// A plain name that is not a parameter (`hasattr`, `isinstance`).
    Function(String),
}

#[derive(Debug)]
enum Step {
    Call(Call),
    Branch {
        test: Call,
        then: Vec<Step>,
        orelse: Vec<Step>,
    },
}

#[derive(Debug)]
pub struct Wrapper {
    params: Vec<String>,
    steps: Vec<Step>,
}

/// The forwarding functions defined at the top level of a module, by name.
pub fn find(module: &[Stmt]) -> FxHashMap<String, Wrapper> {
    module
        .iter()
        .filter_map(|s| match s {
            Stmt::Def(f) => Some((f.name.clone(), Wrapper::of(f)?)),
            _ => None,
        })
        .collect()
}

impl Wrapper {
    fn of(f: &FunctionDef) -> Option<Wrapper> {
        let params: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
        let steps = steps(&params, &f.body)?;
        let forwards_a_method = |s: &Step| match s {
            Step::Call(c) => matches!(c.callee, Callee::Method { .. }),
            Step::Branch { .. } => true,
        };
        steps
            .iter()
            .all(forwards_a_method)
            .then_some(Wrapper { params, steps })
    }

    /// The call this one stands for, written with the caller's arguments at the caller's place,
    /// when it forwards to a single call; `None` otherwise, or when the arguments do not bind
    /// every parameter it uses.
    pub fn inline_expr(&self, args: &[Expr], keywords: &[Keyword], span: Span) -> Option<Expr> {
        match self.steps.as_slice() {
            [Step::Call(call)] => self.bind(args, keywords)?.call(call, span),
            _ => None,
        }
    }

    /// The statements a call of it stands for, as [`Wrapper::inline_expr`] but for a call
    /// made as a statement, which may branch.
    pub fn inline_stmts(
        &self,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Option<Vec<Stmt>> {
        self.bind(args, keywords)?.stmts(&self.steps, span)
    }

    fn bind<'a>(&'a self, args: &'a [Expr], keywords: &'a [Keyword]) -> Option<Binding<'a>> {
        let starred = args.iter().any(|a| matches!(a, Expr::Starred { .. }));
        let unnamed = keywords.iter().any(|k| k.name.is_none());
        (args.len() <= self.params.len() && !starred && !unnamed).then_some(Binding {
            params: &self.params,
            args,
            keywords,
        })
    }
}

/// The arguments of one call of a wrapper.
struct Binding<'a> {
    params: &'a [String],
    args: &'a [Expr],
    keywords: &'a [Keyword],
}

impl Binding<'_> {
    fn value(&self, f: &Forwarded, span: Span) -> Option<Expr> {
        match f {
            Forwarded::Param(i) => self
                .args
                .get(*i)
                .or_else(|| {
                    let name = self.params[*i].as_str();
                    let k = self
                        .keywords
                        .iter()
                        .find(|k| k.name.as_deref() == Some(name));
                    k.map(|k| &k.value)
                })
                .cloned(),
            Forwarded::Constant(c) => Some(Expr::Constant {
                value: c.clone(),
                span,
            }),
        }
    }

    fn call(&self, call: &Call, span: Span) -> Option<Expr> {
        let func = match &call.callee {
            Callee::Method { receiver, method } => Expr::Attribute {
                value: Box::new(self.value(&Forwarded::Param(*receiver), span)?),
                attr: method.clone(),
                span,
            },
            Callee::Function(name) => Expr::Name {
                id: name.clone(),
                span,
            },
        };
        Some(Expr::Call {
            func: Box::new(func),
            args: call
                .args
                .iter()
                .map(|a| self.value(a, span))
                .collect::<Option<_>>()?,
            keywords: call
                .keywords
                .iter()
                .map(|(name, f)| {
                    Some(Keyword {
                        name: Some(name.clone()),
                        value: self.value(f, span)?,
                    })
                })
                .collect::<Option<_>>()?,
            span,
        })
    }

    fn stmts(&self, steps: &[Step], span: Span) -> Option<Vec<Stmt>> {
        steps
            .iter()
            .map(|step| match step {
                Step::Call(call) => Some(Stmt::Expr(self.call(call, span)?)),
                Step::Branch { test, then, orelse } => Some(Stmt::If {
                    test: self.call(test, span)?,
                    body: self.stmts(then, span)?,
                    orelse: self.stmts(orelse, span)?,
                    span,
                }),
            })
            .collect()
    }
}

/// The body as forwarding steps, if it is nothing else (a docstring aside).
fn steps(params: &[String], body: &[Stmt]) -> Option<Vec<Step>> {
    body.iter()
        .filter(|s| !is_docstring(s))
        .map(|s| match s {
            Stmt::Expr(call)
            | Stmt::Return {
                value: Some(call), ..
            } => Some(Step::Call(forwarded_call(params, call)?)),
            Stmt::If {
                test, body, orelse, ..
            } => Some(Step::Branch {
                test: forwarded_call(params, test)?,
                then: steps(params, body)?,
                orelse: steps(params, orelse)?,
            }),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .filter(|steps| !steps.is_empty())
}

fn forwarded_call(params: &[String], expr: &Expr) -> Option<Call> {
    let Expr::Call {
        func,
        args,
        keywords,
        ..
    } = expr
    else {
        return None;
    };
    let forwarded = |e: &Expr| match e {
        Expr::Name { id, .. } => params.iter().position(|p| p == id).map(Forwarded::Param),
        Expr::Constant { value, .. } => Some(Forwarded::Constant(value.clone())),
        _ => None,
    };
    let callee = match func.as_ref() {
        Expr::Attribute { value, attr, .. } => match forwarded(value)? {
            Forwarded::Param(receiver) => Callee::Method {
                receiver,
                method: attr.clone(),
            },
            Forwarded::Constant(_) => return None,
        },
        Expr::Name { id, .. } if !params.contains(id) => Callee::Function(id.clone()),
        _ => return None,
    };
    Some(Call {
        callee,
        args: args.iter().map(forwarded).collect::<Option<_>>()?,
        keywords: keywords
            .iter()
            .map(|k| Some((k.name.clone()?, forwarded(&k.value)?)))
            .collect::<Option<_>>()?,
    })
}

fn is_docstring(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::Expr(Expr::Constant {
            value: Constant::Str(_),
            ..
        })
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrappers(src: &str) -> Vec<String> {
        let mut names: Vec<String> = find(&crate::parser::parse_module(src).unwrap())
            .into_keys()
            .collect();
        names.sort();
        names
    }

    #[test]
    fn only_functions_that_just_forward_are_wrappers() {
        let src = "\
def wait_on(stream, event):\n    \"\"\"Wait.\"\"\"\n    stream.wait_event(event)\n\n\
def record_on(stream, event):\n    return event.record(stream)\n\n\
def either(stream, event):\n    if hasattr(stream, 'wait_event'):\n        stream.wait_event(event)\n    else:\n        event.wait(stream)\n\n\
def computes(stream, event):\n    x = event.query()\n    stream.wait_event(event)\n\n\
def on_a_global(event):\n    STREAM.wait_event(event)\n\n\
def nested_argument(stream, event):\n    stream.wait_event(event.clone())\n\n\
def only_a_check(stream):\n    hasattr(stream, 'x')\n\n\
def empty():\n    pass\n";
        assert_eq!(wrappers(src), ["either", "record_on", "wait_on"]);
    }
}
