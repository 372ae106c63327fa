//! Reading a series of numbers from a file, streaming: NDJSON measurement records, CSV with
//! a chosen column, `time<TAB>value`, or one number a line. Memory does not grow with the
//! file; a malformed line stops the read with its line number and text unless the caller
//! asked to skip bad lines, in which case they are counted.

use nowcast_core::record::{Metric, Record, Status};
use std::fmt;
use std::io::{BufRead, Read};

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
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub line: u64,
    pub text: String,
    pub reason: String,
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.text.clone();
        if text.chars().count() > 80 {
            text = text.chars().take(77).collect::<String>() + "...";
        }
        write!(f, "line {}: {} (text: {:?})", self.line, self.reason, text)
    }
}

/// What the reader saw besides the values.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct ReadStats {
    pub format: String,
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
        Ok(_) => Err(format!("'{t}' is not a finite number")),
        Err(_) => Err(format!("'{t}' is not a number")),
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

/// Reads `input`, calling `sink` with each value in order; returns what it saw.
pub fn read_values<R: Read>(
    input: R,
    opts: &ReadOptions,
    mut sink: impl FnMut(f64),
) -> Result<ReadStats, ReadError> {
    let mut reader = std::io::BufReader::with_capacity(1 << 16, input);
    let mut stats = ReadStats::default();
    // Find the first data line to decide the format (skipping blanks and # comments).
    let mut first = String::new();
    let mut consumed = 0u64;
    loop {
        first.clear();
        if reader.read_line(&mut first)? == 0 {
            stats.format = format!("{:?}", opts.format).to_lowercase();
            return Ok(stats);
        }
        consumed += 1;
        let t = first.trim();
        if !t.is_empty() && !t.starts_with('#') {
            break;
        }
    }
    let format = match opts.format {
        Format::Auto => detect(&first),
        f => f,
    };
    stats.format = format!("{format:?}").to_lowercase();
    if opts.column.is_some() && format != Format::Csv {
        return Err(ReadError::Usage(format!(
            "--column applies to CSV input, but this input reads as {}",
            stats.format
        )));
    }
    let rest = std::io::Cursor::new(first.clone().into_bytes()).chain(reader);
    let skipped_before = consumed - 1;
    match format {
        Format::Csv => read_csv(rest, skipped_before, opts, &mut stats, &mut sink)?,
        _ => read_lines(rest, skipped_before, format, opts, &mut stats, &mut sink)?,
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
/// number and text, built only for a bad line.
fn take(
    value: Result<f64, String>,
    stats: &mut ReadStats,
    opts: &ReadOptions,
    sink: &mut impl FnMut(f64),
    origin: impl FnOnce() -> (u64, String),
) -> Result<(), ReadError> {
    match value {
        Ok(v) => {
            stats.values += 1;
            sink(v);
            Ok(())
        }
        Err(reason) => {
            let (line, text) = origin();
            bad(stats, opts, BadLine { line, text, reason })
        }
    }
}

fn read_lines(
    mut input: impl BufRead,
    offset: u64,
    format: Format,
    opts: &ReadOptions,
    stats: &mut ReadStats,
    sink: &mut impl FnMut(f64),
) -> Result<(), ReadError> {
    let mut line = String::new();
    let mut number = offset;
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        number += 1;
        stats.lines += 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
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
            Format::Csv | Format::Auto => unreachable!("handled by the caller"),
        };
        take(value, stats, opts, sink, || (number, t.to_string()))?;
    }
    Ok(())
}

fn read_csv(
    input: impl Read,
    offset: u64,
    opts: &ReadOptions,
    stats: &mut ReadStats,
    sink: &mut impl FnMut(f64),
) -> Result<(), ReadError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(input);
    let mut column: Option<usize> = None;
    let mut header_done = false;
    for rec in rdr.records() {
        let (line, rec) = match rec {
            Ok(r) => (r.position().map_or(0, |p| p.line()) + offset, r),
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line()) + offset;
                bad(
                    stats,
                    opts,
                    BadLine {
                        line,
                        text: String::new(),
                        reason: e.to_string(),
                    },
                )?;
                continue;
            }
        };
        stats.lines += 1;
        if rec.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        if !header_done {
            header_done = true;
            let is_header = rec.iter().any(|f| f.trim().parse::<f64>().is_err());
            let names: Vec<String> = rec.iter().map(|f| f.trim().to_string()).collect();
            let chosen = match (&opts.column, is_header) {
                (Some(Column::Index(i)), _) => *i,
                (Some(Column::Name(n)), true) => {
                    names.iter().position(|h| h == n).ok_or_else(|| {
                        ReadError::Usage(format!(
                            "no column named '{n}' (columns: {})",
                            names.join(", ")
                        ))
                    })?
                }
                (Some(Column::Name(n)), false) => {
                    return Err(ReadError::Usage(format!(
                        "column '{n}' asked by name, but the CSV has no header line"
                    )))
                }
                (None, true) => names
                    .iter()
                    .position(|h| h == "value")
                    .unwrap_or(names.len() - 1),
                (None, false) => rec.len() - 1,
            };
            if chosen >= rec.len() {
                return Err(ReadError::Usage(format!(
                    "column {chosen} does not exist (the first line has {} columns)",
                    rec.len()
                )));
            }
            stats.column = Some(if is_header {
                names[chosen].clone()
            } else {
                chosen.to_string()
            });
            column = Some(chosen);
            if is_header {
                continue;
            }
        }
        let c = column.expect("set on the first line");
        let value = match rec.get(c) {
            Some(f) => parse_number(f),
            None => Err(format!("no column {c} on this line")),
        };
        take(value, stats, opts, sink, || {
            (line, rec.iter().collect::<Vec<_>>().join(","))
        })?;
    }
    Ok(())
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
}
