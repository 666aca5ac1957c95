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

/// Parse `source` and lower every function, method and the module's top level.
pub fn lower_source(source: &str, path: &str, api: &ApiModel) -> Result<Vec<Body>, ParseError> {
    let stmts = parser::parse_module(source, path)?;
    Ok(module::lower_module(&stmts, api))
}
