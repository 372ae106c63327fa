//! Output of the periodic probes: a live table for people, NDJSON records for programs
//! (`--json` on standard output, `--out FILE` next to either).

use crate::probe::series_set::SeriesStats;
use nowcast_core::record::{Metric, Record, Status};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since 1970 (UTC), the records' clock.
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

/// `HH:MM:SS.mmm` (UTC) of a record timestamp.
pub fn clock(ts_ms: f64) -> String {
    let ms = ts_ms.max(0.0) as u64;
    let day = ms % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day / 3_600_000,
        day / 60_000 % 60,
        day / 1000 % 60,
        day % 1000
    )
}

/// A value with enough digits to show microseconds in ms and 0.1 % of a rate.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The heading of a metric's column, with its unit.
pub fn heading(metric: Metric) -> String {
    let name = serde_json::to_value(metric)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let unit = serde_json::to_value(metric.unit())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{name} {unit}")
}

/// A table cell: the measurement and, after the arrow, the forecast of the next value.
pub fn cell(record: Option<&Record>, next: Option<f64>) -> String {
    let next = next.map(|f| format!(" →{}", number(f))).unwrap_or_default();
    match record {
        None => "-".into(),
        Some(r) => match (r.status, r.value) {
            (Status::Ok, Some(v)) => format!("{}{next}", number(v)),
            (Status::Timeout, _) => format!(
                "timeout@{}{next}",
                r.timeout_ms.map(number).unwrap_or_default()
            ),
            _ => "error".into(),
        },
    }
}

/// Fixed-width rows, printed as they come.
pub struct Table {
    widths: Vec<usize>,
}

impl Table {
    /// The table and its header line.
    pub fn new(headings: &[String]) -> (Self, String) {
        // Wide enough for a clock and for "value →forecast"; the first column is the count.
        let widths: Vec<usize> = headings
            .iter()
            .enumerate()
            .map(|(i, h)| h.chars().count().max(if i == 0 { 5 } else { 14 }))
            .collect();
        let t = Self { widths };
        let line = t.row(headings);
        (t, line)
    }

    pub fn row(&self, cells: &[String]) -> String {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = self.widths.get(i).copied().unwrap_or(8);
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(&format!("{c:<w$}"));
        }
        out.trim_end().to_string()
    }
}

/// Where records and rows go.
pub struct Sink {
    json: bool,
    out: Option<BufWriter<File>>,
}

impl Sink {
    pub fn new(json: bool, out: Option<&Path>) -> io::Result<Self> {
        let out = match out {
            Some(p) => Some(BufWriter::new(File::create(p).map_err(|e| {
                io::Error::new(e.kind(), format!("{}: create: {e}", p.display()))
            })?)),
            None => None,
        };
        Ok(Self { json, out })
    }

    pub fn json(&self) -> bool {
        self.json
    }

    /// Writes one experiment's records (NDJSON) and, for people, its table row.
    pub fn experiment(&mut self, records: &[Record], row: Option<String>) -> io::Result<()> {
        let stdout = io::stdout();
        let mut stdout = stdout.lock();
        for r in records {
            let line = r.to_line();
            if self.json {
                writeln!(stdout, "{line}")?;
            }
            if let Some(out) = &mut self.out {
                writeln!(out, "{line}")?;
            }
        }
        if let (false, Some(row)) = (self.json, row) {
            writeln!(stdout, "{row}")?;
        }
        for r in records {
            match (r.status, &r.error) {
                (Status::Error, Some(e)) => eprintln!("nowcast: {e}"),
                (Status::Timeout, _) => eprintln!(
                    "nowcast: {}: {} timed out after {} ms",
                    r.to,
                    heading(r.metric),
                    r.timeout_ms.map(number).unwrap_or_default()
                ),
                _ => {}
            }
        }
        stdout.flush()?;
        if let Some(out) = &mut self.out {
            out.flush()?;
        }
        Ok(())
    }

    /// The closing summary, for people only.
    pub fn summary(&self, stats: &[SeriesStats]) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        let mut stdout = io::stdout().lock();
        for s in stats {
            writeln!(
                stdout,
                "{:<24} measured {:>5}  timeouts {:>3}  forecast MAE {}",
                heading(s.metric),
                s.measured,
                s.timeouts,
                s.forecast_mae.map(number).unwrap_or_else(|| "-".into())
            )?;
        }
        stdout.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_show_value_and_next_forecast() {
        let mut r = Record::new(0.0, "nowcast tcp", Metric::Rtt, 0.0523, "h:1");
        assert_eq!(cell(Some(&r), Some(0.05)), "0.052 →0.050");
        r.status = Status::Timeout;
        r.value = None;
        r.timeout_ms = Some(1000.0);
        assert_eq!(cell(Some(&r), None), "timeout@1000");
        assert_eq!(cell(None, None), "-");
        assert_eq!(clock(1_700_000_123_456.0), "22:15:23.456");
        assert_eq!(heading(Metric::BandwidthUp), "bandwidth_up Mbit/s");
        let (t, head) = Table::new(&["#".into(), "rtt ms".into()]);
        assert_eq!(head, "#      rtt ms");
        assert_eq!(t.row(&["1".into(), "0.1".into()]), "1      0.1");
    }
}
