//! A record as one flat row of typed columns, the shape both archives store (SQLite's
//! `records` table, ClickHouse's MergeTree). Every field of the record has its column, so
//! that an export gives back the records that went in; the unit is the metric's and is not
//! stored.
//!
//! Deterministic core: conversions both ways, ClickHouse's RowBinary encoding of a row, and the
//! row's identity (its key) that both archives compare imports by.

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

/// A String in RowBinary: its length as a LEB128 varint, then its bytes.
fn put_str(out: &mut Vec<u8>, s: &str) {
    let mut n = s.len() as u64;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    out.extend_from_slice(s.as_bytes());
}

/// A Nullable(T) in RowBinary: 1 for NULL, else 0 and the value.
fn put_opt<T>(out: &mut Vec<u8>, v: Option<T>, put: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        None => out.push(1),
        Some(v) => {
            out.push(0);
            put(out, v);
        }
    }
}

impl Row {
    /// The row in ClickHouse's RowBinary, in the `records` table's column order (`day`
    /// first): what [`super::clickhouse`] inserts, floats as their bits.
    pub fn row_binary(&self, out: &mut Vec<u8>) {
        self.encode(out, |v| v);
    }

    /// The row's identity: its RowBinary (every column, exactly: floats by their bits,
    /// strings length-first, NULLs flagged), with zero's sign dropped, since SQLite stores
    /// -0.0 as 0. Two rows have the same key exactly when an archive holds them as the same
    /// row; what no archive keeps is not in it (the unit is the metric's, an empty `probe`
    /// object is no probe).
    pub fn key(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(160);
        self.encode(&mut k, |v| if v == 0.0 { 0.0 } else { v });
        k
    }

    /// RowBinary with every float passed through `float` first.
    fn encode(&self, out: &mut Vec<u8>, float: fn(f64) -> f64) {
        let f64b = |o: &mut Vec<u8>, v: f64| o.extend_from_slice(&float(v).to_le_bytes());
        let u64b = |o: &mut Vec<u8>, v: u64| o.extend_from_slice(&v.to_le_bytes());
        let strb = |o: &mut Vec<u8>, v: &str| put_str(o, v);
        let day = (self.ts_ms.floor() as i64)
            .div_euclid(crate::when::DAY)
            .clamp(0, u16::MAX as i64) as u16;
        out.extend_from_slice(&day.to_le_bytes());
        f64b(out, self.ts_ms);
        strb(out, &self.target);
        strb(out, self.metric.name());
        strb(out, &self.source);
        strb(out, self.status.name());
        put_opt(out, self.value, f64b);
        put_opt(out, self.origin.as_deref(), strb);
        put_opt(out, self.seq, u64b);
        put_opt(out, self.period_ms, f64b);
        put_opt(out, self.timeout_ms, f64b);
        put_opt(out, self.error.as_deref(), strb);
        put_opt(out, self.transport.map(Transport::name), strb);
        put_opt(out, self.payload_bytes, u64b);
        put_opt(out, self.nagle, |o, v| o.push(u8::from(v)));
        put_opt(out, self.streams, |o, v| {
            o.extend_from_slice(&v.to_le_bytes())
        });
        put_opt(out, self.sndbuf_bytes, u64b);
        put_opt(out, self.rcvbuf_bytes, u64b);
        put_opt(out, self.raw_ms, f64b);
        put_opt(out, self.rtt_subtracted_ms, f64b);
        put_opt(out, self.forecast_value, f64b);
        put_opt(out, self.forecast_method.as_deref(), strb);
        put_opt(out, self.forecast_selector.map(Selector::name), strb);
        put_opt(out, self.forecast_error, f64b);
        strb(out, &self.schema_version);
        put_opt(
            out,
            self.congestion.as_ref().map(Congestion::to_json),
            |o, v| strb(o, &v),
        );
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

    #[test]
    fn the_key_tells_rows_apart_by_every_column_and_only_by_what_is_kept() {
        let text = include_str!("../../../public/schema/examples/valid.ndjson");
        let records: Vec<Record> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| Record::parse(l).unwrap())
            .collect();
        let keys: Vec<Vec<u8>> = records.iter().map(|r| Row::from_record(r).key()).collect();
        for (i, r) in records.iter().enumerate() {
            let back = Row::from_record(r).into_record().unwrap();
            assert_eq!(Row::from_record(&back).key(), keys[i], "{r:?}");
            for (j, k) in keys.iter().enumerate() {
                assert_eq!(i == j || records[i] == records[j], *k == keys[i], "{i} {j}");
            }
        }
        let base = Record::new(1_000.25, "nowcast tcp", Metric::Rtt, 20.0, "h:1");
        let key = |r: &Record| Row::from_record(r).key();
        // One bit of one float, one optional column filled, a string's boundary moved.
        let mut v = base.clone();
        v.value = Some(f64::from_bits(20.0f64.to_bits() + 1));
        assert_ne!(key(&v), key(&base));
        let mut v = base.clone();
        v.seq = Some(0);
        assert_ne!(key(&v), key(&base));
        let (mut a, mut b) = (base.clone(), base.clone());
        (a.to, a.source) = ("h:1x".into(), "y".into());
        (b.to, b.source) = ("h:1".into(), "xy".into());
        assert_ne!(key(&a), key(&b));
        // What the archive does not keep apart.
        let mut v = base.clone();
        v.probe = Some(Probe::default());
        assert_eq!(key(&v), key(&base));
        let (mut a, mut b) = (base.clone(), base);
        a.value = Some(0.0);
        b.value = Some(-0.0);
        assert_eq!(key(&a), key(&b));
    }
}
