//! The archive on ClickHouse, through its HTTP interface (a query in the body or the URL,
//! rows as JSONEachRow), with `ureq`, a small blocking client. The tables are those of
//! [`super::query::clickhouse_ddl`]; a cluster's are documented in
//! `native-probes/schema/clickhouse-cluster.sql` and created the same way.

use super::query::{self, Bucket, Filter, Latest, Summary};
use super::row::Row;
use crate::runlog::{Outcome, RunLog};
use crate::when::{date, Ms};
use anyhow::{anyhow, bail, Context, Result};
use nowcast_core::record::{Congestion, Metric, Record, Selector, Status, Transport};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// ClickHouse's own refusal of a request (an HTTP error with its message).
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Where the server is.
#[derive(Clone, Debug, PartialEq)]
pub struct ClickhouseConfig {
    /// `http://host:8123`.
    pub url: String,
    pub database: String,
    pub user: Option<String>,
    pub password: Option<String>,
    /// Longest wait for an answer to begin (and, after it began, for each of its reads): a
    /// server that takes the connection and says nothing is given up on after this, with
    /// a message saying so. An answer that keeps coming (a large export) may take longer.
    pub timeout: Duration,
}

/// Longest wait for the connection (DNS and TLS included): a server that is there
/// answers in milliseconds; one that drops the packets would leave the wait to the
/// system's connect timeout, minutes.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The wait for an answer to begin for the commands (`archive`, `report`): ClickHouse
/// answers once a query's first block is ready, which a sort over a large table may take
/// seconds to reach.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection (an HTTP agent that keeps its connections).
pub struct Clickhouse {
    agent: ureq::Agent,
    cfg: ClickhouseConfig,
}

/// A row of `records` as ClickHouse's JSONEachRow gives it back.
#[derive(Deserialize)]
struct ChRow {
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
    #[serde(default)]
    congestion: Option<String>,
}

impl ChRow {
    fn into_record(self) -> Result<Record> {
        let row = Row {
            ts_ms: self.ts_ms,
            metric: Metric::from_name(&self.metric)
                .ok_or_else(|| anyhow!("unknown metric {}", self.metric))?,
            target: self.target,
            source: self.source,
            status: Status::from_name(&self.status)
                .ok_or_else(|| anyhow!("unknown status {}", self.status))?,
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
            forecast_selector: self
                .forecast_selector
                .as_deref()
                .and_then(Selector::from_name),
            forecast_error: self.forecast_error,
            schema_version: self.schema_version,
            congestion: self
                .congestion
                .as_deref()
                .map(Congestion::from_json)
                .transpose()
                .map_err(|e| anyhow!("archive row: {e}"))?,
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

/// What another server said, as one short line: its page's text without tags, the white
/// space collapsed, at most 80 characters.
fn one_line(body: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if in_tag => {}
            c => text.push(c),
        }
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let line = crate::format::clean(&words.join(" "));
    if line.is_empty() {
        return "an empty body".into();
    }
    if line.chars().count() <= 80 {
        return line;
    }
    line.chars().take(79).collect::<String>() + "…"
}

/// Percent-encodes a URL query value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Clickhouse {
    pub fn new(cfg: ClickhouseConfig) -> Result<Clickhouse> {
        query::identifier(&cfg.database).map_err(|e| anyhow!(e))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_TIMEOUT.min(cfg.timeout)))
            .timeout_send_request(Some(cfg.timeout))
            .timeout_send_body(Some(cfg.timeout.max(CONNECT_TIMEOUT * 12)))
            .timeout_recv_response(Some(cfg.timeout))
            .timeout_per_read(Some(cfg.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Clickhouse { agent, cfg })
    }

    pub fn config(&self) -> &ClickhouseConfig {
        &self.cfg
    }

    /// Sends `sql` (with `body` after it for an INSERT) and returns the response body as a
    /// reader; a server error carries the server's message. A query without data goes in
    /// the request's body: the URL holds 16 KiB at most (18.16), and a read-back names
    /// every target of a batch.
    fn send(&self, sql: &str, body: &[u8]) -> Result<Box<dyn Read + Send + Sync + 'static>> {
        let base = self.cfg.url.trim_end_matches('/');
        let (url, body) = if body.is_empty() {
            (
                format!("{base}/?output_format_json_quote_64bit_integers=0"),
                sql.as_bytes(),
            )
        } else {
            (
                format!(
                    "{base}/?output_format_json_quote_64bit_integers=0&query={}",
                    encode(sql)
                ),
                body,
            )
        };
        let mut req = self.agent.post(&url);
        if let Some(u) = &self.cfg.user {
            req = req.header("X-ClickHouse-User", u);
        }
        if let Some(p) = &self.cfg.password {
            req = req.header("X-ClickHouse-Key", p);
        }
        let resp = req.send(body).map_err(|e| self.unanswered(e))?;
        let status = resp.status();
        // Every answer of ClickHouse's (errors and refused passwords too) has headers of its
        // own, `X-ClickHouse-Server-Display-Name` since 18.16 and more in later releases.
        let clickhouse = resp
            .headers()
            .keys()
            .any(|k| k.as_str().starts_with("x-clickhouse-"));
        let html = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().starts_with("text/html"));
        let mut reader = resp.into_body().into_reader();
        if clickhouse && status.is_success() {
            return Ok(Box::new(reader));
        }
        let mut text = String::new();
        let _ = (&mut reader).take(2048).read_to_string(&mut text);
        // Some other HTTP server (a web page's, a proxy's login page): one short line of
        // what it said, never its page; and a success from it wrote nothing.
        if !clickhouse && (html || !status.is_success() || text.trim_start().starts_with('<')) {
            bail!(
                "{} does not look like ClickHouse: it answered {status} with no X-ClickHouse-* \
                 headers{} ({})",
                self.cfg.url,
                if html || text.trim_start().starts_with('<') {
                    " and an HTML page"
                } else {
                    ""
                },
                one_line(&text)
            );
        }
        if !status.is_success() {
            return Err(Refused(format!(
                "ClickHouse at {}: {status}: {}",
                self.cfg.url,
                text.trim()
            ))
            .into());
        }
        // A success without ClickHouse's headers and not a page (a proxy that drops
        // headers): taken as ClickHouse's, what was read of it first.
        Ok(Box::new(
            std::io::Cursor::new(text.into_bytes()).chain(reader),
        ))
    }

    /// A request that got no answer, in words: no connection, or none within the timeout.
    fn unanswered(&self, e: ureq::Error) -> anyhow::Error {
        use ureq::Timeout as T;
        let url = &self.cfg.url;
        match e {
            ureq::Error::Timeout(T::Connect | T::Resolve) => anyhow!(
                "no connection to ClickHouse at {url} within {} s",
                CONNECT_TIMEOUT.min(self.cfg.timeout).as_secs_f64()
            ),
            ureq::Error::Timeout(T::SendRequest | T::SendBody | T::PerWrite) => anyhow!(
                "ClickHouse at {url} did not take the request within {} s",
                self.cfg.timeout.as_secs_f64()
            ),
            ureq::Error::Timeout(_) => anyhow!(
                "no HTTP answer from {url} within {} s",
                self.cfg.timeout.as_secs_f64()
            ),
            e => anyhow::Error::new(e).context(format!("ClickHouse at {url}")),
        }
    }

    /// Reads the rest of an answer (an INSERT's or a statement's: nothing of interest).
    fn finish(&self, mut r: impl Read) -> Result<()> {
        std::io::copy(&mut r, &mut std::io::sink()).map_err(|e| self.cut(e))?;
        Ok(())
    }

    /// An answer that broke off or stalled while it was read.
    fn cut(&self, e: std::io::Error) -> anyhow::Error {
        let timeout = e.kind() == std::io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|i| i.downcast_ref::<ureq::Error>())
                .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
        if timeout {
            return anyhow!(
                "the answer from ClickHouse at {} stopped for {} s",
                self.cfg.url,
                self.cfg.timeout.as_secs_f64()
            );
        }
        anyhow::Error::new(e).context(format!(
            "reading the answer from ClickHouse at {}",
            self.cfg.url
        ))
    }

    /// Runs a statement that returns nothing of interest.
    pub fn execute(&self, sql: &str) -> Result<()> {
        self.finish(self.send(sql, b"")?)
    }

    /// Runs a query and parses each JSONEachRow line.
    fn rows<T: for<'de> Deserialize<'de>>(
        &self,
        sql: &str,
        mut each: impl FnMut(T) -> Result<()>,
    ) -> Result<()> {
        let r = self.send(&format!("{sql} FORMAT JSONEachRow"), b"")?;
        for line in BufReader::with_capacity(1 << 16, r).lines() {
            let line = line.map_err(|e| self.cut(e))?;
            if line.is_empty() {
                continue;
            }
            each(serde_json::from_str(&line).with_context(|| format!("ClickHouse row: {line}"))?)?;
        }
        Ok(())
    }

    /// Creates the database and tables if they are missing.
    pub fn ensure_schema(&self) -> Result<()> {
        let db = &self.cfg.database;
        for sql in query::clickhouse_ddl(db) {
            self.execute(&sql)?;
        }
        // Tables made before schema 1.2 have no `congestion` column.
        if !self.has_column("records", "congestion")? {
            self.execute(&format!(
                "ALTER TABLE {db}.records {}",
                query::ADD_CONGESTION
            ))?;
        }
        // A `latest` view made before it was kept per source (ordered and grouped by target
        // and metric only) is made again from the records. On one server it is a
        // materialized view; a cluster's (a Distributed table) is its operator's: `latest()`
        // says what to run.
        if !self.has_column("latest", "source")? && self.engine("latest")? == "MaterializedView" {
            self.execute(&format!("DROP TABLE IF EXISTS {db}.latest"))?;
            // POPULATE reads the records there are; a record arriving while it runs is
            // missed by the view until the next record of its series.
            self.execute(&query::clickhouse_latest_ddl(db))?;
        }
        Ok(())
    }

    /// Whether `table` of the database has the column `name`.
    fn has_column(&self, table: &str, name: &str) -> Result<bool> {
        #[derive(Deserialize)]
        struct Count {
            n: u8,
        }
        let mut has = false;
        self.rows(
            &format!(
                "SELECT toUInt8(count() > 0) AS n FROM system.columns WHERE database = {} \
                 AND table = {} AND name = {}",
                query::quote(&self.cfg.database),
                query::quote(table),
                query::quote(name)
            ),
            |c: Count| {
                has = c.n != 0;
                Ok(())
            },
        )?;
        Ok(has)
    }

    /// The engine of `table` ("" when there is none).
    fn engine(&self, table: &str) -> Result<String> {
        #[derive(Deserialize)]
        struct Engine {
            engine: String,
        }
        let mut engine = String::new();
        self.rows(
            &format!(
                "SELECT engine FROM system.tables WHERE database = {} AND name = {}",
                query::quote(&self.cfg.database),
                query::quote(table)
            ),
            |e: Engine| {
                engine = e.engine;
                Ok(())
            },
        )?;
        Ok(engine)
    }

    /// The run log rows of `runs` the archive does not hold yet (by campaign and id, the
    /// key SQLite's `runs` has), so that rows shipped again are written once.
    pub fn unwritten_runs(&self, runs: &[RunLog]) -> Result<Vec<RunLog>> {
        let mut since: std::collections::BTreeMap<&str, Ms> = Default::default();
        for l in runs {
            let e = since.entry(l.campaign.as_str()).or_insert(l.ended_ms);
            *e = (*e).min(l.ended_ms);
        }
        let mut held = std::collections::HashSet::new();
        for (campaign, since) in since {
            for l in self.runs(Some(campaign), since)? {
                held.insert((l.campaign, l.id));
            }
        }
        Ok(runs
            .iter()
            .filter(|l| !held.contains(&(l.campaign.clone(), l.id)))
            .cloned()
            .collect())
    }

    /// Inserts records and run log rows, one INSERT each (a batch).
    pub fn write(&self, records: &[Record], runs: &[RunLog]) -> Result<()> {
        let db = &self.cfg.database;
        if !records.is_empty() {
            // RowBinary: floats travel as their bits (text would be parsed back a last bit
            // off by older servers), and it is the cheapest format to send.
            let mut body = Vec::with_capacity(records.len() * 160);
            for r in records {
                Row::from_record(r).row_binary(&mut body);
            }
            self.finish(self.send(&format!("INSERT INTO {db}.records FORMAT RowBinary"), &body)?)?;
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
            self.finish(self.send(&format!("INSERT INTO {db}.runs FORMAT JSONEachRow"), &body)?)?;
        }
        Ok(())
    }

    /// Calls `each` with every record matching `f`, in time order.
    pub fn records(&self, f: &Filter, each: &mut dyn FnMut(Record) -> Result<()>) -> Result<()> {
        let cols = "ts_ms, target, metric, source, status, value, origin, seq, period_ms, timeout_ms, \
                    error, transport, payload_bytes, nagle, streams, sndbuf_bytes, rcvbuf_bytes, raw_ms, \
                    rtt_subtracted_ms, forecast_value, forecast_method, forecast_selector, forecast_error, \
                    schema_version, congestion";
        let sql = format!(
            "SELECT {cols} FROM {}.records WHERE {} ORDER BY ts_ms",
            self.cfg.database,
            query::clickhouse_where(f)
        );
        self.rows(&sql, |row: ChRow| each(row.into_record()?))
    }

    pub fn summary(&self, from_ms: Ms, to_ms: Ms) -> Result<Vec<Summary>> {
        let mut out = Vec::new();
        self.rows(
            &query::clickhouse_summary(&self.cfg.database, from_ms, to_ms),
            |s: SummaryRow| {
                out.push(Summary {
                    target: s.target,
                    metric: s.metric,
                    source: s.source,
                    n: s.n,
                    ok: s.ok,
                    mean: s.mean.filter(|m| m.is_finite()),
                    min: s.min,
                    max: s.max,
                });
                Ok(())
            },
        )?;
        Ok(out)
    }

    pub fn hourly(
        &self,
        target: &str,
        metric: Metric,
        from_ms: Ms,
        to_ms: Ms,
    ) -> Result<Vec<Bucket>> {
        let mut out = Vec::new();
        self.rows(
            &query::clickhouse_hourly(&self.cfg.database, target, metric, from_ms, to_ms),
            |b: BucketRow| {
                out.push(Bucket {
                    hour_ms: b.hour_ms,
                    source: b.source,
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
        let asked = self.rows(
            &query::clickhouse_latest(&self.cfg.database),
            |l: Latest| {
                out.push(l);
                Ok(())
            },
        );
        if let Err(e) = asked {
            // Asked again only of a server that answered (one that did not is not waited
            // for twice).
            if e.is::<Refused>()
                && self.engine("latest").is_ok_and(|e| e == "Distributed")
                && !self.has_column("latest", "source").unwrap_or(true)
            {
                bail!(
                    "{e:#}\nThe cluster's `latest` tables predate answers per source: drop \
                     {db}.latest and {db}.latest_local ON CLUSTER and create them again as \
                     `nowcast archive schema --cluster NAME` prints them",
                    db = self.cfg.database
                );
            }
            return Err(e);
        }
        Ok(out)
    }

    /// The campaigns in the run log, by name.
    pub fn campaigns(&self) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct Name {
            campaign: String,
        }
        let sql = format!(
            "SELECT DISTINCT campaign FROM {}.runs ORDER BY campaign",
            self.cfg.database
        );
        let mut out = Vec::new();
        self.rows(&sql, |r: Name| {
            out.push(r.campaign);
            Ok(())
        })?;
        Ok(out)
    }

    /// Run log rows of `campaign` (of every campaign when None) that ended at or after
    /// `since`, oldest first.
    pub fn runs(&self, campaign: Option<&str>, since: Ms) -> Result<Vec<RunLog>> {
        let of = campaign.map_or_else(String::new, |c| {
            format!("campaign = {} AND ", query::quote(c))
        });
        let sql = format!(
            "SELECT id, campaign, job, target, probe, nominal_ms, due_ms, started_ms, ended_ms, outcome, \
             reason, slots, gate_check FROM {}.runs WHERE {of}ended_ms >= {since} \
             ORDER BY ended_ms, id",
            self.cfg.database,
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
    source: String,
    n: u64,
    ok: u64,
    mean: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
}

#[derive(Deserialize)]
struct BucketRow {
    hour_ms: i64,
    source: String,
    n: u64,
    ok: u64,
    mean: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
}
