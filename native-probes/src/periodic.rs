//! The loop of a periodic probe command (edge): it asks the [`Schedule`] what to do, sleeps
//! until then (a signal cuts the sleep short), runs each experiment, hands its results to
//! the [`RecordSink`] and names failed probes on standard error.

use crate::clock::Clock;
use crate::output::{heading, is_broken_pipe, number, Experiment, RecordSink};
use crate::schedule::{Next, Schedule};
use crate::series::SeriesStats;
use crate::stop::Stop;
use anyhow::{bail, Result};
use nowcast_core::record::{Record, Status};
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
    pub next: Vec<Option<f64>>,
    pub extra: Vec<String>,
    pub notes: Vec<String>,
}

/// Runs `one(index)` per the plan and writes what it returns. Fails when no probe of any
/// experiment succeeded (the records have said why), or when the sink cannot write.
pub fn run(
    plan: &Plan,
    clock: &Clock,
    stop: &Stop,
    sink: &mut dyn RecordSink,
    mut one: impl FnMut(u64) -> Report,
) -> Result<()> {
    let period = u64::try_from(plan.period.as_nanos()).unwrap_or(u64::MAX);
    let mut schedule = Schedule::new(clock.now(), period, plan.count);
    let mut ok = 0u64;
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
                ok += r.records.iter().filter(|r| r.status == Status::Ok).count() as u64;
                sink.experiment(&Experiment {
                    index,
                    timestamp_ms: r.timestamp_ms,
                    records: &r.records,
                    next: r.next,
                    extra: r.extra,
                    notes: r.notes,
                })?;
                problems(&r.records);
            }
        }
    }
    if ok == 0 && schedule.ran() > 0 {
        bail!("no probe succeeded");
    }
    Ok(())
}

/// Names each failed or timed-out probe on standard error.
fn problems(records: &[Record]) {
    for r in records {
        match (r.status, &r.error) {
            (Status::Error, Some(e)) => eprintln!("nowcast: {e}"),
            (Status::Timeout, _) => eprintln!(
                "nowcast: {}: {} timed out after {} ms",
                r.to,
                heading(r.metric),
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
