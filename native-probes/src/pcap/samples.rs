//! A series of RTT samples summarised as min, median, p90 and max in bounded memory: the
//! first [`EXACT`] samples are kept as they are (exact quantiles), beyond that they are
//! folded into a log-scale histogram of 0.1 % wide bins (quantiles within 0.05 %), so that a
//! long flow costs at most a fixed amount whatever the length of the capture.
//! Deterministic core.

/// Samples kept exactly before the histogram takes over.
pub const EXACT: usize = 16_384;
/// Histogram range: 100 ns to 1000 s.
const LO: f64 = 1e-7;
const HI: f64 = 1e3;
/// Bin width: a factor of 1.001.
const STEP: f64 = 1.001;

/// Quantile summary of a series (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: u64,
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Default)]
pub struct Samples {
    exact: Vec<f32>,
    hist: Option<Box<[u32]>>,
    n: u64,
    min: f64,
    max: f64,
}

fn bins() -> usize {
    ((HI / LO).ln() / STEP.ln()).ceil() as usize + 1
}

fn bin_of(v: f64) -> usize {
    let v = v.clamp(LO, HI);
    (((v / LO).ln() / STEP.ln()) as usize).min(bins() - 1)
}

/// The middle of bin `i` (geometric).
fn value_of(i: usize) -> f64 {
    LO * STEP.powf(i as f64 + 0.5)
}

impl Samples {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a sample (seconds); negative or non-finite samples are ignored.
    pub fn push(&mut self, v: f64) {
        if !(v.is_finite() && v >= 0.0) {
            return;
        }
        if self.n == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.n += 1;
        match &mut self.hist {
            Some(h) => h[bin_of(v)] += 1,
            None if self.exact.len() < EXACT => self.exact.push(v as f32),
            None => {
                let mut h = vec![0u32; bins()].into_boxed_slice();
                for &x in &self.exact {
                    h[bin_of(x as f64)] += 1;
                }
                h[bin_of(v)] += 1;
                self.exact = Vec::new();
                self.hist = Some(h);
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// min, median (mean of the two middle values for an even count, in exact mode), p90
    /// (nearest rank) and max; `None` without samples.
    pub fn summary(&self) -> Option<Summary> {
        if self.n == 0 {
            return None;
        }
        let (median, p90) = match &self.hist {
            None => {
                let mut v: Vec<f64> = self.exact.iter().map(|&x| x as f64).collect();
                v.sort_by(f64::total_cmp);
                let n = v.len();
                let median = if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                };
                let rank = ((0.9 * n as f64).ceil() as usize).clamp(1, n);
                (median, v[rank - 1])
            }
            Some(h) => {
                let at = |q: f64| {
                    let target = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
                    let mut seen = 0u64;
                    for (i, &c) in h.iter().enumerate() {
                        seen += c as u64;
                        if seen >= target {
                            return value_of(i);
                        }
                    }
                    self.max
                };
                (at(0.5), at(0.9))
            }
        };
        Some(Summary {
            n: self.n,
            min: self.min,
            median: median.clamp(self.min, self.max),
            p90: p90.clamp(self.min, self.max),
            max: self.max,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_quantiles_then_the_histogram_within_its_resolution() {
        let mut s = Samples::new();
        assert_eq!(s.summary(), None);
        for v in [0.004, 0.001, 0.003, 0.002] {
            s.push(v);
        }
        let q = s.summary().unwrap();
        assert_eq!((q.n, q.min, q.max), (4, 0.001, 0.004));
        assert!((q.median - 0.0025).abs() < 1e-9 && (q.p90 - 0.004).abs() < 1e-9);
        let mut big = Samples::new();
        let mut all = Vec::new();
        for i in 0..(3 * EXACT) {
            let v = 0.001 + (i % 1000) as f64 * 1e-5; // spread over 1..11 ms
            big.push(v);
            all.push(v);
        }
        all.sort_by(f64::total_cmp);
        let rank = |q: f64| all[(q * all.len() as f64).ceil() as usize - 1];
        let q = big.summary().unwrap();
        assert!((q.median / rank(0.5) - 1.0).abs() < 0.0006, "{q:?}");
        assert!((q.p90 / rank(0.9) - 1.0).abs() < 0.0006, "{q:?}");
        big.push(f64::NAN);
        assert_eq!(big.len(), 3 * EXACT as u64);
    }
}
