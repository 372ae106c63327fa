//! Rows of the archive back into records, summaries, hourly buckets and the run log.

use super::{Sqlite, PER_MS, RUN_COLUMNS};
use crate::archive::query::{Bucket, Filter, Latest, Summary};
use crate::archive::row::Row;
use crate::runlog::{GateResult, JobHistory, Outcome, Resume, RunLog};
use crate::when::{Ms, HOUR};
use anyhow::{Context, Result};
use nowcast_core::record::{
    Congestion, Metric, Record, Selector, Status, Transport, SCHEMA_VERSION,
};
use rusqlite::{params, OptionalExtension};
use std::collections::HashMap;

const RECORD_COLUMNS: &str = "r.ts_ms, s.target, s.metric, s.source, r.status, r.value, r.origin, \
r.seq, r.period_ms, r.timeout_ms, r.error, r.transport, r.payload_bytes, r.nagle, r.streams, \
r.sndbuf_bytes, r.rcvbuf_bytes, r.raw_ms, r.rtt_subtracted_ms, r.forecast_value, \
r.forecast_method, r.forecast_selector, r.forecast_error, r.schema_version, r.congestion";

fn status_of(code: i64) -> Status {
    match code {
        0 => Status::Ok,
        1 => Status::Timeout,
        _ => Status::Error,
    }
}

impl Sqlite {
    /// Every series: target, metric, source, id.
    fn all_series(&self) -> impl Iterator<Item = (&str, Metric, &str, i64)> {
        self.series.iter().flat_map(|(t, v)| {
            v.iter()
                .map(move |(m, s, id)| (t.as_str(), *m, s.as_str(), *id))
        })
    }

    fn series_matching(&self, f: &Filter) -> Result<Vec<i64>> {
        Ok(self
            .all_series()
            .filter(|(t, m, s, _)| {
                (f.targets.is_empty() || f.targets.iter().any(|x| x == t))
                    && (f.metrics.is_empty() || f.metrics.contains(m))
                    && f.source_matches(s)
            })
            .map(|e| e.3)
            .collect())
    }

    pub(super) fn records_now(
        &mut self,
        f: &Filter,
        each: &mut dyn FnMut(Record) -> Result<()>,
    ) -> Result<()> {
        self.load_series()?;
        let lo = f
            .since_ms
            .map_or(i64::MIN, |s| (s.floor() as i64).saturating_mul(PER_MS));
        let hi = f
            .until_ms
            .map_or(i64::MAX, |u| (u.ceil() as i64).saturating_mul(PER_MS));
        let mut sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r JOIN series s ON s.id = r.series \
             WHERE r.id >= ?1 AND r.id < ?2 AND r.ts_ms >= ?3 AND r.ts_ms < ?4"
        );
        let narrow = !(f.targets.is_empty() && f.metrics.is_empty() && f.sources.is_empty());
        if narrow {
            let ids = self.series_matching(f)?;
            if ids.is_empty() {
                return Ok(());
            }
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            sql.push_str(&format!(" AND r.series IN ({})", list.join(",")));
        }
        sql.push_str(" ORDER BY r.id");
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query(params![
            lo,
            hi,
            f.since_ms.unwrap_or(f64::NEG_INFINITY),
            f.until_ms.unwrap_or(f64::INFINITY)
        ])?;
        while let Some(r) = rows.next()? {
            let metric: String = r.get(2)?;
            let row = Row {
                ts_ms: r.get(0)?,
                target: r.get(1)?,
                metric: Metric::from_name(&metric)
                    .with_context(|| format!("unknown metric {metric}"))?,
                source: r.get(3)?,
                status: status_of(r.get(4)?),
                value: r.get(5)?,
                origin: r.get(6)?,
                seq: r.get::<_, Option<i64>>(7)?.map(|v| v as u64),
                period_ms: r.get(8)?,
                timeout_ms: r.get(9)?,
                error: r.get(10)?,
                transport: r
                    .get::<_, Option<String>>(11)?
                    .and_then(|t| Transport::from_name(&t)),
                payload_bytes: r.get::<_, Option<i64>>(12)?.map(|v| v as u64),
                nagle: r.get(13)?,
                streams: r.get(14)?,
                sndbuf_bytes: r.get::<_, Option<i64>>(15)?.map(|v| v as u64),
                rcvbuf_bytes: r.get::<_, Option<i64>>(16)?.map(|v| v as u64),
                raw_ms: r.get(17)?,
                rtt_subtracted_ms: r.get(18)?,
                forecast_value: r.get(19)?,
                forecast_method: r.get(20)?,
                forecast_selector: r
                    .get::<_, Option<String>>(21)?
                    .and_then(|s| Selector::from_name(&s)),
                forecast_error: r.get(22)?,
                schema_version: r
                    .get::<_, Option<String>>(23)?
                    .unwrap_or_else(|| SCHEMA_VERSION.to_string()),
                congestion: r
                    .get::<_, Option<String>>(24)?
                    .map(|c| Congestion::from_json(&c))
                    .transpose()
                    .map_err(|e| anyhow::anyhow!("archive row: {e}"))?,
            };
            each(
                row.into_record()
                    .map_err(|e| anyhow::anyhow!("archive row: {e}"))?,
            )?;
        }
        Ok(())
    }

    pub(super) fn summary_now(&mut self, from_ms: Ms, to_ms: Ms) -> Result<Vec<Summary>> {
        self.load_series()?;
        // One pass over the time range of the table in key order, added up per series here:
        // cheaper than SQLite's GROUP BY, which would sort the range.
        #[derive(Default)]
        struct Acc {
            n: u64,
            ok: u64,
            sum: f64,
            nv: u64,
            min: Option<f64>,
            max: Option<f64>,
        }
        let mut by_series: HashMap<i64, Acc> = HashMap::new();
        let mut stmt = self.conn.prepare_cached(
            "SELECT series, status, value FROM records WHERE id >= ?1 AND id < ?2",
        )?;
        let mut rows = stmt.query(params![from_ms * PER_MS, to_ms * PER_MS])?;
        while let Some(r) = rows.next()? {
            let a = by_series.entry(r.get(0)?).or_default();
            a.n += 1;
            if r.get::<_, i64>(1)? == 0 {
                a.ok += 1;
            }
            if let Some(v) = r.get::<_, Option<f64>>(2)? {
                a.sum += v;
                a.nv += 1;
                a.min = Some(a.min.map_or(v, |m| m.min(v)));
                a.max = Some(a.max.map_or(v, |m| m.max(v)));
            }
        }
        let names: HashMap<i64, (&str, Metric, &str)> = self
            .all_series()
            .map(|(t, m, s, id)| (id, (t, m, s)))
            .collect();
        // In the order ClickHouse gives: target, metric's name, source.
        let mut out: Vec<Summary> = by_series
            .into_iter()
            .filter_map(|(id, a)| {
                let (target, metric, source) = names.get(&id)?;
                Some(Summary {
                    target: target.to_string(),
                    metric: metric.name().to_string(),
                    source: source.to_string(),
                    n: a.n,
                    ok: a.ok,
                    mean: (a.nv > 0).then(|| a.sum / a.nv as f64),
                    min: a.min,
                    max: a.max,
                })
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.target, &a.metric, &a.source).cmp(&(&b.target, &b.metric, &b.source))
        });
        Ok(out)
    }

    pub(super) fn hourly_now(
        &mut self,
        target: &str,
        metric: Metric,
        from_ms: Ms,
        to_ms: Ms,
    ) -> Result<Vec<Bucket>> {
        self.load_series()?;
        // The series of the target's metric: one per source.
        let sources: HashMap<i64, String> = self
            .all_series()
            .filter(|(t, m, _, _)| *t == target && *m == metric)
            .map(|(_, _, s, id)| (id, s.to_string()))
            .collect();
        if sources.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = sources.keys().map(i64::to_string).collect();
        let sql = format!(
            "SELECT CAST(ts_ms / {HOUR} AS INTEGER) * {HOUR} AS h, series, count(*), \
             sum(status = 0), avg(value), min(value), max(value) FROM records \
             WHERE series IN ({}) AND id >= ?1 AND id < ?2 GROUP BY h, series",
            list.join(",")
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(params![from_ms * PER_MS, to_ms * PER_MS], |r| {
            Ok(Bucket {
                hour_ms: r.get(0)?,
                source: sources
                    .get(&r.get::<_, i64>(1)?)
                    .cloned()
                    .unwrap_or_default(),
                n: r.get::<_, i64>(2)? as u64,
                ok: r.get::<_, i64>(3)? as u64,
                mean: r.get(4)?,
                min: r.get(5)?,
                max: r.get(6)?,
            })
        })?;
        let mut out: Vec<Bucket> = rows.collect::<rusqlite::Result<_>>()?;
        out.sort_by(|a, b| (a.hour_ms, &a.source).cmp(&(b.hour_ms, &b.source)));
        Ok(out)
    }

    pub(super) fn latest_now(&mut self) -> Result<Vec<Latest>> {
        self.load_series()?;
        let series: Vec<(String, Metric, String, i64)> = self
            .all_series()
            .map(|(t, m, s, id)| (t.to_string(), m, s.to_string(), id))
            .collect();
        let mut stmt = self.conn.prepare_cached(
            "SELECT ts_ms, value FROM records WHERE series = ?1 AND status = 0 ORDER BY id DESC LIMIT 1",
        )?;
        let mut out = Vec::new();
        for (target, m, source, id) in series {
            let row: Option<(f64, f64)> = stmt
                .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((ts_ms, value)) = row {
                out.push(Latest {
                    target,
                    metric: m.name().to_string(),
                    source,
                    ts_ms,
                    value,
                });
            }
        }
        out.sort_by(|a, b| {
            (&a.target, &a.metric, &a.source).cmp(&(&b.target, &b.metric, &b.source))
        });
        Ok(out)
    }

    pub(super) fn runs_now(&mut self, campaign: &str, since: Ms) -> Result<Vec<RunLog>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE campaign = ?1 AND ended_ms >= ?2 ORDER BY ended_ms, id"
        ))?;
        let rows = stmt.query_map(params![campaign, since], run_of)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub(super) fn campaigns_now(&mut self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT campaign FROM runs ORDER BY campaign")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub(super) fn all_runs_now(&mut self, since: Ms) -> Result<Vec<RunLog>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE ended_ms >= ?1 ORDER BY ended_ms, id"
        ))?;
        let rows = stmt.query_map(params![since], run_of)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The latest run log row of `job` (outside sanity checks when `gate_check` is false).
    fn last_run(&mut self, campaign: &str, job: &str, gate_check: bool) -> Result<Option<RunLog>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE campaign = ?1 AND job = ?2 AND gate_check = ?3 \
             ORDER BY nominal_ms DESC LIMIT 1"
        ))?;
        Ok(stmt
            .query_row(params![campaign, job, gate_check], run_of)
            .optional()?)
    }

    pub(super) fn resume_now(
        &mut self,
        campaign: &str,
        jobs: &[(String, bool, bool)],
    ) -> Result<Resume> {
        let next_id: Option<i64> = self.conn.query_row(
            "SELECT max(id) FROM runs WHERE campaign = ?1",
            params![campaign],
            |r| r.get(0),
        )?;
        let mut resume = Resume {
            jobs: HashMap::new(),
            next_id: next_id.map_or(0, |n| n as u64 + 1),
        };
        for (key, count, gate) in jobs {
            let mut h = JobHistory::default();
            let last = self.last_run(campaign, key, false)?;
            h.last_nominal_ms = last.as_ref().map(|l| l.nominal_ms);
            if *count {
                h.runs = self.conn.query_row(
                    "SELECT count(*) FROM runs WHERE campaign = ?1 AND job = ?2 AND gate_check = 0 \
                     AND outcome IN ('ok', 'failed', 'killed')",
                    params![campaign, key],
                    |r| r.get::<_, i64>(0),
                )? as u64;
            }
            if *gate {
                let check = self.last_run(campaign, key, true)?;
                h.gate = [last, check]
                    .into_iter()
                    .flatten()
                    .filter(|l| l.outcome.started())
                    .max_by_key(|l| l.ended_ms)
                    .map(|l| GateResult {
                        ok: l.outcome == Outcome::Ok,
                        at_ms: l.ended_ms,
                        reason: l.reason,
                    });
            }
            if h != JobHistory::default() {
                resume.jobs.insert(key.clone(), h);
            }
        }
        Ok(resume)
    }

    pub(super) fn count_now(&mut self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0))?
            as u64)
    }
}

fn run_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunLog> {
    let outcome: String = r.get(9)?;
    Ok(RunLog {
        campaign: r.get(0)?,
        id: r.get::<_, i64>(1)? as u64,
        job: r.get(2)?,
        target: r.get(3)?,
        probe: r.get(4)?,
        nominal_ms: r.get(5)?,
        due_ms: r.get(6)?,
        started_ms: r.get(7)?,
        ended_ms: r.get(8)?,
        outcome: Outcome::parse(&outcome).unwrap_or(Outcome::Failed),
        reason: r.get(10)?,
        slots: r.get::<_, i64>(11)? as u64,
        gate_check: r.get(12)?,
    })
}
