//! When the experiments of a periodic probe start (JavaNws §2.1: a series of probes, each
//! forecast before it is measured): every `period` from the first, `count` times or until
//! stopped.
//!
//! Deterministic core: the start, the period, the count and the time now in; run or wait
//! until when out. The loop that sleeps lives at the edge (`periodic`). Starts keep to the
//! grid start + k·period, so they do not drift however long each experiment takes; an
//! experiment that overruns its period is followed at once by the next, and the slots it
//! overran are skipped, never made up in a burst of back-to-back probes.

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Start experiment `index` now.
    Run { index: u64 },
    /// Nothing to do before `until`.
    Wait { until: Nanos },
    /// The count is reached, or the schedule was stopped.
    Finished,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    start: Nanos,
    period: Nanos,
    count: Option<u64>,
    ran: u64,
    /// The grid slot of the next start.
    slot: u64,
    stopped: bool,
}

impl Schedule {
    /// Experiments every `period` from `start`, `count` of them (`None`: until stopped).
    pub fn new(start: Nanos, period: Nanos, count: Option<u64>) -> Self {
        Self {
            start,
            period,
            count,
            ran: 0,
            slot: 0,
            stopped: false,
        }
    }

    fn slot_time(&self, slot: u64) -> Nanos {
        self.start.saturating_add(self.period.saturating_mul(slot))
    }

    /// What to do at `now`.
    pub fn next(&self, now: Nanos) -> Next {
        if self.stopped || self.count.is_some_and(|n| self.ran >= n) {
            return Next::Finished;
        }
        let due = self.slot_time(self.slot);
        if due <= now {
            Next::Run { index: self.ran }
        } else {
            Next::Wait { until: due }
        }
    }

    /// Experiment [`Next::Run`]'s index started at `now`.
    pub fn started(&mut self, now: Nanos) {
        self.ran += 1;
        let mut slot = self.slot + 1;
        // The first slot after `now`: slots already past are skipped, not made up. (With
        // period 0 every slot is the start: experiments run back to back.)
        if let Some(past) = now.saturating_sub(self.start).checked_div(self.period) {
            let current = past.saturating_add(1);
            slot = slot.max(current);
        }
        self.slot = slot;
    }

    /// No experiment starts after this.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Experiments started so far.
    pub fn ran(&self) -> u64 {
        self.ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    /// Drives a schedule as the loop does, each experiment lasting `lasts[i]`, and returns
    /// the start times.
    fn starts(mut s: Schedule, lasts: &[Nanos], limit: usize) -> Vec<Nanos> {
        let mut now = 0;
        let mut out = Vec::new();
        for _ in 0..limit * 4 {
            match s.next(now) {
                Next::Run { index } => {
                    assert_eq!(index as usize, out.len());
                    out.push(now);
                    s.started(now);
                    now += lasts.get(index as usize).copied().unwrap_or(0);
                }
                Next::Wait { until } => {
                    assert!(until > now);
                    now = until;
                }
                Next::Finished => break,
            }
            if out.len() == limit {
                break;
            }
        }
        out
    }

    #[test]
    fn starts_keep_to_the_grid_without_drift_and_the_count() {
        // Rows: period, count, each experiment's length, expected starts (s/10).
        type Row = (Nanos, Option<u64>, Vec<Nanos>, Vec<Nanos>);
        let rows: [Row; 5] = [
            // Short experiments: every period, exactly.
            (S, Some(4), vec![S / 10; 4], vec![0, 10, 20, 30]),
            // Experiments of 0.9 periods do not push the later starts.
            (S, Some(3), vec![9 * S / 10; 3], vec![0, 10, 20]),
            // One overruns by a little: the next starts at once, then back on the grid.
            (
                S,
                Some(4),
                vec![S / 10, 11 * S / 10, S / 10, 0],
                vec![0, 10, 21, 30],
            ),
            // One overruns by 2.5 periods: the missed slots are skipped, not made up.
            (
                S,
                Some(4),
                vec![25 * S / 10, S / 10, 0, 0],
                vec![0, 25, 30, 40],
            ),
            // Period 0: back to back.
            (0, Some(3), vec![S / 10; 3], vec![0, 1, 2]),
        ];
        for (period, count, lasts, want) in rows {
            let got: Vec<Nanos> = starts(Schedule::new(0, period, count), &lasts, 10)
                .into_iter()
                .map(|t| t / (S / 10))
                .collect();
            assert_eq!(got, want, "period {period} lasts {lasts:?}");
        }
    }

    #[test]
    fn without_a_count_it_runs_until_stopped() {
        let mut s = Schedule::new(5, S, None);
        assert_eq!(s.next(0), Next::Wait { until: 5 });
        assert_eq!(s.next(5), Next::Run { index: 0 });
        s.started(5);
        assert_eq!(s.next(6), Next::Wait { until: 5 + S });
        s.stop();
        assert_eq!(s.next(6), Next::Finished);
        assert_eq!(s.next(10 * S), Next::Finished);
        let mut once = Schedule::new(0, 0, Some(1));
        once.started(0);
        assert_eq!(once.next(0), Next::Finished);
    }
}
