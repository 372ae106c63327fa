//! State and update rules of the primary forecasters (algorithms.md §1.1).
//!
//! Window-based primaries read the shared [`Windows`] (history plus one sorted window per
//! fixed length); adaptive medians keep sorted windows of their own, since theirs move.

use crate::method::Rule;
use crate::window::{Sorted, Tagged, Windows};
use serde::{Deserialize, Serialize};

/// Fixed window lengths the rules ask the shared [`Windows`] for.
pub fn fixed_windows(rules: &[Rule], faithful: bool) -> Vec<usize> {
    let mut lens = Vec::new();
    for rule in rules {
        match *rule {
            Rule::Median(w)
            | Rule::TrimmedMean(w)
            | Rule::Quantile(w, _)
            | Rule::Remedian(w, _) => lens.push(w),
            // Faithful adaptive medians read the last `max` values (their forecast until
            // that many arrived, and their smallest) and the median of the last `step`.
            Rule::AdaptiveMedian(_, _, max, step) if faithful => {
                lens.push(max);
                if step > 1 {
                    lens.push(step);
                }
            }
            _ => {}
        }
    }
    lens
}

/// Whether `rule`'s forecasts depend on the bank's mode. Only the adaptive medians' do (the
/// original's rule or the intended one, [`State::new`]); any other rule forecasts the same
/// in both modes from the same values, which lets banks in different modes share it
/// ([`crate::Primaries::join`]).
pub(crate) fn depends_on_mode(rule: &Rule) -> bool {
    matches!(rule, Rule::AdaptiveMedian(..))
}

/// Per-forecaster state that does not live in the shared window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum State {
    Stateless,
    /// Index of the shared fixed window the rule reads.
    Fixed(usize),
    /// Running sum for the running mean.
    Sum(f64),
    /// Sum of the last `w` values for a sliding mean, and steps until it is re-added exactly.
    Window(f64, usize),
    /// Current smoothed prediction.
    Smooth(f64),
    Adaptive(AdaptiveMedian),
    Remedian(Remedian),
    Ar1(Ar1),
}

/// An [`Rule::Ar1`]'s statistics: the level, the variance of the deviations from it, their
/// lag-one covariance, and the last deviation.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Ar1 {
    level: f64,
    var: f64,
    cov: f64,
    dev: f64,
}

impl Ar1 {
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn step(&mut self, g: f64, x: f64, n: u64) -> f64 {
        if n == 1 {
            *self = Ar1 {
                level: x,
                ..Ar1::default()
            };
            return x;
        }
        let k = g.max(1.0 / n as f64);
        self.level += k * (x - self.level);
        let d = x - self.level;
        self.var += k * (d * d - self.var);
        self.cov += k * (d * self.dev - self.cov);
        self.dev = d;
        let phi = if self.var > 0.0 {
            (self.cov / self.var).clamp(-0.99, 0.99)
        } else {
            0.0
        };
        self.level + phi * d
    }

    fn is_finite(&self) -> bool {
        [self.level, self.var, self.cov, self.dev]
            .iter()
            .all(|v| v.is_finite())
    }
}

/// A remedian's state: the medians of its window at the last (count − 1)·w + 1 steps, so
/// that those of the last `count` consecutive windows (lags 0, w, 2w, …) can be read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Remedian {
    /// Index of the shared fixed window whose median it reads.
    window: usize,
    w: usize,
    count: usize,
    /// Ring of past window medians, the number pushed and the newest one's slot.
    past: Vec<f64>,
    pushed: u64,
    newest: usize,
}

impl Remedian {
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn step(&mut self, windows: &Windows) -> Option<f64> {
        let m = windows.at(self.window).median()?;
        let len = self.past.len();
        // The newest median goes to the slot after the previous one's.
        let newest = if self.pushed == 0 || self.newest + 1 == len {
            0
        } else {
            self.newest + 1
        };
        self.newest = newest;
        self.past[newest] = m;
        self.pushed += 1;
        // The medians of the last `count` windows that have ended (fewer at the start).
        let k = if self.pushed >= len as u64 {
            self.count
        } else {
            ((self.pushed - 1) / self.w as u64 + 1) as usize
        };
        let mut v = [0.0; REMEDIAN_MAX];
        let mut at = newest;
        for slot in v.iter_mut().take(k) {
            *slot = self.past[at];
            at = if at >= self.w {
                at - self.w
            } else {
                at + len - self.w
            };
        }
        if k == 9 {
            return Some(median9(v[..9].try_into().expect("nine")));
        }
        // Insertion sort: a handful of values (while the first windows fill).
        let v = &mut v[..k];
        for i in 1..k {
            let x = v[i];
            let mut j = i;
            while j > 0 && v[j - 1] > x {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = x;
        }
        Some((v[(k - 1) / 2] + v[k / 2]) / 2.0)
    }
}

/// Median of nine values by the 19-exchange network of Paeth (as in Devillard 1998, "Fast
/// median search: an ANSI C implementation", opt_med9), with min and max for the
/// exchanges: no branches to mispredict.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn median9(mut p: [f64; 9]) -> f64 {
    let mut sort = |a: usize, b: usize| {
        let (lo, hi) = (p[a].min(p[b]), p[a].max(p[b]));
        p[a] = lo;
        p[b] = hi;
    };
    for (a, b) in [
        (1, 2),
        (4, 5),
        (7, 8),
        (0, 1),
        (3, 4),
        (6, 7),
        (1, 2),
        (4, 5),
        (7, 8),
        (0, 3),
        (5, 8),
        (4, 7),
        (3, 6),
        (1, 4),
        (2, 5),
        (4, 7),
        (4, 2),
        (6, 4),
        (4, 2),
    ] {
        sort(a, b);
    }
    p[4]
}

/// The most windows a remedian takes the median of.
pub const REMEDIAN_MAX: usize = 15;

impl State {
    /// Initial state of `rule`; `windows` must hold the lengths [`fixed_windows`] asked for.
    pub fn new(rule: &Rule, faithful: bool, windows: &Windows) -> Self {
        match *rule {
            Rule::Median(w) | Rule::TrimmedMean(w) | Rule::Quantile(w, _) => {
                State::Fixed(windows.index_of(w))
            }
            Rule::RunningMean => State::Sum(0.0),
            Rule::SlidingMean(_) => State::Window(0.0, 0),
            // The original starts every smoother at 0 (algorithms.md §1.1, faithful quirk).
            Rule::ExpSmooth(_) => State::Smooth(0.0),
            Rule::AdaptiveMedian(start, min, max, step) => State::Adaptive(AdaptiveMedian::new(
                start, min, max, step, faithful, windows,
            )),
            Rule::Remedian(w, count) => {
                assert!(
                    (1..=REMEDIAN_MAX).contains(&count),
                    "remedian of {count} windows"
                );
                State::Remedian(Remedian {
                    window: windows.index_of(w),
                    w,
                    count,
                    past: vec![0.0; (count - 1) * w + 1],
                    pushed: 0,
                    newest: 0,
                })
            }
            Rule::Ar1(_) => State::Ar1(Ar1::default()),
            _ => State::Stateless,
        }
    }

    /// This state for `to`, a set of windows holding the same values as `from` (the one it
    /// reads now), with every window it reads.
    pub(crate) fn reindexed(&self, from: &Windows, to: &Windows) -> State {
        let moved = |i: usize| to.index_of(from.at(i).length());
        let mut s = self.clone();
        match &mut s {
            State::Fixed(i) => *i = moved(*i),
            State::Remedian(r) => r.window = moved(r.window),
            State::Adaptive(AdaptiveMedian {
                rule:
                    Adapt::Original {
                        max_window,
                        step_window,
                        ..
                    },
                ..
            }) => {
                *max_window = moved(*max_window);
                *step_window = step_window.map(moved);
            }
            _ => {}
        }
        s
    }
}

/// Median over a window that moves to whichever neighbouring window would have forecast the
/// last value best (algorithms.md §1.1, "Adaptive window").
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AdaptiveMedian {
    min: usize,
    max: usize,
    step: usize,
    /// Current window.
    pub win: usize,
    rule: Adapt,
}

/// How the window adapts: the intended rule (improved mode) or the original's (faithful).
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Adapt {
    /// Improved: after each value, compare the squared errors that the medians over win−step,
    /// win and win+step made (forecasts made before the value) and move by `step` to the
    /// best, within [min, max]. `recent` holds the last max+step values, from which every
    /// candidate's median is read; `candidates` are those forecasts for the next value.
    Intended {
        recent: Tagged,
        candidates: Option<[Option<f64>; 3]>,
    },
    /// Faithful: the original library's rule, reconstructed from its full state over 2,000
    /// values (`tests/golden.rs`, `nws-golden-long.csv`). See [`AdaptiveMedian::faithful_step`].
    Original {
        /// The last `win` values, sorted.
        window: Sorted,
        /// Shared fixed windows of lengths `max` and `step` (None when `step` is 1).
        max_window: usize,
        step_window: Option<usize>,
        current: Option<f64>,
    },
}

impl AdaptiveMedian {
    fn new(
        start: usize,
        min: usize,
        max: usize,
        step: usize,
        faithful: bool,
        windows: &Windows,
    ) -> Self {
        let rule = if faithful {
            Adapt::Original {
                window: Sorted::new(start),
                max_window: windows.index_of(max),
                step_window: (step > 1).then(|| windows.index_of(step)),
                current: None,
            }
        } else {
            Adapt::Intended {
                recent: Tagged::new(max + step),
                candidates: None,
            }
        };
        Self {
            min,
            max,
            step,
            win: start,
            rule,
        }
    }

    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn observe(&mut self, x: f64, windows: &Windows) {
        match &self.rule {
            Adapt::Intended { .. } => self.intended_step(x, windows),
            Adapt::Original { .. } => self.faithful_step(x, windows),
        }
    }

    /// The intended rule: score the candidates' forecasts made before `x`, move by `step`,
    /// then forecast with the new window and its neighbours.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn intended_step(&mut self, x: f64, windows: &Windows) {
        let Adapt::Intended { recent, candidates } = &mut self.rule else {
            unreachable!("intended_step on an original-rule median")
        };
        if let Some(c) = *candidates {
            let err = |f: Option<f64>| f.map_or(f64::INFINITY, |f| (x - f) * (x - f));
            let (lo, mid, hi) = (err(c[0]), err(c[1]), err(c[2]));
            if lo < mid && lo < hi {
                self.win -= self.step;
            } else if hi < mid {
                self.win += self.step;
            }
            self.win = self.win.clamp(self.min, self.max);
        }
        let hist = &windows.hist;
        recent.push(hist);
        // A candidate outside [min, max] would be clamped back to win: leave it out.
        let lo = if self.win >= self.min + self.step {
            self.win - self.step
        } else {
            0
        };
        let hi = if self.win + self.step <= self.max {
            self.win + self.step
        } else {
            0
        };
        *candidates = Some(recent.medians_last([lo, self.win, hi]));
    }

    /// The original library's rule, quirks included, as its state over the long golden
    /// trace shows it (every step of forecasters 16 and 17 reproduced):
    /// - until `max` values have arrived, the forecast is the median of all of them;
    /// - from then on, once per value `x` (already in the history): the three candidates are
    ///   scored *after* `x` is in them, as |x − candidate|; the smaller candidate is
    ///   m(`step`) instead of the median over win−step, and so is the larger one while
    ///   win+step ≤ max, else m(max − win − 1); the middle one is the median of the last
    ///   `win` values. Here m(n) is the median of the newest n values for n ≥ 2, the
    ///   smallest of the last `max` values for n = 1 (the original reads the first slot of
    ///   the buffer it has just sorted), and 0 for n ≤ 0 (a median of nothing);
    /// - the window moves by one, not by `step`: down if the smaller candidate is strictly
    ///   best, else up if the larger one beats the middle; it is capped at `max` and, as in
    ///   the original, not held above `min`;
    /// - the forecast is the median of the last `win` values with the new window.
    ///
    /// Since both candidates equal m(`step`) while win+step ≤ max, the window only grows
    /// until it nears `max`, where it then wanders (algorithms.md §1.1, faithful quirk).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn faithful_step(&mut self, x: f64, windows: &Windows) {
        let (max, step, win) = (self.max as isize, self.step as isize, self.win as isize);
        let Adapt::Original {
            window,
            max_window,
            step_window,
            current,
        } = &mut self.rule
        else {
            unreachable!("faithful_step on an intended-rule median")
        };
        let (max_window, step_window) = (*max_window, *step_window);
        let hist = &windows.hist;
        window.push(hist);
        let all = windows.at(max_window);
        if hist.count() < max as u64 {
            *current = all.median();
            return;
        }
        let m = |n: isize| -> f64 {
            match n {
                n if n >= 2 && n == step => match step_window {
                    Some(i) => windows.at(i).median(),
                    None => hist.median_last(n as usize),
                },
                n if n >= 2 => hist.median_last(n as usize),
                1 => all.min(),
                _ => Some(0.0),
            }
            .unwrap_or(0.0)
        };
        let lo = m(step);
        let hi = m(if win + step <= max {
            step
        } else {
            max - win - 1
        });
        let mid = window.median().unwrap_or(0.0);
        let err = |f: f64| (x - f).abs();
        let (lo, hi, mid) = (err(lo), err(hi), err(mid));
        let next = if lo < mid && lo < hi {
            win - 1
        } else if hi < mid {
            win + 1
        } else {
            win
        };
        // The original has no lower bound; one value is the least a median can use.
        let next = next.clamp(1, max) as usize;
        if next != window.length() {
            window.resize(next, hist);
        }
        *current = window.median();
        self.win = next;
    }

    /// The median over the current window, computed when the last value arrived.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn current(&self) -> Option<f64> {
        match &self.rule {
            Adapt::Intended { candidates, .. } => candidates.and_then(|c| c[1]),
            Adapt::Original { current, .. } => *current,
        }
    }
}

/// Takes the new value `x` into `state` and returns the rule's forecast of the next value.
/// `windows` already hold `x`; `n` counts the values including `x`.
#[cfg_attr(target_arch = "x86_64", inline(always))]
pub fn step(rule: &Rule, state: &mut State, x: f64, n: u64, windows: &Windows) -> Option<f64> {
    match (rule, state) {
        (Rule::LastValue, _) => Some(x),
        (Rule::RunningMean, State::Sum(s)) => {
            *s += x;
            Some(*s / n as f64)
        }
        (Rule::SlidingMean(w), State::Window(sum, lap)) => {
            let hist = &windows.hist;
            if n <= *w as u64 {
                // Filling: the same additions in the same order as the running mean's sum,
                // so the two tie exactly (lower index wins, as in the original).
                *sum += x;
            } else if *lap == 0 {
                // Re-add the window once per length, so subtraction residue cannot build up.
                *sum = (0..*w).rev().fold(0.0, |a, k| a + hist.ago(k));
                *lap = *w;
            } else {
                *sum += x - hist.ago(*w);
            }
            *lap = lap.saturating_sub(1);
            Some(*sum / (*w as u64).min(n) as f64)
        }
        (Rule::ExpSmooth(g), State::Smooth(pred)) => {
            *pred = if n == 1 { x } else { *pred + g * (x - *pred) };
            Some(*pred)
        }
        (Rule::Median(_), State::Fixed(i)) => windows.at(*i).median(),
        (Rule::TrimmedMean(_), State::Fixed(i)) => windows.at(*i).trimmed_mean(0.3),
        (Rule::Quantile(_, q), State::Fixed(i)) => windows.at(*i).quantile(*q),
        (Rule::Remedian(..), State::Remedian(r)) => r.step(windows),
        (Rule::Ar1(g), State::Ar1(a)) => Some(a.step(*g, x, n)),
        (Rule::AdaptiveMedian(..), State::Adaptive(a)) => {
            a.observe(x, windows);
            a.current()
        }
        _ => None,
    }
}

/// Checks a restored adaptive median's own window against the history.
pub(crate) fn validate(state: &State, windows: &Windows) -> Result<(), String> {
    let held = |i: &usize| *i < windows.count();
    if let State::Fixed(i) = state {
        if !held(i) {
            return Err("a forecaster's window is missing".into());
        }
    }
    if let State::Ar1(a) = state {
        if !a.is_finite() {
            return Err("an autoregression's state is damaged".into());
        }
    }
    if let State::Remedian(r) = state {
        let ok = held(&r.window)
            && (1..=REMEDIAN_MAX).contains(&r.count)
            && r.w >= 1
            && r.past.len() == (r.count - 1) * r.w + 1
            && r.newest < r.past.len()
            && r.past.iter().all(|v| v.is_finite());
        if !ok {
            return Err("a remedian's state is damaged".into());
        }
    }
    if let State::Adaptive(a) = state {
        if a.win > a.max || a.win == 0 || a.step == 0 {
            return Err("adaptive median window is inconsistent".into());
        }
        match &a.rule {
            Adapt::Intended { recent, .. } => recent.validate(&windows.hist)?,
            Adapt::Original {
                window,
                max_window,
                step_window,
                ..
            } => {
                if !std::iter::once(max_window).chain(step_window).all(held) {
                    return Err("an adaptive median's window is missing".into());
                }
                if window.length() != a.win {
                    return Err("adaptive median window is inconsistent".into());
                }
                window.validate(&windows.hist)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        let m = v.len();
        (v[(m - 1) / 2] + v[m / 2]) / 2.0
    }

    #[test]
    fn the_nine_value_network_finds_the_median() {
        let mut s: u64 = 7;
        for _ in 0..5000 {
            let mut v = [0.0; 9];
            for x in v.iter_mut() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                *x = ((s >> 40) % 12) as f64;
            }
            assert_eq!(median9(v), median(&mut v.clone()), "{v:?}");
        }
    }

    /// On a series that is an AR(1) around a level (x − 10 = 0.8·(x₋₁ − 10) + noise), the
    /// estimate of φ settles near 0.8 and the one-step forecasts beat both the last value
    /// and the running mean; on noise without memory φ stays near 0, and on a constant the
    /// forecast is the constant.
    #[test]
    fn ar1_finds_the_autocorrelation_and_forecasts_with_it() {
        let rule = Rule::Ar1(0.01);
        let windows = Windows::new(&[]);
        let mut s: u64 = 11;
        let mut noise = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            // The sum of four uniforms on [-0.5, 0.5): zero mean, variance 1/3.
            (0..4)
                .map(|k| ((s >> (8 + 14 * k)) & 0x3fff) as f64 / 16384.0 - 0.5)
                .sum::<f64>()
        };
        for phi in [0.8, 0.0] {
            let mut state = State::new(&rule, false, &windows);
            let (mut x, mut sum) = (10.0, 0.0);
            let (mut prev_fc, mut prev_x) = (None::<f64>, 0.0);
            let (mut e_ar, mut e_last, mut e_mean, mut est) = (0.0, 0.0, 0.0, 0.0);
            for n in 1..=20_000u64 {
                x = 10.0 + phi * (x - 10.0) + noise();
                if let Some(f) = prev_fc {
                    if n > 1_000 {
                        e_ar += (x - f) * (x - f);
                        e_last += (x - prev_x) * (x - prev_x);
                        let m = sum / (n - 1) as f64;
                        e_mean += (x - m) * (x - m);
                    }
                }
                sum += x;
                prev_x = x;
                prev_fc = step(&rule, &mut state, x, n, &windows);
                validate(&state, &windows).unwrap();
                if n > 10_000 {
                    let State::Ar1(a) = &state else { panic!() };
                    est += a.cov / a.var / 10_000.0;
                }
            }
            // The estimate over the second half (one estimate, from the last ~100 values, wanders
            // by ±0.1).
            assert!((est - phi).abs() < 0.05, "φ {phi}: estimated {est}");
            if phi > 0.0 {
                // The best possible is the noise itself (1/3 a value); last value loses 11 %.
                assert!(
                    e_ar < 0.95 * e_last && e_ar < 0.6 * e_mean,
                    "{e_ar} {e_last} {e_mean}"
                );
            } else {
                assert!(
                    e_ar < 0.6 * e_last && e_ar < 1.03 * e_mean,
                    "{e_ar} {e_last} {e_mean}"
                );
            }
        }
        let mut state = State::new(&rule, false, &windows);
        for n in 1..=50 {
            assert_eq!(step(&rule, &mut state, 4.5, n, &windows), Some(4.5));
        }
    }

    #[test]
    fn remedian_is_the_median_of_the_last_windows_medians() {
        for (w, count) in [(5, 3), (4, 9)] {
            let rule = Rule::Remedian(w, count);
            let mut windows = Windows::new(&fixed_windows(&[rule], false));
            let mut state = State::new(&rule, false, &windows);
            let (mut xs, mut meds) = (Vec::new(), Vec::new());
            let mut s: u64 = 3;
            for n in 1..=200u64 {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                let x = ((s >> 35) % 40) as f64;
                xs.push(x);
                windows.push(x);
                let k = xs.len().min(w);
                meds.push(median(&mut xs[xs.len() - k..].to_vec()));
                let mut last: Vec<f64> = (0..count)
                    .map(|c| c * w)
                    .filter(|&lag| lag < meds.len())
                    .map(|lag| meds[meds.len() - 1 - lag])
                    .collect();
                let want = median(&mut last);
                assert_eq!(step(&rule, &mut state, x, n, &windows), Some(want), "n={n}");
                validate(&state, &windows).unwrap();
            }
        }
    }

    #[test]
    fn intended_adaptive_median_follows_its_rule_over_naive_windows() {
        for rule in [
            Rule::AdaptiveMedian(10, 5, 21, 1),
            Rule::AdaptiveMedian(30, 21, 51, 5),
        ] {
            let Rule::AdaptiveMedian(start, min, max, step) = rule else {
                unreachable!()
            };
            let mut windows = Windows::new(&fixed_windows(&[rule], false));
            let mut state = State::new(&rule, false, &windows);
            let (mut xs, mut win, mut cands): (Vec<f64>, usize, Option<[Option<f64>; 3]>) =
                (Vec::new(), start, None);
            let mut moves = 0;
            let mut s: u64 = 9;
            for n in 1..=3000u64 {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                // A level that shifts now and then, so that the window moves both ways.
                let level = if (n / 400) % 2 == 0 { 10.0 } else { 30.0 };
                let x = level + ((s >> 40) % 17) as f64;
                // The rule, naively: score the candidates made before x, move, then forecast.
                if let Some(c) = cands {
                    let err = |f: Option<f64>| f.map_or(f64::INFINITY, |f| (x - f) * (x - f));
                    let before = win;
                    if err(c[0]) < err(c[1]) && err(c[0]) < err(c[2]) {
                        win -= step;
                    } else if err(c[2]) < err(c[1]) {
                        win += step;
                    }
                    win = win.clamp(min, max);
                    moves += (win != before) as u32;
                }
                xs.push(x);
                let m = |len: usize| {
                    let k = len.min(xs.len());
                    median(&mut xs[xs.len() - k..].to_vec())
                };
                let lo = (win >= min + step).then(|| m(win - step));
                let hi = (win + step <= max).then(|| m(win + step));
                cands = Some([lo, Some(m(win)), hi]);
                windows.push(x);
                assert_eq!(
                    super::step(&rule, &mut state, x, n, &windows),
                    Some(m(win)),
                    "n={n}"
                );
                validate(&state, &windows).unwrap();
            }
            assert!(moves > 20, "{rule:?}: the window moved only {moves} times");
        }
    }
}
