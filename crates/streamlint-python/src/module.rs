//! A module as a whole: its imports, its local functions, its classes' summaries, and one graph
//! body per function, method and the top level.

use std::collections::HashSet;

use streamlint_graph::Body;

use crate::api::ApiModel;
use crate::lower::Lowerer;
use crate::names::Imports;
use crate::summary::ClassSummary;
use crate::syntax::Stmt;

/// What every function of a module shares.
pub struct ModuleContext<'a> {
    pub api: &'a ApiModel,
    pub imports: Imports,
    /// Functions defined at the top level of the module.
    pub local_functions: HashSet<String>,
}

/// Lower every function of a parsed module.
pub fn lower_module(stmts: &[Stmt], api: &ApiModel) -> Vec<Body> {
    let cx = ModuleContext {
        api,
        imports: Imports::collect(stmts),
        local_functions: stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Def(f) => Some(f.name.clone()),
                _ => None,
            })
            .collect(),
    };
    let mut bodies = vec![Lowerer::lower(&cx, None, false, None, stmts)];
    lower_defs(&cx, stmts, None, false, &mut bodies);
    bodies
}

/// Lower the functions defined in `stmts` (and those nested in them). `in_class` says whether
/// `stmts` is a class body (its functions are methods); functions nested in a method keep the
/// method's class, since they close over its `self`.
fn lower_defs(cx: &ModuleContext<'_>, stmts: &[Stmt], class: Option<&ClassSummary>, in_class: bool, out: &mut Vec<Body>) {
    for s in stmts {
        match s {
            Stmt::Def(f) => {
                out.push(Lowerer::lower(cx, class, in_class, Some(f), &[]));
                lower_defs(cx, &f.body, class, false, out);
            }
            Stmt::Class(c) => {
                let summary = ClassSummary::build(&c.body, cx.api, &cx.imports);
                lower_defs(cx, &c.body, Some(&summary), true, out);
            }
            Stmt::If { body, orelse, .. } => {
                lower_defs(cx, body, class, in_class, out);
                lower_defs(cx, orelse, class, in_class, out);
            }
            Stmt::Try { body, handlers, orelse, finalbody, .. } => {
                lower_defs(cx, body, class, in_class, out);
                handlers.iter().for_each(|h| lower_defs(cx, h, class, in_class, out));
                lower_defs(cx, orelse, class, in_class, out);
                lower_defs(cx, finalbody, class, in_class, out);
            }
            _ => {}
        }
    }
}
