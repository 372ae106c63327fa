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
use nowcast_core::record::{Metric, Probe, Record};

/// The series one job keeps across its runs (forecasts and adaptive timeouts, as the
/// `nowcast tcp` command keeps them), for `kind` on `target`.
pub fn series(kind: &Kind, target: &Target, period_ms: Option<f64>) -> SeriesSet {
    let settings = Settings {
        source: kind.source(),
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
    match kind {
        Kind::Tcp(p) => tcp::run(p, target, bound_ms, set, index),
        Kind::Udp(p) => udp::run(p, target, bound_ms, set, index),
        Kind::Http(p) => http::run(p, target, bound_ms, set),
        Kind::Iperf3(p) => iperf3::run(p, target, bound_ms, set, cancel),
        Kind::Ping(p) => ping::run(p, target, bound_ms, set, cancel),
        Kind::Fobs(p) => fobs::run(p, target, bound_ms, set, index),
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
