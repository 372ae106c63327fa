//! Error bookkeeping for a set of forecasters: whole-history and sliding-window squared and
//! absolute errors, and the arg-min queries the NWS selectors make (algorithms.md §1.2).
//!
//! Layout is structure-of-arrays (one row of `p` forecasters per step or window) so that
//! the per-step update is a few tight loops over `p` contiguous values.

use serde::{Deserialize, Serialize};

/// Steps of error history kept for windowed selectors.
pub const RING: usize = 100;

/// Width of every row: the most forecasters a table may hold (the 18 NWS primaries and two
/// more; a bank ranks at most the 18 in either mode). Rows are fixed-size arrays so
/// that the per-step loops compile to straight vector code without bounds checks; lanes past
/// the real forecasters hold f64::MAX sums (above any real sum, and unlike +∞ expressible in
/// JSON), so they never win a selection.
pub const LANES: usize = 20;
pub(crate) type Row = [f64; LANES];
const _: () = assert!(
    LANES % 4 == 0 && LANES <= 32,
    "rows are scanned four lanes at a time and matched in a 32-bit mask"
);

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

/// Smallest value of a row: two running minima of two lanes each (SSE2's minpd, part of
/// x86-64's baseline; left to itself the compiler made twenty scalar comparisons of it,
/// measured). For rows of errors (no NaN) the result is the same as the portable loop's.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn row_min(r: &Row) -> f64 {
    use std::arch::x86_64::{_mm_cvtsd_f64, _mm_min_pd, _mm_min_sd, _mm_set_pd, _mm_unpackhi_pd};
    // SAFETY: SSE2 is part of x86-64's baseline, so every x86-64 processor has these
    // instructions; they read only their register arguments.
    unsafe {
        let pair = |i: usize| _mm_set_pd(r[i + 1], r[i]);
        let (mut a, mut b) = (pair(0), pair(2));
        for c in 1..LANES / 4 {
            // minpd(x, y) is x < y ? x : y, lane by lane: the portable loop's rule.
            a = _mm_min_pd(pair(4 * c), a);
            b = _mm_min_pd(pair(4 * c + 2), b);
        }
        let m = _mm_min_pd(a, b);
        _mm_cvtsd_f64(_mm_min_sd(_mm_unpackhi_pd(m, m), m))
    }
}

/// Smallest value of a row: in WASM, two running minima of two lanes each (`f64x2.pmin`,
/// `b < a ? b : a`, the portable loop's rule).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) fn row_min(r: &Row) -> f64 {
    use std::arch::wasm32::{f64x2, f64x2_extract_lane, f64x2_pmin};
    let pair = |i: usize| f64x2(r[i], r[i + 1]);
    let (mut a, mut b) = (pair(0), pair(2));
    for c in 1..LANES / 4 {
        a = f64x2_pmin(a, pair(4 * c));
        b = f64x2_pmin(b, pair(4 * c + 2));
    }
    let m = f64x2_pmin(a, b);
    let (lo, hi) = (f64x2_extract_lane::<0>(m), f64x2_extract_lane::<1>(m));
    if hi < lo {
        hi
    } else {
        lo
    }
}

/// Smallest value of a row, over four independent lanes so that comparisons overlap.
#[cfg(not(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
)))]
pub(crate) fn row_min(r: &Row) -> f64 {
    let mut lanes = [f64::INFINITY; 4];
    for c in 0..LANES / 4 {
        for k in 0..4 {
            let v = r[c * 4 + k];
            lanes[k] = if v < lanes[k] { v } else { lanes[k] };
        }
    }
    lanes
        .into_iter()
        .fold(f64::INFINITY, |m, v| if v < m { v } else { m })
}

/// The instructions the hot path of an update may use, as a token passed down to it: those
/// every processor of the target has ([`Baseline`]), or AVX2 too ([`Avx2`], which only exists
/// once the processor was found to have it). Only queries whose best code LLVM does not find
/// on its own differ; both give the same answers, bit for bit.
pub(crate) trait Isa: Copy {
    /// Index of the first entry equal to `v`, which the row holds.
    fn first_equal(self, row: &Row, v: f64) -> usize;
    /// Smallest value of a row (no NaN occurs: errors of finite values).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn row_min(self, r: &Row) -> f64 {
        row_min(r)
    }
    /// Adds the error `err[picks[s]]` of each of the first `n` picks to its sums: squared to
    /// `se[s]`, absolute to `ae[s]`. Panics if a pick is not an index of `err`.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn add_picked<const N: usize>(
        self,
        err: &[f64],
        picks: &[usize; N],
        n: usize,
        se: &mut [f64; N],
        ae: &mut [f64; N],
    ) {
        for s in 0..n {
            let e = err[picks[s]];
            se[s] += e * e;
            ae[s] += e.abs();
        }
    }
}

/// Any processor of the target.
#[derive(Clone, Copy)]
pub(crate) struct Baseline;

impl Isa for Baseline {
    /// A bit mask of matches, then its lowest bit.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn first_equal(self, row: &Row, v: f64) -> usize {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            use std::arch::wasm32::{f64x2, f64x2_eq, f64x2_splat, i64x2_bitmask};
            let wanted = f64x2_splat(v);
            let mut mask = 0u32;
            for c in 0..LANES / 2 {
                let two = f64x2(row[2 * c], row[2 * c + 1]);
                mask |= u32::from(i64x2_bitmask(f64x2_eq(two, wanted))) << (2 * c);
            }
            (mask.trailing_zeros() as usize).min(LANES - 1)
        }
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        {
            let mut mask = 0u32;
            for (k, &x) in row.iter().enumerate() {
                mask |= ((x == v) as u32) << k;
            }
            (mask.trailing_zeros() as usize).min(LANES - 1)
        }
    }
}

/// A processor with AVX2.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// The token, for code that runs only where AVX2 was detected.
    ///
    /// # Safety
    /// The processor must have AVX2.
    #[inline(always)]
    pub(crate) unsafe fn assume() -> Self {
        Avx2(())
    }
}

#[cfg(target_arch = "x86_64")]
impl Isa for Avx2 {
    /// Four lanes compared at a time, their matches' sign bits gathered into the mask (the
    /// baseline loop's mask, built in five compares and five `vmovmskpd` where LLVM made
    /// some forty instructions of it, measured).
    #[inline(always)]
    fn first_equal(self, row: &Row, v: f64) -> usize {
        // SAFETY: an `Avx2` token exists only where the processor has AVX2 (`assume`).
        unsafe { first_equal_avx2(row, v) }
    }

    /// Four lanes to a register (the baseline's SSE2 takes two).
    #[inline(always)]
    fn row_min(self, r: &Row) -> f64 {
        // SAFETY: as above.
        unsafe { row_min_avx2(r) }
    }

    /// Four picks at a time, each block's picks checked to index `err` before its errors are
    /// gathered (`vgatherqpd`); the same operations lane by lane as the baseline's.
    #[inline(always)]
    fn add_picked<const N: usize>(
        self,
        err: &[f64],
        picks: &[usize; N],
        n: usize,
        se: &mut [f64; N],
        ae: &mut [f64; N],
    ) {
        let n = n.min(N);
        let whole = n - n % 4;
        // SAFETY: AVX2 as above; every block of four lies within the first n ≤ N entries.
        unsafe { add_picked_avx2(err, picks, whole, se, ae) };
        for s in whole..n {
            let e = err[picks[s]];
            se[s] += e * e;
            ae[s] += e.abs();
        }
    }
}

/// [`Isa::add_picked`] for the first `whole` (a multiple of four) picks, four at a time.
/// Panics if a pick is not an index of `err`.
///
/// # Safety
/// The processor has AVX2; `whole ≤ N`, a multiple of four.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn add_picked_avx2<const N: usize>(
    err: &[f64],
    picks: &[usize; N],
    whole: usize,
    se: &mut [f64; N],
    ae: &mut [f64; N],
) {
    use std::arch::x86_64::{
        _mm256_add_pd, _mm256_andnot_pd, _mm256_castsi256_pd, _mm256_cmpgt_epi64,
        _mm256_i64gather_pd, _mm256_loadu_pd, _mm256_loadu_si256, _mm256_movemask_pd,
        _mm256_mul_pd, _mm256_set1_epi64x, _mm256_set1_pd, _mm256_storeu_pd, _mm256_xor_si256,
    };
    let sign = _mm256_set1_pd(-0.0);
    // Unsigned comparison as signed, both sides' top bits flipped: pick > len − 1.
    let flip = _mm256_set1_epi64x(i64::MIN);
    let last = (err.len() as i64).wrapping_sub(1) ^ i64::MIN;
    let last = _mm256_set1_epi64x(last);
    for c in (0..whole).step_by(4) {
        // SAFETY (of each access): lanes c..c+4 are within the arrays (c + 4 ≤ whole ≤ N),
        // and the four indices gathered were found within `err` just before.
        unsafe {
            let at = _mm256_loadu_si256(picks.as_ptr().add(c).cast());
            let beyond = _mm256_cmpgt_epi64(_mm256_xor_si256(at, flip), last);
            assert!(
                _mm256_movemask_pd(_mm256_castsi256_pd(beyond)) == 0 && !err.is_empty(),
                "a pick out of range"
            );
            let e = _mm256_i64gather_pd::<8>(err.as_ptr(), at);
            let (s, a) = (se.as_mut_ptr().add(c), ae.as_mut_ptr().add(c));
            _mm256_storeu_pd(s, _mm256_add_pd(_mm256_loadu_pd(s), _mm256_mul_pd(e, e)));
            _mm256_storeu_pd(
                a,
                _mm256_add_pd(_mm256_loadu_pd(a), _mm256_andnot_pd(sign, e)),
            );
        }
    }
}

/// [`row_min`] four lanes at a time: two running minima over alternate blocks of four, then
/// their halves. The minimum of the same values: for rows of errors (never −0, never NaN) the
/// very number the baseline finds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn row_min_avx2(r: &Row) -> f64 {
    use std::arch::x86_64::{
        _mm256_castpd256_pd128, _mm256_extractf128_pd, _mm256_loadu_pd, _mm256_min_pd,
        _mm_cvtsd_f64, _mm_min_pd, _mm_min_sd, _mm_unpackhi_pd,
    };
    // SAFETY: lanes 4c..4c+4 are within the row (LANES is a multiple of four).
    let four = |c: usize| unsafe { _mm256_loadu_pd(r.as_ptr().add(4 * c)) };
    let (mut even, mut odd) = (four(0), four(1));
    for c in 2..LANES / 4 {
        if c % 2 == 0 {
            even = _mm256_min_pd(four(c), even);
        } else {
            odd = _mm256_min_pd(four(c), odd);
        }
    }
    let m = _mm256_min_pd(even, odd);
    let h = _mm_min_pd(_mm256_extractf128_pd::<1>(m), _mm256_castpd256_pd128(m));
    _mm_cvtsd_f64(_mm_min_sd(_mm_unpackhi_pd(h, h), h))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn first_equal_avx2(row: &Row, v: f64) -> usize {
    use std::arch::x86_64::{
        _mm256_cmp_pd, _mm256_loadu_pd, _mm256_movemask_pd, _mm256_set1_pd, _CMP_EQ_OQ,
    };
    let wanted = _mm256_set1_pd(v);
    let mut mask = 0u32;
    for c in 0..LANES / 4 {
        // SAFETY: lanes 4c..4c+4 are within the row (LANES is a multiple of four).
        let four = unsafe { _mm256_loadu_pd(row.as_ptr().add(4 * c)) };
        let equal = _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_EQ_OQ>(four, wanted)) as u32;
        mask |= equal << (4 * c);
    }
    (mask.trailing_zeros() as usize).min(LANES - 1)
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

    /// Every way to ask for the first equal entry, or for the smallest, gives the baseline's
    /// answer: the value in any lane, repeated in later or earlier lanes, +0 against −0,
    /// unused lanes at f64::MAX.
    #[test]
    fn first_equal_and_row_min_are_the_same_with_avx2() {
        let mut rows = Vec::new();
        for at in 0..LANES {
            for twin in 0..LANES {
                let mut r: Row = std::array::from_fn(|k| 10.0 + k as f64);
                r[LANES - 2..].fill(f64::MAX);
                r[at] = 1.5;
                r[twin] = 1.5;
                rows.push((r, 1.5));
                rows.push((r, r[LANES - 1]));
            }
            let mut r: Row = [f64::MAX; LANES];
            r[at] = -0.0;
            rows.push((r, 0.0));
        }
        for (row, v) in rows {
            let want = Baseline.first_equal(&row, v);
            assert_eq!(row[want], v);
            let smallest = Baseline.row_min(&row);
            assert!(row.iter().all(|&x| x >= smallest) && row.contains(&smallest));
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 was detected just above.
                let avx2 = unsafe { Avx2::assume() };
                assert_eq!(avx2.first_equal(&row, v), want, "{row:?}");
                assert_eq!(avx2.row_min(&row).to_bits(), smallest.to_bits(), "{row:?}");
            }
        }
    }

    /// The selectors' sums grow by the same bits with AVX2 as without, for any number of
    /// selectors (whole blocks of four and a rest), and a pick past the errors panics.
    #[test]
    fn add_picked_is_the_same_with_avx2() {
        let err: Vec<f64> = (0..18).map(|j| (j as f64 - 8.5) * 0.37).collect();
        let picks: [usize; 16] = std::array::from_fn(|s| (s * 7 + 3) % 18);
        for n in 0..=16 {
            let (mut se, mut ae) = ([0.25; 16], [0.5; 16]);
            Baseline.add_picked(&err, &picks, n, &mut se, &mut ae);
            for s in 0..16 {
                let e = if s < n { err[picks[s]] } else { 0.0 };
                assert_eq!((se[s], ae[s]), (0.25 + e * e, 0.5 + e.abs()));
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 was detected just above.
                let avx2 = unsafe { Avx2::assume() };
                let (mut se2, mut ae2) = ([0.25; 16], [0.5; 16]);
                avx2.add_picked(&err, &picks, n, &mut se2, &mut ae2);
                assert_eq!(
                    (se2.map(f64::to_bits), ae2.map(f64::to_bits)),
                    (se.map(f64::to_bits), ae.map(f64::to_bits)),
                    "{n} selectors"
                );
                let mut wrong = picks;
                wrong[1] = 18;
                let beyond = std::panic::catch_unwind(|| {
                    let (mut se, mut ae) = ([0.0; 16], [0.0; 16]);
                    avx2.add_picked(&err, &wrong, 16, &mut se, &mut ae);
                });
                assert!(beyond.is_err(), "a pick past the errors must panic");
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
