//! Online aggregation of the bank's forecasts (improved mode): instead of picking one
//! forecaster, forecast with a weighted combination of all of them, the weights learnt from
//! each one's losses so far. This is the exponentially weighted average forecaster
//! (Cesa-Bianchi & Lugosi 2006, §2.1) with
//! - the AdaHedge learning rate (de Rooij, van Erven, Grünwald & Koolen 2014, "Follow the
//!   leader if you can, hedge if you must", §2): η = ln K / Δ, Δ the cumulative mixability
//!   gap, so no rate has to be tuned and the rate adapts to the losses' range;
//! - fixed share (Herbster & Warmuth 1998; Cesa-Bianchi & Lugosi §5.2): after each update a
//!   fraction α of the weight is spread evenly, so that when another forecaster becomes the
//!   best (a network path changes regime) its weight recovers within a few steps;
//! - losses made scale-free: each error is divided by a running scale of the series (an
//!   exponentially weighted mean absolute change between consecutive values, known before the
//!   value), so one rule serves milliseconds and Mbit/s and a burst of large values weighs
//!   no more than a calm stretch.
//!
//! The squared-loss aggregate forecasts the weighted mean: squared loss is convex, so by
//! Jensen's inequality its loss is at most the weighted mean of the forecasters' losses, and
//! Hedge's bound against the best forecaster holds for it (Cesa-Bianchi & Lugosi §2.1). For
//! absolute loss the same argument covers the weighted mean; the weighted median, the natural
//! minimiser of absolute loss, is only within a factor 2 of the weighted mean of the losses
//! (at least half the weight lies on the far side of it from the value), so which one is used
//! is decided by measurement (README, "Forecast accuracy").

use serde::{Deserialize, Serialize};

/// Which loss the weights learn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Loss {
    Squared,
    Absolute,
}

/// How the weighted forecasters are combined into one forecast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    Mean,
    Median,
    /// The heaviest forecaster's forecast (the weights still learn as Hedge's).
    Leader,
}

/// Settings of one aggregate (chosen on one half of the evaluation data, README).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub loss: Loss,
    pub combine: Combine,
    /// Fixed-share fraction α in [0, 1).
    pub share: f64,
    /// Weight of the newest change in the running scale (0 < β ≤ 1).
    pub scale_gain: f64,
    /// Largest scaled loss counted for one step: one wild value cannot wipe out a weight.
    pub clip: f64,
    /// Prior weight of the last forecaster (the others share the rest evenly); 0 for even
    /// weights. Fixed share spreads weight back towards this prior.
    pub prior_last: f64,
}

/// The exponentially weighted average of K forecasters' forecasts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Aggregate {
    settings: Settings,
    /// Normalised weights (sum 1 over the forecasters).
    weights: Vec<f64>,
    /// The prior weights they start from and are shared back towards.
    prior: Vec<f64>,
    /// AdaHedge's cumulative mixability gap Δ; η = ln K / Δ (follow the leader while 0).
    gap: f64,
    /// Running scale of the series and the previous value (None before the first value).
    scale: f64,
    last: Option<f64>,
    #[serde(skip)]
    scratch: Vec<f64>,
}

impl Aggregate {
    pub fn new(k: usize, settings: Settings) -> Self {
        assert!(k > 0, "at least one forecaster");
        let last = settings.prior_last;
        let prior: Vec<f64> = if k > 1 && last > 0.0 && last < 1.0 {
            let rest = (1.0 - last) / (k - 1) as f64;
            (0..k)
                .map(|j| if j + 1 == k { last } else { rest })
                .collect()
        } else {
            vec![1.0 / k as f64; k]
        };
        Self {
            settings,
            weights: prior.clone(),
            prior,
            gap: 0.0,
            scale: 0.0,
            last: None,
            scratch: Vec::with_capacity(k),
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// Current weights, summing to 1.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Index of the heaviest forecaster (the lowest on ties): the one a report names.
    pub fn leader(&self) -> usize {
        let mut best = 0;
        for (j, &w) in self.weights.iter().enumerate() {
            if w > self.weights[best] {
                best = j;
            }
        }
        best
    }

    /// The combined forecast of `forecasts` (one per forecaster) with the current weights.
    pub fn forecast(&self, forecasts: &[f64]) -> f64 {
        debug_assert_eq!(forecasts.len(), self.weights.len());
        match self.settings.combine {
            Combine::Mean => {
                // As offsets from one forecast, so that equal forecasts combine to exactly
                // that value (weights summing to 1 only up to rounding cannot move it).
                let base = forecasts[0];
                let mut acc = [0.0; 4];
                let (w4, f4) = (self.weights.chunks_exact(4), forecasts.chunks_exact(4));
                let tail: f64 = w4
                    .remainder()
                    .iter()
                    .zip(f4.remainder())
                    .map(|(w, f)| w * (f - base))
                    .sum();
                for (w, f) in w4.zip(f4) {
                    for k in 0..4 {
                        acc[k] += w[k] * (f[k] - base);
                    }
                }
                base + ((acc[0] + acc[1]) + (acc[2] + acc[3]) + tail)
            }
            Combine::Median => weighted_median(forecasts, &self.weights),
            Combine::Leader => forecasts[self.leader()],
        }
    }

    /// Learns from value `x`, given the forecasts each forecaster made for it.
    pub fn update(&mut self, x: f64, forecasts: &[f64]) {
        let k = self.weights.len();
        debug_assert_eq!(forecasts.len(), k);
        // The scale known before x: the running mean absolute change. Until the series has
        // changed once there is none, and nothing to learn that would be free of its unit.
        let scale = self.scale;
        if scale <= 0.0 {
            self.learn_scale(x);
            return;
        }
        let loss = &mut self.scratch;
        loss.clear();
        let (clip, inv) = (self.settings.clip, 1.0 / scale);
        match self.settings.loss {
            Loss::Squared => loss.extend(forecasts.iter().map(|&f| {
                let e = (x - f) * inv;
                (e * e).min(clip)
            })),
            Loss::Absolute => {
                loss.extend(forecasts.iter().map(|&f| ((x - f) * inv).abs().min(clip)))
            }
        }
        let (mut min, mut hedge) = (f64::INFINITY, 0.0);
        for (&l, &w) in loss.iter().zip(&self.weights) {
            min = if l < min { l } else { min };
            hedge += w * l;
        }
        // AdaHedge (de Rooij et al. 2014, §2.1): η = ln K / Δ; with Δ = 0, η = ∞ (follow the
        // leader): the mix loss is the smallest loss and the weight goes to the best so far.
        let ln_k = (k as f64).ln();
        let eta = if self.gap > 0.0 && ln_k > 0.0 {
            ln_k / self.gap
        } else {
            f64::INFINITY
        };
        if eta.is_finite() {
            for (w, l) in self.weights.iter_mut().zip(loss.iter()) {
                *w *= exp_nonpositive(-eta * (l - min));
            }
        } else {
            for (w, l) in self.weights.iter_mut().zip(loss.iter()) {
                *w = if *l == min { *w } else { 0.0 };
            }
        }
        let total = crate::window::sum(&self.weights);
        let mix = if eta.is_finite() && total > 0.0 {
            min - total.ln() / eta
        } else {
            min
        };
        // The gap h − m ≥ 0 by Jensen; rounding can make it a hair negative.
        self.gap += (hedge - mix).max(0.0);
        // Normalise, and fixed share (Herbster & Warmuth 1998): spread α of the weight over
        // the prior, in one pass.
        let a = self.settings.share;
        if total > 0.0 && total.is_finite() {
            let keep = (1.0 - a) / total;
            for (w, p) in self.weights.iter_mut().zip(&self.prior) {
                *w = keep * *w + a * p;
            }
        } else {
            self.weights.copy_from_slice(&self.prior);
        }
        self.learn_scale(x);
    }

    /// Moves the running scale towards the change from the previous value to `x`.
    fn learn_scale(&mut self, x: f64) {
        if let Some(prev) = self.last {
            let change = (x - prev).abs();
            let g = self.settings.scale_gain;
            self.scale = if self.scale > 0.0 {
                self.scale + g * (change - self.scale)
            } else {
                change
            };
        }
        self.last = Some(x);
    }

    /// Checks a restored aggregate for `k` forecasters.
    pub(crate) fn validate(&self, k: usize) -> Result<(), String> {
        let sum: f64 = self.weights.iter().sum();
        let ok = self.weights.len() == k
            && self.prior.len() == k
            && self.weights.iter().all(|w| w.is_finite() && *w >= 0.0)
            && (sum - 1.0).abs() < 1e-6
            && self.gap.is_finite()
            && self.gap >= 0.0
            && self.scale.is_finite()
            && self.scale >= 0.0
            && (0.0..1.0).contains(&self.settings.share);
        if ok {
            Ok(())
        } else {
            Err("forecast weights are damaged".into())
        }
    }
}

/// e^x for x ≤ 0 (0 below −708), to about 2e-7 relative (plenty for weights that are a
/// heuristic's anyway): x = k·ln 2 + r with |r| ≤ ln 2 / 2, e^r by its Taylor polynomial to
/// degree 6, times 2^k built in the exponent bits. No
/// branches but the range guard, so the weight loop vectorises; the same on every platform.
#[inline]
fn exp_nonpositive(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    // Adding 1.5·2^52 rounds to an integer in the low mantissa bits, without a call to
    // `round` (an SSE4.1 instruction the baseline target lacks), so the loop vectorises.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    let x = x.max(-708.0);
    let t = x * std::f64::consts::LOG2_E + SHIFT;
    let k = t - SHIFT;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Horner from r^6/6! down to 1.
    let mut p = 1.0 / 720.0;
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = p * r + c;
    }
    // k = t's mantissa bits less the shift's; −1022 ≤ k ≤ 0, so 2^k is a normal number.
    let k = (t.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    p * f64::from_bits(((k + 1023) as u64) << 52)
}

/// The smallest forecast at which the cumulative weight (in ascending order of forecast)
/// reaches one half; the mean of the two neighbours when it is exactly one half there.
pub fn weighted_median(values: &[f64], weights: &[f64]) -> f64 {
    let k = values.len();
    let mut order = [0u8; 32];
    let order = &mut order[..k.min(32)];
    for (i, o) in order.iter_mut().enumerate() {
        *o = i as u8;
    }
    order.sort_unstable_by(|&a, &b| values[a as usize].total_cmp(&values[b as usize]));
    let total: f64 = weights.iter().sum();
    let half = total / 2.0;
    let mut acc = 0.0;
    for (n, &i) in order.iter().enumerate() {
        acc += weights[i as usize];
        if acc > half {
            return values[i as usize];
        }
        if acc == half {
            let next = order
                .get(n + 1)
                .map_or(values[i as usize], |&j| values[j as usize]);
            return (values[i as usize] + next) / 2.0;
        }
    }
    values[order[order.len() - 1] as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(loss: Loss, share: f64) -> Settings {
        Settings {
            loss,
            combine: Combine::Mean,
            share,
            scale_gain: 0.05,
            clip: 1e6,
            prior_last: 0.0,
        }
    }

    #[test]
    fn weight_goes_to_the_forecaster_that_is_right() {
        let mut a = Aggregate::new(3, settings(Loss::Squared, 0.0));
        for i in 0..200 {
            let x = 10.0 + (i % 3) as f64 * 0.1;
            a.update(x, &[x + 5.0, x + 0.01, x - 3.0]);
        }
        assert_eq!(a.leader(), 1);
        assert!(a.weights()[1] > 0.99, "{:?}", a.weights());
    }

    #[test]
    fn fixed_share_lets_a_new_best_forecaster_take_over() {
        let run = |share: f64| {
            let mut a = Aggregate::new(2, settings(Loss::Absolute, share));
            for i in 0..400 {
                let x = (i % 5) as f64;
                let (good, bad) = (x + 0.1, x + 2.0);
                let f = if i < 300 { [good, bad] } else { [bad, good] };
                a.update(x, &f);
            }
            a.weights()[1]
        };
        assert!(run(0.01) > 0.9, "shared: {}", run(0.01));
        assert!(run(0.01) > run(0.0));
    }

    #[test]
    fn losses_are_scale_free() {
        let feed = |c: f64| {
            let mut a = Aggregate::new(3, settings(Loss::Squared, 0.01));
            let mut s: u64 = 9;
            for _ in 0..300 {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                let x = c * ((s >> 33) % 100) as f64;
                a.update(x, &[x + c, x - 2.0 * c, 50.0 * c]);
            }
            a.weights().to_vec()
        };
        let (ms, mbit) = (feed(1.0), feed(1e-3));
        for (a, b) in ms.iter().zip(&mbit) {
            assert!((a - b).abs() < 1e-9, "{ms:?} vs {mbit:?}");
        }
    }

    #[test]
    fn exp_approximation_is_close_to_the_library_exp() {
        let mut x = 0.0;
        while x > -745.0 {
            let (a, b) = (exp_nonpositive(x), x.exp());
            assert!((a - b).abs() <= 3e-7 * b + 1e-300, "{x}: {a} vs {b}");
            x -= 0.0137;
        }
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(-1e9) >= 0.0);
    }

    #[test]
    fn weighted_median_follows_the_weight() {
        assert_eq!(weighted_median(&[1.0, 2.0, 3.0], &[0.2, 0.2, 0.6]), 3.0);
        assert_eq!(weighted_median(&[3.0, 1.0, 2.0], &[0.3, 0.3, 0.4]), 2.0);
        assert_eq!(weighted_median(&[1.0, 5.0], &[0.5, 0.5]), 3.0);
    }
}
