//! The one reader of measurement files, for the page and for `nowcast forecast`: text in,
//! series of points, and the refused lines with their reasons, out. Deterministic and without
//! I/O: the caller hands it lines (the CLI streams them from a file, bounded, the page splits
//! a file it was given, [`read_text`]), and it decides the format from the content.
//!
//! Formats (each reader is a module of its own):
//! - **NDJSON measurement records** ([`crate::record`]): one series per metric, target (`to`)
//!   and transport (`probe.transport`: the page measures RTT over WebSocket and over HTTP);
//!   records without a value (timeouts, failures) are counted, not imported.
//! - **CSV** (`delimited`): with a header, every column of numbers is a series named by its
//!   header, the time column is the first named `time`, `timestamp`, `timestamp_ms`, `date`
//!   or `datetime` (ms since 1970, seconds when the first is between 10⁹ and 10¹¹, or an
//!   ISO 8601 date, UTC unless it gives an offset), and
//!   columns of text are left out (and said so); without a header, the first column is the
//!   time when there are two or more and it reads as one (`time,value`), and the others are
//!   series named `column N` (N counts from 0, as `--column` does). A header with a `metric`
//!   column is Nowcast's own export (`time,value,metric,unit,transport,to,series,source,from`,
//!   written by [`export_csv`]; `source` since 2026-12-06, `from` since 2026-12-08): one
//!   series per metric, target, transport and source, as records (and per service, for a
//!   client's downloads: [`SeriesInfo::from`]).
//! - **`time<TAB>value`** and any tab-separated columns: the CSV rules with tabs.
//! - **One number a line** (a one-word header line allowed).
//! - **iperf3 `-J`** ([`iperf3`]), **ping** (Linux iputils, [`ping`]), **mtr `--json`**
//!   ([`mtr`]), **irtt JSON** ([`irtt`]) and **sockperf `--full-log`** ([`sockperf`]).
//!
//! Every value is range-checked ([`crate::record::check_value`]): finite, within ±1e100 (the
//! forecaster bank's range), and within its unit's sane range when the unit is known (times
//! and rates 0..1e9, loss 0..1). A refused line names its number and its field, and loses
//! nothing else; a file in no supported format gets one message naming those that are (a
//! compressed file, [`compression`], or one of `;`-separated fields gets one saying what it
//! is and how to read it). Lines
//! longer than [`MAX_LINE`] are refused unread, text fields are measured with bounded work,
//! and a file that is one JSON document is held whole only up to [`MAX_DOCUMENT`].

mod delimited;
mod documents;
mod iperf3;
mod irtt;
mod mtr;
mod ping;
mod records;
mod sockperf;
mod time;

use crate::json::Parser;
use crate::quote::{cut, quote, QUOTE_CHARS};
use crate::record::{check_value, Metric, Transport, Unit, MAX_TIMESTAMP_MS};
pub use delimited::{export_csv, export_csv_line, EXPORT_HEADER};
use std::collections::HashMap;

/// The longest line read, bytes; a longer one is refused without being held or scanned.
pub const MAX_LINE: usize = 1 << 20;
/// The largest JSON document read whole (iperf3, irtt, mtr as the tools write them).
pub const MAX_DOCUMENT: usize = 32 << 20;
/// Series kept apart in one file; the values of further ones are left out, said once (but
/// for the one a selection asks for, which is kept wherever it comes).
pub const MAX_SERIES: usize = 256;
/// Series told apart (and counted) in one file, kept or not: what their keys may hold.
pub const MAX_KEYS: usize = 1 << 16;
/// What a file in no supported format is told.
pub const SUPPORTED: &str = "Nowcast reads NDJSON measurement records, CSV (time,value; \
    named columns; the page's export), time<TAB>value, one number a line, iperf3 -J (TCP and \
    UDP), ping output (Linux iputils), mtr --json, irtt JSON (irtt client -o) and sockperf \
    --full-log files";

/// The formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Ndjson,
    Csv,
    Tsv,
    Plain,
    Iperf3,
    Ping,
    Mtr,
    Irtt,
    Sockperf,
}

impl Format {
    pub const ALL: [Format; 9] = [
        Format::Ndjson,
        Format::Csv,
        Format::Tsv,
        Format::Plain,
        Format::Iperf3,
        Format::Ping,
        Format::Mtr,
        Format::Irtt,
        Format::Sockperf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Csv => "csv",
            Format::Tsv => "tsv",
            Format::Plain => "plain",
            Format::Iperf3 => "iperf3",
            Format::Ping => "ping",
            Format::Mtr => "mtr",
            Format::Irtt => "irtt",
            Format::Sockperf => "sockperf",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether a file of this format is JSON, one document or one a line.
    fn is_json(self) -> bool {
        matches!(
            self,
            Format::Ndjson | Format::Iperf3 | Format::Mtr | Format::Irtt
        )
    }
}

/// Where a series' times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// ms since 1970.
    Epoch,
    /// ms from an origin the file does not give (sockperf's clock).
    Relative,
    /// No times in the file: the n-th value (from 0) is placed at n seconds.
    Count,
}

/// A series found in a file.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SeriesInfo {
    /// What it is called, e.g. `rtt/websocket to example.org:443`, `iperf3 bandwidth_down to
    /// 10.0.0.2:5201`, or a CSV column's header.
    pub name: String,
    /// What it measures, when the file says (not for a CSV column).
    pub metric: Option<Metric>,
    pub unit: Option<Unit>,
    /// The target measured, when the file names it.
    pub to: Option<String>,
    pub transport: Option<Transport>,
    /// The tool that measured it, when the file says (a record's `source`: `nowcast tcp`,
    /// `pcap`, `pcap timestamps`, …): two sources are two series, as in the archive.
    pub source: Option<String>,
    /// The service it came from, when the target is a client that received from several
    /// (`nowcast pcap`'s downloads go `to` the client's address `from` the service's
    /// `host:port`: [`crate::target::sending_service`]); each service is its own series.
    pub from: Option<String>,
    /// The CSV column read: its header, or `N` (from 0) without a header.
    pub column: Option<String>,
    pub clock: Clock,
}

impl SeriesInfo {
    /// Its target as its name gives it: `10.0.0.5 from 10.0.0.1:80` for a client's series
    /// from one service ([`SeriesInfo::from`]), else the target alone (empty without one).
    pub fn target(&self) -> String {
        match (&self.to, &self.from) {
            (Some(to), Some(from)) => format!("{to} from {from}"),
            (Some(to), None) => to.clone(),
            (None, _) => String::new(),
        }
    }

    fn measured(name: String, metric: Metric, to: Option<String>, clock: Clock) -> Self {
        Self {
            name,
            metric: Some(metric),
            unit: Some(metric.unit()),
            to,
            transport: None,
            source: None,
            from: None,
            column: None,
            clock,
        }
    }
}

/// A line (or part of a document) that was refused.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LineError {
    /// 1-based; CRLF and LF files count alike.
    pub line: u64,
    /// The field at fault: a record's dotted path, a CSV column, a JSON document's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
    /// The start of the line (at most [`QUOTE_CHARS`] characters), for a reader who has
    /// only the message.
    #[serde(skip)]
    pub text: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: ", self.line)?;
        if let Some(field) = &self.field {
            write!(f, "field '{}': ", quote(field))?;
        }
        f.write_str(&self.message)?;
        if !self.text.is_empty() {
            write!(f, " (text: {:?})", self.text)?;
        }
        Ok(())
    }
}

/// What went wrong, besides values.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// One line (or a part of a document) refused; the rest goes on.
    Line(LineError),
    /// The file is in no format read: said once, and nothing more is read.
    Unsupported(String),
    /// The caller's choice does not fit the file (a CSV column that does not exist, a
    /// column asked of a file without columns): nothing more is read.
    Usage(String),
}

/// Where a reader's output goes.
pub trait Sink {
    /// A value of series `series` (its index in [`Reader::series`]).
    fn point(&mut self, series: usize, t_ms: f64, value: f64);
    fn problem(&mut self, problem: Problem);
}

/// A CSV column chosen by its header or its index (from 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    Name(String),
    Index(usize),
}

/// One series to read (the CLI's choice); the page reads them all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Select {
    pub metric: Option<Metric>,
    /// A series's target, or its target with the service it came from as its name gives
    /// it ([`SeriesInfo::target`]: `10.0.0.5 from 10.0.0.1:80`).
    pub target: Option<String>,
    pub transport: Option<Transport>,
    /// A record's `source`.
    pub source: Option<String>,
    /// CSV and TSV only; the default is the column named `value`, else the last one of
    /// numbers.
    pub column: Option<Column>,
}

impl Select {
    fn matches(&self, s: &SeriesInfo) -> bool {
        self.metric.is_none_or(|m| s.metric == Some(m))
            && self
                .target
                .as_ref()
                .is_none_or(|t| s.to.as_deref() == Some(t.as_str()) || s.target() == *t)
            && self.transport.is_none_or(|t| s.transport == Some(t))
            && self
                .source
                .as_ref()
                .is_none_or(|x| s.source.as_deref() == Some(x.as_str()))
    }
}

/// How to read.
#[derive(Clone, Debug)]
pub struct Options {
    /// `None`: decide from the content.
    pub format: Option<Format>,
    /// `None`: every series; `Some`: the first series that matches, the others counted.
    pub select: Option<Select>,
    /// The longest line read ([`MAX_LINE`] unless a test wants less).
    pub max_line: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            format: None,
            select: None,
            max_line: MAX_LINE,
        }
    }
}

/// The name of a series of records: `rtt/websocket to example.org:443` (the page's series
/// key, then the target), `loss to h:8061` without a transport, `rtt` without either.
pub fn series_name(metric: Metric, transport: Option<Transport>, to: Option<&str>) -> String {
    let mut name = metric.name().to_string();
    if let Some(t) = transport {
        name = format!("{name}/{t}");
    }
    if let Some(to) = to {
        name = format!("{name} to {to}");
    }
    name
}

/// Enough of `bytes` to quote, as text.
fn lossy_start(bytes: &[u8]) -> String {
    // A character is at most 4 bytes.
    quote(&String::from_utf8_lossy(
        &bytes[..bytes.len().min(4 * QUOTE_CHARS)],
    ))
}

/// A number as files write them (Rust's grammar: `1`, `-2.5`, `3e-4`, `.5`); `None` for
/// anything else. Not range-checked.
fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

/// Whether `s` is a number written with thousands separators (`1,200`, `-12,345.5`): meant
/// as a number, but not one the reader takes (a comma is a decimal mark in half the world).
fn thousands(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut groups = int.split(',');
    let first = groups.next().unwrap_or_default();
    let digits = |g: &str| g.bytes().all(|b| b.is_ascii_digit());
    (1..=3).contains(&first.len())
        && digits(first)
        && int.contains(',')
        && groups.all(|g| g.len() == 3 && digits(g))
        && digits(frac)
}

/// Why a field (trimmed) that should hold a number does not, with a hint for the one
/// mistake the reader can name: thousands separators.
fn not_a_number(field: &str) -> String {
    let mut why = format!("'{}' is not a number", quote(field));
    if thousands(field) {
        why += &format!(
            " (thousands separators? write it without them: {})",
            field.replace(',', "")
        );
    }
    why
}

/// A compression a file's first bytes name, and the tool that undoes it: `("gzip", "gzip")`.
/// Shared with `nowcast pcap`, which reads gzip itself and names the others.
pub fn compression(start: &[u8]) -> Option<(&'static str, &'static str)> {
    match start {
        [0x1f, 0x8b, ..] => Some(("gzip", "gzip")),
        [0xfd, b'7', b'z', b'X', ..] => Some(("xz", "xz")),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(("zstd", "zstd")),
        [b'B', b'Z', b'h', b'1'..=b'9', ..] => Some(("bzip2", "bzip2")),
        [0x04, 0x22, 0x4d, 0x18, ..] => Some(("lz4", "lz4")),
        _ => None,
    }
}

/// What a compressed input, or a packet capture, is told in place of "not UTF-8 text":
/// what it is and how to read it.
fn compressed_message(start: &[u8]) -> Option<String> {
    // A classic pcap file's magic, either byte order, micro- or nanosecond times.
    if let [0xd4, 0xc3, 0xb2, 0xa1, ..]
    | [0xa1, 0xb2, 0xc3, 0xd4, ..]
    | [0x4d, 0x3c, 0xb2, 0xa1, ..]
    | [0xa1, 0xb2, 0x3c, 0x4d, ..] = start
    {
        return Some(
            "the input is a packet capture (pcap), not text: analyse it with `nowcast pcap \
             FILE`, whose `--json` records this reads"
                .into(),
        );
    }
    let (name, tool) = compression(start)?;
    let bytes: Vec<String> = start.iter().take(4).map(|b| format!("{b:02x}")).collect();
    Some(format!(
        "the input is {name}-compressed (it starts with {}), not text: decompress it \
         first, e.g. `{tool} -dc FILE | nowcast forecast -`",
        bytes.join(" ")
    ))
}

/// Whether a first data line (trimmed) is fields separated by `;` (a spreadsheet's CSV where
/// the decimal mark is a comma: `time;value`, `1;2,5`): two fields or more, none holding
/// a comma except as a decimal mark, and the line not CSV of numbers as it stands.
fn semicolon_separated(t: &str) -> bool {
    let fields: Vec<&str> = t.split(';').map(str::trim).collect();
    let decimal_comma = |f: &str| {
        !f.contains(',') || (f.matches(',').count() == 1 && number(&f.replace(',', ".")).is_some())
    };
    fields.len() >= 2
        && fields.iter().all(|f| decimal_comma(f.trim_matches('"')))
        && !t.split(',').all(|f| number(f.trim()).is_some())
}

/// Whether `t` can be a time in ms (ECMAScript's range, so the page can show it).
fn time_ok(t: f64) -> bool {
    t.is_finite() && t.abs() <= MAX_TIMESTAMP_MS
}

/// The series of a file: their descriptions, their values' counts, and which one a
/// [`Select`] chose.
#[derive(Debug, Default)]
struct Registry {
    infos: Vec<SeriesInfo>,
    counts: Vec<u64>,
    select: Option<Select>,
    chosen: Option<usize>,
    /// Values left out because the file had more than [`MAX_SERIES`] series.
    overflow: u64,
    /// Series left out past [`MAX_SERIES`], and whether there were more than could be told
    /// apart ([`MAX_KEYS`]).
    left_out: u64,
    left_out_more: bool,
    /// FOBS congestion-event records left out of the series (see [`documents::record`]).
    congestion_events: u64,
    /// Empty fields of the CSV columns read (wanted series only): no value there.
    empty: u64,
    /// The line of the first of them, for the note that counts them.
    first_empty: Option<u64>,
    /// Each series' latest time so far, and how many of its values came earlier than a
    /// value before them in the file (wanted series only).
    latest: Vec<f64>,
    earlier: Vec<u64>,
}

impl Registry {
    /// Whether `info` is the series a selection asks for and none is chosen yet.
    fn asks(&self, info: &SeriesInfo) -> bool {
        self.chosen.is_none() && self.select.as_ref().is_some_and(|s| s.matches(info))
    }

    fn add(&mut self, info: SeriesInfo) -> Option<usize> {
        // Past the limit, only the series a selection asks for is kept: `nowcast forecast
        // --target X` finds X after any number of other series.
        if self.infos.len() >= MAX_SERIES && !self.asks(&info) {
            self.left_out += 1;
            return None;
        }
        self.infos.push(info);
        self.counts.push(0);
        self.latest.push(f64::NEG_INFINITY);
        self.earlier.push(0);
        Some(self.infos.len() - 1)
    }

    /// Chooses `id` if nothing is chosen and it matches (the CSV default column).
    fn prefer(&mut self, id: usize) {
        if let (Some(s), None) = (&self.select, self.chosen) {
            if s.matches(&self.infos[id]) {
                self.chosen = Some(id);
            }
        }
    }

    /// Whether the values of `id` are wanted: always for the page; for one series, the
    /// chosen one (the first that matches).
    fn wanted(&mut self, id: usize) -> bool {
        match (&self.select, self.chosen) {
            (None, _) => true,
            (Some(_), Some(c)) => c == id,
            (Some(s), None) => {
                let yes = s.matches(&self.infos[id]);
                if yes {
                    self.chosen = Some(id);
                }
                yes
            }
        }
    }
}

/// A reader's output for one line: the series table, the sink, the line's number and text.
struct Out<'a, S: Sink> {
    reg: &'a mut Registry,
    sink: &'a mut S,
    line: u64,
    text: &'a str,
    /// Set when nothing more of the file is to be read.
    stopped: bool,
}

impl<S: Sink> Out<'_, S> {
    /// Says why nothing more is read (an unsupported file, a usage problem) and stops.
    fn stop(&mut self, problem: Problem) {
        self.sink.problem(problem);
        self.stopped = true;
    }

    /// A value of `id`, range-checked for its unit; `t` is its time when the file gives one
    /// (else the series' count of values places it). A bad value is the line's error,
    /// `field` naming where it was.
    fn point(&mut self, id: Option<usize>, t: Option<f64>, v: f64, field: &str) {
        let Some(id) = id else {
            self.reg.overflow += 1;
            return;
        };
        if let Err(why) = check_value(v, self.reg.infos[id].unit) {
            return self.error(Some(field), why);
        }
        let n = self.reg.counts[id];
        self.reg.counts[id] = n + 1;
        if self.reg.wanted(id) {
            let t = t.unwrap_or(n as f64 * 1000.0);
            if t < self.reg.latest[id] {
                self.reg.earlier[id] += 1;
            } else {
                self.reg.latest[id] = t;
            }
            self.sink.point(id, t, v);
        }
    }

    fn error(&mut self, field: Option<&str>, message: impl Into<String>) {
        self.error_at(self.line, self.text, field, message);
    }

    /// An empty field of a CSV column: no value, counted when its series is read.
    fn empty_field(&mut self, counted: bool) {
        if counted {
            self.reg.empty += 1;
            self.reg.first_empty.get_or_insert(self.line);
        }
    }

    /// An error of another line than the one read (a document's, read at the end).
    fn error_at(&mut self, line: u64, text: &str, field: Option<&str>, message: impl Into<String>) {
        self.sink.problem(Problem::Line(LineError {
            line,
            field: field.map(str::to_string),
            message: message.into(),
            text: quote(text),
        }));
    }
}

/// What the first data lines make of a file, before its format is known.
enum State<P: Parser> {
    Detecting,
    /// One word on the first line: a header, if numbers follow.
    OneColumn {
        line: u64,
        header: String,
    },
    /// The first line opened a JSON object it did not close: a document, unless the next
    /// line is a record of its own (a first record cut short).
    MaybeDocument(documents::Document),
    Document(documents::Document),
    JsonLines(records::JsonLines<P>),
    /// Boxed: the largest state by far, read once per file.
    Delimited(Box<delimited::Delimited>),
    Plain,
    Ping(ping::Ping),
    Sockperf(sockperf::Sockperf),
    /// Unsupported, or a usage problem: the rest is not read.
    Stopped,
}

/// Reads a file line by line (see the module's documentation): each value goes to the sink
/// as it is read, so memory does not grow with the file (except for a JSON document, read
/// whole up to [`MAX_DOCUMENT`]).
pub struct Reader<P: Parser> {
    parser: Option<P>,
    opts: Options,
    state: State<P>,
    format: Option<Format>,
    reg: Registry,
    /// Records without a value (timeouts, failures).
    without_value: u64,
    notes: Vec<String>,
}

impl<P: Parser> Reader<P> {
    pub fn new(parser: P, opts: Options) -> Self {
        let reg = Registry {
            select: opts.select.clone(),
            ..Registry::default()
        };
        Self {
            parser: Some(parser),
            opts,
            state: State::Detecting,
            format: None,
            reg,
            without_value: 0,
            notes: Vec::new(),
        }
    }

    /// The format, once the first data line decided it.
    pub fn format(&self) -> Option<Format> {
        self.format
    }

    /// The series found so far, in the order they were found.
    pub fn series(&self) -> &[SeriesInfo] {
        &self.reg.infos
    }

    /// How many values each series had (values of series not chosen are counted where they
    /// were read: records, documents, ping, sockperf; not the CSV columns left unread).
    pub fn counts(&self) -> &[u64] {
        &self.reg.counts
    }

    /// The series a [`Select`] chose, once one matched.
    pub fn chosen(&self) -> Option<usize> {
        self.reg.chosen
    }

    /// Series of the file left out of [`Reader::series`] (past [`MAX_SERIES`]), and whether
    /// there were more than that (past [`MAX_KEYS`], no longer told apart).
    pub fn series_left_out(&self) -> (u64, bool) {
        (self.reg.left_out, self.reg.left_out_more)
    }

    /// Records that had no value (timeouts and failures), and empty fields of the CSV
    /// columns read.
    pub fn without_value(&self) -> u64 {
        self.without_value + self.reg.empty
    }

    /// What the reader has to say beyond errors: columns left out, times missing, series
    /// beyond the limit.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        if self.reg.overflow > 0 {
            let more = if self.reg.left_out_more {
                "more than "
            } else {
                ""
            };
            notes.push(format!(
                "{} values of {more}{} series beyond the first {MAX_SERIES} left out",
                self.reg.overflow, self.reg.left_out
            ));
        }
        if self.without_value > 0 {
            notes.push(format!(
                "{} records without a value (timeouts, errors) not read as values",
                self.without_value
            ));
        }
        if self.reg.empty > 0 {
            let (n, s) = (self.reg.empty, if self.reg.empty == 1 { "" } else { "s" });
            let first = self.reg.first_empty.unwrap_or(0);
            let at = if n == 1 {
                "on line"
            } else {
                "the first on line"
            };
            notes.push(format!(
                "{n} empty field{s} (no value) in the columns read, {at} {first}"
            ));
        }
        if self.reg.congestion_events > 0 {
            notes.push(format!(
                "{} FOBS congestion events (a window's loss each, with the classifier's \
                 reading) not read as values: a transfer's loss is its own record",
                self.reg.congestion_events
            ));
        }
        // The page reads every series and puts each in time order ([`read_text`]); one
        // chosen series (`nowcast forecast`) streams through the banks as the file has it.
        let order = match self.opts.select {
            None => "shown and forecast in time order",
            Some(_) => "forecast in the file's order",
        };
        for (info, &n) in self.reg.infos.iter().zip(&self.reg.earlier) {
            if n > 0 {
                let (what, them) = match n {
                    1 => ("1 value is".to_string(), "it"),
                    n => (format!("{n} values are"), "them"),
                };
                notes.push(format!(
                    "{}: {what} earlier than a value before {them} in the file ({order})",
                    info.name
                ));
            }
        }
        for (info, &n) in self.reg.infos.iter().zip(&self.reg.counts) {
            if n > 0 && info.clock == Clock::Count {
                notes.push(format!(
                    "{}: the file gives no times; the values are placed a second apart",
                    info.name
                ));
            }
        }
        notes
    }

    /// Whether nothing more will be read (an unsupported file, or a usage problem).
    pub fn stopped(&self) -> bool {
        matches!(self.state, State::Stopped)
    }

    /// A line longer than [`Options::max_line`]: `start` is what of it was kept.
    pub fn too_long<S: Sink>(&mut self, number: u64, start: &[u8], sink: &mut S) {
        if self.compressed(number, start, sink) {
            return;
        }
        if let State::Document(_) | State::MaybeDocument(_) = self.state {
            self.state = State::Stopped;
        }
        sink.problem(Problem::Line(LineError {
            line: number,
            field: None,
            message: format!(
                "the line is longer than {} bytes (the longest line read)",
                self.opts.max_line
            ),
            text: lossy_start(start),
        }));
    }

    /// Whether the file is compressed, told by its first line's first bytes: if so, said
    /// once (what it is and how to read it), and nothing more is read.
    fn compressed<S: Sink>(&mut self, number: u64, bytes: &[u8], sink: &mut S) -> bool {
        if number != 1 || !matches!(self.state, State::Detecting) {
            return false;
        }
        let Some(why) = compressed_message(bytes) else {
            return false;
        };
        self.state = State::Stopped;
        sink.problem(Problem::Unsupported(why));
        true
    }

    /// One line, without its newline (a trailing `\r` is dropped).
    pub fn line<S: Sink>(&mut self, number: u64, bytes: &[u8], sink: &mut S) {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if self.compressed(number, bytes, sink) {
            return;
        }
        if bytes.len() > self.opts.max_line {
            return self.too_long(number, &bytes[..self.opts.max_line], sink);
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let message = format!("not UTF-8 text (at byte {})", e.valid_up_to());
                if let State::Detecting = self.state {
                    let what = format!("the input (line {number} is {message})");
                    return self.unsupported(sink, &what);
                }
                sink.problem(Problem::Line(LineError {
                    line: number,
                    field: None,
                    message,
                    text: lossy_start(bytes),
                }));
                // A document keeps the line's place, empty, so that its lines stay the file's.
                if let State::Document(d) | State::MaybeDocument(d) = &mut self.state {
                    d.push("");
                }
                return;
            }
        };
        if let State::Detecting | State::OneColumn { .. } | State::MaybeDocument(_) = self.state {
            return self.first(number, text, sink);
        }
        let mut out = Out {
            reg: &mut self.reg,
            sink,
            line: number,
            text,
            stopped: false,
        };
        match &mut self.state {
            State::Plain => plain(text, &mut out),
            State::Delimited(d) => d.line(text, &mut out),
            State::JsonLines(j) => {
                j.line(text, &mut out, &mut self.without_value);
                if self.format.is_none() {
                    self.format = j.format();
                }
            }
            State::Document(d) => {
                if !d.push(text) {
                    out.stop(Problem::Line(LineError {
                        line: d.first_line().0,
                        field: None,
                        message: format!("the JSON document is larger than {MAX_DOCUMENT} bytes"),
                        text: String::new(),
                    }));
                }
            }
            State::Ping(p) => p.line(text, &mut out),
            State::Sockperf(s) => s.line(text, &mut out),
            State::Stopped
            | State::Detecting
            | State::OneColumn { .. }
            | State::MaybeDocument(_) => {}
        }
        if out.stopped {
            self.state = State::Stopped;
        }
    }

    /// Lines before the format is known: blank lines and `#` comments are skipped, and the
    /// first data line (and, for two cases, the second) decides.
    fn first<S: Sink>(&mut self, number: u64, text: &str, sink: &mut S) {
        let t = text.trim();
        let comment = t.is_empty() || t.starts_with('#');
        match std::mem::replace(&mut self.state, State::Detecting) {
            State::OneColumn { line, header } if !comment => {
                if number_of(t).is_some() {
                    let mut d = Box::new(delimited::Delimited::new(b','));
                    self.decided(Format::Csv);
                    let mut out = Out {
                        reg: &mut self.reg,
                        sink,
                        line,
                        text: &header,
                        stopped: false,
                    };
                    d.line(&header, &mut out);
                    self.state = State::Delimited(d);
                    self.line(number, text.as_bytes(), sink);
                } else {
                    let what = format!("line {line} ('{}')", quote(&header));
                    self.unsupported(sink, &what);
                }
            }
            State::MaybeDocument(mut doc) => {
                if t.starts_with('{') && documents::closes(t) {
                    // The first line was a record cut short: the file is NDJSON.
                    self.json_lines();
                    let (first, first_text) = doc.first_line();
                    self.line(first, first_text.as_bytes(), sink);
                    self.line(number, text.as_bytes(), sink);
                } else {
                    doc.push(text);
                    self.state = if t.is_empty() {
                        State::MaybeDocument(doc)
                    } else {
                        State::Document(doc)
                    };
                }
            }
            state @ State::OneColumn { .. } => self.state = state,
            _ if comment => {}
            _ => self.detect(number, text, t, sink),
        }
    }

    fn detect<S: Sink>(&mut self, number: u64, text: &str, t: &str, sink: &mut S) {
        if let Some(it) = own_output(t).filter(|_| self.opts.format.is_none()) {
            self.state = State::Stopped;
            return sink.problem(Problem::Unsupported(format!("line {number} is {it}")));
        }
        let format = self.opts.format.unwrap_or_else(|| detect(t));
        if self.opts.format.is_none()
            && matches!(format, Format::Csv | Format::Plain)
            && semicolon_separated(t)
        {
            self.state = State::Stopped;
            return sink.problem(Problem::Unsupported(format!(
                "line {number} ('{}') has fields separated by ';', not ',' (a spreadsheet's \
                 CSV where the decimal mark is a comma): make it comma-separated with decimal \
                 points, e.g. `sed 's/,/./g; s/;/,/g' FILE | nowcast forecast -`",
                quote(t)
            )));
        }
        if self.opts.format.is_none() && t.starts_with('[') && format != Format::Ping {
            let what = format!("line {number} (a JSON array)");
            return self.unsupported(sink, &what);
        }
        if self
            .opts
            .select
            .as_ref()
            .is_some_and(|s| s.column.is_some())
            && !matches!(format, Format::Csv | Format::Tsv)
        {
            self.state = State::Stopped;
            return sink.problem(Problem::Usage(format!(
                "--column applies to CSV input, but this input reads as {}",
                format.name()
            )));
        }
        if format.is_json() && t.starts_with('{') && !documents::closes(t) {
            // Its format is what the document turns out to be.
            self.state =
                State::MaybeDocument(documents::Document::new(number, text, self.opts.format));
            return;
        }
        match format {
            Format::Ndjson | Format::Iperf3 | Format::Mtr | Format::Irtt => {
                if !t.starts_with('{') {
                    let what = format!("line {number} ('{}')", quote(t));
                    if self.opts.format.is_some() {
                        // Asked for: the line is not that format, whatever else it may be.
                        self.state = State::Stopped;
                        return sink.problem(Problem::Unsupported(format!(
                            "{what} is not {} (the format asked for): a JSON object was \
                             expected",
                            format.name()
                        )));
                    }
                    return self.unsupported(sink, &what);
                }
                // Decided by the first line's object (records, or one tool's documents).
                self.json_lines();
            }
            Format::Csv | Format::Tsv => {
                let sep = if format == Format::Tsv { b'\t' } else { b',' };
                self.state = State::Delimited(Box::new(delimited::Delimited::new(sep)));
            }
            Format::Plain if number_of(t).is_none() && !t.contains([',', '\t', ' ']) => {
                if self.opts.format.is_none() && !t.is_empty() {
                    self.state = State::OneColumn {
                        line: number,
                        header: t.to_string(),
                    };
                    return;
                }
                self.state = State::Plain;
            }
            Format::Plain if self.opts.format.is_none() && number_of(t).is_none() => {
                let what = format!("line {number} ('{}')", quote(t));
                return self.unsupported(sink, &what);
            }
            Format::Plain => self.state = State::Plain,
            Format::Ping => self.state = State::Ping(ping::Ping::default()),
            Format::Sockperf => self.state = State::Sockperf(sockperf::Sockperf::default()),
        }
        if !matches!(self.state, State::JsonLines(_)) {
            self.decided(format);
        }
        self.line(number, text.as_bytes(), sink);
    }

    fn decided(&mut self, format: Format) {
        self.format.get_or_insert(format);
    }

    fn json_lines(&mut self) {
        let parser = self.parser.take().expect("the parser is taken once");
        self.state = State::JsonLines(records::JsonLines::new(parser, self.opts.format));
    }

    fn unsupported<S: Sink>(&mut self, sink: &mut S, what: &str) {
        self.state = State::Stopped;
        sink.problem(Problem::Unsupported(unsupported_message(what)));
    }

    /// The end of the file: a JSON document is read now.
    pub fn finish<S: Sink>(&mut self, sink: &mut S) {
        match std::mem::replace(&mut self.state, State::Stopped) {
            State::MaybeDocument(doc) | State::Document(doc) => {
                let parser = self.parser.take().expect("the parser is taken once");
                let mut format = None;
                let line = doc.first_line().0;
                let mut out = Out {
                    reg: &mut self.reg,
                    sink,
                    line,
                    text: "",
                    stopped: false,
                };
                match doc.read(&parser, &mut out, &mut self.without_value, &mut format) {
                    Ok(()) => {
                        if let Some(f) = format {
                            self.format = Some(f);
                        }
                    }
                    Err(what) => {
                        self.state = State::Detecting;
                        self.unsupported(sink, &what);
                    }
                }
            }
            State::OneColumn { line, header } => {
                let what = format!("line {line} ('{}')", quote(&header));
                self.unsupported(sink, &what);
            }
            State::Delimited(d) => self.notes.extend(d.notes()),
            State::Sockperf(s) => {
                if let Some(why) = s.finish() {
                    sink.problem(Problem::Unsupported(why));
                }
            }
            _ => {}
        }
    }
}

/// The one message a file in no supported format gets; `what` says where it was seen.
fn unsupported_message(what: &str) -> String {
    format!("{what} is in no format Nowcast reads. {SUPPORTED}.")
}

/// A number, trimmed, or `None`.
fn number_of(t: &str) -> Option<f64> {
    number(t.trim())
}

/// One number a line.
fn plain<S: Sink>(text: &str, out: &mut Out<'_, S>) {
    let t = text.trim();
    if t.is_empty() || t.starts_with('#') {
        return;
    }
    if out.reg.infos.is_empty() {
        let info = SeriesInfo {
            name: "value".into(),
            metric: None,
            unit: None,
            to: None,
            transport: None,
            source: None,
            from: None,
            column: None,
            clock: Clock::Count,
        };
        out.reg.add(info);
        out.reg.prefer(0);
    }
    match number(t) {
        Some(v) => out.point(Some(0), None, v, "value"),
        None => out.error(None, not_a_number(t)),
    }
}

/// `nowcast forecast`'s report, as its JSON or its table.
pub const FORECAST_REPORT: &str = "nowcast forecast's report on a series, not the series: \
     give the file that report was made from";
/// `nowcast classify`'s diagnoses, as JSON or its table.
pub const CLASSIFY_REPORT: &str = "nowcast classify's diagnosis of packet-loss signatures, \
     not measurements over time (nowcast fobs send --json writes a transfer's records)";
const SIGNATURES: &str = "a file of packet-loss signatures (nowcast fobs send --signatures), \
     which nowcast classify diagnoses, not measurements over time (nowcast fobs send --json \
     writes a transfer's records)";

/// What a first data line (trimmed) of nowcast's own output that holds no measurements is,
/// for the one message it gets in place of "no format Nowcast reads": the table of
/// `nowcast forecast` (`FILE: 500 values (csv), …`), of `nowcast classify` (`cause  in
/// range  correct …`), or a signature file (`cpu 4096 7 100-103`). Their JSON forms are told
/// by their members ([`records`]).
fn own_output(t: &str) -> Option<&'static str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let forecast = t.match_indices(": ").any(|(i, _)| {
        let rest = &t[i + 2..];
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        n > 0 && (rest[n..].starts_with(" values (") || rest[n..].starts_with(" value ("))
    });
    if forecast {
        return Some(FORECAST_REPORT);
    }
    let mut words = t.split_ascii_whitespace();
    let first = words.next().unwrap_or_default();
    if first == "cause" && t.contains("in range") && t.contains("correct") {
        return Some(CLASSIFY_REPORT);
    }
    let signature = matches!(first, "cpu" | "network" | "?")
        && words.next().is_some_and(digits)
        && words.all(|w| match w.split_once('-') {
            Some((a, b)) => digits(a) && digits(b),
            None => digits(w),
        });
    signature.then_some(SIGNATURES)
}

/// The format a first data line (trimmed) is in.
fn detect(t: &str) -> Format {
    if t.starts_with('{') {
        Format::Ndjson
    } else if ping::is_ping(t) {
        Format::Ping
    } else if sockperf::is_sockperf(t) {
        Format::Sockperf
    } else if t.contains('\t') {
        Format::Tsv
    } else if t.contains(',') {
        Format::Csv
    } else {
        Format::Plain
    }
}

/// What tells series of measurements apart in a file: the tool (records, iperf3, …), the
/// metric, the transport, the target (and the service it received from, when it is a
/// client: [`SeriesInfo::from`]) and a record's source.
type Key = (
    &'static str,
    Metric,
    Option<Transport>,
    Target,
    Option<String>,
);

/// A series' target, and the service it received from when that, not the target, is the
/// service ([`crate::target::sending_service`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    pub to: Option<String>,
    pub from: Option<String>,
}

impl Target {
    /// A target that is the service itself (or a tool's target, which always is).
    pub fn to(to: Option<String>) -> Self {
        Self { to, from: None }
    }

    /// A record's target, with its sender when that is the service.
    pub fn of_record(to: String, from: Option<&str>) -> Self {
        let from = crate::target::sending_service(&to, from).map(str::to_string);
        Self { to: Some(to), from }
    }
}

/// A [`Key`] but its source.
type Unsourced = (&'static str, Metric, Option<Transport>, Target);

/// Series keyed by [`Key`], numbered in the registry as they appear.
#[derive(Debug, Default)]
struct Keyed {
    ids: HashMap<Key, Option<usize>>,
    /// The keys but their source, each with how many sources it had: a series is named with
    /// its source when another shares the rest (looked up, not searched for: a file of 100,000
    /// series took minutes when each new one scanned every key).
    sources: HashMap<Unsourced, u32>,
}

impl Keyed {
    /// The series of `metric` to `target` over `transport` from `tool` (and a record's
    /// `source`), added as `info(to)` describes it when new (`None` past [`MAX_SERIES`]),
    /// named with the service it came from when it has one (`throughput to 10.0.0.5 from
    /// 10.0.0.1:80`). A series that only its source tells apart from one seen before is
    /// named with its source (`rtt/tcp to h:80 (pcap timestamps)`); the first keeps the
    /// plain name.
    #[allow(clippy::too_many_arguments)]
    fn id(
        &mut self,
        reg: &mut Registry,
        tool: &'static str,
        metric: Metric,
        transport: Option<Transport>,
        target: Target,
        source: Option<String>,
        info: impl Fn(&Option<String>) -> SeriesInfo,
    ) -> Option<usize> {
        let key = (tool, metric, transport, target, source);
        if let Some(id) = self.ids.get(&key) {
            return *id;
        }
        let described = || {
            let mut s = SeriesInfo {
                source: key.4.clone(),
                from: key.3.from.clone(),
                ..info(&key.3.to)
            };
            if let Some(from) = &s.from {
                s.name = format!("{} from {from}", s.name);
            }
            s
        };
        if self.ids.len() >= MAX_KEYS && !reg.asks(&described()) {
            // Past the limit, series are no longer told apart (nor counted), but for the one
            // a selection asks for.
            reg.left_out_more = true;
            return None;
        }
        let seen = self
            .sources
            .entry((key.0, key.1, key.2, key.3.clone()))
            .or_insert(0);
        let shared = *seen > 0;
        *seen += 1;
        let mut series = described();
        if let (true, Some(s)) = (shared, &key.4) {
            series.name = format!("{} ({s})", series.name);
        }
        let id = reg.add(series);
        self.ids.insert(key, id);
        id
    }
}

/// The series of a whole text, as the page imports it: each with its times and values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imported {
    pub format: Option<Format>,
    pub series: Vec<(SeriesInfo, Vec<f64>, Vec<f64>)>,
    /// The first [`Imported::MAX_ERRORS`] refused lines.
    pub errors: Vec<LineError>,
    pub error_count: u64,
    /// Why nothing (more) was read, when the file is in no supported format.
    pub unsupported: Option<String>,
    pub notes: Vec<String>,
}

impl Imported {
    /// Refused lines kept (a file of bad lines costs no more memory than this).
    pub const MAX_ERRORS: usize = 100;
}

impl Sink for Imported {
    fn point(&mut self, series: usize, t_ms: f64, value: f64) {
        while self.series.len() <= series {
            self.series.push((
                SeriesInfo {
                    name: String::new(),
                    metric: None,
                    unit: None,
                    to: None,
                    transport: None,
                    source: None,
                    from: None,
                    column: None,
                    clock: Clock::Count,
                },
                Vec::new(),
                Vec::new(),
            ));
        }
        let s = &mut self.series[series];
        s.1.push(t_ms);
        s.2.push(value);
    }

    fn problem(&mut self, problem: Problem) {
        match problem {
            Problem::Line(e) => {
                self.error_count += 1;
                if self.errors.len() < Self::MAX_ERRORS {
                    self.errors.push(e);
                }
            }
            Problem::Unsupported(m) | Problem::Usage(m) => {
                self.unsupported.get_or_insert(m);
            }
        }
    }
}

/// A series' times and values in time order: a stable sort, so values of one time keep the
/// file's order; as they were when already in order.
pub fn in_time_order(t: Vec<f64>, v: Vec<f64>) -> (Vec<f64>, Vec<f64>) {
    if t.is_sorted_by(|a, b| a <= b) {
        return (t, v);
    }
    let mut order: Vec<usize> = (0..t.len()).collect();
    order.sort_by(|&a, &b| t[a].total_cmp(&t[b]));
    (
        order.iter().map(|&i| t[i]).collect(),
        order.iter().map(|&i| v[i]).collect(),
    )
}

/// Reads a whole text (the page's import): lines split at `\n` (a `\r` before it dropped),
/// each at most [`MAX_LINE`] bytes; every series found, with its points in time order
/// ([`in_time_order`]).
pub fn read_text<P: Parser>(text: &str, parser: P) -> Imported {
    let mut reader = Reader::new(parser, Options::default());
    let mut out = Imported::default();
    for (i, line) in text.split('\n').enumerate() {
        if reader.stopped() {
            break;
        }
        reader.line(i as u64 + 1, line.as_bytes(), &mut out);
    }
    reader.finish(&mut out);
    out.format = reader.format();
    // Series without a value (all refused, or of an empty document) are not shown.
    let infos = reader.series().to_vec();
    let series = std::mem::take(&mut out.series);
    out.series = infos
        .into_iter()
        .zip(series.into_iter().map(|(_, t, v)| (t, v)))
        .filter(|(_, (t, _))| !t.is_empty())
        .map(|(info, (t, v))| {
            let (t, v) = in_time_order(t, v);
            (info, t, v)
        })
        .collect();
    out.notes = reader.notes();
    out
}
