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

/// How long an automatically sized bandwidth probe should last, ms: long enough that timer
/// resolution, the acknowledgement's round trip and TCP's slow start are small next to it
/// (and that a token-bucket shaper's burst, commonly 10 ms of its rate, is a small part of
/// it), short enough to stay cheap.
pub const AUTO_TARGET_MS: f64 = 250.0;
/// The smallest automatic size, and where the first run's tries start: JavaNws's 64 KB.
pub const AUTO_MIN_BYTES: u64 = 64 * 1024;
/// The first run's tries grow at least this many times from one to the next.
pub const BURST_GROWTH: u64 = 4;
/// ... and at most this many: a short try can read far above the path (a token bucket's burst
/// passes at line rate: behind a 137 Mbit/s tbf, 64 KiB read 2–4 Gbit/s), and the size that
/// rate asks for would then take seconds (128 MiB: 7.8 s there). Sixty-four-fold lets a
/// 64 KiB try that read a 100 Mbit/s path go straight to its 4 MiB, and keeps a try after
/// one that read a shaper's burst to 4 MiB (0.25 s there).
pub const BURST_MAX_GROWTH: u64 = 64;

/// How many predicted round trips an automatically sized transfer lasts at least, beyond the
/// round trip its raw time holds. A rate has the predicted RTT taken off its raw time only
/// when that leaves at least half of it ([`rate_minus_rtt`]); a shorter transfer is read as
/// its bytes over the raw time, a fraction of the rate on a long path, and the size that
/// fraction asks for is no longer: a fixed point. Behind 200 ms, 100 Mbit/s read 29 Mbit/s
/// on every probe (1 MiB: 84 ms of transfer), and 1.7 Mbit/s behind 300 ms (64 KiB), where a
/// quarter second of transfer is less than the round trip. Two round trips leave a margin for
/// a rate above its forecast, and half a probe (the page's pretest tries) still lasts one.
pub const RTT_TIMES: f64 = 2.0;

/// How many predicted round trips of the forecast rate the untimed warm-up before a probe on
/// a *new* connection moves at least (`nowcast tcp`; [`warm_up_size`]).
pub const WARM_UP_RTT_TIMES: f64 = 4.0;

/// The first run's tries on a new connection go on, however long the last one lasted, while
/// each reads more than this many times the one before (see [`cold_burst_next`]).
pub const TRY_GROWTH: f64 = 1.25;

/// A usable predicted RTT, ms (0 for none).
fn rtt_of(predicted_rtt_ms: Option<f64>) -> f64 {
    predicted_rtt_ms
        .filter(|r| r.is_finite() && *r > 0.0)
        .unwrap_or(0.0)
}

/// How long an automatically sized transfer should last, ms: [`AUTO_TARGET_MS`], or
/// [`RTT_TIMES`] predicted round trips on a longer path.
pub fn auto_target_ms(predicted_rtt_ms: Option<f64>) -> f64 {
    AUTO_TARGET_MS.max(RTT_TIMES * rtt_of(predicted_rtt_ms))
}

/// The bytes `rate` moves in `ms`, as a power of two within [`AUTO_MIN_BYTES`] and `max`.
fn power_of_two_for(rate: f64, ms: f64, max: u64) -> u64 {
    let want = rate * BYTES_PER_MS_PER_MBITS * ms;
    let mut size = AUTO_MIN_BYTES;
    while (size as f64) < want && size < max {
        size = size.saturating_mul(2);
    }
    size.min(max)
}

/// The automatic probe size: the bytes the predicted rate moves in [`auto_target_ms`] (a
/// quarter second, or [`RTT_TIMES`] predicted round trips on a longer path), rounded up to a
/// power of two (so that sizes repeat and durations stay comparable), between
/// [`AUTO_MIN_BYTES`] and `max_bytes` (the caller's cap: the server's, and the page's 32 MiB).
/// [`AUTO_MIN_BYTES`] with no prediction. One rule for the page and `nowcast tcp`.
pub fn auto_size(
    predicted_mbit_s: Option<f64>,
    predicted_rtt_ms: Option<f64>,
    max_bytes: u64,
) -> u64 {
    let max = max_bytes.max(AUTO_MIN_BYTES);
    let Some(rate) = predicted_mbit_s.filter(|r| *r > 0.0) else {
        return AUTO_MIN_BYTES;
    };
    power_of_two_for(rate, auto_target_ms(predicted_rtt_ms), max)
}

/// The untimed warm-up before an automatic probe on a new connection (`nowcast tcp`): the
/// bytes the predicted rate moves in a quarter second or [`WARM_UP_RTT_TIMES`] predicted round
/// trips, whichever is longer, as a power of two within [`AUTO_MIN_BYTES`] and `max_bytes`;
/// never less than the probe ([`auto_size`]).
///
/// A new connection's slow start sends about twice a window's bytes to reach that window, so
/// a warm-up of four round trips of the forecast leaves a window of about two: the probe after
/// it reads up to twice a forecast that was low, and the readings climb to the path's rate
/// from any start. A warm-up of the probe's own size (two round trips) left the window at
/// about the forecast, and the reading with it: behind 150 ms, 40 Mbit/s read 22.7 on every
/// probe.
pub fn warm_up_size(
    predicted_mbit_s: Option<f64>,
    predicted_rtt_ms: Option<f64>,
    max_bytes: u64,
) -> u64 {
    let Some(rate) = predicted_mbit_s.filter(|r| *r > 0.0) else {
        return AUTO_MIN_BYTES;
    };
    let ms = AUTO_TARGET_MS.max(WARM_UP_RTT_TIMES * rtt_of(predicted_rtt_ms));
    power_of_two_for(rate, ms, max_bytes.max(AUTO_MIN_BYTES)).max(auto_size(
        predicted_mbit_s,
        predicted_rtt_ms,
        max_bytes,
    ))
}

/// The bytes the predicted rate moves in [`RTT_TIMES`] predicted round trips (a power of two
/// within [`AUTO_MIN_BYTES`] and `max_bytes`): what a transfer needs on a long path to have
/// the RTT taken off its time. 0 without a rate or an RTT. The page's pretest tries are no
/// smaller.
pub fn timed_bytes(
    predicted_mbit_s: Option<f64>,
    predicted_rtt_ms: Option<f64>,
    max_bytes: u64,
) -> u64 {
    let rtt = rtt_of(predicted_rtt_ms);
    match predicted_mbit_s.filter(|r| *r > 0.0) {
        Some(rate) if rtt > 0.0 => {
            power_of_two_for(rate, RTT_TIMES * rtt, max_bytes.max(AUTO_MIN_BYTES))
        }
        _ => 0,
    }
}

/// The first run's next try after one of `bytes` that read `mbit_s` over a raw time of
/// `raw_ms`, or `None` when the tries are over: this one lasted [`AUTO_TARGET_MS`] and, on a
/// long path, the predicted round trip its raw time holds plus [`RTT_TIMES`] more (long
/// enough to be timed), or was already at `max_bytes`, or read no rate. The next is the
/// larger of [`BURST_GROWTH`] times this one and the automatic size of the rate it read (a
/// 64 KiB try on a fast path reads low, its time mostly the request's round trip and TCP's
/// slow start, so the rate alone would ramp slowly), at most [`BURST_MAX_GROWTH`] times this
/// one, never above `max_bytes`.
///
/// Why tries at all: a series' first recorded probe should already be long enough to be
/// timed. A fixed 64 KiB probe reads what its first round trips and the path's buffers make
/// of it: behind a 137 Mbit/s token bucket (a 10 ms burst) `nowcast tcp`'s 64 KiB probe read
/// 1.2–2.8 Gbit/s, on a long path it reads slow start.
pub fn burst_next(
    bytes: u64,
    mbit_s: f64,
    raw_ms: f64,
    predicted_rtt_ms: Option<f64>,
    max_bytes: u64,
) -> Option<u64> {
    let cap = max_bytes.max(AUTO_MIN_BYTES);
    let long_enough = AUTO_TARGET_MS.max((1.0 + RTT_TIMES) * rtt_of(predicted_rtt_ms));
    if raw_ms >= long_enough || bytes >= cap || mbit_s.is_nan() || mbit_s <= 0.0 {
        return None;
    }
    Some(grown(bytes, mbit_s, predicted_rtt_ms, cap))
}

/// The try after one of `bytes` that read `mbit_s`: [`BURST_GROWTH`] times it or the
/// automatic size of that rate, whichever is larger, at most [`BURST_MAX_GROWTH`] times it
/// and `cap`.
fn grown(bytes: u64, mbit_s: f64, predicted_rtt_ms: Option<f64>, cap: u64) -> u64 {
    bytes
        .saturating_mul(BURST_GROWTH)
        .max(auto_size(Some(mbit_s), predicted_rtt_ms, cap))
        .min(bytes.saturating_mul(BURST_MAX_GROWTH))
        .min(cap)
}

/// [`burst_next`] for tries on a new connection, one after another on it (`nowcast tcp`'s
/// first probe of a series): they also go on while each reads more than [`TRY_GROWTH`] times
/// the one before (`previous_mbit_s`; the first try always goes on), as long as one is below
/// `max_bytes`. On a new connection a try's time is mostly slow start's round trips: behind
/// 150 ms a 64 KiB try lasted 463 ms, three round trips, "long enough" by [`burst_next`]'s
/// measure, and the series started from its 1.7 Mbit/s on a 40 Mbit/s path. Each try leaves
/// the connection's window larger, so a try that reads no more than the one before has
/// found the path's rate.
pub fn cold_burst_next(
    bytes: u64,
    mbit_s: f64,
    previous_mbit_s: Option<f64>,
    raw_ms: f64,
    predicted_rtt_ms: Option<f64>,
    max_bytes: u64,
) -> Option<u64> {
    let cap = max_bytes.max(AUTO_MIN_BYTES);
    let growing = previous_mbit_s.is_none_or(|p| mbit_s > TRY_GROWTH * p);
    let usable = mbit_s.is_finite() && mbit_s > 0.0;
    match burst_next(bytes, mbit_s, raw_ms, predicted_rtt_ms, max_bytes) {
        Some(next) => Some(next),
        None if growing && usable && bytes < cap => {
            Some(grown(bytes, mbit_s, predicted_rtt_ms, cap))
        }
        None => None,
    }
}

/// What a sender's congestion control says of its start once a warm-up (or the first run's
/// tries) has moved its bytes: asked of the sending socket's `TCP_INFO` (its window and
/// slow-start threshold) and its congestion control's name. On an upload the client is the
/// sender; on a download `nowcast serve` answers for its socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Not known: a server of an earlier build, or a system that does not say.
    Unknown,
    /// BBR's startup (pacing gain 2.89). It ends by itself three round trips after the
    /// delivery rate stops growing by a quarter; until then it sends up to three times the
    /// path's rate into the queue, and loses what overflows it.
    Startup,
    /// A loss-based control's slow start (Reno, CUBIC): the window is below the slow-start
    /// threshold, which is infinite until the first loss (or HyStart's delay increase) and
    /// after a retransmission timeout is above a window of one packet. On a path that neither
    /// loses nor queues it never ends.
    SlowStart,
    /// Over: BBR past its startup, or a loss-based window at or above its threshold.
    Over,
}

/// How long the warm-ups before a timed transfer may last in all, in predicted round trips
/// ([`warm_again`]), or [`WARM_UP_MAX_MS`] on a short path. BBR's startup lasted 13–15 round
/// trips behind 150 ms (40 Mbit/s, a 20 ms queue), and longer with the pauses between
/// transfers, which it does not count.
pub const WARM_UP_MAX_RTT_TIMES: f64 = 40.0;
/// ... and at least this long, ms, however short the path.
pub const WARM_UP_MAX_MS: f64 = 1_000.0;

/// Whether another warm-up should run before the timed transfer, and its size: after a
/// warm-up (or the last of the first run's tries) of `bytes` that lasted `raw_ms` and read
/// `mbit_s`, when the warm transfers so far have lasted `warmed_ms` in all and the sender
/// says `start`. `before` is the reading of the warm-up before this one (the try before, after
/// the tries), `None` after the first.
///
/// Why: a timed transfer that starts inside the sender's start times its overshoot, or the
/// start itself. Behind 150 ms (40 Mbit/s, a 20 ms queue), one warm-up of four round trips
/// could end inside BBR's startup, and the timed transfer then lost 471 packets and read 15.3
/// Mbit/s; with CUBIC, the warm-up's overshoot ended in a retransmission timeout and the
/// timed transfer was a new slow start from one packet. Each low reading shrank the next
/// warm-up (a fixed point: 12.4, 4.0, 1.3 Mbit/s with CUBIC). So the warm-ups go on, each
/// twice the last: while the sender is in BBR's startup (which ends by itself); after a first
/// warm-up that ended in a loss-based slow start (whose window doubles each round trip until
/// it overshoots); and while each reads more than [`TRY_GROWTH`] times the one before, in any
/// state (a window regrowing after a loss); until they have lasted [`WARM_UP_MAX_RTT_TIMES`]
/// predicted round trips or [`WARM_UP_MAX_MS`]. A sender that does not say (a server of an
/// earlier build) is warmed once, as before.
#[allow(clippy::too_many_arguments)]
pub fn warm_again(
    start: Start,
    bytes: u64,
    raw_ms: f64,
    mbit_s: f64,
    before: Option<f64>,
    warmed_ms: f64,
    predicted_rtt_ms: Option<f64>,
    max_bytes: u64,
) -> Option<u64> {
    let limit = WARM_UP_MAX_MS.max(WARM_UP_MAX_RTT_TIMES * rtt_of(predicted_rtt_ms));
    let growing = before
        .filter(|b| b.is_finite() && *b > 0.0)
        .is_some_and(|b| mbit_s > TRY_GROWTH * b);
    let go = match start {
        Start::Startup => true,
        Start::SlowStart => before.is_none() || growing,
        Start::Over => growing,
        Start::Unknown => false,
    };
    if !go || warmed_ms >= limit || !(raw_ms.is_finite() && raw_ms > 0.0) {
        return None;
    }
    // Twice the last, but no longer than the time left (at the last one's pace).
    let left = (limit - warmed_ms) / raw_ms;
    let next = (bytes as f64 * left.min(2.0)) as u64;
    Some(next.clamp(AUTO_MIN_BYTES, max_bytes.max(AUTO_MIN_BYTES)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long path: 100 Mbit/s behind a 200 ms round trip. A size from a low forecast (1 MiB
    /// from 29 Mbit/s: 84 ms of transfer, 284 ms raw) keeps the RTT in its time and reads
    /// 29.5 Mbit/s, which asks for the same 1 MiB again: the old fixed point. Sized for two
    /// round trips, each probe reads more than the last until the RTT comes off its time,
    /// and the first run's tries go on until one is long enough.
    #[test]
    fn on_a_long_path_a_probe_lasts_two_round_trips_and_its_rate_is_taken_without_the_rtt() {
        let rtt = Some(200.0);
        assert_eq!(auto_target_ms(rtt), 400.0);
        assert_eq!(auto_target_ms(Some(50.0)), AUTO_TARGET_MS);
        assert_eq!(auto_target_ms(Some(f64::NAN)), AUTO_TARGET_MS);
        // The rate a probe of `size` reads on the path, its forecast being `rtt`.
        let read = |size: u64, rtt: Option<f64>| {
            let raw = size as f64 / (100.0 * BYTES_PER_MS_PER_MBITS) + 200.0;
            (
                rate_minus_rtt(size as f64, raw, rtt).unwrap().mbit_per_s,
                raw,
            )
        };
        let (mut with, mut without) = (29.0, 29.0);
        for _ in 0..3 {
            with = read(auto_size(Some(with), rtt, 1 << 30), rtt).0;
            without = read(auto_size(Some(without), None, 1 << 30), rtt).0;
        }
        assert!((with - 100.0).abs() < 1e-6, "{with}");
        assert!(without < 30.0, "the old fixed point: {without}");
        let (low, raw) = read(1 << 20, rtt);
        // A try of 284 ms raw is not long enough behind 200 ms (it needs 600): the tries go on.
        assert_eq!(burst_next(1 << 20, low, raw, rtt, 1 << 30), Some(4 << 20));
        assert_eq!(burst_next(1 << 20, low, raw, None, 1 << 30), None);
        assert_eq!(burst_next(4 << 20, 100.0, 650.0, rtt, 1 << 30), None);
        // What a transfer needs to be timed there: two round trips of the rate.
        assert_eq!(timed_bytes(Some(100.0), rtt, 1 << 30), 8 << 20);
        assert_eq!(timed_bytes(Some(100.0), None, 1 << 30), 0);
        assert_eq!(timed_bytes(None, rtt, 1 << 30), 0);
    }

    #[test]
    fn the_automatic_size_moves_a_quarter_second_of_the_forecast_as_a_power_of_two() {
        assert_eq!(auto_size(None, None, 1 << 30), 64 * 1024);
        assert_eq!(auto_size(Some(0.0), None, 1 << 30), 64 * 1024);
        assert_eq!(auto_size(Some(f64::NAN), None, 1 << 30), 64 * 1024);
        // 100 Mbit/s × 250 ms = 3.125 MB → 4 MiB; 1 Mbit/s → the 64 KiB floor.
        assert_eq!(auto_size(Some(100.0), None, 1 << 30), 4 << 20);
        assert_eq!(auto_size(Some(1.0), None, 1 << 30), 64 * 1024);
        // The cap, and never below the floor.
        assert_eq!(auto_size(Some(100_000.0), None, 32 << 20), 32 << 20);
        assert_eq!(auto_size(Some(100_000.0), None, 3 << 20), 3 << 20);
        assert_eq!(auto_size(Some(100.0), None, 1024), 64 * 1024);
        assert_eq!(auto_size(Some(f64::INFINITY), None, 1 << 30), 1 << 30);
    }

    #[test]
    fn the_first_runs_tries_grow_until_one_lasts_a_quarter_second() {
        // A 64 KiB try that read 3 Mbit/s in 175 ms: ×4 (its own rate asks for 128 KiB);
        // one that read 30 Mbit/s in 17 ms: a quarter second of that (937 KB → 1 MiB).
        assert_eq!(
            burst_next(64 << 10, 3.0, 175.0, None, 1 << 30),
            Some(256 << 10)
        );
        assert_eq!(
            burst_next(64 << 10, 30.0, 17.0, None, 1 << 30),
            Some(1 << 20)
        );
        // One that read 2 Gbit/s (a shaper's burst, or a fast path) would ask for a quarter
        // second of that (62.5 MB → 64 MiB): 64-fold at most, 4 MiB.
        assert_eq!(
            burst_next(64 << 10, 2000.0, 0.3, None, 1 << 30),
            Some(4 << 20)
        );
        assert_eq!(
            burst_next(4 << 20, 2000.0, 16.0, None, 1 << 30),
            Some(64 << 20)
        );
        assert_eq!(
            burst_next(4 << 20, 2000.0, 16.0, None, 32 << 20),
            Some(32 << 20)
        );
        // Over: long enough, at the cap, or no rate.
        assert_eq!(burst_next(4 << 20, 100.0, 250.0, None, 1 << 30), None);
        assert_eq!(burst_next(32 << 20, 100.0, 10.0, None, 32 << 20), None);
        assert_eq!(burst_next(64 << 10, 0.0, 10.0, None, 1 << 30), None);
        assert_eq!(burst_next(64 << 10, f64::NAN, 10.0, None, 1 << 30), None);
    }

    /// Behind 150 ms, 40 Mbit/s: a new connection's first 64 KiB try lasts three round trips
    /// of slow start (463 ms, 1.7 Mbit/s), long enough by [`burst_next`]'s measure, and the
    /// series started from 1.7 Mbit/s. The tries on a new connection go on while they read
    /// more; the warm-up before each later probe is four round trips of its forecast.
    #[test]
    fn on_a_new_connection_tries_go_on_while_they_read_more_and_a_warm_up_leads_each_probe() {
        let rtt = Some(150.0);
        assert_eq!(burst_next(64 << 10, 1.7, 463.0, rtt, 1 << 30), None);
        assert_eq!(
            cold_burst_next(64 << 10, 1.7, None, 463.0, rtt, 1 << 30),
            Some(256 << 10)
        );
        // 8.3 after 4.1: still growing; 38.0 after 36.0: the path's rate, found.
        assert_eq!(
            cold_burst_next(256 << 10, 8.3, Some(4.1), 480.0, rtt, 1 << 30),
            Some(1 << 20)
        );
        assert_eq!(
            cold_burst_next(4 << 20, 38.0, Some(36.0), 1030.0, rtt, 1 << 30),
            None
        );
        // At the cap, or with no rate: over.
        assert_eq!(
            cold_burst_next(4 << 20, 38.0, Some(1.0), 1030.0, rtt, 4 << 20),
            None
        );
        assert_eq!(
            cold_burst_next(64 << 10, 0.0, None, 463.0, rtt, 1 << 30),
            None
        );
        // A short try goes on as burst_next says, whatever it read.
        assert_eq!(
            cold_burst_next(64 << 10, 30.0, Some(40.0), 17.0, None, 1 << 30),
            burst_next(64 << 10, 30.0, 17.0, None, 1 << 30)
        );
        // The warm-up: four round trips of the forecast (40 × 600 ms = 3 MB → 4 MiB), twice
        // the probe's two (2 MiB); on a short path, the probe's own quarter second.
        assert_eq!(auto_size(Some(40.0), rtt, 1 << 30), 2 << 20);
        assert_eq!(warm_up_size(Some(40.0), rtt, 1 << 30), 4 << 20);
        assert_eq!(warm_up_size(Some(100.0), Some(20.0), 1 << 30), 4 << 20);
        assert_eq!(auto_size(Some(100.0), Some(20.0), 1 << 30), 4 << 20);
        assert_eq!(warm_up_size(None, rtt, 1 << 30), AUTO_MIN_BYTES);
        assert_eq!(warm_up_size(Some(40.0), rtt, 1 << 20), 1 << 20);
    }

    /// Behind 150 ms, BBR's startup outlasts a warm-up of four round trips: the warm-ups go on,
    /// each twice the last, until the sender says it is over and they stop growing, or for
    /// 40 round trips at most.
    #[test]
    fn warm_ups_go_on_while_the_sender_is_in_its_start() {
        use Start::*;
        const CAP: u64 = 1 << 30;
        let long = Some(150.0);
        // Rows: the sender's start, the last warm-up's bytes, raw ms and reading, the reading
        // before it, the ms warmed in all, the predicted RTT, the cap; the next warm-up.
        type Row = (
            Start,
            u64,
            f64,
            f64,
            Option<f64>,
            f64,
            Option<f64>,
            u64,
            Option<u64>,
        );
        #[rustfmt::skip]
        let rows: [Row; 16] = [
            // BBR's startup: again, twice the size, whatever the reading.
            (Startup, 2 << 20, 700.0, 24.0, Some(25.0), 700.0, long, CAP, Some(4 << 20)),
            // Not known (a server of an earlier build): the timed transfer is next.
            (Unknown, 2 << 20, 700.0, 40.0, Some(25.0), 700.0, long, CAP, None),
            // Over: again only while the readings still grow by a quarter (a window
            // regrowing after a loss).
            (Over, 2 << 20, 700.0, 24.0, None, 700.0, long, CAP, None),
            (Over, 2 << 20, 700.0, 30.0, Some(25.0), 700.0, long, CAP, None),
            (Over, 2 << 20, 700.0, 40.0, Some(25.0), 700.0, long, CAP, Some(4 << 20)),
            // A loss-based slow start: again after the first warm-up, then while growing.
            (SlowStart, 512 << 10, 700.0, 3.0, None, 700.0, long, CAP, Some(1 << 20)),
            (SlowStart, 1 << 20, 700.0, 6.0, Some(3.0), 1_400.0, long, CAP, Some(2 << 20)),
            (SlowStart, 2 << 20, 700.0, 30.0, Some(25.0), 700.0, long, CAP, None),
            // 40 round trips (6 s here) in all, at most: the last fits in what is left.
            (Startup, 8 << 20, 1_000.0, 40.0, None, 5_500.0, long, CAP, Some(4 << 20)),
            (Startup, 8 << 20, 1_000.0, 40.0, None, 6_000.0, long, CAP, None),
            // On a short path, a second in all; never above the cap, never below 64 KiB.
            (Startup, 4 << 20, 250.0, 130.0, None, 250.0, Some(1.0), CAP, Some(8 << 20)),
            (Startup, 4 << 20, 250.0, 130.0, None, 1_000.0, Some(1.0), CAP, None),
            (Startup, 4 << 20, 250.0, 130.0, None, 250.0, None, 6 << 20, Some(6 << 20)),
            (Startup, 1 << 10, 1.0, 8.0, None, 999.9, None, CAP, Some(AUTO_MIN_BYTES)),
            // A warm-up that took no time says nothing.
            (Startup, 2 << 20, 0.0, 8.0, None, 10.0, None, CAP, None),
            (SlowStart, 2 << 20, f64::NAN, 8.0, None, 10.0, None, CAP, None),
        ];
        for (start, bytes, raw, mbit_s, before, warmed, rtt, cap, next) in rows {
            assert_eq!(
                warm_again(start, bytes, raw, mbit_s, before, warmed, rtt, cap),
                next,
                "{start:?} {bytes} {raw} {mbit_s} {before:?} {warmed} {rtt:?}"
            );
        }
    }

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
