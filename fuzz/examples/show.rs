//! Print what a fuzz input stands for: the generated program, or the session's bytes (the
//! fuzz targets decode their input the same way).
//!
//! cargo run --manifest-path fuzz/Cargo.toml --example show -- TARGET FILE

use arbitrary::{Arbitrary, Unstructured};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, file] = args.as_slice() else {
        eprintln!("usage: show TARGET FILE (TARGET: python, rust, lsp)");
        std::process::exit(2);
    };
    let data = std::fs::read(file).unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(2);
    });
    let u = Unstructured::new(&data);
    let bytes = match target.as_str() {
        "python" => {
            streamlint_fuzz::python::Module::arbitrary_take_rest(u).map(|m| m.render().into_bytes())
        }
        "rust" => {
            streamlint_fuzz::rust::File::arbitrary_take_rest(u).map(|f| f.render().into_bytes())
        }
        "lsp" => streamlint_fuzz::lsp::Session::arbitrary_take_rest(u).map(|s| s.bytes()),
        // The bytes targets take the file as it is.
        _ => Ok(data.clone()),
    };
    match bytes {
        Ok(bytes) => std::io::stdout().write_all(&bytes).expect("stdout"),
        Err(e) => {
            eprintln!("{file}: not an input of {target}: {e}");
            std::process::exit(2);
        }
    }
}
