//! `nowcast forecast FILE`: streams a series through the faithful and/or improved banks, the
//! baselines and the timeout rules, and reports the forecast of the next value with its
//! likely range (± 2·error, as on the page) and every forecaster's errors, in the series'
//! unit. The banks run as a pipeline of threads (their primaries, joined so that what both
//! modes share is stepped once; the rest of each bank; its timeout rules and baselines), fed
//! by the reader in chunks, so memory stays constant and both cores work.

use crate::evaluate::{BankPart, NextForecast, Report, Row};
use crate::format::{Scale, BAND_K};
use crate::series_input::{read_values, OtherSeries, ReadOptions, ReadStats};
use anyhow::{bail, Context, Result};
use nowcast_core::record::Unit;
use nowcast_core::timeout::Bounds;
use nowcast_core::{Forecast, Mode, NextForecasts, Primaries};
use serde::Serialize;
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

const CHUNK: usize = 1 << 14;

/// Which forecaster banks run: the original library's (faithful), Nowcast's (improved), or
/// both side by side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Modes {
    #[default]
    Both,
    Faithful,
    Improved,
}

/// A `nowcast forecast` run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The series file, or `-` for standard input.
    pub file: PathBuf,
    pub read: ReadOptions,
    pub modes: Modes,
    /// One JSON object instead of tables.
    pub json: bool,
    /// Bounds of the timeout rules, in the series' unit.
    pub bounds: Bounds,
}

/// The series' unit and where it was learnt.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct UnitOf {
    unit: Unit,
    /// `metric` (the file says what was measured) or `column name` (e.g. `rtt_ms`).
    from: &'static str,
}

/// The header of the CSV column read. A column chosen by its index (a file without a header,
/// or a name two columns share) is named `column 2` or `rtt_ms (column 2)` by the reader: the
/// name before its index.
fn column_header(stats: &ReadStats) -> Option<&str> {
    let column = stats.column.as_deref()?;
    if !column.bytes().all(|b| b.is_ascii_digit()) {
        return Some(column);
    }
    let suffix = format!(" (column {column})");
    stats.series.as_deref()?.strip_suffix(suffix.as_str())
}

/// The unit of the series read: its metric's, or one named by the last word of a CSV
/// column's header (`rtt_ms`, `RTT (ms)`, `throughput_mbps`).
fn unit_of(stats: &ReadStats) -> Option<UnitOf> {
    if let Some(m) = stats.metric {
        return Some(UnitOf {
            unit: m.unit(),
            from: "metric",
        });
    }
    let column = column_header(stats)?.to_ascii_lowercase();
    let word = column
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '/'))
        .rfind(|w| !w.is_empty())?;
    let unit = match word {
        "ms" => Unit::Ms,
        "mbps" | "mbit/s" | "mbits/s" => Unit::MbitPerS,
        _ => return None,
    };
    Some(UnitOf {
        unit,
        from: "column name",
    })
}

/// Values the primaries' thread hands on at a time: their forecasts (180 bytes a value, some
/// 185 KB a piece) stay in the processor's cache between the two threads.
const PIECE: usize = 1 << 10;
/// Pieces that may wait for each bank: 64 (65,536 values, ~12 MB), so that five threads
/// sharing two cores seldom stop one another (4 pieces of 4,096 values were about 2 %
/// slower on 1 M points: medians of 11 interleaved runs).
const WAITING: usize = 64;

type Piece = (Arc<Vec<f64>>, Range<usize>, NextForecasts);

/// Starts the threads that feed `parts` with the chunks sent, a pipeline of three stages:
/// - the banks' primaries, joined (one thread for all: [`Primaries::join`] steps the
///   forecasters that banks share once), a piece of a chunk ahead
///   ([`BankPart::take_primaries`]: their forecasts depend on the values alone);
/// - for each bank, the rest of it (scores, selection, aggregates), given their forecasts;
/// - its timeout rules and baselines, a chunk behind, given the bank's forecast before each
///   value.
///
/// On two cores the stages share the work more evenly than a whole bank on one thread,
/// which would set the pace alone. The handle gives back the parts whole.
fn pipeline(mut parts: Vec<BankPart>) -> (SyncSender<Arc<Vec<f64>>>, JoinHandle<Vec<BankPart>>) {
    let (to, from) = sync_channel::<Arc<Vec<f64>>>(4);
    let mut primaries = parts
        .iter_mut()
        .map(BankPart::take_primaries)
        .reduce(Primaries::join)
        .expect("a bank to run");
    let (to_banks, banks): (Vec<_>, Vec<_>) = parts
        .into_iter()
        .map(|part| {
            let (to_bank, pieces) = sync_channel::<Piece>(WAITING);
            // Room for every piece that can be out at once: those waiting, the bank's own
            // and the one being filled, with a margin.
            let (give_back, spare) = sync_channel::<NextForecasts>(2 * WAITING + 8);
            ((to_bank, spare), bank_stage(part, pieces, give_back))
        })
        .unzip();
    let ahead = std::thread::spawn(move || {
        let mut next: Vec<NextForecasts> = Vec::new();
        for chunk in from {
            for start in (0..chunk.len()).step_by(PIECE) {
                let range = start..(start + PIECE).min(chunk.len());
                next.extend(to_banks.iter().map(|(_, spare)| {
                    let mut n = spare.try_recv().unwrap_or_default();
                    n.clear();
                    n
                }));
                primaries.push(&chunk[range.clone()], &mut next);
                for ((to_bank, _), n) in to_banks.iter().zip(next.drain(..)) {
                    if to_bank.send((chunk.clone(), range.clone(), n)).is_err() {
                        // A bank's thread panicked; its join() reports it.
                        return primaries;
                    }
                }
            }
        }
        primaries
    });
    let handle = std::thread::spawn(move || {
        let mut parts: Vec<BankPart> = banks
            .into_iter()
            .map(|b| b.join().expect("forecaster bank thread"))
            .collect();
        let back = ahead.join().expect("primaries thread").split();
        for (part, own) in parts.iter_mut().zip(back) {
            part.set_primaries(own);
        }
        parts
    });
    (to, handle)
}

/// The thread of one bank's pipeline that takes its primaries' forecasts, with its timeout
/// rules' own thread behind it. Each emptied piece goes back to be filled again.
fn bank_stage(
    mut part: BankPart,
    pieces: Receiver<Piece>,
    give_back: SyncSender<NextForecasts>,
) -> JoinHandle<BankPart> {
    std::thread::spawn(move || {
        let mut judges = part.take_judges();
        let want = judges.wants_forecasts();
        let (to_judges, judged) = sync_channel::<(Arc<Vec<f64>>, Vec<Option<Forecast>>)>(4);
        let judging = (!judges.is_empty()).then(|| {
            std::thread::spawn(move || {
                for (chunk, before) in judged {
                    judges.push(&chunk, &before);
                }
                judges
            })
        });
        let mut before = Vec::new();
        for (chunk, range, next) in pieces {
            let whole = range.end == chunk.len();
            part.push_given(&chunk[range], &next, want.then_some(&mut before));
            let _ = give_back.try_send(next);
            if whole && judging.is_some() {
                // The judging thread only stops early by panicking, which join() reports.
                let _ = to_judges.send((chunk, std::mem::take(&mut before)));
            }
        }
        drop(to_judges);
        if let Some(judging) = judging {
            part.set_judges(judging.join().expect("timeout rules thread"));
        }
        part
    })
}

/// Reads `cfg.file`, runs the banks and writes the report to `out`.
pub fn run(cfg: &Config, out: &mut dyn Write) -> Result<()> {
    let (bounds, opts, args) = (cfg.bounds, &cfg.read, cfg);
    let input = crate::input::open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;

    // The last part is the one whose primaries, baselines and timeout rules are reported;
    // with both modes, the faithful bank runs alone (no rules, no baselines) beside it.
    let parts = match cfg.modes {
        Modes::Both => vec![
            BankPart::new(Mode::Faithful, bounds, false, false),
            BankPart::new(Mode::Improved, bounds, true, true),
        ],
        Modes::Faithful => vec![BankPart::new(Mode::Faithful, bounds, true, true)],
        Modes::Improved => vec![BankPart::new(Mode::Improved, bounds, true, true)],
    };
    let (sender, banks) = pipeline(parts);

    let mut chunk = Vec::with_capacity(CHUNK);
    let send = |chunk: Vec<f64>| {
        // The pipeline only stops early by panicking, which join() reports below.
        let _ = sender.send(Arc::new(chunk));
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
    drop(sender);
    let parts = banks.join().expect("forecaster banks' threads");
    let stats = stats.with_context(|| format!("reading {}", args.file.display()))?;
    if stats.values == 0 {
        let mut why = format!("{}: no values to forecast", args.file.display());
        if stats.series.is_none() && !stats.other_series.is_empty() {
            why += &format!(
                " in a series matching the options; the file has {} series:",
                stats.other_series_total()
            );
            for o in &stats.other_series {
                why += &format!("\n  {} ({})", o.name, choose(o));
            }
            if stats.other_series_count > stats.other_series.len() {
                why += "\n  …";
            }
        }
        bail!(why);
    }
    let mut report = Report::build(stats.values, &parts.iter().collect::<Vec<_>>());
    let unit = unit_of(&stats);
    if let Some(u) = unit {
        // The likely range stays within what the unit allows (no negative RTT).
        let (lo, hi) = u.unit.range();
        for n in &mut report.next {
            // Never so as to leave out the forecast itself.
            let v = n.value;
            let lo = if v < lo { f64::NEG_INFINITY } else { lo };
            let hi = if v > hi { f64::INFINITY } else { hi };
            n.low = n.low.map(|x| x.clamp(lo, hi));
            n.high = n.high.map(|x| x.clamp(lo, hi));
        }
    }
    if args.json {
        let doc = serde_json::json!({
            "mode": cfg.modes,
            "unit": unit.map(|u| u.unit),
            "unit_from": unit.map(|u| u.from),
            "input": stats,
            "report": report,
        });
        writeln!(out, "{doc}")?;
    } else {
        print_human(out, &args.file, &stats, unit, &report)?;
    }
    Ok(out.flush()?)
}

/// How the report's figures are shown: the series' unit scaled to its size (Gbit/s for
/// fast links), or the file's own numbers when it names no unit.
struct Shown {
    scale: Option<Scale>,
}

impl Shown {
    fn new(unit: Option<UnitOf>, magnitude: f64) -> Self {
        Self {
            scale: unit.map(|u| Scale::of(u.unit, magnitude)),
        }
    }

    /// The range of the unit's values, as shown (no negative RTT); all numbers without one.
    fn range(&self) -> (f64, f64) {
        self.scale.map_or((f64::NEG_INFINITY, f64::INFINITY), |s| {
            let (lo, hi) = s.unit.range();
            (lo * s.factor, hi * s.factor)
        })
    }

    fn factor(&self) -> f64 {
        self.scale.map_or(1.0, |s| s.factor)
    }

    /// ` ms`, ` Gbit/s`, or nothing.
    fn unit(&self) -> String {
        self.scale
            .map(|s| format!(" {}", s.name))
            .unwrap_or_default()
    }

    /// The next forecast's figures: value, ± band, low and high, all with the decimals that
    /// give the value three significant digits and the band two (`10.60 ± 0.99`). Low and
    /// high are the value and band as printed, added (`12.5 ± 3.5`: 9.0 to 16.0, where the
    /// unrounded figures would give 9.1), within the unit's range.
    fn next(&self, n: &NextForecast) -> [String; 4] {
        let k = self.factor();
        let places = |v: f64, digits: f64| {
            if v == 0.0 || !v.is_finite() {
                0.0
            } else {
                digits - 1.0 - v.abs().log10().floor()
            }
        };
        let band = BAND_K * n.error.unwrap_or(0.0);
        let d = places(n.value * k, 3.0)
            .max(places(band * k, 2.0))
            .clamp(0.0, 9.0) as usize;
        let round = |v: f64| {
            let p = 10f64.powi(d as i32);
            (v * p).round() / p
        };
        let (value, band) = (round(n.value * k), round(band * k));
        let (lo, hi) = self.range();
        // Within the unit's range, but never so as to leave out the forecast itself (a
        // series of values beyond the range a record allows, read from a CSV).
        let (lo, hi) = (
            if value < lo { f64::NEG_INFINITY } else { lo },
            if value > hi { f64::INFINITY } else { hi },
        );
        let figures = [
            value,
            band,
            (value - band).clamp(lo, hi),
            (value + band).clamp(lo, hi),
        ];
        // Beyond a billion, or below a ten-thousandth, in exponent notation: 4.75e48, not 49
        // digits (and a band of 23 digits after a value of one).
        let huge = |v: f64| v != 0.0 && !(1e-4..1e9).contains(&v.abs());
        if huge(value) || huge(band) {
            return figures.map(|v| match v {
                0.0 => "0".to_string(),
                v => format!("{v:.3e}"),
            });
        }
        // + 0.0: no "-0.00".
        figures.map(|v| format!("{:.d$}", v + 0.0))
    }
}

/// Decimals that give the largest of `values` four significant digits.
fn decimals(values: impl Iterator<Item = f64>) -> usize {
    let max = values
        .filter(|v| v.is_finite())
        .fold(0.0, |m, v| v.abs().max(m));
    if max == 0.0 {
        return 0;
    }
    (3.0 - max.log10().floor()).clamp(0.0, 9.0) as usize
}

/// The decimals of every error table: one figure is printed alike wherever it appears
/// (last value is a baseline and a primary forecaster).
fn error_decimals(tables: &[&[Row]], shown: &Shown) -> usize {
    let k = shown.factor();
    decimals(
        tables
            .iter()
            .flat_map(|rows| rows.iter())
            .filter(|r| r.n > 0)
            .flat_map(|r| [r.mae * k, r.rmse * k]),
    )
}

fn print_rows(
    out: &mut dyn Write,
    title: &str,
    rows: &[Row],
    shown: &Shown,
    d: usize,
) -> std::io::Result<()> {
    let k = shown.factor();
    let u = shown.unit();
    writeln!(out, "\n{title}")?;
    writeln!(
        out,
        "  {:<34} {:>10} {:>14} {:>14}",
        "forecast",
        "n",
        format!("MAE{u}"),
        format!("RMSE{u}")
    )?;
    for r in rows {
        // No forecast checked yet: no error to give (not a perfect 0).
        let [mae, rmse] = [r.mae, r.rmse].map(|e| {
            if r.n > 0 {
                format!("{:.d$}", e * k)
            } else {
                "-".to_string()
            }
        });
        writeln!(out, "  {:<34} {:>10} {mae:>14} {rmse:>14}", r.name, r.n)?;
    }
    Ok(())
}

/// The options that choose another series, or what to leave out when none does (a file's
/// one series of no metric, asked for with --metric).
fn choose(o: &OtherSeries) -> &str {
    if o.choose.is_empty() {
        "no option chooses it: leave out --metric, --target, --transport and --source"
    } else {
        &o.choose
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Faithful => "faithful",
        Mode::Improved => "improved",
    }
}

/// A forecaster's share of a combined forecast as printed ("38 %", "<1 %"), as the page
/// says it.
fn share_percent(share: f64) -> String {
    let pct = (share * 100.0).round();
    if pct < 1.0 {
        "<1 %".to_string()
    } else {
        format!("{pct} %")
    }
}

fn print_next(out: &mut dyn Write, next: &[NextForecast], shown: &Shown) -> std::io::Result<()> {
    writeln!(
        out,
        "\nNext value: the forecast ± {BAND_K}·error (error: RMSE of the MSE-selected forecast)"
    )?;
    let u = shown.unit();
    let rows: Vec<[String; 4]> = next
        .iter()
        .map(|n| {
            let [value, band, low, high] = shown.next(n);
            // Errors are those of forecasts over points 2..n: one value has none, and its
            // "± 0" would claim a certainty nothing measured.
            let (value, range) = if n.error.is_some() {
                (
                    format!("{value} ± {band}{u}"),
                    // "to", not a dash: "-8.24–-1.31" reads badly.
                    format!("likely {low} to {high}{u}"),
                )
            } else {
                (
                    format!("{value}{u}"),
                    "error unknown until a second value".to_string(),
                )
            };
            [
                format!("{} mode", mode_name(n.mode)),
                value,
                range,
                match n.share {
                    // Improved: the forecast is a weighted combination, not this one's own.
                    Some(share) => format!(
                        "combined, largest weight {} ({})",
                        n.method_name,
                        share_percent(share)
                    ),
                    None => format!("by {}", n.method_name),
                },
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    for r in &rows {
        writeln!(
            out,
            "  {:<w0$}  {:<w1$}  {:<w2$}  {}",
            r[0], r[1], r[2], r[3]
        )?;
    }
    Ok(())
}

fn print_human(
    out: &mut dyn Write,
    file: &std::path::Path,
    stats: &ReadStats,
    unit: Option<UnitOf>,
    r: &Report,
) -> std::io::Result<()> {
    write!(
        out,
        "{}: {} ({})",
        file.display(),
        crate::format::count(r.points, "value"),
        stats.format
    )?;
    match (&stats.series, &stats.column) {
        (Some(s), Some(_)) if column_header(stats).is_some() && s.ends_with(')') => {
            write!(out, ", column {s}")?
        }
        (_, Some(c)) => write!(out, ", column {c}")?,
        (Some(s), None) => write!(out, ", series {s}")?,
        _ => {}
    }
    // One scale for the whole report, by the size of the next value (Gbit/s for a fast link),
    // and the heading names it: the unit the figures are in.
    let magnitude = r.next.first().map_or(0.0, |n| n.value.abs());
    let shown = Shown::new(unit, magnitude);
    match (unit, shown.scale) {
        (Some(u), Some(s)) if u.from == "metric" => write!(out, ", in {}", s.name)?,
        (Some(_), Some(s)) => write!(out, ", in {} (from the column's name)", s.name)?,
        _ => write!(out, "; the file names no unit")?,
    }
    writeln!(out)?;
    if !stats.other_series.is_empty() {
        writeln!(
            out,
            "the file has {} other series (choose with --metric, --target, --transport, --source or --column):",
            stats.other_series_total()
        )?;
        for o in &stats.other_series {
            match o.values {
                Some(n) => writeln!(
                    out,
                    "  {} ({}): {}",
                    o.name,
                    crate::format::count(n, "value"),
                    choose(o)
                )?,
                None => writeln!(out, "  {}: {}", o.name, choose(o))?,
            }
        }
        if stats.other_series_count > stats.other_series.len() {
            writeln!(out, "  …")?;
        }
    }
    for note in &stats.notes {
        writeln!(out, "note: {note}")?;
    }
    // Records without a value and empty fields are in the notes (the reader's, as the page
    // shows them).
    if stats.skipped_bad > 0 {
        writeln!(
            out,
            "skipped {} (--skip-bad):",
            crate::format::count(stats.skipped_bad, "malformed line")
        )?;
        for b in &stats.bad_lines {
            writeln!(out, "  {b}")?;
        }
        let more = stats.skipped_bad - stats.bad_lines.len() as u64;
        if more > 0 {
            writeln!(out, "  and {more} more")?;
        }
    }

    print_next(out, &r.next, &shown)?;
    let d = error_decimals(&[&r.selected, &r.baselines, &r.primaries], &shown);
    let mode = mode_name(r.primaries_mode);
    print_rows(
        out,
        "Selected forecasts (errors over points 2..n)",
        &r.selected,
        &shown,
        d,
    )?;
    // Which bank's primaries the oracle picks from: with both modes, the improved bank's, so
    // its n can differ from the faithful-only run's (see below).
    writeln!(
        out,
        "  Oracle: the best of the {mode} primaries (below) at each step, in hindsight"
    )?;
    if r.selected.iter().any(|row| row.n == r.points) {
        writeln!(
            out,
            "  n = {}: the oracle is charged for point 1 too, where only the faithful Exp \
             Smooth forecasters forecast (0, see below)",
            r.points
        )?;
    }
    if !r.baselines.is_empty() {
        print_rows(out, "Baselines", &r.baselines, &shown, d)?;
    }
    print_rows(
        out,
        &format!("Primary forecasters ({mode} mode)"),
        &r.primaries,
        &shown,
        d,
    )?;
    if r.primaries.iter().any(|row| row.n == r.points) {
        writeln!(
            out,
            "  n = {}: errors over points 1..n; the faithful Exp Smooth forecasters start at \
             0, as the original NWS library's do, and are charged |x₁| for point 1",
            r.points
        )?;
    }
    // A timeout is a time to wait: of a rate or a loss there is none to set (`--json` keeps
    // the rules' figures for any series).
    if let Some(u) = unit.filter(|u| u.unit != Unit::Ms) {
        let what = if u.unit == Unit::Fraction {
            "a fraction"
        } else {
            "a rate"
        };
        writeln!(
            out,
            "\nTimeout rules: not shown, as they time a wait and this series is {what} \
             (--json has them)"
        )?;
        return Ok(());
    }
    let k = shown.factor();
    let d = decimals(r.timeouts.iter().map(|t| t.mean_timeout * k));
    writeln!(
        out,
        "\nTimeout rules ({} mode): how often a value exceeded the rule's timeout",
        mode_name(r.primaries_mode)
    )?;
    writeln!(
        out,
        "  {:<30} {:>10} {:>14} {:>20}",
        "rule",
        "judged",
        "miss rate",
        format!("mean timeout{}", shown.unit())
    )?;
    for t in &r.timeouts {
        writeln!(
            out,
            "  {:<30} {:>10} {:>13.2}% {:>20.d$}",
            t.rule,
            t.judged,
            t.miss_rate * 100.0,
            t.mean_timeout * k
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(column: Option<&str>) -> ReadStats {
        ReadStats {
            column: column.map(String::from),
            ..ReadStats::default()
        }
    }

    /// The threads (each bank's primaries a piece ahead of the rest of it, the timeout rules
    /// and baselines a chunk behind) give the report one thread gives: over several chunks
    /// and a last short one, in every mode, to the bit.
    #[test]
    fn the_pipeline_reports_what_one_thread_does() {
        let xs: Vec<f64> = (0..CHUNK * 2 + PIECE + 123)
            .map(|i| 30.0 + ((i * 7919) % 89) as f64 * 0.25 + if i % 301 == 0 { 90.0 } else { 0.0 })
            .collect();
        let dir = std::env::temp_dir().join(format!("nowcast-pipeline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("s.txt");
        let text: String = xs.iter().map(|x| format!("{x}\n")).collect();
        std::fs::write(&file, text).unwrap();
        let bounds = Bounds::NWS_MS;
        for (modes, parts) in [
            (
                Modes::Both,
                vec![
                    BankPart::new(Mode::Faithful, bounds, false, false),
                    BankPart::new(Mode::Improved, bounds, true, true),
                ],
            ),
            (
                Modes::Faithful,
                vec![BankPart::new(Mode::Faithful, bounds, true, true)],
            ),
            (
                Modes::Improved,
                vec![BankPart::new(Mode::Improved, bounds, true, true)],
            ),
        ] {
            let cfg = Config {
                file: file.clone(),
                read: ReadOptions {
                    format: crate::series_input::Format::Plain,
                    select: Default::default(),
                    skip_bad: false,
                    max_line: crate::series_input::MAX_LINE,
                },
                modes,
                json: true,
                bounds,
            };
            let mut out = Vec::new();
            run(&cfg, &mut out).unwrap();
            let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
            let mut parts = parts;
            for p in &mut parts {
                p.push(&xs);
            }
            let one = Report::build(xs.len() as u64, &parts.iter().collect::<Vec<_>>());
            assert_eq!(
                doc["report"],
                serde_json::to_value(&one).unwrap(),
                "{modes:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_columns_name_may_give_its_unit() {
        let unit = |c| unit_of(&stats(Some(c))).map(|u| u.unit);
        assert_eq!(unit("rtt_ms"), Some(Unit::Ms));
        assert_eq!(unit("RTT (ms)"), Some(Unit::Ms));
        assert_eq!(unit("throughput_Mbps"), Some(Unit::MbitPerS));
        assert_eq!(unit("value"), None);
        assert_eq!(unit("msg"), None);
        assert_eq!(unit_of(&stats(None)), None);
        let s = ReadStats {
            metric: Some(nowcast_core::record::Metric::Loss),
            ..stats(Some("v"))
        };
        assert_eq!(
            unit_of(&s).map(|u| (u.unit, u.from)),
            Some((Unit::Fraction, "metric"))
        );
    }

    /// The likely range is made of the figures printed: 12.54 ± 3.46 shows as 12.5 ± 3.5,
    /// so 9.0 to 16.0 (the unrounded 9.08 printed 9.1); within the unit's range.
    #[test]
    fn the_range_agrees_with_the_printed_value_and_band() {
        let next = |value: f64, error: f64| NextForecast {
            mode: Mode::Improved,
            selector: "mse",
            method: String::new(),
            method_name: String::new(),
            share: None,
            value,
            error: Some(error),
            low: Some(value - BAND_K * error),
            high: Some(value + BAND_K * error),
        };
        let plain = Shown::new(None, 12.54);
        assert_eq!(
            plain.next(&next(12.54, 1.73)),
            ["12.5", "3.5", "9.0", "16.0"]
        );
        let ms = Shown::new(
            Some(UnitOf {
                unit: Unit::Ms,
                from: "metric",
            }),
            1.0,
        );
        assert_eq!(ms.next(&next(1.04, 1.0)), ["1.04", "2.00", "0.00", "3.04"]);
        assert_eq!(
            plain.next(&next(-0.001, 0.0001)),
            ["-0.00100", "0.00020", "-0.00120", "-0.00080"]
        );
        // Huge figures in exponent notation, and a range that holds the forecast even past
        // the unit's (a user's review: 49 digits, "likely 0 to 1000000000 ms").
        assert_eq!(
            ms.next(&next(4.75e48, 1e48)),
            ["4.750e48", "2.000e48", "2.750e48", "6.750e48"]
        );
        assert_eq!(
            ms.next(&next(4.75e48, 1e50)),
            ["4.750e48", "2.000e50", "0", "2.048e50"]
        );
        assert_eq!(
            plain.next(&next(3.0, 8.7e21)),
            ["3.000e0", "1.740e22", "-1.740e22", "1.740e22"]
        );
    }

    #[test]
    fn four_significant_digits_for_the_largest_error() {
        assert_eq!(decimals([2.748, 0.9].into_iter()), 3);
        assert_eq!(decimals([0.0123].into_iter()), 5);
        assert_eq!(decimals([23_083.0].into_iter()), 0);
        assert_eq!(decimals([0.0].into_iter()), 0);
    }
}
