//! The Rust frontend: parses a file with syn and lowers every function into the language-neutral
//! stream graph, with a model of cudarc (including its automatic per-slice event tracking and the
//! holes in it), cust, and raw driver calls. syn has no types, so values are classified by where
//! they come from (`ctx.new_stream()`, `.alloc_zeros(..)`, ...) and by type annotations.

mod crate_index;
mod lower;
mod model;
mod offsets;
mod skim;

use rustc_hash::FxHashMap;

use crate_index::{method_key, method_name_key};
pub use crate_index::{Callees, CrateSummaries, CrateTypes};
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

/// Parse `source` and lower every function and method, as a crate of one file.
pub fn lower_source(source: &str, deadline: Deadline) -> Result<Vec<Body>, ParseError> {
    let types = CrateTypes::of_file(source);
    lower_source_in(source, deadline, &types, &CrateSummaries::default()).map(|f| f.bodies)
}

/// A file of a crate, lowered: its bodies, and what its functions do for the other files.
pub struct LoweredFile {
    pub bodies: Vec<Body>,
    pub summaries: CrateSummaries,
}

/// [`lower_source`] for a file of a crate whose files declare `types` and define the functions
/// `summaries` describes (the file's own definitions come first).
pub fn lower_source_in(
    source: &str,
    deadline: Deadline,
    types: &CrateTypes,
    summaries: &CrateSummaries,
) -> Result<LoweredFile, ParseError> {
    // Bodies without GPU work are not parsed; should the scan that found them have misread
    // the text, the text is parsed whole, so that an error is always the file's own.
    let skimmed = skim::without_inert_bodies(source, types, summaries);
    let lower = |text: &str| {
        offsets::with_lines_of(text, || {
            syn::parse_file(text).map(|file| lower_file(&file, source, deadline, types, summaries))
        })
    };
    let lowered = match lower(&skimmed) {
        Err(_) if matches!(skimmed, std::borrow::Cow::Owned(_)) => lower(source),
        lowered => lowered,
    };
    let result = lowered.map_err(|e| ParseError {
        offset: e.span().byte_range().start as u32,
        message: e.to_string(),
    });
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

/// Lower the file's functions; when some function (of the file, or of the crate's other files)
/// has a summary worth applying, lower again, with the summaries, the functions that name one
/// of them (the others lower as before).
fn lower_file(
    file: &syn::File,
    source: &str,
    deadline: Deadline,
    crate_types: &CrateTypes,
    crate_summaries: &CrateSummaries,
) -> LoweredFile {
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
    let mut aliases: FxHashMap<String, TypeKind> = crate_types
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
        if let Some(fields) = crate_types.get(&name) {
            structs.fields.insert(name, fields.clone());
        }
    }
    structs.visit_file(file);
    let mut first = Functions {
        source,
        structs: &structs.fields,
        aliases: &structs.aliases,
        summaries: FxHashMap::default(),
        lowered: Vec::new(),
        earlier: Vec::new().into_iter(),
        found: CrateSummaries::default(),
        deadline,
    };
    first.visit_file(file);
    let own = first.found;
    let bodies = |lowered: Vec<(Body, Summary)>| lowered.into_iter().map(|(b, _)| b).collect();
    let usable: FxHashMap<String, Summary> = own
        .with_the_crates(crate_summaries)
        .useful()
        .map(|(key, summary)| (key.to_string(), summary.clone()))
        .collect();
    if usable.is_empty() {
        return LoweredFile {
            bodies: bodies(first.lowered),
            summaries: own,
        };
    }
    let mut second = Functions {
        source,
        structs: &structs.fields,
        aliases: &structs.aliases,
        summaries: usable,
        lowered: Vec::new(),
        earlier: first.lowered.into_iter(),
        found: CrateSummaries::default(),
        deadline,
    };
    second.visit_file(file);
    // Functions lowered again, seeing their calls, say more of themselves.
    LoweredFile {
        bodies: bodies(second.lowered),
        summaries: second.found,
    }
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
    /// Each function's body and summary, in the order functions are visited.
    lowered: Vec<(Body, Summary)>,
    /// Those of a first lowering without summaries, kept for the functions that call none.
    earlier: std::vec::IntoIter<(Body, Summary)>,
    /// Summaries of the functions lowered.
    found: CrateSummaries,
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
        let text = self
            .source
            .get(offsets::byte_range(whole))
            .unwrap_or_default();
        let calls_summarized = file
            .summaries
            .keys()
            .any(|key| text.contains(crate_index::callee_name(key)));
        let (body, summary) = match earlier.filter(|_| !calls_summarized) {
            Some(lowered) => lowered,
            None => lower::lower_fn(sig, block, whole, file),
        };
        let name = sig.ident.to_string();
        match (sig.receiver(), &file.impl_of) {
            (None, _) => self.found.declare(name, summary.clone()),
            (Some(_), impl_of) => {
                if let Some(ty) = impl_of {
                    self.found.declare(method_key(ty, &name), summary.clone());
                }
                self.found.declare(method_name_key(&name), summary.clone());
            }
        }
        self.lowered.push((body, summary));
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
        let text = self
            .source
            .get(offsets::byte_range(whole))
            .unwrap_or_default();
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
