// The column of a malformed JSON line: the file's line and column name every refused line
// (README, "The page"), but V8's `JSON.parse`, which the page's reader parses with, names no
// place for some errors. A small validating scan finds it.

/// A parser's message about one line of text (`line`, as in the file: its column is the
/// file's), naming the column once (`crate::json::within_line`) and always: V8's `JSON.parse` names none
/// for some errors ("Unexpected token 'o', \"oops\" is not valid JSON"), and the column is
/// then found by [`error_column`].
pub fn line_error(message: &str, line: &str) -> String {
    let message = crate::json::within_line(message);
    let named = message
        .match_indices("column ")
        .any(|(at, m)| message[at + m.len()..].starts_with(|c: char| c.is_ascii_digit()));
    match error_column(line) {
        // V8 without its "(line 1 column N)": an offset from 0 in UTF-16 units, said once.
        Some(column) if !named => match message.find(" at position ") {
            Some(at) => format!("{} at column {column}", &message[..at]),
            None => format!("{message} at column {column}"),
        },
        _ => message,
    }
}

/// Where a JSON text first goes wrong: the 1-based column (in characters) at which
/// serde_json's parser stopped, or `None` when the text is valid. Only for the parsers whose
/// message does not say (the page's V8); a library's scan, not a second parser of our own.
pub fn error_column(text: &str) -> Option<usize> {
    let e = serde_json::from_str::<serde::de::IgnoredAny>(text).err()?;
    // serde_json counts the column in bytes of the line it stopped on (this text is one
    // line), and at the end of the text it names the last character.
    let mut at = e.column().max(1).min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    let column = text[..at].chars().count();
    Some(if e.is_eof() {
        column + 1
    } else {
        column.max(1)
    })
}

#[cfg(test)]
mod tests {
    use super::{error_column, line_error};

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
            assert_eq!(error_column(text), column, "{text:?}");
        }
        // V8's message without a place gets the scan's column; one with a place keeps it.
        assert_eq!(
            line_error("Unexpected token 'o', \"oops\" is not valid JSON", "oops"),
            "Unexpected token 'o', \"oops\" is not valid JSON at column 1"
        );
        assert_eq!(
            line_error(
                "Unexpected token '}', \"{\"a\":1,}\" is not valid JSON",
                r#"{"a":1,}"#
            ),
            "Unexpected token '}', \"{\"a\":1,}\" is not valid JSON at column 8"
        );
        assert_eq!(
            line_error(
                "Expected double-quoted property name in JSON at position 7",
                r#"{"a":1,}"#
            ),
            "Expected double-quoted property name in JSON at column 8"
        );
        assert_eq!(
            line_error("key must be a string at line 1 column 2", "{a:1}"),
            "key must be a string at column 2"
        );
    }
}
