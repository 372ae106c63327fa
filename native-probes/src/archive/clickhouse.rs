//! The archive on ClickHouse, through its HTTP interface (a query in the body or the URL,
//! rows as JSONEachRow), with `ureq`, a small blocking client. The tables are those of
//! [`super::query::clickhouse_ddl`]; a cluster's are documented in
//! `native-probes/schema/clickhouse-cluster.sql` and created the same way.

use super::query::{self, Bucket, Filter, Latest, Summary};
use super::row::Row;
use crate::campaign::runlog::{Outcome, RunLog};
use crate::when::{date, Ms};
use anyhow::{anyhow, bail, Context, Result};
use nowcast_core::record::{Metric, Record, Selector, Status, Transport};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// Where the server is.
#[derive(Clone, Debug, PartialEq)]
pub struct ClickhouseConfig {
    /// `http://host:8123`.
    pub url: String,
    pub database: String,
    pub user: Option<String>,
    pub password: Option<String>,
    /// Longest a request may take.
    pub timeout: Duration,
}

/// A connection (an HTTP agent that keeps its connections).
pub struct Clickhouse {
    agent: ureq::Agent,
    cfg: ClickhouseConfig,
}

#[derive(Serialize, Deserialize)]
struct ChRow {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    day: Option<String>,
    ts_ms: f64,
    target: String,
    metric: String,
    source: String,
    status: String,
    value: Option<f64>,
    origin: Option<String>,
    seq: Option<u64>,
    period_ms: Option<f64>,
    timeout_ms: Option<f64>,
    error: Option<String>,
    transport: Option<String>,
    payload_bytes: Option<u64>,
    nagle: Option<u8>,
    streams: Option<u32>,
    sndbuf_bytes: Option<u64>,
    rcvbuf_bytes: Option<u64>,
    raw_ms: Option<f64>,
    rtt_subtracted_ms: Option<f64>,
    forecast_value: Option<f64>,
    forecast_method: Option<String>,
    forecast_selector: Option<String>,
    forecast_error: Option<f64>,
    schema_version: String,
}

impl ChRow {
    fn of(r: &Record) -> ChRow {
        let row = Row::from_record(r);
        ChRow {
            day: Some(date(row.ts_ms.floor() as Ms)),
            ts_ms: row.ts_ms,
            target: row.target,
            metric: row.metric.name().into(),
            source: row.source,
            status: row.status.name().into(),
            value: row.value,
            origin: row.origin,
            seq: row.seq,
            period_ms: row.period_ms,
            timeout_ms: row.timeout_ms,
            error: row.error,
            transport: row.transport.map(|t| t.name().into()),
            payload_bytes: row.payload_bytes,
            nagle: row.nagle.map(u8::from),
            streams: row.streams,
            sndbuf_bytes: row.sndbuf_bytes,
            rcvbuf_bytes: row.rcvbuf_bytes,
            raw_ms: row.raw_ms,
            rtt_subtracted_ms: row.rtt_subtracted_ms,
            forecast_value: row.forecast_value,
            forecast_method: row.forecast_method,
            forecast_selector: row.forecast_selector.map(|s| s.name().into()),
            forecast_error: row.forecast_error,
            schema_version: row.schema_version,
        }
    }

    fn into_record(self) -> Result<Record> {
        let row = Row {
            ts_ms: self.ts_ms,
            metric: Metric::from_name(&self.metric).ok_or_else(|| anyhow!("unknown metric {}", self.metric))?,
            target: self.target,
            source: self.source,
            status: Status::from_name(&self.status).ok_or_else(|| anyhow!("unknown status {}", self.status))?,
            value: self.value,
            origin: self.origin,
            seq: self.seq,
            period_ms: self.period_ms,
            timeout_ms: self.timeout_ms,
            error: self.error,
            transport: self.transport.as_deref().and_then(Transport::from_name),
            payload_bytes: self.payload_bytes,
            nagle: self.nagle.map(|n| n != 0),
            streams: self.streams,
            sndbuf_bytes: self.sndbuf_bytes,
            rcvbuf_bytes: self.rcvbuf_bytes,
            raw_ms: self.raw_ms,
            rtt_subtracted_ms: self.rtt_subtracted_ms,
            forecast_value: self.forecast_value,
            forecast_method: self.forecast_method,
            forecast_selector: self.forecast_selector.as_deref().and_then(Selector::from_name),
            forecast_error: self.forecast_error,
            schema_version: self.schema_version,
        };
        row.into_record().map_err(|e| anyhow!("archive row: {e}"))
    }
}

#[derive(Serialize, Deserialize)]
struct ChRun {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    day: Option<String>,
    id: u64,
    campaign: String,
    job: String,
    target: String,
    probe: String,
    nominal_ms: i64,
    due_ms: i64,
    started_ms: Option<i64>,
    ended_ms: i64,
    outcome: String,
    reason: Option<String>,
    slots: u64,
    gate_check: u8,
}

/// Percent-encodes a URL query value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Clickhouse {
    pub fn new(cfg: ClickhouseConfig) -> Result<Clickhouse> {
        query::identifier(&cfg.database).map_err(|e| anyhow!(e))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(cfg.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Clickhouse { agent, cfg })
    }

    pub fn config(&self) -> &ClickhouseConfig {
        &self.cfg
    }

    /// Sends `sql` (with `body` after it for an INSERT) and returns the response body as a
    /// reader; a server error carries the server's message.
    fn send(&self, sql: &str, body: &[u8]) -> Result<Box<dyn Read + Send + Sync + 'static>> {
        let url = format!(
            "{}/?output_format_json_quote_64bit_integers=0&query={}",
            self.cfg.url.trim_end_matches('/'),
            encode(sql)
        );
        let mut req = self.agent.post(&url);
        if let Some(u) = &self.cfg.user {
            req = req.header("X-ClickHouse-User", u);
        }
        if let Some(p) = &self.cfg.password {
            req = req.header("X-ClickHouse-Key", p);
        }
        let resp = req
            .send(body)
            .with_context(|| format!("ClickHouse at {}", self.cfg.url))?;
        let status = resp.status();
        let reader = resp.into_body().into_reader();
        if !status.is_success() {
            let mut text = String::new();
            let _ = reader.take(2048).read_to_string(&mut text);
            bail!("ClickHouse at {}: {status}: {}", self.cfg.url, text.trim());
        }
        Ok(Box::new(reader))
    }

    /// Runs a statement that returns nothing of interest.
    pub fn execute(&self, sql: &str) -> Result<()> {
        let mut r = self.send(sql, b"")?;
        std::io::copy(&mut r, &mut std::io::sink())?;
        Ok(())
    }

    /// Runs a query and parses each JSONEachRow line.
    fn rows<T: for<'de> Deserialize<'de>>(&self, sql: &str, mut each: impl FnMut(T) -> Result<()>) -> Result<()> {
        let r = self.send(&format!("{sql} FORMAT JSONEachRow"), b"")?;
        for line in BufReader::with_capacity(1 << 16, r).lines() {
            let line = line?;
            if line.is_empty() {
                continue;
            }
            each(serde_json::from_str(&line).with_context(|| format!("ClickHouse row: {line}"))?)?;
        }
        Ok(())
    }

    /// Creates the database and tables if they are missing.
    pub fn ensure_schema(&self) -> Result<()> {
        for sql in query::clickhouse_ddl(&self.cfg.database) {
            self.execute(&sql)?;
        }
        Ok(())
    }

    /// Inserts records and run log rows, one INSERT each (a batch).
    pub fn write(&self, records: &[Record], runs: &[RunLog]) -> Result<()> {
        let db = &self.cfg.database;
        if !records.is_empty() {
            let mut body = Vec::with_capacity(records.len() * 300);
            for r in records {
                serde_json::to_writer(&mut body, &ChRow::of(r))?;
                body.push(b'\n');
            }
            let mut r = self.send(&format!("INSERT INTO {db}.records FORMAT JSONEachRow"), &body)?;
            std::io::copy(&mut r, &mut std::io::sink())?;
        }
        if !runs.is_empty() {
            let mut body = Vec::new();
            for l in runs {
                serde_json::to_writer(
                    &mut body,
                    &ChRun {
                        day: Some(date(l.nominal_ms)),
                        id: l.id,
                        campaign: l.campaign.clone(),
                        job: l.job.clone(),
                        target: l.target.clone(),
                        probe: l.probe.clone(),
                        nominal_ms: l.nominal_ms,
                        due_ms: l.due_ms,
                        started_ms: l.started_ms,
                        ended_ms: l.ended_ms,
                        outcome: l.outcome.name().into(),
                        reason: l.reason.clone(),
                        slots: l.slots,
                        gate_check: u8::from(l.gate_check),
                    },
                )?;
                body.push(b'\n');
            }
            let mut r = self.send(&format!("INSERT INTO {db}.runs FORMAT JSONEachRow"), &body)?;
            std::io::copy(&mut r, &mut std::io::sink())?;
        }
        Ok(())
    }

    /// Calls `each` with every record matching `f`, in time order.
    pub fn records(&self, f: &Filter, each: &mut dyn FnMut(Record) -> Result<()>) -> Result<()> {
        let cols = "ts_ms, target, metric, source, status, value, origin, seq, period_ms, timeout_ms, \
                    error, transport, payload_bytes, nagle, streams, sndbuf_bytes, rcvbuf_bytes, raw_ms, \
                    rtt_subtracted_ms, forecast_value, forecast_method, forecast_selector, forecast_error, \
                    schema_version";
        let sql = format!(
            "SELECT {cols} FROM {}.records WHERE {} ORDER BY ts_ms",
            self.cfg.database,
            query::clickhouse_where(f)
        );
        self.rows(&sql, |row: ChRow| each(row.into_record()?))
    }

    pub fn summary(&self, from_ms: Ms, to_ms: Ms) -> Result<Vec<Summary>> {
        let mut out = Vec::new();
        self.rows(&query::clickhouse_summary(&self.cfg.database, from_ms, to_ms), |s: SummaryRow| {
            out.push(Summary {
                target: s.target,
                metric: s.metric,
                n: s.n,
                ok: s.ok,
                mean: s.mean.filter(|m| m.is_finite()),
                min: s.min,
                max: s.max,
            });
            Ok(())
        })?;
        Ok(out)
    }

    pub fn hourly(&self, target: &str, metric: Metric, from_ms: Ms, to_ms: Ms) -> Result<Vec<Bucket>> {
        let mut out = Vec::new();
        self.rows(
            &query::clickhouse_hourly(&self.cfg.database, target, metric, from_ms, to_ms),
            |b: BucketRow| {
                out.push(Bucket {
                    hour_ms: b.hour_ms,
                    n: b.n,
                    ok: b.ok,
                    mean: b.mean.filter(|m| m.is_finite()),
                    min: b.min,
                    max: b.max,
                });
                Ok(())
            },
        )?;
        Ok(out)
    }

    pub fn latest(&self) -> Result<Vec<Latest>> {
        let mut out = Vec::new();
        self.rows(&query::clickhouse_latest(&self.cfg.database), |l: Latest| {
            out.push(l);
            Ok(())
        })?;
        Ok(out)
    }

    /// Run log rows of `campaign` that ended at or after `since`, oldest first.
    pub fn runs(&self, campaign: &str, since: Ms) -> Result<Vec<RunLog>> {
        let sql = format!(
            "SELECT id, campaign, job, target, probe, nominal_ms, due_ms, started_ms, ended_ms, outcome, \
             reason, slots, gate_check FROM {}.runs WHERE campaign = {} AND ended_ms >= {since} \
             ORDER BY ended_ms, id",
            self.cfg.database,
            query::quote(campaign)
        );
        let mut out = Vec::new();
        self.rows(&sql, |r: ChRun| {
            out.push(RunLog {
                id: r.id,
                campaign: r.campaign,
                job: r.job,
                target: r.target,
                probe: r.probe,
                nominal_ms: r.nominal_ms,
                due_ms: r.due_ms,
                started_ms: r.started_ms,
                ended_ms: r.ended_ms,
                outcome: Outcome::parse(&r.outcome).unwrap_or(Outcome::Failed),
                reason: r.reason,
                slots: r.slots,
                gate_check: r.gate_check != 0,
            });
            Ok(())
        })?;
        Ok(out)
    }
}

#[derive(Deserialize, Serialize)]
struct SummaryRow {
    target: String,
    metric: String,
    n: u64,
    ok: u64,
    mean: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
}

#[derive(Deserialize)]
struct BucketRow {
    hour_ms: i64,
    n: u64,
    ok: u64,
    mean: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
}
