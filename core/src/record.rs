//! The measurement record: one JSON object per measurement, NDJSON files, the same format
//! from the page and every native tool. The JSON Schema is `public/schema/
//! measurement-record.v1.schema.json`; this module is its Rust reader and writer, and the
//! example files next to the schema are tested here and from TypeScript.

use serde::{Deserialize, Serialize};

/// The version this build writes.
pub const SCHEMA_VERSION: &str = "1.2";
/// The major version this build reads (any 1.x).
pub const MAJOR: u32 = 1;

/// What was measured. The names are the same in the schema, TypeScript and the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Rtt,
    RttNagle,
    HandshakeRtt,
    LoadedRtt,
    Jitter,
    Loss,
    BandwidthUp,
    BandwidthDown,
    AvailBwLowerBound,
    Throughput,
}

impl Metric {
    /// The unit a record of this metric carries.
    pub fn unit(self) -> Unit {
        use Metric::*;
        match self {
            Rtt | RttNagle | HandshakeRtt | LoadedRtt | Jitter => Unit::Ms,
            Loss => Unit::Fraction,
            BandwidthUp | BandwidthDown | AvailBwLowerBound | Throughput => Unit::MbitPerS,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    #[serde(rename = "ms")]
    Ms,
    #[serde(rename = "Mbit/s")]
    MbitPerS,
    #[serde(rename = "fraction")]
    Fraction,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Ok,
    Timeout,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    Websocket,
    Http,
    Tcp,
    Udp,
    Pcap,
    Fobs,
}

/// Probe parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    #[serde(
        default,
        with = "integral_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nagle: Option<bool>,
    #[serde(
        default,
        with = "integral_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub streams: Option<u32>,
    #[serde(
        default,
        with = "integral_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub sndbuf_bytes: Option<u64>,
    #[serde(
        default,
        with = "integral_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub rcvbuf_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_subtracted_ms: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selector {
    Mse,
    Mae,
}

/// The forecast made for a value before it was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordForecast {
    pub value: f64,
    /// Forecaster id, e.g. `median_31`.
    pub method: String,
    pub selector: Selector,
    /// RMSE (selector mse) or MAE (selector mae) of the forecast so far.
    pub error: f64,
}

/// One congestion event of a FOBS transfer (since 1.2): a window with loss, the classifier's
/// reading of its packet-loss signature, and what the controller did (Dickens §2.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Congestion {
    /// The loss rate of the signature classified (the last `window` packets).
    pub signature_loss_rate: f64,
    /// `complexity`, `success_proportion`, `none` (below the operating range: ½) or `off`
    /// (`--no-classifier`).
    pub classifier_metric: String,
    /// The metric's value, when one was computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_value: Option<f64>,
    /// P(CPU contention), when the classifier ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_cpu: Option<f64>,
    /// `no_corrective_action`, `rate_from_response` or `already_answered`.
    pub action: String,
    /// The controller's long-term loss rate after the event.
    pub long_term_loss_rate: f64,
    /// The sending rate after the event, Mbit/s.
    pub rate_mbit_s: f64,
}

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub schema_version: String,
    pub timestamp_ms: f64,
    pub source: String,
    pub metric: Metric,
    #[serde(default)]
    pub status: Status,
    #[serde(default)]
    pub value: Option<f64>,
    pub unit: Unit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    #[serde(
        default,
        with = "integral_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub seq: Option<u64>,
    /// The period of the series this probe belongs to (ms between probe starts); since 1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<RecordForecast>,
    /// A FOBS congestion event (metric `loss`, value the window's loss rate); since 1.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<Congestion>,
}

/// Why a record was refused: the field at fault (dotted path) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}{message}", field.as_ref().map(|f| format!("field '{f}': ")).unwrap_or_default())]
pub struct RecordError {
    pub field: Option<String>,
    pub message: String,
}

fn fail<T>(field: &str, message: impl Into<String>) -> Result<T, RecordError> {
    Err(RecordError {
        field: Some(field.to_string()),
        message: message.into(),
    })
}

impl Record {
    /// A new record of the current version with status ok.
    pub fn new(timestamp_ms: f64, source: &str, metric: Metric, value: f64, to: &str) -> Self {
        Self {
            schema_version: SCHEMA_VERSION.into(),
            timestamp_ms,
            source: source.into(),
            metric,
            status: Status::Ok,
            value: Some(value),
            unit: metric.unit(),
            from: None,
            to: to.into(),
            seq: None,
            period_ms: None,
            timeout_ms: None,
            error: None,
            probe: None,
            forecast: None,
            congestion: None,
        }
    }

    /// Parses and validates one NDJSON line.
    pub fn parse(line: &str) -> Result<Record, RecordError> {
        let raw: serde_json::Value = serde_json::from_str(line).map_err(|e| RecordError {
            field: None,
            message: format!("not valid JSON ({e})"),
        })?;
        let Some(obj) = raw.as_object() else {
            return Err(RecordError {
                field: None,
                message: "a record must be a JSON object".into(),
            });
        };
        check_version(obj.get("schema_version"))?;
        check_shape(obj)?;
        let record: Record = serde_path_to_error::deserialize(&raw).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // serde names a missing field in its message and points the path at the parent.
            match inner.strip_prefix("missing field `") {
                Some(rest) => {
                    let name = rest.trim_end_matches('`');
                    let field = if path == "." {
                        name.to_string()
                    } else {
                        format!("{path}.{name}")
                    };
                    RecordError {
                        field: Some(field),
                        message: "is required".into(),
                    }
                }
                None => RecordError {
                    field: Some(path),
                    message: inner,
                },
            }
        })?;
        record.validate()?;
        Ok(record)
    }

    /// Checks the rules a schema-shaped record must also follow.
    pub fn validate(&self) -> Result<(), RecordError> {
        if !(self.timestamp_ms.is_finite() && self.timestamp_ms >= 0.0) {
            return fail("timestamp_ms", "must be milliseconds since 1970 (≥ 0)");
        }
        if self.source.is_empty() {
            return fail("source", "must not be empty");
        }
        if self.to.is_empty() {
            return fail("to", "must not be empty");
        }
        if self.unit != self.metric.unit() {
            return fail(
                "unit",
                format!(
                    "{} is measured in {}, not {}",
                    json_name(&self.metric),
                    json_name(&self.metric.unit()),
                    json_name(&self.unit)
                ),
            );
        }
        match (self.status, self.value) {
            (Status::Ok, None) => return fail("value", "is required when status is ok"),
            (_, Some(v)) if !v.is_finite() => return fail("value", "must be a finite number"),
            _ => {}
        }
        if self.metric == Metric::Loss && self.value.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
            return fail("value", "loss is a fraction between 0 and 1");
        }
        if self.probe.as_ref().and_then(|p| p.streams) == Some(0) {
            return fail("probe.streams", "must be at least 1");
        }
        if self.status == Status::Timeout && self.timeout_ms.is_none() {
            return fail("timeout_ms", "is required when status is timeout");
        }
        if self.period_ms.is_some_and(|t| !(t.is_finite() && t > 0.0)) {
            return fail("period_ms", "must be a positive number");
        }
        if self.timeout_ms.is_some_and(|t| !(t.is_finite() && t > 0.0)) {
            return fail("timeout_ms", "must be a positive number");
        }
        if let Some(c) = &self.congestion {
            let fraction = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
            if !fraction(c.signature_loss_rate) {
                return fail(
                    "congestion.signature_loss_rate",
                    "is a fraction between 0 and 1",
                );
            }
            if c.p_cpu.is_some_and(|p| !fraction(p)) {
                return fail("congestion.p_cpu", "is a probability between 0 and 1");
            }
            if !fraction(c.long_term_loss_rate) {
                return fail(
                    "congestion.long_term_loss_rate",
                    "is a fraction between 0 and 1",
                );
            }
            if !(c.rate_mbit_s.is_finite() && c.rate_mbit_s >= 0.0) {
                return fail("congestion.rate_mbit_s", "must be a non-negative number");
            }
            if c.metric_value.is_some_and(|v| !v.is_finite()) {
                return fail("congestion.metric_value", "must be a finite number");
            }
        }
        if let Some(f) = &self.forecast {
            if !f.value.is_finite() {
                return fail("forecast.value", "must be a finite number");
            }
            if !(f.error.is_finite() && f.error >= 0.0) {
                return fail("forecast.error", "must be a non-negative number");
            }
        }
        Ok(())
    }

    /// The record as one NDJSON line (without the newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("records hold only finite numbers")
    }
}

fn json_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn check_version(v: Option<&serde_json::Value>) -> Result<(), RecordError> {
    let Some(v) = v else {
        return fail("schema_version", "is required");
    };
    let Some(text) = v.as_str() else {
        return fail("schema_version", "must be a string such as \"1.0\"");
    };
    // Digits only (the schema's pattern): Rust's integer parsing would also take "+1".
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parsed = text
        .split_once('.')
        .filter(|(a, b)| digits(a) && digits(b) && (a.len() == 1 || !a.starts_with('0')))
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    match parsed {
        None => fail("schema_version", format!("'{text}' is not MAJOR.MINOR")),
        Some((major, _)) if major > MAJOR => fail(
            "schema_version",
            format!("version {text} is newer than this reader supports ({MAJOR}.x); update Nowcast to read it"),
        ),
        Some((major, _)) if major < MAJOR => fail("schema_version", format!("version {text} is not a known version")),
        Some(_) => Ok(()),
    }
}

/// Limits on text fields, as in the schema.
const MAX_LEN: [(&str, usize); 4] = [("source", 64), ("from", 512), ("to", 512), ("error", 1024)];

/// What serde would let through but the schema does not: null for a field that is optional
/// (leave it out instead; only `value` may be null), arrays where objects belong, and
/// over-long text.
fn check_shape(obj: &serde_json::Map<String, serde_json::Value>) -> Result<(), RecordError> {
    fn no_nulls(
        obj: &serde_json::Map<String, serde_json::Value>,
        prefix: &str,
    ) -> Result<(), RecordError> {
        for (k, v) in obj {
            if v.is_null() && !(prefix.is_empty() && k == "value") {
                return fail(
                    &format!("{prefix}{k}"),
                    "must not be null (leave the field out)",
                );
            }
        }
        Ok(())
    }
    no_nulls(obj, "")?;
    for key in ["probe", "forecast", "congestion"] {
        match obj.get(key) {
            Some(serde_json::Value::Object(inner)) => no_nulls(inner, &format!("{key}."))?,
            Some(_) => return fail(key, "must be an object"),
            None => {}
        }
    }
    for (key, max) in MAX_LEN {
        if let Some(text) = obj.get(key).and_then(|v| v.as_str()) {
            if text.chars().count() > max {
                return fail(key, format!("is longer than {max} characters"));
            }
        }
    }
    Ok(())
}

/// Integer fields accept any JSON number with an integral value (5.0 as well as 5), as JSON
/// Schema's "integer" does.
mod integral_opt {
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        let v = n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(64))
                .map(|f| f as u64)
        });
        v.and_then(|v| T::try_from(v).ok())
            .map(Some)
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "invalid value: {n}, expected a non-negative integer in range"
                ))
            })
    }
}

/// A line of an NDJSON file that was refused.
#[derive(Clone, Debug, PartialEq)]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    pub error: RecordError,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.error)
    }
}

/// Reads NDJSON text: every valid record, and every refused line with its reason. Blank
/// lines are skipped; one bad line loses nothing else.
pub fn read_ndjson(text: &str) -> (Vec<Record>, Vec<LineError>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match Record::parse(line) {
            Ok(r) => records.push(r),
            Err(error) => errors.push(LineError { line: i + 1, error }),
        }
    }
    (records, errors)
}
