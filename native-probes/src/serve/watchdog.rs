//! The time rules of one TCP session on the server: what ends a session that holds a place
//! without doing the work a probe does.
//!
//! Deterministic core: the edge reports the bytes it moved and when, and asks at any time
//! whether the session must end; times are nanoseconds on the edge's monotonic clock.
//!
//! - **Handshake**: the hello must be in within `handshake` of the accept.
//! - **Lifetime**: no session outlives `lifetime` (a probe session is one experiment: a
//!   handshake, three echoes and at most two transfers, each bounded by the client's own
//!   deadline).
//! - **Idle**: `idle` without a byte moved either way (a client that neither sends nor
//!   reads).
//! - **Minimum rate**: an idle timer alone is beaten by a client that trickles one byte just
//!   inside it. Time is cut into windows of `window` from the accept, and every window that
//!   begins after `grace` must see at least `min_rate · window` bytes moved, either way. A
//!   probe's echoes take a few round trips (inside the grace) and its transfers move data at
//!   the link's rate; a trickler, or a client that asks for a download and does not read it,
//!   fails the first judged window.

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// The limits, in nanoseconds and bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub handshake: Nanos,
    pub idle: Nanos,
    pub lifetime: Nanos,
    /// Bytes per second; 0 turns the rule off.
    pub min_rate: u64,
    pub window: Nanos,
    pub grace: Nanos,
}

/// Length of the minimum-rate windows, by default.
pub const WINDOW: Nanos = 5_000_000_000;
/// Windows that begin before this are not judged, by default.
pub const GRACE: Nanos = 10_000_000_000;

/// Why the session must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    Handshake,
    Lifetime,
    Slow,
    Idle,
}

/// One session's clocks.
#[derive(Clone, Debug)]
pub struct Watchdog {
    t: Timing,
    accepted: Nanos,
    welcomed: bool,
    last: Nanos,
    window_start: Nanos,
    window_bytes: u64,
    /// A window already judged too slow.
    slow: bool,
}

impl Watchdog {
    /// A session accepted at `now`.
    pub fn new(t: Timing, now: Nanos) -> Self {
        Self {
            t,
            accepted: now,
            welcomed: false,
            last: now,
            window_start: now,
            window_bytes: 0,
            slow: false,
        }
    }

    /// The hello is in and answered.
    pub fn welcomed(&mut self) {
        self.welcomed = true;
    }

    /// `bytes` were read from or written to the client at `now`.
    pub fn moved(&mut self, bytes: u64, now: Nanos) {
        self.roll(now);
        if bytes > 0 {
            self.window_bytes = self.window_bytes.saturating_add(bytes);
            self.last = self.last.max(now);
        }
    }

    /// Judges the windows that ended by `now`.
    fn roll(&mut self, now: Nanos) {
        let w = self.t.window.max(1);
        while now >= self.window_start.saturating_add(w) {
            let judged = self.window_start.saturating_sub(self.accepted) >= self.t.grace;
            // bytes / (w / 1e9) < min_rate, in integers.
            let need = u128::from(self.t.min_rate) * u128::from(w);
            if judged && self.t.min_rate > 0 && u128::from(self.window_bytes) * 1_000_000_000 < need
            {
                self.slow = true;
            }
            self.window_start = self.window_start.saturating_add(w);
            self.window_bytes = 0;
            if self.window_start == Nanos::MAX {
                break;
            }
        }
    }

    /// Whether the session must end at `now`, and why.
    pub fn check(&mut self, now: Nanos) -> Result<(), Close> {
        self.roll(now);
        let age = now.saturating_sub(self.accepted);
        if !self.welcomed && age >= self.t.handshake {
            return Err(Close::Handshake);
        }
        if age >= self.t.lifetime {
            return Err(Close::Lifetime);
        }
        if self.slow {
            return Err(Close::Slow);
        }
        if now.saturating_sub(self.last) >= self.t.idle {
            return Err(Close::Idle);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;
    const MS: Nanos = 1_000_000;

    fn timing() -> Timing {
        Timing {
            handshake: 5 * S,
            idle: 30 * S,
            lifetime: 300 * S,
            min_rate: 4096,
            window: WINDOW,
            grace: GRACE,
        }
    }

    #[test]
    fn a_hello_that_never_completes_is_closed_at_the_handshake_deadline() {
        let t0 = 7 * S;
        let mut w = Watchdog::new(timing(), t0);
        // A byte a second keeps it from being idle, not from the deadline.
        for i in 1..5 {
            w.moved(1, t0 + i * S);
            assert_eq!(w.check(t0 + i * S), Ok(()));
        }
        assert_eq!(w.check(t0 + 5 * S), Err(Close::Handshake));
        let mut w = Watchdog::new(timing(), t0);
        w.moved(14, t0 + MS);
        w.welcomed();
        assert_eq!(w.check(t0 + 5 * S), Ok(()));
    }

    #[test]
    fn a_trickler_under_the_idle_limit_is_closed_by_the_minimum_rate() {
        // One byte every 25 s (the old finding), and one every second: both closed when
        // the first judged window ends, 15 s after the accept.
        for every in [25 * S, S] {
            let mut w = Watchdog::new(timing(), 0);
            w.moved(14, 0);
            w.welcomed();
            let mut t = 0;
            let closed = loop {
                t += every.min(S);
                if t % every == 0 {
                    w.moved(1, t);
                }
                if let Err(why) = w.check(t) {
                    break (why, t);
                }
            };
            assert_eq!(closed, (Close::Slow, 15 * S), "a byte every {every} ns");
        }
    }

    #[test]
    fn probe_sessions_pass_slow_echoes_and_slow_links_included() {
        // The hello and echoes over a 2 s round trip: a few bytes per window, all inside
        // the grace.
        let mut w = Watchdog::new(timing(), 0);
        for i in 0..5 {
            w.moved(2, i * 2 * S);
            w.welcomed();
            assert_eq!(w.check(i * 2 * S + S), Ok(()));
        }
        // Then a transfer at 64 kbit/s (8,000 bytes a second, above 4 KiB/s) for a minute.
        for ms in (10_000..70_000).step_by(100) {
            w.moved(800, ms * MS);
            assert_eq!(w.check(ms * MS), Ok(()), "at {ms} ms");
        }
    }

    #[test]
    fn a_client_that_stops_reading_is_closed_slow_then_idle_and_every_session_ends() {
        // A download: 4 MiB into the socket buffer at once, then nothing.
        let mut w = Watchdog::new(timing(), 0);
        w.welcomed();
        w.moved(4 << 20, 12 * S);
        assert_eq!(
            w.check(16 * S),
            Ok(()),
            "the window [10 s, 15 s) moved 4 MiB"
        );
        assert_eq!(w.check(20 * S), Err(Close::Slow));
        // Without the rate rule, the idle limit.
        let mut w = Watchdog::new(
            Timing {
                min_rate: 0,
                ..timing()
            },
            0,
        );
        w.welcomed();
        w.moved(100, S);
        assert_eq!(w.check(30 * S), Ok(()));
        assert_eq!(w.check(31 * S), Err(Close::Idle));
        // And however fast, the lifetime.
        let mut w = Watchdog::new(timing(), 0);
        w.welcomed();
        for s in 1..300 {
            w.moved(1 << 20, s * S);
            assert_eq!(w.check(s * S), Ok(()));
        }
        assert_eq!(w.check(300 * S), Err(Close::Lifetime));
    }

    #[test]
    fn a_check_late_by_many_windows_judges_every_one() {
        let mut w = Watchdog::new(timing(), 0);
        w.welcomed();
        for s in 0..12 {
            w.moved(1 << 20, s * S);
        }
        // Nothing for the windows [15, 20) and [20, 25): the next byte does not save them.
        w.moved(1 << 20, 26 * S);
        assert_eq!(w.check(26 * S), Err(Close::Slow));
        // Extreme times do not overflow.
        let mut w = Watchdog::new(timing(), Nanos::MAX - S);
        w.moved(1, Nanos::MAX);
        assert_eq!(w.check(Nanos::MAX), Ok(()));
    }
}
