//! Code that DataLoader worker processes run, across the project.
//!
//! A dataset's methods and a loader's `collate_fn`/`worker_init_fn` run in worker processes when
//! the loader is made with `num_workers` other than 0, where any use of the device is a finding
//! (SL009). The loader is often built in another module than the dataset or the hook: each
//! module's loaders are indexed ([`LoaderUses::of`]), and the project's together
//! ([`LoaderUses::merge`]) say which code of a module runs in workers ([`Workers::find`]).
//! Classes and functions are matched by name, as the loader's module spells them.

use rustc_hash::{FxHashMap, FxHashSet};
use streamlint_graph::DeviceForbidden;

use crate::names::Imports;
use crate::syntax::{visit_calls, Constant, Expr, Keyword, Stmt};

/// What the loaders of some code do with datasets and hooks.
#[derive(Clone, Debug, Default)]
pub struct LoaderUses {
    /// Per dataset class (by name): does some loader use it with workers?
    pub datasets: FxHashMap<String, bool>,
    /// Functions given as a hook of a loader with workers (by name), with why they run there.
    pub hooks: FxHashMap<String, DeviceForbidden>,
    /// Methods given as a hook (`collate_fn=self.collate`), with why they run there.
    pub method_hooks: FxHashMap<String, DeviceForbidden>,
}

/// The DataLoader arguments whose functions run in its worker processes.
const HOOKS: [&str; 2] = ["collate_fn", "worker_init_fn"];

impl LoaderUses {
    /// The loaders `stmts` make (anywhere, nested functions included), seen through `imports`.
    pub fn of(stmts: &[Stmt], imports: &Imports) -> LoaderUses {
        let instances = instances_of(stmts);
        let is_loader = |func: &Expr| {
            imports
                .qualify(func)
                .is_some_and(|q| q.rsplit('.').next() == Some("DataLoader"))
        };
        let mut out = LoaderUses::default();
        visit_calls(stmts, true, &mut |call| {
            let Expr::Call {
                func,
                args,
                keywords,
                ..
            } = call
            else {
                return;
            };
            if !is_loader(func) {
                return;
            }
            let workers = has_workers(keywords);
            let dataset = args.first().or_else(|| Expr::keyword(keywords, "dataset"));
            if let Some(class) = dataset.and_then(|d| dataset_class(d, &instances)) {
                *out.datasets.entry(class).or_default() |= workers;
            }
            if workers {
                for hook in HOOKS {
                    if let Some(f) = Expr::keyword(keywords, hook) {
                        out.hook(hook, f, false);
                    }
                }
            }
        });
        // `loader.collate_fn = f` on a loader made here with workers, or made elsewhere (given
        // in, an item or an attribute of another object): its maker chose `num_workers` out of
        // sight, and by the contract it may start workers. Not on a loader made here without
        // workers, nor on the object itself (`self.collate_fn = collate_fn`).
        let mut with_workers = FxHashSet::default();
        let mut without_workers = FxHashSet::default();
        visit_assignments(stmts, &mut |target, value| {
            if let (Expr::Name { id, .. }, Expr::Call { func, keywords, .. }) = (target, value) {
                if is_loader(func) {
                    if has_workers(keywords) {
                        with_workers.insert(id.clone());
                    } else {
                        without_workers.insert(id.clone());
                    }
                }
            }
        });
        visit_assignments(stmts, &mut |target, value| {
            let Expr::Attribute {
                value: loader,
                attr,
                ..
            } = target
            else {
                return;
            };
            let Some(hook) = HOOKS.iter().find(|h| *h == attr) else {
                return;
            };
            let name = match loader.as_ref() {
                Expr::Name { id, .. } => Some(id.as_str()),
                _ => None,
            };
            match name {
                Some(id) if with_workers.contains(id) => out.hook(hook, value, false),
                Some(id) if without_workers.contains(id) || id == "self" || id == "cls" => {}
                _ => out.hook(hook, value, true),
            }
        });
        out
    }

    /// What the loaders of every module do together.
    pub fn merge<'u>(all: impl Iterator<Item = &'u LoaderUses>) -> LoaderUses {
        let mut out = LoaderUses::default();
        for uses in all {
            for (class, workers) in &uses.datasets {
                *out.datasets.entry(class.clone()).or_default() |= workers;
            }
            for (name, why) in &uses.hooks {
                note(&mut out.hooks, name, why.clone());
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.datasets.is_empty() && self.hooks.is_empty() && self.method_hooks.is_empty()
    }

    /// `f` is given as a loader's `hook`: a function, or a method (`self.m`); `assumed` where
    /// the loader is made out of sight.
    fn hook(&mut self, hook: &str, f: &Expr, assumed: bool) {
        let why = |name: &str| DeviceForbidden {
            why: if assumed {
                format!(
                    "`{name}`, the `{hook}` of a DataLoader made elsewhere, which may start worker processes (its `num_workers` is not seen here)"
                )
            } else {
                format!("`{name}`, the `{hook}` of a DataLoader with worker processes")
            },
            assumed,
        };
        if let Expr::Attribute { value, attr, .. } = f {
            if matches!(value.as_ref(), Expr::Name { id, .. } if id == "self") {
                note(&mut self.method_hooks, attr, why(attr));
            }
        } else if let Some(name) = function_name(f) {
            let reason = why(&name);
            note(&mut self.hooks, &name, reason);
        }
    }
}

/// Keep `reason` for `name`, unless one is kept already: a loader seen with workers says more
/// than one out of sight, so a seen reason replaces an assumed one.
fn note(reasons: &mut FxHashMap<String, DeviceForbidden>, name: &str, reason: DeviceForbidden) {
    match reasons.get_mut(name) {
        Some(kept) if kept.assumed && !reason.assumed => *kept = reason,
        Some(_) => {}
        None => {
            reasons.insert(name.to_string(), reason);
        }
    }
}

/// Code of one module that DataLoader worker processes run: methods of its datasets that some
/// loader of the project uses with workers (or that no loader of the project is seen to use),
/// and the functions and methods given as hooks of loaders with workers.
#[derive(Default)]
pub struct Workers {
    pub classes: FxHashSet<String>,
    /// Function name → why it runs in a worker.
    pub functions: FxHashMap<String, DeviceForbidden>,
    /// Method name → why it runs in a worker (`collate_fn=self.collate`).
    pub methods: FxHashMap<String, DeviceForbidden>,
}

impl Workers {
    /// The worker code of a module (`stmts`, its loaders `own`), with the loaders of the whole
    /// project (`project`, its own included).
    pub fn find(stmts: &[Stmt], own: &LoaderUses, project: &LoaderUses) -> Workers {
        let datasets = stmts.iter().filter_map(|s| match s {
            Stmt::Class(c) if c.bases.iter().any(is_dataset_base) => Some(c.name.clone()),
            _ => None,
        });
        // The module's own functions that some loader gives as a hook.
        let functions = stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Def(f) => Some((f.name.clone(), project.hooks.get(&f.name)?.clone())),
                _ => None,
            })
            .collect();
        Workers {
            classes: datasets
                .filter(|d| project.datasets.get(d).copied().unwrap_or(true))
                .collect(),
            functions,
            methods: own.method_hooks.clone(),
        }
    }
}

/// Does a DataLoader call start worker processes (`num_workers` given, and not 0)?
fn has_workers(keywords: &[Keyword]) -> bool {
    match Expr::keyword(keywords, "num_workers") {
        None => false,
        Some(Expr::Constant {
            value: Constant::Int(0),
            ..
        }) => false,
        Some(_) => true,
    }
}

/// Every `target = value` of the statements, at any depth.
fn visit_assignments(stmts: &[Stmt], f: &mut dyn FnMut(&Expr, &Expr)) {
    for s in stmts {
        match s {
            Stmt::Assign { targets, value, .. } => targets.iter().for_each(|t| f(t, value)),
            Stmt::Def(d) => visit_assignments(&d.body, f),
            Stmt::Class(c) => visit_assignments(&c.body, f),
            other => other
                .blocks()
                .into_iter()
                .for_each(|b| visit_assignments(b, f)),
        }
    }
}

fn is_dataset_base(base: &Expr) -> bool {
    base.dotted().is_some_and(|d| {
        d.rsplit('.')
            .next()
            .is_some_and(|last| last.ends_with("Dataset"))
    })
}

/// `name = SomeClass(...)` bindings anywhere in the module.
fn instances_of(stmts: &[Stmt]) -> FxHashMap<String, String> {
    let mut out = FxHashMap::default();
    for s in stmts {
        match s {
            Stmt::Assign {
                targets,
                value: Expr::Call { func, .. },
                ..
            } => {
                if let (Some(Expr::Name { id, .. }), Expr::Name { id: class, .. }) =
                    (targets.first(), func.as_ref())
                {
                    out.insert(id.clone(), class.clone());
                }
            }
            Stmt::Def(f) => out.extend(instances_of(&f.body)),
            Stmt::If { body, orelse, .. }
            | Stmt::For { body, orelse, .. }
            | Stmt::While { body, orelse, .. } => {
                out.extend(instances_of(body));
                out.extend(instances_of(orelse));
            }
            Stmt::With { body, .. } => out.extend(instances_of(body)),
            _ => {}
        }
    }
    out
}

/// The dataset class a loader's first argument is an instance of.
fn dataset_class(expr: &Expr, instances: &FxHashMap<String, String>) -> Option<String> {
    match expr {
        Expr::Call { func, .. } => match func.as_ref() {
            Expr::Name { id, .. } => Some(id.clone()),
            _ => None,
        },
        Expr::Name { id, .. } => instances.get(id).cloned(),
        _ => None,
    }
}

/// `fn` or `functools.partial(fn, ...)`.
fn function_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Name { id, .. } => Some(id.clone()),
        Expr::Call { func, args, .. } if func.dotted().is_some_and(|d| d.ends_with("partial")) => {
            args.first().and_then(function_name)
        }
        _ => None,
    }
}
