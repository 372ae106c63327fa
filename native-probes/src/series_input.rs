//! Reading one series of numbers from a file for `nowcast forecast`: the streaming edge of
//! the core's reader of measurement files (`nowcast_core::import`, which the page reads its
//! imports with too). This module only cuts the input into lines, never holding more than
//! [`MAX_LINE`] bytes of one (a longer line is named by its number and never held whole),
//! chooses what stops the read, and counts; the formats, their detection, the range checks
//! and the choice of one series among several are the core's. A JSON document (iperf3, irtt,
//! mtr output) is gathered by the core up to `nowcast_core::import::MAX_DOCUMENT` bytes.
//!
//! A malformed line stops the read with its line number and the start of its text (at most
//! [`QUOTE_CHARS`] characters are ever quoted) unless the caller asked to skip bad lines, in
//! which case they are counted.

use nowcast_core::import::{self, LineError, Problem, Reader, Select, SeriesInfo, Sink};
use nowcast_core::json::SerdeJson;
use nowcast_core::record::{Metric, Transport};
use std::fmt;
use std::io::{BufRead, Read};

pub use nowcast_core::import::{Column, MAX_LINE};
pub use nowcast_core::quote::QUOTE_CHARS;

/// The layout of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Decide from the content.
    Auto,
    /// Measurement records, one JSON object a line.
    Ndjson,
    /// Comma-separated values, with or without a header (the page's export too).
    Csv,
    /// `time<TAB>value`, or any tab-separated columns.
    Tsv,
    /// One number a line.
    Plain,
    /// iperf3 -J output.
    Iperf3,
    /// ping output (Linux iputils).
    Ping,
    /// mtr --json reports.
    Mtr,
    /// irtt JSON output.
    Irtt,
    /// sockperf --full-log files.
    Sockperf,
}

impl Format {
    fn core(self) -> Option<import::Format> {
        match self {
            Format::Auto => None,
            Format::Ndjson => Some(import::Format::Ndjson),
            Format::Csv => Some(import::Format::Csv),
            Format::Tsv => Some(import::Format::Tsv),
            Format::Plain => Some(import::Format::Plain),
            Format::Iperf3 => Some(import::Format::Iperf3),
            Format::Ping => Some(import::Format::Ping),
            Format::Mtr => Some(import::Format::Mtr),
            Format::Irtt => Some(import::Format::Irtt),
            Format::Sockperf => Some(import::Format::Sockperf),
        }
    }
}

/// A column given on the command line: a 0-based index, else a header name.
pub fn parse_column(s: &str) -> Result<Column, String> {
    Ok(match s.parse::<usize>() {
        Ok(i) => Column::Index(i),
        Err(_) if !s.is_empty() => Column::Name(s.to_string()),
        Err(_) => return Err("a column is a name or a 0-based index".into()),
    })
}

/// Options for reading.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    pub format: Format,
    /// Which series of the file: the first that matches (by default, the first series;
    /// in CSV, the column named `value`, else the last column of numbers).
    pub select: Select,
    pub skip_bad: bool,
    /// The longest line read, bytes ([`MAX_LINE`] unless a test wants less).
    pub max_line: usize,
}

/// A series of the file that was not read, and how to choose it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OtherSeries {
    pub name: String,
    /// Its values, where they were counted (not for CSV columns, which are not read).
    pub values: Option<u64>,
    /// The options that choose it, e.g. `--metric bandwidth_down --target h:443`.
    pub choose: String,
}

/// What the reader saw besides the values.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct ReadStats {
    pub format: String,
    /// Lines read, blank lines and comments included.
    pub lines: u64,
    pub values: u64,
    /// Bad lines skipped with `--skip-bad`.
    pub skipped_bad: u64,
    /// Records whose probe timed out or failed, and empty CSV fields of the column read: no
    /// value.
    pub without_value: u64,
    /// The series read: its name, metric, target, transport and CSV column where known.
    pub series: Option<String>,
    pub metric: Option<Metric>,
    pub target: Option<String>,
    pub transport: Option<Transport>,
    pub column: Option<String>,
    /// The file's other series (at most [`LISTED_SERIES`]) and how many there were (at least
    /// that many when `other_series_more`: past `nowcast_core::import::MAX_KEYS` series are
    /// no longer told apart; [`ReadStats::other_series_total`] says which).
    pub other_series: Vec<OtherSeries>,
    pub other_series_count: usize,
    pub other_series_more: bool,
    /// What the reader said besides errors (columns of text left out, missing times).
    pub notes: Vec<String>,
    /// The first [`BAD_LINES_KEPT`] of the bad lines skipped, each with what is wrong.
    #[serde(skip)]
    pub bad_lines: Vec<LineError>,
}

impl ReadStats {
    /// How many other series the file has, as said to a person: "3", or "more than 65535".
    pub fn other_series_total(&self) -> String {
        let more = if self.other_series_more {
            "more than "
        } else {
            ""
        };
        format!("{more}{}", self.other_series_count)
    }
}

/// Other series listed, at most.
pub const LISTED_SERIES: usize = 20;

/// Bad lines skipped (`--skip-bad`) kept to be shown with what is wrong with each; the rest
/// are counted.
pub const BAD_LINES_KEPT: usize = 5;

/// Why reading stopped.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Bad(LineError),
    /// The file is in no format read, or the options do not fit it.
    Usage(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Bad(b) => write!(f, "{b} (use --skip-bad to skip such lines)"),
            ReadError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// A line, or what is known of one too long to keep.
pub enum Line<'a> {
    Text(&'a [u8]),
    /// Longer than the limit: its first bytes (up to the limit) and nothing more.
    TooLong(&'a [u8]),
}

/// The lines of a reader, each at most `max` bytes held, numbered from 1, without their
/// newline (and the first without a UTF-8 byte order mark).
pub struct Lines<R> {
    input: R,
    buf: Vec<u8>,
    max: usize,
    number: u64,
}

/// The UTF-8 byte order mark.
pub const BOM: &[u8] = b"\xef\xbb\xbf";

impl<R: BufRead> Lines<R> {
    pub fn new(input: R, max: usize) -> Self {
        Self {
            input,
            buf: Vec::new(),
            max,
            number: 0,
        }
    }

    /// The next line (without its newline) and its number; `None` at the end.
    pub fn next_line(&mut self) -> std::io::Result<Option<(u64, Line<'_>)>> {
        self.buf.clear();
        let (mut any, mut too_long) = (false, false);
        loop {
            let avail = match self.input.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                break;
            }
            any = true;
            let newline = avail.iter().position(|&b| b == b'\n');
            let len = newline.unwrap_or(avail.len());
            // Past the limit, the rest of the line is skipped, never kept.
            let room = self.max - self.buf.len();
            too_long |= len > room;
            self.buf.extend_from_slice(&avail[..len.min(room)]);
            self.input.consume(len + usize::from(newline.is_some()));
            if newline.is_some() {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number += 1;
        // A UTF-8 byte order mark (as some Windows tools write) is not part of the first
        // line: left in, it would make a header "\u{feff}time", or a first value text.
        if self.number == 1 && self.buf.starts_with(BOM) {
            self.buf.drain(..BOM.len());
        }
        let line = if too_long {
            Line::TooLong(&self.buf)
        } else {
            Line::Text(&self.buf)
        };
        Ok(Some((self.number, line)))
    }
}

/// The core reader's output, as the command takes it: values to `sink`, the first bad line
/// either stops the read or is counted.
struct Edge<F> {
    sink: F,
    stats: ReadStats,
    skip_bad: bool,
    stop: Option<ReadError>,
}

impl<F: FnMut(f64)> Sink for Edge<F> {
    fn point(&mut self, _series: usize, _t_ms: f64, value: f64) {
        self.stats.values += 1;
        (self.sink)(value);
    }

    fn problem(&mut self, problem: Problem) {
        if self.stop.is_some() {
            return;
        }
        match problem {
            Problem::Line(e) if self.skip_bad => {
                self.stats.skipped_bad += 1;
                if self.stats.bad_lines.len() < BAD_LINES_KEPT {
                    self.stats.bad_lines.push(e);
                }
            }
            Problem::Line(e) => self.stop = Some(ReadError::Bad(e)),
            Problem::Unsupported(m) | Problem::Usage(m) => self.stop = Some(ReadError::Usage(m)),
        }
    }
}

/// The options that choose `s` among the file's series (`all`): its source only when another
/// series differs from it by nothing else.
fn choose(s: &SeriesInfo, all: &[SeriesInfo]) -> String {
    let mut flags = Vec::new();
    if let Some(c) = &s.column {
        flags.push(format!("--column {c:?}"));
    }
    if let Some(m) = s.metric {
        flags.push(format!("--metric {m}"));
    }
    if let Some(t) = s.transport {
        flags.push(format!("--transport {t}"));
    }
    // With the service it came from, when it has one: the target its name gives.
    if s.to.is_some() {
        flags.push(format!("--target {:?}", s.target()));
    }
    let alike = |o: &SeriesInfo| {
        (o.metric, o.transport, o.target(), &o.column)
            == (s.metric, s.transport, s.target(), &s.column)
    };
    if let Some(source) = s
        .source
        .as_ref()
        .filter(|_| all.iter().filter(|o| alike(o)).count() > 1)
    {
        flags.push(format!("--source {source:?}"));
    }
    flags.join(" ")
}

/// Reads `input`, calling `sink` with each value of the chosen series in order; returns what
/// it saw.
pub fn read_values<R: Read>(
    input: R,
    opts: &ReadOptions,
    sink: impl FnMut(f64),
) -> Result<ReadStats, ReadError> {
    let mut lines = Lines::new(
        std::io::BufReader::with_capacity(1 << 16, input),
        opts.max_line.max(1),
    );
    let mut reader = Reader::new(
        SerdeJson,
        import::Options {
            format: opts.format.core(),
            select: Some(opts.select.clone()),
            max_line: opts.max_line.max(1),
        },
    );
    let mut edge = Edge {
        sink,
        stats: ReadStats::default(),
        skip_bad: opts.skip_bad,
        stop: None,
    };
    while let Some((number, line)) = lines.next_line()? {
        edge.stats.lines += 1;
        match line {
            Line::Text(bytes) => reader.line(number, bytes, &mut edge),
            Line::TooLong(start) => reader.too_long(number, start, &mut edge),
        }
        if edge.stop.is_some() || reader.stopped() {
            break;
        }
    }
    reader.finish(&mut edge);
    if let Some(e) = edge.stop {
        return Err(e);
    }
    let mut stats = edge.stats;
    stats.format = reader
        .format()
        .or(opts.format.core())
        .map_or("unknown", import::Format::name)
        .to_string();
    stats.without_value = reader.without_value();
    stats.notes = reader.notes();
    let chosen = reader.chosen();
    if let Some(s) = chosen.map(|i| &reader.series()[i]) {
        stats.series = Some(s.name.clone());
        stats.metric = s.metric;
        stats.target = s.to.clone();
        stats.transport = s.transport;
        stats.column = s.column.clone();
    }
    let others: Vec<(usize, &SeriesInfo)> = reader
        .series()
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != chosen)
        .collect();
    let (left_out, more) = reader.series_left_out();
    stats.other_series_count = others.len() + usize::try_from(left_out).unwrap_or(usize::MAX);
    stats.other_series_more = more;
    stats.other_series = others
        .into_iter()
        .take(LISTED_SERIES)
        .map(|(i, s)| OtherSeries {
            name: s.name.clone(),
            values: Some(reader.counts()[i]).filter(|_| s.column.is_none()),
            choose: choose(s, reader.series()),
        })
        .collect();
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(format: Format, column: Option<&str>, skip_bad: bool) -> ReadOptions {
        ReadOptions {
            format,
            select: Select {
                column: column.map(|c| parse_column(c).unwrap()),
                ..Select::default()
            },
            skip_bad,
            max_line: 4096,
        }
    }

    fn read(
        text: &str,
        format: Format,
        column: Option<&str>,
        skip_bad: bool,
    ) -> Result<(Vec<f64>, ReadStats), ReadError> {
        let mut out = Vec::new();
        let stats = read_values(text.as_bytes(), &opts(format, column, skip_bad), |v| {
            out.push(v)
        })?;
        Ok((out, stats))
    }

    #[test]
    fn detects_every_line_format() {
        let (v, s) = read("# comment\n1\n2.5\n\n-3e2\n", Format::Auto, None, false).unwrap();
        assert_eq!((v, s.format.as_str()), (vec![1.0, 2.5, -300.0], "plain"));
        let (v, s) = read("0.0\t5\n1.0\t6\n", Format::Auto, None, false).unwrap();
        assert_eq!((v, s.format.as_str()), (vec![5.0, 6.0], "tsv"));
        let (v, s) = read("time,value\n1,7\n2,8\n", Format::Auto, None, false).unwrap();
        assert_eq!((v, s.column.as_deref()), (vec![7.0, 8.0], Some("value")));
        let (v, _) = read("a,b,c\n1,2,3\n4,5,6\n", Format::Csv, Some("b"), false).unwrap();
        assert_eq!(v, vec![2.0, 5.0]);
        let (v, _) = read("1,2,3\n4,5,6\n", Format::Csv, Some("0"), false).unwrap();
        assert_eq!(v, vec![1.0, 4.0]);
        let nd = concat!(
            r#"{"schema_version":"1.0","timestamp_ms":1,"source":"browser","metric":"rtt","value":2,"unit":"ms","to":"x"}"#,
            "\n",
            r#"{"schema_version":"1.0","timestamp_ms":2,"source":"browser","metric":"jitter","value":9,"unit":"ms","to":"x"}"#,
            "\n",
            r#"{"schema_version":"1.0","timestamp_ms":3,"source":"browser","metric":"rtt","status":"timeout","value":null,"timeout_ms":9,"unit":"ms","to":"x"}"#,
            "\n"
        );
        let (v, s) = read(nd, Format::Auto, None, false).unwrap();
        assert_eq!(v, vec![2.0]);
        assert_eq!(
            (s.series.as_deref(), s.without_value),
            (Some("rtt to x"), 1)
        );
        assert_eq!(
            s.other_series,
            [OtherSeries {
                name: "jitter to x".into(),
                values: Some(1),
                choose: "--metric jitter --target \"x\"".into()
            }]
        );
    }

    /// A record of `rtt` to `to`.
    fn rtt_to(to: &str, t: u64) -> String {
        format!(
            r#"{{"schema_version":"1.0","timestamp_ms":{t},"source":"nowcast tcp","metric":"rtt","value":10,"unit":"ms","to":"{to}"}}"#
        ) + "\n"
    }

    /// Past the series a file keeps apart (256), the one the options ask for is still read,
    /// and the others are counted, not just those kept. A file of 100,000 series reads in
    /// linear time (each new series once scanned every one before: minutes).
    #[test]
    fn the_series_asked_for_is_found_after_any_number_of_others() {
        let mut text: String = (0..300).map(|i| rtt_to(&format!("h{i}:1"), i)).collect();
        text += &(0..20)
            .map(|i| rtt_to("server:443", 1000 + i))
            .collect::<String>();
        let mut o = opts(Format::Auto, None, false);
        o.select.target = Some("server:443".into());
        let mut values = Vec::new();
        let s = read_values(text.as_bytes(), &o, |v| values.push(v)).unwrap();
        assert_eq!(values.len(), 20);
        assert_eq!(s.series.as_deref(), Some("rtt to server:443"));
        assert_eq!(
            (
                s.other_series_count,
                s.other_series_more,
                s.other_series.len()
            ),
            (300, false, LISTED_SERIES)
        );
        assert!(
            s.notes
                .iter()
                .any(|n| n == "44 values of 44 series beyond the first 256 left out"),
            "{:?}",
            s.notes
        );
        let text: String = (0..100_000)
            .map(|i| rtt_to(&format!("h{i}:1"), i))
            .collect();
        let s = read_values(text.as_bytes(), &opts(Format::Auto, None, false), |_| {}).unwrap();
        assert_eq!(s.series.as_deref(), Some("rtt to h0:1"));
        assert_eq!((s.other_series_count, s.other_series_more), (65_535, true));
    }

    #[test]
    fn a_bad_line_names_its_number_and_text_or_is_counted() {
        let err = read("1\n2\nabc\n4\n", Format::Plain, None, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3") && err.contains("abc"), "{err}");
        let err = read("# head\nt,v\n1,2\n3,x\n", Format::Auto, None, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 4") && err.contains("'x'"), "{err}");
        let (v, s) = read("1\nNaN\n3\n", Format::Plain, None, true).unwrap();
        assert_eq!((v, s.skipped_bad), (vec![1.0, 3.0], 1));
        let err = read("a,b\n1,2\n", Format::Csv, Some("zz"), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no column named 'zz'"), "{err}");
        let err = read("1\n", Format::Plain, Some("value"), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--column applies to CSV"), "{err}");
        let err = read("Dear reader,\nthis is prose.\n", Format::Auto, None, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Nowcast reads NDJSON measurement records"),
            "{err}"
        );
    }

    #[test]
    fn a_line_over_the_limit_is_named_never_kept_and_quoted_in_part() {
        // The limit in these tests is 4096 bytes.
        let long = "7".repeat(100_000);
        for format in [Format::Auto, Format::Plain, Format::Csv] {
            let err = read(&format!("1\n2\n{long}\n4\n"), format, None, false)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("line 3: the line is longer than 4096 bytes"),
                "{format:?}: {err}"
            );
            assert!(err.len() < 250, "{err}");
        }
        let (v, s) = read(&format!("1\n{long}\n3\n{long}"), Format::Plain, None, true).unwrap();
        assert_eq!((v, s.skipped_bad, s.lines), (vec![1.0, 3.0], 2, 4));
        // Exactly the limit is a line.
        let exact = "0".repeat(4095) + "1";
        let (v, _) = read(&format!("{exact}\n"), Format::Plain, None, false).unwrap();
        assert_eq!(v, [1.0]);
        // A line of commas under the limit, in CSV: no value, no error.
        let commas = ",".repeat(4000);
        let (v, s) = read(
            &format!("a,b\n1,2\n{commas}\n3,4\n"),
            Format::Auto,
            None,
            false,
        )
        .unwrap();
        assert_eq!((v, s.column.as_deref()), (vec![2.0, 4.0], Some("b")));
    }

    #[test]
    fn a_bad_value_is_quoted_in_part_and_so_is_its_reason() {
        let auto = ReadOptions {
            max_line: MAX_LINE,
            ..opts(Format::Auto, None, false)
        };
        let junk = "x".repeat(100_000);
        let err = read_values(format!("1\n{junk}\n").as_bytes(), &auto, |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 2: 'xxx"), "{err}");
        assert!(err.len() < 300, "{} bytes: {err}", err.len());
        // A record whose reason could repeat its text.
        let rec = format!(r#"{{"schema_version":"{junk}"}}"#);
        let err = read_values(format!("{rec}\n").as_bytes(), &auto, |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 1: field 'schema_version'"), "{err}");
        assert!(err.len() < 450, "{} bytes", err.len());
        // A CSV header whose one column is a whole long line (found by tests/fuzz.rs: an
        // NDJSON file read as CSV): the column's name is quoted in part too.
        let csv = ReadOptions {
            max_line: MAX_LINE,
            ..opts(Format::Csv, Some("0"), false)
        };
        let err = read_values(format!("{rec}\nnot a number\n").as_bytes(), &csv, |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 2: field '{"), "{err}");
        assert!(err.chars().count() < 400, "{} characters: {err}", err.len());
    }

    #[test]
    fn bytes_that_are_not_text_and_quoted_csv_fields() {
        let mut bytes = b"1\n2\n".to_vec();
        bytes.extend_from_slice(b"3\xff\xfe\n4\n");
        let o = |skip_bad| ReadOptions {
            max_line: MAX_LINE,
            ..opts(Format::Auto, None, skip_bad)
        };
        let err = read_values(bytes.as_slice(), &o(false), |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("line 3: not UTF-8 text (at byte 1)"),
            "{err}"
        );
        let mut v = Vec::new();
        read_values(bytes.as_slice(), &o(true), |x| v.push(x)).unwrap();
        assert_eq!(v, [1.0, 2.0, 4.0]);
        let csv = "\"time, s\",\"say \"\"hi\"\"\",value\r\n1,\"a,b\",5\r\n2,c,6\r\n";
        let (v, s) = read(csv, Format::Auto, None, false).unwrap();
        assert_eq!((v, s.column.as_deref()), (vec![5.0, 6.0], Some("value")));
        assert_eq!(s.notes[0], "column(s) of text not read: say \"hi\"");
        let (v, _) = read(csv, Format::Auto, Some("say \"hi\""), true).unwrap();
        assert!(v.is_empty(), "that column holds no numbers");
    }
}
