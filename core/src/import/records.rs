//! JSON, one value a line: NDJSON measurement records (one series per metric, transport and
//! target), or one document of another tool a line (`iperf3 -J | jq -c`, repeated mtr
//! reports). The first line's object decides which.

use super::documents::{self, Kind};
use super::json::{Json, Parser};
use super::{cut, Clock, Format, Keyed, Out, Problem, SeriesInfo, Sink};
use crate::record::{Metric, Record, Status, Transport};

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

/// A record's value into its series; one without a value (a timeout, a failure) is counted.
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
    let (Status::Ok, Some(value)) = (r.status, r.value) else {
        *without_value += 1;
        return;
    };
    let transport = r.probe.as_ref().and_then(|p| p.transport);
    let metric = r.metric;
    let id = keyed.id(out.reg, "record", metric, transport, Some(r.to), |to| {
        SeriesInfo {
            transport,
            ..SeriesInfo::measured(
                series_name(metric, transport, to.as_deref()),
                metric,
                to.clone(),
                Clock::Epoch,
            )
        }
    });
    out.point(id, Some(r.timestamp_ms), value, "value");
}

/// A file of JSON lines.
pub struct JsonLines<P: Parser> {
    parser: P,
    /// The format the caller named, if any.
    forced: Option<Format>,
    /// What the first object was.
    kind: Option<Kind>,
    keyed: Keyed,
}

impl<P: Parser> JsonLines<P> {
    pub fn new(parser: P, forced: Option<Format>) -> Self {
        Self {
            parser,
            forced,
            kind: None,
            keyed: Keyed::default(),
        }
    }

    /// The format the first object decided.
    pub fn format(&self) -> Option<Format> {
        self.kind.map(Kind::format)
    }

    pub fn line<S: Sink>(&mut self, text: &str, out: &mut Out<'_, S>, without_value: &mut u64) {
        let t = text.trim();
        if t.is_empty() || t.starts_with('#') {
            return;
        }
        let doc = match self.parser.parse(t) {
            Ok(doc) => doc,
            // The parser's message may quote the text; it is cut like any quote.
            Err(e) => return out.error(None, format!("not valid JSON ({})", cut(&e, 200))),
        };
        let v = P::root(&doc);
        let kind = documents::kind(&v);
        let first = *self.kind.get_or_insert(kind);
        let expected = self.forced.unwrap_or(first.format());
        match kind {
            Kind::Unknown if first == Kind::Unknown => {
                let what = format!("line {} ({})", out.line, documents::UNKNOWN);
                out.stop(Problem::Unsupported(super::unsupported_message(&what)));
            }
            _ if kind.format() != expected => out.error(
                None,
                format!(
                    "{} where the file holds {}",
                    kind.described(),
                    documents::described(expected)
                ),
            ),
            Kind::Record => record(&v, out, &mut self.keyed, without_value),
            _ => documents::read(kind, &v, out, &mut self.keyed, without_value),
        }
    }
}
