//! JSON documents of other tools, told apart by their members: a record has
//! `schema_version`, iperf3 `-J` output `intervals` (or only `error`), irtt's `round_trips`,
//! mtr's `report`. A file that is one pretty-printed document is gathered line by line
//! ([`Document`], at most [`super::MAX_DOCUMENT`] bytes) and read at its end.

use super::{
    cut, iperf3, irtt, mtr, series_name, Clock, Format, Keyed, Out, SeriesInfo, Sink, Target,
    MAX_DOCUMENT,
};
use crate::json::{Json, Kind as JsonKind, Parser};
use crate::record::{Record, Status};

/// What a JSON object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Record,
    Iperf3,
    Irtt,
    Mtr,
    Unknown,
}

/// How an object of unknown kind is described in the one message it gets.
pub const UNKNOWN: &str =
    "a JSON value that is no measurement record, nor iperf3, irtt or mtr output";

impl Kind {
    pub fn format(self) -> Format {
        match self {
            Kind::Record | Kind::Unknown => Format::Ndjson,
            Kind::Iperf3 => Format::Iperf3,
            Kind::Irtt => Format::Irtt,
            Kind::Mtr => Format::Mtr,
        }
    }

    pub fn described(self) -> &'static str {
        match self {
            Kind::Unknown => UNKNOWN,
            k => described(k.format()),
        }
    }
}

/// A format's objects, for messages.
pub fn described(format: Format) -> &'static str {
    match format {
        Format::Iperf3 => "iperf3 -J output",
        Format::Irtt => "irtt output",
        Format::Mtr => "an mtr report",
        _ => "a measurement record",
    }
}

pub fn kind<J: Json>(v: &J) -> Kind {
    let has = |k: &str| v.get(k).is_some();
    // A record without its version (written by hand, or by another tool) is still read as
    // one, so that the reader names what it lacks rather than calling it no format at all.
    if has("schema_version") || (has("metric") && has("unit") && has("value")) {
        Kind::Record
    } else if has("intervals")
        || (has("start") && has("end"))
        || v.get("error").is_some_and(|e| e.kind() == JsonKind::String)
    {
        Kind::Iperf3
    } else if has("round_trips") {
        Kind::Irtt
    } else if v.get("report").is_some_and(|r| r.get("hubs").is_some()) {
        Kind::Mtr
    } else {
        Kind::Unknown
    }
}

/// Reads one document of `kind`.
pub fn read<J: Json, S: Sink>(
    kind: Kind,
    v: &J,
    out: &mut Out<'_, S>,
    keyed: &mut Keyed,
    without_value: &mut u64,
) {
    match kind {
        Kind::Iperf3 => iperf3::read(v, out, keyed),
        Kind::Irtt => irtt::read(v, out, keyed),
        Kind::Mtr => mtr::read(v, out, keyed),
        Kind::Record => record(v, out, keyed, without_value),
        Kind::Unknown => {}
    }
}

/// A record's value into its series; one without a value (a timeout, a failure) is counted,
/// and so is a FOBS congestion event, which is no value of a series.
pub fn record<J: Json, S: Sink>(
    v: &J,
    out: &mut Out<'_, S>,
    keyed: &mut Keyed,
    without_value: &mut u64,
) {
    let r = match Record::read(v) {
        Ok(r) => r,
        Err(e) => return out.error(e.field.as_deref(), e.message),
    };
    // A FOBS congestion event is a `loss` record of one window's loss, written when loss
    // happened: read into the loss series beside the transfers' own, it would mix two
    // quantities (and only ever the windows that lost something).
    if r.congestion.is_some() {
        out.reg.congestion_events += 1;
        return;
    }
    let (Status::Ok, Some(value)) = (r.status, r.value) else {
        *without_value += 1;
        return;
    };
    let transport = r.probe.as_ref().and_then(|p| p.transport);
    let metric = r.metric;
    let id = keyed.id(
        out.reg,
        "record",
        metric,
        transport,
        Target::of_record(r.to, r.from.as_deref()),
        Some(r.source),
        |to| SeriesInfo {
            transport,
            ..SeriesInfo::measured(
                series_name(metric, transport, to.as_deref()),
                metric,
                to.clone(),
                Clock::Epoch,
            )
        },
    );
    out.point(id, Some(r.timestamp_ms), value, "value");
}

/// Whether a line that starts with `{` closes its object (braces inside strings ignored):
/// a record or a one-line document, rather than the first line of a pretty-printed one.
pub fn closes(line: &str) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0i64, false, false);
    for &b in line.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// A JSON document gathered line by line, every line of the file from its first (so that a
/// line of the document is the file's line `first.0` plus its own less one).
pub struct Document {
    first: (u64, String),
    text: String,
    forced: Option<Format>,
}

impl Document {
    pub fn new(line: u64, text: &str, forced: Option<Format>) -> Self {
        Self {
            first: (line, text.to_string()),
            text: format!("{text}\n"),
            forced,
        }
    }

    /// The line it started on, and that line.
    pub fn first_line(&self) -> (u64, &str) {
        (self.first.0, &self.first.1)
    }

    /// Adds a line; false once the document would exceed [`MAX_DOCUMENT`].
    pub fn push(&mut self, line: &str) -> bool {
        if self.text.len() + line.len() + 1 > MAX_DOCUMENT {
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        true
    }

    /// Parses and reads it: `Err` describes a document of no known kind (for the one
    /// message such a file gets); `format` is set to what it was.
    pub fn read<P: Parser, S: Sink>(
        &self,
        parser: &P,
        out: &mut Out<'_, S>,
        without_value: &mut u64,
        format: &mut Option<Format>,
    ) -> Result<(), String> {
        let doc = match parser.parse(&self.text) {
            Ok(doc) => doc,
            Err(e) => {
                // Named by the file's line it went wrong on, and its column in that line.
                let (at, e) = crate::json_column::text_error(&e, &self.text);
                let text = self.text.split('\n').nth(at - 1).unwrap_or_default();
                let message = format!("not valid JSON ({})", cut(&e, 200));
                out.error_at(self.first.0 + at as u64 - 1, text, None, message);
                return Ok(());
            }
        };
        let v = P::root(&doc);
        let kind = kind(&v);
        if kind == Kind::Unknown {
            return Err(format!(
                "the JSON document at line {} ({UNKNOWN})",
                self.first.0
            ));
        }
        if let Some(f) = self
            .forced
            .filter(|f| *f != kind.format() && *f != Format::Ndjson)
        {
            out.error(
                None,
                format!("{} where {} was asked for", kind.described(), described(f)),
            );
            return Ok(());
        }
        *format = Some(kind.format());
        read(kind, &v, out, &mut Keyed::default(), without_value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_closes_its_object_or_not() {
        assert!(closes(r#"{"a":{"b":"}"},"c":[1]}"#));
        assert!(closes(r#"{"a":"\"}"}"#));
        assert!(!closes("{"));
        assert!(!closes(r#"{"a":"}""#));
        assert!(!closes(r#"{"schema_version":"1.0","value":"#));
    }
}
