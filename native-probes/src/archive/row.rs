//! A record as one flat row of typed columns, the shape both archives store (SQLite's
//! `records` table, ClickHouse's MergeTree). Every field of the record has its column, so
//! that an export gives back the records that went in; the unit is the metric's and is not
//! stored.
//!
//! Deterministic core: conversions both ways.

use nowcast_core::record::{
    Congestion, Metric, Probe, Record, RecordError, RecordForecast, Selector, Status, Transport,
    Unit,
};

/// One record, flat. Column names are these field names (`origin` is the record's `from`,
/// a reserved word in SQL).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub ts_ms: f64,
    pub target: String,
    pub metric: Metric,
    pub source: String,
    pub status: Status,
    pub value: Option<f64>,
    pub origin: Option<String>,
    pub seq: Option<u64>,
    pub period_ms: Option<f64>,
    pub timeout_ms: Option<f64>,
    pub error: Option<String>,
    pub transport: Option<Transport>,
    pub payload_bytes: Option<u64>,
    pub nagle: Option<bool>,
    pub streams: Option<u32>,
    pub sndbuf_bytes: Option<u64>,
    pub rcvbuf_bytes: Option<u64>,
    pub raw_ms: Option<f64>,
    pub rtt_subtracted_ms: Option<f64>,
    pub forecast_value: Option<f64>,
    pub forecast_method: Option<String>,
    pub forecast_selector: Option<Selector>,
    pub forecast_error: Option<f64>,
    pub schema_version: String,
    /// A FOBS congestion event (since 1.2), one column as the record writes it (JSON text):
    /// [`Congestion::to_json`].
    pub congestion: Option<Congestion>,
}

/// The columns after `ts_ms, target, metric, source, status, value`, in [`Row`]'s order.
pub const DETAIL_COLUMNS: [&str; 19] = [
    "origin",
    "seq",
    "period_ms",
    "timeout_ms",
    "error",
    "transport",
    "payload_bytes",
    "nagle",
    "streams",
    "sndbuf_bytes",
    "rcvbuf_bytes",
    "raw_ms",
    "rtt_subtracted_ms",
    "forecast_value",
    "forecast_method",
    "forecast_selector",
    "forecast_error",
    "schema_version",
    "congestion",
];

impl Row {
    pub fn from_record(r: &Record) -> Row {
        let p = r.probe.as_ref();
        let f = r.forecast.as_ref();
        Row {
            ts_ms: r.timestamp_ms,
            target: r.to.clone(),
            metric: r.metric,
            source: r.source.clone(),
            status: r.status,
            value: r.value,
            origin: r.from.clone(),
            seq: r.seq,
            period_ms: r.period_ms,
            timeout_ms: r.timeout_ms,
            error: r.error.clone(),
            transport: p.and_then(|p| p.transport),
            payload_bytes: p.and_then(|p| p.payload_bytes),
            nagle: p.and_then(|p| p.nagle),
            streams: p.and_then(|p| p.streams),
            sndbuf_bytes: p.and_then(|p| p.sndbuf_bytes),
            rcvbuf_bytes: p.and_then(|p| p.rcvbuf_bytes),
            raw_ms: p.and_then(|p| p.raw_ms),
            rtt_subtracted_ms: p.and_then(|p| p.rtt_subtracted_ms),
            forecast_value: f.map(|f| f.value),
            forecast_method: f.map(|f| f.method.clone()),
            forecast_selector: f.map(|f| f.selector),
            forecast_error: f.map(|f| f.error),
            schema_version: r.schema_version.clone(),
            congestion: r.congestion.clone(),
        }
    }

    /// The record back, checked as any record read from a file is.
    pub fn into_record(self) -> Result<Record, RecordError> {
        let probe = Probe {
            transport: self.transport,
            payload_bytes: self.payload_bytes,
            nagle: self.nagle,
            streams: self.streams,
            sndbuf_bytes: self.sndbuf_bytes,
            rcvbuf_bytes: self.rcvbuf_bytes,
            raw_ms: self.raw_ms,
            rtt_subtracted_ms: self.rtt_subtracted_ms,
        };
        let forecast = match (
            self.forecast_value,
            self.forecast_method,
            self.forecast_selector,
            self.forecast_error,
        ) {
            (Some(value), Some(method), Some(selector), Some(error)) => Some(RecordForecast {
                value,
                method,
                selector,
                error,
            }),
            _ => None,
        };
        let r = Record {
            schema_version: self.schema_version,
            timestamp_ms: self.ts_ms,
            source: self.source,
            metric: self.metric,
            status: self.status,
            value: self.value,
            unit: self.metric.unit(),
            from: self.origin,
            to: self.target,
            seq: self.seq,
            period_ms: self.period_ms,
            timeout_ms: self.timeout_ms,
            error: self.error,
            probe: (probe != Probe::default()).then_some(probe),
            forecast,
            congestion: self.congestion,
        };
        r.validate()?;
        Ok(r)
    }
}

/// The unit's name in the schema.
pub fn unit_name(u: Unit) -> &'static str {
    match u {
        Unit::Ms => "ms",
        Unit::MbitPerS => "Mbit/s",
        Unit::Fraction => "fraction",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_record_survives_the_row() {
        let text = include_str!("../../../public/schema/examples/valid.ndjson");
        let records: Vec<Record> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        assert!(records.len() > 3);
        for r in records {
            let back = Row::from_record(&r).into_record().unwrap();
            assert_eq!(back, r);
        }
    }
}
