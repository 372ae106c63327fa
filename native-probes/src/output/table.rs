//! The live table for people: a title, one row per experiment with each series' value and,
//! after the arrow, the forecast of its next value, and a closing summary per series
//! ([`Summary`]: sent, lost, min/avg/max/mdev, the next forecast ± 2·error). Rates are
//! scaled per value (kbit/s, Mbit/s, Gbit/s), loss is in percent.

use super::summary::Summary;
use super::{Experiment, Heading, RecordSink};
use crate::format::Scale;
use crate::series::SeriesStats;
use nowcast_core::record::{Metric, Record, RecordForecast, Status, Unit};
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

/// The heading of a metric's table column: its name and the unit its cells are in; a rate's
/// cells carry their own unit (each scaled to its size).
pub fn column(metric: Metric) -> String {
    match metric.unit() {
        Unit::MbitPerS => metric.to_string(),
        Unit::Fraction => format!("{metric} %"),
        Unit::Ms => format!("{metric} ms"),
    }
}

/// A metric's name with the unit of its records (as in messages about a probe).
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

/// A table cell: the measurement and, after the arrow, the forecast of the next value, in
/// the unit of [`column`] (`0.052 →0.050`, loss `1.0 →0.5`) or, for a rate, in the unit
/// its measurement is scaled to (`2.35 Gbit/s →2.40`). A timeout names the timeout, in the
/// column's unit where it is ms (`timeout@3000 →4001`), else with it (`timeout@15000ms`).
pub fn cell(record: Option<&Record>, next: Option<f64>) -> String {
    let Some(r) = record else {
        return "-".into();
    };
    let unit = r.metric.unit();
    let scale = Scale::of(unit, r.value.or(next).unwrap_or(0.0));
    let next = next
        .map(|f| format!(" →{}", scale.num(f)))
        .unwrap_or_default();
    match (r.status, r.value) {
        (Status::Ok, Some(v)) if unit == Unit::MbitPerS => {
            format!("{}{next}", scale.with_unit(v))
        }
        (Status::Ok, Some(v)) => format!("{}{next}", scale.num(v)),
        (Status::Timeout, _) => format!(
            "timeout@{}{}{next}",
            r.timeout_ms.map(number).unwrap_or_default(),
            if unit == Unit::Ms { "" } else { "ms" }
        ),
        _ => "error".into(),
    }
}

/// The table sink: fixed-width rows, written as they come.
pub struct Table<W: Write> {
    out: W,
    metrics: Vec<Metric>,
    widths: Vec<usize>,
    head: String,
    headed: bool,
    summary: Summary,
}

impl<W: Write> Table<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            metrics: Vec::new(),
            widths: Vec::new(),
            head: String::new(),
            headed: false,
            summary: Summary::default(),
        }
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    /// Cells at their columns' places; a cell wider than its column (a timeout, say) pushes
    /// the next one right, and the columns after find their places again.
    fn row(&self, cells: &[String]) -> String {
        let mut out = String::new();
        let (mut len, mut place) = (0usize, 0usize);
        for (i, c) in cells.iter().enumerate() {
            let w = self.widths.get(i).copied().unwrap_or(8);
            if i > 0 {
                let pad = place.saturating_sub(len).max(2);
                out.push_str(&" ".repeat(pad));
                len += pad;
            }
            out.push_str(c);
            len += c.chars().count();
            place += w + 2;
        }
        out.trim_end().to_string()
    }
}

impl<W: Write> RecordSink for Table<W> {
    fn begin(&mut self, h: &Heading) -> io::Result<()> {
        let mut headings = vec!["#".to_string(), "time (UTC)".to_string()];
        headings.extend(h.metrics.iter().map(|m| column(*m)));
        headings.extend(h.extra.iter().cloned());
        // Wide enough for a clock and for "value →forecast" ("2.35 Gbit/s →2.40" for a
        // rate); the first column is the count, the extra ones are counts too.
        let least = |i: usize| match i {
            0 => 5,
            1 => 12,
            i if i < 2 + h.metrics.len() => match h.metrics[i - 2].unit() {
                Unit::MbitPerS => 18,
                _ => 13,
            },
            _ => 5,
        };
        self.widths = headings
            .iter()
            .enumerate()
            .map(|(i, h)| h.chars().count().max(least(i)))
            .collect();
        self.head = self.row(&headings);
        self.metrics = h.metrics.clone();
        self.summary = Summary::new(&h.metrics);
        // "nowcast udp → host:port (address), …" is named by its first part.
        let what = h.title.split(" (").next().unwrap_or_default();
        let what = what.split(", ").next().unwrap_or_default().trim();
        self.summary.what = (!what.is_empty()).then(|| what.to_string());
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
        for (i, (m, next)) in self.metrics.iter().zip(&e.next).enumerate() {
            let r = e.records.iter().find(|r| r.metric == *m);
            let next = next.as_ref().map(|f: &RecordForecast| f.value);
            let mut c = cell(r, r.and(next));
            // A cell too wide for its column (a timeout with its forecast, `timeout@10000
            // →11008`) leaves the forecast out rather than push the row's other cells right.
            if c.chars().count() > self.widths.get(i + 2).copied().unwrap_or(0) {
                c = cell(r, None);
            }
            cells.push(c);
        }
        cells.extend(e.extra.iter().cloned());
        let row = self.row(&cells);
        writeln!(self.out, "{row}")?;
        self.summary.experiment(e);
        self.out.flush()
    }

    fn finish(&mut self, _: &[SeriesStats]) -> io::Result<()> {
        if self.summary.experiments > 0 {
            for line in self.summary.lines() {
                writeln!(self.out, "{line}")?;
            }
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
        assert_eq!(cell(Some(&r), Some(1500.0)), "timeout@1000 →1500");
        assert_eq!(cell(None, None), "-");
        assert_eq!(clock(1_700_000_123_456.0), "22:15:23.456");
        assert_eq!(heading(Metric::BandwidthUp), "bandwidth_up Mbit/s");
        assert_eq!(column(Metric::BandwidthUp), "bandwidth_up");
        assert_eq!(column(Metric::Loss), "loss %");
        let bw = Record::new(0.0, "nowcast tcp", Metric::BandwidthUp, 23_083.0, "h:1");
        assert_eq!(cell(Some(&bw), Some(22_950.0)), "23.1 Gbit/s →22.9");
        let bw = Record::new(0.0, "nowcast tcp", Metric::BandwidthUp, 0.512, "h:1");
        assert_eq!(cell(Some(&bw), Some(0.5)), "512 kbit/s →500");
        let loss = Record::new(0.0, "nowcast udp", Metric::Loss, 0.03, "h:1");
        assert_eq!(cell(Some(&loss), Some(0.01)), "3.0 →1.0");
    }

    /// A session whose every step timed out or was not tried, as against a host that drops
    /// everything: each cell within its column, the columns where the heading puts them.
    #[test]
    fn timeouts_fit_their_columns() {
        let metrics = [
            Metric::HandshakeRtt,
            Metric::Rtt,
            Metric::RttNagle,
            Metric::BandwidthUp,
        ];
        let mut t = Table::new(Vec::new());
        t.begin(&Heading {
            title: "nowcast tcp → 10.78.0.2:8060".into(),
            metrics: metrics.to_vec(),
            extra: Vec::new(),
        })
        .unwrap();
        for (i, timeout) in [3_000.0, 10_000.0, 45_000.0].into_iter().enumerate() {
            let mut records = Vec::new();
            for m in metrics {
                let mut r = Record::new(0.0, "nowcast tcp", m, 0.0, "10.78.0.2:8060");
                r.value = None;
                if m == Metric::HandshakeRtt || m == Metric::BandwidthUp {
                    r.status = Status::Timeout;
                    r.timeout_ms = Some(timeout);
                } else {
                    r.status = Status::Error;
                }
                records.push(r);
            }
            let next = Some(RecordForecast {
                value: timeout + 1_008.0,
                method: "last_value".into(),
                selector: nowcast_core::record::Selector::Mse,
                error: 0.0,
            });
            t.experiment(&Experiment {
                index: i as u64,
                timestamp_ms: 0.0,
                records: &records,
                next: vec![next.clone(), None, None, next],
                extra: vec![],
                notes: vec![],
            })
            .unwrap();
        }
        let out = String::from_utf8(t.into_inner()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        let at = |l: &str, w: &str| l.find(w).map(|b| l[..b].chars().count());
        let head = lines[1];
        for row in &lines[2..5] {
            assert_eq!(at(row, "timeout@"), at(head, "handshake_rtt ms"), "{out}");
            assert_eq!(at(row, " error"), at(head, " rtt ms"), "{out}");
            let last = row.rfind("timeout@").map(|b| row[..b].chars().count());
            assert_eq!(last, at(head, "bandwidth_up"), "{out}");
            assert!(row.ends_with("ms"), "{out}");
        }
        assert!(lines[2].contains("timeout@3000  "), "{out}");
        assert!(lines[4].contains("timeout@45000  "), "{out}");
        assert!(lines[4].ends_with("timeout@45000ms"), "{out}");
    }
}
