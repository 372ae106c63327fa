//! `nowcast forecast FILE`: streams a series through the faithful and improved banks, the
//! baselines and the timeout rules, and reports their errors. The two banks run on their own
//! threads, fed by the reader in chunks, so memory stays constant and both cores work.

use crate::evaluate::{FaithfulPart, ImprovedPart, Report, Row};
use crate::series_input::{read_values, ReadOptions, ReadStats};
use anyhow::{bail, Context, Result};
use nowcast_core::timeout::Bounds;
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
    let send = |chunk: Vec<f64>| {
        let shared = Arc::new(chunk);
        // A worker only stops early by panicking, which join() reports below.
        let _ = to_faithful.send(shared.clone());
        let _ = to_improved.send(shared);
    };
    // The reader range-checks every value (finite, within ±1e100 and its unit's range), so
    // the banks never refuse one.
    let stats = read_values(input, opts, |v| {
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
    if stats.values == 0 {
        let mut why = format!("{}: no values to forecast", args.file.display());
        if stats.series.is_none() && !stats.other_series.is_empty() {
            why += " in a series matching the options; the file has:";
            for o in &stats.other_series {
                why += &format!("\n  {} ({})", o.name, o.choose);
            }
        }
        bail!(why);
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
    match (&stats.series, &stats.column) {
        (_, Some(c)) => write!(out, ", column {c}")?,
        (Some(s), None) => write!(out, ", series {s}")?,
        _ => {}
    }
    writeln!(out)?;
    if !stats.other_series.is_empty() {
        writeln!(
            out,
            "the file has {} other series (choose with --metric, --target, --transport or --column):",
            stats.other_series_count
        )?;
        for o in &stats.other_series {
            match o.values {
                Some(n) => writeln!(out, "  {} ({n} values): {}", o.name, o.choose)?,
                None => writeln!(out, "  {}: {}", o.name, o.choose)?,
            }
        }
        if stats.other_series_count > stats.other_series.len() {
            writeln!(out, "  …")?;
        }
    }
    for note in &stats.notes {
        writeln!(out, "note: {note}")?;
    }
    if stats.skipped_bad > 0 {
        write!(out, "skipped {} malformed line(s)", stats.skipped_bad)?;
        if let Some(b) = &stats.first_bad {
            write!(out, "; first: {b}")?;
        }
        writeln!(out)?;
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
