//! The embedded archive: one SQLite file in WAL mode (no server), the default.
//!
//! Layout: `series` names each (target, metric, source) once; `records` holds one row per
//! record with the columns of [`Row`], keyed by `floor(ts_ms)·4096 + n` so that the table
//! itself is kept in time order (a day is one range of the primary key, read without an
//! index) and a series is one range of the index `records_by_series (series, id)`; `runs` is
//! the campaign's run log; `spooled` names the spool batches already written, in the same
//! transaction as their rows, so that a batch retried after a crash is written once.

use super::query::{Bucket, Filter, Latest, Summary};
use super::row::{Row, DETAIL_COLUMNS};
use crate::campaign::runlog::{GateResult, JobHistory, Outcome, Resume, RunLog};
use crate::when::{Ms, HOUR};
use anyhow::{Context, Result};
use nowcast_core::record::{
    Congestion, Metric, Record, Selector, Status, Transport, SCHEMA_VERSION,
};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS series (
  id INTEGER PRIMARY KEY,
  target TEXT NOT NULL,
  metric TEXT NOT NULL,
  source TEXT NOT NULL,
  UNIQUE (target, metric, source)
);
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY,
  series INTEGER NOT NULL,
  ts_ms REAL NOT NULL,
  status INTEGER NOT NULL,
  value REAL,
  origin TEXT, seq INTEGER, period_ms REAL, timeout_ms REAL, error TEXT,
  transport TEXT, payload_bytes INTEGER, nagle INTEGER, streams INTEGER,
  sndbuf_bytes INTEGER, rcvbuf_bytes INTEGER, raw_ms REAL, rtt_subtracted_ms REAL,
  forecast_value REAL, forecast_method TEXT, forecast_selector TEXT, forecast_error REAL,
  schema_version TEXT, congestion TEXT
);
CREATE INDEX IF NOT EXISTS records_by_series ON records (series, id);
CREATE TABLE IF NOT EXISTS runs (
  campaign TEXT NOT NULL,
  id INTEGER NOT NULL,
  job TEXT NOT NULL,
  target TEXT NOT NULL,
  probe TEXT NOT NULL,
  nominal_ms INTEGER NOT NULL,
  due_ms INTEGER NOT NULL,
  started_ms INTEGER,
  ended_ms INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  reason TEXT,
  slots INTEGER NOT NULL,
  gate_check INTEGER NOT NULL,
  PRIMARY KEY (campaign, id)
);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (campaign, job, gate_check, nominal_ms);
CREATE INDEX IF NOT EXISTS runs_by_end ON runs (campaign, ended_ms);
CREATE TABLE IF NOT EXISTS spooled (batch TEXT PRIMARY KEY, at_ms INTEGER NOT NULL);
";

/// Slots of the key per millisecond.
const PER_MS: i64 = 4096;

const RECORD_COLUMNS: &str = "r.ts_ms, s.target, s.metric, s.source, r.status, r.value, r.origin, \
r.seq, r.period_ms, r.timeout_ms, r.error, r.transport, r.payload_bytes, r.nagle, r.streams, \
r.sndbuf_bytes, r.rcvbuf_bytes, r.raw_ms, r.rtt_subtracted_ms, r.forecast_value, \
r.forecast_method, r.forecast_selector, r.forecast_error, r.schema_version, r.congestion";

const RUN_COLUMNS: &str = "campaign, id, job, target, probe, nominal_ms, due_ms, started_ms, ended_ms, outcome, reason, slots, gate_check";

/// Records per INSERT statement.
const CHUNK: usize = 32;
/// The columns of `records` before [`DETAIL_COLUMNS`] (the rest follow in [`Row`]'s order).
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

fn status_of(code: i64) -> Status {
    match code {
        0 => Status::Ok,
        1 => Status::Timeout,
        _ => Status::Error,
    }
}

/// An open archive file.
pub struct Sqlite {
    conn: Connection,
    /// The file, for messages ([`explain`]).
    path: PathBuf,
    /// Series ids by target, then metric and source (looked up without allocating).
    series: HashMap<String, Vec<(Metric, String, i64)>>,
    keys: Keys,
}

/// The keys given out: the millisecond of the last and the next slot within it.
struct Keys {
    last_ms: i64,
    next_slot: i64,
}

impl Keys {
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
    /// Opens the archive at `path` for writing, creating it if missing. Its folder is not
    /// made: a mistyped path is refused, naming the folder, as `--out`'s is
    /// ([`Sqlite::can_create`]). A file that is not SQLite, or a SQLite database of other
    /// tables, is refused before anything is written to it ([`check_tables`]): nowcast's
    /// tables are not added to someone else's database. An empty file, or a database of no
    /// tables, becomes an archive.
    pub fn open(path: &Path) -> Result<Sqlite> {
        if std::fs::symlink_metadata(path).is_err() {
            Self::can_create(path)?;
        }
        not_a_directory(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| explain(path, None, Doing::Open, e.into()))?;
        Self::setup(conn, path, true)
    }

    /// Whether an archive can be made at `path`, which does not exist yet: not a directory,
    /// and in a folder that exists. Checked before anything else is done (`archive import`
    /// reads its inputs before it makes the archive, and makes none for nothing).
    pub fn can_create(path: &Path) -> Result<()> {
        not_a_directory(path)?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => anyhow::bail!(
                "{}: create: {} is not a directory",
                path.display(),
                dir.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
                "{}: create: no such directory {}",
                path.display(),
                dir.display()
            ),
            Err(e) => anyhow::bail!("{}: create: {}: {e}", path.display(), dir.display()),
        }
    }

    /// Opens an existing archive for reading; nothing is created or written, in it or
    /// beside it.
    ///
    /// Read-write (without CREATE) with `query_only` rather than read-only: the archive is
    /// in WAL mode, where every reader makes the `-wal` and `-shm` files beside it, and only
    /// a connection that may write removes them when it is the last to close; a read-only
    /// one leaves them behind in the folder. `query_only` refuses any statement that would
    /// write. (The one write left is SQLite's own, on closing: a `-wal` file left by a
    /// writer that crashed is folded into the file, its records as they were committed, as
    /// the next writer would.) Where SQLite cannot write (a write-protected file, which
    /// SQLite then opens read-only by itself; `-wal` or `-shm` files that cannot be opened
    /// for writing), it is opened read-only instead.
    ///
    /// A file this process cannot write (write-protected, on a read-only mount) with no
    /// `-wal` or `-shm` beside it, so that no writer has it open, is read as immutable: a
    /// read-only connection would make those two files (and leave them behind) or, in a
    /// folder it cannot write either, fail to read a file in WAL mode at all. Immutable is
    /// also the last resort when a read-only open fails.
    pub fn open_read(path: &Path) -> Result<Sqlite> {
        if !path.exists() {
            anyhow::bail!("{}: no archive there", path.display());
        }
        not_a_directory(path)?;
        let beside = |suffix: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            std::path::PathBuf::from(p).exists()
        };
        let writable = std::fs::OpenOptions::new().write(true).open(path).is_ok();
        let unused = !beside("-wal") && !beside("-shm");
        let immutable = || -> rusqlite::Result<Connection> {
            let conn = Connection::open_with_flags(
                immutable_uri(path),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            conn.pragma_update(None, "query_only", true)?;
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
            Ok(conn)
        };
        let open = |flags: OpenFlags| -> rusqlite::Result<Connection> {
            if !writable && unused {
                return immutable();
            }
            let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
            conn.pragma_update(None, "query_only", true)?;
            // The first read opens the `-wal` and `-shm` files: a failure there is one of
            // opening, retried read-only.
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
            Ok(conn)
        };
        let conn = match open(OpenFlags::SQLITE_OPEN_READ_WRITE) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::CannotOpen
                        | rusqlite::ErrorCode::ReadOnly
                        | rusqlite::ErrorCode::PermissionDenied
                ) =>
            {
                match open(OpenFlags::SQLITE_OPEN_READ_ONLY) {
                    Err(rusqlite::Error::SqliteFailure(e, _))
                        if matches!(
                            e.code,
                            rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly
                        ) =>
                    {
                        immutable()
                    }
                    r => r,
                }
            }
            r => r,
        };
        let conn = match conn {
            Err(e) if not_sqlite(&e) => not_an_archive(path, "not a SQLite file", &[])?,
            r => r.map_err(|e| explain(path, None, Doing::Open, e.into()))?,
        };
        Self::setup(conn, path, false)
    }

    /// Makes `conn` the archive at `path` (its schema too when it is opened to `write`);
    /// an error is one of opening the file ([`explain`]).
    fn setup(conn: Connection, path: &Path, write: bool) -> Result<Sqlite> {
        let ready = Self::prepare(&conn, path, write);
        if let Err(e) = ready {
            return Err(explain(path, Some(&conn), Doing::Open, e));
        }
        let mut s = Sqlite {
            conn,
            path: path.to_path_buf(),
            series: HashMap::new(),
            keys: Keys {
                last_ms: i64::MIN,
                next_slot: 0,
            },
        };
        s.doing(Doing::Open, Self::load_series)?;
        Ok(s)
    }

    fn prepare(conn: &Connection, path: &Path, write: bool) -> Result<()> {
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        // SQLite opens a file it may not write read-only, and says so only at the first
        // write: said here, before anything is read (or made beside the file).
        if write && conn.is_readonly(rusqlite::MAIN_DB)? {
            anyhow::bail!(
                "{}: open: it cannot be written (write-protected, or on a read-only mount)",
                path.display()
            );
        }
        check_tables(conn, path, write)?;
        if write {
            // Another process may be opening or writing the same archive (two imports at
            // once, an import beside a campaign). Switching to WAL does not wait for it
            // (SQLite answers "database is locked" at once), so it is retried within the
            // busy timeout, and only when the file is not in WAL already.
            let wal = |c: &Connection| -> rusqlite::Result<bool> {
                let mode: String = c.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
                Ok(mode.eq_ignore_ascii_case("wal"))
            };
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !wal(conn)? {
                match conn.pragma_update(None, "journal_mode", "WAL") {
                    Err(rusqlite::Error::SqliteFailure(e, _))
                        if e.code == rusqlite::ErrorCode::DatabaseBusy
                            && std::time::Instant::now() < until =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    r => r?,
                }
            }
            // A batch is committed before its spool file is deleted: FULL makes the commit
            // durable first (one fsync per batch).
            conn.pragma_update(None, "synchronous", "FULL")?;
            // The schema in one write transaction, which waits for another writer.
            conn.execute_batch(&format!("BEGIN IMMEDIATE;\n{SCHEMA}\nCOMMIT;"))?;
            // Archives made before schema 1.2 have no `congestion` column.
            let has: bool = conn.query_row(
                "SELECT count(*) FROM pragma_table_info('records') WHERE name = 'congestion'",
                [],
                |r| r.get(0),
            )?;
            if !has {
                conn.execute_batch("ALTER TABLE records ADD COLUMN congestion TEXT")?;
            }
        }
        // Statements by shape and size (see `insert_sql`) besides the queries.
        conn.set_prepared_statement_cache_capacity(64);
        // Reads through a memory map (pages stay in the OS's cache, shared and reclaimable)
        // and up to 512 MiB of SQLite's own cache: at 10 M records the index of series outgrows
        // a smaller cache and inserts wait on re-reading its pages (`--bench archive`: 186,000
        // records/s with 256 MiB and no map; 245,000 with both).
        conn.pragma_update(None, "mmap_size", 2_147_418_112_i64)?;
        conn.pragma_update(None, "cache_size", -524_288)?;
        Ok(())
    }

    /// Runs `f`, its SQLite errors told as `doing` to this file ([`explain`]).
    fn doing<T>(&mut self, doing: Doing, f: impl FnOnce(&mut Sqlite) -> Result<T>) -> Result<T> {
        let r = f(self);
        r.map_err(|e| explain(&self.path, Some(&self.conn), doing, e))
    }

    fn load_series(&mut self) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, target, metric, source FROM series")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        for row in rows {
            let (id, target, metric, source) = row?;
            if let Some(m) = Metric::from_name(&metric) {
                let v = self.series.entry(target).or_default();
                if !v.iter().any(|e| e.2 == id) {
                    v.push((m, source, id));
                }
            }
        }
        Ok(())
    }

    fn series_id(&mut self, target: &str, metric: Metric, source: &str) -> Result<i64> {
        if let Some(id) = self
            .series
            .get(target)
            .and_then(|v| v.iter().find(|e| e.0 == metric && e.1 == source))
        {
            return Ok(id.2);
        }
        self.conn.execute(
            "INSERT OR IGNORE INTO series (target, metric, source) VALUES (?1, ?2, ?3)",
            params![target, metric.name(), source],
        )?;
        let id = self.conn.query_row(
            "SELECT id FROM series WHERE target = ?1 AND metric = ?2 AND source = ?3",
            params![target, metric.name(), source],
            |r| r.get(0),
        )?;
        self.series
            .entry(target.to_string())
            .or_default()
            .push((metric, source.to_string(), id));
        Ok(id)
    }

    /// Runs `f` as one write transaction (`BEGIN IMMEDIATE`): what it reads is what it
    /// writes over. Another writer (a second `nowcast archive import` of the same file, a
    /// campaign's shipper) waits for its end (up to the busy timeout), so that two imports
    /// at the same moment cannot both find a record missing and both write it. Rolled back
    /// if `f` fails.
    pub fn exclusive<T>(&mut self, f: impl FnOnce(&mut Sqlite) -> Result<T>) -> Result<T> {
        self.doing(Doing::Write, |d| {
            Ok(d.conn.execute_batch("BEGIN IMMEDIATE")?)
        })?;
        let done = f(self).and_then(|v| {
            self.doing(Doing::Write, |d| Ok(d.conn.execute_batch("COMMIT")?))?;
            Ok(v)
        });
        if done.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        done
    }

    /// Writes records and run log rows in one transaction (a savepoint: within
    /// [`Sqlite::exclusive`]'s, or its own). With a `batch` name, a batch already written is
    /// skipped (returns false).
    pub fn write(
        &mut self,
        records: &[Record],
        runs: &[RunLog],
        batch: Option<&str>,
        now: Ms,
    ) -> Result<bool> {
        self.doing(Doing::Write, |d| d.write_now(records, runs, batch, now))
    }

    /// Forgets batch names older than `before` (their files are long gone).
    pub fn prune_batches(&mut self, before: Ms) -> Result<()> {
        self.doing(Doing::Write, |d| d.prune_batches_now(before))
    }

    /// Calls `each` with every record matching `f`, in time order.
    pub fn records(
        &mut self,
        f: &Filter,
        each: &mut dyn FnMut(Record) -> Result<()>,
    ) -> Result<()> {
        self.doing(Doing::Read, |d| d.records_now(f, each))
    }

    /// Every series (target, metric, source) over [from, to): counts, mean, min and max.
    pub fn summary(&mut self, from_ms: Ms, to_ms: Ms) -> Result<Vec<Summary>> {
        self.doing(Doing::Read, |d| d.summary_now(from_ms, to_ms))
    }

    /// One target's metric over [from, to) in hourly buckets, one per source that measured
    /// it in the hour, by hour and then source.
    pub fn hourly(
        &mut self,
        target: &str,
        metric: Metric,
        from_ms: Ms,
        to_ms: Ms,
    ) -> Result<Vec<Bucket>> {
        self.doing(Doing::Read, |d| {
            d.hourly_now(target, metric, from_ms, to_ms)
        })
    }

    /// The latest ok measurement of every series, by target, metric and source.
    pub fn latest(&mut self) -> Result<Vec<Latest>> {
        self.doing(Doing::Read, Self::latest_now)
    }

    /// Run log rows of `campaign` that ended at or after `since`, oldest first.
    pub fn runs(&mut self, campaign: &str, since: Ms) -> Result<Vec<RunLog>> {
        self.doing(Doing::Read, |d| d.runs_now(campaign, since))
    }

    /// Run log rows of every campaign that ended at or after `since`, oldest first.
    pub fn all_runs(&mut self, since: Ms) -> Result<Vec<RunLog>> {
        self.doing(Doing::Read, |d| d.all_runs_now(since))
    }

    /// Where `campaign` takes up its schedule: for each job (key, whether its runs must be
    /// counted for `max_runs`, whether it is a sanity check), its last slot and result.
    pub fn resume(&mut self, campaign: &str, jobs: &[(String, bool, bool)]) -> Result<Resume> {
        self.doing(Doing::Read, |d| d.resume_now(campaign, jobs))
    }

    /// Number of records.
    pub fn count(&mut self) -> Result<u64> {
        self.doing(Doing::Read, Self::count_now)
    }

    fn write_now(
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

    fn prune_batches_now(&mut self, before: Ms) -> Result<()> {
        self.conn
            .execute("DELETE FROM spooled WHERE at_ms < ?1", params![before])?;
        Ok(())
    }

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
                    && (f.sources.is_empty() || f.sources.iter().any(|x| x == s))
            })
            .map(|e| e.3)
            .collect())
    }

    fn records_now(
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

    fn summary_now(&mut self, from_ms: Ms, to_ms: Ms) -> Result<Vec<Summary>> {
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

    fn hourly_now(
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

    fn latest_now(&mut self) -> Result<Vec<Latest>> {
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

    fn runs_now(&mut self, campaign: &str, since: Ms) -> Result<Vec<RunLog>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE campaign = ?1 AND ended_ms >= ?2 ORDER BY ended_ms, id"
        ))?;
        let rows = stmt.query_map(params![campaign, since], run_of)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn all_runs_now(&mut self, since: Ms) -> Result<Vec<RunLog>> {
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

    fn resume_now(&mut self, campaign: &str, jobs: &[(String, bool, bool)]) -> Result<Resume> {
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

    fn count_now(&mut self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0))?
            as u64)
    }
}

/// `file:PATH?immutable=1`, the path percent-encoded where a URI needs it.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    // Absolute: a path beginning `//` would be read as a URI's authority.
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(b as char)
            }
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// What was being done to the archive file when SQLite failed, for [`explain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Doing {
    /// Opening it: the file, its `-wal` and `-shm` files, its tables (and making them).
    Open,
    Read,
    Write,
}

impl Doing {
    fn verb(self) -> &'static str {
        match self {
            Doing::Open => "open",
            Doing::Read => "read",
            Doing::Write => "write",
        }
    }
}

/// An error of SQLite's as one line naming the file and what was being done, and saying
/// what the two causes an operator can act on mean: a full disk (SQLITE_FULL, or an I/O
/// error whose system call failed with ENOSPC or EDQUOT, as growing the `-shm` file does)
/// and a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB). An error that is not SQLite's passes
/// unchanged (a reader gone from `archive export`, a bad row); so does one explained
/// already, as the result keeps only SQLite's message, not its error (whose own message,
/// "Error code 11: …", would repeat it). `conn` gives the failed system call's errno.
fn explain(
    path: &Path,
    conn: Option<&Connection>,
    doing: Doing,
    e: anyhow::Error,
) -> anyhow::Error {
    let Some(sql) = e.chain().find_map(|c| c.downcast_ref::<rusqlite::Error>()) else {
        return e;
    };
    let (file, verb) = (path.display(), doing.verb());
    let rusqlite::Error::SqliteFailure(failure, message) = sql else {
        return anyhow::anyhow!("{file}: {verb}: {sql}");
    };
    let message = message
        .clone()
        .unwrap_or_else(|| rusqlite::ffi::code_to_str(failure.extended_code).to_string());
    // SAFETY: the handle is the open connection's, and `sqlite3_system_errno` only reads it.
    let errno = conn.map_or(0, |c| unsafe {
        rusqlite::ffi::sqlite3_system_errno(c.handle())
    });
    use rusqlite::ErrorCode as C;
    let said = match failure.code {
        C::DiskFull => full(path, verb),
        C::SystemIoFailure if errno == libc::ENOSPC || errno == libc::EDQUOT => full(path, verb),
        // A connection that failed to open is gone with its errno: the disk says.
        C::SystemIoFailure if errno == 0 && nearly_full(path) => full(path, verb),
        C::DatabaseCorrupt | C::NotADatabase => format!(
            "{file} is damaged (not a valid SQLite database: {message}); could not {verb} it"
        ),
        C::ReadOnly => format!(
            "{file}: {verb}: {message} (the file, or its folder, which holds its -wal and -shm \
             files, is write-protected or on a read-only mount)"
        ),
        _ => format!("{file}: {verb}: {message}"),
    };
    anyhow::anyhow!(said)
}

/// Whether the file system holding `path` has less room left than a few pages of the
/// archive and its `-shm` file need (64 KiB).
fn nearly_full(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path and `st` a statvfs for the call to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    (st.f_bavail as u64).saturating_mul(st.f_frsize as u64) < 64 * 1024
}

fn full(path: &Path, verb: &str) -> String {
    format!(
        "no space left on the disk holding {} (could not {verb} it)",
        path.display()
    )
}

/// The tables of an archive (all three since its first version): what a read needs.
const TABLES: [&str; 3] = ["series", "records", "runs"];

fn not_a_directory(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("{}: a directory, not an archive file", path.display());
    }
    Ok(())
}

/// SQLite's answer to a file that is not a database (text, a CSV, an encrypted file).
fn not_sqlite(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase)
}

/// The error for a file that is not a nowcast archive: what it is, and which of the
/// archive's tables it lacks.
fn not_an_archive<T>(path: &Path, what: &str, missing: &[&str]) -> Result<T> {
    let lacks = match missing {
        [] => String::new(),
        [one] => format!(": no table {one}"),
        [first @ .., last] => format!(": no table {} or {last}", first.join(", ")),
    };
    anyhow::bail!("{}: not a nowcast archive ({what}{lacks})", path.display())
}

/// Refuses a file that is not a nowcast archive, naming what it is and which tables it
/// lacks, before anything reads or writes the archive's tables (SQLite would answer only
/// "no such table: series", naming no file). To read, an archive has all of [`TABLES`];
/// to write, a file may also be new: empty, or a database of no tables (whose schema is
/// then made), but not one of other tables.
fn check_tables(conn: &Connection, path: &Path, write: bool) -> Result<()> {
    let names = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        });
    let names = match names {
        Err(e) if not_sqlite(&e) => return not_an_archive(path, "not a SQLite file", &[]),
        r => r?,
    };
    let missing: Vec<&str> = TABLES
        .iter()
        .copied()
        .filter(|t| !names.iter().any(|n| n == t))
        .collect();
    if missing.is_empty() || (write && names.is_empty()) {
        return Ok(());
    }
    let what = if !names.is_empty() {
        // Someone else's names: escaped for the terminal.
        const SHOWN: usize = 5;
        let mut list = names
            .iter()
            .take(SHOWN)
            .map(|n| crate::format::clean(n))
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > SHOWN {
            list.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        format!("a SQLite database of the tables {list}")
    } else if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        "an empty file".to_string()
    } else {
        "a SQLite database of no tables".to_string()
    };
    not_an_archive(path, &what, &missing)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_one_millisecond_written_twice_all_stay() {
        let path =
            std::env::temp_dir().join(format!("nowcast-sqlite-keys-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let batch = |v: f64| -> Vec<Record> {
            (0..40)
                .map(|i| Record::new(1_000.5, "x", Metric::Rtt, v + f64::from(i), "h:1"))
                .collect()
        };
        Sqlite::open(&path)
            .unwrap()
            .write(&batch(0.0), &[], None, 0)
            .unwrap();
        // A new writer starts its keys at slot 0 again: every key of the chunk is taken.
        let mut db = Sqlite::open(&path).unwrap();
        db.write(&batch(100.0), &[], Some("b"), 0).unwrap();
        assert!(
            !db.write(&batch(200.0), &[], Some("b"), 0).unwrap(),
            "a batch is written once"
        );
        let mut got = Vec::new();
        db.records(&Filter::default(), &mut |r| {
            got.push(r.value.unwrap());
            Ok(())
        })
        .unwrap();
        got.sort_by(f64::total_cmp);
        let want: Vec<f64> = (0..40)
            .map(f64::from)
            .chain((0..40).map(|i| 100.0 + f64::from(i)))
            .collect();
        assert_eq!(got, want);
        drop(db);
        for s in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{s}", path.display()));
        }
    }
}
