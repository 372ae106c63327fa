//! The answers of `nowcast archive query` as tables for a person (`--json` prints the
//! objects): the archive named, units beside the metrics, loss in percent, times in UTC with
//! their age, a row per series (target, metric and source: `nowcast tcp`'s and `nowcast
//! udp`'s rtt to one host are two rows).
//!
//! Deterministic core: an answer in, text out.

use super::query::{Bucket, Latest, Summary};
use crate::format::{number, Scale};
use crate::when::{date, datetime, Ms, HOUR};
use nowcast_core::record::Metric;
use std::fmt::Write;

/// A metric's heading and how its values are shown, as every other table of the command
/// shows them (`format::Scale`): rates in kbit/s, Mbit/s or Gbit/s by `magnitude` (the
/// largest value shown with it), loss in percent, times in ms.
fn metric(name: &str, magnitude: f64) -> (String, f64) {
    match Metric::from_name(name) {
        Some(m) => {
            let s = Scale::of(m.unit(), magnitude);
            (format!("{m} {}", s.name), s.factor)
        }
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

/// Rows under a heading, each column as wide as its widest cell; the columns of `numbers`
/// aligned right, the others (text, times) left.
fn table(head: &[&str], numbers: &[usize], rows: &[Vec<String>]) -> String {
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
            if !numbers.contains(&i) {
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
            let (name, k) = metric(&x.metric, x.max.unwrap_or(0.0));
            let mut row = vec![x.target.clone(), name, x.source.clone()];
            row.extend(counts(x.n, x.ok, [x.mean, x.min, x.max], k));
            row
        })
        .collect();
    out.push_str(&table(
        &[
            "target", "metric", "source", "records", "ok", "mean", "min", "max",
        ],
        &[3, 4, 5, 6, 7],
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
    let largest = b.iter().filter_map(|x| x.max).fold(0.0, f64::max);
    let (name, k) = metric(m.name(), largest);
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
    let hours: std::collections::BTreeSet<_> = b.iter().map(|x| x.hour_ms).collect();
    let sources: std::collections::BTreeSet<_> = b.iter().map(|x| &x.source).collect();
    let _ = write!(
        out,
        "{} in {}",
        crate::format::count(n, "record"),
        crate::format::count(hours.len() as u64, "hour")
    );
    if sources.len() > 1 {
        let _ = write!(out, " from {} sources", sources.len());
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = b
        .iter()
        .map(|x| {
            let start = datetime(x.hour_ms - x.hour_ms.rem_euclid(HOUR));
            let mut row = vec![start[..16].replace('T', " "), x.source.clone()];
            row.extend(counts(x.n, x.ok, [x.mean, x.min, x.max], k));
            row
        })
        .collect();
    out.push_str(&table(
        &[
            "hour (UTC)",
            "source",
            "records",
            "ok",
            "mean",
            "min",
            "max",
        ],
        &[2, 3, 4, 5, 6],
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
            let (name, k) = metric(&x.metric, x.value);
            vec![
                x.target.clone(),
                name,
                x.source.clone(),
                number(x.value * k),
                datetime(x.ts_ms as Ms),
                crate::format::ago(now as f64 - x.ts_ms),
            ]
        })
        .collect();
    out.push_str(&table(
        // The time is text: its heading over its first digit.
        &["target", "metric", "source", "value", "at (UTC)", "age"],
        &[3, 5],
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
            source: "nowcast tcp".into(),
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
            source: "iperf3".into(),
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
            source: "nowcast udp".into(),
            ts_ms: 1_000.0,
            value: 0.25,
        }];
        let t = latest("x", 301_000, &l);
        assert!(t.contains("loss %"), "{t}");
        assert!(t.contains("25.00"), "{t}");
        assert!(t.contains("5 min ago"), "{t}");

        // A rate as the probes' tables show it: Gbit/s from 1000 Mbit/s.
        let fast = [Summary {
            target: "h:1".into(),
            metric: "bandwidth_up".into(),
            source: "nowcast tcp".into(),
            n: 3,
            ok: 3,
            mean: Some(20_156.0),
            min: Some(19_900.0),
            max: Some(20_400.0),
        }];
        let t = day("x", 0, &fast);
        assert!(
            t.contains("bandwidth_up Gbit/s") && t.contains("20.16"),
            "{t}"
        );
    }

    #[test]
    fn two_sources_of_one_target_and_metric_are_two_rows_named_by_source() {
        let one = |source: &str, n: u64, mean: f64| Summary {
            target: "h:1".into(),
            metric: "rtt".into(),
            source: source.into(),
            n,
            ok: n,
            mean: Some(mean),
            min: Some(mean),
            max: Some(mean),
        };
        let t = day(
            "x",
            0,
            &[one("nowcast tcp", 10, 1.5), one("nowcast udp", 4, 9.25)],
        );
        assert!(t.contains("1 targets, 2 series"), "{t}");
        let lines: Vec<_> = t.lines().collect();
        assert!(lines[1].starts_with("target  metric  source "), "{t}");
        assert!(lines[2].starts_with("h:1     rtt ms  nowcast tcp  "), "{t}");
        assert!(lines[2].contains(" 10 ") && lines[2].contains("1.5"), "{t}");
        assert!(lines[3].starts_with("h:1     rtt ms  nowcast udp  "), "{t}");
        assert!(lines[3].contains(" 4 ") && lines[3].contains("9.25"), "{t}");

        let b = |source: &str, hour_ms: Ms| Bucket {
            hour_ms,
            source: source.into(),
            n: 2,
            ok: 2,
            mean: Some(1.0),
            min: Some(1.0),
            max: Some(1.0),
        };
        let t = hourly(
            "x",
            "h:1",
            Metric::Rtt,
            0,
            2 * HOUR,
            &[
                b("nowcast tcp", 0),
                b("nowcast udp", 0),
                b("nowcast tcp", HOUR),
            ],
        );
        assert!(t.contains("6 records in 2 hours from 2 sources\n"), "{t}");
        assert!(t.contains("1970-01-01 00:00  nowcast udp"), "{t}");

        let l = |source: &str, value: f64| Latest {
            target: "h:1".into(),
            metric: "rtt".into(),
            source: source.into(),
            ts_ms: 0.0,
            value,
        };
        let t = latest("x", 0, &[l("nowcast tcp", 1.25), l("nowcast udp", 7.5)]);
        assert!(t.contains("2 series"), "{t}");
        assert!(t.contains("nowcast tcp  1.25"), "{t}");
        assert!(t.contains("nowcast udp  7.50"), "{t}");
    }
}
