//! Context managers a project writes as generators:
//!
//! ```python
//! @contextmanager
//! def on_side(stream):
//!     stream.wait_stream(torch.cuda.current_stream())
//!     with torch.cuda.stream(stream):
//!         yield
//! ```
//!
//! A `with on_side(s):` block is lowered as the generator's code with the block in place of its
//! `yield`: the waits and records it makes on entry and on exit, and the stream it makes current
//! for the block, are seen where they happen, as if written at the `with`. Without this, a
//! context manager of unknown code handed a stream is taken to order it both ways, which hides a
//! wrapper that forgets the join (or the fork). Only generators that yield once, outside loops
//! and branches (their `with` and `try` blocks may hold the `yield`), are lowered so: the block
//! then runs exactly once, where the `yield` is.

use streamlint_graph::Span;

use super::inline::CallerState;
use super::{Lowerer, Value};
use crate::project::Resolved;
use crate::syntax::{Expr, FunctionDef, Keyword, Stmt};

/// The caller's `with` block, and the name its `as` binds to what the generator yields.
pub(super) struct WithBlock {
    pub body: Vec<Stmt>,
    pub var: Option<Expr>,
}

/// A generator being lowered around a caller's `with` block.
pub(super) struct Suspended<'a> {
    block: WithBlock,
    /// The caller's state while the generator's own code is lowered (`None` while the block
    /// itself is, in the caller's state).
    caller: Option<CallerState<'a>>,
    /// How many callees are being lowered in place while the generator's own code is.
    depth: usize,
    /// Where the caller's work was placed before the call (see `BodyBuilder::begin_inline`).
    caller_place: Option<Span>,
    /// The block was lowered at the `yield`.
    lowered: bool,
}

impl<'a> Lowerer<'a> {
    /// The generator context manager a `with` item enters, with the call's arguments.
    pub(super) fn context_manager_callee<'e>(
        &self,
        context: &'e Expr,
    ) -> Option<(Resolved<'a>, &'e [Expr], &'e [Keyword])> {
        let Expr::Call {
            func,
            args,
            keywords,
            ..
        } = context
        else {
            return None;
        };
        let callee = self.project_function(func)?;
        (is_context_manager(callee.def) && yields_once_in_line(&callee.def.body)).then_some((
            callee,
            args.as_slice(),
            keywords.as_slice(),
        ))
    }

    /// Keep the caller's state with its `with` block until the generator yields; the state
    /// itself where there is no block.
    pub(super) fn suspend_caller(
        &mut self,
        caller: CallerState<'a>,
        around: Option<WithBlock>,
        caller_place: Option<Span>,
    ) -> Option<CallerState<'a>> {
        let Some(block) = around else {
            return Some(caller);
        };
        self.suspended.push(Suspended {
            block,
            caller: Some(caller),
            depth: self.inline_stack.len(),
            caller_place,
            lowered: false,
        });
        None
    }

    /// The caller's state back after the callee, and its `with` block if the generator never
    /// reached its `yield` (it runs after the generator's code, then).
    pub(super) fn resume_caller(
        &mut self,
        kept: Option<CallerState<'a>>,
    ) -> Option<(CallerState<'a>, Option<WithBlock>)> {
        if let Some(caller) = kept {
            return Some((caller, None));
        }
        let suspended = self.suspended.pop()?;
        let caller = suspended.caller?;
        Some((caller, (!suspended.lowered).then_some(suspended.block)))
    }

    /// At a `yield` of the generator being lowered around a `with` block: lower the block there,
    /// in the caller's scope, with the stream the generator made current. False elsewhere.
    pub(super) fn yield_to_with_block(&mut self, value: Option<&Expr>, span: Span) -> bool {
        let depth = self.inline_stack.len();
        let Some(top) = self
            .suspended
            .last_mut()
            .filter(|s| s.depth == depth && !s.lowered)
        else {
            return false;
        };
        let Some(mut caller) = top.caller.take() else {
            return false;
        };
        top.lowered = true;
        let block = WithBlock {
            body: std::mem::take(&mut top.block.body),
            var: top.block.var.take(),
        };
        let caller_place = top.caller_place;
        let yielded = value.map_or(Value::None, |v| self.eval(v));
        self.swap_caller_state(&mut caller);
        let frame = self.inline_stack.pop();
        let callee_place = self.b.inlined_at();
        self.b.end_inline(caller_place);
        if let Some(var) = &block.var {
            self.assign(var, yielded, span);
        }
        self.stmts(&block.body);
        self.b.end_inline(callee_place);
        self.inline_stack.extend(frame);
        self.swap_caller_state(&mut caller);
        if let Some(top) = self.suspended.last_mut() {
            top.caller = Some(caller);
        }
        true
    }
}

/// `@contextmanager` or `@contextlib.contextmanager`.
fn is_context_manager(def: &FunctionDef) -> bool {
    def.decorators.iter().any(|d| {
        d.dotted()
            .is_some_and(|n| n.rsplit('.').next() == Some("contextmanager"))
    })
}

/// Does the body yield exactly once, as a statement of its own, outside loops and branches?
fn yields_once_in_line(body: &[Stmt]) -> bool {
    let mut yields = 0;
    crate::syntax::visit_statement_exprs(body, false, &mut |e, _| {
        crate::syntax::visit_exprs(e, &mut |x| {
            yields += usize::from(matches!(x, Expr::Yield { .. }))
        });
    });
    yields == 1 && yield_in_line(body)
}

fn yield_in_line(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Expr(Expr::Yield { .. }) => true,
        Stmt::With { body, .. } => yield_in_line(body),
        Stmt::Try {
            body, finalbody, ..
        } => yield_in_line(body) || yield_in_line(finalbody),
        _ => false,
    })
}
