//! Reading a series of numbers from a file, streaming: NDJSON measurement records, CSV with
//! a chosen column, `time<TAB>value`, or one number a line. Memory does not grow with the
//! file, nor with a line: a line longer than [`MAX_LINE`] is a bad line, named by its number
//! and never held whole. A malformed line stops the read with its line number and the start
//! of its text (at most [`QUOTE_CHARS`] characters are ever quoted) unless the caller asked
//! to skip bad lines, in which case they are counted.

use nowcast_core::record::{Metric, Record, Status};
use std::fmt;
use std::io::{BufRead, Read};

/// The longest line read, in bytes.
pub const MAX_LINE: usize = 1 << 20;
/// The most characters of a line (or of a value) an error quotes.
pub const QUOTE_CHARS: usize = 80;
/// The most characters of a reason an error repeats (a record's reason may quote the line).
const REASON_CHARS: usize = 240;
/// The layout of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Decide from the first data line.
    Auto,
    /// Measurement records, one JSON object a line.
    Ndjson,
    /// Comma-separated values, with or without a header.
    Csv,
    /// `time<TAB>value` (or any tab-separated columns; the value is the last one).
    Tsv,
    /// One number a line.
    Plain,
}

/// Which CSV column holds the values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    Name(String),
    Index(usize),
}

impl std::str::FromStr for Column {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.parse::<usize>() {
            Ok(i) => Column::Index(i),
            Err(_) if !s.is_empty() => Column::Name(s.to_string()),
            Err(_) => return Err("a column is a name or a 0-based index".into()),
        })
    }
}

/// Options for reading.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    pub format: Format,
    pub column: Option<Column>,
    /// Only records of this metric (NDJSON); by default the first record's metric.
    pub metric: Option<Metric>,
    pub skip_bad: bool,
    /// The longest line read, bytes ([`MAX_LINE`] unless a test wants less).
    pub max_line: usize,
}

/// `text`, cut to `max` characters (the cut marked with "...").
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some(_) => {
            let keep: String = text.chars().take(max.saturating_sub(3)).collect();
            keep + "..."
        }
    }
}

/// At most [`QUOTE_CHARS`] characters of `text`, to quote in an error.
pub fn quote(text: &str) -> String {
    cut(text, QUOTE_CHARS)
}

/// Enough of `bytes` to quote, as text.
fn lossy_start(bytes: &[u8]) -> String {
    // A character is at most 4 bytes.
    String::from_utf8_lossy(&bytes[..bytes.len().min(4 * QUOTE_CHARS)]).into_owned()
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub line: u64,
    /// The start of the line (at most [`QUOTE_CHARS`] characters).
    pub text: String,
    pub reason: String,
}

impl BadLine {
    fn new(line: u64, text: &str, reason: &str) -> Self {
        Self {
            line,
            text: quote(text),
            reason: cut(reason, REASON_CHARS),
        }
    }
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: {} (text: {:?})",
            self.line, self.reason, self.text
        )
    }
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
    /// NDJSON records of another metric than the one read.
    pub other_metric: u64,
    /// NDJSON records whose probe timed out or failed (no value).
    pub without_value: u64,
    /// The metric read from NDJSON records.
    pub metric: Option<Metric>,
    /// The CSV column read.
    pub column: Option<String>,
    #[serde(skip)]
    pub first_bad: Option<BadLine>,
}

/// Why reading stopped.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Bad(BadLine),
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

fn parse_number(s: &str) -> Result<f64, String> {
    let t = s.trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(format!("'{}' is not a finite number", quote(t))),
        Err(_) => Err(format!("'{}' is not a number", quote(t))),
    }
}

fn detect(first: &str) -> Format {
    let t = first.trim_start();
    if t.starts_with('{') {
        Format::Ndjson
    } else if first.contains('\t') {
        Format::Tsv
    } else if first.contains(',') {
        Format::Csv
    } else {
        Format::Plain
    }
}

/// A line, or what is known of one too long to keep.
enum Line<'a> {
    Text(&'a [u8]),
    /// Longer than the limit: its first bytes (up to the limit) and nothing more.
    TooLong(&'a [u8]),
}

/// The lines of a reader, each at most `max` bytes held, numbered from 1.
struct Lines<R> {
    input: R,
    buf: Vec<u8>,
    max: usize,
    number: u64,
}

impl<R: BufRead> Lines<R> {
    fn new(input: R, max: usize) -> Self {
        Self {
            input,
            buf: Vec::new(),
            max,
            number: 0,
        }
    }

    /// The next line (without its newline) and its number; `None` at the end.
    fn next(&mut self) -> std::io::Result<Option<(u64, Line<'_>)>> {
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
        let line = if too_long {
            Line::TooLong(&self.buf)
        } else {
            Line::Text(self.buf.strip_suffix(b"\r").unwrap_or(&self.buf))
        };
        Ok(Some((self.number, line)))
    }
}

/// Reads `input`, calling `sink` with each value in order; returns what it saw.
pub fn read_values<R: Read>(
    input: R,
    opts: &ReadOptions,
    mut sink: impl FnMut(f64),
) -> Result<ReadStats, ReadError> {
    let mut lines = Lines::new(
        std::io::BufReader::with_capacity(1 << 16, input),
        opts.max_line.max(1),
    );
    let mut stats = ReadStats::default();
    // Decided from the first data line (blanks and # comments skipped).
    let mut format = None;
    let mut csv = Csv::default();
    while let Some((number, line)) = lines.next()? {
        stats.lines += 1;
        let text = match line {
            Line::TooLong(start) => {
                let reason = format!(
                    "the line is longer than {} bytes (the longest line read)",
                    opts.max_line
                );
                let b = BadLine::new(number, &lossy_start(start), &reason);
                bad(&mut stats, opts, b)?;
                continue;
            }
            Line::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => {
                    let reason = format!("not UTF-8 text (at byte {})", e.valid_up_to());
                    let b = BadLine::new(number, &lossy_start(bytes), &reason);
                    bad(&mut stats, opts, b)?;
                    continue;
                }
            },
        };
        let t = text.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let format = match format {
            Some(f) => f,
            None => {
                let f = match opts.format {
                    Format::Auto => detect(text),
                    f => f,
                };
                stats.format = format!("{f:?}").to_lowercase();
                if opts.column.is_some() && f != Format::Csv {
                    return Err(ReadError::Usage(format!(
                        "--column applies to CSV input, but this input reads as {}",
                        stats.format
                    )));
                }
                *format.insert(f)
            }
        };
        let value = match format {
            Format::Plain => parse_number(t),
            Format::Tsv => match t.rsplit('\t').next() {
                Some(v) if t.contains('\t') => parse_number(v),
                _ => Err("expected time<TAB>value".into()),
            },
            Format::Ndjson => match Record::parse(t) {
                Err(e) => Err(e.to_string()),
                Ok(r) => {
                    let want = *stats.metric.get_or_insert(opts.metric.unwrap_or(r.metric));
                    if r.metric != want {
                        stats.other_metric += 1;
                        continue;
                    }
                    match (r.status, r.value) {
                        (Status::Ok, Some(v)) => Ok(v),
                        _ => {
                            stats.without_value += 1;
                            continue;
                        }
                    }
                }
            },
            Format::Csv => match csv.value(text.as_bytes(), opts, &mut stats)? {
                Some(v) => v,
                None => continue,
            },
            Format::Auto => unreachable!("decided above"),
        };
        take(value, &mut stats, opts, &mut sink, || (number, t))?;
    }
    if format.is_none() {
        stats.format = format!("{:?}", opts.format).to_lowercase();
    }
    Ok(stats)
}

fn bad(stats: &mut ReadStats, opts: &ReadOptions, b: BadLine) -> Result<(), ReadError> {
    if opts.skip_bad {
        stats.skipped_bad += 1;
        stats.first_bad.get_or_insert(b);
        Ok(())
    } else {
        Err(ReadError::Bad(b))
    }
}

/// Passes a parsed value on, or handles the line it came from as bad; `origin` gives the line
/// number and text, asked only for a bad line.
fn take<'t>(
    value: Result<f64, String>,
    stats: &mut ReadStats,
    opts: &ReadOptions,
    sink: &mut impl FnMut(f64),
    origin: impl FnOnce() -> (u64, &'t str),
) -> Result<(), ReadError> {
    match value {
        Ok(v) => {
            stats.values += 1;
            sink(v);
            Ok(())
        }
        Err(reason) => {
            let (line, text) = origin();
            bad(stats, opts, BadLine::new(line, text, &reason))
        }
    }
}

/// CSV, one line at a time (RFC 4180 fields: quotes, doubled quotes, commas inside quotes;
/// a quoted field does not span lines): the column chosen on the first line, its value on
/// the others.
struct Csv {
    parser: csv_core::Reader,
    /// A line's fields, one after another, and where each ends.
    field: Vec<u8>,
    ends: Vec<usize>,
    /// The column read, once the first line has been seen.
    column: Option<usize>,
}

/// Header names listed in an error, at most.
const LISTED_COLUMNS: usize = 20;

impl Default for Csv {
    fn default() -> Self {
        Self {
            // The builder compiles the parser's DFA (a default Reader has none).
            parser: csv_core::ReaderBuilder::new().build(),
            field: Vec::new(),
            ends: Vec::new(),
            column: None,
        }
    }
}

impl Csv {
    /// Calls `each` with every field of `line` (trimmed) until it returns false; the number
    /// of fields seen.
    fn fields(&mut self, line: &[u8], mut each: impl FnMut(usize, &[u8]) -> bool) -> usize {
        use csv_core::ReadRecordResult as R;
        self.parser.reset();
        if self.field.is_empty() {
            self.field.resize(256, 0);
            self.ends.resize(16, 0);
        }
        // The whole line in one call (or a few, while the buffers grow); the ends are offsets
        // in `field` across the calls.
        let (mut input, mut len, mut count, mut eof) = (line, 0, 0, false);
        loop {
            let (res, nin, nout, nends) = self.parser.read_record(
                if eof { &[] } else { input },
                &mut self.field[len..],
                &mut self.ends[count..],
            );
            input = &input[nin..];
            len += nout;
            count += nends;
            match res {
                R::InputEmpty => eof = true,
                R::OutputFull => {
                    let grown = self.field.len() * 2;
                    self.field.resize(grown, 0);
                }
                R::OutputEndsFull => {
                    let grown = self.ends.len() * 2;
                    self.ends.resize(grown, 0);
                }
                R::Record | R::End => break,
            }
        }
        let mut start = 0;
        for i in 0..count {
            let end = self.ends[i];
            if !each(i, self.field[start..end].trim_ascii()) {
                return i + 1;
            }
            start = end;
        }
        count
    }

    /// The value of a data line, `None` for the header line or a line of empty fields.
    fn value(
        &mut self,
        line: &[u8],
        opts: &ReadOptions,
        stats: &mut ReadStats,
    ) -> Result<Option<Result<f64, String>>, ReadError> {
        let Some(c) = self.column else {
            return self.first(line, opts, stats);
        };
        let mut value = None;
        let mut blank = true;
        self.fields(line, |i, f| {
            blank &= f.is_empty();
            if i == c {
                value = Some(parse_number(&String::from_utf8_lossy(f)));
            }
            true
        });
        if blank {
            return Ok(None);
        }
        Ok(Some(value.unwrap_or_else(|| {
            Err(format!("no column {c} on this line"))
        })))
    }

    /// The first line: a header (a field that is not a number) or data; chooses the column.
    fn first(
        &mut self,
        line: &[u8],
        opts: &ReadOptions,
        stats: &mut ReadStats,
    ) -> Result<Option<Result<f64, String>>, ReadError> {
        let mut names = Vec::new();
        self.fields(line, |_, f| {
            names.push(String::from_utf8_lossy(f).into_owned());
            true
        });
        if names.iter().all(|f| f.is_empty()) {
            return Ok(None);
        }
        let is_header = names.iter().any(|f| f.parse::<f64>().is_err());
        let listed = || {
            let mut l: Vec<String> = names
                .iter()
                .take(LISTED_COLUMNS)
                .map(|n| quote(n))
                .collect();
            if names.len() > LISTED_COLUMNS {
                l.push(format!("… {} in all", names.len()));
            }
            l.join(", ")
        };
        let chosen = match (&opts.column, is_header) {
            (Some(Column::Index(i)), _) => *i,
            (Some(Column::Name(n)), true) => {
                names.iter().position(|h| h == n).ok_or_else(|| {
                    ReadError::Usage(format!(
                        "no column named '{}' (columns: {})",
                        quote(n),
                        listed()
                    ))
                })?
            }
            (Some(Column::Name(n)), false) => {
                return Err(ReadError::Usage(format!(
                    "column '{}' asked by name, but the CSV has no header line",
                    quote(n)
                )))
            }
            (None, true) => names
                .iter()
                .position(|h| h == "value")
                .unwrap_or(names.len() - 1),
            (None, false) => names.len() - 1,
        };
        if chosen >= names.len() {
            return Err(ReadError::Usage(format!(
                "column {chosen} does not exist (the first line has {} columns)",
                names.len()
            )));
        }
        stats.column = Some(if is_header {
            quote(&names[chosen])
        } else {
            chosen.to_string()
        });
        self.column = Some(chosen);
        if is_header {
            return Ok(None);
        }
        Ok(Some(parse_number(&names[chosen])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(
        text: &str,
        format: Format,
        column: Option<&str>,
        skip_bad: bool,
    ) -> Result<(Vec<f64>, ReadStats), ReadError> {
        let opts = ReadOptions {
            format,
            column: column.map(|c| c.parse().unwrap()),
            metric: None,
            skip_bad,
            max_line: 4096,
        };
        let mut out = Vec::new();
        let stats = read_values(text.as_bytes(), &opts, |v| out.push(v))?;
        Ok((out, stats))
    }

    #[test]
    fn detects_every_format() {
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
        assert_eq!((s.other_metric, s.without_value), (1, 1));
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
        // A line of commas under the limit, in CSV.
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
        let opts = ReadOptions {
            format: Format::Auto,
            column: None,
            metric: None,
            skip_bad: false,
            max_line: MAX_LINE,
        };
        let junk = "x".repeat(100_000);
        let err = read_values(format!("1\n{junk}\n").as_bytes(), &opts, |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 2: 'xxx"), "{err}");
        assert!(err.len() < 300, "{} bytes: {err}", err.len());
        // A record whose reason repeats its text.
        let rec = format!(r#"{{"schema_version":"{junk}"}}"#);
        let err = read_values(format!("{rec}\n").as_bytes(), &opts, |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 1: field 'schema_version'"), "{err}");
        assert!(err.len() < 450, "{} bytes", err.len());
    }

    #[test]
    fn bytes_that_are_not_text_and_quoted_csv_fields() {
        let mut bytes = b"1\n2\n".to_vec();
        bytes.extend_from_slice(b"3\xff\xfe\n4\n");
        let opts = |skip_bad| ReadOptions {
            format: Format::Auto,
            column: None,
            metric: None,
            skip_bad,
            max_line: MAX_LINE,
        };
        let err = read_values(bytes.as_slice(), &opts(false), |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("line 3: not UTF-8 text (at byte 1)"),
            "{err}"
        );
        let mut v = Vec::new();
        read_values(bytes.as_slice(), &opts(true), |x| v.push(x)).unwrap();
        assert_eq!(v, [1.0, 2.0, 4.0]);
        let csv = "\"time, s\",\"say \"\"hi\"\"\",value\r\n1,\"a,b\",5\r\n2,c,6\r\n";
        let (v, s) = read(csv, Format::Auto, None, false).unwrap();
        assert_eq!((v, s.column.as_deref()), (vec![5.0, 6.0], Some("value")));
        let (v, _) = read(csv, Format::Auto, Some("say \"hi\""), true).unwrap();
        assert!(v.is_empty(), "that column holds no numbers");
    }
}
