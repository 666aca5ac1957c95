//! The Rust frontend: parses a file with syn and lowers every function into the language-neutral
//! stream graph, with a model of cudarc (including its automatic per-slice event tracking and the
//! holes in it), cust, and raw driver calls. syn has no types, so values are classified by where
//! they come from (`ctx.new_stream()`, `.alloc_zeros(..)`, ...) and by type annotations.

mod lower;
mod model;
mod skim;

use rustc_hash::FxHashMap;

use lower::{FileContext, Summary};
pub use model::may_contain_gpu_code;
use model::{type_kind, type_kind_in, TypeKind};
use streamlint_graph::{Body, Deadline};
use syn::visit::Visit;

/// A file that does not parse, with a byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub offset: u32,
    pub message: String,
}

/// The GPU-typed fields of the structs the files of a crate declare, by struct name, so that a
/// method in one file sees the fields its struct declares in another. A name that two files
/// declare with different fields (two crates' `Device`) is known in neither.
#[derive(Clone, Debug, Default)]
pub struct CrateTypes {
    fields: FxHashMap<String, Option<Vec<(String, TypeKind)>>>,
    /// Type aliases of GPU types (`type Queue = Arc<CudaStream>;`), by name.
    aliases: FxHashMap<String, Option<TypeKind>>,
}

impl CrateTypes {
    /// The structs `source` declares with GPU-typed fields, and its aliases of GPU types. Each
    /// item is parsed on its own: the file as a whole is parsed only when it is lowered.
    pub fn of_file(source: &str) -> CrateTypes {
        let (struct_items, alias_items) = skim::gpu_items(source);
        let mut aliases = FxHashMap::default();
        for item in alias_items {
            if let Ok(t) = syn::parse_str::<syn::ItemType>(item) {
                if let Some(kind) = type_kind(&t.ty) {
                    aliases.insert(t.ident.to_string(), kind);
                }
            }
        }
        let mut found = StructFields {
            aliases,
            ..StructFields::default()
        };
        for item in struct_items {
            if let Ok(s) = syn::parse_str::<syn::ItemStruct>(item) {
                found.visit_item_struct(&s);
            }
        }
        // Spans of these parses would shift the next file's.
        proc_macro2::extra::invalidate_current_thread_spans();
        CrateTypes {
            fields: known(found.fields),
            aliases: known(found.aliases),
        }
    }

    /// Add another file's structs and aliases.
    pub fn merge(&mut self, other: CrateTypes) {
        merge_declarations(&mut self.fields, other.fields);
        merge_declarations(&mut self.aliases, other.aliases);
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Vec<(String, TypeKind)>> {
        self.fields.get(name)?.as_ref()
    }

    /// The aliases every file that declares them agrees on.
    pub(crate) fn known_aliases(&self) -> impl Iterator<Item = (&str, TypeKind)> {
        self.aliases
            .iter()
            .filter_map(|(name, kind)| Some((name.as_str(), (*kind)?)))
    }
}

/// One file's declarations, each known.
fn known<V>(declared: FxHashMap<String, V>) -> FxHashMap<String, Option<V>> {
    declared.into_iter().map(|(k, v)| (k, Some(v))).collect()
}

/// Declarations by name: one declared differently in two files is known in neither (`None`).
fn merge_declarations<V: PartialEq>(
    into: &mut FxHashMap<String, Option<V>>,
    from: FxHashMap<String, Option<V>>,
) {
    for (name, declared) in from {
        match into.get(&name) {
            Some(known) if *known != declared => {
                into.insert(name, None);
            }
            Some(_) => {}
            None => {
                into.insert(name, declared);
            }
        }
    }
}

/// Parse `source` and lower every function and method, as a crate of one file.
pub fn lower_source(source: &str, deadline: Deadline) -> Result<Vec<Body>, ParseError> {
    lower_source_in(source, deadline, &CrateTypes::of_file(source))
}

/// [`lower_source`] for a file of a crate whose other files declare `structs`.
pub fn lower_source_in(
    source: &str,
    deadline: Deadline,
    structs: &CrateTypes,
) -> Result<Vec<Body>, ParseError> {
    // Bodies without GPU work are not parsed; should the scan that found them have misread
    // the text, the text is parsed whole, so that an error is always the file's own.
    let skimmed = skim::without_inert_bodies(source, structs);
    let parsed = match syn::parse_file(&skimmed) {
        Err(_) if matches!(skimmed, std::borrow::Cow::Owned(_)) => syn::parse_file(source),
        parsed => parsed,
    };
    let result = match parsed {
        Ok(file) => Ok(lower_file(&file, source, deadline, structs)),
        Err(e) => Err(ParseError {
            offset: e.span().byte_range().start as u32,
            message: e.to_string(),
        }),
    };
    // Span locations accumulate per thread: forget this file's before the next one.
    proc_macro2::extra::invalidate_current_thread_spans();
    result
}

/// Why `source` does not parse as a Rust file, if it does not.
pub fn syntax_error(source: &str) -> Option<ParseError> {
    let error = syn::parse_file(source).err().map(|e| ParseError {
        offset: e.span().byte_range().start as u32,
        message: e.to_string(),
    });
    proc_macro2::extra::invalidate_current_thread_spans();
    error
}

/// Lower the file's functions; when some free function has a summary worth applying, lower
/// again, with the summaries, the functions that name one of them (the others lower as before).
fn lower_file(
    file: &syn::File,
    source: &str,
    deadline: Deadline,
    crate_structs: &CrateTypes,
) -> Vec<Body> {
    // The fields other files declare for the structs this file implements; the file's own
    // declarations replace them.
    let implemented = file.items.iter().filter_map(|item| match item {
        syn::Item::Impl(i) => match i.self_ty.as_ref() {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        },
        _ => None,
    });
    // Aliases of GPU types: the crate's, then the file's own.
    let mut aliases: FxHashMap<String, TypeKind> = crate_structs
        .known_aliases()
        .map(|(name, kind)| (name.to_string(), kind))
        .collect();
    for item in &file.items {
        if let syn::Item::Type(t) = item {
            if let Some(kind) = type_kind(&t.ty) {
                aliases.insert(t.ident.to_string(), kind);
            }
        }
    }
    let mut structs = StructFields {
        aliases,
        ..StructFields::default()
    };
    for name in implemented {
        if let Some(fields) = crate_structs.get(&name) {
            structs.fields.insert(name, fields.clone());
        }
    }
    structs.visit_file(file);
    let mut first = Functions {
        source,
        structs: &structs.fields,
        aliases: &structs.aliases,
        summaries: FxHashMap::default(),
        bodies: Vec::new(),
        earlier: Vec::new().into_iter(),
        found: FxHashMap::default(),
        deadline,
    };
    first.visit_file(file);
    let found: FxHashMap<String, Summary> = first
        .found
        .into_iter()
        .filter(|(_, s)| !s.is_empty())
        .collect();
    if found.is_empty() {
        return first.bodies;
    }
    let mut second = Functions {
        source,
        structs: &structs.fields,
        aliases: &structs.aliases,
        summaries: found,
        bodies: Vec::new(),
        earlier: first.bodies.into_iter(),
        found: FxHashMap::default(),
        deadline,
    };
    second.visit_file(file);
    second.bodies
}

/// The typed fields of every struct of the file, by struct name, with the aliases their types
/// may be written with.
#[derive(Default)]
struct StructFields {
    fields: FxHashMap<String, Vec<(String, TypeKind)>>,
    aliases: FxHashMap<String, TypeKind>,
}

impl<'ast> Visit<'ast> for StructFields {
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        // Named fields by name, a tuple struct's by position (`self.0`).
        let typed = s
            .fields
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let name = f.ident.as_ref().map_or(i.to_string(), |n| n.to_string());
                Some((name, type_kind_in(&f.ty, &self.aliases)?))
            })
            .collect();
        self.fields.insert(s.ident.to_string(), typed);
    }
}

/// Every function body of the file, methods and nested functions included.
struct Functions<'s> {
    /// The file's text.
    source: &'s str,
    structs: &'s FxHashMap<String, Vec<(String, TypeKind)>>,
    aliases: &'s FxHashMap<String, TypeKind>,
    summaries: FxHashMap<String, Summary>,
    bodies: Vec<Body>,
    /// The bodies of a first lowering without summaries, in the order functions are visited.
    earlier: std::vec::IntoIter<Body>,
    /// Summaries of the free functions lowered.
    found: FxHashMap<String, Summary>,
    deadline: Deadline,
}

impl<'s> Functions<'s> {
    fn lower(
        &mut self,
        sig: &syn::Signature,
        block: &syn::Block,
        whole: proc_macro2::Span,
        file: &FileContext<'_>,
    ) {
        let earlier = self.earlier.next();
        let text = self.source.get(whole.byte_range()).unwrap_or_default();
        // A method's summary is named `Type::method`; its calls say `self.method(`.
        let calls_summarized = file.summaries.keys().any(|key| {
            let name = key.rsplit("::").next().unwrap_or(key);
            text.contains(name)
        });
        if let Some(body) = earlier.filter(|_| !calls_summarized) {
            self.bodies.push(body);
            return;
        }
        let (body, summary) = lower::lower_fn(sig, block, whole, file);
        let name = sig.ident.to_string();
        match (sig.receiver(), &file.impl_of) {
            (None, _) => {
                self.found.insert(name, summary);
            }
            (Some(_), Some(ty)) => {
                self.found.insert(lower::method_key(ty, &name), summary);
            }
            (Some(_), None) => {}
        }
        self.bodies.push(body);
    }

    fn context(
        &mut self,
        fields: Vec<(String, TypeKind)>,
        tracking_disabled: bool,
        impl_of: Option<String>,
    ) -> FileContext<'s> {
        FileContext {
            source: self.source,
            fields,
            tracking_disabled,
            summaries: std::mem::take(&mut self.summaries),
            impl_of,
            aliases: self.aliases,
            deadline: self.deadline,
        }
    }
}

/// The first token of a function after its attributes.
fn fn_start(
    vis: Option<&syn::Visibility>,
    defaultness: Option<proc_macro2::Span>,
    sig: &syn::Signature,
) -> proc_macro2::Span {
    let vis = match vis {
        Some(syn::Visibility::Public(p)) => Some(p.span),
        Some(syn::Visibility::Restricted(r)) => Some(r.pub_token.span),
        _ => None,
    };
    vis.or(defaultness)
        .or(sig.constness.map(|t| t.span))
        .or(sig.asyncness.map(|t| t.span))
        .or(sig.unsafety.map(|t| t.span))
        .or(sig.abi.as_ref().map(|a| a.extern_token.span))
        .unwrap_or(sig.fn_token.span)
}

/// A function from its first attribute (or `first`, its first token) to the end of its block.
/// `Spanned::span` would print the whole function to find its ends.
fn extent(
    attrs: &[syn::Attribute],
    first: proc_macro2::Span,
    block: &syn::Block,
) -> proc_macro2::Span {
    let start = attrs.first().map_or(first, |a| a.pound_token.span);
    start.join(block.brace_token.span.close()).unwrap_or(first)
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let file = self.context(Vec::new(), false, None);
        let whole = extent(&f.attrs, fn_start(Some(&f.vis), None, &f.sig), &f.block);
        self.lower(&f.sig, &f.block, whole, &file);
        self.summaries = file.summaries;
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = match i.self_ty.as_ref() {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        let fields = ty.as_ref().and_then(|t| self.structs.get(t)).cloned();
        // Tracking is a property of the context: a method that turns it off, with none turning
        // it back on, leaves it off for the others.
        let first = (i.defaultness.map(|t| t.span))
            .or(i.unsafety.map(|t| t.span))
            .unwrap_or(i.impl_token.span);
        let start = i.attrs.first().map_or(first, |a| a.pound_token.span);
        let whole = start.join(i.brace_token.span.close()).unwrap_or(first);
        let text = self.source.get(whole.byte_range()).unwrap_or_default();
        let calls = |name: &str| text.contains(name);
        let disabled = calls("disable_event_tracking") && !calls("enable_event_tracking");
        let file = self.context(fields.unwrap_or_default(), disabled, ty);
        for item in &i.items {
            if let syn::ImplItem::Fn(f) = item {
                let first = fn_start(Some(&f.vis), f.defaultness.map(|t| t.span), &f.sig);
                self.lower(&f.sig, &f.block, extent(&f.attrs, first, &f.block), &file);
            }
        }
        self.summaries = file.summaries;
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        // Lowered with its `impl`; only nested functions remain.
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            let file = self.context(Vec::new(), false, None);
            let whole = extent(&f.attrs, fn_start(None, None, &f.sig), block);
            self.lower(&f.sig, block, whole, &file);
            self.summaries = file.summaries;
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crates_structs_come_from_every_file_and_conflicts_know_nothing() {
        let engine = "use cudarc::driver::CudaStream;\n/// The engine (a `struct` of {braces}).\npub(crate) struct Engine {\n    /// queue (for uploads)\n    pub q: Arc<CudaStream>,\n    n: usize,\n}\npub struct Pair(Arc<CudaStream>, usize);\nstruct Plain { n: usize }\n";
        let structs = CrateTypes::of_file(engine);
        assert_eq!(
            structs.get("Engine"),
            Some(&vec![("q".to_string(), TypeKind::Stream)])
        );
        assert_eq!(
            structs.get("Pair"),
            Some(&vec![("0".to_string(), TypeKind::Stream)])
        );
        assert_eq!(structs.get("Plain"), None);
        // Another crate's `Engine` with other fields: neither is known.
        let mut all = structs.clone();
        all.merge(CrateTypes::of_file("struct Engine { s: CudaSlice<f32> }\n"));
        assert_eq!(all.get("Engine"), None);
        assert!(all.get("Pair").is_some());
        // The same declaration seen twice is still known.
        let mut twice = structs.clone();
        twice.merge(CrateTypes::of_file(engine));
        assert!(twice.get("Engine").is_some());
    }

    #[test]
    fn aliases_of_gpu_types_name_them_in_fields_and_across_files() {
        let types = CrateTypes::of_file(
            "pub type Queue = Arc<CudaStream>;\ntype Output = Self;\nstruct Pair { q: Queue, n: usize }\n",
        );
        let aliases: Vec<_> = types.known_aliases().collect();
        assert_eq!(aliases, [("Queue", TypeKind::Stream)]);
        assert_eq!(
            types.get("Pair"),
            Some(&vec![("q".to_string(), TypeKind::Stream)])
        );
        let mut both = types.clone();
        both.merge(CrateTypes::of_file("type Queue = CudaSlice<f32>;\n"));
        assert_eq!(both.known_aliases().count(), 0);
    }

    #[test]
    fn functions_methods_and_nested_functions_are_bodies() {
        let src = "fn a(s: &CudaStream) { fn inner(s: &CudaStream) {} }\nstruct S;\n\
                   impl S { fn m(&self, s: &CudaStream) {} }\n\
                   trait T { fn d(&self, s: &CudaStream) {} }\n";
        let names: Vec<String> = lower_source(src, Deadline::NONE)
            .unwrap()
            .into_iter()
            .map(|b| b.name)
            .collect();
        assert_eq!(names, ["a", "inner", "m", "d"]);
    }

    #[test]
    fn syntax_errors_have_an_offset() {
        let src = "fn a(s: &CudaStream) {\n  let x = ;\n}\n";
        let err = lower_source(src, Deadline::NONE).unwrap_err();
        assert!(err.offset >= 24, "{err:?}");
    }

    #[test]
    fn functions_without_gpu_work_are_not_parsed() {
        // Not even for their syntax errors: nothing in them is analysed.
        let src = "fn a() {\n  let x = ;\n}\nfn b(s: &CudaStream) { s.synchronize(); }\n";
        let names: Vec<String> = lower_source(src, Deadline::NONE)
            .unwrap()
            .into_iter()
            .map(|b| b.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
    }
}
