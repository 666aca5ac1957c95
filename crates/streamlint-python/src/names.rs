//! Import resolution: what a dotted name in this module refers to.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::syntax::{Expr, Stmt};

/// Names bound by the module's imports, mapped to what they import.
#[derive(Clone, Debug, Default)]
pub struct Imports {
    bound: FxHashMap<String, String>,
    /// Modules imported with `from m import *`: a name no import binds may come from them.
    stars: Vec<String>,
    /// Names imports bind to different things in different places (`from a import f` in one
    /// function, `from b import f` in another): which one a call means is not known.
    ambiguous: FxHashSet<String>,
}

impl Imports {
    /// Collect the imports of a module, at any depth (functions often import locally).
    pub fn collect(stmts: &[Stmt]) -> Imports {
        let mut imports = Imports::default();
        imports.visit(stmts);
        imports
    }

    fn visit(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Import { names, .. } => {
                    for (module, alias) in names {
                        match alias {
                            Some(a) => self.import(a.clone(), module.clone()),
                            None => {
                                let top = module.split('.').next().unwrap_or(module).to_string();
                                self.import(top.clone(), top)
                            }
                        }
                    }
                }
                Stmt::ImportFrom { module, names, .. } => {
                    for (name, alias) in names {
                        if name == "*" {
                            self.stars.push(module.clone());
                            continue;
                        }
                        let bound = alias.clone().unwrap_or_else(|| name.clone());
                        // `from . import x` names `x` of the package itself.
                        let qualified = if module.ends_with('.') {
                            format!("{module}{name}")
                        } else {
                            format!("{module}.{name}")
                        };
                        self.import(bound, qualified);
                    }
                }
                Stmt::Def(f) => self.visit(&f.body),
                Stmt::Class(c) => self.visit(&c.body),
                other => other.blocks().into_iter().for_each(|b| self.visit(b)),
            }
        }
    }

    fn import(&mut self, name: String, qualified: String) {
        if let Some(earlier) = self.bound.insert(name.clone(), qualified) {
            if earlier != self.bound[&name] {
                self.ambiguous.insert(name);
            }
        }
    }

    /// Do imports bind `name` to different things in different places?
    pub fn is_ambiguous(&self, name: &str) -> bool {
        self.ambiguous.contains(name)
    }

    /// What `name` was imported as, if an import binds it.
    pub fn bound(&self, name: &str) -> Option<&str> {
        self.bound.get(name).map(String::as_str)
    }

    /// Write relative imports (`.utils.f`, `..f`) as absolute names, from the importing
    /// module's package path.
    pub fn absolutize(&mut self, package: &[&str]) {
        for target in self.bound.values_mut().chain(self.stars.iter_mut()) {
            let dots = target.bytes().take_while(|&b| b == b'.').count();
            if dots == 0 {
                continue;
            }
            let keep = package.len().saturating_sub(dots - 1);
            let mut parts: Vec<&str> = package[..keep].to_vec();
            let rest = &target[dots..];
            if !rest.is_empty() {
                parts.push(rest);
            }
            *target = parts.join(".");
        }
    }

    /// Make `name` stand for `qualified`.
    pub fn bind(&mut self, name: &str, qualified: &str) {
        self.bound.insert(name.to_string(), qualified.to_string());
    }

    /// How code in the module writes the current stream: through the name it imports `torch`
    /// (or `torch.cuda`) as, so that a fix inserted there runs (`th.cuda.current_stream()`
    /// after `import torch as th`).
    pub fn current_stream_call(&self) -> String {
        if self.bound("torch") == Some("torch") {
            return "torch.cuda.current_stream()".into();
        }
        let named = |target: &str| {
            let mut names: Vec<&String> = self
                .bound
                .iter()
                .filter(|(_, t)| t.as_str() == target)
                .map(|(n, _)| n)
                .collect();
            names.sort();
            names.first().map(|n| n.to_string())
        };
        if let Some(torch) = named("torch") {
            return format!("{torch}.cuda.current_stream()");
        }
        if let Some(cuda) = named("torch.cuda") {
            return format!("{cuda}.current_stream()");
        }
        "torch.cuda.current_stream()".into()
    }

    /// Does an import bind `name` in the module?
    pub fn binds(&self, name: &str) -> bool {
        self.bound.contains_key(name)
    }

    /// Each name an import binds, with the qualified name it binds it to.
    pub fn bindings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.bound.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// What every import names: the qualified names bound, and the modules of star imports.
    pub fn targets(&self) -> impl Iterator<Item = &str> {
        self.bound.values().chain(&self.stars).map(String::as_str)
    }

    /// Feed the imports to `hasher` in an order that does not depend on the map's.
    pub fn hash_sorted(&self, hasher: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        let mut bound: Vec<(&String, &String)> = self.bound.iter().collect();
        bound.sort_unstable();
        bound.hash(hasher);
        self.stars.hash(hasher);
    }

    /// The modules of the module's `from m import *` imports.
    pub fn star_modules(&self) -> &[String] {
        &self.stars
    }

    /// The qualified name of an expression: `th.cuda.Stream` → `torch.cuda.Stream`, and calls in
    /// the chain keep their parentheses: `get_accelerator().Stream` →
    /// `deepspeed.accelerator.get_accelerator().Stream`.
    pub fn qualify(&self, expr: &Expr) -> Option<String> {
        let mut out = String::with_capacity(64);
        self.push_qualified(expr, &mut out).then_some(out)
    }

    /// Append the qualified name of `expr` to `out` (one string for the whole chain); false,
    /// with `out` left part-written, if it has none.
    fn push_qualified(&self, expr: &Expr, out: &mut String) -> bool {
        match expr {
            Expr::Name { id, .. } => {
                out.push_str(self.bound.get(id).unwrap_or(id));
                true
            }
            Expr::Attribute { value, attr, .. } => {
                if !self.push_qualified(value, out) {
                    return false;
                }
                out.push('.');
                out.push_str(attr);
                true
            }
            Expr::Call { func, .. } => {
                if !self.push_qualified(func, out) {
                    return false;
                }
                out.push_str("()");
                true
            }
            _ => false,
        }
    }
}
