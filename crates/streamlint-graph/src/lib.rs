//! The language-neutral heart of streamlint.
//!
//! Frontends lower each function into a [`Body`]: streams, buffers and events as entities, and the
//! operations performed on them in program order over a control-flow graph. [`Analysis`] computes,
//! for every operation, which earlier device accesses each stream (and the host) is ordered after,
//! and which buffers are live with which pending uses. Rules read those states; they never see
//! source syntax. A [`Summary`] of a body says what a call to it does to the values it is given,
//! so a frontend can apply a helper's effects at each call.

mod access_set;
mod analysis;
mod deadline;
mod ir;
mod state;
mod summary;

pub use access_set::AccessSet;
pub use analysis::Analysis;
pub use deadline::Deadline;
pub use ir::*;
pub use state::{BufferState, DeviceTested, EventState, Recorded, State};
pub use summary::{Effect, Handed, Passed, Summary};

#[cfg(test)]
mod tests;
