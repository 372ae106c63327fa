//! The measurement record: one JSON object per measurement, NDJSON files, the same format
//! from the page and every native tool. The JSON Schema is `public/schema/
//! measurement-record.v1.schema.json`; this module is the one reader and writer of it. The
//! reader ([`Record::read`]) takes parsed JSON from either parser (serde_json here, the
//! browser's `JSON.parse` in the page, see [`crate::json`]) and the page's saved
//! records as they come out of IndexedDB, so every record the product takes in passes the
//! same rules; the example files next to the schema are tested here, from TypeScript through
//! the WebAssembly build, and against the schema itself.

use crate::bank::MAX_MAGNITUDE;
use crate::json::{Json, Kind};
use serde::Serialize;

/// The version this build writes.
pub const SCHEMA_VERSION: &str = "1.2";
/// The major version this build reads (any 1.x).
pub const MAJOR: u32 = 1;
/// The latest time JavaScript's `Date` can hold (ECMAScript's time value range, ms since
/// 1970): a later timestamp could not be shown on the page.
pub const MAX_TIMESTAMP_MS: f64 = 8.64e15;

/// One name for each value of an enum of the schema, in Rust, JSON and messages alike.
macro_rules! named {
    ($ty:ident, $what:literal, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in the schema's order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            const NAMES: &'static [&'static str] = &[$($name),+];

            /// The name in the schema.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            pub fn from_name(name: &str) -> Option<$ty> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<$ty, String> {
                $ty::from_name(s).ok_or_else(|| {
                    format!(
                        "'{}' is not a {} (one of {})",
                        crate::quote::quote(s),
                        $what,
                        $ty::NAMES.join(", ")
                    )
                })
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                let s = String::deserialize(d)?;
                $ty::from_name(&s)
                    .ok_or_else(|| serde::de::Error::unknown_variant(&s, $ty::NAMES))
            }
        }
    };
}

/// What was measured. The names are the same in the schema, TypeScript and the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

named!(Metric, "metric", {
    Rtt => "rtt",
    RttNagle => "rtt_nagle",
    HandshakeRtt => "handshake_rtt",
    LoadedRtt => "loaded_rtt",
    Jitter => "jitter",
    Loss => "loss",
    BandwidthUp => "bandwidth_up",
    BandwidthDown => "bandwidth_down",
    AvailBwLowerBound => "avail_bw_lower_bound",
    Throughput => "throughput",
});

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    Ms,
    MbitPerS,
    Fraction,
}

named!(Unit, "unit", { Ms => "ms", MbitPerS => "Mbit/s", Fraction => "fraction" });

/// The largest time or rate a measurement may hold: 10⁹ ms (11.6 days) and 10⁹ Mbit/s
/// (1 Pbit/s) are beyond any probe; a larger value is a unit mistake or an attack on the
/// graphs, and the forecaster bank refuses magnitudes above 1e100 anyway.
pub const MAX_MEASURED: f64 = 1e9;

impl Unit {
    /// The values a measurement in this unit may take: times and rates from 0 to
    /// [`MAX_MEASURED`], fractions from 0 to 1.
    pub fn range(self) -> (f64, f64) {
        match self {
            Unit::Ms | Unit::MbitPerS => (0.0, MAX_MEASURED),
            Unit::Fraction => (0.0, 1.0),
        }
    }
}

/// Why `v` cannot be a measurement in `unit` (`None`: a value whose unit is not known, which
/// must only be finite and within the forecaster bank's ±1e100).
pub fn check_value(v: f64, unit: Option<Unit>) -> Result<(), String> {
    if !v.is_finite() {
        return Err("must be a finite number".into());
    }
    let (lo, hi) = match unit {
        Some(u) => u.range(),
        None => (-MAX_MAGNITUDE, MAX_MAGNITUDE),
    };
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        let unit = unit.map_or(String::new(), |u| format!(" {u}"));
        Err(format!(
            "{} is outside {} to {}{unit}",
            plain(v),
            plain(lo),
            plain(hi)
        ))
    }
}

/// A number as a person writes it: `-5`, `0.25`, and in exponent form only when very large or
/// very small (`1e9`, `1e200`, `2.5e-7`); the range said "-5e0 is outside 0e0..1e9 ms".
fn plain(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e6).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Status {
    #[default]
    Ok,
    Timeout,
    Error,
}

named!(Status, "status", { Ok => "ok", Timeout => "timeout", Error => "error" });

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    Websocket,
    Http,
    Tcp,
    Udp,
    Pcap,
    Fobs,
}

named!(Transport, "transport", {
    Websocket => "websocket",
    Http => "http",
    Tcp => "tcp",
    Udp => "udp",
    Pcap => "pcap",
    Fobs => "fobs",
});

/// Probe parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Probe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nagle: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcvbuf_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_subtracted_ms: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selector {
    Mse,
    Mae,
}

named!(Selector, "selector", { Mse => "mse", Mae => "mae" });

/// The forecast made for a value before it was measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordForecast {
    pub value: f64,
    /// Forecaster id, e.g. `median_31`.
    pub method: String,
    pub selector: Selector,
    /// RMSE (selector mse) or MAE (selector mae) of the forecast so far.
    pub error: f64,
}

/// Whether a forecast's `error`, made after `values` values, says anything. After one value
/// nothing has checked a forecast yet and the error is 0: shown as "± 0" it would claim a
/// certainty nothing measured, so it is unknown ("± ?"). The rule of `nowcast`'s summaries
/// and of the page (through WebAssembly).
pub fn error_known(values: u64, error: f64) -> bool {
    values >= 2 || error != 0.0
}

/// What the FOBS loss classifier read a congestion event's packet-loss signature with
/// (Dickens §3): the complexity metric, the success proportion, nothing (the window's loss
/// rate is below the classifier's operating range, P(CPU) ½) or the classifier switched off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassifierMetric {
    Complexity,
    SuccessProportion,
    NotComputed,
    Off,
}

named!(ClassifierMetric, "classifier metric", {
    Complexity => "complexity",
    SuccessProportion => "success_proportion",
    NotComputed => "none",
    Off => "off",
});

/// What FOBS's rate controller did about a congestion event (Dickens §2.2): nothing (the
/// loss was diagnosed as CPU contention), a new rate from its response function, or nothing
/// more (the loss belongs to a window sent before the last answer took effect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionAction {
    NoCorrectiveAction,
    RateFromResponse,
    AlreadyAnswered,
}

named!(CongestionAction, "congestion action", {
    NoCorrectiveAction => "no_corrective_action",
    RateFromResponse => "rate_from_response",
    AlreadyAnswered => "already_answered",
});

/// How FOBS's rate controller counts loss into its long-term loss rate (since 1.2, optional):
/// one interval per window with loss, TFRC's loss-event rate (RFC 5348 §5.2, the default),
/// one per lost packet over TFRC's last eight intervals (`--loss-rate packets`), or the
/// packets lost over those sent since the transfer began (`--loss-rate transfer`, since
/// 2026-12-08: the "long-term loss rate … maintained by the physical system" of Dickens
/// §4.1's evaluation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossCount {
    Events,
    Packets,
    Transfer,
}

named!(LossCount, "loss count", {
    Events => "events",
    Packets => "packets",
    Transfer => "transfer",
});

/// One congestion event of a FOBS transfer (since 1.2): a window with loss, the classifier's
/// reading of its packet-loss signature, and what the controller did (Dickens §2.2). It rides
/// on a `loss` record whose value is the window's loss rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Congestion {
    /// The loss rate of the signature classified (the last window's packets).
    pub signature_loss_rate: f64,
    pub classifier_metric: ClassifierMetric,
    /// The metric's value, when one was computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_value: Option<f64>,
    /// P(CPU contention), when the classifier ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_cpu: Option<f64>,
    pub action: CongestionAction,
    /// The controller's long-term loss rate after the event.
    pub long_term_loss_rate: f64,
    /// What the long-term loss rate counts, when the controller keeps one (not under a fixed
    /// rate); absent from records written before 2026-12-05.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_count: Option<LossCount>,
    /// The sending rate after the event, Mbit/s.
    pub rate_mbit_s: f64,
}

impl Congestion {
    /// Checks the rules of the schema beyond the shape (fractions, probabilities, rates).
    pub fn validate(&self) -> Result<(), RecordError> {
        let fraction = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
        if !fraction(self.signature_loss_rate) {
            return fail(
                "congestion.signature_loss_rate",
                "must be a fraction between 0 and 1",
            );
        }
        if self.metric_value.is_some_and(|v| !v.is_finite()) {
            return fail("congestion.metric_value", "must be a finite number");
        }
        if self.p_cpu.is_some_and(|p| !fraction(p)) {
            return fail("congestion.p_cpu", "must be a probability between 0 and 1");
        }
        if !fraction(self.long_term_loss_rate) {
            return fail(
                "congestion.long_term_loss_rate",
                "must be a fraction between 0 and 1",
            );
        }
        if let Err(why) = check_value(self.rate_mbit_s, Some(Unit::MbitPerS)) {
            return fail("congestion.rate_mbit_s", why);
        }
        Ok(())
    }

    /// The object as a record writes it (the archives keep it as this text).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("congestion events hold only finite numbers")
    }

    /// Reads the object back from [`Congestion::to_json`]'s text, with a record's rules;
    /// errors name the field as `congestion.FIELD`.
    pub fn from_json(text: &str) -> Result<Congestion, RecordError> {
        let raw: serde_json::Value = serde_json::from_str(text).map_err(|e| RecordError {
            field: Some("congestion".into()),
            message: format!(
                "not valid JSON ({})",
                crate::json_column::line_error(&e.to_string(), text)
            ),
        })?;
        if !raw.is_object() {
            return fail("congestion", "must be an object");
        }
        let c = read_congestion(&&raw)?;
        c.validate()?;
        Ok(c)
    }
}

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    pub schema_version: String,
    pub timestamp_ms: f64,
    pub source: String,
    pub metric: Metric,
    pub status: Status,
    pub value: Option<f64>,
    pub unit: Unit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The period of the series this probe belongs to (ms between probe starts); since 1.1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast: Option<RecordForecast>,
    /// A FOBS congestion event (metric `loss`, value the window's loss rate); since 1.2.
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// Limits on text fields, as in the schema (characters).
const MAX_SOURCE: usize = 64;
const MAX_ENDPOINT: usize = 512;
const MAX_ERROR: usize = 1024;
const MAX_METHOD: usize = 64;
/// Enough for any name of the schema's enums and for `schema_version`; longer is not one.
const MAX_NAME: usize = 32;

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
            message: format!(
                "not valid JSON ({})",
                crate::json_column::line_error(&e.to_string(), line)
            ),
        })?;
        Record::read(&&raw)
    }

    /// Reads and validates a record from parsed JSON (or a saved JavaScript object).
    /// Fields are checked in the schema's order, and the first fault is the one reported;
    /// fields of later minor versions are ignored.
    pub fn read<J: Json>(v: &J) -> Result<Record, RecordError> {
        if v.kind() != Kind::Object {
            return Err(RecordError {
                field: None,
                message: "a record must be a JSON object".into(),
            });
        }
        let o = Fields { v, prefix: "" };
        let schema_version = check_version(o.field("schema_version")?)?;
        let timestamp_ms = o.req("timestamp_ms", o.number("timestamp_ms"))?;
        let source = o.req("source", o.text("source", MAX_SOURCE))?;
        let metric = o.req("metric", o.name::<Metric>("metric"))?;
        let status = o.name::<Status>("status")?.unwrap_or_default();
        let value = match v.get("value") {
            Some(x) if x.kind() == Kind::Null => None,
            _ => o.number("value")?,
        };
        let unit = o.req("unit", o.name::<Unit>("unit"))?;
        let from = o.text("from", MAX_ENDPOINT)?;
        let to = o.req("to", o.text("to", MAX_ENDPOINT))?;
        let seq = o.count("seq")?;
        let period_ms = o.number("period_ms")?;
        let timeout_ms = o.number("timeout_ms")?;
        let error = o.text("error", MAX_ERROR)?;
        let probe = o.object("probe")?.map(|p| read_probe(&p)).transpose()?;
        let forecast = o
            .object("forecast")?
            .map(|f| read_forecast(&f))
            .transpose()?;
        let congestion = o
            .object("congestion")?
            .map(|c| read_congestion(&c))
            .transpose()?;
        let record = Record {
            schema_version,
            timestamp_ms,
            source,
            metric,
            status,
            value,
            unit,
            from,
            to,
            seq,
            period_ms,
            timeout_ms,
            error,
            probe,
            forecast,
            congestion,
        };
        record.validate()?;
        Ok(record)
    }

    /// Checks the rules a record of the right shape must also follow. Records this crate
    /// makes pass by construction; tests check that they do.
    pub fn validate(&self) -> Result<(), RecordError> {
        if !(self.timestamp_ms.is_finite() && (0.0..=MAX_TIMESTAMP_MS).contains(&self.timestamp_ms))
        {
            return fail(
                "timestamp_ms",
                "must be milliseconds since 1970 (from 0 to 8.64e15)",
            );
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
                    self.metric,
                    self.metric.unit(),
                    self.unit
                ),
            );
        }
        match (self.status, self.value) {
            (Status::Ok, None) => return fail("value", "is required when status is ok"),
            (_, Some(v)) => {
                if let Err(why) = check_value(v, Some(self.unit)) {
                    let why = match self.metric {
                        Metric::Loss if v.is_finite() => {
                            "loss is a fraction between 0 and 1".to_string()
                        }
                        _ => why,
                    };
                    return fail("value", why);
                }
            }
            _ => {}
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
        if let Some(p) = &self.probe {
            if p.streams == Some(0) {
                return fail("probe.streams", "must be at least 1");
            }
            for (field, v) in [
                ("probe.raw_ms", p.raw_ms),
                ("probe.rtt_subtracted_ms", p.rtt_subtracted_ms),
            ] {
                if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                    return fail(field, "must be a non-negative number");
                }
            }
        }
        if let Some(f) = &self.forecast {
            if check_value(f.value, None).is_err() {
                return fail("forecast.value", "must be a finite number within ±1e100");
            }
            if f.method.is_empty() {
                return fail("forecast.method", "must not be empty");
            }
            if !(f.error.is_finite() && f.error >= 0.0) {
                return fail("forecast.error", "must be a non-negative number");
            }
        }
        if let Some(c) = &self.congestion {
            c.validate()?;
        }
        Ok(())
    }

    /// The record as one NDJSON line (without the newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("records hold only finite numbers")
    }
}

/// The members of one object of a record, read one field at a time; `prefix` names the
/// object in error paths ("" or "probe.").
struct Fields<'a, J> {
    v: &'a J,
    prefix: &'static str,
}

impl<J: Json> Fields<'_, J> {
    fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// A member; absent is `None`, and null is refused (the schema has no null but `value`).
    fn field(&self, key: &str) -> Result<Option<J>, RecordError> {
        match self.v.get(key) {
            Some(x) if x.kind() == Kind::Null => {
                fail(&self.path(key), "must not be null (leave the field out)")
            }
            other => Ok(other),
        }
    }

    fn wrong<T>(&self, key: &str, expected: &str, found: &J) -> Result<T, RecordError> {
        fail(
            &self.path(key),
            format!("must be {expected}, not {}", found.kind().described()),
        )
    }

    fn req<T>(&self, key: &str, v: Result<Option<T>, RecordError>) -> Result<T, RecordError> {
        v?.map_or_else(|| fail(&self.path(key), "is required"), Ok)
    }

    fn number(&self, key: &str) -> Result<Option<f64>, RecordError> {
        let Some(x) = self.field(key)? else {
            return Ok(None);
        };
        match x.number() {
            Some(n) if n.is_finite() => Ok(Some(n)),
            // JSON.parse reads 1e400 as Infinity where serde_json refuses the line.
            Some(_) => fail(&self.path(key), "must be a finite number"),
            None => self.wrong(key, "a number", &x),
        }
    }

    fn count<T: TryFrom<u64>>(&self, key: &str) -> Result<Option<T>, RecordError> {
        let Some(x) = self.field(key)? else {
            return Ok(None);
        };
        if x.kind() != Kind::Number {
            return self.wrong(key, "a whole number", &x);
        }
        match x.whole().and_then(|n| T::try_from(n).ok()) {
            Some(n) => Ok(Some(n)),
            None => fail(
                &self.path(key),
                format!(
                    "{} is not a whole number in range",
                    x.number().unwrap_or(f64::NAN)
                ),
            ),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, RecordError> {
        let Some(x) = self.field(key)? else {
            return Ok(None);
        };
        match x.boolean() {
            Some(b) => Ok(Some(b)),
            None => self.wrong(key, "true or false", &x),
        }
    }

    fn text(&self, key: &str, max: usize) -> Result<Option<String>, RecordError> {
        let Some(x) = self.field(key)? else {
            return Ok(None);
        };
        match x.text(max) {
            Some(Ok(s)) => Ok(Some(s.into_owned())),
            Some(Err(_)) => fail(&self.path(key), format!("is longer than {max} characters")),
            None => self.wrong(key, "a string", &x),
        }
    }

    fn name<T: std::str::FromStr<Err = String>>(
        &self,
        key: &str,
    ) -> Result<Option<T>, RecordError> {
        let Some(x) = self.field(key)? else {
            return Ok(None);
        };
        match x.text(MAX_NAME) {
            Some(Ok(s)) => s
                .parse()
                .map(Some)
                .or_else(|why| fail(&self.path(key), why)),
            Some(Err(_)) => fail(&self.path(key), "is not a name of the schema (too long)"),
            None => self.wrong(key, "a string", &x),
        }
    }

    fn object(&self, key: &str) -> Result<Option<J>, RecordError> {
        match self.field(key)? {
            Some(x) if x.kind() != Kind::Object => self.wrong(key, "an object", &x),
            other => Ok(other),
        }
    }
}

fn read_probe<J: Json>(v: &J) -> Result<Probe, RecordError> {
    let o = Fields {
        v,
        prefix: "probe.",
    };
    Ok(Probe {
        transport: o.name("transport")?,
        payload_bytes: o.count("payload_bytes")?,
        nagle: o.boolean("nagle")?,
        streams: o.count("streams")?,
        sndbuf_bytes: o.count("sndbuf_bytes")?,
        rcvbuf_bytes: o.count("rcvbuf_bytes")?,
        raw_ms: o.number("raw_ms")?,
        rtt_subtracted_ms: o.number("rtt_subtracted_ms")?,
    })
}

fn read_forecast<J: Json>(v: &J) -> Result<RecordForecast, RecordError> {
    let o = Fields {
        v,
        prefix: "forecast.",
    };
    Ok(RecordForecast {
        value: o.req("value", o.number("value"))?,
        method: o.req("method", o.text("method", MAX_METHOD))?,
        selector: o.req("selector", o.name("selector"))?,
        error: o.req("error", o.number("error"))?,
    })
}

fn read_congestion<J: Json>(v: &J) -> Result<Congestion, RecordError> {
    let o = Fields {
        v,
        prefix: "congestion.",
    };
    Ok(Congestion {
        signature_loss_rate: o.req("signature_loss_rate", o.number("signature_loss_rate"))?,
        classifier_metric: o.req("classifier_metric", o.name("classifier_metric"))?,
        metric_value: o.number("metric_value")?,
        p_cpu: o.number("p_cpu")?,
        action: o.req("action", o.name("action"))?,
        long_term_loss_rate: o.req("long_term_loss_rate", o.number("long_term_loss_rate"))?,
        loss_count: o.name("loss_count")?,
        rate_mbit_s: o.req("rate_mbit_s", o.number("rate_mbit_s"))?,
    })
}

/// `schema_version`: MAJOR.MINOR with major 1 (any minor).
fn check_version<J: Json>(v: Option<J>) -> Result<String, RecordError> {
    let Some(v) = v else {
        return fail("schema_version", "is required");
    };
    let text = match v.text(MAX_NAME) {
        Some(Ok(t)) => t.into_owned(),
        Some(Err(_)) => return fail("schema_version", "is not MAJOR.MINOR (too long)"),
        None => return fail("schema_version", "must be a string such as \"1.0\""),
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
        Some(_) => Ok(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"schema_version":"1.0","timestamp_ms":1,"source":"browser","metric":"rtt","value":2,"unit":"ms","to":"x"}"#;

    #[test]
    fn a_value_out_of_its_units_range_is_said_in_plain_numbers() {
        assert_eq!(
            check_value(-5.0, Some(Unit::Ms)).unwrap_err(),
            "-5 is outside 0 to 1e9 ms"
        );
        assert_eq!(
            check_value(1.5, Some(Unit::Fraction)).unwrap_err(),
            "1.5 is outside 0 to 1 fraction"
        );
        assert!(check_value(1e200, None)
            .unwrap_err()
            .starts_with("1e200 is outside -1e100"));
    }

    #[test]
    fn a_forecast_error_is_unknown_only_after_a_single_value_that_left_it_zero() {
        assert!(!error_known(0, 0.0));
        assert!(!error_known(1, 0.0));
        assert!(error_known(1, 0.5), "an error fed back (a timeout) is one");
        assert!(
            error_known(2, 0.0),
            "two equal values: a checked forecast that was exact"
        );
    }

    fn refused(line: &str) -> RecordError {
        Record::parse(line).expect_err(line)
    }

    #[test]
    fn names_are_one_table() {
        for m in Metric::ALL {
            assert_eq!(serde_json::to_string(m).unwrap(), format!("\"{m}\""));
            assert_eq!(m.name().parse::<Metric>(), Ok(*m));
        }
        assert_eq!(Unit::MbitPerS.name(), "Mbit/s");
        let e = "latency".parse::<Metric>().unwrap_err();
        assert!(
            e.starts_with("'latency' is not a metric (one of rtt, "),
            "{e}"
        );
    }

    #[test]
    fn each_fault_names_its_field() {
        let cases = [
            ("not json", None, "not valid JSON"),
            ("[1]", None, "a record must be a JSON object"),
            (
                &GOOD.replace("\"value\":2", "\"value\":\"2\""),
                Some("value"),
                "must be a number, not a string",
            ),
            (
                &GOOD.replace("\"value\":2", "\"value\":1e200"),
                Some("value"),
                "outside",
            ),
            (
                &GOOD.replace("\"value\":2", "\"value\":-1"),
                Some("value"),
                "outside",
            ),
            (
                &GOOD.replace("\"timestamp_ms\":1", "\"timestamp_ms\":1e16"),
                Some("timestamp_ms"),
                "8.64e15",
            ),
            (
                &GOOD.replace("}", ",\"seq\":-1}"),
                Some("seq"),
                "not a whole number",
            ),
            (
                &GOOD.replace("}", ",\"probe\":{\"raw_ms\":-2}}"),
                Some("probe.raw_ms"),
                "non-negative",
            ),
            (
                &GOOD.replace(
                    "}",
                    ",\"forecast\":{\"value\":1,\"method\":\"\",\"selector\":\"mse\",\"error\":0}}",
                ),
                Some("forecast.method"),
                "empty",
            ),
            (
                &GOOD.replace("\"metric\":\"rtt\"", "\"metric\":\"latency\""),
                Some("metric"),
                "'latency' is not a metric",
            ),
        ];
        for (line, field, message) in cases {
            let e = refused(line);
            assert_eq!(e.field.as_deref(), field, "{line}: {e}");
            assert!(e.message.contains(message), "{line}: {e}");
        }
    }

    #[test]
    fn a_long_field_is_refused_without_counting_it_whole() {
        let long = "é".repeat(5_000_000);
        let line = GOOD.replace("\"to\":\"x\"", &format!("\"to\":\"{long}\""));
        let e = refused(&line);
        assert_eq!(e.to_string(), "field 'to': is longer than 512 characters");
    }

    #[test]
    fn integral_numbers_are_counts_and_u64_stays_exact() {
        let r = Record::parse(&GOOD.replace("}", ",\"seq\":5.0}")).unwrap();
        assert_eq!(r.seq, Some(5));
        let r = Record::parse(&GOOD.replace("}", ",\"seq\":18446744073709551615}")).unwrap();
        assert_eq!(r.seq, Some(u64::MAX));
    }

    const CONGESTION: &str = r#"{"schema_version":"1.2","timestamp_ms":1795219209100,"source":"nowcast fobs","metric":"loss","status":"ok","value":0.0123,"unit":"fraction","to":"10.231.0.2:8070","seq":17,"probe":{"transport":"fobs","payload_bytes":1400},"congestion":{"signature_loss_rate":0.0061,"classifier_metric":"complexity","metric_value":0.3011,"p_cpu":0.998,"action":"no_corrective_action","long_term_loss_rate":2e-5,"loss_count":"events","rate_mbit_s":940.5}}"#;

    #[test]
    fn a_congestion_event_round_trips() {
        let r = Record::parse(CONGESTION).unwrap();
        let c = r.congestion.clone().expect("congestion read");
        assert_eq!(c.classifier_metric, ClassifierMetric::Complexity);
        assert_eq!(c.action, CongestionAction::NoCorrectiveAction);
        assert_eq!((c.metric_value, c.p_cpu), (Some(0.3011), Some(0.998)));
        assert_eq!(c.loss_count, Some(LossCount::Events));
        // The writer's line reads back as the same record, and is written the same again.
        let line = r.to_line();
        assert!(line.contains(r#""action":"no_corrective_action","long_term_loss_rate":0.00002,"loss_count":"events","rate_mbit_s":940.5}}"#), "{line}");
        assert_eq!(Record::parse(&line), Ok(r.clone()));
        assert_eq!(Record::parse(&line).unwrap().to_line(), line);
        // Without the optional members (the classifier switched off), and the writer's own.
        let mut off = Record::new(5.0, "nowcast fobs", Metric::Loss, 0.25, "h:1");
        off.congestion = Some(Congestion {
            signature_loss_rate: 0.25,
            classifier_metric: ClassifierMetric::Off,
            metric_value: None,
            p_cpu: None,
            action: CongestionAction::RateFromResponse,
            long_term_loss_rate: 0.01,
            loss_count: None,
            rate_mbit_s: 0.0,
        });
        let line = off.to_line();
        assert!(line.contains(r#""congestion":{"signature_loss_rate":0.25,"classifier_metric":"off","action":"rate_from_response","#), "{line}");
        assert_eq!(Record::parse(&line), Ok(off));
    }

    #[test]
    fn a_malformed_congestion_event_names_its_field() {
        let cases = [
            ("\"signature_loss_rate\":0.0061", "\"signature_loss_rate\":1.5", "congestion.signature_loss_rate", "fraction between 0 and 1"),
            ("\"signature_loss_rate\":0.0061,", "", "congestion.signature_loss_rate", "is required"),
            ("\"complexity\"", "\"entropy\"", "congestion.classifier_metric", "'entropy' is not a classifier metric (one of complexity, success_proportion, none, off)"),
            ("\"metric_value\":0.3011", "\"metric_value\":\"high\"", "congestion.metric_value", "must be a number, not a string"),
            ("\"p_cpu\":0.998", "\"p_cpu\":-0.1", "congestion.p_cpu", "probability between 0 and 1"),
            ("\"p_cpu\":0.998", "\"p_cpu\":null", "congestion.p_cpu", "must not be null"),
            ("\"no_corrective_action\"", "\"slow_down\"", "congestion.action", "is not a congestion action"),
            ("\"long_term_loss_rate\":2e-5", "\"long_term_loss_rate\":2", "congestion.long_term_loss_rate", "fraction between 0 and 1"),
            ("\"rate_mbit_s\":940.5", "\"rate_mbit_s\":-1", "congestion.rate_mbit_s", "outside"),
            ("\"events\"", "\"bytes\"", "congestion.loss_count", "'bytes' is not a loss count (one of events, packets, transfer)"),
            ("{\"signature_loss_rate\"", "[{\"signature_loss_rate\"", "congestion", "must be an object"),
        ];
        for (from, to, field, message) in cases {
            let mut line = CONGESTION.replacen(from, to, 1);
            if to.starts_with('[') {
                line = line.replacen("}}", "}]}", 1);
            }
            assert_ne!(line, CONGESTION, "{from}");
            let e = refused(&line);
            assert_eq!(e.field.as_deref(), Some(field), "{line}: {e}");
            assert!(e.message.contains(message), "{line}: {e}");
        }
    }

    /// Text that is not JSON names its column, and no "line 1" beside the file's line (a
    /// record) or the archive's row (a congestion event kept as text).
    #[test]
    fn text_that_is_not_json_names_its_column() {
        for (line, said) in [
            ("not json", "not valid JSON (expected ident at column 2)"),
            (
                "  {\"a\":1,}",
                "not valid JSON (trailing comma at column 10)",
            ),
        ] {
            assert_eq!(refused(line).message, said, "{line}");
        }
        let e = Congestion::from_json(r#"{"signature_loss_rate":"#).unwrap_err();
        assert_eq!(
            (e.field.as_deref(), e.message.as_str()),
            (
                Some("congestion"),
                "not valid JSON (EOF while parsing a value at column 24)"
            )
        );
    }
}
