//! Recent values of a series, in arrival order and sorted.
//!
//! The NWS median and trimmed-mean forecasters (algorithms.md §1.1) ask for order statistics
//! of the last `w` values for a few `w` ≤ 56. Sorting a copy for each question costs
//! O(w log w) per update; instead each window length in use keeps its values sorted
//! ([`Sorted`]): an update is a binary search and a memmove of at most `w` entries to drop
//! the value that left, and the same to insert the new one. A median is then one index and
//! a trimmed mean one short sum. The values in arrival order live once, in [`History`].

use serde::{Deserialize, Serialize};

/// Values kept in arrival order, at least (a power of two). A window must be shorter than
/// the history: its update reads the value that just left it, which must still be held.
pub const HISTORY: usize = 128;
/// The longest window a bank may ask for.
pub const MAX_WINDOW: usize = 511;

/// The last values in arrival order: [`HISTORY`] of them, or the next power of two above the
/// longest window asked for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct History {
    ring: Vec<f64>,
    n: u64,
}

impl Default for History {
    fn default() -> Self {
        Self::for_windows(0)
    }
}

impl History {
    /// A history long enough for windows of up to `longest` values.
    pub fn for_windows(longest: usize) -> Self {
        assert!(
            longest <= MAX_WINDOW,
            "window length {longest} out of range"
        );
        Self {
            ring: vec![0.0; HISTORY.max((longest + 1).next_power_of_two())],
            n: 0,
        }
    }

    /// How many values it holds once the series is that long.
    pub fn capacity(&self) -> usize {
        self.ring.len()
    }

    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn slot(&self, i: u64) -> usize {
        // The length is a power of two.
        (i & (self.ring.len() as u64 - 1)) as usize
    }

    /// Appends `x` as the newest value.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn push(&mut self, x: f64) {
        let i = self.slot(self.n);
        self.ring[i] = x;
        self.n += 1;
    }

    /// Number of values pushed so far.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Number of values held: min(count, capacity).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn held(&self) -> usize {
        (self.n as usize).min(self.ring.len())
    }

    /// The value `k` steps before the newest (`ago(0)` is the newest); `k` < held().
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn ago(&self, k: usize) -> f64 {
        debug_assert!(k < self.held());
        self.ring[self.slot(self.n - 1 - k as u64)]
    }

    /// The newest value.
    pub fn last(&self) -> Option<f64> {
        (self.n > 0).then(|| self.ago(0))
    }

    /// Median of the last min(w, n) values, by copying and selecting: O(w), for windows
    /// asked about too rarely to keep sorted.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn median_last(&self, w: usize) -> Option<f64> {
        let m = w.min(self.held());
        if m == 0 {
            return None;
        }
        // On the stack for the short windows asked about (the faithful adaptive medians').
        let (mut stack, mut heap) = ([0.0; HISTORY], Vec::new());
        let buf = if m <= HISTORY {
            &mut stack[..m]
        } else {
            heap.resize(m, 0.0);
            &mut heap[..]
        };
        for (k, slot) in buf.iter_mut().enumerate() {
            *slot = self.ago(k);
        }
        let (lo, hi) = ((m - 1) / 2, m / 2);
        let (_, &mut upper, _) = buf.select_nth_unstable_by(hi, f64::total_cmp);
        // The lower middle is the largest value left of the upper one.
        let lower = if lo == hi {
            upper
        } else {
            buf[..hi].iter().copied().fold(f64::NEG_INFINITY, f64::max)
        };
        Some((lower + upper) / 2.0)
    }

    /// The same values in a history of `capacity` (a power of two, at least [`HISTORY`]):
    /// the newest of them that it holds, in the slots it would have put them in.
    fn resized(&self, capacity: usize) -> History {
        let mut h = History {
            ring: vec![0.0; capacity],
            n: self.n,
        };
        let keep = self.held().min(capacity);
        for k in 0..keep {
            let i = h.slot(self.n - 1 - k as u64);
            h.ring[i] = self.ago(k);
        }
        h
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let len = self.ring.len();
        if len.is_power_of_two()
            && (HISTORY..=MAX_WINDOW + 1).contains(&len)
            && self.ring.iter().all(|v| v.is_finite())
        {
            Ok(())
        } else {
            Err("value history is damaged".into())
        }
    }
}

/// The last `len` values of a series (fewer at its start), in ascending order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sorted {
    len: usize,
    vals: Vec<f64>,
}

impl Sorted {
    /// An empty window of length `len` (1 ≤ len ≤ MAX_WINDOW).
    pub fn new(len: usize) -> Self {
        assert!(
            (1..=MAX_WINDOW).contains(&len),
            "window length {len} out of range"
        );
        Self {
            len,
            vals: Vec::with_capacity(len + 1),
        }
    }

    /// The window's length (how many values it holds once the series is that long).
    pub fn length(&self) -> usize {
        self.len
    }

    /// Takes in the newest value of `hist` (already pushed there) and lets the value that
    /// fell out of the window go. Equal values are interchangeable, so replacing any copy of
    /// the leaving value is exact.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn push(&mut self, hist: &History) {
        let new = hist.ago(0);
        if hist.count() <= self.len as u64 {
            self.insert(new);
            return;
        }
        // Replace in one move: shift only the entries between the leaving value's slot and
        // the new value's slot, instead of closing one gap and opening another.
        let old = hist.ago(self.len);
        let i = rank(&self.vals, old);
        let j = rank(&self.vals, new);
        if j <= i {
            shift_up(&mut self.vals, j, i);
            self.vals[j] = new;
        } else {
            shift_down(&mut self.vals, i, j);
            self.vals[j - 1] = new;
        }
    }

    /// Changes the window's length, adding older values from `hist` or dropping the oldest.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn resize(&mut self, len: usize, hist: &History) {
        assert!(
            (1..hist.capacity()).contains(&len),
            "window length {len} out of range"
        );
        let (have, want) = (self.vals.len(), len.min(hist.held()));
        for k in have..want {
            self.insert(hist.ago(k));
        }
        for k in (want..have).rev() {
            self.remove(hist.ago(k));
        }
        self.len = len;
    }

    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn insert(&mut self, x: f64) {
        self.vals.insert(rank(&self.vals, x), x);
    }

    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn remove(&mut self, x: f64) {
        let i = rank(&self.vals, x);
        debug_assert!(self.vals.get(i) == Some(&x), "leaving value not in window");
        self.vals.remove(i);
    }

    /// Smallest value; `None` when empty.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn min(&self) -> Option<f64> {
        self.vals.first().copied()
    }

    /// Median (mean of the two middle values when even); `None` when empty.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn median(&self) -> Option<f64> {
        let m = self.vals.len();
        match m {
            0 => None,
            _ if m % 2 == 1 => Some(self.vals[m / 2]),
            _ => Some((self.vals[m / 2 - 1] + self.vals[m / 2]) / 2.0),
        }
    }

    /// Sort the m values, drop ⌊frac·m⌋ from each end, average the rest (algorithms.md §1.1,
    /// forecasters 14 and 15).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn trimmed_mean(&self, frac: f64) -> Option<f64> {
        let m = self.vals.len();
        if m == 0 {
            return None;
        }
        let drop = (frac * m as f64).floor() as usize;
        let kept = &self.vals[drop..m - drop];
        Some(sum(kept) / kept.len() as f64)
    }

    /// Quantile `q` in 0..=1 by nearest rank.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let m = self.vals.len();
        if m == 0 {
            return None;
        }
        let r = ((q * (m - 1) as f64).round() as usize).min(m - 1);
        Some(self.vals[r])
    }

    pub(crate) fn validate(&self, hist: &History) -> Result<(), String> {
        let ok = (1..hist.capacity()).contains(&self.len)
            && self.vals.len() == self.len.min(hist.held())
            && self.vals.windows(2).all(|p| p[0] <= p[1])
            && self.vals.iter().all(|v| v.is_finite());
        if ok {
            Ok(())
        } else {
            Err(format!("sorted window of {} is damaged", self.len))
        }
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
    fn matches_naive_order_statistics_while_growing_and_shrinking() {
        let mut hist = History::default();
        let mut fixed: Vec<Sorted> = [1, 2, 5, 21, 31, 51].into_iter().map(Sorted::new).collect();
        let mut moving = Sorted::new(10);
        let mut all = Vec::new();
        let mut s: u64 = 7;
        for i in 0..500 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Few distinct values so that ties are exercised.
            let x = ((s >> 40) % 23) as f64 + if i % 7 == 0 { 0.5 } else { 0.0 };
            hist.push(x);
            all.push(x);
            for w in fixed.iter_mut().chain(std::iter::once(&mut moving)) {
                w.push(&hist);
            }
            // The moving window wanders between 1 and 56 as an adaptive median's would.
            let target = 1 + ((s >> 20) % 56) as usize;
            let step = if target > moving.length() { 5 } else { 1 };
            let next = if target > moving.length() {
                (moving.length() + step).min(56)
            } else {
                moving.length().saturating_sub(step).max(1)
            };
            moving.resize(next, &hist);
            for w in fixed.iter().chain(std::iter::once(&moving)) {
                let m = w.length().min(all.len());
                let tail = &all[all.len() - m..];
                assert_eq!(
                    w.median(),
                    Some(naive_median(tail)),
                    "median w={} i={i}",
                    w.length()
                );
                let t = w.trimmed_mean(0.3).unwrap();
                assert!((t - naive_trimmed(tail, 0.3)).abs() < 1e-9);
                w.validate(&hist).unwrap();
            }
            for w in [1, 2, 5, 31, 64, 80] {
                let m = w.min(all.len()).min(hist.capacity());
                let tail = &all[all.len() - m..];
                assert_eq!(hist.median_last(w), Some(naive_median(tail)), "w={w}");
            }
            assert_eq!(hist.last(), Some(x));
        }
    }

    #[test]
    fn tagged_suffix_medians_match_naive_ones() {
        let mut hist = History::default();
        let mut t = Tagged::new(56);
        let mut all = Vec::new();
        let mut s: u64 = 3;
        for i in 0..400u64 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = ((s >> 41) % 9) as f64;
            hist.push(x);
            t.push(&hist);
            all.push(x);
            t.validate(&hist).unwrap();
            for m in [1, 2, 5, 20, 46, 51, 56, 60] {
                let k = m.min(all.len()).min(56);
                let want = naive_median(&all[all.len() - k..]);
                assert_eq!(t.median_last(m), Some(want), "m={m} i={i}");
            }
            for ms in [
                [0, 26, 31],
                [21, 26, 31],
                [46, 51, 56],
                [9, 10, 0],
                [1, 2, 3],
            ] {
                let got = t.medians_last(ms);
                for (g, m) in got.into_iter().zip(ms) {
                    let want = (m > 0).then(|| t.median_last(m)).flatten();
                    assert_eq!(g, want, "ms={ms:?} i={i}");
                }
            }
        }
    }

    #[test]
    fn broadword_select_matches_a_naive_one() {
        let mut s: u64 = 11;
        for _ in 0..2000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = ((s as u128) << 64 | s.rotate_left(17) as u128) & (s as u128 | 0xF0F0);
            let ones: Vec<usize> = (0..128).filter(|&b| x >> b & 1 == 1).collect();
            for (k, &b) in ones.iter().enumerate() {
                assert_eq!(select128(x, k as u32), b, "{x:#x} k={k}");
            }
        }
        let ages = [0, 1, 5, 17, 64, 100, 126, 127, 3, 2, 99, 98, 0, 127, 60, 61];
        for m in 0..=127u8 {
            let want = ages
                .iter()
                .enumerate()
                .fold(0u16, |acc, (i, &a)| acc | u16::from(a < m) << i);
            assert_eq!(below16(&ages, m as i8), want, "m={m}");
        }
    }

    #[test]
    fn the_longest_tagged_window_reads_every_suffix_median() {
        let mut hist = History::for_windows(TAGGED_MAX);
        let mut t = Tagged::new(TAGGED_MAX);
        let mut all = Vec::new();
        let mut s: u64 = 5;
        for i in 0..600 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = ((s >> 40) % 50) as f64;
            hist.push(x);
            t.push(&hist);
            all.push(x);
            t.validate(&hist).unwrap();
            for m in [1, 2, 63, 64, 65, 100, 126, 127] {
                let k = m.min(all.len());
                let want = naive_median(&all[all.len() - k..]);
                assert_eq!(t.median_last(m), Some(want), "m={m} i={i}");
            }
        }
    }

    #[test]
    fn empty_windows_answer_none() {
        let w = Sorted::new(5);
        assert_eq!(w.median(), None);
        assert_eq!(w.trimmed_mean(0.3), None);
        assert_eq!(w.quantile(0.5), None);
        let h = History::default();
        assert_eq!(h.median_last(5), None);
        assert_eq!(h.last(), None);
    }

    #[test]
    fn quantile_uses_nearest_rank() {
        let mut h = History::default();
        let mut w = Sorted::new(5);
        for x in [5.0, 1.0, 4.0, 2.0, 3.0] {
            h.push(x);
            w.push(&h);
        }
        assert_eq!(w.quantile(0.0), Some(1.0));
        assert_eq!(w.quantile(1.0), Some(5.0));
        assert_eq!(w.quantile(0.5), Some(3.0));
    }
}

/// Moves `v[from..to]` one slot up (to `v[from + 1..=to]`). Shifts here are short (a new
/// value usually lands near the one it replaces), where an element loop beats a call to
/// memmove; long ones still go to `copy_within`.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn shift_up<T: Copy>(v: &mut [T], from: usize, to: usize) {
    if to - from > 16 {
        v.copy_within(from..to, from + 1);
    } else {
        for k in (from..to).rev() {
            v[k + 1] = v[k];
        }
    }
}

/// Moves `v[from + 1..to]` one slot down (to `v[from..to - 1]`); see [`shift_up`].
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn shift_down<T: Copy>(v: &mut [T], from: usize, to: usize) {
    if to - from > 17 {
        v.copy_within(from + 1..to, from);
    } else {
        for k in from + 1..to {
            v[k - 1] = v[k];
        }
    }
}

/// Number of values below `x`: where `x` goes in sorted `vals`. Short windows count with a
/// branch-free (vectorised) pass; long ones use a binary search whose steps are conditional
/// moves, not branches, since a mispredicted branch costs more than the comparisons saved.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn rank(vals: &[f64], x: f64) -> usize {
    if vals.len() <= 32 {
        return vals.iter().map(|&v| (v < x) as usize).sum();
    }
    let (mut base, mut size) = (0, vals.len());
    while size > 1 {
        let half = size / 2;
        base = if vals[base + half - 1] < x {
            base + half
        } else {
            base
        };
        size -= half;
    }
    base + (vals[base] < x) as usize
}

/// Number of values at most `x` (see [`rank`]).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn rank_le(vals: &[f64], x: f64) -> usize {
    if vals.len() <= 32 {
        return vals.iter().map(|&v| (v <= x) as usize).sum();
    }
    let (mut base, mut size) = (0, vals.len());
    while size > 1 {
        let half = size / 2;
        base = if vals[base + half - 1] <= x {
            base + half
        } else {
            base
        };
        size -= half;
    }
    base + (vals[base] <= x) as usize
}

/// Sum with four running partial sums, so the additions overlap instead of each waiting for
/// the previous one. The order is fixed, so results are reproducible on every platform.
#[cfg_attr(target_arch = "x86_64", inline(always))]
pub fn sum(vals: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let chunks = vals.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..4 {
            acc[k] += c[k];
        }
    }
    let tail: f64 = rest.iter().sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The last `cap` (at most [`TAGGED_MAX`]) values in ascending order, each tagged with its
/// age (0 for the newest), so that order statistics of any suffix (the last m ≤ cap values)
/// can be read. Adaptive medians use one of these for all their candidate windows instead of
/// a sorted window each.
///
/// The ages are bytes, eight to a machine word, so that the questions are a few word
/// operations instead of a walk over the entries: all ages grow by one in one addition per
/// word; the entries of the last m values are those with age < m, found as a bit mask by a
/// per-byte comparison; a median is the entry at a given rank among the mask's bits, found
/// by the broadword select of Vigna (2008, "Broadword implementation of rank/select
/// queries", §5).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tagged {
    cap: usize,
    vals: Vec<f64>,
    /// Age of each entry of `vals`, in the same order; bytes past `vals.len()` are unused.
    ages: Vec<u8>,
}

/// The longest [`Tagged`] window (ages and masks fit in 128 bits).
pub const TAGGED_MAX: usize = 127;

const BYTES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Bit i set where byte i of `ages` is below `m`; ages and m at most 127. One comparison
/// of sixteen bytes and one gathering of their sign bits (SSE2's pcmpgtb and pmovmskb, part
/// of x86-64's baseline; simd128's i8x16.lt_s and i8x16.bitmask in WebAssembly).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn below16(ages: &[u8; 16], m: i8) -> u16 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cmplt_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi64x};
        let lo = i64::from_le_bytes(ages[..8].try_into().expect("8 bytes"));
        let hi = i64::from_le_bytes(ages[8..].try_into().expect("8 bytes"));
        // SAFETY: SSE2 is part of x86-64's baseline, so every x86-64 processor has these
        // instructions; they read only their register arguments.
        unsafe {
            let lt = _mm_cmplt_epi8(_mm_set_epi64x(hi, lo), _mm_set1_epi8(m));
            _mm_movemask_epi8(lt) as u16
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use std::arch::wasm32::{i8x16_bitmask, i8x16_lt, i8x16_splat, u64x2};
        let lo = u64::from_le_bytes(ages[..8].try_into().expect("8 bytes"));
        let hi = u64::from_le_bytes(ages[8..].try_into().expect("8 bytes"));
        i8x16_bitmask(i8x16_lt(u64x2(lo, hi), i8x16_splat(m)))
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    {
        let mut bits = 0;
        for (b, &age) in ages.iter().enumerate() {
            bits |= u16::from((age as i8) < m) << b;
        }
        bits
    }
}

/// Position of the set bit of rank `k` (0-based) in `x`, which has more than k set bits
/// (Vigna 2008, §5: byte counts by the sideways addition, their prefix sums by one
/// multiplication, the byte by one comparison, the bit within it from a table).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn select64(x: u64, k: u32) -> u32 {
    let mut c = x - ((x >> 1) & 0x5555_5555_5555_5555);
    c = (c & 0x3333_3333_3333_3333) + ((c >> 2) & 0x3333_3333_3333_3333);
    c = (c + (c >> 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    // Byte i of `prefix`: set bits in bytes 0..=i (at most 64).
    let prefix = c.wrapping_mul(BYTES);
    // High bit of each byte whose prefix exceeds k.
    let past = (prefix + (0x80 - (k as u64 + 1)) * BYTES) & HIGH;
    let byte = past.trailing_zeros() / 8;
    let before = ((prefix << 8) >> (8 * byte)) & 0xFF;
    let bits = (x >> (8 * byte)) & 0xFF;
    8 * byte + u32::from(SELECT_IN_BYTE[bits as usize][(k as u64 - before) as usize])
}

/// `SELECT_IN_BYTE[b][r]`: the position of the set bit of rank r in byte b (a table instead
/// of clearing r lower bits one at a time, a loop whose exit the processor mispredicts).
const SELECT_IN_BYTE: [[u8; 8]; 256] = {
    let mut table = [[8u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let (mut rank, mut bit) = (0, 0);
        while bit < 8 {
            if b >> bit & 1 == 1 {
                table[b][rank] = bit as u8;
                rank += 1;
            }
            bit += 1;
        }
        b += 1;
    }
    table
};

/// [`select64`] over a 128-bit mask.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn select128(x: u128, k: u32) -> usize {
    let low = x as u64;
    let n = low.count_ones();
    if k < n {
        select64(low, k) as usize
    } else {
        64 + select64((x >> 64) as u64, k - n) as usize
    }
}

impl Tagged {
    pub fn new(cap: usize) -> Self {
        assert!(
            (1..=TAGGED_MAX).contains(&cap),
            "window length {cap} out of range"
        );
        Self {
            cap,
            vals: Vec::with_capacity(cap + 1),
            ages: vec![0; TAGGED_MAX + 1],
        }
    }

    /// Ages every entry by one.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn age(&mut self) {
        let words = self.vals.len().div_ceil(8);
        for w in self.ages.chunks_exact_mut(8).take(words) {
            // No byte carries into the next: ages stay below 128 (bytes past the entries
            // may hold anything; a carry out of them only reaches bytes past them too).
            let v = u64::from_le_bytes(w.try_into().expect("8 bytes")).wrapping_add(BYTES);
            w.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Takes in the newest value of `hist` and drops the one that left the window.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn push(&mut self, hist: &History) {
        let x = hist.ago(0);
        self.age();
        let held = self.vals.len();
        // Equal values are interchangeable for order statistics: any slot among them does.
        let j = rank_le(&self.vals, x);
        if held < self.cap {
            self.vals.insert(j, x);
            self.ages.copy_within(j..held, j + 1);
            self.ages[j] = 0;
            return;
        }
        // The leaving entry is the one now aged `cap`; among equal values, find it.
        let old = hist.ago(self.cap);
        let mut i = rank(&self.vals, old);
        while self.ages[i] as usize != self.cap {
            i += 1;
        }
        // Replace in one move, shifting only the entries between the two slots.
        let k = if j <= i {
            shift_up(&mut self.vals, j, i);
            shift_up(&mut self.ages, j, i);
            j
        } else {
            shift_down(&mut self.vals, i, j);
            shift_down(&mut self.ages, i, j);
            j - 1
        };
        self.vals[k] = x;
        self.ages[k] = 0;
    }

    /// Bit i set where entry i is among the last m values, for each of `ms`.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn masks(&self, ms: [usize; 3]) -> [u128; 3] {
        let held = self.vals.len();
        let mut out = [0u128; 3];
        // Sixteen ages at a time: one byte comparison and one gathering of its sign bits.
        for (c, chunk) in self
            .ages
            .chunks_exact(16)
            .take(held.div_ceil(16))
            .enumerate()
        {
            let chunk: &[u8; 16] = chunk.try_into().expect("16 bytes");
            for (mask, &m) in out.iter_mut().zip(&ms) {
                *mask |= u128::from(below16(chunk, m as i8)) << (16 * c);
            }
        }
        let used = if held >= 128 {
            u128::MAX
        } else {
            (1u128 << held) - 1
        };
        for o in out.iter_mut() {
            *o &= used;
        }
        out
    }

    /// Median of the last min(m, held) values.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn median_last(&self, m: usize) -> Option<f64> {
        self.medians_last([m, 0, 0])[0]
    }

    /// [`median_last`](Self::median_last) for three suffix lengths (an adaptive median's
    /// three candidate windows); lengths of 0 answer `None`.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn medians_last(&self, ms: [usize; 3]) -> [Option<f64>; 3] {
        let held = self.vals.len();
        let ms = ms.map(|m| m.min(held));
        let masks = self.masks(ms);
        // A loop rather than `array::from_fn`, whose closure the compiler keeps out of line.
        let mut out = [None; 3];
        for ((slot, &m), &mask) in out.iter_mut().zip(&ms).zip(&masks) {
            if m == 0 {
                continue;
            }
            let (lo, hi) = ((m - 1) / 2, m / 2);
            if m == held {
                *slot = Some((self.vals[lo] + self.vals[hi]) / 2.0);
                continue;
            }
            let a = select128(mask, lo as u32);
            let b = if hi == lo {
                a
            } else {
                // The next set bit above a.
                (mask >> (a + 1)).trailing_zeros() as usize + a + 1
            };
            *slot = Some((self.vals[a] + self.vals[b]) / 2.0);
        }
        out
    }

    pub(crate) fn validate(&self, hist: &History) -> Result<(), String> {
        let held = self.vals.len();
        let mut seen = [false; TAGGED_MAX + 1];
        let distinct = self.ages.get(..held).is_some_and(|ages| {
            ages.iter().all(|&a| {
                let fresh = (a as usize) < self.cap && !seen[a as usize];
                if fresh {
                    seen[a as usize] = true;
                }
                fresh
            })
        });
        let ok = (1..=TAGGED_MAX).contains(&self.cap)
            && self.cap < hist.capacity()
            && held == self.cap.min(hist.held())
            && self.ages.len() == TAGGED_MAX + 1
            && distinct
            && self.vals.windows(2).all(|p| p[0] <= p[1])
            && self.vals.iter().all(|v| v.is_finite());
        if ok {
            Ok(())
        } else {
            Err("tagged window is damaged".into())
        }
    }
}

/// A series' history plus one sorted window per fixed length the forecasters ask about.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Windows {
    pub hist: History,
    fixed: Vec<Sorted>,
}

impl Windows {
    /// Windows for the given lengths (duplicates are kept once).
    pub fn new(lens: &[usize]) -> Self {
        let mut lens = lens.to_vec();
        lens.sort_unstable();
        lens.dedup();
        Self {
            hist: History::for_windows(lens.last().copied().unwrap_or(0)),
            fixed: lens.into_iter().map(Sorted::new).collect(),
        }
    }

    /// Appends `x` to the history and to every fixed window.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn push(&mut self, x: f64) {
        self.hist.push(x);
        for w in &mut self.fixed {
            w.push(&self.hist);
        }
    }

    /// The windows of the lengths `lens` (each one held here), over the same values: what
    /// [`Windows::new`] would hold for them after the same pushes.
    pub fn subset(&self, lens: &[usize]) -> Windows {
        let mut w = Windows::new(lens);
        w.hist = self.hist.resized(w.hist.capacity());
        for sorted in &mut w.fixed {
            *sorted = self.at(self.index_of(sorted.length())).clone();
        }
        w
    }

    /// Index of the fixed window of length `len`, which must have been asked for in
    /// [`Windows::new`]; read it with [`Windows::at`].
    pub fn index_of(&self, len: usize) -> usize {
        self.fixed
            .iter()
            .position(|w| w.length() == len)
            .expect("window length registered at construction")
    }

    /// The fixed window at `index`.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn at(&self, index: usize) -> &Sorted {
        &self.fixed[index]
    }

    /// Number of fixed windows.
    pub fn count(&self) -> usize {
        self.fixed.len()
    }

    pub(crate) fn validate(&self, needed: &[usize]) -> Result<(), String> {
        self.hist.validate()?;
        for w in &self.fixed {
            w.validate(&self.hist)?;
        }
        if needed
            .iter()
            .all(|&l| self.fixed.iter().any(|w| w.length() == l))
        {
            Ok(())
        } else {
            Err("a forecaster's window is missing".into())
        }
    }
}
