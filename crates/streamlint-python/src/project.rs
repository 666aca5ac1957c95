//! The project index: the Python files under check form one program. Each parsed module is
//! indexed once (its imports, its top-level functions, its forwarding wrappers), and a call
//! written in one module is resolved to the function it names in another, through `import`,
//! `from .. import` (relative ones too) and package re-exports. Calls that leave the checked
//! files resolve to nothing and keep the default model of unknown code.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use streamlint_graph::{Body, Deadline};

use crate::api::ApiModel;
use crate::module::{lower_module, ModuleContext};
use crate::names::Imports;
use crate::prefilter::Prefilter;
use crate::syntax::{Expr, FunctionDef, Stmt};
use crate::wrappers::{self, Wrapper};

/// A parsed module, as the project keeps it while its files are lowered.
pub struct Parsed(pub(crate) Vec<Stmt>);

/// What one module offers the others, built from its own text alone.
pub struct ModuleIndex<'a> {
    /// Dotted module name (`pkg.sub.mod`; a package's `__init__.py` is `pkg.sub`).
    pub name: String,
    pub source: &'a str,
    pub stmts: &'a [Stmt],
    pub imports: Imports,
    /// Functions defined at the top level of the module.
    pub functions: HashMap<String, &'a FunctionDef>,
    /// Those of them that only forward to method calls, lowered at each call as those calls.
    pub wrappers: HashMap<String, Wrapper>,
    /// Names the module binds at its top level (its globals).
    pub globals: std::collections::HashSet<String>,
}

impl<'a> ModuleIndex<'a> {
    fn new(path_name: String, source: &'a str, stmts: &'a [Stmt], api: &ApiModel) -> Self {
        // In a package's `__init__.py`, relative imports start from the package itself.
        let (name, is_package) = match package_of_init(&path_name) {
            Some(package) => (package.to_string(), true),
            None => (path_name, false),
        };
        let mut imports = Imports::collect(stmts);
        // `device_module = torch.get_device_module()` at the top level reads like an import.
        for s in stmts {
            if let Stmt::Assign { targets, value, .. } = s {
                let Some(q) = imports.qualify(value).filter(|q| api.is_device_module(q)) else {
                    continue;
                };
                for t in targets {
                    if let Expr::Name { id, .. } = t {
                        imports.bind(id, &q);
                    }
                }
            }
        }
        // A relative import names a module of this package (`from .utils import f` in
        // `pkg.mod` is `pkg.utils.f`).
        let package: Vec<&str> = if is_package {
            name.split('.').collect()
        } else {
            let mut parts: Vec<&str> = name.split('.').collect();
            parts.pop();
            parts
        };
        imports.absolutize(&package);
        ModuleIndex {
            name,
            source,
            stmts,
            imports,
            functions: stmts
                .iter()
                .filter_map(|s| match s {
                    Stmt::Def(f) => Some((f.name.clone(), f)),
                    _ => None,
                })
                .collect(),
            wrappers: wrappers::find(stmts),
            globals: stmts
                .iter()
                .filter_map(|s| match s {
                    Stmt::Assign { targets, .. } => match targets.first() {
                        Some(Expr::Name { id, .. }) => Some(id.clone()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect(),
        }
    }
}

/// The package an `__init__` module name stands for (`pkg.sub.__init__` → `pkg.sub`).
fn package_of_init(name: &str) -> Option<&str> {
    if name == "__init__" {
        return Some("");
    }
    name.strip_suffix(".__init__")
}

/// Every dotted suffix of a module name (`src.pkg.mod`, `pkg.mod`, `mod`): the folder a run
/// starts from need not be the import root, so a module is found under each.
fn dotted_suffixes(name: &str) -> impl Iterator<Item = String> + '_ {
    let parts: Vec<&str> = name.split('.').collect();
    (0..parts.len()).map(move |start| parts[start..].join("."))
}

/// Re-exports followed from a package to the module that defines a name, at most.
const MAX_REEXPORT_HOPS: usize = 8;

/// A function of the project, found from a call.
#[derive(Clone, Copy)]
pub struct Resolved<'a> {
    pub module: usize,
    pub def: &'a FunctionDef,
}

/// A package's `__init__.py` with no stream code of its own: it can only re-export names, so
/// it is read, parsed and its imports collected the first time a call resolves through it.
struct Package {
    path: PathBuf,
    imports: OnceLock<Option<Imports>>,
}

impl Package {
    fn imports(&self, name: &str) -> Option<&Imports> {
        self.imports
            .get_or_init(|| {
                let source = std::fs::read_to_string(&self.path).ok()?;
                let stmts = crate::parser::parse_module(&source).ok()?;
                let mut imports = Imports::collect(&stmts);
                imports.absolutize(&name.split('.').collect::<Vec<_>>());
                Some(imports)
            })
            .as_ref()
    }
}

/// Every parsed module of the run, with a lookup from dotted names to modules.
pub struct Project<'a> {
    modules: Vec<ModuleIndex<'a>>,
    /// Packages whose `__init__.py` was not parsed, by dotted name.
    packages: HashMap<String, Package>,
    /// The packages under every dotted suffix of their names (see `dotted_suffixes`).
    package_suffixes: HashMap<String, Vec<String>>,
    /// The name of every top-level function of the parsed modules: most calls name none of
    /// them, and are turned away without resolving their modules. (So a package that
    /// re-exports a function under another name, `from .impl import f as g`, is not followed.)
    function_names: std::collections::HashSet<&'a str>,
    /// Each module under every dotted suffix of its name (see `dotted_suffixes`).
    by_suffix: HashMap<String, Vec<usize>>,
    api: &'a ApiModel,
    prefilter: Prefilter,
}

impl<'a> Project<'a> {
    /// Index the modules: (dotted name from the file's path, source, parsed statements), and
    /// the packages whose `__init__.py` was left unparsed: (dotted name, path), read only if a
    /// call resolves through them.
    pub fn new(
        files: Vec<(String, &'a str, &'a Parsed)>,
        packages: Vec<(String, PathBuf)>,
        api: &'a ApiModel,
    ) -> Self {
        let modules: Vec<ModuleIndex<'a>> = files
            .into_iter()
            .map(|(name, source, parsed)| ModuleIndex::new(name, source, &parsed.0, api))
            .collect();
        let mut by_suffix: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, m) in modules.iter().enumerate() {
            for suffix in dotted_suffixes(&m.name) {
                by_suffix.entry(suffix).or_default().push(i);
            }
        }
        let packages: HashMap<String, Package> = packages
            .into_iter()
            .map(|(name, path)| {
                let name = package_of_init(&name).unwrap_or(&name).to_string();
                let package = Package {
                    path,
                    imports: OnceLock::new(),
                };
                (name, package)
            })
            .collect();
        let mut package_suffixes: HashMap<String, Vec<String>> = HashMap::new();
        for name in packages.keys() {
            for suffix in dotted_suffixes(name) {
                package_suffixes
                    .entry(suffix)
                    .or_default()
                    .push(name.clone());
            }
        }
        let function_names = modules
            .iter()
            .flat_map(|m| m.functions.values().map(|f| f.name.as_str()))
            .collect();
        Project {
            modules,
            packages,
            package_suffixes,
            function_names,
            by_suffix,
            api,
            prefilter: Prefilter::new(api),
        }
    }

    pub fn module(&self, i: usize) -> &ModuleIndex<'a> {
        &self.modules[i]
    }

    /// The context every function of module `i` is lowered in.
    pub(crate) fn context(&'a self, i: usize, deadline: Deadline) -> ModuleContext<'a> {
        let m = &self.modules[i];
        ModuleContext {
            api: self.api,
            source: m.source,
            prefilter: &self.prefilter,
            deadline,
            imports: &m.imports,
            functions: &m.functions,
            wrappers: &m.wrappers,
            project: self,
            module: i,
        }
    }

    /// Lower every function of module `i` (see [`crate::lower_source`]).
    pub fn lower(&'a self, i: usize, deadline: Deadline) -> Vec<Body> {
        let cx = self.context(i, deadline);
        lower_module(cx, self.modules[i].stmts)
    }

    /// The module a dotted name denotes, seen from module `from`: where two modules end in the
    /// same name, the one sharing the longest package path with `from`.
    fn find_module(&self, from: usize, dotted: &str) -> Option<usize> {
        let candidates = self.by_suffix.get(dotted)?;
        if let [one] = candidates.as_slice() {
            return Some(*one);
        }
        let here: Vec<&str> = self.modules[from].name.split('.').collect();
        let shared = |i: &usize| {
            self.modules[*i]
                .name
                .split('.')
                .zip(&here)
                .take_while(|(a, b)| a == *b)
                .count()
        };
        let best = candidates.iter().map(shared).max()?;
        let mut top = candidates.iter().filter(|i| shared(i) == best);
        let first = top.next().copied();
        // Two equally close modules: the name does not say which one is meant.
        top.next().is_none().then_some(first).flatten()
    }

    /// The unparsed package a dotted name ends with, when exactly one does.
    fn find_package(&self, dotted: &str) -> Option<(&str, &Package)> {
        match self.package_suffixes.get(dotted)?.as_slice() {
            [name] => Some((name.as_str(), &self.packages[name])),
            _ => None,
        }
    }

    /// The project function a qualified name (as a module's imports qualify a call) denotes:
    /// `f` defined in module `from`, `pkg.mod.f`, or a name a package re-exports.
    pub fn resolve(&self, from: usize, qualified: &str) -> Option<Resolved<'a>> {
        self.resolve_hops(from, qualified, MAX_REEXPORT_HOPS)
    }

    fn resolve_hops(&self, from: usize, qualified: &str, hops: usize) -> Option<Resolved<'a>> {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if qualified.contains("()") || !self.function_names.contains(last) {
            return None;
        }
        let Some((module_path, name)) = qualified.rsplit_once('.') else {
            let def = self.modules[from].functions.get(qualified)?;
            return Some(Resolved { module: from, def });
        };
        // `from .impl import f` in a package's `__init__.py`, imported as `pkg.f`.
        let (module, reexported) = match self.find_module(from, module_path) {
            Some(module) => {
                let m = &self.modules[module];
                if let Some(def) = m.functions.get(name) {
                    return Some(Resolved { module, def });
                }
                (module, m.imports.bound(name)?)
            }
            None => {
                let (package_name, package) = self.find_package(module_path)?;
                (from, package.imports(package_name)?.bound(name)?)
            }
        };
        if hops == 0 || reexported == qualified {
            return None;
        }
        self.resolve_hops(module, reexported, hops - 1)
    }
}

/// The dotted module name of a file from its path (`pkg/sub/mod.py` → `pkg.sub.mod`).
pub fn module_name(path: &std::path::Path) -> String {
    let mut parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if let Some(last) = parts.last_mut() {
        if let Some(stem) = last
            .strip_suffix(".pyi")
            .or_else(|| last.strip_suffix(".py"))
        {
            *last = stem.to_string();
        }
    }
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_module;

    fn project<'a>(files: &'a [(String, String, Parsed)], api: &'a ApiModel) -> Project<'a> {
        Project::new(
            files
                .iter()
                .map(|(n, s, p)| (n.clone(), s.as_str(), p))
                .collect(),
            Vec::new(),
            api,
        )
    }

    fn file(name: &str, src: &str) -> (String, String, Parsed) {
        (
            name.to_string(),
            src.to_string(),
            Parsed(parse_module(src).unwrap()),
        )
    }

    #[test]
    fn calls_resolve_through_imports_relative_imports_and_reexports() {
        let api = ApiModel::default();
        let files = [
            file("src.pkg.streams", "def side(): pass\n"),
            file("src.pkg.__init__", "from .streams import side\n"),
            file(
                "src.pkg.train",
                "from .streams import side\nimport pkg.streams as st\nfrom pkg import side as s2\ndef local(): pass\n",
            ),
            file("other.streams", "def side(): pass\n"),
        ];
        let p = project(&files, &api);
        let train = 2;
        let q = |name: &str| {
            p.module(train)
                .imports
                .qualify(&Expr::Name {
                    id: name.into(),
                    span: Default::default(),
                })
                .unwrap()
        };
        let found = |qualified: &str| {
            p.resolve(train, qualified)
                .map(|r| (r.module, r.def.name.clone()))
        };
        assert_eq!(found(&q("side")), Some((0, "side".into())));
        assert_eq!(found("pkg.streams.side"), Some((0, "side".into())));
        assert_eq!(
            found(&format!("{}.side", q("st"))),
            Some((0, "side".into()))
        );
        assert_eq!(found(&q("s2")), Some((0, "side".into())));
        assert_eq!(found("local"), Some((train, "local".into())));
        assert_eq!(found("torch.cuda.stream"), None);
        // `streams.side` ends two modules' names; the one in the caller's package is meant.
        assert_eq!(found("streams.side"), Some((0, "side".into())));
    }

    #[test]
    fn module_names_come_from_paths() {
        assert_eq!(module_name(std::path::Path::new("./a/b/c.py")), "a.b.c");
        assert_eq!(
            module_name(std::path::Path::new("a/__init__.py")),
            "a.__init__"
        );
    }
}
