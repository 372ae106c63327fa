//! The instructions the forecaster bank's update may use (its hot path, natively and in
//! WebAssembly): a token passed down the update, [`Baseline`] (every processor of the target)
//! or [`Avx2`] (only where the processor was found to have it), and the few queries over a
//! row of lanes whose best code the compiler does not find on its own. Every query gives the
//! same answer, bit for bit, whichever token asks.

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
        add_picked_one_by_one(err, picks, 0..n, se, ae);
    }
}

/// [`Isa::add_picked`] for picks `which`, one at a time.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn add_picked_one_by_one<const N: usize>(
    err: &[f64],
    picks: &[usize; N],
    which: std::ops::Range<usize>,
    se: &mut [f64; N],
    ae: &mut [f64; N],
) {
    for s in which {
        let e = err[picks[s]];
        se[s] += e * e;
        ae[s] += e.abs();
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
        add_picked_one_by_one(err, picks, whole..n, se, ae);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
