//! `nowcast archive import|export|query|schema`: the archive's flags into plain
//! configuration, then the library's SQLite and ClickHouse archives.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use nowcast::archive::clickhouse::{Clickhouse, ClickhouseConfig};
use nowcast::archive::query::{self, day_of, Filter};
use nowcast::archive::sqlite::Sqlite;
use nowcast::when::{parse_time, Ms, DAY};
use nowcast_core::record::{Metric, Record, RecordError};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Which archive: the SQLite file, or a ClickHouse server. Global, so that `archive query`
/// takes them before or after its question (`query latest --archive F`).
#[derive(clap::Args, Clone)]
pub struct Source {
    /// The SQLite archive.
    #[arg(
        long,
        global = true,
        default_value = "nowcast.sqlite",
        value_name = "FILE"
    )]
    pub archive: PathBuf,
    /// Use the ClickHouse server at URL (http://host:8123) instead.
    #[arg(long, global = true, value_name = "URL")]
    pub clickhouse: Option<String>,
    /// ClickHouse database.
    #[arg(long, global = true, default_value = "nowcast")]
    pub database: String,
    /// ClickHouse user.
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// ClickHouse password; default: the NOWCAST_CLICKHOUSE_PASSWORD environment variable.
    #[arg(long, global = true)]
    pub password: Option<String>,
}

impl Source {
    pub fn clickhouse(&self) -> Result<Option<ClickhouseConfig>> {
        Ok(self.clickhouse.as_ref().map(|url| ClickhouseConfig {
            url: url.clone(),
            database: self.database.clone(),
            user: self.user.clone(),
            password: self
                .password
                .clone()
                .or_else(|| std::env::var("NOWCAST_CLICKHOUSE_PASSWORD").ok()),
            timeout: Duration::from_secs(300),
        }))
    }
}

/// A metric by its schema name, for clap.
pub fn metric(s: &str) -> Result<Metric, String> {
    Metric::from_name(s).ok_or_else(|| {
        format!(
            "unknown metric '{s}' ({})",
            Metric::ALL
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Which records.
#[derive(clap::Args, Clone)]
pub struct FilterArgs {
    /// From this time: a date (2026-03-01), a date and time, ms since 1970, or an age (7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Before this time (same forms).
    #[arg(long)]
    pub until: Option<String>,
    /// Only this target (`to`); repeat for more.
    #[arg(long)]
    pub target: Vec<String>,
    /// Only this metric (rtt, bandwidth_up, throughput, …); repeat for more.
    #[arg(long, value_parser = metric)]
    pub metric: Vec<Metric>,
    /// Only this source (nowcast tcp, iperf3, pcap, browser, …); repeat for more.
    #[arg(long)]
    pub source: Vec<String>,
}

impl FilterArgs {
    pub fn filter(&self, now: Ms) -> Result<Filter> {
        let t = |s: &Option<String>, flag: &str| -> Result<Option<f64>> {
            s.as_deref()
                .map(|s| {
                    parse_time(s, now)
                        .map(|t| t as f64)
                        .map_err(|e| anyhow!("{flag}: {e}"))
                })
                .transpose()
        };
        Ok(Filter {
            since_ms: t(&self.since, "--since")?,
            until_ms: t(&self.until, "--until")?,
            targets: self.target.clone(),
            metrics: self.metric.clone(),
            sources: self.source.clone(),
        })
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "The archive is one SQLite file (WAL mode, no server) written by \
    nowcast campaign; with --clickhouse the same commands work on a ClickHouse server."
)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Add NDJSON record files (from the page, the native tools, pcap analysis); bad lines
    /// are named by number and skipped, the rest kept.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        source: Source,
        /// Records per transaction or INSERT.
        #[arg(long, default_value_t = 50_000)]
        batch: usize,
    },
    /// Write records as NDJSON (the page imports it) or CSV `time,value,series`.
    Export {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, value_enum, default_value_t = Format::Ndjson)]
        format: Format,
        /// Write to FILE instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The questions both archives answer (the same answers): a day's summary of every
    /// target and metric, one series in hourly buckets, the latest value of every series.
    Query {
        #[command(subcommand)]
        query: QueryKind,
        #[command(flatten)]
        source: Source,
        /// One JSON line (the answer's objects) instead of a table.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Print the ClickHouse schema (--cluster NAME: ReplicatedMergeTree behind Distributed).
    Schema {
        #[arg(long, default_value = "nowcast")]
        database: String,
        #[arg(long)]
        cluster: Option<String>,
    },
}

#[derive(Subcommand, Clone)]
enum QueryKind {
    /// Every target and metric over one day (UTC).
    Day { day: String },
    /// One target's metric in hourly buckets over [--since, --until) (default: 7 days to now).
    Hourly {
        target: String,
        #[arg(value_parser = metric)]
        metric: Metric,
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        until: Option<String>,
    },
    /// The latest ok measurement of every target and metric.
    Latest,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Ndjson,
    Csv,
}

/// The longest line read; a longer one is a bad line.
const MAX_LINE: usize = 1 << 20;

/// The bad lines of one file: how many, and the messages of the first [`BadLines::SHOWN`]
/// (a file of a million bad lines holds twenty messages, and prints as many).
#[derive(Debug, Default)]
pub struct BadLines {
    pub count: usize,
    pub shown: Vec<String>,
}

impl BadLines {
    pub const SHOWN: usize = 20;

    fn push(&mut self, message: String) {
        self.count += 1;
        if self.shown.len() < Self::SHOWN {
            self.shown.push(message);
        }
    }

    /// Prints them to standard error. A file with bad lines and no record at all is not a
    /// file of records: one line says so, with its first bad line, instead of a screen of
    /// errors; the return value says it was.
    pub fn print(&self, path: &std::path::Path, records: usize) -> bool {
        if self.count == 0 {
            return false;
        }
        if records == 0 {
            let first = &self.shown[0];
            let prefix = format!("{}: ", path.display());
            eprintln!(
                "nowcast: {}: not NDJSON records (what `--json`, `archive export` and the \
                 page's NDJSON export write; `nowcast forecast` reads CSV and text series): \
                 none of its {} lines is one ({})",
                path.display(),
                self.count,
                first.strip_prefix(&prefix).unwrap_or(first)
            );
            return true;
        }
        for m in &self.shown {
            eprintln!("nowcast: {m}");
        }
        if self.count > self.shown.len() {
            eprintln!(
                "nowcast: {}: {} more bad lines not shown",
                path.display(),
                self.count - self.shown.len()
            );
        }
        false
    }
}

/// Reads an NDJSON file: the records and its bad lines.
pub fn read_file(path: &PathBuf) -> Result<(Vec<Record>, BadLines)> {
    let mut records = Vec::new();
    let mut bad = BadLines::default();
    each_line(path, &mut |r| {
        match r {
            Ok(rec) => records.push(rec),
            Err(e) => bad.push(e),
        }
        Ok(())
    })?;
    Ok((records, bad))
}

/// Calls `each` with every record of `path` or the text naming a bad line.
fn each_line(
    path: &PathBuf,
    each: &mut dyn FnMut(Result<Record, String>) -> Result<()>,
) -> Result<()> {
    let f = std::fs::File::open(path).with_context(|| format!("{}: open", path.display()))?;
    let mut r = BufReader::with_capacity(1 << 16, f);
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.len() > MAX_LINE && !buf.ends_with(b"\n") {
            // Skip the rest of an over-long line without holding it.
            let mut skip = Vec::new();
            loop {
                skip.clear();
                let m = (&mut r).take(1 << 16).read_until(b'\n', &mut skip)?;
                if m == 0 || skip.ends_with(b"\n") {
                    break;
                }
            }
            each(Err(format!(
                "{}: line {line_no}: longer than {MAX_LINE} bytes",
                path.display()
            )))?;
            continue;
        }
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t.trim(),
            Err(_) => {
                each(Err(format!(
                    "{}: line {line_no}: not UTF-8",
                    path.display()
                )))?;
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        match Record::parse(text) {
            Ok(rec) => each(Ok(rec))?,
            Err(error) => each(Err(format!(
                "{}: line {line_no}: {}",
                path.display(),
                error_short(error)
            )))?,
        }
    }
    Ok(())
}

fn error_short(mut e: RecordError) -> RecordError {
    if e.message.chars().count() > 240 {
        e.message = e.message.chars().take(240).collect::<String>() + "…";
    }
    e
}

pub fn run(args: Args) -> Result<()> {
    let now = nowcast::clock::wall_ms() as Ms;
    match args.command {
        Command::Import {
            files,
            source,
            batch,
        } => import(&files, &source, batch.max(1), now),
        Command::Export {
            source,
            filter,
            format,
            out,
        } => export(&source, &filter.filter(now)?, format, out),
        Command::Query {
            query: q,
            source,
            json,
        } => run_query(q, &source, json, now),
        Command::Schema { database, cluster } => {
            query::identifier(&database).map_err(|e| anyhow!(e))?;
            let ddl = match &cluster {
                Some(c) => {
                    query::identifier(c).map_err(|e| anyhow!(e))?;
                    query::clickhouse_cluster_ddl(&database, c)
                }
                None => query::clickhouse_ddl(&database),
            };
            for s in ddl {
                writeln!(std::io::stdout().lock(), "{s};\n")?;
            }
            Ok(())
        }
    }
}

fn import(files: &[PathBuf], source: &Source, batch: usize, now: Ms) -> Result<()> {
    let ch = source.clickhouse()?.map(Clickhouse::new).transpose()?;
    let mut db = match &ch {
        Some(c) => {
            c.ensure_schema()?;
            None
        }
        None => Some(Sqlite::open(&source.archive)?),
    };
    let mut write = |recs: &mut Vec<Record>| -> Result<()> {
        if recs.is_empty() {
            return Ok(());
        }
        match (&ch, db.as_mut()) {
            (Some(c), _) => c.write(recs, &[])?,
            (None, Some(d)) => {
                d.write(recs, &[], None, now)?;
            }
            _ => unreachable!(),
        }
        recs.clear();
        Ok(())
    };
    let mut bad_total = 0usize;
    let mut total = 0usize;
    let mut not_records = Vec::new();
    for f in files {
        let mut recs = Vec::with_capacity(batch.min(100_000));
        let mut n = 0usize;
        let mut bad = BadLines::default();
        let mut failed = None;
        each_line(f, &mut |r| {
            match r {
                Ok(rec) => {
                    recs.push(rec);
                    n += 1;
                    if recs.len() >= batch {
                        if let Err(e) = write(&mut recs) {
                            failed = Some(e);
                            bail!("stopped");
                        }
                    }
                }
                Err(e) => bad.push(e),
            }
            Ok(())
        })
        .map_err(|e| failed.take().unwrap_or(e))?;
        write(&mut recs)?;
        if bad.print(f, n) {
            not_records.push(f.display().to_string());
        } else {
            eprintln!(
                "nowcast: {}: {n} records imported, {} bad lines skipped",
                f.display(),
                bad.count
            );
        }
        total += n;
        bad_total += bad.count;
    }
    let into = match &ch {
        Some(c) => format!("ClickHouse {}", c.config().url),
        None => source.archive.display().to_string(),
    };
    eprintln!(
        "nowcast: {total} records into {into}{}",
        if bad_total > 0 {
            format!(" ({bad_total} bad lines)")
        } else {
            String::new()
        }
    );
    if !not_records.is_empty() {
        // The rest is in; the exit status says that something given was not.
        bail!(
            "not NDJSON records, nothing imported from: {}",
            not_records.join(", ")
        );
    }
    Ok(())
}

fn export(source: &Source, filter: &Filter, format: Format, out: Option<PathBuf>) -> Result<()> {
    let sink: Box<dyn Write> = match &out {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("{}: create", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::with_capacity(1 << 16, sink);
    if format == Format::Csv {
        writeln!(w, "time,value,series")?;
    }
    let mut each = |r: Record| -> Result<()> {
        match format {
            Format::Ndjson => writeln!(w, "{}", r.to_line())?,
            Format::Csv => {
                // As the page exports: measured values only, the series named by target,
                // metric and source (commas would split the column).
                if let Some(v) = r
                    .value
                    .filter(|_| r.status == nowcast_core::record::Status::Ok)
                {
                    let label =
                        format!("{} {} ({})", r.to, r.metric.name(), r.source).replace(',', ";");
                    writeln!(w, "{},{v},{label}", r.timestamp_ms)?;
                }
            }
        }
        Ok(())
    };
    match source.clickhouse()? {
        Some(c) => Clickhouse::new(c)?.records(filter, &mut each)?,
        None => Sqlite::open_read(&source.archive)?.records(filter, &mut each)?,
    }
    w.flush()?;
    Ok(())
}

fn run_query(q: QueryKind, source: &Source, json: bool, now: Ms) -> Result<()> {
    let ch = source.clickhouse()?.map(Clickhouse::new).transpose()?;
    let mut db = match &ch {
        Some(_) => None,
        None => Some(Sqlite::open_read(&source.archive)?),
    };
    let where_ = match &source.clickhouse {
        Some(url) => format!("{url} (database {})", source.database),
        None => source.archive.display().to_string(),
    };
    let out = match q {
        QueryKind::Day { day } => {
            let (from, to) = day_of(parse_time(&day, now).map_err(|e| anyhow!(e))?);
            let s = match (&ch, db.as_mut()) {
                (Some(c), _) => c.summary(from, to)?,
                (_, Some(d)) => d.summary(from, to)?,
                _ => unreachable!(),
            };
            if json {
                serde_json::to_string(&s)?
            } else {
                answer::day(&where_, from, &s)
            }
        }
        QueryKind::Hourly {
            target,
            metric,
            since,
            until,
        } => {
            let until = until
                .map(|u| parse_time(&u, now))
                .transpose()
                .map_err(|e| anyhow!(e))?
                .unwrap_or(now);
            let since = since
                .map(|s| parse_time(&s, now))
                .transpose()
                .map_err(|e| anyhow!(e))?
                .unwrap_or(until - 7 * DAY);
            let b = match (&ch, db.as_mut()) {
                (Some(c), _) => c.hourly(&target, metric, since, until)?,
                (_, Some(d)) => d.hourly(&target, metric, since, until)?,
                _ => unreachable!(),
            };
            if json {
                serde_json::to_string(&b)?
            } else {
                answer::hourly(&where_, &target, metric, since, until, &b)
            }
        }
        QueryKind::Latest => {
            let l = match (&ch, db.as_mut()) {
                (Some(c), _) => c.latest()?,
                (_, Some(d)) => d.latest()?,
                _ => unreachable!(),
            };
            if json {
                serde_json::to_string(&l)?
            } else {
                answer::latest(&where_, now, &l)
            }
        }
    };
    writeln!(std::io::stdout().lock(), "{}", out.trim_end())?;
    Ok(())
}

/// The answers of `archive query` as tables for a person (`--json` prints the objects).
/// Deterministic: the answer in, text out.
mod answer {
    use nowcast::archive::query::{Bucket, Latest, Summary};
    use nowcast::format::number;
    use nowcast::when::{date, datetime, Ms, HOUR};
    use nowcast_core::record::{Metric, Unit};
    use std::fmt::Write;

    /// A metric's column heading and how its values are shown: in its unit, or a fraction
    /// in percent as every other table shows loss.
    fn metric(name: &str) -> (String, f64) {
        match Metric::from_name(name).map(|m| (m, m.unit())) {
            Some((m, Unit::Fraction)) => (format!("{m} %"), 100.0),
            Some((m, unit)) => (format!("{m} {unit}"), 1.0),
            None => (name.to_string(), 1.0),
        }
    }

    fn opt(v: Option<f64>, scale: f64) -> String {
        v.map(|v| number(v * scale)).unwrap_or_else(|| "-".into())
    }

    /// The cells records, ok, mean, min, max of a summary or an hour.
    fn counts(n: u64, ok: u64, stats: [Option<f64>; 3], scale: f64) -> Vec<String> {
        let mut cells = vec![n.to_string(), ok.to_string()];
        cells.extend(stats.map(|v| opt(v, scale)));
        cells
    }

    /// Rows under a heading, each column as wide as its widest cell; the first `left`
    /// columns aligned left, the rest (numbers) right.
    fn table(head: &[&str], left: usize, rows: &[Vec<String>]) -> String {
        let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
        for r in rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
        for r in std::iter::once(&head).chain(rows) {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(&width).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = w - c.chars().count();
                if i < left {
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    /// How long ago, in the largest whole unit (`42 s`, `5 min`, `3 h`, `2 d`).
    fn age(ms: f64) -> String {
        let s = (ms / 1000.0).max(0.0) as u64;
        match s {
            0..=119 => format!("{s} s ago"),
            120..=7199 => format!("{} min ago", s / 60),
            7200..=172_799 => format!("{} h ago", s / 3600),
            _ => format!("{} d ago", s / 86_400),
        }
    }

    pub fn day(archive: &str, from: Ms, s: &[Summary]) -> String {
        let mut out = format!("{} (UTC) in {archive}: ", date(from));
        if s.is_empty() {
            out.push_str("no records\n");
            return out;
        }
        let targets: std::collections::BTreeSet<_> = s.iter().map(|x| &x.target).collect();
        let _ = writeln!(out, "{} targets, {} series", targets.len(), s.len());
        let rows: Vec<Vec<String>> = s
            .iter()
            .map(|x| {
                let (name, k) = metric(&x.metric);
                let mut row = vec![x.target.clone(), name];
                row.extend(counts(x.n, x.ok, [x.mean, x.min, x.max], k));
                row
            })
            .collect();
        out.push_str(&table(
            &["target", "metric", "records", "ok", "mean", "min", "max"],
            2,
            &rows,
        ));
        out
    }

    pub fn hourly(
        archive: &str,
        target: &str,
        m: Metric,
        since: Ms,
        until: Ms,
        b: &[Bucket],
    ) -> String {
        let (name, k) = metric(m.name());
        let mut out = format!(
            "{target} {name}, hourly, {} to {} in {archive}: ",
            datetime(since),
            datetime(until)
        );
        if b.is_empty() {
            let _ = writeln!(
                out,
                "no records (`archive query latest` lists the targets and metrics there are)"
            );
            return out;
        }
        let n: u64 = b.iter().map(|x| x.n).sum();
        let _ = writeln!(out, "{n} records in {} hours", b.len());
        let rows: Vec<Vec<String>> = b
            .iter()
            .map(|x| {
                let start = datetime(x.hour_ms - x.hour_ms.rem_euclid(HOUR));
                let mut row = vec![start[..16].replace('T', " ")];
                row.extend(counts(x.n, x.ok, [x.mean, x.min, x.max], k));
                row
            })
            .collect();
        out.push_str(&table(
            &["hour (UTC)", "records", "ok", "mean", "min", "max"],
            1,
            &rows,
        ));
        out
    }

    pub fn latest(archive: &str, now: Ms, l: &[Latest]) -> String {
        let mut out = format!("the latest ok measurement of each series in {archive}: ");
        if l.is_empty() {
            out.push_str("none\n");
            return out;
        }
        let _ = writeln!(out, "{} series", l.len());
        let rows: Vec<Vec<String>> = l
            .iter()
            .map(|x| {
                let (name, k) = metric(&x.metric);
                vec![
                    x.target.clone(),
                    name,
                    number(x.value * k),
                    datetime(x.ts_ms as Ms),
                    age(now as f64 - x.ts_ms),
                ]
            })
            .collect();
        out.push_str(&table(
            &["target", "metric", "value", "at (UTC)", "age"],
            2,
            &rows,
        ));
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn tables_name_the_archive_units_and_empty_answers() {
            let s = [Summary {
                target: "10.0.0.2:8060".into(),
                metric: "rtt".into(),
                n: 25,
                ok: 24,
                mean: Some(0.0523),
                min: Some(0.031),
                max: None,
            }];
            let t = day("lab.sqlite", 1_764_892_800_000, &s);
            assert!(t.starts_with("2025-12-05 (UTC) in lab.sqlite: 1 targets, 1 series\n"));
            assert!(t.contains("rtt ms"), "{t}");
            assert!(t.contains("0.052"), "{t}");
            assert!(t.lines().nth(2).unwrap().ends_with('-'), "{t}");
            // The numbers' columns end where their headings end.
            let lines: Vec<_> = t.lines().skip(1).collect();
            assert_eq!(lines[0].chars().count(), lines[1].chars().count(), "{t}");
            assert!(day("a", 0, &[]).ends_with("no records\n"));

            let b = [Bucket {
                hour_ms: 1_764_896_400_000,
                n: 3,
                ok: 3,
                mean: Some(941.0),
                min: Some(930.0),
                max: Some(950.0),
            }];
            let t = hourly("x", "h:1", Metric::Throughput, 0, 1, &b);
            assert!(t.contains("throughput Mbit/s, hourly"), "{t}");
            assert!(t.contains("2025-12-05 01:00"), "{t}");
            assert!(hourly("x", "h:1", Metric::Rtt, 0, 1, &[]).contains("no records"));

            let l = [Latest {
                target: "h:1".into(),
                metric: "loss".into(),
                ts_ms: 1_000.0,
                value: 0.25,
            }];
            let t = latest("x", 301_000, &l);
            assert!(t.contains("loss %"), "{t}");
            assert!(t.contains("25.00"), "{t}");
            assert!(t.contains("5 min ago"), "{t}");
        }
    }
}
