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
            _ => documents::read(kind, &v, out, &mut self.keyed, without_value),
        }
    }
}
