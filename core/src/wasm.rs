//! WebAssembly bindings (wasm-bindgen): the page's view of a [`Series`], of a
//! [`crate::probed::ProbedSeries`] and of the site ranking. The page's objects come in as
//! they are and are read field by field; tables, records and reports go out as JSON text
//! written by the core's own writers, which the typed wrapper `web/src/forecast.ts` parses.

use crate::method::Mode;
use crate::probed::{self, Observation, Options, Outcome, Overrides};
use crate::rank::{self, Site};
use crate::record::{Metric, Probe, Record, Status};
use crate::series::Series;
use crate::stats;
use crate::stats::Summary;
use crate::timeout::Bounds;
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
///
/// Its saved state ([`crate::state`]) is not bound: the page rebuilds a series from its
/// records ([`WasmProbedSeries::replay`]), and reading the state back needs a JSON reader
/// that was half of this module (60 KB of its 139 KB gzip).
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

// The page's objects (web/src/forecast.ts) are read field by field, as JavaScript holds them,
// rather than parsed from JSON: serde's derived readers of records, probes and options cost
// the module about 20 KB gzip, a tenth of the page's size goal. What comes back is JSON
// written by the core's own writers (`Record::to_line` is what the CLI writes too).
#[wasm_bindgen]
extern "C" {
    /// `ProbedSeriesOptions` of web/src/forecast.ts.
    pub type SeriesOptions;
    #[wasm_bindgen(method, getter)]
    fn metric(this: &SeriesOptions) -> String;
    #[wasm_bindgen(method, getter)]
    fn source(this: &SeriesOptions) -> String;
    #[wasm_bindgen(method, getter)]
    fn to(this: &SeriesOptions) -> String;
    #[wasm_bindgen(method, getter)]
    fn from(this: &SeriesOptions) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn transport(this: &SeriesOptions) -> Option<String>;
    #[wasm_bindgen(method, getter = periodMs)]
    fn period_ms(this: &SeriesOptions) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn mode(this: &SeriesOptions) -> Option<String>;
    #[wasm_bindgen(method, getter = keepErrors)]
    fn keep_errors(this: &SeriesOptions) -> Option<bool>;
    #[wasm_bindgen(method, getter)]
    fn kind(this: &SeriesOptions) -> Option<String>;
    #[wasm_bindgen(method, getter = floorMs)]
    fn floor_ms(this: &SeriesOptions) -> Option<f64>;
    #[wasm_bindgen(method, getter = ceilingMs)]
    fn ceiling_ms(this: &SeriesOptions) -> Option<f64>;
    #[wasm_bindgen(method, getter = penaltyMs)]
    fn penalty_ms(this: &SeriesOptions) -> Option<f64>;
    #[wasm_bindgen(method, getter = initialMs)]
    fn initial_ms(this: &SeriesOptions) -> Option<f64>;

    /// `ProbeObservation` of web/src/forecast.ts: `durationMs` is the probe's duration when
    /// `status` is "ok", its elapsed time when "timeout".
    pub type ProbeObservation;
    #[wasm_bindgen(method, getter = timestampMs)]
    fn timestamp_ms(this: &ProbeObservation) -> f64;
    #[wasm_bindgen(method, getter)]
    fn status(this: &ProbeObservation) -> String;
    #[wasm_bindgen(method, getter)]
    fn value(this: &ProbeObservation) -> Option<f64>;
    #[wasm_bindgen(method, getter = durationMs)]
    fn duration_ms(this: &ProbeObservation) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn error(this: &ProbeObservation) -> Option<String>;
    #[wasm_bindgen(method, getter = timeoutMs)]
    fn timeout_ms(this: &ProbeObservation) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn probe(this: &ProbeObservation) -> Option<JsProbe>;
    #[wasm_bindgen(method, getter)]
    fn from(this: &ProbeObservation) -> Option<String>;

    /// A saved record (`Record` of web/src/record.ts), of which a replay reads what
    /// [`Observation::of_record`] reads.
    pub type JsRecord;
    #[wasm_bindgen(method, getter)]
    fn timestamp_ms(this: &JsRecord) -> f64;
    #[wasm_bindgen(method, getter)]
    fn metric(this: &JsRecord) -> String;
    #[wasm_bindgen(method, getter)]
    fn status(this: &JsRecord) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn value(this: &JsRecord) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn timeout_ms(this: &JsRecord) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn error(this: &JsRecord) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn probe(this: &JsRecord) -> Option<JsProbe>;
    #[wasm_bindgen(method, getter)]
    fn from(this: &JsRecord) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn seq(this: &JsRecord) -> Option<f64>;

    /// A record's `probe` (`Probe` of web/src/record.ts).
    pub type JsProbe;
    #[wasm_bindgen(method, getter)]
    fn transport(this: &JsProbe) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn payload_bytes(this: &JsProbe) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn nagle(this: &JsProbe) -> Option<bool>;
    #[wasm_bindgen(method, getter)]
    fn streams(this: &JsProbe) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn sndbuf_bytes(this: &JsProbe) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn rcvbuf_bytes(this: &JsProbe) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn raw_ms(this: &JsProbe) -> Option<f64>;
    #[wasm_bindgen(method, getter)]
    fn rtt_subtracted_ms(this: &JsProbe) -> Option<f64>;

    /// `SiteForecast` of web/src/forecast.ts.
    pub type JsSite;
    #[wasm_bindgen(method, getter)]
    fn url(this: &JsSite) -> String;
    #[wasm_bindgen(method, getter)]
    fn rtt(this: &JsSite) -> Option<JsEstimate>;
    #[wasm_bindgen(method, getter)]
    fn bandwidth(this: &JsSite) -> Option<JsEstimate>;
    #[wasm_bindgen(method, getter)]
    fn unreachable(this: &JsSite) -> Option<bool>;

    /// `Estimate` of web/src/forecast.ts.
    pub type JsEstimate;
    #[wasm_bindgen(method, getter)]
    fn value(this: &JsEstimate) -> f64;
    #[wasm_bindgen(method, getter)]
    fn error(this: &JsEstimate) -> f64;
}

/// A name of the schema (a metric, a status, a transport, a kind) as its Rust value, by the
/// same derived reader that reads it from JSON.
fn named<T: serde::de::DeserializeOwned>(field: &str, name: &str) -> Result<T, String> {
    use serde::de::IntoDeserializer;
    T::deserialize(name.into_deserializer())
        .map_err(|e: serde::de::value::Error| format!("{field}: {e}"))
}

/// A count (bytes, streams, a sequence number) given as a JavaScript number.
fn whole<T: TryFrom<u64>>(field: &str, x: Option<f64>) -> Result<Option<T>, String> {
    x.map(|x| {
        let n = (x.fract() == 0.0 && (0.0..1.8e19).contains(&x)).then_some(x as u64);
        n.and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("{field}: {x} is not a count"))
    })
    .transpose()
}

impl JsProbe {
    fn probe(&self) -> Result<Probe, String> {
        Ok(Probe {
            transport: self
                .transport()
                .map(|t| named("probe.transport", &t))
                .transpose()?,
            payload_bytes: whole("probe.payload_bytes", self.payload_bytes())?,
            nagle: self.nagle(),
            streams: whole("probe.streams", self.streams())?,
            sndbuf_bytes: whole("probe.sndbuf_bytes", self.sndbuf_bytes())?,
            rcvbuf_bytes: whole("probe.rcvbuf_bytes", self.rcvbuf_bytes())?,
            raw_ms: self.raw_ms(),
            rtt_subtracted_ms: self.rtt_subtracted_ms(),
        })
    }
}

impl ProbeObservation {
    fn observation(&self) -> Result<Observation, String> {
        let outcome = match (named("status", &self.status())?, self.value()) {
            (Status::Ok, Some(value)) => Outcome::Measured {
                value,
                duration_ms: self.duration_ms(),
            },
            (Status::Ok, None) => return Err("a probe with status ok needs a value".into()),
            (Status::Timeout, _) => Outcome::TimedOut {
                elapsed_ms: self.duration_ms().or(self.timeout_ms()).unwrap_or(0.0),
            },
            (Status::Error, _) => Outcome::Failed {
                error: self.error().unwrap_or_else(|| "error".into()),
            },
        };
        Ok(Observation {
            probe: self.probe().map(|p| p.probe()).transpose()?,
            from: self.from(),
            ..Observation::new(self.timestamp_ms(), outcome, self.timeout_ms())
        })
    }
}

impl JsRecord {
    /// The record with the fields a replay reads; the others do not change the series.
    fn record(&self, source: &str, to: &str) -> Result<Record, String> {
        let metric: Metric = named("metric", &self.metric())?;
        let status = self.status().map(|s| named("status", &s)).transpose()?;
        Ok(Record {
            status: status.unwrap_or_default(),
            value: self.value(),
            from: self.from(),
            seq: whole("seq", self.seq())?,
            timeout_ms: self.timeout_ms(),
            error: self.error(),
            probe: self.probe().map(|p| p.probe()).transpose()?,
            ..Record::new(self.timestamp_ms(), source, metric, 0.0, to)
        })
    }
}

/// A probed series (see [`crate::probed`]): the page's series of probe results with their
/// timeout, forecasts and records.
#[wasm_bindgen(js_name = ProbedSeries)]
pub struct WasmProbedSeries {
    series: probed::ProbedSeries,
}

#[derive(serde::Serialize)]
struct Observed<'a> {
    record: &'a Record,
    state: &'a probed::State,
}

#[wasm_bindgen(js_class = ProbedSeries)]
impl WasmProbedSeries {
    /// A new series from its options (`ProbedSeriesOptions`: metric, source, to, and
    /// optionally from, transport, periodMs, mode, keepErrors, kind, floorMs, ceilingMs,
    /// penaltyMs, initialMs).
    #[wasm_bindgen(constructor)]
    pub fn new(o: &SeriesOptions) -> Result<WasmProbedSeries, JsError> {
        Self::options(o)
            .and_then(|options| {
                probed::ProbedSeries::new(options.config()).map_err(|e| e.to_string())
            })
            .map(|series| Self { series })
            .map_err(js_err)
    }

    fn options(o: &SeriesOptions) -> Result<Options, String> {
        Ok(Options {
            metric: named("metric", &o.metric())?,
            transport: o.transport().map(|t| named("transport", &t)).transpose()?,
            source: o.source(),
            from: o.from(),
            to: o.to(),
            period_ms: o.period_ms(),
            mode: o.mode().map(|m| m.parse()).transpose()?.unwrap_or_default(),
            keep_errors: o.keep_errors(),
            overrides: Overrides {
                kind: o.kind().map(|k| named("kind", &k)).transpose()?,
                floor_ms: o.floor_ms(),
                ceiling_ms: o.ceiling_ms(),
                penalty_ms: o.penalty_ms(),
                initial_ms: o.initial_ms(),
            },
        })
    }

    /// The timeout of the next probe, ms; undefined for a statistic.
    #[wasm_bindgen(js_name = timeoutMs)]
    pub fn timeout_ms(&self) -> Option<f64> {
        self.series.timeout_ms()
    }

    /// Feeds one probe (`ProbeObservation`); returns `{record, state}` as JSON.
    pub fn observe(&mut self, o: &ProbeObservation) -> Result<String, JsError> {
        let record = self.series.observe(o.observation().map_err(js_err)?);
        let state = self.series.state();
        let out = Observed {
            record: &record,
            state: &state,
        };
        Ok(serde_json::to_string(&out).expect("plain data"))
    }

    /// Feeds values that were not probes (an imported series, which the page gives the kind
    /// "statistic": no timeout), oldest first, each through `observe` as a measurement at its
    /// time `times[i]`; returns the forecast after each as `[value, error, method, …]`, the
    /// method as its index in `methodsJson`, NaN where there is none yet. One call for a whole
    /// file: a call per value would spend its time on the JSON of records nobody keeps.
    #[wasm_bindgen(js_name = observeValues)]
    pub fn observe_values(&mut self, times: &[f64], values: &[f64]) -> Vec<f64> {
        let mut out = Vec::with_capacity(3 * values.len());
        for (&t, &value) in times.iter().zip(values) {
            let measured = Outcome::Measured {
                value,
                duration_ms: None,
            };
            self.series.observe(Observation::new(t, measured, None));
            match (self.series.next(), self.series.values().forecast()) {
                (Some(next), Some(f)) => out.extend([next.value, next.error, f.mse.method as f64]),
                _ => out.extend([f64::NAN; 3]),
            }
        }
        out
    }

    /// Rebuilds the series from its saved records, oldest first, through the same code as
    /// live probes ([`probed::ProbedSeries::replay`]); returns how many were fed.
    pub fn replay(&mut self, records: Vec<JsRecord>) -> Result<u32, JsError> {
        let records = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.record("replay", "replay")
                    .map_err(|e| js_err(format!("record {i}: {e}")))
            })
            .collect::<Result<Vec<Record>, JsError>>()?;
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

/// Ranks sites (`SiteForecast`s) by the predicted time to fetch `bytes`, errors scaled by
/// `k`; JSON array of `{url, time_ms, low_ms, high_ms, standing}` (null for an unknown time,
/// and for an unbounded `high_ms`).
#[wasm_bindgen(js_name = rankJson)]
pub fn rank_json(sites: Vec<JsSite>, bytes: f64, k: f64) -> String {
    let estimate = |e: Option<JsEstimate>| {
        e.map(|e| rank::Estimate {
            value: e.value(),
            error: e.error(),
        })
    };
    let sites: Vec<Site> = sites
        .iter()
        .map(|s| Site {
            url: s.url(),
            rtt: estimate(s.rtt()),
            bandwidth: estimate(s.bandwidth()),
            unreachable: s.unreachable().unwrap_or(false),
        })
        .collect();
    serde_json::to_string(&rank::rank(&sites, bytes, k)).expect("plain data")
}

/// The rate of a timed transfer less the predicted RTT ([`crate::transfer::rate_minus_rtt`],
/// the rule the `nowcast` command uses): `[mbit_per_s, subtracted_ms]`, or empty when
/// `raw_ms` is not a positive time.
#[wasm_bindgen(js_name = transferRate)]
pub fn transfer_rate(bytes: f64, raw_ms: f64, predicted_rtt_ms: Option<f64>) -> Vec<f64> {
    crate::transfer::rate_minus_rtt(bytes, raw_ms, predicted_rtt_ms)
        .map(|r| vec![r.mbit_per_s, r.subtracted_ms])
        .unwrap_or_default()
}

/// The automatic size of a bandwidth probe ([`crate::transfer::auto_size`], the rule
/// `nowcast tcp --size auto` uses), bytes; on a path whose predicted RTT is known, long
/// enough to be timed there.
#[wasm_bindgen(js_name = autoSize)]
pub fn auto_size(
    predicted_mbit_s: Option<f64>,
    max_bytes: f64,
    predicted_rtt_ms: Option<f64>,
) -> f64 {
    crate::transfer::auto_size(
        predicted_mbit_s,
        predicted_rtt_ms,
        max_bytes.max(0.0) as u64,
    ) as f64
}

/// How long an automatically sized transfer should last, ms
/// ([`crate::transfer::auto_target_ms`]).
#[wasm_bindgen(js_name = autoTargetFor)]
pub fn auto_target_for(predicted_rtt_ms: Option<f64>) -> f64 {
    crate::transfer::auto_target_ms(predicted_rtt_ms)
}

/// What a transfer needs to be timed on a long path ([`crate::transfer::timed_bytes`]),
/// bytes; 0 without a rate or an RTT.
#[wasm_bindgen(js_name = timedBytes)]
pub fn timed_bytes(
    predicted_mbit_s: Option<f64>,
    predicted_rtt_ms: Option<f64>,
    max_bytes: f64,
) -> f64 {
    crate::transfer::timed_bytes(
        predicted_mbit_s,
        predicted_rtt_ms,
        max_bytes.max(0.0) as u64,
    ) as f64
}

/// The first run's next try ([`crate::transfer::burst_next`]) after a try that read `mbit_s`
/// over a raw time of `raw_ms`, bytes; undefined when the tries are over.
#[wasm_bindgen(js_name = burstNext)]
pub fn burst_next(
    bytes: f64,
    mbit_s: f64,
    raw_ms: f64,
    max_bytes: f64,
    predicted_rtt_ms: Option<f64>,
) -> Option<f64> {
    crate::transfer::burst_next(
        bytes.max(0.0) as u64,
        mbit_s,
        raw_ms,
        predicted_rtt_ms,
        max_bytes.max(0.0) as u64,
    )
    .map(|b| b as f64)
}

/// The automatic size's target duration, ms ([`crate::transfer::AUTO_TARGET_MS`]).
#[wasm_bindgen(js_name = autoTargetMs)]
pub fn auto_target_ms() -> f64 {
    crate::transfer::AUTO_TARGET_MS
}

/// The smallest automatic size, bytes ([`crate::transfer::AUTO_MIN_BYTES`]).
#[wasm_bindgen(js_name = autoMinBytes)]
pub fn auto_min_bytes() -> f64 {
    crate::transfer::AUTO_MIN_BYTES as f64
}

/// Whether a forecast's error after `values` values says anything
/// ([`crate::record::error_known`]).
#[wasm_bindgen(js_name = errorKnown)]
pub fn error_known(values: f64, error: f64) -> bool {
    crate::record::error_known(values.max(0.0) as u64, error)
}

/// Jitter of consecutive RTTs ([`crate::stats::jitter`]); undefined below two values.
#[wasm_bindgen]
pub fn jitter(rtts: &[f64]) -> Option<f64> {
    crate::stats::jitter(rtts)
}
