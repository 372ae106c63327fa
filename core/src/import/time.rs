//! Times in files: ms since 1970 as a number, or an ISO 8601 date and time
//! (`2026-11-20`, `2026-11-20T12:00:00Z`, `2026-11-20 12:00:00.250+01:00`). A time without
//! an offset is taken as UTC: the reader has no time zone (it reads no clock and no
//! environment), so a file is read the same everywhere.

use crate::calendar::days_from_civil;

/// The time `s` (trimmed) names, in ms since 1970; `None` if it is neither form.
pub fn parse_time(s: &str) -> Option<f64> {
    parse_time_in(s, 1.0)
}

/// [`parse_time`] for a column whose numbers count `unit_ms` each (1000: seconds).
pub fn parse_time_in(s: &str, unit_ms: f64) -> Option<f64> {
    let s = s.trim();
    match super::number(s) {
        Some(n) => Some(n * unit_ms).filter(|t| super::time_ok(*t)),
        None => iso8601(s).filter(|t| super::time_ok(*t)),
    }
}

/// Numbers of a time column from this one on, up to [`SECONDS_BELOW`], are seconds since
/// 1970 (`date +%s`, Python's `time.time()`): as seconds they are 2001 to 5138; as ms they
/// would be January 1970 to April 1973, when no file of measurements was written.
pub const SECONDS_FROM: f64 = 1e9;
/// See [`SECONDS_FROM`]; from here on, numbers are ms again (2001 on: `Date.now()`).
pub const SECONDS_BELOW: f64 = 1e11;

/// Whether a time column whose first value is `first` counts seconds (see [`SECONDS_FROM`]).
pub fn counts_seconds(first: &str) -> bool {
    super::number(first.trim()).is_some_and(|n| (SECONDS_FROM..SECONDS_BELOW).contains(&n))
}

/// Takes exactly `n` ASCII digits from the front of `s`.
fn digits(s: &mut &[u8], n: usize) -> Option<u32> {
    if s.len() < n || !s[..n].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = s[..n]
        .iter()
        .fold(0u32, |acc, &b| acc * 10 + u32::from(b - b'0'));
    *s = &s[n..];
    Some(v)
}

/// Takes `c` from the front of `s`.
fn byte(s: &mut &[u8], c: u8) -> bool {
    let yes = s.first() == Some(&c);
    if yes {
        *s = &s[1..];
    }
    yes
}

fn iso8601(text: &str) -> Option<f64> {
    let mut s = text.as_bytes();
    let year = digits(&mut s, 4)?;
    let month = if byte(&mut s, b'-') {
        digits(&mut s, 2)?
    } else {
        return None;
    };
    let day = if byte(&mut s, b'-') {
        digits(&mut s, 2)?
    } else {
        return None;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month[month as usize - 1] {
        return None;
    }
    let mut ms = days_from_civil(i64::from(year), month, day) as f64 * 86_400_000.0;
    if s.is_empty() {
        return Some(ms);
    }
    if !(byte(&mut s, b'T') || byte(&mut s, b't') || byte(&mut s, b' ')) {
        return None;
    }
    let hour = digits(&mut s, 2)?;
    if !byte(&mut s, b':') {
        return None;
    }
    let minute = digits(&mut s, 2)?;
    let mut second = 0.0;
    if byte(&mut s, b':') {
        second = f64::from(digits(&mut s, 2)?);
        if byte(&mut s, b'.') || byte(&mut s, b',') {
            let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            // At most nanoseconds are meaningful; the rest of the digits are read and dropped.
            let keep = &s[..n.min(9)];
            let frac = keep
                .iter()
                .fold(0u64, |acc, &b| acc * 10 + u64::from(b - b'0'));
            second += frac as f64 / 10f64.powi(keep.len() as i32);
            s = &s[n..];
        }
    }
    if hour > 23 || minute > 59 || second >= 61.0 {
        return None;
    }
    ms += (f64::from(hour) * 3600.0 + f64::from(minute) * 60.0 + second) * 1000.0;
    let offset_min = match s.first() {
        None => 0,
        Some(b'Z' | b'z') if s.len() == 1 => 0,
        Some(&sign @ (b'+' | b'-')) => {
            s = &s[1..];
            let h = digits(&mut s, 2)?;
            byte(&mut s, b':');
            let m = digits(&mut s, 2)?;
            if !s.is_empty() || h > 23 || m > 59 {
                return None;
            }
            let minutes = (h * 60 + m) as i64;
            if sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    Some(ms - offset_min as f64 * 60_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_ms_and_iso_dates() {
        let cases: [(&str, Option<f64>); 12] = [
            ("1700000000000", Some(1.7e12)),
            ("1970-01-01", Some(0.0)),
            ("2023-11-14T22:13:20Z", Some(1_700_000_000_000.0)),
            ("2023-11-14T22:13:20.5Z", Some(1_700_000_000_500.0)),
            ("2023-11-14 23:13:20+01:00", Some(1_700_000_000_000.0)),
            ("2023-11-14T21:13:20-0100", Some(1_700_000_000_000.0)),
            ("2024-02-29T00:00", Some(1_709_164_800_000.0)),
            ("2023-02-29", None),
            ("2023-11-14T25:00Z", None),
            ("yesterday", None),
            ("2023-11-14T22:13:20Zjunk", None),
            ("1e300", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_time(text), want, "{text}");
        }
    }
}
