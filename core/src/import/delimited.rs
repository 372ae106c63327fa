//! Delimited text: CSV (RFC 4180 quoting within a line) and tab-separated columns, with or
//! without a header; and Nowcast's own CSV export, which this module writes
//! ([`export_csv`]) and reads back.
//!
//! The rules (also in the module documentation of [`super`]):
//! - The first data line is a header when one of its fields is neither a number nor a time.
//! - The time column is, with a header, the first named `time`, `timestamp`,
//!   `timestamp_ms`, `date` or `datetime` (any case); without one, the first column when there
//!   are two or more and it reads as a time. Times are ms since 1970 or ISO 8601 dates;
//!   a time column whose first value is between 10⁹ and 10¹¹ (and whose name does not end in
//!   `_ms`) counts seconds since 1970 (`date +%s`), and a note says so.
//! - Every other column whose first value is a number (or empty, or a number written with
//!   thousands separators, `"1,200"`, which each line then reports) is a series, named by its
//!   header or `column N` (N from 0); a column of text is left out, and said so, unless it is
//!   the column named `value` and no other holds numbers: then each line reports it.
//! - A header with `metric` and `value` columns is Nowcast's export: one series per metric,
//!   target (`to`) and transport, as NDJSON records are read.
//! - One series chosen (the CLI): `--column` by name or index, else the column named `value`,
//!   else the last column of numbers.
//! - An empty field is no value (not an error; counted, [`super::Reader::without_value`]); a
//!   field that is not a number is the line's error, naming its column, and the line's other
//!   columns are still read.

use super::series_name;
use super::time::{counts_seconds, parse_time, parse_time_in};
use super::{
    not_a_number, number, quote, thousands, Clock, Column, Keyed, Out, Problem, SeriesInfo, Sink,
    Target,
};
use crate::record::{Metric, Record, Transport};
use std::borrow::Cow;

/// Header names of the time column.
const TIME_NAMES: [&str; 5] = ["time", "timestamp", "timestamp_ms", "date", "datetime"];
/// Header names listed in a message, at most.
const LISTED_COLUMNS: usize = 20;
/// Fields read of a line; the rest of a longer line is not split (no file of measurements
/// has more columns, and a line of a million commas costs no more than this).
const MAX_FIELDS: usize = 4096;

/// A field of a line: its byte range and whether it was quoted with doubled quotes inside.
type Span = (usize, usize, bool);

/// Splits `line` at `sep` (quoted fields may hold `sep` and doubled quotes; a quoted field
/// does not span lines). Linear in the line's length.
fn split(line: &str, sep: u8, out: &mut Vec<Span>) {
    out.clear();
    let b = line.as_bytes();
    let n = b.len();
    let mut i = 0;
    loop {
        let start = i;
        while i < n && (b[i] == b' ' || (b[i] == b'\t' && sep != b'\t')) {
            i += 1;
        }
        if i < n && b[i] == b'"' {
            i += 1;
            let s = i;
            let mut doubled = false;
            let end = loop {
                match b[i..].iter().position(|&c| c == b'"') {
                    None => {
                        i = n;
                        break n;
                    }
                    Some(p) if i + p + 1 < n && b[i + p + 1] == b'"' => {
                        doubled = true;
                        i += p + 2;
                    }
                    Some(p) => {
                        i += p + 1;
                        break i - 1;
                    }
                }
            };
            // Anything between the closing quote and the separator is dropped.
            while i < n && b[i] != sep {
                i += 1;
            }
            out.push((s, end, doubled));
        } else {
            while i < n && b[i] != sep {
                i += 1;
            }
            out.push((start, i, false));
        }
        if i >= n || out.len() == MAX_FIELDS {
            break;
        }
        i += 1;
        if i == n {
            out.push((n, n, false));
            break;
        }
    }
}

/// Whether a field is meant as a number: one, or one with thousands separators (which its
/// line then reports).
fn numeric(field: &str) -> bool {
    number(field).is_some() || thousands(field)
}

/// A field's text, trimmed, with doubled quotes undone.
fn text<'a>(line: &'a str, &(s, e, doubled): &Span) -> Cow<'a, str> {
    let t = line[s..e].trim_matches(|c: char| c.is_ascii_whitespace());
    if doubled {
        Cow::Owned(t.replace("\"\"", "\""))
    } else {
        Cow::Borrowed(t)
    }
}

/// What a column is.
#[derive(Clone, Debug)]
enum Col {
    /// Left out (text, or the time, or a key of the export).
    Skip,
    /// A series (`None`: beyond the series limit), and its name for messages.
    Series(Option<usize>, String),
}

/// Nowcast's export: where its keys are.
#[derive(Debug)]
struct Export {
    metric: usize,
    value: usize,
    unit: Option<usize>,
    to: Option<usize>,
    transport: Option<usize>,
    /// Since the `source` column was added; earlier exports have none.
    source: Option<usize>,
    /// The record's sender (since 2026-12-08), which names the service a client's series
    /// came from ([`super::Target::of_record`]).
    from: Option<usize>,
    keyed: Keyed,
}

#[derive(Debug)]
struct Layout {
    columns: usize,
    time: Option<(usize, String)>,
    /// What a number in the time column counts, ms: 1000 for seconds since 1970.
    time_unit_ms: f64,
    cols: Vec<Col>,
    export: Option<Export>,
}

/// A CSV or TSV file, one line at a time.
#[derive(Debug)]
pub struct Delimited {
    sep: u8,
    spans: Vec<Span>,
    /// The header's names, once read (until the first data line decides the columns).
    header: Option<Vec<String>>,
    layout: Option<Layout>,
    notes: Vec<String>,
}

impl Delimited {
    pub fn new(sep: u8) -> Self {
        Self {
            sep,
            spans: Vec::new(),
            header: None,
            layout: None,
            notes: Vec::new(),
        }
    }

    /// What was left out, said once.
    pub fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    pub fn line<S: Sink>(&mut self, line: &str, out: &mut Out<'_, S>) {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return;
        }
        let mut spans = std::mem::take(&mut self.spans);
        split(line, self.sep, &mut spans);
        if spans.iter().all(|s| text(line, s).is_empty()) {
            self.spans = spans;
            return;
        }
        if self.layout.is_none() && self.header.is_none() {
            let is_header = spans.iter().any(|s| {
                let f = text(line, s);
                !f.is_empty() && !numeric(&f) && parse_time(&f).is_none()
            });
            if is_header {
                let names: Vec<String> = spans.iter().map(|s| text(line, s).into_owned()).collect();
                let export =
                    names.iter().any(|n| n == "metric") && names.iter().any(|n| n == "value");
                if export {
                    self.layout = Some(self.export_layout(&names));
                } else {
                    self.header = Some(names);
                }
                self.spans = spans;
                return;
            }
        }
        if self.layout.is_none() {
            let header = self.header.take();
            match self.layout(header, line, &spans, out) {
                Ok(layout) => self.layout = Some(layout),
                Err(problem) => {
                    out.stop(problem);
                    self.spans = spans;
                    return;
                }
            }
        }
        self.row(line, &spans, out);
        self.spans = spans;
    }

    /// The columns of Nowcast's export.
    fn export_layout(&self, names: &[String]) -> Layout {
        // The export's values are all in `value`: its series are chosen by metric, target
        // and transport, never by column.
        let at = |n: &str| names.iter().position(|h| h == n);
        let time = names
            .iter()
            .position(|h| TIME_NAMES.contains(&h.to_ascii_lowercase().as_str()))
            .map(|i| (i, names[i].clone()));
        Layout {
            columns: names.len(),
            time,
            // Nowcast writes ms.
            time_unit_ms: 1.0,
            cols: Vec::new(),
            export: Some(Export {
                metric: at("metric").expect("an export has a metric column"),
                value: at("value").expect("an export has a value column"),
                unit: at("unit"),
                to: at("to"),
                transport: at("transport"),
                source: at("source"),
                from: at("from"),
                keyed: Keyed::default(),
            }),
        }
    }

    /// The columns, decided on the first data line (`row`), with the header's names.
    fn layout<S: Sink>(
        &mut self,
        header: Option<Vec<String>>,
        line: &str,
        row: &[Span],
        out: &mut Out<'_, S>,
    ) -> Result<Layout, Problem> {
        let columns = header.as_ref().map_or(row.len(), Vec::len);
        // Header names given to more than one column: those columns are told apart, and
        // chosen, by their index.
        let mut uses = std::collections::HashMap::<&str, usize>::new();
        for n in header.iter().flatten().filter(|n| !n.is_empty()) {
            *uses.entry(n.as_str()).or_default() += 1;
        }
        let shared = |n: &str| uses.get(n).is_some_and(|&k| k > 1);
        let name = |i: usize| match &header {
            Some(h) if shared(&h[i]) => format!("{} (column {i})", h[i]),
            Some(h) => h[i].clone(),
            None => format!("column {i}"),
        };
        let listed = || match &header {
            Some(h) => {
                let mut l: Vec<String> = h.iter().take(LISTED_COLUMNS).map(|n| quote(n)).collect();
                if h.len() > LISTED_COLUMNS {
                    l.push(format!("… {} in all", h.len()));
                }
                l.join(", ")
            }
            None => format!("{columns} columns without a header"),
        };
        let mut time = match &header {
            Some(h) => h
                .iter()
                .position(|n| TIME_NAMES.contains(&n.to_ascii_lowercase().as_str())),
            None => (columns >= 2 && parse_time(&text(line, &row[0])).is_some()).then_some(0),
        };
        let chosen = match out.reg.select.as_ref().and_then(|s| s.column.clone()) {
            None => None,
            Some(Column::Index(i)) if i < columns => Some(i),
            Some(Column::Index(i)) => {
                return Err(Problem::Usage(format!(
                    "column {i} does not exist (the first line has {columns} columns)"
                )))
            }
            Some(Column::Name(n)) => match &header {
                None => {
                    return Err(Problem::Usage(format!(
                        "column '{}' asked by name, but the CSV has no header line",
                        quote(&n)
                    )))
                }
                Some(_) if shared(&n) => {
                    let at: Vec<String> = header
                        .iter()
                        .flatten()
                        .enumerate()
                        .filter(|(_, x)| **x == n)
                        .map(|(i, _)| format!("--column {i}"))
                        .collect();
                    return Err(Problem::Usage(format!(
                        "{} columns are named '{}': choose one by its index ({})",
                        at.len(),
                        quote(&n),
                        at.join(", ")
                    )));
                }
                Some(h) => Some(h.iter().position(|x| *x == n).ok_or_else(|| {
                    Problem::Usage(format!(
                        "no column named '{}' (columns: {})",
                        quote(&n),
                        listed()
                    ))
                })?),
            },
        };
        if chosen.is_some() && chosen == time {
            time = None;
        }
        let field = |i: usize| row.get(i).map(|s| text(line, s)).unwrap_or_default();
        // A column of text named `value`, with no other numbers beside it, is the series
        // meant: each line says what is wrong with it, rather than the file "no numbers".
        let value_meant = header
            .as_ref()
            .and_then(|h| h.iter().position(|n| n == "value"))
            .filter(|&v| {
                Some(v) != time && (0..columns).all(|i| Some(i) == time || !numeric(&field(i)))
            });
        let series_anyway = chosen.or(value_meant);
        let clock = if time.is_some() {
            Clock::Epoch
        } else {
            Clock::Count
        };
        let mut cols = vec![Col::Skip; columns];
        let mut text_columns = Vec::new();
        let mut series = Vec::new();
        let mut numbers = false;
        for (i, col) in cols.iter_mut().enumerate() {
            if Some(i) == time {
                continue;
            }
            let field = field(i);
            let is_number = numeric(&field);
            numbers |= is_number || Some(i) == series_anyway;
            if Some(i) != series_anyway && !field.is_empty() && !is_number {
                text_columns.push(quote(&name(i)));
                continue;
            }
            // An empty field under an empty header name is no column at all.
            if Some(i) != series_anyway
                && field.is_empty()
                && header.as_ref().is_some_and(|h| h[i].is_empty())
            {
                continue;
            }
            let id = out.reg.add(SeriesInfo {
                name: name(i),
                metric: None,
                unit: None,
                to: None,
                transport: None,
                source: None,
                from: None,
                column: Some(match &header {
                    Some(h) if !shared(&h[i]) => h[i].clone(),
                    _ => i.to_string(),
                }),
                clock,
            });
            series.push((i, id));
            *col = Col::Series(id, name(i));
        }
        if series.is_empty() || !numbers {
            // The time column is numbers too, but not a series: say which it was taken for.
            let time_note = time.map_or(String::new(), |t| {
                format!(
                    " besides the time column '{}' (--column {} forecasts it)",
                    quote(&name(t)),
                    t
                )
            });
            return Err(Problem::Unsupported(format!(
                "line {}: no column of numbers{time_note} (columns: {}). {}.",
                out.line,
                listed(),
                super::SUPPORTED
            )));
        }
        if !text_columns.is_empty() {
            self.notes.push(format!(
                "column(s) of text not read: {}",
                text_columns.join(", ")
            ));
        }
        // The default series of one chosen: the named column, `value`, else the last.
        let default = chosen
            .or_else(|| header.as_ref()?.iter().position(|n| n == "value"))
            .and_then(|c| series.iter().find(|(i, _)| *i == c))
            .or(series.last())
            .and_then(|(_, id)| *id);
        if let Some(id) = default {
            out.reg.prefer(id);
        }
        // Times in seconds since 1970 (a column named for ms never is).
        let seconds = time.is_some_and(|t| {
            !name(t).to_ascii_lowercase().ends_with("_ms") && counts_seconds(&field(t))
        });
        if let Some(t) = time.filter(|_| seconds) {
            self.notes.push(format!(
                "time column '{}': read as seconds since 1970 (as ms, its values would be in 1970)",
                quote(&name(t))
            ));
        }
        Ok(Layout {
            columns,
            time: time.map(|i| (i, name(i))),
            time_unit_ms: if seconds { 1000.0 } else { 1.0 },
            cols,
            export: None,
        })
    }

    fn row<S: Sink>(&mut self, line: &str, row: &[Span], out: &mut Out<'_, S>) {
        let layout = self.layout.as_mut().expect("decided before the rows");
        // Fewer fields than columns, or more that hold something: which column a value
        // belongs to is not known. (Empty fields past the last, a trailing comma, are none.)
        let extra = row
            .get(layout.columns..)
            .is_some_and(|r| r.iter().any(|s| !text(line, s).is_empty()));
        if row.len() < layout.columns || extra {
            return out.error(
                None,
                format!(
                    "{} field{} where the first line has {}",
                    row.len(),
                    if row.len() == 1 { "" } else { "s" },
                    layout.columns
                ),
            );
        }
        let t = match &layout.time {
            None => None,
            Some((i, name)) => {
                let field = text(line, &row[*i]);
                match parse_time_in(&field, layout.time_unit_ms) {
                    Some(t) => Some(t),
                    None => {
                        let unit = if layout.time_unit_ms == 1.0 {
                            "ms"
                        } else {
                            "s"
                        };
                        return out.error(
                            Some(name),
                            format!(
                                "'{}' is not a time ({unit} since 1970, or an ISO 8601 date)",
                                quote(&field)
                            ),
                        );
                    }
                }
            }
        };
        if let Some(e) = &mut layout.export {
            return export_row(e, line, row, t, out);
        }
        for (i, col) in layout.cols.iter().enumerate() {
            let Col::Series(id, name) = col else {
                continue;
            };
            if let Some(id) = id {
                if !out.reg.wanted(*id) {
                    continue;
                }
            }
            let field = text(line, &row[i]);
            if field.is_empty() {
                out.empty_field(id.is_some());
                continue;
            }
            match number(&field) {
                Some(v) => out.point(*id, t, v, name),
                None => out.error(Some(name), not_a_number(&field)),
            }
        }
    }
}

/// A line of Nowcast's export.
fn export_row<S: Sink>(
    e: &mut Export,
    line: &str,
    row: &[Span],
    t: Option<f64>,
    out: &mut Out<'_, S>,
) {
    let metric = match text(line, &row[e.metric]).parse::<Metric>() {
        Ok(m) => m,
        Err(why) => return out.error(Some("metric"), why),
    };
    if let Some(u) = e.unit {
        let unit = text(line, &row[u]);
        if !unit.is_empty() && unit != metric.unit().name() {
            return out.error(
                Some("unit"),
                format!(
                    "{metric} is measured in {}, not {}",
                    metric.unit(),
                    quote(&unit)
                ),
            );
        }
    }
    let transport = match e.transport.map(|i| text(line, &row[i])) {
        Some(t) if !t.is_empty() => match t.parse::<Transport>() {
            Ok(t) => Some(t),
            Err(why) => return out.error(Some("transport"), why),
        },
        _ => None,
    };
    let to =
        e.to.map(|i| text(line, &row[i]).into_owned())
            .filter(|t| !t.is_empty());
    let source = e
        .source
        .map(|i| text(line, &row[i]).into_owned())
        .filter(|s| !s.is_empty());
    let from = e
        .from
        .map(|i| text(line, &row[i]))
        .filter(|s| !s.is_empty());
    let target = match to {
        Some(to) => Target::of_record(to, from.as_deref()),
        None => Target::default(),
    };
    let value = text(line, &row[e.value]);
    let v = number(&value);
    if v.is_none() && !value.is_empty() {
        return out.error(Some("value"), not_a_number(&value));
    }
    let clock = if t.is_some() {
        Clock::Epoch
    } else {
        Clock::Count
    };
    let id = e
        .keyed
        .id(out.reg, "record", metric, transport, target, source, |to| {
            SeriesInfo {
                transport,
                ..SeriesInfo::measured(
                    series_name(metric, transport, to.as_deref()),
                    metric,
                    to.clone(),
                    clock,
                )
            }
        });
    match (v, id) {
        (Some(v), _) => out.point(id, t, v, "value"),
        // An empty value: no value of its series, counted if that series is read.
        (None, Some(id)) => {
            let counted = out.reg.wanted(id);
            out.empty_field(counted);
        }
        (None, None) => {}
    }
}

/// A CSV field, quoted when it must be (RFC 4180).
fn field(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with([' ', '\t']) || s.ends_with([' ', '\t'])
    {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

/// The header of [`export_csv`].
pub const EXPORT_HEADER: &str = "time,value,metric,unit,transport,to,series,source,from";

/// Records as the page exports them to CSV: [`EXPORT_HEADER`], one line per record with a
/// value (timeouts and failures have none, and a FOBS congestion event is no value of a
/// series; the NDJSON export keeps them), `series` the title the page shows (for people; the
/// reader keys series by metric, transport, target and source, as it keys records).
pub fn export_csv<'a>(series: impl IntoIterator<Item = (&'a str, &'a [Record])>) -> String {
    let mut out = String::from(EXPORT_HEADER);
    out.push('\n');
    for (label, records) in series {
        for r in records {
            export_csv_line(label, r, &mut out);
        }
    }
    out
}

/// Appends `r`'s line of [`export_csv`] (and its newline) to `out`, in the series titled
/// `label`; nothing for a record without a value or for a congestion event. For exports
/// written a record at a time (`nowcast archive export --format csv`).
pub fn export_csv_line(label: &str, r: &Record, out: &mut String) {
    use std::fmt::Write;
    let Some(v) = r.value.filter(|_| r.congestion.is_none()) else {
        return;
    };
    let transport = r.probe.as_ref().and_then(|p| p.transport);
    let _ = writeln!(
        out,
        "{},{v},{},{},{},{},{},{},{}",
        r.timestamp_ms,
        r.metric,
        r.unit,
        transport.map_or("", Transport::name),
        field(&r.to),
        field(label),
        field(&r.source),
        field(r.from.as_deref().unwrap_or("")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str, sep: u8) -> Vec<String> {
        let mut spans = Vec::new();
        split(line, sep, &mut spans);
        spans.iter().map(|s| text(line, s).into_owned()).collect()
    }

    #[test]
    fn splits_quoted_fields_within_a_line() {
        assert_eq!(fields("a,b,c", b','), ["a", "b", "c"]);
        assert_eq!(fields(" a , b ,", b','), ["a", "b", ""]);
        assert_eq!(
            fields("\"a,b\",\"say \"\"hi\"\"\",x", b','),
            ["a,b", "say \"hi\"", "x"]
        );
        assert_eq!(fields("\"open", b','), ["open"]);
        assert_eq!(fields("1\t 2", b'\t'), ["1", "2"]);
        assert_eq!(fields("", b','), [""]);
        assert_eq!(fields(",", b','), ["", ""]);
    }

    #[test]
    fn the_export_quotes_what_needs_it() {
        let mut r = Record::new(1000.0, "browser", Metric::Rtt, 2.5, "h,1");
        r.probe = Some(crate::record::Probe {
            transport: Some(Transport::Websocket),
            ..Default::default()
        });
        let text = export_csv([("RTT, \"echo\"", std::slice::from_ref(&r))]);
        assert_eq!(
            text,
            "time,value,metric,unit,transport,to,series,source,from\n1000,2.5,rtt,ms,websocket,\"h,1\",\"RTT, \"\"echo\"\"\",browser,\n"
        );
    }
}
