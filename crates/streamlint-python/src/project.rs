//! The project index: the Python files under check form one program. Each parsed module is
//! indexed once (its imports, its top-level functions, its forwarding wrappers), and a call
//! written in one module is resolved to the function it names in another, through `import`,
//! `from .. import` (relative ones too) and package re-exports. Calls that leave the checked
//! files resolve to nothing and keep the default model of unknown code.

use rustc_hash::{FxHashMap, FxHashSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::api::ApiModel;
use crate::data_loaders::LoaderUses;
use crate::names::Imports;
use crate::outline::{Block, Outline};
use crate::parser::{self, ParseError};
use crate::prefilter::{Found, Prefilter};
use crate::syntax::{is_name_byte, Expr, FunctionDef, Stmt};
use crate::wrappers::Wrapper;
use streamlint_graph::Summary;

/// A parsed module.
pub struct Parsed(pub(crate) Vec<Stmt>);

/// A top-level function another module's call may lower in place: its text, where it starts in
/// the module, and its tree, parsed the first time a call needs it.
struct Candidate {
    text: String,
    start: u32,
    def: OnceLock<Option<FunctionDef>>,
    /// What a call of it does, for functions too large to be lowered at every call: made the
    /// first time a call needs it (see `lower::summaries`).
    summary: OnceLock<Option<Summary>>,
}

/// What one module offers the others, read from its text by a line scan (`outline`) rather
/// than a parse: a run indexes every file before it lowers any, and keeps of each only this
/// (the text of its small and stream functions, not the whole text or tree).
pub struct ModuleIndex {
    /// Indexed only for the helpers checked modules call from it (see [`Self::of_helpers`]).
    helpers_only: bool,
    /// Dotted module name (`pkg.sub.mod`; a package's `__init__.py` is `pkg.sub`).
    pub name: String,
    pub imports: Imports,
    /// Every function defined at the top level of the module.
    pub defined: FxHashSet<String>,
    /// Those of them that may be lowered in place at a call (see `lower::inline`).
    functions: FxHashMap<String, Candidate>,
    /// Names the module binds at its top level (its globals).
    pub globals: FxHashSet<String>,
    /// Top-level functions and classes the module's analysis never reads (see [`inert_blocks`]):
    /// they are blanked out before the module is parsed.
    inert: Vec<(u32, u32)>,
    /// The calls the module's text makes (see [`called_names`]), sorted by name.
    called: Vec<CallSite>,
    /// Its top-level functions and classes, by span, with their names: a call outside them is
    /// module code.
    blocks: Vec<(u32, u32, String)>,
    /// The module names `saved_tensors_hooks` (see `hooks`).
    pub saved_tensor_hooks: bool,
    /// The module mentions datasets or data loaders, whose code may run in worker processes.
    pub data_loading: bool,
    /// Its generator context managers with stream code (`@contextmanager def on_side(s)`),
    /// whose `with` blocks elsewhere are lowered with their code.
    context_managers: Vec<String>,
    /// Its small top-level functions with stream code, which calls elsewhere lower in place (a
    /// helper that copies to the host, records or waits): a function that calls one has stream
    /// work through it. (Larger ones would make many more callers worth lowering, for the few
    /// whose summaries matter.)
    stream_functions: Vec<String>,
    /// Stream attributes the module may order on other objects (see
    /// `ordered_streams::streams_of_others_ordered`); read only where it has stream code.
    orders_streams_of_others: Vec<String>,
    /// Its methods named for a stream, with whether each only returns the current stream (see
    /// `current_stream_methods`); read only where the module mentions a stream.
    stream_methods: Vec<(String, bool)>,
    /// What its DataLoaders do with datasets and hooks (see `data_loaders`); read only where it
    /// makes one.
    loader_uses: LoaderUses,
}

impl ModuleIndex {
    /// Index a module; `path_name` is the dotted name its path gives.
    pub fn new(path_name: String, source: &str, api: &ApiModel, prefilter: &Prefilter) -> Self {
        Self::build(path_name, source, api, prefilter, true)
    }

    /// Index a module with no stream code of its own, which checked modules import helpers
    /// from: only what lowering its functions at their calls needs (its name, imports and
    /// functions), since the module itself is not checked.
    pub fn of_helpers(
        path_name: String,
        source: &str,
        api: &ApiModel,
        prefilter: &Prefilter,
    ) -> Self {
        Self::build(path_name, source, api, prefilter, false)
    }

    /// Was the module indexed only for the helpers other modules call from it?
    pub fn helpers_only(&self) -> bool {
        self.helpers_only
    }

    fn build(
        path_name: String,
        source: &str,
        api: &ApiModel,
        prefilter: &Prefilter,
        checked: bool,
    ) -> Self {
        let (name, package) = match package_of_init(&path_name) {
            // In a package's `__init__.py`, relative imports start from the package itself.
            Some(package) => (package.to_string(), package.to_string()),
            None => {
                let package = path_name
                    .rsplit_once('.')
                    .map_or("", |(p, _)| p)
                    .to_string();
                (path_name, package)
            }
        };
        let package: Vec<String> = package
            .split('.')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        let outline = Outline::of(source);
        let header = parse_header(&outline.header);
        let imports = module_imports(&header, api, &package);
        let marks = prefilter.find(source.as_bytes());
        let mut context_managers = Vec::new();
        let mut stream_functions = Vec::new();
        let functions = outline
            .defs
            .iter()
            .filter_map(|(name, start, end)| {
                let (mut start, end) = (*start as usize, *end as usize);
                let generator = within(&marks.yields, start, end);
                let stream_code = within(&marks.stream_code, start, end)
                    || within(&marks.data_loading, start, end);
                // A `@contextmanager` with stream code is lowered around the `with` blocks that
                // enter it: kept from its decorators on, which say what it is.
                let decorated_from = outline
                    .blocks
                    .iter()
                    .find(|b| !b.is_class && b.name == *name && b.end as usize == end)
                    .map_or(start, |b| b.start as usize);
                let context_manager = generator
                    && stream_code
                    && source
                        .get(decorated_from..start)
                        .is_some_and(|d| d.contains("contextmanager"));
                if context_manager {
                    start = decorated_from;
                    context_managers.push(name.clone());
                }
                let text = source.get(start..end)?;
                let lowered =
                    may_lower_in_place(text.len(), generator && !context_manager, stream_code);
                if lowered && stream_code && text.len() <= SMALL_CALLEE_BYTES {
                    stream_functions.push(name.clone());
                }
                lowered.then(|| {
                    let candidate = Candidate {
                        text: text.to_string(),
                        start: start as u32,
                        def: OnceLock::new(),
                        summary: OnceLock::new(),
                    };
                    (name.clone(), candidate)
                })
            })
            .collect();
        let loader_uses = if !marks.data_loading.is_empty()
            && memchr::memmem::find(source.as_bytes(), b"DataLoader(").is_some()
        {
            parser::parse_module(source)
                .map(|stmts| LoaderUses::of(&stmts, &imports))
                .unwrap_or_default()
        } else {
            LoaderUses::default()
        };
        ModuleIndex {
            helpers_only: !checked,
            name,
            imports,
            defined: outline.defs.into_iter().map(|(n, ..)| n).collect(),
            functions,
            globals: outline.globals.into_iter().collect(),
            inert: if checked {
                inert_blocks(source, &outline.blocks, &marks)
            } else {
                Vec::new()
            },
            called: if checked {
                called_names(source.as_bytes())
            } else {
                Vec::new()
            },
            blocks: outline
                .blocks
                .iter()
                .map(|b| (b.start, b.end, b.name.clone()))
                .collect(),
            context_managers,
            stream_functions,
            orders_streams_of_others: if marks.stream_code.is_empty() {
                Vec::new()
            } else {
                crate::ordered_streams::streams_of_others_ordered(source.as_bytes())
            },
            saved_tensor_hooks: !marks.saved_tensor_hooks.is_empty(),
            data_loading: !marks.data_loading.is_empty(),
            loader_uses,
            stream_methods: if memchr::memmem::find(source.as_bytes(), b"stream").is_some() {
                crate::current_stream_methods::stream_methods(source)
            } else {
                Vec::new()
            },
        }
    }

    /// Parse the module for lowering, with its inert blocks blanked out (spaces in place of
    /// their text, so that every offset and line stays where it was). Where the blanked text
    /// does not parse (the line scan took a line of a string for a statement), the whole text
    /// is parsed, and its errors are the ones reported.
    ///
    /// Blocks holding one of the calls at `kept_calls` (offsets of their `(`, sorted) are kept:
    /// they enter a context manager of the project that has stream code.
    pub fn parse(&self, source: &str, kept_calls: &[usize]) -> Result<Parsed, ParseError> {
        let blanked = self
            .inert
            .iter()
            .filter(|&&(start, end)| !within(kept_calls, start as usize, end as usize));
        let mut blanked = blanked.peekable();
        if blanked.peek().is_some() {
            let mut bytes = source.as_bytes().to_vec();
            for &(start, end) in blanked {
                streamlint_graph::blank_keeping_lines(&mut bytes[start as usize..end as usize]);
            }
            // Only whole characters were replaced, by ASCII spaces: still UTF-8.
            let masked = String::from_utf8(bytes).expect("blanking keeps UTF-8");
            if let Ok(stmts) = parser::parse_module(&masked) {
                return Ok(Parsed(stmts));
            }
        }
        parser::parse_module(source).map(Parsed)
    }

    /// A digest of what other modules see of this one: its name, imports and top-level names,
    /// the text and place of every function their calls may lower in place, and the names it
    /// calls. When an edit leaves it unchanged, no other module's findings changed with it.
    pub fn interface_digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.name.hash(&mut hasher);
        self.imports.hash_sorted(&mut hasher);
        fn sorted(set: &FxHashSet<String>) -> Vec<&String> {
            let mut names: Vec<&String> = set.iter().collect();
            names.sort_unstable();
            names
        }
        sorted(&self.defined).hash(&mut hasher);
        sorted(&self.globals).hash(&mut hasher);
        // Which of other objects' streams it orders decides how their classes' own streams
        // are judged.
        let mut ordered: Vec<&String> = self.orders_streams_of_others.iter().collect();
        ordered.sort_unstable();
        ordered.hash(&mut hasher);
        let mut functions: Vec<(&String, &Candidate)> = self.functions.iter().collect();
        functions.sort_unstable_by_key(|(name, _)| *name);
        for (name, c) in functions {
            (name, &c.text, c.start).hash(&mut hasher);
        }
        // What it calls decides whether other modules' functions are called at all (where in
        // the text does not: an edit above a call moves it).
        let mut last = None;
        for call in &self.called {
            if last.replace(call.digest) != Some(call.digest) {
                call.digest.hash(&mut hasher);
            }
        }
        hasher.finish()
    }

    /// Could this module call into the module named `other`? Some import of it names that
    /// module's last part, or its package's (which may re-export it), as a part of a dotted
    /// name. Over-approximate, and cheap: it picks which open files to lint again when `other`
    /// changes.
    pub fn may_import(&self, other: &str) -> bool {
        let mut parts = other.rsplit('.');
        let wanted: Vec<&str> = parts.by_ref().take(2).collect();
        self.imports
            .targets()
            .any(|target| target.split('.').any(|part| wanted.contains(&part)))
    }

    /// The summary of the top-level function `name`, made by `make` the first time a call
    /// needs it (and kept for every other call, in any thread).
    pub(crate) fn summary(
        &self,
        name: &str,
        make: impl FnOnce() -> Option<Summary>,
    ) -> Option<&Summary> {
        self.functions.get(name)?.summary.get_or_init(make).as_ref()
    }

    /// The module's calls of names with this digest.
    fn calls_of_digest(&self, digest: u64) -> &[CallSite] {
        let first = self.called.partition_point(|c| c.digest < digest);
        let end = first + self.called[first..].partition_point(|c| c.digest == digest);
        &self.called[first..end]
    }

    /// The functions of this module with stream code that calls elsewhere lower in place: its
    /// small ones, and its generator context managers.
    pub fn stream_function_names(&self) -> impl Iterator<Item = &str> {
        self.context_managers
            .iter()
            .chain(&self.stream_functions)
            .map(String::as_str)
    }

    /// The modules whose functions this module imports by name and calls where it is lowered
    /// (`from .ops import scale` then `scale(x)` in a function with stream code: `pkg.ops`),
    /// and those it star-imports: where its helpers may be.
    pub fn modules_of_called_imports(&self) -> Vec<&str> {
        let inert = |at: u32| self.inert.iter().any(|&(s, e)| (s..e).contains(&at));
        let called = self.imports.bindings().filter_map(|(local, qualified)| {
            let bare_call = self
                .calls_of_digest(name_digest(local.as_bytes()))
                .iter()
                .any(|c| c.bare && !inert(c.paren));
            bare_call.then(|| qualified.rsplit_once('.').map(|(m, _)| m))?
        });
        called
            .chain(self.imports.star_modules().iter().map(String::as_str))
            .collect()
    }

    /// Is the top-level function `name` defined at offset `at` one that may be lowered in
    /// place at a call?
    pub(crate) fn lowers_in_place(&self, name: &str, at: u32) -> bool {
        self.functions
            .get(name)
            .is_some_and(|c| (c.start..c.start + c.text.len() as u32).contains(&at))
    }

    /// The text of the top-level function `name` that may be lowered in place, and where it
    /// starts in the module.
    pub(crate) fn function_text(&self, name: &str) -> Option<(&str, u32)> {
        self.functions.get(name).map(|c| (c.text.as_str(), c.start))
    }

    /// The top-level function `name` that may be lowered in place, parsed.
    fn function(&self, name: &str) -> Option<&FunctionDef> {
        let c = self.functions.get(name)?;
        c.def
            .get_or_init(|| parser::parse_function_at(&c.text, c.start))
            .as_ref()
    }
}

/// A digest of an identifier (64-bit FNV-1a: names are short, and a collision only makes a
/// function look called).
fn name_digest(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A call in a module's text, as a byte scan finds it.
#[derive(Clone, Copy, Debug)]
struct CallSite {
    /// The digest of the called name (see [`name_digest`]).
    digest: u64,
    /// The offset of the call's `(`.
    paren: u32,
    /// Called by its bare name (`f(x)`), not as an attribute (`obj.f(x)`): its imports say
    /// which function it is.
    bare: bool,
}

/// The calls of a module's text: every identifier before a `(` (`f(`, `f (`, `obj.f(`), except
/// the name a `def` or `class` line defines. A byte scan, so a call written in a string or a
/// comment counts too: it only makes a function look called.
fn called_names(text: &[u8]) -> Vec<CallSite> {
    let mut called: Vec<CallSite> = memchr::memchr_iter(b'(', text)
        .filter_map(|paren| {
            // `f (x)` is a call too.
            let end = text[..paren].trim_ascii_end().len();
            let start = text[..end]
                .iter()
                .rposition(|&b| !is_name_byte(b))
                .map_or(0, |i| i + 1);
            if start == end {
                return None;
            }
            let before = text[..start].trim_ascii_end();
            let defines = [&b"def"[..], b"class"].iter().any(|k| {
                before.ends_with(k)
                    && before
                        .len()
                        .checked_sub(k.len() + 1)
                        .is_none_or(|i| !is_name_byte(before[i]))
            });
            (!defines).then(|| CallSite {
                digest: name_digest(&text[start..end]),
                paren: paren as u32,
                bare: !before.ends_with(b"."),
            })
        })
        .collect();
    // By name only: the calls of one name stay in text order, which nothing needs.
    called.sort_unstable_by_key(|c| c.digest);
    called
}

/// Does module text bind `name` only with a top-level `def`? No import (at any depth: the
/// module's own imports are read as the project index reads them) and no top-level assignment
/// binds it too, so a call of `name` imported from that module is of that function.
pub fn defines_itself(text: &str, name: &str) -> bool {
    let outline = Outline::of(text);
    outline.defs.iter().any(|(def, ..)| def == name)
        && !outline.globals.iter().any(|g| g == name)
        && Imports::collect(&parse_header(&outline.header))
            .bound(name)
            .is_none()
}

/// The offsets of the `(` of every call of a function or method named `name` in `text` (by name
/// alone, as [`Project::calls_of`]).
pub fn call_offsets(text: &str, name: &str) -> Vec<u32> {
    let digest = name_digest(name.as_bytes());
    called_names(text.as_bytes())
        .into_iter()
        .filter(|c| c.digest == digest)
        .map(|c| c.paren)
        .collect()
}

/// What a module's top-level `from X import a, b as c` lines import: the last part of the module
/// (`X`'s, `ops` for `from .pkg.ops import ..`) and each imported name (`a`, `b`), read from its
/// text alone: for a file with no stream code, whether it may call a helper of the project that
/// has some.
pub fn names_imported_from(text: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for at in memchr::memmem::find_iter(text, b"from ") {
        if at > 0 && text[at - 1] != b'\n' {
            continue;
        }
        let rest = &text[at..];
        let line = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
        let Some(import) = line.windows(8).position(|w| w == b" import ") else {
            continue;
        };
        // The imported names run to the end of the line, or of the parentheses.
        let names = &rest[import + 8..];
        let end = if names.first() == Some(&b'(') {
            memchr::memchr(b')', names).unwrap_or(names.len())
        } else {
            line.len() - import - 8
        };
        let module = String::from_utf8_lossy(&line[5..import]);
        let module = module.trim().rsplit('.').next().unwrap_or("").to_string();
        let names = String::from_utf8_lossy(&names[..end]);
        for part in names.trim_start_matches('(').split(',') {
            let imported = part.split(" as ").next().unwrap_or(part).trim();
            if !imported.is_empty() && imported.bytes().all(is_name_byte) {
                out.push((module.clone(), imported.to_string()));
            }
        }
    }
    out
}

/// Is one of `offsets` (sorted) in `start..end`?
pub(crate) fn within(offsets: &[usize], start: usize, end: usize) -> bool {
    let first = offsets.partition_point(|&at| at < start);
    offsets.get(first).is_some_and(|&at| at < end)
}

/// The top-level functions and classes of a module whose analysis cannot need them: no stream
/// code, event, `non_blocking` copy or pinned memory in their text (so nothing in them is lowered
/// and their classes keep no stream state), and no construction of a class of the module that
/// has such code (its methods may rely on what every construction passes). Functions called from
/// stream code are lowered in place from the project index, which keeps its own copy of their
/// text. A module with data-loading code keeps everything: the functions its loaders run in
/// worker processes are found by name across the module.
fn inert_blocks(source: &str, blocks: &[Block], marks: &Found) -> Vec<(u32, u32)> {
    if !marks.data_loading.is_empty() {
        return Vec::new();
    }
    let kept: Vec<bool> = blocks
        .iter()
        .map(|b| {
            let (start, end) = (b.start as usize, b.end as usize);
            within(&marks.stream_code, start, end) || within(&marks.pinned, start, end)
        })
        .collect();
    let kept_classes: FxHashSet<&str> = blocks
        .iter()
        .zip(&kept)
        .filter(|(b, &kept)| b.is_class && kept)
        .map(|(b, _)| b.name.as_str())
        .collect();
    let constructions: Vec<usize> = if kept_classes.is_empty() {
        Vec::new()
    } else {
        memchr::memchr_iter(b'(', source.as_bytes())
            .filter(|&paren| kept_classes.contains(name_before(source, paren)))
            .collect()
    };
    blocks
        .iter()
        .zip(&kept)
        .filter(|(b, &kept)| !kept && !within(&constructions, b.start as usize, b.end as usize))
        .map(|(b, _)| (b.start, b.end))
        .collect()
}

/// The identifier that ends at byte `end` of `source` (empty if none does).
fn name_before(source: &str, end: usize) -> &str {
    let head = &source[..end];
    let start = head
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| {
            i + head[i..].chars().next().map_or(1, char::len_utf8)
        });
    &head[start..]
}

/// The statements of a module's outline header that parse (one at a time where the whole fails:
/// the scan can take a line of a string for an import).
fn parse_header(statements: &[String]) -> Vec<Stmt> {
    parser::parse_module(&statements.join("\n")).unwrap_or_else(|_| {
        statements
            .iter()
            .filter_map(|s| parser::parse_module(s).ok())
            .flatten()
            .collect()
    })
}

/// The names a module's imports bind, qualified: relative imports from `package`, and
/// `dm = torch.get_device_module()` at the top level read as an import.
fn module_imports(stmts: &[Stmt], api: &ApiModel, package: &[String]) -> Imports {
    let mut imports = Imports::collect(stmts);
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
    imports.absolutize(&package.iter().map(String::as_str).collect::<Vec<_>>());
    imports
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
                let stmts = parser::parse_module(&source).ok()?;
                let mut imports = Imports::collect(&stmts);
                imports.absolutize(&name.split('.').collect::<Vec<_>>());
                Some(imports)
            })
            .as_ref()
    }
}

/// Callees longer than this (bytes of source) keep the model of unknown code: lowering them
/// at every call would cost more than it finds.
pub(crate) const MAX_INLINE_BYTES: usize = 16_000;

/// Callees up to this size (bytes of source) are lowered in place wherever they are called:
/// getters and setters of module state, helpers of a few statements.
pub(crate) const SMALL_CALLEE_BYTES: usize = 1_200;

/// Could a top-level function be lowered in place at some call: not a generator, within the
/// size cap, and small or with stream code of its own? The project index keeps only these.
fn may_lower_in_place(len: usize, generator: bool, stream_code: bool) -> bool {
    !generator && len <= MAX_INLINE_BYTES && (len <= SMALL_CALLEE_BYTES || stream_code)
}

/// How the modules, packages and functions of a project are found by name. Built once from all
/// modules; projects that differ from it only in the text of some modules (an editor's open
/// files) share it.
pub struct Names {
    /// Packages whose `__init__.py` was not parsed, by dotted name.
    packages: FxHashMap<String, Package>,
    /// The packages under every dotted suffix of their names (see `dotted_suffixes`).
    package_suffixes: FxHashMap<String, Vec<String>>,
    /// The name of every top-level function of the parsed modules: most calls name none of
    /// them, and are turned away without resolving their modules. (So a package that
    /// re-exports a function under another name, `from .impl import f as g`, is not followed.)
    function_names: FxHashSet<String>,
    /// Each module under every dotted suffix of its name (see `dotted_suffixes`).
    by_suffix: FxHashMap<String, Vec<usize>>,
    /// Method names that, wherever the modules define them, only return the current stream
    /// (see `current_stream_methods`).
    current_stream_methods: FxHashSet<String>,
}

impl Names {
    /// The names of these modules (by position), and of the packages whose `__init__.py` was
    /// left unparsed: (dotted name, path), read only if a call resolves through them.
    pub fn new(modules: &[Arc<ModuleIndex>], packages: Vec<(String, PathBuf)>) -> Names {
        let mut by_suffix: FxHashMap<String, Vec<usize>> = FxHashMap::default();
        for (i, m) in modules.iter().enumerate() {
            for suffix in dotted_suffixes(&m.name) {
                by_suffix.entry(suffix).or_default().push(i);
            }
        }
        let packages: FxHashMap<String, Package> = packages
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
        let mut package_suffixes: FxHashMap<String, Vec<String>> = FxHashMap::default();
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
            .flat_map(|m| m.functions.keys().cloned())
            .collect();
        let stream_methods = modules.iter().flat_map(|m| &m.stream_methods);
        let not_getters: FxHashSet<&String> = stream_methods
            .clone()
            .filter(|(_, getter)| !getter)
            .map(|(name, _)| name)
            .collect();
        let current_stream_methods = stream_methods
            .filter(|(name, getter)| *getter && !not_getters.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        Names {
            packages,
            package_suffixes,
            function_names,
            by_suffix,
            current_stream_methods,
        }
    }

    /// Does it know every function `module` defines, by name? (A module edited since may
    /// define new ones.)
    pub fn knows_functions_of(&self, module: &ModuleIndex) -> bool {
        module
            .functions
            .keys()
            .all(|name| self.function_names.contains(name))
    }
}

/// Every parsed module of the run, with a lookup from dotted names to modules.
pub struct Project<'a> {
    modules: Vec<Arc<ModuleIndex>>,
    names: Arc<Names>,
    pub(crate) api: &'a ApiModel,
    pub(crate) prefilter: Prefilter,
    /// The forwarding wrappers of a module whose functions are lowered in place elsewhere: none
    /// (its forwarders are small, and are lowered in place themselves).
    pub(crate) no_wrappers: FxHashMap<String, Wrapper>,
    /// What the modules may order on objects other than their own `self` (see
    /// [`Project::orders_stream_of_others`]), gathered once.
    streams_ordered_on_others: FxHashSet<String>,
    /// The names of the modules' functions with stream code (generator context managers
    /// included) that calls lower in place or summarize, by digest.
    stream_functions: FxHashSet<u64>,
    /// What the modules' DataLoaders do with datasets and hooks, together.
    loader_uses: LoaderUses,
}

impl<'a> Project<'a> {
    /// Does a method of this name, wherever the project defines it, only return the current
    /// stream (`buffer.producer_stream()`)?
    pub fn returns_current_stream(&self, method: &str) -> bool {
        self.names.current_stream_methods.contains(method)
    }

    /// The project of these modules, and of the packages whose `__init__.py` was left
    /// unparsed: (dotted name, path), read only if a call resolves through them.
    pub fn new(
        modules: Vec<Arc<ModuleIndex>>,
        packages: Vec<(String, PathBuf)>,
        api: &'a ApiModel,
        prefilter: &Prefilter,
    ) -> Self {
        let names = Arc::new(Names::new(&modules, packages));
        Project::with_names(modules, names, api, prefilter)
    }

    /// The project of these modules, found by `names`, which were made from modules of the same
    /// names in the same order (their texts may have changed since, if `names` still knows every
    /// function they define: see [`Names::knows_functions_of`]).
    pub fn with_names(
        modules: Vec<Arc<ModuleIndex>>,
        names: Arc<Names>,
        api: &'a ApiModel,
        prefilter: &Prefilter,
    ) -> Self {
        let streams_ordered_on_others = modules
            .iter()
            .flat_map(|m| m.orders_streams_of_others.iter().cloned())
            .collect();
        let stream_functions = modules
            .iter()
            .flat_map(|m| m.context_managers.iter().chain(&m.stream_functions))
            .map(|name| name_digest(name.as_bytes()))
            .collect();
        let loader_uses = LoaderUses::merge(modules.iter().map(|m| &m.loader_uses));
        Project {
            modules,
            names,
            api,
            prefilter: prefilter.clone(),
            no_wrappers: FxHashMap::default(),
            streams_ordered_on_others,
            stream_functions,
            loader_uses,
        }
    }

    /// What the project's DataLoaders do with datasets and hooks (see `data_loaders`).
    pub fn loader_uses(&self) -> &LoaderUses {
        &self.loader_uses
    }

    pub fn module(&self, i: usize) -> &ModuleIndex {
        &self.modules[i]
    }

    /// Where module `m` calls a function of the project that has stream code (by name alone:
    /// a generator context manager, a helper that copies, records or waits), as the offsets of
    /// the calls' `(`, sorted: the functions holding them are lowered, since the call brings
    /// the callee's stream work (its code in place, or its summary).
    pub fn stream_function_calls(&self, m: usize) -> Vec<usize> {
        if self.stream_functions.is_empty() {
            return Vec::new();
        }
        let mut calls: Vec<usize> = self.modules[m]
            .called
            .iter()
            .filter(|c| self.stream_functions.contains(&c.digest))
            .map(|c| c.paren as usize)
            .collect();
        calls.sort_unstable();
        calls
    }

    /// Parse module `m` for lowering (see [`ModuleIndex::parse`]), keeping the code a loader
    /// elsewhere runs in its worker processes: a dataset class or hook function of its own.
    pub fn parse(&self, m: usize, source: &str) -> Result<Parsed, ParseError> {
        let mut kept = self.stream_function_calls(m);
        let uses = &self.loader_uses;
        if !uses.is_empty() {
            kept.extend(
                self.modules[m]
                    .blocks
                    .iter()
                    .filter(|(.., name)| {
                        uses.hooks.contains_key(name) || uses.datasets.contains_key(name)
                    })
                    .map(|&(start, ..)| start as usize),
            );
            kept.sort_unstable();
        }
        self.modules[m].parse(source, &kept)
    }

    /// May some module order a stream attribute named `name` of an object other than its own
    /// `self` (`engine.comm_stream.wait_stream(..)`)?
    pub fn orders_stream_of_others(&self, name: &str) -> bool {
        self.streams_ordered_on_others.contains(name)
    }

    /// Does some module of the project call a function or method named `name`? (By name
    /// alone: any `obj.name(...)` counts.)
    pub fn is_called(&self, name: &str) -> bool {
        let digest = name_digest(name.as_bytes());
        self.modules
            .iter()
            .any(|m| !m.calls_of_digest(digest).is_empty())
    }

    /// Every call that may be of the top-level function `name` of module `home`, by module and
    /// offset, with the top-level function or class it lies in (none: module code). Calls by
    /// the bare name are left out where the caller's imports show they call another function
    /// (`from other import name`): the project's own index tells, or, for a module it does not
    /// hold, `defines_elsewhere(caller, qualified)`, asked with the name as the caller's
    /// imports qualify it (bare: the caller's own module). An attribute call
    /// (`obj.name(...)`) may be of it.
    pub fn calls_of(
        &self,
        name: &str,
        home: usize,
        defines_elsewhere: &dyn Fn(usize, &str) -> bool,
    ) -> Vec<(usize, u32, Option<String>)> {
        let digest = name_digest(name.as_bytes());
        let home_start = self.modules[home].function(name).map(|d| d.span.start);
        let another = |i: usize| {
            let imports = &self.modules[i].imports;
            if imports.is_ambiguous(name) {
                return false;
            }
            let qualified = imports.bound(name).unwrap_or(name);
            match self.resolve(i, qualified) {
                Some(r) => (r.module, Some(r.def.span.start)) != (home, home_start),
                None => defines_elsewhere(i, qualified),
            }
        };
        self.modules
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                let calls = m.calls_of_digest(digest);
                let elsewhere = calls.iter().any(|c| c.bare) && another(i);
                calls
                    .iter()
                    .filter(move |c| !(c.bare && elsewhere))
                    .map(move |c| {
                        let at = c.paren;
                        let block = m
                            .blocks
                            .iter()
                            .find(|(s, e, _)| (*s..*e).contains(&at))
                            .map(|(.., block)| block.clone());
                        (i, at, block)
                    })
            })
            .collect()
    }

    /// The module of the project whose global a qualified name (`pkg.streams.copy_stream`, as
    /// module `from` imports it) is: one module binding that name at its top level.
    pub fn module_of_global(&self, from: usize, qualified: &str) -> Option<usize> {
        let (module, name) = qualified.rsplit_once('.')?;
        let m = self.find_module(from, module)?;
        self.modules[m].globals.contains(name).then_some(m)
    }

    /// The module a dotted name denotes, seen from module `from`: where two modules end in the
    /// same name, the one sharing the longest package path with `from`.
    fn find_module(&self, from: usize, dotted: &str) -> Option<usize> {
        let candidates = self.names.by_suffix.get(dotted)?;
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
        match self.names.package_suffixes.get(dotted)?.as_slice() {
            [name] => Some((name.as_str(), &self.names.packages[name])),
            _ => None,
        }
    }

    /// The project function a qualified name (as a module's imports qualify a call) denotes:
    /// `f` defined in module `from`, `pkg.mod.f`, or a name a package re-exports.
    pub fn resolve(&self, from: usize, qualified: &str) -> Option<Resolved<'_>> {
        self.resolve_hops(from, qualified, MAX_REEXPORT_HOPS)
    }

    fn resolve_hops(&self, from: usize, qualified: &str, hops: usize) -> Option<Resolved<'_>> {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if qualified.contains("()") || !self.names.function_names.contains(last) {
            return None;
        }
        let Some((module_path, name)) = qualified.rsplit_once('.') else {
            let m = &self.modules[from];
            if let Some(def) = m.function(qualified) {
                return Some(Resolved { module: from, def });
            }
            // `from .helpers import *` then `f()`.
            return (hops > 0)
                .then(|| {
                    m.imports.star_modules().iter().find_map(|star| {
                        self.resolve_hops(from, &format!("{star}.{qualified}"), hops - 1)
                    })
                })
                .flatten();
        };
        // `from .impl import f` in a package's `__init__.py`, imported as `pkg.f`; or
        // `from .impl import *` there.
        let (module, imports) = match self.find_module(from, module_path) {
            Some(module) => {
                let m = &self.modules[module];
                if let Some(def) = m.function(name) {
                    return Some(Resolved { module, def });
                }
                (module, &m.imports)
            }
            None => {
                let (package_name, package) = self.find_package(module_path)?;
                (from, package.imports(package_name)?)
            }
        };
        if hops == 0 {
            return None;
        }
        if let Some(reexported) = imports.bound(name) {
            return (reexported != qualified)
                .then(|| self.resolve_hops(module, reexported, hops - 1))
                .flatten();
        }
        imports.star_modules().iter().find_map(|star| {
            let candidate = format!("{star}.{name}");
            (candidate != qualified)
                .then(|| self.resolve_hops(module, &candidate, hops - 1))
                .flatten()
        })
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

    fn project<'a>(files: &[(&str, &str)], api: &'a ApiModel) -> Project<'a> {
        let prefilter = Prefilter::new(api);
        let modules = files
            .iter()
            .map(|(name, src)| Arc::new(ModuleIndex::new(name.to_string(), src, api, &prefilter)))
            .collect();
        Project::new(modules, Vec::new(), api, &prefilter)
    }

    #[test]
    fn a_function_parsed_alone_has_the_spans_of_the_whole_module() {
        let src = "import torch\n\n\n@decorated\ndef side(\n    x,\n) -> None:\n    return torch.cuda.Stream()\n\nclass C:\n    pass\n";
        let api = ApiModel::default();
        let p = project(&[("m", src)], &api);
        let alone = p.resolve(0, "side").expect("resolved").def;
        let whole = parse_module(src).unwrap();
        let Some(Stmt::Def(f)) = whole.iter().find(|s| matches!(s, Stmt::Def(_))) else {
            panic!("no function");
        };
        assert_eq!((alone.span, alone.name_span), (f.span, f.name_span));
        assert_eq!(alone.body.len(), f.body.len());
    }

    /// The top-level statements of a parse, as (kind, name) pairs.
    fn outline_of(parsed: &Parsed) -> Vec<String> {
        parsed
            .0
            .iter()
            .map(|s| match s {
                Stmt::Def(f) => format!("def {}", f.name),
                Stmt::Class(c) => format!("class {}", c.name),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn code_without_stream_work_is_blanked_before_parsing_and_spans_stay() {
        let src = "import torch\n\n@cache\ndef shape(x):\n    return x.shape\n\nclass Plain:\n    def f(self):\n        return 1\n\nclass Side:\n    def __init__(self, dev='cpu'):\n        self.s = torch.cuda.Stream()\n\ndef make():\n    return Side(dev='cuda')\n\ndef run(x):\n    with torch.cuda.stream(torch.cuda.Stream()):\n        return x * 2\n";
        let api = ApiModel::default();
        let index = ModuleIndex::new("m".into(), src, &api, &Prefilter::new(&api));
        let parsed = index.parse(src, &[]).unwrap();
        // `shape` (with its decorator) and `Plain` have no stream code; `make` constructs a
        // class that has.
        assert_eq!(
            outline_of(&parsed),
            ["other", "class Side", "def make", "def run"]
        );
        let whole = parse_module(src).unwrap();
        let span_of_run = |stmts: &[Stmt]| match stmts.last() {
            Some(Stmt::Def(f)) => f.span,
            _ => panic!("no function"),
        };
        assert_eq!(span_of_run(&parsed.0), span_of_run(&whole));
        // Top-level functions stay known by name, blanked or not.
        assert!(index.defined.contains("shape"));
    }

    #[test]
    fn a_blanked_module_that_does_not_parse_is_parsed_whole() {
        // The line scan takes the string's second line for a statement: blanking `f` alone
        // leaves half a string.
        let src = "import torch\ndef f():\n    return '''a\nb'''\n\ndef g():\n    torch.cuda.synchronize()\n";
        let api = ApiModel::default();
        let index = ModuleIndex::new("m".into(), src, &api, &Prefilter::new(&api));
        let parsed = index.parse(src, &[]).unwrap();
        assert_eq!(outline_of(&parsed), ["other", "def f", "def g"]);
    }

    #[test]
    fn functions_entering_a_stream_context_manager_of_another_module_are_kept() {
        let api = ApiModel::default();
        let prefilter = Prefilter::new(&api);
        let helper = "import contextlib\nimport torch\n@contextlib.contextmanager\ndef overlapped(s):\n    with torch.cuda.stream(s):\n        yield\n";
        let user = "import torch\nfrom .streams import overlapped\ndef run(x, s):\n    with overlapped(s):\n        return x * 2\n\ndef other(x):\n    return x + 1\n\ntorch.cuda.synchronize()\n";
        let modules = vec![
            Arc::new(ModuleIndex::new(
                "pkg.streams".into(),
                helper,
                &api,
                &prefilter,
            )),
            Arc::new(ModuleIndex::new("pkg.user".into(), user, &api, &prefilter)),
        ];
        let project = Project::new(modules, Vec::new(), &api, &prefilter);
        // The helper's text is kept from its decorators, and `run` is not blanked; `other` is.
        assert_eq!(project.stream_function_calls(1).len(), 1);
        let parsed = project.parse(1, user).unwrap();
        assert_eq!(outline_of(&parsed), ["other", "other", "def run", "other"]);
        let alone = project.module(1).parse(user, &[]).unwrap();
        assert_eq!(outline_of(&alone), ["other", "other", "other"]);
    }

    #[test]
    fn modules_with_data_loading_are_parsed_whole() {
        let src = "from torch.utils.data import DataLoader\ndef collate(batch):\n    return batch[0].cuda()\n\ndef loader(ds):\n    return DataLoader(ds, num_workers=2, collate_fn=collate)\n";
        let api = ApiModel::default();
        let index = ModuleIndex::new("m".into(), src, &api, &Prefilter::new(&api));
        assert_eq!(
            outline_of(&index.parse(src, &[]).unwrap()),
            ["other", "def collate", "def loader"]
        );
    }

    #[test]
    fn calls_resolve_through_imports_relative_imports_and_reexports() {
        let api = ApiModel::default();
        let files = [
            ("src.pkg.streams", "def side(): pass\n"),
            ("src.pkg.__init__", "from .streams import side\n"),
            (
                "src.pkg.train",
                "from .streams import side\nimport pkg.streams as st\nfrom pkg import side as s2\ndef local(): pass\n",
            ),
            ("other.streams", "def side(): pass\n"),
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
    fn a_function_is_called_when_some_module_calls_its_name() {
        let api = ApiModel::default();
        let p = project(
            &[
                ("ops", "def gather(stream, t):\n    return t\n\nclass Pool:\n    def take(self, stream):\n        pass\n"),
                ("train", "from ops import gather\nrows = gather (s, t)\npool.take(s)\n# defined_elsewhere(\n"),
            ],
            &api,
        );
        assert!(p.is_called("gather") && p.is_called("take"));
        // In a comment still counts: it only makes a function look called.
        assert!(p.is_called("defined_elsewhere"));
        // A definition is not a call.
        assert!(!p.is_called("Pool"));
        let alone = project(&[("ops", "def gather(stream, t):\n    return t\n")], &api);
        assert!(!alone.is_called("gather"));
    }

    #[test]
    fn calls_of_a_function_leave_out_those_imports_bind_to_another() {
        let api = ApiModel::default();
        let p = project(
            &[
                ("kern", "def shrink(x, s=None):\n    return x\n"),
                ("torch_ops", "def shrink(x):\n    return x\n"),
                ("a", "from kern import shrink\ny = shrink(x)\nz = obj.shrink(x)\n"),
                ("b", "from torch_ops import shrink\ny = shrink(x)\n"),
                // Bound to both in different functions: which one is not known.
                ("c", "def f():\n    from kern import shrink\n    return shrink(x)\ndef g():\n    from torch_ops import shrink\n    return shrink(x)\n"),
                ("d", "from elsewhere import shrink\ny = shrink(x)\n"),
            ],
            &api,
        );
        let never = |_: usize, _: &str| false;
        let callers = |elsewhere: &dyn Fn(usize, &str) -> bool| {
            let mut modules: Vec<usize> = p
                .calls_of("shrink", 0, elsewhere)
                .iter()
                .map(|c| c.0)
                .collect();
            modules.dedup();
            modules
        };
        // `a` calls it (bare and as a method, which may be it); `b` calls the other one; `c`'s
        // imports are ambiguous; `d`'s module is not held, and only a look at it can tell.
        assert_eq!(callers(&never), [2, 4, 5]);
        assert_eq!(callers(&|_, q: &str| q == "elsewhere.shrink"), [2, 4]);
    }

    #[test]
    fn a_module_defines_a_name_itself_unless_an_import_or_assignment_binds_it() {
        assert!(defines_itself(
            "import torch\n\ndef shrink(x):\n    return x\n",
            "shrink"
        ));
        assert!(defines_itself(
            "from .lora_ops import shrink as shrink_control\n\ndef shrink(x):\n    return x\n",
            "shrink"
        ));
        assert!(!defines_itself("from .ops import shrink\n", "shrink"));
        assert!(!defines_itself(
            "def shrink(x):\n    pass\nfrom .ops import shrink\n",
            "shrink"
        ));
        assert!(!defines_itself(
            "def shrink(x):\n    pass\nshrink = wrap(shrink)\n",
            "shrink"
        ));
        assert!(!defines_itself(
            "class K:\n    def shrink(self):\n        pass\n",
            "shrink"
        ));
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
