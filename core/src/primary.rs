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
            Rule::Median(w) | Rule::TrimmedMean(w) | Rule::Quantile(w, _) => lens.push(w),
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
}

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
            _ => State::Stateless,
        }
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

    fn observe(&mut self, x: f64, windows: &Windows) {
        match &self.rule {
            Adapt::Intended { .. } => self.intended_step(x, windows),
            Adapt::Original { .. } => self.faithful_step(x, windows),
        }
    }

    /// The intended rule: score the candidates' forecasts made before `x`, move by `step`,
    /// then forecast with the new window and its neighbours.
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
        let n = hist.count();
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
        *candidates = Some(recent.medians_last([lo, self.win, hi], n));
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
    fn current(&self) -> Option<f64> {
        match &self.rule {
            Adapt::Intended { candidates, .. } => candidates.and_then(|c| c[1]),
            Adapt::Original { current, .. } => *current,
        }
    }
}

/// Takes the new value `x` into `state` and returns the rule's forecast of the next value.
/// `windows` already hold `x`; `n` counts the values including `x`.
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
