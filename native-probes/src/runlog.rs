//! The run log: one row per slot of a job's schedule that ran, failed, was killed, skipped
//! or missed, with the reason, so that no run is ever silently absent (IEPM-BW §II.A logs
//! every probe's output with a time stamp; §III.A: runs that time out must be seen). Rows
//! are archived next to the records, and a restarted campaign reads them back to continue
//! its schedule ([`Resume`]).
//!
//! Deterministic core, plain data. A campaign writes it
//! ([`Plan::records_for_run`](crate::campaign::plan::Plan::records_for_run) gives the records
//! that stand for a run that measured nothing), the archive keeps it and reports read it: it
//! stands below all three.

use crate::when::Ms;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How a slot ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The run gave its measurements (some may be timeouts of single probes).
    Ok,
    /// The run ended without a measurement; the reason says why.
    Failed,
    /// The run overran its bound and was killed.
    Killed,
    /// The run was not started because its target's sanity check failed.
    Skipped,
    /// The slot passed without a run (the campaign was not running, the link or the
    /// target stayed busy, the campaign stopped).
    Missed,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Ok,
        Outcome::Failed,
        Outcome::Killed,
        Outcome::Skipped,
        Outcome::Missed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Killed => "killed",
            Outcome::Skipped => "skipped",
            Outcome::Missed => "missed",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Whether a run was started (and counts towards `max_runs`).
    pub fn started(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Failed | Outcome::Killed)
    }
}

/// One row of the run log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunLog {
    /// Unique within the campaign's archive, increasing.
    pub id: u64,
    pub campaign: String,
    /// `target/probe`.
    pub job: String,
    pub target: String,
    pub probe: String,
    /// The slot's time on the schedule (for a row covering several missed slots, the
    /// last of them).
    pub nominal_ms: Ms,
    /// When it was due: the nominal time plus its slip.
    pub due_ms: Ms,
    pub started_ms: Option<Ms>,
    pub ended_ms: Ms,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Slots this row stands for (more than one only for missed slots).
    pub slots: u64,
    /// A sanity check run made for a gated run, outside the check's own schedule.
    #[serde(default)]
    pub gate_check: bool,
}

impl RunLog {
    /// The `error` of the records that stand for this run when it measured nothing
    /// ([`Plan::records_for_run`](crate::campaign::plan::Plan::records_for_run)): the probe,
    /// the outcome and the reason, at most 1,000 characters. None for a run that gave its
    /// own records (ok or failed).
    pub fn stand_in_error(&self) -> Option<String> {
        if matches!(self.outcome, Outcome::Ok | Outcome::Failed) {
            return None;
        }
        let reason = format!(
            "{} {}: {}",
            self.probe,
            self.outcome.name(),
            self.reason.as_deref().unwrap_or("no reason given")
        );
        Some(reason.chars().take(1000).collect())
    }

    /// The time of the records that stand for this run: when it started, else when it was due.
    pub fn stand_in_time_ms(&self) -> f64 {
        self.started_ms.unwrap_or(self.due_ms) as f64
    }
}

/// The last result of a sanity check.
#[derive(Clone, Debug, PartialEq)]
pub struct GateResult {
    pub ok: bool,
    pub at_ms: Ms,
    pub reason: Option<String>,
}

/// What a job did before this process started, from the archive's run log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobHistory {
    /// The latest slot logged (not counting sanity checks outside the schedule).
    pub last_nominal_ms: Option<Ms>,
    /// Runs started so far.
    pub runs: u64,
    /// The latest sanity check result, for a gate job.
    pub gate: Option<GateResult>,
}

/// Where a restarted campaign takes up its schedule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resume {
    /// By job key.
    pub jobs: HashMap<String, JobHistory>,
    /// The next run id.
    pub next_id: u64,
}

impl Resume {
    /// Folds run log rows (in any order) into a resume point.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = &'a RunLog>) -> Resume {
        let mut r = Resume::default();
        for row in rows {
            r.next_id = r.next_id.max(row.id + 1);
            let h = r.jobs.entry(row.job.clone()).or_default();
            if !row.gate_check {
                h.last_nominal_ms = Some(
                    h.last_nominal_ms
                        .map_or(row.nominal_ms, |n| n.max(row.nominal_ms)),
                );
                if row.outcome.started() {
                    h.runs += 1;
                }
            }
            if row.outcome.started() && h.gate.as_ref().is_none_or(|g| g.at_ms <= row.ended_ms) {
                h.gate = Some(GateResult {
                    ok: row.outcome == Outcome::Ok,
                    at_ms: row.ended_ms,
                    reason: row.reason.clone(),
                });
            }
        }
        r
    }
}
