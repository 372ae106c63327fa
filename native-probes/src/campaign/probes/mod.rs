//! One module per probe type, each running one run of its [`Kind`] and giving its records.
//! The project's own probes call the library ([`tcp`], [`udp`]); [`http`] times a
//! download; [`iperf3`] and [`ping`] run the external tools in a process group of their own
//! (so that a kill reaches everything they started) and parse their output; [`fobs`] is a
//! FOBS transfer through the library. A new probe type is one variant of [`Kind`] and one
//! module here.

pub mod external;
pub mod fobs;
pub mod http;
pub mod iperf3;
pub mod ping;
pub mod tcp;
pub mod udp;

use super::plan::{Kind, Target};
use crate::series::{SeriesSet, Settings};
use crate::when::Ms;
use external::Cancel;
use nowcast_core::probed::{Observation, Outcome, Overrides};
use nowcast_core::record::{Metric, Probe, Record, Status};

/// The series one job keeps across its runs (forecasts and adaptive timeouts, as the
/// `nowcast tcp` command keeps them), for `kind` on `target`, its records' `source` the
/// job's (`Plan::source`).
pub fn series(kind: &Kind, target: &Target, period_ms: Option<f64>, source: String) -> SeriesSet {
    let settings = Settings {
        source,
        to: target.record_to(kind),
        transport: kind
            .transport()
            .unwrap_or(nowcast_core::record::Transport::Tcp),
        period_ms,
        overrides: Overrides::default(),
    };
    SeriesSet::new(&kind.metrics(), &settings).expect("the core's default bounds are valid")
}

/// Runs one run of `kind` on `target` within `bound_ms`; `index` numbers the job's runs.
pub fn run(
    kind: &Kind,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    index: u64,
    cancel: &Cancel,
) -> Vec<Record> {
    let mut records = match kind {
        Kind::Tcp(p) => tcp::run(p, target, bound_ms, set, index),
        Kind::Udp(p) => udp::run(p, target, bound_ms, set, index),
        Kind::Http(p) => http::run(p, target, bound_ms, set),
        Kind::Iperf3(p) => iperf3::run(p, target, bound_ms, set, cancel),
        Kind::Ping(p) => ping::run(p, target, bound_ms, set, cancel),
        Kind::Fobs(p) => fobs::run(p, target, bound_ms, set, index),
    };
    fill_missing(kind, set, &mut records);
    records
}

/// Gives every series of the probe a record of the run, so that none is ever silently
/// absent: a metric the run gave no record of (a UDP burst's jitter, which needs two
/// replies; the loss and jitter of a burst whose name did not resolve) gets an error record
/// saying why, fed to its series as every failure is.
fn fill_missing(kind: &Kind, set: &mut SeriesSet, records: &mut Vec<Record>) {
    let missing: Vec<Metric> = kind
        .metrics()
        .into_iter()
        // A FOBS transfer's congestion events are `loss` records besides the series'.
        .filter(|&m| {
            !records
                .iter()
                .any(|r| r.metric == m && r.congestion.is_none())
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let first = records.first().cloned();
    let run_error = records.iter().find_map(|r| r.error.clone());
    for m in missing {
        let error = match &run_error {
            Some(e) => e.clone(),
            None => why_missing(kind, m, records),
        };
        let o = Observation {
            probe: first.as_ref().and_then(|r| r.probe.clone()),
            from: first.as_ref().and_then(|r| r.from.clone()),
            ..Observation::new(
                first
                    .as_ref()
                    .map_or_else(crate::clock::wall_ms, |r| r.timestamp_ms),
                Outcome::Failed { error },
                None,
            )
        };
        records.push(set.observe(m, o));
    }
}

/// Why a run that failed nowhere else gave no record of `m`.
fn why_missing(kind: &Kind, m: Metric, records: &[Record]) -> String {
    if records.is_empty() {
        return "the probe gave no record".into();
    }
    match (kind, m) {
        (Kind::Udp(p), Metric::Jitter) => {
            let loss = records
                .iter()
                .find(|r| r.metric == Metric::Loss)
                .and_then(|r| r.value);
            match loss {
                Some(loss) => format!(
                    "no jitter: {} of {} probes answered, and jitter needs two replies",
                    (p.probes as f64 * (1.0 - loss)).round() as u64,
                    p.probes
                ),
                None => "no jitter: fewer than two probes answered".into(),
            }
        }
        (Kind::Ping(_), Metric::Jitter) => {
            "no jitter: fewer than two pings answered (ping gave no mdev)".into()
        }
        _ => match records.iter().find(|r| r.status == Status::Timeout) {
            Some(t) => format!("no {}: its run's {} timed out", m.name(), t.metric.name()),
            None => format!("the probe gave no {} value", m.name()),
        },
    }
}

/// Feeds what a run measured to its series; a run that failed as a whole gives one failed
/// record per metric.
pub fn observe(
    set: &mut SeriesSet,
    metrics: &[Metric],
    timestamp_ms: f64,
    bound_ms: Ms,
    probe: Probe,
    result: Result<Vec<(Metric, Outcome)>, String>,
) -> Vec<Record> {
    let outcomes = match result {
        Ok(o) => o,
        Err(error) => metrics
            .iter()
            .map(|&m| {
                (
                    m,
                    Outcome::Failed {
                        error: error.clone(),
                    },
                )
            })
            .collect(),
    };
    outcomes
        .into_iter()
        .map(|(m, outcome)| {
            let o = Observation {
                probe: Some(probe.clone()),
                ..Observation::new(timestamp_ms, outcome, Some(bound_ms as f64))
            };
            set.observe(m, o)
        })
        .collect()
}
