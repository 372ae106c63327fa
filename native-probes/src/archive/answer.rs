//! The answers of `nowcast archive query` as tables for a person (`--json` prints the
//! objects): the archive named, units beside the metrics, loss in percent, times in UTC with
//! their age.
//!
//! Deterministic core: an answer in, text out.

use super::query::{Bucket, Latest, Summary};
use crate::format::number;
use crate::when::{date, datetime, Ms, HOUR};
use nowcast_core::record::{Metric, Unit};
use std::fmt::Write;

/// A metric's column heading and how its values are shown: in its unit, or a fraction
/// in percent as every other table shows loss.
fn metric(name: &str) -> (String, f64) {
    match Metric::from_name(name).map(|m| (m, m.unit())) {
        Some((m, Unit::Fraction)) => (format!("{m} %"), 100.0),
        Some((m, unit)) => (format!("{m} {unit}"), 1.0),
        None => (name.to_string(), 1.0),
    }
}

fn opt(v: Option<f64>, scale: f64) -> String {
    v.map(|v| number(v * scale)).unwrap_or_else(|| "-".into())
}

/// The cells records, ok, mean, min, max of a summary or an hour.
fn counts(n: u64, ok: u64, stats: [Option<f64>; 3], scale: f64) -> Vec<String> {
    let mut cells = vec![n.to_string(), ok.to_string()];
    cells.extend(stats.map(|v| opt(v, scale)));
    cells
}

/// Rows under a heading, each column as wide as its widest cell; the first `left`
/// columns aligned left, the rest (numbers) right.
fn table(head: &[&str], left: usize, rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(&width).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w - c.chars().count();
            if i < left {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// How long ago, in the largest whole unit (`42 s`, `5 min`, `3 h`, `2 d`).
fn age(ms: f64) -> String {
    let s = (ms / 1000.0).max(0.0) as u64;
    match s {
        0..=119 => format!("{s} s ago"),
        120..=7199 => format!("{} min ago", s / 60),
        7200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

pub fn day(archive: &str, from: Ms, s: &[Summary]) -> String {
    let mut out = format!("{} (UTC) in {archive}: ", date(from));
    if s.is_empty() {
        out.push_str("no records\n");
        return out;
    }
    let targets: std::collections::BTreeSet<_> = s.iter().map(|x| &x.target).collect();
    let _ = writeln!(out, "{} targets, {} series", targets.len(), s.len());
    let rows: Vec<Vec<String>> = s
        .iter()
        .map(|x| {
            let (name, k) = metric(&x.metric);
            let mut row = vec![x.target.clone(), name];
            row.extend(counts(x.n, x.ok, [x.mean, x.min, x.max], k));
            row
        })
        .collect();
    out.push_str(&table(
        &["target", "metric", "records", "ok", "mean", "min", "max"],
        2,
        &rows,
    ));
    out
}

pub fn hourly(
    archive: &str,
    target: &str,
    m: Metric,
    since: Ms,
    until: Ms,
    b: &[Bucket],
) -> String {
    let (name, k) = metric(m.name());
    let mut out = format!(
        "{target} {name}, hourly, {} to {} in {archive}: ",
        datetime(since),
        datetime(until)
    );
    if b.is_empty() {
        let _ = writeln!(
            out,
            "no records (`archive query latest` lists the targets and metrics there are)"
        );
        return out;
    }
    let n: u64 = b.iter().map(|x| x.n).sum();
    let _ = writeln!(out, "{n} records in {} hours", b.len());
    let rows: Vec<Vec<String>> = b
        .iter()
        .map(|x| {
            let start = datetime(x.hour_ms - x.hour_ms.rem_euclid(HOUR));
            let mut row = vec![start[..16].replace('T', " ")];
            row.extend(counts(x.n, x.ok, [x.mean, x.min, x.max], k));
            row
        })
        .collect();
    out.push_str(&table(
        &["hour (UTC)", "records", "ok", "mean", "min", "max"],
        1,
        &rows,
    ));
    out
}

pub fn latest(archive: &str, now: Ms, l: &[Latest]) -> String {
    let mut out = format!("the latest ok measurement of each series in {archive}: ");
    if l.is_empty() {
        out.push_str("none\n");
        return out;
    }
    let _ = writeln!(out, "{} series", l.len());
    let rows: Vec<Vec<String>> = l
        .iter()
        .map(|x| {
            let (name, k) = metric(&x.metric);
            vec![
                x.target.clone(),
                name,
                number(x.value * k),
                datetime(x.ts_ms as Ms),
                age(now as f64 - x.ts_ms),
            ]
        })
        .collect();
    out.push_str(&table(
        &["target", "metric", "value", "at (UTC)", "age"],
        2,
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_name_the_archive_units_and_empty_answers() {
        let s = [Summary {
            target: "10.0.0.2:8060".into(),
            metric: "rtt".into(),
            n: 25,
            ok: 24,
            mean: Some(0.0523),
            min: Some(0.031),
            max: None,
        }];
        let t = day("lab.sqlite", 1_764_892_800_000, &s);
        assert!(t.starts_with("2025-12-05 (UTC) in lab.sqlite: 1 targets, 1 series\n"));
        assert!(t.contains("rtt ms"), "{t}");
        assert!(t.contains("0.052"), "{t}");
        assert!(t.lines().nth(2).unwrap().ends_with('-'), "{t}");
        // The numbers' columns end where their headings end.
        let lines: Vec<_> = t.lines().skip(1).collect();
        assert_eq!(lines[0].chars().count(), lines[1].chars().count(), "{t}");
        assert!(day("a", 0, &[]).ends_with("no records\n"));

        let b = [Bucket {
            hour_ms: 1_764_896_400_000,
            n: 3,
            ok: 3,
            mean: Some(941.0),
            min: Some(930.0),
            max: Some(950.0),
        }];
        let t = hourly("x", "h:1", Metric::Throughput, 0, 1, &b);
        assert!(t.contains("throughput Mbit/s, hourly"), "{t}");
        assert!(t.contains("2025-12-05 01:00"), "{t}");
        assert!(hourly("x", "h:1", Metric::Rtt, 0, 1, &[]).contains("no records"));

        let l = [Latest {
            target: "h:1".into(),
            metric: "loss".into(),
            ts_ms: 1_000.0,
            value: 0.25,
        }];
        let t = latest("x", 301_000, &l);
        assert!(t.contains("loss %"), "{t}");
        assert!(t.contains("25.00"), "{t}");
        assert!(t.contains("5 min ago"), "{t}");
    }
}
