//! State and update rules of the primary forecasters (algorithms.md §1.1).
//!
//! Window-based primaries read the shared [`Windows`] (history plus one sorted window per
//! fixed length); adaptive medians keep sorted windows of their own, since theirs move.

use crate::method::Rule;
use crate::window::{Tagged, Windows};
use serde::{Deserialize, Serialize};

/// Fixed window lengths the rules ask the shared [`Windows`] for.
pub fn fixed_windows(rules: &[Rule], faithful: bool) -> Vec<usize> {
    let mut lens = Vec::new();
    for rule in rules {
        match *rule {
            Rule::Median(w) | Rule::TrimmedMean(w) | Rule::Quantile(w, _) => lens.push(w),
            // Faithful adaptive medians compare against a window of size `step` and end up at
            // their maximum window for good; both are kept sorted with the fixed ones.
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

/// Median over a window that follows whichever of win−step, win, win+step would have
/// forecast the last value best (algorithms.md §1.1, "Adaptive window").
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AdaptiveMedian {
    min: usize,
    max: usize,
    step: usize,
    /// Current window.
    pub win: usize,
    /// Improved mode: the last max+step values, from which every candidate window's median
    /// is read. Faithful mode has none: its smaller and larger candidates are windows of size
    /// `step` (the original's quirk), and its window only grows, so once at its maximum it
    /// reads the shared fixed window of that length; before that, the history.
    recent: Option<Tagged>,
    /// Faithful mode: the shared windows of lengths `step` and `max` (None for step 1).
    step_window: Option<usize>,
    max_window: Option<usize>,
    /// Forecasts the smaller, current and larger windows made for the next value.
    candidates: Option<[Option<f64>; 3]>,
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
        Self {
            min,
            max,
            step,
            win: start,
            recent: (!faithful).then(|| Tagged::new(max + step)),
            step_window: (faithful && step > 1).then(|| windows.index_of(step)),
            max_window: faithful.then(|| windows.index_of(max)),
            candidates: None,
        }
    }

    /// Moves the window towards the candidate that forecast `x` best.
    fn decide(&mut self, x: f64, faithful: bool) {
        let Some(c) = self.candidates else { return };
        let err = |f: Option<f64>| f.map_or(f64::INFINITY, |f| (x - f) * (x - f));
        let (lo, mid, hi) = (err(c[0]), err(c[1]), err(c[2]));
        if lo < mid && lo < hi {
            self.win -= self.step;
        } else if hi < mid {
            self.win += self.step;
        }
        self.win = self.win.min(self.max);
        if !faithful {
            self.win = self.win.max(self.min);
        }
    }

    fn observe(&mut self, x: f64, windows: &Windows, faithful: bool) {
        let hist = &windows.hist;
        let n = hist.count();
        self.decide(x, faithful);
        self.candidates = Some(match &mut self.recent {
            Some(recent) => {
                recent.push(hist);
                let median = |w: usize| recent.median_last(w, n);
                // A candidate outside [min, max] would be clamped back to win: leave it out.
                let lo = (self.win >= self.min + self.step).then(|| median(self.win - self.step));
                let hi = (self.win + self.step <= self.max).then(|| median(self.win + self.step));
                [lo.flatten(), median(self.win), hi.flatten()]
            }
            None => {
                let side = match self.step_window {
                    Some(i) => windows.at(i).median(),
                    None => hist.last(),
                };
                let mid = match self.max_window {
                    Some(i) if self.win == self.max => windows.at(i).median(),
                    _ => hist.median_last(self.win),
                };
                [side, mid, side]
            }
        });
    }

    /// The median over the current window, computed when the last value arrived.
    fn current(&self) -> Option<f64> {
        self.candidates.and_then(|c| c[1])
    }
}

/// Takes the new value `x` into `state` and returns the rule's forecast of the next value.
/// `windows` already hold `x`; `n` counts the values including `x`.
pub fn step(
    rule: &Rule,
    state: &mut State,
    x: f64,
    n: u64,
    windows: &Windows,
    faithful: bool,
) -> Option<f64> {
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
            a.observe(x, windows, faithful);
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
        if !a.step_window.iter().chain(&a.max_window).all(held) {
            return Err("an adaptive median's window is missing".into());
        }
        if let Some(recent) = &a.recent {
            recent.validate(&windows.hist)?;
        }
        if a.win > a.max || a.step == 0 {
            return Err("adaptive median window is inconsistent".into());
        }
    }
    Ok(())
}
