//! WebAssembly bindings (wasm-bindgen): the page's view of a [`Series`]. Tables and reports
//! cross the boundary as JSON text; the typed wrapper `web/src/forecast.ts` parses them.

use crate::bank::Mode;
use crate::series::Series;
use crate::stats::Summary;
use crate::timeout::Bounds;
use crate::{state, stats};
use wasm_bindgen::prelude::*;

/// The reported forecasts for the next value.
#[wasm_bindgen]
#[derive(Clone, Copy)]
pub struct Prediction {
    /// Forecast chosen by squared error, its primary's index, and its whole-history MSE.
    pub mse_value: f64,
    pub mse_method: u32,
    pub mse_error: f64,
    /// Forecast chosen by absolute error, its primary's index, and its whole-history MAE.
    pub mae_value: f64,
    pub mae_method: u32,
    pub mae_error: f64,
}

/// A forecast series: the NWS bank plus adaptive timeouts.
#[wasm_bindgen]
pub struct Forecaster {
    series: Series,
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

#[wasm_bindgen]
impl Forecaster {
    /// A new series; `mode` is "improved" (default behaviour) or "faithful".
    #[wasm_bindgen(constructor)]
    pub fn new(mode: &str) -> Result<Forecaster, JsError> {
        let mode: Mode = mode.parse().map_err(js_err)?;
        Ok(Self {
            series: Series::new(mode, Bounds::UNBOUNDED),
        })
    }

    /// A series without timeout rules (`timeout` answers undefined): forecasts of values that
    /// are not probe results, such as an imported series.
    #[wasm_bindgen(js_name = withoutTimeouts)]
    pub fn without_timeouts(mode: &str) -> Result<Forecaster, JsError> {
        let mode: Mode = mode.parse().map_err(js_err)?;
        Ok(Self {
            series: Series::without_timeouts(mode),
        })
    }

    /// Feeds one measurement; refuses NaN, ±Infinity and magnitudes above 1e100.
    pub fn update(&mut self, x: f64) -> Result<(), JsError> {
        self.series.observe(x).map_err(js_err)
    }

    /// Feeds every value of a Float64Array; stops at the first bad one, naming its index
    /// (the values before it are kept).
    #[wasm_bindgen(js_name = updateBatch)]
    pub fn update_batch(&mut self, xs: &[f64]) -> Result<(), JsError> {
        for (i, &x) in xs.iter().enumerate() {
            self.series
                .observe(x)
                .map_err(|e| js_err(format!("value at index {i}: {e}")))?;
        }
        Ok(())
    }

    /// Records a probe that gave up after `at_least` as a censored value (at least that):
    /// judged a miss by the rules whose timeout was below it, fed to the forecasters as the
    /// lower bound, never with a penalty. Returns the value fed.
    pub fn censored(&mut self, at_least: f64) -> Result<f64, JsError> {
        self.series.censored(at_least).map_err(js_err)
    }

    /// Records a probe that timed out after `elapsed` the original NWS way (duration plus
    /// the penalty); returns the value fed back.
    #[wasm_bindgen(js_name = timedOut)]
    pub fn timed_out(&mut self, elapsed: f64) -> Result<f64, JsError> {
        self.series.timed_out(elapsed).map_err(js_err)
    }

    /// Forecasts for the next value; undefined before the first value.
    pub fn forecast(&self) -> Option<Prediction> {
        self.series.forecast().map(|f| Prediction {
            mse_value: f.mse.value,
            mse_method: f.mse.method as u32,
            mse_error: f.mse.error,
            mae_value: f.mae.value,
            mae_method: f.mae.method as u32,
            mae_error: f.mae.error,
        })
    }

    /// Number of values seen.
    pub fn count(&self) -> f64 {
        self.series.bank().len() as f64
    }

    /// Every primary: index, id, name, forecast, n, mse, mae (JSON array).
    #[wasm_bindgen(js_name = tableJson)]
    pub fn table_json(&self) -> String {
        serde_json::to_string(&self.series.bank().table()).expect("plain data")
    }

    /// Errors of the reported MSE and MAE forecasts and of the oracle (JSON object).
    #[wasm_bindgen(js_name = summaryJson)]
    pub fn summary_json(&self) -> String {
        let b = self.series.bank();
        serde_json::json!({
            "mse_selected": Summary::from(b.mse_accum()),
            "mae_selected": Summary::from(b.mae_accum()),
            "oracle": Summary::from(b.oracle_accum()),
            "timeouts": self.series.timeouts(),
        })
        .to_string()
    }

    /// Sets the floor, ceiling and timed-out penalty of the timeouts (series units).
    #[wasm_bindgen(js_name = setTimeoutBounds)]
    pub fn set_timeout_bounds(
        &mut self,
        floor: f64,
        ceiling: f64,
        penalty: f64,
    ) -> Result<(), JsError> {
        if !(floor >= 0.0 && ceiling >= floor && penalty >= 0.0) {
            return Err(js_err(format!(
                "timeout bounds need 0 ≤ floor ≤ ceiling and penalty ≥ 0 (got {floor}, {ceiling}, {penalty})"
            )));
        }
        self.series.set_bounds(Bounds {
            floor,
            ceiling,
            penalty,
        });
        Ok(())
    }

    /// The timeout rule `rule` sets for the next probe ("nws", "allen_k1", "allen_k2",
    /// "rfc6298", "windowed_k2_w20", "target_miss_1pct" (the improved default),
    /// "target_miss_2pct"); undefined before any value.
    pub fn timeout(&self, rule: &str) -> Option<f64> {
        self.series.timeout(rule)
    }

    /// Miss rate and mean timeout of every rule (JSON array).
    #[wasm_bindgen(js_name = timeoutsJson)]
    pub fn timeouts_json(&self) -> String {
        serde_json::to_string(&self.series.timeout_outcomes()).expect("plain data")
    }

    /// The whole state as text, for IndexedDB.
    pub fn save(&self) -> String {
        state::save(&self.series)
    }

    /// Restores a state saved by `save`; refuses other formats, versions and damage.
    pub fn restore(text: &str) -> Result<Forecaster, JsError> {
        Ok(Self {
            series: state::restore(text).map_err(js_err)?,
        })
    }
}

/// Histogram of `values` with `bins` bins between their min and max, as JSON
/// `{min, max, counts}`; undefined for no finite values.
#[wasm_bindgen(js_name = histogramJson)]
pub fn histogram_json(values: &[f64], bins: usize) -> Option<String> {
    stats::histogram(values, bins).map(|h| serde_json::to_string(&h).expect("plain data"))
}

/// Empirical CDF as a flat array [x0, p0, x1, p1, …].
#[wasm_bindgen]
pub fn ecdf(values: &[f64]) -> Vec<f64> {
    stats::ecdf(values)
        .into_iter()
        .flat_map(|(x, p)| [x, p])
        .collect()
}

/// Id and display name of every forecaster of a bank in `mode` (JSON array of [id, name]).
#[wasm_bindgen(js_name = methodsJson)]
pub fn methods_json(mode: &str) -> Result<String, JsError> {
    let mode: Mode = mode.parse().map_err(js_err)?;
    let bank = crate::Bank::new(mode);
    let names: Vec<(&str, &str)> = (0..bank.primaries()).map(|j| bank.method(j)).collect();
    Ok(serde_json::to_string(&names).expect("plain data"))
}
