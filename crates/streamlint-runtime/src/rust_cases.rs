//! The Rust runtime cases, compiled in from their fixture files: the code the GPU runs is the
//! code the linter judges. Each file defines
//! `pub fn case(ctx: &Arc<CudaContext>, k: &Kernels, t: &Trial) -> Result<usize, DriverError>`,
//! returning how many elements came out wrong, and builds on [`crate::kit`].
//!
//! A case must leave no owned stream alive and may switch cudarc's event tracking off: the
//! runner synchronizes the context and switches tracking back on after every trial.

use std::sync::Arc;

use cudarc::driver::{CudaContext, DriverError};

use crate::kit::{Kernels, Trial};

/// One compiled case.
pub struct RustCase {
    /// The file, relative to the repository root.
    pub file: &'static str,
    /// Its text, as compiled: the static verdict is about exactly this code.
    pub source: &'static str,
    pub run: fn(&Arc<CudaContext>, &Kernels, &Trial) -> Result<usize, DriverError>,
}

/// `module: "path from this file"`: compiles the fixture as `module` and lists it.
macro_rules! rust_cases {
    ($($module:ident: $path:literal;)*) => {
        $(
            #[path = $path]
            mod $module;
        )*

        /// Every compiled case.
        pub const RUST_CASES: &[RustCase] = &[$(RustCase {
            file: $path,
            source: include_str!($path),
            run: $module::case,
        }),*];
    };
}

rust_cases! {
    sl001_bad: "../../../fixtures/rust/SL001/bad_runtime_two_heads_drop_trunk.rs";
    sl001_good: "../../../fixtures/rust/SL001/good_runtime_two_heads_drop_trunk.rs";
    sl001_in_flight_bad: "../../../fixtures/rust/SL001/bad_runtime_batch_kept_in_flight.rs";
    sl001_in_flight_good: "../../../fixtures/rust/SL001/good_runtime_batch_kept_in_flight.rs";
    sl002_bad: "../../../fixtures/rust/SL002/bad_runtime_sync_copy_pointer_taken_for_compute_stream.rs";
    sl002_good: "../../../fixtures/rust/SL002/good_runtime_sync_copy_pointer_taken_for_compute_stream.rs";
    sl002_launcher_bad: "../../../fixtures/rust/SL002/bad_runtime_pointer_for_main_launched_by_stream_launcher.rs";
    sl002_launcher_good: "../../../fixtures/rust/SL002/good_runtime_pointer_for_main_launched_by_stream_launcher.rs";
    sl003_bad: "../../../fixtures/rust/SL003/bad_runtime_untracked_shard_no_join.rs";
    sl003_good: "../../../fixtures/rust/SL003/good_runtime_untracked_shard_no_join.rs";
    sl003_trait_bad: "../../../fixtures/rust/SL003/bad_runtime_stage_trait_method_no_join.rs";
    sl003_trait_good: "../../../fixtures/rust/SL003/good_runtime_stage_trait_method_no_join.rs";
    sl005_bad: "../../../fixtures/rust/SL005/bad_runtime_side_stream_scope.rs";
    sl005_good: "../../../fixtures/rust/SL005/good_runtime_side_stream_scope.rs";
    sl006_bad: "../../../fixtures/rust/SL006/bad_runtime_untracked_wait_before_record.rs";
    sl006_good: "../../../fixtures/rust/SL006/good_runtime_untracked_wait_before_record.rs";
    sl007_bad: "../../../fixtures/rust/SL007/bad_runtime_pinned_readback.rs";
    sl007_good: "../../../fixtures/rust/SL007/good_runtime_pinned_readback.rs";
    sl010_bad: "../../../fixtures/rust/SL010/bad_runtime_discarded_write_guard.rs";
    sl010_good: "../../../fixtures/rust/SL010/good_runtime_discarded_write_guard.rs";
    sl010_macro_bad: "../../../fixtures/rust/SL010/bad_runtime_guard_dropped_before_launch_macro.rs";
    sl010_macro_good: "../../../fixtures/rust/SL010/good_runtime_guard_dropped_before_launch_macro.rs";
}

impl RustCase {
    /// The file's path relative to the repository root.
    pub fn path(&self) -> &'static str {
        self.file.trim_start_matches("../")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::{on_disk, CaseId, Language};

    /// The compiled cases are exactly the Rust runtime fixtures on disk: a new case file must be
    /// added to the list above.
    #[test]
    fn the_compiled_cases_are_the_fixture_files() {
        let root = crate::repository_root();
        let mut compiled: Vec<CaseId> = RUST_CASES
            .iter()
            .map(|c| CaseId::from_path(c.path().as_ref()).expect("a runtime case path"))
            .collect();
        compiled.sort();
        assert_eq!(compiled, on_disk(&root, Language::Rust).unwrap());
    }
}
