//! The Rust frontend: parses a file with syn and lowers every function into the language-neutral
//! stream graph, with a model of cudarc (including its automatic per-slice event tracking and the
//! holes in it), cust, and raw driver calls. syn has no types, so values are classified by where
//! they come from (`ctx.new_stream()`, `.alloc_zeros(..)`, ...) and by type annotations.

mod lower;
mod model;

pub use model::may_contain_gpu_code;
use streamlint_graph::Body;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// A file that does not parse, with a byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub offset: u32,
    pub message: String,
}

/// Parse `source` and lower every function and method.
pub fn lower_source(source: &str) -> Result<Vec<Body>, ParseError> {
    let parsed = syn::parse_file(source);
    let result = match parsed {
        Ok(file) => {
            let mut functions = Functions { bodies: Vec::new() };
            functions.visit_file(&file);
            Ok(functions.bodies)
        }
        Err(e) => Err(ParseError { offset: e.span().byte_range().start as u32, message: e.to_string() }),
    };
    // Span locations accumulate per thread: forget this file's before the next one.
    proc_macro2::extra::invalidate_current_thread_spans();
    result
}

/// Every function body of the file, methods and nested functions included.
struct Functions {
    bodies: Vec<Body>,
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.bodies.push(lower::lower_fn(&f.sig, &f.block, f.span()));
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.bodies.push(lower::lower_fn(&f.sig, &f.block, f.span()));
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.bodies.push(lower::lower_fn(&f.sig, block, f.span()));
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_methods_and_nested_functions_are_bodies() {
        let src = "fn a() { fn inner() {} }\nstruct S;\nimpl S { fn m(&self) {} }\ntrait T { fn d(&self) {} }\n";
        let names: Vec<String> = lower_source(src).unwrap().into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["a", "inner", "m", "d"]);
    }

    #[test]
    fn syntax_errors_have_an_offset() {
        let err = lower_source("fn a() {\n  let x = ;\n}\n").unwrap_err();
        assert!(err.offset >= 10, "{err:?}");
    }
}
