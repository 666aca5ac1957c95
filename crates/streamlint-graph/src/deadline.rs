//! The time a file's analysis may take, so that one pathological file cannot hold up a run.

use std::time::{Duration, Instant};

/// When the analysis of one file must stop. Frontends check it between statements and stop
/// lowering a function when it has passed, marking the body [cut short](crate::Body::cut_short).
#[derive(Clone, Copy, Debug, Default)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No limit.
    pub const NONE: Deadline = Deadline(None);

    /// `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(limit))
    }

    pub fn passed(&self) -> bool {
        self.0.is_some_and(|at| Instant::now() >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_limit_passes() {
        assert!(!Deadline::NONE.passed());
        assert!(Deadline::after(Duration::ZERO).passed());
        assert!(!Deadline::after(Duration::from_secs(3600)).passed());
        assert!(!Deadline::after(Duration::MAX).passed());
    }
}
