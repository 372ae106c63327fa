//! The shared core of Nowcast: the Network Weather Service forecaster bank, error
//! statistics, adaptive timeouts, the IEPM-BW estimators, the measurement record and the
//! reader of measurement files (`import`), the probed series that every probe of the product
//! keeps, the ranking of sites by predicted download time, and Wren's passive available
//! bandwidth. Deterministic code (values and times in, numbers and records out; no I/O, no
//! clock); the same crate runs natively in the `nowcast` command and as WebAssembly in the
//! page.

pub mod aggregate;
pub mod bank;
pub mod calendar;
pub mod errors;
pub mod iepm;
pub mod import;
pub(crate) mod isa;
pub mod json;
pub(crate) mod json_column;
pub mod method;
pub mod primaries;
pub mod primary;
pub mod probed;
pub mod quote;
pub mod rank;
pub mod record;
pub mod series;
pub mod state;
pub mod stats;
pub mod target;
pub mod timeout;
pub mod transfer;
pub mod window;
pub mod wren;

// The page's two WebAssembly modules (scripts/build-wasm.sh builds the crate once with each
// feature): the forecasters it loads on first open, and the file readers it loads when a
// file is imported or exported.
#[cfg(all(target_arch = "wasm32", feature = "wasm-page"))]
pub mod wasm;
#[cfg(all(target_arch = "wasm32", feature = "wasm-reader"))]
pub mod wasm_reader;

pub use bank::{Bank, Forecast, PrimaryRow, Reporting, Selected};
pub use errors::Accum;
pub use method::Mode;
pub use primaries::{Next, NextForecasts, Primaries};
pub use probed::ProbedSeries;
pub use series::Series;

/// Why a value, a series or a saved state was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForecastError {
    #[error("value {0} is not a finite number")]
    NotFinite(f64),
    #[error("value {0:e} is outside the supported range of ±1e100")]
    OutOfRange(f64),
    #[error("the series is empty")]
    Empty,
    #[error("saved state: {0}")]
    State(String),
    #[error("{0}")]
    Invalid(String),
}
