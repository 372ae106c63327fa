//! The timeout experiment's tables (Allen, Wolski & Plank §5, Tables 1 and 2): per policy
//! the mean, max, min, 95th percentile, variance and standard deviation of the reduction
//! times, the share of sends retried and the retries per retried send, plus the extra bytes
//! sent and the abandon rate; each with a 95 % confidence interval from the spread of the
//! statistic across the sets (Student's t with sets − 1 degrees of freedom).

use serde::Serialize;
use std::fmt::Write as _;

/// What one set of reductions under one policy gave.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SetResult {
    /// Reduction times, s (paper time).
    pub times: Vec<f64>,
    pub sends: u64,
    /// Sends that needed more than one attempt.
    pub retried: u64,
    /// Attempts beyond the first, summed.
    pub extra_attempts: u64,
    pub abandoned: u64,
}

impl SetResult {
    pub fn add_send(&mut self, attempts: usize, abandoned: bool) {
        self.sends += 1;
        if attempts > 1 {
            self.retried += 1;
            self.extra_attempts += (attempts - 1) as u64;
        }
        if abandoned {
            self.abandoned += 1;
        }
    }
}

/// A value and the half-width of its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ci {
    pub value: f64,
    pub half: f64,
}

/// One policy's row of both tables.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub policy: String,
    pub reductions: usize,
    pub mean: Ci,
    pub max: Ci,
    pub min: Ci,
    pub p95: Ci,
    pub variance: Ci,
    pub sd: Ci,
    /// % of sends retried, and the average retries of a retried send.
    pub retried_pct: Ci,
    pub avg_retries: Ci,
    /// Bytes sent beyond one copy per send, % of the one copy.
    pub extra_bytes_pct: Ci,
    /// % of sends abandoned after every attempt.
    pub abandoned_pct: Ci,
}

/// Student's t quantile at 0.975 for `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        _ => 1.96 + 2.4 / df as f64,
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn variance(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
}

/// The p-th percentile (nearest rank) of `v`.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}

/// The pooled statistic, with the interval from its per-set values.
fn ci(pooled: f64, per_set: &[f64]) -> Ci {
    let n = per_set.len();
    let half = if n >= 2 {
        t975(n - 1) * (variance(per_set) / n as f64).sqrt()
    } else {
        f64::NAN
    };
    Ci {
        value: pooled,
        half,
    }
}

/// A policy's row from its sets.
pub fn row(policy: &str, sets: &[SetResult]) -> Row {
    let all: Vec<f64> = sets.iter().flat_map(|s| s.times.iter().copied()).collect();
    let per = |f: &dyn Fn(&SetResult) -> f64| -> Vec<f64> { sets.iter().map(f).collect() };
    let sum = |f: &dyn Fn(&SetResult) -> u64| -> f64 { sets.iter().map(f).sum::<u64>() as f64 };
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let sends = sum(&|s| s.sends);
    let retried = sum(&|s| s.retried);
    Row {
        policy: policy.to_string(),
        reductions: all.len(),
        mean: ci(mean(&all), &per(&|s| mean(&s.times))),
        max: ci(
            all.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            &per(&|s| s.times.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        ),
        min: ci(
            all.iter().copied().fold(f64::INFINITY, f64::min),
            &per(&|s| s.times.iter().copied().fold(f64::INFINITY, f64::min)),
        ),
        p95: ci(
            percentile(&all, 95.0),
            &per(&|s| percentile(&s.times, 95.0)),
        ),
        variance: ci(variance(&all), &per(&|s| variance(&s.times))),
        sd: ci(variance(&all).sqrt(), &per(&|s| variance(&s.times).sqrt())),
        retried_pct: ci(
            if sends > 0.0 {
                100.0 * retried / sends
            } else {
                0.0
            },
            &per(&|s| pct(s.retried, s.sends)),
        ),
        avg_retries: ci(
            if retried > 0.0 {
                sum(&|s| s.extra_attempts) / retried
            } else {
                0.0
            },
            &per(&|s| {
                if s.retried > 0 {
                    s.extra_attempts as f64 / s.retried as f64
                } else {
                    0.0
                }
            }),
        ),
        extra_bytes_pct: ci(
            if sends > 0.0 {
                100.0 * sum(&|s| s.extra_attempts) / sends
            } else {
                0.0
            },
            &per(&|s| pct(s.extra_attempts, s.sends)),
        ),
        abandoned_pct: ci(
            if sends > 0.0 {
                100.0 * sum(&|s| s.abandoned) / sends
            } else {
                0.0
            },
            &per(&|s| pct(s.abandoned, s.sends)),
        ),
    }
}

fn cell(c: Ci, digits: usize) -> String {
    if c.half.is_finite() {
        format!("{:.*} ± {:.*}", digits, c.value, digits, c.half)
    } else {
        format!("{:.*}", digits, c.value)
    }
}

/// Both tables as text, times in `unit` (e.g. "s (paper time)").
pub fn render(rows: &[Row], unit: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Table 1: reduction times, {unit} (pooled value ± 95 % CI half-width across sets)"
    );
    let _ = writeln!(
        o,
        "{:<20} {:>16} {:>16} {:>14} {:>16} {:>18} {:>14}",
        "policy", "mean", "max", "min", "p95", "variance", "sd"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:<20} {:>16} {:>16} {:>14} {:>16} {:>18} {:>14}",
            r.policy,
            cell(r.mean, 3),
            cell(r.max, 2),
            cell(r.min, 2),
            cell(r.p95, 3),
            cell(r.variance, 3),
            cell(r.sd, 3)
        );
    }
    let _ = writeln!(o, "\nTable 2: timeouts");
    let _ = writeln!(
        o,
        "{:<20} {:>16} {:>16} {:>16} {:>16}",
        "policy", "% sends retried", "avg retries", "extra bytes %", "abandoned %"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:<20} {:>16} {:>16} {:>16} {:>16}",
            r.policy,
            cell(r.retried_pct, 2),
            cell(r.avg_retries, 3),
            cell(r.extra_bytes_pct, 2),
            cell(r.abandoned_pct, 3)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pool_the_sets_and_give_student_intervals() {
        let mut a = SetResult {
            times: vec![1.0, 2.0, 3.0],
            ..SetResult::default()
        };
        a.add_send(1, false);
        a.add_send(3, false);
        let mut b = SetResult {
            times: vec![2.0, 3.0, 4.0],
            ..SetResult::default()
        };
        b.add_send(1, false);
        b.add_send(6, true);
        let r = row("x", &[a, b]);
        assert_eq!(r.reductions, 6);
        assert_eq!(r.mean.value, 2.5);
        // Set means 2 and 3: sd 0.707, n 2, t 12.706 → half-width 12.706·0.5 = 6.353.
        assert!((r.mean.half - 6.353).abs() < 1e-3, "{}", r.mean.half);
        assert_eq!((r.max.value, r.min.value), (4.0, 1.0));
        assert_eq!(r.retried_pct.value, 50.0);
        assert_eq!(r.avg_retries.value, 3.5);
        assert_eq!(r.extra_bytes_pct.value, 175.0);
        assert_eq!(r.abandoned_pct.value, 25.0);
        assert_eq!(percentile(&[5.0, 1.0, 3.0, 2.0, 4.0], 95.0), 5.0);
        assert_eq!(
            percentile(&(1..=100).map(f64::from).collect::<Vec<_>>(), 95.0),
            95.0
        );
        let text = render(&[r], "s");
        assert!(
            text.contains("Table 1") && text.contains("Table 2") && text.contains("2.500 ± 6.353")
        );
    }
}
