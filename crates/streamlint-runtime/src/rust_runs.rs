//! Running the compiled Rust cases on the GPU: warm-up trials, then the counted ones, each
//! followed by a full synchronize.

use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::kit::{Kernels, Trial};
use crate::report::GpuResult;
use crate::rust_cases::RustCase;

/// How every trial is run, and the values trials write (one new value per trial, so that memory
/// left over from any earlier trial never holds the right one).
pub struct Runner<'a> {
    pub ctx: &'a Arc<CudaContext>,
    pub kernels: &'a Kernels,
    pub trials: u32,
    pub warmup: u32,
    pub elements: usize,
    pub cycles: u64,
    pub next_value: f32,
}

impl Runner<'_> {
    /// Run one case: `warmup` trials that are not counted, then `trials` that are.
    pub fn run(&mut self, case: &RustCase) -> GpuResult {
        let mut counts = Vec::new();
        for trial in 0..self.warmup + self.trials {
            let t = Trial {
                n: self.elements,
                value: self.next_value,
                cycles: self.cycles,
            };
            self.next_value += 1.0;
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (case.run)(self.ctx, self.kernels, &t)
            }));
            let settled = self.settle();
            match (outcome, settled) {
                (Ok(Ok(wrong)), Ok(())) => {
                    if trial >= self.warmup {
                        counts.push(wrong as u64);
                    }
                }
                (Ok(Err(e)), _) | (Ok(Ok(_)), Err(e)) => {
                    return GpuResult::failed(format!("trial {}: {e}", trial + 1))
                }
                (Err(_), _) => {
                    return GpuResult::failed(format!("trial {}: the case panicked", trial + 1))
                }
            }
        }
        GpuResult::from_counts(&counts)
    }

    /// Wait for everything the trial left running, and undo a case's `disable_event_tracking`.
    fn settle(&self) -> Result<(), cudarc::driver::DriverError> {
        let synced = self.ctx.synchronize();
        // SAFETY: tracking applies to slices made from now on; every slice of the finished trial
        // (tracked or not) is gone and its work is done.
        unsafe { self.ctx.enable_event_tracking() };
        synced
    }
}
