//! The live table for people: a title, one row per experiment with each series' value and,
//! after the arrow, the forecast of its next value, and a closing summary.

use super::{Experiment, Heading, RecordSink};
use crate::series::SeriesStats;
use nowcast_core::record::{Metric, Record, Status};
use std::io::{self, Write};

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

pub use crate::format::number;

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

/// The table sink: fixed-width rows, written as they come.
pub struct Table<W: Write> {
    out: W,
    metrics: Vec<Metric>,
    widths: Vec<usize>,
    head: String,
    headed: bool,
}

impl<W: Write> Table<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            metrics: Vec::new(),
            widths: Vec::new(),
            head: String::new(),
            headed: false,
        }
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    fn row(&self, cells: &[String]) -> String {
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

impl<W: Write> RecordSink for Table<W> {
    fn begin(&mut self, h: &Heading) -> io::Result<()> {
        let mut headings = vec!["#".to_string(), "time (UTC)".to_string()];
        headings.extend(h.metrics.iter().map(|m| heading(*m)));
        headings.extend(h.extra.iter().cloned());
        // Wide enough for a clock and for "value →forecast"; the first column is the count.
        self.widths = headings
            .iter()
            .enumerate()
            .map(|(i, h)| h.chars().count().max(if i == 0 { 5 } else { 14 }))
            .collect();
        self.head = self.row(&headings);
        self.metrics = h.metrics.clone();
        writeln!(self.out, "{}", h.title)?;
        self.out.flush()
    }

    fn experiment(&mut self, e: &Experiment<'_>) -> io::Result<()> {
        for note in &e.notes {
            writeln!(self.out, "{note}")?;
        }
        if !self.headed {
            writeln!(self.out, "{}", self.head)?;
            self.headed = true;
        }
        let mut cells = vec![(e.index + 1).to_string(), clock(e.timestamp_ms)];
        for (m, next) in self.metrics.iter().zip(&e.next) {
            let r = e.records.iter().find(|r| r.metric == *m);
            cells.push(cell(r, r.and(*next)));
        }
        cells.extend(e.extra.iter().cloned());
        let row = self.row(&cells);
        writeln!(self.out, "{row}")?;
        self.out.flush()
    }

    fn finish(&mut self, stats: &[SeriesStats]) -> io::Result<()> {
        for s in stats {
            writeln!(
                self.out,
                "{:<24} measured {:>5}  timeouts {:>3}  forecast MAE {}",
                heading(s.metric),
                s.measured,
                s.timeouts,
                s.forecast_mae.map(number).unwrap_or_else(|| "-".into())
            )?;
        }
        self.out.flush()
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
    }
}
