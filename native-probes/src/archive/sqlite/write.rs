//! Records into rows of `records`, and run log rows into `runs`: keys in time order, and
//! statements that name only the columns their rows fill.

use super::{Sqlite, PER_MS, RUN_COLUMNS};
use crate::archive::row::DETAIL_COLUMNS;
use crate::runlog::RunLog;
use crate::when::Ms;
use anyhow::Result;
use nowcast_core::record::{Record, Status, Transport, SCHEMA_VERSION};
use rusqlite::params;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use std::collections::hash_map::Entry;
use std::collections::HashMap;

/// Records per INSERT statement.
const CHUNK: usize = 32;
/// The columns of `records` before [`DETAIL_COLUMNS`] (the rest follow in the order of
/// [`Row`](crate::archive::row::Row)).
const KEY_COLUMNS: [&str; 5] = ["id", "series", "ts_ms", "status", "value"];
/// Columns of a row of `records`, in the order of [`columns`].
const COLUMNS: usize = KEY_COLUMNS.len() + DETAIL_COLUMNS.len();

fn column_name(c: usize) -> &'static str {
    KEY_COLUMNS
        .get(c)
        .copied()
        .unwrap_or_else(|| DETAIL_COLUMNS[c - KEY_COLUMNS.len()])
}
/// Every column: the shape of the statement that takes any record.
const ALL: u32 = (1 << COLUMNS) - 1;

/// `INSERT OR IGNORE` of `rows` rows giving only the columns in `shape` (bit i for
/// `column_name(i)`; the others are NULL by default). Records of one kind leave most
/// optional columns empty: naming only the filled ones halves the work per row (binding a
/// NULL costs as much as binding a value, and every named column is one more VDBE step).
fn insert_sql(rows: usize, shape: u32) -> String {
    let names: Vec<&str> = (0..COLUMNS)
        .filter(|c| shape & (1 << c) != 0)
        .map(column_name)
        .collect();
    let mut sql = format!(
        "INSERT OR IGNORE INTO records ({}) VALUES ",
        names.join(", ")
    );
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..names.len() {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("?{}", r * names.len() + c + 1));
        }
        sql.push(')');
    }
    sql
}

/// One record's row, in the order of [`column_name`].
fn columns<'a>(id: i64, series: i64, r: &'a Record) -> [ToSqlOutput<'a>; COLUMNS] {
    let p = r.probe.as_ref();
    let f = r.forecast.as_ref();
    let int = |v: Option<i64>| ToSqlOutput::Borrowed(v.map_or(ValueRef::Null, ValueRef::Integer));
    let real = |v: Option<f64>| ToSqlOutput::Borrowed(v.map_or(ValueRef::Null, ValueRef::Real));
    let text = |v: Option<&'a str>| {
        ToSqlOutput::Borrowed(v.map_or(ValueRef::Null, |t| ValueRef::Text(t.as_bytes())))
    };
    // The current version is the common case: stored as NULL.
    let version = (r.schema_version != SCHEMA_VERSION).then_some(r.schema_version.as_str());
    [
        int(Some(id)),
        int(Some(series)),
        real(Some(r.timestamp_ms)),
        int(Some(status_code(r.status))),
        real(r.value),
        text(r.from.as_deref()),
        int(r.seq.map(|v| v as i64)),
        real(r.period_ms),
        real(r.timeout_ms),
        text(r.error.as_deref()),
        text(p.and_then(|p| p.transport).map(Transport::name)),
        int(p.and_then(|p| p.payload_bytes).map(|v| v as i64)),
        int(p.and_then(|p| p.nagle).map(i64::from)),
        int(p.and_then(|p| p.streams).map(i64::from)),
        int(p.and_then(|p| p.sndbuf_bytes).map(|v| v as i64)),
        int(p.and_then(|p| p.rcvbuf_bytes).map(|v| v as i64)),
        real(p.and_then(|p| p.raw_ms)),
        real(p.and_then(|p| p.rtt_subtracted_ms)),
        real(f.map(|f| f.value)),
        text(f.map(|f| f.method.as_str())),
        text(f.map(|f| f.selector.name())),
        real(f.map(|f| f.error)),
        text(version),
        ToSqlOutput::Owned(
            r.congestion
                .as_ref()
                .map_or(Value::Null, |c| Value::Text(c.to_json())),
        ),
    ]
}

/// The columns of `row` that are not NULL.
fn shape_of(row: &[ToSqlOutput<'_>; COLUMNS]) -> u32 {
    row.iter()
        .enumerate()
        .filter(|(_, v)| {
            !matches!(
                v,
                ToSqlOutput::Borrowed(ValueRef::Null) | ToSqlOutput::Owned(Value::Null)
            )
        })
        .fold(0, |m, (c, _)| m | (1 << c))
}

/// Binds the columns of `row` in `shape` at parameters `base + 1 …`; returns the next base.
fn bind(
    stmt: &mut rusqlite::CachedStatement<'_>,
    base: usize,
    shape: u32,
    row: &[ToSqlOutput<'_>; COLUMNS],
) -> rusqlite::Result<usize> {
    let mut i = base;
    for (c, v) in row.iter().enumerate() {
        if shape & (1 << c) != 0 {
            i += 1;
            stmt.raw_bind_parameter(i, v)?;
        }
    }
    Ok(i)
}

fn status_code(s: Status) -> i64 {
    match s {
        Status::Ok => 0,
        Status::Timeout => 1,
        Status::Error => 2,
    }
}

/// The keys given out: the millisecond of the last and the next slot within it.
pub(super) struct Keys {
    last_ms: i64,
    next_slot: i64,
}

impl Keys {
    pub(super) fn new() -> Keys {
        Keys {
            last_ms: i64::MIN,
            next_slot: 0,
        }
    }

    /// The next free-looking key for a record at `ts_ms` (a key already taken by an
    /// earlier write is found at insert time and the record takes the next).
    fn next(&mut self, ts_ms: f64) -> Result<i64> {
        let ms = ts_ms.floor() as i64;
        if ms != self.last_ms {
            self.last_ms = ms;
            self.next_slot = 0;
        }
        if self.next_slot >= PER_MS {
            anyhow::bail!("more than {PER_MS} records in the millisecond {ms}");
        }
        self.next_slot += 1;
        Ok(ms * PER_MS + self.next_slot - 1)
    }
}

impl Sqlite {
    pub(super) fn write_now(
        &mut self,
        records: &[Record],
        runs: &[RunLog],
        batch: Option<&str>,
        now: Ms,
    ) -> Result<bool> {
        // Series first, outside the statement loop (they are few and cached).
        let mut ids = Vec::with_capacity(records.len());
        for r in records {
            ids.push(self.series_id(&r.to, r.metric, &r.source)?);
        }
        let tx = self.conn.savepoint()?;
        if let Some(b) = batch {
            let fresh = tx.execute(
                "INSERT OR IGNORE INTO spooled (batch, at_ms) VALUES (?1, ?2)",
                params![b, now],
            )?;
            if fresh == 0 {
                return Ok(false);
            }
        }
        {
            // Keys first (time order within the millisecond), then rows in statements of
            // CHUNK: one statement per row costs more than the row.
            // In time order, so that the keys of one millisecond are consecutive.
            let mut order: Vec<(&Record, i64)> = records.iter().zip(ids).collect();
            order.sort_by_key(|(r, _)| r.timestamp_ms.floor() as i64);
            // Keys above the largest in the table cannot be taken: those rows go in
            // statements of CHUNK (one statement per row costs more than the row).
            let max: i64 = tx.query_row("SELECT coalesce(max(id), -1) FROM records", [], |x| {
                x.get(0)
            })?;
            // Fresh rows in key order (appended to the table), CHUNK at a time, each
            // statement naming only the columns its rows fill.
            let mut fresh: Vec<[ToSqlOutput<'_>; COLUMNS]> = Vec::with_capacity(order.len());
            let mut old: Vec<(i64, i64, &Record)> = Vec::new();
            for (r, series) in order {
                let id = self.keys.next(r.timestamp_ms)?;
                if id > max {
                    fresh.push(columns(id, series, r));
                } else {
                    old.push((id, series, r));
                }
            }
            let mut statements = HashMap::new();
            for chunk in fresh.chunks(CHUNK) {
                let shape = chunk.iter().fold(0, |m, row| m | shape_of(row));
                let stmt = match statements.entry((chunk.len(), shape)) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => {
                        e.insert(tx.prepare_cached(&insert_sql(chunk.len(), shape))?)
                    }
                };
                let mut base = 0;
                for row in chunk {
                    base = bind(stmt, base, shape, row)?;
                }
                if stmt.raw_execute()? != chunk.len() {
                    anyhow::bail!("keys above the table's largest were taken: the archive changed during a write");
                }
            }
            // Older rows (an import into a period already archived) one by one, each taking
            // the next key of its millisecond when its own is taken.
            {
                let mut one = tx.prepare_cached(&insert_sql(1, ALL))?;
                for (id, series, r) in &old {
                    let mut id = *id;
                    loop {
                        bind(&mut one, 0, ALL, &columns(id, *series, r))?;
                        if one.raw_execute()? == 1 {
                            break;
                        }
                        id = self.keys.next(r.timestamp_ms)?;
                        if id.div_euclid(PER_MS) != (r.timestamp_ms.floor() as i64) {
                            anyhow::bail!(
                                "more than {PER_MS} records in the millisecond of {}",
                                r.timestamp_ms
                            );
                        }
                    }
                }
            }
            let mut runs_stmt = tx.prepare_cached(&format!(
                "INSERT OR IGNORE INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
            ))?;
            for l in runs {
                runs_stmt.execute(params![
                    l.campaign,
                    l.id as i64,
                    l.job,
                    l.target,
                    l.probe,
                    l.nominal_ms,
                    l.due_ms,
                    l.started_ms,
                    l.ended_ms,
                    l.outcome.name(),
                    l.reason,
                    l.slots as i64,
                    l.gate_check,
                ])?;
            }
        }
        tx.commit()?;
        Ok(true)
    }

    pub(super) fn prune_batches_now(&mut self, before: Ms) -> Result<()> {
        self.conn
            .execute("DELETE FROM spooled WHERE at_ms < ?1", params![before])?;
        Ok(())
    }
}
