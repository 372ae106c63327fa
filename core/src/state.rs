//! Saving and restoring forecaster state, so that a page can resume its forecasters after a
//! reload and make bit-identical next forecasts. The format is JSON with a format tag and a
//! version; floating-point numbers round-trip exactly (shortest representation on write,
//! correctly rounded parsing on read).

use crate::ForecastError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Version of the saved layout; bumped whenever a saved type's fields or forecasters change.
/// 2: faithful adaptive medians and window totals as the original keeps them; improved mode's
/// aggregated forecasts and the target-miss-rate timeout rule.
/// 3: improved mode's two-level aggregates and its two added forecasters.
/// 4: the aggregates' top level learns from the loss itself (no scale, no clip); the MSE
/// aggregate without exponentiated gradient.
/// 5: improved mode's third added forecaster, an AR(1) around Exp Smooth 1 %.
pub const VERSION: u32 = 5;

/// Something that can be saved: its format tag, and the checks a restored copy must pass.
pub trait Saved: Serialize + DeserializeOwned {
    const FORMAT: &'static str;
    fn validate(&self) -> Result<(), String>;
}

#[derive(Serialize)]
struct Out<'a, T> {
    format: &'a str,
    version: u32,
    state: &'a T,
}

#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Deserialize)]
struct In<T> {
    state: T,
}

/// Serialises `value` to its saved form.
pub fn save<T: Saved>(value: &T) -> String {
    serde_json::to_string(&Out {
        format: T::FORMAT,
        version: VERSION,
        state: value,
    })
    .expect("saved state holds only finite numbers and plain data")
}

/// Restores a value saved by [`save`], refusing another format or another version.
pub fn restore<T: Saved>(text: &str) -> Result<T, ForecastError> {
    let err = |m: String| ForecastError::State(m);
    let header: Header = serde_json::from_str(text)
        .map_err(|e| err(format!("not a saved forecaster state: {e}")))?;
    if header.format != T::FORMAT {
        return Err(err(format!(
            "format is '{}', expected '{}'",
            header.format,
            T::FORMAT
        )));
    }
    if header.version != VERSION {
        let why = if header.version < VERSION {
            "it was saved by an older build whose forecasters have changed since"
        } else {
            "it was saved by a newer build"
        };
        return Err(err(format!(
            "version {} cannot be restored by this build (it reads version {VERSION}): {why}; start afresh",
            header.version
        )));
    }
    let saved: In<T> = serde_json::from_str(text).map_err(|e| err(format!("damaged: {e}")))?;
    saved.state.validate().map_err(err)?;
    Ok(saved.state)
}
