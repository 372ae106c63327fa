//! Reading parsed JSON without caring who parsed it. The readers of records and of the JSON
//! documents of other tools (iperf3, irtt, mtr) are written once, against [`Json`]: natively
//! over `serde_json::Value`, in the page over the objects of the browser's own `JSON.parse`
//! (core/src/wasm.rs), so the page carries no JSON parser of its own in its WebAssembly and
//! the rules stay in one place.

use std::borrow::Cow;

/// What a JSON value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
    /// Not a JSON value (a JavaScript value JSON cannot hold, e.g. `undefined`).
    Other,
}

impl Kind {
    /// The kind with an article, for messages ("found a string").
    pub fn described(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
            Kind::Other => "a value JSON cannot hold",
        }
    }
}

/// A string longer than the reader's limit, refused without being copied or scanned whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong;

/// A parsed JSON value, as the readers of this module look at it.
pub trait Json: Sized {
    fn kind(&self) -> Kind;
    /// An own member of an object; `None` when absent or when this is not an object.
    fn get(&self, key: &str) -> Option<Self>;
    /// A number's value (`None` for anything else). It may be non-finite where the parser
    /// allows it (`JSON.parse("1e400")` is Infinity); readers check.
    fn number(&self) -> Option<f64>;
    /// A non-negative integer, exactly where the parser kept it exactly (serde_json keeps
    /// u64); by default the number, when it is integral and below 2⁶⁴.
    fn whole(&self) -> Option<u64> {
        self.number()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 18_446_744_073_709_551_616.0)
            .map(|f| f as u64)
    }
    fn boolean(&self) -> Option<bool>;
    /// A string, unless it holds more than `max_chars` characters; `None` when this is not
    /// a string. Costs at most about `max_chars` characters of work, whatever the string.
    fn text(&self, max_chars: usize) -> Option<Result<Cow<'_, str>, TooLong>>;
    /// An array's length (0 for anything else).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn at(&self, index: usize) -> Option<Self>;
}

/// Whether `s` holds more than `max` characters, counting at most `max + 1` of them.
pub fn longer_than(s: &str, max: usize) -> bool {
    // A character is 1–4 bytes: the byte length bounds the count both ways.
    s.len() > max && (s.len() > 4 * max || s.chars().nth(max).is_some())
}

impl Json for &serde_json::Value {
    fn kind(&self) -> Kind {
        use serde_json::Value::*;
        match self {
            Null => Kind::Null,
            Bool(_) => Kind::Bool,
            Number(_) => Kind::Number,
            String(_) => Kind::String,
            Array(_) => Kind::Array,
            Object(_) => Kind::Object,
        }
    }

    fn get(&self, key: &str) -> Option<Self> {
        self.as_object()?.get(key)
    }

    fn number(&self) -> Option<f64> {
        self.as_f64()
    }

    fn whole(&self) -> Option<u64> {
        let n = self.as_number()?;
        n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 18_446_744_073_709_551_616.0)
                .map(|f| f as u64)
        })
    }

    fn boolean(&self) -> Option<bool> {
        self.as_bool()
    }

    fn text(&self, max_chars: usize) -> Option<Result<Cow<'_, str>, TooLong>> {
        let s = self.as_str()?;
        Some(if longer_than(s, max_chars) {
            Err(TooLong)
        } else {
            Ok(Cow::Borrowed(s))
        })
    }

    fn len(&self) -> usize {
        self.as_array().map_or(0, Vec::len)
    }

    fn at(&self, index: usize) -> Option<Self> {
        self.as_array()?.get(index)
    }
}

/// Parses JSON text into a [`Json`] value: serde_json natively, the browser's `JSON.parse`
/// in the page.
pub trait Parser {
    /// What a parse returns and owns.
    type Doc;
    /// The document as the readers look at it.
    type Value<'a>: Json
    where
        Self: 'a;
    /// The document, or why the text is not JSON.
    fn parse(&self, text: &str) -> Result<Self::Doc, String>;
    fn root(doc: &Self::Doc) -> Self::Value<'_>;
}

/// serde_json's reader.
#[derive(Clone, Copy, Debug, Default)]
pub struct SerdeJson;

impl Parser for SerdeJson {
    type Doc = serde_json::Value;
    type Value<'a> = &'a serde_json::Value;
    fn parse(&self, text: &str) -> Result<serde_json::Value, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }
    fn root(doc: &serde_json::Value) -> &serde_json::Value {
        doc
    }
}

/// A member at a path of keys.
pub fn path<J: Json>(v: &J, keys: &[&str]) -> Option<J> {
    let (first, rest) = keys.split_first()?;
    let mut cur = v.get(first)?;
    for k in rest {
        cur = cur.get(k)?;
    }
    Some(cur)
}

/// A finite number at a path.
pub fn num<J: Json>(v: &J, keys: &[&str]) -> Option<f64> {
    path(v, keys)?.number().filter(|n| n.is_finite())
}

/// Text at a path, if it is at most `max` characters.
pub fn text<J: Json>(v: &J, keys: &[&str], max: usize) -> Option<String> {
    Some(path(v, keys)?.text(max)?.ok()?.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_stops_at_the_limit() {
        assert!(!longer_than("abc", 3));
        assert!(longer_than("abcd", 3));
        assert!(!longer_than("ééé", 3));
        assert!(longer_than("éééé", 3));
        assert!(longer_than(&"x".repeat(1 << 20), 64));
    }

    #[test]
    fn serde_values_read_as_json() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"a":[1,2.5,"x",null,true],"n":18446744073709551615}"#)
                .unwrap();
        let v = &v;
        let a = v.get("a").unwrap();
        assert_eq!((a.kind(), a.len()), (Kind::Array, 5));
        assert_eq!(a.at(1).unwrap().number(), Some(2.5));
        assert_eq!(a.at(1).unwrap().whole(), None);
        assert_eq!(a.at(0).unwrap().whole(), Some(1));
        assert_eq!(v.get("n").unwrap().whole(), Some(u64::MAX));
        assert_eq!(a.at(2).unwrap().text(1).unwrap().unwrap(), "x");
        assert_eq!(a.at(2).unwrap().text(0).unwrap(), Err(TooLong));
        assert_eq!(a.at(3).unwrap().kind(), Kind::Null);
        assert_eq!(a.at(4).unwrap().boolean(), Some(true));
        assert!(v.get("missing").is_none() && a.get("a").is_none() && a.at(9).is_none());
    }
}
