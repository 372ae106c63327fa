//! Which forecasters earn a place in improved mode: runs the faithful bank, the improved bank
//! without additions, each candidate addition alone, and a chosen set, over the evaluation
//! data, and prints pooled MAE (MAE-selected) and RMSE (MSE-selected) per dataset.
//!
//! Usage: cargo run --release -p nowcast-core --example ablation -- DATA_DIR
//! (`npm run evaluate -- DATA_DIR`). ABLATION_SET=id,id,… adds a row for that set of candidates.
//! DATA_DIR holds pensieve-cooked/ (Norway HSDPA and FCC traces, `time<TAB>Mbit/s`) and
//! tyrell-rtt/ (one RTT a line). The data is not part of the repository.

use nowcast_core::method::{describe, Rule, NWS_PRIMARIES};
use nowcast_core::{Accum, Bank, Mode};
use std::path::Path;

fn read_series(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split(['\t', ',']).next_back()?.trim().parse::<f64>().ok())
        .collect()
}

fn datasets(dir: &Path) -> Vec<(String, Vec<Vec<f64>>)> {
    let mut norway = Vec::new();
    let mut fcc = Vec::new();
    let mut cooked: Vec<_> = std::fs::read_dir(dir.join("pensieve-cooked"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cooked.sort();
    for p in cooked {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "LICENSE" {
            continue;
        }
        if name.starts_with("trace_") {
            fcc.push(read_series(&p));
        } else {
            norway.push(read_series(&p));
        }
    }
    let mut out = vec![("norway".to_string(), norway), ("fcc".to_string(), fcc)];
    for id in ["005", "006", "010"] {
        let p = dir.join(format!("tyrell-rtt/tyrell_roundtrip{id}.csv"));
        out.push((format!("tyrell{id}"), vec![read_series(&p)]));
    }
    out
}

#[derive(Default, Clone, Copy)]
struct Pooled {
    mse_sel: Accum,
    mae_sel: Accum,
    last_value: Accum,
}

fn run(mode: Mode, rules: &[Rule], series: &[Vec<f64>]) -> Pooled {
    let mut out = Pooled::default();
    for xs in series {
        let mut bank = Bank::with_rules(mode, rules.to_vec());
        bank.update_all(xs).unwrap();
        let (a, b, c) = (bank.mse_accum(), bank.mae_accum(), bank.primary_accum(0));
        for (dst, src) in [
            (&mut out.mse_sel, a),
            (&mut out.mae_sel, b),
            (&mut out.last_value, c),
        ] {
            dst.n += src.n;
            dst.sum_se += src.sum_se;
            dst.sum_ae += src.sum_ae;
        }
    }
    out
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: ablation DATA_DIR");
    let data = datasets(Path::new(&dir));
    let base: Vec<Rule> = NWS_PRIMARIES.iter().map(|(r, _, _)| *r).collect();
    let mut configs: Vec<(String, Mode, Vec<Rule>)> = vec![
        ("faithful".into(), Mode::Faithful, base.clone()),
        (
            "improved, no additions".into(),
            Mode::Improved,
            base.clone(),
        ),
    ];
    for rule in Bank::candidates() {
        let mut rules = base.clone();
        rules.push(rule);
        configs.push((format!("+ {}", describe(&rule).0), Mode::Improved, rules));
    }
    if let Ok(set) = std::env::var("ABLATION_SET") {
        let mut rules = base.clone();
        for id in set.split(',') {
            let rule = Bank::candidates().find(|r| describe(r).0 == id).expect(id);
            rules.push(rule);
        }
        configs.push((format!("+ {{{set}}}"), Mode::Improved, rules));
    }
    print!("{:<34}", "configuration (MAE of MAE-sel / RMSE of MSE-sel)");
    for (name, _) in &data {
        print!(" {:>22}", name);
    }
    println!();
    let mut reference: Vec<Pooled> = Vec::new();
    for (name, mode, rules) in &configs {
        print!("{name:<34}");
        for (i, (_, series)) in data.iter().enumerate() {
            let p = run(*mode, rules, series);
            let (mae, rmse) = (p.mae_sel.mae(), p.mse_sel.rmse());
            let mark = match reference.get(i) {
                Some(r) => match (mae < r.mae_sel.mae(), rmse < r.mse_sel.rmse()) {
                    (true, true) => "++",
                    (true, false) | (false, true) => "+-",
                    _ => "--",
                },
                None => "  ",
            };
            print!(" {mae:>9.5} {rmse:>9.5} {mark}");
            if reference.len() < data.len() {
                reference.push(p);
            }
        }
        println!();
    }
    print!("{:<34}", "last value (MAE / RMSE)");
    for p in &reference {
        print!(
            " {:>9.5} {:>9.5}   ",
            p.last_value.mae(),
            p.last_value.rmse()
        );
    }
    println!();
}
