//! The clocks the edges read and hand to the cores: a monotonic clock in nanoseconds since
//! the command started (the cores' [`Nanos`]) and the wall clock of the records.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Nanoseconds on the command's monotonic clock.
pub type Nanos = u64;

/// A monotonic clock counting from its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// Now, in nanoseconds since the clock was made.
    pub fn now(&self) -> Nanos {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `at` stands for.
    pub fn instant(&self, at: Nanos) -> Instant {
        self.origin + Duration::from_nanos(at)
    }
}

/// Milliseconds since 1970 (UTC), the records' clock.
pub fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}
