//! Native speed of the forecaster bank: nanoseconds per update on a 1 M-point synthetic
//! series (an AR(1) around a slow cycle with occasional spikes, like a bandwidth trace).
//! Run with `cargo run --release -p nowcast-core --example bench_bank [-- --json]`;
//! `-- --write FILE` writes the series instead, one number a line, for the command's benchmark.
//! BENCH_POINTS, BENCH_RUNS and BENCH_MODE (faithful or improved) narrow a run.

use nowcast_core::{Bank, Mode};
use std::time::Instant;

#[path = "shared/bench_series.rs"]
mod bench_series;
use bench_series::series;

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let n: usize = std::env::var("BENCH_POINTS").map_or(1_000_000, |v| v.parse().unwrap());
    let reps: usize = std::env::var("BENCH_RUNS").map_or(5, |v| v.parse().unwrap());
    let xs = series(n);
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--write") {
        let path = args.get(i + 1).expect("--write needs a file name");
        let text: String = xs.iter().map(|x| format!("{x}\n")).collect();
        std::fs::write(path, text).expect("writing the series");
        return;
    }
    let modes: Vec<Mode> = match std::env::var("BENCH_MODE") {
        Ok(m) => vec![m.parse().expect("BENCH_MODE is faithful or improved")],
        Err(_) => vec![Mode::Faithful, Mode::Improved],
    };
    for mode in modes {
        let mut runs = Vec::new();
        for _ in 0..reps {
            let mut bank = Bank::new(mode);
            let t = Instant::now();
            bank.update_all(&xs).unwrap();
            runs.push(t.elapsed().as_secs_f64() * 1e9 / n as f64);
            std::hint::black_box(bank.forecast());
        }
        runs.sort_by(f64::total_cmp);
        let (med, lo, hi) = (runs[reps / 2], runs[0], runs[reps - 1]);
        if json {
            println!(
                "{{\"bench\":\"bank\",\"impl\":\"native\",\"mode\":\"{}\",\"ns_per_update_median\":{med:.1},\"min\":{lo:.1},\"max\":{hi:.1},\"points\":{n}}}",
                format!("{mode:?}").to_lowercase()
            );
        } else {
            println!("native {mode:?}: {med:.1} ns/update (median of {reps}; {lo:.1}–{hi:.1})");
        }
    }
}
