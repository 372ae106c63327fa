//! Times and durations as people write them in a campaign's configuration and on the command
//! line: `90m`, `1h30m`, `500ms`; `2026-03-01`, `2026-03-01T06:00:00Z`, milliseconds since
//! 1970, or an age such as `7d` (before `now`). All UTC; the civil-date arithmetic is Howard
//! Hinnant's `days_from_civil` and its inverse.
//!
//! Deterministic core: text and `now` in, milliseconds out.

pub use nowcast_core::calendar::{civil_from_days, days_from_civil};

/// Milliseconds since 1970-01-01T00:00:00Z.
pub type Ms = i64;

pub const SECOND: Ms = 1_000;
pub const MINUTE: Ms = 60 * SECOND;
pub const HOUR: Ms = 60 * MINUTE;
pub const DAY: Ms = 24 * HOUR;

/// A duration such as `10s`, `1h30m`, `250ms`, `2d` (units ms, s, m, h, d; a bare number is
/// seconds). Zero is allowed; negative numbers are not.
pub fn parse_duration(text: &str) -> Result<Ms, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("an empty duration".into());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return to_ms(secs * 1e3, text);
    }
    to_ms(with_units_ms(text)?, text)
}

/// A duration written with its units (`250ms`, `1.5s`, `5m`, `1h30m`; ms, s, m or min, h, d),
/// in milliseconds, not rounded: the one grammar of durations, for a campaign's file and for
/// every flag ([`crate::net::parse_duration_in`], whose bare numbers are in the flag's unit).
pub fn with_units_ms(text: &str) -> Result<f64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("an empty duration".into());
    }
    let mut total = 0.0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("'{text}': a number needs a unit (ms, s, m, h, d)"))?;
        if digits == 0 {
            return Err(format!(
                "'{text}' is not a duration such as 90s, 5m or 1h30m"
            ));
        }
        let n: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("'{text}' is not a duration such as 90s, 5m or 1h30m"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1e3,
            "m" | "min" => 6e4,
            "h" => 3.6e6,
            "d" => 8.64e7,
            u => return Err(format!("'{text}': unknown unit '{u}' (ms, s, m, h, d)")),
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    if total.is_finite() {
        Ok(total)
    } else {
        Err(format!("'{text}' is not a duration"))
    }
}

fn to_ms(v: f64, text: &str) -> Result<Ms, String> {
    if (0.0..1e15).contains(&v) {
        Ok(v.round() as Ms)
    } else {
        Err(format!("'{text}' is not a duration"))
    }
}

/// `YYYY-MM-DD` of a time.
pub fn date(ms: Ms) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(DAY));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a time (seconds, UTC).
pub fn datetime(ms: Ms) -> String {
    let s = ms.rem_euclid(DAY) / SECOND;
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        date(ms),
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A point in time: milliseconds since 1970 (a number of 11 digits or more), a date
/// `YYYY-MM-DD`, a date and time `YYYY-MM-DDTHH:MM[:SS[.fff]][Z|±HH:MM]` (a space may stand
/// for the T; no offset means UTC), `now`, or an age before `now` (`7d`, `36h`).
pub fn parse_time(text: &str, now: Ms) -> Result<Ms, String> {
    When::parse(text).map(|w| w.at(now))
}

/// A point in time as written ([`parse_time`]'s forms), before `now` is known: so that a
/// command line's `--since 7d` is checked when the flags are parsed (clap's `value_parser`,
/// which names the flag) and read against the clock once the command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Milliseconds since 1970.
    At(Ms),
    /// This long before `now` (`now` itself is an age of 0).
    Ago(Ms),
}

impl When {
    /// The forms of [`parse_time`]; the error quotes the text and says what a time can be.
    pub fn parse(text: &str) -> Result<When, String> {
        let t = text.trim();
        if t == "now" {
            return Ok(When::Ago(0));
        }
        if t.len() >= 11 && t.bytes().all(|b| b.is_ascii_digit()) {
            return t
                .parse()
                .map(When::At)
                .map_err(|_| format!("'{text}' is too large"));
        }
        if t.len() >= 10 && t.as_bytes()[4] == b'-' {
            return parse_datetime(t).map(When::At).ok_or_else(|| {
                format!(
                    "'{text}' is not a date (YYYY-MM-DD) or date and time (YYYY-MM-DDTHH:MM:SSZ)"
                )
            });
        }
        parse_duration(t).map(When::Ago).map_err(|_| {
            format!(
                "'{text}' is not a time: a date, a date and time, ms since 1970, now, or an age \
                 such as 7d"
            )
        })
    }

    /// The time it names, `now` being `now`.
    pub fn at(self, now: Ms) -> Ms {
        match self {
            When::At(t) => t,
            When::Ago(age) => now - age,
        }
    }
}

fn parse_datetime(t: &str) -> Option<Ms> {
    let num = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let y: i64 = num(t.get(0..4)?)?.into();
    let m = num(t.get(5..7)?)?;
    let d = num(t.get(8..10)?)?;
    if t.get(7..8)? != "-" || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let day = days_from_civil(y, m, d);
    if civil_from_days(day) != (y, m, d) {
        return None;
    }
    let mut ms = day * DAY;
    let rest = &t[10..];
    if rest.is_empty() {
        return Some(ms);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut parts = clock.split(':');
    let h = num(parts.next()?)?;
    let mi = num(parts.next()?)?;
    let sec: f64 = match parts.next() {
        Some(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            s.parse().ok()?
        }
        Some(_) => return None,
        None => 0.0,
    };
    if parts.next().is_some() || h > 23 || mi > 59 || !(0.0..61.0).contains(&sec) {
        return None;
    }
    ms += Ms::from(h) * HOUR + Ms::from(mi) * MINUTE + (sec * 1e3).round() as Ms;
    match offset {
        "" | "Z" | "z" => {}
        o => {
            let sign = if o.starts_with('-') { 1 } else { -1 };
            let (oh, om) = o[1..].split_once(':')?;
            ms += sign * (Ms::from(num(oh)?) * HOUR + Ms::from(num(om)?) * MINUTE);
        }
    }
    Some(ms)
}

/// A duration for people: `1h30m`, `45s`, `250ms`.
pub fn human(ms: Ms) -> String {
    if ms < SECOND {
        return format!("{ms}ms");
    }
    let mut out = String::new();
    let mut left = ms / SECOND;
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if left >= size {
            out.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    out
}

/// A configured duration as [`human`] writes it, with its milliseconds when it has any
/// (`3s100ms`): a bound or a period is shown as it was given, where an age may be rounded.
pub fn exact(ms: Ms) -> String {
    match ms % SECOND {
        rem if rem != 0 && ms > SECOND => format!("{}{rem}ms", human(ms)),
        _ => human(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let rows = [
            ("90m", 5_400_000),
            ("1h30m", 5_400_000),
            ("10s", 10_000),
            ("250ms", 250),
            ("1.5s", 1_500),
            ("2d", 2 * DAY),
            ("30", 30_000),
            ("0s", 0),
        ];
        for (t, want) in rows {
            assert_eq!(parse_duration(t), Ok(want), "{t}");
        }
        for bad in ["", "m", "5x", "-5s", "5 m", "1h-3m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(human(5_400_000), "1h30m");
        assert_eq!(human(250), "250ms");
        assert_eq!(exact(3_100), "3s100ms");
        assert_eq!(exact(90_000), "1m30s");
        assert_eq!(exact(250), "250ms");
    }

    #[test]
    fn times_and_dates() {
        let now = 1_700_000_000_000;
        let rows = [
            ("1970-01-01", 0),
            ("2023-11-14T22:13:20Z", 1_700_000_000_000),
            ("2023-11-14 22:13:20", 1_700_000_000_000),
            ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
            ("2023-11-14T22:13:20.5Z", 1_700_000_000_500),
            ("2023-11-14T22:13", 1_699_999_980_000),
            ("1700000000000", 1_700_000_000_000),
            ("now", now),
            ("1d", now - DAY),
        ];
        for (t, want) in rows {
            assert_eq!(parse_time(t, now), Ok(want), "{t}");
        }
        for bad in [
            "2023-02-30",
            "2023-13-01",
            "2023-11-14T25:00",
            "yesterday",
            "2023-11-14X",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
        assert_eq!(datetime(1_700_000_000_000), "2023-11-14T22:13:20Z");
        // Parsed before the clock is read: an age stays an age.
        assert_eq!(When::parse("7d"), Ok(When::Ago(7 * DAY)));
        assert_eq!(When::parse("now"), Ok(When::Ago(0)));
        assert_eq!(When::parse("1970-01-02"), Ok(When::At(DAY)));
    }
}
