//! Arguments the function's own body shows to be tensors. An unannotated parameter becomes a
//! tensor where the code first uses it as one (`x.clone()`, `y.copy_(x)`); confirmed only from
//! there on, the work written before that use (`x_plus_one = x + 1` above `y.copy_(x)`) would
//! be lost. A parameter the body never rebinds holds one value throughout, so such a use
//! anywhere makes it a tensor from entry.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::api::{TENSOR_METHODS, VIEW_METHODS};
use crate::syntax::{visit_calls, Expr, Stmt};

/// The names among `candidates` that `body` calls a tensor method on, or copies a tensor from,
/// and never rebinds.
pub(super) fn used_as_tensors<'n>(body: &[Stmt], candidates: &[&'n str]) -> Vec<&'n str> {
    let used = tensor_uses(body);
    if used.is_empty() {
        return Vec::new();
    }
    let mut bindings = FxHashMap::default();
    count_bindings(body, &mut bindings);
    candidates
        .iter()
        .copied()
        .filter(|c| used.contains(*c) && !bindings.contains_key(c))
        .collect()
}

/// The local names `body` binds in one place only (`out = store.fetch(i)`) and uses as tensors
/// somewhere: whatever code not seen returns there is a tensor from the binding on, so the work
/// written between the binding and that use (`total = a + out`) is not lost. A name bound in
/// two places may hold a tensor in one and something else in the other.
pub(super) fn bound_once_and_used_as_tensors(body: &[Stmt]) -> FxHashSet<String> {
    let used = tensor_uses(body);
    if used.is_empty() {
        return FxHashSet::default();
    }
    let mut bindings = FxHashMap::default();
    count_bindings(body, &mut bindings);
    used.into_iter()
        .filter(|n| bindings.get(n.as_str()) == Some(&1))
        .collect()
}

/// The names `body` calls a tensor method on (`x.clone()`) or copies a tensor from
/// (`y.copy_(x)`).
fn tensor_uses(body: &[Stmt]) -> FxHashSet<String> {
    let mut used: FxHashSet<String> = FxHashSet::default();
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
                used.insert(id.to_string());
            }
        }
        if method == "copy_" {
            if let Some(Expr::Name { id, .. }) = args.first() {
                used.insert(id.to_string());
            }
        }
    });
    used
}

/// How many statements of `stmts` (not nested functions) bind each name.
fn count_bindings<'s>(stmts: &'s [Stmt], out: &mut FxHashMap<&'s str, usize>) {
    for s in stmts {
        let mut bound = FxHashSet::default();
        match s {
            Stmt::Assign { targets, .. } | Stmt::Delete { targets, .. } => {
                targets.iter().for_each(|t| target_names(t, &mut bound));
            }
            Stmt::For { target, .. } => target_names(target, &mut bound),
            Stmt::With { items, .. } => {
                items
                    .iter()
                    .filter_map(|i| i.var.as_ref())
                    .for_each(|v| target_names(v, &mut bound));
            }
            _ => {}
        }
        for name in bound {
            *out.entry(name).or_default() += 1;
        }
        for block in s.blocks() {
            count_bindings(block, out);
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

    #[test]
    fn a_local_bound_once_and_used_as_a_tensor_is_one_from_its_binding() {
        let source = "def f(store, i):\n    a = store.get(i)\n    b = store.get(i)\n    b = b[0]\n    c = store.meta()\n    total = c + a\n    a.record_stream(s)\n    b.clone()\n";
        let module = parse_module(source).unwrap();
        let Some(Stmt::Def(def)) = module.first() else {
            panic!("one function expected");
        };
        let names = bound_once_and_used_as_tensors(&def.body);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["a"]);
    }
}
