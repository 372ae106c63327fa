//! Order statistics over the most recent values of a series.
//!
//! The NWS median and trimmed-mean forecasters (algorithms.md §1.1) all ask questions of the
//! form "median / trimmed mean of the last `w` values" for several `w` ≤ 51. Sorting a copy for
//! each question costs O(w log w) per update per forecaster; instead one sorted array of the
//! last `cap` values is kept (insert and remove are a binary search and a memmove of at most
//! `cap` entries), each entry tagged with its arrival number, and a question about the last
//! `w` values is one scan that skips entries older than `w`.

use serde::{Deserialize, Serialize};

/// The last `cap` values of a series, kept sorted, each with its arrival number.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrderWindow {
    cap: usize,
    /// Values in ascending order (ties by arrival).
    vals: Vec<f64>,
    /// Arrival number of `vals[i]` (0 for the first value of the series).
    seqs: Vec<u64>,
    /// The same values in arrival order (a ring), to find the oldest value when it leaves.
    ring: Vec<f64>,
    /// Number of values pushed so far.
    n: u64,
}

impl OrderWindow {
    /// An empty window that remembers the last `cap` values (`cap` ≥ 1).
    pub fn new(cap: usize) -> Self {
        assert!(cap >= 1, "window capacity must be at least 1");
        Self {
            cap,
            vals: Vec::with_capacity(cap + 1),
            seqs: Vec::with_capacity(cap + 1),
            ring: vec![0.0; cap],
            n: 0,
        }
    }

    /// Number of values pushed since creation.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Capacity: the largest window that can be asked about.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Adds `x` (finite) as the newest value; the oldest leaves once `cap` are held.
    /// Cost: two binary searches and two memmoves of at most `cap` entries.
    pub fn push(&mut self, x: f64) {
        let slot = (self.n % self.cap as u64) as usize;
        if self.vals.len() == self.cap {
            let old_val = self.ring[slot];
            let old_seq = self.n - self.cap as u64;
            let i = self.position(old_val, old_seq);
            self.vals.remove(i);
            self.seqs.remove(i);
        }
        let i = self.position(x, self.n);
        self.vals.insert(i, x);
        self.seqs.insert(i, self.n);
        self.ring[slot] = x;
        self.n += 1;
    }

    /// Index of (value, seq) in the sorted order: where it is, or where it would go.
    fn position(&self, x: f64, seq: u64) -> usize {
        let lo = self.vals.partition_point(|&v| v < x);
        let hi = lo + self.vals[lo..].partition_point(|&v| v <= x);
        lo + self.seqs[lo..hi].partition_point(|&s| s < seq)
    }

    /// The window actually used for a request of `w`: min(w, values seen, capacity).
    fn effective(&self, w: usize) -> usize {
        w.min(self.vals.len())
    }

    /// Median of the last min(w, n) values (mean of the two middle ones when even);
    /// `None` before the first value or for `w == 0`.
    pub fn median_last(&self, w: usize) -> Option<f64> {
        let m = self.effective(w);
        match m {
            0 => return None,
            1 => return self.last(),
            _ => {}
        }
        let hi_rank = m / 2;
        let lo_rank = if m % 2 == 0 { hi_rank - 1 } else { hi_rank };
        let (lo, hi) = self.two_ranks(m, lo_rank, hi_rank);
        Some(if lo_rank == hi_rank { lo } else { (lo + hi) / 2.0 })
    }

    /// Values of ranks `a` ≤ `b` (0-based, ascending) among the last `m` values.
    fn two_ranks(&self, m: usize, a: usize, b: usize) -> (f64, f64) {
        if m == self.vals.len() {
            return (self.vals[a], self.vals[b]);
        }
        let oldest = self.n - m as u64;
        let mut rank = 0;
        let mut first = f64::NAN;
        for (&v, &s) in self.vals.iter().zip(&self.seqs) {
            if s >= oldest {
                if rank == a {
                    first = v;
                }
                if rank == b {
                    return (first, v);
                }
                rank += 1;
            }
        }
        unreachable!("rank {b} beyond the {m} values in the window")
    }

    /// Trimmed mean of the last m = min(w, n) values: sort them, drop ⌊frac·m⌋ from each end,
    /// average the rest (algorithms.md §1.1, forecasters 14 and 15).
    pub fn trimmed_mean_last(&self, w: usize, frac: f64) -> Option<f64> {
        let m = self.effective(w);
        if m == 0 {
            return None;
        }
        let drop = (frac * m as f64).floor() as usize;
        let keep = m - 2 * drop;
        let mut sum = 0.0;
        if m == self.vals.len() {
            sum = self.vals[drop..drop + keep].iter().sum();
        } else {
            let oldest = self.n - m as u64;
            let mut rank = 0;
            for (&v, &s) in self.vals.iter().zip(&self.seqs) {
                if s >= oldest {
                    if rank >= drop + keep {
                        break;
                    }
                    if rank >= drop {
                        sum += v;
                    }
                    rank += 1;
                }
            }
        }
        Some(sum / keep as f64)
    }

    /// Value of quantile `q` (0..=1, nearest rank) of the last min(w, n) values.
    pub fn quantile_last(&self, w: usize, q: f64) -> Option<f64> {
        let m = self.effective(w);
        if m == 0 {
            return None;
        }
        let r = ((q * (m - 1) as f64).round() as usize).min(m - 1);
        Some(self.two_ranks(m, r, r).0)
    }

    /// Mean of the last min(w, n) values, summed oldest to newest so that the result does
    /// not depend on how the window was reached.
    pub fn mean_last(&self, w: usize) -> Option<f64> {
        let m = self.effective(w);
        if m == 0 {
            return None;
        }
        let cap = self.cap as u64;
        let sum: f64 = (self.n - m as u64..self.n)
            .map(|s| self.ring[(s % cap) as usize])
            .sum();
        Some(sum / m as f64)
    }

    /// Checks the invariants of a restored window.
    pub fn validate(&self) -> Result<(), String> {
        let held = (self.n as usize).min(self.cap);
        let ok = self.cap >= 1
            && self.ring.len() == self.cap
            && self.vals.len() == held
            && self.seqs.len() == held
            && self.vals.windows(2).all(|p| p[0] <= p[1])
            && self.seqs.iter().all(|&s| s < self.n && s + self.cap as u64 >= self.n)
            && self.vals.iter().chain(&self.ring).all(|v| v.is_finite());
        if ok {
            Ok(())
        } else {
            Err("value window is inconsistent".into())
        }
    }

    /// The newest value.
    pub fn last(&self) -> Option<f64> {
        (self.n > 0).then(|| self.ring[((self.n - 1) % self.cap as u64) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_median(xs: &[f64]) -> f64 {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let m = v.len();
        if m % 2 == 1 {
            v[m / 2]
        } else {
            (v[m / 2 - 1] + v[m / 2]) / 2.0
        }
    }

    fn naive_trimmed(xs: &[f64], frac: f64) -> f64 {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let d = (frac * v.len() as f64).floor() as usize;
        let kept = &v[d..v.len() - d];
        kept.iter().sum::<f64>() / kept.len() as f64
    }

    #[test]
    fn matches_naive_order_statistics_on_a_pseudo_random_series() {
        let mut w = OrderWindow::new(51);
        let mut all = Vec::new();
        let mut s: u64 = 7;
        for i in 0..400 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Many repeated values so that ties are exercised.
            let x = ((s >> 40) % 23) as f64 + if i % 7 == 0 { 0.5 } else { 0.0 };
            w.push(x);
            all.push(x);
            for win in [1, 2, 5, 10, 21, 31, 50, 51, 80] {
                let m = win.min(all.len()).min(51);
                let tail = &all[all.len() - m..];
                assert_eq!(w.median_last(win), Some(naive_median(tail)), "median w={win} i={i}");
                let t = w.trimmed_mean_last(win, 0.3).unwrap();
                assert!((t - naive_trimmed(tail, 0.3)).abs() < 1e-9, "trimmed w={win} i={i}");
                let mean = tail.iter().sum::<f64>() / m as f64;
                assert!((w.mean_last(win).unwrap() - mean).abs() < 1e-9);
            }
            assert_eq!(w.last(), Some(x));
        }
    }

    #[test]
    fn empty_window_answers_none() {
        let w = OrderWindow::new(5);
        assert_eq!(w.median_last(5), None);
        assert_eq!(w.trimmed_mean_last(5, 0.3), None);
        assert_eq!(w.mean_last(5), None);
        assert_eq!(w.last(), None);
    }

    #[test]
    fn quantile_uses_nearest_rank() {
        let mut w = OrderWindow::new(10);
        for x in [5.0, 1.0, 4.0, 2.0, 3.0] {
            w.push(x);
        }
        assert_eq!(w.quantile_last(5, 0.0), Some(1.0));
        assert_eq!(w.quantile_last(5, 1.0), Some(5.0));
        assert_eq!(w.quantile_last(5, 0.5), Some(3.0));
        assert_eq!(w.quantile_last(2, 0.0), Some(2.0));
    }
}
