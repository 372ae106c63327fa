//! `nowcast archive import|export|query|schema`: the archive's flags into plain
//! configuration, then the library's SQLite and ClickHouse archives.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use nowcast::archive::answer;
use nowcast::archive::clickhouse::{Clickhouse, ClickhouseConfig, ANSWER_TIMEOUT};
use nowcast::archive::leave_out_archived;
use nowcast::archive::query::{self, day_of, Filter};
use nowcast::archive::sqlite::Sqlite;
use nowcast::net::parse_seconds;
use nowcast::when::{Ms, When, DAY};
use nowcast_core::import as delimited;
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
    /// How long to wait for ClickHouse's answer to begin, and between parts of it, seconds
    /// (or with a unit: 500ms, 2min); an answer that keeps coming may take as long as it
    /// needs.
    #[arg(long, global = true, value_parser = parse_seconds, default_value_t = ANSWER_TIMEOUT.as_secs_f64(), value_name = "SECONDS")]
    pub clickhouse_timeout: f64,
}

impl Source {
    pub fn clickhouse(&self) -> Result<Option<ClickhouseConfig>> {
        let Some(url) = &self.clickhouse else {
            return Ok(None);
        };
        let timeout = Duration::try_from_secs_f64(self.clickhouse_timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| {
                anyhow!(
                    "--clickhouse-timeout {}: not a positive number of seconds",
                    self.clickhouse_timeout
                )
            })?;
        Ok(Some(ClickhouseConfig {
            url: url.clone(),
            database: self.database.clone(),
            user: self.user.clone(),
            password: self
                .password
                .clone()
                .or_else(|| std::env::var("NOWCAST_CLICKHOUSE_PASSWORD").ok()),
            timeout,
        }))
    }

    /// The archive for a message: the SQLite file, or the ClickHouse server and database.
    pub fn name(&self) -> String {
        match &self.clickhouse {
            Some(url) => format!("{url} (database {})", self.database),
            None => self.archive.display().to_string(),
        }
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

/// A time range [--since, --until), either end open. A start after the end would select
/// nothing and succeed, as if the archive held nothing there: it is refused as the flags
/// are parsed (exit status 2, as any bad flag), for every command that takes the two
/// (`archive export`, `archive query hourly`, `report`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Span {
    pub since: Option<When>,
    pub until: Option<When>,
}

/// [`Span`]'s flags as clap reads them, before the range is checked.
#[derive(clap::Args)]
struct SpanFlags {
    /// From this time: a date (2026-03-01), a date and time, ms since 1970, or an age (7d).
    #[arg(long, value_parser = When::parse)]
    since: Option<When>,
    /// Before this time (same forms).
    #[arg(long, value_parser = When::parse)]
    until: Option<When>,
}

impl Span {
    /// `--since X is after --until Y` when it is (`now` turns ages into times).
    pub fn check(&self, now: Ms) -> Result<(), String> {
        match (self.since, self.until) {
            (Some(s), Some(u)) if s.at(now) > u.at(now) => Err(format!(
                "--since {} is after --until {}: the range holds no time",
                shown(s, now),
                shown(u, now)
            )),
            _ => Ok(()),
        }
    }
}

/// A time as given, and the time it is.
fn shown(w: When, now: Ms) -> String {
    match w {
        When::Ago(0) => format!("now ({})", nowcast::when::datetime(now)),
        When::Ago(age) => format!(
            "{} ({})",
            nowcast::when::human(age),
            nowcast::when::datetime(now - age)
        ),
        When::At(t) => nowcast::when::datetime(t),
    }
}

impl clap::FromArgMatches for Span {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let f = SpanFlags::from_arg_matches(m)?;
        let span = Span {
            since: f.since,
            until: f.until,
        };
        span.check(nowcast::clock::wall_ms() as Ms)
            .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, e))?;
        Ok(span)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Span {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        SpanFlags::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        SpanFlags::augment_args_for_update(cmd)
    }
}

/// Which records.
#[derive(clap::Args, Clone)]
pub struct FilterArgs {
    #[command(flatten)]
    pub span: Span,
    /// Only this target (`to`); repeat for more.
    #[arg(long)]
    pub target: Vec<String>,
    /// Only this metric (rtt, bandwidth_up, throughput, …); repeat for more.
    #[arg(long, value_parser = metric)]
    pub metric: Vec<Metric>,
    /// Only this source (nowcast tcp, iperf3, pcap, browser, …); repeat for more. A probe
    /// type also takes a campaign's probes of that type that write under their own names
    /// (`nowcast tcp` takes `nowcast tcp (bw)`).
    #[arg(long)]
    pub source: Vec<String>,
}

impl FilterArgs {
    pub fn filter(&self, now: Ms) -> Filter {
        let t = |w: Option<When>| w.map(|w| w.at(now) as f64);
        Filter {
            since_ms: t(self.span.since),
            until_ms: t(self.span.until),
            targets: self.target.clone(),
            metrics: self.metric.clone(),
            sources: self.source.clone(),
        }
    }

    /// The filters given, by flag (`--since`, `--target`, …), for a message that says what
    /// left the records out.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--since", self.span.since.is_some()),
            ("--until", self.span.until.is_some()),
            ("--target", !self.target.is_empty()),
            ("--metric", !self.metric.is_empty()),
            ("--source", !self.source.is_empty()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
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
    /// Add NDJSON record files (- for standard input; from the page, the native tools, pcap
    /// analysis); bad lines are named by number and skipped, the rest kept. A record the
    /// archive already holds (identical in every field) is counted and skipped: importing a
    /// file again adds nothing, and one appended to since adds its new lines.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        source: Source,
        /// Records per transaction or INSERT (a timestamp's records are not split).
        #[arg(long, default_value_t = 50_000)]
        batch: usize,
    },
    /// Write records as NDJSON (the page imports it) or CSV as the page exports
    /// (`time,value,metric,unit,transport,to,series,source,from`).
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
    /// series (target, metric, source), one target's metric in hourly buckets per source,
    /// the latest value of every series.
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
    /// Every series (target, metric, source) over one day (UTC).
    Day {
        /// The day: a date (2026-03-01), or a time in it (now, 1d, ms since 1970).
        #[arg(value_parser = When::parse)]
        day: When,
    },
    /// One target's metric in hourly buckets per source over [--since, --until) (default: 7
    /// days before --until, which is now by default).
    Hourly {
        target: String,
        #[arg(value_parser = metric)]
        metric: Metric,
        #[command(flatten)]
        span: Span,
    },
    /// The latest ok measurement of every series (target, metric, source).
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
            nowcast::warn_line!(
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
            nowcast::warn_line!("nowcast: {m}");
        }
        if self.count > self.shown.len() {
            nowcast::warn_line!(
                "nowcast: {}: {} more bad lines not shown",
                path.display(),
                self.count - self.shown.len()
            );
        }
        false
    }
}

/// Reads an NDJSON file: the records and its bad lines.
pub fn read_file(path: &std::path::Path) -> Result<(Vec<Record>, BadLines)> {
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
    path: &std::path::Path,
    each: &mut dyn FnMut(Result<Record, String>) -> Result<()>,
) -> Result<()> {
    let f = nowcast::input::open(path).with_context(|| format!("{}: open", path.display()))?;
    let mut r = BufReader::with_capacity(1 << 16, f);
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("{}: read", path.display()))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        // A UTF-8 byte order mark is not part of the first record.
        if line_no == 1 && buf.starts_with(nowcast::series_input::BOM) {
            buf.drain(..nowcast::series_input::BOM.len());
        }
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
        } => export(&source, &filter.filter(now), format, out),
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

/// Imports record files, each record once: a record the archive already holds (identical in
/// every column, [`leave_out_archived`]) is counted and left out, so that importing a file again, one
/// appended to since, or two overlapping exports adds only the records not yet there.
/// Records identical to each other within one file are the file's business and are all
/// kept (a file may hold one measurement twice): a batch is cut only between timestamps,
/// so that the copies of a record (one timestamp) in a file in time order, as every
/// exporter writes them, are compared with the archive together. (In a file out of time
/// order, a copy in a later batch than another counts as already archived: telling the
/// file's own copies from the archive's there would take a key per record imported.)
///
/// A SQLite archive that does not exist yet is made with the first batch to write: a run
/// that imports nothing (its inputs unreadable, or not records) leaves no archive behind.
/// Whether it can be made (its folder exists), and an existing one (that it is an archive),
/// are checked first, before any input is read.
fn import(files: &[PathBuf], source: &Source, batch: usize, now: Ms) -> Result<()> {
    let ch = source.clickhouse()?.map(Clickhouse::new).transpose()?;
    let mut db = match &ch {
        Some(c) => {
            c.ensure_schema()?;
            None
        }
        None if std::fs::symlink_metadata(&source.archive).is_ok() => {
            Some(Sqlite::open(&source.archive)?)
        }
        None => {
            Sqlite::can_create(&source.archive)?;
            None
        }
    };
    // Writes a batch; returns the records written and those already in the archive.
    let mut write = |recs: &mut Vec<Record>| -> Result<(usize, usize)> {
        if recs.is_empty() {
            return Ok((0, 0));
        }
        let already = match &ch {
            // ClickHouse has no transactions: two imports of one file at the same moment
            // can both write (README, "The archive").
            Some(c) => {
                let already = leave_out_archived(recs, &mut |f, each| c.records(f, each))?;
                if !recs.is_empty() {
                    c.write(recs, &[])?;
                }
                already
            }
            // The read-back and the write in one transaction.
            None => {
                let d = match &mut db {
                    Some(d) => d,
                    None => db.insert(Sqlite::open(&source.archive)?),
                };
                d.exclusive(|d| {
                    let already = leave_out_archived(recs, &mut |f, each| d.records(f, each))?;
                    if !recs.is_empty() {
                        d.write(recs, &[], None, now)?;
                    }
                    Ok(already)
                })?
            }
        };
        let written = recs.len();
        recs.clear();
        Ok((written, already))
    };
    // The archive failed part-way: what is in says what is not. A batch is one transaction
    // (SQLite) or one INSERT, and a record already archived is left out, so the same
    // import again adds only the rest.
    let stopped = |e: anyhow::Error, committed: usize| {
        e.context(match committed {
            0 => "the import stopped before any record went in".to_string(),
            n => format!(
                "the import stopped after {} went in; importing the same files again adds only \
                 the rest",
                nowcast::format::count(n as u64, "record")
            ),
        })
    };
    let (mut bad_total, mut total, mut already_total) = (0usize, 0usize, 0usize);
    let (mut not_records, mut unreadable) = (Vec::new(), Vec::new());
    for f in files {
        let mut recs: Vec<Record> = Vec::with_capacity(batch.min(100_000));
        let (mut n, mut imported, mut already) = (0usize, 0usize, 0usize);
        let mut bad = BadLines::default();
        let mut failed = None;
        each_line(f, &mut |r| {
            match r {
                Ok(rec) => {
                    // Full, and a new timestamp (or twice full: one timestamp of more
                    // records than that is cut anyway).
                    let full = recs.len() >= batch
                        && (recs.len() >= 2 * batch
                            || recs
                                .last()
                                .is_some_and(|l| l.timestamp_ms != rec.timestamp_ms));
                    if full {
                        match write(&mut recs) {
                            Ok((w, a)) => {
                                imported += w;
                                already += a;
                            }
                            Err(e) => {
                                failed = Some(e);
                                bail!("stopped");
                            }
                        }
                    }
                    recs.push(rec);
                    n += 1;
                }
                Err(e) => bad.push(e),
            }
            Ok(())
        })
        .or_else(|e| match failed.take() {
            // The archive failed: nothing more can be imported.
            Some(w) => Err(stopped(w, total + imported)),
            // This file could not be read (a directory, a read error): named, and what was
            // read of it before is still imported; the other files go on.
            None => {
                nowcast::warn_line!("nowcast: {e:#}");
                unreadable.push(f.display().to_string());
                Ok(())
            }
        })?;
        let (w, a) = write(&mut recs).map_err(|e| stopped(e, total + imported))?;
        imported += w;
        already += a;
        if bad.print(f, n) {
            not_records.push(f.display().to_string());
        } else {
            nowcast::warn_line!(
                "nowcast: {}: {imported} records imported, {already} already in the archive, \
                 {} skipped",
                f.display(),
                nowcast::format::count(bad.count as u64, "bad line")
            );
        }
        total += imported;
        already_total += already;
        bad_total += bad.count;
    }
    let into = match (&ch, &db) {
        (Some(c), _) => format!("ClickHouse {}", c.config().url),
        (None, Some(_)) => source.archive.display().to_string(),
        // Nothing was written: the archive was not made.
        (None, None) => format!("{} (not made)", source.archive.display()),
    };
    nowcast::warn_line!(
        "nowcast: {total} records imported into {into}, {already_total} already in it{}",
        if bad_total > 0 {
            format!(
                " ({})",
                nowcast::format::count(bad_total as u64, "bad line")
            )
        } else {
            String::new()
        }
    );
    if !unreadable.is_empty() {
        // The rest is in; the exit status says that something given was not.
        bail!(
            "could not read all of: {}{}",
            unreadable.join(", "),
            if not_records.is_empty() {
                String::new()
            } else {
                format!(
                    "; not NDJSON records, nothing imported from: {}",
                    not_records.join(", ")
                )
            }
        );
    }
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
        writeln!(w, "{}", delimited::EXPORT_HEADER)?;
    }
    let mut line = String::new();
    let mut each = |r: Record| -> Result<()> {
        match format {
            Format::Ndjson => writeln!(w, "{}", r.to_line())?,
            Format::Csv => {
                // As the page exports (the core's writer): measured values only, with their
                // metric, unit, transport and target (what `nowcast forecast` and the page
                // read back as one series each), the series titled by target, metric and
                // source.
                line.clear();
                let label = format!("{} {} ({})", r.to, r.metric.name(), r.source);
                delimited::export_csv_line(&label, &r, &mut line);
                w.write_all(line.as_bytes())?;
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
    let where_ = source.name();
    let out = match q {
        QueryKind::Day { day } => {
            let (from, to) = day_of(day.at(now));
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
            span,
        } => {
            let until = span.until.map_or(now, |u| u.at(now));
            let since = span.since.map_or(until - 7 * DAY, |s| s.at(now));
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
