//! The Python frontend: parses a module and lowers each function into the language-neutral
//! stream graph with a model of PyTorch's stream, event, allocator and copy semantics.

pub mod api;
mod captures;
mod context;
mod current_stream_methods;
mod data_loaders;
mod guards;
mod hooks;
mod lower;
mod module;
mod names;
mod ordered_streams;
mod outline;
mod parser;
mod prefilter;
mod project;
mod summary;
mod syntax;
mod wrappers;

pub use api::ApiModel;
pub use parser::ParseError;
pub use prefilter::Prefilter;
pub use project::{
    call_offsets, defines_itself, module_name, names_imported_from, ModuleIndex, Names, Parsed,
    Project,
};

use streamlint_graph::{Body, Deadline};

/// Where and why `source` does not parse as a Python module, if it does not.
pub fn syntax_error(source: &str) -> Option<ParseError> {
    parser::parse_module(source).err()
}

/// Parse `source` and lower every function, method and the module's top level (those with
/// stream code) until `deadline`, as a project of one module: calls into other files keep the
/// model of unknown code. [`Project::lower`] lowers a module that sees the whole project.
pub fn lower_source(
    source: &str,
    api: &ApiModel,
    deadline: Deadline,
) -> Result<Vec<Body>, ParseError> {
    let prefilter = Prefilter::new(api);
    let module = ModuleIndex::new(String::new(), source, api, &prefilter);
    let project = Project::new(
        vec![std::sync::Arc::new(module)],
        Vec::new(),
        api,
        &prefilter,
    );
    let parsed = project.parse(0, source)?;
    Ok(project.lower(0, source, &parsed, deadline))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_carry_their_offset() {
        let err = lower_source(
            "import torch\ns = torch.cuda.Stream(\n",
            &ApiModel::default(),
            Deadline::NONE,
        )
        .unwrap_err();
        assert!(err.offset >= 13, "{err:?}");
    }

    /// The names of the bodies `src` lowers to, in order.
    fn body_names(src: &str) -> Vec<String> {
        lower_source(src, &ApiModel::default(), Deadline::NONE)
            .unwrap()
            .into_iter()
            .map(|b| b.name)
            .collect()
    }

    #[test]
    fn every_function_method_and_closure_with_stream_code_is_a_body() {
        let src = "import torch\nclass P:\n    def a(self):\n        def inner():\n            torch.cuda.current_stream().synchronize()\n        return inner\n\ndef b():\n    pass\n\ndef c(x):\n    return x.to('cuda', non_blocking=True)\n";
        let names = body_names(src);
        // `a` contains `inner`'s text; `b` has nothing to do with streams.
        assert_eq!(names, ["<module>", "a", "inner", "c"]);
    }

    #[test]
    fn methods_see_stream_state_their_class_keeps_in_attributes() {
        // `next` names no stream API, but hands out a batch staged on the side stream.
        let src = "import torch\nclass Prefetcher:\n    def __init__(self, it):\n        self.it = it\n        self.stream = torch.cuda.Stream()\n        self.preload()\n\n    def preload(self):\n        with torch.cuda.stream(self.stream):\n            self.batch = next(self.it).cuda(non_blocking=True)\n\n    def next(self):\n        batch = self.batch\n        self.preload()\n        return batch\n\n    def __len__(self):\n        return len(self.it)\n";
        let names = body_names(src);
        assert_eq!(names, ["<module>", "__init__", "preload", "next"]);
    }

    #[test]
    fn a_function_lets_go_of_its_values_at_its_last_statement() {
        let src = "import torch\ndef f(x):\n    s = torch.cuda.Stream()\n    if x:\n        y = 1\n    else:\n        return x\n";
        let bodies = lower_source(src, &ApiModel::default(), Deadline::NONE).unwrap();
        let f = bodies.iter().find(|b| b.name == "f").unwrap();
        let end = f
            .ops
            .iter()
            .find(|op| op.kind == streamlint_graph::OpKind::ScopeEnd)
            .unwrap();
        assert_eq!(
            &src[end.span.start as usize..end.span.end as usize],
            "return x"
        );
    }

    #[test]
    fn local_helpers_are_lowered_where_called_but_not_local_generators() {
        let src = "import torch\ndef run(x, s):\n    def _scale(t):\n        return t * 2\n    def _batches():\n        yield x * 3\n    with torch.cuda.stream(s):\n        y = _scale(x)\n        for b in _batches():\n            y += b\n    return y\n";
        let bodies = lower_source(src, &ApiModel::default(), Deadline::NONE).unwrap();
        let run = bodies.iter().find(|b| b.name == "run").unwrap();
        let callees: Vec<&str> = run.inlined_calls.iter().map(|(_, c)| c.as_str()).collect();
        assert_eq!(callees.len(), 1, "{callees:?}");
        assert!(callees[0].ends_with("_scale"), "{callees:?}");
    }

    #[test]
    fn match_statements_and_type_parameters_lower() {
        let src = "import torch\ndef f[T](x: T) -> T:\n    match x:\n        case 1:\n            torch.cuda.synchronize()\n        case _:\n            pass\n    return x\n";
        assert!(lower_source(src, &ApiModel::default(), Deadline::NONE).is_ok());
    }
}
