//! The cron form of a campaign schedule: the five fields of crontab(5), minute hour
//! day-of-month month day-of-week, each `*`, a number, a range `a-b`, a step `*/n` or
//! `a-b/n`, or a comma list of these; months and days may be named (`jan`, `mon`). As in
//! Vixie cron, when both day fields are restricted a day matching either one fires. Times
//! are UTC. IEPM-BW's monitoring hosts started each round from a cron table entry (§II.A).
//!
//! Deterministic core: an expression and a time in, the next firing time out.

use crate::when::{civil_from_days, days_from_civil, Ms, DAY, HOUR, MINUTE};

/// A parsed expression: one bit per allowed value of each field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether the day-of-month and day-of-week fields were `*` (Vixie cron's rule).
    any_day: bool,
    any_weekday: bool,
    text: String,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn field(text: &str, lo: u32, hi: u32, names: &[&str], what: &str) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(lo + i as u32);
        }
        s.parse::<u32>()
            .ok()
            .filter(|v| (lo..=hi).contains(v))
            .ok_or_else(|| format!("{what} '{s}' is not in {lo}–{hi}"))
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("{what}: step '{s}' must be a positive number"))?,
            ),
            None => (part, 1),
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `5/15` means from 5 to the end in steps of 15.
                None if step > 1 => (value(r)?, hi),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if a > b {
            return Err(format!("{what}: range '{range}' runs backwards"));
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            let Some(next) = v.checked_add(step) else {
                break;
            };
            v = next;
        }
    }
    Ok(bits)
}

impl Cron {
    /// The longest expression (every minute, hour, day and month written out is shorter).
    pub const MAX_LEN: usize = 1000;

    /// Parses `min hour dom month dow`.
    pub fn parse(text: &str) -> Result<Cron, String> {
        if text.chars().count() > Self::MAX_LEN {
            return Err(format!(
                "cron: at most {} characters, this one has {}",
                Self::MAX_LEN,
                text.chars().count()
            ));
        }
        let f: Vec<&str> = text.split_whitespace().collect();
        if f.len() != 5 {
            return Err(format!(
                "cron '{text}': five fields are needed (minute hour day-of-month month day-of-week)"
            ));
        }
        let wrap = |e: String| format!("cron '{text}': {e}");
        let mut weekdays = field(f[4], 0, 7, &WEEKDAYS, "day of week").map_err(wrap)?;
        // 7 is Sunday too.
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & 0x7f;
        }
        Ok(Cron {
            minutes: field(f[0], 0, 59, &[], "minute").map_err(wrap)?,
            hours: field(f[1], 0, 23, &[], "hour").map_err(wrap)? as u32,
            days: field(f[2], 1, 31, &[], "day of month").map_err(wrap)? as u32,
            months: field(f[3], 1, 12, &MONTHS, "month").map_err(wrap)? as u16,
            weekdays: weekdays as u8,
            any_day: f[2] == "*",
            any_weekday: f[4] == "*",
            // The fields one space apart: shown as written, but on one line.
            text: f.join(" "),
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    fn day_matches(&self, day: i64) -> bool {
        let (_, _, d) = civil_from_days(day);
        let dom = self.days & (1 << d) != 0;
        // 1970-01-01 was a Thursday (4).
        let dow = self.weekdays & (1 << (day + 4).rem_euclid(7)) != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (false, true) => dom,
            (true, false) => dow,
            (false, false) => dom || dow,
        }
    }

    /// The first firing strictly after `t`; `None` when the expression never fires (e.g.
    /// `0 0 30 2 *`) within the next eight years.
    pub fn next_after(&self, t: Ms) -> Option<Ms> {
        let mut m = (t.div_euclid(MINUTE) + 1) * MINUTE;
        let limit = m + 8 * 366 * DAY;
        while m < limit {
            let day = m.div_euclid(DAY);
            let (y, month, _) = civil_from_days(day);
            if self.months & (1 << month) == 0 {
                let (ny, nm) = if month == 12 {
                    (y + 1, 1)
                } else {
                    (y, month + 1)
                };
                m = days_from_civil(ny, nm, 1) * DAY;
                continue;
            }
            if !self.day_matches(day) {
                m = (day + 1) * DAY;
                continue;
            }
            let in_day = m - day * DAY;
            let hour = (in_day / HOUR) as u32;
            if self.hours & (1 << hour) == 0 {
                m = day * DAY + (Ms::from(hour) + 1) * HOUR;
                continue;
            }
            let minute = (in_day % HOUR / MINUTE) as u32;
            if self.minutes & (1 << minute) == 0 {
                m += MINUTE;
                continue;
            }
            return Some(m);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::when::parse_time;

    fn at(t: &str) -> Ms {
        parse_time(t, 0).unwrap()
    }

    #[test]
    fn next_firings() {
        // Rows: expression, after, the next three firings.
        let rows: [(&str, &str, [&str; 3]); 7] = [
            (
                "*/30 * * * *",
                "2026-03-01T10:14:59Z",
                [
                    "2026-03-01T10:30:00Z",
                    "2026-03-01T11:00:00Z",
                    "2026-03-01T11:30:00Z",
                ],
            ),
            (
                "0 */2 * * *",
                "2026-03-01T23:00:00Z",
                [
                    "2026-03-02T00:00:00Z",
                    "2026-03-02T02:00:00Z",
                    "2026-03-02T04:00:00Z",
                ],
            ),
            // IEPM-BW's 90-minute round cannot be one cron line; 0,30 of every third hour is.
            (
                "0,30 1-23/3 * * *",
                "2026-03-01T00:00:00Z",
                [
                    "2026-03-01T01:00:00Z",
                    "2026-03-01T01:30:00Z",
                    "2026-03-01T04:00:00Z",
                ],
            ),
            // Weekdays only: Friday 2026-03-06 23:59 → Monday.
            (
                "0 6 * * mon-fri",
                "2026-03-06T23:59:00Z",
                [
                    "2026-03-09T06:00:00Z",
                    "2026-03-10T06:00:00Z",
                    "2026-03-11T06:00:00Z",
                ],
            ),
            // Both day fields restricted: the 1st of the month or any Sunday.
            (
                "0 0 1 * 0",
                "2026-02-27T00:00:00Z",
                [
                    "2026-03-01T00:00:00Z",
                    "2026-03-08T00:00:00Z",
                    "2026-03-15T00:00:00Z",
                ],
            ),
            (
                "30 12 29 feb *",
                "2026-01-01T00:00:00Z",
                [
                    "2028-02-29T12:30:00Z",
                    "2032-02-29T12:30:00Z",
                    "2036-02-29T12:30:00Z",
                ],
            ),
            (
                "59 23 31 dec 7",
                "2026-12-31T23:59:00Z",
                [
                    "2027-12-05T23:59:00Z",
                    "2027-12-12T23:59:00Z",
                    "2027-12-19T23:59:00Z",
                ],
            ),
        ];
        for (expr, after, want) in rows {
            let c = Cron::parse(expr).unwrap();
            let mut t = at(after);
            for w in want {
                t = c.next_after(t).unwrap();
                assert_eq!(crate::when::datetime(t), w, "{expr}");
            }
        }
        assert_eq!(Cron::parse("0 0 30 2 *").unwrap().next_after(0), None);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (bad, says) in [
            ("* * * *", "five fields"),
            ("60 * * * *", "minute '60'"),
            ("*/0 * * * *", "step"),
            ("5-1 * * * *", "backwards"),
            ("0 0 * foo *", "month 'foo'"),
        ] {
            let e = Cron::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // Too long: refused without quoting it.
        let long = format!("0 0 * * {}", vec!["1"; 600].join(","));
        let e = Cron::parse(&long).unwrap_err();
        assert_eq!(e, "cron: at most 1000 characters, this one has 1207");
    }

    #[test]
    fn steps_do_not_overflow_and_the_text_is_one_line() {
        let c = Cron::parse("1-59/4294967295\t0\n* * *").unwrap();
        assert_eq!(c.minutes, 1 << 1);
        assert_eq!(c.text(), "1-59/4294967295 0 * * *");
    }
}
