//! Online aggregation of the bank's forecasts (improved mode): instead of picking one
//! forecaster, forecast with learnt combinations of all of them, and keep the original's own
//! two-level selection as a safe choice that the combinations must earn their way past.
//!
//! Two levels, each a standard online-learning algorithm:
//!
//! 1. **Mixtures** of the experts (every forecaster's forecast plus the original selection's,
//!    which comes last). All learn from the same per-step losses, each error divided by a
//!    running scale of the series (an exponentially weighted mean absolute change between
//!    consecutive values, known before the value), so that one rule serves milliseconds and
//!    Mbit/s, and clipped, so that one wild value cannot wipe out a weight:
//!    - two **exponentially weighted averages** (Cesa-Bianchi & Lugosi 2006, §2.1) with
//!      **fixed share** (Herbster & Warmuth 1998; Cesa-Bianchi & Lugosi §5.2): after each
//!      update a fraction α of the weight is spread back over the prior, so that a forecaster
//!      that becomes the best after a regime change recovers its weight. One shares slowly
//!      (long memory: a stationary series' best forecaster keeps its weight), one quickly
//!      (a throughput trace's level shifts). Both use the same fixed learning rate, so the
//!      weight factors e^{−η·loss} are computed once for both;
//!    - optionally (the MSE forecast) **exponentiated gradient** on the simplex (Kivinen &
//!      Warmuth 1997, §5, "EG"): it competes with the best *convex combination* of the
//!      forecasters, not only the best single one (e.g. a mostly-long mean with a little of
//!      the last value, when a series' noise is slightly persistent).
//!
//!    The squared-loss forecast is the weighted mean: squared loss is convex, so by Jensen's
//!    inequality its loss is at most the weighted mean of the forecasters' losses, and Hedge's
//!    bound against the best forecaster holds for it (Cesa-Bianchi & Lugosi §2.1); the same
//!    argument covers the weighted mean under absolute loss.
//!
//! 2. **AdaHedge** (de Rooij, van Erven, Grünwald & Koolen 2014, "Follow the leader if you
//!    can, hedge if you must", §2, Algorithm 1) over the original's selection, the mixtures
//!    and the leading expert (the one with the lowest cumulative loss: follow the leader, their
//!    §1), on the loss the forecast is judged by, as it is: neither scaled nor clipped. Its
//!    weights are e^{−η·L} of the inputs' cumulative losses L with η = ln K / Δ, Δ the
//!    cumulative mixability gap; while Δ = 0 it follows the leader. η adapts to the losses'
//!    range, so it needs no scale to be free of the series' unit. By their Theorem 8, its
//!    cumulative loss is at most that of the best input plus
//!    2·√(ln K · L*(T − L*)/T) + (4/3·ln K + 2)·B, B the per-step loss range: it is never much
//!    worse than the original's selection (an input) *in the MSE or MAE itself*. (Losses
//!    divided by the mixtures' running scale would make that bound one on a weighted loss:
//!    right after a spike the scale jumps and the next steps count a fraction of their cost.
//!    On a series with 1 % of values tripled that cost the MSE forecast 15 % against the
//!    selection it is bound to, README.)
//!    and where a mixture is better by a margin that grows with the series, it ends up with
//!    that mixture. On a stationary series, where the original already picks the best
//!    forecaster (the running mean of independent RTT samples, say), it stays with the
//!    selection or the leader instead of paying for the mixtures' exploration, which a single
//!    mixture could not avoid.

use serde::{Deserialize, Serialize};

/// Which loss the weights learn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Loss {
    Squared,
    Absolute,
}

/// Settings of one aggregate (chosen on one half of the evaluation data, README).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub loss: Loss,
    /// Learning rate η of the two mixtures, on scaled losses.
    pub eta: f64,
    /// Fixed-share fractions α of the slow and the fast mixture, in [0, 1).
    pub shares: [f64; 2],
    /// Learning rate of the exponentiated-gradient mixture; 0 for none.
    pub eg_rate: f64,
    /// Fixed-share fraction of the exponentiated-gradient mixture (towards even weights).
    pub eg_share: f64,
    /// Weight of the newest change in the running scale (0 < β ≤ 1).
    pub scale_gain: f64,
    /// Largest scaled loss counted for one step by the mixtures.
    pub clip: f64,
    /// The mixtures' prior weight on the last expert (the original's selection); the other
    /// experts share the rest evenly. Fixed share spreads weight back towards this prior.
    pub prior_last: f64,
    /// Whether the leading expert is an input of the top level.
    pub leader: bool,
}

/// Largest scaled error or forecast offset an exponentiated-gradient step uses.
const EG_CLIP: f64 = 5.0;

/// The largest loss the top level counts for one step: a guard, not a clip (no error of
/// finite values comes near it, unless squared past f64's range), so that 2^64 steps of it
/// still sum to a finite total.
const TOP_LOSS_MAX: f64 = f64::MAX / 18_446_744_073_709_551_616.0;

/// Inputs of the top level: the selection (the last expert), the slow and the fast mixture,
/// the leading expert, and the exponentiated-gradient mixture when there is one.
const TOP: usize = 5;
const ANCHOR: usize = 0;
const SLOW: usize = 1;
const FAST: usize = 2;
const LEADER: usize = 3;
const EG: usize = 4;

/// The two-level aggregate of K experts' forecasts (the last being the original selection).
///
/// Use: [`forecast`](Self::forecast) with the experts' forecasts for the next value, then
/// [`update`](Self::update) with that value and the same forecasts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Aggregate {
    settings: Settings,
    /// Prior weights of the Hedge mixtures. The mixtures' weights are single precision:
    /// four to a vector register, twice the work per instruction of doubles, and plenty for
    /// weights learnt by a heuristic (saved as doubles, which hold them exactly).
    #[serde(with = "single")]
    prior: Vec<f32>,
    /// Normalised weights of the slow and the fast mixture.
    #[serde(with = "single")]
    slow: Vec<f32>,
    #[serde(with = "single")]
    fast: Vec<f32>,
    /// Normalised weights of the exponentiated-gradient mixture (empty without one).
    #[serde(with = "single")]
    eg: Vec<f32>,
    /// Each expert's cumulative loss as the top level counts it; the leader (lowest, the
    /// selection left out: it is an input already) is a top-level input.
    expert_loss: Vec<f64>,
    leader: usize,
    /// Top level: cumulative clipped scaled loss of each input, AdaHedge's cumulative
    /// mixability gap Δ, and the weights these give.
    top_loss: [f64; TOP],
    gap: f64,
    top_weights: [f64; TOP],
    /// The top level's inputs for the next value, as the last forecast computed them.
    inputs: Option<[f64; TOP]>,
    /// Running scale of the series and the previous value (None before the first value).
    scale: f64,
    last: Option<f64>,
    #[serde(skip)]
    scratch: Vec<f32>,
}

/// Single-precision weights saved as doubles: every f32 is a double exactly, and a double
/// read back is the same f32 (a shortest decimal for an f32 read as a double, then rounded
/// to f32, could round twice).
mod single {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
        let wide: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        wide.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        let wide = Vec::<f64>::deserialize(d)?;
        if wide.iter().any(|&x| x as f32 as f64 != x) {
            return Err(serde::de::Error::custom(
                "a weight is not a single-precision number",
            ));
        }
        Ok(wide.into_iter().map(|x| x as f32).collect())
    }
}

impl Aggregate {
    pub fn new(k: usize, settings: Settings) -> Self {
        assert!(k > 0, "at least one forecaster");
        let last = settings.prior_last as f32;
        let prior: Vec<f32> = if k > 1 && last > 0.0 && last < 1.0 {
            let rest = (1.0 - last) / (k - 1) as f32;
            (0..k)
                .map(|j| if j + 1 == k { last } else { rest })
                .collect()
        } else {
            vec![1.0 / k as f32; k]
        };
        let eg = if settings.eg_rate > 0.0 {
            vec![1.0 / k as f32; k]
        } else {
            Vec::new()
        };
        let mut top_weights = [0.0; TOP];
        top_weights[ANCHOR] = 1.0;
        Self {
            settings,
            slow: prior.clone(),
            fast: prior.clone(),
            prior,
            eg,
            expert_loss: vec![0.0; k],
            leader: 0,
            top_loss: [0.0; TOP],
            gap: 0.0,
            top_weights,
            inputs: None,
            scale: 0.0,
            last: None,
            scratch: Vec::with_capacity(k),
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The top level's inputs: the selection and the two mixtures, then the leading expert
    /// and the exponentiated-gradient mixture where the settings have them.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn present(&self) -> ([usize; TOP], usize) {
        let mut idx = [ANCHOR, SLOW, FAST, 0, 0];
        let mut n = 3;
        if self.settings.leader {
            idx[n] = LEADER;
            n += 1;
        }
        if !self.eg.is_empty() {
            idx[n] = EG;
            n += 1;
        }
        (idx, n)
    }

    /// The top level's forecasts for the next value: the selection's, the slow, the fast
    /// mixture's, the leading expert's and (if any) the exponentiated-gradient mixture's.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn input_forecasts(&self, forecasts: &[f64]) -> [f64; TOP] {
        let anchor = forecasts[forecasts.len() - 1];
        let mut f = [anchor; TOP];
        let [slow, fast, eg] = means(&self.slow, &self.fast, &self.eg, forecasts);
        f[SLOW] = slow;
        f[FAST] = fast;
        f[LEADER] = forecasts[self.leader];
        if !self.eg.is_empty() {
            f[EG] = eg;
        }
        f
    }

    /// AdaHedge's learning rate η = ln K / Δ over `n` inputs; None for η = ∞ (Δ = 0, or so
    /// small, as raw losses in a tiny unit can make it, that ln K / Δ overflows): follow the
    /// leader.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn top_rate(&self, n: usize) -> Option<f64> {
        let eta = ln_inputs(n) / self.gap;
        (self.gap > 0.0 && eta.is_finite()).then_some(eta)
    }

    /// The top level's weights from its inputs' cumulative losses: e^{−η·L} with
    /// η = ln K / Δ; all on the first leader while Δ = 0 (de Rooij et al. 2014, Algorithm 1;
    /// ties go to the selection).
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn weigh_top(&mut self) {
        let (idx, n) = self.present();
        let idx = &idx[..n];
        let min = idx
            .iter()
            .map(|&i| self.top_loss[i])
            .fold(f64::INFINITY, f64::min);
        let mut w = [0.0; TOP];
        if let Some(eta) = self.top_rate(n) {
            for &i in idx {
                w[i] = exp_nonpositive(-eta * (self.top_loss[i] - min));
            }
            let total: f64 = w.iter().sum();
            w.iter_mut().for_each(|v| *v /= total);
        } else {
            let leader = idx
                .iter()
                .copied()
                .find(|&i| self.top_loss[i] == min)
                .unwrap_or(ANCHOR);
            w[leader] = 1.0;
        }
        self.top_weights = w;
    }

    /// The expert with the largest share of the combined forecast (the lowest index on
    /// ties): the top level's weights spread over the mixtures' weights, the selection's top
    /// weight going to the last expert and the leader's to the leading expert.
    pub fn leader(&self) -> usize {
        self.leader_share().0
    }

    /// [`leader`](Self::leader) and its share of the combined forecast, in (0, 1]: the top
    /// level's weights and each mixture's sum to one, so the shares of all experts do.
    pub fn leader_share(&self) -> (usize, f64) {
        let t = &self.top_weights;
        let k = self.slow.len();
        let (mut best, mut best_w) = (0, f64::NEG_INFINITY);
        for j in 0..k {
            let mut w = t[SLOW] * self.slow[j] as f64 + t[FAST] * self.fast[j] as f64;
            if !self.eg.is_empty() {
                w += t[EG] * self.eg[j] as f64;
            }
            if j + 1 == k {
                w += t[ANCHOR];
            }
            if j == self.leader {
                w += t[LEADER];
            }
            if w > best_w {
                (best, best_w) = (j, w);
            }
        }
        (best, best_w)
    }

    /// The combined forecast of `forecasts` (one per expert, the selection's last), which
    /// the next [`update`](Self::update) must be given too.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn forecast(&mut self, forecasts: &[f64]) -> f64 {
        debug_assert_eq!(forecasts.len(), self.slow.len());
        let f = self.input_forecasts(forecasts);
        self.inputs = Some(f);
        let w = &self.top_weights;
        // As offsets from the selection, so that equal forecasts combine to exactly it.
        let mut acc = 0.0;
        for i in 1..TOP {
            // Inputs that are absent have no weight.
            acc += w[i] * (f[i] - f[ANCHOR]);
        }
        f[ANCHOR] + acc
    }

    /// Learns from value `x`, given the forecasts each expert made for it.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    pub fn update(&mut self, x: f64, forecasts: &[f64]) {
        let k = self.slow.len();
        debug_assert_eq!(forecasts.len(), k);
        let inputs = self
            .inputs
            .take()
            .unwrap_or_else(|| self.input_forecasts(forecasts));
        // The scale known before x: the running mean absolute change. Until the series has
        // changed once there is none, and nothing to learn that would be free of its unit.
        let scale = self.scale;
        if scale <= 0.0 {
            self.learn_scale(x);
            return;
        }
        let inv = 1.0 / scale;
        let s = self.settings;
        let squared = s.loss == Loss::Squared;
        let loss_of = |e: f64| if squared { e * e } else { e.abs() };

        // Top level (AdaHedge, de Rooij et al. 2014, Algorithm 1): the inputs' losses on the
        // forecasts they made before x.
        let (idx, n) = self.present();
        let idx = &idx[..n];
        let w = self.top_weights;
        let mut l = [0.0; TOP];
        for &i in idx {
            l[i] = loss_of(x - inputs[i]).min(TOP_LOSS_MAX);
        }
        let hedge: f64 = idx.iter().map(|&i| w[i] * l[i]).sum();
        let mix = if let Some(eta) = self.top_rate(n) {
            let min = idx.iter().map(|&i| l[i]).fold(f64::INFINITY, f64::min);
            let z: f64 = idx
                .iter()
                .map(|&i| w[i] * exp_nonpositive(-eta * (l[i] - min)))
                .sum();
            min - z.ln() / eta
        } else {
            // η = ∞: the mix loss is the smallest loss among the inputs holding weight.
            idx.iter()
                .filter(|&&i| w[i] > 0.0)
                .map(|&i| l[i])
                .fold(f64::INFINITY, f64::min)
        };
        // The gap h − m ≥ 0 by Jensen; rounding can make it a hair negative.
        self.gap += (hedge - mix).max(0.0);
        for &i in idx {
            self.top_loss[i] += l[i];
        }
        self.weigh_top();

        // Every expert's loss as the top level counts it, for the leader (the lowest
        // cumulative loss, the selection left out: it is an input already).
        if s.leader {
            for (c, &fj) in self.expert_loss.iter_mut().zip(forecasts) {
                *c += loss_of(x - fj).min(TOP_LOSS_MAX);
            }
            let experts = &self.expert_loss[..k - 1];
            let lead = experts.iter().copied().fold(f64::INFINITY, f64::min);
            self.leader = experts.iter().position(|&c| c == lead).unwrap_or(0);
        }

        // The two Hedge mixtures: one weight factor e^{−η·ℓ_j} per expert, shared, from the
        // losses as the mixtures count them (clipped lower), in single precision. Clipped
        // losses keep η·ℓ within single precision's exponent range, so no offset by the
        // smallest loss is needed (the normalisation cancels one); a setting that could
        // leave it takes the offset.
        let f = &mut self.scratch;
        // Every entry is written below before it is read.
        if f.len() != k {
            f.resize(k, 0.0);
        }
        let (clip, eta) = (s.clip as f32, s.eta as f32);
        let inv32 = inv as f32;
        let scaled = |fj: f64| ((x - fj) as f32) * inv32;
        // Losses first, then their factors: the second loop runs four to a vector register
        // (the first converts from double precision, two to a register).
        if squared {
            for (m, &fj) in f.iter_mut().zip(forecasts) {
                let e = scaled(fj);
                *m = (e * e).min(clip);
            }
        } else {
            for (m, &fj) in f.iter_mut().zip(forecasts) {
                *m = scaled(fj).abs().min(clip);
            }
        }
        let offset = if s.eta * s.clip <= 80.0 {
            0.0
        } else {
            f.iter().copied().fold(f32::INFINITY, f32::min)
        };
        for v in f.iter_mut() {
            *v = exp_nonpositive_f32(-eta * (*v - offset));
        }
        for (weights, a) in [(&mut self.slow, s.shares[0]), (&mut self.fast, s.shares[1])] {
            let a = a as f32;
            let total = scale_and_sum(weights, f);
            // Normalise and share (Herbster & Warmuth 1998) in one pass.
            if total > 0.0 && total.is_finite() {
                let keep = (1.0 - a) / total;
                for (w, p) in weights.iter_mut().zip(&self.prior) {
                    *w = keep * *w + a * p;
                }
            } else {
                weights.copy_from_slice(&self.prior);
            }
        }

        // Exponentiated gradient (Kivinen & Warmuth 1997, §5): w_j ∝ w_j·e^{−η·∂loss/∂w_j}
        // with the gradient of the loss of the combined forecast ŷ = Σ w_j f_j; taken
        // relative to ŷ (a constant shift of all components cancels in the normalisation),
        // scaled, and clipped.
        if !self.eg.is_empty() {
            let y = inputs[EG];
            let e = ((x - y) * inv).clamp(-EG_CLIP, EG_CLIP);
            let c = (s.eg_rate * if squared { 2.0 * e } else { e.signum() }) as f32;
            // Offsets are clipped to ±EG_CLIP, so c·d ≤ |c|·EG_CLIP: e^{c·d − |c|·EG_CLIP} needs
            // no search for the largest exponent while the range 2·|c|·EG_CLIP stays far
            // from single precision's; otherwise the largest is subtracted.
            let (inv32, clip) = (inv as f32, EG_CLIP as f32);
            for (g, &fj) in f.iter_mut().zip(forecasts) {
                *g = ((fj - y) as f32) * inv32;
            }
            for g in f.iter_mut() {
                *g = c * g.clamp(-clip, clip);
            }
            let top = if c.abs() * clip <= 40.0 {
                c.abs() * clip
            } else {
                f.iter().copied().fold(f32::NEG_INFINITY, f32::max)
            };
            for g in f.iter_mut() {
                *g = exp_nonpositive_f32((*g - top).min(0.0));
            }
            let total = scale_and_sum(&mut self.eg, f);
            let a = s.eg_share as f32;
            if total > 0.0 && total.is_finite() {
                let keep = (1.0 - a) / total;
                let even = a / k as f32;
                for w in self.eg.iter_mut() {
                    *w = keep * *w + even;
                }
            } else {
                self.eg.fill(1.0 / k as f32);
            }
        }
        self.learn_scale(x);
    }

    /// Moves the running scale towards the change from the previous value to `x`.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
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

    /// Checks a restored aggregate for `k` experts.
    pub(crate) fn validate(&self, k: usize) -> Result<(), String> {
        let simplex = |w: &[f64]| {
            w.iter().all(|v| v.is_finite() && *v >= 0.0)
                && (w.iter().sum::<f64>() - 1.0).abs() < 1e-6
        };
        let simplex32 = |w: &[f32]| {
            w.iter().all(|v| v.is_finite() && *v >= 0.0)
                && (w.iter().map(|&v| v as f64).sum::<f64>() - 1.0).abs() < 1e-4
        };
        let s = &self.settings;
        let ok = self.slow.len() == k
            && self.fast.len() == k
            && self.prior.len() == k
            && simplex32(&self.slow)
            && simplex32(&self.fast)
            && simplex32(&self.prior)
            && (self.eg.is_empty() == (s.eg_rate <= 0.0))
            && (self.eg.is_empty() || (self.eg.len() == k && simplex32(&self.eg)))
            && self.expert_loss.len() == k
            && self.expert_loss.iter().all(|l| l.is_finite() && *l >= 0.0)
            && self.leader + 1 < k.max(2)
            && self.top_loss.iter().all(|l| l.is_finite() && *l >= 0.0)
            && simplex(&self.top_weights)
            && self.inputs.is_none_or(|f| f.iter().all(|v| v.is_finite()))
            && self.gap.is_finite()
            && self.gap >= 0.0
            && self.scale.is_finite()
            && self.scale >= 0.0
            && self.last.is_none_or(f64::is_finite)
            && s.shares.iter().all(|a| (0.0..1.0).contains(a))
            && (0.0..1.0).contains(&s.eg_share)
            && s.eta > 0.0
            && s.clip > 0.0;
        if ok {
            Ok(())
        } else {
            Err("forecast weights are damaged".into())
        }
    }

    #[doc(hidden)]
    pub fn effective_weights(&self) -> Vec<f64> {
        let t = &self.top_weights;
        let k = self.slow.len();
        (0..k)
            .map(|j| {
                let mut w = t[SLOW] * self.slow[j] as f64 + t[FAST] * self.fast[j] as f64;
                if !self.eg.is_empty() {
                    w += t[EG] * self.eg[j] as f64;
                }
                w + if j + 1 == k { t[ANCHOR] } else { 0.0 }
                    + if j == self.leader { t[LEADER] } else { 0.0 }
            })
            .collect()
    }
}

/// ln n for the top level's n ≤ 5 inputs (AdaHedge's η = ln K / Δ), without a call to the
/// library's logarithm twice a step.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn ln_inputs(n: usize) -> f64 {
    const LN: [f64; TOP + 1] = [
        0.0,
        0.0,
        std::f64::consts::LN_2,
        1.098_612_288_668_109_8,
        1.386_294_361_119_890_6,
        1.609_437_912_434_100_3,
    ];
    LN[n]
}

/// Σ w_j·f_j of two weight vectors (each summing to 1) in one pass over the forecasts, as
/// offsets from f_0, so that equal forecasts combine to exactly that value (weights summing
/// to 1 only up to rounding cannot move it). Four running sums each, so that the additions
/// overlap.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn mean2(a: &[f32], b: &[f32], forecasts: &[f64]) -> [f64; 2] {
    let base = forecasts[0];
    let (mut sa, mut sb) = ([0.0; 4], [0.0; 4]);
    let (a4, b4, f4) = (
        a.chunks_exact(4),
        b.chunks_exact(4),
        forecasts.chunks_exact(4),
    );
    let (mut ta, mut tb) = (0.0, 0.0);
    for ((&wa, &wb), f) in a4
        .remainder()
        .iter()
        .zip(b4.remainder())
        .zip(f4.remainder())
    {
        let d = f - base;
        ta += wa as f64 * d;
        tb += wb as f64 * d;
    }
    for ((wa, wb), f) in a4.zip(b4).zip(f4) {
        let wa: &[f32; 4] = wa.try_into().expect("4 lanes");
        let wb: &[f32; 4] = wb.try_into().expect("4 lanes");
        let f: &[f64; 4] = f.try_into().expect("4 lanes");
        for k in 0..4 {
            let d = f[k] - base;
            sa[k] += wa[k] as f64 * d;
            sb[k] += wb[k] as f64 * d;
        }
    }
    [
        base + ((sa[0] + sa[1]) + (sa[2] + sa[3]) + ta),
        base + ((sb[0] + sb[1]) + (sb[2] + sb[3]) + tb),
    ]
}

/// The weighted means ([`mean2`]) of the three weight vectors in one pass over the forecasts
/// (an empty third vector gives 0 for it).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn means(a: &[f32], b: &[f32], c: &[f32], forecasts: &[f64]) -> [f64; 3] {
    if c.is_empty() {
        let [ma, mb] = mean2(a, b, forecasts);
        return [ma, mb, 0.0];
    }
    let base = forecasts[0];
    let k = forecasts.len();
    let (mut sa, mut sb, mut sc) = ([0.0; 2], [0.0; 2], [0.0; 2]);
    let pairs = k / 2;
    let (a2, b2, c2) = (a.chunks_exact(2), b.chunks_exact(2), c.chunks_exact(2));
    for (((f, a), b), c) in forecasts
        .chunks_exact(2)
        .zip(a2)
        .zip(b2)
        .zip(c2)
        .take(pairs)
    {
        // As arrays, so that the two lanes are one vector operation, not two.
        let f: &[f64; 2] = f.try_into().expect("2 lanes");
        let (a, b, c): (&[f32; 2], &[f32; 2], &[f32; 2]) = (
            a.try_into().expect("2 lanes"),
            b.try_into().expect("2 lanes"),
            c.try_into().expect("2 lanes"),
        );
        for l in 0..2 {
            let d = f[l] - base;
            sa[l] += a[l] as f64 * d;
            sb[l] += b[l] as f64 * d;
            sc[l] += c[l] as f64 * d;
        }
    }
    if k % 2 == 1 {
        let d = forecasts[k - 1] - base;
        sa[0] += a[k - 1] as f64 * d;
        sb[0] += b[k - 1] as f64 * d;
        sc[0] += c[k - 1] as f64 * d;
    }
    [
        base + (sa[0] + sa[1]),
        base + (sb[0] + sb[1]),
        base + (sc[0] + sc[1]),
    ]
}

/// Multiplies each weight by its factor and returns the new total (four running sums in a
/// fixed order: the same result on every platform).
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn scale_and_sum(weights: &mut [f32], factors: &[f32]) -> f32 {
    let mut acc = [0.0f32; 4];
    let mut w4 = weights.chunks_exact_mut(4);
    let mut f4 = factors.chunks_exact(4);
    for (w, f) in (&mut w4).zip(&mut f4) {
        // As arrays, so that the four lanes are one vector operation, not four.
        let w: &mut [f32; 4] = w.try_into().expect("4 lanes");
        let f: &[f32; 4] = f.try_into().expect("4 lanes");
        let mut v = *w;
        for l in 0..4 {
            v[l] *= f[l];
            acc[l] += v[l];
        }
        *w = v;
    }
    let mut tail = 0.0;
    for (w, f) in w4.into_remainder().iter_mut().zip(f4.remainder()) {
        *w *= f;
        tail += *w;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// e^x for x ≤ 0 in single precision (0 below −87), to about 3e-6 relative: as
/// [`exp_nonpositive`], with a degree-5 polynomial. Four to a vector register.
#[inline]
fn exp_nonpositive_f32(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // 1.5·2^23: adding it rounds to an integer in the low mantissa bits.
    const SHIFT: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let t = x * std::f32::consts::LOG2_E + SHIFT;
    let k = t - SHIFT;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 120.0;
    for c in [1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = p * r + c;
    }
    // −126 ≤ k ≤ 0, so 2^k is a normal number.
    let k = (t.to_bits() as i32).wrapping_sub(SHIFT.to_bits() as i32);
    p * f32::from_bits(((k + 127) as u32) << 23)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(loss: Loss, shares: [f64; 2], eg_rate: f64) -> Settings {
        Settings {
            loss,
            eta: 0.3,
            shares,
            eg_rate,
            eg_share: 0.002,
            scale_gain: 0.05,
            clip: 25.0,
            prior_last: 0.0,
            leader: true,
        }
    }

    #[test]
    fn weight_goes_to_the_forecaster_that_is_right() {
        let mut a = Aggregate::new(3, settings(Loss::Squared, [0.0, 0.0], 0.0));
        for i in 0..300 {
            let x = 10.0 + (i % 3) as f64 * 0.1;
            a.update(x, &[x + 5.0, x + 0.01, x - 3.0]);
        }
        assert_eq!(a.leader(), 1);
        let (j, share) = a.leader_share();
        assert!(j == 1 && share > 0.99 && share <= 1.0 + 1e-9, "{share}");
        assert!(a.slow[1] > 0.99, "{:?}", a.slow);
        let f = a.forecast(&[15.0, 10.01, 7.0]);
        assert!((f - 10.01).abs() < 0.1, "{f}");
    }

    #[test]
    fn fixed_share_lets_a_new_best_forecaster_take_over() {
        let run = |share: f64| {
            let mut a = Aggregate::new(3, settings(Loss::Absolute, [share, share], 0.0));
            for i in 0..400 {
                let x = (i % 5) as f64;
                let (good, bad) = (x + 0.1, x + 2.0);
                let f = if i < 300 {
                    [good, bad, bad]
                } else {
                    [bad, good, bad]
                };
                a.update(x, &f);
            }
            a.fast[1]
        };
        assert!(run(0.01) > 0.9, "shared: {}", run(0.01));
        assert!(run(0.01) > run(0.0));
    }

    #[test]
    fn the_top_level_keeps_the_selection_when_it_is_best() {
        // The last expert (the selection) forecasts the mean of independent noise; the
        // others are off or noisy themselves, and no combination of them does better.
        let mut a = Aggregate::new(4, settings(Loss::Squared, [0.0005, 0.01], 0.02));
        let mut s: u64 = 1;
        let mut noise = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((s >> 33) % 1000) as f64 / 100.0 - 5.0
        };
        for _ in 0..3000 {
            let (x, other) = (100.0 + noise(), 100.0 + noise());
            a.update(x, &[other, 100.0 + 2.0, 100.0 - 4.0, 100.0]);
        }
        let w = a.top_weights;
        assert!(w[ANCHOR] > 0.5, "{w:?}");
    }

    #[test]
    fn exponentiated_gradient_finds_a_convex_combination() {
        // x = 0.7·a + 0.3·b exactly: neither forecaster alone is right.
        let mut a = Aggregate::new(3, settings(Loss::Squared, [0.001, 0.01], 0.05));
        let mut s: u64 = 3;
        for _ in 0..4000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            let u = ((s >> 33) % 1000) as f64 / 100.0;
            let (fa, fb) = (50.0 + u, 40.0 - u);
            let x = 0.7 * fa + 0.3 * fb;
            a.update(x, &[fa, fb, fb]);
        }
        assert!((a.eg[0] - 0.7).abs() < 0.05, "{:?}", a.eg);
    }

    #[test]
    fn losses_are_scale_free() {
        let feed = |c: f64| {
            let mut a = Aggregate::new(3, settings(Loss::Squared, [0.002, 0.01], 0.02));
            let mut s: u64 = 9;
            for _ in 0..300 {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                let x = c * ((s >> 33) % 100) as f64;
                a.update(x, &[x + c, x - 2.0 * c, 50.0 * c]);
            }
            a.effective_weights()
        };
        let (ms, mbit) = (feed(1.0), feed(1e-3));
        for (a, b) in ms.iter().zip(&mbit) {
            assert!((a - b).abs() < 1e-9, "{ms:?} vs {mbit:?}");
        }
    }

    #[test]
    fn equal_forecasts_combine_to_exactly_that_value() {
        let mut a = Aggregate::new(5, settings(Loss::Absolute, [0.002, 0.01], 0.0));
        for i in 0..50 {
            let x = (i % 7) as f64 * 0.37;
            a.update(x, &[x + 1.0, x - 0.5, x, x * 2.0, x + 0.1]);
        }
        let v = 0.1 + 0.2;
        assert_eq!(a.forecast(&[v; 5]), v);
    }

    #[test]
    fn the_logarithms_of_the_input_counts_are_the_library_ones() {
        for n in 1..=TOP {
            assert_eq!(ln_inputs(n), (n as f64).ln(), "{n}");
        }
    }

    #[test]
    fn single_precision_exp_is_close_to_the_library_exp() {
        let mut x = 0.0f32;
        while x > -100.0 {
            let (a, b) = (exp_nonpositive_f32(x), x.exp());
            assert!((a - b).abs() <= 5e-6 * b + 1e-37, "{x}: {a} vs {b}");
            x -= 0.0131;
        }
        assert_eq!(exp_nonpositive_f32(0.0), 1.0);
        assert!(exp_nonpositive_f32(-1e9) >= 0.0);
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
}

#[cfg(test)]
mod unit_free {
    use crate::{Bank, Mode};

    /// A mixability gap so small that ln K / Δ overflows is η = ∞: all weight on the
    /// leader, as at Δ = 0 (found in review: ∞·0 made every input's factor the same).
    #[test]
    fn a_gap_too_small_for_its_rate_follows_the_leader() {
        let mut a = super::Aggregate::new(3, crate::bank::MSE_AGGREGATE);
        a.top_loss = [0.0, 1e-300, 1e-300, 1e-300, 0.0];
        for gap in [1e-308, 5e-309, 1e-320] {
            a.gap = gap;
            a.weigh_top();
            assert!(
                a.top_weights[super::ANCHOR] > 0.999,
                "{gap:e}: {:?}",
                a.top_weights
            );
        }
    }

    /// The top level learns from raw losses, so its sums carry the series' unit squared:
    /// values from 1e-140 to 1e-174 (squared errors down in and below f64's subnormals) and
    /// 1e90 still give finite forecasts.
    #[test]
    fn raw_losses_stay_finite_in_any_unit() {
        let scales = (140..175).map(|e| 10f64.powi(-e)).chain([1e90]);
        for scale in scales {
            let mut b = Bank::new(Mode::Improved);
            for i in 0..400 {
                let x = scale * (1.0 + ((i * 7919) % 13) as f64 / 13.0);
                b.update(x).unwrap();
                let f = b.forecast().expect("a forecast after a value");
                assert!(
                    f.mse.value.is_finite() && f.mae.value.is_finite(),
                    "{scale:e} at {i}: {f:?}"
                );
            }
        }
    }
}
