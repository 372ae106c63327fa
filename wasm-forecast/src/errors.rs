//! Error bookkeeping for a set of forecasters: whole-history and sliding-window squared and
//! absolute errors, and the arg-min queries the NWS selectors make (algorithms.md §1.2).
//!
//! Layout is structure-of-arrays (one row of `p` forecasters per step or window) so that
//! the per-step update is a few tight loops over `p` contiguous values.

use serde::{Deserialize, Serialize};

/// Steps of error history kept for windowed selectors.
pub const RING: usize = 100;

/// Most forecasters a table may hold.
pub const MAX_FORECASTERS: usize = 64;
const ZEROS: [f64; MAX_FORECASTERS] = [0.0; MAX_FORECASTERS];

/// Which error a query ranks by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    Squared,
    Absolute,
}

/// Running sums of one forecast's errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Accum {
    pub n: u64,
    pub sum_se: f64,
    pub sum_ae: f64,
}

impl Accum {
    /// Adds one error (measurement minus forecast).
    pub fn add(&mut self, e: f64) {
        self.n += 1;
        self.sum_se += e * e;
        self.sum_ae += e.abs();
    }
    /// Mean squared error; 0 before any error, as the original reports it.
    pub fn mse(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_se / self.n as f64
        }
    }
    /// Mean absolute error; 0 before any error.
    pub fn mae(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ae / self.n as f64
        }
    }
    pub fn rmse(&self) -> f64 {
        self.mse().sqrt()
    }
}

/// Errors of `p` forecasters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorTable {
    p: usize,
    windows: Vec<usize>,
    /// Number of errors recorded per forecaster.
    scored: Vec<u64>,
    cum_se: Vec<f64>,
    cum_ae: Vec<f64>,
    /// Last RING steps of errors, `RING × p`, 0 where a forecaster had no forecast.
    ring_se: Vec<f64>,
    ring_ae: Vec<f64>,
    pos: usize,
    /// Sliding sums over each window, `windows.len() × p`.
    win_se: Vec<f64>,
    win_ae: Vec<f64>,
    /// Scratch rows for the step being recorded.
    #[serde(skip)]
    new_se: Vec<f64>,
    #[serde(skip)]
    new_ae: Vec<f64>,
}

impl ErrorTable {
    /// A table for `p` forecasters with the given windows (each ≤ RING).
    pub fn new(p: usize, windows: &[usize]) -> Self {
        assert!(windows.iter().all(|&w| (1..=RING).contains(&w)));
        assert!(
            p <= MAX_FORECASTERS,
            "at most {MAX_FORECASTERS} forecasters"
        );
        Self {
            p,
            windows: windows.to_vec(),
            scored: vec![0; p],
            cum_se: vec![0.0; p],
            cum_ae: vec![0.0; p],
            ring_se: vec![0.0; RING * p],
            ring_ae: vec![0.0; RING * p],
            pos: 0,
            win_se: vec![0.0; windows.len() * p],
            win_ae: vec![0.0; windows.len() * p],
            new_se: vec![0.0; p],
            new_ae: vec![0.0; p],
        }
    }

    /// Records one step: `err[j]` is measurement minus forecast for the forecasters with
    /// `has[j]`; the others get no error this step.
    pub fn record(&mut self, err: &[f64], has: &[bool]) {
        let p = self.p;
        self.new_se.resize(p, 0.0);
        self.new_ae.resize(p, 0.0);
        for j in 0..p {
            let (se, ae) = if has[j] {
                self.scored[j] += 1;
                (err[j] * err[j], err[j].abs())
            } else {
                (0.0, 0.0)
            };
            self.new_se[j] = se;
            self.new_ae[j] = ae;
            self.cum_se[j] += se;
            self.cum_ae[j] += ae;
        }
        for (wi, &w) in self.windows.iter().enumerate() {
            // For w == RING the leaving slot is the one about to be overwritten.
            let old = ((self.pos + RING - w) % RING) * p;
            let rows = wi * p..(wi + 1) * p;
            slide(
                &mut self.win_se[rows.clone()],
                &self.new_se,
                &self.ring_se[old..old + p],
            );
            slide(
                &mut self.win_ae[rows],
                &self.new_ae,
                &self.ring_ae[old..old + p],
            );
        }
        let row = self.pos * p;
        self.ring_se[row..row + p].copy_from_slice(&self.new_se);
        self.ring_ae[row..row + p].copy_from_slice(&self.new_ae);
        self.pos = (self.pos + 1) % RING;
        if self.pos == 0 {
            // Sliding sums gather rounding residue; rebuild them exactly once per lap.
            self.rebuild_windows();
        }
    }

    fn rebuild_windows(&mut self) {
        // Walk back from the newest step, accumulating; a window's sums are the running sums
        // when the walk has covered it (windows are nested, so one walk serves them all).
        let p = self.p;
        self.new_se.iter_mut().for_each(|v| *v = 0.0);
        self.new_ae.iter_mut().for_each(|v| *v = 0.0);
        for back in 1..=RING {
            let row = ((self.pos + RING - back) % RING) * p;
            slide(&mut self.new_se, &self.ring_se[row..row + p], &ZEROS[..p]);
            slide(&mut self.new_ae, &self.ring_ae[row..row + p], &ZEROS[..p]);
            for (wi, _) in self.windows.iter().enumerate().filter(|(_, &w)| w == back) {
                self.win_se[wi * p..(wi + 1) * p].copy_from_slice(&self.new_se);
                self.win_ae[wi * p..(wi + 1) * p].copy_from_slice(&self.new_ae);
            }
        }
    }

    /// The forecaster with the lowest mean error over the whole history (`window` None) or
    /// over the last `windows[window]` steps. Forecasters without errors rank as infinite;
    /// ties go to the lower index. Among forecasters that have a forecast (`has`) only.
    pub fn best(&self, kind: Kind, window: Option<usize>, has: &[bool]) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for j in 0..self.p {
            if !has[j] {
                continue;
            }
            let score = self.score(kind, window, j);
            match best {
                Some((_, b)) if !(score < b) => {}
                _ => best = Some((j, score)),
            }
        }
        best.map(|(j, _)| j)
    }

    /// True once every forecaster has at least a full largest window of errors: from then
    /// on windowed means compare as raw sums and [`best_steady`](Self::best_steady) applies.
    pub fn steady(&self) -> bool {
        let longest = self.windows.iter().copied().max().unwrap_or(0) as u64;
        self.scored.iter().all(|&n| n >= longest)
    }

    /// [`best`](Self::best) for a table where every forecaster has a forecast and
    /// [`steady`](Self::steady) holds: an arg-min over one contiguous row.
    pub fn best_steady(&mut self, kind: Kind, window: Option<usize>) -> usize {
        let p = self.p;
        let row: &[f64] = match (window, kind) {
            (None, _) => {
                let cum = match kind {
                    Kind::Squared => &self.cum_se,
                    Kind::Absolute => &self.cum_ae,
                };
                self.new_se.resize(p, 0.0);
                for j in 0..p {
                    // Through i64: a signed conversion is one instruction, unsigned is not.
                    self.new_se[j] = cum[j] / self.scored[j] as i64 as f64;
                }
                &self.new_se
            }
            (Some(wi), Kind::Squared) => &self.win_se[wi * p..(wi + 1) * p],
            (Some(wi), Kind::Absolute) => &self.win_ae[wi * p..(wi + 1) * p],
        };
        argmin(row)
    }

    /// Mean error scaled by the window length (so a full window compares raw sums).
    fn score(&self, kind: Kind, window: Option<usize>, j: usize) -> f64 {
        let n = self.scored[j];
        if n == 0 {
            return f64::INFINITY;
        }
        match window {
            None => {
                let sum = match kind {
                    Kind::Squared => self.cum_se[j],
                    Kind::Absolute => self.cum_ae[j],
                };
                sum / n as f64
            }
            Some(wi) => {
                let w = self.windows[wi];
                let sum = match kind {
                    Kind::Squared => self.win_se[wi * self.p + j],
                    Kind::Absolute => self.win_ae[wi * self.p + j],
                };
                if n >= w as u64 {
                    sum
                } else {
                    sum * (w as f64 / n as f64)
                }
            }
        }
    }

    /// Whole-history errors of forecaster `j`.
    pub fn accum(&self, j: usize) -> Accum {
        Accum {
            n: self.scored[j],
            sum_se: self.cum_se[j],
            sum_ae: self.cum_ae[j],
        }
    }

    /// Checks the table's shape for `p` forecasters (restored state).
    pub fn validate(&self, p: usize) -> Result<(), String> {
        let w = self.windows.len();
        let ok = self.p == p
            && p <= MAX_FORECASTERS
            && self.scored.len() == p
            && self.cum_se.len() == p
            && self.cum_ae.len() == p
            && self.ring_se.len() == RING * p
            && self.ring_ae.len() == RING * p
            && self.win_se.len() == w * p
            && self.win_ae.len() == w * p
            && self.pos < RING
            && self.windows.iter().all(|&x| (1..=RING).contains(&x));
        if ok {
            Ok(())
        } else {
            Err("error table has the wrong shape".into())
        }
    }

    /// Number of windows.
    pub fn window_count(&self) -> usize {
        self.windows.len()
    }
}

/// Moves window sums: adds the entering errors and removes the leaving ones.
fn slide(sums: &mut [f64], entering: &[f64], leaving: &[f64]) {
    for ((s, &e), &l) in sums.iter_mut().zip(entering).zip(leaving) {
        *s += e - l;
    }
}

/// Index of the first smallest value (no NaN occurs: errors of finite values).
pub(crate) fn argmin(row: &[f64]) -> usize {
    // The minimum over four independent lanes (neighbouring comparisons do not wait on each
    // other, and the loop vectorises), then the first position that holds it.
    let mut lanes = [f64::INFINITY; 4];
    let chunks = row.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..4 {
            lanes[k] = if c[k] < lanes[k] { c[k] } else { lanes[k] };
        }
    }
    let min = lanes
        .iter()
        .chain(rest)
        .fold(f64::INFINITY, |m, &v| if v < m { v } else { m });
    row.iter().position(|&v| v == min).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_match_direct_sums_across_laps() {
        let mut t = ErrorTable::new(3, &[1, 5, 98, 100]);
        let mut hist: Vec<[f64; 3]> = Vec::new();
        for i in 0..350 {
            let e = [(i % 7) as f64, ((i * 3) % 11) as f64 - 5.0, 0.5];
            let has = [true, i > 3, true];
            t.record(&e, &has);
            hist.push([e[0], if has[1] { e[1] } else { 0.0 }, e[2]]);
            for (wi, &w) in [1usize, 5, 98, 100].iter().enumerate() {
                for j in 0..3 {
                    let tail = &hist[hist.len().saturating_sub(w)..];
                    let se: f64 = tail.iter().map(|r| r[j] * r[j]).sum();
                    let got = t.win_se[wi * 3 + j];
                    assert!((got - se).abs() < 1e-9, "w={w} j={j} i={i}: {got} vs {se}");
                }
            }
        }
    }

    #[test]
    fn best_prefers_lower_index_on_ties_and_skips_unscored() {
        let mut t = ErrorTable::new(3, &[5]);
        t.record(&[1.0, 1.0, 0.5], &[false, true, true]);
        assert_eq!(t.best(Kind::Squared, None, &[true, true, true]), Some(2));
        t.record(&[1.0, 0.0, 0.5], &[true, true, true]);
        // j=1: (1+0)/2 = 0.5, j=2: 0.25, j=0: 1.
        assert_eq!(t.best(Kind::Squared, None, &[true, true, true]), Some(2));
        assert_eq!(t.best(Kind::Absolute, None, &[true, true, true]), Some(1));
        let mut u = ErrorTable::new(2, &[1]);
        u.record(&[2.0, 2.0], &[true, true]);
        assert_eq!(u.best(Kind::Absolute, Some(0), &[true, true]), Some(0));
    }
}
