//! A probed series: one metric measured by repeated probes, each run under an adaptive
//! timeout, each forecast before it is measured, each written as a [`Record`]. The page and
//! the `nowcast` probes keep their series with this one type, so the rules below exist once.
//!
//! Deterministic core: observations (values, durations, wall-clock stamps the caller read)
//! in, timeouts, forecasts and records out. It opens no socket, reads no clock, prints
//! nothing; a series rebuilt from its saved records ([`ProbedSeries::replay`]) goes through
//! the very code a live probe went through, so it ends in the same state bit for bit.
//!
//! The rules, decided once:
//! - **Timeout rule** ([`TIMEOUT_RULE`]): the NWS rule (algorithms.md §2), the MAE forecast
//!   of the probe durations plus three root-mean-square errors, within a floor and a ceiling
//!   (the floor is Allen, Wolski & Plank's static minimum, §6).
//! - **Cold start**: the timeout rules' own ([`crate::timeout::MIN_ERRORS`]): until the
//!   durations have enough forecast errors to know their spread, the timeout is
//!   [`crate::timeout::COLD_FACTOR`] times the largest duration seen, within the bounds; with
//!   no duration yet, the profile's initial timeout.
//! - **What a timed-out probe feeds back**: its elapsed time plus the penalty to the
//!   durations (NWS, algorithms.md §2), and for a rate the rate its payload would at most
//!   have reached in that time, so both forecasts learn that the path got slower.
//! - **Overrun**: a probe that completed after its timeout counts as a timeout.
//! - **Sequence numbers** count the probes of this series (the schema's "within its series").

use crate::method::Mode;
use crate::record::{Metric, Probe, Record, RecordForecast, Selector, Status, Transport};
use crate::series::Series;
use crate::timeout::{Bounds, Rule};
use crate::ForecastError;
use serde::{Deserialize, Serialize};

/// The timeout rule of every probed series: the NWS rule (algorithms.md §2), MAE forecast of
/// the durations + 3·√MSE. Chosen by evidence (`native-probes/bench/timeout_rules.py`, figures
/// in the README's "Adaptive timeouts"): on 130 recorded series (RTTs, and the time a 1 MB
/// transfer took on mobile and fixed links) it missed least, median 0.9–2.6 % of next
/// durations against 3.9–5.1 % for Allen, Wolski & Plank's k = 2 and 6.3–7.2 % for the
/// windowed k = 2 rule (which k = 1 or k = 2 dominate on a fifth of them), for mean timeouts
/// 7–27 % above k = 2's. A miss costs a probe that would have completed, and feeds a penalty
/// into the series; a longer timeout costs time only when a probe is really lost.
/// Replace it here, and only here, to change how every probe of the product times out.
pub const TIMEOUT_RULE: Rule = Rule::Nws;

/// What a series' value is, which decides where its timeout comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The value is the probe's duration (an RTT): one series serves both.
    Duration,
    /// The value is payload over time (Mbit/s): the durations get a series of their own,
    /// from which the timeout is learned.
    Rate,
    /// A figure summarising probes that another series times (jitter, loss of a burst):
    /// forecast, but without a timeout of its own.
    Statistic,
}

/// Floor, ceiling, penalty and initial timeout of a series, in ms of probe time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeoutBounds {
    pub floor_ms: f64,
    pub ceiling_ms: f64,
    /// Added to a timed-out probe's elapsed time when it is fed back (NWS).
    pub penalty_ms: f64,
    /// The timeout of the first probe, before any duration is known.
    pub initial_ms: f64,
}

impl TimeoutBounds {
    fn check(&self) -> Result<(), ForecastError> {
        let b = self;
        let ok = b.floor_ms.is_finite()
            && b.floor_ms > 0.0
            && b.ceiling_ms.is_finite()
            && b.ceiling_ms >= b.floor_ms
            && b.penalty_ms.is_finite()
            && b.penalty_ms >= 0.0
            && b.initial_ms.is_finite()
            && b.initial_ms > 0.0;
        if ok {
            Ok(())
        } else {
            Err(ForecastError::Invalid(format!(
                "timeout bounds need 0 < floor ≤ ceiling, penalty ≥ 0 and initial > 0 \
                 (got floor {}, ceiling {}, penalty {}, initial {})",
                b.floor_ms, b.ceiling_ms, b.penalty_ms, b.initial_ms
            )))
        }
    }

    /// The initial timeout, within the floor and the ceiling.
    fn initial(&self) -> f64 {
        self.initial_ms.max(self.floor_ms).min(self.ceiling_ms)
    }

    fn series_bounds(&self) -> Bounds {
        Bounds {
            floor: self.floor_ms,
            ceiling: self.ceiling_ms,
            penalty: self.penalty_ms,
        }
    }
}

/// A row of the defaults table: what kind of series a metric makes and its timeout bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub kind: Kind,
    pub bounds: TimeoutBounds,
}

/// The defaults of every probed series, one row per kind of probe; [`profile`] says which
/// row a metric takes. Overridable per series with [`Overrides`].
///
/// | row | floor | ceiling | penalty | initial |
/// |---|---|---|---|---|
/// | round trip | 1 s | 10 s | 1 s | 3 s |
/// | UDP burst | 100 ms | 10 s | 100 ms | 1 s |
/// | bulk transfer | 3 s | 60 s | 5 s | 15 s |
/// | statistic | (no timeout of its own) | | | |
///
/// A round trip's 1 s floor is Allen, Wolski & Plank's static minimum (§6: fast links
/// otherwise time out often); its 3 s initial is RFC 2988 §2.1's initial RTO, generous for any
/// path. A UDP burst's timeout is the wait for late replies after its last probe, so its
/// floor is lower; its initial wait is RFC 6298 §2.1's 1 s. Bulk transfers get the NWS
/// penalty of 5 s and a ceiling of a minute (the NWS original used 120 s for probes of any
/// size; a page and a command-line probe both give up on a transfer well before that).
pub const PROFILES: [Profile; 4] = [
    Profile {
        name: "round trip",
        kind: Kind::Duration,
        bounds: TimeoutBounds {
            floor_ms: 1_000.0,
            ceiling_ms: 10_000.0,
            penalty_ms: 1_000.0,
            initial_ms: 3_000.0,
        },
    },
    Profile {
        name: "UDP burst",
        kind: Kind::Duration,
        bounds: TimeoutBounds {
            floor_ms: 100.0,
            ceiling_ms: 10_000.0,
            penalty_ms: 100.0,
            initial_ms: 1_000.0,
        },
    },
    Profile {
        name: "bulk transfer",
        kind: Kind::Rate,
        bounds: TimeoutBounds {
            floor_ms: 3_000.0,
            ceiling_ms: 60_000.0,
            penalty_ms: 5_000.0,
            initial_ms: 15_000.0,
        },
    },
    Profile {
        name: "statistic",
        kind: Kind::Statistic,
        bounds: TimeoutBounds {
            floor_ms: 1_000.0,
            ceiling_ms: 10_000.0,
            penalty_ms: 0.0,
            initial_ms: 3_000.0,
        },
    },
];

/// The defaults row of `metric` probed over `transport`.
pub fn profile(metric: Metric, transport: Option<Transport>) -> Profile {
    use Metric::*;
    let row = match metric {
        Rtt if transport == Some(Transport::Udp) => 1,
        Rtt | RttNagle | HandshakeRtt | LoadedRtt => 0,
        BandwidthUp | BandwidthDown | AvailBwLowerBound | Throughput => 2,
        Jitter | Loss => 3,
    };
    PROFILES[row]
}

/// Settings that replace a profile's, where given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    #[serde(default)]
    pub kind: Option<Kind>,
    #[serde(default)]
    pub floor_ms: Option<f64>,
    #[serde(default)]
    pub ceiling_ms: Option<f64>,
    #[serde(default)]
    pub penalty_ms: Option<f64>,
    #[serde(default)]
    pub initial_ms: Option<f64>,
}

/// Everything that is fixed for the life of a series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub metric: Metric,
    pub kind: Kind,
    pub bounds: TimeoutBounds,
    /// The records' `source`, e.g. `browser` or `nowcast tcp`.
    pub source: String,
    /// The records' `from`, unless an observation names its own.
    pub from: Option<String>,
    /// The records' `to`: whose series this is.
    pub to: String,
    /// The configured time between probe starts, written to every record (schema 1.1).
    pub period_ms: Option<f64>,
    pub mode: Mode,
    /// Keep every forecast error (for the page's predictability view); a command that
    /// runs for days does without.
    pub keep_errors: bool,
}

impl Config {
    /// A series of `metric` over `transport` with the defaults of its [`profile`].
    pub fn new(metric: Metric, transport: Option<Transport>, source: &str, to: &str) -> Self {
        let p = profile(metric, transport);
        Self {
            metric,
            kind: p.kind,
            bounds: p.bounds,
            source: source.into(),
            from: None,
            to: to.into(),
            period_ms: None,
            mode: Mode::Improved,
            keep_errors: false,
        }
    }

    /// The same with `o`'s settings in place of the profile's.
    pub fn with(mut self, o: &Overrides) -> Self {
        let b = &mut self.bounds;
        self.kind = o.kind.unwrap_or(self.kind);
        b.floor_ms = o.floor_ms.unwrap_or(b.floor_ms);
        b.ceiling_ms = o.ceiling_ms.unwrap_or(b.ceiling_ms);
        b.penalty_ms = o.penalty_ms.unwrap_or(b.penalty_ms);
        b.initial_ms = o.initial_ms.unwrap_or(b.initial_ms);
        self
    }
}

/// A series' settings as a caller outside Rust gives them (the page's options): the metric,
/// who and where, and any of its profile's settings to replace.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub metric: Metric,
    pub transport: Option<Transport>,
    pub source: String,
    pub from: Option<String>,
    pub to: String,
    pub period_ms: Option<f64>,
    pub mode: Mode,
    /// Keep every forecast error; the page's predictability view needs them (default true).
    pub keep_errors: Option<bool>,
    pub overrides: Overrides,
}

impl Options {
    pub fn config(self) -> Config {
        let mut c =
            Config::new(self.metric, self.transport, &self.source, &self.to).with(&self.overrides);
        c.from = self.from;
        c.period_ms = self.period_ms;
        c.mode = self.mode;
        c.keep_errors = self.keep_errors.unwrap_or(true);
        c
    }
}

/// How one probe ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The measured value in the metric's unit and, when it is what the timeout bounded,
    /// the probe's duration in ms.
    Measured {
        value: f64,
        duration_ms: Option<f64>,
    },
    /// The probe was given up after `elapsed_ms`.
    TimedOut { elapsed_ms: f64 },
    /// The probe failed; the message says where and why.
    Failed { error: String },
}

/// One probe as the caller saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Wall-clock time of the probe, ms since 1970 (the caller reads the clock).
    pub timestamp_ms: f64,
    pub outcome: Outcome,
    /// The timeout the probe ran under (usually [`ProbedSeries::timeout_ms`] before it).
    pub timeout_ms: Option<f64>,
    /// Probe parameters; a rate's `payload_bytes` is what a timeout feeds back.
    pub probe: Option<Probe>,
    /// The record's `from`, when it differs from the series' (e.g. a new local port).
    pub from: Option<String>,
    /// The sequence number to record; `None` takes the series' next one. Replay passes the
    /// saved number, so a series goes on numbering where its history stopped.
    pub seq: Option<u64>,
}

impl Observation {
    /// An observation stamped `timestamp_ms` with nothing else set.
    pub fn new(timestamp_ms: f64, outcome: Outcome, timeout_ms: Option<f64>) -> Self {
        Self {
            timestamp_ms,
            outcome,
            timeout_ms,
            probe: None,
            from: None,
            seq: None,
        }
    }

    /// The observation a saved record stands for: what [`ProbedSeries::observe`] was given
    /// when it wrote the record. The elapsed time of a timeout is the record's
    /// `probe.raw_ms` (written by `observe`), else its timeout.
    pub fn of_record(r: &Record) -> Self {
        let raw = r.probe.as_ref().and_then(|p| p.raw_ms);
        let outcome = match (r.status, r.value) {
            (Status::Ok, Some(value)) => Outcome::Measured {
                value,
                duration_ms: raw,
            },
            (Status::Timeout, _) => Outcome::TimedOut {
                elapsed_ms: raw.or(r.timeout_ms).unwrap_or(0.0),
            },
            (_, _) => Outcome::Failed {
                error: r.error.clone().unwrap_or_else(|| "error".into()),
            },
        };
        Self {
            timestamp_ms: r.timestamp_ms,
            outcome,
            timeout_ms: r.timeout_ms,
            probe: r.probe.clone(),
            from: r.from.clone(),
            seq: r.seq,
        }
    }
}

/// What the console shows of a series besides its last record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct State {
    /// The forecast of the next value (MSE-selected, error as RMSE).
    pub next: Option<RecordForecast>,
    /// Mean absolute error of the forecasts made so far.
    pub mae: Option<f64>,
    /// In improved mode, the share of `next` that its method (the forecaster with the largest
    /// weight) has; absent where that method is the whole forecast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// Values in the forecaster bank (measured ones and fed-back timeouts).
    pub count: u64,
    pub timeouts: u64,
    /// The sequence number of the next probe.
    pub seq: u64,
}

/// Why saved records could not be replayed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("record {index}: {message}")]
pub struct ReplayError {
    pub index: usize,
    pub message: String,
}

/// One probed series: its forecasts, its timeout, and the records it writes.
#[derive(Clone, Debug)]
pub struct ProbedSeries {
    config: Config,
    /// The values forecast and shown.
    values: Series,
    /// A rate's probe durations (ms), whose forecasts set its timeout.
    durations: Option<Series>,
    seq: u64,
    timeouts: u64,
    /// Each measured value minus the forecast made before it (when `keep_errors`).
    errors: Vec<f64>,
}

impl ProbedSeries {
    pub fn new(config: Config) -> Result<Self, ForecastError> {
        config.bounds.check()?;
        if config
            .period_ms
            .is_some_and(|p| !(p.is_finite() && p > 0.0))
        {
            return Err(ForecastError::Invalid(
                "the period must be a positive number of ms".into(),
            ));
        }
        let (mode, bounds) = (config.mode, config.bounds.series_bounds());
        let (values, durations) = match config.kind {
            Kind::Duration => (Series::new(mode, bounds), None),
            Kind::Rate => (
                Series::without_timeouts(mode),
                Some(Series::new(mode, bounds)),
            ),
            Kind::Statistic => (Series::without_timeouts(mode), None),
        };
        Ok(Self {
            config,
            values,
            durations,
            seq: 0,
            timeouts: 0,
            errors: Vec::new(),
        })
    }

    pub fn metric(&self) -> Metric {
        self.config.metric
    }

    /// The values' series: their bank, forecasters' table and error summaries.
    pub fn values(&self) -> &Series {
        &self.values
    }

    /// Sets the period written to the next records (the page's period control).
    pub fn set_period_ms(&mut self, period_ms: Option<f64>) -> Result<(), ForecastError> {
        if period_ms.is_some_and(|p| !(p.is_finite() && p > 0.0)) {
            return Err(ForecastError::Invalid(
                "the period must be a positive number of ms".into(),
            ));
        }
        self.config.period_ms = period_ms;
        Ok(())
    }

    /// The series the timeout learns from: the durations.
    fn timing(&self) -> Option<&Series> {
        match self.config.kind {
            Kind::Duration => Some(&self.values),
            Kind::Rate => self.durations.as_ref(),
            Kind::Statistic => None,
        }
    }

    /// The timeout of the next probe, in ms; `None` for a statistic, which has none of its
    /// own. [`TIMEOUT_RULE`] within the bounds (with the rules' cold start), or the initial
    /// timeout before any duration is known.
    pub fn timeout_ms(&self) -> Option<f64> {
        let timing = self.timing()?;
        Some(
            timing
                .timeout_by(TIMEOUT_RULE)
                .unwrap_or(self.config.bounds.initial()),
        )
    }

    /// The forecast of the next value: MSE-selected, as JavaNws reports it, with its error
    /// as the root of the whole-history MSE.
    pub fn next(&self) -> Option<RecordForecast> {
        let f = self.values.forecast()?;
        Some(RecordForecast {
            value: f.mse.value,
            method: self.values.bank().method(f.mse.method).0.to_string(),
            selector: Selector::Mse,
            error: f.mse.error.max(0.0).sqrt(),
        })
    }

    pub fn state(&self) -> State {
        let acc = self.values.bank().mse_accum();
        State {
            next: self.next(),
            mae: (acc.n > 0).then(|| acc.mae()),
            share: self.values.bank().mse_share(),
            count: self.values.bank().len(),
            timeouts: self.timeouts,
            seq: self.seq,
        }
    }

    /// Each measured value minus the forecast made before it, oldest first (empty unless the
    /// config keeps them).
    pub fn errors(&self) -> &[f64] {
        &self.errors
    }

    /// Feeds one probe and returns its record, which carries the forecast made before it.
    pub fn observe(&mut self, obs: Observation) -> Record {
        let forecast = self.next();
        let timeout_before = self.timeout_ms();
        let timeout_ms = obs.timeout_ms.filter(|t| t.is_finite() && *t > 0.0);
        let mut probe = obs.probe;
        let payload = probe.as_ref().and_then(|p| p.payload_bytes);
        let outcome = match obs.outcome {
            Outcome::Measured {
                duration_ms: Some(d),
                ..
            } if timeout_ms.is_some_and(|t| d > t) => Outcome::TimedOut { elapsed_ms: d },
            other => other,
        };
        let (status, value, error, raw_ms) = match outcome {
            Outcome::Measured { value, duration_ms } => match self.measured(value, duration_ms) {
                Ok(()) => {
                    if let (true, Some(f)) = (self.config.keep_errors, &forecast) {
                        self.errors.push(value - f.value);
                    }
                    // A rate's duration is fed to its own series: the record keeps it so
                    // that a replay feeds the same.
                    let raw = duration_ms.filter(|_| self.config.kind == Kind::Rate);
                    (Status::Ok, Some(value), None, raw)
                }
                Err(e) => (
                    Status::Error,
                    None,
                    Some(format!("unusable value: {e}")),
                    None,
                ),
            },
            Outcome::TimedOut { elapsed_ms } => {
                self.timed_out(elapsed_ms, payload);
                (Status::Timeout, None, None, Some(elapsed_ms))
            }
            Outcome::Failed { error } => (Status::Error, None, Some(error), None),
        };
        if let Some(raw) = raw_ms.filter(|r| r.is_finite()) {
            probe.get_or_insert_with(Probe::default).raw_ms = Some(raw);
        }
        let seq = obs.seq.unwrap_or(self.seq);
        self.seq = seq.saturating_add(1);
        let timeout_ms = match status {
            // The schema asks for the timeout of a timed-out probe: the one in force, else
            // the series' own, else the time it ran.
            Status::Timeout => timeout_ms
                .or(timeout_before)
                .or(raw_ms.filter(|r| r.is_finite() && *r > 0.0)),
            _ => timeout_ms,
        };
        let c = &self.config;
        Record {
            status,
            value,
            from: obs.from.or_else(|| c.from.clone()),
            seq: Some(seq),
            period_ms: c.period_ms,
            timeout_ms,
            error,
            probe,
            forecast,
            ..Record::new(obs.timestamp_ms, &c.source, c.metric, 0.0, &c.to)
        }
    }

    fn measured(&mut self, value: f64, duration_ms: Option<f64>) -> Result<(), ForecastError> {
        self.values.observe(value)?;
        if let (Some(d), Some(durations)) = (duration_ms, &mut self.durations) {
            // A duration the bank refuses (not finite) teaches the timeout nothing.
            let _ = durations.observe(d);
        }
        Ok(())
    }

    /// A timed-out probe, fed back (never dropped): elapsed + penalty to the durations and,
    /// for a rate, the rate its payload would at most have reached in that time.
    fn timed_out(&mut self, elapsed_ms: f64, payload_bytes: Option<u64>) {
        self.timeouts += 1;
        match self.config.kind {
            Kind::Duration => {
                let _ = self.values.timed_out(elapsed_ms);
            }
            Kind::Rate => {
                let durations = self.durations.as_mut().expect("a rate keeps its durations");
                if let (Ok(fed_ms), Some(bytes)) = (durations.timed_out(elapsed_ms), payload_bytes)
                {
                    if fed_ms > 0.0 {
                        // bytes·8 bits / (fed_ms·1000) µs = Mbit/s.
                        let _ = self.values.observe(bytes as f64 * 8.0 / (fed_ms * 1e3));
                    }
                }
            }
            Kind::Statistic => {}
        }
    }

    /// Feeds a saved record through [`ProbedSeries::observe`], exactly as the probe that
    /// wrote it was fed, and returns the record written again.
    pub fn replay_one(&mut self, r: &Record) -> Result<Record, String> {
        if r.metric != self.config.metric {
            return Err(format!(
                "metric {:?} does not belong to this {:?} series",
                r.metric, self.config.metric
            ));
        }
        Ok(self.observe(Observation::of_record(r)))
    }

    /// Rebuilds the series from its saved records, oldest first.
    pub fn replay<'a>(
        &mut self,
        records: impl IntoIterator<Item = &'a Record>,
    ) -> Result<usize, ReplayError> {
        let mut n = 0;
        for (index, r) in records.into_iter().enumerate() {
            self.replay_one(r)
                .map_err(|message| ReplayError { index, message })?;
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state;

    fn rtt() -> ProbedSeries {
        let mut c = Config::new(Metric::Rtt, Some(Transport::Tcp), "nowcast tcp", "h:1");
        c.keep_errors = true;
        c.period_ms = Some(1000.0);
        ProbedSeries::new(c).unwrap()
    }

    fn bulk() -> ProbedSeries {
        let mut c = Config::new(Metric::BandwidthUp, None, "browser", "h");
        c.keep_errors = true;
        ProbedSeries::new(c).unwrap()
    }

    fn measured(t: f64, value: f64, duration: Option<f64>, timeout: Option<f64>) -> Observation {
        Observation::new(
            t,
            Outcome::Measured {
                value,
                duration_ms: duration,
            },
            timeout,
        )
    }

    #[test]
    fn the_profiles_table_gives_each_metric_its_kind_and_bounds() {
        let rows = [
            (
                Metric::Rtt,
                Some(Transport::Websocket),
                Kind::Duration,
                1_000.0,
                3_000.0,
            ),
            (
                Metric::Rtt,
                Some(Transport::Udp),
                Kind::Duration,
                100.0,
                1_000.0,
            ),
            (
                Metric::HandshakeRtt,
                Some(Transport::Tcp),
                Kind::Duration,
                1_000.0,
                3_000.0,
            ),
            (Metric::BandwidthDown, None, Kind::Rate, 3_000.0, 15_000.0),
            (
                Metric::Loss,
                Some(Transport::Udp),
                Kind::Statistic,
                1_000.0,
                3_000.0,
            ),
        ];
        for (m, t, kind, floor, initial) in rows {
            let p = profile(m, t);
            assert_eq!(
                (p.kind, p.bounds.floor_ms, p.bounds.initial_ms),
                (kind, floor, initial),
                "{m:?} {t:?}"
            );
        }
        let c = Config::new(Metric::Rtt, None, "s", "t").with(&Overrides {
            floor_ms: Some(5.0),
            initial_ms: Some(7.0),
            ..Overrides::default()
        });
        assert_eq!((c.bounds.floor_ms, c.bounds.initial_ms), (5.0, 7.0));
        assert_eq!(c.bounds.ceiling_ms, 10_000.0);
        let mut bad = c.clone();
        bad.bounds.ceiling_ms = 1.0;
        assert!(ProbedSeries::new(bad).is_err());
    }

    #[test]
    fn the_cold_start_is_three_times_the_largest_until_the_spread_is_known() {
        use crate::timeout::{COLD_FACTOR, MIN_ERRORS};
        let mut s = rtt();
        assert_eq!(
            s.timeout_ms(),
            Some(3_000.0),
            "no data: the initial timeout"
        );
        // A duration far above the initial: 3 × it, within the ceiling.
        let mut slow = rtt();
        slow.observe(measured(0.0, 2_000.0, Some(2_000.0), Some(10_000.0)));
        assert_eq!(slow.timeout_ms(), Some(COLD_FACTOR * 2_000.0));
        // Fast durations: 3 × the largest, held up by the floor, until the spread is known;
        // a timeout is never the last duration itself (the bug of a second probe timed out
        // at exactly the first one's duration).
        for i in 0..MIN_ERRORS {
            s.observe(measured(i as f64, 400.0 + i as f64, Some(400.0), None));
            let t = s.timeout_ms().unwrap();
            assert!(t >= COLD_FACTOR * 400.0, "after {} values: {t}", i + 1);
        }
        s.observe(measured(9.0, 405.0, Some(400.0), None));
        assert_eq!(s.timeout_ms(), Some(1_000.0), "the floor, once learned");
    }

    #[test]
    fn records_carry_the_forecast_before_the_value_the_period_and_their_number() {
        let mut s = rtt();
        let first = s.observe(measured(1.0, 10.0, Some(10.0), Some(3_000.0)));
        assert!(first.forecast.is_none());
        assert_eq!((first.seq, first.period_ms), (Some(0), Some(1000.0)));
        first.validate().unwrap();
        let second = s.observe(measured(2.0, 12.0, Some(12.0), Some(3_000.0)));
        let f = second.forecast.as_ref().unwrap();
        assert_eq!((f.value, f.selector, f.error), (10.0, Selector::Mse, 0.0));
        assert_eq!(second.seq, Some(1));
        assert_eq!(s.errors(), [2.0]);
        assert_eq!(Record::parse(&second.to_line()).unwrap(), second);
        let st = s.state();
        assert_eq!((st.count, st.timeouts, st.seq), (2, 0, 2));
        assert_eq!(st.mae, Some(2.0));
    }

    #[test]
    fn the_state_says_what_share_of_the_forecast_its_method_has_in_improved_mode() {
        let mut improved = rtt();
        let mut c = Config::new(Metric::Rtt, Some(Transport::Tcp), "nowcast tcp", "h:1");
        c.mode = Mode::Faithful;
        let mut faithful = ProbedSeries::new(c).unwrap();
        for i in 0..200 {
            let x = 10.0 + (i % 7) as f64;
            improved.observe(measured(i as f64, x, Some(x), None));
            faithful.observe(measured(i as f64, x, Some(x), None));
        }
        let share = improved
            .state()
            .share
            .expect("improved mode combines forecasters");
        assert!(share > 0.0 && share <= 1.0 + 1e-9, "{share}");
        assert_eq!(
            faithful.state().share,
            None,
            "one forecaster is the whole forecast"
        );
        // Not in the JSON when absent (the page reads it as optional).
        assert!(!serde_json::to_string(&faithful.state())
            .unwrap()
            .contains("share"));
    }

    #[test]
    fn a_timeout_feeds_elapsed_plus_penalty_and_a_rate_what_the_payload_reached_at_most() {
        let mut s = rtt();
        s.observe(measured(0.0, 5.0, Some(5.0), None));
        let r = s.observe(Observation::new(
            1.0,
            Outcome::TimedOut {
                elapsed_ms: 3_000.0,
            },
            Some(3_000.0),
        ));
        assert_eq!(
            (r.status, r.value, r.timeout_ms),
            (Status::Timeout, None, Some(3_000.0))
        );
        assert_eq!(r.probe.as_ref().unwrap().raw_ms, Some(3_000.0));
        r.validate().unwrap();
        assert_eq!(s.values().bank().len(), 2, "fed back, not dropped");
        assert!(s.next().unwrap().value > 5.0);
        assert_eq!(s.state().timeouts, 1);

        let mut b = bulk();
        b.observe(measured(0.0, 800.0, Some(20_000.0), Some(60_000.0)));
        let mut o = Observation::new(
            1.0,
            Outcome::TimedOut {
                elapsed_ms: 60_000.0,
            },
            Some(60_000.0),
        );
        o.probe = Some(Probe {
            payload_bytes: Some(1_250_000),
            ..Probe::default()
        });
        b.observe(o);
        // 1.25 MB in 60 s + the 5 s penalty: 10 Mbit / 65 s.
        let fed = b.values().bank().primary_forecast(0).unwrap();
        assert!((fed - 1.25e6 * 8.0 / 65e6).abs() < 1e-12, "{fed}");
        assert_eq!(b.values().bank().len(), 2);
    }

    #[test]
    fn a_probe_that_overran_its_timeout_counts_as_a_timeout() {
        let mut s = bulk();
        let r = s.observe(measured(0.0, 50.0, Some(16_000.0), Some(15_000.0)));
        assert_eq!((r.status, r.value), (Status::Timeout, None));
        assert_eq!(r.probe.unwrap().raw_ms, Some(16_000.0));
        assert_eq!(s.state().timeouts, 1);
    }

    #[test]
    fn failures_are_recorded_and_feed_nothing_and_statistics_have_no_timeout() {
        let mut s = rtt();
        let r = s.observe(Observation::new(
            0.0,
            Outcome::Failed {
                error: "h:1: connect: refused".into(),
            },
            Some(3_000.0),
        ));
        assert_eq!(
            (r.status, r.error.as_deref()),
            (Status::Error, Some("h:1: connect: refused"))
        );
        assert_eq!(s.values().bank().len(), 0);
        let r = s.observe(measured(0.0, 1e200, Some(1.0), None));
        assert_eq!(
            r.status,
            Status::Error,
            "a value the bank refuses is an error"
        );
        let loss = ProbedSeries::new(Config::new(Metric::Loss, None, "s", "t")).unwrap();
        assert_eq!(loss.timeout_ms(), None);
    }

    /// A history with everything a live series meets: values, timeouts, an overrun, a
    /// failure, a refused value.
    fn history(s: &mut ProbedSeries) -> Vec<Record> {
        let mut out = Vec::new();
        for i in 0..60u64 {
            let t = 1.7e12 + i as f64 * 1000.0;
            let timeout = s.timeout_ms();
            let duration = 100.0 + (i * 37 % 23) as f64 * 7.5;
            let mut o = match i % 13 {
                5 => Observation::new(
                    t,
                    Outcome::TimedOut {
                        elapsed_ms: timeout.unwrap() + 0.25,
                    },
                    timeout,
                ),
                7 => measured(t, 9.0, Some(timeout.unwrap() * 2.0), timeout),
                9 => Observation::new(
                    t,
                    Outcome::Failed {
                        error: "reset".into(),
                    },
                    timeout,
                ),
                _ => measured(
                    t,
                    8e3 / duration * (1.0 + i as f64 / 100.0),
                    Some(duration),
                    timeout,
                ),
            };
            o.probe = Some(Probe {
                transport: Some(Transport::Websocket),
                payload_bytes: Some(65_536),
                ..Probe::default()
            });
            out.push(s.observe(o));
        }
        out
    }

    #[test]
    fn replaying_saved_records_rebuilds_the_same_series_bit_for_bit() {
        for make in [rtt as fn() -> ProbedSeries, bulk] {
            let mut live = make();
            let saved: Vec<Record> = history(&mut live)
                .iter()
                .map(|r| Record::parse(&r.to_line()).unwrap())
                .collect();
            let mut back = make();
            let again: Vec<Record> = saved.iter().map(|r| back.replay_one(r).unwrap()).collect();
            assert_eq!(again, saved, "the replay writes the same records");
            assert_eq!(back.state(), live.state());
            assert_eq!(
                back.timeout_ms().map(f64::to_bits),
                live.timeout_ms().map(f64::to_bits)
            );
            assert_eq!(state::save(back.values()), state::save(live.values()));
            assert_eq!(
                back.durations.as_ref().map(state::save),
                live.durations.as_ref().map(state::save)
            );
            let bits =
                |s: &ProbedSeries| s.errors().iter().map(|e| e.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&back), bits(&live));
            // And both go on alike.
            let o = measured(2e12, 70.0, Some(110.0), back.timeout_ms());
            assert_eq!(back.observe(o.clone()), live.observe(o));
        }
    }

    #[test]
    fn records_of_another_metric_are_refused_with_their_index() {
        let mut s = rtt();
        let r = Record::new(0.0, "x", Metric::Jitter, 1.0, "h");
        let e = s.replay([&r]).unwrap_err();
        assert_eq!(e.index, 0);
    }
}
