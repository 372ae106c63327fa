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

/// The original library's full state over 2,000 synthetic values (`nws-golden-long.csv`):
/// every primary's own forecast, the reported forecasts, their errors and methods. Long
/// enough for the adaptive medians (16, 17) to adapt, which the ten-value trace never does.
struct LongRow {
    k: usize,
    cells: Vec<Option<f64>>,
}

fn golden_long() -> (Vec<f64>, Vec<String>, Vec<LongRow>) {
    let input: Vec<f64> = include_str!("../testdata/nws-golden-long-input.txt")
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let text = include_str!("../testdata/nws-golden-long.csv");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|line| {
            let cells: Vec<Option<f64>> = line
                .split(',')
                .map(|c| (!c.is_empty()).then(|| c.parse().unwrap()))
                .collect();
            LongRow {
                k: cells[0].unwrap() as usize,
                cells,
            }
        })
        .collect();
    (input, header, rows)
}

/// 1e-9 relative, as the data README asks (absolute below magnitude 1).
fn close_long(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn faithful_bank_reproduces_every_column_of_the_long_golden_trace() {
    let (input, header, rows) = golden_long();
    assert_eq!(input.len(), 2000);
    assert_eq!(
        rows.len(),
        1999,
        "rows k = 1..1999, each with the value that follows"
    );
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (next, mse_f, mae_f, mse_e, mae_e, mse_m, mae_m, p0) = (
        col("next"),
        col("mse_forecast"),
        col("mae_forecast"),
        col("mse_error"),
        col("mae_error"),
        col("mse_method"),
        col("mae_method"),
        col("p0"),
    );
    let mut bank = Bank::new(Mode::Faithful);
    let mut wrong = Vec::new();
    for row in &rows {
        let k = row.k;
        bank.update(input[k - 1]).unwrap();
        assert_eq!(row.cells[next], Some(input[k]), "next value of row {k}");
        let f = bank.forecast().unwrap();
        let mut check = |name: &str, got: f64, want: Option<f64>| {
            if !want.is_some_and(|w| close_long(got, w)) {
                wrong.push(format!("k={k} {name}: {got} vs {want:?}"));
            }
        };
        check("mse_forecast", f.mse.value, row.cells[mse_f]);
        check("mae_forecast", f.mae.value, row.cells[mae_f]);
        check("mse_error", f.mse.error, row.cells[mse_e]);
        check("mae_error", f.mae.error, row.cells[mae_e]);
        check("mse_method", f.mse.method as f64, row.cells[mse_m]);
        check("mae_method", f.mae.method as f64, row.cells[mae_m]);
        for j in 0..18 {
            match (bank.primary_forecast(j), row.cells[p0 + j]) {
                (Some(got), want) => check(&format!("p{j}"), got, want),
                (None, None) => {}
                (None, want) => check(&format!("p{j} (none)"), f64::NAN, want),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} mismatches ({}), first: {:#?}",
        wrong.len(),
        {
            let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
            for w in &wrong {
                *by.entry(w.split(' ').nth(1).unwrap_or("")).or_default() += 1;
            }
            format!("{by:?}")
        },
        &wrong[..wrong.len().min(20)]
    );
}
