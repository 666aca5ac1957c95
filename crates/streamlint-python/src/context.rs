//! What the lowering of a function sees of its module and of the project: the shared
//! [`ModuleContext`] (switched when a call is lowered in place in another module) and the
//! function's [`Role`] in its module.

use rustc_hash::{FxHashMap, FxHashSet};

use streamlint_graph::{Deadline, Span};

use crate::api::{ApiCall, ApiModel};
use crate::names::Imports;
use crate::prefilter::Prefilter;
use crate::project::Project;
use crate::summary::ClassSummary;
use crate::syntax::{visit_calls, Expr, FunctionDef, Stmt};
use crate::wrappers::Wrapper;

/// What every function of a module shares: references into the project index, so that a call
/// lowered inside another module's function can switch to that module's context.
#[derive(Clone, Copy)]
pub struct ModuleContext<'a> {
    pub api: &'a ApiModel,
    /// The module's text, for scanning a function before lowering it (in the context of a
    /// callee lowered in place, whose module's text is not kept, the callee's own text).
    pub source: &'a str,
    /// Where `source` starts in the module (a callee's text starts at its `def`).
    pub source_start: u32,
    pub prefilter: &'a Prefilter,
    /// When lowering stops (checked between statements).
    pub deadline: Deadline,
    pub imports: &'a Imports,
    /// Functions defined at the top level of the module.
    pub defined: &'a FxHashSet<String>,
    /// Those of them that only forward to method calls, lowered at each call as those calls.
    pub wrappers: &'a FxHashMap<String, Wrapper>,
    /// Every module of the run, for calls into other modules.
    pub project: &'a Project<'a>,
    /// This module's place in the project.
    pub module: usize,
}

impl<'a> ModuleContext<'a> {
    /// The context in which a function of module `i` is lowered in place at another module's
    /// call.
    pub(crate) fn callee(project: &'a Project<'a>, i: usize, deadline: Deadline) -> Self {
        let m = project.module(i);
        ModuleContext {
            api: project.api,
            // A callee's text is read through its own index (see `with_function_text`).
            source: "",
            source_start: 0,
            prefilter: &project.prefilter,
            deadline,
            imports: &m.imports,
            defined: &m.defined,
            wrappers: &project.no_wrappers,
            project,
            module: i,
        }
    }

    /// The text a span covers (empty for a span outside the text the context holds).
    pub fn text(&self, span: Span) -> &'a [u8] {
        let (Some(start), Some(end)) = (
            span.start.checked_sub(self.source_start),
            span.end.checked_sub(self.source_start),
        ) else {
            return &[];
        };
        self.source
            .as_bytes()
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// The context of a callee lowered in place, with the callee's own text (as its index
    /// keeps it), so that what it tests can be named.
    pub(crate) fn with_function_text(self, name: &str) -> Self {
        match self.project.module(self.module).function_text(name) {
            Some((text, start)) => ModuleContext {
                source: text,
                source_start: start,
                ..self
            },
            None => self,
        }
    }

    /// The qualified name of a device module the expression denotes (`torch.cuda`,
    /// `torch.get_device_module(dev)`, `get_accelerator()`), if it is one.
    pub fn device_module(&self, expr: &Expr) -> Option<String> {
        device_module_of(expr, self.imports, self.api)
    }

    /// Do these statements call `set_stream`?
    pub fn sets_stream(&self, stmts: &[Stmt]) -> bool {
        let mut found = false;
        visit_calls(stmts, false, &mut |call| {
            if let Expr::Call { func, .. } = call {
                found |= self
                    .imports
                    .qualify(func)
                    .and_then(|q| self.api.classify(&q))
                    == Some(ApiCall::SetStream);
            }
        });
        found
    }
}

/// The device module an expression denotes, if it is one: a known name (`torch.cuda`,
/// `torch.get_device_module(dev)`, `get_accelerator()`, the configured ones), or one picked at
/// run time by name (`getattr(torch, device_type)`), which is the device's. A choice between
/// two (`getattr(torch, kind) if hasattr(torch, "accelerator") else torch.cuda`) is the device
/// module whichever arm runs: the first arm names it.
pub fn device_module_of(expr: &Expr, imports: &Imports, api: &ApiModel) -> Option<String> {
    if let Expr::IfExp { body, orelse, .. } = expr {
        let first = device_module_of(body, imports, api)?;
        device_module_of(orelse, imports, api)?;
        return Some(first);
    }
    if let Expr::Call { func, args, .. } = expr {
        let by_name = matches!(func.as_ref(), Expr::Name { id, .. } if id == "getattr");
        if by_name && args.first().and_then(|a| imports.qualify(a)).as_deref() == Some("torch") {
            return Some("torch.get_device_module()".into());
        }
    }
    let q = imports.qualify(expr)?;
    api.is_device_module(&q).then_some(q)
}

/// What the lowering of one function needs to know about its place in the module.
#[derive(Clone, Default)]
pub struct Role<'a> {
    /// The class whose `self` the function sees: its own (a method) or its enclosing method's
    /// (a closure).
    pub class: Option<&'a ClassSummary>,
    /// The first parameter is `self` or `cls`.
    pub is_method: bool,
    /// The function puts back a stream it sets, by protocol.
    pub restores_stream: bool,
    /// Why the function runs where the device must not be used.
    pub device_forbidden: Option<streamlint_graph::DeviceForbidden>,
    /// Attributes every construction of the class sets to the same string (`self.device` when
    /// every call passes `device="cpu"`).
    pub attr_text: Vec<(String, String)>,
    /// For a closure: the lists its enclosing function makes (`staged = []`), which the closure
    /// fills and drains as its own.
    pub captured_lists: Vec<String>,
    /// For a closure: the parameters and top-level names of its enclosing functions, which it
    /// calls and reads as values the enclosing call was given or made.
    pub captured_names: Vec<String>,
    /// For a closure: the functions its enclosing functions define (its siblings, at every
    /// level out), which it calls by name as helpers.
    pub enclosing_functions: Vec<&'a FunctionDef>,
    /// For a method (or a closure inside one): the methods of its class, which `self.m(..)`
    /// calls lower in place as calls of the module's helpers are.
    pub own_methods: Vec<&'a FunctionDef>,
    /// Objects bound to `threading.local()` the function sees (module globals, attributes of
    /// its class, its enclosing functions' locals): a stream kept on one is each thread's own,
    /// so the code that uses it runs on several threads at once.
    pub thread_locals: Vec<String>,
    /// The function is lowered to be summarized for its callers: the large project functions it
    /// calls keep the model of unknown code (a summary is not made inside another).
    pub summarizing: bool,
    /// The static methods of the module's classes, with their class's name: a call
    /// `Class.method(..)` in the module lowers them in place, as a helper of the module.
    pub static_methods: &'a [(String, &'a FunctionDef)],
    /// The module's classes that own a stream and hand it out from a method, by class name,
    /// with those methods (see `summary::stream_getters`).
    pub stream_getters: Option<&'a crate::summary::StreamGetters>,
}
