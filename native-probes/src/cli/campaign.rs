//! `nowcast campaign CONFIG`, `nowcast campaign status CONFIG`, `nowcast campaign check
//! CONFIG`: the configuration read into a plan, handed to the runner, the status or the check.

use anyhow::Result;
use nowcast::archive::spool;
use nowcast::archive::sqlite::Sqlite;
use nowcast::campaign::plan::Plan;
use nowcast::campaign::scheduler::{Scheduler, Slot};
use nowcast::campaign::{config, runner, status};
use nowcast::format::count;
use nowcast::format::{columns, wrap, WIDTH};
use nowcast::stop::Stop;
use nowcast::when::{datetime, exact, Ms, When, DAY};
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
    #[arg(long, value_parser = When::parse)]
    since: Option<When>,
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
            show_status(path, args.since.unwrap_or(When::Ago(DAY)), args.json)
        }
        ("check", Some(_)) if args.since.is_some() => usage!("--since is for `status`"),
        ("check", Some(path)) => check(path, args.json),
        (other, Some(_)) => usage!(
            "'{other}' is not a subcommand of campaign (status or check): give CONFIG alone, \
             or status CONFIG, or check CONFIG"
        ),
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

fn show_status(path: &Path, since: When, json: bool) -> Result<()> {
    let c = config::read(path)?;
    let now = now();
    let since = since.at(now);
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
    let mut s = status::build(&c.plan, &runs, &sched.next_slots(), archives, now, since);
    s.running = Some(runner::holder(&c.archive.sqlite, &c.plan.name).is_some());
    if json {
        writeln!(std::io::stdout().lock(), "{}", serde_json::to_string(&s)?)?;
    } else {
        write!(std::io::stdout().lock(), "{}", status::text(&s))?;
    }
    Ok(())
}

/// The widest the job and probe columns of `check`'s table are padded to: with the flags
/// after them, a row fits in [`WIDTH`] columns; a longer cell (a long URL) wraps its row.
const MAX_COLUMN: [usize; 2] = [30, 38];

/// One row of a table: two spaces before each cell, each padded to its column's width.
fn table_row(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (cell, &w) in cells.iter().zip(widths) {
        line.push_str("  ");
        line.push_str(cell);
        line.extend(std::iter::repeat_n(' ', w.saturating_sub(columns(cell))));
    }
    line.truncate(line.trim_end().len());
    line
}

/// A job of `check`'s table in two lines: what it is (the job, the probe, its flags), then
/// when it runs (the schedule, the bound, the first slot); either wrapped, indented, when it
/// is too long.
fn job_lines(what: &[String; 3], when: &[String; 3], widths: &[usize]) -> Vec<String> {
    let first = table_row(what, widths);
    let mut lines = if columns(&first) <= WIDTH {
        vec![first]
    } else {
        let pieces: Vec<String> = what.iter().filter(|c| !c.is_empty()).cloned().collect();
        wrap("  ", &pieces, " ", 6)
    };
    lines.extend(wrap("      ", when, ", ", 6));
    lines
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
        nowcast::warn_line!("warning: probe '{}' will not run: {why}", probe.name);
    }
}

fn check(path: &Path, json: bool) -> Result<()> {
    let c = config::read(path)?;
    // The archive as the run will take it: in folders that exist, and an archive if the
    // file is there already and not empty (the run would refuse it; an empty file it
    // makes one).
    c.archive.check_folders()?;
    if std::fs::metadata(&c.archive.sqlite).is_ok_and(|m| m.len() > 0) {
        Sqlite::open_read(&c.archive.sqlite)?;
    }
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
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let head = [
        format!(
            "campaign {}: {}, {}, {};",
            c.plan.name,
            count(c.plan.targets.len() as u64, "target"),
            count(c.plan.probes.len() as u64, "probe"),
            count(c.plan.jobs.len() as u64, "job"),
        ),
        format!(
            "archive {}{}",
            c.archive.sqlite.display(),
            c.archive
                .clickhouse
                .as_ref()
                .map(|ch| format!(" and ClickHouse {}", ch.url))
                .unwrap_or_default()
        ),
    ];
    for l in wrap("", &head, " ", 4) {
        writeln!(out, "{l}")?;
    }
    let rows: Vec<([String; 3], [String; 3])> = c
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
            let first = next[j]
                .1
                .map(|s| datetime(s.due_ms))
                .unwrap_or_else(|| "never".into());
            (
                [job.key.clone(), p.kind.describe(), flags.join(", ")],
                [
                    p.when.describe(),
                    format!("bound {}", exact(p.bound_ms)),
                    format!("first {first}"),
                ],
            )
        })
        .collect();
    // Columns as wide as their widest cell, up to MAX_COLUMN characters, so that no width
    // can be too large to format.
    let mut widths: Vec<usize> = (0..2)
        .map(|k| {
            rows.iter()
                .map(|r| columns(&r.0[k]))
                .max()
                .unwrap_or(0)
                .min(MAX_COLUMN[k])
        })
        .collect();
    // The flags, last, are not padded.
    widths.push(0);
    for (what, when) in &rows {
        for l in job_lines(what, when, &widths) {
            writeln!(out, "{l}")?;
        }
    }
    out.flush()?;
    drop(out);
    never_warnings(&c.plan, &next, now);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(c: [&str; 3]) -> [String; 3] {
        c.map(String::from)
    }

    #[test]
    fn a_job_is_two_lines_within_100_columns() {
        let widths = [22, 37, 0];
        let when = cells([
            "cron '0 */2 * * *' + slip < 20m",
            "bound 20s",
            "first 2026-12-06T16:15:50Z",
        ]);
        let lines = job_lines(
            &cells([
                "caltech/iperf",
                "iperf3 10 s, 4 streams, window 1 MiB",
                "exclusive, sanity check, gated",
            ]),
            &when,
            &widths,
        );
        assert_eq!(
            lines,
            [
                "  caltech/iperf           iperf3 10 s, 4 streams, window 1 MiB   exclusive, \
                 sanity check, gated",
                "      cron '0 */2 * * *' + slip < 20m, bound 20s, first 2026-12-06T16:15:50Z",
            ]
        );
        // A long URL wraps its row; every line still fits.
        let url = format!(
            "http download http://{}/10M",
            "mirror.example.org/".repeat(3)
        );
        let lines = job_lines(&cells(["cern/http", &url, "exclusive"]), &when, &widths);
        assert!(lines.len() >= 3, "{lines:?}");
        assert!(lines.iter().all(|l| columns(l) <= WIDTH), "{lines:?}");
        assert!(
            lines[0].starts_with("  cern/http http download"),
            "{lines:?}"
        );
    }
}

/// campaign status's text, made from a parsed configuration (an edge), so tested here.
#[cfg(test)]
mod status_text {
    use nowcast::campaign::config;
    use nowcast::campaign::scheduler::Slot;
    use nowcast::campaign::status::{build, text, ArchiveBacklog};
    use nowcast::format::WIDTH;
    use nowcast::runlog::{Outcome, RunLog};
    use nowcast::when::Ms;

    const CONFIG: &str = "name = \"slac-like\"\n\
        [[targets]]\nname = \"caltech\"\nhost = \"127.0.0.1\"\n\
        [[targets]]\nname = \"a-target-with-a-rather-long-name-of-forty\"\nhost = \"127.0.0.2\"\n\
        [[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"5m\"\n\
        [[probes]]\nname = \"bw\"\nkind = \"tcp\"\nsize = \"4M\"\nevery = \"1h30m\"\n";

    fn run(job: &str, outcome: Outcome, ended_ms: Ms, reason: Option<&str>) -> RunLog {
        let (target, probe) = job.split_once('/').unwrap();
        RunLog {
            id: ended_ms as u64,
            campaign: "slac-like".into(),
            job: job.into(),
            target: target.into(),
            probe: probe.into(),
            nominal_ms: ended_ms - 10_000,
            due_ms: ended_ms - 10_000,
            started_ms: Some(ended_ms - 10_000),
            ended_ms,
            outcome,
            reason: reason.map(String::from),
            slots: 1,
            gate_check: false,
        }
    }

    #[test]
    fn every_line_fits_in_100_columns_without_trailing_spaces() {
        let c = config::parse(CONFIG, std::path::Path::new("/tmp"), "c").unwrap();
        let now: Ms = 1_765_000_000_000;
        let long = "a-target-with-a-rather-long-name-of-forty/bw";
        let runs = [
            run("caltech/rtt", Outcome::Ok, now - 60_000, None),
            run(
                long,
                Outcome::Failed,
                now - 30_000,
                Some(
                    "connect: Connection refused (os error 111); rtt, rtt_nagle and \
                     bandwidth_up not tried. Is `nowcast serve` running at 127.0.0.2:8060, \
                     and is its port open in the firewall between here and there?",
                ),
            ),
        ];
        let next: Vec<(usize, Option<Slot>)> = (0..c.plan.jobs.len())
            .map(|j| {
                let due_ms = now + 90_000 * j as Ms;
                (
                    j,
                    Some(Slot {
                        nominal_ms: due_ms,
                        due_ms,
                    }),
                )
            })
            .collect();
        let backlog = vec![ArchiveBacklog {
            name: "sqlite".into(),
            lines: 3,
            oldest_ms: Some(now - 5_000),
        }];
        let st = build(&c.plan, &runs, &next, backlog, now, now - 86_400_000);
        let t = text(&st);
        for l in t.lines() {
            assert!(l.chars().count() <= WIDTH, "{l}\n{t}");
            assert_eq!(l, l.trim_end(), "{t}");
        }
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[3].starts_with("job  "), "{t}");
        assert!(lines[3].ends_with("  last run        next due"), "{t}");
        let rtt = lines
            .iter()
            .find(|l| l.starts_with("caltech/rtt "))
            .unwrap();
        assert_eq!(
            rtt.split_whitespace().collect::<Vec<_>>(),
            [
                "caltech/rtt",
                "1",
                "0",
                "0",
                "0",
                "0",
                "ok",
                "1m",
                "ago",
                "now"
            ],
            "{t}"
        );
        // The long job's name on a line of its own, its figures below.
        let at = lines.iter().position(|l| *l == long).unwrap();
        assert!(lines[at + 1].trim_start().starts_with("0  "), "{t}");
        // Its problem, wrapped and indented.
        assert!(
            t.contains(&format!("\n  {long} failed at ")) && t.contains("\n    "),
            "{t}"
        );
    }
}
