//! Generated Python stream code through the whole analysis, fixes and renderers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use streamlint_fuzz::python::Module;

fuzz_target!(|module: Module| {
    streamlint_fuzz::check_file("fuzz.py", &module.render());
});
