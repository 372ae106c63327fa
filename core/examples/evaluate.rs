//! Honest evaluation of improved mode against the faithful original (`npm run evaluate`).
//!
//! The dev traces are split in two halves: within each family, traces sorted by name go to
//! halves A and B alternately (Norway HSDPA, FCC 2016); each tyrell RTT series is cut into
//! four consecutive quarters, quarters 1 and 3 going to A, 2 and 4 to B. Every setting of
//! improved mode (the aggregates' fixed share, scale gain and loss clip, the MAE aggregate's
//! mean or median, the extra forecasters) is chosen on one half and reported on the other,
//! then the other way round. A setting's score on a half is the mean over families of its
//! error relative to the faithful bank's (RMSE for the MSE aggregate, MAE for the MAE one),
//! so that no family or unit dominates. Every trace runs through a fresh bank; errors are
//! those of one-step forecasts over points 2..n, and over the second half of each trace
//! (points ⌊n/2⌋+1..n) for the comparison with statsforecast's models, fitted on the first
//! half (scripts/statsforecast-baseline.py, whose JSON output is read if given).
//!
//! Usage: cargo run --release -p nowcast-core --example evaluate -- DATA_DIR [BASELINE_JSON]
//! Also prints each timeout rule's miss rate and mean timeout per family and per trace
//! family member, for the frontier check (README, "Adaptive timeouts").

use nowcast_core::aggregate::{Combine, Loss, Settings};
use nowcast_core::bank::{
    Experts, Reporting, IMPROVED_EXPERTS, IMPROVED_EXTRAS, MAE_AGGREGATE, MSE_AGGREGATE,
};
use nowcast_core::method::{Rule, NWS_PRIMARIES};
use nowcast_core::timeout::{self, Bounds};
use nowcast_core::{Accum, Bank, Mode, Series};
use std::collections::BTreeMap;
use std::path::Path;

struct Trace {
    family: &'static str,
    name: String,
    half: usize,
    values: Vec<f64>,
}

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
            name,
            half: *i % 2,
            values: read_series(&p),
        });
        *i += 1;
    }
    for id in ["005", "006", "010"] {
        let xs = read_series(&dir.join(format!("tyrell-rtt/tyrell_roundtrip{id}.csv")));
        let q = xs.len() / 4;
        for k in 0..4 {
            let end = if k == 3 { xs.len() } else { (k + 1) * q };
            out.push(Trace {
                family: "tyrell",
                name: format!("tyrell{id} q{}", k + 1),
                half: k % 2,
                values: xs[k * q..end].to_vec(),
            });
        }
    }
    out
}

/// Errors of one forecast over points 2..n and over the second half.
#[derive(Clone, Copy, Default)]
struct Errs {
    all: Accum,
    late: Accum,
}

impl Errs {
    fn add(&mut self, e: f64, late: bool) {
        self.all.add(e);
        if late {
            self.late.add(e);
        }
    }
}

fn merge(a: &mut Accum, b: Accum) {
    a.n += b.n;
    a.sum_se += b.sum_se;
    a.sum_ae += b.sum_ae;
}

/// (MSE-selected or aggregated, MAE-selected or aggregated) errors of one bank on one trace.
fn run_bank(mode: Mode, rules: &[Rule], reporting: Reporting, xs: &[f64]) -> (Errs, Errs) {
    let mut bank = Bank::with_reporting(mode, rules.to_vec(), reporting);
    let (mut mse, mut mae) = (Errs::default(), Errs::default());
    let half = xs.len() / 2;
    for (i, &x) in xs.iter().enumerate() {
        if let Some(f) = bank.forecast() {
            mse.add(x - f.mse.value, i >= half);
            mae.add(x - f.mae.value, i >= half);
        }
        bank.update(x).unwrap();
    }
    (mse, mae)
}

fn last_value(xs: &[f64]) -> Errs {
    let mut e = Errs::default();
    let half = xs.len() / 2;
    for i in 1..xs.len() {
        e.add(xs[i] - xs[i - 1], i >= half);
    }
    e
}

#[derive(Clone)]
struct Config {
    name: String,
    rules: Vec<Rule>,
    reporting: Reporting,
}

fn nws_rules(extras: bool) -> Vec<Rule> {
    let mut r: Vec<Rule> = NWS_PRIMARIES.iter().map(|(r, _, _)| *r).collect();
    if extras {
        r.extend(IMPROVED_EXTRAS);
    }
    r
}

fn grid() -> Vec<Config> {
    let mut out = vec![
        Config {
            name: "improved selectors".into(),
            rules: nws_rules(false),
            reporting: Reporting::Selectors,
        },
        Config {
            name: "improved selectors + extras".into(),
            rules: nws_rules(true),
            reporting: Reporting::Selectors,
        },
    ];
    for extras in [false, true] {
        for experts in [Experts::PrimariesAndSelection, Experts::All] {
            for prior in [0.0, 0.5] {
                for share in [0.002, 0.01] {
                    let s = |loss| Settings {
                        loss,
                        combine: Combine::Mean,
                        share,
                        scale_gain: 0.2,
                        clip: 25.0,
                        prior_last: prior,
                    };
                    out.push(Config {
                        name: format!(
                            "agg{} {experts:?} prior={prior} share={share}",
                            if extras { "+extras" } else { "" },
                        ),
                        rules: nws_rules(extras),
                        reporting: Reporting::Aggregates {
                            mse: s(Loss::Squared),
                            mae: s(Loss::Absolute),
                            experts,
                        },
                    });
                }
            }
        }
    }
    out
}

/// Per-trace results of one configuration: (MSE errs, MAE errs).
type PerTrace = Vec<(Errs, Errs)>;

fn run_config(c: &Config, mode: Mode, data: &[Trace]) -> PerTrace {
    data.iter()
        .map(|t| run_bank(mode, &c.rules, c.reporting, &t.values))
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

const FAMILIES: [&str; 3] = ["norway", "fcc", "tyrell"];

fn pooled(data: &[Trace], r: &PerTrace, half: usize, family: &str, late: bool) -> (Accum, Accum) {
    let (mut a, mut b) = (Accum::default(), Accum::default());
    for (t, (m, s)) in data.iter().zip(r) {
        if t.half == half && t.family == family {
            merge(&mut a, if late { m.late } else { m.all });
            merge(&mut b, if late { s.late } else { s.all });
        }
    }
    (a, b)
}

/// Mean over families of RMSE (MSE forecast) and MAE (MAE forecast) relative to faithful.
fn score(data: &[Trace], r: &PerTrace, faithful: &PerTrace, half: usize) -> (f64, f64) {
    let (mut s_rmse, mut s_mae) = (0.0, 0.0);
    for fam in FAMILIES {
        let (m, a) = pooled(data, r, half, fam, false);
        let (fm, fa) = pooled(data, faithful, half, fam, false);
        s_rmse += m.rmse() / fm.rmse();
        s_mae += a.mae() / fa.mae();
    }
    (s_rmse / 3.0, s_mae / 3.0)
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
        rules: nws_rules(false),
        reporting: Reporting::Selectors,
    };
    let faithful = run_config(&faithful_cfg, Mode::Faithful, &data);
    let configs = grid();
    eprintln!(
        "evaluate: {} traces, {} configurations",
        data.len(),
        configs.len()
    );
    let results = run_all(&configs, &data);

    // Choose on one half, report on the other.
    for train in 0..2 {
        let test = 1 - train;
        let scores: Vec<(f64, f64)> = results
            .iter()
            .map(|r| score(&data, r, &faithful, train))
            .collect();
        let best_mse = (0..configs.len())
            .min_by(|&a, &b| scores[a].0.total_cmp(&scores[b].0))
            .unwrap();
        let best_mae = (0..configs.len())
            .min_by(|&a, &b| scores[a].1.total_cmp(&scores[b].1))
            .unwrap();
        println!(
            "\n== chosen on half {} , reported on half {}",
            ["A", "B"][train],
            ["A", "B"][test]
        );
        println!(
            "MSE forecast: {} (train score {:.4})",
            configs[best_mse].name, scores[best_mse].0
        );
        println!(
            "MAE forecast: {} (train score {:.4})",
            configs[best_mae].name, scores[best_mae].1
        );
        report(
            &data,
            test,
            &faithful,
            &results[best_mse],
            &results[best_mae],
            baseline.as_ref(),
        );
        let sel = results
            .iter()
            .zip(&configs)
            .find(|(_, c)| c.name == "improved selectors + extras")
            .unwrap()
            .0;
        let (r, m) = score(&data, sel, &faithful, test);
        println!(
            "(previous improved mode, selectors + extras: RMSE ratio {r:.4}, MAE ratio {m:.4})"
        );
    }
    // MAE per family for the best MAE settings on each half.
    for half in 0..2 {
        let mut ranked: Vec<(f64, usize)> = results
            .iter()
            .enumerate()
            .map(|(i, r)| (score(&data, r, &faithful, half).1, i))
            .collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        println!(
            "\nhalf {}: MAE ratio by family, best MAE settings",
            ["A", "B"][half]
        );
        for &(sc, i) in ranked.iter().take(10) {
            let fams: Vec<String> = FAMILIES
                .iter()
                .map(|f| {
                    let (_, a) = pooled(&data, &results[i], half, f, false);
                    let (_, fa) = pooled(&data, &faithful, half, f, false);
                    format!("{f} {:.4}", a.mae() / fa.mae())
                })
                .collect();
            println!("  {sc:.4} {} | {}", fams.join(" "), configs[i].name);
        }
    }
    // The top of the grid on each half, for the README's "what was tried".
    for half in 0..2 {
        let mut ranked: Vec<(f64, &str)> = results
            .iter()
            .zip(&configs)
            .map(|(r, c)| {
                let (a, b) = score(&data, r, &faithful, half);
                (a + b, c.name.as_str())
            })
            .collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        println!(
            "\nhalf {}: best settings by RMSE+MAE ratio sum",
            ["A", "B"][half]
        );
        for (s, n) in ranked.iter().take(8) {
            println!("  {s:.4}  {n}");
        }
        for (s, n) in ranked.iter().filter(|(_, n)| n.starts_with("improved")) {
            println!("  {s:.4}  {n}");
        }
    }
    let shipped_r = run_config(
        &Config {
            name: "shipped".into(),
            rules: nws_rules(false),
            reporting: Reporting::Aggregates {
                mse: MSE_AGGREGATE,
                mae: MAE_AGGREGATE,
                experts: IMPROVED_EXPERTS,
            },
        },
        Mode::Improved,
        &data,
    );
    println!("\n== the shipped default (bank.rs MSE_AGGREGATE / MAE_AGGREGATE), both halves");
    for half in 0..2 {
        report(
            &data,
            half,
            &faithful,
            &shipped_r,
            &shipped_r,
            baseline.as_ref(),
        );
    }
    timeouts(&data);
}

fn report(
    data: &[Trace],
    half: usize,
    faithful: &PerTrace,
    mse_r: &PerTrace,
    mae_r: &PerTrace,
    baseline: Option<&serde_json::Value>,
) {
    let lv: PerTrace = data
        .iter()
        .map(|t| {
            let e = last_value(&t.values);
            (e, e)
        })
        .collect();
    println!(
        "{:<8} {:>6} {:>21} {:>21} {:>21}",
        "half ".to_string() + ["A", "B"][half],
        "traces",
        "faithful MAE/RMSE",
        "improved MAE/RMSE",
        "last value MAE/RMSE"
    );
    let mut ratio = (0.0, 0.0);
    for fam in FAMILIES {
        let n = data
            .iter()
            .filter(|t| t.half == half && t.family == fam)
            .count();
        let (fm, fa) = pooled(data, faithful, half, fam, false);
        let (im, _) = pooled(data, mse_r, half, fam, false);
        let (_, ia) = pooled(data, mae_r, half, fam, false);
        let (lm, _) = pooled(data, &lv, half, fam, false);
        println!(
            "{fam:<8} {n:>6} {:>10.5}/{:<10.5} {:>10.5}/{:<10.5} {:>10.5}/{:<10.5}",
            fa.mae(),
            fm.rmse(),
            ia.mae(),
            im.rmse(),
            lm.mae(),
            lm.rmse()
        );
        ratio.0 += ia.mae() / fa.mae() / 3.0;
        ratio.1 += im.rmse() / fm.rmse() / 3.0;
    }
    println!(
        "pooled (mean ratio to faithful over families): MAE {:.4}, RMSE {:.4}",
        ratio.0, ratio.1
    );
    // Per-trace wins.
    let (mut wins_mae, mut wins_rmse, mut n, mut lv_mae, mut lv_rmse) = (0, 0, 0, 0, 0);
    let mut losses = Vec::new();
    for (i, t) in data.iter().enumerate() {
        if t.half != half {
            continue;
        }
        n += 1;
        let (fm, fa) = (faithful[i].0.all, faithful[i].1.all);
        let (im, ia) = (mse_r[i].0.all, mae_r[i].1.all);
        let l = lv[i].0.all;
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
    }
    println!(
        "per trace: improved beats faithful on MAE {wins_mae}/{n}, RMSE {wins_rmse}/{n}; no worse than last value on MAE {lv_mae}/{n}, RMSE {lv_rmse}/{n}"
    );
    for l in losses.iter().take(12) {
        println!("  not won: {l}");
    }
    if let Some(b) = baseline {
        second_half(data, half, faithful, mse_r, mae_r, &lv, b);
    }
}

/// The second halves of the traces, beside statsforecast's models fitted on the first.
fn second_half(
    data: &[Trace],
    half: usize,
    faithful: &PerTrace,
    mse_r: &PerTrace,
    mae_r: &PerTrace,
    lv: &PerTrace,
    b: &serde_json::Value,
) {
    for model in ["AutoARIMA", "AutoETS"] {
        println!("  second halves vs statsforecast {model} (MAE/RMSE):");
        let mut wins = (0, 0, 0);
        for fam in FAMILIES {
            let (fm, fa) = pooled(data, faithful, half, fam, true);
            let (im, _) = pooled(data, mse_r, half, fam, true);
            let (_, ia) = pooled(data, mae_r, half, fam, true);
            let (lm, _) = pooled(data, lv, half, fam, true);
            let mut sf = Accum::default();
            let mut missing = 0;
            for (i, t) in data.iter().enumerate() {
                if t.half != half || t.family != fam {
                    continue;
                }
                let entry = &b["traces"][&t.name][model];
                match (
                    entry["n"].as_u64(),
                    entry["sum_se"].as_f64(),
                    entry["sum_ae"].as_f64(),
                ) {
                    (Some(n), Some(se), Some(ae)) => {
                        merge(
                            &mut sf,
                            Accum {
                                n,
                                sum_se: se,
                                sum_ae: ae,
                            },
                        );
                        let sf_t = Accum {
                            n,
                            sum_se: se,
                            sum_ae: ae,
                        };
                        wins.2 += 1;
                        wins.0 += (mae_r[i].1.late.mae() < sf_t.mae()) as usize;
                        wins.1 += (mse_r[i].0.late.rmse() < sf_t.rmse()) as usize;
                    }
                    _ => missing += 1,
                }
            }
            println!(
                "    {fam:<8} faithful {:.5}/{:.5}  improved {:.5}/{:.5}  last value {:.5}/{:.5}  {model} {:.5}/{:.5}{}",
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

/// Each timeout rule's miss rate and mean timeout per family (and per tyrell series),
/// with the values as the probes would see them (a timed-out value is entered censored).
fn timeouts(data: &[Trace]) {
    println!("\n== timeout rules: miss rate / mean timeout (series units), improved bank");
    let rules = timeout::Rule::standard();
    let mut groups: BTreeMap<String, Vec<&Trace>> = BTreeMap::new();
    for t in data {
        let key = if t.family == "tyrell" {
            t.name.split(' ').next().unwrap().to_string()
        } else {
            t.family.to_string()
        };
        groups.entry(key).or_default().push(t);
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
        for t in ts {
            let mut s = Series::new(Mode::Improved, Bounds::UNBOUNDED);
            for &x in &t.values {
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
        // A rule is dominated when another misses no more and waits no longer, and one of
        // the two strictly less.
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
