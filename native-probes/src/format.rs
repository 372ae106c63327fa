//! Numbers for people, the same in every table and report: times in ms as ping prints them,
//! rates scaled per value as iperf3 does (kbit/s, Mbit/s, Gbit/s), loss in percent. Records
//! keep their schema units (ms, Mbit/s, a fraction for loss); only what is shown changes.
//!
//! Deterministic core.

use nowcast_core::record::Unit;

/// The meaning of ± wherever a forecast is shown, as on the page: the forecast ± this many
/// errors (the error being the RMSE of the MSE-selected forecast).
pub const BAND_K: f64 = 2.0;

/// `n` and its noun, singular for one: "1 value", "3 values" (`noun` takes an `s`).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A name or message from a file, an archive or a peer as a terminal may print it: control characters and
/// the invisible ones that reorder text (bidirectional controls) escaped, so that a target
/// named with escape sequences cannot move the cursor, retitle the window or disguise
/// another name.
pub fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || is_bidi(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The invisible characters that reorder the text around them (bidirectional marks,
/// embeddings, overrides and isolates): a name holding one can read as another.
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A value with enough digits to show microseconds in ms and 0.1 % of a rate.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A size in binary units when it is a whole number of them (`64 KiB`, `4 MiB`, `1 GiB`), else
/// in bytes (`1500 bytes`): sizes in configs are usually powers of two.
pub fn bytes(n: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

/// How long ago, in the largest whole unit (`42 s ago`, `5 min ago`, `3 h ago`, `2 d ago`).
pub fn ago(ms: f64) -> String {
    let s = (ms / 1000.0).max(0.0) as u64;
    match s {
        0..=119 => format!("{s} s ago"),
        120..=7199 => format!("{} min ago", s / 60),
        7200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// A byte count as iperf3 writes a window size, and IEPM-BW names its runs: `64K`, `1M`,
/// `1536` (powers of 1024 when exact).
pub fn bytes_short(n: u64) -> String {
    for (unit, size) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if n >= size && n % size == 0 {
            return format!("{}{unit}", n / size);
        }
    }
    n.to_string()
}

/// Three significant digits without exponent notation (the page's `significant`):
/// `941`, `23.5`, `2.35`, `0.418`.
pub fn significant(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 99.95 {
        format!("{v:.0}")
    } else if a >= 9.995 {
        format!("{v:.1}")
    } else if a >= 0.9995 {
        format!("{v:.2}")
    } else {
        // Three significant digits below 1: as many decimals as the leading zeros need.
        let decimals = (2.0 - a.log10().floor()).clamp(3.0, 9.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// A percentage from a fraction: one decimal as mtr prints it (`0.0`, `12.5`, `100.0`),
/// two when a small loss would otherwise read as none.
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p != 0.0 && p.abs() < 0.095 {
        format!("{p:.2}")
    } else {
        format!("{p:.1}")
    }
}

/// How a value in a schema unit is shown: the factor it is multiplied by and the unit
/// name printed after it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub unit: Unit,
    pub factor: f64,
    pub name: &'static str,
}

impl Scale {
    /// The scale for values of `unit` about `magnitude` large (schema units): rates below
    /// 1 Mbit/s in kbit/s, from 1000 Mbit/s in Gbit/s; loss in %; times in ms.
    pub fn of(unit: Unit, magnitude: f64) -> Scale {
        let (factor, name) = match unit {
            Unit::Ms => (1.0, "ms"),
            Unit::Fraction => (100.0, "%"),
            Unit::MbitPerS => {
                // Rounded as shown: 999.96 Mbit/s is "1.00 Gbit/s", not "1000 Mbit/s".
                let m = magnitude.abs();
                if m >= 999.5 {
                    (1e-3, "Gbit/s")
                } else if m >= 0.9995 || m == 0.0 {
                    (1.0, "Mbit/s")
                } else {
                    (1e3, "kbit/s")
                }
            }
        };
        Scale { unit, factor, name }
    }

    /// `v` (schema unit) as a number in this scale, without the unit name.
    pub fn num(&self, v: f64) -> String {
        match self.unit {
            Unit::Ms => number(v),
            Unit::Fraction => percent(v),
            Unit::MbitPerS => significant(v * self.factor),
        }
    }

    /// `v` (schema unit) with the unit name: `2.35 Gbit/s`, `0.113 ms`, `1.0 %`.
    pub fn with_unit(&self, v: f64) -> String {
        format!("{} {}", self.num(v), self.name)
    }
}

/// A value in its schema unit, scaled by its own size: `941 Mbit/s`, `2.35 Gbit/s`.
pub fn scaled(v: f64, unit: Unit) -> String {
    Scale::of(unit, v).with_unit(v)
}

/// What to ask the user when a port answered in another protocol (tcp's hello, udp's probes).
pub const ASK_SERVE: &str = "is `nowcast serve` running there?";

/// The most bytes kept of an answer that disagrees with what was expected (another
/// protocol's): enough for the first line a message quotes.
pub const ANSWER_MAX: usize = 64;

/// The most characters of a peer's answer that a message quotes ([`quote_answer`]).
pub const ANSWER_QUOTE_CHARS: usize = 40;

/// A peer's answer, for a message: its first line (all of it when that is empty or it has
/// none), at most [`ANSWER_QUOTE_CHARS`] characters with `…` when cut. Printable ASCII is kept,
/// every other byte is escaped (`\r`, `\x1b`), as are `"` and `\`: a peer cannot write
/// control sequences to the user's terminal, nor bytes that are not text.
pub fn quote_answer(read: &[u8]) -> String {
    let line = match read.iter().position(|&b| b == b'\n') {
        Some(end) => {
            let line = &read[..end];
            line.strip_suffix(b"\r").unwrap_or(line)
        }
        None => read,
    };
    let line = if line.is_empty() { read } else { line };
    let mut out = String::new();
    for &b in line {
        let piece = match b {
            b'"' => "\\\"".to_string(),
            b'\\' => "\\\\".to_string(),
            b'\r' => "\\r".to_string(),
            b'\n' => "\\n".to_string(),
            b'\t' => "\\t".to_string(),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("\\x{b:02x}"),
        };
        // Every piece is ASCII: its length is its width.
        if out.len() + piece.len() > ANSWER_QUOTE_CHARS {
            out.push('…');
            break;
        }
        out.push_str(&piece);
    }
    out
}

/// What to ask the user when a port did not answer as `command`'s would: [`ASK_SERVE`]'s
/// question for another command (`nowcast fobs recv` for `nowcast fobs send`).
pub fn ask_running(command: &str) -> String {
    format!("is `{command}` running there?")
}

/// The widest line of the texts for people, in characters (a terminal's columns: `→` is one
/// column and three bytes).
pub const WIDTH: usize = 100;

pub fn columns(s: &str) -> usize {
    s.chars().count()
}

/// The words of a text, for [`wrap`].
pub fn words(text: &str) -> Vec<String> {
    text.split(' ')
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// `pieces` joined by `sep` (`"; "`, `", "` or `" "`) into lines of at most [`WIDTH`]
/// columns: the first line starts with `lead`, the others with `indent` spaces, and lines
/// break between pieces (a piece too long for a line of its own breaks between its words),
/// so that a clause stays whole on one line when it can. A word longer than a line (a long
/// URL) is left whole, to be copied.
pub fn wrap(lead: &str, pieces: &[String], sep: &str, indent: usize) -> Vec<String> {
    let room = WIDTH.saturating_sub(indent).max(1);
    let tail = sep.trim_end();
    let mut atoms: Vec<String> = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        let p = if i + 1 < pieces.len() {
            format!("{p}{tail}")
        } else {
            p.clone()
        };
        if columns(&p) > room && p.contains(' ') {
            atoms.extend(words(&p));
        } else {
            atoms.push(p);
        }
    }
    let mut lines = Vec::new();
    let mut line = lead.to_string();
    let mut bare = true;
    for a in atoms {
        if !bare && columns(&line) + 1 + columns(&a) > WIDTH {
            lines.push(std::mem::replace(&mut line, " ".repeat(indent)));
            bare = true;
        }
        if !bare {
            line.push(' ');
        }
        line.push_str(&a);
        bare = false;
    }
    lines.push(line);
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_in_whole_binary_units_else_bytes() {
        assert_eq!(bytes(65_536), "64 KiB");
        assert_eq!(bytes(4_194_304), "4 MiB");
        assert_eq!(bytes(268_435_456), "256 MiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(1_500), "1500 bytes");
        assert_eq!(bytes(0), "0 bytes");
    }

    use super::*;

    #[test]
    fn rates_are_scaled_per_value_like_iperf3() {
        assert_eq!(scaled(23_083.0, Unit::MbitPerS), "23.1 Gbit/s");
        assert_eq!(scaled(2_348.4, Unit::MbitPerS), "2.35 Gbit/s");
        assert_eq!(scaled(941.2, Unit::MbitPerS), "941 Mbit/s");
        assert_eq!(scaled(999.7, Unit::MbitPerS), "1.00 Gbit/s");
        assert_eq!(scaled(12.34, Unit::MbitPerS), "12.3 Mbit/s");
        assert_eq!(scaled(0.512, Unit::MbitPerS), "512 kbit/s");
        assert_eq!(scaled(0.0, Unit::MbitPerS), "0 Mbit/s");
        assert_eq!(scaled(0.0523, Unit::Ms), "0.052 ms");
        assert_eq!(scaled(0.25, Unit::Fraction), "25.0 %");
        assert_eq!(scaled(0.0005, Unit::Fraction), "0.05 %");
        assert_eq!(scaled(1.0, Unit::Fraction), "100.0 %");
    }

    #[test]
    fn three_significant_digits() {
        for (v, s) in [
            (0.0, "0"),
            (0.4181, "0.418"),
            (0.004181, "0.00418"),
            (1.0, "1.00"),
            (9.996, "10.0"),
            (99.96, "100"),
            (-2.346, "-2.35"),
            (f64::NAN, "-"),
        ] {
            assert_eq!(significant(v), s, "{v}");
        }
    }

    #[test]
    fn an_answer_quoted_is_the_first_line_short_and_free_of_control_bytes() {
        assert_eq!(
            quote_answer(b"SSH-2.0-OpenSSH_9.2\r\n"),
            "SSH-2.0-OpenSSH_9.2"
        );
        assert_eq!(
            quote_answer(b"HTTP/1.0 400 Bad request\r\nServer: x\r\n"),
            "HTTP/1.0 400 Bad request"
        );
        // Terminal escapes, bells and bytes that are not ASCII are shown, not sent.
        assert_eq!(
            quote_answer(b"\x1b[2J\x1b]0;pwned\x07\xc3\xa9\"\\"),
            "\\x1b[2J\\x1b]0;pwned\\x07\\xc3\\xa9\\\"\\\\"
        );
        assert_eq!(
            quote_answer(b"\r\n\r\n"),
            "\\r\\n\\r\\n",
            "an empty first line"
        );
        assert_eq!(quote_answer(b""), "");
        let long = quote_answer(&[b'a'; 64]);
        assert_eq!(long, format!("{}…", "a".repeat(ANSWER_QUOTE_CHARS)));
        // An escape is never cut in half.
        let escapes = quote_answer(&[0u8; 20]);
        assert_eq!(
            escapes,
            format!("{}…", "\\x00".repeat(ANSWER_QUOTE_CHARS / 4))
        );
    }

    #[test]
    fn the_question_is_tcp_and_udp_s_for_nowcast_serve() {
        assert_eq!(ask_running("nowcast serve"), ASK_SERVE);
        assert_eq!(
            ask_running("nowcast fobs recv"),
            "is `nowcast fobs recv` running there?"
        );
    }
}
