//! Small SVG plots for the HTML report: scatter and line layers over linear axes with
//! "nice" ticks, and bar charts. No script, no external resource: the file opens anywhere.
//! Colours are CSS values (a `var(--name)` too, so that a page can change them in dark
//! mode). Each plot is a `<figure>`: its title and legend are HTML around the SVG, so they
//! wrap and keep their size on a phone, where the SVG is scaled down to the screen; the
//! SVG's own labels (ticks, axis) carry `--k`, the SVG's width over 380, by which the
//! page's CSS enlarges them on a narrow screen to stay readable. A plot over time is a
//! `wide` figure: on a phone the page draws it wider than the screen, to scroll within its
//! figure, rather than a band a third of the screen's width tall.
//!
//! Deterministic core: numbers in, SVG text out.

use std::fmt::Write as _;

/// One layer of a plot.
pub enum Layer<'a> {
    /// Dots of radius `r`.
    Points {
        xy: &'a [(f64, f64)],
        color: &'a str,
        r: f64,
        label: &'a str,
    },
    /// A polyline; `dash` draws it dashed.
    Line {
        xy: &'a [(f64, f64)],
        color: &'a str,
        dash: bool,
        label: &'a str,
    },
    /// A band between two values at each x.
    Band {
        xyy: &'a [(f64, f64, f64)],
        color: &'a str,
        label: &'a str,
    },
    /// Short upright marks along the bottom of the plot at each x (events without a value,
    /// such as failed probes).
    Marks {
        xs: &'a [f64],
        color: &'a str,
        label: &'a str,
    },
}

/// How axis values are written.
#[derive(Clone, Copy)]
pub enum Ticks {
    Number,
    /// ms since 1970, as dates and times (UTC).
    Time,
    /// Hours of a day from radians 0..2π.
    DayRadians,
}

/// Escapes text for HTML and SVG. Control characters (which HTML does not allow in text)
/// and the bidirectional ones that reorder text are shown escaped, `\u{1b}`, as the
/// terminal's tables show them ([`crate::format::clean`]): the reader sees what the name
/// holds, and a name cannot read as another.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() || crate::format::is_bidi(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// How far either side of `v` an axis over values that are all `v` reaches.
pub fn same_value_pad(v: f64) -> f64 {
    if v == 0.0 {
        1.0
    } else {
        v.abs() * 0.1
    }
}

/// Ticks at 1, 2 or 5 × 10^k covering [lo, hi], about `n` of them.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut t = first;
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

fn time_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    use crate::when::{date, DAY, HOUR, MINUTE, SECOND};
    let span = hi - lo;
    let steps = [
        SECOND,
        2 * SECOND,
        5 * SECOND,
        10 * SECOND,
        30 * SECOND,
        MINUTE,
        2 * MINUTE,
        5 * MINUTE,
        10 * MINUTE,
        15 * MINUTE,
        30 * MINUTE,
        HOUR,
        3 * HOUR,
        6 * HOUR,
        12 * HOUR,
        DAY,
        2 * DAY,
        7 * DAY,
        14 * DAY,
        28 * DAY,
        91 * DAY,
        365 * DAY,
    ];
    let step = steps
        .iter()
        .copied()
        .find(|s| span / *s as f64 <= 6.0)
        .unwrap_or(365 * DAY) as f64;
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi && out.len() < 12 {
        let ms = t as i64;
        let of_day = ms.rem_euclid(DAY);
        let label = if step >= DAY as f64 {
            date(ms)[5..].to_string()
        } else if step >= HOUR as f64 {
            format!("{} {:02}h", &date(ms)[5..], of_day / HOUR)
        } else if step >= MINUTE as f64 {
            format!("{:02}:{:02}", of_day / HOUR, of_day / MINUTE % 60)
        } else {
            format!(
                "{:02}:{:02}:{:02}",
                of_day / HOUR,
                of_day / MINUTE % 60,
                of_day / SECOND % 60
            )
        };
        out.push((t, label));
        t += step;
    }
    out
}

fn fmt(v: f64) -> String {
    let a = v.abs();
    if v.fract() == 0.0 && a < 1e6 {
        format!("{v:.0}")
    } else if a >= 1e4 || (a > 0.0 && a < 1e-3) {
        format!("{v:.2e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A plot of `layers` over x in [x0, x1] and y in [y0, y1].
#[allow(clippy::too_many_arguments)]
pub fn plot(
    w: f64,
    h: f64,
    x: (f64, f64),
    y: (f64, f64),
    xt: Ticks,
    ylabel: &str,
    layers: &[Layer<'_>],
    title: &str,
) -> String {
    let (ml, mr, mt, mb) = (MARGIN_LEFT, 12.0, 10.0, 34.0);
    let (pw, ph) = (w - ml - mr, h - mt - mb);
    let (x0, mut x1) = x;
    let (y0, mut y1) = y;
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let sx = |v: f64| ml + (v - x0) / (x1 - x0) * pw;
    let sy = |v: f64| mt + ph - (v - y0) / (y1 - y0) * ph;
    let mut s = String::with_capacity(8192);
    s.push_str(&open(w, h, title, matches!(xt, Ticks::Time)));
    for t in nice_ticks(y0, y1, 5) {
        let yy = sy(t);
        let _ = write!(
            s,
            r#"<line x1="{ml}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" class="grid"/><text x="{}" y="{:.1}" class="yl">{}</text>"#,
            ml + pw,
            ml - 6.0,
            yy + 4.0,
            fmt(t)
        );
    }
    let xticks: Vec<(f64, String)> = match xt {
        Ticks::Time => time_ticks(x0, x1),
        Ticks::Number => nice_ticks(x0, x1, 6)
            .into_iter()
            .map(|t| (t, fmt(t)))
            .collect(),
        Ticks::DayRadians => (0..=8)
            .map(|i| {
                (
                    i as f64 * std::f64::consts::TAU / 8.0,
                    format!("{:02}h", i * 3),
                )
            })
            .collect(),
    };
    for (t, label) in xticks {
        let xx = sx(t);
        let _ = write!(
            s,
            r#"<line x1="{xx:.1}" x2="{xx:.1}" y1="{mt}" y2="{:.1}" class="grid"/><text x="{xx:.1}" y="{:.1}" class="xl">{}</text>"#,
            mt + ph,
            mt + ph + 16.0,
            esc(&label)
        );
    }
    let _ = write!(
        s,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" class="al">{}</text>"#,
        mt + ph / 2.0,
        esc(ylabel)
    );
    let _ = write!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" class="frame"/>"#
    );
    let clip = |v: f64, lo: f64, hi: f64| v.clamp(lo, hi);
    let mut legend = Vec::new();
    for layer in layers {
        match layer {
            Layer::Band { xyy, color, label } => {
                if xyy.is_empty() {
                    continue;
                }
                let mut d = String::new();
                for (i, (xv, lo, _)) in xyy.iter().enumerate() {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if i == 0 { "M" } else { "L" },
                        sx(*xv),
                        clip(sy(*lo), mt, mt + ph)
                    );
                }
                for (xv, _, hi) in xyy.iter().rev() {
                    let _ = write!(d, "L{:.1},{:.1} ", sx(*xv), clip(sy(*hi), mt, mt + ph));
                }
                let _ = write!(
                    s,
                    r#"<path d="{d}Z" style="fill:{color}" opacity="0.18" stroke="none"/>"#
                );
                legend.push((*color, *label, "band"));
            }
            Layer::Line {
                xy,
                color,
                dash,
                label,
            } => {
                if xy.is_empty() {
                    continue;
                }
                let mut d = String::new();
                for (i, (xv, yv)) in xy.iter().enumerate() {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1}",
                        if i == 0 { "M" } else { " L" },
                        sx(*xv),
                        clip(sy(*yv), mt, mt + ph)
                    );
                }
                let _ = write!(
                    s,
                    r#"<path d="{d}" fill="none" style="stroke:{color}" stroke-width="1.6"{}/>"#,
                    if *dash {
                        r#" stroke-dasharray="5 3""#
                    } else {
                        ""
                    }
                );
                legend.push((*color, *label, if *dash { "dash" } else { "line" }));
            }
            Layer::Points {
                xy,
                color,
                r,
                label,
            } => {
                if xy.is_empty() {
                    continue;
                }
                let _ = write!(s, r#"<g style="fill:{color}">"#);
                for (xv, yv) in xy.iter() {
                    let _ = write!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="{r}"/>"#,
                        sx(*xv),
                        clip(sy(*yv), mt, mt + ph)
                    );
                }
                s.push_str("</g>");
                legend.push((*color, *label, "dot"));
            }
            Layer::Marks { xs, color, label } => {
                if xs.is_empty() {
                    continue;
                }
                let mut d = String::new();
                for xv in xs.iter() {
                    let xx = clip(sx(*xv), ml, ml + pw);
                    let _ = write!(d, "M{xx:.1},{:.1}v9", mt + ph - 9.0);
                }
                let _ = write!(
                    s,
                    r#"<path class="marks" d="{d}" fill="none" style="stroke:{color}" stroke-width="1.4"/>"#
                );
                legend.push((*color, *label, "mark"));
            }
        }
    }
    s.push_str("</svg>");
    close(s, title, &legend)
}

/// The left margin of a plot: room for tick labels of six characters and the axis label,
/// at the size a phone's CSS gives them (see the module's note).
const MARGIN_LEFT: f64 = 86.0;

/// A figure's opening and its SVG's: `--k` is the SVG's width over 380 (see the module's
/// note), and the figure is at most as wide as the SVG was drawn; `wide`, a plot over time
/// (the module's note).
fn open(w: f64, h: f64, title: &str, wide: bool) -> String {
    format!(
        r#"<figure class="fig{}" style="width:{w}px"><figcaption>{}</figcaption><svg class="plot" style="--k:{:.3}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">"#,
        if wide { " wide" } else { "" },
        esc(title),
        w / 380.0,
        esc(title)
    )
}

/// Closes the figure that `svg` (closed) opened, with its legend in HTML below the plot:
/// each entry's mark drawn as in the plot.
fn close(mut s: String, title: &str, legend: &[(&str, &str, &str)]) -> String {
    let entries: Vec<_> = legend.iter().filter(|l| !l.1.is_empty()).collect();
    if !entries.is_empty() {
        let _ = write!(
            s,
            r#"<div class="legend" aria-label="legend of {}">"#,
            esc(title)
        );
        for (color, label, kind) in entries {
            let mark = match *kind {
                "dot" => format!(r#"<circle cx="7" cy="5" r="3.5" style="fill:{color}"/>"#),
                "band" => {
                    format!(
                        r#"<rect x="1" y="1" width="12" height="8" style="fill:{color}" opacity="0.3"/>"#
                    )
                }
                "mark" => format!(
                    r#"<line x1="7" x2="7" y1="0" y2="10" style="stroke:{color}" stroke-width="1.6"/>"#
                ),
                _ => format!(
                    r#"<line x1="1" x2="13" y1="5" y2="5" style="stroke:{color}" stroke-width="2"{}/>"#,
                    if *kind == "dash" {
                        r#" stroke-dasharray="4 2""#
                    } else {
                        ""
                    }
                ),
            };
            let _ = write!(
                s,
                r#"<span><svg width="14" height="10" aria-hidden="true">{mark}</svg>{}</span>"#,
                esc(label)
            );
        }
        s.push_str("</div>");
    }
    s.push_str("</figure>");
    s
}

/// A histogram: `counts` over equal bins from `min` to `max`.
#[allow(clippy::too_many_arguments)]
pub fn bars(
    w: f64,
    h: f64,
    min: f64,
    max: f64,
    counts: &[u64],
    color: &str,
    xlabel: &str,
    title: &str,
) -> String {
    let (ml, mr, mt, mb) = (56.0, 12.0, 10.0, 40.0);
    let (pw, ph) = (w - ml - mr, h - mt - mb);
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let n = counts.len().max(1) as f64;
    let mut s = open(w, h, title, false);
    // Counts are whole: no tick at a half (a top of 2 gave 0, 0.5, 1, 1.5, 2).
    for t in nice_ticks(0.0, top, 4)
        .into_iter()
        .filter(|t| t.fract() == 0.0)
    {
        let y = mt + ph - t / top * ph;
        let _ = write!(
            s,
            r#"<line x1="{ml}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="yl">{}</text>"#,
            ml + pw,
            ml - 6.0,
            y + 4.0,
            fmt(t)
        );
    }
    // Every value the same: the histogram has one bin of no width. One bar over the value,
    // on an axis around it.
    let (min, max, bins) = if max > min {
        (min, max, counts)
    } else {
        let d = same_value_pad(min);
        (min - d, min + d, &counts[..1.min(counts.len())])
    };
    let single = bins.len() == 1 && counts.len() > 1;
    for (i, c) in bins.iter().enumerate() {
        let bh = *c as f64 / top * ph;
        let (x, bw) = if single {
            (ml + pw * 0.475, pw * 0.05)
        } else {
            (ml + i as f64 / n * pw + 0.5, (pw / n - 1.0).max(0.5))
        };
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{bh:.1}" style="fill:{color}"><title>{c}</title></rect>"#,
            mt + ph - bh,
        );
    }
    let span = max - min;
    for t in nice_ticks(min, max, 5) {
        let x = ml + (t - min) / span * pw;
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" class="xl">{}</text>"#,
            mt + ph + 16.0,
            fmt(t)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" class="al">{}</text><rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" class="frame"/></svg>"#,
        ml + pw / 2.0,
        h - 4.0,
        esc(xlabel)
    );
    close(s, title, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_minutes_of_measurements_get_minute_ticks() {
        // 2026-12-06T03:00:00Z to 03:04:00Z.
        let t0 = 1_796_526_000_000.0;
        let ticks = time_ticks(t0, t0 + 240_000.0);
        assert!(ticks.len() >= 3, "{ticks:?}");
        assert_eq!(ticks[0].1, "03:00");
        assert_eq!(ticks[1].1, "03:01");
        let hours = time_ticks(t0, t0 + 10.0 * 3_600_000.0);
        assert!(hours[0].1.ends_with("03h"), "{hours:?}");
        // Seconds apart: ticks in seconds.
        let secs = time_ticks(t0, t0 + 16_000.0);
        assert_eq!(secs[0].1, "03:00:00");
        assert_eq!(secs[1].1, "03:00:05");
        // A legend never lies over the data: it is HTML below the plot, where it wraps.
        let svg = plot(
            400.0,
            200.0,
            (0.0, 1.0),
            (0.0, 1.0),
            Ticks::Number,
            "ms",
            &[Layer::Points {
                xy: &[(0.5, 1.0)],
                color: "var(--v)",
                r: 2.0,
                label: "measured",
            }],
            "t",
        );
        assert!(svg.contains(r#"style="fill:var(--v)""#), "{svg}");
        let (plot, legend) = svg.split_once("</svg><div class=\"legend\"").expect(&svg);
        assert!(plot.starts_with(r#"<figure class="fig" style="width:400px"><figcaption>t</figcaption><svg class="plot" style="--k:1.053""#), "{plot}");
        assert!(
            legend.contains(r#"r="3.5" style="fill:var(--v)"/></svg>measured</span>"#),
            "{legend}"
        );
        assert!(legend.ends_with("</figure>"), "{legend}");
    }

    #[test]
    fn a_histogram_of_one_value_is_one_bar_on_an_axis_around_it() {
        let svg = bars(360.0, 260.0, 0.0, 0.0, &[12, 0, 0], "red", "%", "h");
        assert_eq!(svg.matches(r#"style="fill:red""#).count(), 1, "{svg}");
        assert!(svg.contains("<title>12</title>"), "{svg}");
        for label in [">-1<", ">0<", ">1<"] {
            assert!(svg.contains(label), "{label}: {svg}");
        }
        assert!(!svg.contains("e-"), "{svg}");
        let svg = bars(360.0, 260.0, 20.0, 20.0, &[5, 0], "red", "ms", "h");
        assert!(svg.contains(">18<") && svg.contains(">22<"), "{svg}");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(esc("<a&\">"), "&lt;a&amp;&quot;&gt;");
        // A histogram's count axis has whole ticks only.
        let h = bars(360.0, 260.0, 0.0, 1.0, &[2, 1], "red", "x", "t");
        let counts: Vec<&str> = h
            .split(r#"class="yl">"#)
            .skip(1)
            .map(|t| &t[..t.find('<').unwrap()])
            .collect();
        assert_eq!(counts, ["0", "1", "2"]);
        assert_eq!(esc("a\u{1b}[2J"), "a\\u{1b}[2J");
        assert_eq!(esc("x\u{202e}gnp.txt"), "x\\u{202e}gnp.txt");
    }
}
