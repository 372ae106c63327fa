//! FOBS's controller: TCP-Friendly Rate Control with the HighSpeed TCP response function
//! (Dickens §2.1; RFC 5348's structure, RFC 3649's response).
//!
//! - **Response** (RFC 3649 §5, Dickens eq. 1–2): for a loss rate p, the congestion window
//!   is w = 0.12 / p^0.835 packets when that is at least `Low_Window` = 38, else the
//!   standard TCP response w = 1.2 / √p (the two meet near p = 10⁻³, RFC 3649's `Low_P`).
//!   The pacing rate is w packets per round-trip time (RFC 5348 §3.1, with HighSpeed's
//!   response in place of TCP's equation, as Dickens §2.1 and RFC 3649 §11 suggest).
//! - **Long-term loss rate** p = 1 / (average loss interval), RFC 5348 §5.4: the weighted
//!   mean (weights 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2) of the last 8 intervals, counting the
//!   open interval (packets since the last counted loss) when that raises the mean. By
//!   default ([`LossCount::Events`]) a window's loss closes one interval, of the packets
//!   since the last counted loss: p is TFRC's loss-event rate (RFC 5348 §5.2; after slow
//!   start a window is a round trip), the rate at which TCP, which answers a window's losses
//!   once, cuts its window, and the rate RFC 3649's response function is derived for (one
//!   drop per congestion event). FOBS is TFRC with HighSpeed's response (Dickens §2.1), so
//!   this makes it as aggressive as a HighSpeed TCP flow and no more.
//!   [`LossCount::Transfer`] (`--loss-rate transfer`) is the packets lost over those sent
//!   since the transfer began, every lost packet counted but those the classifier took for
//!   CPU loss and those of windows sent before the last answer took effect (held, as in the
//!   other counts; slow start's overshoot is its RFC 5348 §6.3.1 share): the "long-term loss rate … maintained by the physical system" with which
//!   Dickens §4.1 evaluated the classifier (its 120–271× came from it). It never forgets:
//!   after one congested spell the rate stays low until many packets have gone without
//!   loss, which is why it is no default.
//!   [`LossCount::Packets`] (`--loss-rate packets`) is a *packet* loss rate over TFRC's
//!   last eight intervals: every lost packet closes an interval (L lost of P packets
//!   since the last counted loss add min(L, 8) intervals of P / L). It answers a burst of L
//!   drops as L congestion events: one queue overflow of a few dozen packets cuts the rate
//!   tenfold, and against one TCP flow on a drop-tail bottleneck FOBS got 13–19 Mbit/s of
//!   100 (BENCHMARKS.md). A window whose loss is not counted (the classifier said CPU, §2.2:
//!   "the long-term loss rate is updated in a manner consistent with no packet loss") only
//!   lengthens the open interval.
//! - **Slow start** (RFC 5348 §4.3): until the first counted loss the rate doubles each
//!   window, but never beyond twice the receiver's arrival rate over the window acknowledged
//!   (X = min(2X, 2X_recv)). That arrival rate is as old as the window's length plus a round
//!   trip, so the rate can double only once in that time: the sender shortens its windows
//!   to a quarter of a round trip while this controller is in slow start (see
//!   `sender::SLOW_START_WINDOWS`). At the first counted loss the history is replaced by one interval chosen so
//!   that the response gives the rate the receiver saw (RFC 5348 §6.3.1), so the overshoot
//!   that ends slow start is not charged as if it were the path's loss rate; while the
//!   windows sent before that news are acknowledged (held, see `sender`) the rate is 0.85 of
//!   it ([`DRAIN`]), so that the queue the overshoot left drains. Slow start also ends when
//!   the arrival rate has not grown by a quarter for three doubling times ([`FULL_GROWTH`],
//!   [`FLAT_ROUNDS`]; BBR's full-pipe estimate), at [`DRAIN`] of the highest arrival rate
//!   that grew, and after the first such flat round the rate stops doubling and stays within
//!   a quarter of what arrives. Without it a receiver whose every loss the classifier leaves
//!   unanswered (CPU contention) kept the sender in slow start, paced at twice the path.
//! - **Bounds**: in slow start never more than twice the receiver's arrival rate (RFC 5348
//!   §4.3); after it never more than [`PROBE_GAIN`] times it; never more than the cap (the
//!   sender's `--max-rate`, the receiver's limit), never less than one packet per round
//!   trip, except that the cap wins over that floor (on loopback one packet per round trip
//!   is hundreds of Mbit/s). Counting packets, also no more than the arrival rate while the window's round
//!   trip says the bottleneck's queue is building (HyStart++'s threshold, RFC 9406 §4.2):
//!   there every packet an overflow drops counts, so alone on a path slower than the
//!   sender the transfer must not overflow the queue at all. Counting events, the rate
//!   does not hold back on a queue: a flow that stops growing while the queue builds hands
//!   a loss-based flow sharing the path all of it (a delay-based sender starved by a
//!   loss-based one; holding back, FOBS got 11–17 Mbit/s of 100 against one TCP flow).

use super::{Controller, LossCount, WindowReport, SLOW_START_WINDOWS};
use std::collections::VecDeque;

/// RFC 3649 §5: below this window the standard response applies.
pub const LOW_WINDOW: f64 = 38.0;
/// The share of the arrival rate sent while the windows sent before the end of slow start
/// are acknowledged: a round trip at 0.85 drains 15 % of a round trip's queue.
pub const DRAIN: f64 = 0.85;
/// Slow start ends without a counted loss once the arrival rate has not grown by this factor
/// for [`FLAT_ROUNDS`] rounds running (`HighSpeed::pipe_full`): the path is full (BBR's full-pipe estimate,
/// Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016, §"Startup").
pub const FULL_GROWTH: f64 = 1.25;
/// See [`FULL_GROWTH`].
pub const FLAT_ROUNDS: u32 = 3;
/// After slow start, the most the rate may exceed what the receiver saw arrive: the
/// bottleneck's queue grows by at most a tenth of a round trip's data per round trip, and the
/// delay it adds is seen before the queue overflows (below). At BBR's 1.25, a rate held while
/// the queue built jumped by a quarter when it was let go, and overflowed a 5 ms queue at
/// 200 Mbit/s (2 transfers of 5 fell to 7–21 Mbit/s; at 1.1, none of 9).
pub const PROBE_GAIN: f64 = 1.1;

/// RFC 5348 §5.4's weights, newest interval first.
const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];

/// The HighSpeed TCP response function: congestion window (packets) for loss rate `p`.
pub fn response(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    let hs = 0.12 / p.powf(0.835);
    if hs >= LOW_WINDOW {
        hs
    } else {
        1.2 / p.sqrt()
    }
}

/// The loss rate at which [`response`] gives window `w` (its inverse).
pub fn loss_for_window(w: f64) -> f64 {
    if w >= LOW_WINDOW {
        (0.12 / w).powf(1.0 / 0.835)
    } else {
        (1.2 / w).powi(2).min(1.0)
    }
}

pub struct HighSpeed {
    packet: f64,
    max_rate: f64,
    rate: f64,
    rtt: f64,
    slow_start: bool,
    /// Closed loss intervals (packets per lost packet), newest first, at most 8.
    intervals: VecDeque<f64>,
    /// Packets since the last counted loss.
    open: f64,
    /// [`LossCount::Transfer`]: packets sent since the transfer began, and of them those
    /// whose loss counts (from the first counted loss on; slow start's are replaced by its
    /// RFC 5348 §6.3.1 share, as the first interval is in the other counts).
    sent: f64,
    lost: f64,
    /// The least round-trip sample seen, seconds.
    min_rtt: f64,
    count: LossCount,
    /// Slow start's full-pipe estimate: the highest arrival rate that grew by FULL_GROWTH,
    /// bytes/s; rounds since; windows acknowledged in this round and the highest arrival rate
    /// seen in it.
    full_rate: f64,
    flat_rounds: u32,
    round_windows: u32,
    round_max: f64,
}

impl HighSpeed {
    /// Starts at `initial` bytes/s of `packet`-byte payloads, never above `max_rate`.
    pub fn new(initial: f64, max_rate: f64, packet: f64) -> Self {
        Self {
            packet,
            max_rate,
            rate: initial.min(max_rate),
            rtt: 0.1,
            slow_start: true,
            intervals: VecDeque::new(),
            open: 0.0,
            sent: 0.0,
            lost: 0.0,
            min_rtt: f64::INFINITY,
            count: LossCount::Events,
            full_rate: 0.0,
            flat_rounds: 0,
            round_windows: 0,
            round_max: 0.0,
        }
    }

    /// Counts loss as `count` says (the default: events).
    pub fn with_loss_count(mut self, count: LossCount) -> Self {
        self.count = count;
        self
    }

    /// Whether `r`'s round trip says the bottleneck's queue is building: the window's sample
    /// above the least seen by more than HyStart++'s threshold (RFC 9406 §4.2: an eighth of
    /// the least, within 4–16 ms). The newest window's alone: the least of the last three
    /// (a standing queue raises them all, a path's jitter seldom does) came two windows late
    /// and went at the first low sample, and on a 500 Mbit/s link with a queue of a round trip
    /// the probing overflowed it (one transfer of three fell to 92 Mbit/s).
    fn queue_building(&self, r: &WindowReport) -> bool {
        let eta = (self.min_rtt / 8.0).clamp(0.004, 0.016);
        self.min_rtt.is_finite() && r.rtt_sample > self.min_rtt + eta
    }

    /// Slow start's full-pipe check on one acknowledged window that did not end it: whether
    /// the arrival rate has stopped growing. A "round" is the time slow start takes to double:
    /// a window's length plus a round trip, the age of the arrival rate that bounds it, so
    /// [`SLOW_START_WINDOWS`] + 1 windows. Shorter, a round without a doubling in it read as
    /// flat; counted in packets at the current rate, a round that a growing queue lengthened
    /// never ended (in the simulator, the queue grew for the whole transfer).
    fn pipe_full(&mut self, r: &WindowReport) -> bool {
        if let Some(recv) = r.receive_rate {
            self.round_max = self.round_max.max(recv);
        }
        self.round_windows += 1;
        if f64::from(self.round_windows) < SLOW_START_WINDOWS + 1.0 {
            return false;
        }
        if self.round_max >= FULL_GROWTH * self.full_rate {
            self.full_rate = self.round_max;
            self.flat_rounds = 0;
        } else {
            self.flat_rounds += 1;
        }
        self.round_windows = 0;
        self.round_max = 0.0;
        self.flat_rounds >= FLAT_ROUNDS
    }

    /// `rate` within the controller's bounds: at least one packet per round trip, and never
    /// above the cap, which wins when the two disagree. On a short path the floor is high (at
    /// loopback's ~50 µs round trip a 1,400-byte packet per round trip is over 200 Mbit/s),
    /// and applied after the cap it made `--max-rate 10M` send at 134 Mbit/s.
    fn bounded(&self, rate: f64) -> f64 {
        rate.max(self.packet / self.rtt).min(self.max_rate)
    }

    /// The long-term loss rate p the response is given: 1 / the mean loss interval, or under
    /// [`LossCount::Transfer`] the packets lost over those sent; 0 before any counted loss.
    fn long_term_loss(&self) -> f64 {
        if self.intervals.is_empty() {
            return 0.0;
        }
        match self.count {
            LossCount::Transfer => (self.lost / self.sent.max(1.0)).min(1.0),
            _ => self.mean_interval().map_or(0.0, |i| 1.0 / i),
        }
    }

    fn mean_interval(&self) -> Option<f64> {
        if self.intervals.is_empty() {
            return None;
        }
        let weighted = |xs: &mut dyn Iterator<Item = &f64>| {
            let (mut sum, mut wsum) = (0.0, 0.0);
            for (x, w) in xs.zip(WEIGHTS) {
                sum += x * w;
                wsum += w;
            }
            sum / wsum
        };
        let closed = weighted(&mut self.intervals.iter());
        let with_open = weighted(&mut std::iter::once(&self.open).chain(self.intervals.iter()));
        Some(closed.max(with_open))
    }
}

impl Controller for HighSpeed {
    fn on_window(&mut self, r: &WindowReport) {
        if r.rtt > 0.0 {
            self.rtt = r.rtt;
        }
        if r.rtt_sample > 0.0 {
            self.min_rtt = self.min_rtt.min(r.rtt_sample);
        }
        self.open += r.packets as f64;
        self.sent += r.packets as f64;
        if r.hold {
            if let Some(recv) = r.receive_rate {
                self.rate = self.bounded(self.rate.min(2.0 * recv));
            }
            return;
        }
        let counted = r.congestion && r.lost > 0;
        if counted && self.intervals.is_empty() {
            // The first counted loss: the end of slow start, or the first loss after a
            // full pipe ended it.
            self.slow_start = false;
            // The path's rate is what arrived (RFC 5348 §6.3.1: the first interval is the
            // one the response turns into X_recv). Until the overshoot's windows have been
            // acknowledged (they are held) the rate is DRAIN of it, so that the queue the
            // overshoot left drains; then the response gives the arrival rate itself.
            let seen = r.receive_rate.unwrap_or(self.rate).min(self.rate);
            let w = (seen * self.rtt / self.packet).max(1.0);
            self.intervals.clear();
            self.intervals.push_front(1.0 / loss_for_window(w));
            self.open = 0.0;
            // The whole transfer's count starts at the same rate, over what was sent.
            self.lost = loss_for_window(w) * self.sent;
            self.rate = self.bounded(DRAIN * seen);
            return;
        } else if counted {
            // The whole transfer's count: every lost packet of a window that is answered
            // (not those the classifier took for CPU loss, nor those of the windows sent
            // before the last answer took effect, as the other counts leave them out: slow
            // start's overshoot alone would otherwise set p for the rest of the transfer).
            self.lost += r.lost as f64;
            let lost = match self.count {
                LossCount::Events => 1,
                LossCount::Packets | LossCount::Transfer => r.lost,
            };
            let each = (self.open / lost as f64).max(1.0);
            for _ in 0..lost.min(8) {
                self.intervals.push_front(each);
            }
            self.intervals.truncate(8);
            self.open = 0.0;
        }
        if self.slow_start && self.pipe_full(r) {
            // The path is full before any counted loss: leave slow start at what arrived,
            // less DRAIN for the queue the last doublings built. A receiver whose loss the
            // classifier leaves unanswered (CPU contention) would otherwise stay in slow
            // start, paced at twice the arrival rate, and overflow the bottleneck's queue.
            self.slow_start = false;
            self.rate = self.bounded(DRAIN * self.full_rate);
            return;
        }
        let mut rate = if self.slow_start {
            self.rate * 2.0
        } else {
            response(self.long_term_loss()) * self.packet / self.rtt
        };
        if let Some(recv) = r.receive_rate {
            // In slow start, twice what arrived (RFC 5348 §4.3). After it, the response
            // function's rate grows with the open loss interval until the path drops packets,
            // and every packet a queue overflow drops counts: one overflow of a few packets
            // cut a 200 Mbit/s path's transfer to 24 Mbit/s. So the rate probes at most a
            // tenth above what arrived, and while the queue is building, no higher than what
            // arrived: the path is full.
            if self.slow_start && self.flat_rounds > 0 {
                // A round without growth: likely full. Probe only as much above what arrived
                // as growth would have to show; at twice it, the queue would grow by a round
                // trip's worth each round the full-pipe check waits.
                rate = rate.min(FULL_GROWTH * recv);
            } else if self.slow_start {
                rate = rate.min(2.0 * recv);
            } else if self.count != LossCount::Events && self.queue_building(r) {
                // Neither above what arrived nor above the rate now (an arrival rate read
                // high, from a burst the bottleneck's bucket let through, would raise it).
                rate = rate.min(recv).min(self.rate);
            } else {
                rate = rate.min(PROBE_GAIN * recv);
            }
        }
        self.rate = self.bounded(rate);
    }

    fn rate(&self) -> f64 {
        self.rate
    }

    fn window(&self) -> f64 {
        self.rate * self.rtt / self.packet
    }

    fn set_cap(&mut self, max: f64) {
        self.max_rate = self.max_rate.min(max);
        self.rate = self.rate.min(self.max_rate);
    }

    fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn loss_count(&self) -> Option<LossCount> {
        Some(self.count)
    }

    fn loss_rate(&self) -> f64 {
        if self.slow_start {
            0.0
        } else {
            self.long_term_loss()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3649 §5, Table 1 ("Packet Drop Rate P", "Congestion Window W"): the response
    /// function's own figures. The RFC rounds to whole packets.
    #[test]
    fn response_matches_rfc_3649_table() {
        let rows = [
            (1e-2, 12.0),
            (1e-3, 38.0),
            (1e-4, 263.0),
            (1e-5, 1795.0),
            (1e-6, 12279.0),
            (1e-7, 83981.0),
            (1e-8, 574_356.0),
            (1e-9, 3_928_088.0),
            (1e-10, 26_864_653.0),
        ];
        for (p, w) in rows {
            let got = response(p);
            assert!((got - w).abs() <= 0.005 * w + 0.5, "p {p}: {got} vs {w}");
            assert!(
                (loss_for_window(got) - p).abs() < 1e-6 * p.max(1e-9) + 0.01 * p,
                "{p}"
            );
        }
        assert_eq!(response(0.0), f64::INFINITY);
    }

    /// Linux `net/ipv4/tcp_highspeed.c`'s table (RFC 3649 Appendix B): row i holds the
    /// window up to which the increase a(w) is i + 1 packets per RTT, and the decrease
    /// b(w) · 256. With p(w) the inverse of the response function, RFC 3649 §5 defines
    /// b(w) = (0.1 − 0.5)·(ln w − ln 38)/(ln 83000 − ln 38) + 0.5 and
    /// a(w) = w²·p(w)·2·b(w)/(2 − b(w)); the table is those rules evaluated.
    #[test]
    fn response_agrees_with_the_linux_highspeed_table() {
        let table: [(f64, f64); 31] = [
            (38.0, 128.0),
            (118.0, 112.0),
            (221.0, 104.0),
            (347.0, 98.0),
            (495.0, 93.0),
            (663.0, 89.0),
            (851.0, 86.0),
            (1058.0, 83.0),
            (1284.0, 81.0),
            (1529.0, 78.0),
            (1793.0, 76.0),
            (2076.0, 74.0),
            (2378.0, 72.0),
            (2699.0, 71.0),
            (3039.0, 69.0),
            (3399.0, 68.0),
            (3778.0, 66.0),
            (4177.0, 65.0),
            (4596.0, 64.0),
            (5036.0, 62.0),
            (5497.0, 61.0),
            (5979.0, 60.0),
            (6483.0, 59.0),
            (7009.0, 58.0),
            (7558.0, 57.0),
            (8130.0, 56.0),
            (8726.0, 55.0),
            (9346.0, 54.0),
            (9991.0, 53.0),
            (10661.0, 52.0),
            (11358.0, 52.0),
        ];
        for (i, (w, md)) in table.into_iter().enumerate() {
            let b = (0.1 - 0.5) * (w.ln() - 38f64.ln()) / (83000f64.ln() - 38f64.ln()) + 0.5;
            assert!(
                (b * 256.0 - md).abs() < 1.0,
                "row {i}: b·256 = {}",
                b * 256.0
            );
            let p = loss_for_window(w);
            let a = w * w * p * 2.0 * b / (2.0 - b);
            let want = (i + 1) as f64;
            assert!((a - want).abs() <= 0.05 * want, "row {i}: a({w}) = {a}");
        }
    }

    fn report(packets: u64, lost: u64, congestion: bool, recv: f64) -> WindowReport {
        WindowReport {
            packets,
            lost,
            congestion,
            hold: false,
            receive_rate: Some(recv),
            rtt: 0.03,
            rtt_sample: 0.03,
        }
    }

    #[test]
    fn slow_start_doubles_then_settles_at_what_the_receiver_saw() {
        let s = 1400.0;
        let mut c = HighSpeed::new(1e6, 1e9, s);
        c.on_window(&report(100, 0, true, 1e6));
        assert_eq!(c.rate(), 2e6);
        c.on_window(&report(100, 0, true, 1e6));
        assert_eq!(c.rate(), 2e6, "bounded by twice the receive rate");
        c.on_window(&report(100, 3, true, 1.5e6));
        assert!((c.rate() - DRAIN * 1.5e6).abs() < 1e3, "{}", c.rate());
        assert!(c.loss_rate() > 0.0);
        // The overshoot's windows, held: the queue drains.
        let held = WindowReport {
            hold: true,
            ..report(100, 40, true, 1.5e6)
        };
        c.on_window(&held);
        assert!((c.rate() - DRAIN * 1.5e6).abs() < 1e3, "{}", c.rate());
        // Then the response gives what the receiver saw, rising to it at most PROBE_GAIN a
        // window above what arrived.
        c.on_window(&report(100, 0, false, 1.275e6));
        assert!(
            (c.rate() - PROBE_GAIN * 1.275e6).abs() < 1e3,
            "{}",
            c.rate()
        );
        c.on_window(&report(100, 0, false, PROBE_GAIN * 1.275e6));
        assert!((c.rate() - 1.5e6).abs() < 0.01 * 1.5e6, "{}", c.rate());
    }

    /// A receiver that loses packets to CPU contention only (loss the classifier leaves
    /// unanswered) never ends slow start by loss: it ends when the arrival rate stops
    /// growing, instead of pacing at twice the path's rate for the whole transfer (on the
    /// bench's 1 Gbit/s link, 1.3–3.0 Gbit/s, and 6 % of the packets lost in one transfer).
    #[test]
    fn slow_start_ends_when_the_arrival_rate_stops_growing() {
        let s = 1400.0;
        let mut c = HighSpeed::new(1e6, 1e9, s);
        // A round: the sender's slow-start windows of a round trip, and one more.
        let round = |c: &mut HighSpeed, lost: u64, recv: f64| {
            for _ in 0..=SLOW_START_WINDOWS as usize {
                if c.in_slow_start() {
                    let packets = (c.window() / SLOW_START_WINDOWS).ceil() as u64;
                    c.on_window(&report(packets, lost, false, recv));
                }
            }
        };
        for recv in [1e6, 2e6, 4e6, 8e6] {
            round(&mut c, 0, recv);
            assert!(c.in_slow_start());
        }
        assert_eq!(c.rate(), 16e6);
        // The path delivers 8 MB/s, and the receiver loses packets now and then.
        round(&mut c, 5, 8e6);
        // One round without growth: no more doubling, a quarter above what arrived.
        assert_eq!(c.rate(), FULL_GROWTH * 8e6);
        round(&mut c, 0, 8.5e6);
        assert!(c.in_slow_start(), "two flat rounds");
        round(&mut c, 5, 8.2e6);
        assert!(!c.in_slow_start(), "three");
        assert_eq!(c.rate(), DRAIN * 8e6);
        assert_eq!(c.loss_rate(), 0.0);
        // Then it probes at most PROBE_GAIN above what arrives, loss unanswered or not.
        c.on_window(&report(1000, 5, false, 8e6));
        assert!((c.rate() - PROBE_GAIN * 8e6).abs() < 1.0, "{}", c.rate());
        // The first counted loss starts the loss history from what arrived (RFC 5348
        // §6.3.1), as it would have ended slow start.
        c.on_window(&report(1000, 3, true, 8e6));
        assert_eq!(c.rate(), DRAIN * 8e6);
        let w = 8e6 * 0.03 / s;
        assert!((c.loss_rate() - loss_for_window(w)).abs() < 1e-3 * loss_for_window(w));
    }

    #[test]
    fn uncounted_loss_keeps_the_rate_and_counted_loss_cuts_it() {
        let s = 1400.0;
        let start = |c: &mut HighSpeed| {
            c.on_window(&report(4096, 0, true, 1e8));
            c.on_window(&report(4096, 1, true, 1e8));
        };
        // 20 of 4,096 lost every window: one loss event per 4,096 packets counting events;
        // p → 20/4096 (w → 1.2/√p) counting packets.
        for (count, p) in [
            (LossCount::Events, 1.0 / 4096.0),
            (LossCount::Packets, 20.0 / 4096.0),
        ] {
            let new = || HighSpeed::new(5e7, 1e9, s).with_loss_count(count);
            let (mut cpu, mut net) = (new(), new());
            start(&mut cpu);
            start(&mut net);
            let before = cpu.rate();
            for _ in 0..10 {
                cpu.on_window(&report(4096, 20, false, before));
                net.on_window(&report(4096, 20, true, before));
            }
            assert!(cpu.rate() >= before, "{} {before}", cpu.rate());
            assert!(
                net.rate() < before / 4.0,
                "{count:?}: {} {before}",
                net.rate()
            );
            let got = net.loss_rate();
            assert!((got - p).abs() < 0.1 * p, "{count:?}: {got}");
            assert!((net.window() - response(p)).abs() < 0.15 * response(p));
        }
    }

    /// The cap is a ceiling at every step, however short the round trip: the one-packet-per-
    /// round-trip floor applied after it made loopback's 50 µs round trip pace at 224 Mbit/s
    /// under a 10 Mbit/s `--max-rate`.
    #[test]
    fn the_cap_wins_over_the_one_packet_per_round_trip_floor() {
        let (s, cap) = (1400.0, 1.25e6);
        let floor = s / 50e-6;
        assert!(floor > 20.0 * cap);
        let short = |packets, lost, congestion, recv| WindowReport {
            rtt: 50e-6,
            rtt_sample: 50e-6,
            ..report(packets, lost, congestion, recv)
        };
        for count in LossCount::ALL {
            let mut c = HighSpeed::new(2.5e6, cap, s).with_loss_count(*count);
            assert_eq!(c.rate(), cap, "the start");
            let mut steps = vec![
                // Slow start, then its end by a counted loss, the overshoot's held windows,
                // and the response function's rate after it.
                short(100, 0, false, 1e6),
                short(100, 0, false, 1e3),
                short(100, 3, true, 1e3),
                WindowReport {
                    hold: true,
                    ..short(100, 40, true, 1e3)
                },
                short(100, 0, false, 1e3),
                short(100, 5, true, 1e3),
            ];
            steps.extend(std::iter::repeat_n(short(100, 0, false, 1e9), 20));
            for (i, r) in steps.iter().enumerate() {
                c.on_window(r);
                assert!(c.rate() <= cap, "{count:?}, step {i}: {} > {cap}", c.rate());
            }
            // Slow start ended by a full pipe (no counted loss), on a path that delivers
            // almost nothing, and the receiver's cap lowered below that.
            let mut c = HighSpeed::new(2.5e6, cap, s).with_loss_count(*count);
            for _ in 0..40 {
                c.on_window(&short(10, 0, false, 1e3));
                assert!(c.rate() <= cap, "{count:?}: {} > {cap}", c.rate());
            }
            assert!(!c.in_slow_start(), "the pipe was found full");
            c.set_cap(cap / 2.0);
            c.on_window(&short(10, 0, false, 1e9));
            assert!(c.rate() <= cap / 2.0, "{count:?}: {}", c.rate());
        }
        // Without a cap below it, the floor still holds.
        let mut c = HighSpeed::new(2.5e6, 1e12, s);
        c.on_window(&short(100, 3, true, 1e3));
        assert_eq!(c.rate(), floor);
    }

    /// `--loss-rate transfer`: p is the packets lost over those sent since the transfer
    /// began (Dickens §4.1), not counting the losses of a held window or of one the classifier
    /// took for CPU loss (only their packets), and never forgetting: ten times as many packets
    /// without loss give a tenth of p, where the eight intervals of `packets` forget it.
    #[test]
    fn the_transfer_count_is_the_whole_transfer_s_packet_loss_rate() {
        let s = 1400.0;
        let mut c = HighSpeed::new(1e7, 1e12, s).with_loss_count(LossCount::Transfer);
        c.on_window(&report(1000, 0, true, 1e7));
        // Slow start ends at the first counted loss: p is the share the response gives
        // what arrived, over the 2,000 packets sent.
        c.on_window(&report(1000, 5, true, 1e7));
        let w = 1e7 * c.rtt / s;
        let p0 = loss_for_window(w);
        assert!((c.loss_rate() - p0).abs() < 1e-12, "{} {p0}", c.loss_rate());
        let lost0 = p0 * 2000.0;
        // A held window's 40 losses and a CPU window's 30 do not count (their packets do).
        c.on_window(&WindowReport {
            hold: true,
            ..report(1000, 40, true, 1e7)
        });
        c.on_window(&report(1000, 30, false, 1e7));
        c.on_window(&report(1000, 2, true, 1e7));
        let want = (lost0 + 2.0) / 5000.0;
        assert!(
            (c.loss_rate() - want).abs() < 1e-12,
            "{} {want}",
            c.loss_rate()
        );
        // 45,000 packets without loss: a tenth of it.
        for _ in 0..45 {
            c.on_window(&report(1000, 0, false, 1e9));
        }
        assert!(
            (c.loss_rate() - want / 10.0).abs() < 1e-12,
            "{}",
            c.loss_rate()
        );
        let rate = response(want / 10.0) * s / c.rtt;
        assert!(c.rate() <= rate * 1.0001, "{} {rate}", c.rate());
    }

    /// After slow start, a window whose round trip says the queue is building holds the rate
    /// at what arrived when every lost packet counts, and does not when loss events do.
    #[test]
    fn only_a_packet_count_holds_back_on_a_building_queue() {
        let s = 1400.0;
        for (count, held) in [(LossCount::Packets, true), (LossCount::Events, false)] {
            let mut c = HighSpeed::new(1e7, 1e9, s).with_loss_count(count);
            c.on_window(&report(1000, 0, true, 1e7));
            c.on_window(&report(1000, 1, true, 1e7));
            // Many windows without loss: the response allows more than the probe.
            for _ in 0..50 {
                let r = c.rate();
                c.on_window(&report(1000, 0, false, r));
            }
            let recv = c.rate();
            c.on_window(&WindowReport {
                rtt_sample: 0.04,
                ..report(1000, 0, false, recv)
            });
            if held {
                assert!(c.rate() <= recv + 1.0, "{count:?}: {} {recv}", c.rate());
            } else {
                assert!(c.rate() > recv, "{count:?}: {} {recv}", c.rate());
            }
        }
    }
}
