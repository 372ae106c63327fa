//! Accounting of a burst of UDP probes (sans-IO: sequence numbers and monotonic times in,
//! RTTs, loss, reordering, duplicates and jitter out), so a test can replay any arrival
//! order exactly.
//!
//! A probe is lost when no reply came before the burst's wait ended; it is reordered when
//! its reply arrives after the reply of a later probe; a duplicate is a second reply for the
//! same probe. Jitter is the mean absolute difference between the RTTs of consecutive
//! answered probes, in sequence order (round-trip IPDV, RFC 5481 §1.2); it is 0 with fewer
//! than two replies.

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
    first_seq: u64,
    sent_ns: Vec<Option<u64>>,
    rtt_ns: Vec<Option<u64>>,
    highest: Option<u64>,
    duplicates: u64,
    reordered: u64,
    foreign: u64,
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
    pub fn new(first_seq: u64, count: usize) -> Self {
        Self {
            first_seq,
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

    /// Notes that probe `seq` left at `now_ns`.
    pub fn sent(&mut self, seq: u64, now_ns: u64) {
        if let Some(i) = self.index(seq) {
            self.sent_ns[i] = Some(now_ns);
        }
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
        let jitter_ms = if rtts_ms.len() < 2 {
            0.0
        } else {
            rtts_ms.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>()
                / (rtts_ms.len() - 1) as f64
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn loss_reordering_duplicates_and_jitter_are_counted() {
        let mut b = Burst::new(100, 5);
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
        let mut b = Burst::new(0, 3);
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
        let s = Burst::new(0, 0).summary();
        assert_eq!(
            (s.sent, s.loss, s.rtt_median_ms, s.jitter_ms),
            (0, 0.0, None, 0.0)
        );
    }
}
