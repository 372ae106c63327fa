//! The page's second WebAssembly module (feature `wasm-reader`): the readers and writers of
//! files (`crate::record`, `crate::import`), the same code as `nowcast forecast`, so the page
//! keeps no TypeScript twin of them. The page loads it only when a file is imported or
//! exported (web/src/forecast.ts `loadReader`), so that what it loads on first open stays
//! small; the forecasters are in the first module (`crate::wasm`, feature `wasm-page`).

use crate::import::{Format, SeriesInfo, MAX_LINE};
use crate::json::{longer_than, Json, Kind, Parser, TooLong};
use crate::record::{Record, RecordError};
use std::borrow::Cow;
use wasm_bindgen::prelude::*;

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

// The readers of files (`crate::record`, `crate::import`): the same code as `nowcast
// forecast`, so the page keeps no TypeScript twin of them. JSON is parsed by the browser's
// own `JSON.parse` and read through [`Json`] (serde_json's reader would add about 15 KB gzip
// to the module); what comes back is JSON text written by serde_json, which the typed wrapper
// parses.

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = JSON, js_name = parse, catch)]
    fn json_parse(text: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_namespace = Array, js_name = isArray)]
    fn is_array(v: &JsValue) -> bool;
    #[wasm_bindgen(js_namespace = Object, js_name = hasOwn)]
    fn has_own(o: &JsValue, key: &str) -> bool;
    #[wasm_bindgen(js_namespace = Reflect, js_name = get)]
    fn get_key(o: &JsValue, key: &str) -> JsValue;
    #[wasm_bindgen(js_namespace = Reflect, js_name = get)]
    fn get_index(o: &JsValue, index: u32) -> JsValue;

    /// A string or an array, of which only the length is read.
    type HasLength;
    #[wasm_bindgen(method, getter)]
    fn length(this: &HasLength) -> u32;
}

fn length_of(v: &JsValue) -> u32 {
    use wasm_bindgen::JsCast;
    v.unchecked_ref::<HasLength>().length()
}

/// A value made by `JSON.parse`, read as [`Json`].
#[derive(Clone)]
struct JsJson(JsValue);

impl Json for JsJson {
    fn kind(&self) -> Kind {
        let v = &self.0;
        if v.is_null() {
            Kind::Null
        } else if v.as_bool().is_some() {
            Kind::Bool
        } else if v.as_f64().is_some() {
            Kind::Number
        } else if v.is_string() {
            Kind::String
        } else if is_array(v) {
            Kind::Array
        } else if v.is_object() {
            Kind::Object
        } else {
            Kind::Other
        }
    }

    fn get(&self, key: &str) -> Option<Self> {
        let own = self.kind() == Kind::Object && has_own(&self.0, key);
        own.then(|| JsJson(get_key(&self.0, key)))
    }

    fn number(&self) -> Option<f64> {
        self.0.as_f64()
    }

    fn boolean(&self) -> Option<bool> {
        self.0.as_bool()
    }

    fn text(&self, max_chars: usize) -> Option<Result<Cow<'_, str>, TooLong>> {
        if !self.0.is_string() {
            return None;
        }
        // A character is one or two UTF-16 units: a longer string is refused uncopied.
        if length_of(&self.0) as usize > 2 * max_chars {
            return Some(Err(TooLong));
        }
        let s = self.0.as_string().unwrap_or_default();
        Some(if longer_than(&s, max_chars) {
            Err(TooLong)
        } else {
            Ok(Cow::Owned(s))
        })
    }

    fn len(&self) -> usize {
        if is_array(&self.0) {
            length_of(&self.0) as usize
        } else {
            0
        }
    }

    fn at(&self, index: usize) -> Option<Self> {
        let i = u32::try_from(index).ok()?;
        (i < self.len() as u32).then(|| JsJson(get_index(&self.0, i)))
    }
}

/// The browser's `JSON.parse` as the readers' [`Parser`].
struct BrowserJson;

impl Parser for BrowserJson {
    type Doc = JsJson;
    type Value<'a> = JsJson;

    fn parse(&self, text: &str) -> Result<JsJson, String> {
        json_parse(text).map(JsJson).map_err(|e| {
            let message = e
                .is_object()
                .then(|| get_key(&e, "message").as_string())
                .flatten();
            message.unwrap_or_else(|| "JSON.parse failed".into())
        })
    }

    fn root(doc: &JsJson) -> JsJson {
        doc.clone()
    }
}

/// One NDJSON line read as [`Record::parse`] reads it, the JSON parsed by the browser (with
/// its leading blanks: a column is the line's).
fn parse_record(line: &str) -> Result<Record, RecordError> {
    let v = BrowserJson.parse(line).map_err(|e| RecordError {
        field: None,
        message: format!(
            "not valid JSON ({})",
            crate::quote::cut(&crate::json_column::line_error(&e, line), 200)
        ),
    })?;
    Record::read(&v)
}

/// A refused record or line: the field at fault (a dotted path) and what is wrong with it.
#[derive(serde::Serialize)]
struct Refused<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    message: &'a str,
}

impl<'a> Refused<'a> {
    fn record(line: Option<u64>, e: &'a RecordError) -> Self {
        Self {
            line,
            field: e.field.as_deref(),
            message: &e.message,
        }
    }
}

/// One NDJSON line read by [`Record::read`]: `{"record": …}` (as [`Record::to_line`] writes
/// it), or `{"error": {field?, message}}`.
#[wasm_bindgen(js_name = parseRecordJson)]
pub fn parse_record_json(line: &str) -> String {
    let out = match parse_record(line) {
        Ok(r) => serde_json::json!({ "record": r }),
        Err(e) => serde_json::json!({ "error": Refused::record(None, &e) }),
    };
    out.to_string()
}

/// NDJSON text read record by record with [`Record::read`]: `{"records": […], "errors":
/// [{line, field?, message}]}`. Lines are split at `\n` and trimmed; blank lines are skipped;
/// a line longer than [`MAX_LINE`] is refused unread; one bad line loses nothing else.
#[wasm_bindgen(js_name = readNdjsonJson)]
pub fn read_ndjson_json(text: &str) -> String {
    let too_long = format!("the line is longer than {MAX_LINE} bytes (the longest line read)");
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let n = Some(i as u64 + 1);
        if line.len() > MAX_LINE {
            errors.push(serde_json::json!(Refused {
                line: n,
                field: None,
                message: &too_long,
            }));
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        // With its indent, so that a column is the file's.
        match parse_record(line.trim_end()) {
            Ok(r) => records.push(r),
            Err(e) => errors.push(serde_json::json!(Refused::record(n, &e))),
        }
    }
    serde_json::json!({ "records": records, "errors": errors }).to_string()
}

/// A series of an imported file: what the reader says of it, and its points.
#[derive(serde::Serialize)]
struct ImportedSeries<'a> {
    #[serde(flatten)]
    info: &'a SeriesInfo,
    times: &'a [f64],
    values: &'a [f64],
}

/// A whole file read by [`crate::import::read_text`], the reader `nowcast forecast` uses (the
/// format decided from the content): `{format, series: [{name, metric, unit, to, transport,
/// column, clock, times, values}], errors (the first 100), error_count, unsupported,
/// notes}`; `format`, `unsupported` and a series' unknown fields are null.
#[wasm_bindgen(js_name = importTextJson)]
pub fn import_text_json(text: &str) -> String {
    let r = crate::import::read_text(text, BrowserJson);
    let series: Vec<ImportedSeries> = r
        .series
        .iter()
        .map(|(info, times, values)| ImportedSeries {
            info,
            times,
            values,
        })
        .collect();
    serde_json::json!({
        "format": r.format.map(Format::name),
        "series": series,
        "errors": r.errors,
        "error_count": r.error_count,
        "unsupported": r.unsupported,
        "notes": r.notes,
    })
    .to_string()
}

/// The page's CSV export ([`crate::import::export_csv`], which the import reads back one
/// series per metric, target and transport): `labels[i]` names the series whose records are
/// the NDJSON text `records[i]`. A record the reader refuses is an error naming its series
/// and line (the page's records come from the core, so none should be).
#[wasm_bindgen(js_name = exportCsv)]
pub fn export_csv(labels: Vec<String>, records: Vec<String>) -> Result<String, JsError> {
    if labels.len() != records.len() {
        return Err(js_err(format!(
            "{} labels for {} series of records",
            labels.len(),
            records.len()
        )));
    }
    let mut series = Vec::with_capacity(labels.len());
    for (label, text) in labels.iter().zip(&records) {
        let mut read = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r = parse_record(line)
                .map_err(|e| js_err(format!("series '{label}', record {}: {e}", i + 1)))?;
            read.push(r);
        }
        series.push(read);
    }
    Ok(crate::import::export_csv(
        labels
            .iter()
            .map(String::as_str)
            .zip(series.iter().map(Vec::as_slice)),
    ))
}

/// A page's record (its object as JSON text) as the core writes it ([`Record::to_line`], the
/// line `nowcast` writes): read by [`Record::read`] and written back, so an export has the
/// command's field order and checks. A record the reader refuses is an error naming the field.
#[wasm_bindgen(js_name = recordLine)]
pub fn record_line(json: &str) -> Result<String, JsError> {
    parse_record(json)
        .map(|r| r.to_line())
        .map_err(|e| JsError::new(&e.to_string()))
}
