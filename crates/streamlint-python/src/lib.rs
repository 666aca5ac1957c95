//! The Python frontend: parses a module and lowers each function into the language-neutral
//! stream graph with a model of PyTorch's stream, event, allocator and copy semantics.

pub mod api;
mod lower;
mod module;
mod names;
mod parser;
mod summary;
mod syntax;

pub use api::ApiModel;
pub use parser::ParseError;

use streamlint_graph::Body;

/// Does `source` parse as a Python module?
pub fn parses(source: &str) -> bool {
    parser::parse_module(source).is_ok()
}

/// Parse `source` and lower every function, method and the module's top level. Errors carry a
/// byte offset, so the file's path is not needed to parse it.
pub fn lower_source(source: &str, api: &ApiModel) -> Result<Vec<Body>, ParseError> {
    let stmts = parser::parse_module(source)?;
    Ok(module::lower_module(&stmts, api))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_carry_their_offset() {
        let err = lower_source(
            "import torch\ns = torch.cuda.Stream(\n",
            &ApiModel::default(),
        )
        .unwrap_err();
        assert!(err.offset >= 13, "{err:?}");
    }

    #[test]
    fn every_function_method_and_closure_is_a_body() {
        let src = "import torch\nclass P:\n    def a(self):\n        def inner():\n            pass\n        return inner\n\ndef b():\n    pass\n";
        let names: Vec<String> = lower_source(src, &ApiModel::default())
            .unwrap()
            .into_iter()
            .map(|b| b.name)
            .collect();
        assert_eq!(names, ["<module>", "a", "inner", "b"]);
    }

    #[test]
    fn match_statements_and_type_parameters_lower() {
        let src = "import torch\ndef f[T](x: T) -> T:\n    match x:\n        case 1:\n            torch.cuda.synchronize()\n        case _:\n            pass\n    return x\n";
        assert!(lower_source(src, &ApiModel::default()).is_ok());
    }
}
