//! State and update rules of the primary forecasters (algorithms.md §1.1).
//!
//! Window-based primaries read the shared [`Windows`] (history plus one sorted window per
//! fixed length); adaptive medians keep sorted windows of their own, since theirs move.

use crate::method::Rule;
use crate::window::{Sorted, Windows};
use serde::{Deserialize, Serialize};

/// Fixed window lengths the rules ask the shared [`Windows`] for.
pub fn fixed_windows(rules: &[Rule], faithful: bool) -> Vec<usize> {
    rules
        .iter()
        .filter_map(|r| match *r {
            Rule::Median(w) | Rule::TrimmedMean(w) | Rule::Quantile(w, _) => Some(w),
            // Faithful adaptive medians compare against a window of size `step`.
            Rule::AdaptiveMedian(_, _, _, step) if faithful && step > 1 => Some(step),
            _ => None,
        })
        .collect()
}

/// Per-forecaster state that does not live in the shared window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum State {
    Stateless,
    /// Running sum for the running mean.
    Sum(f64),
    /// Current smoothed prediction.
    Smooth(f64),
    Adaptive(AdaptiveMedian),
    LocalLevel(LocalLevel),
    Ar(ArRls),
}

impl State {
    pub fn new(rule: &Rule, faithful: bool) -> Self {
        match *rule {
            Rule::RunningMean => State::Sum(0.0),
            // The original starts every smoother at 0 (algorithms.md §1.1, faithful quirk).
            Rule::ExpSmooth(_) => State::Smooth(0.0),
            Rule::AdaptiveMedian(start, min, max, step) => {
                State::Adaptive(AdaptiveMedian::new(start, min, max, step, faithful))
            }
            Rule::LocalLevel => State::LocalLevel(LocalLevel::default()),
            Rule::ArRls(p) => State::Ar(ArRls::new(p)),
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
    /// Sorted windows of the current, smaller and larger lengths. Faithful mode has no
    /// smaller or larger ones: the original asks for windows of size `step` instead of
    /// win±step (and so never shrinks), which the shared fixed windows answer.
    mid: Sorted,
    lo: Option<Sorted>,
    hi: Option<Sorted>,
    /// Forecasts the smaller, current and larger windows made for the next value.
    candidates: Option<[Option<f64>; 3]>,
}

impl AdaptiveMedian {
    fn new(start: usize, min: usize, max: usize, step: usize, faithful: bool) -> Self {
        let side = |len: usize| (!faithful).then(|| Sorted::new(len.max(1)));
        Self {
            min,
            max,
            step,
            win: start,
            mid: Sorted::new(start),
            lo: side(start - step),
            hi: side(start + step),
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
        for w in [Some(&mut self.mid), self.lo.as_mut(), self.hi.as_mut()]
            .into_iter()
            .flatten()
        {
            w.push(hist);
        }
        self.decide(x, faithful);
        self.mid.resize(self.win, hist);
        let lo = if let Some(lo) = &mut self.lo {
            lo.resize(self.win.saturating_sub(self.step).max(1), hist);
            // A candidate outside [min, max] would be clamped back to win: leave it out.
            lo.median().filter(|_| self.win >= self.min + self.step)
        } else if self.step == 1 {
            hist.last()
        } else {
            windows.fixed(self.step).median()
        };
        let hi = match &mut self.hi {
            Some(hi) => {
                hi.resize(self.win + self.step, hist);
                hi.median().filter(|_| self.win + self.step <= self.max)
            }
            None => lo,
        };
        self.candidates = Some([lo, self.mid.median(), hi]);
    }

    /// The median over the current window, computed when the last value arrived.
    fn current(&self) -> Option<f64> {
        self.candidates.and_then(|c| c[1])
    }

    fn windows(&self) -> impl Iterator<Item = &Sorted> {
        [Some(&self.mid), self.lo.as_ref(), self.hi.as_ref()]
            .into_iter()
            .flatten()
    }
}

/// Local-level model x_t = μ_t + ε_t, μ_t = μ_{t−1} + η_t, filtered at its steady-state
/// Kalman gain. The noise variances come from the moments of first differences, which for
/// this model are Var(Δx) = q + 2r and Cov(Δx_t, Δx_{t−1}) = −r; both are tracked with a
/// slow exponential weighting so that the gain follows the series.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LocalLevel {
    level: f64,
    prev: f64,
    prev_diff: f64,
    gamma0: f64,
    gamma1: f64,
    n: u64,
}

impl LocalLevel {
    const MEMORY: f64 = 0.02;

    fn observe(&mut self, x: f64) {
        if self.n == 0 {
            self.level = x;
            self.prev = x;
            self.n = 1;
            return;
        }
        let d = x - self.prev;
        let a = if self.n < 50 {
            1.0 / self.n as f64
        } else {
            Self::MEMORY
        };
        self.gamma0 += a * (d * d - self.gamma0);
        if self.n >= 2 {
            self.gamma1 += a * (d * self.prev_diff - self.gamma1);
        }
        let r = (-self.gamma1).max(0.0);
        let q = (self.gamma0 + 2.0 * self.gamma1).max(0.0);
        // Steady-state prior variance P solves P² − qP − qr = 0; in units of r, with
        // t = q/r, P/r = (t + √(t² + 4t))/2 (this form cannot overflow for large values).
        let t = q / r;
        let gain = if r > 0.0 && t < 1e100 {
            let p = (t + (t * t + 4.0 * t).sqrt()) / 2.0;
            p / (p + 1.0)
        } else {
            1.0
        };
        // The moment estimates are noisy: a zero gain would freeze the level for good, so
        // never learn slower than a running mean early on or a 1 % smoother later.
        let gain = gain.max((1.0 / (self.n + 1) as f64).max(0.01));
        self.level += gain * (x - self.level);
        self.prev_diff = d;
        self.prev = x;
        self.n += 1;
    }
}

/// AR(p) on the centred, scaled series, fitted by recursive least squares with forgetting.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ArRls {
    p: usize,
    coef: Vec<f64>,
    /// Inverse correlation matrix, row-major p×p.
    cov: Vec<f64>,
    /// Last p centred values, newest first.
    lags: Vec<f64>,
    mean: f64,
    scale: f64,
    n: u64,
}

impl ArRls {
    const FORGET: f64 = 0.995;
    const MEAN_MEMORY: f64 = 0.01;

    fn new(p: usize) -> Self {
        let mut cov = vec![0.0; p * p];
        for i in 0..p {
            cov[i * p + i] = 100.0;
        }
        Self {
            p,
            coef: vec![0.0; p],
            cov,
            lags: vec![0.0; p],
            mean: 0.0,
            scale: 0.0,
            n: 0,
        }
    }

    fn observe(&mut self, x: f64) {
        self.n += 1;
        let a = (1.0 / self.n as f64).max(Self::MEAN_MEMORY);
        self.mean += a * (x - self.mean);
        self.scale += a * ((x - self.mean).abs() - self.scale);
        let s = if self.scale > 0.0 { self.scale } else { 1.0 };
        let y = (x - self.mean) / s;
        if self.n > self.p as u64 {
            self.rls_step(y);
        }
        self.lags.rotate_right(1);
        self.lags[0] = y;
    }

    fn rls_step(&mut self, y: f64) {
        let p = self.p;
        let phi = &self.lags;
        let mut k = vec![0.0; p];
        for i in 0..p {
            k[i] = (0..p).map(|j| self.cov[i * p + j] * phi[j]).sum();
        }
        let denom = Self::FORGET + (0..p).map(|i| phi[i] * k[i]).sum::<f64>();
        if !(denom.is_finite() && denom > 0.0) {
            return;
        }
        for ki in k.iter_mut() {
            *ki /= denom;
        }
        let err = y - (0..p).map(|i| self.coef[i] * phi[i]).sum::<f64>();
        for i in 0..p {
            self.coef[i] += k[i] * err;
        }
        // cov = (cov − k·φᵀ·cov) / λ
        let phit_cov: Vec<f64> = (0..p)
            .map(|j| (0..p).map(|i| phi[i] * self.cov[i * p + j]).sum())
            .collect();
        for i in 0..p {
            for j in 0..p {
                self.cov[i * p + j] = (self.cov[i * p + j] - k[i] * phit_cov[j]) / Self::FORGET;
            }
        }
        if self.coef.iter().any(|c| !c.is_finite()) || self.cov.iter().any(|c| !c.is_finite()) {
            *self = Self {
                n: self.n,
                mean: self.mean,
                scale: self.scale,
                lags: self.lags.clone(),
                ..Self::new(p)
            };
        }
    }

    fn forecast(&self) -> f64 {
        let s = if self.scale > 0.0 { self.scale } else { 1.0 };
        let y: f64 = self.coef.iter().zip(&self.lags).map(|(c, l)| c * l).sum();
        // A fitted model can extrapolate wildly on a regime change; keep it within a few
        // scales of the mean, where a one-step forecast of a network series belongs.
        self.mean + y.clamp(-8.0, 8.0) * s
    }
}

/// Updates `state` for rule `rule` with the new value `x`; `windows` already hold `x` and
/// `n` is the number of values including `x`.
pub fn observe(rule: &Rule, state: &mut State, x: f64, n: u64, windows: &Windows, faithful: bool) {
    match (rule, state) {
        (Rule::RunningMean, State::Sum(s)) => *s += x,
        (Rule::ExpSmooth(g), State::Smooth(pred)) => {
            *pred = if n == 1 { x } else { *pred + g * (x - *pred) };
        }
        (Rule::AdaptiveMedian(..), State::Adaptive(a)) => a.observe(x, windows, faithful),
        (Rule::LocalLevel, State::LocalLevel(l)) => l.observe(x),
        (Rule::ArRls(_), State::Ar(a)) => a.observe(x),
        _ => {}
    }
}

/// The forecast of `rule` for the next value, after at least one value was observed.
pub fn forecast(rule: &Rule, state: &State, n: u64, windows: &Windows) -> Option<f64> {
    match (rule, state) {
        (Rule::LastValue, _) => windows.hist.last(),
        (Rule::RunningMean, State::Sum(s)) => (n > 0).then(|| s / n as f64),
        (Rule::ExpSmooth(_), State::Smooth(p)) => (n > 0).then_some(*p),
        (Rule::Median(w), _) => windows.fixed(*w).median(),
        (Rule::SlidingMean(w), _) => windows.hist.mean_last(*w),
        (Rule::TrimmedMean(w), _) => windows.fixed(*w).trimmed_mean(0.3),
        (Rule::AdaptiveMedian(..), State::Adaptive(a)) => a.current(),
        (Rule::LocalLevel, State::LocalLevel(l)) => (l.n > 0).then_some(l.level),
        (Rule::Quantile(w, q), _) => windows.fixed(*w).quantile(*q),
        (Rule::ArRls(_), State::Ar(a)) => (a.n > 0).then(|| a.forecast()),
        _ => None,
    }
}

/// Checks a restored adaptive median's own windows against the history.
pub(crate) fn validate(state: &State, windows: &Windows) -> Result<(), String> {
    if let State::Adaptive(a) = state {
        for w in a.windows() {
            w.validate(&windows.hist)?;
        }
        if a.mid.len() != a.win || a.win > a.max || a.step == 0 {
            return Err("adaptive median window is inconsistent".into());
        }
    }
    Ok(())
}
