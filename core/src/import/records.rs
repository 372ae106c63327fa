//! JSON, one value a line: NDJSON measurement records (one series per metric, transport and
//! target), or one document of another tool a line (`iperf3 -J | jq -c`, repeated mtr
//! reports). The first line's object decides which.

use super::documents::{self, Kind};
use super::{cut, Format, Keyed, Out, Problem, Sink};
use crate::json::Parser;

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
        // Parsed with its leading blanks, so that a column is the file's.
        let doc = match self.parser.parse(text.trim_end()) {
            Ok(doc) => doc,
            // The parser's message may quote the text; it is cut like any quote.
            Err(e) => {
                let e = crate::json_column::line_error(&e, text.trim_end());
                return out.error(None, format!("not valid JSON ({})", cut(&e, 200)));
            }
        };
        let v = P::root(&doc);
        let kind = documents::kind(&v);
        let first = *self.kind.get_or_insert(kind);
        let expected = self.forced.unwrap_or(first.format());
        match kind {
            Kind::Unknown if first == Kind::Unknown => {
                let has = |k: &str| crate::json::Json::get(&v, k).is_some();
                let own = if has("input") && has("report") {
                    Some(super::FORECAST_REPORT)
                } else if has("diagnosis") && has("p_cpu") {
                    Some(super::CLASSIFY_REPORT)
                } else {
                    None
                };
                let message = match own.filter(|_| self.forced.is_none()) {
                    Some(it) => format!("line {} is {it}", out.line),
                    None => {
                        let what = format!("line {} ({})", out.line, documents::UNKNOWN);
                        super::unsupported_message(&what)
                    }
                };
                out.stop(Problem::Unsupported(message));
            }
            _ if kind.format() != expected => out.error(
                None,
                format!(
                    "{} where the file holds {}",
                    kind.described(),
                    documents::described(expected)
                ),
            ),
            _ => documents::read(kind, &v, out, &mut self.keyed, without_value),
        }
    }
}
