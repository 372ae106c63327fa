//! Where a probe command's results go: one [`RecordSink`] trait (ripgrep's `Sink`) with a
//! table for people ([`Table`]), NDJSON records for programs ([`Ndjson`], on standard output
//! or in a file) and a [`Tee`] that feeds two sinks; the archive ([`crate::archive::Archive`])
//! is one more sink.
//!
//! A sink writes to any `io::Write`; a broken pipe is an error like any other here, and the
//! command turns it into a quiet success ([`is_broken_pipe`]).

mod ndjson;
mod summary;
mod table;

pub use ndjson::Ndjson;
pub use summary::{Summary, Tally, BAND_K};
pub use table::{cell, clock, column, heading, number, Table};

use crate::series::SeriesStats;
use nowcast_core::record::{Metric, Record, RecordForecast};
use std::io;

/// What a command measures, known before its first experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct Heading {
    /// One line saying what is probed, for people.
    pub title: String,
    /// The series, one column each.
    pub metrics: Vec<Metric>,
    /// Further columns of figures that are not series (e.g. a burst's reordered replies).
    pub extra: Vec<String>,
}

/// One experiment's results.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment<'a> {
    /// 0-based number of the experiment.
    pub index: u64,
    pub timestamp_ms: f64,
    /// The records, in the order the probes ran.
    pub records: &'a [Record],
    /// The forecast of each series' next value with its error, in [`Heading::metrics`]
    /// order.
    pub next: Vec<Option<RecordForecast>>,
    /// The cells of [`Heading::extra`].
    pub extra: Vec<String>,
    /// Lines for people to read before the row (e.g. the socket buffers granted).
    pub notes: Vec<String>,
}

/// Takes a command's results as they come.
pub trait RecordSink {
    /// Before the first experiment.
    fn begin(&mut self, heading: &Heading) -> io::Result<()>;
    /// After each experiment.
    fn experiment(&mut self, e: &Experiment<'_>) -> io::Result<()>;
    /// After the last experiment, with each series' counts.
    fn finish(&mut self, stats: &[SeriesStats]) -> io::Result<()>;
}

impl<S: RecordSink + ?Sized> RecordSink for Box<S> {
    fn begin(&mut self, heading: &Heading) -> io::Result<()> {
        (**self).begin(heading)
    }
    fn experiment(&mut self, e: &Experiment<'_>) -> io::Result<()> {
        (**self).experiment(e)
    }
    fn finish(&mut self, stats: &[SeriesStats]) -> io::Result<()> {
        (**self).finish(stats)
    }
}

/// Feeds two sinks alike (e.g. the table on standard output and NDJSON in a file).
pub struct Tee<A, B>(pub A, pub B);

impl<A: RecordSink, B: RecordSink> RecordSink for Tee<A, B> {
    fn begin(&mut self, heading: &Heading) -> io::Result<()> {
        self.0.begin(heading)?;
        self.1.begin(heading)
    }
    fn experiment(&mut self, e: &Experiment<'_>) -> io::Result<()> {
        self.0.experiment(e)?;
        self.1.experiment(e)
    }
    fn finish(&mut self, stats: &[SeriesStats]) -> io::Result<()> {
        self.0.finish(stats)?;
        self.1.finish(stats)
    }
}

/// Whether `e` (or its cause) is a write to a reader that has gone, such as `head`: the
/// command then stops quietly and succeeds, as a Unix filter does.
pub fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use nowcast_core::record::Status;

    fn experiment(records: &[Record]) -> Experiment<'_> {
        Experiment {
            index: 0,
            timestamp_ms: 1_700_000_123_456.0,
            records,
            next: vec![
                Some(RecordForecast {
                    value: 0.05,
                    method: "last_value".into(),
                    selector: nowcast_core::record::Selector::Mse,
                    error: 0.01,
                }),
                None,
            ],
            extra: vec!["3".into()],
            notes: vec!["buffers granted: 1".into()],
        }
    }

    #[test]
    fn the_table_for_people_and_ndjson_for_programs_see_the_same_experiment() {
        let heading = Heading {
            title: "nowcast tcp → h:1".into(),
            metrics: vec![Metric::Rtt, Metric::BandwidthUp],
            extra: vec!["lost".into()],
        };
        let mut rtt = Record::new(1.7e12, "nowcast tcp", Metric::Rtt, 0.0523, "h:1");
        rtt.seq = Some(0);
        let mut bw = Record::new(1.7e12, "nowcast tcp", Metric::BandwidthUp, 0.0, "h:1");
        bw.status = Status::Timeout;
        bw.value = None;
        bw.timeout_ms = Some(15_000.0);
        let records = [rtt.clone(), bw];
        let stats = [SeriesStats {
            metric: Metric::Rtt,
            measured: 1,
            timeouts: 0,
            forecast_mae: None,
        }];
        let mut both = Tee(Table::new(Vec::new()), Ndjson::new(Vec::new()));
        both.begin(&heading).unwrap();
        both.experiment(&experiment(&records)).unwrap();
        both.finish(&stats).unwrap();
        let Tee(table, ndjson) = both;
        let table = String::from_utf8(table.into_inner()).unwrap();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "nowcast tcp → h:1");
        assert_eq!(lines[1], "buffers granted: 1");
        assert!(
            lines[2].starts_with("#      time (UTC)    rtt ms"),
            "{table}"
        );
        assert!(
            lines[3].contains("0.052 →0.050") && lines[3].contains("timeout@15000"),
            "{table}"
        );
        assert!(lines[3].ends_with("  3"), "{table}");
        assert_eq!(
            lines[4], "--- nowcast tcp → h:1: 1 experiment ---",
            "{table}"
        );
        assert_eq!(
            lines[6].split_whitespace().collect::<Vec<_>>(),
            ["rtt", "ms", "1", "0.0%", "0.052", "0.052", "0.052", "0.000", "0.050", "±", "0.020"],
            "{table}"
        );
        assert!(
            lines[7].starts_with("bandwidth_up Mbit/s") && lines[7].contains("100.0%"),
            "{table}"
        );
        let ndjson = String::from_utf8(ndjson.into_inner()).unwrap();
        let parsed: Vec<Record> = ndjson.lines().map(|l| Record::parse(l).unwrap()).collect();
        assert_eq!(parsed, records);
    }

    #[test]
    fn a_broken_pipe_is_recognised_through_its_context() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(e.as_ref()));
        let other = anyhow::anyhow!("no probe succeeded");
        assert!(!is_broken_pipe(other.as_ref()));
    }
}
