//! `nowcast forecast FILE`: streams a series through the faithful and improved banks, the
//! baselines and the timeout rules, and reports their errors. The two banks run on their own
//! threads, fed by the reader in chunks, so memory stays constant and both cores work.

use crate::evaluate::{FaithfulPart, ImprovedPart, Report, Row};
use crate::series_input::{read_values, ReadOptions, ReadStats};
use anyhow::{bail, Context, Result};
use nowcast_core::timeout::Bounds;
use nowcast_core::Bank;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

const CHUNK: usize = 1 << 14;

/// A `nowcast forecast` run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The series file, or `-` for standard input.
    pub file: PathBuf,
    pub read: ReadOptions,
    /// One JSON object instead of tables.
    pub json: bool,
    /// Bounds of the timeout rules, in the series' unit.
    pub bounds: Bounds,
}

/// Reads `cfg.file`, runs the banks and writes the report to `out`.
pub fn run(cfg: &Config, out: &mut dyn Write) -> Result<()> {
    let (bounds, opts, args) = (cfg.bounds, &cfg.read, cfg);
    let input: Box<dyn std::io::Read> = if args.file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(&args.file)
                .with_context(|| format!("cannot open {}", args.file.display()))?,
        )
    };

    let (to_faithful, from_reader_f) = sync_channel::<Arc<Vec<f64>>>(4);
    let (to_improved, from_reader_i) = sync_channel::<Arc<Vec<f64>>>(4);
    let faithful = std::thread::spawn(move || {
        let mut part = FaithfulPart::default();
        for chunk in from_reader_f {
            part.push(&chunk);
        }
        part
    });
    let improved = std::thread::spawn(move || {
        let mut part = ImprovedPart::new(bounds);
        for chunk in from_reader_i {
            part.push(&chunk);
        }
        part
    });

    let mut chunk = Vec::with_capacity(CHUNK);
    let mut range_error = None;
    let send = |chunk: Vec<f64>| {
        let shared = Arc::new(chunk);
        // A worker only stops early by panicking, which join() reports below.
        let _ = to_faithful.send(shared.clone());
        let _ = to_improved.send(shared);
    };
    let stats = read_values(input, opts, |v| {
        if Bank::check(v).is_err() {
            range_error.get_or_insert(v);
            return;
        }
        chunk.push(v);
        if chunk.len() == CHUNK {
            send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)));
        }
    });
    if !chunk.is_empty() {
        send(chunk);
    }
    drop(to_faithful);
    drop(to_improved);
    let faithful = faithful.join().expect("faithful bank thread");
    let improved = improved.join().expect("improved bank thread");
    let stats = stats.with_context(|| format!("reading {}", args.file.display()))?;
    if let Some(v) = range_error {
        bail!("value {v:e} is outside the supported range of ±1e100");
    }
    if stats.values == 0 {
        bail!("{}: no values to forecast", args.file.display());
    }
    let report = Report::build(stats.values, &faithful, &improved);
    if args.json {
        let doc = serde_json::json!({ "input": stats, "report": report });
        writeln!(out, "{doc}")?;
    } else {
        print_human(out, &args.file, &stats, &report)?;
    }
    Ok(out.flush()?)
}

fn print_rows(out: &mut dyn Write, title: &str, rows: &[Row]) -> std::io::Result<()> {
    writeln!(out, "\n{title}")?;
    writeln!(
        out,
        "  {:<34} {:>10} {:>14} {:>14}",
        "forecast", "n", "MAE", "RMSE"
    )?;
    for r in rows {
        writeln!(
            out,
            "  {:<34} {:>10} {:>14.6} {:>14.6}",
            r.name, r.n, r.mae, r.rmse
        )?;
    }
    Ok(())
}

fn print_human(
    out: &mut dyn Write,
    file: &std::path::Path,
    stats: &ReadStats,
    r: &Report,
) -> std::io::Result<()> {
    write!(
        out,
        "{}: {} values ({})",
        file.display(),
        r.points,
        stats.format
    )?;
    if let Some(m) = stats.metric {
        write!(
            out,
            ", metric {}",
            serde_json::to_string(&m)
                .unwrap_or_default()
                .trim_matches('"')
        )?;
    }
    if let Some(c) = &stats.column {
        write!(out, ", column {c}")?;
    }
    writeln!(out)?;
    if stats.skipped_bad > 0 {
        write!(out, "skipped {} malformed line(s)", stats.skipped_bad)?;
        if let Some(b) = &stats.first_bad {
            write!(out, "; first: {b}")?;
        }
        writeln!(out)?;
    }
    if stats.other_metric + stats.without_value > 0 {
        writeln!(
            out,
            "not forecast: {} record(s) of other metrics, {} without a value (timeout or error)",
            stats.other_metric, stats.without_value
        )?;
    }
    print_rows(
        out,
        "Selected forecasts (errors over points 2..n)",
        &r.selected,
    )?;
    print_rows(out, "Baselines", &r.baselines)?;
    print_rows(out, "Primary forecasters (improved mode)", &r.primaries)?;
    writeln!(out, "\nTimeout rules")?;
    writeln!(
        out,
        "  {:<34} {:>10} {:>14} {:>14}",
        "rule", "judged", "miss rate", "mean timeout"
    )?;
    for t in &r.timeouts {
        writeln!(
            out,
            "  {:<34} {:>10} {:>13.4}% {:>14.6}",
            t.rule,
            t.judged,
            t.miss_rate * 100.0,
            t.mean_timeout
        )?;
    }
    Ok(())
}
