//! `nowcast campaign CONFIG`, `nowcast campaign status CONFIG`, `nowcast campaign check
//! CONFIG`: the configuration read into a plan, handed to the runner, the status or the check.

use anyhow::{bail, Result};
use nowcast::archive::spool;
use nowcast::archive::sqlite::Sqlite;
use nowcast::campaign::plan::Plan;
use nowcast::campaign::scheduler::{Scheduler, Slot};
use nowcast::campaign::{config, runner, status};
use nowcast::stop::Stop;
use nowcast::when::{datetime, exact, parse_time, Ms};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(
    after_help = "Runs the campaign in CONFIG (TOML; a commented example is \
    native-probes/examples/campaign.toml) until SIGINT or SIGTERM: each probe on each of its \
    targets on its schedule, every run killed at its bound, heavy runs skipped when the \
    target's sanity check failed, exclusive runs never overlapping on a target or the link, \
    and every run, failure, kill, skip or missed slot recorded in the archive with its reason. \
    A restart continues the schedule from the archive's run log. A configuration is at most \
    16 MiB, its names at most 64 characters, and its probes (one per pair of a sweep) and jobs \
    (one probe on one target) at most 100000 each.\n\n\
    nowcast campaign status CONFIG   what ran, what failed and why, what is next, the archive backlog\n\
    nowcast campaign check CONFIG    the jobs and their next slots, without running anything"
)]
pub struct Args {
    /// CONFIG, or `status` / `check` followed by CONFIG.
    #[arg(value_name = "CONFIG")]
    first: String,
    #[arg(hide = true)]
    second: Option<PathBuf>,
    /// With status: the window of the counts (an age such as 24h, the default, or a time).
    #[arg(long)]
    since: Option<String>,
    /// With status or check: one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

fn now() -> Ms {
    nowcast::clock::wall_ms() as Ms
}

pub fn run(args: Args) -> Result<()> {
    match (args.first.as_str(), &args.second) {
        ("status", Some(path)) => {
            show_status(path, args.since.as_deref().unwrap_or("24h"), args.json)
        }
        ("check", Some(_)) if args.since.is_some() => usage!("--since is for `status`"),
        ("check", Some(path)) => check(path, args.json),
        (_, Some(_)) => bail!("give CONFIG alone, or status CONFIG, or check CONFIG"),
        (path, None) => {
            // A flag of the other forms is a mistake, not something to ignore while a
            // campaign runs for days.
            if args.json {
                usage!(
                    "--json is for `status` and `check`; a campaign's records go to its archive \
                     (`nowcast archive export --archive FILE` writes them as NDJSON)"
                );
            }
            if args.since.is_some() {
                usage!("--since is for `status`");
            }
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
    let since = parse_time(since, now).map_err(|e| usage_err!("--since: {e}"))?;
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

/// The widest a column of `check`'s table is padded to.
const MAX_COLUMN: usize = 60;

/// One row of a table: two spaces before each cell, each padded to its column's width.
fn table_row(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (cell, &w) in cells.iter().zip(widths) {
        line.push_str("  ");
        line.push_str(cell);
        line.extend(std::iter::repeat_n(
            ' ',
            w.saturating_sub(cell.chars().count()),
        ));
    }
    line.truncate(line.trim_end().len());
    line
}

/// Warns on standard error of each probe none of whose jobs has a slot to come, and why.
fn never_warnings(plan: &Plan, next: &[(usize, Option<Slot>)], now: Ms) {
    let mut has_slot = vec![false; plan.probes.len()];
    for (j, slot) in next {
        if slot.is_some() {
            has_slot[plan.jobs[*j].probe] = true;
        }
    }
    let mut on_jobs = vec![false; plan.probes.len()];
    for job in &plan.jobs {
        on_jobs[job.probe] = true;
    }
    for (p, probe) in plan.probes.iter().enumerate() {
        if has_slot[p] || !on_jobs[p] {
            continue;
        }
        let w = &probe.when;
        let why = match (w.max_runs, w.until_ms) {
            (Some(0), _) => "max_runs = 0".to_string(),
            (_, Some(u)) if u < now => format!("its until, {}, has passed", datetime(u)),
            (_, Some(u)) => format!("its schedule has no slot before its until, {}", datetime(u)),
            _ => "its schedule has no slot in the next eight years".to_string(),
        };
        eprintln!("warning: probe '{}' will not run: {why}", probe.name);
    }
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
        never_warnings(&c.plan, &next, now);
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
                format!("bound {}", exact(p.bound_ms)),
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
    // Padding stops at MAX_COLUMN characters: a longer cell (a long URL) overflows its
    // column on its own row rather than widening every row, and no width can be too large
    // to format.
    let width = |k: usize| {
        rows.iter()
            .map(|r| r[k].chars().count())
            .max()
            .unwrap_or(0)
            .min(MAX_COLUMN)
    };
    let widths: Vec<usize> = (0..6).map(width).collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for r in &rows {
        writeln!(out, "{}", table_row(r, &widths))?;
    }
    out.flush()?;
    drop(out);
    never_warnings(&c.plan, &next, now);
    Ok(())
}
