//! The rate of a timed transfer (JavaNws §2.1.1), one rule for the page and the `nowcast`
//! command.
//!
//! A timed bulk probe's clock runs from the first byte sent to the acknowledgement (or the
//! last byte) received, so the raw time holds about one round trip that is not transfer
//! time. JavaNws subtracts the *predicted* RTT (the forecast of the RTT series, made from the
//! exchanges before this probe). The subtraction is made only when it leaves at least half
//! of the raw time: a prediction larger than that says the probe was too short to be timed
//! against it, and the raw-time rate, a lower bound, is the honest answer. The raw time is
//! kept beside the result so nothing is lost.
//!
//! Pure arithmetic: bytes and milliseconds in, a rate out (no clock, no I/O).

/// 1 Mbit/s in bytes per millisecond: 10⁶ bit/s = 125,000 B/s = 125 B/ms.
const BYTES_PER_MS_PER_MBITS: f64 = 125.0;

/// The rate of one transfer and what it was computed from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Payload over the adjusted time, in Mbit/s (10⁶ bits per second).
    pub mbit_per_s: f64,
    /// The measured time, before any subtraction.
    pub raw_ms: f64,
    /// The predicted RTT taken off `raw_ms` (0 when none was).
    pub subtracted_ms: f64,
}

impl Rate {
    /// The time the rate was computed from.
    pub fn duration_ms(&self) -> f64 {
        self.raw_ms - self.subtracted_ms
    }
}

/// Bytes over milliseconds as Mbit/s; 0 for a duration that is not positive.
pub fn mbit_per_s(bytes: f64, duration_ms: f64) -> f64 {
    if duration_ms > 0.0 {
        bytes / duration_ms / BYTES_PER_MS_PER_MBITS
    } else {
        0.0
    }
}

/// The rate of `bytes` moved in `raw_ms`, with `predicted_rtt_ms` subtracted when it leaves
/// at least half of the raw time. `None` when `raw_ms` is not a positive, finite time.
pub fn rate_minus_rtt(bytes: f64, raw_ms: f64, predicted_rtt_ms: Option<f64>) -> Option<Rate> {
    if !(raw_ms.is_finite() && raw_ms > 0.0 && bytes.is_finite() && bytes >= 0.0) {
        return None;
    }
    let subtracted_ms = match predicted_rtt_ms {
        Some(p) if p.is_finite() && p > 0.0 && raw_ms - p >= raw_ms / 2.0 => p,
        _ => 0.0,
    };
    Some(Rate {
        mbit_per_s: mbit_per_s(bytes, raw_ms - subtracted_ms),
        raw_ms,
        subtracted_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicted_rtt_is_subtracted_when_it_leaves_half_the_time() {
        // Rows: payload, raw ms, predicted RTT, expected Mbit/s, expected subtraction.
        let rows = [
            // JavaNws's default 64 KB probe: 64 KiB in 60 ms with a 10 ms RTT → 50 ms.
            (
                65_536.0,
                60.0,
                Some(10.0),
                65_536.0 * 8.0 / 0.050 / 1e6,
                10.0,
            ),
            // No prediction yet (the first probe): raw time only.
            (1_000_000.0, 800.0, None, 10.0, 0.0),
            // Exactly half is still subtracted; more than half is not.
            (1_000.0, 2.0, Some(1.0), 8.0, 1.0),
            (1_000.0, 2.0, Some(1.01), 4.0, 0.0),
            (1_000.0, 0.5, Some(7.0), 16.0, 0.0),
            // A nonsense prediction is ignored.
            (1_000.0, 1.0, Some(f64::NAN), 8.0, 0.0),
            (1_000.0, 1.0, Some(-3.0), 8.0, 0.0),
        ];
        for (bytes, raw, rtt, mbps, sub) in rows {
            let r = rate_minus_rtt(bytes, raw, rtt).unwrap();
            assert!(
                (r.mbit_per_s - mbps).abs() <= 1e-12 * mbps,
                "{bytes} {raw} {rtt:?}: {r:?}"
            );
            assert_eq!((r.subtracted_ms, r.raw_ms), (sub, raw));
            assert_eq!(r.duration_ms(), raw - sub);
        }
        assert_eq!(rate_minus_rtt(1.0, 0.0, None), None);
        assert_eq!(rate_minus_rtt(1.0, f64::INFINITY, None), None);
        assert_eq!(rate_minus_rtt(f64::NAN, 1.0, None), None);
        assert_eq!(mbit_per_s(125.0, 1.0), 1.0);
        assert_eq!(mbit_per_s(125.0, 0.0), 0.0);
    }
}
