//! When to try an archive again after a failed write: exponential back-off from `base` to
//! `max`, each wait scaled by a random factor in [0.5, 1) (the caller draws it) so that many
//! writers do not retry in step. A success starts again from `base`.
//!
//! Deterministic core.

use crate::when::Ms;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base_ms: Ms,
    pub max_ms: Ms,
    failures: u32,
}

impl Backoff {
    pub fn new(base_ms: Ms, max_ms: Ms) -> Self {
        Self {
            base_ms: base_ms.max(1),
            max_ms: max_ms.max(base_ms.max(1)),
            failures: 0,
        }
    }

    /// A write failed: how long to wait before the next, for `random` in [0, 1).
    pub fn failed(&mut self, random: f64) -> Ms {
        let full = self
            .base_ms
            .saturating_mul(1 << self.failures.min(30))
            .min(self.max_ms);
        self.failures = self.failures.saturating_add(1);
        let scale = 0.5 + 0.5 * random.clamp(0.0, 1.0);
        ((full as f64) * scale).round().max(1.0) as Ms
    }

    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Failures in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new(500, 60_000);
        let waits: Vec<Ms> = (0..10).map(|_| b.failed(0.999_999)).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]
        );
        assert_eq!(b.failed(0.0), 30_000, "the random factor halves at most");
        b.succeeded();
        assert_eq!(b.failed(0.999_999), 500);
    }
}
