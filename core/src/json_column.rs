//! Where JSON text went wrong, said as the file's place: every refused line or document names
//! its line of the file and its column (README, "The page"), whichever parser read it.
//! serde_json and V8's `JSON.parse` count the lines of the text they were given ("at line 1
//! column 22", "at position 21 (line 1 column 22)"), which beside the file's line number reads
//! as another line, and V8 names no place at all for some errors ("Unexpected token 'o',
//! \"oops\" is not valid JSON"). The place is found once, by serde_json's scan of the text, so
//! that the page and `nowcast` name the same one.

use std::ops::Range;

/// A parser's message about one line of a file (as in the file: its column is the file's),
/// naming the column once and always: [`text_error`] for one line.
pub fn line_error(message: &str, line: &str) -> String {
    text_error(message, line).1
}

/// A parser's message about JSON `text` (one line of a file, or a document of several of its
/// lines, each as in the file), and the line of `text` it went wrong on (from 1: the file's
/// line is the text's first plus this less one). The message names the column once and
/// always, where the parser named its place (or at its end): " at column N". The place is
/// [`error_place`]'s; the parser's own is kept only if the scan finds no fault (the two
/// parsers refuse the same texts, but a message is not proof).
pub fn text_error(message: &str, text: &str) -> (usize, String) {
    let (prefix, named, tail) = match named_place(message) {
        Some((at, named)) => (&message[..at.start], named, &message[at.end..]),
        None => (message, None, ""),
    };
    match error_place(text).or(named) {
        Some((line, column)) => (line.max(1), format!("{prefix} at column {column}{tail}")),
        None => (1, message.to_string()),
    }
}

/// A line and a column, from 1.
type Place = (usize, usize);

/// The place a parser's message names: where it is in the message, and the line and column
/// when it says them (V8's " at position 7" says neither).
fn named_place(message: &str) -> Option<(Range<usize>, Option<Place>)> {
    // "line L column C" at the start of `s`: the place and the end of it.
    let line_column = |s: &str| -> Option<(Place, usize)> {
        let rest = s.strip_prefix("line ")?;
        let (line, n) = number(rest)?;
        let rest = rest[n..].strip_prefix(" column ")?;
        let (column, m) = number(rest)?;
        Some(((line, column), s.len() - rest.len() + m))
    };
    if let Some(at) = message.find(" at position ") {
        let after = at + " at position ".len();
        if let Some((_, n)) = number(&message[after..]) {
            let end = after + n;
            // V8's newer messages: " at position 21 (line 1 column 22)".
            let bracketed = message[end..]
                .strip_prefix(" (")
                .and_then(line_column)
                .map(|(place, m)| (place, end + " (".len() + m))
                .filter(|&(_, m)| message[m..].starts_with(')'));
            return Some(match bracketed {
                Some((place, m)) => (at..m + 1, Some(place)),
                None => (at..end, None),
            });
        }
    }
    if let Some(at) = message.rfind(" at line ") {
        if let Some((place, m)) = line_column(&message[at + " at ".len()..]) {
            return Some((at..at + " at ".len() + m, Some(place)));
        }
    }
    let at = message.find(" (line ")?;
    let (place, m) = line_column(&message[at + " (".len()..])?;
    let end = at + " (".len() + m;
    message[end..]
        .starts_with(')')
        .then_some((at..end + 1, Some(place)))
}

/// The decimal number that `s` starts with, and its length.
fn number(s: &str) -> Option<(usize, usize)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    Some((s[..digits].parse().ok()?, digits))
}

/// Where a JSON text first goes wrong: the line (from 1, lines split at `\n`) and the column
/// (from 1, in characters) at which serde_json's parser stopped, or `None` when the text is
/// valid. Where it stopped at a blank or at the end (a text cut short, or a number cut by
/// the end of its line), the place is just after the last character before. A library's
/// scan, not a second parser of our own.
pub fn error_place(text: &str) -> Option<Place> {
    let e = serde_json::from_str::<serde::de::IgnoredAny>(text).err()?;
    // Just after the byte at fault: serde_json counts the column in bytes of its line, 0 for
    // the newline before it.
    let mut end = if e.is_eof() {
        text.len()
    } else {
        let line = e.line().saturating_sub(1);
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        (start + e.column()).min(text.len())
    };
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let mut before = &text[..end];
    let blank = e.is_eof() || before.is_empty() || before.ends_with(char::is_whitespace);
    if blank {
        before = before.trim_end();
    }
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[start..].chars().count() + usize::from(blank);
    Some((before.matches('\n').count() + 1, column))
}

#[cfg(test)]
mod tests {
    use super::{error_place, line_error, text_error};

    #[test]
    fn every_malformed_line_names_its_column() {
        // (text, the column of the first character at fault).
        for (text, column) in [
            (r#"{"a":1}"#, None),
            (r#"  [1, 2.5e-3, "x\u00e9", true, null, {}]  "#, None),
            ("oops", Some(1)),
            (r#"{"a":1"#, Some(7)),
            (r#"{"a":1,}"#, Some(8)),
            (r#"{a:1}"#, Some(2)),
            (r#"{"a" 1}"#, Some(6)),
            (r#"[1,,2]"#, Some(4)),
            (r#"{"a":tru}"#, Some(9)),
            (r#"{"a":01}"#, Some(7)),
            (r#"{"a":-}"#, Some(7)),
            (r#"{"a":1} x"#, Some(9)),
            (r#"{"é":"ü",x}"#, Some(10)),
            (r#"{"a":"\q"}"#, Some(8)),
            ("", Some(1)),
        ] {
            assert_eq!(error_place(text), column.map(|c| (1, c)), "{text:?}");
        }
        // The parsers' messages (V8's, serde_json's): the place said once, as a column.
        for (message, line, said) in [
            // V8 without a place: the scan's column.
            (
                "Unexpected token 'o', \"oops\" is not valid JSON",
                "oops",
                "Unexpected token 'o', \"oops\" is not valid JSON at column 1",
            ),
            (
                "Unexpected token '}', \"{\"a\":1,}\" is not valid JSON",
                r#"{"a":1,}"#,
                "Unexpected token '}', \"{\"a\":1,}\" is not valid JSON at column 8",
            ),
            // V8's offset from 0, and its line and column.
            (
                "Expected double-quoted property name in JSON at position 7",
                r#"{"a":1,}"#,
                "Expected double-quoted property name in JSON at column 8",
            ),
            (
                "Expected double-quoted property name in JSON at position 7 (line 1 column 8)",
                r#"{"a":1,}"#,
                "Expected double-quoted property name in JSON at column 8",
            ),
            (
                "Unexpected end of JSON input (line 1 column 7)",
                r#"{"a":1"#,
                "Unexpected end of JSON input at column 7",
            ),
            // serde_json's.
            (
                "key must be a string at line 1 column 2",
                "{a:1}",
                "key must be a string at column 2",
            ),
        ] {
            assert_eq!(line_error(message, line), said, "{message:?}");
        }
    }

    #[test]
    fn a_malformed_document_names_its_line_and_column() {
        // (text, the parser's message, the line of the text and the message said).
        let doc = "{\n  \"start\": {},\n  \"intervals\": [\n    {\"sum\": oops}\n  ]\n}\n";
        let cut = "{\n  \"start\": {},\n  \"intervals\": [\n    {\"sum\": 1}\n\n";
        for (text, message, at, said) in [
            (
                doc,
                "expected value at line 4 column 13",
                4,
                "expected value at column 13",
            ),
            (
                doc,
                "Unexpected token 'o', \"...  {\"sum\": oops}\n  ]\n}\n\" is not valid JSON",
                4,
                "Unexpected token 'o', \"...  {\"sum\": oops}\n  ]\n}\n\" is not valid JSON at \
                 column 13",
            ),
            (
                doc,
                "Unexpected token 'o' in JSON at position 52 (line 4 column 13)",
                4,
                "Unexpected token 'o' in JSON at column 13",
            ),
            // Cut short: just after its last character, not past its last newline.
            (
                cut,
                "EOF while parsing a list at line 6 column 0",
                4,
                "EOF while parsing a list at column 15",
            ),
            (
                cut,
                "Unexpected end of JSON input",
                4,
                "Unexpected end of JSON input at column 15",
            ),
            // A number cut by the end of its line: after it, not at the next line's start.
            (
                "{\n  \"a\": 0.\n",
                "invalid number at line 3 column 0",
                2,
                "invalid number at column 10",
            ),
        ] {
            assert_eq!(
                text_error(message, text),
                (at, said.to_string()),
                "{message:?}"
            );
        }
        // Valid to the scan: the parser's own place, if it names one.
        assert_eq!(
            text_error("Unexpected x at position 3 (line 2 column 2)", "[\n1]"),
            (2, "Unexpected x at column 2".to_string())
        );
        assert_eq!(
            text_error("JSON.parse failed", "[1]"),
            (1, "JSON.parse failed".to_string())
        );
    }
}
