//! Honest evaluation of improved mode against the faithful original (`npm run evaluate`).
//!
//! Halves: the throughput traces (Norway HSDPA, FCC 2016), sorted by name within each family,
//! go to halves A and B alternately; each long RTT series (tyrell) runs whole through one bank,
//! as a long series would in use, and its errors on quarters 1 and 3 count to half A, on
//! quarters 2 and 4 to half B. Every setting of improved mode (the aggregates' learning rates,
//! fixed-share fractions, exponentiated-gradient rate, prior on the selection, whether the leading
//! expert is a top-level input, and whether the two long forecasters are added) is chosen on one
//! half and reported on the other, then the other way round. A setting's score on a half is the
//! mean, over the five groups (Norway, FCC, and each tyrell series), of its error relative to the
//! faithful bank's (RMSE for the MSE forecast, MAE for the MAE forecast), so that no family or unit
//! dominates. Errors are those of one-step forecasts over points 2..n; for the comparison with
//! statsforecast's models, fitted on each trace's first half (scripts/statsforecast-baseline.py,
//! whose JSON output is read if given), over the second half of each trace (quarters 3 and 4 of a
//! long series, in halves A and B).
//!
//! Usage: cargo run --release -p nowcast-core --example evaluate -- DATA_DIR [BASELINE_JSON]
//! [--timeouts-only]. Also prints each timeout rule's miss rate and mean timeout per family
//! and per long series, for the frontier check (README, "Adaptive timeouts").

use nowcast_core::aggregate::Settings;
use nowcast_core::bank::{
    Reporting, IMPROVED_EXTRAS, MAE_AGGREGATE, MSE_AGGREGATE, SELECTION_WINDOWS,
};
use nowcast_core::method::{Rule, NWS_PRIMARIES};
use nowcast_core::timeout::{self, Bounds};
use nowcast_core::{Accum, Bank, Mode, Series};
use std::collections::BTreeMap;
use std::path::Path;

#[path = "shared/bench_series.rs"]
mod bench_series;

struct Trace {
    family: &'static str,
    /// The group a trace is reported in: its family, or its own name for a long series.
    group: String,
    name: String,
    /// Half of a whole short trace; None for a long series (split by quarters).
    half: Option<usize>,
    values: Vec<f64>,
}

impl Trace {
    /// Which half the error of the forecast of value `i` counts to.
    fn half_of(&self, i: usize) -> usize {
        self.half.unwrap_or_else(|| (i * 4 / self.values.len()) % 2)
    }
}

const GROUPS: [&str; 5] = ["norway", "fcc", "tyrell005", "tyrell006", "tyrell010"];
const HALF: [&str; 2] = ["A", "B"];

fn read_series(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| l.split(['\t', ',']).next_back()?.trim().parse::<f64>().ok())
        .collect()
}

fn traces(dir: &Path) -> Vec<Trace> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("pensieve-cooked"))
        .expect("DATA_DIR/pensieve-cooked")
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "LICENSE")
        .collect();
    files.sort();
    let mut out = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for p in files {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let family = if name.starts_with("trace_") {
            "fcc"
        } else {
            "norway"
        };
        let i = seen.entry(family).or_default();
        out.push(Trace {
            family,
            group: family.into(),
            name,
            half: Some(*i % 2),
            values: read_series(&p),
        });
        *i += 1;
    }
    for id in ["005", "006", "010"] {
        out.push(Trace {
            family: "tyrell",
            group: format!("tyrell{id}"),
            name: format!("tyrell{id}"),
            half: None,
            values: read_series(&dir.join(format!("tyrell-rtt/tyrell_roundtrip{id}.csv"))),
        });
    }
    out
}

/// Errors of one forecast on one trace, by half: over all points, and over the trace's
/// second half (for the statsforecast comparison).
#[derive(Clone, Copy, Default)]
struct Errs {
    all: [Accum; 2],
    late: [Accum; 2],
}

impl Errs {
    fn add(&mut self, t: &Trace, i: usize, e: f64) {
        let h = t.half_of(i);
        self.all[h].add(e);
        if i >= t.values.len() / 2 {
            self.late[h].add(e);
        }
    }
}

fn merge(a: &mut Accum, b: Accum) {
    a.n += b.n;
    a.sum_se += b.sum_se;
    a.sum_ae += b.sum_ae;
}

/// (MSE forecast, MAE forecast) errors of one bank on one trace.
type Pair = (Errs, Errs);

fn run_bank(mode: Mode, rules: &[Rule], reporting: Reporting, t: &Trace) -> Pair {
    let mut bank = Bank::with_reporting(mode, rules.to_vec(), reporting);
    let (mut mse, mut mae) = (Errs::default(), Errs::default());
    for (i, &x) in t.values.iter().enumerate() {
        if let Some(f) = bank.forecast() {
            mse.add(t, i, x - f.mse.value);
            mae.add(t, i, x - f.mae.value);
        }
        bank.update(x).unwrap();
    }
    (mse, mae)
}

fn last_value(t: &Trace) -> Pair {
    let mut e = Errs::default();
    for i in 1..t.values.len() {
        e.add(t, i, t.values[i] - t.values[i - 1]);
    }
    (e, e)
}

#[derive(Clone)]
struct Config {
    name: String,
    rules: Vec<Rule>,
    reporting: Reporting,
}

/// The 18 primaries and the first `extras` of improved mode's added forecasters.
fn nws_rules(extras: usize) -> Vec<Rule> {
    let mut r: Vec<Rule> = NWS_PRIMARIES.iter().map(|(r, _, _)| *r).collect();
    r.extend(&IMPROVED_EXTRAS[..extras]);
    r
}

/// The anchor selection's window sets the grid tries: the original's seven. Sets of two or
/// three (5/20/100, 10/100, 1/10/50) scored as well here, on both halves, but those without
/// the one-error window lose 17 % in MAE on the benchmark's spiky series (README).
const WINDOW_SETS: [&[usize]; 1] = [&SELECTION_WINDOWS];

/// The settings grid. Each configuration carries an MSE and an MAE setting (the two
/// aggregates are independent, so one run scores one of each); the grid pairs them. The
/// anchor's windows are shared by both aggregates, so they are chosen for the two together.
fn grid(window_sets: &[&'static [usize]]) -> Vec<Config> {
    let mut out = Vec::new();
    for &windows in window_sets {
        // None added; Exp Smooth 1 % and the remedian (the two added until 2026-12-05); and
        // the AR(1) as well.
        for extras in [0, 2, IMPROVED_EXTRAS.len()] {
            for leader in [false, true] {
                for eta_i in 0..2 {
                    for shares in [[0.0005, 0.01], [0.002, 0.01]] {
                        for variant in 0..2 {
                            let mse = Settings {
                                eta: [0.1, 0.3][eta_i],
                                shares,
                                eg_rate: [0.0, 0.02][variant],
                                leader,
                                ..MSE_AGGREGATE
                            };
                            let mae = Settings {
                                eta: [0.3, 0.1][eta_i],
                                shares,
                                prior_last: [0.0, 0.5][variant],
                                leader,
                                ..MAE_AGGREGATE
                            };
                            out.push(Config {
                                name: format!(
                                    "windows={windows:?} extras={extras} leader={leader} shares={shares:?} | MSE eta={} eg={} | MAE eta={} prior={}",
                                    mse.eta, mse.eg_rate, mae.eta, mae.prior_last
                                ),
                                rules: nws_rules(extras),
                                reporting: Reporting::Aggregates { mse, mae, windows },
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

fn windows_of(c: &Config) -> &'static [usize] {
    match c.reporting {
        Reporting::Aggregates { windows, .. } => windows,
        Reporting::Selectors => &[],
    }
}

/// Per-trace results of one configuration.
type PerTrace = Vec<Pair>;

fn run_config(c: &Config, mode: Mode, data: &[Trace]) -> PerTrace {
    data.iter()
        .map(|t| run_bank(mode, &c.rules, c.reporting, t))
        .collect()
}

fn run_all(configs: &[Config], data: &[Trace]) -> Vec<PerTrace> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![None; configs.len()]);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= configs.len() {
                    break;
                }
                let r = run_config(&configs[i], Mode::Improved, data);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect()
}

/// Pooled (MSE forecast, MAE forecast) errors of the traces matching `pick`, on `half`
/// (None: both).
fn pooled(
    data: &[Trace],
    r: &PerTrace,
    half: Option<usize>,
    late: bool,
    pick: impl Fn(&Trace) -> bool,
) -> (Accum, Accum) {
    let (mut a, mut b) = (Accum::default(), Accum::default());
    for (t, (m, s)) in data.iter().zip(r) {
        if !pick(t) {
            continue;
        }
        for h in 0..2 {
            if half.is_none_or(|x| x == h) {
                merge(&mut a, if late { m.late[h] } else { m.all[h] });
                merge(&mut b, if late { s.late[h] } else { s.all[h] });
            }
        }
    }
    (a, b)
}

/// Each group's (RMSE of the MSE forecast, MAE of the MAE forecast) relative to faithful's,
/// on `half`.
fn group_ratios(
    data: &[Trace],
    r: &PerTrace,
    faithful: &PerTrace,
    half: usize,
) -> [(f64, f64); GROUPS.len()] {
    GROUPS.map(|g| {
        let (m, a) = pooled(data, r, Some(half), false, |t| t.group == g);
        let (fm, fa) = pooled(data, faithful, Some(half), false, |t| t.group == g);
        (m.rmse() / fm.rmse(), a.mae() / fa.mae())
    })
}

/// A setting's score on a half, for one forecast (RMSE of the MSE forecast or MAE of the MAE
/// forecast, relative to faithful's): the mean over the groups, and the worst group.
#[derive(Clone, Copy, Debug)]
struct Score {
    mean: f64,
    worst: f64,
}

/// (MSE forecast, MAE forecast) scores of a setting on `half`.
fn score(data: &[Trace], r: &PerTrace, faithful: &PerTrace, half: usize) -> (Score, Score) {
    let ratios = group_ratios(data, r, faithful, half);
    let of = |pick: fn(&(f64, f64)) -> f64| Score {
        mean: ratios.iter().map(pick).sum::<f64>() / ratios.len() as f64,
        worst: ratios.iter().map(pick).fold(f64::NEG_INFINITY, f64::max),
    };
    (of(|r| r.0), of(|r| r.1))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .expect("usage: evaluate DATA_DIR [BASELINE_JSON]");
    let baseline: Option<serde_json::Value> =
        args.get(2).filter(|a| !a.starts_with("--")).and_then(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            serde_json::from_str(&text).ok()
        });
    let data = traces(Path::new(dir));
    if args.iter().any(|a| a == "--timeouts-only") {
        timeouts(&data);
        return;
    }
    let faithful_cfg = Config {
        name: "faithful".into(),
        rules: nws_rules(0),
        reporting: Reporting::Selectors,
    };
    let faithful = run_config(&faithful_cfg, Mode::Faithful, &data);
    let lv: PerTrace = data.iter().map(last_value).collect();
    let mut configs = grid(&WINDOW_SETS);
    let eligible = configs.len();
    configs.push(Config {
        name: "shipped default".into(),
        rules: nws_rules(IMPROVED_EXTRAS.len()),
        reporting: Bank::default_reporting(Mode::Improved),
    });
    eprintln!(
        "evaluate: {} traces, {} configurations",
        data.len(),
        configs.len()
    );
    let results = run_all(&configs, &data);
    let shipped = results.last().unwrap().clone();
    let configs = &configs[..configs.len() - 1];
    let results = &results[..results.len() - 1];

    // Choose on one half, report on the other.
    for (train, train_name) in HALF.iter().enumerate() {
        let test = 1 - train;
        let scores: Vec<(Score, Score)> = results
            .iter()
            .map(|r| score(&data, r, &faithful, train))
            .collect();
        // Within each window set the best MSE and the best MAE setting by the mean over the
        // groups; the set whose two together score best. (Tried on 2026-12-02 and not kept:
        // preferring settings that beat faithful on every group of the training half, then
        // the smallest worst loss. It chose the same MAE settings on both halves, and for the
        // MSE forecast, whose worst group is always a stationary RTT series tied with faithful
        // at 1.0000 ± 0.0001, it chose by that noise.)
        let best_in = |w: &[usize], pick: fn(&(Score, Score)) -> Score| {
            (0..eligible)
                .filter(|&i| windows_of(&configs[i]) == w)
                .min_by(|&a, &b| pick(&scores[a]).mean.total_cmp(&pick(&scores[b]).mean))
                .unwrap()
        };
        let (best_mse, best_mae) = WINDOW_SETS
            .iter()
            .map(|w| (best_in(w, |s| s.0), best_in(w, |s| s.1)))
            .min_by(|a, b| {
                let sum = |(m, e): (usize, usize)| scores[m].0.mean + scores[e].1.mean;
                sum(*a).total_cmp(&sum(*b))
            })
            .unwrap();
        println!(
            "\n== chosen on half {train_name}, reported on half {}",
            HALF[test]
        );
        let shown = |s: Score| format!("mean {:.4}, worst group {:.4}", s.mean, s.worst);
        println!(
            "MSE forecast: {} (train score {})",
            configs[best_mse].name,
            shown(scores[best_mse].0)
        );
        println!(
            "MAE forecast: {} (train score {})",
            configs[best_mae].name,
            shown(scores[best_mae].1)
        );
        // The MSE forecast of one configuration with the MAE forecast of another.
        let chosen: PerTrace = results[best_mse]
            .iter()
            .zip(&results[best_mae])
            .map(|(m, a)| (m.0, a.1))
            .collect();
        report(
            &data,
            Some(test),
            &faithful,
            &chosen,
            &lv,
            baseline.as_ref(),
        );
    }
    // The grid on each half.
    for (half, half_name) in HALF.iter().enumerate() {
        println!(
            "\nhalf {half_name}: every setting (ratio to faithful, mean over the groups and worst group: RMSE of the MSE forecast, MAE of the MAE forecast)"
        );
        for (r, c) in results.iter().zip(configs) {
            let (m, a) = score(&data, r, &faithful, half);
            println!(
                "  {:.4} {:.4}  (worst group {:.4} {:.4})  {}",
                m.mean, a.mean, m.worst, a.worst, c.name
            );
        }
    }
    println!("\n== the shipped default (bank.rs MSE_AGGREGATE / MAE_AGGREGATE, IMPROVED_EXTRAS)");
    for half in [Some(0), Some(1), None] {
        report(&data, half, &faithful, &shipped, &lv, baseline.as_ref());
    }
    synthetic();
    timeouts(&data);
}

fn ratio(a: f64, b: f64) -> String {
    format!("{:.4}", a / b)
}

/// Per-group table, per-trace wins and the statsforecast comparison for one half (None:
/// both halves).
fn report(
    data: &[Trace],
    half: Option<usize>,
    faithful: &PerTrace,
    improved: &PerTrace,
    lv: &PerTrace,
    baseline: Option<&serde_json::Value>,
) {
    let label = half.map_or("both halves".to_string(), |h| format!("half {}", HALF[h]));
    println!(
        "{:<18} {:>6} {:>23} {:>23} {:>23} {:>15}",
        label,
        "traces",
        "faithful MAE/RMSE",
        "improved MAE/RMSE",
        "last value MAE/RMSE",
        "ratio MAE/RMSE"
    );
    let (mut mean_mae, mut mean_rmse) = (0.0, 0.0);
    for name in GROUPS.iter().copied().chain(["tyrell pooled"]) {
        let pick = |t: &Trace| t.group == name || (name == "tyrell pooled" && t.family == "tyrell");
        let in_half = |t: &Trace| pick(t) && (half.is_none() || t.half.is_none() || t.half == half);
        let n = data.iter().filter(|t| in_half(t)).count();
        let (fm, fa) = pooled(data, faithful, half, false, in_half);
        let (im, ia) = pooled(data, improved, half, false, in_half);
        let (lm, _) = pooled(data, lv, half, false, in_half);
        println!(
            "{name:<18} {n:>6} {:>11.5}/{:<11.5} {:>11.5}/{:<11.5} {:>11.5}/{:<11.5} {:>7}/{:<7}",
            fa.mae(),
            fm.rmse(),
            ia.mae(),
            im.rmse(),
            lm.mae(),
            lm.rmse(),
            ratio(ia.mae(), fa.mae()),
            ratio(im.rmse(), fm.rmse()),
        );
        if GROUPS.contains(&name) {
            mean_mae += ia.mae() / fa.mae() / GROUPS.len() as f64;
            mean_rmse += im.rmse() / fm.rmse() / GROUPS.len() as f64;
        }
    }
    println!("mean ratio to faithful over the five groups: MAE {mean_mae:.4}, RMSE {mean_rmse:.4}");
    // Per-trace wins: each short trace of the half, each long series' part in the half.
    let (mut wins_mae, mut wins_rmse, mut n, mut lv_mae, mut lv_rmse) = (0, 0, 0, 0, 0);
    let mut losses = Vec::new();
    for (i, t) in data.iter().enumerate() {
        if half.is_some() && t.half.is_some() && t.half != half {
            continue;
        }
        let one = |e: &Errs| {
            let mut a = Accum::default();
            for h in 0..2 {
                if half.is_none_or(|x| x == h) {
                    merge(&mut a, e.all[h]);
                }
            }
            a
        };
        let (fm, fa) = (one(&faithful[i].0), one(&faithful[i].1));
        let (im, ia) = (one(&improved[i].0), one(&improved[i].1));
        let l = one(&lv[i].0);
        if fm.n == 0 {
            continue;
        }
        n += 1;
        if ia.mae() < fa.mae() {
            wins_mae += 1;
        } else {
            losses.push(format!("{} MAE {:.5} vs {:.5}", t.name, ia.mae(), fa.mae()));
        }
        if im.rmse() < fm.rmse() {
            wins_rmse += 1;
        } else {
            losses.push(format!(
                "{} RMSE {:.5} vs {:.5}",
                t.name,
                im.rmse(),
                fm.rmse()
            ));
        }
        lv_mae += (ia.mae() <= l.mae()) as usize;
        lv_rmse += (im.rmse() <= l.rmse()) as usize;
        if ia.mae() > l.mae() {
            losses.push(format!(
                "{} MAE {:.5} vs last value {:.5} (faithful {:.5})",
                t.name,
                ia.mae(),
                l.mae(),
                fa.mae()
            ));
        }
        if im.rmse() > l.rmse() {
            losses.push(format!(
                "{} RMSE {:.5} vs last value {:.5} (faithful {:.5})",
                t.name,
                im.rmse(),
                l.rmse(),
                fm.rmse()
            ));
        }
    }
    println!(
        "per trace: improved beats faithful on MAE {wins_mae}/{n}, RMSE {wins_rmse}/{n}; no worse than last value on MAE {lv_mae}/{n}, RMSE {lv_rmse}/{n}"
    );
    for l in &losses {
        println!("  not won: {l}");
    }
    if let Some(b) = baseline {
        second_half(data, half, faithful, improved, lv, b);
    }
}

/// statsforecast's sums for trace `t` on `half` (None: both), if it has a fit.
fn sf_sums(b: &serde_json::Value, t: &Trace, model: &str, half: Option<usize>) -> Option<Accum> {
    let entry = &b["traces"][&t.name][model];
    let read = |e: &serde_json::Value| -> Option<Accum> {
        Some(Accum {
            n: e["n"].as_u64()?,
            sum_se: e["sum_se"].as_f64()?,
            sum_ae: e["sum_ae"].as_f64()?,
        })
    };
    match (t.half, half) {
        (Some(_), _) | (None, None) => read(entry),
        (None, Some(h)) => read(&entry[["q3", "q4"][h]]),
    }
}

/// The second halves of the traces, beside statsforecast's models fitted on the first.
fn second_half(
    data: &[Trace],
    half: Option<usize>,
    faithful: &PerTrace,
    improved: &PerTrace,
    lv: &PerTrace,
    b: &serde_json::Value,
) {
    for model in ["AutoARIMA", "AutoETS"] {
        println!("  second halves vs statsforecast {model} (MAE/RMSE):");
        let mut wins = (0, 0, 0);
        for g in GROUPS.iter().copied().chain(["tyrell pooled"]) {
            let pick = |t: &Trace| {
                (t.group == g || (g == "tyrell pooled" && t.family == "tyrell"))
                    && (half.is_none() || t.half.is_none() || t.half == half)
            };
            let (fm, fa) = pooled(data, faithful, half, true, pick);
            let (im, ia) = pooled(data, improved, half, true, pick);
            let (lm, _) = pooled(data, lv, half, true, pick);
            let mut sf = Accum::default();
            let mut missing = 0;
            for (i, t) in data.iter().enumerate() {
                if !pick(t) {
                    continue;
                }
                match sf_sums(b, t, model, half) {
                    Some(s) => {
                        merge(&mut sf, s);
                        if g != "tyrell pooled" {
                            let mine = |e: &Errs| {
                                let mut a = Accum::default();
                                for h in 0..2 {
                                    if half.is_none_or(|x| x == h) {
                                        merge(&mut a, e.late[h]);
                                    }
                                }
                                a
                            };
                            wins.2 += 1;
                            wins.0 += (mine(&improved[i].1).mae() < s.mae()) as usize;
                            wins.1 += (mine(&improved[i].0).rmse() < s.rmse()) as usize;
                        }
                    }
                    None => missing += 1,
                }
            }
            println!(
                "    {g:<14} faithful {:.5}/{:.5}  improved {:.5}/{:.5}  last value {:.5}/{:.5}  {model} {:.5}/{:.5}{}",
                fa.mae(),
                fm.rmse(),
                ia.mae(),
                im.rmse(),
                lm.mae(),
                lm.rmse(),
                sf.mae(),
                sf.rmse(),
                if missing > 0 {
                    format!(" ({missing} traces without a fit)")
                } else {
                    String::new()
                }
            );
        }
        println!(
            "    improved beats {model} on MAE {}/{} traces, RMSE {}/{}",
            wins.0, wins.2, wins.1, wins.2
        );
    }
}

/// Each timeout rule's miss rate and mean timeout per family and per long series.
fn timeouts(data: &[Trace]) {
    // Whole series, then each half: the short traces of that half, and the long series'
    // quarters of that half (1 and 3 for A, 2 and 4 for B), each quarter run as a series.
    for half in [None, Some(0), Some(1)] {
        let title = half.map_or("whole series".to_string(), |h| format!("half {}", HALF[h]));
        println!(
            "\n== timeout rules, {title}: miss rate / mean timeout (series units), improved bank"
        );
        let rules = timeout::Rule::standard();
        let mut groups: BTreeMap<String, Vec<&[f64]>> = BTreeMap::new();
        for t in data {
            let parts: Vec<&[f64]> = match (half, t.half) {
                (None, _) => vec![&t.values],
                (Some(h), Some(th)) if h == th => vec![&t.values],
                (Some(_), Some(_)) => vec![],
                (Some(h), None) => {
                    let q = t.values.len() / 4;
                    vec![
                        &t.values[h * q..(h + 1) * q],
                        &t.values[(h + 2) * q..(h + 3) * q],
                    ]
                }
            };
            groups.entry(t.group.clone()).or_default().extend(parts);
        }
        print!("{:<11}", "series");
        for r in &rules {
            print!(" {:>22}", r.id());
        }
        println!();
        for (name, ts) in &groups {
            let mut judged = vec![0u64; rules.len()];
            let mut misses = vec![0u64; rules.len()];
            let mut sum = vec![0.0; rules.len()];
            for values in ts {
                let mut s = Series::new(Mode::Improved, Bounds::UNBOUNDED);
                for &x in values.iter() {
                    s.observe(x).unwrap();
                }
                for (i, o) in s.timeout_outcomes().iter().enumerate() {
                    judged[i] += o.judged;
                    misses[i] += (o.miss_rate * o.judged as f64).round() as u64;
                    sum[i] += o.mean_timeout * o.judged as f64;
                }
            }
            print!("{name:<11}");
            let point = |i: usize| {
                let n = judged[i].max(1) as f64;
                (misses[i] as f64 / n, sum[i] / n)
            };
            for i in 0..rules.len() {
                let (m, t) = point(i);
                print!(" {m:>10.4}/{t:<11.4}");
            }
            // A rule is dominated when another misses no more and waits no longer, and one
            // of the two strictly less.
            let dominated: Vec<String> = (0..rules.len())
                .filter(|&i| {
                    let (m, t) = point(i);
                    (0..rules.len()).any(|j| {
                        let (mj, tj) = point(j);
                        j != i && mj <= m && tj <= t && (mj < m || tj < t)
                    })
                })
                .map(|i| rules[i].id())
                .collect();
            println!("  dominated: {}", dominated.join(", "));
        }
    }
}

/// The shipped default on the benchmark's synthetic series (an AR(1) around a slow cycle,
/// 1 % of values tripled), which no setting is chosen on: a check that rare spikes do not
/// turn the aggregates against the selection they start from.
fn synthetic() {
    let data = [Trace {
        family: "synthetic",
        group: "synthetic".into(),
        name: "bench_bank series".into(),
        half: None,
        values: bench_series::series(1_000_000),
    }];
    let faithful = vec![run_bank(
        Mode::Faithful,
        &nws_rules(0),
        Reporting::Selectors,
        &data[0],
    )];
    let reporting = Bank::default_reporting(Mode::Improved);
    let improved = vec![run_bank(
        Mode::Improved,
        &nws_rules(IMPROVED_EXTRAS.len()),
        reporting,
        &data[0],
    )];
    let (fm, fa) = pooled(&data, &faithful, None, false, |_| true);
    let (im, ia) = pooled(&data, &improved, None, false, |_| true);
    println!(
        "\n== the shipped default on the benchmark's synthetic series (1 M points, 1 % spikes; never chosen on)\n\
         faithful MAE {:.5} RMSE {:.5}; improved MAE {:.5} RMSE {:.5}; ratio MAE {} RMSE {}",
        fa.mae(),
        fm.rmse(),
        ia.mae(),
        im.rmse(),
        ratio(ia.mae(), fa.mae()),
        ratio(im.rmse(), fm.rmse())
    );
}
