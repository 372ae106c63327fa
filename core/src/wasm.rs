//! WebAssembly bindings (wasm-bindgen): the page's view of a [`Series`], of a
//! [`crate::probed::ProbedSeries`] and of the site ranking. Tables, records and reports
//! cross the boundary as JSON text; the typed wrapper `web/src/forecast.ts` parses them.

use crate::bank::Mode;
use crate::probed::{self, Observation, Options, Outcome};
use crate::rank::{self, Site};
use crate::record::{Probe, Record, Status};
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

    /// Records a probe that timed out after `elapsed`; returns the value fed back.
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
    /// "rfc6298", "windowed_k2_w20"); undefined until it has data.
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

/// A probed series (see [`crate::probed`]): the page's series of probe results with their
/// timeout, forecasts and records.
#[wasm_bindgen(js_name = ProbedSeries)]
pub struct WasmProbedSeries {
    series: probed::ProbedSeries,
}

/// One probe as the page reports it (JSON): `duration_ms` is the probe's duration when
/// `status` is "ok", its elapsed time when "timeout".
#[derive(serde::Deserialize)]
struct ObservationIn {
    timestamp_ms: f64,
    status: Status,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    duration_ms: Option<f64>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    timeout_ms: Option<f64>,
    #[serde(default)]
    probe: Option<Probe>,
    #[serde(default)]
    from: Option<String>,
}

impl ObservationIn {
    fn observation(self) -> Result<Observation, JsError> {
        let outcome = match (self.status, self.value) {
            (Status::Ok, Some(value)) => Outcome::Measured {
                value,
                duration_ms: self.duration_ms,
            },
            (Status::Ok, None) => return Err(js_err("a probe with status ok needs a value")),
            (Status::Timeout, _) => Outcome::TimedOut {
                elapsed_ms: self.duration_ms.or(self.timeout_ms).unwrap_or(0.0),
            },
            (Status::Error, _) => Outcome::Failed {
                error: self.error.unwrap_or_else(|| "error".into()),
            },
        };
        Ok(Observation {
            probe: self.probe,
            from: self.from,
            ..Observation::new(self.timestamp_ms, outcome, self.timeout_ms)
        })
    }
}

#[derive(serde::Serialize)]
struct Observed<'a> {
    record: &'a Record,
    state: &'a probed::State,
}

#[wasm_bindgen(js_class = ProbedSeries)]
impl WasmProbedSeries {
    /// A new series from its options (JSON: metric, source, to, and optionally transport,
    /// from, period_ms, mode, keep_errors, kind, floor_ms, ceiling_ms, penalty_ms,
    /// initial_ms).
    #[wasm_bindgen(constructor)]
    pub fn new(options: &str) -> Result<WasmProbedSeries, JsError> {
        let options: Options = serde_json::from_str(options).map_err(js_err)?;
        Ok(Self {
            series: probed::ProbedSeries::new(options.config()).map_err(js_err)?,
        })
    }

    /// The timeout of the next probe, ms; undefined for a statistic.
    #[wasm_bindgen(js_name = timeoutMs)]
    pub fn timeout_ms(&self) -> Option<f64> {
        self.series.timeout_ms()
    }

    /// Feeds one probe (JSON, see `ObservationIn`); returns `{record, state}` as JSON.
    pub fn observe(&mut self, observation: &str) -> Result<String, JsError> {
        let o: ObservationIn = serde_json::from_str(observation).map_err(js_err)?;
        let record = self.series.observe(o.observation()?);
        let state = self.series.state();
        let out = Observed {
            record: &record,
            state: &state,
        };
        Ok(serde_json::to_string(&out).expect("plain data"))
    }

    /// Rebuilds the series from its saved records (a JSON array, oldest first) through the
    /// same code as live probes; returns how many were fed.
    pub fn replay(&mut self, records: &str) -> Result<u32, JsError> {
        let records: Vec<Record> = serde_json::from_str(records).map_err(js_err)?;
        let n = self.series.replay(&records).map_err(js_err)?;
        Ok(n as u32)
    }

    /// `{next, mae, count, timeouts, seq}` as JSON.
    #[wasm_bindgen(js_name = stateJson)]
    pub fn state_json(&self) -> String {
        serde_json::to_string(&self.series.state()).expect("plain data")
    }

    /// Each measured value minus the forecast made before it, oldest first.
    pub fn errors(&self) -> Vec<f64> {
        self.series.errors().to_vec()
    }

    /// Every primary forecaster of the values' bank (JSON array, as `Forecaster.tableJson`).
    #[wasm_bindgen(js_name = tableJson)]
    pub fn table_json(&self) -> String {
        serde_json::to_string(&self.series.values().bank().table()).expect("plain data")
    }

    /// Sets the period written to the next records, ms (undefined: none).
    #[wasm_bindgen(js_name = setPeriodMs)]
    pub fn set_period_ms(&mut self, period_ms: Option<f64>) -> Result<(), JsError> {
        self.series.set_period_ms(period_ms).map_err(js_err)
    }
}

/// Ranks sites (JSON array of `{url, rtt?, bandwidth?, unreachable?}`) by the predicted time
/// to fetch `bytes`, errors scaled by `k`; JSON array of `{url, time_ms, low_ms, high_ms,
/// standing}` (null for an unknown time, and for an unbounded `high_ms`).
#[wasm_bindgen(js_name = rankJson)]
pub fn rank_json(sites: &str, bytes: f64, k: f64) -> Result<String, JsError> {
    let sites: Vec<Site> = serde_json::from_str(sites).map_err(js_err)?;
    Ok(serde_json::to_string(&rank::rank(&sites, bytes, k)).expect("plain data"))
}
