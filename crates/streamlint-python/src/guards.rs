//! What a branch's test says about the streams, events and handles it names: the facts that let
//! an ordering under a condition count on every path that needs it (`if side is not None:
//! main.wait_stream(side)`), shared by the lowering and the class summaries.

use rustc_hash::FxHashMap;

use crate::syntax::{Constant, Expr, Operator};

/// What a test, when true, says is there: the subject of `x is not None` and of
/// `isinstance(x, ..)`, the operands of a comparison (`current != side`), a name or attribute
/// tested for truth, each operand of an `and`; a name bound to such a test stands for its
/// subjects.
pub(crate) fn guarded_subjects(
    test: &Expr,
    guards: &FxHashMap<String, Vec<String>>,
    out: &mut Vec<String>,
) {
    match test {
        Expr::Operator {
            op: Operator::And,
            operands,
            ..
        } => operands
            .iter()
            .for_each(|o| guarded_subjects(o, guards, out)),
        Expr::Operator {
            op: Operator::IsNot,
            operands,
            ..
        } => {
            if let [subject, Expr::Constant {
                value: Constant::None,
                ..
            }] = operands.as_slice()
            {
                out.extend(subject.dotted());
            } else {
                out.extend(operands.iter().filter_map(Expr::dotted));
            }
        }
        Expr::Operator {
            op: Operator::Arithmetic,
            operands,
            ..
        } if operands.len() == 2 => out.extend(operands.iter().filter_map(Expr::dotted)),
        Expr::Call { func, args, .. } if matches!(func.as_ref(), Expr::Name { id, .. } if id == "isinstance") =>
        {
            out.extend(args.first().and_then(Expr::dotted));
        }
        Expr::Name { id, .. } => match guards.get(id) {
            Some(subjects) => out.extend(subjects.iter().cloned()),
            None => out.push(id.clone()),
        },
        Expr::Attribute { .. } => out.extend(test.dotted()),
        _ => {}
    }
}
