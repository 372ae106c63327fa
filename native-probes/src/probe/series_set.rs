//! The series a periodic probe keeps (JavaNws §2.1.2: a separate time series for RTT,
//! Nagle-impeded RTT and bandwidth), each with the forecaster bank and the adaptive timeout
//! rules, and the measurement records they produce.
//!
//! A bulk probe's value (Mbit/s) is not what its timeout is about (milliseconds of probe
//! time), so such a metric also keeps a series of its probe durations, from which its
//! timeout is learned. A probe that timed out is fed back as its duration plus the penalty
//! (NWS), never dropped; a probe that failed is recorded and feeds nothing.

use nowcast_core::record::{Metric, Probe, Record, RecordForecast, Selector, Status};
use nowcast_core::timeout::Bounds;
use nowcast_core::{Mode, Series};

/// The timeout rule the probes obey: MSE forecast + 2·RMSE of the last 20 forecasts
/// (algorithms.md §2, the improved rule), clamped to the bounds.
pub const TIMEOUT_RULE: &str = "windowed_k2_w20";

/// How one probe ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The measured value, in the metric's unit, and the probe's duration in ms.
    Ok { value: f64, duration_ms: f64 },
    /// The probe gave up after `elapsed_ms`.
    Timeout { elapsed_ms: f64 },
    /// The probe failed; the message names the host, the step and the OS error.
    Error(String),
}

/// One probe's result, ready to be recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub metric: Metric,
    pub outcome: Outcome,
    /// The timeout in force for this probe, in ms.
    pub timeout_ms: Option<f64>,
    pub probe: Option<Probe>,
}

/// Where and when: the fields every record of one experiment shares.
#[derive(Clone, Debug)]
pub struct Context {
    pub timestamp_ms: f64,
    pub source: &'static str,
    pub from: Option<String>,
    pub to: String,
    pub seq: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    metric: Metric,
    values: Series,
    durations: Option<Series>,
}

/// The series of one probe command, one per metric.
#[derive(Clone, Debug)]
pub struct SeriesSet {
    entries: Vec<Entry>,
}

/// Counts and errors of one series so far, for the closing summary.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesStats {
    pub metric: Metric,
    pub measured: u64,
    pub timeouts: u64,
    /// Mean absolute error of the recorded forecasts (the MSE selector's) so far.
    pub forecast_mae: Option<f64>,
}

impl SeriesSet {
    /// Series for `metrics`; those flagged `true` learn their timeouts from their probe
    /// durations rather than from their values. `bounds` are in ms.
    pub fn new(metrics: &[(Metric, bool)], bounds: Bounds) -> Self {
        let entries = metrics
            .iter()
            .map(|&(metric, by_duration)| Entry {
                metric,
                values: Series::new(Mode::Improved, bounds),
                durations: by_duration.then(|| Series::new(Mode::Improved, bounds)),
            })
            .collect();
        Self { entries }
    }

    fn entry(&self, metric: Metric) -> &Entry {
        self.entries
            .iter()
            .find(|e| e.metric == metric)
            .expect("metric is one of the set's")
    }

    /// The adaptive timeout in ms for the next probe of `metric`; `None` until its series
    /// has a forecast.
    pub fn timeout_ms(&self, metric: Metric) -> Option<f64> {
        let e = self.entry(metric);
        e.durations
            .as_ref()
            .unwrap_or(&e.values)
            .timeout(TIMEOUT_RULE)
    }

    /// The bank's forecast of the next value of `metric` (MSE selector, error as RMSE).
    pub fn forecast(&self, metric: Metric) -> Option<RecordForecast> {
        let s = &self.entry(metric).values;
        let f = s.forecast()?;
        Some(RecordForecast {
            value: f.mse.value,
            method: s.bank().method(f.mse.method).0.to_string(),
            selector: Selector::Mse,
            error: f.mse.error.max(0.0).sqrt(),
        })
    }

    /// Feeds `m` to its series and returns its record, carrying the forecast made before it.
    pub fn observe(&mut self, ctx: &Context, m: Measurement) -> Record {
        let forecast = self.forecast(m.metric);
        let e = self
            .entries
            .iter_mut()
            .find(|e| e.metric == m.metric)
            .expect("metric is one of the set's");
        let (status, value, error) = match m.outcome {
            Outcome::Ok { value, duration_ms } => {
                // A value the bank refuses (not finite, absurdly large) is recorded as an
                // error instead of being fed.
                match e.values.observe(value) {
                    Ok(()) => {
                        if let Some(d) = &mut e.durations {
                            let _ = d.observe(duration_ms);
                        }
                        (Status::Ok, Some(value), None)
                    }
                    Err(err) => (Status::Error, None, Some(format!("unusable value: {err}"))),
                }
            }
            Outcome::Timeout { elapsed_ms } => {
                let _ = e
                    .durations
                    .as_mut()
                    .unwrap_or(&mut e.values)
                    .timed_out(elapsed_ms);
                (Status::Timeout, None, None)
            }
            Outcome::Error(msg) => (Status::Error, None, Some(msg)),
        };
        let mut r = Record::new(ctx.timestamp_ms, ctx.source, m.metric, 0.0, &ctx.to);
        r.status = status;
        r.value = value;
        r.error = error;
        r.from = ctx.from.clone();
        r.seq = Some(ctx.seq);
        // The schema requires timeout_ms with status timeout; a timeout with no adaptive
        // value in force was the hard deadline, which the caller passes the same way.
        r.timeout_ms = m.timeout_ms.filter(|t| t.is_finite() && *t > 0.0);
        r.probe = m.probe;
        r.forecast = forecast;
        r
    }

    /// Counts and forecast errors of every series, in the order they were declared.
    pub fn stats(&self) -> Vec<SeriesStats> {
        self.entries
            .iter()
            .map(|e| {
                let bank = e.values.bank();
                let acc = bank.mse_accum();
                SeriesStats {
                    metric: e.metric,
                    measured: bank.len(),
                    timeouts: e.durations.as_ref().unwrap_or(&e.values).timeouts(),
                    forecast_mae: (acc.n > 0).then(|| acc.mae()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(seq: u64) -> Context {
        Context {
            timestamp_ms: 1.7e12,
            source: "nowcast tcp",
            from: Some("127.0.0.1:5000".into()),
            to: "127.0.0.1:8060".into(),
            seq,
        }
    }

    #[test]
    fn records_carry_the_forecast_made_before_the_value_and_validate() {
        let bounds = Bounds {
            floor: 10.0,
            ceiling: 1_000.0,
            penalty: 50.0,
        };
        let mut set = SeriesSet::new(&[(Metric::Rtt, false), (Metric::BandwidthUp, true)], bounds);
        assert_eq!(set.timeout_ms(Metric::Rtt), None);
        let first = set.observe(
            &ctx(0),
            Measurement {
                metric: Metric::Rtt,
                outcome: Outcome::Ok {
                    value: 2.0,
                    duration_ms: 2.0,
                },
                timeout_ms: None,
                probe: None,
            },
        );
        assert!(
            first.forecast.is_none(),
            "no forecast before the first value"
        );
        first.validate().unwrap();
        assert_eq!(set.forecast(Metric::Rtt).unwrap().value, 2.0);
        assert_eq!(set.timeout_ms(Metric::Rtt), Some(10.0), "the floor applies");

        let bw = set.observe(
            &ctx(0),
            Measurement {
                metric: Metric::BandwidthUp,
                outcome: Outcome::Ok {
                    value: 100.0,
                    duration_ms: 300.0,
                },
                timeout_ms: None,
                probe: None,
            },
        );
        bw.validate().unwrap();
        // The bulk timeout comes from durations (ms), not from Mbit/s; with one duration
        // known it is the cold start, 3 × the longest (nowcast_core::timeout::COLD_FACTOR).
        assert_eq!(set.timeout_ms(Metric::BandwidthUp), Some(900.0));

        let t = set.observe(
            &ctx(1),
            Measurement {
                metric: Metric::Rtt,
                outcome: Outcome::Timeout { elapsed_ms: 10.0 },
                timeout_ms: Some(10.0),
                probe: None,
            },
        );
        t.validate().unwrap();
        assert_eq!((t.status, t.value, t.seq), (Status::Timeout, None, Some(1)));
        assert_eq!(t.forecast.as_ref().unwrap().value, 2.0);
        let line = t.to_line();
        assert_eq!(Record::parse(&line).unwrap(), t);

        let err = set.observe(
            &ctx(2),
            Measurement {
                metric: Metric::Rtt,
                outcome: Outcome::Error("x: connect: refused".into()),
                timeout_ms: None,
                probe: None,
            },
        );
        err.validate().unwrap();
        let stats = set.stats();
        assert_eq!(
            stats[0].measured, 2,
            "the timeout was fed back, the error was not"
        );
        assert_eq!(stats[0].timeouts, 1);
        assert_eq!(stats[1].measured, 1);
    }
}
