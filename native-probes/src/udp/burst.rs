//! One burst of numbered UDP probes: when each leaves, how long to wait for late replies,
//! and the accounting of what came back (RTTs, loss, reordering, duplicates, jitter).
//!
//! Deterministic core: times (nanoseconds on the caller's monotonic clock) and datagrams
//! in; what to do next and the burst's figures out. [`Burst::poll`] says send probe n now,
//! wait until t, or done; the socket work is `udp::io`'s, so a test can replay any arrival
//! order and timing exactly.
//!
//! Probes leave `interval` apart from the burst's start (late ones leave at once, without
//! moving the others). Once all have left, the burst waits for replies until every probe is
//! answered or `wait` has passed since the last send, and never past its hard deadline.
//! A probe is lost when no reply came before the burst ended; it is reordered when its
//! reply arrives after the reply of a later probe; a duplicate is a second reply for the
//! same probe. Jitter is the mean absolute difference between the RTTs of consecutive
//! answered probes, in sequence order (round-trip IPDV, RFC 5481 §1.2); it is 0 with fewer
//! than two replies.

use crate::wire::{Kind, UdpProbe, DEFAULT_UDP_BYTES_PER_SECOND, DEFAULT_UDP_PACKETS_PER_SECOND};
use nowcast_core::probed::Outcome;
use nowcast_core::record::Metric;

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// What a burst sends and how long it waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Sequence number of the first probe (bursts number their probes apart, so a late
    /// reply from an earlier burst is recognised as foreign).
    pub first_seq: u64,
    pub count: u64,
    pub interval: Nanos,
    /// How long to wait for replies after the last send.
    pub wait: Nanos,
}

/// What the caller should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send probe `seq` now: [`Burst::datagram`], then [`Burst::sent`] with the send time.
    Send { seq: u64 },
    /// Take replies until `until`.
    Wait { until: Nanos },
    /// The burst is over: [`Burst::summary`].
    Done,
}

/// What one reply was.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reply {
    /// The first reply for a probe of this burst, with its RTT in ns.
    Fresh { rtt_ns: u64, reordered: bool },
    /// A second (or later) reply for the same probe.
    Duplicate,
    /// A reply for a probe this burst did not send (an earlier burst's late reply, or a
    /// forged one): ignored.
    Foreign,
}

/// One burst of `count` probes numbered `first_seq ..`.
#[derive(Clone, Debug)]
pub struct Burst {
    plan: Plan,
    start: Nanos,
    hard: Nanos,
    /// Probes sent so far, and when the last left.
    next: u64,
    last_send: Nanos,
    first_seq: u64,
    sent_ns: Vec<Option<u64>>,
    rtt_ns: Vec<Option<u64>>,
    highest: Option<u64>,
    duplicates: u64,
    reordered: u64,
    foreign: u64,
}

/// How many of a burst's `count` probes of `size` bytes, sent `interval_ns` apart, a
/// `nowcast serve` with its default per-client rates would not answer: its token buckets
/// ([`DEFAULT_UDP_PACKETS_PER_SECOND`], [`DEFAULT_UDP_BYTES_PER_SECOND`]) start full with one
/// second's worth and refill at that rate. Above 0, a loss may be the server's rule and not the
/// path's: 5,000 probes sent back to back read 58 % loss on loopback.
pub fn over_default_rate(count: u64, interval_ns: Nanos, size: usize) -> u64 {
    let (pps, bps) = (
        DEFAULT_UDP_PACKETS_PER_SECOND,
        DEFAULT_UDP_BYTES_PER_SECOND as f64,
    );
    let (mut packets, mut bytes) = (pps, bps);
    let gap_s = interval_ns as f64 / 1e9;
    let mut dropped = 0;
    for i in 0..count {
        if i > 0 {
            packets = (packets + gap_s * pps).min(pps);
            bytes = (bytes + gap_s * bps).min(bps);
        }
        if packets >= 1.0 && bytes >= size as f64 {
            packets -= 1.0;
            bytes -= size as f64;
        } else {
            dropped += 1;
        }
    }
    dropped
}

/// The figures of a finished burst.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub sent: u64,
    pub received: u64,
    /// Lost probes over sent probes (0 when nothing was sent).
    pub loss: f64,
    pub duplicates: u64,
    pub reordered: u64,
    pub foreign: u64,
    /// RTTs in ms of the answered probes, in sequence order.
    pub rtts_ms: Vec<f64>,
    /// Median RTT in ms (mean of the two middle values for an even count).
    pub rtt_median_ms: Option<f64>,
    pub rtt_mean_ms: Option<f64>,
    pub rtt_min_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    /// Mean |RTTᵢ − RTTᵢ₋₁| in ms over consecutive answered probes.
    pub jitter_ms: f64,
}

impl Burst {
    /// A burst per `plan` starting at `start`, ended whatever happens at `hard`.
    pub fn new(plan: Plan, start: Nanos, hard: Nanos) -> Self {
        let count = usize::try_from(plan.count).expect("a burst fits in memory");
        Self {
            plan,
            start,
            hard,
            next: 0,
            last_send: start,
            first_seq: plan.first_seq,
            sent_ns: vec![None; count],
            rtt_ns: vec![None; count],
            highest: None,
            duplicates: 0,
            reordered: 0,
            foreign: 0,
        }
    }

    fn index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.first_seq)?).ok()?;
        (i < self.sent_ns.len()).then_some(i)
    }

    /// What to do at `now`.
    pub fn poll(&self, now: Nanos) -> Action {
        if now >= self.hard {
            return Action::Done;
        }
        let until = if self.next < self.plan.count {
            let due = self
                .start
                .saturating_add(self.plan.interval.saturating_mul(self.next));
            if due <= now {
                return Action::Send {
                    seq: self.first_seq + self.next,
                };
            }
            due
        } else {
            if self.all_answered() {
                return Action::Done;
            }
            let end = self.last_send.saturating_add(self.plan.wait);
            if end <= now {
                return Action::Done;
            }
            end
        };
        Action::Wait {
            until: until.min(self.hard),
        }
    }

    /// Probe `seq`'s datagram, stamped `now`, into `buf` (at least
    /// [`UdpProbe::HEADER_LEN`] bytes; the rest is padding, left as it is).
    pub fn datagram(&self, seq: u64, now: Nanos, buf: &mut [u8]) {
        UdpProbe::request(seq, now).encode(buf);
    }

    /// Notes that probe `seq` left at `now_ns` (or tried to: a probe the kernel did not
    /// take counts as lost).
    pub fn sent(&mut self, seq: u64, now_ns: u64) {
        if let Some(i) = self.index(seq) {
            self.sent_ns[i] = Some(now_ns);
            self.next = self.next.max(i as u64 + 1);
            self.last_send = now_ns;
        }
    }

    /// Accounts a datagram received at `now_ns`; `None` when it is not a probe reply (a
    /// request, bounced back by something that is not a nowcast server, is not an answer).
    pub fn datagram_received(&mut self, datagram: &[u8], now_ns: u64) -> Option<Reply> {
        let p = UdpProbe::decode(datagram)
            .ok()
            .filter(|p| p.kind == Kind::Reply)?;
        Some(self.received(p.seq, now_ns))
    }

    /// Whether every probe of the burst has been sent (or tried).
    pub fn all_sent(&self) -> bool {
        self.next >= self.plan.count
    }

    /// Whether any probe has its reply.
    pub fn any_answered(&self) -> bool {
        self.rtt_ns.iter().any(Option::is_some)
    }

    /// Whether every probe sent so far has its reply.
    pub fn all_answered(&self) -> bool {
        self.sent_ns
            .iter()
            .zip(&self.rtt_ns)
            .all(|(s, r)| s.is_none() || r.is_some())
    }

    /// Accounts a reply for `seq` received at `now_ns`.
    pub fn received(&mut self, seq: u64, now_ns: u64) -> Reply {
        let Some(i) = self.index(seq) else {
            self.foreign += 1;
            return Reply::Foreign;
        };
        let Some(sent) = self.sent_ns[i] else {
            self.foreign += 1;
            return Reply::Foreign;
        };
        if self.rtt_ns[i].is_some() {
            self.duplicates += 1;
            return Reply::Duplicate;
        }
        let rtt_ns = now_ns.saturating_sub(sent);
        self.rtt_ns[i] = Some(rtt_ns);
        let reordered = self.highest.is_some_and(|h| seq < h);
        if reordered {
            self.reordered += 1;
        } else {
            self.highest = Some(seq);
        }
        Reply::Fresh { rtt_ns, reordered }
    }

    /// The burst's figures; probes without a reply count as lost.
    pub fn summary(&self) -> Summary {
        let sent = self.sent_ns.iter().filter(|s| s.is_some()).count() as u64;
        let rtts_ms: Vec<f64> = self
            .rtt_ns
            .iter()
            .flatten()
            .map(|&ns| ns as f64 / 1e6)
            .collect();
        let received = rtts_ms.len() as u64;
        let mut sorted = rtts_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let median = match sorted.len() {
            0 => None,
            n if n % 2 == 1 => Some(sorted[n / 2]),
            n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
        };
        let jitter_ms = nowcast_core::stats::jitter(&rtts_ms).unwrap_or(0.0);
        Summary {
            sent,
            received,
            loss: if sent == 0 {
                0.0
            } else {
                (sent - received) as f64 / sent as f64
            },
            duplicates: self.duplicates,
            reordered: self.reordered,
            foreign: self.foreign,
            rtt_median_ms: median,
            rtt_mean_ms: (received > 0).then(|| rtts_ms.iter().sum::<f64>() / received as f64),
            rtt_min_ms: sorted.first().copied(),
            rtt_max_ms: sorted.last().copied(),
            jitter_ms,
            rtts_ms,
        }
    }
}

/// The outcomes a finished burst gives its series: `rtt` (the median; a timeout, after
/// `elapsed_ms`, when nothing came back), `jitter` (with two replies or more) and `loss`. The
/// median RTT is not what the burst's timeout bounded (that is the wait after the last
/// send), so no duration is given with it.
pub fn outcomes(s: &Summary, elapsed_ms: f64) -> Vec<(Metric, Outcome)> {
    let value = |v| Outcome::Measured {
        value: v,
        duration_ms: None,
    };
    let mut out = vec![(
        Metric::Rtt,
        match s.rtt_median_ms {
            Some(v) => value(v),
            None => Outcome::TimedOut { elapsed_ms },
        },
    )];
    if s.received >= 2 {
        out.push((Metric::Jitter, value(s.jitter_ms)));
    }
    out.push((Metric::Loss, value(s.loss)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn plan(first_seq: u64, count: u64) -> Plan {
        Plan {
            first_seq,
            count,
            interval: 10 * MS,
            wait: 50 * MS,
        }
    }

    #[test]
    fn a_burst_faster_than_the_servers_default_rate_is_told_what_the_server_drops() {
        // Back to back: a second's worth answered at once, the rest dropped.
        assert_eq!(over_default_rate(5000, 0, 64), 3000);
        // 1,000 a second, or 2,500 a second for 1.2 s (the bucket and its refill hold 4,400).
        assert_eq!(over_default_rate(10_000, 1_000_000, 64), 0);
        assert_eq!(over_default_rate(3000, 400_000, 64), 0);
        // The bytes' bucket: 1 MiB of 1,000-byte probes is 1,048 of them.
        assert_eq!(over_default_rate(2000, 0, 1000), 952);
        assert_eq!(over_default_rate(0, 0, 64), 0);
    }

    #[test]
    fn probes_leave_on_their_grid_then_the_burst_waits_for_late_replies() {
        let mut b = Burst::new(plan(7, 3), 1_000, 1_000 + 500 * MS);
        let mut buf = [0u8; 64];
        assert_eq!(b.poll(1_000), Action::Send { seq: 7 });
        b.datagram(7, 1_000, &mut buf);
        assert_eq!(UdpProbe::decode(&buf).unwrap().seq, 7);
        b.sent(7, 1_000);
        assert_eq!(
            b.poll(2_000),
            Action::Wait {
                until: 1_000 + 10 * MS
            }
        );
        // A late send leaves at once; the next keeps its own time.
        assert_eq!(b.poll(1_000 + 15 * MS), Action::Send { seq: 8 });
        b.sent(8, 1_000 + 15 * MS);
        assert_eq!(
            b.poll(1_000 + 16 * MS),
            Action::Wait {
                until: 1_000 + 20 * MS
            }
        );
        b.sent(9, 1_000 + 20 * MS);
        // All sent: replies are awaited for `wait` after the last send.
        assert_eq!(
            b.poll(1_000 + 21 * MS),
            Action::Wait {
                until: 1_000 + 70 * MS
            }
        );
        let mut reply = [0u8; 22];
        for seq in [7, 8, 9] {
            UdpProbe::request(seq, 0).encode(&mut reply);
            assert_eq!(
                b.datagram_received(&reply, 1_000 + 30 * MS),
                None,
                "a request is not an answer"
            );
            UdpProbe::mark_reply(&mut reply);
            assert!(b.datagram_received(&reply, 1_000 + 30 * MS).is_some());
        }
        assert_eq!(b.datagram_received(b"not a probe", 0), None);
        assert_eq!(
            b.poll(1_000 + 31 * MS),
            Action::Done,
            "every probe answered"
        );
        let s = b.summary();
        assert_eq!((s.sent, s.received, s.loss), (3, 3, 0.0));
        let metrics: Vec<Metric> = outcomes(&s, 30.0).into_iter().map(|(m, _)| m).collect();
        assert_eq!(metrics, [Metric::Rtt, Metric::Jitter, Metric::Loss]);
    }

    #[test]
    fn an_unanswered_burst_ends_after_its_wait_or_at_its_deadline_all_lost() {
        let mut b = Burst::new(plan(0, 2), 0, 40 * MS);
        b.sent(0, 0);
        b.sent(1, 10 * MS);
        assert_eq!(
            b.poll(11 * MS),
            Action::Wait { until: 40 * MS },
            "the deadline first"
        );
        assert_eq!(b.poll(40 * MS), Action::Done);
        let mut b = Burst::new(plan(0, 1), 0, u64::MAX);
        b.sent(0, 0);
        assert_eq!(
            b.poll(50 * MS),
            Action::Done,
            "the wait after the last send"
        );
        let s = b.summary();
        assert_eq!((s.loss, s.rtt_median_ms), (1.0, None));
        let o = outcomes(&s, 50.0);
        assert_eq!(o[0], (Metric::Rtt, Outcome::TimedOut { elapsed_ms: 50.0 }));
        assert_eq!(o.len(), 2, "no jitter without replies");
    }

    #[test]
    fn loss_reordering_duplicates_and_jitter_are_counted() {
        let mut b = Burst::new(plan(100, 5), 0, u64::MAX);
        for i in 0..5 {
            b.sent(100 + i, i * 10 * MS);
        }
        assert!(!b.all_answered());
        // 100 after 1 ms; 102 overtakes 101; 101 arrives late; 102 again; 104 never.
        assert_eq!(
            b.received(100, MS),
            Reply::Fresh {
                rtt_ns: MS,
                reordered: false
            }
        );
        assert_eq!(
            b.received(102, 23 * MS),
            Reply::Fresh {
                rtt_ns: 3 * MS,
                reordered: false
            }
        );
        assert_eq!(
            b.received(101, 15 * MS),
            Reply::Fresh {
                rtt_ns: 5 * MS,
                reordered: true
            }
        );
        assert_eq!(b.received(102, 24 * MS), Reply::Duplicate);
        assert_eq!(
            b.received(103, 32 * MS),
            Reply::Fresh {
                rtt_ns: 2 * MS,
                reordered: false
            }
        );
        assert_eq!(b.received(99, 33 * MS), Reply::Foreign);
        assert_eq!(b.received(105, 33 * MS), Reply::Foreign);
        let s = b.summary();
        assert_eq!(
            (s.sent, s.received, s.duplicates, s.reordered, s.foreign),
            (5, 4, 1, 1, 2)
        );
        assert_eq!(s.loss, 0.2);
        assert_eq!(s.rtts_ms, vec![1.0, 5.0, 3.0, 2.0]);
        assert_eq!(s.rtt_median_ms, Some(2.5));
        assert_eq!(s.rtt_mean_ms, Some(2.75));
        assert_eq!((s.rtt_min_ms, s.rtt_max_ms), (Some(1.0), Some(5.0)));
        // |5−1| + |3−5| + |2−3| over 3.
        assert!((s.jitter_ms - 7.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_reply_for_an_unsent_probe_is_foreign_and_an_empty_burst_is_not_lossy() {
        let mut b = Burst::new(plan(0, 3), 0, u64::MAX);
        b.sent(0, 0);
        assert_eq!(b.received(1, 5), Reply::Foreign);
        assert_eq!(
            b.received(0, 5),
            Reply::Fresh {
                rtt_ns: 5,
                reordered: false
            }
        );
        assert!(b.all_answered(), "only sent probes are awaited");
        let s = Burst::new(plan(0, 0), 0, u64::MAX).summary();
        assert_eq!(
            (s.sent, s.loss, s.rtt_median_ms, s.jitter_ms),
            (0, 0.0, None, 0.0)
        );
    }
}
