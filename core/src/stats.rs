//! Error statistics the page and the command report: summary errors, the error histogram and
//! empirical CDF of the predictability view (JavaNws §5), the running MAE of the console, and
//! jitter (the page's echoes and `nowcast udp`'s bursts alike).

use crate::errors::Accum;
use serde::Serialize;

/// MAE, MSE and RMSE of a forecast over `n` values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: u64,
    pub mae: f64,
    pub mse: f64,
    pub rmse: f64,
}

impl From<Accum> for Summary {
    fn from(a: Accum) -> Self {
        Self {
            n: a.n,
            mae: a.mae(),
            mse: a.mse(),
            rmse: a.rmse(),
        }
    }
}

/// Counts of values in equal-width bins between the smallest and largest value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Histogram {
    pub min: f64,
    pub max: f64,
    /// Bin `i` covers [min + i·w, min + (i+1)·w), the last bin includes `max`.
    pub counts: Vec<u64>,
}

impl Histogram {
    /// Width of one bin (0 when every value is the same).
    pub fn bin_width(&self) -> f64 {
        (self.max - self.min) / self.counts.len() as f64
    }
}

/// Histogram of `values` with `bins` bins from min to max (JavaNws uses 100); `None` for an
/// empty input or zero bins. Non-finite values are skipped.
pub fn histogram(values: &[f64], bins: usize) -> Option<Histogram> {
    let finite = || values.iter().copied().filter(|v| v.is_finite());
    let min = finite().fold(f64::INFINITY, f64::min);
    let max = finite().fold(f64::NEG_INFINITY, f64::max);
    if bins == 0 || min > max {
        return None;
    }
    let mut counts = vec![0u64; bins];
    let width = (max - min) / bins as f64;
    for v in finite() {
        let i = if width > 0.0 {
            (((v - min) / width) as usize).min(bins - 1)
        } else {
            0
        };
        counts[i] += 1;
    }
    Some(Histogram { min, max, counts })
}

/// Empirical CDF: the distinct values in ascending order, each with the fraction of values
/// less than or equal to it. Non-finite values are skipped.
pub fn ecdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &x) in v.iter().enumerate() {
        let p = (i + 1) as f64 / n;
        match out.last_mut() {
            Some(last) if last.0 == x => last.1 = p,
            _ => out.push((x, p)),
        }
    }
    out
}

/// The running mean absolute error after each forecast error, as the console shows it.
pub fn cumulative_mae(errors: &[f64]) -> Vec<f64> {
    let mut sum = 0.0;
    errors
        .iter()
        .enumerate()
        .map(|(i, e)| {
            sum += e.abs();
            sum / (i + 1) as f64
        })
        .collect()
}

/// Jitter: the mean absolute difference of consecutive RTTs, in their unit; `None` below two
/// values. One definition for the page's echo pairs and `nowcast udp`'s bursts.
pub fn jitter(rtts: &[f64]) -> Option<f64> {
    if rtts.len() < 2 {
        return None;
    }
    let sum: f64 = rtts.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    Some(sum / (rtts.len() - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_spans_min_to_max_and_counts_everything() {
        let v: Vec<f64> = (0..=100).map(|i| i as f64 / 10.0).collect();
        let h = histogram(&v, 100).unwrap();
        assert_eq!((h.min, h.max), (0.0, 10.0));
        assert_eq!(h.counts.len(), 100);
        assert_eq!(h.counts.iter().sum::<u64>(), 101);
        assert_eq!(h.counts[99], 2, "the last bin holds max");
        let flat = histogram(&[3.0, 3.0], 10).unwrap();
        assert_eq!(flat.counts[0], 2);
        assert_eq!(histogram(&[], 10), None);
        assert_eq!(histogram(&[f64::NAN], 10), None);
    }

    #[test]
    fn ecdf_merges_ties_and_ends_at_one() {
        let c = ecdf(&[2.0, 1.0, 2.0, 4.0]);
        assert_eq!(c, vec![(1.0, 0.25), (2.0, 0.75), (4.0, 1.0)]);
        assert!(ecdf(&[]).is_empty());
    }

    #[test]
    fn cumulative_mae_is_the_running_mean_of_absolute_errors() {
        assert_eq!(cumulative_mae(&[1.0, -3.0, 2.0]), vec![1.0, 2.0, 2.0]);
    }

    #[test]
    fn jitter_is_the_mean_step_between_consecutive_rtts() {
        assert_eq!(jitter(&[]), None);
        assert_eq!(jitter(&[5.0]), None);
        assert_eq!(jitter(&[5.0, 7.5]), Some(2.5));
        assert_eq!(jitter(&[1.0, 3.0, 2.0, 2.0]), Some(1.0));
    }
}
