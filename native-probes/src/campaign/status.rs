//! What `nowcast campaign status` shows: for every job, what ran (counts by outcome over a
//! window), the last run and its result, the last failure and why, and when it runs next;
//! then each archive's backlog.
//!
//! Deterministic core: the plan, the run log, the next slots and the backlogs in; a table
//! or JSON out.

use super::plan::Plan;
use super::scheduler::Slot;
use crate::format::{words, wrap, WIDTH};
use crate::runlog::{Outcome, RunLog};
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
    /// Whether a process runs the campaign now (it holds the campaign's lock); `None`:
    /// not known. A campaign not running starts its due slots when it is started.
    pub running: Option<bool>,
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
        running: None,
        now_ms,
        since_ms,
        jobs,
        archives,
    }
}

/// A row of the status table: the job left-aligned, the figures right-aligned under their
/// headings, the last run and the next slot left-aligned; no spaces after the last cell.
fn row(cells: &[String; 8], widths: &[usize; 8]) -> String {
    let mut line = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        let pad = " ".repeat(w.saturating_sub(c.chars().count()));
        match i {
            0 => line.push_str(&format!("{c}{pad}")),
            1..=5 => line.push_str(&format!("  {pad}{c}")),
            _ => line.push_str(&format!("  {c}{pad}")),
        }
    }
    line.truncate(line.trim_end().len());
    line
}

/// The status as a table for people, each line at most [`WIDTH`] columns.
pub fn text(s: &Status) -> String {
    let head = format!(
        "campaign {} at {}{}: slots since {} ({} ago)",
        s.campaign,
        datetime(s.now_ms),
        match s.running {
            Some(true) => " (running)",
            Some(false) => " (not running: due slots run when it starts)",
            None => "",
        },
        datetime(s.since_ms),
        human(s.now_ms - s.since_ms)
    );
    let mut out = String::new();
    for l in wrap("", &words(&head), " ", 2) {
        out.push_str(&format!("{l}\n"));
    }
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
    let rows: Vec<[String; 8]> = s
        .jobs
        .iter()
        .map(|j| {
            let last = j
                .last
                .as_ref()
                .map(|l| format!("{} {} ago", l.outcome.name(), human(s.now_ms - l.ended_ms)))
                .unwrap_or_else(|| "-".into());
            let next = j
                .next_due_ms
                .map(|t| {
                    if t <= s.now_ms && s.running == Some(false) {
                        "at start".to_string()
                    } else if t <= s.now_ms {
                        "now".to_string()
                    } else {
                        format!("in {}", human(t - s.now_ms))
                    }
                })
                .unwrap_or_else(|| "no more".into());
            let c = j.counts.map(|n| n.to_string());
            [
                j.job.clone(),
                c[0].clone(),
                c[1].clone(),
                c[2].clone(),
                c[3].clone(),
                c[4].clone(),
                last,
                next,
            ]
        })
        .collect();
    let head = [
        "job", "ok", "failed", "killed", "skipped", "missed", "last run", "next due",
    ]
    .map(String::from);
    let mut widths = head.clone().map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    // The job column gives way to the figures: a longer name has a line of its own.
    let others: usize = widths[1..].iter().map(|w| w + 2).sum();
    widths[0] = widths[0].min(WIDTH.saturating_sub(others).max(3));
    for (i, r) in std::iter::once(&head).chain(&rows).enumerate() {
        let mut cells = r.clone();
        if i > 0 && r[0].chars().count() > widths[0] {
            out.push_str(&format!("{}\n", r[0]));
            cells[0] = String::new();
        }
        out.push_str(&format!("{}\n", row(&cells, &widths)));
    }
    let problems: Vec<&JobStatus> = s.jobs.iter().filter(|j| j.last_problem.is_some()).collect();
    if !problems.is_empty() {
        out.push_str("\nlast problem of each job:\n");
        for j in problems {
            let p = j.last_problem.as_ref().expect("filtered");
            let text = format!(
                "{} {} at {}: {}",
                j.job,
                p.outcome.name(),
                datetime(p.ended_ms),
                p.reason.as_deref().unwrap_or("no reason given")
            );
            for l in wrap("  ", &words(&text), " ", 4) {
                out.push_str(&format!("{l}\n"));
            }
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
