//! The Bayesian classifier of the cause of packet loss (Dickens §3): given one window's
//! packet-loss signature, the probability that the loss came from contention for the
//! receiver's CPU rather than for the network.
//!
//! Pure library: signatures and a model in, verdicts out; no clock, no I/O (the model file
//! is read by the caller and handed over as text). Per window (§3.3):
//!
//! 1. loss rate x = lost / packets;
//! 2. x ≥ `complexity_from` (0.0005): the metric is the signature's complexity, and each
//!    hypothesis's mean is its fitted curve at x; where the model has the success
//!    proportion's bands (`Model::success_by_band`), that metric's likelihood multiplies in
//!    as a second opinion (not in [`Classifier::paper`]): complexity alone cannot tell random
//!    loss from bursts where their curves cross (0.002–0.01 in 4,096 packets, measured in
//!    BENCHMARKS.md), the success proportion can; `success_from` (0.00008) ≤ x < 0.0005: the
//!    metric is the success proportion, with constant means; below, or when the metric is
//!    undefined, no decision: P(CPU) = P(network) = ½ (treated as network by the
//!    controller);
//! 3. z = (metric − μ_H) / σ_H (eq. 5); likelihood = 1 − P(−|z| < Z < |z|) = erfc(|z|/√2)
//!    (§3.3, Figure 7);
//! 4. posterior by Bayes' rule with equal priors (eq. 3). When the observation is far from
//!    both means (both likelihoods below [`MIN_LIKELIHOOD`], i.e. beyond 4.9 σ of each), the
//!    classifier cannot tell and answers ½ (§2.2, §7.1: "unable to make a diagnosis").
//!
//! Cost: one pass over the signature for each metric (see [`metrics`]), a few exponentials;
//! no allocation once a [`Classifier`] exists.

pub mod metrics;
pub mod model;
pub mod signature;

use metrics::{success_proportion, Complexity};
use model::{
    curve_points, fit_bands, fit_curve, fit_normal, Model, Pair, Samples, FORMAT, NORMAL_POINTS,
    SIGNATURE_PACKETS_MAX, SIGNATURE_PACKETS_MIN,
};
use signature::{Label, Labelled, Signature};

/// Below this likelihood under both hypotheses, the verdict is ½ (inconclusive).
pub const MIN_LIKELIHOOD: f64 = 1e-6;
/// The controller's threshold (§2.2): at or above this P(CPU), no corrective action.
pub const CPU_THRESHOLD: f64 = 0.95;

/// The metric a verdict was based on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    Complexity,
    SuccessProportion,
    /// Loss rate below the operating range, or a metric without a value: ½.
    None,
}

impl Basis {
    /// The name used in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            Basis::Complexity => "complexity",
            Basis::SuccessProportion => "success_proportion",
            Basis::None => "none",
        }
    }
}

/// The classifier's answer for one signature.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    pub loss_rate: f64,
    pub basis: Basis,
    /// The metric's value, when one was used.
    pub value: Option<f64>,
    pub p_cpu: f64,
}

/// How a verdict reads when scored against the truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnosis {
    Cpu,
    Network,
    /// Neither reached 0.95 (the ½ answer, or anything between 0.05 and 0.95).
    Inconclusive,
    /// Loss rate below the operating range (or no loss): ½ by rule, not scored.
    OutOfRange,
}

impl Verdict {
    pub fn diagnosis(&self) -> Diagnosis {
        if self.basis == Basis::None {
            Diagnosis::OutOfRange
        } else if self.p_cpu >= CPU_THRESHOLD {
            Diagnosis::Cpu
        } else if self.p_cpu <= 1.0 - CPU_THRESHOLD {
            Diagnosis::Network
        } else {
            Diagnosis::Inconclusive
        }
    }
}

/// erfc(x), Numerical Recipes' Chebyshev fit (fractional error below 1.2·10⁻⁷ everywhere).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The likelihood of `x` under a normal of mean `mu` and σ `sigma` (§3.3, Figure 7).
pub fn likelihood(x: f64, mu: f64, sigma: f64) -> f64 {
    erfc(((x - mu) / sigma).abs() / std::f64::consts::SQRT_2)
}

/// Equal-prior posterior of CPU contention from the two likelihoods (eq. 3).
fn posterior(l_cpu: f64, l_net: f64) -> f64 {
    if l_cpu.max(l_net) < MIN_LIKELIHOOD {
        0.5
    } else {
        l_cpu / (l_cpu + l_net)
    }
}

/// A model with its scratch space.
pub struct Classifier {
    pub model: Model,
    complexity: Complexity,
    /// Complexity alone in its range, as algorithms.md §5 (for comparison).
    paper: bool,
}

impl Classifier {
    pub fn new(model: Model) -> Self {
        Self {
            model,
            complexity: Complexity::new(),
            paper: false,
        }
    }

    /// The classifier exactly as algorithms.md §5: complexity alone from 0.0005, the success
    /// proportion alone below; the model's success bands are not used.
    pub fn paper(model: Model) -> Self {
        Self {
            paper: true,
            ..Self::new(model)
        }
    }

    /// The verdict for one window's signature.
    pub fn classify(&mut self, s: &Signature) -> Verdict {
        let x = s.loss_rate();
        let none = |value| Verdict {
            loss_rate: x,
            basis: Basis::None,
            value,
            p_cpu: 0.5,
        };
        let m = &self.model;
        if x >= m.complexity_from {
            let Some(c) = self.complexity.of(s) else {
                return none(None);
            };
            let (n, p) = (&m.complexity.network, &m.complexity.cpu);
            let l_net = likelihood(c, n.mean(x), n.sigma_at(x));
            let l_cpu = likelihood(c, p.mean(x), p.sigma_at(x));
            let mut p_cpu = posterior(l_cpu, l_net);
            // The second opinion: the success proportion's likelihoods multiply in (the two
            // metrics taken as independent given the cause). Where the two together fit
            // neither cause (both joint likelihoods below MIN_LIKELIHOOD), complexity's own
            // verdict stands: a slow sender's CPU loss is periodic single losses, whose
            // success proportion (0) a burst model calls impossible, while its complexity is
            // far from random loss's.
            if !self.paper {
                if let (Some((sn, sc)), Some(sp)) = (m.success_at(x), success_proportion(s)) {
                    let (j_cpu, j_net) = (
                        l_cpu * likelihood(sp, sc.mean, sc.sigma),
                        l_net * likelihood(sp, sn.mean, sn.sigma),
                    );
                    if j_cpu.max(j_net) >= MIN_LIKELIHOOD {
                        p_cpu = posterior(j_cpu, j_net);
                    }
                }
            }
            Verdict {
                loss_rate: x,
                basis: Basis::Complexity,
                value: Some(c),
                p_cpu,
            }
        } else if x >= m.success_from {
            let Some(sp) = success_proportion(s) else {
                return none(None);
            };
            let (n, p) = (&m.success.network, &m.success.cpu);
            Verdict {
                loss_rate: x,
                basis: Basis::SuccessProportion,
                value: Some(sp),
                p_cpu: posterior(
                    likelihood(sp, p.mean, p.sigma),
                    likelihood(sp, n.mean, n.sigma),
                ),
            }
        } else {
            none(None)
        }
    }
}

/// Fits a model from labelled signatures (unlabelled ones are ignored). Errors name what
/// is missing.
pub fn train(signatures: &[Labelled], trained_on: &str) -> Result<Model, String> {
    const COMPLEXITY_FROM: f64 = 0.0005;
    const SUCCESS_FROM: f64 = 0.00008;
    let mut c = Complexity::new();
    let mut rows: [Vec<(f64, f64)>; 2] = Default::default();
    let mut sps: [Vec<f64>; 2] = Default::default();
    let mut banded: [Vec<(f64, f64)>; 2] = Default::default();
    for l in signatures {
        let Some(label) = l.label else { continue };
        let k = usize::from(label == Label::Cpu);
        let x = l.signature.loss_rate();
        if x >= COMPLEXITY_FROM {
            if let Some(v) = c.of(&l.signature) {
                rows[k].push((x, v));
            }
            if let Some(v) = success_proportion(&l.signature) {
                banded[k].push((x, v));
            }
        } else if x >= SUCCESS_FROM {
            if let Some(v) = success_proportion(&l.signature) {
                sps[k].push(v);
            }
        }
    }
    // One length for all: the metrics depend on it (see `Model::signature_packets`).
    let mut lengths = signatures
        .iter()
        .filter(|l| l.label.is_some())
        .map(|l| l.signature.len());
    let signature_packets = lengths.next().ok_or("no labelled signatures")?;
    if let Some(other) = lengths.find(|&n| n != signature_packets) {
        return Err(format!(
            "signatures of {signature_packets} and of {other} packets: a model is trained on one length"
        ));
    }
    if !(SIGNATURE_PACKETS_MIN..=SIGNATURE_PACKETS_MAX).contains(&signature_packets) {
        return Err(format!(
            "signatures of {signature_packets} packets: a model takes {SIGNATURE_PACKETS_MIN}–{SIGNATURE_PACKETS_MAX}"
        ));
    }
    // Of each label: how many signatures there are, and their highest loss rate.
    let of = |label: Label| {
        signatures
            .iter()
            .filter(|l| l.label == Some(label))
            .fold((0, 0.0f64), |(n, hi), l| {
                (n + 1, hi.max(l.signature.loss_rate()))
            })
    };
    // Every shortfall at once, each with the least a fit takes (the first alone sent a
    // user to fix one and meet the next).
    let mut missing = Vec::new();
    let mut need = |what: &str, label: Label, n: usize, range: &str, least: usize| {
        let (all, _) = of(label);
        missing.push(format!(
            "too few {} signatures with loss rates {range} to fit {what} ({n} of {all}; at \
             least {least}, spread over that range)",
            label.name()
        ));
    };
    let (complexity_range, success_range) = ("from 0.0005", "0.00008–0.0005");
    let net_c = fit_curve(&rows[0], 2);
    if net_c.is_none() {
        need(
            "complexity",
            Label::Network,
            rows[0].len(),
            complexity_range,
            curve_points(2),
        );
    }
    let cpu_c = fit_curve(&rows[1], 1);
    if cpu_c.is_none() {
        need(
            "complexity",
            Label::Cpu,
            rows[1].len(),
            complexity_range,
            curve_points(1),
        );
    }
    let net_s = fit_normal(&sps[0]);
    if net_s.is_none() {
        need(
            "success proportions",
            Label::Network,
            sps[0].len(),
            success_range,
            NORMAL_POINTS,
        );
    }
    let cpu_s = fit_normal(&sps[1]);
    if cpu_s.is_none() {
        need(
            "success proportions",
            Label::Cpu,
            sps[1].len(),
            success_range,
            NORMAL_POINTS,
        );
    }
    let (Some(net_c), Some(cpu_c), Some(net_s), Some(cpu_s)) = (net_c, cpu_c, net_s, cpu_s) else {
        return Err(missing.join("; "));
    };
    // A σ of 0 (every sample alike) would make any other value impossible; keep a floor.
    let floor = |s: f64| s.max(1e-3);
    let mut model = Model {
        format: FORMAT.into(),
        trained_on: trained_on.into(),
        signature_packets,
        samples: Pair {
            network: Samples {
                complexity: rows[0].len(),
                success: sps[0].len(),
            },
            cpu: Samples {
                complexity: rows[1].len(),
                success: sps[1].len(),
            },
        },
        complexity_from: COMPLEXITY_FROM,
        success_from: SUCCESS_FROM,
        complexity: Pair {
            network: net_c,
            cpu: cpu_c,
        },
        success: Pair {
            network: net_s,
            cpu: cpu_s,
        },
        success_by_band: Pair {
            network: fit_bands(&banded[0]),
            cpu: fit_bands(&banded[1]),
        },
    };
    for s in [
        &mut model.success.network.sigma,
        &mut model.success.cpu.sigma,
    ] {
        *s = floor(*s);
    }
    // What a model file must pass to be read, the fitted model passes, or nothing is written:
    // a curve fitted on low loss rates alone can run out of the metric's range above them.
    model.check().map_err(|e| {
        let (_, net) = of(Label::Network);
        let (_, cpu) = of(Label::Cpu);
        format!(
            "the fitted model could not classify: {e} (the network signatures' loss rates \
             reach {net:.3}, the cpu signatures' {cpu:.3}; the curves must hold up to a loss rate \
             of 1: add signatures at higher loss rates)"
        )
    })
}

/// Counts of diagnoses of signatures of one true cause, per metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub correct: usize,
    pub wrong: usize,
    pub inconclusive: usize,
    pub out_of_range: usize,
}

impl Tally {
    pub fn add(&mut self, truth: Label, d: Diagnosis) {
        match (truth, d) {
            (_, Diagnosis::OutOfRange) => self.out_of_range += 1,
            (_, Diagnosis::Inconclusive) => self.inconclusive += 1,
            (Label::Cpu, Diagnosis::Cpu) | (Label::Network, Diagnosis::Network) => {
                self.correct += 1
            }
            _ => self.wrong += 1,
        }
    }

    /// Signatures within the operating range.
    pub fn diagnosed(&self) -> usize {
        self.correct + self.wrong + self.inconclusive
    }

    pub fn add_all(&mut self, o: &Tally) {
        self.correct += o.correct;
        self.wrong += o.wrong;
        self.inconclusive += o.inconclusive;
        self.out_of_range += o.out_of_range;
    }
}

/// Labelled signatures drawn the two ways: scattered single losses (network) and runs of
/// losses (CPU stalls), at loss rates from 10⁻⁴ to 5·10⁻² (for tests).
#[cfg(test)]
pub(crate) mod tests_support {
    use crate::classify::signature::{Label, Labelled, Signature};

    pub fn synthetic(n: usize, seed: u64) -> Vec<Labelled> {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let len = 4096;
        let mut out = Vec::new();
        for i in 0..n {
            let rate = 10f64.powf(-4.0 + 2.7 * rnd());
            let mut s = Signature::all_received(len);
            let label = if i % 2 == 0 {
                Label::Network
            } else {
                Label::Cpu
            };
            match label {
                Label::Network => (0..len).filter(|_| rnd() < rate).for_each(|j| s.lose(j)),
                Label::Cpu => {
                    let want = ((rate * len as f64).round() as usize).max(2);
                    let mut left = want;
                    while left > 0 {
                        let run = left.min(8 + (rnd() * 60.0) as usize);
                        let at = (rnd() * (len - run) as f64) as usize;
                        (at..at + run).for_each(|j| s.lose(j));
                        left -= run;
                    }
                }
            }
            out.push(Labelled {
                label: Some(label),
                signature: s,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_reference_values() {
        // erfc(0) = 1, erfc(1) = 0.157299207, erfc(2) = 0.004677735, erfc(-1) = 1.842700793.
        for (x, want) in [
            (0.0, 1.0),
            (1.0, 0.157_299_207),
            (2.0, 0.004_677_735),
            (-1.0, 1.842_700_793),
        ] {
            assert!((erfc(x) - want).abs() < 2e-7 * want.max(1e-3), "{x}");
        }
        // One σ away: 1 − 0.6827 of the mass lies further out.
        assert!((likelihood(1.0, 0.0, 1.0) - 0.317_310_5).abs() < 1e-6);
    }

    use crate::classify::tests_support::synthetic;

    #[test]
    fn a_model_trained_on_synthetic_causes_tells_them_apart() {
        let model = train(&synthetic(3000, 7), "synthetic").unwrap();
        let text = model.to_json();
        let mut c = Classifier::new(Model::from_json(&text).unwrap());
        let (mut cpu, mut net) = (Tally::default(), Tally::default());
        for l in synthetic(2000, 99) {
            let v = c.classify(&l.signature);
            let label = l.label.unwrap();
            match label {
                Label::Cpu => cpu.add(label, v.diagnosis()),
                Label::Network => net.add(label, v.diagnosis()),
            }
        }
        // Synthetic stalls of 8–68 packets overlap isolated losses in complexity between
        // loss rates of 0.001 and 0.01 in 4,096-packet windows; there the classifier must
        // say it cannot tell rather than guess. The accuracy that counts is measured on
        // emulated links (native-probes/BENCHMARKS.md).
        for t in [cpu, net] {
            assert!(t.correct as f64 >= 0.5 * t.diagnosed() as f64, "{t:?}");
            assert!(t.wrong as f64 <= 0.02 * t.diagnosed() as f64, "{t:?}");
        }
    }

    #[test]
    fn the_success_proportion_settles_what_complexity_cannot() {
        // Synthetic stalls and isolated losses overlap in complexity between loss rates of
        // 0.001 and 0.01 (above); their success proportions do not (runs against singles).
        let model = train(&synthetic(3000, 7), "synthetic").unwrap();
        assert!(!model.success_by_band.cpu.is_empty() && !model.success_by_band.network.is_empty());
        let score = |mut c: Classifier| {
            let mut t = [Tally::default(), Tally::default()];
            for l in synthetic(2000, 99) {
                let v = c.classify(&l.signature);
                let label = l.label.unwrap();
                t[usize::from(label == Label::Cpu)].add(label, v.diagnosis());
            }
            t
        };
        let (ours, paper) = (
            score(Classifier::new(model.clone())),
            score(Classifier::paper(model)),
        );
        for k in 0..2 {
            assert!(
                ours[k].correct > paper[k].correct,
                "{:?} against {:?}",
                ours[k],
                paper[k]
            );
            assert!(
                ours[k].wrong <= paper[k].wrong,
                "{:?} against {:?}",
                ours[k],
                paper[k]
            );
            // From a loss rate of 0.0005 the verdicts are nearly all right.
            assert!(
                ours[k].correct as f64 >= 0.9 * ours[k].diagnosed() as f64,
                "{:?}",
                ours[k]
            );
        }
    }

    /// Labelled signatures of 16,384 packets: random loss at each of `net` loss rates and
    /// bursts of 5–60 losses every 300–3,000 packets (`cpu` of them), ten of each.
    fn labelled(net: &[f64], cpu: usize, seed: u64) -> Vec<Labelled> {
        let mut rng = crate::rng::Rng::new(seed);
        let len = 16_384;
        let mut out = Vec::new();
        for &p in net {
            for _ in 0..10 {
                let mut s = Signature::all_received(len);
                (0..len).filter(|_| rng.unit() < p).for_each(|j| s.lose(j));
                out.push(Labelled {
                    label: Some(Label::Network),
                    signature: s,
                });
            }
        }
        for _ in 0..cpu {
            let mut s = Signature::all_received(len);
            let mut at = (rng.unit() * 3000.0) as usize;
            while at < len {
                let run = 5 + (rng.unit() * 55.0) as usize;
                (at..(at + run).min(len)).for_each(|j| s.lose(j));
                at += run + 300 + (rng.unit() * 2700.0) as usize;
            }
            out.push(Labelled {
                label: Some(Label::Cpu),
                signature: s,
            });
        }
        out
    }

    /// CPU signatures of one burst of 2–7 losses: loss rates in the success proportion's
    /// range.
    fn single_bursts(n: usize, seed: u64) -> Vec<Labelled> {
        let mut rng = crate::rng::Rng::new(seed);
        (0..n)
            .map(|_| {
                let mut s = Signature::all_received(16_384);
                let at = (rng.unit() * 16_000.0) as usize;
                (at..at + 2 + (rng.unit() * 6.0) as usize).for_each(|j| s.lose(j));
                Labelled {
                    label: Some(Label::Cpu),
                    signature: s,
                }
            })
            .collect()
    }

    #[test]
    fn what_train_fits_either_loads_or_is_refused_saying_what_is_missing() {
        // No signature in the success proportion's range (0.00008–0.0005): said in those
        // words, with how many signatures of that cause there were (it said "(0)" of 40).
        let e = train(&labelled(&[0.001, 0.005, 0.02, 0.05], 40, 1), "t").unwrap_err();
        assert!(
            e.contains("too few network signatures with loss rates 0.00008–0.0005")
                && e.contains(" of 40; at least 2,"),
            "{e}"
        );
        // Every shortfall at once, the cpu one too: not the first alone.
        assert!(
            e.contains("; too few cpu signatures with loss rates 0.00008–0.0005"),
            "{e}"
        );
        // Network loss up to 5 % only: the two exponentials, fitted there, can run out of
        // the metric's range at higher loss rates, where a model file is checked. Until
        // 2026-12-07 `train` wrote such a model, which `classify --model` then refused.
        for seed in 1..6 {
            let mut sigs = labelled(&[0.0002, 0.0004, 0.001, 0.005, 0.02, 0.05], 40, seed);
            sigs.extend(single_bursts(10, seed));
            match train(&sigs, "t") {
                Ok(m) => assert!(Model::from_json(&m.to_json()).is_ok(), "seed {seed}"),
                Err(e) => assert!(e.contains("add signatures at higher loss rates"), "{e}"),
            }
        }
    }

    #[test]
    fn a_model_is_trained_on_one_signature_length_and_records_it() {
        let mut sigs = synthetic(1000, 3);
        assert_eq!(train(&sigs, "s").unwrap().signature_packets, 4096);
        sigs.push(Labelled::parse("cpu 16384 5-40").unwrap());
        let e = train(&sigs, "s").unwrap_err();
        assert!(e.contains("4096") && e.contains("16384"), "{e}");
    }

    #[test]
    fn below_the_range_the_answer_is_half() {
        let model = train(&synthetic(1000, 3), "synthetic").unwrap();
        let mut c = Classifier::new(model);
        let v = c.classify(&Labelled::parse("? 4096").unwrap().signature);
        assert_eq!(
            (v.basis, v.p_cpu, v.diagnosis()),
            (Basis::None, 0.5, Diagnosis::OutOfRange)
        );
        let v = c.classify(&Labelled::parse("? 100000 5").unwrap().signature);
        assert_eq!(v.basis, Basis::None);
    }
}
