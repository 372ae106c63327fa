//! The series a probe command keeps, one per metric (JavaNws §2.1.2: a separate time series
//! for RTT, Nagle-impeded RTT and bandwidth), each the core's
//! [`nowcast_core::probed::ProbedSeries`]: the timeout rule, the cold start, the bounds, what
//! a timed-out probe feeds back and the records are all the core's, the same as the page's.
//!
//! Deterministic core: observations in, records out.

use nowcast_core::probed::{Config, Observation, Overrides, ProbedSeries};
use nowcast_core::record::{Metric, Record, RecordForecast, Transport};
use nowcast_core::ForecastError;

/// What every series of one command shares.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The records' `source`, e.g. `nowcast tcp`.
    pub source: String,
    /// The records' `to`.
    pub to: String,
    pub transport: Transport,
    /// The configured period, written to every record.
    pub period_ms: Option<f64>,
    /// Settings that replace the core's defaults for every series of the command.
    pub overrides: Overrides,
}

/// The series of one probe command, in the order declared.
#[derive(Clone, Debug)]
pub struct SeriesSet {
    series: Vec<ProbedSeries>,
}

/// Counts and errors of one series so far, for the closing summary.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesStats {
    pub metric: Metric,
    /// Values in the forecaster bank (fed-back timeouts included).
    pub measured: u64,
    pub timeouts: u64,
    /// Mean absolute error of the recorded forecasts (the MSE selector's) so far.
    pub forecast_mae: Option<f64>,
}

impl SeriesSet {
    /// A series for each of `metrics`, from the core's defaults and `settings`.
    pub fn new(metrics: &[Metric], settings: &Settings) -> Result<Self, ForecastError> {
        let series = metrics
            .iter()
            .map(|&m| {
                let mut c =
                    Config::new(m, Some(settings.transport), &settings.source, &settings.to)
                        .with(&settings.overrides);
                c.period_ms = settings.period_ms;
                ProbedSeries::new(c)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { series })
    }

    pub fn get(&self, metric: Metric) -> &ProbedSeries {
        self.series
            .iter()
            .find(|s| s.metric() == metric)
            .expect("metric is one of the set's")
    }

    /// The adaptive timeout of the next probe of `metric`, ms.
    pub fn timeout_ms(&self, metric: Metric) -> Option<f64> {
        self.get(metric).timeout_ms()
    }

    /// The forecast of the next value of `metric`.
    pub fn next(&self, metric: Metric) -> Option<RecordForecast> {
        self.get(metric).next()
    }

    /// Feeds one probe of `metric` and returns its record.
    pub fn observe(&mut self, metric: Metric, o: Observation) -> Record {
        self.series
            .iter_mut()
            .find(|s| s.metric() == metric)
            .expect("metric is one of the set's")
            .observe(o)
    }

    /// Counts and forecast errors of every series, in the order declared.
    pub fn stats(&self) -> Vec<SeriesStats> {
        self.series
            .iter()
            .map(|s| {
                let st = s.state();
                SeriesStats {
                    metric: s.metric(),
                    measured: st.count,
                    timeouts: st.timeouts,
                    forecast_mae: st.mae,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nowcast_core::probed::Outcome;
    use nowcast_core::record::Status;

    fn settings() -> Settings {
        Settings {
            source: "nowcast tcp".into(),
            to: "127.0.0.1:8060".into(),
            transport: Transport::Tcp,
            period_ms: Some(5_000.0),
            overrides: Overrides::default(),
        }
    }

    #[test]
    fn each_metric_keeps_its_own_series_with_the_cores_rules() {
        let mut set = SeriesSet::new(&[Metric::Rtt, Metric::BandwidthUp], &settings()).unwrap();
        assert_eq!(
            set.timeout_ms(Metric::Rtt),
            Some(3_000.0),
            "the initial timeout"
        );
        assert_eq!(set.timeout_ms(Metric::BandwidthUp), Some(15_000.0));
        let ok = |v, d| Outcome::Measured {
            value: v,
            duration_ms: Some(d),
        };
        let r = set.observe(Metric::Rtt, Observation::new(1.0, ok(2.0, 2.0), Some(3e3)));
        assert_eq!(
            (r.status, r.seq, r.period_ms),
            (Status::Ok, Some(0), Some(5e3))
        );
        r.validate().unwrap();
        let t = set.observe(
            Metric::Rtt,
            Observation::new(2.0, Outcome::TimedOut { elapsed_ms: 3e3 }, Some(3e3)),
        );
        assert_eq!((t.status, t.seq), (Status::Timeout, Some(1)));
        assert_eq!(t.forecast.unwrap().value, 2.0);
        let stats = set.stats();
        assert_eq!((stats[0].measured, stats[0].timeouts), (2, 1));
        assert_eq!((stats[1].measured, stats[1].forecast_mae), (0, None));
        let floor = Settings {
            overrides: Overrides {
                floor_ms: Some(50.0),
                initial_ms: Some(60.0),
                ..Overrides::default()
            },
            ..settings()
        };
        let set = SeriesSet::new(&[Metric::Rtt], &floor).unwrap();
        assert_eq!(
            set.timeout_ms(Metric::Rtt),
            Some(60.0),
            "overrides replace defaults"
        );
    }
}
