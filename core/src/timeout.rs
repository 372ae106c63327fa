//! Adaptive timeouts (algorithms.md §2): how long to wait for the next probe before giving
//! up, learned from the forecasts and their errors, and how often each rule would have fired
//! too early (the miss rate) against how long it makes a caller wait (the mean timeout).
//!
//! Values are in the series' own unit (e.g. ms for an RTT series, or seconds of probe time).

use crate::bank::Forecast;
use serde::{Deserialize, Serialize};

/// A timeout rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum Rule {
    /// NWS original: MAE forecast + 3·√(MSE error), whole-history error.
    Nws,
    /// Allen, Wolski and Plank: MSE forecast + k·√(MSE error), k = 1 or 2 (2 did best).
    Allen { k: f64 },
    /// RFC 6298 retransmission timer: SRTT + max(G, 4·RTTVAR), α = 1/8, β = 1/4.
    Rfc6298 { granularity: f64 },
    /// MSE forecast + k·√(mean squared error of the last `window` forecasts), so that one
    /// early spike does not inflate every later timeout (kept for comparison: it has no
    /// control over how often it fires).
    Windowed { k: f64, window: usize },
    /// Improved: MAE forecast + k·s, s the larger of the MAE forecast's whole-history mean
    /// absolute error and a running mean of its recent absolute errors (a stable spread on a
    /// steady series that still widens at once when a level shift brings larger errors),
    /// with k learnt online so that the long-run share of values above their timeout meets
    /// `miss` (e.g. 0.01). After each judged value k moves up by γ·(1 − miss) on a miss and
    /// down by γ·miss otherwise: the stochastic-approximation quantile update of Robbins &
    /// Monro (1951), in the form of adaptive conformal inference (Gibbs & Candès 2021, §2),
    /// whose long-run miss rate meets the target whatever the errors' distribution and
    /// however it shifts. k starts at ln(1 / (2·miss)), the multiple of the mean absolute
    /// deviation that a Laplace distribution exceeds on one side with probability `miss`.
    Target { miss: f64 },
}

/// Fewer forecast errors than this and the spread is not known: the cold-start timeout
/// applies ([`COLD_FACTOR`] times the largest value seen, within the bounds).
pub const MIN_ERRORS: u64 = 5;
/// The cold-start timeout as a multiple of the largest value seen; 3 is RFC 6298's first
/// timeout after one measurement R (R + 4·R/2, §2.2).
pub const COLD_FACTOR: f64 = 3.0;
/// Step γ of the target rule's k, and its range.
const TARGET_STEP: f64 = 0.05;
const TARGET_K_MAX: f64 = 50.0;
/// Weight of the newest absolute error in the target rule's running mean absolute error.
const TARGET_GAIN: f64 = 0.05;

/// The target rule's starting k for miss rate `miss` (see [`Rule::Target`]).
fn target_k0(miss: f64) -> f64 {
    (0.5 / miss.clamp(1e-6, 0.5)).ln().clamp(0.0, TARGET_K_MAX)
}

impl Rule {
    /// Stable name of the rule, used in reports and records.
    pub fn id(&self) -> String {
        match self {
            Rule::Nws => "nws".into(),
            Rule::Allen { k } => format!("allen_k{k}"),
            Rule::Rfc6298 { .. } => "rfc6298".into(),
            Rule::Windowed { k, window } => format!("windowed_k{k}_w{window}"),
            Rule::Target { miss } => format!("target_miss_{}pct", miss * 100.0),
        }
    }

    /// The improved rule: a 1 % target miss rate (README, "Adaptive timeouts": chosen on one
    /// half of the dev series and, on the other half, on the miss-rate/mean-timeout frontier of
    /// the rules on every series). Every report compares it ([`Rule::standard`]) and the timeout
    /// experiment runs it; the product's probes time out by [`crate::probed::TIMEOUT_RULE`].
    pub const DEFAULT: Rule = Rule::Target { miss: 0.01 };

    /// The rules every report compares.
    pub fn standard() -> Vec<Rule> {
        vec![
            Rule::Nws,
            Rule::Allen { k: 1.0 },
            Rule::Allen { k: 2.0 },
            Rule::Rfc6298 { granularity: 0.0 },
            Rule::Windowed { k: 2.0, window: 20 },
            Rule::DEFAULT,
            Rule::Target { miss: 0.02 },
        ]
    }
}

/// Floor, ceiling and the penalty added to a timed-out probe's duration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    pub floor: f64,
    /// May be infinite (no ceiling), which the saved form writes as null.
    #[serde(with = "infinite_as_null")]
    pub ceiling: f64,
    pub penalty: f64,
}

/// JSON has no infinity: an unbounded ceiling is saved as null and read back as +∞.
mod infinite_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

impl Bounds {
    /// No clamping (for evaluating rules on arbitrary series).
    pub const UNBOUNDED: Bounds = Bounds {
        floor: 0.0,
        ceiling: f64::INFINITY,
        penalty: 0.0,
    };
    /// The NWS defaults for probe durations in milliseconds: [5 s, 120 s], 5 s penalty.
    pub const NWS_MS: Bounds = Bounds {
        floor: 5_000.0,
        ceiling: 120_000.0,
        penalty: 5_000.0,
    };

    fn clamp(&self, t: f64) -> f64 {
        t.max(self.floor).min(self.ceiling)
    }

    /// The value fed back for a probe that timed out after `elapsed`: its duration plus the
    /// penalty (NWS), so that the forecasts learn that the path got slower.
    pub fn timed_out_value(&self, elapsed: f64) -> f64 {
        elapsed + self.penalty
    }
}

/// The timeout rules of one series: each value is judged and learnt from with the forecast
/// its bank made before it. [`crate::Series`] keeps its rules in one, beside its bank; a
/// caller that runs the bank on one thread and the rules on another (`nowcast forecast`)
/// keeps one apart and feeds it the same values and forecasts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimeoutRules {
    trackers: Vec<Tracker>,
    bounds: Bounds,
}

impl TimeoutRules {
    /// `rules` within `bounds`.
    pub fn new(rules: &[Rule], bounds: Bounds) -> Self {
        Self {
            trackers: rules.iter().copied().map(Tracker::new).collect(),
            bounds,
        }
    }

    /// [`Rule::standard`] within `bounds`.
    pub fn standard(bounds: Bounds) -> Self {
        Self::new(&Rule::standard(), bounds)
    }

    pub fn is_empty(&self) -> bool {
        self.trackers.is_empty()
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    pub fn set_bounds(&mut self, bounds: Bounds) {
        self.bounds = bounds;
    }

    /// Judges `x` against each rule's timeout and learns from it; `before` is the bank's
    /// forecast made before `x`.
    pub fn observe(&mut self, x: f64, before: Option<&Forecast>) {
        for t in &mut self.trackers {
            t.observe(x, before, &self.bounds);
        }
    }

    /// [`Tracker::observe_censored`] for every rule.
    pub fn observe_censored(&mut self, at_least: f64, before: Option<&Forecast>) {
        for t in &mut self.trackers {
            t.observe_censored(at_least, before, &self.bounds);
        }
    }

    /// The timeout the first rule `which` picks sets after `forecast`, if there is one.
    pub fn timeout(
        &self,
        which: impl Fn(&Rule) -> bool,
        forecast: Option<&Forecast>,
    ) -> Option<f64> {
        self.trackers
            .iter()
            .find(|t| which(&t.rule))?
            .timeout(forecast, &self.bounds)
    }

    /// Miss rate and mean timeout of every rule so far.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.trackers.iter().map(Tracker::outcome).collect()
    }

    /// Checks restored rules.
    pub fn validate(&self) -> Result<(), String> {
        self.trackers.iter().try_for_each(Tracker::validate)
    }
}

/// One rule's running state and its record of misses.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tracker {
    pub rule: Rule,
    /// RFC 6298 state: (SRTT, RTTVAR).
    rfc: Option<(f64, f64)>,
    /// Windowed rule: the last squared errors of the MSE forecast.
    ring: Vec<f64>,
    ring_pos: usize,
    ring_sum: f64,
    /// Forecast errors seen (the cold start lasts until [`MIN_ERRORS`]).
    se_n: u64,
    /// Largest value seen (the cold-start timeout's base).
    max_seen: Option<f64>,
    /// Target rule: the multiplier k and the running mean absolute error of the MAE
    /// forecast.
    k: f64,
    mad: f64,
    /// Values judged, values above their timeout, and the sum of timeouts.
    pub judged: u64,
    pub misses: u64,
    pub timeout_sum: f64,
}

/// Miss rate and mean timeout of a rule over a series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    pub rule: String,
    pub judged: u64,
    pub miss_rate: f64,
    pub mean_timeout: f64,
}

impl Tracker {
    pub fn new(rule: Rule) -> Self {
        let window = match rule {
            Rule::Windowed { window, .. } => window.max(1),
            _ => 0,
        };
        Self {
            rule,
            rfc: None,
            ring: vec![0.0; window],
            ring_pos: 0,
            ring_sum: 0.0,
            se_n: 0,
            max_seen: None,
            k: match rule {
                Rule::Target { miss } => target_k0(miss),
                _ => 0.0,
            },
            mad: 0.0,
            judged: 0,
            misses: 0,
            timeout_sum: 0.0,
        }
    }

    /// The timeout for the next value, given the bank's current forecast; `None` before any
    /// value. While fewer than [`MIN_ERRORS`] errors are known, so that no spread can be
    /// told from them, every rule but RFC 6298 (which has its own start, §2.2) answers the
    /// cold-start timeout: [`COLD_FACTOR`] × the largest value seen, within the bounds.
    pub fn timeout(&self, forecast: Option<&Forecast>, bounds: &Bounds) -> Option<f64> {
        let cold = !matches!(self.rule, Rule::Rfc6298 { .. }) && self.se_n < MIN_ERRORS;
        let raw = match self.rule {
            _ if cold => COLD_FACTOR * self.max_seen?,
            Rule::Nws => {
                let f = forecast?;
                f.mae.value + 3.0 * f.mse.error.sqrt()
            }
            Rule::Allen { k } => {
                let f = forecast?;
                f.mse.value + k * f.mse.error.sqrt()
            }
            Rule::Rfc6298 { granularity } => {
                let (srtt, rttvar) = self.rfc?;
                srtt + granularity.max(4.0 * rttvar)
            }
            Rule::Windowed { k, .. } => {
                let f = forecast?;
                let filled = (self.se_n as usize).min(self.ring.len());
                f.mse.value + k * (self.ring_sum.max(0.0) / filled as f64).sqrt()
            }
            Rule::Target { .. } => {
                let f = forecast?;
                f.mae.value + self.k * self.mad.max(f.mae.error)
            }
        };
        raw.is_finite().then(|| bounds.clamp(raw))
    }

    /// Judges `x` against the timeout this rule set before it, then learns from it.
    /// `forecast` is the bank's forecast made before `x`.
    pub fn observe(&mut self, x: f64, forecast: Option<&Forecast>, bounds: &Bounds) {
        let missed = self.timeout(forecast, bounds).map(|t| self.judge(t, x > t));
        self.learn(x, forecast, missed);
    }

    /// A probe that gave up after `at_least` (the value is at least that): judged a miss for
    /// a rule whose timeout was at or below it (the rule that fired is one: its probe was not
    /// answered by its timeout), not judged for one whose timeout was longer (whether that
    /// rule would have waited long enough is unknown), and learnt from as the value
    /// `at_least`, a lower bound rather than a made-up penalty.
    pub fn observe_censored(
        &mut self,
        at_least: f64,
        forecast: Option<&Forecast>,
        bounds: &Bounds,
    ) {
        let missed = match self.timeout(forecast, bounds) {
            Some(t) if t <= at_least => Some(self.judge(t, true)),
            _ => None,
        };
        self.learn(at_least, forecast, missed);
    }

    fn judge(&mut self, t: f64, missed: bool) -> bool {
        self.judged += 1;
        self.timeout_sum += t;
        self.misses += missed as u64;
        missed
    }

    /// Learns from `x`: each rule keeps only what its own timeout reads (every rule but
    /// RFC 6298 the error count and the largest value, for the cold start).
    fn learn(&mut self, x: f64, forecast: Option<&Forecast>, missed: Option<bool>) {
        if let Rule::Rfc6298 { .. } = self.rule {
            // RFC 6298 §2: first measurement sets SRTT = R, RTTVAR = R/2.
            self.rfc = Some(match self.rfc {
                None => (x, x / 2.0),
                Some((srtt, rttvar)) => {
                    let rttvar = 0.75 * rttvar + 0.25 * (srtt - x).abs();
                    (0.875 * srtt + 0.125 * x, rttvar)
                }
            });
            return;
        }
        if let (Rule::Target { miss }, Some(m), false) = (self.rule, missed, self.se_n < MIN_ERRORS)
        {
            // Robbins–Monro / adaptive conformal step (Gibbs & Candès 2021, §2).
            let step = if m { 1.0 - miss } else { -miss };
            self.k = (self.k + TARGET_STEP * step).clamp(0.0, TARGET_K_MAX);
        }
        if let Some(f) = forecast {
            self.se_n += 1;
            match self.rule {
                Rule::Target { .. } => {
                    let ae = (x - f.mae.value).abs();
                    self.mad = if self.se_n == 1 {
                        ae
                    } else {
                        self.mad + TARGET_GAIN * (ae - self.mad)
                    };
                }
                Rule::Windowed { .. } => {
                    let e = x - f.mse.value;
                    let se = e * e;
                    self.ring_sum += se - self.ring[self.ring_pos];
                    self.ring[self.ring_pos] = se;
                    self.ring_pos = (self.ring_pos + 1) % self.ring.len();
                    if self.ring_pos == 0 {
                        // Re-sum once per lap so rounding residue cannot build up.
                        self.ring_sum = self.ring.iter().sum();
                    }
                }
                _ => {}
            }
        }
        self.max_seen = Some(self.max_seen.map_or(x, |m| m.max(x)));
    }

    /// Miss rate and mean timeout so far.
    pub fn outcome(&self) -> Outcome {
        let n = self.judged.max(1) as f64;
        Outcome {
            rule: self.rule.id(),
            judged: self.judged,
            miss_rate: self.misses as f64 / n,
            mean_timeout: self.timeout_sum / n,
        }
    }

    /// Checks a restored tracker.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let ok = self.k.is_finite()
            && (0.0..=TARGET_K_MAX).contains(&self.k)
            && self.mad.is_finite()
            && self.mad >= 0.0
            && self.ring_pos < self.ring.len().max(1)
            && matches!(self.rule, Rule::Windowed { window, .. } if window.max(1) == self.ring.len())
                == !self.ring.is_empty();
        if ok {
            Ok(())
        } else {
            Err(format!("timeout rule {} is damaged", self.rule.id()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bank, Mode};

    fn run(rule: Rule, xs: &[f64]) -> Outcome {
        let mut bank = Bank::new(Mode::Improved);
        let mut t = Tracker::new(rule);
        for &x in xs {
            let f = bank.forecast();
            t.observe(x, f.as_ref(), &Bounds::UNBOUNDED);
            bank.update(x).unwrap();
        }
        t.outcome()
    }

    #[test]
    fn rfc6298_follows_the_rfc_arithmetic() {
        let mut t = Tracker::new(Rule::Rfc6298 { granularity: 0.0 });
        t.observe(100.0, None, &Bounds::UNBOUNDED);
        // SRTT = 100, RTTVAR = 50, RTO = 100 + 4·50.
        assert_eq!(t.timeout(None, &Bounds::UNBOUNDED), Some(300.0));
        t.observe(120.0, None, &Bounds::UNBOUNDED);
        // RTTVAR = 0.75·50 + 0.25·20 = 42.5; SRTT = 102.5; RTO = 272.5.
        assert_eq!(t.timeout(None, &Bounds::UNBOUNDED), Some(272.5));
        assert_eq!(t.outcome().judged, 1);
    }

    #[test]
    fn one_early_spike_inflates_whole_history_timeouts_but_not_windowed_ones() {
        let mut xs = vec![10.0; 5];
        xs.push(1000.0);
        xs.extend(std::iter::repeat_n(10.0, 400));
        let nws = run(Rule::Allen { k: 2.0 }, &xs);
        let win = run(Rule::Windowed { k: 2.0, window: 20 }, &xs);
        assert!(
            win.mean_timeout < nws.mean_timeout / 2.0,
            "{win:?} vs {nws:?}"
        );
        assert!(win.miss_rate <= 0.01 && nws.miss_rate <= 0.01);
    }

    #[test]
    fn bounds_clamp_and_penalise() {
        let b = Bounds::NWS_MS;
        let mut t = Tracker::new(Rule::Rfc6298 { granularity: 0.0 });
        t.observe(1.0, None, &b);
        assert_eq!(t.timeout(None, &b), Some(5_000.0));
        t.observe(1e9, None, &b);
        assert_eq!(t.timeout(None, &b), Some(120_000.0));
        assert_eq!(b.timed_out_value(120_000.0), 125_000.0);
    }
}
