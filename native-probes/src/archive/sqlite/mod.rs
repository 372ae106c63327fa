//! The embedded archive: one SQLite file in WAL mode (no server), the default.
//!
//! Layout: `series` names each (target, metric, source) once; `records` holds one row per
//! record with the columns of [`Row`](super::row::Row), keyed by `floor(ts_ms)·4096 + n` so
//! that the table itself is kept in time order (a day is one range of the primary key, read
//! without an index) and a series is one range of the index `records_by_series (series, id)`;
//! `runs` is the campaign's run log; `spooled` names the spool batches already written, in
//! the same transaction as their rows, so that a batch retried after a crash is written once.
//!
//! Here: opening (and the checks before anything is read or written), the transaction and
//! the public operations. `write` turns records into rows, `read` rows into records and
//! summaries, and `trouble` says what went wrong in words an operator can act on.

mod read;
mod trouble;
mod write;

use super::query::{Bucket, Filter, Latest, Summary};
use crate::runlog::{Resume, RunLog};
use crate::when::Ms;
use anyhow::Result;
use nowcast_core::record::{Metric, Record};
use rusqlite::{params, Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use trouble::{check_tables, explain, not_a_directory, not_an_archive, not_sqlite, Doing};
use write::Keys;

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

const RUN_COLUMNS: &str = "campaign, id, job, target, probe, nominal_ms, due_ms, started_ms, ended_ms, outcome, reason, slots, gate_check";

/// An open archive file.
pub struct Sqlite {
    conn: Connection,
    /// The file, for messages ([`explain`]).
    path: PathBuf,
    /// Series ids by target, then metric and source (looked up without allocating).
    series: HashMap<String, Vec<(Metric, String, i64)>>,
    keys: Keys,
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
            keys: Keys::new(),
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

    /// The campaigns in the run log, by name.
    pub fn campaigns(&mut self) -> Result<Vec<String>> {
        self.doing(Doing::Read, |d| d.campaigns_now())
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
