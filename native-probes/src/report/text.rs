//! The report as tables for a terminal, 80 columns wide where the names allow: what to
//! expect now first (per metric, the best and worst target by the forecast of the next value
//! with its range, and the targets failing now), then every series grouped by target, the
//! forecast errors and daily cycles, active against passive, windows and streams, and runs.
//! Values are shown as every other table of nowcast shows them (`format::Scale`); names
//! from the archive are printed with their control characters escaped.
//!
//! Deterministic core: a [`Report`] in, text out.

use super::analysis::{failing_targets, Next, Report, SeriesReport, MIN_RANKED};
use crate::format::{bytes_short, clean, count, scaled, Scale, BAND_K};
use crate::runlog::Outcome;
use crate::when::datetime;
use nowcast_core::iepm::DiurnalFit;
use std::fmt::Write as _;

/// Width the prose is wrapped to.
const WIDTH: usize = 80;

/// A percentage of a fraction with one decimal, never "-0.0".
pub fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let s = format!("{:.1}%", v * 100.0);
            if s == "-0.0%" {
                "0.0%".into()
            } else {
                s
            }
        }
        _ => "-".into(),
    }
}

/// `v ± e` in `s`, the error with the value's decimals (`4.20 ± 0.01`, `464 ± 56`), or its
/// own when those would show it as nothing.
pub fn pm(s: &Scale, v: f64, e: f64) -> String {
    let a = s.num(v);
    let d = a.split_once('.').map_or(0, |(_, f)| f.len());
    let b = format!("{:.d$}", e * s.factor);
    let b = if e != 0.0 && b.chars().all(|c| matches!(c, '0' | '.' | '-')) {
        s.num(e)
    } else {
        b
    };
    format!("{a} ± {b}")
}

/// The forecast as `453 ± 41` in `s` (`± ?` while its error is unknown).
pub fn next_band(n: &Next, s: &Scale) -> String {
    match n.error {
        Some(e) => pm(s, n.value, BAND_K * e),
        None => format!("{} ± ?", s.num(n.value)),
    }
}

/// The forecast as `453 Mbit/s (413–494)`: its range, narrowed to the unit's values.
pub fn next_range(n: &Next, s: &Scale) -> String {
    match (n.low, n.high) {
        (Some(lo), Some(hi)) => format!("{} ({}–{})", s.with_unit(n.value), s.num(lo), s.num(hi)),
        _ => format!("{} (range not known yet)", s.with_unit(n.value)),
    }
}

/// `metric (source)` of a series.
pub fn series_name(s: &SeriesReport) -> String {
    format!("{} ({})", s.metric.name(), clean(s.source()))
}

/// The hour and minute (UTC) of the peak of |a|·sin(x + b) + c: x = π/2 − b.
pub fn peak(f: &DiurnalFit) -> String {
    use std::f64::consts::{FRAC_PI_2, TAU};
    let minutes = ((FRAC_PI_2 - f.b).rem_euclid(TAU) / TAU * 1440.0).round() as u32 % 1440;
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// `text` wrapped at [`WIDTH`], every line after `first` indented by `indent` spaces.
fn wrap(out: &mut String, first: &str, text: &str, indent: usize) {
    let mut line = first.to_string();
    let mut col = first.chars().count();
    // After a first part that is not only spaces, the text goes on after a space.
    let mut fresh = first.trim().is_empty();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let n = word.chars().count();
        if !fresh && col + 1 + n > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
            col = indent;
            fresh = true;
        }
        if !fresh {
            line.push(' ');
            col += 1;
        }
        line.push_str(word);
        col += n;
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// A table: `None` rows are the next cell written on a line of its own (a heading), the
/// others aligned in columns as wide as their widest cell, the first `left` aligned left.
fn table(out: &mut String, head: &[&str], left: usize, rows: &[Result<Vec<String>, String>]) {
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows.iter().flatten() {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(Ok(head)).chain(rows.iter().cloned()) {
        let r = match r {
            Ok(r) => r,
            Err(heading) => {
                let _ = writeln!(out, "{heading}");
                continue;
            }
        };
        let mut line = String::from("  ");
        for (i, (c, w)) in r.iter().zip(&width).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = " ".repeat(w - c.chars().count());
            if i < left {
                line.push_str(c);
                line.push_str(&pad);
            } else {
                line.push_str(&pad);
                line.push_str(c);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn now(out: &mut String, r: &Report) {
    if !r.now.is_empty() {
        let _ = writeln!(
            out,
            "now: the forecast of the next value (NWS bank, ± {BAND_K}·RMSE), best and worst"
        );
        for g in &r.now {
            let unit = g.metric.unit();
            let _ = writeln!(
                out,
                "  {} ({}), {}, {}:",
                g.metric.name(),
                clean(&g.source),
                count((g.ranked.len() + g.unranked.len()) as u64, "target"),
                g.better()
            );
            let mut rows: Vec<(&str, &super::analysis::Ranked)> = Vec::new();
            // Best and worst among the targets that answer; those failing now after them.
            let answering = g.answering();
            if let (Some(best), Some(worst)) = (answering.first(), answering.last()) {
                if answering.len() == 1 {
                    let alone = g.unranked.is_empty() && g.failing().is_empty();
                    rows.push((if alone { "only" } else { "best" }, best));
                } else if scaled(best.next.value, unit) == scaled(worst.next.value, unit) {
                    let _ = writeln!(out, "    all about {}", scaled(best.next.value, unit));
                } else {
                    rows.push(("best", best));
                    rows.push(("worst", worst));
                }
            }
            rows.extend(g.failing().iter().map(|x| ("failing", x)));
            let w = rows
                .iter()
                .map(|(_, x)| clean(&x.target).chars().count())
                .max()
                .unwrap_or(0);
            let lw = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0).max(5);
            for (label, x) in rows {
                let name = clean(&x.target);
                let pad = " ".repeat(w - name.chars().count());
                let _ = writeln!(
                    out,
                    "    {label:<lw$}  {name}{pad}  {}{}",
                    next_range(&x.next, &r.scale_of(g, x)),
                    if x.failing { "  (failing now)" } else { "" }
                );
            }
            if !g.unranked.is_empty() {
                let names: Vec<String> = g.unranked.iter().map(|x| clean(&x.target)).collect();
                wrap(
                    out,
                    &format!("    not ranked yet (fewer than {MIN_RANKED} values):"),
                    &names.join(", "),
                    6,
                );
            }
        }
        out.push('\n');
    }
    let failing = failing_targets(&r.series);
    if !failing.is_empty() {
        let _ = writeln!(out, "failing now (the newest records failed):");
        for f in failing {
            let all = r.series.iter().filter(|s| s.target == f.target).count();
            let names = if f.series.len() == all && all > 2 {
                format!("all its {all} series")
            } else {
                let names: Vec<String> = f.series.iter().map(|s| series_name(s)).collect();
                names.join(", ")
            };
            wrap(out, &format!("  {}:", clean(f.target)), &names, 4);
            let what = format!(
                "{} failed{}{};",
                count(f.failed, "record"),
                f.since_ms
                    .map(|t| format!(" since {}", datetime(t as i64)))
                    .unwrap_or_default(),
                if f.never_ok {
                    ", none ok in this period"
                } else {
                    ""
                }
            );
            wrap(
                out,
                "    ",
                &format!(
                    "{what} the newest: {}",
                    clean(f.last_error.unwrap_or("(no reason recorded)"))
                ),
                4,
            );
        }
        out.push('\n');
    }
}

/// The series in the order of the tables: by target, then source, then metric, so that a
/// target's series of one source are under one heading.
fn by_target_and_source(r: &Report) -> Vec<&SeriesReport> {
    let mut v: Vec<&SeriesReport> = r.series.iter().collect();
    v.sort_by(|a, b| {
        (&a.target, a.source(), a.metric.name()).cmp(&(&b.target, b.source(), b.metric.name()))
    });
    v
}

/// The rows of a table of series, each (target, source) a heading.
fn grouped(
    r: &Report,
    row: impl Fn(&SeriesReport) -> Vec<String>,
) -> Vec<Result<Vec<String>, String>> {
    let mut rows = Vec::new();
    let mut last = None;
    for s in by_target_and_source(r) {
        let key = (&s.target, s.source());
        if last != Some(key) {
            rows.push(Err(format!("{} ({})", clean(&s.target), clean(s.source()))));
            last = Some(key);
        }
        rows.push(Ok(row(s)));
    }
    rows
}

fn series_tables(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "series, by target (source): median, mean and the next value's forecast"
    );
    let _ = writeln!(out, "(NWS bank ± {BAND_K}·RMSE):");
    // A campaign's slots that did not run, in a column of their own when there are any.
    let not_run = r.series.iter().any(|s| s.not_run > 0);
    let rows = grouped(r, |s| {
        let sc = s.scale();
        let st = s.stats.as_ref();
        let some = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| sc.num(v));
        let failed = s.timeouts + s.errors;
        let mut row = vec![
            format!("{} {}", s.metric.name(), sc.name),
            s.ok.to_string(),
            if failed == 0 {
                "0".into()
            } else {
                format!(
                    "{failed} ({})",
                    pct(Some(failed as f64 / (failed + s.ok) as f64))
                )
            },
            some(st.map(|m| m.median)),
            some(st.map(|m| m.mean)),
            s.next
                .as_ref()
                .map_or_else(|| "-".into(), |n| next_band(n, &sc)),
        ];
        if not_run {
            row.insert(3, s.not_run.to_string());
        }
        row
    });
    let mut head = vec!["metric", "ok", "failed", "median", "mean", "next"];
    if not_run {
        head.insert(3, "not run");
    }
    table(out, &head, 1, &rows);
    out.push('\n');
    let _ = writeln!(
        out,
        "forecast errors, average(|forecast − observed| / observed), and δb of the daily"
    );
    let _ = writeln!(
        out,
        "cycle's phase (below 0.2: diurnal) on weekdays and weekends (IEPM-BW §III.G–H):"
    );
    let rows = grouped(r, |s| {
        let db =
            |f: Option<DiurnalFit>| f.map_or_else(|| "-".into(), |f| format!("{:.2}", f.delta_b));
        vec![
            s.metric.name().to_string(),
            pct(s.forecasts[0].relative_error),
            pct(s.forecasts[1].relative_error),
            pct(s.forecasts[2].relative_error),
            db(s.diurnal.weekdays),
            db(s.diurnal.weekends),
            if s.diurnal_path { "yes" } else { "" }.into(),
        ]
    });
    table(
        out,
        &[
            "metric",
            "mean of 5",
            "EWMA",
            "NWS",
            "δb wd",
            "δb we",
            "diurnal",
        ],
        1,
        &rows,
    );
    let _ = writeln!(
        out,
        "  -: too few values (forecasts are scored from the 2nd value; a daily fit needs"
    );
    let _ = writeln!(
        out,
        "     4, in at least {} of the day's 24 hours, UTC, weekdays and weekends apart),",
        nowcast_core::iepm::DIURNAL_MIN_HOURS
    );
    let _ = writeln!(
        out,
        "     or every value 0 (a relative error divides by the value: a loss of 0 %)"
    );
}

fn diurnal(out: &mut String, r: &Report) {
    let fits: Vec<_> = r.series.iter().filter(|s| s.diurnal_path).collect();
    if fits.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\ndiurnal fits |a|·sin(x + b) + c, x the time of day in radians (UTC):"
    );
    let mut rows = Vec::new();
    for s in fits {
        let sc = s.scale();
        rows.push(Err(format!(
            "  {} {} {}",
            clean(&s.target),
            series_name(s),
            sc.name
        )));
        for (part, f) in [
            ("weekdays", s.diurnal.weekdays),
            ("weekends", s.diurnal.weekends),
        ] {
            if let Some(f) = f {
                rows.push(Ok(vec![
                    part.to_string(),
                    pm(&sc, f.a, f.delta_a),
                    format!("{:.3} ± {:.3}", f.b, f.delta_b),
                    pm(&sc, f.c, f.delta_c),
                    peak(&f),
                    f.n.to_string(),
                    if f.is_diurnal() { "diurnal" } else { "" }.into(),
                ]));
            }
        }
    }
    table(out, &["", "a", "b ± δb", "c", "peak", "points"], 1, &rows);
}

/// The report as text. `empty` is what to say of a report without records, which only the
/// caller knows: its inputs and the filters it was given (`records.ndjson: no records`).
pub fn render(r: &Report, empty: &str) -> String {
    let mut out = String::new();
    let span = match (r.from_ms, r.to_ms) {
        (Some(a), Some(b)) => format!(" from {} to {}", datetime(a as i64), datetime(b as i64)),
        _ => String::new(),
    };
    out.push_str(&format!("{} records{span}\n\n", r.records));
    if r.series.is_empty() {
        if r.records == 0 {
            out.push_str(empty);
            out.push('\n');
        } else {
            out.push_str("no active measurements to analyse (only passive records)\n");
        }
    } else {
        now(&mut out, r);
        series_tables(&mut out, r);
        diurnal(&mut out, r);
    }
    for ap in &r.active_passive {
        out.push('\n');
        wrap(
            &mut out,
            "",
            &format!(
                "active {} against passive throughput, {} ({} transfers of captured flows \
                 matched, {} passive records unmatched):",
                ap.active_metric.name(),
                clean(&ap.target),
                ap.pairs.len(),
                ap.unmatched_passive
            ),
            2,
        );
        for (i, m) in ap.methods.iter().enumerate() {
            if let Some(a) = m {
                out.push_str(&format!(
                    "  method {}: err median {}, mean {}, R {}, n {}\n",
                    i + 1,
                    pct(Some(a.err_median)),
                    pct(Some(a.err_mean)),
                    a.r.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".into()),
                    a.n
                ));
            }
        }
        if let Some(a) = ap.recorded {
            out.push_str(&format!(
                "  passive records without their flows' times, as recorded: err median {}, R {}, \
                 n {}\n",
                pct(Some(a.err_median)),
                a.r.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".into()),
                a.n
            ));
        }
    }
    if !r.passive_alone.is_empty() {
        let hosts: Vec<String> = r
            .passive_alone
            .iter()
            .map(|(h, n)| format!("{} ({n})", clean(h)))
            .collect();
        out.push('\n');
        wrap(
            &mut out,
            "",
            &format!(
                "passive records (source pcap) with no active throughput to the same service to \
                 compare them with, left out: {}; `nowcast forecast FILE --source pcap` \
                 forecasts them",
                hosts.join(", ")
            ),
            2,
        );
    }
    for w in &r.windows {
        let m = w.rows.iter().map(|r| r.median.abs()).fold(0.0, f64::max);
        let sc = Scale::of(w.metric.unit(), m);
        out.push_str(&format!(
            "\nwindows and streams, {} {} ({}):\n",
            clean(&w.target),
            w.metric.name(),
            sc.name
        ));
        out.push_str(&format!(
            "  {:>7} {:>7} {:>5} {:>7} {:>7}\n",
            "window", "streams", "n", "median", "mean"
        ));
        for row in &w.rows {
            out.push_str(&format!(
                "  {:>7} {:>7} {:>5} {:>7} {:>7}{}\n",
                row.window_bytes
                    .map(bytes_short)
                    .unwrap_or_else(|| "default".into()),
                row.streams,
                row.n,
                sc.num(row.median),
                sc.num(row.mean),
                if row.chosen {
                    "  ← fewest streams within 80 % of best"
                } else {
                    ""
                }
            ));
        }
    }
    if !r.runs.is_empty() {
        out.push_str("\nruns of the campaign, slots by outcome:\n");
        let mut head = vec!["job"];
        head.extend(Outcome::ALL.iter().map(|o| o.name()));
        let rows: Vec<Result<Vec<String>, String>> = r
            .runs
            .iter()
            .map(|j| {
                let mut row = vec![clean(&j.job)];
                row.extend(j.counts.iter().map(|c| c.to_string()));
                Ok(row)
            })
            .collect();
        table(&mut out, &head, 1, &rows);
        let problems: Vec<_> = r
            .runs
            .iter()
            .filter_map(|j| j.last_problem.as_ref().map(|p| (j, p)))
            .collect();
        if !problems.is_empty() {
            out.push_str("last problems:\n");
            for (j, p) in problems {
                wrap(&mut out, &format!("  {}:", clean(&j.job)), &clean(p), 4);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_drive_the_terminal_and_percentages_are_never_negative_zero() {
        assert_eq!(clean("a\u{1b}[2Jb\u{7}"), "a\\u{1b}[2Jb\\u{7}");
        assert_eq!(clean("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(clean("mirror.example.org:8060"), "mirror.example.org:8060");
        assert_eq!(pct(Some(-0.00001)), "0.0%");
        assert_eq!(pct(Some(-0.02)), "-2.0%");
        assert_eq!(pct(None), "-");
        let mut s = String::new();
        wrap(&mut s, "  job:", &"word ".repeat(40), 4);
        assert!(s.lines().all(|l| l.chars().count() <= WIDTH), "{s}");
        assert!(s.lines().skip(1).all(|l| l.starts_with("    w")), "{s}");
    }
}
