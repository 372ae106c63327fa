//! Bandwidth from a timed bulk transfer (JavaNws §2.1.1).
//!
//! The timed exchange is the payload from the client and a two-byte acknowledgement back,
//! so the raw time includes about one round trip that is not transfer time. JavaNws
//! subtracts the *predicted* non-Nagle RTT (the forecast of the RTT series, made from the
//! exchanges before this probe) from the raw time; that matters for small probes on long
//! paths. The raw time is kept next to the result so nothing is lost.

/// The result of one bulk probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth {
    /// Payload bits over the adjusted time, in Mbit/s (10⁶ bits per second).
    pub mbit_per_s: f64,
    /// The measured time from the first byte sent to the acknowledgement received.
    pub raw_ms: f64,
    /// The predicted RTT taken off `raw_ms` (0 when none was subtracted).
    pub subtracted_ms: f64,
}

/// Bandwidth of `payload_bytes` moved in `raw_ms`, with `predicted_rtt_ms` subtracted.
///
/// A prediction that is not below the raw time cannot be right (the transfer took no
/// time at all), so it is not subtracted: the result is then the raw-time bandwidth, a
/// lower bound, and `subtracted_ms` says 0. `None` when `raw_ms` is not positive.
pub fn bandwidth(
    payload_bytes: u64,
    raw_ms: f64,
    predicted_rtt_ms: Option<f64>,
) -> Option<Bandwidth> {
    if !(raw_ms.is_finite() && raw_ms > 0.0) {
        return None;
    }
    let subtracted_ms = match predicted_rtt_ms {
        Some(p) if p.is_finite() && p > 0.0 && p < raw_ms => p,
        _ => 0.0,
    };
    let secs = (raw_ms - subtracted_ms) / 1e3;
    Some(Bandwidth {
        mbit_per_s: payload_bytes as f64 * 8.0 / secs / 1e6,
        raw_ms,
        subtracted_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicted_rtt_is_subtracted_from_the_probe_time() {
        // Rows: payload, raw ms, predicted RTT, expected Mbit/s, expected subtraction.
        let rows = [
            // JavaNws's default 64 KB probe: 64 KiB in 60 ms with a 10 ms RTT → 50 ms.
            (65_536, 60.0, Some(10.0), 65_536.0 * 8.0 / 0.050 / 1e6, 10.0),
            // No prediction yet (the first probe): raw time only.
            (1_000_000, 800.0, None, 10.0, 0.0),
            // A prediction at or above the raw time is not subtracted.
            (1_000, 0.5, Some(0.5), 16.0, 0.0),
            (1_000, 0.5, Some(7.0), 16.0, 0.0),
            // A nonsense prediction is ignored.
            (1_000, 1.0, Some(f64::NAN), 8.0, 0.0),
        ];
        for (bytes, raw, rtt, mbps, sub) in rows {
            let b = bandwidth(bytes, raw, rtt).unwrap();
            assert!(
                (b.mbit_per_s - mbps).abs() < 1e-9 * mbps,
                "{bytes} {raw} {rtt:?}: {b:?}"
            );
            assert_eq!(b.subtracted_ms, sub);
            assert_eq!(b.raw_ms, raw);
        }
        assert_eq!(bandwidth(1, 0.0, None), None);
        assert_eq!(bandwidth(1, f64::INFINITY, None), None);
    }
}
