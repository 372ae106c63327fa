//! `nowcast campaign CONFIG`, `nowcast campaign status CONFIG`, `nowcast campaign check
//! CONFIG`: the configuration read into a plan, handed to the runner, the status or the check.

use anyhow::{bail, Result};
use nowcast::archive::spool;
use nowcast::archive::sqlite::Sqlite;
use nowcast::campaign::{config, runner, scheduler::Scheduler, status};
use nowcast::stop::Stop;
use nowcast::when::{datetime, human, parse_time, Ms};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(
    after_help = "Runs the campaign in CONFIG (TOML; a commented example is \
    native-probes/examples/campaign.toml) until SIGINT or SIGTERM: each probe on each of its \
    targets on its schedule, every run killed at its bound, heavy runs skipped when the \
    target's sanity check failed, exclusive runs never overlapping on a target or the link, \
    and every run, failure, kill, skip or missed slot recorded in the archive with its reason. \
    A restart continues the schedule from the archive's run log.\n\n\
    nowcast campaign status CONFIG   what ran, what failed and why, what is next, the archive backlog\n\
    nowcast campaign check CONFIG    the jobs and their next slots, without running anything"
)]
pub struct Args {
    /// CONFIG, or `status` / `check` followed by CONFIG.
    #[arg(value_name = "CONFIG")]
    first: String,
    #[arg(hide = true)]
    second: Option<PathBuf>,
    /// With status: the window of the counts (an age such as 24h, or a time).
    #[arg(long, default_value = "24h")]
    since: String,
    /// With status or check: one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

fn now() -> Ms {
    nowcast::clock::wall_ms() as Ms
}

pub fn run(args: Args) -> Result<()> {
    match (args.first.as_str(), &args.second) {
        ("status", Some(path)) => show_status(path, &args.since, args.json),
        ("check", Some(path)) => check(path, args.json),
        (_, Some(_)) => bail!("give CONFIG alone, or status CONFIG, or check CONFIG"),
        (path, None) => {
            let c = config::read(&PathBuf::from(path))?;
            let stop = Stop::on_signals()
                .map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
            runner::run(&c, &stop, &mut std::io::stderr())?;
            Ok(())
        }
    }
}

fn show_status(path: &Path, since: &str, json: bool) -> Result<()> {
    let c = config::read(path)?;
    let now = now();
    let since = parse_time(since, now).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let (runs, resume) = if c.archive.sqlite.exists() {
        let mut db = Sqlite::open_read(&c.archive.sqlite)?;
        (
            db.runs(&c.plan.name, since)?,
            db.resume(&c.plan.name, &c.plan.resume_jobs())?,
        )
    } else {
        (Vec::new(), Default::default())
    };
    let sched = Scheduler::new(c.plan.clone(), &resume, now);
    let mut archives = vec![("sqlite".to_string(), c.archive.spool.join("sqlite"))];
    if c.archive.clickhouse.is_some() {
        archives.push(("clickhouse".to_string(), c.archive.spool.join("clickhouse")));
    }
    let archives = archives
        .into_iter()
        .map(|(name, dir)| {
            let b = spool::backlog(&dir);
            status::ArchiveBacklog {
                name,
                lines: b.lines,
                oldest_ms: b.oldest_ms,
            }
        })
        .collect();
    let s = status::build(&c.plan, &runs, &sched.next_slots(), archives, now, since);
    if json {
        writeln!(std::io::stdout().lock(), "{}", serde_json::to_string(&s)?)?;
    } else {
        print!("{}", status::text(&s));
    }
    Ok(())
}

fn check(path: &Path, json: bool) -> Result<()> {
    let c = config::read(path)?;
    let now = now();
    let sched = Scheduler::new(c.plan.clone(), &Default::default(), now);
    let next = sched.next_slots();
    if json {
        let jobs: Vec<serde_json::Value> = c
            .plan
            .jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                let p = c.plan.probe(j);
                serde_json::json!({
                    "job": job.key,
                    "kind": p.kind.name(),
                    "probe": p.kind.describe(),
                    "schedule": p.when.describe(),
                    "bound_ms": p.bound_ms,
                    "exclusive": p.exclusive,
                    "gate": p.gate,
                    "gated": p.gated,
                    "first_due_ms": next[j].1.map(|s| s.due_ms),
                })
            })
            .collect();
        writeln!(
            std::io::stdout().lock(),
            "{}",
            serde_json::json!({"campaign": c.plan.name, "jobs": jobs})
        )?;
        return Ok(());
    }
    writeln!(
        std::io::stdout().lock(),
        "campaign {}: {} targets, {} probes, {} jobs; archive {}",
        c.plan.name,
        c.plan.targets.len(),
        c.plan.probes.len(),
        c.plan.jobs.len(),
        c.archive.sqlite.display()
    )?;
    // Columns as wide as their widest cell (a probe's description can be long).
    let rows: Vec<[String; 6]> = c
        .plan
        .jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let p = c.plan.probe(j);
            let flags: Vec<&str> = [
                (p.exclusive, "exclusive"),
                (p.gate, "sanity check"),
                (p.gated && c.plan.gate_of(j).is_some(), "gated"),
            ]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
            [
                job.key.clone(),
                p.kind.describe(),
                p.when.describe(),
                format!("bound {}", human(p.bound_ms)),
                flags.join(", "),
                format!(
                    "first {}",
                    next[j]
                        .1
                        .map(|s| datetime(s.due_ms))
                        .unwrap_or_else(|| "never".into())
                ),
            ]
        })
        .collect();
    let width = |k: usize| rows.iter().map(|r| r[k].chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..6).map(width).collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(
            std::io::stdout().lock(),
            "  {}",
            cells.join("  ").trim_end()
        )?;
    }
    Ok(())
}
