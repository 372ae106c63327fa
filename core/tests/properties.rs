//! Rules that must hold for every input: forecasts stay finite, bad values are refused
//! without disturbing the bank, and a saved bank resumes bit-identically.

use nowcast_core::timeout::Bounds;
use nowcast_core::{state, Bank, ForecastError, Mode, Series};
use proptest::prelude::*;

fn magnitude() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e3..1e3f64,
        -1e100..1e100f64,
        -1e-300..1e-300f64,
        Just(0.0),
        Just(1e100),
        Just(-1e100),
        (0u32..5).prop_map(|k| k as f64),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_forecast_and_error_is_finite(xs in prop::collection::vec(magnitude(), 1..300)) {
        for mode in [Mode::Faithful, Mode::Improved] {
            let mut bank = Bank::new(mode);
            for &x in &xs {
                bank.update(x).unwrap();
                let f = bank.forecast().unwrap();
                for v in [f.mse.value, f.mae.value, f.mse.error, f.mae.error] {
                    prop_assert!(v.is_finite(), "{mode:?} {v}");
                }
                for row in bank.table() {
                    prop_assert!(row.forecast.is_none_or(f64::is_finite));
                    prop_assert!(row.mse.is_finite() && row.mae.is_finite());
                }
            }
        }
    }

    #[test]
    fn restored_state_continues_bit_identically(
        xs in prop::collection::vec(-1e4..1e4f64, 1..250),
        cut in 0usize..250,
    ) {
        for mode in [Mode::Faithful, Mode::Improved] {
            let cut = cut.min(xs.len());
            let mut whole = Bank::new(mode);
            let mut first = Bank::new(mode);
            first.update_all(&xs[..cut]).unwrap();
            let mut resumed: Bank = state::restore(&state::save(&first)).unwrap();
            whole.update_all(&xs).unwrap();
            resumed.update_all(&xs[cut..]).unwrap();
            let (a, b) = (whole.forecast(), resumed.forecast());
            prop_assert_eq!(a.map(|f| f.mse.value.to_bits()), b.map(|f| f.mse.value.to_bits()));
            prop_assert_eq!(a.map(|f| f.mae.value.to_bits()), b.map(|f| f.mae.value.to_bits()));
            prop_assert_eq!(a.map(|f| f.mse.error.to_bits()), b.map(|f| f.mse.error.to_bits()));
            prop_assert_eq!(whole.table(), resumed.table());
        }
    }

    #[test]
    fn a_restored_series_continues_bit_identically_with_its_timeouts(
        xs in prop::collection::vec(0.1..1e4f64, 1..200),
        cut in 0usize..200,
        censor in 0usize..200,
    ) {
        let cut = cut.min(xs.len());
        let feed = |s: &mut Series, i: usize, x: f64| {
            if i == censor {
                s.censored(x).unwrap();
            } else {
                s.observe(x).unwrap();
            }
        };
        let mut whole = Series::new(Mode::Improved, Bounds::UNBOUNDED);
        let mut first = Series::new(Mode::Improved, Bounds::UNBOUNDED);
        for (i, &x) in xs[..cut].iter().enumerate() {
            feed(&mut first, i, x);
        }
        let mut resumed: Series = state::restore(&state::save(&first)).unwrap();
        for (i, &x) in xs.iter().enumerate() {
            feed(&mut whole, i, x);
        }
        for (i, &x) in xs.iter().enumerate().skip(cut) {
            feed(&mut resumed, i, x);
        }
        let bits = |s: &Series| {
            let f = s.forecast().map(|f| (f.mse.value.to_bits(), f.mae.value.to_bits()));
            let t: Vec<Option<u64>> = ["target_miss_1pct", "nws", "rfc6298"]
                .iter()
                .map(|id| s.timeout(id).map(f64::to_bits))
                .collect();
            (f, t)
        };
        prop_assert_eq!(bits(&whole), bits(&resumed));
        prop_assert_eq!(whole.timeout_outcomes(), resumed.timeout_outcomes());
    }
}

#[test]
fn bad_values_are_refused_and_change_nothing() {
    let mut bank = Bank::new(Mode::Improved);
    bank.update_all(&[1.0, 2.0, 3.0]).unwrap();
    let before = bank.forecast();
    assert!(matches!(
        bank.update(f64::NAN),
        Err(ForecastError::NotFinite(_))
    ));
    assert!(matches!(
        bank.update(f64::INFINITY),
        Err(ForecastError::NotFinite(_))
    ));
    assert!(matches!(
        bank.update(f64::NEG_INFINITY),
        Err(ForecastError::NotFinite(_))
    ));
    assert!(matches!(
        bank.update(1e101),
        Err(ForecastError::OutOfRange(_))
    ));
    assert_eq!(bank.forecast(), before);
    assert_eq!(bank.len(), 3);
    let err = bank.update_all(&[4.0, f64::NAN, 5.0]).unwrap_err();
    assert_eq!(err.0, 1);
    assert_eq!(bank.len(), 4);
    assert!(
        Bank::new(Mode::Faithful).forecast().is_none(),
        "no forecast from an empty series"
    );
}

#[test]
fn damaged_or_foreign_state_is_refused() {
    let mut bank = Bank::new(Mode::Faithful);
    bank.update_all(&[1.0, 2.0]).unwrap();
    let saved = state::save(&bank);
    assert!(state::restore::<Bank>(&saved).is_ok());
    let newer = saved.replacen(
        &format!("\"version\":{}", state::VERSION),
        "\"version\":99",
        1,
    );
    let e = state::restore::<Bank>(&newer).unwrap_err().to_string();
    assert!(e.contains("version 99"), "{e}");
    assert!(state::restore::<Bank>("{}").is_err());
    assert!(state::restore::<Bank>("not json").is_err());
    let other = saved.replacen("nowcast.forecaster-state", "something-else", 1);
    assert!(state::restore::<Bank>(&other)
        .unwrap_err()
        .to_string()
        .contains("something-else"));
    // Cut a forecaster's state out of the saved text: refused, not a panic later.
    let damaged = saved.replacen("\"n\":2", "\"n\":7", 1);
    assert!(state::restore::<Bank>(&damaged).is_err());
}

#[test]
fn a_state_saved_by_an_older_build_is_refused_with_a_reason() {
    let mut bank = Bank::new(Mode::Improved);
    bank.update_all(&[1.0, 2.0]).unwrap();
    let old = state::save(&bank).replacen(
        &format!("\"version\":{}", state::VERSION),
        "\"version\":1",
        1,
    );
    let e = state::restore::<Bank>(&old).unwrap_err().to_string();
    assert!(e.contains("version 1") && e.contains("older build"), "{e}");
}
