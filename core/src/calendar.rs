//! Civil dates and day numbers (proleptic Gregorian, days since 1970-01-01), after Howard
//! Hinnant's `days_from_civil` and `civil_from_days` ("chrono-Compatible Low-Level Date
//! Algorithms"): for the times read in files and those a campaign's configuration names.

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month 1–12, day 1–31) of a day number.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_numbers_and_civil_dates_agree_both_ways() {
        let known = [
            ((1970, 1, 1), 0),
            ((1969, 12, 31), -1),
            ((2000, 2, 29), 11_016),
            ((2000, 3, 1), 11_017),
            ((2023, 11, 14), 19_675),
            ((1900, 3, 1), -25_508),
        ];
        for ((y, m, d), day) in known {
            assert_eq!(days_from_civil(y, m, d), day, "{y}-{m}-{d}");
            assert_eq!(civil_from_days(day), (y, m, d), "{day}");
        }
        for day in [-800_000, -1, 0, 59, 60, 10_957, 19_675, 2_932_896] {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
    }
}
