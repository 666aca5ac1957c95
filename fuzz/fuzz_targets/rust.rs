//! Generated Rust GPU code (cudarc, cust) through the whole analysis, fixes and renderers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use streamlint_fuzz::rust::File;

fuzz_target!(|file: File| {
    streamlint_fuzz::check_file("fuzz.rs", &file.render());
});
