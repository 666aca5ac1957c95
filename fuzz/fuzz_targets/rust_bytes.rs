//! Any bytes as a Rust file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        streamlint_fuzz::check_file("fuzz.rs", text);
    }
});
