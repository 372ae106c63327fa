//! Numbers for people, the same in every table and report.
//!
//! Deterministic core.

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
