//! A configuration file's text (`nowcast campaign`, `nowcast proxy --config`): read within a
//! size a page of settings never reaches, and its TOML errors told by line and column,
//! quoting at most a part of the line (a hostile or mistaken file may be one line of
//! megabytes) with its control characters escaped.

use anyhow::{anyhow, Context, Result};
use std::io::Read;
use std::path::Path;

/// The largest configuration file read: far beyond any real one (a campaign of 100,000
/// jobs fits in a few MiB).
pub const MAX_BYTES: u64 = 16 << 20;

/// The text of the configuration file at `path`, refused beyond [`MAX_BYTES`] before it is
/// read (and, for what is not a plain file, a FIFO or `/dev/zero`, once that much has been
/// read). `kind` names the file in the refusal ("a campaign file") and `advice` says what to
/// do instead.
pub fn read(path: &Path, kind: &str, advice: &str) -> Result<String> {
    let file = std::fs::File::open(path).context("read")?;
    let too_big = |size: String| {
        anyhow!(
            "{size}: {kind} is at most {} MiB; {advice}",
            MAX_BYTES >> 20
        )
    };
    let len = file.metadata().context("read")?.len();
    if len > MAX_BYTES {
        return Err(too_big(format!("{len} bytes")));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .context("read")?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_big(format!("more than {MAX_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "read: not UTF-8 text (byte {} is not)",
            e.utf8_error().valid_up_to()
        )
    })
}

/// `s` with its control characters but newlines escaped, and its middle cut when it is
/// longer than `most` characters.
pub fn bounded(s: &str, most: usize) -> String {
    let n = s.chars().count();
    let keep = |c: char, out: &mut String| {
        if c.is_control() && c != '\n' {
            out.extend(c.escape_default())
        } else {
            out.push(c)
        }
    };
    let mut out = String::new();
    if n <= most {
        s.chars().for_each(|c| keep(c, &mut out));
    } else {
        let (head, tail) = (most * 2 / 3, most / 3);
        s.chars().take(head).for_each(|c| keep(c, &mut out));
        out.push_str(" … ");
        s.chars().skip(n - tail).for_each(|c| keep(c, &mut out));
    }
    out
}

/// For serde's "unknown field `X`, expected one of `a`, `b`": the expected key within two
/// edits of `X` (a typo: `rcvbuff`, `evry`), if exactly one is that near.
fn did_you_mean(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    let (typed, rest) = rest.split_once('`')?;
    let list = rest.split_once("expected one of ")?.1;
    let near: Vec<&str> = list
        .split(", ")
        .filter_map(|k| k.trim().strip_prefix('`')?.strip_suffix('`'))
        .filter(|k| edits(typed, k) <= 2)
        .collect();
    match near[..] {
        [one] => Some(one),
        _ => None,
    }
}

/// Levenshtein distance, by characters (keys are short; a long typed key is far from all).
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 {
        return usize::MAX;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != cb)).min(up + 1).min(row[j] + 1);
            diag = up;
        }
    }
    row[b.len()]
}

/// A TOML error as "line L, column C: what is wrong", with at most about 200 characters of
/// the line around the place (a whole line may be megabytes).
pub fn toml_error(text: &str, e: &toml::de::Error) -> anyhow::Error {
    // Long enough for the longest list of keys a table has (serde's "expected one of ..."),
    // and still bounded: the unknown key it quotes is the file's.
    let mut message = bounded(e.message().trim_end(), 1000);
    if let Some(near) = did_you_mean(e.message()) {
        message.push_str(&format!(" (did you mean `{near}`?)"));
    }
    let Some(span) = e.span() else {
        return anyhow!("{message}");
    };
    let mut at = span.start.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = text[..line_start].matches('\n').count() + 1;
    let column = text[line_start..at].chars().count() + 1;
    // Up to 80 characters before the place and 120 from it; tabs and control characters
    // shown as one character each, so that the caret stays under the place.
    let one = |c: char| match c {
        '\t' => ' ',
        c if c.is_control() => '\u{fffd}',
        c => c,
    };
    let before: Vec<char> = text[line_start..at].chars().rev().take(81).collect();
    let after: Vec<char> = text[at..line_end]
        .trim_end_matches('\r')
        .chars()
        .take(121)
        .collect();
    let mut shown = String::new();
    let cut_before = before.len() > 80;
    if cut_before {
        shown.push('…');
    }
    shown.extend(before.iter().take(80).rev().map(|&c| one(c)));
    let caret = shown.chars().count();
    shown.extend(after.iter().take(120).map(|&c| one(c)));
    if after.len() > 120 {
        shown.push('…');
    }
    anyhow!(
        "line {line}, column {column}: {message}\n  | {shown}\n  | {}^",
        " ".repeat(caret)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Table {
        name: Option<String>,
        sndbuf: Option<u64>,
        rcvbuf: Option<u64>,
        reverse: Option<bool>,
    }

    fn error(text: &str) -> String {
        let e = toml::from_str::<Table>(text).unwrap_err();
        toml_error(text, &e).to_string()
    }

    #[test]
    fn an_unknown_key_is_named_with_the_whole_list_and_the_key_meant() {
        let e = error("rcvbuff = 5\n");
        assert!(
            e.contains(
                "unknown field `rcvbuff`, expected one of `name`, `sndbuf`, `rcvbuf`, `reverse` \
                 (did you mean `rcvbuf`?)"
            ),
            "{e}"
        );
        // Two keys as near: no guess. Far from every key: none.
        assert!(!error("xbuf = 5\n").contains("did you mean"));
        assert!(!error("colour = 5\n").contains("did you mean"));
        // A key of a megabyte is cut, not quoted whole.
        let long = format!("{} = 5\n", "k".repeat(1 << 20));
        assert!(error(&long).len() < 2_000);
    }

    #[test]
    fn edits_count_insertions_deletions_and_substitutions() {
        assert_eq!(edits("evry", "every"), 1);
        assert_eq!(edits("rcvbuff", "rcvbuf"), 1);
        assert_eq!(edits("sndbfu", "sndbuf"), 2);
        assert_eq!(edits("a", "abcd"), usize::MAX);
        assert_eq!(edits("same", "same"), 0);
    }
}
