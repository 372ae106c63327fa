//! IEPM-BW's analysis of an archive (Cottrell, Logg and Mei, §II.A: "time series …
//! histograms, scatter plots, statistical and analyzed tables"): per target and metric the
//! time series, its histogram, the forecasts — mean of the last 5 with its deviation, EWMA
//! 0.7 (§III.G) and the NWS bank — with their relative errors, and the diurnal fit with δb
//! for weekdays and weekends (§III.H); active against passive throughput by the three
//! multi-stream methods (§III.I–J); and the window/streams table (§III.D). The estimators are
//! the core's (`nowcast_core::iepm`, `nowcast_core::Bank`); this module only groups records
//! and hands them over.
//!
//! Deterministic core: records in, a [`Report`] out.

use crate::campaign::plan::source_type;
use crate::format::{Scale, BAND_K};
use crate::runlog::{Outcome, RunLog};
use nowcast_core::iepm::{self, Agreement, DiurnalSplit, Flow, RelativeError};
use nowcast_core::record::{Metric, Record, Status, Transport, Unit};
use nowcast_core::stats::{histogram, Histogram};
use nowcast_core::{Bank, Mode};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The source of passive records (the pcap analyser's).
pub const PASSIVE: &str = "pcap";

/// Report settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Histogram bins.
    pub bins: usize,
    /// A passive transfer and an active run this close in time are the same transfer, ms.
    pub pair_window_ms: f64,
    /// Flows starting within this of each other are one transfer (IEPM-BW: 5 s).
    pub transfer_gap_s: f64,
    /// Points kept per series for plots (the newest).
    pub max_points: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bins: 30,
            pair_window_ms: 10_000.0,
            transfer_gap_s: 5.0,
            max_points: 20_000,
        }
    }
}

/// One forecaster's record over a series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForecastScore {
    pub name: &'static str,
    /// `average(|forecast − observed| / observed)` (IEPM-BW §III.G).
    pub relative_error: Option<f64>,
    /// Values scored.
    pub n: u64,
    /// The forecast of the next value.
    pub next: Option<f64>,
    /// Its spread: the deviation of the last 5 (mean of 5) or the bank's RMSE.
    pub spread: Option<f64>,
}

/// Summary statistics of the measured values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub mean: f64,
    pub sd: f64,
    pub min: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub max: f64,
}

/// One point of a series with the forecasts made before it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    pub t: f64,
    pub v: f64,
    pub mean5: Option<f64>,
    pub sd5: Option<f64>,
    pub ewma: Option<f64>,
    pub nws: Option<f64>,
}

/// The forecast of the next value as every other command shows it: the NWS bank's
/// MSE-selected forecast ± [`BAND_K`] times its error (the root of its whole-history MSE),
/// the range narrowed to the values the unit can take.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Next {
    pub value: f64,
    /// The forecaster the bank selected, e.g. `median_31`.
    pub method: &'static str,
    /// None while unknown: after one value nothing has checked a forecast yet.
    pub error: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// One target, metric and source (a series, as the archive keeps it: `nowcast tcp`'s and
/// `nowcast udp`'s rtt to one host are two).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesReport {
    pub target: String,
    pub metric: Metric,
    pub unit: &'static str,
    /// The series' source (one).
    pub sources: Vec<String>,
    pub ok: u64,
    pub timeouts: u64,
    pub errors: u64,
    /// Records that stand for a campaign's slot that did not run (skipped, missed, or cut
    /// off when the campaign stopped: the run log's rows): no failures of the path, so not
    /// counted in `timeouts`, `errors` or `failing`.
    pub not_run: u64,
    pub first_ms: Option<f64>,
    pub last_ms: Option<f64>,
    /// The newest ok value's time.
    pub last_ok_ms: Option<f64>,
    /// Records that failed since the newest ok one (all of them when none was ok): the
    /// series is failing now when this is above 0.
    pub failing: u64,
    /// The first of those failures.
    pub failing_since_ms: Option<f64>,
    /// Why the newest failed record failed.
    pub last_error: Option<String>,
    /// The newest failures' times and statuses (as many as `points`), for plots.
    pub failures: Vec<(f64, Status)>,
    pub stats: Option<Stats>,
    pub histogram: Option<Histogram>,
    pub forecasts: Vec<ForecastScore>,
    /// The forecast of the next value with its range.
    pub next: Option<Next>,
    pub diurnal: DiurnalSplit,
    /// δb < 0.2 on weekdays or weekends (IEPM-BW §III.H).
    pub diurnal_path: bool,
    /// The newest points, with their forecasts, for plots.
    pub points: Vec<Point>,
}

impl SeriesReport {
    /// The series' source.
    pub fn source(&self) -> &str {
        self.sources.first().map_or("", String::as_str)
    }

    /// How its values are shown (`format::Scale`, as every table of nowcast shows them):
    /// rates in kbit/s, Mbit/s or Gbit/s by its median (its next value without one), loss in
    /// percent, times in ms; everywhere, the top's forecast too ([`Report::scale_of`]), so
    /// that one series never reads "944 Mbit/s" in one place and "0.944 Gbit/s" in another
    /// (a few values above 1000 Mbit/s made its tables Gbit/s, its forecast Mbit/s).
    pub fn scale(&self) -> Scale {
        let magnitude = self
            .stats
            .as_ref()
            .map(|s| s.median.abs())
            .or(self.next.as_ref().map(|n| n.value.abs()))
            .unwrap_or(0.0);
        Scale::of(self.metric.unit(), magnitude)
    }
}

/// A target whose newest records failed, over its failing series.
#[derive(Clone, Debug, PartialEq)]
pub struct FailingTarget<'a> {
    pub target: &'a str,
    /// Its failing series.
    pub series: Vec<&'a SeriesReport>,
    /// Failed records since each series' newest ok value, summed.
    pub failed: u64,
    pub since_ms: Option<f64>,
    /// None of its failing series ever had an ok value in the report's period.
    pub never_ok: bool,
    /// The newest failure's reason.
    pub last_error: Option<&'a str>,
}

/// The targets failing now (the newest record of one of their series failed), in the
/// report's order.
pub fn failing_targets(series: &[SeriesReport]) -> Vec<FailingTarget<'_>> {
    let mut out: Vec<FailingTarget<'_>> = Vec::new();
    let mut newest: Vec<f64> = Vec::new();
    for s in series.iter().filter(|s| s.failing > 0) {
        let i = match out.iter().position(|f| f.target == s.target) {
            Some(i) => i,
            None => {
                out.push(FailingTarget {
                    target: &s.target,
                    series: Vec::new(),
                    failed: 0,
                    since_ms: None,
                    never_ok: true,
                    last_error: None,
                });
                newest.push(f64::NEG_INFINITY);
                out.len() - 1
            }
        };
        let f = &mut out[i];
        f.series.push(s);
        f.failed += s.failing;
        f.since_ms = match (f.since_ms, s.failing_since_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        f.never_ok &= s.ok == 0;
        let last = s.last_ms.unwrap_or(f64::NEG_INFINITY);
        if last >= newest[i] {
            newest[i] = last;
            f.last_error = s.last_error.as_deref();
        }
    }
    out
}

/// Active against passive throughput for one target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActivePassive {
    pub target: String,
    pub active_metric: Metric,
    /// Per matched transfer: time, active, passive by methods 1, 2 and 3 (Mbit/s).
    pub pairs: Vec<(f64, f64, [f64; 3])>,
    /// Agreement by method 1, 2 and 3.
    pub methods: [Option<Agreement>; 3],
    /// Passive records without flow details (bytes and duration), paired as recorded.
    pub recorded: Option<Agreement>,
    pub unmatched_passive: usize,
}

/// One window and stream count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowRow {
    pub window_bytes: Option<u64>,
    pub streams: u32,
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub chosen: bool,
}

/// The window/streams table of one target and metric (IEPM-BW §III.D).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowTable {
    pub target: String,
    pub metric: Metric,
    pub rows: Vec<WindowRow>,
}

/// Run log counts of one job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRuns {
    pub job: String,
    /// Slots by outcome, in [`Outcome::ALL`] order.
    pub counts: [u64; 5],
    pub last_problem: Option<String>,
}

/// Values a series needs before its forecast is ranked against others: below it, the
/// bank's choice and its error rest on a handful of checks, and three lucky values would
/// rank a target best (the adaptive timeouts' cold start waits for 5 errors; this asks for
/// twice that).
pub const MIN_RANKED: u64 = 10;

/// One target's place among the targets measured the same way (metric and source).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranked {
    pub target: String,
    pub next: Next,
    /// Its newest record failed.
    pub failing: bool,
    /// The values its forecast was made from.
    pub ok: u64,
}

/// The targets measured the same way, by the forecast of their next value, best first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Standing {
    pub metric: Metric,
    pub source: String,
    pub unit: &'static str,
    /// Rates are better higher; times and loss lower.
    pub higher_is_better: bool,
    /// The targets with at least [`MIN_RANKED`] values (or the only one): those that
    /// answer, best first, then those failing now ([`Standing::answering`],
    /// [`Standing::failing`]).
    pub ranked: Vec<Ranked>,
    /// The targets with fewer, not ranked yet (by name).
    pub unranked: Vec<Ranked>,
}

impl Standing {
    /// The ranked targets whose newest record is ok, best first: best and worst are among
    /// these.
    pub fn answering(&self) -> &[Ranked] {
        &self.ranked[..self.ranked.iter().take_while(|r| !r.failing).count()]
    }

    /// The ranked targets failing now, after those that answer.
    pub fn failing(&self) -> &[Ranked] {
        &self.ranked[self.answering().len()..]
    }

    /// Which way is better, in words.
    pub fn better(&self) -> &'static str {
        if self.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub records: u64,
    pub from_ms: Option<f64>,
    pub to_ms: Option<f64>,
    /// Now: per metric and source, the targets by the forecast of their next value.
    pub now: Vec<Standing>,
    pub series: Vec<SeriesReport>,
    pub active_passive: Vec<ActivePassive>,
    /// Services (host and port) whose passive records (source pcap) had no active rate to
    /// compare with, and how many records each: said, not dropped without a word.
    pub passive_alone: Vec<(String, usize)>,
    pub windows: Vec<WindowTable>,
    pub runs: Vec<JobRuns>,
}

impl Report {
    /// The scale a ranked target's forecast is shown in: its series' ([`SeriesReport::scale`]),
    /// so that the top and the tables read one series alike.
    pub fn scale_of(&self, g: &Standing, x: &Ranked) -> Scale {
        self.series
            .iter()
            .find(|s| s.target == x.target && s.metric == g.metric && s.source() == g.source)
            .map_or_else(
                || Scale::of(g.metric.unit(), x.next.value),
                SeriesReport::scale,
            )
    }
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    // Linear interpolation between closest ranks.
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn stats(values: &[f64]) -> Option<Stats> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = if values.len() > 1 {
        (values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    Some(Stats {
        mean,
        sd,
        min: s[0],
        p25: quantile_sorted(&s, 0.25),
        median: quantile_sorted(&s, 0.5),
        p75: quantile_sorted(&s, 0.75),
        max: s[s.len() - 1],
    })
}

use nowcast_core::target::{host_of, port_of};

/// The service a passive record's flow ran to, as `nowcast pcap` names its ends
/// ([`nowcast_core::target::service_of`]).
fn service_of(r: &Record) -> (&str, Option<u16>) {
    nowcast_core::target::service_of(&r.to, r.from.as_deref())
}

/// One series: its values in time order through the core's estimators.
fn series_report(
    target: &str,
    metric: Metric,
    records: &[&Record],
    not_run: &[&Record],
    o: &Options,
) -> SeriesReport {
    // The source and the period from every record, those standing for slots that did not run
    // too: a series of nothing else (a target whose sanity check failed all period) has its
    // name and its period still.
    let all = || records.iter().chain(not_run);
    let mut sources: Vec<String> = all().map(|r| r.source.clone()).collect();
    sources.sort();
    sources.dedup();
    let count = |s: Status| records.iter().filter(|r| r.status == s).count() as u64;
    let ok: Vec<(f64, f64)> = records
        .iter()
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| r.value.map(|v| (r.timestamp_ms, v)))
        .collect();
    let (times, values): (Vec<f64>, Vec<f64>) = ok.iter().copied().unzip();
    let eval = iepm::evaluate(&values);
    let mut bank = Bank::new(Mode::Improved);
    let mut nws_rel = RelativeError::default();
    let mut nws_before = Vec::with_capacity(values.len());
    for &v in &values {
        let f = bank.forecast().map(|f| f.mse.value);
        if let Some(f) = f {
            nws_rel.add(f, v);
        }
        nws_before.push(f);
        // Values came through Record::validate: finite.
        let _ = bank.update(v);
    }
    let next_nws = bank.forecast();
    let next = next_nws.map(|f| {
        let error = f.mse.error.max(0.0).sqrt();
        let error = nowcast_core::record::error_known(bank.len(), error).then_some(error);
        let (lo, hi) = metric.unit().range();
        Next {
            value: f.mse.value,
            method: bank.method(f.mse.method).0,
            error,
            low: error.map(|e| (f.mse.value - BAND_K * e).clamp(lo, hi)),
            high: error.map(|e| (f.mse.value + BAND_K * e).clamp(lo, hi)),
        }
    });
    // Failures: the newest ones for plots, and the run of them since the newest ok value.
    let failed: Vec<&&Record> = records.iter().filter(|r| r.status != Status::Ok).collect();
    let failures = failed[failed.len().saturating_sub(o.max_points)..]
        .iter()
        .map(|r| (r.timestamp_ms, r.status))
        .collect();
    let tail = records
        .iter()
        .rev()
        .take_while(|r| r.status != Status::Ok)
        .count();
    let failing_since_ms = (tail > 0).then(|| records[records.len() - tail].timestamp_ms);
    let last_error = failed.last().map(|r| match (&r.error, r.timeout_ms) {
        (Some(e), _) => e.clone(),
        (None, Some(t)) if r.status == Status::Timeout => {
            format!("timed out after {} ms", crate::format::significant(t))
        }
        _ => r.status.name().to_string(),
    });
    let forecasts = vec![
        ForecastScore {
            name: "mean of last 5",
            relative_error: eval.mean5_error.value(),
            n: eval.mean5_error.n,
            next: eval.next_mean5.map(|m| m.0),
            spread: eval.next_mean5.map(|m| m.1),
        },
        ForecastScore {
            name: "EWMA w=0.7",
            relative_error: eval.ewma_error.value(),
            n: eval.ewma_error.n,
            next: eval.next_ewma,
            spread: None,
        },
        ForecastScore {
            name: "NWS bank (MSE-selected)",
            relative_error: nws_rel.value(),
            n: nws_rel.n,
            next: next_nws.map(|f| f.mse.value),
            spread: next_nws.map(|f| f.mse.error.sqrt()),
        },
    ];
    let diurnal = iepm::diurnal_split(&times, &values);
    let diurnal_path = [diurnal.weekdays, diurnal.weekends]
        .iter()
        .flatten()
        .any(|f| f.is_diurnal());
    let skip = values.len().saturating_sub(o.max_points);
    let points = (skip..values.len())
        .map(|i| Point {
            t: times[i],
            v: values[i],
            mean5: eval.mean5[i].map(|m| m.0),
            sd5: eval.mean5[i].map(|m| m.1),
            ewma: eval.ewma[i],
            nws: nws_before[i],
        })
        .collect();
    SeriesReport {
        target: target.to_string(),
        metric,
        unit: crate::archive::row::unit_name(metric.unit()),
        sources,
        ok: count(Status::Ok),
        timeouts: count(Status::Timeout),
        errors: count(Status::Error),
        not_run: not_run.len() as u64,
        first_ms: all().map(|r| r.timestamp_ms).reduce(f64::min),
        last_ms: all().map(|r| r.timestamp_ms).reduce(f64::max),
        last_ok_ms: times.last().copied(),
        failing: tail as u64,
        failing_since_ms,
        last_error,
        failures,
        stats: stats(&values),
        histogram: histogram(&values, o.bins),
        forecasts,
        next,
        diurnal,
        diurnal_path,
        points,
    }
}

/// Whether a larger value of `m` is the better one (rates), or a smaller one (times, loss).
pub fn higher_is_better(m: Metric) -> bool {
    m.unit() == Unit::MbitPerS
}

/// Per metric and source, the series with a forecast, best first.
fn standings(series: &[SeriesReport]) -> Vec<Standing> {
    let mut groups: BTreeMap<(&'static str, &str), Vec<&SeriesReport>> = BTreeMap::new();
    for s in series {
        if s.next.is_some() {
            let source = s.sources.first().map_or("", String::as_str);
            groups.entry((s.metric.name(), source)).or_default().push(s);
        }
    }
    groups
        .into_iter()
        .map(|((_, source), group)| {
            let metric = group[0].metric;
            let higher = higher_is_better(metric);
            let (mut ranked, unranked): (Vec<Ranked>, Vec<Ranked>) = group
                .iter()
                .map(|s| Ranked {
                    target: s.target.clone(),
                    next: s.next.clone().expect("filtered"),
                    failing: s.failing > 0,
                    ok: s.ok,
                })
                // A lone target is compared with nothing: it is shown whatever its count.
                .partition(|r| r.ok >= MIN_RANKED || group.len() == 1);
            // The targets that answer first, by their forecast; those failing now after
            // them (a target that is down is nobody's best path, whatever its values were).
            ranked.sort_by(|a, b| {
                let o = a.next.value.total_cmp(&b.next.value);
                let o = if higher { o.reverse() } else { o };
                a.failing.cmp(&b.failing).then(o)
            });
            Standing {
                metric,
                source: source.to_string(),
                unit: group[0].unit,
                higher_is_better: higher,
                ranked,
                unranked,
            }
        })
        .collect()
}

fn is_rate(m: Metric) -> bool {
    matches!(
        m,
        Metric::Throughput | Metric::BandwidthUp | Metric::BandwidthDown
    )
}

/// Active against passive for one service: passive flows grouped into transfers, each matched
/// to the nearest active run of each rate metric.
fn active_passive(
    target: &str,
    active: &[&Record],
    passive: &[&Record],
    o: &Options,
) -> Vec<ActivePassive> {
    let mut flows = Vec::new();
    let mut recorded = Vec::new();
    for r in passive
        .iter()
        .filter(|r| r.status == Status::Ok && is_rate(r.metric))
    {
        let p = r.probe.as_ref();
        match (p.and_then(|p| p.payload_bytes), p.and_then(|p| p.raw_ms)) {
            (Some(bytes), Some(ms)) if ms > 0.0 => flows.push(Flow {
                start_s: r.timestamp_ms / 1e3,
                duration_s: ms / 1e3,
                bytes: bytes as f64,
            }),
            _ => recorded.push((r.timestamp_ms, r.value.unwrap_or(0.0))),
        }
    }
    let transfers: Vec<(f64, [f64; 3])> = iepm::group_transfers(&flows, o.transfer_gap_s)
        .iter()
        .filter_map(|group| {
            let m = iepm::multi_stream(group)?;
            let start = group
                .iter()
                .map(|f| f.start_s)
                .fold(f64::INFINITY, f64::min)
                * 1e3;
            let mbit = |bytes_per_s: f64| bytes_per_s * 8.0 / 1e6;
            Some((start, [mbit(m.method1), mbit(m.method2), mbit(m.method3)]))
        })
        .collect();
    let mut out = Vec::new();
    for metric in [
        Metric::Throughput,
        Metric::BandwidthUp,
        Metric::BandwidthDown,
    ] {
        let runs: Vec<(f64, f64)> = active
            .iter()
            .filter(|r| r.metric == metric && r.status == Status::Ok)
            .filter_map(|r| r.value.map(|v| (r.timestamp_ms, v)))
            .collect();
        if runs.is_empty() {
            continue;
        }
        let nearest = |t: f64| -> Option<f64> {
            runs.iter()
                .filter(|(rt, _)| (rt - t).abs() <= o.pair_window_ms)
                .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
                .map(|r| r.1)
        };
        let mut pairs = Vec::new();
        let mut unmatched = 0;
        for (t, m) in &transfers {
            match nearest(*t) {
                Some(a) => pairs.push((*t, a, *m)),
                None => unmatched += 1,
            }
        }
        let rec_pairs: Vec<(f64, f64)> = recorded
            .iter()
            .filter_map(|(t, p)| nearest(*t).map(|a| (a, *p)))
            .collect();
        if pairs.is_empty() && rec_pairs.is_empty() {
            continue;
        }
        let by =
            |k: usize| iepm::agreement(&pairs.iter().map(|p| (p.1, p.2[k])).collect::<Vec<_>>());
        out.push(ActivePassive {
            target: target.to_string(),
            active_metric: metric,
            methods: [by(0), by(1), by(2)],
            recorded: iepm::agreement(&rec_pairs),
            pairs,
            unmatched_passive: unmatched + recorded.len() - rec_pairs.len(),
        });
    }
    out
}

/// The window/streams table of one series, when it ran with several settings.
fn windows(target: &str, metric: Metric, records: &[&Record]) -> Option<WindowTable> {
    let mut by: BTreeMap<(u32, Option<u64>), Vec<f64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.status == Status::Ok) {
        let p = r.probe.as_ref();
        let streams = p.and_then(|p| p.streams).unwrap_or(1);
        let window = p.and_then(|p| p.sndbuf_bytes);
        if let Some(v) = r.value {
            by.entry((streams, window)).or_default().push(v);
        }
    }
    if by.len() < 2 {
        return None;
    }
    let mut rows: Vec<WindowRow> = by
        .into_iter()
        .map(|((streams, window_bytes), v)| {
            let s = stats(&v).expect("non-empty");
            WindowRow {
                window_bytes,
                streams,
                n: v.len(),
                median: s.median,
                mean: s.mean,
                chosen: false,
            }
        })
        .collect();
    let keys: Vec<(Option<u64>, u32, f64)> = rows
        .iter()
        .map(|r| (r.window_bytes, r.streams, r.median))
        .collect();
    if let Some(i) = iepm::choose_window_streams(&keys, 0.8) {
        rows[i].chosen = true;
    }
    Some(WindowTable {
        target: target.to_string(),
        metric,
        rows,
    })
}

/// Builds the report from records in time order and the run log.
pub fn build(records: &[Record], runs: &[RunLog], o: &Options) -> Report {
    let mut active: BTreeMap<(String, &'static str, &str), (Metric, Vec<&Record>)> =
        BTreeMap::new();
    // Passive flows by the service they ran to (host and port: an RTT probe's sessions to
    // :8060 are no transfers of iperf3's :5201); the active rates they are compared with, by
    // host, each with the port it names, if any.
    let mut passive: BTreeMap<(String, Option<u16>), Vec<&Record>> = BTreeMap::new();
    let mut rates: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        if r.source == PASSIVE {
            let (host, port) = service_of(r);
            passive.entry((host.to_string(), port)).or_default().push(r);
        } else {
            active
                .entry((r.to.clone(), r.metric.name(), r.source.as_str()))
                .or_insert((r.metric, Vec::new()))
                .1
                .push(r);
            // The runs passive flows are compared with: not a capture's own figures (`nowcast
            // pcap`'s transfers by IEPM-BW's methods, transport pcap), which matched the flows
            // they were made from with no error.
            let captured = r
                .probe
                .as_ref()
                .is_some_and(|p| p.transport == Some(Transport::Pcap));
            if is_rate(r.metric) && !captured {
                rates.entry(host_of(&r.to).to_string()).or_default().push(r);
            }
        }
    }
    // The records that stand for runs that did not run, by time: the run log says which.
    let mut stand_ins: HashMap<u64, Vec<String>> = HashMap::new();
    for run in runs {
        if let Some(e) = run.stand_in_error() {
            stand_ins
                .entry(run.stand_in_time_ms().to_bits())
                .or_default()
                .push(e);
        }
    }
    let stands_in = |r: &Record| {
        r.status == Status::Error
            && r.error.as_ref().is_some_and(|e| {
                stand_ins
                    .get(&r.timestamp_ms.to_bits())
                    .is_some_and(|es| es.contains(e))
            })
    };
    let mut series = Vec::new();
    // A window/streams sweep's probes write a series each (`iperf3 (sweep-s4-w1M)`): its
    // table reads the series of one probe type together (it read each alone, and no sweep
    // ever had a table).
    let mut swept: BTreeMap<(&str, &'static str, &str), (Metric, Vec<&Record>)> = BTreeMap::new();
    for ((target, name, source), (metric, recs)) in &active {
        let (not_run, recs): (Vec<&Record>, Vec<&Record>) =
            recs.iter().copied().partition(|r| stands_in(r));
        series.push(series_report(target, *metric, &recs, &not_run, o));
        if is_rate(*metric) {
            swept
                .entry((target.as_str(), name, source_type(source)))
                .or_insert((*metric, Vec::new()))
                .1
                .extend(recs.iter().copied());
        }
    }
    let mut windows_out = Vec::new();
    for ((target, _, _), (metric, mut recs)) in swept {
        recs.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
        windows_out.extend(windows(target, metric, &recs));
    }
    let mut ap = Vec::new();
    let mut passive_alone = Vec::new();
    for ((host, port), pas) in &passive {
        let act: Vec<&Record> = rates.get(host).map_or_else(Vec::new, |act| {
            act.iter()
                .copied()
                .filter(|r| port.is_none() || port_of(&r.to).is_none_or(|p| Some(p) == *port))
                .collect()
        });
        let service = match port {
            Some(p) if host.contains(':') => format!("[{host}]:{p}"),
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        if act.is_empty() {
            passive_alone.push((service, pas.len()));
        } else {
            ap.extend(active_passive(&service, &act, pas, o));
        }
    }
    let mut jobs: BTreeMap<&str, JobRuns> = BTreeMap::new();
    for r in runs {
        let j = jobs.entry(&r.job).or_insert_with(|| JobRuns {
            job: r.job.clone(),
            counts: [0; 5],
            last_problem: None,
        });
        let i = Outcome::ALL
            .iter()
            .position(|o| *o == r.outcome)
            .unwrap_or(1);
        j.counts[i] += r.slots;
        if r.outcome != Outcome::Ok {
            j.last_problem = Some(format!(
                "{}: {}",
                r.outcome.name(),
                r.reason.as_deref().unwrap_or("")
            ));
        }
    }
    Report {
        records: records.len() as u64,
        from_ms: records.iter().map(|r| r.timestamp_ms).reduce(f64::min),
        to_ms: records.iter().map(|r| r.timestamp_ms).reduce(f64::max),
        now: standings(&series),
        series,
        active_passive: ap,
        passive_alone,
        windows: windows_out,
        runs: jobs.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use nowcast_core::record::Probe;
    use std::f64::consts::TAU;

    const T0: f64 = 1_767_225_600_000.0; // 2026-01-01T00:00:00Z, a Thursday
    const HOUR: f64 = 3_600_000.0;

    fn rec(t: f64, to: &str, metric: Metric, v: f64) -> Record {
        Record::new(t, "iperf3", metric, v, to)
    }

    #[test]
    fn the_diurnal_fit_recovers_a_known_cycle_and_separates_flat_paths() {
        // Four weeks every 30 minutes: one path with a daily cycle a = 40, b = 1.2, c = 300
        // and noise of ±15 (uniform), one flat path with the same noise.
        let (a, b, c) = (40.0, 1.2, 300.0);
        let mut n = Rng::new(0x9e3779b97f4a7c15);
        let mut records = Vec::new();
        for k in 0..(28 * 48) {
            let t = T0 + k as f64 * HOUR / 2.0;
            let x = (t % 86_400_000.0) / 86_400_000.0 * TAU;
            records.push(rec(
                t,
                "cycle:5201",
                Metric::Throughput,
                a * (x + b).sin() + c + 15.0 * n.symmetric(),
            ));
            records.push(rec(
                t,
                "flat:5201",
                Metric::Throughput,
                c + 15.0 * n.symmetric(),
            ));
        }
        let r = build(&records, &[], &Options::default());
        let cyc = r.series.iter().find(|s| s.target == "cycle:5201").unwrap();
        for fit in [cyc.diurnal.weekdays.unwrap(), cyc.diurnal.weekends.unwrap()] {
            assert!((fit.a - a).abs() / a < 0.05, "{fit:?}");
            assert!((fit.b - b).abs() / b < 0.05, "{fit:?}");
            assert!((fit.c - c).abs() / c < 0.05, "{fit:?}");
            assert!(fit.is_diurnal(), "{fit:?}");
        }
        assert!(cyc.diurnal_path);
        let flat = r.series.iter().find(|s| s.target == "flat:5201").unwrap();
        assert!(!flat.diurnal_path, "{:?}", flat.diurnal);
        for fit in [
            flat.diurnal.weekdays.unwrap(),
            flat.diurnal.weekends.unwrap(),
        ] {
            assert!(fit.delta_b >= 0.2, "{fit:?}");
        }
    }

    #[test]
    fn forecast_errors_equal_an_independent_computation() {
        let mut n = Rng::new(42);
        let values: Vec<f64> = (0..500)
            .map(|i| 100.0 + 20.0 * (i as f64 / 30.0).sin() + 5.0 * n.symmetric())
            .collect();
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| rec(T0 + i as f64 * 1e3, "h:1", Metric::Throughput, *v))
            .collect();
        let r = build(&records, &[], &Options::default());
        let s = &r.series[0];
        // By hand: the mean of the previous (up to) five, and avg_i = 0.3·y_i + 0.7·avg_{i−1}.
        let (mut e5, mut ee, mut n5, mut avg) = (0.0, 0.0, 0.0, None::<f64>);
        for i in 0..values.len() {
            let y = values[i];
            if i > 0 {
                let w = &values[i.saturating_sub(5)..i];
                let m = w.iter().sum::<f64>() / w.len() as f64;
                e5 += ((m - y) / y).abs();
                ee += ((avg.unwrap() - y) / y).abs();
                n5 += 1.0;
            }
            avg = Some(match avg {
                None => y,
                Some(a) => 0.3 * y + 0.7 * a,
            });
        }
        let got5 = s.forecasts[0].relative_error.unwrap();
        let gote = s.forecasts[1].relative_error.unwrap();
        assert!((got5 - e5 / n5).abs() < 1e-12, "{got5} vs {}", e5 / n5);
        assert!((gote - ee / n5).abs() < 1e-12, "{gote} vs {}", ee / n5);
        assert_eq!(s.forecasts[0].n, 499);
        // The bank, scored the same way, against its own forecasts replayed.
        let mut bank = Bank::new(Mode::Improved);
        let mut rel = 0.0;
        for (i, &y) in values.iter().enumerate() {
            if i > 0 {
                rel += ((bank.forecast().unwrap().mse.value - y) / y).abs();
            }
            bank.update(y).unwrap();
        }
        assert!((s.forecasts[2].relative_error.unwrap() - rel / n5).abs() < 1e-12);
        assert!(
            s.forecasts[2].relative_error.unwrap() < s.forecasts[0].relative_error.unwrap() * 1.5
        );
    }

    /// Passive records of a host no active run measured are said to be left out, with their
    /// count, not dropped without a word; those of a host that has one are compared.
    #[test]
    fn passive_records_without_an_active_run_are_said() {
        let mut records = Vec::new();
        for k in 0..3 {
            let mut p = rec(
                T0 + k as f64 * HOUR,
                "10.0.0.9:443",
                Metric::Throughput,
                5.0,
            );
            p.source = PASSIVE.into();
            records.push(p);
        }
        let r = build(&records, &[], &Options::default());
        assert_eq!(r.passive_alone, [("10.0.0.9:443".to_string(), 3)]);
        assert!(r.active_passive.is_empty());
        let text = super::super::text::render(&r, "");
        assert!(
            text.contains(
                "passive records (source pcap) with no active throughput to the same service"
            ),
            "{text}"
        );
    }

    #[test]
    fn active_against_passive_by_the_three_methods() {
        // Ten iperf3 runs of 4 streams; the pcap analyser saw each as four flows, one of
        // which lingered (a long flow, §III.J) in two of the runs.
        let mut records = Vec::new();
        for k in 0..10 {
            let t = T0 + k as f64 * HOUR;
            let rate = 400.0 + 20.0 * k as f64; // Mbit/s, the active figure
            records.push(rec(t, "10.0.0.2:5201", Metric::Throughput, rate));
            let per_stream_bytes = rate / 4.0 * 1e6 / 8.0 * 10.0; // 10 s each
            for s in 0..4 {
                let long = k % 5 == 0 && s == 3;
                let mut p = rec(
                    t + 100.0 + s as f64 * 10.0,
                    "10.0.0.2:5201",
                    Metric::Throughput,
                    0.0,
                );
                p.source = PASSIVE.into();
                let secs = if long { 20.0 } else { 10.0 };
                p.value = Some(per_stream_bytes * 8.0 / 1e6 / secs);
                p.probe = Some(Probe {
                    payload_bytes: Some(per_stream_bytes as u64),
                    raw_ms: Some(secs * 1e3),
                    ..Probe::default()
                });
                records.push(p);
            }
        }
        // The capture's own transfers by method 1 (`nowcast pcap`): not runs to compare with
        // (they matched the flows they came from with no error).
        for k in 0..10 {
            let mut c = rec(
                T0 + k as f64 * HOUR + 100.0,
                "10.0.0.2:5201",
                Metric::Throughput,
                400.0,
            );
            c.source = "pcap iepm method 1".into();
            c.probe = Some(Probe {
                transport: Some(Transport::Pcap),
                ..Probe::default()
            });
            records.push(c);
        }
        records.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
        let r = build(&records, &[], &Options::default());
        assert_eq!(r.active_passive.len(), 1, "{:?}", r.active_passive);
        let ap = &r.active_passive[0];
        assert_eq!((ap.pairs.len(), ap.unmatched_passive), (10, 0));
        let [m1, m2, m3] = ap.methods.map(|m| m.unwrap());
        // Method 1 is least hurt by the long flows; method 3 most (the paper's finding).
        assert!(m1.err_median.abs() < 1e-9, "{m1:?}");
        assert!(m1.err_mean.abs() < m2.err_mean.abs() && m2.err_mean.abs() < m3.err_mean.abs());
        assert!(m1.r.unwrap() > 0.9, "{m1:?}");
        // Without flow details, the passive values are compared as recorded.
        assert!(ap.recorded.is_none());
    }

    /// Passive flows are compared with the active runs to the same service: an RTT probe's
    /// sessions (`:8060`) beside iperf3's runs (`:5201`) on one host were taken for transfers.
    /// A download's flows (a reverse run: the data to the client, named by its address) are
    /// the service's.
    #[test]
    fn passive_flows_are_compared_with_runs_to_the_same_service() {
        let mut records = Vec::new();
        let passive = |t: f64, to: &str, from: &str, mbit: f64| {
            let mut p = rec(t, to, Metric::Throughput, mbit);
            p.source = PASSIVE.into();
            p.from = Some(from.into());
            p.probe = Some(Probe {
                payload_bytes: Some((mbit * 1e6 / 8.0 * 10.0) as u64),
                raw_ms: Some(10_000.0),
                ..Probe::default()
            });
            p
        };
        for k in 0..6 {
            let t = T0 + k as f64 * HOUR;
            records.push(rec(t, "10.0.0.2:5201", Metric::Throughput, 400.0));
            // The run's data, downloaded (iperf3 -R): to the client, from the service.
            records.push(passive(t + 100.0, "10.0.0.1", "10.0.0.2:5201", 396.0));
            // An RTT probe's session to the same host: a trickle, no transfer of the run.
            records.push(passive(t + 50.0, "10.0.0.2:8060", "10.0.0.1:40000", 0.01));
        }
        records.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
        let r = build(&records, &[], &Options::default());
        assert_eq!(r.active_passive.len(), 1, "{:?}", r.active_passive);
        let ap = &r.active_passive[0];
        assert_eq!(ap.target, "10.0.0.2:5201");
        assert_eq!((ap.pairs.len(), ap.unmatched_passive), (6, 0));
        let m1 = ap.methods[0].unwrap();
        assert!(
            (m1.err_median - (396.0 - 400.0) / 396.0).abs() < 1e-9,
            "{m1:?}"
        );
        assert_eq!(r.passive_alone, [("10.0.0.2:8060".to_string(), 6)]);
    }

    #[test]
    fn the_window_streams_table_marks_the_choice() {
        let mut records = Vec::new();
        for (w, s, v) in [
            (65_536u64, 1u32, 50.0),
            (65_536, 8, 300.0),
            (1 << 20, 1, 330.0),
            (1 << 20, 8, 400.0),
        ] {
            for k in 0..3 {
                let mut r = rec(T0 + k as f64, "h:5201", Metric::Throughput, v + k as f64);
                r.probe = Some(Probe {
                    streams: Some(s),
                    sndbuf_bytes: Some(w),
                    ..Probe::default()
                });
                records.push(r);
            }
        }
        // One series, or a sweep's probes a series each (a campaign's `iperf3 (sweep-…)`):
        // the same table.
        let swept: Vec<Record> = records
            .iter()
            .map(|r| {
                let p = r.probe.as_ref().unwrap();
                let mut r = r.clone();
                r.source = format!(
                    "{} (sweep-s{}-w{})",
                    r.source,
                    p.streams.unwrap(),
                    p.sndbuf_bytes.unwrap()
                );
                r
            })
            .collect();
        let s = build(&swept, &[], &Options::default());
        assert_eq!((s.series.len(), s.windows.len()), (4, 1));
        assert_eq!(s.windows[0].rows.len(), 4);
        assert_eq!(source_type("iperf3 (sweep-s1-w64K)"), "iperf3");
        assert_eq!(source_type("nowcast tcp"), "nowcast tcp");
        assert_eq!(source_type("(x)"), "(x)");
        let r = build(&records, &[], &Options::default());
        assert_eq!(r.windows, s.windows);
        let t = &r.windows[0];
        let chosen: Vec<_> = t.rows.iter().filter(|r| r.chosen).collect();
        assert_eq!(chosen.len(), 1);
        assert_eq!(
            (chosen[0].window_bytes, chosen[0].streams),
            (Some(1 << 20), 1)
        );
        let html = super::super::html::render(&r, "t");
        assert!(html.contains("class=\"chosen\"") && html.contains("<svg"));
        // Self-contained: nothing to fetch.
        assert!(
            !html.contains("src=") && !html.contains("href=\"http") && !html.contains("<script")
        );
        let text = super::super::text::render(&r, "no records");
        assert!(text.contains("← fewest streams"), "{text}");
    }
}
