//! Ranking download sites (a page's mirrors, a proxy's replicas) by the predicted time to
//! fetch a file of a given size: RTT + size / bandwidth, both from the site's own forecasts,
//! with a range from the forecasts' errors (Zangrilli & Lowekamp §5: a proxy sends each unit
//! of work to the replica forecast to be fastest).
//!
//! Deterministic core: forecasts in, an ordered list out. A site whose predicted time lies in
//! the best one's range is about the same as it, since the forecasts cannot tell them apart;
//! one whose range only overlaps the best one's is likely slower (its own forecast says slower,
//! but the errors do not yet rule out a tie); a site the caller found unreachable ranks last
//! and says so.

use serde::{Deserialize, Serialize};

/// A forecast and its error (root MSE), in the series' unit. An error of NaN is unknown: a
/// forecast from one value, which no measurement has checked (its root MSE would read 0 and
/// claim a certainty nothing measured).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: f64,
    pub error: f64,
}

impl Estimate {
    /// A forecast to rank by: a finite value, and an error finite or unknown (NaN).
    fn usable(e: Option<Estimate>) -> Option<Estimate> {
        e.filter(|e| e.value.is_finite() && (e.error.is_finite() || e.error.is_nan()))
    }
}

/// One site to rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Site {
    /// The site's base URL or name, which identifies it in the result.
    pub url: String,
    /// Forecast RTT, ms; `None` before the first measurement.
    #[serde(default)]
    pub rtt: Option<Estimate>,
    /// Forecast download bandwidth, Mbit/s; `None` before the first measurement.
    #[serde(default)]
    pub bandwidth: Option<Estimate>,
    /// The caller could not reach the site (its last probes failed).
    #[serde(default)]
    pub unreachable: bool,
}

/// Where a site stands in a ranking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The fastest predicted.
    Best,
    /// Its predicted time lies in the best one's range: the forecasts cannot tell it from the
    /// best.
    AboutTheSame,
    /// Predicted beyond the best one's range, but its own range overlaps it: slower by the
    /// forecasts, not yet beyond their errors (a site measured a few times, or erratic).
    LikelySlower,
    /// Predicted slower than the best, beyond the forecasts' errors.
    Slower,
    /// No usable forecast yet (no data, or only timeouts): ranked after those with one.
    NoForecast,
    /// The caller could not reach it: ranked last.
    Unreachable,
}

/// A site's prediction and standing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranked {
    pub url: String,
    /// Predicted time, ms; `None` while the site has no usable forecast or is unreachable.
    pub time_ms: Option<f64>,
    /// Best case: RTT − k·error and bandwidth + k·error.
    pub low_ms: Option<f64>,
    /// Worst case: RTT + k·error and bandwidth − k·error; +∞ when that bandwidth is ≤ 0,
    /// since a link that may carry nothing gives no upper bound (serialised as null).
    #[serde(serialize_with = "infinite_as_null")]
    pub high_ms: Option<f64>,
    pub standing: Standing,
}

fn infinite_as_null<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.is_finite() => s.serialize_f64(*x),
        _ => s.serialize_none(),
    }
}

/// Milliseconds to move `bytes` at `mbits` Mbit/s; +∞ when the rate is not positive.
pub fn transfer_ms(bytes: f64, mbits: f64) -> f64 {
    if mbits > 0.0 {
        bytes * 8.0 / (mbits * 1000.0)
    } else {
        f64::INFINITY
    }
}

/// Predicted time and range of `site` for `bytes` with the errors scaled by `k`; standing
/// [`Standing::NoForecast`] (times `None`) when a forecast is missing or the forecast
/// bandwidth is not positive, [`Standing::Unreachable`] when the caller says so. A site with
/// a prediction is [`Standing::Best`] until [`rank`] compares it with others.
pub fn predict(site: &Site, bytes: f64, k: f64) -> Ranked {
    let none = |standing| Ranked {
        url: site.url.clone(),
        time_ms: None,
        low_ms: None,
        high_ms: None,
        standing,
    };
    if site.unreachable {
        return none(Standing::Unreachable);
    }
    let (Some(rtt), Some(bw)) = (
        Estimate::usable(site.rtt),
        Estimate::usable(site.bandwidth).filter(|b| b.value > 0.0),
    ) else {
        return none(Standing::NoForecast);
    };
    let spread = |e: Estimate| k * e.error.abs();
    let rtt_ms = rtt.value.max(0.0);
    if rtt.error.is_nan() || bw.error.is_nan() {
        // A forecast whose error is unknown: its time, and no range.
        return Ranked {
            time_ms: Some(rtt_ms + transfer_ms(bytes, bw.value)),
            ..none(Standing::Best)
        };
    }
    Ranked {
        url: site.url.clone(),
        time_ms: Some(rtt_ms + transfer_ms(bytes, bw.value)),
        low_ms: Some(
            (rtt.value - spread(rtt)).max(0.0) + transfer_ms(bytes, bw.value + spread(bw)),
        ),
        high_ms: Some(rtt_ms + spread(rtt) + transfer_ms(bytes, bw.value - spread(bw))),
        standing: Standing::Best,
    }
}

/// Sites fastest first, each with its standing: the first with a prediction is the best,
/// those predicted within the best one's range are about the same, those whose range overlaps
/// it likely slower, the rest slower; then the
/// sites without a forecast and last the unreachable ones, each group in the order given
/// (the sort is stable).
pub fn rank(sites: &[Site], bytes: f64, k: f64) -> Vec<Ranked> {
    let group = |r: &Ranked| match r.standing {
        Standing::Unreachable => 2,
        Standing::NoForecast => 1,
        _ => 0,
    };
    let mut out: Vec<Ranked> = sites.iter().map(|s| predict(s, bytes, k)).collect();
    // Compared, not subtracted: two infinite times compare equal instead of giving NaN.
    out.sort_by(|a, b| {
        group(a).cmp(&group(b)).then_with(|| {
            let t = |r: &Ranked| r.time_ms.unwrap_or(f64::INFINITY);
            t(a).partial_cmp(&t(b)).unwrap_or(std::cmp::Ordering::Equal)
        })
    });
    let Some(best) = out
        .first()
        .filter(|r| r.standing == Standing::Best)
        .cloned()
    else {
        return out;
    };
    let best_t = best.time_ms.unwrap_or(f64::INFINITY);
    for r in out.iter_mut().skip(1) {
        let Some(t) = r.time_ms else { continue };
        r.standing = match (best.low_ms.zip(best.high_ms), r.low_ms.zip(r.high_ms)) {
            (Some((lo, hi)), Some((l, h))) => {
                if !(l <= hi && lo <= h) {
                    Standing::Slower
                } else if t <= hi {
                    Standing::AboutTheSame
                } else {
                    Standing::LikelySlower
                }
            }
            // A range unknown on either side: within the best one's range (or, without one,
            // no slower) is about the same; otherwise slower by the forecasts, and whether
            // beyond their errors nobody can say yet.
            (Some((_, hi)), None) if t <= hi => Standing::AboutTheSame,
            (None, _) if t <= best_t => Standing::AboutTheSame,
            _ => Standing::LikelySlower,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1_000_000.0;

    fn est(value: f64, error: f64) -> Option<Estimate> {
        Some(Estimate { value, error })
    }

    fn site(url: &str, rtt: Option<Estimate>, bandwidth: Option<Estimate>) -> Site {
        Site {
            url: url.into(),
            rtt,
            bandwidth,
            unreachable: false,
        }
    }

    #[test]
    fn a_forecast_whose_error_is_unknown_is_ranked_without_a_range_and_never_slower() {
        let nan = f64::NAN;
        // One download each: the errors are unknown.
        let r = rank(
            &[
                site("a", est(20.0, nan), est(100.0, nan)),
                site("b", est(20.0, 1.0), est(50.0, nan)),
                site("c", est(20.0, 1.0), est(100.0, nan)),
            ],
            MB,
            2.0,
        );
        let got: Vec<(&str, Option<f64>, Option<f64>, Standing)> = r
            .iter()
            .map(|r| (r.url.as_str(), r.time_ms, r.low_ms, r.standing))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Some(100.0), None, Standing::Best),
                ("c", Some(100.0), None, Standing::AboutTheSame),
                ("b", Some(180.0), None, Standing::LikelySlower),
            ]
        );
        assert_eq!(r[0].high_ms, None);
        // Beside a best with a range: within it, about the same; beyond, likely slower (its
        // own errors unknown, never "slower").
        let r = rank(
            &[
                site("a", est(20.0, 1.0), est(100.0, 5.0)),
                site("b", est(20.0, nan), est(98.0, nan)),
                site("c", est(20.0, nan), est(10.0, nan)),
            ],
            MB,
            2.0,
        );
        let standing: Vec<Standing> = r.iter().map(|r| r.standing).collect();
        assert_eq!(
            standing,
            [
                Standing::Best,
                Standing::AboutTheSame,
                Standing::LikelySlower
            ]
        );
        // An infinite error is still not a forecast.
        let r = predict(&site("x", est(20.0, f64::INFINITY), est(9.0, 1.0)), MB, 2.0);
        assert_eq!(r.standing, Standing::NoForecast);
    }

    #[test]
    fn transfer_time_is_bits_over_rate() {
        // Rows: bytes, Mbit/s, ms.
        let rows = [
            (MB, 8.0, 1000.0),
            (125_000.0, 1000.0, 1.0),
            (0.0, 10.0, 0.0),
            (MB, 0.0, f64::INFINITY),
            (MB, -3.0, f64::INFINITY),
            (MB, f64::NAN, f64::INFINITY),
        ];
        for (bytes, mbits, ms) in rows {
            assert_eq!(transfer_ms(bytes, mbits), ms, "{bytes} B at {mbits}");
        }
    }

    #[test]
    fn predictions_add_rtt_and_transfer_with_a_range_from_the_errors() {
        // Rows: name, rtt, bandwidth, k, (time, low, high).
        type Row = (
            &'static str,
            Option<Estimate>,
            Option<Estimate>,
            f64,
            Option<(f64, f64, f64)>,
        );
        let rows: [Row; 8] = [
            (
                "RTT plus size over bandwidth, and the range from the errors",
                est(20.0, 5.0),
                est(8.0, 2.0),
                1.0,
                Some((1020.0, 815.0, 25.0 + 8e6 / 6e3)),
            ),
            (
                "k widens the range",
                est(20.0, 5.0),
                est(8.0, 1.0),
                2.0,
                Some((1020.0, 10.0 + 800.0, 30.0 + 8e6 / 6e3)),
            ),
            (
                "the low RTT stops at zero",
                est(1.0, 4.0),
                est(8.0, 0.0),
                1.0,
                Some((1001.0, 1000.0, 1005.0)),
            ),
            (
                "a bandwidth error as large as the forecast gives no upper bound",
                est(10.0, 1.0),
                est(8.0, 8.0),
                1.0,
                Some((1010.0, 9.0 + 500.0, f64::INFINITY)),
            ),
            ("a mirror without data yet", None, None, 1.0, None),
            (
                "RTT known, bandwidth not yet",
                est(10.0, 1.0),
                None,
                1.0,
                None,
            ),
            ("zero bandwidth", est(10.0, 1.0), est(0.0, 1.0), 1.0, None),
            (
                "unknown (NaN) bandwidth",
                est(10.0, 1.0),
                est(f64::NAN, 1.0),
                1.0,
                None,
            ),
        ];
        for (name, rtt, bw, k, want) in rows {
            let r = predict(&site("a", rtt, bw), MB, k);
            let got = r
                .time_ms
                .map(|t| (t, r.low_ms.unwrap(), r.high_ms.unwrap()));
            assert_eq!(got, want, "{name}");
            let standing = if want.is_some() {
                Standing::Best
            } else {
                Standing::NoForecast
            };
            assert_eq!(r.standing, standing, "{name}");
        }
    }

    fn s(url: &str, rtt: Option<f64>, mbits: Option<f64>) -> Site {
        site(
            url,
            rtt.and_then(|v| est(v, 1.0)),
            mbits.and_then(|v| est(v, 1.0)),
        )
    }

    #[test]
    fn sites_rank_fastest_first_with_the_unforecast_and_the_unreachable_last() {
        let unreachable = Site {
            unreachable: true,
            ..s("down", Some(1.0), Some(1000.0))
        };
        // Rows: name, bytes, sites, order.
        let rows: [(&str, f64, Vec<Site>, &[&str]); 6] = [
            (
                "fastest first",
                MB,
                vec![
                    s("slow", Some(10.0), Some(8.0)),
                    s("fast", Some(10.0), Some(80.0)),
                ],
                &["fast", "slow"],
            ),
            (
                "a lower RTT wins a small file",
                1000.0,
                vec![
                    s("far-wide", Some(100.0), Some(1000.0)),
                    s("near-narrow", Some(5.0), Some(10.0)),
                ],
                &["near-narrow", "far-wide"],
            ),
            (
                "a wider link wins a large file",
                MB,
                vec![
                    s("near-narrow", Some(5.0), Some(10.0)),
                    s("far-wide", Some(100.0), Some(1000.0)),
                ],
                &["far-wide", "near-narrow"],
            ),
            (
                "sites without data last, in their order",
                MB,
                vec![
                    s("new1", None, None),
                    s("ok", Some(10.0), Some(8.0)),
                    s("zero", Some(10.0), Some(0.0)),
                    s("new2", Some(5.0), None),
                ],
                &["ok", "new1", "zero", "new2"],
            ),
            ("nothing to rank", MB, vec![], &[]),
            (
                "an unreachable site after those without data, however fast it was",
                MB,
                vec![
                    unreachable,
                    s("new", None, None),
                    s("ok", Some(10.0), Some(8.0)),
                ],
                &["ok", "new", "down"],
            ),
        ];
        for (name, bytes, sites, want) in rows {
            let got: Vec<String> = rank(&sites, bytes, 1.0)
                .into_iter()
                .map(|r| r.url)
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn sites_predicted_in_the_best_range_are_about_the_same_and_overlapping_ones_likely_slower() {
        // Best: 810 ms for 1 MB, range 676–1011 ms.
        let sites = [
            site("slower", est(10.0, 1.0), est(4.0, 0.5)),
            // 1343 ms, range 898–2677: overlaps the best one's, predicted beyond it.
            site("likely", est(10.0, 1.0), est(6.0, 3.0)),
            site("best", est(10.0, 1.0), est(10.0, 2.0)),
            site("close", est(12.0, 1.0), est(9.0, 2.0)),
            site("new", None, None),
            Site {
                unreachable: true,
                ..site("gone", None, None)
            },
        ];
        let got: Vec<(String, Standing)> = rank(&sites, MB, 1.0)
            .into_iter()
            .map(|r| (r.url, r.standing))
            .collect();
        let want = [
            ("best", Standing::Best),
            ("close", Standing::AboutTheSame),
            ("likely", Standing::LikelySlower),
            ("slower", Standing::Slower),
            ("new", Standing::NoForecast),
            ("gone", Standing::Unreachable),
        ];
        let want: Vec<(String, Standing)> = want.iter().map(|(u, s)| (u.to_string(), *s)).collect();
        assert_eq!(got, want);
        let json =
            serde_json::to_string(&rank(&[site("x", est(1.0, 1.0), est(1.0, 1.0))], MB, 1.0))
                .unwrap();
        assert!(json.contains(r#""high_ms":null"#), "{json}");
    }
}
