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
}

/// The exponentially weighted average of K forecasters' forecasts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Aggregate {
    settings: Settings,
    /// Normalised weights (sum 1 over the forecasters).
    weights: Vec<f64>,
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
        Self {
            settings,
            weights: vec![1.0 / k as f64; k],
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
                let mut s = 0.0;
                for (w, f) in self.weights.iter().zip(forecasts) {
                    s += w * f;
                }
                s
            }
            Combine::Median => weighted_median(forecasts, &self.weights),
        }
    }

    /// Learns from value `x`, given the forecasts each forecaster made for it.
    pub fn update(&mut self, x: f64, forecasts: &[f64]) {
        let k = self.weights.len();
        debug_assert_eq!(forecasts.len(), k);
        // The scale known before x: the running mean absolute change. Until there is one,
        // the losses are taken as they come (AdaHedge is itself invariant to their scale).
        let scale = if self.scale > 0.0 { self.scale } else { 1.0 };
        let loss = &mut self.scratch;
        loss.clear();
        let clip = self.settings.clip;
        for &f in forecasts {
            let e = (x - f) / scale;
            let l = match self.settings.loss {
                Loss::Squared => e * e,
                Loss::Absolute => e.abs(),
            };
            loss.push(if l.is_finite() { l.min(clip) } else { clip });
        }
        let min = loss.iter().copied().fold(f64::INFINITY, f64::min);
        let hedge: f64 = self
            .weights
            .iter()
            .zip(loss.iter())
            .map(|(w, l)| w * l)
            .sum();
        // AdaHedge (de Rooij et al. 2014, §2.1): η = ln K / Δ; with Δ = 0, η = ∞ (follow the
        // leader): the mix loss is the smallest loss and the weight goes to the best so far.
        let ln_k = (k as f64).ln();
        let eta = if self.gap > 0.0 && ln_k > 0.0 {
            ln_k / self.gap
        } else {
            f64::INFINITY
        };
        let mut total = 0.0;
        for (w, l) in self.weights.iter_mut().zip(loss.iter()) {
            *w *= if eta.is_finite() {
                (-eta * (l - min)).exp()
            } else if *l == min {
                1.0
            } else {
                0.0
            };
            total += *w;
        }
        let mix = if eta.is_finite() && total > 0.0 {
            min - total.ln() / eta
        } else {
            min
        };
        if total > 0.0 && total.is_finite() {
            for w in &mut self.weights {
                *w /= total;
            }
        } else {
            self.weights.fill(1.0 / k as f64);
        }
        // The gap h − m ≥ 0 by Jensen; rounding can make it a hair negative.
        self.gap += (hedge - mix).max(0.0);
        // Fixed share (Herbster & Warmuth 1998): spread α of the weight evenly.
        let a = self.settings.share;
        if a > 0.0 {
            let even = a / k as f64;
            for w in &mut self.weights {
                *w = (1.0 - a) * *w + even;
            }
        }
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
    fn weighted_median_follows_the_weight() {
        assert_eq!(weighted_median(&[1.0, 2.0, 3.0], &[0.2, 0.2, 0.6]), 3.0);
        assert_eq!(weighted_median(&[3.0, 1.0, 2.0], &[0.3, 0.3, 0.4]), 2.0);
        assert_eq!(weighted_median(&[1.0, 5.0], &[0.5, 0.5]), 3.0);
    }
}
