//! Arguments the function's own body shows to be tensors. An unannotated parameter becomes a
//! tensor where the code first uses it as one (`x.clone()`, `y.copy_(x)`); confirmed only from
//! there on, the work written before that use (`x_plus_one = x + 1` above `y.copy_(x)`) would
//! be lost. A parameter the body never rebinds holds one value throughout, so such a use
//! anywhere makes it a tensor from entry.

use rustc_hash::FxHashSet;

use crate::api::{TENSOR_METHODS, VIEW_METHODS};
use crate::syntax::{visit_calls, Expr, Stmt};

/// The names among `candidates` that `body` calls a tensor method on, or copies a tensor from,
/// and never rebinds.
pub(super) fn used_as_tensors<'n>(body: &[Stmt], candidates: &[&'n str]) -> Vec<&'n str> {
    let mut used: FxHashSet<&str> = FxHashSet::default();
    visit_calls(body, false, &mut |call| {
        let Expr::Call { func, args, .. } = call else {
            return;
        };
        let Expr::Attribute { value, attr, .. } = func.as_ref() else {
            return;
        };
        let method = attr.as_str();
        if TENSOR_METHODS.contains(&method) || VIEW_METHODS.contains(&method) {
            if let Expr::Name { id, .. } = value.as_ref() {
                if let Some(c) = candidates.iter().find(|c| **c == id) {
                    used.insert(c);
                }
            }
        }
        if method == "copy_" {
            if let Some(Expr::Name { id, .. }) = args.first() {
                if let Some(c) = candidates.iter().find(|c| **c == id) {
                    used.insert(c);
                }
            }
        }
    });
    if used.is_empty() {
        return Vec::new();
    }
    let mut rebound = FxHashSet::default();
    rebound_names(body, &mut rebound);
    candidates
        .iter()
        .copied()
        .filter(|c| used.contains(c) && !rebound.contains(c))
        .collect()
}

/// Names that statements of `stmts` (not nested functions) bind: assignment, loop and `with`
/// targets, and deletions.
fn rebound_names<'s>(stmts: &'s [Stmt], out: &mut FxHashSet<&'s str>) {
    for s in stmts {
        match s {
            Stmt::Assign { targets, .. } | Stmt::Delete { targets, .. } => {
                targets.iter().for_each(|t| target_names(t, out));
            }
            Stmt::For { target, .. } => target_names(target, out),
            Stmt::With { items, .. } => {
                items
                    .iter()
                    .filter_map(|i| i.var.as_ref())
                    .for_each(|v| target_names(v, out));
            }
            _ => {}
        }
        for block in s.blocks() {
            rebound_names(block, out);
        }
    }
}

/// The names a target binds (`x`, `a, *rest`, `(a, b)`); not attributes or items.
fn target_names<'s>(target: &'s Expr, out: &mut FxHashSet<&'s str>) {
    match target {
        Expr::Name { id, .. } => {
            out.insert(id);
        }
        Expr::Collection { elts, .. } => elts.iter().for_each(|e| target_names(e, out)),
        Expr::Starred { value, .. } => target_names(value, out),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_module;

    fn evident(source: &str, candidates: &[&'static str]) -> Vec<&'static str> {
        let module = parse_module(source).unwrap();
        let Some(Stmt::Def(def)) = module.first() else {
            panic!("one function expected");
        };
        used_as_tensors(&def.body, candidates)
    }

    #[test]
    fn a_tensor_use_anywhere_makes_an_argument_a_tensor_from_entry() {
        let source = "def f(x, y, n):\n    a = x + 1\n    y.copy_(x)\n    return a * n\n";
        assert_eq!(evident(source, &["x", "y", "n"]), ["x", "y"]);
    }

    #[test]
    fn a_rebound_argument_is_left_to_its_uses() {
        let source = "def f(x, y):\n    for x in y.chunk(2):\n        x.zero_()\n    y, = [y]\n";
        assert!(evident(source, &["x", "y"]).is_empty());
    }
}
