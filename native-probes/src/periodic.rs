//! The loop of a periodic probe command (edge): it asks the [`Schedule`] what to do, sleeps
//! until then (a signal cuts the sleep short), runs each experiment, hands its results to
//! the [`RecordSink`] and names failed probes on standard error (or says what the
//! experiment gives in their place, [`Report::said`]). A run in which some series
//! measured nothing (every probe of it timed out or failed, as with 100 % UDP loss or a
//! server that is down) ends in [`Unmeasured`], which the command turns into exit status 1,
//! as ping does when no reply came.

use crate::clock::Clock;
use crate::output::{is_broken_pipe, number, Experiment, RecordSink, Summary};
use crate::schedule::{Next, Schedule};
use crate::series::SeriesStats;
use crate::stop::Stop;
use anyhow::Result;
use nowcast_core::record::{Metric, Record, RecordForecast, Status};
use std::fmt;
use std::time::Duration;

/// When experiments run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// From the start of one experiment to the start of the next.
    pub period: Duration,
    /// How many (`None`: until SIGINT or SIGTERM).
    pub count: Option<u64>,
}

/// What one experiment gives the sink (see [`Experiment`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub timestamp_ms: f64,
    pub records: Vec<Record>,
    /// The forecast of each series' next value, in the order of the heading's metrics.
    pub next: Vec<Option<RecordForecast>>,
    pub extra: Vec<String>,
    pub notes: Vec<String>,
    /// What standard error gets for this experiment in place of a line per failed record
    /// (`nowcast tcp`: one line for a session that failed, naming the steps not tried);
    /// `None`: a line per failed record.
    pub said: Option<Vec<String>>,
    /// No experiment follows this one (the command found it cannot go on).
    pub last: bool,
}

/// Series that were probed and measured nothing: each with its probes, timeouts and errors.
#[derive(Clone, Debug, PartialEq)]
pub struct Unmeasured(pub Vec<(Metric, u64, u64, u64)>);

impl fmt::Display for Unmeasured {
    /// One clause per run of series that failed alike: a session refused at connect says
    /// `no handshake_rtt, rtt or bandwidth_up measured: all 3 probes of each failed or were not
    /// tried`, not the
    /// same clause once per series.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = &self.0[..];
        let mut first = true;
        while let Some(&(_, sent, timeouts, errors)) = rest.first() {
            let alike = rest
                .iter()
                .take_while(|s| (s.1, s.2, s.3) == (sent, timeouts, errors))
                .count();
            let (group, after) = rest.split_at(alike);
            rest = after;
            if !first {
                write!(f, "; ")?;
            }
            first = false;
            // An error record stands for a probe that failed or for one not tried after an
            // earlier step failed (`nowcast tcp` after a failed connect names those "not
            // tried" just before): the closing line must not say they all failed.
            let (one, many) = match (timeouts, errors) {
                (0, _) => (
                    "failed or was not tried".to_string(),
                    "failed or were not tried".to_string(),
                ),
                (_, 0) => ("timed out".to_string(), "timed out".to_string()),
                (t, e) => {
                    let s = format!("failed ({t} timed out, {e} errors or not tried)");
                    (s.clone(), s)
                }
            };
            write!(f, "no ")?;
            for (i, (metric, ..)) in group.iter().enumerate() {
                match i {
                    0 => write!(f, "{metric}")?,
                    i if i + 1 == group.len() => write!(f, " or {metric}")?,
                    _ => write!(f, ", {metric}")?,
                }
            }
            let each = if group.len() > 1 { " of each" } else { "" };
            match sent {
                1 if group.len() > 1 => write!(f, " measured: the probe of each {one}")?,
                1 => write!(f, " measured: its probe {one}")?,
                n => write!(f, " measured: all {n} probes{each} {many}")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for Unmeasured {}

/// Runs `one(index)` per the plan and writes what it returns. Fails with [`Unmeasured`] when
/// a series probed got no value at all (the records have said why), or when the sink cannot
/// write.
pub fn run(
    plan: &Plan,
    clock: &Clock,
    stop: &Stop,
    sink: &mut dyn RecordSink,
    mut one: impl FnMut(u64) -> Report,
) -> Result<()> {
    let period = u64::try_from(plan.period.as_nanos()).unwrap_or(u64::MAX);
    let mut schedule = Schedule::new(clock.now(), period, plan.count);
    // Every metric a record names, in the order first seen.
    let mut summary = Summary::default();
    loop {
        if stop.is_set() {
            schedule.stop();
        }
        match schedule.next(clock.now()) {
            Next::Finished => break,
            Next::Wait { until } => {
                let left = Duration::from_nanos(until.saturating_sub(clock.now()));
                if stop.wait_timeout(left) {
                    schedule.stop();
                }
            }
            Next::Run { index } => {
                schedule.started(clock.now());
                let r = one(index);
                let e = Experiment {
                    index,
                    timestamp_ms: r.timestamp_ms,
                    records: &r.records,
                    next: r.next,
                    extra: r.extra,
                    notes: r.notes,
                };
                summary.experiment(&e);
                sink.experiment(&e)?;
                match r.said {
                    Some(lines) => lines.iter().for_each(|l| crate::warn_line!("nowcast: {l}")),
                    None => problems(&r.records),
                }
                if r.last {
                    schedule.stop();
                }
            }
        }
    }
    let unmeasured = summary.unmeasured();
    if !unmeasured.is_empty() {
        return Err(Unmeasured(
            unmeasured
                .iter()
                .map(|t| (t.metric, t.sent, t.timeouts, t.errors))
                .collect(),
        )
        .into());
    }
    Ok(())
}

/// Names each failed or timed-out probe on standard error.
fn problems(records: &[Record]) {
    for r in records {
        match (r.status, &r.error) {
            (Status::Error, Some(e)) => crate::warn_line!("nowcast: {e}"),
            (Status::Timeout, _) => crate::warn_line!(
                "nowcast: {}: {} timed out after {} ms",
                r.to,
                r.metric,
                r.timeout_ms.map(number).unwrap_or_default()
            ),
            _ => {}
        }
    }
}

/// Ends a run: the closing summary unless the reader has gone, then the run's result.
pub fn finish(result: Result<()>, sink: &mut dyn RecordSink, stats: &[SeriesStats]) -> Result<()> {
    match result {
        Err(e) if is_broken_pipe(e.as_ref()) => Err(e),
        other => {
            sink.finish(stats)?;
            other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_that_failed_alike_are_said_once() {
        let m = |metric, sent, t, e| (metric, sent, t, e);
        let u = Unmeasured(vec![
            m(Metric::HandshakeRtt, 3, 0, 3),
            m(Metric::Rtt, 3, 0, 3),
            m(Metric::BandwidthUp, 3, 0, 3),
            m(Metric::BandwidthDown, 3, 3, 0),
        ]);
        assert_eq!(
            u.to_string(),
            "no handshake_rtt, rtt or bandwidth_up measured: all 3 probes of each failed or were \
             not tried; no bandwidth_down measured: all 3 probes timed out"
        );
        let u = Unmeasured(vec![m(Metric::Rtt, 1, 0, 1), m(Metric::Loss, 1, 0, 1)]);
        assert_eq!(
            u.to_string(),
            "no rtt or loss measured: the probe of each failed or was not tried"
        );
        let u = Unmeasured(vec![m(Metric::Rtt, 4, 1, 3)]);
        assert_eq!(
            u.to_string(),
            "no rtt measured: all 4 probes failed (1 timed out, 3 errors or not tried)"
        );
    }
}
