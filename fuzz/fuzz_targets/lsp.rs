//! Generated editor sessions through the language server's framing and message loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use streamlint_fuzz::lsp::Session;

fuzz_target!(|session: Session| {
    let input = std::io::Cursor::new(session.bytes());
    streamlint_server::serve(input, std::io::sink()).expect("a sink takes anything");
});
