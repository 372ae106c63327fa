//! Error bookkeeping for a set of forecasters: whole-history and sliding-window squared and
//! absolute errors, and the arg-min queries the NWS selectors make (algorithms.md §1.2).
//!
//! Layout is structure-of-arrays (one row of `p` forecasters per step or window) so that
//! the per-step update is a few tight loops over `p` contiguous values.

use crate::isa::{Baseline, Isa, Row, LANES};
use serde::{Deserialize, Serialize};

/// Steps of error history kept for windowed selectors.
pub const RING: usize = 100;

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
    #[cfg_attr(target_arch = "x86_64", inline(always))]
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

/// Errors of up to [`LANES`] forecasters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorTable {
    p: usize,
    windows: Vec<usize>,
    /// Number of errors recorded per forecaster (as f64: it divides sums).
    scored: Row,
    cum_se: Row,
    cum_ae: Row,
    /// Last RING steps of errors, 0 where a forecaster had no forecast.
    ring_se: Vec<Row>,
    ring_ae: Vec<Row>,
    pos: usize,
    /// Sliding sums over each window.
    win_se: Vec<Row>,
    win_ae: Vec<Row>,
    /// Set once every forecaster has a full longest window of errors (it stays set).
    steady: bool,
    /// Faithful windows: each window's sums are the running totals now minus the running
    /// totals `w` steps ago, as the original library keeps them (its rounding included),
    /// instead of sums slid over the ring. `totals_*[i % RING]` hold the totals after step
    /// `i`; `steps` counts the steps recorded.
    running: bool,
    totals_se: Vec<Row>,
    totals_ae: Vec<Row>,
    steps: u64,
    /// Smallest sum of each window row, found while the row was updated, so that a
    /// selection only has to find where it is.
    #[serde(skip)]
    min_se: Vec<f64>,
    #[serde(skip)]
    min_ae: Vec<f64>,
}

impl ErrorTable {
    /// A table for `p` ≤ [`LANES`] forecasters with the given windows (each ≤ RING), whose
    /// window sums slide (exact sums of the last `w` errors, see [`ErrorTable::record`]).
    pub fn new(p: usize, windows: &[usize]) -> Self {
        Self::with_totals(p, windows, false)
    }

    /// A table whose window sums are differences of running totals, as in the original
    /// library (faithful mode); windows must be shorter than RING.
    pub fn running(p: usize, windows: &[usize]) -> Self {
        assert!(windows.iter().all(|&w| w < RING));
        Self::with_totals(p, windows, true)
    }

    fn with_totals(p: usize, windows: &[usize], running: bool) -> Self {
        assert!(windows.iter().all(|&w| (1..=RING).contains(&w)));
        assert!(p <= LANES, "at most {LANES} forecasters");
        let mut unused = [0.0; LANES];
        unused[p..].fill(f64::MAX);
        Self {
            p,
            windows: windows.to_vec(),
            scored: [0.0; LANES],
            cum_se: unused,
            cum_ae: unused,
            ring_se: vec![[0.0; LANES]; RING],
            ring_ae: vec![[0.0; LANES]; RING],
            pos: 0,
            win_se: vec![unused; windows.len()],
            win_ae: vec![unused; windows.len()],
            steady: false,
            running,
            totals_se: if running {
                vec![[0.0; LANES]; RING]
            } else {
                Vec::new()
            },
            totals_ae: if running {
                vec![[0.0; LANES]; RING]
            } else {
                Vec::new()
            },
            steps: 0,
            min_se: vec![0.0; windows.len()],
            min_ae: vec![0.0; windows.len()],
        }
    }

    /// Records one step: `err[j]` is measurement minus forecast for the forecasters with
    /// `has[j]`; the others get no error this step.
    pub fn record(&mut self, err: &[f64], has: &[bool]) {
        self.record_with(Baseline, err, has);
    }

    /// [`record`](Self::record) with the instructions `isa` allows.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub(crate) fn record_with(&mut self, isa: impl Isa, err: &[f64], has: &[bool]) {
        // Without branches: a forecaster without a forecast counts 0 times its (finite) error,
        // +0 exactly, as a skipped lane would hold; one with a forecast counts its error times 1,
        // exactly its error.
        let p = self.p;
        let (mut e, mut count) = ([0.0; LANES], [0.0; LANES]);
        e[..p].copy_from_slice(&err[..p]);
        for (c, &h) in count.iter_mut().zip(&has[..p]) {
            *c = f64::from(u8::from(h));
        }
        let (mut se, mut ae) = ([0.0; LANES], [0.0; LANES]);
        for k in 0..LANES {
            se[k] = e[k] * e[k] * count[k];
            ae[k] = e[k].abs() * count[k];
        }
        add(&mut self.scored, &count);
        add(&mut self.cum_se, &se);
        add(&mut self.cum_ae, &ae);
        let windows = self.windows.len();
        if self.min_se.len() != windows {
            // Not saved: a restored table has them empty until its first step.
            self.min_se.resize(windows, 0.0);
            self.min_ae.resize(windows, 0.0);
        }
        if self.running {
            self.record_running(isa);
        } else {
            self.record_sliding(isa, &se, &ae);
        }
        if !self.steady {
            let longest = self.windows.iter().copied().max().unwrap_or(0) as f64;
            self.steady = self.scored[..self.p].iter().all(|&n| n >= longest);
        }
    }

    /// Window sums as the original forms them: running totals now minus `w` steps ago.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn record_running(&mut self, isa: impl Isa) {
        self.steps += 1;
        let slot = (self.steps % RING as u64) as usize;
        self.totals_se[slot] = self.cum_se;
        self.totals_ae[slot] = self.cum_ae;
        let (pad, zero) = (self.padding(), [0.0; LANES]);
        for (wi, &w) in self.windows.iter().enumerate() {
            let (then_se, then_ae) = if self.steps >= w as u64 {
                let old = ((self.steps - w as u64) % RING as u64) as usize;
                (&self.totals_se[old], &self.totals_ae[old])
            } else {
                (&zero, &zero)
            };
            self.min_se[wi] = difference(isa, &mut self.win_se[wi], &self.cum_se, then_se, &pad);
            self.min_ae[wi] = difference(isa, &mut self.win_ae[wi], &self.cum_ae, then_ae, &pad);
        }
    }

    /// A row of 0 in the used lanes and f64::MAX in the others, to raise the unused lanes of
    /// a row of errors (never below 0) with [`at_least`].
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn padding(&self) -> Row {
        let mut pad = [0.0; LANES];
        pad[self.p..].fill(f64::MAX);
        pad
    }

    /// Window sums slid by the entering and leaving errors, rebuilt exactly once per lap.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn record_sliding(&mut self, isa: impl Isa, se: &Row, ae: &Row) {
        let (se, ae) = (*se, *ae);
        for (wi, &w) in self.windows.iter().enumerate() {
            if w == 1 {
                // The last error itself, exactly: a slid sum would carry rounding residue
                // from earlier steps and could split forecasters that tie this step.
                let (pad, zero) = (self.padding(), [0.0; LANES]);
                self.min_se[wi] = difference(isa, &mut self.win_se[wi], &se, &zero, &pad);
                self.min_ae[wi] = difference(isa, &mut self.win_ae[wi], &ae, &zero, &pad);
                continue;
            }
            // For w == RING the leaving slot is the one about to be overwritten.
            let old = (self.pos + RING - w) % RING;
            self.min_se[wi] = slide(isa, &mut self.win_se[wi], &se, &self.ring_se[old]);
            self.min_ae[wi] = slide(isa, &mut self.win_ae[wi], &ae, &self.ring_ae[old]);
        }
        self.ring_se[self.pos] = se;
        self.ring_ae[self.pos] = ae;
        self.pos = (self.pos + 1) % RING;
        if self.pos == 0 {
            // Sliding sums gather rounding residue; rebuild them exactly once per lap.
            self.rebuild_windows(isa);
        }
    }

    // Inlined on x86-64, so that the AVX2 update runs it in AVX2 too (once a lap).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn rebuild_windows(&mut self, isa: impl Isa) {
        // Walk back from the newest step, accumulating; a window's sums are the running sums
        // when the walk has covered it (windows are nested, so one walk serves them all).
        let mut se = [0.0; LANES];
        let mut ae = [0.0; LANES];
        se[self.p..].fill(f64::MAX);
        ae[self.p..].fill(f64::MAX);
        for back in 1..=RING {
            let row = (self.pos + RING - back) % RING;
            add(&mut se, &self.ring_se[row]);
            add(&mut ae, &self.ring_ae[row]);
            for (wi, _) in self.windows.iter().enumerate().filter(|(_, &w)| w == back) {
                self.win_se[wi] = se;
                self.win_ae[wi] = ae;
                self.min_se[wi] = isa.row_min(&se);
                self.min_ae[wi] = isa.row_min(&ae);
            }
        }
    }

    /// The forecaster with the lowest mean error over the whole history (`window` None) or
    /// over the last `windows[window]` steps. Forecasters without errors rank as infinite;
    /// ties go to the lower index. Among forecasters that have a forecast (`has`) only.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn best(&self, kind: Kind, window: Option<usize>, has: &[bool]) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (j, _) in has.iter().enumerate().take(self.p).filter(|(_, &h)| h) {
            let score = self.score(kind, window, j);
            // Strictly lower replaces, so ties keep the lower index (+∞ never replaces +∞).
            if best.is_none_or(|(_, b)| score < b) {
                best = Some((j, score));
            }
        }
        best.map(|(j, _)| j)
    }

    /// True once every forecaster has at least a full largest window of errors: from then
    /// on windowed means compare as raw sums and [`best_steady`](Self::best_steady) applies.
    pub fn steady(&self) -> bool {
        self.steady
    }

    /// [`best`](Self::best) for a table where every forecaster has a forecast and
    /// [`steady`](Self::steady) holds: an arg-min over one row.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub(crate) fn best_steady(&self, isa: impl Isa, kind: Kind, window: Option<usize>) -> usize {
        match (window, kind) {
            (None, Kind::Squared) => argmin_row(isa, &div(&self.cum_se, &self.scored)),
            (None, Kind::Absolute) => argmin_row(isa, &div(&self.cum_ae, &self.scored)),
            (Some(wi), Kind::Squared) => isa.first_equal(&self.win_se[wi], self.min_se[wi]),
            (Some(wi), Kind::Absolute) => isa.first_equal(&self.win_ae[wi], self.min_ae[wi]),
        }
    }

    /// Mean error scaled by the window length (so a full window compares raw sums).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn score(&self, kind: Kind, window: Option<usize>, j: usize) -> f64 {
        let n = self.scored[j];
        if n == 0.0 {
            return f64::INFINITY;
        }
        match window {
            None => {
                let sum = match kind {
                    Kind::Squared => self.cum_se[j],
                    Kind::Absolute => self.cum_ae[j],
                };
                sum / n
            }
            Some(wi) => {
                let w = self.windows[wi] as f64;
                let sum = match kind {
                    Kind::Squared => self.win_se[wi][j],
                    Kind::Absolute => self.win_ae[wi][j],
                };
                // The original compares raw totals even before a window is full; sliding
                // windows not yet full are scaled to their length.
                if n >= w || self.running {
                    sum
                } else {
                    sum * (w / n)
                }
            }
        }
    }

    /// Whole-history errors of forecaster `j`.
    pub fn accum(&self, j: usize) -> Accum {
        Accum {
            n: self.scored[j] as u64,
            sum_se: self.cum_se[j],
            sum_ae: self.cum_ae[j],
        }
    }

    /// Checks the table's shape for `p` forecasters (restored state).
    pub fn validate(&self, p: usize) -> Result<(), String> {
        let w = self.windows.len();
        let unused_infinite = |r: &Row| r[p.min(LANES)..].iter().all(|v| *v == f64::MAX);
        let ok = self.p == p
            && p <= LANES
            && self.ring_se.len() == RING
            && self.ring_ae.len() == RING
            && self.win_se.len() == w
            && self.win_ae.len() == w
            && self.pos < RING
            && self.windows.iter().all(|&x| (1..=RING).contains(&x))
            && unused_infinite(&self.cum_se)
            && unused_infinite(&self.cum_ae)
            && self.win_se.iter().chain(&self.win_ae).all(unused_infinite);
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

// Row loops vectorise (SSE2 natively, simd128 in WASM) only when LLVM can tell that the rows
// do not overlap. Out of line, the `&mut`/`&` arguments say so; that is how `add` is written
// for WASM (on x86-64 it is inlined into the AVX2 update, where the rows are fields it can
// tell apart, measured: 144 fewer instructions an update). The hot `slide` differs by target, measured: natively it is inlined
// and works on copies of the rows (held in registers); in WASM the copies would be real
// memory traffic, so it stays out of line and works in place.
#[cfg_attr(not(target_arch = "x86_64"), inline(never))]
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn add(acc: &mut Row, v: &Row) {
    for k in 0..LANES {
        acc[k] += v[k];
    }
}

#[cfg_attr(target_arch = "x86_64", inline(always))]
fn div(a: &Row, b: &Row) -> Row {
    let mut out = [0.0; LANES];
    for k in 0..LANES {
        out[k] = a[k] / b[k];
    }
    out
}

/// Window sums as differences of running totals (`now − then`), the unused lanes raised
/// back to f64::MAX by `pad` (there both totals are f64::MAX, and their difference 0; a used
/// lane's difference is never below 0, as running totals of errors never decrease); returns
/// the smallest. Whole rows, so the loop vectorises; as a function, so that LLVM knows the
/// rows apart and checks no overlap at run time (measured).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn difference(isa: impl Isa, sums: &mut Row, now: &Row, then: &Row, pad: &Row) -> f64 {
    for k in 0..LANES {
        sums[k] = at_least(now[k] - then[k], pad[k]);
    }
    isa.row_min(sums)
}

/// The larger of `v` and `floor` (`maxpd`'s rule; no NaN occurs).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn at_least(v: f64, floor: f64) -> f64 {
    if v > floor {
        v
    } else {
        floor
    }
}

/// Index of the first smallest value of a row (no NaN occurs: errors of finite values).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn argmin_row(isa: impl Isa, row: &Row) -> usize {
    isa.first_equal(row, isa.row_min(row))
}

/// Moves window sums: adds the entering errors and removes the leaving ones; returns the
/// smallest new sum.
#[cfg(not(target_arch = "wasm32"))]
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn slide(isa: impl Isa, sums: &mut Row, entering: &Row, leaving: &Row) -> f64 {
    let (mut s, e, l) = (*sums, *entering, *leaving);
    for k in 0..LANES {
        s[k] += e[k] - l[k];
    }
    *sums = s;
    isa.row_min(&s)
}

/// Moves window sums: adds the entering errors and removes the leaving ones; returns the
/// smallest new sum.
#[cfg(target_arch = "wasm32")]
#[inline(never)]
fn slide(isa: impl Isa, sums: &mut Row, entering: &Row, leaving: &Row) -> f64 {
    for k in 0..LANES {
        sums[k] += entering[k] - leaving[k];
    }
    isa.row_min(sums)
}

/// Index of the first smallest value (no NaN occurs: errors of finite values).
#[cfg_attr(target_arch = "x86_64", inline(always))]
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
                    let got = t.win_se[wi][j];
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
