//! The report as one self-contained HTML file: inline CSS and SVG, no script and no
//! network access needed to open it. An overview table first (every target and metric with
//! its latest level, forecast errors and diurnal flag), then a card per series with the
//! time series and its forecasts, the histogram and the diurnal fit, then active against
//! passive throughput, the window/streams tables and the run log.
//!
//! Deterministic core: a [`Report`] in, HTML out.

use super::analysis::{Report, SeriesReport};
use super::svg::{bars, esc, plot, Layer, Ticks};
use super::text::bytes;
use crate::campaign::runlog::Outcome;
use crate::format::number;
use crate::when::datetime;
use nowcast_core::iepm::{is_weekend, time_of_day, DiurnalFit};
use std::fmt::Write as _;

const CSS: &str = r#"
:root{--bg:#fbfbfd;--fg:#1d2330;--mut:#667085;--card:#fff;--line:#e4e7ec;--acc:#2563eb;--warn:#b42318;--ok:#067647}
@media (prefers-color-scheme:dark){:root{--bg:#111318;--fg:#e6e8ee;--mut:#98a2b3;--card:#1a1d24;--line:#2c313c;--acc:#7aa2ff;--warn:#ff8b7e;--ok:#5fd38d}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;background:var(--bg);color:var(--fg)}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}h3{font-size:15px;margin:0}
.sub{color:var(--mut);margin:0 0 18px}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:8px;overflow:hidden}
th,td{padding:6px 9px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{font-weight:600;color:var(--mut);background:color-mix(in srgb,var(--card) 92%,var(--fg))}
td:first-child,th:first-child,td.l,th.l{text-align:left}
tr:last-child td{border-bottom:0}
a{color:var(--acc);text-decoration:none}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px;margin:16px 0}
.head{display:flex;flex-wrap:wrap;gap:8px 18px;align-items:baseline;margin-bottom:8px}
.kv{color:var(--mut)}.kv b{color:var(--fg);font-weight:600}
.badge{display:inline-block;border-radius:99px;padding:1px 8px;font-size:12px;font-weight:600}
.diurnal{background:color-mix(in srgb,var(--acc) 18%,transparent);color:var(--acc)}
.bad{background:color-mix(in srgb,var(--warn) 16%,transparent);color:var(--warn)}
.good{background:color-mix(in srgb,var(--ok) 16%,transparent);color:var(--ok)}
.plots{display:flex;flex-wrap:wrap;gap:10px}
svg.plot{max-width:100%;height:auto;background:var(--card)}
svg .t{font-size:12px;font-weight:600;fill:var(--fg)}svg .yl{font-size:10px;fill:var(--mut);text-anchor:end}
svg .xl{font-size:10px;fill:var(--mut);text-anchor:middle}svg .al{font-size:10px;fill:var(--mut);text-anchor:middle}
svg .lg{font-size:10px;fill:var(--fg)}svg .grid{stroke:var(--line);stroke-width:1}svg .frame{fill:none;stroke:var(--line)}
.small{font-size:12px;color:var(--mut)}tr.chosen td{font-weight:700;color:var(--ok)}
.wrap{overflow-x:auto}.wrap th,.wrap td{padding:5px 7px;font-size:13px}.plots table{align-self:flex-start;width:auto}
"#;

const VALUE: &str = "#2563eb";
const MEAN5: &str = "#f59e0b";
const EWMA: &str = "#10b981";
const NWS: &str = "#a855f7";
const WEEKEND: &str = "#ef4444";

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.1} %", v * 100.0))
        .unwrap_or_else(|| "–".into())
}

fn opt(v: Option<f64>) -> String {
    v.map(number).unwrap_or_else(|| "–".into())
}

fn anchor(s: &SeriesReport) -> String {
    let mut a: String = format!("{}-{}", s.target, s.metric.name())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    a.insert_str(0, "s-");
    a
}

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = vals
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.06).max(hi.abs() * 0.01).max(1e-9);
    (
        if lo >= 0.0 {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        },
        hi + pad,
    )
}

fn fit_curve(f: &DiurnalFit) -> Vec<(f64, f64)> {
    (0..=96)
        .map(|i| {
            let x = i as f64 / 96.0 * std::f64::consts::TAU;
            (x, f.at(x))
        })
        .collect()
}

fn series_card(s: &SeriesReport) -> String {
    let mut h = String::new();
    let unit = s.unit;
    let _ = write!(
        h,
        r#"<section class="card" id="{}"><div class="head"><h3>{} · {}</h3>"#,
        anchor(s),
        esc(&s.target),
        esc(s.metric.name())
    );
    let _ = write!(
        h,
        r#"<span class="kv">sources <b>{}</b></span><span class="kv">ok <b>{}</b></span>"#,
        esc(&s.sources.join(", ")),
        s.ok
    );
    if s.timeouts + s.errors > 0 {
        let _ = write!(
            h,
            r#"<span class="badge bad">{} timeouts · {} errors</span>"#,
            s.timeouts, s.errors
        );
    }
    if s.diurnal_path {
        h.push_str(r#"<span class="badge diurnal">diurnal (δb &lt; 0.2)</span>"#);
    }
    h.push_str("</div>");
    if let Some(st) = &s.stats {
        let _ = write!(
            h,
            r#"<div class="head small"><span class="kv">median <b>{} {unit}</b></span><span class="kv">mean <b>{}</b> ± {}</span><span class="kv">IQR <b>{} – {}</b></span><span class="kv">range {} – {}</span></div>"#,
            number(st.median),
            number(st.mean),
            number(st.sd),
            number(st.p25),
            number(st.p75),
            number(st.min),
            number(st.max)
        );
    }
    h.push_str(r#"<div class="plots">"#);
    if !s.points.is_empty() {
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.t, p.v)).collect();
        let m5: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| p.mean5.map(|m| (p.t, m)))
            .collect();
        let band: Vec<(f64, f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| Some((p.t, p.mean5? - p.sd5?, p.mean5? + p.sd5?)))
            .collect();
        let ew: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| p.ewma.map(|m| (p.t, m)))
            .collect();
        let nws: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| p.nws.map(|m| (p.t, m)))
            .collect();
        let x = (pts[0].0, pts[pts.len() - 1].0);
        let y = range(
            pts.iter()
                .map(|p| p.1)
                .chain(band.iter().flat_map(|b| [b.1, b.2])),
        );
        let r = if pts.len() > 2000 { 1.2 } else { 2.2 };
        h.push_str(&plot(
            760.0,
            260.0,
            x,
            y,
            Ticks::Time,
            unit,
            &[
                Layer::Band {
                    xyy: &band,
                    color: MEAN5,
                    label: "",
                },
                Layer::Points {
                    xy: &pts,
                    color: VALUE,
                    r,
                    label: "measured",
                },
                Layer::Line {
                    xy: &m5,
                    color: MEAN5,
                    dash: false,
                    label: "mean of last 5 ± sd",
                },
                Layer::Line {
                    xy: &ew,
                    color: EWMA,
                    dash: true,
                    label: "EWMA 0.7",
                },
                Layer::Line {
                    xy: &nws,
                    color: NWS,
                    dash: true,
                    label: "NWS bank",
                },
            ],
            "time series and the forecast made before each value (UTC)",
        ));
    }
    if let Some(hist) = &s.histogram {
        h.push_str(&bars(
            360.0,
            260.0,
            hist.min,
            hist.max,
            &hist.counts,
            VALUE,
            unit,
            "histogram",
        ));
    }
    if s.diurnal.weekdays.is_some() || s.diurnal.weekends.is_some() {
        let wd: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| !is_weekend(p.t))
            .map(|p| (time_of_day(p.t), p.v))
            .collect();
        let we: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| is_weekend(p.t))
            .map(|p| (time_of_day(p.t), p.v))
            .collect();
        let cwd = s
            .diurnal
            .weekdays
            .as_ref()
            .map(fit_curve)
            .unwrap_or_default();
        let cwe = s
            .diurnal
            .weekends
            .as_ref()
            .map(fit_curve)
            .unwrap_or_default();
        let y = range(wd.iter().chain(&we).map(|p| p.1));
        h.push_str(&plot(
            560.0,
            260.0,
            (0.0, std::f64::consts::TAU),
            y,
            Ticks::DayRadians,
            unit,
            &[
                Layer::Points {
                    xy: &wd,
                    color: VALUE,
                    r: 1.8,
                    label: "weekdays",
                },
                Layer::Points {
                    xy: &we,
                    color: WEEKEND,
                    r: 1.8,
                    label: "weekends",
                },
                Layer::Line {
                    xy: &cwd,
                    color: "#1e3a8a",
                    dash: false,
                    label: "fit",
                },
                Layer::Line {
                    xy: &cwe,
                    color: "#7f1d1d",
                    dash: true,
                    label: "",
                },
            ],
            "by time of day (UTC): |a|·sin(x + b) + c",
        ));
    }
    h.push_str("</div>");
    h.push_str(r#"<table style="margin-top:10px"><tr><th class="l">forecaster</th><th>next value</th><th>spread</th><th>relative error</th><th>scored</th></tr>"#);
    for f in &s.forecasts {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(f.name),
            opt(f.next),
            opt(f.spread),
            pct(f.relative_error),
            f.n
        );
    }
    h.push_str("</table>");
    let fits: Vec<(&str, &DiurnalFit)> = [
        ("weekdays", s.diurnal.weekdays.as_ref()),
        ("weekends", s.diurnal.weekends.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, f)| f.map(|f| (n, f)))
    .collect();
    if !fits.is_empty() {
        h.push_str(r#"<table style="margin-top:10px"><tr><th class="l">diurnal fit</th><th>a</th><th>b (rad)</th><th>peak (UTC)</th><th>c</th><th>δb</th><th>rms</th><th>points</th></tr>"#);
        for (n, f) in fits {
            // The peak of sin(x + b) is at x = π/2 − b.
            let peak = (std::f64::consts::FRAC_PI_2 - f.b).rem_euclid(std::f64::consts::TAU)
                / std::f64::consts::TAU
                * 24.0;
            let _ = write!(
                h,
                r#"<tr><td>{n}</td><td>{} ± {}</td><td>{:.3}</td><td>{:02}:{:02}</td><td>{} ± {}</td><td><span class="badge {}">{:.3}</span></td><td>{}</td><td>{}</td></tr>"#,
                number(f.a),
                number(f.delta_a),
                f.b,
                peak.floor() as u32,
                ((peak.fract()) * 60.0) as u32,
                number(f.c),
                number(f.delta_c),
                if f.is_diurnal() { "diurnal" } else { "good" },
                f.delta_b,
                number(f.rms),
                f.n
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>");
    h
}

/// The whole HTML document.
pub fn render(r: &Report, title: &str) -> String {
    let mut h = String::with_capacity(1 << 20);
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>{}</title><style>{CSS}</style></head><body><main>"#,
        esc(title)
    );
    let span = match (r.from_ms, r.to_ms) {
        (Some(a), Some(b)) => format!("{} → {}", datetime(a as i64), datetime(b as i64)),
        _ => "no records".into(),
    };
    let diurnal = r.series.iter().filter(|s| s.diurnal_path).count();
    let _ = write!(
        h,
        r#"<h1>{}</h1><p class="sub">{} records · {} series · {} · {} diurnal path{}</p>"#,
        esc(title),
        r.records,
        r.series.len(),
        span,
        diurnal,
        if diurnal == 1 { "" } else { "s" }
    );
    h.push_str(r#"<h2>Overview</h2><div class="wrap"><table><tr><th class="l">target</th><th class="l">metric</th><th>ok</th><th>timeouts · errors</th><th>median</th><th>next (mean of 5)</th><th>err mean of 5</th><th>err EWMA</th><th>err NWS</th><th>δb weekdays</th><th>δb weekends</th></tr>"#);
    for s in &r.series {
        let db = |f: Option<DiurnalFit>| {
            f.map(|f| {
                format!(
                    r#"<span class="badge {}">{:.2}</span>"#,
                    if f.is_diurnal() { "diurnal" } else { "good" },
                    f.delta_b
                )
            })
            .unwrap_or_else(|| "–".into())
        };
        let _ = write!(
            h,
            r##"<tr><td><a href="#{}">{}</a></td><td class="l">{} <span class="small">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"##,
            anchor(s),
            esc(&s.target),
            s.metric.name(),
            s.unit,
            s.ok,
            if s.timeouts + s.errors > 0 {
                format!(
                    r#"<span class="badge bad">{} · {}</span>"#,
                    s.timeouts, s.errors
                )
            } else {
                "–".into()
            },
            opt(s.stats.as_ref().map(|x| x.median)),
            opt(s.forecasts[0].next),
            pct(s.forecasts[0].relative_error),
            pct(s.forecasts[1].relative_error),
            pct(s.forecasts[2].relative_error),
            db(s.diurnal.weekdays),
            db(s.diurnal.weekends)
        );
    }
    h.push_str("</table></div>");
    h.push_str(r#"<p class="small">Relative error: average(|forecast − observed| / observed) of the forecast made before each value (IEPM-BW §III.G). δb: the standard error of the phase b of the fit |a|·sin(x + b) + c over the time of day; below 0.2 the path has a strong daily cycle (§III.H).</p>"#);
    if !r.active_passive.is_empty() {
        h.push_str(r#"<h2>Active against passive throughput</h2><p class="small">Passive flows (source pcap) starting within 5 s of each other form one transfer, matched to the nearest active run; err = (passive − active) / passive, R the correlation (IEPM-BW §III.I). Methods: 1 = Σ bytes/time per stream, 2 = Σ bytes / mean stream time, 3 = Σ bytes / longest stream time (§III.J).</p>"#);
        for ap in &r.active_passive {
            let _ = write!(
                h,
                r#"<section class="card"><div class="head"><h3>{} · active {}</h3><span class="kv">matched <b>{}</b></span><span class="kv">unmatched passive <b>{}</b></span></div><div class="plots">"#,
                esc(&ap.target),
                ap.active_metric.name(),
                ap.pairs.len(),
                ap.unmatched_passive
            );
            let colors = [VALUE, MEAN5, EWMA];
            let sets: Vec<Vec<(f64, f64)>> = (0..3)
                .map(|k| ap.pairs.iter().map(|p| (p.1, p.2[k])).collect())
                .collect();
            let (lo, hi) = range(ap.pairs.iter().flat_map(|p| [p.1, p.2[0], p.2[1], p.2[2]]));
            let diag = [(lo, lo), (hi, hi)];
            h.push_str(&plot(
                420.0,
                320.0,
                (lo, hi),
                (lo, hi),
                Ticks::Number,
                "passive Mbit/s",
                &[
                    Layer::Line {
                        xy: &diag,
                        color: "#98a2b3",
                        dash: true,
                        label: "passive = active",
                    },
                    Layer::Points {
                        xy: &sets[0],
                        color: colors[0],
                        r: 2.5,
                        label: "method 1",
                    },
                    Layer::Points {
                        xy: &sets[1],
                        color: colors[1],
                        r: 2.5,
                        label: "2",
                    },
                    Layer::Points {
                        xy: &sets[2],
                        color: colors[2],
                        r: 2.5,
                        label: "3",
                    },
                ],
                "passive (y) against active (x), Mbit/s",
            ));
            h.push_str(r#"<table style="max-width:560px"><tr><th class="l">method</th><th>n</th><th>err median</th><th>err mean</th><th>R</th></tr>"#);
            let rows = ap
                .methods
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("{}", i + 1), m))
                .chain(std::iter::once(("as recorded".to_string(), &ap.recorded)));
            for (name, m) in rows {
                if let Some(a) = m {
                    let _ = write!(
                        h,
                        "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        a.n,
                        pct(Some(a.err_median)),
                        pct(Some(a.err_mean)),
                        a.r.map(|r| format!("{r:.3}")).unwrap_or_else(|| "–".into())
                    );
                }
            }
            h.push_str("</table></div></section>");
        }
    }
    if !r.windows.is_empty() {
        h.push_str(r#"<h2>Windows and streams</h2><p class="small">The setting chosen is the one with the fewest streams that reaches 80 % of the best median throughput (IEPM-BW §III.D).</p>"#);
        for w in &r.windows {
            let _ = write!(
                h,
                r#"<section class="card"><h3>{} · {}</h3><table style="margin-top:8px"><tr><th class="l">window</th><th>streams</th><th>runs</th><th>median</th><th>mean</th></tr>"#,
                esc(&w.target),
                w.metric.name()
            );
            for row in &w.rows {
                let _ = write!(
                    h,
                    r#"<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                    if row.chosen { r#" class="chosen""# } else { "" },
                    row.window_bytes
                        .map(bytes)
                        .unwrap_or_else(|| "default".into()),
                    row.streams,
                    row.n,
                    number(row.median),
                    number(row.mean)
                );
            }
            h.push_str("</table></section>");
        }
    }
    h.push_str(r#"<h2>Time series</h2>"#);
    for s in &r.series {
        h.push_str(&series_card(s));
    }
    if !r.runs.is_empty() {
        h.push_str(r#"<h2>Runs</h2><table><tr><th class="l">job</th>"#);
        for o in Outcome::ALL {
            let _ = write!(h, "<th>{}</th>", o.name());
        }
        h.push_str(r#"<th class="l">last problem</th></tr>"#);
        for j in &r.runs {
            let _ = write!(h, "<tr><td>{}</td>", esc(&j.job));
            for c in j.counts {
                let _ = write!(h, "<td>{c}</td>");
            }
            let _ = write!(
                h,
                r#"<td class="l small">{}</td></tr>"#,
                esc(j.last_problem.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</table>");
    }
    h.push_str(
        r#"<p class="small">Made by nowcast report. Times are UTC.</p></main></body></html>"#,
    );
    h
}
