//! What `nowcast campaign status` shows: for every job, what ran (counts by outcome over a
//! window), the last run and its result, the last failure and why, and when it runs next;
//! then each archive's backlog.
//!
//! Deterministic core: the plan, the run log, the next slots and the backlogs in; a table
//! or JSON out.

use super::plan::Plan;
use super::runlog::{Outcome, RunLog};
use super::scheduler::Slot;
use crate::when::{datetime, human, Ms};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobStatus {
    pub job: String,
    pub probe: String,
    pub schedule: String,
    /// Slots by outcome over the window, in [`Outcome::ALL`] order.
    pub counts: [u64; 5],
    pub last: Option<RunLog>,
    /// The latest row that was not ok.
    pub last_problem: Option<RunLog>,
    pub next_due_ms: Option<Ms>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArchiveBacklog {
    pub name: String,
    pub lines: u64,
    pub oldest_ms: Option<Ms>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    pub campaign: String,
    pub now_ms: Ms,
    pub since_ms: Ms,
    pub jobs: Vec<JobStatus>,
    pub archives: Vec<ArchiveBacklog>,
}

/// Folds the run log rows since `since_ms` (oldest first) with the next slots.
pub fn build(
    plan: &Plan,
    runs: &[RunLog],
    next: &[(usize, Option<Slot>)],
    archives: Vec<ArchiveBacklog>,
    now_ms: Ms,
    since_ms: Ms,
) -> Status {
    let index: HashMap<&str, usize> = plan
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.key.as_str(), i))
        .collect();
    let mut jobs: Vec<JobStatus> = plan
        .jobs
        .iter()
        .enumerate()
        .map(|(j, job)| JobStatus {
            job: job.key.clone(),
            probe: plan.probe(j).kind.describe(),
            schedule: plan.probe(j).when.describe(),
            counts: [0; 5],
            last: None,
            last_problem: None,
            // `next` is in job order (Scheduler::next_slots); looked for when it is not.
            next_due_ms: next
                .get(j)
                .filter(|(i, _)| *i == j)
                .or_else(|| next.iter().find(|(i, _)| *i == j))
                .and_then(|(_, s)| s.map(|s| s.due_ms)),
        })
        .collect();
    for r in runs {
        let Some(&j) = index.get(r.job.as_str()) else {
            continue;
        };
        let s = &mut jobs[j];
        let o = Outcome::ALL
            .iter()
            .position(|o| *o == r.outcome)
            .unwrap_or(1);
        s.counts[o] += r.slots;
        if r.outcome != Outcome::Ok {
            s.last_problem = Some(r.clone());
        }
        s.last = Some(r.clone());
    }
    Status {
        campaign: plan.name.clone(),
        now_ms,
        since_ms,
        jobs,
        archives,
    }
}

/// The status as a table for people.
pub fn text(s: &Status) -> String {
    let mut out = format!(
        "campaign {} at {}: slots since {} ({} ago)\n",
        s.campaign,
        datetime(s.now_ms),
        datetime(s.since_ms),
        human(s.now_ms - s.since_ms)
    );
    let total = s.jobs.iter().fold([0u64; 5], |mut acc, j| {
        for (a, c) in acc.iter_mut().zip(j.counts) {
            *a += c;
        }
        acc
    });
    out.push_str(&format!(
        "total: {}\n\n",
        Outcome::ALL
            .iter()
            .zip(total)
            .map(|(o, n)| format!("{} {n}", o.name()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str(&format!(
        "{:<28} {:>6} {:>6} {:>6} {:>7} {:>6}  {:<22} {:<22}\n",
        "job", "ok", "failed", "killed", "skipped", "missed", "last run", "next due"
    ));
    for j in &s.jobs {
        let last = j
            .last
            .as_ref()
            .map(|l| format!("{} {}", l.outcome.name(), human(s.now_ms - l.ended_ms)))
            .unwrap_or_else(|| "-".into());
        let next = j
            .next_due_ms
            .map(|t| {
                if t <= s.now_ms {
                    "now".to_string()
                } else {
                    format!("in {}", human(t - s.now_ms))
                }
            })
            .unwrap_or_else(|| "no more".into());
        out.push_str(&format!(
            "{:<28} {:>6} {:>6} {:>6} {:>7} {:>6}  {:<22} {:<22}\n",
            j.job, j.counts[0], j.counts[1], j.counts[2], j.counts[3], j.counts[4], last, next
        ));
    }
    let problems: Vec<&JobStatus> = s.jobs.iter().filter(|j| j.last_problem.is_some()).collect();
    if !problems.is_empty() {
        out.push_str("\nlast problem of each job:\n");
        for j in problems {
            let p = j.last_problem.as_ref().expect("filtered");
            out.push_str(&format!(
                "  {} {} at {}: {}\n",
                j.job,
                p.outcome.name(),
                datetime(p.ended_ms),
                p.reason.as_deref().unwrap_or("no reason given")
            ));
        }
    }
    out.push('\n');
    for a in &s.archives {
        out.push_str(&format!(
            "archive {}: {} waiting in the spool{}\n",
            a.name,
            a.lines,
            a.oldest_ms
                .map(|t| format!(", the oldest {} old", human(s.now_ms - t)))
                .unwrap_or_default()
        ));
    }
    out
}
