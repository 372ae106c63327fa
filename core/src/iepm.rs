//! IEPM-BW estimators (algorithms.md §3; Cottrell, Logg and Mei, "Experiences and Results
//! from a New High Performance Network and Application Monitoring Toolkit", §6 "Forecasting"
//! and "Diurnal variations").

use serde::{Deserialize, Serialize};
use std::f64::consts::{PI, TAU};

/// Forecast = mean of the previous `n` observations (IEPM-BW uses 5), with their standard
/// deviation (the sample standard deviation, n − 1 in the denominator).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MeanOfLast {
    n: usize,
    recent: Vec<f64>,
    pos: usize,
}

impl MeanOfLast {
    pub fn new(n: usize) -> Self {
        Self {
            n: n.max(1),
            recent: Vec::with_capacity(n.max(1)),
            pos: 0,
        }
    }

    pub fn observe(&mut self, x: f64) {
        if self.recent.len() < self.n {
            self.recent.push(x);
        } else {
            self.recent[self.pos] = x;
            self.pos = (self.pos + 1) % self.n;
        }
    }

    /// (mean, standard deviation) of the observations held; `None` before the first. The
    /// deviation is 0 while only one observation is held.
    pub fn forecast(&self) -> Option<(f64, f64)> {
        let m = self.recent.len();
        if m == 0 {
            return None;
        }
        let mean = self.recent.iter().sum::<f64>() / m as f64;
        let sd = if m > 1 {
            let ss: f64 = self.recent.iter().map(|v| (v - mean) * (v - mean)).sum();
            (ss / (m - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some((mean, sd))
    }
}

/// Exponentially weighted moving average `avg_i = (1 − w)·y_i + w·avg_{i−1}` (IEPM-BW used
/// w = 0.7); the first observation starts the average.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ewma {
    w: f64,
    avg: Option<f64>,
}

impl Ewma {
    pub fn new(w: f64) -> Self {
        Self { w, avg: None }
    }
    pub fn observe(&mut self, y: f64) {
        self.avg = Some(match self.avg {
            None => y,
            Some(a) => (1.0 - self.w) * y + self.w * a,
        });
    }
    pub fn forecast(&self) -> Option<f64> {
        self.avg
    }
}

/// IEPM-BW's error metric: the average of |forecast − observed| / observed. Observations of
/// 0 have no relative error and are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RelativeError {
    pub sum: f64,
    pub n: u64,
    pub skipped_zero: u64,
}

impl RelativeError {
    pub fn add(&mut self, forecast: f64, observed: f64) {
        if observed == 0.0 {
            self.skipped_zero += 1;
        } else {
            self.sum += ((forecast - observed) / observed).abs();
            self.n += 1;
        }
    }
    pub fn value(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// Least-squares fit of `f(x) = |a|·sin(x + b) + c`, x the time of day in radians (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiurnalFit {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    /// Standard errors of the parameters; δb < 0.2 marks a path with a strong daily cycle.
    pub delta_a: f64,
    pub delta_b: f64,
    pub delta_c: f64,
    /// Root mean square of the residuals.
    pub rms: f64,
    pub n: usize,
    pub iterations: usize,
}

impl DiurnalFit {
    /// The paper's threshold: δb below 0.2 indicates a large diurnal variation.
    pub fn is_diurnal(&self) -> bool {
        self.delta_b < 0.2
    }
    /// The fitted value at time of day `x` (radians).
    pub fn at(&self, x: f64) -> f64 {
        self.a.abs() * (x + self.b).sin() + self.c
    }
}

/// Weekday and weekend fits, fitted separately (IEPM-BW Fig. 12).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiurnalSplit {
    pub weekdays: Option<DiurnalFit>,
    pub weekends: Option<DiurnalFit>,
}

const DAY_MS: f64 = 86_400_000.0;

/// Time of day in radians (0 at 00:00 UTC, 2π at the end of the day).
pub fn time_of_day(ms: f64) -> f64 {
    ms.rem_euclid(DAY_MS) / DAY_MS * TAU
}

/// True for Saturday and Sunday (UTC). 1970-01-01 was a Thursday.
pub fn is_weekend(ms: f64) -> bool {
    let day = (ms / DAY_MS).floor() as i64;
    matches!((day + 4).rem_euclid(7), 0 | 6)
}

/// Fits weekdays and weekends separately from (timestamp ms, value) pairs.
pub fn diurnal_split(times_ms: &[f64], values: &[f64]) -> DiurnalSplit {
    let mut wd = (Vec::new(), Vec::new());
    let mut we = (Vec::new(), Vec::new());
    for (&t, &v) in times_ms.iter().zip(values) {
        let part = if is_weekend(t) { &mut we } else { &mut wd };
        part.0.push(time_of_day(t));
        part.1.push(v);
    }
    DiurnalSplit {
        weekdays: diurnal_fit(&wd.0, &wd.1),
        weekends: diurnal_fit(&we.0, &we.1),
    }
}

/// Hours of the day (UTC) a daily fit's points must fall in, at least: a sine of a day's
/// period fitted to a few hours of a day is an arc, whose phase comes out certain for any
/// drift or noise (eight hourly values of flat noise read δb 0.10–0.19, "diurnal", in 3 of
/// 25 draws).
pub const DIURNAL_MIN_HOURS: usize = 18;

/// Levenberg–Marquardt fit of |a|·sin(x + b) + c from the paper's starting values (c = mean,
/// a = standard deviation, b = π/2). `None` with fewer than four points, with points in
/// fewer than [`DIURNAL_MIN_HOURS`] hours of the day, or when the parameters cannot be
/// determined.
pub fn diurnal_fit(x: &[f64], y: &[f64]) -> Option<DiurnalFit> {
    let n = x.len().min(y.len());
    if n < 4 {
        return None;
    }
    let mut hours = [false; 24];
    for &xi in &x[..n] {
        hours[((xi.rem_euclid(TAU) / TAU * 24.0) as usize).min(23)] = true;
    }
    if hours.iter().filter(|&&h| h).count() < DIURNAL_MIN_HOURS {
        return None;
    }
    let (x, y) = (&x[..n], &y[..n]);
    let mean = y.iter().sum::<f64>() / n as f64;
    let sd = (y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64).sqrt();
    let mut p = [sd, PI / 2.0, mean];
    let rss = |p: &[f64; 3]| -> f64 {
        x.iter()
            .zip(y)
            .map(|(&xi, &yi)| {
                let r = yi - (p[0].abs() * (xi + p[1]).sin() + p[2]);
                r * r
            })
            .sum()
    };
    let normal = |p: &[f64; 3]| -> ([[f64; 3]; 3], [f64; 3]) {
        let mut jtj = [[0.0; 3]; 3];
        let mut jtr = [0.0; 3];
        for (&xi, &yi) in x.iter().zip(y) {
            let (s, c) = (xi + p[1]).sin_cos();
            let j = [p[0].signum() * s, p[0].abs() * c, 1.0];
            let r = yi - (p[0].abs() * s + p[2]);
            for u in 0..3 {
                jtr[u] += j[u] * r;
                for v in 0..3 {
                    jtj[u][v] += j[u] * j[v];
                }
            }
        }
        (jtj, jtr)
    };
    let mut lambda = 1e-3;
    let mut cost = rss(&p);
    let mut iterations = 0;
    for _ in 0..200 {
        iterations += 1;
        let (jtj, jtr) = normal(&p);
        let mut damped = jtj;
        for (u, row) in damped.iter_mut().enumerate() {
            row[u] += lambda * jtj[u][u].max(1e-12);
        }
        let Some(step) = solve3(damped, jtr) else {
            lambda *= 10.0;
            continue;
        };
        let trial = [p[0] + step[0], p[1] + step[1], p[2] + step[2]];
        let trial_cost = rss(&trial);
        if trial_cost.is_finite() && trial_cost <= cost {
            let converged = (cost - trial_cost) <= 1e-12 * cost.max(1e-300);
            p = trial;
            cost = trial_cost;
            lambda = (lambda / 10.0).max(1e-12);
            if converged {
                break;
            }
        } else {
            lambda *= 10.0;
            if lambda > 1e12 {
                break;
            }
        }
    }
    // Standard errors from the covariance s²·(JᵀJ)⁻¹ at the optimum.
    let (jtj, _) = normal(&p);
    let inv = invert3(jtj)?;
    let s2 = if n > 3 { cost / (n - 3) as f64 } else { 0.0 };
    let se = |i: usize| (s2 * inv[i][i]).max(0.0).sqrt();
    // Report the phase in [0, 2π) with a non-negative amplitude.
    let b = p[1].rem_euclid(TAU);
    let fit = DiurnalFit {
        a: p[0].abs(),
        b,
        c: p[2],
        delta_a: se(0),
        delta_b: se(1),
        delta_c: se(2),
        rms: (cost / n as f64).sqrt(),
        n,
        iterations,
    };
    [fit.a, fit.b, fit.c, fit.delta_a, fit.delta_b, fit.delta_c]
        .iter()
        .all(|v| v.is_finite())
        .then_some(fit)
}

fn det3(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

fn invert3(m: [[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let d = det3(&m);
    let scale = m.iter().flatten().map(|v| v.abs()).fold(0.0, f64::max);
    // Also refuses a NaN determinant.
    if d.is_nan() || d.abs() <= 1e-12 * scale.powi(3) {
        return None;
    }
    let mut inv = [[0.0; 3]; 3];
    for (i, row) in inv.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            // Cofactor of m[j][i] (transpose for the adjugate).
            let (r0, r1) = ((j + 1) % 3, (j + 2) % 3);
            let (c0, c1) = ((i + 1) % 3, (i + 2) % 3);
            *cell = (m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]) / d;
        }
    }
    Some(inv)
}

fn solve3(m: [[f64; 3]; 3], r: [f64; 3]) -> Option<[f64; 3]> {
    let inv = invert3(m)?;
    Some([0, 1, 2].map(|i| (0..3).map(|j| inv[i][j] * r[j]).sum()))
}

/// Throughput of a multi-stream transfer from its flow records (IEPM-BW §"active vs
/// passive"): method 1 sums each stream's bytes/time; method 2 divides all bytes by the mean
/// stream time; method 3 by the longest stream time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MultiStream {
    pub method1: f64,
    pub method2: f64,
    pub method3: f64,
}

/// One flow: when it started, how long it lasted (s) and how many bytes it moved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub start_s: f64,
    pub duration_s: f64,
    pub bytes: f64,
}

/// Throughput in bytes per second by the three methods; `None` without a flow of positive
/// duration.
pub fn multi_stream(flows: &[Flow]) -> Option<MultiStream> {
    let flows: Vec<&Flow> = flows.iter().filter(|f| f.duration_s > 0.0).collect();
    if flows.is_empty() {
        return None;
    }
    let total: f64 = flows.iter().map(|f| f.bytes).sum();
    let mean_t = flows.iter().map(|f| f.duration_s).sum::<f64>() / flows.len() as f64;
    let max_t = flows.iter().map(|f| f.duration_s).fold(0.0, f64::max);
    Some(MultiStream {
        method1: flows.iter().map(|f| f.bytes / f.duration_s).sum(),
        method2: total / mean_t,
        method3: total / max_t,
    })
}

/// Groups flows (between one pair of hosts) into transfers, the streams of one application
/// run: a flow that starts within `gap_s` (IEPM-BW §III.I: 5 s) of the previous one *and*
/// while an earlier flow of the transfer is still open. IEPM-BW associates by start times
/// alone and says it is "experimenting with better ways"; without the overlap, connections
/// made one after another (a client fetching file after file) chained into one transfer of
/// hundreds of "streams", whose method-1 sum of rates read 17,848 Mbit/s over a 50 Mbit/s
/// link. The streams of a parallel transfer run at once, so they overlap.
pub fn group_transfers(flows: &[Flow], gap_s: f64) -> Vec<Vec<Flow>> {
    let mut sorted = flows.to_vec();
    sorted.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let mut out: Vec<Vec<Flow>> = Vec::new();
    // The latest end of the last transfer's flows.
    let mut open_until = f64::NEG_INFINITY;
    for f in sorted {
        let end = f.start_s + f.duration_s.max(0.0);
        match out.last_mut() {
            Some(group)
                if f.start_s - group.last().map_or(f64::NEG_INFINITY, |g| g.start_s) <= gap_s
                    && f.start_s < open_until =>
            {
                group.push(f);
                open_until = open_until.max(end);
            }
            _ => {
                out.push(vec![f]);
                open_until = end;
            }
        }
    }
    out
}

/// IEPM-BW's two simple forecasts over a series (§III.G): before each observation, the mean
/// of the previous five (with their deviation) and the EWMA with w = 0.7, each scored by the
/// relative error `average(|forecast − observed| / observed)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IepmEval {
    /// Per observation, the mean-of-5 forecast made before it: (mean, deviation).
    pub mean5: Vec<Option<(f64, f64)>>,
    /// Per observation, the EWMA forecast made before it.
    pub ewma: Vec<Option<f64>>,
    pub mean5_error: RelativeError,
    pub ewma_error: RelativeError,
    /// The forecasts of the value after the last.
    pub next_mean5: Option<(f64, f64)>,
    pub next_ewma: Option<f64>,
}

/// Runs [`MeanOfLast`] (5) and [`Ewma`] (0.7) over `values` in order.
pub fn evaluate(values: &[f64]) -> IepmEval {
    let mut m5 = MeanOfLast::new(5);
    let mut ew = Ewma::new(0.7);
    let mut out = IepmEval {
        mean5: Vec::with_capacity(values.len()),
        ewma: Vec::with_capacity(values.len()),
        mean5_error: RelativeError::default(),
        ewma_error: RelativeError::default(),
        next_mean5: None,
        next_ewma: None,
    };
    for &y in values {
        let f5 = m5.forecast();
        let fe = ew.forecast();
        if let Some((m, _)) = f5 {
            out.mean5_error.add(m, y);
        }
        if let Some(e) = fe {
            out.ewma_error.add(e, y);
        }
        out.mean5.push(f5);
        out.ewma.push(fe);
        m5.observe(y);
        ew.observe(y);
    }
    out.next_mean5 = m5.forecast();
    out.next_ewma = ew.forecast();
    out
}

/// Pearson's correlation coefficient R of paired values; `None` with fewer than three
/// pairs or no spread.
pub fn correlation(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 3 {
        return None;
    }
    let mx = x[..n].iter().sum::<f64>() / n as f64;
    let my = y[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (dx, dy) = (x[i] - mx, y[i] - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// How active and passive throughputs of the same transfers agree (§III.I): per pair
/// `err = (passive − active) / passive`, its median and mean, and R.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Agreement {
    pub n: usize,
    pub err_median: f64,
    pub err_mean: f64,
    pub r: Option<f64>,
}

/// The agreement of (active, passive) pairs; pairs with a passive value of 0 are left out.
pub fn agreement(pairs: &[(f64, f64)]) -> Option<Agreement> {
    let pairs: Vec<(f64, f64)> = pairs.iter().copied().filter(|p| p.1 != 0.0).collect();
    if pairs.is_empty() {
        return None;
    }
    let mut errs: Vec<f64> = pairs.iter().map(|(a, p)| (p - a) / p).collect();
    let err_mean = errs.iter().sum::<f64>() / errs.len() as f64;
    errs.sort_by(f64::total_cmp);
    let mid = errs.len() / 2;
    let err_median = if errs.len() % 2 == 1 {
        errs[mid]
    } else {
        (errs[mid - 1] + errs[mid]) / 2.0
    };
    let (a, p): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    Some(Agreement {
        n: pairs.len(),
        err_median,
        err_mean,
        r: correlation(&a, &p),
    })
}

/// IEPM-BW's choice of window and streams (§III.D): among the settings, the one with the
/// fewest streams whose throughput reaches `fraction` (the paper: 80–90 %) of the best;
/// ties go to the smaller window. `rows` are (window bytes, streams, throughput); returns
/// the index of the choice.
pub fn choose_window_streams(rows: &[(Option<u64>, u32, f64)], fraction: f64) -> Option<usize> {
    let best = rows
        .iter()
        .map(|r| r.2)
        .filter(|v| v.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    if !best.is_finite() {
        return None;
    }
    rows.iter()
        .enumerate()
        .filter(|(_, r)| r.2 >= fraction * best)
        .min_by_key(|(_, r)| (r.1, r.0.unwrap_or(0)))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_of_last_five_and_its_deviation() {
        let mut m = MeanOfLast::new(5);
        assert_eq!(m.forecast(), None);
        for x in [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] {
            m.observe(x);
        }
        let (mean, sd) = m.forecast().unwrap();
        assert_eq!(mean, 4.0);
        assert!((sd - 2.5f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn ewma_weights_the_past_by_w() {
        let mut e = Ewma::new(0.7);
        e.observe(10.0);
        e.observe(20.0);
        assert!((e.forecast().unwrap() - 13.0).abs() < 1e-12);
    }

    #[test]
    fn relative_error_skips_zero_observations() {
        let mut r = RelativeError::default();
        r.add(11.0, 10.0);
        r.add(5.0, 0.0);
        r.add(9.0, 10.0);
        assert!((r.value().unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(r.skipped_zero, 1);
    }

    #[test]
    fn diurnal_fit_recovers_a_known_cycle_and_separates_weekends() {
        // Four weeks of hourly points: weekdays a strong cycle, weekends flat noise.
        let mut t = Vec::new();
        let mut v = Vec::new();
        let mut s: u32 = 99;
        let start = 1_700_006_400_000.0; // a Wednesday, 00:00 UTC
        for h in 0..(28 * 24) {
            let ms = start + h as f64 * 3_600_000.0;
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let noise = (s as f64 / u32::MAX as f64 - 0.5) * 4.0;
            let y = if is_weekend(ms) {
                50.0 + noise * 5.0
            } else {
                30.0 * (time_of_day(ms) + 1.0).sin() + 80.0 + noise
            };
            t.push(ms);
            v.push(y);
        }
        let split = diurnal_split(&t, &v);
        let wd = split.weekdays.unwrap();
        assert!((wd.a - 30.0).abs() < 1.0, "{wd:?}");
        assert!((wd.b - 1.0).abs() < 0.05, "{wd:?}");
        assert!((wd.c - 80.0).abs() < 0.5, "{wd:?}");
        assert!(wd.is_diurnal());
        let we = split.weekends.unwrap();
        assert!(!we.is_diurnal(), "{we:?}");
    }

    #[test]
    fn diurnal_fit_refuses_too_few_points_or_hours() {
        assert_eq!(diurnal_fit(&[0.0, 1.0, 2.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(diurnal_fit(&[1.0; 10], &[5.0; 10]), None);
        // Flat noise on hours of a day: never a fit over 17 hours, always one over 18.
        let hour = TAU / 24.0;
        let mut s: u32 = 7;
        for hours in [8, 17, 18, 24] {
            for _ in 0..25 {
                let x: Vec<f64> = (0..hours).map(|h| (h as f64 + 0.5) * hour).collect();
                let y: Vec<f64> = x
                    .iter()
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 17;
                        s ^= s << 5;
                        300.0 + 30.0 * (s as f64 / u32::MAX as f64 - 0.5)
                    })
                    .collect();
                let fit = diurnal_fit(&x, &y);
                assert_eq!(
                    fit.is_some(),
                    hours >= DIURNAL_MIN_HOURS,
                    "{hours} h: {fit:?}"
                );
            }
        }
    }

    #[test]
    fn weekday_arithmetic() {
        assert!(!is_weekend(0.0)); // Thursday 1970-01-01
        assert!(is_weekend(2.0 * DAY_MS)); // Saturday
        assert!(is_weekend(3.0 * DAY_MS)); // Sunday
        assert!(!is_weekend(4.0 * DAY_MS)); // Monday
    }

    #[test]
    fn multi_stream_methods_and_grouping() {
        let f = [
            Flow {
                start_s: 0.0,
                duration_s: 10.0,
                bytes: 100.0,
            },
            Flow {
                start_s: 1.0,
                duration_s: 5.0,
                bytes: 100.0,
            },
        ];
        let m = multi_stream(&f).unwrap();
        assert_eq!(m.method1, 30.0);
        assert!((m.method2 - 200.0 / 7.5).abs() < 1e-12);
        assert_eq!(m.method3, 20.0);
        let later = Flow {
            start_s: 100.0,
            duration_s: 1.0,
            bytes: 1.0,
        };
        assert_eq!(group_transfers(&[later, f[0], f[1]], 5.0).len(), 2);
        // Connections one after another, each 0.1 s and 0.05 s apart: each its own transfer,
        // not one of 300 streams.
        let one_by_one: Vec<Flow> = (0..300)
            .map(|i| Flow {
                start_s: i as f64 * 0.15,
                duration_s: 0.1,
                bytes: 625_000.0,
            })
            .collect();
        let t = group_transfers(&one_by_one, 5.0);
        assert_eq!(t.len(), 300);
        assert_eq!(multi_stream(&t[7]).unwrap().method1, 6_250_000.0);
        // Four parallel streams opened 0.2 s apart are one transfer.
        let parallel: Vec<Flow> = (0..4)
            .map(|i| Flow {
                start_s: i as f64 * 0.2,
                duration_s: 10.0,
                bytes: 1e6,
            })
            .collect();
        assert_eq!(group_transfers(&parallel, 5.0).len(), 1);
    }

    #[test]
    fn evaluate_scores_both_simple_forecasts() {
        let e = evaluate(&[10.0, 20.0, 10.0]);
        assert_eq!(e.mean5[0], None);
        assert_eq!(e.ewma[1], Some(10.0));
        // Mean of 5: 10 for 20 (err 0.5), 15 for 10 (err 0.5). EWMA: 10 for 20, 13 for 10.
        assert!((e.mean5_error.value().unwrap() - 0.5).abs() < 1e-12);
        assert!((e.ewma_error.value().unwrap() - (0.5 + 0.3) / 2.0).abs() < 1e-12);
        assert!((e.next_ewma.unwrap() - (0.3 * 10.0 + 0.7 * 13.0)).abs() < 1e-12);
    }

    #[test]
    fn agreement_and_the_window_streams_choice() {
        let a = agreement(&[(90.0, 100.0), (100.0, 100.0), (50.0, 40.0), (1.0, 0.0)]).unwrap();
        assert_eq!(a.n, 3);
        assert!((a.err_median - 0.0).abs() < 1e-12);
        assert!((a.err_mean - (0.1 + 0.0 - 0.25) / 3.0).abs() < 1e-12);
        assert!(a.r.unwrap() > 0.95, "{a:?}");
        assert_eq!(correlation(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        let rows = [
            (Some(65_536), 1, 20.0),
            (Some(65_536), 8, 85.0),
            (Some(1 << 20), 1, 80.0),
            (Some(1 << 20), 8, 100.0),
        ];
        assert_eq!(
            choose_window_streams(&rows, 0.8),
            Some(2),
            "one stream with the larger window reaches 80 %"
        );
        assert_eq!(choose_window_streams(&rows, 0.9), Some(3));
    }
}
