//! Names and indices of the forecasters (algorithms.md §1.1).
//!
//! The index is the "method" a forecast reports, as in the original NWS library; the id is
//! the one name used for a forecaster across Rust, TypeScript, the record schema and the UI.

use serde::{Deserialize, Serialize};

/// How a bank forecasts: Faithful reproduces the original library, quirks included; Improved is the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Faithful,
    #[default]
    Improved,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "faithful" => Ok(Mode::Faithful),
            "improved" => Ok(Mode::Improved),
            _ => Err(format!(
                "unknown mode '{s}' (expected faithful or improved)"
            )),
        }
    }
}

/// A forecaster of the bank: its reported index, stable id and display name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MethodInfo {
    /// Index reported as the forecast's method (0–17 are the original primaries).
    pub index: usize,
    /// Stable machine name, e.g. `median_31`.
    pub id: &'static str,
    /// Display name, e.g. `Median Window 31`.
    pub name: &'static str,
}

/// Which rule a forecaster follows; the bank turns these into state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Rule {
    LastValue,
    RunningMean,
    /// `pred = pred + gain·(x − pred)`.
    ExpSmooth(f64),
    /// Median of the last `w` values.
    Median(usize),
    /// Mean of the last `w` values.
    SlidingMean(usize),
    /// 30 % trimmed mean of the last `w` values.
    TrimmedMean(usize),
    /// Median over an adaptive window: (start, min, max, step).
    AdaptiveMedian(usize, usize, usize, usize),
    /// Quantile `q` of the last `w` values (improved mode; RTT series favour a low quantile).
    Quantile(usize, f64),
    /// Remedian (Rousseeuw & Bassett 1990): the median of the medians of the last `count`
    /// consecutive windows of `w` values (each window's median taken when it ended), a
    /// robust long-run level over w·count values at the cost of a median of `count`.
    Remedian(usize, usize),
    /// First-order autoregression around a smoothed level, fitted online with gain `g`
    /// (after the first 1/g values, before which the statistics are plain means): the
    /// forecast is `level + φ·(x − level)` with φ the lag-one autocorrelation of the
    /// deviations from the level, within ±0.99.
    Ar1(f64),
}

/// The 18 primaries of the original library, in index order.
pub const NWS_PRIMARIES: [(Rule, &str, &str); 18] = [
    (Rule::LastValue, "last_value", "Last Value"),
    (Rule::RunningMean, "running_mean", "Running Mean"),
    (Rule::ExpSmooth(0.05), "exp_smooth_5", "Exp Smooth 5%"),
    (Rule::ExpSmooth(0.10), "exp_smooth_10", "Exp Smooth 10%"),
    (Rule::ExpSmooth(0.15), "exp_smooth_15", "Exp Smooth 15%"),
    (Rule::ExpSmooth(0.20), "exp_smooth_20", "Exp Smooth 20%"),
    (Rule::ExpSmooth(0.30), "exp_smooth_30", "Exp Smooth 30%"),
    (Rule::ExpSmooth(0.40), "exp_smooth_40", "Exp Smooth 40%"),
    (Rule::ExpSmooth(0.50), "exp_smooth_50", "Exp Smooth 50%"),
    (Rule::ExpSmooth(0.75), "exp_smooth_75", "Exp Smooth 75%"),
    (Rule::Median(31), "median_31", "Median Window 31"),
    (Rule::Median(5), "median_5", "Median Window 5"),
    (
        Rule::SlidingMean(31),
        "sliding_mean_31",
        "Sliding Mean Window 31",
    ),
    (
        Rule::SlidingMean(5),
        "sliding_mean_5",
        "Sliding Mean Window 5",
    ),
    (
        Rule::TrimmedMean(31),
        "trimmed_mean_31",
        "30% Trimmed Mean Window 31",
    ),
    (
        Rule::TrimmedMean(51),
        "trimmed_mean_51",
        "30% Trimmed Mean Window 51",
    ),
    (
        Rule::AdaptiveMedian(10, 5, 21, 1),
        "adaptive_median_5_21",
        "Adaptive Median 5-21",
    ),
    (
        Rule::AdaptiveMedian(30, 21, 51, 5),
        "adaptive_median_21_51",
        "Adaptive Median 21-51",
    ),
];

/// Forecasters that improved mode may add to the 18 primaries. Which of them the default
/// improved bank uses is decided by measurement (`examples/evaluate.rs`, README "Forecast
/// accuracy"): at present Exp Smooth 1 %, the remedian and the AR(1)
/// (`bank::IMPROVED_EXTRAS`).
pub const CANDIDATES: [(Rule, &str, &str); 12] = [
    (
        Rule::Remedian(51, 9),
        "remedian_51x9",
        "Remedian 9 x Median Window 51",
    ),
    (Rule::ExpSmooth(0.01), "exp_smooth_1", "Exp Smooth 1%"),
    (Rule::ExpSmooth(0.02), "exp_smooth_2", "Exp Smooth 2%"),
    (Rule::Median(101), "median_101", "Median Window 101"),
    (
        Rule::TrimmedMean(101),
        "trimmed_mean_101",
        "30% Trimmed Mean Window 101",
    ),
    (
        Rule::SlidingMean(101),
        "sliding_mean_101",
        "Sliding Mean Window 101",
    ),
    (Rule::Median(3), "median_3", "Median Window 3"),
    (
        Rule::Quantile(31, 0.25),
        "quantile_25_31",
        "25% Quantile Window 31",
    ),
    (Rule::Quantile(5, 0.0), "min_5", "Minimum Window 5"),
    (
        Rule::AdaptiveMedian(50, 31, 101, 5),
        "adaptive_median_31_101",
        "Adaptive Median 31-101",
    ),
    (
        Rule::AdaptiveMedian(10, 3, 31, 1),
        "adaptive_median_3_31",
        "Adaptive Median 3-31",
    ),
    (Rule::Ar1(0.01), "ar1_1", "AR(1) around Exp Smooth 1%"),
];

/// Id and display name of a rule from the catalogues above.
pub fn describe(rule: &Rule) -> (&'static str, &'static str) {
    NWS_PRIMARIES
        .iter()
        .chain(CANDIDATES.iter())
        .find(|(r, _, _)| r == rule)
        .map(|&(_, id, name)| (id, name))
        .unwrap_or(("custom", "Custom forecaster"))
}
