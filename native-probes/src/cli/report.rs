//! `nowcast report`: records from the archive (SQLite or ClickHouse) or NDJSON files,
//! filtered, through the analysis, out as a table, JSON or an HTML file.

use anyhow::{bail, Context, Result};

use nowcast::archive::clickhouse::Clickhouse;
use nowcast::archive::query::Filter;
use nowcast::archive::sqlite::Sqlite;
use nowcast::report::{analysis, html, text};
use nowcast::runlog::RunLog;
use nowcast::when::Ms;
use nowcast_core::record::Record;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  nowcast report --archive lab.sqlite --since 28d\n  \
    nowcast report --archive lab.sqlite --html report.html --title 'Lab, last 4 weeks'\n  \
    nowcast report records.ndjson --json\n\nFirst what to expect now: the targets failing now \
    with the reason, and per metric the best and worst target by the forecast of its next \
    value with its range. Per target, metric and source: the series, its histogram, \
    the forecasts (mean of the last 5 with its deviation, EWMA 0.7, the NWS bank) with their \
    relative errors, the diurnal fit |a|·sin(x + b) + c with δb for weekdays and weekends; \
    active against passive throughput (records of source pcap) by methods 1–3; the \
    window/streams table; and the campaign's run log (IEPM-BW §II.A, §III.D, §III.G–J)."
)]
pub struct Args {
    /// NDJSON record files to read instead of an archive (- for standard input).
    files: Vec<PathBuf>,
    #[command(flatten)]
    source: super::archive::Source,
    #[command(flatten)]
    filter: super::archive::FilterArgs,
    /// Also read this campaign's run log (default: every campaign in the archive).
    #[arg(long)]
    campaign: Option<String>,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Write a self-contained HTML report to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// The HTML report's title.
    #[arg(long, default_value = "Nowcast report")]
    title: String,
    /// Histogram bins.
    #[arg(long, default_value_t = 30)]
    bins: usize,
}

pub fn run(args: Args) -> Result<()> {
    let now = nowcast::clock::wall_ms() as Ms;
    let filter = args.filter.filter(now);
    let mut records: Vec<Record> = Vec::new();
    let mut runs: Vec<RunLog> = Vec::new();
    let since_runs = filter.since_ms.map_or(0, |s| s as Ms);
    // Records in the files before the filters (an archive's are not counted).
    let mut read = None;
    if let (Some(_), false) = (&args.campaign, args.files.is_empty()) {
        usage!("--campaign reads an archive's run log, and NDJSON files have none: leave it out, or give --archive or --clickhouse instead of the files");
    }
    if !args.files.is_empty() {
        let mut not_records = Vec::new();
        let mut n = 0;
        for f in &args.files {
            let (recs, bad) = super::archive::read_file(f)?;
            if bad.print(f, recs.len()) {
                not_records.push(f.display().to_string());
            }
            n += recs.len();
            records.extend(recs.into_iter().filter(|r| keep(&filter, r)));
        }
        read = Some(n);
        if !not_records.is_empty() {
            // A report that leaves out a file given is not the report asked for.
            bail!("not NDJSON records: {}", not_records.join(", "));
        }
        records.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
    } else if let Some(ch) = args.source.clickhouse()? {
        let ch = Clickhouse::new(ch)?;
        ch.records(&filter, &mut |r| {
            records.push(r);
            Ok(())
        })?;
        runs = ch.runs(args.campaign.as_deref(), since_runs)?;
        if let (Some(c), true) = (&args.campaign, runs.is_empty()) {
            known_campaign(c, &ch.campaigns()?, &args.source.name())?;
        }
    } else {
        let mut db = Sqlite::open_read(&args.source.archive)?;
        db.records(&filter, &mut |r| {
            records.push(r);
            Ok(())
        })?;
        runs = match &args.campaign {
            Some(c) => db.runs(c, since_runs)?,
            None => db.all_runs(since_runs)?,
        };
        if let (Some(c), true) = (&args.campaign, runs.is_empty()) {
            known_campaign(c, &db.campaigns()?, &args.source.name())?;
        }
    }
    // A FOBS congestion event is a window's loss, no value of the path's loss series (the
    // transfer's loss is its own record): left out, as the page and `forecast` leave it out.
    let before = records.len();
    let inputs = if args.files.is_empty() {
        args.source.name()
    } else {
        let files: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
        files.join(", ")
    };
    let empty = empty(&inputs, read, before, &args.filter.given());
    records.retain(|r| r.congestion.is_none());
    if records.len() < before {
        nowcast::warn_line!(
            "nowcast: {} FOBS congestion events (a window's loss each) left out of the loss \
             series",
            before - records.len()
        );
    }
    let opts = analysis::Options {
        bins: args.bins.clamp(1, 1000),
        ..analysis::Options::default()
    };
    let report = analysis::build(&records, &runs, &opts);
    if let Some(path) = &args.html {
        std::fs::write(path, html::render(&report, &args.title))
            .with_context(|| format!("{}: write", path.display()))?;
        nowcast::warn_line!(
            "nowcast: wrote {} ({} series)",
            path.display(),
            report.series.len()
        );
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        // Written as text, so that a reader gone (`| head`) is an io::Error the command
        // ends quietly on (serde_json's own error does not name its io::Error as its source).
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else if args.html.is_none() {
        out.write_all(text::render(&report, &empty).as_bytes())?;
    }
    Ok(())
}

/// Refuses `--campaign NAME`, of which no run was read, when the run log in `archive` has no
/// such campaign among those it `have`s (a typo left the report's run log out without a
/// word), listing them; says so when it has it but not in the period.
fn known_campaign(name: &str, have: &[String], archive: &str) -> Result<()> {
    if have.iter().any(|c| c == name) {
        nowcast::warn_line!(
            "nowcast: campaign '{}' logged no runs in this period",
            nowcast::format::clean(name)
        );
        return Ok(());
    }
    let listed = if have.is_empty() {
        "it has no run log: no campaign wrote to it".to_string()
    } else {
        let shown: Vec<String> = have
            .iter()
            .take(20)
            .map(|c| format!("'{}'", nowcast::format::clean(c)))
            .collect();
        format!(
            "it has {}{}",
            shown.join(", "),
            if have.len() > 20 { ", …" } else { "" }
        )
    };
    usage!(
        "--campaign '{}': no such campaign in the run log of {archive}; {listed}",
        nowcast::format::clean(name)
    )
}

/// What is true of a report without records, read from `inputs` (`read` records in them
/// before the filters, when counted; `matched` after them) with the filters `given`.
fn empty(inputs: &str, read: Option<usize>, matched: usize, given: &[&str]) -> String {
    let filters = given.join(", ");
    match read {
        _ if matched > 0 => format!("{inputs}: only FOBS congestion events, which are no series"),
        Some(n) if n > 0 && !given.is_empty() => format!(
            "{inputs}: {}, none matching {filters}",
            nowcast::format::count(n as u64, "record")
        ),
        None if !given.is_empty() => format!("{inputs}: no records matching {filters}"),
        _ => format!("{inputs}: no records"),
    }
}

fn keep(f: &Filter, r: &Record) -> bool {
    f.since_ms.is_none_or(|s| r.timestamp_ms >= s)
        && f.until_ms.is_none_or(|u| r.timestamp_ms < u)
        && (f.targets.is_empty() || f.targets.contains(&r.to))
        && (f.metrics.is_empty() || f.metrics.contains(&r.metric))
        && f.source_matches(&r.source)
}
