//! What a probe command measured, per series, as ping's closing lines and mtr's report give
//! it: probes sent, the share lost (timed out or failed), min/avg/max/mdev of the values
//! measured (mdev as ping computes it: the standard deviation over all values), and the
//! forecast of the next value with its range, ± 2·error as on the page (error: the RMSE of
//! the MSE-selected forecast). The same tally says whether the run measured anything, which
//! sets the command's exit status.

use super::Experiment;
use crate::format::Scale;
use nowcast_core::record::{Metric, Record, RecordForecast, Status, Unit};

pub use crate::format::BAND_K;

/// One series' figures so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub metric: Metric,
    /// Probes with a record (a UDP burst without two replies has no jitter record).
    pub sent: u64,
    pub ok: u64,
    pub timeouts: u64,
    pub errors: u64,
    pub min: f64,
    pub max: f64,
    mean: f64,
    /// Sum of squared deviations from the mean (Welford).
    m2: f64,
    /// The last value measured.
    pub last: Option<f64>,
    /// The forecast of the next value after the last experiment.
    pub next: Option<RecordForecast>,
}

impl Tally {
    fn new(metric: Metric) -> Self {
        Self {
            metric,
            sent: 0,
            ok: 0,
            timeouts: 0,
            errors: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            mean: 0.0,
            m2: 0.0,
            last: None,
            next: None,
        }
    }

    fn record(&mut self, r: &Record) {
        self.sent += 1;
        match (r.status, r.value) {
            (Status::Ok, Some(v)) => {
                self.ok += 1;
                let d = v - self.mean;
                self.mean += d / self.ok as f64;
                self.m2 += d * (v - self.mean);
                self.min = self.min.min(v);
                self.max = self.max.max(v);
                self.last = Some(v);
            }
            (Status::Timeout, _) => self.timeouts += 1,
            _ => self.errors += 1,
        }
    }

    /// Mean of the values measured.
    pub fn avg(&self) -> Option<f64> {
        (self.ok > 0).then_some(self.mean)
    }

    /// ping's mdev: the standard deviation of the values measured (over n, not n − 1).
    pub fn mdev(&self) -> Option<f64> {
        (self.ok > 0).then(|| (self.m2 / self.ok as f64).max(0.0).sqrt())
    }

    /// The share of probes that timed out or failed.
    pub fn lost(&self) -> Option<f64> {
        (self.sent > 0).then(|| (self.timeouts + self.errors) as f64 / self.sent as f64)
    }
}

/// The tallies of a run's series, in the order of the heading.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// What was probed, named in the closing rule (e.g. `nowcast udp → host:8060`).
    pub what: Option<String>,
    pub experiments: u64,
    pub tallies: Vec<Tally>,
}

impl Summary {
    pub fn new(metrics: &[Metric]) -> Self {
        Self {
            what: None,
            experiments: 0,
            tallies: metrics.iter().map(|&m| Tally::new(m)).collect(),
        }
    }

    /// Counts one experiment's records; `e.next` is in the order of the metrics given to
    /// [`Summary::new`]. A metric not given there gets its tally after theirs.
    pub fn experiment(&mut self, e: &Experiment<'_>) {
        self.experiments += 1;
        for r in e.records {
            match self.tallies.iter_mut().find(|t| t.metric == r.metric) {
                Some(t) => t.record(r),
                None => {
                    let mut t = Tally::new(r.metric);
                    t.record(r);
                    self.tallies.push(t);
                }
            }
        }
        for (t, next) in self.tallies.iter_mut().zip(&e.next) {
            if next.is_some() {
                t.next = next.clone();
            }
        }
    }

    /// The series probed whose every probe timed out or failed.
    pub fn unmeasured(&self) -> Vec<&Tally> {
        self.tallies
            .iter()
            .filter(|t| t.sent > 0 && t.ok == 0)
            .collect()
    }

    /// The closing lines: a rule naming the number of experiments, a heading, then one
    /// aligned row per series that was probed.
    pub fn lines(&self) -> Vec<String> {
        let plural = if self.experiments == 1 { "" } else { "s" };
        let what = self
            .what
            .as_ref()
            .map(|w| format!("{w}: "))
            .unwrap_or_default();
        let mut out = vec![format!(
            "--- {what}{} experiment{plural} ---",
            self.experiments
        )];
        let rows: Vec<[String; 8]> = self
            .tallies
            .iter()
            .filter(|t| t.sent > 0)
            .map(row)
            .collect();
        let head = [
            "series",
            "sent",
            "lost",
            "min",
            "avg",
            "max",
            "mdev",
            "next (± 2·error)",
        ]
        .map(String::from);
        let mut widths = head.clone().map(|h| h.chars().count());
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        for r in std::iter::once(&head).chain(&rows) {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
                let pad = w - c.chars().count();
                match i {
                    0 => line.push_str(&format!("{c}{}", " ".repeat(pad))),
                    7 => line.push_str(&format!("  {c}")),
                    _ => line.push_str(&format!("  {}{c}", " ".repeat(pad))),
                }
            }
            out.push(line.trim_end().to_string());
        }
        out
    }
}

/// A series' row: its name with the unit of its figures, then the figures in that unit.
fn row(t: &Tally) -> [String; 8] {
    let unit = t.metric.unit();
    let magnitude = [t.max.abs(), t.min.abs()]
        .into_iter()
        .chain(t.next.as_ref().map(|f| f.value.abs()))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let s = Scale::of(unit, magnitude);
    let some = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| s.num(v));
    let has = t.ok > 0;
    [
        format!("{} {}", t.metric, s.name),
        t.sent.to_string(),
        // A loss record is never lost: its value is the share of the burst that was.
        t.lost()
            .filter(|_| unit != Unit::Fraction)
            .map_or_else(|| "-".into(), |l| format!("{}%", crate::format::percent(l))),
        some(has.then_some(t.min)),
        some(t.avg()),
        some(has.then_some(t.max)),
        some(t.mdev()),
        // Before any value, the forecast is only of timeouts fed back: not shown. After one,
        // there is no error yet to give its range (a "± 0" would claim certainty).
        t.next.as_ref().filter(|_| has).map_or_else(
            || "-".into(),
            |f| {
                if nowcast_core::record::error_known(t.ok, f.error) {
                    format!("{} ± {}", s.num(f.value), s.num(BAND_K * f.error))
                } else {
                    format!("{} ± ?", s.num(f.value))
                }
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use nowcast_core::record::Selector;

    fn rec(metric: Metric, v: Option<f64>, status: Status) -> Record {
        let mut r = Record::new(0.0, "nowcast tcp", metric, v.unwrap_or(0.0), "h:1");
        r.value = v;
        r.status = status;
        r
    }

    #[test]
    fn min_avg_max_mdev_loss_and_the_next_forecast_as_ping_and_mtr_give_them() {
        let mut s = Summary::new(&[Metric::Rtt, Metric::BandwidthUp, Metric::Jitter]);
        let values = [1.0, 2.0, 4.0];
        for (i, v) in values.iter().enumerate() {
            let records = [
                rec(Metric::Rtt, Some(*v), Status::Ok),
                rec(
                    Metric::BandwidthUp,
                    Some(900.0 + 100.0 * i as f64),
                    Status::Ok,
                ),
            ];
            let next = RecordForecast {
                value: 2.5,
                method: "last_value".into(),
                selector: Selector::Mse,
                error: 0.25,
            };
            s.experiment(&Experiment {
                index: i as u64,
                timestamp_ms: 0.0,
                records: &records,
                next: vec![
                    Some(next.clone()),
                    Some(RecordForecast {
                        value: 1100.0,
                        ..next
                    }),
                    None,
                ],
                extra: vec![],
                notes: vec![],
            });
        }
        let timeout = [rec(Metric::Rtt, None, Status::Timeout)];
        s.experiment(&Experiment {
            index: 3,
            timestamp_ms: 0.0,
            records: &timeout,
            next: vec![None, None, None],
            extra: vec![],
            notes: vec![],
        });
        let rtt = &s.tallies[0];
        assert_eq!((rtt.sent, rtt.ok, rtt.timeouts), (4, 3, 1));
        assert_eq!((rtt.min, rtt.avg(), rtt.max), (1.0, Some(7.0 / 3.0), 4.0));
        // ping's mdev: sqrt(mean of squares − square of mean).
        let mdev = ((1.0 + 4.0 + 16.0) / 3.0 - (7.0f64 / 3.0).powi(2)).sqrt();
        assert!((rtt.mdev().unwrap() - mdev).abs() < 1e-12);
        assert_eq!(rtt.lost(), Some(0.25));
        assert!(s.unmeasured().is_empty());
        let lines = s.lines();
        assert_eq!(lines[0], "--- 4 experiments ---");
        assert!(lines[1].starts_with("series") && lines[1].ends_with("next (± 2·error)"));
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            [
                "rtt", "ms", "4", "25.0%", "1.000", "2.333", "4.000", "1.247", "2.500", "±",
                "0.500"
            ]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            [
                "bandwidth_up",
                "Gbit/s",
                "3",
                "0.0%",
                "0.900",
                "1.00",
                "1.10",
                "0.0816",
                "1.10",
                "±",
                "0.000500"
            ]
        );
        assert_eq!(lines.len(), 4, "jitter was never probed: {lines:?}");
        assert_eq!(
            lines[1].find("lost").unwrap() + 4,
            lines[2].find("25.0%").unwrap() + 5,
            "right-aligned under their heading"
        );
    }

    #[test]
    fn a_series_whose_every_probe_failed_is_unmeasured() {
        let mut s = Summary::new(&[Metric::HandshakeRtt, Metric::Rtt]);
        let records = [rec(Metric::HandshakeRtt, None, Status::Error)];
        s.experiment(&Experiment {
            index: 0,
            timestamp_ms: 0.0,
            records: &records,
            next: vec![None, None],
            extra: vec![],
            notes: vec![],
        });
        let un: Vec<Metric> = s.unmeasured().iter().map(|t| t.metric).collect();
        assert_eq!(un, [Metric::HandshakeRtt]);
        assert!(s.lines()[2].contains("100.0%"), "{:?}", s.lines());
    }
}
