//! The classifier's models (Dickens §3.1.6, §3.2) and how they are fitted.
//!
//! - Complexity depends on the loss rate as well as on the cause, so each cause has a model
//!   of the *mean* complexity as a function of the loss rate x: a sum of two exponentials for
//!   network contention and a single exponential for CPU contention (§3.1.6, the forms the
//!   paper found best), `μ(x) = c + Σₖ aₖ·e^(−bₖ·x)`, with observations normal around that
//!   mean (§3.2) and σ the spread of the training data around it.
//! - The success proportion is "largely independent of the loss rate" in its range
//!   (§3.1.5), so each cause has a constant mean and σ.
//!
//! Fitting: for fixed rates bₖ the model is linear in c and aₖ, which least squares solves
//! exactly; the rates are searched on a logarithmic grid and then refined by a shrinking
//! pattern search on log bₖ (variable projection). σ is the root-mean-square residual.
//! Models are stored as JSON with a format version ([`FORMAT`]); `nowcast classify train`
//! writes one for a new system from labelled signatures.

use serde::{Deserialize, Serialize};

/// The model file's format; a reader refuses any other.
pub const FORMAT: &str = "nowcast-fobs-classifier/1";

/// `μ(x) = c + Σₖ aₖ·e^(−bₖ·x)` with σ around it.
///
/// σ is kept per band of loss rates (four bands a decade), because the spread is not the
/// same everywhere: at low loss rates a short signature's losses are mostly isolated and
/// its complexity takes a few discrete values, at high rates it varies more. The paper
/// shows the spread per bin of loss rates (Figure 6); a band with fewer than
/// [`MIN_BAND`] samples takes the overall σ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub c: f64,
    /// (aₖ, bₖ) pairs.
    pub terms: Vec<(f64, f64)>,
    /// The overall root-mean-square residual.
    pub sigma: f64,
    /// (upper loss rate of the band, σ in the band), bands in increasing order.
    #[serde(default)]
    pub bands: Vec<(f64, f64)>,
}

/// Fewest samples for a band of loss rates to have a σ of its own.
pub const MIN_BAND: usize = 20;
/// Lowest σ a model keeps: one word more or less among 18 moves complexity by 0.0046.
pub const MIN_SIGMA: f64 = 0.004;

/// The band of loss rate `x`: four a decade.
fn band_upper(x: f64) -> f64 {
    10f64.powf((x.log10() * 4.0).floor() / 4.0 + 0.25)
}

/// (loss rate, value) points grouped by band of loss rate ([`band_upper`]): the bands in
/// increasing order, each with its values in the order given.
fn by_band(points: impl IntoIterator<Item = (f64, f64)>) -> Vec<(f64, Vec<f64>)> {
    let mut by: Vec<(f64, Vec<f64>)> = Vec::new();
    for (x, v) in points {
        let upper = band_upper(x);
        match by
            .iter_mut()
            .find(|(u, _)| (*u - upper).abs() <= 1e-9 * upper)
        {
            Some((_, vs)) => vs.push(v),
            None => by.push((upper, vec![v])),
        }
    }
    by.sort_by(|a, b| a.0.total_cmp(&b.0));
    by
}

impl Curve {
    pub fn mean(&self, x: f64) -> f64 {
        self.c
            + self
                .terms
                .iter()
                .map(|(a, b)| a * (-b * x).exp())
                .sum::<f64>()
    }

    /// σ at loss rate `x`.
    pub fn sigma_at(&self, x: f64) -> f64 {
        self.bands
            .iter()
            .find(|(upper, _)| x < *upper)
            .map_or(self.sigma, |(_, s)| *s)
    }

    /// Sets the per-band σ from the training points.
    fn fit_bands(&mut self, rows: &[(f64, f64)]) {
        let mut sorted = rows.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let squares = sorted.iter().map(|&(x, y)| (x, (y - self.mean(x)).powi(2)));
        self.bands = by_band(squares)
            .into_iter()
            .map(|(u, r2)| {
                let sigma = if r2.len() >= MIN_BAND {
                    (r2.iter().sum::<f64>() / r2.len() as f64).sqrt()
                } else {
                    self.sigma
                };
                (u, sigma.max(MIN_SIGMA))
            })
            .collect();
        self.sigma = self.sigma.max(MIN_SIGMA);
    }
}

/// A constant mean with σ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Normal {
    pub mean: f64,
    pub sigma: f64,
}

/// The two hypotheses' models of one metric.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pair<T> {
    pub network: T,
    pub cpu: T,
}

/// A trained classifier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub format: String,
    /// Free text: what the model was trained on.
    pub trained_on: String,
    /// Packets in each signature the model was trained on. Complexity and the success
    /// proportion are read off a signature of this length (a word count over 17-bit words
    /// grows with the length it is counted in), so the sender classifies the last this many
    /// packets. Files from before the field: 4,096.
    #[serde(default = "legacy_signature_packets")]
    pub signature_packets: usize,
    /// Training signatures per hypothesis and metric.
    pub samples: Pair<Samples>,
    /// Lowest loss rate where complexity is used (§3.3: 0.0005).
    pub complexity_from: f64,
    /// Lowest loss rate where the success proportion is used (§3.3: 0.00008).
    pub success_from: f64,
    pub complexity: Pair<Curve>,
    pub success: Pair<Normal>,
    /// The success proportion's mean and σ per band of loss rates in the complexity range
    /// (four bands a decade, as the σ of the curves; bands with [`MIN_BAND`] samples): the
    /// "models relating success proportions to loss rates" that Dickens §3.1.5 names as
    /// missing for using the metric above 0.0005, and with them a second opinion beside
    /// complexity there (`Classifier`). Empty in a model trained before it: complexity alone,
    /// as algorithms.md §5.
    #[serde(default)]
    pub success_by_band: Pair<Vec<Band>>,
}

fn legacy_signature_packets() -> usize {
    4096
}

/// The success proportion in one band of loss rates: below `upper`, from the band's lower
/// edge (a quarter of a decade down).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Band {
    pub upper: f64,
    pub mean: f64,
    pub sigma: f64,
    pub samples: usize,
}

/// Shortest and longest signature a model may be trained on, packets.
pub const SIGNATURE_PACKETS_MIN: usize = 64;
pub const SIGNATURE_PACKETS_MAX: usize = 1 << 20;

/// Lowest σ of the success proportion in a band: one success more or less among a hundred
/// losses.
pub const MIN_SUCCESS_SIGMA: f64 = 0.01;

/// Bands of the success proportion from (loss rate, success proportion) points: every band
/// with at least [`MIN_BAND`] points, its mean and σ (floored at [`MIN_SUCCESS_SIGMA`]).
pub fn fit_bands(points: &[(f64, f64)]) -> Vec<Band> {
    by_band(points.iter().copied())
        .into_iter()
        .filter(|(_, vs)| vs.len() >= MIN_BAND)
        .filter_map(|(upper, vs)| {
            let n = fit_normal(&vs)?;
            Some(Band {
                upper,
                mean: n.mean,
                sigma: n.sigma.max(MIN_SUCCESS_SIGMA),
                samples: vs.len(),
            })
        })
        .collect()
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    pub complexity: usize,
    pub success: usize,
}

impl Model {
    /// The success proportion's normals (network, CPU) for loss rate `x`: each cause's band
    /// of `x`, or where it has none, its nearest band (the metric moves slowly with the loss
    /// rate, Dickens §3.1.5); `None` if a cause has no band at all.
    pub fn success_at(&self, x: f64) -> Option<(Normal, Normal)> {
        let upper = band_upper(x);
        let find = |bands: &[Band]| {
            bands
                .iter()
                .min_by(|a, b| {
                    let d = |b: &Band| (b.upper / upper).ln().abs();
                    d(a).total_cmp(&d(b))
                })
                .map(|b| Normal {
                    mean: b.mean,
                    sigma: b.sigma,
                })
        };
        Some((
            find(&self.success_by_band.network)?,
            find(&self.success_by_band.cpu)?,
        ))
    }

    /// The model shipped with the project (`native-probes/models/fobs-classifier.json`).
    pub const SHIPPED: &'static str = include_str!("../../models/fobs-classifier.json");

    /// The shipped model, read.
    pub fn shipped() -> Model {
        Model::from_json(Model::SHIPPED).expect("the shipped model reads (tested)")
    }

    /// Reads a model file's text; refuses another format or a model that cannot classify
    /// (a σ that is not positive, a value that is not finite).
    pub fn from_json(text: &str) -> Result<Model, String> {
        let m: Model = serde_json::from_str(text).map_err(|e| format!("not a model file: {e}"))?;
        m.check()
    }

    /// The model if it can classify (what [`Model::from_json`] checks of a file, and
    /// `train` of what it fitted); else what is wrong with it.
    pub fn check(self) -> Result<Model, String> {
        let m = self;
        if m.format != FORMAT {
            return Err(format!("format '{}' is not {FORMAT}", m.format));
        }
        let ok = {
            let curves = [&m.complexity.network, &m.complexity.cpu];
            let normals = [&m.success.network, &m.success.cpu];
            let finite = curves.iter().all(|c| {
                c.c.is_finite() && c.terms.iter().all(|(a, b)| a.is_finite() && b.is_finite())
            }) && normals.iter().all(|n| n.mean.is_finite());
            let bands = || {
                [&m.success_by_band.network, &m.success_by_band.cpu]
                    .into_iter()
                    .flatten()
            };
            let finite = finite && bands().all(|b| b.mean.is_finite() && b.upper > 0.0);
            let sigmas = curves
                .iter()
                .flat_map(|c| std::iter::once(c.sigma).chain(c.bands.iter().map(|b| b.1)))
                .chain(normals.iter().map(|n| n.sigma))
                .chain(bands().map(|b| b.sigma));
            let positive = sigmas.clone().all(|s| s.is_finite() && s > 0.0);
            finite && positive
        };
        if !ok {
            return Err("a model value is not finite or a σ is not positive".into());
        }
        // Curves of the shape `train` fits (two exponentials for network loss, one for CPU
        // loss, Dickens §4), each mean near the metric's range [0, 1] over the loss rates
        // classified: a curve without terms, or one that runs off to ±1e300, would diagnose
        // every signature one way with full confidence.
        for (name, curve) in [
            ("network", &m.complexity.network),
            ("cpu", &m.complexity.cpu),
        ] {
            if !(1..=3).contains(&curve.terms.len()) {
                return Err(format!(
                    "complexity.{name} has {} exponential terms, not 1–3",
                    curve.terms.len()
                ));
            }
            let bad = [0.0005, 0.001, 0.01, 0.1, 1.0]
                .into_iter()
                .map(|x| (x, curve.mean(x)))
                .find(|(_, y)| !(-0.5..=1.5).contains(y));
            if let Some((x, y)) = bad {
                return Err(format!(
                    "complexity.{name}'s mean reaches {} at a loss rate of {x}, outside the \
                     metric's range 0–1",
                    if y.abs() < 1e6 {
                        crate::format::significant(y)
                    } else {
                        format!("{y:.3e}")
                    }
                ));
            }
        }
        if !(SIGNATURE_PACKETS_MIN..=SIGNATURE_PACKETS_MAX).contains(&m.signature_packets) {
            return Err(format!(
                "signature_packets {} is not within {SIGNATURE_PACKETS_MIN}–{SIGNATURE_PACKETS_MAX}",
                m.signature_packets
            ));
        }
        Ok(m)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("finite numbers")
    }
}

/// Solves the normal equations of linear least squares for `y ≈ Σ βⱼ·fⱼ(x)` (Gaussian
/// elimination with partial pivoting on the k×k system; k ≤ 3 here).
/// Each row counts with weight `weight(x)`; the sum of squared errors returned is weighted.
fn linear_fit(
    rows: &[(f64, f64)],
    basis: &dyn Fn(f64) -> Vec<f64>,
    weight: &dyn Fn(f64) -> f64,
) -> Option<(Vec<f64>, f64)> {
    let k = basis(0.0).len();
    let mut ata = vec![vec![0.0; k + 1]; k];
    for &(x, y) in rows {
        let f = basis(x);
        let w = weight(x);
        for i in 0..k {
            for j in 0..k {
                ata[i][j] += w * f[i] * f[j];
            }
            ata[i][k] += w * f[i] * y;
        }
    }
    for (i, row) in ata.iter_mut().enumerate() {
        row[i] += 1e-12; // keeps nearly collinear bases solvable
    }
    for col in 0..k {
        let pivot = (col..k).max_by(|&a, &b| ata[a][col].abs().total_cmp(&ata[b][col].abs()))?;
        ata.swap(col, pivot);
        if ata[col][col].abs() < 1e-300 {
            return None;
        }
        for r in 0..k {
            if r != col {
                let f = ata[r][col] / ata[col][col];
                let pivot_row = ata[col].clone();
                for (cell, p) in ata[r].iter_mut().zip(&pivot_row).skip(col) {
                    *cell -= f * p;
                }
            }
        }
    }
    let beta: Vec<f64> = (0..k).map(|i| ata[i][k] / ata[i][i]).collect();
    let sse = rows
        .iter()
        .map(|&(x, y)| {
            let f = basis(x);
            let fit: f64 = f.iter().zip(&beta).map(|(a, b)| a * b).sum();
            weight(x) * (y - fit).powi(2)
        })
        .sum();
    beta.iter().all(|b| b.is_finite()).then_some((beta, sse))
}

/// Weighted least squares with the rates `log_b` fixed: returns the curve (σ, the
/// unweighted root-mean-square residual) and the weighted sum of squared errors.
fn curve_for(
    rows: &[(f64, f64)],
    log_b: &[f64],
    weight: &dyn Fn(f64) -> f64,
) -> Option<(Curve, f64)> {
    let bs: Vec<f64> = log_b.iter().map(|l| l.exp()).collect();
    let basis = |x: f64| {
        let mut f = vec![1.0];
        f.extend(bs.iter().map(|b| (-b * x).exp()));
        f
    };
    let (beta, sse) = linear_fit(rows, &basis, weight)?;
    let mut curve = Curve {
        c: beta[0],
        terms: beta[1..].iter().copied().zip(bs.iter().copied()).collect(),
        sigma: 0.0,
        bands: Vec::new(),
    };
    let r2: f64 = rows.iter().map(|&(x, y)| (y - curve.mean(x)).powi(2)).sum();
    curve.sigma = (r2 / rows.len().max(1) as f64).sqrt();
    Some((curve, sse))
}

/// Fits `c + Σₖ aₖ·e^(−bₖ·x)` with `terms` exponentials to (loss rate, metric) points.
///
/// The spread is not the same at every loss rate (at low rates a cause's complexities can
/// be nearly all alike, at high rates they vary more), so after an unweighted first pass the
/// fit is repeated twice weighting each point by 1/σ² of its band of loss rates (from the
/// pass before): the mean then follows the tight bands closely instead of being pulled by
/// the loose ones, which is what the likelihoods need.
/// The fewest points [`fit_curve`] fits `terms` exponentials to.
pub fn curve_points(terms: usize) -> usize {
    terms * 2 + 2
}

/// The fewest values [`fit_normal`] fits.
pub const NORMAL_POINTS: usize = 2;

pub fn fit_curve(rows: &[(f64, f64)], terms: usize) -> Option<Curve> {
    if rows.len() < curve_points(terms) {
        return None;
    }
    let mut curve = fit_weighted(rows, terms, &|_| 1.0)?;
    curve.fit_bands(rows);
    for _ in 0..2 {
        let prev = curve.clone();
        let weight = move |x: f64| 1.0 / prev.sigma_at(x).powi(2);
        curve = fit_weighted(rows, terms, &weight)?;
        curve.fit_bands(rows);
    }
    Some(curve)
}

/// One weighted fit: the rates on a grid, then refined by pattern search.
fn fit_weighted(rows: &[(f64, f64)], terms: usize, weight: &dyn Fn(f64) -> f64) -> Option<Curve> {
    // Rates from 1 to 10⁵ per unit loss rate: the curves bend between loss rates of 10⁻⁵
    // and 1.
    let grid: Vec<f64> = (0..=25).map(|i| (i as f64 * 0.46).min(11.6)).collect();
    let mut best: Option<(Vec<f64>, f64)> = None;
    let mut consider = |lb: Vec<f64>| {
        if let Some((_, sse)) = curve_for(rows, &lb, weight) {
            if best.as_ref().is_none_or(|(_, s)| sse < *s) {
                best = Some((lb, sse));
            }
        }
    };
    match terms {
        1 => grid.iter().for_each(|&a| consider(vec![a])),
        _ => {
            for (i, &a) in grid.iter().enumerate() {
                for &b in grid.iter().skip(i + 2) {
                    consider(vec![a, b]);
                }
            }
        }
    }
    let (mut lb, mut sse) = best?;
    // Two rates closer than a factor of 2 make the two terms nearly collinear, and least
    // squares then cancels huge coefficients against each other: keep them apart.
    let apart = |t: &[f64]| t.windows(2).all(|w| w[1] - w[0] >= std::f64::consts::LN_2);
    let mut step = 0.25;
    while step > 1e-4 {
        let mut improved = false;
        for k in 0..lb.len() {
            for d in [-step, step] {
                let mut t = lb.clone();
                t[k] = (t[k] + d).clamp(-2.0, 14.0);
                if !apart(&t) {
                    continue;
                }
                if let Some((_, s)) = curve_for(rows, &t, weight) {
                    if s < sse {
                        (lb, sse, improved) = (t, s, true);
                    }
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    curve_for(rows, &lb, weight).map(|(c, _)| c)
}

/// Mean and σ of values.
pub fn fit_normal(values: &[f64]) -> Option<Normal> {
    if values.len() < NORMAL_POINTS {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(Normal {
        mean,
        sigma: var.sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_are_recovered_from_their_own_points() {
        let truth = Curve {
            c: 0.9,
            terms: vec![(-0.5, 300.0), (-0.3, 4000.0)],
            sigma: 0.0,
            bands: Vec::new(),
        };
        let rows: Vec<(f64, f64)> = (1..400)
            .map(|i| {
                let x = 1e-4 * 1.02f64.powi(i);
                (x, truth.mean(x))
            })
            .collect();
        let fit = fit_curve(&rows, 2).unwrap();
        for &(x, y) in &rows {
            assert!(
                (fit.mean(x) - y).abs() < 2e-3,
                "{x}: {} vs {y}",
                fit.mean(x)
            );
        }
        assert!(fit.sigma <= MIN_SIGMA);
        assert!(!fit.bands.is_empty());
        let one = fit_curve(&rows, 1).unwrap();
        assert_eq!(one.terms.len(), 1);
        assert!(fit_curve(&rows[..3], 2).is_none());
    }

    #[test]
    fn model_files_refuse_other_formats_and_bad_sigmas() {
        let n = Normal {
            mean: 0.1,
            sigma: 0.05,
        };
        let c = Curve {
            c: 0.5,
            terms: vec![(-0.2, 100.0)],
            sigma: 0.03,
            bands: vec![(0.001, 0.01)],
        };
        let mut m = Model {
            format: FORMAT.into(),
            trained_on: "test".into(),
            signature_packets: 4096,
            samples: Pair {
                network: Samples::default(),
                cpu: Samples::default(),
            },
            complexity_from: 0.0005,
            success_from: 0.00008,
            complexity: Pair {
                network: c.clone(),
                cpu: c,
            },
            success: Pair {
                network: n.clone(),
                cpu: n,
            },
            success_by_band: Pair::default(),
        };
        assert_eq!(Model::from_json(&m.to_json()).unwrap(), m);
        m.success.cpu.sigma = 0.0;
        assert!(Model::from_json(&m.to_json()).is_err());
        m.success.cpu.sigma = 0.1;
        // A curve without terms, or one far outside the metric's range (a hostile or broken
        // file): every signature would be diagnosed one way.
        let good = m.complexity.network.clone();
        m.complexity.network.terms.clear();
        let e = Model::from_json(&m.to_json()).unwrap_err();
        assert!(
            e.contains("complexity.network has 0 exponential terms"),
            "{e}"
        );
        m.complexity.network.terms = vec![(1e300, 1.0); 2];
        let e = Model::from_json(&m.to_json()).unwrap_err();
        assert!(e.contains("outside the metric's range"), "{e}");
        m.complexity.network = good;
        // A model file from before the success bands reads, with none.
        let old = m.to_json().replace(
            ",\n  \"success_by_band\": {\n    \"network\": [],\n    \"cpu\": []\n  }",
            "",
        );
        assert!(!old.contains("success_by_band"), "{old}");
        assert_eq!(Model::from_json(&old).unwrap(), m);
        // So does one from before the signature length: its signatures were 4,096 packets.
        let old = m.to_json().replace("\n  \"signature_packets\": 4096,", "");
        assert!(!old.contains("signature_packets"), "{old}");
        assert_eq!(Model::from_json(&old).unwrap(), m);
        m.signature_packets = 16;
        assert!(Model::from_json(&m.to_json())
            .unwrap_err()
            .contains("signature_packets"));
        m.signature_packets = 16384;
        assert_eq!(Model::from_json(&m.to_json()).unwrap(), m);
        // A band's σ must be positive too.
        let band = Band {
            upper: 0.001,
            mean: 0.5,
            sigma: 0.0,
            samples: 30,
        };
        m.success_by_band.cpu.push(band);
        assert!(Model::from_json(&m.to_json()).is_err());
        m.success_by_band.cpu[0].sigma = 0.1;
        assert_eq!(Model::from_json(&m.to_json()).unwrap(), m);
        m.success_by_band.cpu.clear();
        m.format = "nowcast-fobs-classifier/2".into();
        assert!(Model::from_json(&m.to_json())
            .unwrap_err()
            .contains("format"));
    }
}
