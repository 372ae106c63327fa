//! The measurement archive: every record in the shared schema and the campaign's run log,
//! written durably. The embedded default is one SQLite file ([`sqlite`]); the same records
//! also go to ClickHouse when configured ([`clickhouse`]), for an archive that outgrows one
//! machine. The archive is one more [`RecordSink`]: probes and campaigns write to it as to
//! a table or a file.
//!
//! Writes never wait on an archive: [`Archive::write`] appends to a spool on disk per
//! destination ([`spool`]) and a shipper thread per destination moves the spool into it,
//! retrying with back-off ([`backoff`]) while it is down or slow. The backlog is counted
//! ([`Archive::status`]) for `nowcast campaign status` and `/metrics`.
//!
//! Cores: [`row`] (a record as a flat row), [`query`] (the questions both archives answer,
//! ClickHouse's SQL), [`backoff`]. Edges: [`sqlite`], [`clickhouse`], [`spool`], this module.

pub mod answer;
pub mod backoff;
pub mod clickhouse;
pub mod query;
pub mod row;
pub mod spool;
pub mod sqlite;

use crate::output::{Experiment, Heading, RecordSink};
use crate::runlog::RunLog;
use crate::series::SeriesStats;
use crate::stop::Stop;
use crate::when::{Ms, DAY};
use anyhow::{Context, Result};
use backoff::Backoff;
use clickhouse::{Clickhouse, ClickhouseConfig};
use nowcast_core::record::Record;
use query::Filter;
use row::Row;
use spool::Spool;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Where records are archived.
#[derive(Clone, Debug, PartialEq)]
pub struct ArchiveConfig {
    /// The SQLite file.
    pub sqlite: PathBuf,
    /// The spool directory (one sub-directory per destination).
    pub spool: PathBuf,
    /// Sync each spool append to disk (a measurement survives a power cut once written).
    pub fsync: bool,
    pub clickhouse: Option<ClickhouseConfig>,
}

impl ArchiveConfig {
    /// SQLite only at `sqlite`, its spool beside it.
    pub fn sqlite(sqlite: PathBuf) -> Self {
        let mut spool = sqlite.clone().into_os_string();
        spool.push(".spool");
        ArchiveConfig {
            sqlite,
            spool: spool.into(),
            fsync: true,
            clickhouse: None,
        }
    }

    /// Refuses, before anything is made, a SQLite file or a spool in a folder that does not
    /// exist (a typo in the path must not make folders and put the archive somewhere
    /// unexpected), as every command that makes an archive does
    /// ([`sqlite::Sqlite::can_create`]).
    pub fn check_folders(&self) -> Result<()> {
        if std::fs::symlink_metadata(&self.sqlite).is_err() {
            sqlite::Sqlite::can_create(&self.sqlite)?;
        }
        if std::fs::symlink_metadata(&self.spool).is_err() {
            let dir = match self.spool.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            if !dir.is_dir() {
                anyhow::bail!(
                    "{}: create the spool: no such directory {}",
                    self.spool.display(),
                    dir.display()
                );
            }
        }
        Ok(())
    }
}

/// How one destination is doing.
#[derive(Debug, Default)]
pub struct DestStats {
    /// Lines waiting in its spool.
    pub backlog: AtomicU64,
    /// Time of the oldest line waiting, ms (0: none).
    pub oldest_ms: AtomicI64,
    pub shipped: AtomicU64,
    pub failures: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    /// Whether the last attempt to write the destination failed (cleared by a success).
    pub failing: AtomicBool,
    /// Lines held in memory because the spool's disk refused them, and why.
    pub held: Mutex<(u64, Option<String>)>,
}

/// A destination's figures at one moment.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DestStatus {
    pub name: &'static str,
    pub backlog: u64,
    /// Age of the oldest waiting line, seconds (0 with none).
    pub lag_s: f64,
    pub shipped: u64,
    pub failures: u64,
    pub last_error: Option<String>,
    /// The last attempt to write the destination failed, with `last_error`.
    pub failing: bool,
    /// Lines held in memory because the spool could not be written (counted in `backlog`).
    pub held: u64,
    /// Why the spool could not be written, while lines are held.
    pub spool_error: Option<String>,
}

impl DestStatus {
    /// The last error, without the destination's name it begins with when it is the
    /// SQLite file's (said already with it).
    fn reason(&self, label: &str) -> Option<&str> {
        let e = self.last_error.as_deref()?;
        Some(
            e.strip_prefix(label)
                .and_then(|r| r.strip_prefix(": "))
                .unwrap_or(e),
        )
    }

    /// What is wrong with the destination, in words for the operator (`None`: nothing):
    /// its spool cannot be written (the lines wait in memory), or the destination refuses
    /// them (they wait in the spool and are retried).
    pub fn trouble(&self, label: &str, spool: &std::path::Path) -> Option<String> {
        if self.held > 0 {
            return Some(format!(
                "the spool {} cannot be written ({}); {} held in memory until it can",
                spool.display(),
                self.spool_error.as_deref().unwrap_or("no reason given"),
                crate::format::count(self.held, "line")
            ));
        }
        if self.failing {
            return Some(format!(
                "{label} cannot be written ({}); {} wait in the spool {} and are retried with back-off",
                self.reason(label).unwrap_or("no reason given"),
                crate::format::count(self.backlog, "line"),
                spool.display()
            ));
        }
        None
    }
}

struct Dest {
    name: &'static str,
    /// What it is, for a message: the SQLite file, or ClickHouse and its URL.
    label: String,
    spool: Arc<Mutex<Spool>>,
    stats: Arc<DestStats>,
}

impl Dest {
    /// The folder of its spool.
    fn spool_dir(&self) -> std::path::PathBuf {
        self.spool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .dir()
            .to_path_buf()
    }
}

/// The archive sink: spools, and the threads that ship them.
pub struct Archive {
    dests: Vec<Dest>,
    stop: Stop,
    /// Raised to end the shippers once the spools are drained or the drain deadline passed.
    threads: Vec<JoinHandle<()>>,
    drain_until: Arc<AtomicI64>,
}

/// A destination a shipper writes to.
enum Store {
    Sqlite(Box<sqlite::Sqlite>),
    Clickhouse(Clickhouse, bool),
}

impl Store {
    fn write(&mut self, seg: &spool::Segment, batch: &str, now: Ms) -> Result<()> {
        match self {
            Store::Sqlite(db) => {
                db.write(&seg.records, &seg.runs, Some(batch), now)?;
                Ok(())
            }
            Store::Clickhouse(ch, ready) => {
                if !*ready {
                    ch.ensure_schema()?;
                    *ready = true;
                }
                // A plain MergeTree (one server) keeps an INSERT retried after a timeout or
                // a crash twice (only a ReplicatedMergeTree drops a repeated block): what
                // the archive already holds of the segment is left out, so that a segment
                // shipped again is written once, as SQLite's batch names make it there.
                let mut records = seg.records.clone();
                leave_out_archived(&mut records, &mut |f, each| ch.records(f, each))?;
                let runs = ch.unwritten_runs(&seg.runs)?;
                ch.write(&records, &runs)
            }
        }
    }
}

/// Reads the records matching a filter from an archive, calling the second argument with
/// each: [`sqlite::Sqlite::records`] or [`clickhouse::Clickhouse::records`].
pub type ReadBack<'a> = dyn FnMut(&Filter, &mut dyn FnMut(Record) -> Result<()>) -> Result<()> + 'a;

/// Which of `records` the archive already holds (true: leave it out), so that writing the
/// same records again changes nothing (`archive import` of a file imported before, or
/// appended to since; a spool segment shipped again). One read-back of the records' span
/// ([`query::span`]: nothing to read for a new period, the batch's own records again for a
/// repeated one), each archived record compared whole by its [`Row::key`].
///
/// An archived record accounts for one incoming record: records identical to each other
/// among `records` are the writer's business (a file may hold a record twice) and are all
/// written when the archive holds none of them; with k of them archived, the first k are
/// left out.
pub fn archived(records: &[Record], read: &mut ReadBack<'_>) -> Result<Vec<bool>> {
    let mut skip = vec![false; records.len()];
    let Some(filter) = query::span(records) else {
        return Ok(skip);
    };
    // Made when the archive gives back its first record: for a new period, never.
    let mut copies: Option<Copies> = None;
    read(&filter, &mut |r| {
        copies
            .get_or_insert_with(|| Copies::of(records))
            .held(&Row::from_record(&r).key());
        Ok(())
    })?;
    if let Some(c) = copies {
        c.mark(&mut skip);
    }
    Ok(skip)
}

/// Leaves out of `records` those the archive already holds ([`archived`]); returns how many.
pub fn leave_out_archived(records: &mut Vec<Record>, read: &mut ReadBack<'_>) -> Result<usize> {
    let skip = archived(records, read)?;
    let already = skip.iter().filter(|s| **s).count();
    if already > 0 {
        let mut s = skip.iter();
        records.retain(|_| !s.next().expect("one per record"));
    }
    Ok(already)
}

/// The copies of each record of a batch (by key: their places in the batch, in order) and
/// how many of them the archive holds.
struct Copies(HashMap<Vec<u8>, (Vec<usize>, usize)>);

impl Copies {
    fn of(records: &[Record]) -> Copies {
        let mut by_key: HashMap<Vec<u8>, (Vec<usize>, usize)> =
            HashMap::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            by_key
                .entry(Row::from_record(r).key())
                .or_default()
                .0
                .push(i);
        }
        Copies(by_key)
    }

    /// The archive holds one record of this key (not one of the batch's: ignored).
    fn held(&mut self, key: &[u8]) {
        if let Some(e) = self.0.get_mut(key) {
            e.1 += 1;
        }
    }

    /// Marks as archived the first copies of each key, as many as the archive holds.
    fn mark(&self, skip: &mut [bool]) {
        for (places, held) in self.0.values() {
            for &i in places.iter().take(*held) {
                skip[i] = true;
            }
        }
    }
}

fn wall_ms() -> Ms {
    crate::clock::wall_ms() as Ms
}

/// A random number in [0, 1) for the back-off (not for anything that must be unguessable).
fn random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(wall_ms());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// How long [`RecordSink::finish`] (the end of `nowcast tcp` or `udp --archive`) and a drop
/// let the shippers drain the spools: a healthy SQLite file takes its records at once, and a
/// write that waits on another writer's lock ends within SQLite's busy timeout anyway; a
/// destination still failing after it is said, and its records wait in the spool.
pub const FINISH_DRAIN: Duration = Duration::from_secs(2);

impl Archive {
    /// Opens the SQLite file (creating it if missing) and the spools, and starts a shipper
    /// per destination. A SQLite file that cannot be an archive (a directory, a file that is
    /// not SQLite, a missing folder: [`sqlite::Sqlite::open`]) is refused here, before
    /// anything is measured or spooled; the connection opened is the shipper's first. An
    /// error later (the file moved, the disk full), and a ClickHouse server that is down,
    /// are retried with back-off while the records wait in the spool.
    pub fn start(cfg: &ArchiveConfig) -> Result<Archive> {
        let mut sqlite = Some(sqlite::Sqlite::open(&cfg.sqlite)?);
        let stop = Stop::new();
        let drain_until = Arc::new(AtomicI64::new(i64::MAX));
        let mut archive = Archive {
            dests: Vec::new(),
            stop: stop.clone(),
            threads: Vec::new(),
            drain_until: drain_until.clone(),
        };
        let mut add = |name: &'static str,
                       label: String,
                       open: Box<dyn FnMut() -> Result<Store> + Send>|
         -> Result<()> {
            let dir = cfg.spool.join(name);
            let spool = Arc::new(Mutex::new(Spool::open(&dir, cfg.fsync)?));
            let stats = Arc::new(DestStats::default());
            // Not what other processes sharing the spool are writing: theirs to say.
            let b = spool::backlog_of(&dir, None);
            stats.backlog.store(b.lines, Ordering::Relaxed);
            stats
                .oldest_ms
                .store(b.oldest_ms.unwrap_or(0), Ordering::Relaxed);
            let (sp, st, stop, drain) = (
                spool.clone(),
                stats.clone(),
                stop.clone(),
                drain_until.clone(),
            );
            let t = std::thread::Builder::new()
                .name(format!("ship-{name}"))
                .spawn(move || ship(open, &sp, &st, &stop, &drain))?;
            archive.threads.push(t);
            archive.dests.push(Dest {
                name,
                label,
                spool,
                stats,
            });
            Ok(())
        };
        let path = cfg.sqlite.clone();
        add(
            "sqlite",
            path.display().to_string(),
            Box::new(move || {
                let db = match sqlite.take() {
                    Some(db) => db,
                    None => sqlite::Sqlite::open(&path)?,
                };
                Ok(Store::Sqlite(Box::new(db)))
            }),
        )?;
        if let Some(ch) = &cfg.clickhouse {
            let ch = ch.clone();
            add(
                "clickhouse",
                format!("ClickHouse {}", ch.url),
                Box::new(move || Ok(Store::Clickhouse(Clickhouse::new(ch.clone())?, false))),
            )?;
        }
        Ok(archive)
    }

    /// Appends to every destination's spool; never waits on a destination. Lines its disk
    /// refuses are held in memory ([`Spool::append`]; [`DestStatus::held`]); an error only
    /// when too many are held already.
    pub fn write(&self, records: &[Record], runs: &[RunLog]) -> Result<()> {
        let now = wall_ms();
        for d in &self.dests {
            let n = {
                let mut spool = d.spool.lock().unwrap_or_else(|p| p.into_inner());
                let n = spool.append(records, runs, now);
                note_held(&spool, &d.stats);
                n.with_context(|| format!("{}: records not archived", d.label))?
            };
            d.stats.backlog.fetch_add(n as u64, Ordering::Relaxed);
            let _ =
                d.stats
                    .oldest_ms
                    .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Every destination's backlog, lag and errors.
    pub fn status(&self) -> Vec<DestStatus> {
        let now = wall_ms();
        self.dests
            .iter()
            .map(|d| {
                let oldest = d.stats.oldest_ms.load(Ordering::Relaxed);
                let held = d
                    .stats
                    .held
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                DestStatus {
                    name: d.name,
                    backlog: d.stats.backlog.load(Ordering::Relaxed),
                    lag_s: if oldest > 0 {
                        (now - oldest).max(0) as f64 / 1e3
                    } else {
                        0.0
                    },
                    shipped: d.stats.shipped.load(Ordering::Relaxed),
                    failures: d.stats.failures.load(Ordering::Relaxed),
                    last_error: d
                        .stats
                        .last_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone(),
                    failing: d.stats.failing.load(Ordering::Relaxed),
                    held: held.0,
                    spool_error: held.1,
                }
            })
            .collect()
    }

    /// Closes the spools and lets the shippers drain them for at most `drain`; what is
    /// left waits in the spool for the next start, and a spool left empty is removed
    /// ([`Spool::remove_if_empty`]; the first destination's last, as it made their folder).
    pub fn close(&mut self, drain: Duration) -> Vec<DestStatus> {
        for d in &self.dests {
            let mut spool = d.spool.lock().unwrap_or_else(|p| p.into_inner());
            let _ = spool.close();
            note_held(&spool, &d.stats);
        }
        self.drain_until
            .store(wall_ms() + drain.as_millis() as Ms, Ordering::Relaxed);
        self.stop.trigger();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for d in self.dests.iter().rev() {
            d.spool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove_if_empty();
        }
        self.status()
    }

    /// What is wrong with each destination now ([`DestStatus::trouble`]), by name: `None`
    /// for one that is fine.
    pub fn trouble(&self) -> Vec<(&'static str, Option<String>)> {
        self.dests
            .iter()
            .zip(self.status())
            .map(|(d, s)| {
                let dir = d.spool_dir();
                (d.name, s.trouble(&d.label, &dir))
            })
            .collect()
    }

    /// What [`Archive::close`] left unarchived, in words naming each destination, its last
    /// error and the spool that keeps its lines (`None`: everything is in). The next start
    /// with the same spool ships them: `nowcast tcp` or `udp` with the same `--archive`, or
    /// the campaign.
    pub fn left_behind(&self, status: &[DestStatus]) -> Option<String> {
        let said: Vec<String> = self
            .dests
            .iter()
            .zip(status)
            .filter(|(_, s)| s.backlog > 0)
            .map(|(d, s)| {
                let dir = d.spool_dir();
                let mut said = String::new();
                if s.backlog > s.held {
                    said = format!(
                        "{}: {} not archived ({}); they wait in {} for the next run with this archive",
                        d.label,
                        crate::format::count(s.backlog - s.held, "record"),
                        s.reason(&d.label).unwrap_or("not written in time"),
                        dir.display()
                    );
                }
                if s.held > 0 {
                    if !said.is_empty() {
                        said.push_str("; ");
                    }
                    said.push_str(&format!(
                        "{}: {} lost: the spool {} could not be written ({})",
                        d.label,
                        crate::format::count(s.held, "record"),
                        dir.display(),
                        s.spool_error.as_deref().unwrap_or("no reason given")
                    ));
                }
                said
            })
            .collect();
        (!said.is_empty()).then(|| said.join("; "))
    }
}

/// Copies what the spool holds in memory into the destination's figures; returns its lines.
fn note_held(spool: &Spool, stats: &DestStats) -> u64 {
    let (lines, why) = spool.held();
    *stats.held.lock().unwrap_or_else(|p| p.into_inner()) = (lines as u64, why.map(String::from));
    lines as u64
}

/// A shipper: moves closed segments into the store, oldest first, with back-off on errors.
fn ship(
    mut open: Box<dyn FnMut() -> Result<Store> + Send>,
    spool: &Mutex<Spool>,
    stats: &DestStats,
    stop: &Stop,
    drain_until: &AtomicI64,
) {
    let mut store: Option<Store> = None;
    let mut backoff = Backoff::new(500, 60_000);
    let dir = spool
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .dir()
        .to_path_buf();
    let mut pruned = 0;
    loop {
        let now = wall_ms();
        if stop.is_set() && now >= drain_until.load(Ordering::Relaxed) {
            return;
        }
        let held = {
            let mut sp = spool.lock().unwrap_or_else(|p| p.into_inner());
            let _ = sp.rotate(now);
            note_held(&sp, stats)
        };
        // Segments left open by another process that is gone (a crash, a kill): closed, to
        // be shipped; those a live process writes are its own.
        let _ = spool::recover(&dir);
        let segs = spool::segments(&dir).unwrap_or_default();
        if segs.is_empty() {
            if stop.is_set() {
                return;
            }
            stop.wait_timeout(Duration::from_millis(200));
            continue;
        }
        let mut failed = None;
        let mut shipped = 0;
        for seg_path in segs {
            let result = (|| -> Result<Option<u64>> {
                // Another process's shipper may be moving it: left to it.
                let Some(mut claim) = spool::claim(&seg_path)? else {
                    return Ok(None);
                };
                if store.is_none() {
                    store = Some(open()?);
                }
                let seg = claim.read()?;
                let lines = (seg.records.len() + seg.runs.len() + seg.damaged) as u64;
                store.as_mut().expect("opened above").write(
                    &seg,
                    &spool::batch_name(&seg_path),
                    wall_ms(),
                )?;
                claim.done()?;
                if seg.damaged > 0 {
                    *stats.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                        "{}: {} damaged spool lines skipped",
                        seg_path.display(),
                        seg.damaged
                    ));
                }
                Ok(Some(lines))
            })();
            match result {
                Ok(None) => {}
                Ok(Some(lines)) => {
                    shipped += 1;
                    backoff.succeeded();
                    stats.failing.store(false, Ordering::Relaxed);
                    stats.shipped.fetch_add(lines, Ordering::Relaxed);
                    let left = stats.backlog.load(Ordering::Relaxed).saturating_sub(lines);
                    stats.backlog.store(left, Ordering::Relaxed);
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // The oldest line still waiting (the closed segments, and this process's open one).
        let own = spool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open_path()
            .map(Path::to_path_buf);
        let b = spool::backlog_of(&dir, own.as_deref());
        stats
            .oldest_ms
            .store(b.oldest_ms.unwrap_or(0), Ordering::Relaxed);
        stats.backlog.store(b.lines + held, Ordering::Relaxed);
        if let Some(e) = failed {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            stats.failing.store(true, Ordering::Relaxed);
            *stats.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{e:#}"));
            // A store that failed is reopened next time (a ClickHouse whose tables were
            // dropped, a SQLite file that was moved).
            store = None;
            let wait = Duration::from_millis(backoff.failed(random()) as u64);
            if stop.is_set() {
                // Draining: the back-off still holds, within the drain's deadline (the
                // stop being raised already, waiting on it would retry a store that fails
                // at once in a busy loop).
                let left = drain_until.load(Ordering::Relaxed) - wall_ms();
                std::thread::sleep(wait.min(Duration::from_millis(left.max(0) as u64)));
            } else if stop.wait_timeout(wait) && wall_ms() >= drain_until.load(Ordering::Relaxed) {
                return;
            }
        } else {
            if let Some(Store::Sqlite(db)) = store.as_mut() {
                if wall_ms() - pruned > DAY {
                    pruned = wall_ms();
                    let _ = db.prune_batches(pruned - 7 * DAY);
                }
            }
            if shipped == 0 {
                // Every segment was another shipper's: a moment for it to finish (a wait
                // the stop, once raised, no longer cuts short).
                if stop.is_set() {
                    std::thread::sleep(Duration::from_millis(50));
                } else {
                    stop.wait_timeout(Duration::from_millis(200));
                }
            }
        }
    }
}

/// Closes an archive that was neither finished nor closed: a run that stopped on an error
/// or because its reader went away (`| head`), which says nothing more. What is left waits
/// in the spool; [`RecordSink::finish`] and [`Archive::close`] are where it is told.
impl Drop for Archive {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.close(FINISH_DRAIN);
        }
    }
}

impl RecordSink for Archive {
    fn begin(&mut self, _: &Heading) -> std::io::Result<()> {
        Ok(())
    }

    fn experiment(&mut self, e: &Experiment<'_>) -> std::io::Result<()> {
        self.write(e.records, &[]).map_err(std::io::Error::other)
    }

    /// The end of a run (`nowcast tcp` or `udp --archive`): the spools are closed and
    /// drained into the archive ([`FINISH_DRAIN`]), and records that did not go in are an
    /// error naming the file, why, and the spool that keeps them, so that the run does not
    /// end as if they were archived.
    fn finish(&mut self, _: &[SeriesStats]) -> std::io::Result<()> {
        // A spool that cannot be written keeps its lines held; `left_behind` says so.
        let status = self.close(FINISH_DRAIN);
        match self.left_behind(&status) {
            Some(said) => Err(std::io::Error::other(said)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nowcast_core::record::Metric;

    #[test]
    fn an_archived_record_accounts_for_one_incoming_copy() {
        let r = |ts: f64, v: f64| Record::new(ts, "nowcast tcp", Metric::Rtt, v, "h:1");
        let (a, b, c) = (r(1_000.5, 1.0), r(1_000.5, 2.0), r(2_000.25, 3.0));
        let held = vec![a.clone(), b.clone(), b.clone(), r(1_500.0, 9.0)];
        let incoming = [
            a.clone(),
            b.clone(),
            b.clone(),
            b.clone(),
            c.clone(),
            a.clone(),
        ];
        let mut asked = Vec::new();
        let skip = archived(&incoming, &mut |f, each| {
            asked.push(f.clone());
            for h in &held {
                each(h.clone())?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(skip, [true, true, true, false, false, false]);
        assert_eq!(
            asked,
            [Filter {
                since_ms: Some(999.0),
                until_ms: Some(2_002.0),
                targets: vec!["h:1".into()],
                metrics: vec![Metric::Rtt],
                sources: vec!["nowcast tcp".into()],
            }]
        );
        // Nothing to ask about nothing; nothing held, nothing left out.
        let mut calls = 0;
        assert!(archived(&[], &mut |_, _| {
            calls += 1;
            Ok(())
        })
        .unwrap()
        .is_empty());
        assert_eq!(calls, 0);
        let skip = archived(&incoming, &mut |_, _| Ok(())).unwrap();
        assert!(skip.iter().all(|s| !s));
    }
}
