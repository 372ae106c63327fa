//! Saving and restoring a bank, so that a page can resume its forecasters after a reload and
//! make bit-identical next forecasts. The format is JSON with a format tag and a version;
//! floating-point numbers round-trip exactly (shortest representation on write, correctly
//! rounded parsing on read).

use crate::bank::Bank;
use crate::ForecastError;
use serde::{Deserialize, Serialize};

/// Tag of a saved bank.
pub const FORMAT: &str = "nowcast.forecaster-state";
/// Version of the saved layout; bumped whenever the bank's fields or forecasters change.
pub const VERSION: u32 = 1;

#[derive(Serialize)]
struct SavedRef<'a> {
    format: &'a str,
    version: u32,
    bank: &'a Bank,
}

#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Deserialize)]
struct Saved {
    bank: Bank,
}

/// Serialises `bank` to its saved form.
pub fn save(bank: &Bank) -> String {
    serde_json::to_string(&SavedRef {
        format: FORMAT,
        version: VERSION,
        bank,
    })
    .expect("a bank holds only finite numbers and plain data")
}

/// Restores a bank saved by [`save`], refusing another format or another version.
pub fn restore(text: &str) -> Result<Bank, ForecastError> {
    let err = |m: String| ForecastError::State(m);
    let header: Header = serde_json::from_str(text)
        .map_err(|e| err(format!("not a saved forecaster state: {e}")))?;
    if header.format != FORMAT {
        return Err(err(format!(
            "format is '{}', expected '{FORMAT}'",
            header.format
        )));
    }
    if header.version != VERSION {
        return Err(err(format!(
            "version {} cannot be restored by this build (it reads version {VERSION}); start a new bank",
            header.version
        )));
    }
    let saved: Saved = serde_json::from_str(text).map_err(|e| err(format!("damaged: {e}")))?;
    saved.bank.validate().map_err(err)?;
    Ok(saved.bank)
}
