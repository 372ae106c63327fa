//! The report as tables for a terminal.
//!
//! Deterministic core: a [`Report`] in, text out.

use super::analysis::Report;
use crate::campaign::runlog::Outcome;
use crate::format::number;
use crate::when::datetime;

/// A byte count as `64K`, `1M`, `1536` (powers of 1024 when exact).
pub fn bytes(n: u64) -> String {
    for (unit, size) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if n >= size && n % size == 0 {
            return format!("{}{unit}", n / size);
        }
    }
    n.to_string()
}

fn opt(v: Option<f64>) -> String {
    v.map(number).unwrap_or_else(|| "-".into())
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "-".into())
}

pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let span = match (r.from_ms, r.to_ms) {
        (Some(a), Some(b)) => format!(" from {} to {}", datetime(a as i64), datetime(b as i64)),
        _ => String::new(),
    };
    out.push_str(&format!("{} records{span}\n\n", r.records));
    out.push_str(&format!(
        "{:<28} {:<22} {:>6} {:>5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10}  {}\n",
        "target",
        "metric",
        "ok",
        "t/o+e",
        "median",
        "mean",
        "next",
        "err m5",
        "err ewma",
        "err nws",
        "δb wd/we",
        "diurnal"
    ));
    for s in &r.series {
        let m = s.stats.as_ref();
        let db = |f: Option<nowcast_core::iepm::DiurnalFit>| {
            f.map(|f| format!("{:.2}", f.delta_b))
                .unwrap_or_else(|| "-".into())
        };
        out.push_str(&format!(
            "{:<28} {:<22} {:>6} {:>5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10}  {}\n",
            s.target,
            format!("{} {}", s.metric.name(), s.unit),
            s.ok,
            s.timeouts + s.errors,
            opt(m.map(|m| m.median)),
            opt(m.map(|m| m.mean)),
            opt(s.forecasts[0].next),
            pct(s.forecasts[0].relative_error),
            pct(s.forecasts[1].relative_error),
            pct(s.forecasts[2].relative_error),
            format!("{}/{}", db(s.diurnal.weekdays), db(s.diurnal.weekends)),
            if s.diurnal_path { "yes" } else { "" }
        ));
    }
    let fits: Vec<_> = r.series.iter().filter(|s| s.diurnal_path).collect();
    if !fits.is_empty() {
        out.push_str("\ndiurnal fits |a|·sin(x + b) + c (x: time of day in radians, UTC):\n");
        for s in fits {
            for (part, f) in [
                ("weekdays", s.diurnal.weekdays),
                ("weekends", s.diurnal.weekends),
            ] {
                if let Some(f) = f {
                    out.push_str(&format!(
                        "  {} {} {part}: a {} ± {}, b {:.3} ± {:.3}, c {} ± {}, {} points{}\n",
                        s.target,
                        s.metric.name(),
                        number(f.a),
                        number(f.delta_a),
                        f.b,
                        f.delta_b,
                        number(f.c),
                        number(f.delta_c),
                        f.n,
                        if f.is_diurnal() { " (diurnal)" } else { "" }
                    ));
                }
            }
        }
    }
    for ap in &r.active_passive {
        out.push_str(&format!(
            "\nactive {} against passive throughput, {} ({} transfers matched, {} passive unmatched):\n",
            ap.active_metric.name(),
            ap.target,
            ap.pairs.len(),
            ap.unmatched_passive
        ));
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
                "  as recorded: err median {}, R {}, n {}\n",
                pct(Some(a.err_median)),
                a.r.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".into()),
                a.n
            ));
        }
    }
    for w in &r.windows {
        out.push_str(&format!(
            "\nwindows and streams, {} {}:\n",
            w.target,
            w.metric.name()
        ));
        out.push_str(&format!(
            "  {:>8} {:>7} {:>4} {:>9} {:>9}\n",
            "window", "streams", "n", "median", "mean"
        ));
        for row in &w.rows {
            out.push_str(&format!(
                "  {:>8} {:>7} {:>4} {:>9} {:>9}{}\n",
                row.window_bytes
                    .map(bytes)
                    .unwrap_or_else(|| "default".into()),
                row.streams,
                row.n,
                number(row.median),
                number(row.mean),
                if row.chosen {
                    "  ← fewest streams within 80 % of the best"
                } else {
                    ""
                }
            ));
        }
    }
    if !r.runs.is_empty() {
        out.push_str(&format!(
            "\nruns: {:<26} {}\n",
            "job",
            Outcome::ALL
                .iter()
                .map(|o| format!(" {:>7}", o.name()))
                .collect::<String>()
        ));
        for j in &r.runs {
            out.push_str(&format!(
                "      {:<26} {}{}\n",
                j.job,
                j.counts
                    .iter()
                    .map(|c| format!(" {c:>7}"))
                    .collect::<String>(),
                j.last_problem
                    .as_ref()
                    .map(|p| format!("  last: {p}"))
                    .unwrap_or_default()
            ));
        }
    }
    out
}
