//! The report as one self-contained HTML file: inline CSS and SVG, no script and no
//! network access needed to open it. What to expect now first (the targets failing now,
//! and per metric the best and worst target by the forecast of its next value with its
//! range), an overview table (every series with its level, forecast, forecast errors and
//! diurnal flag), then a card per series with the time series, its forecasts and failed
//! probes, the histogram and the diurnal fit, then active against passive throughput, the
//! window/streams tables and the run log. Values are shown as every table of nowcast shows
//! them (`format::Scale`: rates scaled, loss in percent); every table scrolls within
//! itself on a narrow screen; colours follow the reader's dark mode; what is missing is
//! said, not left blank.
//!
//! Deterministic core: a [`Report`] in, HTML out.

use super::analysis::{failing_targets, Report, SeriesReport, MIN_RANKED};
use super::svg::{bars, esc, plot, same_value_pad, Layer, Ticks};
use super::text::{next_band, next_range, peak, pm};
use crate::format::bytes_short;
use crate::format::{count, scaled, Scale, BAND_K};
use crate::runlog::Outcome;
use crate::when::{datetime, DAY, HOUR, MINUTE};
use nowcast_core::iepm::{is_weekend, time_of_day, DiurnalFit};
use nowcast_core::record::Status;
use std::fmt::Write as _;

const CSS: &str = r#"
:root{color-scheme:light dark;--bg:#fbfbfd;--fg:#1d2330;--mut:#667085;--card:#fff;--line:#e4e7ec;--acc:#2563eb;--warn:#b42318;--ok:#067647;--head:#f2f3f6;--fitwd:#1e3a8a;--fitwe:#7f1d1d}
@media (prefers-color-scheme:dark){:root{--bg:#111318;--fg:#e6e8ee;--mut:#98a2b3;--card:#1a1d24;--line:#2c313c;--acc:#7aa2ff;--warn:#ff8b7e;--ok:#5fd38d;--head:#22262e;--fitwd:#bfdbfe;--fitwe:#fecaca}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;background:var(--bg);color:var(--fg)}
main{max-width:1280px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}h3{font-size:15px;margin:0;overflow-wrap:anywhere}
.sub{color:var(--mut);margin:0 0 18px}.nw{white-space:nowrap}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{padding:6px 9px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{font-weight:600;color:var(--mut);background:var(--head)}
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
figure.fig{margin:0;max-width:100%;background:var(--card)}figure.fig figcaption{font-size:13px;font-weight:600;margin:0 0 2px}
svg.plot{display:block;width:100%;height:auto}
svg .yl{font-size:10px;fill:var(--mut);text-anchor:end}
svg .xl{font-size:10px;fill:var(--mut);text-anchor:middle}svg .al{font-size:10px;fill:var(--mut);text-anchor:middle}
svg .grid{stroke:var(--line);stroke-width:1}svg .frame{fill:none;stroke:var(--line)}
.legend{display:flex;flex-wrap:wrap;gap:2px 12px;font-size:12px;margin:2px 0 0}.legend span{display:inline-flex;align-items:center;gap:4px}
.small{font-size:12px;color:var(--mut)}tr.chosen td{font-weight:700;color:var(--ok)}
.wrap{overflow-x:auto;background:var(--card);border:1px solid var(--line);border-radius:8px;margin-top:10px}.plots .wrap{align-self:flex-start;margin-top:0}
.wrap th,.wrap td{padding:5px 7px;font-size:13px}
.sticky td:first-child,.sticky th:first-child{position:sticky;left:0;z-index:1;box-shadow:1px 0 0 var(--line)}
.sticky td:first-child{background:var(--card);white-space:normal;overflow-wrap:anywhere;min-width:9em;max-width:20em}
.now{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:10px}
.standing{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 14px}.standing h3{margin-bottom:6px}
.rank{display:grid;grid-template-columns:4.2em 1fr;column-gap:8px;margin:4px 0}.rank .lab{color:var(--mut);grid-row:span 2}.rank .who{overflow-wrap:anywhere}.rank .val b{font-size:15px}
.alert{border:1px solid color-mix(in srgb,var(--warn) 45%,transparent);background:color-mix(in srgb,var(--warn) 8%,var(--card));border-radius:10px;padding:10px 14px;margin:10px 0}
.alert h3{color:var(--warn);margin-bottom:4px}.alert ul{margin:0;padding-left:18px}.alert li{margin:4px 0;overflow-wrap:anywhere}
.note{color:var(--mut);font-size:13px;margin:8px 0 0}
@media (max-width:640px){main{padding:12px}.card{padding:10px}h1{font-size:19px}.now{grid-template-columns:1fr}.sticky td:first-child{white-space:normal;overflow-wrap:break-word;max-width:13.5em}svg .yl,svg .xl,svg .al{font-size:calc(10px * max(1, var(--k)))}}
"#;

/// A series' plot over time: its width as drawn, and on a phone, where it scrolls within its
/// figure rather than shrink to a band a third of the screen tall.
const TIME_W: f64 = 760.0;
const PHONE_TIME_W: f64 = 560.0;

const VALUE: &str = "#2563eb";
const MEAN5: &str = "#f59e0b";
const EWMA: &str = "#10b981";
const NWS: &str = "#a855f7";
const WEEKEND: &str = "#ef4444";
const FAILED: &str = "var(--warn)";

fn pct(v: Option<f64>) -> String {
    match v {
        Some(_) => super::text::pct(v).replace('%', " %"),
        None => "–".into(),
    }
}

fn opt(v: Option<f64>, s: &Scale) -> String {
    v.map(|v| s.num(v)).unwrap_or_else(|| "–".into())
}

fn anchor(s: &SeriesReport) -> String {
    let mut a: String = format!("{}-{}-{}", s.target, s.metric.name(), s.source())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    a.insert_str(0, "s-");
    a
}

/// A duration in its largest whole unit: `40 s`, `4 min`, `12 h`, `27 days`.
fn duration(ms: f64) -> String {
    let ms = ms.max(0.0) as i64;
    if ms < 2 * MINUTE {
        format!("{} s", ms / 1000)
    } else if ms < 2 * HOUR {
        format!("{} min", ms / MINUTE)
    } else if ms < 2 * DAY {
        format!("{} h", ms / HOUR)
    } else {
        format!("{} days", ms / DAY)
    }
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
    // One value only (a loss of 0 % throughout, say): an axis around it, not 1e-9 wide.
    let pad = if hi > lo {
        ((hi - lo) * 0.06).max(hi.abs() * 0.01)
    } else {
        same_value_pad(hi)
    };
    (
        if lo >= 0.0 {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        },
        hi + pad,
    )
}

fn fit_curve(f: &DiurnalFit, k: f64) -> Vec<(f64, f64)> {
    (0..=96)
        .map(|i| {
            let x = i as f64 / 96.0 * std::f64::consts::TAU;
            (x, f.at(x) * k)
        })
        .collect()
}

/// What failed, for a series' heading: `156 timeouts · 150 errors (23 %)`, and the
/// campaign's slots that did not run.
fn failed_badge(s: &SeriesReport) -> String {
    let failed = s.timeouts + s.errors;
    let mut out = String::new();
    if failed > 0 {
        out = format!(
            r#"<span class="badge bad" title="records that failed, of all the series' records">{} · {} ({})</span>"#,
            count(s.timeouts, "timeout"),
            count(s.errors, "error"),
            pct(Some(failed as f64 / (failed + s.ok) as f64))
        );
    }
    if s.not_run > 0 {
        let _ = write!(out, " {}", not_run_badge(s.not_run));
    }
    out
}

/// The campaign's slots of a series that did not run: no failures of the path.
fn not_run_badge(n: u64) -> String {
    format!(
        r#"<span class="badge" title="slots the campaign skipped or missed, or cut off when it stopped: not failures of the path (the run log says why)">{} not run</span>"#,
        n
    )
}

/// Why a series without a daily-cycle fit has none.
fn no_fit(part: &str, n: usize) -> String {
    format!(
        "{part}: no fit ({}; it needs at least 4, in at least {} of the day's 24 hours, UTC)",
        count(n as u64, "value"),
        nowcast_core::iepm::DIURNAL_MIN_HOURS
    )
}

fn series_card(s: &SeriesReport) -> String {
    let mut h = String::new();
    let sc = s.scale();
    let k = sc.factor;
    let unit = sc.name;
    let _ = write!(
        h,
        r#"<section class="card" id="{}"><div class="head"><h3>{} · {}</h3>"#,
        anchor(s),
        esc(&s.target),
        esc(s.metric.name())
    );
    let _ = write!(
        h,
        r#"<span class="kv">source <b>{}</b></span><span class="kv">ok <b>{}</b></span>{}"#,
        esc(s.source()),
        s.ok,
        failed_badge(s)
    );
    if s.diurnal_path {
        h.push_str(r#"<span class="badge diurnal">diurnal (δb &lt; 0.2)</span>"#);
    }
    h.push_str("</div>");
    if let Some(st) = &s.stats {
        let _ = write!(
            h,
            r#"<div class="head small"><span class="kv">median <b>{} {unit}</b></span><span class="kv">mean ± sd <b>{}</b></span><span class="kv">IQR <b>{} – {}</b></span><span class="kv">range {} – {}</span>"#,
            sc.num(st.median),
            pm(&sc, st.mean, st.sd),
            sc.num(st.p25),
            sc.num(st.p75),
            sc.num(st.min),
            sc.num(st.max)
        );
        if let Some(n) = &s.next {
            let _ = write!(
                h,
                r#"<span class="kv">next <b>{}</b></span>"#,
                esc(&next_range(n, &sc))
            );
        }
        h.push_str("</div>");
    }
    if s.failing > 0 {
        let _ = write!(
            h,
            r#"<p class="note"><span class="badge bad">failing now</span> the newest {} failed{}{}: {}</p>"#,
            if s.failing == 1 {
                "record".to_string()
            } else {
                format!("{} records", s.failing)
            },
            s.failing_since_ms
                .map(|t| format!(" (since {})", datetime(t as i64)))
                .unwrap_or_default(),
            if s.ok == 0 {
                ", and none in this period was ok"
            } else {
                ""
            },
            esc(s.last_error.as_deref().unwrap_or("no reason recorded"))
        );
    }
    if s.points.is_empty() {
        let _ = write!(
            h,
            r#"<p class="note">No successful measurement in this period{}: no plot, statistics or forecast.</p>"#,
            match (s.first_ms, s.last_ms) {
                (Some(a), Some(b)) => format!(
                    ", {} from {} to {}",
                    [
                        (s.timeouts + s.errors, "failed record", ""),
                        (s.not_run, "slot", " not run")
                    ]
                    .iter()
                    .filter(|(n, _, _)| *n > 0)
                    .map(|(n, noun, tail)| count(*n, noun) + tail)
                    .collect::<Vec<_>>()
                    .join(" and "),
                    datetime(a as i64),
                    datetime(b as i64)
                ),
                _ => String::new(),
            }
        );
        h.push_str("</section>");
        return h;
    }
    h.push_str(r#"<div class="plots">"#);
    let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.t, p.v * k)).collect();
    let m5: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| p.mean5.map(|m| (p.t, m * k)))
        .collect();
    let band: Vec<(f64, f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| Some((p.t, (p.mean5? - p.sd5?) * k, (p.mean5? + p.sd5?) * k)))
        .collect();
    let ew: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| p.ewma.map(|m| (p.t, m * k)))
        .collect();
    let nws: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| p.nws.map(|m| (p.t, m * k)))
        .collect();
    // Failures within the plotted time (the points kept are the newest).
    let fails: Vec<f64> = s
        .failures
        .iter()
        .filter(|f| f.0 >= pts[0].0)
        .map(|f| f.0)
        .collect();
    let mut x = (
        pts[0].0,
        pts[pts.len() - 1]
            .0
            .max(fails.last().copied().unwrap_or(f64::MIN)),
    );
    if x.1 - x.0 < 10_000.0 {
        // Less than ten seconds (one moment, say): ten seconds around it, so that the time
        // axis has labels and the values do not stand in one upright line.
        let mid = (x.0 + x.1) / 2.0;
        x = (mid - 5_000.0, mid + 5_000.0);
    }
    let y = range(
        pts.iter()
            .map(|p| p.1)
            .chain(band.iter().flat_map(|b| [b.1, b.2])),
    );
    let r = if pts.len() > 2000 { 1.2 } else { 2.2 };
    let timeouts = s.failures.iter().filter(|f| f.1 == Status::Timeout).count();
    let fail_label = format!(
        "failed ({})",
        if timeouts == s.failures.len() {
            "timeout"
        } else if timeouts == 0 {
            "error"
        } else {
            "timeout or error"
        }
    );
    h.push_str(&plot(
        TIME_W,
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
            Layer::Marks {
                xs: &fails,
                color: FAILED,
                label: &fail_label,
            },
        ],
        &format!(
            "{} ({unit}) and the forecast made before each value, UTC",
            s.metric.name()
        ),
    ));
    if let Some(hist) = &s.histogram {
        h.push_str(&bars(
            360.0,
            260.0,
            hist.min * k,
            hist.max * k,
            &hist.counts,
            VALUE,
            unit,
            "histogram (values per bin)",
        ));
    }
    let wd: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter(|p| !is_weekend(p.t))
        .map(|p| (time_of_day(p.t), p.v * k))
        .collect();
    let we: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter(|p| is_weekend(p.t))
        .map(|p| (time_of_day(p.t), p.v * k))
        .collect();
    if s.diurnal.weekdays.is_some() || s.diurnal.weekends.is_some() {
        let cwd = s
            .diurnal
            .weekdays
            .as_ref()
            .map(|f| fit_curve(f, k))
            .unwrap_or_default();
        let cwe = s
            .diurnal
            .weekends
            .as_ref()
            .map(|f| fit_curve(f, k))
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
                    color: "var(--fitwd)",
                    dash: false,
                    label: "fit",
                },
                Layer::Line {
                    xy: &cwe,
                    color: "var(--fitwe)",
                    dash: true,
                    label: "",
                },
            ],
            "by time of day (UTC): |a|·sin(x + b) + c",
        ));
    }
    h.push_str("</div>");
    h.push_str(r#"<div class="wrap"><table><tr><th class="l">forecaster</th><th>next value</th><th>spread</th><th>relative error</th><th>scored</th></tr>"#);
    for f in &s.forecasts {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(f.name),
            opt(f.next, &sc),
            opt(f.spread, &sc),
            pct(f.relative_error),
            f.n
        );
    }
    let _ = write!(
        h,
        r#"</table></div><p class="note">Values in {unit}. Spread: the deviation of the last 5, and the RMSE of the bank's forecasts (the range shown above is the forecast ± {BAND_K}·RMSE).{}</p>"#,
        if s.ok < 2 {
            " A forecast is scored from the second value on: this series has one."
        } else {
            ""
        }
    );
    let fits: Vec<(&str, &DiurnalFit)> = [
        ("weekdays", s.diurnal.weekdays.as_ref()),
        ("weekends", s.diurnal.weekends.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, f)| f.map(|f| (n, f)))
    .collect();
    if !fits.is_empty() {
        let _ = write!(
            h,
            r#"<div class="wrap"><table><tr><th class="l">diurnal fit</th><th>a ({unit})</th><th>b (rad)</th><th>peak (UTC)</th><th>c ({unit})</th><th>δb</th><th>rms</th><th>points</th></tr>"#
        );
        for (n, f) in fits {
            let _ = write!(
                h,
                r#"<tr><td>{n}</td><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td><span class="badge {}">{:.3}</span></td><td>{}</td><td>{}</td></tr>"#,
                pm(&sc, f.a, f.delta_a),
                f.b,
                peak(f),
                pm(&sc, f.c, f.delta_c),
                if f.is_diurnal() { "diurnal" } else { "good" },
                f.delta_b,
                sc.num(f.rms),
                f.n
            );
        }
        h.push_str("</table></div>");
    }
    let missing: Vec<String> = [
        ("weekdays", s.diurnal.weekdays.is_none(), wd.len()),
        ("weekends", s.diurnal.weekends.is_none(), we.len()),
    ]
    .into_iter()
    .filter(|m| m.1)
    .map(|(part, _, n)| no_fit(part, n))
    .collect();
    if !missing.is_empty() {
        let _ = write!(
            h,
            r#"<p class="note">Daily cycle over {}: {}.</p>"#,
            duration(s.last_ms.unwrap_or(0.0) - s.first_ms.unwrap_or(0.0)),
            esc(&missing.join("; "))
        );
    }
    h.push_str("</section>");
    h
}

/// What to expect now: the targets failing now, and per metric and source the best and
/// the worst target by the forecast of the next value, with its range.
fn now(r: &Report) -> String {
    let mut h = String::new();
    let failing = failing_targets(&r.series);
    if !failing.is_empty() {
        let _ = write!(
            h,
            r#"<div class="alert"><h3>Failing now: {}</h3><ul>"#,
            count(failing.len() as u64, "target")
        );
        for f in &failing {
            let all = r.series.iter().filter(|s| s.target == f.target).count();
            let names: Vec<String> = f
                .series
                .iter()
                .map(|s| {
                    format!(
                        r##"<a href="#{}">{}</a> <span class="small">{}</span>"##,
                        anchor(s),
                        esc(s.metric.name()),
                        esc(s.source())
                    )
                })
                .collect();
            let names = if f.series.len() == all && all > 2 {
                format!("all its {all} series")
            } else {
                names.join(", ")
            };
            let _ = write!(
                h,
                r#"<li><b>{}</b> · {names}: the newest {} failed{}{}. The newest failure: {}</li>"#,
                esc(f.target),
                if f.failed == 1 {
                    "record".to_string()
                } else {
                    format!("{} records", f.failed)
                },
                f.since_ms
                    .map(|t| format!(r#" (since <span class="nw">{}</span>)"#, datetime(t as i64)))
                    .unwrap_or_default(),
                if f.never_ok {
                    ", none ok in this period"
                } else {
                    ""
                },
                esc(f.last_error.unwrap_or("no reason recorded"))
            );
        }
        h.push_str("</ul></div>");
    }
    if r.now.is_empty() {
        return h;
    }
    let link = |target: &str, g: &super::analysis::Standing| -> String {
        r.series
            .iter()
            .find(|s| s.target == target && s.metric == g.metric && s.source() == g.source)
            .map(|s| format!(r##"<a href="#{}">{}</a>"##, anchor(s), esc(target)))
            .unwrap_or_else(|| esc(target))
    };
    h.push_str(r#"<div class="now">"#);
    for g in &r.now {
        let unit = g.metric.unit();
        let line = |label: &str, x: &super::analysis::Ranked| -> String {
            // Each value in its series' scale, as iperf3 prints rates: 2.39 Gbit/s, 8.48 Mbit/s.
            let sc = r.scale_of(g, x);
            let range = match (x.next.low, x.next.high) {
                (Some(lo), Some(hi)) => format!("{}–{}", sc.num(lo), sc.num(hi)),
                _ => "range not known yet".into(),
            };
            format!(
                r#"<div class="rank"><span class="lab">{label}</span><span class="who">{}</span><span class="val"><b>{}</b> {} <span class="small">({range})</span>{}</span></div>"#,
                link(&x.target, g),
                sc.num(x.next.value),
                sc.name,
                if x.failing {
                    r#" <span class="badge bad">last probe failed</span>"#
                } else {
                    ""
                }
            )
        };
        let _ = write!(
            h,
            r#"<div class="standing"><h3>{} <span class="small">{} · {} · {}</span></h3>"#,
            esc(g.metric.name()),
            esc(&g.source),
            count((g.ranked.len() + g.unranked.len()) as u64, "target"),
            g.better()
        );
        // Best and worst among the targets that answer; those failing now after them.
        let answering = g.answering();
        if let (Some(best), Some(worst)) = (answering.first(), answering.last()) {
            if answering.len() == 1 {
                let alone = g.unranked.is_empty() && g.failing().is_empty();
                h.push_str(&line(if alone { "only" } else { "best" }, best));
            } else if scaled(best.next.value, unit) == scaled(worst.next.value, unit) {
                let _ = write!(
                    h,
                    r#"<div class="rank"><span class="lab">all</span><span class="val">about <b>{}</b></span></div>"#,
                    esc(&scaled(best.next.value, unit))
                );
            } else {
                h.push_str(&line("best", best));
                h.push_str(&line("worst", worst));
            }
        }
        for x in g.failing() {
            h.push_str(&line("failing", x));
        }
        if !g.unranked.is_empty() {
            let names: Vec<String> = g.unranked.iter().map(|x| link(&x.target, g)).collect();
            let _ = write!(
                h,
                r#"<p class="small">Not ranked yet (fewer than {MIN_RANKED} values): {}</p>"#,
                names.join(", ")
            );
        }
        h.push_str("</div>");
    }
    let _ = write!(
        h,
        r#"</div><p class="note">Each target's forecast of its next value (the NWS bank's MSE-selected forecast) with its likely range, the forecast ± {BAND_K}·RMSE of its forecasts so far; best and worst among the targets measured the same way (metric and source) that answer; a target whose newest record failed comes after them, marked.</p>"#
    );
    h
}

/// The whole HTML document.
pub fn render(r: &Report, title: &str) -> String {
    let mut h = String::with_capacity(1 << 20);
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="color-scheme" content="light dark"><title>{}</title><style>{CSS}{}</style></head><body><main>"#,
        esc(title),
        // On a phone a plot over time is drawn PHONE_TIME_W wide, to scroll within its
        // figure; its labels' --k follows (the SVG's width over 380, as drawn).
        format_args!(
            "@media (max-width:640px){{.fig.wide{{overflow-x:auto}}.fig.wide svg.plot{{width:{PHONE_TIME_W}px;max-width:none;--k:{:.3}!important}}}}",
            TIME_W / PHONE_TIME_W
        )
    );
    let span = match (r.from_ms, r.to_ms) {
        (Some(a), Some(b)) => format!(
            r#"<span class="nw">{}</span> → <span class="nw">{}</span> ({})"#,
            datetime(a as i64),
            datetime(b as i64),
            duration(b - a)
        ),
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
    if r.series.is_empty() {
        let _ = write!(
            h,
            r#"<p class="alert">{}</p>"#,
            if r.records == 0 {
                "No records: nothing in the archive or files given matched the filters (--since, --until, --target, --metric, --source). Check them, or the archive's path."
            } else {
                "No active measurements to analyse: the records are all passive (source pcap)."
            }
        );
    } else {
        h.push_str("<h2>Now</h2>");
        h.push_str(&now(r));
        h.push_str(r#"<h2>Overview</h2><div class="wrap"><table class="sticky"><tr><th class="l">target</th><th class="l">metric</th><th class="l">source</th><th>ok</th><th title="timeouts · errors, and their share of the records">t/o · errors</th><th>median</th><th>next ± 2·RMSE</th><th>err mean of 5</th><th>err EWMA</th><th>err NWS</th><th>δb wd / we</th></tr>"#);
        for s in &r.series {
            let sc = s.scale();
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
            let failed = s.timeouts + s.errors;
            let _ = write!(
                h,
                r##"<tr><td><a href="#{}">{}</a></td><td class="l">{} <span class="small">{}</span></td><td class="l small">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td></tr>"##,
                anchor(s),
                esc(&s.target),
                s.metric.name(),
                sc.name,
                esc(s.source()),
                s.ok,
                if failed > 0 {
                    format!(
                        r#"<span class="badge bad">{} · {}</span> <span class="small">{}</span>"#,
                        s.timeouts,
                        s.errors,
                        pct(Some(failed as f64 / (failed + s.ok) as f64))
                    )
                } else {
                    "–".into()
                } + &if s.not_run > 0 {
                    format!(" {}", not_run_badge(s.not_run))
                } else {
                    String::new()
                },
                opt(s.stats.as_ref().map(|x| x.median), &sc),
                s.next
                    .as_ref()
                    .map_or_else(|| "–".into(), |n| next_band(n, &sc)),
                pct(s.forecasts[0].relative_error),
                pct(s.forecasts[1].relative_error),
                pct(s.forecasts[2].relative_error),
                db(s.diurnal.weekdays),
                db(s.diurnal.weekends)
            );
        }
        h.push_str("</table></div>");
        let _ = write!(
            h,
            r#"<p class="small">Units: each row's own (rates scaled to kbit/s, Mbit/s or Gbit/s, loss in percent, times in ms). Next: the NWS bank's forecast of the next value ± 2·RMSE. Relative error: average(|forecast − observed| / observed) of the forecast made before each value (IEPM-BW §III.G). δb: the standard error of the phase b of the fit |a|·sin(x + b) + c over the time of day; below 0.2 the path has a strong daily cycle (§III.H). –: too few values (a forecast is scored from the second value, a daily fit needs 4, in at least {} of the day's 24 hours, UTC, weekdays and weekends apart), none ok, or, for a relative error, every value 0 (it divides by the value: a loss of 0 %).</p>"#,
            nowcast_core::iepm::DIURNAL_MIN_HOURS
        );
    }
    if !r.passive_alone.is_empty() {
        let hosts: Vec<String> = r
            .passive_alone
            .iter()
            .map(|(host, n)| format!("{} ({n})", esc(host)))
            .collect();
        let _ = write!(
            h,
            r#"<p class="small">Passive records (source pcap) with no active throughput to the same service to compare them with, left out: {}. <code>nowcast forecast FILE --source pcap</code> forecasts them.</p>"#,
            hosts.join(", ")
        );
    }
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
                    // Largest first: where the methods agree (streams of one length), the
                    // dots are concentric and all three show (method 2's hid method 1's).
                    Layer::Points {
                        xy: &sets[0],
                        color: colors[0],
                        r: 4.5,
                        label: "method 1",
                    },
                    Layer::Points {
                        xy: &sets[1],
                        color: colors[1],
                        r: 3.2,
                        label: "2",
                    },
                    Layer::Points {
                        xy: &sets[2],
                        color: colors[2],
                        r: 2.0,
                        label: "3",
                    },
                ],
                "passive (y) against active (x), Mbit/s",
            ));
            h.push_str(r#"<div class="wrap"><table><tr><th class="l">method</th><th>n</th><th>err median</th><th>err mean</th><th>R</th></tr>"#);
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
            h.push_str("</table></div></div></section>");
        }
    }
    if !r.windows.is_empty() {
        h.push_str(r#"<h2>Windows and streams</h2><p class="small">The setting chosen is the one with the fewest streams that reaches 80 % of the best median throughput (IEPM-BW §III.D).</p>"#);
        for w in &r.windows {
            let m = w.rows.iter().map(|r| r.median.abs()).fold(0.0, f64::max);
            let sc = Scale::of(w.metric.unit(), m);
            let _ = write!(
                h,
                r#"<section class="card"><h3>{} · {}</h3><div class="wrap"><table><tr><th class="l">window</th><th>streams</th><th>runs</th><th>median ({u})</th><th>mean ({u})</th></tr>"#,
                esc(&w.target),
                w.metric.name(),
                u = sc.name
            );
            for row in &w.rows {
                let _ = write!(
                    h,
                    r#"<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                    if row.chosen { r#" class="chosen""# } else { "" },
                    row.window_bytes
                        .map(bytes_short)
                        .unwrap_or_else(|| "default".into()),
                    row.streams,
                    row.n,
                    sc.num(row.median),
                    sc.num(row.mean)
                );
            }
            h.push_str("</table></div></section>");
        }
    }
    if !r.series.is_empty() {
        h.push_str(r#"<h2>Time series</h2>"#);
    }
    for s in &r.series {
        h.push_str(&series_card(s));
    }
    if !r.runs.is_empty() {
        h.push_str(
            r#"<h2>Runs</h2><div class="wrap"><table class="sticky"><tr><th class="l">job</th>"#,
        );
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
        h.push_str("</table></div>");
    }
    h.push_str(
        r#"<p class="small">Made by nowcast report. Times are UTC.</p></main></body></html>"#,
    );
    h
}
