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
    /// Sends that sent a hedge (a second copy without cancelling the first).
    pub hedged: u64,
}

impl SetResult {
    /// The last send added sent a hedge.
    pub fn add_hedge(&mut self) {
        self.hedged += 1;
    }

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
    /// % of sends hedged (they count as retried too).
    pub hedged_pct: Ci,
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
        hedged_pct: ci(
            if sends > 0.0 {
                100.0 * sum(&|s| s.hedged) / sends
            } else {
                0.0
            },
            &per(&|s| pct(s.hedged, s.sends)),
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
        "{:<24} {:>16} {:>16} {:>14} {:>16} {:>18} {:>14}",
        "policy", "mean", "max", "min", "p95", "variance", "sd"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:<24} {:>16} {:>16} {:>14} {:>16} {:>18} {:>14}",
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
        "{:<24} {:>16} {:>16} {:>16} {:>16} {:>14}",
        "policy", "% sends retried", "avg retries", "extra bytes %", "abandoned %", "hedged %"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:<24} {:>16} {:>16} {:>16} {:>16} {:>14}",
            r.policy,
            cell(r.retried_pct, 2),
            cell(r.avg_retries, 3),
            cell(r.extra_bytes_pct, 2),
            cell(r.abandoned_pct, 3),
            cell(r.hedged_pct, 2)
        );
    }
    o
}

/// One policy against a reference (the best static one), paired set by set: every set ran
/// the same reductions of the trace under both, so each set gives its own cut and the
/// interval is from their spread.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Versus {
    pub policy: String,
    pub reference: String,
    /// How much lower than the reference, % (negative: higher), pooled ± the half-width
    /// from the per-set cuts.
    pub p95_cut_pct: Ci,
    pub variance_cut_pct: Ci,
    pub mean_cut_pct: Ci,
    pub retried_pct: f64,
    pub abandoned_pct: f64,
}

/// The goal of issue 14: p95 ≥ 20 % and variance ≥ 50 % lower than the best static policy,
/// mean no worse, at most 5 % of sends retried.
pub const GOAL_P95_CUT_PCT: f64 = 20.0;
pub const GOAL_VARIANCE_CUT_PCT: f64 = 50.0;
pub const GOAL_RETRIED_PCT: f64 = 5.0;

impl Versus {
    pub fn new(row: &Row, sets: &[SetResult], reference: &Row, ref_sets: &[SetResult]) -> Self {
        let cut = |a: f64, b: f64| 100.0 * (1.0 - a / b);
        let paired = |f: &dyn Fn(&[f64]) -> f64, pooled: (f64, f64)| {
            let per: Vec<f64> = sets
                .iter()
                .zip(ref_sets)
                .map(|(s, r)| cut(f(&s.times), f(&r.times)))
                .collect();
            ci(cut(pooled.0, pooled.1), &per)
        };
        Self {
            policy: row.policy.clone(),
            reference: reference.policy.clone(),
            p95_cut_pct: paired(
                &|v| percentile(v, 95.0),
                (row.p95.value, reference.p95.value),
            ),
            variance_cut_pct: paired(&variance, (row.variance.value, reference.variance.value)),
            mean_cut_pct: paired(&mean, (row.mean.value, reference.mean.value)),
            retried_pct: row.retried_pct.value,
            abandoned_pct: row.abandoned_pct.value,
        }
    }

    /// Whether each part of the goal is met: p95, variance, mean, retries.
    pub fn met(&self) -> [bool; 4] {
        [
            self.p95_cut_pct.value >= GOAL_P95_CUT_PCT,
            self.variance_cut_pct.value >= GOAL_VARIANCE_CUT_PCT,
            self.mean_cut_pct.value >= 0.0,
            self.retried_pct <= GOAL_RETRIED_PCT,
        ]
    }
}

/// The best static policy: the lowest p95 of the static ones that abandon no send (a
/// static timeout below a link's own send time gives up on it and looks fast). `None` when
/// every static one abandons.
pub fn best_static(rows: &[Row], is_static: &[bool]) -> Option<usize> {
    rows.iter()
        .enumerate()
        .filter(|(i, r)| is_static[*i] && r.abandoned_pct.value == 0.0)
        .min_by(|a, b| a.1.p95.value.total_cmp(&b.1.p95.value))
        .map(|(i, _)| i)
}

/// Every dynamic policy against the best static one, and the goal line for `goal` (the
/// policy named beforehand as the experiment's candidate; `None`: no line).
pub fn render_goal(versus: &[Versus], goal: Option<&Versus>) -> String {
    let mut o = String::new();
    let Some(first) = versus.first() else {
        return o;
    };
    let _ = writeln!(
        o,
        "\nAgainst {} (the best static policy: lowest p95 of those that abandon no send); \
         cuts are % lower, pooled ± 95 % CI half-width of the per-set cuts",
        first.reference
    );
    let _ = writeln!(
        o,
        "{:<24} {:>16} {:>16} {:>16} {:>10} {:>11}",
        "policy", "p95 cut %", "variance cut %", "mean cut %", "retried %", "abandoned %"
    );
    for v in versus {
        let _ = writeln!(
            o,
            "{:<24} {:>16} {:>16} {:>16} {:>10.2} {:>11.3}",
            v.policy,
            cell(v.p95_cut_pct, 1),
            cell(v.variance_cut_pct, 1),
            cell(v.mean_cut_pct, 1),
            v.retried_pct,
            v.abandoned_pct
        );
    }
    if let Some(v) = goal {
        let m = v.met();
        let word = |ok: bool| if ok { "met" } else { "NOT met" };
        let _ = writeln!(
            o,
            "\nGoal for {} against {}: p95 {:.1} % lower (≥ {GOAL_P95_CUT_PCT}: {}), \
             variance {:.1} % lower (≥ {GOAL_VARIANCE_CUT_PCT}: {}), mean {:.1} % lower \
             (no worse: {}), {:.2} % of sends retried (≤ {GOAL_RETRIED_PCT}: {}): {}",
            v.policy,
            v.reference,
            v.p95_cut_pct.value,
            word(m[0]),
            v.variance_cut_pct.value,
            word(m[1]),
            v.mean_cut_pct.value,
            word(m[2]),
            v.retried_pct,
            word(m[3]),
            if m.iter().all(|x| *x) {
                "MET"
            } else {
                "NOT MET"
            }
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
        b.add_hedge();
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
        assert_eq!(r.hedged_pct.value, 25.0);
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

    #[test]
    fn versus_pairs_the_sets_and_the_goal_line_says_what_is_met() {
        let set = |times: Vec<f64>, retried: u64, abandoned: u64| {
            let mut s = SetResult {
                times,
                ..SetResult::default()
            };
            for i in 0..100 {
                s.add_send(if i < retried { 2 } else { 1 }, i < abandoned);
            }
            s
        };
        // Static 2 s abandons: never the reference, however fast it looks.
        let fast = [
            set(vec![1.0, 1.0, 1.0], 0, 50),
            set(vec![1.0, 1.0, 1.0], 0, 50),
        ];
        let stat = [
            set(vec![10.0, 12.0, 20.0], 1, 0),
            set(vec![10.0, 14.0, 30.0], 1, 0),
        ];
        let dynm = [
            set(vec![9.0, 10.0, 12.0], 4, 0),
            set(vec![9.0, 11.0, 13.0], 4, 0),
        ];
        let rows = [
            row("static 2 s", &fast),
            row("static 15 s", &stat),
            row("d", &dynm),
        ];
        assert_eq!(best_static(&rows, &[true, true, false]), Some(1));
        assert_eq!(best_static(&rows[..1], &[true]), None);
        let v = Versus::new(&rows[2], &dynm, &rows[1], &stat);
        assert_eq!(v.reference, "static 15 s");
        // Pooled p95: 13 vs 30 → 56.7 % lower; the per-set cuts 40 % and 56.7 %.
        assert!((v.p95_cut_pct.value - 100.0 * (1.0 - 13.0 / 30.0)).abs() < 1e-9);
        assert!(v.p95_cut_pct.half > 0.0);
        assert_eq!(v.retried_pct, 4.0);
        assert_eq!(v.met(), [true, true, true, true]);
        let text = render_goal(std::slice::from_ref(&v), Some(&v));
        assert!(
            text.contains("Against static 15 s") && text.ends_with(": MET\n"),
            "{text}"
        );
        let worse = Versus {
            retried_pct: 6.0,
            ..v.clone()
        };
        assert_eq!(worse.met(), [true, true, true, false]);
        assert!(render_goal(std::slice::from_ref(&worse), Some(&worse)).contains("NOT MET"));
    }
}
