//! A module as a whole: its imports, its local functions, its classes' summaries, which code runs
//! in data-loading workers, and one graph body per function, method and the top level.

use rustc_hash::{FxHashMap, FxHashSet};

use rayon::prelude::*;

use streamlint_graph::{Body, Deadline};

use crate::context::{ModuleContext, Role};
use crate::data_loaders::{LoaderUses, Workers};
use crate::lower::Lowerer;
use crate::project::{Parsed, Project};
use crate::summary::ClassSummary;
use crate::syntax::{local_functions, visit_calls, ClassDef, Expr, FunctionDef, Stmt};
use crate::wrappers;
use streamlint_graph::DeviceForbidden;

/// The module's code that DataLoader worker processes run, by its own loaders and the
/// project's (the module's own read from its text as it is now).
fn workers_of(cx: &ModuleContext<'_>, stmts: &[Stmt]) -> Workers {
    let project = cx.project.loader_uses();
    if !cx.project.module(cx.module).data_loading && project.is_empty() {
        return Workers::default();
    }
    // Only a module that names a loader or a dataset can make one.
    let own = if cx.project.module(cx.module).data_loading {
        LoaderUses::of(stmts, cx.imports)
    } else {
        LoaderUses::default()
    };
    if own.is_empty() {
        return Workers::find(stmts, &own, project);
    }
    let all = LoaderUses::merge([&own, project].into_iter());
    Workers::find(stmts, &own, &all)
}

/// The static methods of the module's top-level classes, with their class's name.
fn static_methods(stmts: &[Stmt]) -> Vec<(String, &FunctionDef)> {
    let mut out = Vec::new();
    for s in stmts {
        if let Stmt::Class(c) = s {
            for m in &c.body {
                if let Stmt::Def(f) = m {
                    if f.decorators.iter().any(crate::lower::is_staticmethod) {
                        out.push((c.name.clone(), f));
                    }
                }
            }
        }
    }
    out
}

/// Lower every function of a parsed module.
pub fn lower_module<'a>(cx: ModuleContext<'a>, stmts: &'a [Stmt]) -> Vec<Body> {
    let workers = workers_of(&cx, stmts);
    let thread_locals = thread_local_objects(stmts, cx.imports, "");
    // Only classes read what their constructions pass.
    let has_classes = memchr::memmem::find(cx.source.as_bytes(), b"class ").is_some();
    let constructions = if has_classes {
        constructions(stmts)
    } else {
        Constructions::default()
    };
    let mut classes = Classes::default();
    // Only a module that names them registers saved-tensor hooks.
    let hooks = cx.project.module(cx.module).saved_tensor_hooks;
    summarize_classes(&cx, &constructions, hooks, stmts, &mut classes);
    // Streams held by objects of the module's own classes (`self.side = SideStream().get()`).
    let stream_getters =
        crate::summary::stream_getters(classes.values().map(|i| (i.name.as_str(), &i.summary)));
    let getters = Some(&stream_getters).filter(|g| !g.is_empty());
    if getters.is_some() {
        let unordered = crate::summary::unordered_holders(
            classes.values().map(|i| (i.name.as_str(), &i.summary)),
            &stream_getters,
        );
        for info in classes.values_mut() {
            info.summary
                .resolve_held_streams(&stream_getters, &unordered);
        }
    }
    let stream_function_calls = cx.project.stream_function_calls(cx.module);
    let static_methods = static_methods(stmts);
    let top = Scope {
        cx: &cx,
        static_methods: &static_methods,
        stream_function_calls: &stream_function_calls,
        workers: &workers,
        classes: &classes,
        stream_getters: getters,
        class: None,
        thread_locals: &thread_locals,
    };
    let mut jobs = Vec::new();
    top.gather(stmts, &mut jobs);
    let lower = |(role, f): (Role<'_>, &FunctionDef)| Lowerer::lower(cx, role, Some(f), &[]);
    let module_role = Role {
        stream_getters: getters,
        static_methods: &static_methods,
        ..Role::default()
    };
    let mut bodies = vec![Lowerer::lower(cx, module_role, None, stmts)];
    // Functions are lowered independently of each other. Within a thread pool (the caller's:
    // it chose the stacks deep code needs), they are lowered in parallel, which a large file
    // open in an editor needs; elsewhere one after the other.
    if rayon::current_thread_index().is_some() {
        bodies.par_extend(jobs.into_par_iter().map(lower));
    } else {
        bodies.extend(jobs.into_iter().map(lower));
    }
    bodies
}

/// What the methods of one class share.
struct ClassInfo {
    name: String,
    summary: ClassSummary,
    /// `__exit__` puts back the stream `__enter__` set.
    exit_restores: bool,
    /// See [`Role::attr_text`].
    attr_text: Vec<(String, String)>,
    /// Attributes of `self` its methods bind to `threading.local()`.
    thread_locals: Vec<String>,
}

/// Every class of the module, by the class's place in the syntax tree.
type Classes = FxHashMap<*const ClassDef, ClassInfo>;

/// Summarize the classes in `stmts`, at any depth (once each: a class may have thousands of
/// methods).
fn summarize_classes(
    cx: &ModuleContext<'_>,
    constructions: &Constructions,
    hooks: bool,
    stmts: &[Stmt],
    out: &mut Classes,
) {
    for s in stmts {
        match s {
            Stmt::Def(f) => summarize_classes(cx, constructions, hooks, &f.body, out),
            Stmt::Class(c) => {
                let mut summary = ClassSummary::build(&c.body, cx.api, cx.imports);
                if hooks {
                    summary.unpack_arguments =
                        crate::hooks::unpack_arguments(c, cx.api, cx.imports);
                }
                let info = ClassInfo {
                    name: c.name.clone(),
                    summary,
                    exit_restores: c.body.iter().any(|s| {
                        matches!(s, Stmt::Def(m) if m.name == "__exit__" && cx.sets_stream(&m.body))
                    }),
                    attr_text: constructor_strings(c, constructions),
                    thread_locals: c
                        .body
                        .iter()
                        .filter_map(|s| match s {
                            Stmt::Def(m) => Some(m),
                            _ => None,
                        })
                        .flat_map(|m| thread_local_objects(&m.body, cx.imports, "self."))
                        .collect(),
                };
                out.insert(std::ptr::from_ref(c), info);
                summarize_classes(cx, constructions, hooks, &c.body, out);
            }
            other => other
                .blocks()
                .into_iter()
                .for_each(|b| summarize_classes(cx, constructions, hooks, b, out)),
        }
    }
}

/// Where the functions being lowered sit: at the top level, in a class, or in a method.
#[derive(Clone, Copy)]
struct Scope<'s> {
    cx: &'s ModuleContext<'s>,
    /// See [`Role::static_methods`].
    static_methods: &'s [(String, &'s FunctionDef)],
    /// Where the module calls a function of the project with stream code (see
    /// `Project::stream_function_calls`).
    stream_function_calls: &'s [usize],
    workers: &'s Workers,
    classes: &'s Classes,
    /// See [`crate::summary::StreamGetters`].
    stream_getters: Option<&'s crate::summary::StreamGetters>,
    /// The class body being walked, with what its methods share.
    class: Option<(&'s ClassDef, &'s ClassInfo)>,
    /// Module globals bound to `threading.local()`.
    thread_locals: &'s [String],
}

/// A function to lower, in its role.
type Job<'s> = (Role<'s>, &'s FunctionDef);

impl<'s> Scope<'s> {
    /// The functions defined in `stmts` (and those nested in them) worth lowering. Functions
    /// nested in a method keep the method's class, since they close over its `self`.
    fn gather(&self, stmts: &'s [Stmt], out: &mut Vec<Job<'s>>) {
        for s in stmts {
            match s {
                Stmt::Def(f) => {
                    self.gather_def(f, self.role(f), out);
                    let enclosing_functions = local_functions(&f.body);
                    let enclosing_functions_empty = enclosing_functions.is_empty();
                    // What closures see of the function, read only where it has some.
                    let nested = if enclosing_functions.is_empty() {
                        Role::default()
                    } else {
                        let mut thread_locals = self.visible_thread_locals();
                        thread_locals.extend(thread_local_objects(&f.body, self.cx.imports, ""));
                        Role {
                            class: self.class.map(|(_, info)| &info.summary),
                            own_methods: self.class.map_or_else(Vec::new, |(c, _)| methods_of(c)),
                            captured_lists: list_literals(&f.body),
                            captured_names: bound_names(f),
                            enclosing_functions,
                            thread_locals,
                            static_methods: self.static_methods,
                            ..Role::default()
                        }
                    };
                    let only_called = if enclosing_functions_empty {
                        Default::default()
                    } else {
                        crate::syntax::names_only_called(&f.body)
                    };
                    self.gather_nested(&f.body, &only_called, &f.body, nested, out);
                }
                Stmt::Class(c) => self.in_class(c).gather(&c.body, out),
                Stmt::If { body, orelse, .. } => {
                    self.gather(body, out);
                    self.gather(orelse, out);
                }
                Stmt::Try {
                    body,
                    handlers,
                    orelse,
                    finalbody,
                    ..
                } => {
                    self.gather(body, out);
                    handlers.iter().for_each(|h| self.gather(h, out));
                    self.gather(orelse, out);
                    self.gather(finalbody, out);
                }
                _ => {}
            }
        }
    }

    /// Closures inside a function, at any depth; `enclosing` is the body of the function that
    /// defines them, and `only_called` the names that body only calls (see
    /// `syntax::names_only_called`).
    fn gather_nested(
        &self,
        enclosing: &'s [Stmt],
        only_called: &FxHashSet<String>,
        stmts: &'s [Stmt],
        role: Role<'s>,
        out: &mut Vec<Job<'s>>,
    ) {
        for s in stmts {
            match s {
                Stmt::Def(f) => {
                    // A closure its enclosing function only calls, lowering each call in place
                    // (see `Lowerer::local_function`): defined once, undecorated, not a
                    // generator, never handed on. Its code is judged there, with the enclosing
                    // function's streams and the orderings around the call; alone, what it
                    // returns would be taken to go to an unseen caller.
                    let lowered_in_place = f.decorators.is_empty()
                        && !crate::syntax::is_generator(f)
                        && local_functions(enclosing)
                            .iter()
                            .filter(|d| d.name == f.name)
                            .count()
                            == 1
                        && only_called.contains(&f.name);
                    if !lowered_in_place {
                        self.gather_def(f, role.clone(), out);
                    }
                    let mut inner = role.clone();
                    inner.enclosing_functions.extend(local_functions(&f.body));
                    let enclosing = thread_local_objects(&f.body, self.cx.imports, "");
                    inner.thread_locals.extend(enclosing);
                    inner.captured_names.extend(bound_names(f));
                    let inner_only_called = if local_functions(&f.body).is_empty() {
                        Default::default()
                    } else {
                        crate::syntax::names_only_called(&f.body)
                    };
                    self.gather_nested(&f.body, &inner_only_called, &f.body, inner, out);
                }
                Stmt::Class(c) => self.in_class(c).gather(&c.body, out),
                other => other
                    .blocks()
                    .into_iter()
                    .for_each(|b| self.gather_nested(enclosing, only_called, b, role.clone(), out)),
            }
        }
    }

    /// Take one function for lowering, unless its text shows it has no stream order of its own: no stream
    /// API, event, `non_blocking` copy or attribute of its class that holds stream state (a
    /// stream, an event, pinned memory, a tensor staged on a side stream). Such a function runs
    /// everything on the caller's current stream, where no rule has anything to judge. Code that
    /// runs in data-loading workers is always lowered: any device use there is a finding.
    fn gather_def(&self, f: &'s FunctionDef, role: Role<'s>, out: &mut Vec<Job<'s>>) {
        let text = self.cx.text(f.span);
        let (start, end) = (f.span.start as usize, f.span.end as usize);
        let worth_it = role.device_forbidden.is_some()
            || self.cx.prefilter.admits(text)
            || crate::project::within(self.stream_function_calls, start, end)
            || role.class.is_some_and(|class| {
                class.attrs.iter().any(|(attr, kind)| {
                    (kind.carries_stream_state() || class.written_on_a_stream(attr))
                        && memchr::memmem::find(text, attr.as_bytes()).is_some()
                })
            });
        if worth_it {
            out.push((role, f));
        }
    }

    /// The scope of a class's body.
    fn in_class(&self, class: &'s ClassDef) -> Scope<'s> {
        let info = &self.classes[&std::ptr::from_ref(class)];
        Scope {
            class: Some((class, info)),
            ..*self
        }
    }

    /// The thread-local objects a function of this scope sees: the module's, and its class's.
    fn visible_thread_locals(&self) -> Vec<String> {
        let class = self.class.map_or(&[][..], |(_, info)| &info.thread_locals);
        self.thread_locals.iter().chain(class).cloned().collect()
    }

    fn role(&self, f: &FunctionDef) -> Role<'s> {
        let cx = self.cx;
        let context_manager = f
            .decorators
            .iter()
            .any(|d| d.dotted().is_some_and(|d| d.ends_with("contextmanager")));
        let restores_in_finally = {
            let mut found = false;
            visit_try_finally(&f.body, &mut |finalbody| found |= cx.sets_stream(finalbody));
            found
        };
        let Some((class, info)) = self.class else {
            return Role {
                stream_getters: self.stream_getters,
                static_methods: self.static_methods,
                restores_stream: context_manager && restores_in_finally,
                device_forbidden: self.workers.functions.get(&f.name).cloned(),
                thread_locals: self.visible_thread_locals(),
                ..Role::default()
            };
        };
        let restores_stream = match f.name.as_str() {
            "__enter__" => info.exit_restores,
            "__exit__" => true,
            _ => context_manager && restores_in_finally,
        };
        let device_forbidden = (self.workers.classes.contains(&class.name)
            && matches!(
                f.name.as_str(),
                "__getitem__" | "__getitems__" | "__iter__" | "__next__" | "__init__"
            ))
        .then(|| DeviceForbidden {
            why: format!(
                "`{}.{}`, which runs in DataLoader worker processes",
                class.name, f.name
            ),
            assumed: false,
        })
        .or_else(|| self.workers.methods.get(&f.name).cloned());
        Role {
            class: Some(&info.summary),
            is_method: true,
            restores_stream,
            device_forbidden,
            attr_text: info.attr_text.clone(),
            captured_lists: Vec::new(),
            captured_names: Vec::new(),
            enclosing_functions: Vec::new(),
            own_methods: methods_of(class),
            thread_locals: self.visible_thread_locals(),
            summarizing: false,
            stream_getters: self.stream_getters,
            static_methods: self.static_methods,
        }
    }
}

/// For each class name: the string literals each construction `Class(..)` in the module passes
/// by keyword (`None` for a keyword given something else).
type Constructions = FxHashMap<String, Vec<FxHashMap<String, Option<String>>>>;

fn constructions(module: &[Stmt]) -> Constructions {
    let mut out = Constructions::default();
    visit_calls(module, true, &mut |call| {
        let Expr::Call { func, keywords, .. } = call else {
            return;
        };
        let Expr::Name { id, .. } = func.as_ref() else {
            return;
        };
        if !id.starts_with(|c: char| c.is_ascii_uppercase()) {
            return;
        }
        let given = keywords
            .iter()
            .filter_map(|k| {
                k.name
                    .clone()
                    .map(|n| (n, k.value.as_str().map(str::to_string)))
            })
            .collect();
        out.entry(id.clone()).or_default().push(given);
    });
    out
}

/// `self.x = p` assignments of `__init__` whose parameter `p` every construction of the class in
/// the module passes as the same string literal (`FeatureBank(.., device="cpu")`).
fn constructor_strings(class: &ClassDef, constructions: &Constructions) -> Vec<(String, String)> {
    let (Some(init), Some(calls)) = (
        class.body.iter().find_map(|s| match s {
            Stmt::Def(f) if f.name == "__init__" => Some(f),
            _ => None,
        }),
        constructions.get(&class.name),
    ) else {
        return Vec::new();
    };
    let params: FxHashSet<&str> = init.params.iter().map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    for s in &init.body {
        let Stmt::Assign {
            targets,
            value: Expr::Name { id: param, .. },
            ..
        } = s
        else {
            continue;
        };
        let Some(attr) = targets
            .first()
            .and_then(Expr::dotted)
            .filter(|d| d.starts_with("self."))
        else {
            continue;
        };
        if !params.contains(param.as_str()) {
            continue;
        }
        let texts: Vec<Option<&String>> = calls
            .iter()
            .map(|c| c.get(param).and_then(Option::as_ref))
            .collect();
        if let Some(Some(first)) = texts.first() {
            if texts.iter().all(|t| *t == Some(*first)) {
                out.push((attr, (*first).clone()));
            }
        }
    }
    out
}

/// The names a function binds that its closures can see: its parameters (not `self`) and the
/// names its own statements assign.
fn bound_names(f: &FunctionDef) -> Vec<String> {
    let params = f.params.iter().map(|p| p.name.clone());
    let assigned = f.body.iter().flat_map(|s| match s {
        Stmt::Assign { targets, .. } => targets
            .iter()
            .filter_map(|t| match t {
                Expr::Name { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    });
    params.chain(assigned).filter(|n| n != "self").collect()
}

/// The names the statements (not their nested blocks) bind to `threading.local()`, an object
/// whose attributes each thread sees its own copy of; `prefix` keeps only targets that start
/// with it (`self.` in a method).
fn thread_local_objects(
    stmts: &[Stmt],
    imports: &crate::names::Imports,
    prefix: &str,
) -> Vec<String> {
    let mut names = Vec::new();
    for s in stmts {
        let Stmt::Assign {
            targets,
            value: Expr::Call { func, args, .. },
            ..
        } = s
        else {
            continue;
        };
        if !args.is_empty() || imports.qualify(func).as_deref() != Some("threading.local") {
            continue;
        }
        names.extend(
            targets
                .iter()
                .filter_map(Expr::dotted)
                .filter(|t| t.starts_with(prefix)),
        );
    }
    names
}

/// The names the statements (not their nested blocks) bind to a new empty list (`x = []`,
/// `x: List[T] = []`, `x = list()`).
fn list_literals(stmts: &[Stmt]) -> Vec<String> {
    let mut names = Vec::new();
    for s in stmts {
        let Stmt::Assign { targets, value, .. } = s else {
            continue;
        };
        let empty_list = match value {
            Expr::Collection { elts, .. } => elts.is_empty(),
            Expr::Call { func, args, .. } => {
                args.is_empty() && func.dotted().as_deref() == Some("list")
            }
            _ => false,
        };
        if empty_list {
            names.extend(targets.iter().filter_map(|t| match t {
                Expr::Name { id, .. } => Some(id.clone()),
                _ => None,
            }));
        }
    }
    names
}

/// Call `f` with the `finally` body of every `try` in `stmts` (not in nested functions).
fn visit_try_finally(stmts: &[Stmt], f: &mut dyn FnMut(&[Stmt])) {
    for s in stmts {
        match s {
            Stmt::Try {
                body,
                handlers,
                orelse,
                finalbody,
            } => {
                f(finalbody);
                visit_try_finally(body, f);
                handlers.iter().for_each(|h| visit_try_finally(h, f));
                visit_try_finally(orelse, f);
            }
            Stmt::If { body, orelse, .. }
            | Stmt::For { body, orelse, .. }
            | Stmt::While { body, orelse, .. } => {
                visit_try_finally(body, f);
                visit_try_finally(orelse, f);
            }
            Stmt::With { body, .. } => visit_try_finally(body, f),
            _ => {}
        }
    }
}

impl<'a> Project<'a> {
    /// Lower every function of module `i`, whose text is `source`, parsed as `parsed` (see
    /// [`crate::lower_source`] and [`crate::ModuleIndex::parse`]). Its imports and top-level
    /// names are the index's, read from the whole text; its forwarding wrappers come from the
    /// tree.
    pub fn lower(&self, i: usize, source: &str, parsed: &Parsed, deadline: Deadline) -> Vec<Body> {
        let stmts = &parsed.0;
        let wrappers = wrappers::find(stmts);
        let project: &Project<'_> = self;
        let cx = ModuleContext {
            source,
            wrappers: &wrappers,
            ..ModuleContext::callee(project, i, deadline)
        };
        lower_module(cx, stmts)
    }
}

/// The methods a class defines in its body.
fn methods_of(class: &ClassDef) -> Vec<&FunctionDef> {
    class
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Def(f) => Some(f),
            _ => None,
        })
        .collect()
}
