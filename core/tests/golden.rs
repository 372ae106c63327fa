//! The faithful bank reproduces the original NWS library's golden trace (algorithms.md §1.4)
//! and its constant-series behaviour.

use nowcast_core::{Bank, Mode};

struct Row {
    k: usize,
    mse_forecast: f64,
    mae_forecast: f64,
    mse_error: f64,
    mae_error: f64,
    mse_method: usize,
    mae_method: usize,
}

fn golden() -> (Vec<f64>, Vec<Row>) {
    let text = include_str!("../testdata/nws-golden-trace.csv");
    let series: Vec<f64> = text
        .lines()
        .find_map(|l| l.strip_prefix("# input: "))
        .expect("input line")
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(
        lines.next(),
        Some("k,next,mse_forecast,mae_forecast,mse_error,mae_error,mse_method,mae_method")
    );
    let mut rows = Vec::new();
    for line in lines {
        let f: Vec<f64> = line.split(',').map(|c| c.parse().unwrap()).collect();
        assert_eq!(series[f[0] as usize], f[1], "next value of row {}", f[0]);
        rows.push(Row {
            k: f[0] as usize,
            mse_forecast: f[2],
            mae_forecast: f[3],
            mse_error: f[4],
            mae_error: f[5],
            mse_method: f[6] as usize,
            mae_method: f[7] as usize,
        });
    }
    (series, rows)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn faithful_bank_reproduces_every_golden_number() {
    let (series, rows) = golden();
    assert_eq!(series, [10., 12., 11., 13., 50., 12., 11., 12., 13., 12.]);
    let mut bank = Bank::new(Mode::Faithful);
    for row in &rows {
        bank.update(series[row.k - 1]).unwrap();
        let f = bank.forecast().unwrap();
        let k = row.k;
        assert!(
            close(f.mse.value, row.mse_forecast),
            "k={k} mse_forecast {}",
            f.mse.value
        );
        assert!(
            close(f.mae.value, row.mae_forecast),
            "k={k} mae_forecast {}",
            f.mae.value
        );
        assert!(
            close(f.mse.error, row.mse_error),
            "k={k} mse_error {}",
            f.mse.error
        );
        assert!(
            close(f.mae.error, row.mae_error),
            "k={k} mae_error {}",
            f.mae.error
        );
        assert_eq!(f.mse.method, row.mse_method, "k={k} mse_method");
        assert_eq!(f.mae.method, row.mae_method, "k={k} mae_method");
    }
}

#[test]
fn constant_series_charges_only_the_smoothers() {
    let mut bank = Bank::new(Mode::Faithful);
    for _ in 0..6 {
        bank.update(100.0).unwrap();
    }
    for row in bank.table() {
        let expected = if (2..=9).contains(&row.index) {
            10000.0 / 6.0
        } else {
            0.0
        };
        assert!(
            (row.mse - expected).abs() < 0.01,
            "{} mse {}",
            row.name,
            row.mse
        );
    }
    let f = bank.forecast().unwrap();
    assert_eq!(f.mse.value, 100.0);
    assert_eq!(f.mse.method, 0);
}

#[test]
fn improved_smoothers_start_at_the_first_value() {
    let mut bank = Bank::new(Mode::Improved);
    for _ in 0..6 {
        bank.update(100.0).unwrap();
    }
    assert!(bank.table().iter().all(|r| r.mse == 0.0));
}
