//! What can be asked of an archive, the same for SQLite and ClickHouse so that both give the
//! same answers (tested against a real server): the records matching a [`Filter`] in time
//! order, a day's summary of every series, one target's metric in hourly buckets per source,
//! and the latest measurement of every series. A series is a (target, metric, source): the
//! rtt of `nowcast tcp` and of `nowcast udp` to one host are two. Also ClickHouse's schema
//! and query text, which its edge sends over HTTP (ClickHouse 18.16 has no query
//! parameters, so values are quoted here, [`quote`]), and the read-back that keeps writes
//! idempotent asks for ([`span`]).
//!
//! Deterministic core: data types and text.

use crate::when::{date, Ms, DAY, HOUR};
use nowcast_core::record::Metric;
use serde::Serialize;

/// Which records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// From this time (ms, inclusive).
    pub since_ms: Option<f64>,
    /// Before this time (ms, exclusive).
    pub until_ms: Option<f64>,
    /// Any of these targets (`to`); empty: all.
    pub targets: Vec<String>,
    pub metrics: Vec<Metric>,
    /// Any of these sources; a probe type's (`nowcast tcp`) also names the series a campaign's
    /// probes of that type write under their own names (`nowcast tcp (bw)`). Empty: all.
    pub sources: Vec<String>,
}

impl Filter {
    /// Whether `source` is one of [`Filter::sources`] (see there).
    pub fn source_matches(&self, source: &str) -> bool {
        self.sources.is_empty()
            || self
                .sources
                .iter()
                .any(|x| x == source || x == crate::campaign::plan::source_type(source))
    }
}

/// One series (target, metric, source) over a period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub target: String,
    pub metric: String,
    pub source: String,
    /// Records of every status.
    pub n: u64,
    /// Records with status ok.
    pub ok: u64,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// One hour of one series (of the target and metric asked about).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bucket {
    /// Start of the hour, ms.
    pub hour_ms: Ms,
    pub source: String,
    pub n: u64,
    pub ok: u64,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// The latest measurement (status ok) of one series.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Latest {
    pub target: String,
    pub metric: String,
    pub source: String,
    pub ts_ms: f64,
    pub value: f64,
}

/// Quoted characters of the targets (or sources) a read-back names at most; with more, it
/// reads every target of its time span (still one query, and the records are compared
/// whole anyway). ClickHouse parses at most 256 KiB of a query (`max_query_size`).
pub const MAX_LISTED: usize = 64 * 1024;

/// The records an archive may already hold of `records` (none: `None`): their targets,
/// metrics and sources over their time span, widened by a millisecond each side so that a
/// bound parsed a last bit off (ClickHouse 18.16 reads the literal) cannot leave one out.
pub fn span(records: &[nowcast_core::record::Record]) -> Option<Filter> {
    use std::collections::BTreeSet;
    let first = records.first()?;
    let (mut lo, mut hi) = (first.timestamp_ms, first.timestamp_ms);
    let (mut targets, mut sources) = (BTreeSet::new(), BTreeSet::new());
    let mut metrics: Vec<Metric> = Vec::new();
    for r in records {
        lo = lo.min(r.timestamp_ms);
        hi = hi.max(r.timestamp_ms);
        targets.insert(r.to.as_str());
        if !metrics.contains(&r.metric) {
            metrics.push(r.metric);
        }
        sources.insert(r.source.as_str());
    }
    let listed = |set: BTreeSet<&str>| -> Vec<String> {
        let size: usize = set.iter().map(|s| s.len() + 4).sum();
        if size > MAX_LISTED {
            Vec::new()
        } else {
            set.into_iter().map(str::to_string).collect()
        }
    };
    Some(Filter {
        since_ms: Some(lo.floor() - 1.0),
        until_ms: Some(hi.floor() + 2.0),
        targets: listed(targets),
        metrics,
        sources: listed(sources),
    })
}

/// Whether two answers agree, allowing the last bits of means summed in different orders.
pub fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300),
        (None, None) => true,
        _ => false,
    }
}

/// A ClickHouse string literal (backslash and quote escaped).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A ClickHouse identifier (database or table name): letters, digits and `_` only.
pub fn identifier(s: &str) -> Result<&str, String> {
    if !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        Ok(s)
    } else {
        Err(format!(
            "'{s}' is not a ClickHouse name (letters, digits and _)"
        ))
    }
}

/// The columns of ClickHouse's `records` table after `day`, in the order of [`super::row::Row`].
pub const CLICKHOUSE_COLUMNS: &str = "ts_ms Float64, target String, metric String, source String, \
status String, value Nullable(Float64), origin Nullable(String), seq Nullable(UInt64), \
period_ms Nullable(Float64), timeout_ms Nullable(Float64), error Nullable(String), \
transport Nullable(String), payload_bytes Nullable(UInt64), nagle Nullable(UInt8), \
streams Nullable(UInt32), sndbuf_bytes Nullable(UInt64), rcvbuf_bytes Nullable(UInt64), \
raw_ms Nullable(Float64), rtt_subtracted_ms Nullable(Float64), forecast_value Nullable(Float64), \
forecast_method Nullable(String), forecast_selector Nullable(String), \
forecast_error Nullable(Float64), schema_version String, congestion Nullable(String)";

/// The columns of ClickHouse's `runs` table after `day`.
pub const CLICKHOUSE_RUN_COLUMNS: &str = "id UInt64, campaign String, job String, target String, \
probe String, nominal_ms Int64, due_ms Int64, started_ms Nullable(Int64), ended_ms Int64, \
outcome String, reason Nullable(String), slots UInt64, gate_check UInt8";

/// The tables of one ClickHouse server: MergeTree partitioned by day, ordered by target
/// and time, so that a target's series is one range of the sorted data and a day is one
/// partition. The SQL is what 18.16 and current releases both accept.
pub fn clickhouse_ddl(db: &str) -> Vec<String> {
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {db}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.records (day Date, {CLICKHOUSE_COLUMNS}) \
             ENGINE = MergeTree() PARTITION BY day ORDER BY (target, metric, ts_ms)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.runs (day Date, {CLICKHOUSE_RUN_COLUMNS}) \
             ENGINE = MergeTree() PARTITION BY toYYYYMM(day) ORDER BY (campaign, job, nominal_ms, id)"
        ),
        clickhouse_latest_ddl(db),
    ]
}

/// The `latest` view of one server (see [`LATEST_VIEW`]).
pub fn clickhouse_latest_ddl(db: &str) -> String {
    format!("CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.latest {LATEST_VIEW} FROM {db}.records {LATEST_GROUP}")
}

/// The column schema 1.2 added, for `records` tables made before it (ClickHouse 18.16 has
/// no `ADD COLUMN IF NOT EXISTS`: add it when `system.columns` does not list it).
pub const ADD_CONGESTION: &str = "ADD COLUMN congestion Nullable(String)";

/// The latest ok value of every series, kept by a materialized view as records arrive, so
/// that the question reads a row per series instead of every record. Its sort key is the
/// series: an AggregatingMergeTree merges the rows of one key.
const LATEST_VIEW: &str = "ENGINE = AggregatingMergeTree() ORDER BY (target, metric, source) \
POPULATE AS SELECT target, metric, source, maxState(ts_ms) AS t, argMaxState(value, ts_ms) AS v";
const LATEST_GROUP: &str = "WHERE status = 'ok' GROUP BY target, metric, source";

/// The same tables for a cluster: ReplicatedMergeTree tables on every shard (their
/// ZooKeeper paths named by the `{shard}` and `{replica}` macros of each server's
/// configuration) behind Distributed tables that spread inserts by target and fan queries
/// out. Queries and inserts go to the Distributed tables, which carry the names the single
/// server's tables have, so nothing else changes.
pub fn clickhouse_cluster_ddl(db: &str, cluster: &str) -> Vec<String> {
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {db} ON CLUSTER {cluster}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.records_local ON CLUSTER {cluster} (day Date, {CLICKHOUSE_COLUMNS}) \
             ENGINE = ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{db}/records', '{{replica}}') \
             PARTITION BY day ORDER BY (target, metric, ts_ms)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.records ON CLUSTER {cluster} AS {db}.records_local \
             ENGINE = Distributed({cluster}, {db}, records_local, cityHash64(target))"
        ),

        format!(
            "CREATE TABLE IF NOT EXISTS {db}.runs_local ON CLUSTER {cluster} (day Date, {CLICKHOUSE_RUN_COLUMNS}) \
             ENGINE = ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{db}/runs', '{{replica}}') \
             PARTITION BY toYYYYMM(day) ORDER BY (campaign, job, nominal_ms, id)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.runs ON CLUSTER {cluster} AS {db}.runs_local \
             ENGINE = Distributed({cluster}, {db}, runs_local, cityHash64(job))"
        ),
        format!(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.latest_local ON CLUSTER {cluster} \
             ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{{shard}}/{db}/latest', '{{replica}}') \
             ORDER BY (target, metric, source) AS SELECT target, metric, source, \
             maxState(ts_ms) AS t, argMaxState(value, ts_ms) AS v FROM {db}.records_local \
             {LATEST_GROUP}"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.latest ON CLUSTER {cluster} AS {db}.latest_local \
             ENGINE = Distributed({cluster}, {db}, latest_local, cityHash64(target))"
        ),
    ]
}

/// ClickHouse's condition for `f`; the day bounds let it skip whole partitions.
pub fn clickhouse_where(f: &Filter) -> String {
    let mut parts = vec!["1 = 1".to_string()];
    if let Some(s) = f.since_ms {
        parts.push(format!(
            "ts_ms >= {s:?} AND day >= '{}'",
            date(s.floor() as Ms)
        ));
    }
    if let Some(u) = f.until_ms {
        parts.push(format!(
            "ts_ms < {u:?} AND day <= '{}'",
            date(u.ceil() as Ms)
        ));
    }
    let list = |col: &str, vals: Vec<String>| {
        format!(
            "{col} IN ({})",
            vals.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ")
        )
    };
    if !f.targets.is_empty() {
        parts.push(list("target", f.targets.clone()));
    }
    if !f.metrics.is_empty() {
        parts.push(list(
            "metric",
            f.metrics.iter().map(|m| m.name().to_string()).collect(),
        ));
    }
    if !f.sources.is_empty() {
        // And a probe type's series under a campaign probe's name: `nowcast tcp (bw)`
        // (Filter::source_matches; LIKE's own characters escaped in the type).
        let named: Vec<String> = f
            .sources
            .iter()
            .map(|x| {
                let escaped: String = x
                    .chars()
                    .flat_map(|c| match c {
                        '\\' | '%' | '_' => vec!['\\', c],
                        c => vec![c],
                    })
                    .collect();
                format!("source LIKE {}", quote(&format!("{escaped} (%)")))
            })
            .collect();
        parts.push(format!(
            "({} OR {})",
            list("source", f.sources.clone()),
            named.join(" OR ")
        ));
    }
    parts.join(" AND ")
}

/// ClickHouse: the summary of every series in [from, to).
pub fn clickhouse_summary(db: &str, from_ms: Ms, to_ms: Ms) -> String {
    let w = clickhouse_where(&Filter {
        since_ms: Some(from_ms as f64),
        until_ms: Some(to_ms as f64),
        ..Filter::default()
    });
    format!(
        "SELECT target, metric, source, count() AS n, countIf(status = 'ok') AS ok, \
         avg(value) AS mean, min(value) AS min, max(value) AS max FROM {db}.records WHERE {w} \
         GROUP BY target, metric, source ORDER BY target, metric, source"
    )
}

/// ClickHouse: one target's metric in hourly buckets per source over [from, to).
pub fn clickhouse_hourly(db: &str, target: &str, metric: Metric, from_ms: Ms, to_ms: Ms) -> String {
    let w = clickhouse_where(&Filter {
        since_ms: Some(from_ms as f64),
        until_ms: Some(to_ms as f64),
        targets: vec![target.to_string()],
        metrics: vec![metric],
        sources: Vec::new(),
    });
    format!(
        "SELECT toInt64(floor(ts_ms / {HOUR})) * {HOUR} AS hour_ms, source, count() AS n, \
         countIf(status = 'ok') AS ok, avg(value) AS mean, min(value) AS min, max(value) AS max \
         FROM {db}.records WHERE {w} GROUP BY hour_ms, source ORDER BY hour_ms, source"
    )
}

/// ClickHouse: the latest ok measurement of every series.
pub fn clickhouse_latest(db: &str) -> String {
    format!(
        "SELECT target, metric, source, maxMerge(t) AS ts_ms, argMaxMerge(v) AS value \
         FROM {db}.latest GROUP BY target, metric, source ORDER BY target, metric, source"
    )
}

/// The day `[start, start + 1 day)` that holds `ms`.
pub fn day_of(ms: Ms) -> (Ms, Ms) {
    let start = ms.div_euclid(DAY) * DAY;
    (start, start + DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_files_hold_what_nowcast_archive_schema_prints() {
        // native-probes/schema/ is what an operator reads and runs by hand: it must not fall
        // behind the tables nowcast itself creates.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/");
        for (file, ddl) in [
            ("clickhouse.sql", clickhouse_ddl("nowcast")),
            (
                "clickhouse-cluster.sql",
                clickhouse_cluster_ddl("nowcast", "nowcast_cluster"),
            ),
        ] {
            let text = std::fs::read_to_string(format!("{dir}{file}")).unwrap();
            let statements: Vec<String> = text
                .split(";\n")
                .map(|s| {
                    let lines: Vec<&str> = s.lines().filter(|l| !l.starts_with("--")).collect();
                    lines.join("\n").trim().to_string()
                })
                .filter(|s| !s.is_empty())
                .collect();
            assert_eq!(
                statements, ddl,
                "{file} differs from `nowcast archive schema`: regenerate it"
            );
        }
    }

    #[test]
    fn quoting_and_names() {
        assert_eq!(quote(r"a'b\c"), r"'a\'b\\c'");
        assert!(identifier("nowcast_1").is_ok());
        assert!(identifier("x; DROP").is_err());
        assert!(identifier("1x").is_err());
        let w = clickhouse_where(&Filter {
            since_ms: Some(86_400_000.0),
            targets: vec!["h'1".into()],
            ..Filter::default()
        });
        assert_eq!(
            w,
            r"1 = 1 AND ts_ms >= 86400000.0 AND day >= '1970-01-02' AND target IN ('h\'1')"
        );
    }

    #[test]
    fn a_read_back_of_very_many_targets_reads_every_target_of_its_span() {
        use nowcast_core::record::Record;
        let many: Vec<Record> = (0..5000)
            .map(|i| {
                Record::new(
                    1e12 + f64::from(i),
                    "s",
                    Metric::Rtt,
                    1.0,
                    &format!("a-rather-long-host-name-{i}.example:8060"),
                )
            })
            .collect();
        // A probe type's source takes its named probes too, LIKE's characters escaped.
        let w = clickhouse_where(&Filter {
            sources: vec!["nowcast tcp".into(), "a_b%".into()],
            ..Filter::default()
        });
        assert_eq!(
            w,
            "1 = 1 AND (source IN ('nowcast tcp', 'a_b%') OR source LIKE 'nowcast tcp (%)' OR source LIKE 'a\\\\_b\\\\% (%)')"
        );
        let f = Filter {
            sources: vec!["nowcast tcp".into()],
            ..Filter::default()
        };
        assert!(f.source_matches("nowcast tcp (bw)") && f.source_matches("nowcast tcp"));
        assert!(!f.source_matches("nowcast tcpx (bw)") && !f.source_matches("nowcast udp"));
        let f = span(&many).unwrap();
        assert!(f.targets.is_empty());
        assert_eq!(f.sources, ["s"]);
        assert_eq!(
            (f.since_ms, f.until_ms),
            (Some(1e12 - 1.0), Some(1e12 + 5001.0))
        );
        let f = span(&many[..100]).unwrap();
        assert_eq!(f.targets.len(), 100);
        assert!(span(&[]).is_none());
    }
}
