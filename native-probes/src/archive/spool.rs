//! The queue on disk in front of each archive: records and run log rows are appended to
//! segment files (one line each, `R` or `L`, a tab, the JSON) and a shipper moves whole
//! segments into the archive, deleting a segment only once the archive has it. So an
//! archive that is down or slow never blocks a measurement and never loses one: the backlog
//! waits on disk, and survives a restart.
//!
//! A segment is written as `NAME.open` and renamed `NAME.seg` when closed (after
//! `max_lines` lines or `max_age` of age); names begin with the time of their first line,
//! so they sort in time order.
//!
//! Several processes may share a spool (two campaigns on one archive, `nowcast tcp
//! --archive` beside a campaign). Each holds an exclusive `flock` on the segment it writes,
//! taken before the segment is named `.open` (it is made as `NAME.new`), and kept until it
//! is closed; the kernel releases it when the process ends, however it ends. So a `.open`
//! segment whose lock can be taken was left by a writer that is gone (a crash, a kill), and
//! is closed by the next process that looks ([`recover`]: when a spool is opened, and by
//! every shipper as it goes); one whose lock is held is a live writer's, and is left alone.
//! A shipper holds the same lock on a closed segment while it moves it ([`claim`]), so that
//! two shippers never write one segment at once.
//!
//! A spool left empty is removed at the end ([`Spool::remove_if_empty`]), its folder and
//! the folder of spools it is in, so that a run that archived everything leaves only the
//! archive; a folder removed while another process spools into it is made again.
//!
//! A spool that cannot be written (its disk full, its folder unmakeable) loses nothing either:
//! an append that fails leaves the segment as it was (cut back to its last whole line) and
//! its lines are held in memory, up to [`MAX_HELD_BYTES`], and written first by the next
//! append or [`Spool::rotate`] once the disk takes them.

use crate::runlog::RunLog;
use crate::when::Ms;
use anyhow::{Context, Result};
use nowcast_core::record::Record;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Lines per segment at most.
pub const MAX_LINES: usize = 20_000;
/// Age of the open segment at most, ms.
pub const MAX_AGE_MS: Ms = 1_000;
/// Lines held in memory at most (bytes) while the spool cannot be written: beyond it an
/// append is refused with the error.
pub const MAX_HELD_BYTES: usize = 64 << 20;
/// A `NAME.new` segment (made, not yet locked and named `.open`) older than this, whose lock
/// can be taken, was left by a writer that died in between: it is empty, and removed.
const STALE_NEW: Duration = Duration::from_secs(60);

/// Takes an exclusive `flock` on `f` without waiting: true when taken, false when another
/// open file (in this process or another) holds it. Released when `f` is closed, or by the
/// kernel when the process ends.
pub fn try_lock(f: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a descriptor `f` keeps open; no memory is involved.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Whether `path` still names the file `f` has open (not renamed or removed since).
pub fn still_named(f: &File, path: &Path) -> bool {
    match (f.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

struct Open {
    path: PathBuf,
    file: File,
    /// Bytes of whole lines in the file: what a failed write is cut back to.
    len: u64,
    lines: usize,
    first_ms: Ms,
}

/// Lines the disk did not take yet.
#[derive(Default)]
struct Held {
    bytes: Vec<u8>,
    lines: usize,
    /// Why they are held: the last error writing them.
    error: Option<String>,
}

/// The writing end of one spool directory.
pub struct Spool {
    dir: PathBuf,
    open: Option<Open>,
    fsync: bool,
    seq: u64,
    held: Held,
}

/// What one segment holds.
#[derive(Debug, Default)]
pub struct Segment {
    pub records: Vec<Record>,
    pub runs: Vec<RunLog>,
    /// Lines that could not be read (a crash in the middle of a write).
    pub damaged: usize,
}

/// What waits in a spool directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    pub segments: usize,
    pub lines: u64,
    /// Time of the oldest line waiting.
    pub oldest_ms: Option<Ms>,
}

impl Spool {
    /// The spool in `dir` (created if need be); segments left open by a writer that is gone
    /// are closed ([`recover`]), those another process is writing are left to it.
    pub fn open(dir: &Path, fsync: bool) -> Result<Spool> {
        fs::create_dir_all(dir).with_context(|| format!("{}: create the spool", dir.display()))?;
        recover(dir)?;
        Ok(Spool {
            dir: dir.to_path_buf(),
            open: None,
            fsync,
            seq: 0,
            held: Held::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment this spool is writing, if one is open.
    pub fn open_path(&self) -> Option<&Path> {
        self.open.as_ref().map(|o| o.path.as_path())
    }

    /// Appends records and rows, durably when `fsync` is set; returns the lines taken.
    /// When the disk refuses them (full, no folder can be made), they are held in memory with
    /// the lines held before and written first by the next append or [`Spool::rotate`]
    /// ([`Spool::held`] says how many and why); the error is returned only when the lines
    /// held would pass [`MAX_HELD_BYTES`], and then these lines are not taken.
    pub fn append(&mut self, records: &[Record], runs: &[RunLog], now: Ms) -> Result<usize> {
        if records.is_empty() && runs.is_empty() {
            return Ok(0);
        }
        let mut bytes = Vec::with_capacity((records.len() + runs.len()) * 320);
        for r in records {
            bytes.extend_from_slice(b"R\t");
            bytes.extend_from_slice(r.to_line().as_bytes());
            bytes.push(b'\n');
        }
        for l in runs {
            bytes.extend_from_slice(b"L\t");
            serde_json::to_writer(&mut bytes, l)?;
            bytes.push(b'\n');
        }
        let n = records.len() + runs.len();
        if let Err(e) = self.write_held(now) {
            if self.held.bytes.len() + bytes.len() > MAX_HELD_BYTES {
                anyhow::bail!(
                    "{e:#}; {} held in memory already, no more taken",
                    crate::format::count(self.held.lines as u64, "line")
                );
            }
        }
        self.held.bytes.extend_from_slice(&bytes);
        self.held.lines += n;
        let _ = self.write_held(now);
        Ok(n)
    }

    /// Lines held in memory because the disk refused them, and why (0 and `None`: none).
    pub fn held(&self) -> (usize, Option<&str>) {
        (self.held.lines, self.held.error.as_deref())
    }

    /// Writes the lines held in memory to the open segment (made if need be); on an error
    /// the segment is cut back to its last whole line and the lines stay held.
    fn write_held(&mut self, now: Ms) -> Result<()> {
        if self.held.lines == 0 {
            return Ok(());
        }
        if let Err(e) = self.try_write_held(now) {
            self.held.error = Some(format!("{e:#}"));
            return Err(e);
        }
        self.held = Held::default();
        if self.open.as_ref().is_some_and(|o| o.lines >= MAX_LINES) {
            self.close_open()?;
        }
        Ok(())
    }

    fn try_write_held(&mut self, now: Ms) -> Result<()> {
        if self.open.is_none() {
            self.seq += 1;
            let name = format!("{:013}-{}-{:06}", now.max(0), std::process::id(), self.seq);
            let path = self.dir.join(format!("{name}.open"));
            // Made under another name and locked before it is named `.open`: a `.open`
            // segment whose lock is free is one whose writer is gone ([`recover`]).
            let new = self.dir.join(format!("{name}.new"));
            let create = || OpenOptions::new().create_new(true).append(true).open(&new);
            let file = match create() {
                // Removed when it was empty, by another run sharing it ([`Spool::remove_if_empty`]).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    fs::create_dir_all(&self.dir).and_then(|()| create())
                }
                file => file,
            }
            .with_context(|| format!("{}: create", path.display()))?;
            let named = try_lock(&file).and_then(|locked| {
                if locked {
                    fs::rename(&new, &path)
                } else {
                    Err(std::io::Error::other("locked by another process"))
                }
            });
            if let Err(e) = named {
                let _ = fs::remove_file(&new);
                return Err(e).with_context(|| format!("{}: lock", path.display()));
            }
            self.open = Some(Open {
                path,
                file,
                len: 0,
                lines: 0,
                first_ms: now,
            });
        }
        let fsync = self.fsync;
        let o = self.open.as_mut().expect("opened above");
        let written = o.file.write_all(&self.held.bytes).and_then(|()| {
            if fsync {
                o.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            // Cut back to the last whole line, so that no torn line is left behind and the
            // lines are written once when they are retried.
            let _ = o.file.set_len(o.len);
            if o.len == 0 {
                // An empty segment made for these lines: removed, not left for a shipper.
                let path = o.path.clone();
                self.open = None;
                let _ = fs::remove_file(&path);
                return Err(e).with_context(|| format!("{}: write", path.display()));
            }
            return Err(e).with_context(|| format!("{}: write", o.path.display()));
        }
        o.len += self.held.bytes.len() as u64;
        o.lines += self.held.lines;
        Ok(())
    }

    /// Writes the lines held in memory, if any, and closes the open segment if it is older
    /// than [`MAX_AGE_MS`].
    pub fn rotate(&mut self, now: Ms) -> Result<()> {
        let held = self.write_held(now);
        if self
            .open
            .as_ref()
            .is_some_and(|o| now - o.first_ms >= MAX_AGE_MS)
        {
            self.close_open()?;
        }
        held
    }

    /// Writes the lines held in memory and closes the open segment, so that the shipper
    /// takes it. Lines the disk still refuses stay held, and the error says so.
    pub fn close(&mut self) -> Result<()> {
        let held = self.write_held(crate::clock::wall_ms() as Ms);
        self.close_open()?;
        held
    }

    /// Once closed and shipped: removes the spool's folder, then the folder of spools it is
    /// in, each only if empty (`remove_dir` refuses a folder that holds anything: a segment
    /// left, another destination's spool, another run's open segment). Nothing is removed
    /// while a segment is open or lines are held.
    pub fn remove_if_empty(&self) {
        if self.open.is_some() || self.held.lines > 0 {
            return;
        }
        if fs::remove_dir(&self.dir).is_ok() {
            if let Some(spools) = self.dir.parent() {
                let _ = fs::remove_dir(spools);
            }
        }
    }

    fn close_open(&mut self) -> Result<()> {
        if let Some(o) = self.open.take() {
            fs::rename(&o.path, o.path.with_extension("seg"))
                .with_context(|| format!("{}: close", o.path.display()))?;
        }
        Ok(())
    }
}

/// Closes the segments of `dir` whose writer is gone: each `.open` segment whose lock can be
/// taken is renamed `.seg`, for a shipper to take. A segment whose lock is held is being
/// written (by this process or another) and is left alone. Returns how many were closed.
pub fn recover(dir: &Path) -> Result<usize> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("{}: list", dir.display())),
    };
    let mut closed = 0;
    for p in rd.filter_map(|e| e.ok().map(|e| e.path())) {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if ext != "open" && ext != "new" {
            continue;
        }
        // A new segment is locked by its writer just after it is made, not atomically with
        // it: one that is young is left alone, unlocked or not (taking its lock even for a
        // moment could make its writer fail to take it).
        if ext == "new" {
            let old = fs::metadata(&p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_NEW);
            if !old {
                continue;
            }
        }
        let f = match File::open(&p) {
            Ok(f) => f,
            // Closed, or recovered by another process, since the listing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("{}: open", p.display())),
        };
        if !try_lock(&f).with_context(|| format!("{}: lock", p.display()))? || !still_named(&f, &p)
        {
            continue;
        }
        if ext == "new" {
            // Old, and its lock free: made by a writer that died before naming it `.open`;
            // nothing was written to it.
            let _ = fs::remove_file(&p);
            continue;
        }
        match fs::rename(&p, p.with_extension("seg")) {
            Ok(()) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("{}: close", p.display())),
        }
    }
    Ok(closed)
}

/// A closed segment a shipper holds (its lock), so that no other shipper moves it meanwhile.
pub struct Claim {
    path: PathBuf,
    file: File,
}

/// Takes the closed segment `path` for shipping: `None` when another process holds it (its
/// shipper moving it), or it is gone (shipped meanwhile).
pub fn claim(path: &Path) -> Result<Option<Claim>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("{}: open", path.display())),
    };
    if !try_lock(&file).with_context(|| format!("{}: lock", path.display()))?
        || !still_named(&file, path)
    {
        return Ok(None);
    }
    Ok(Some(Claim {
        path: path.to_path_buf(),
        file,
    }))
}

impl Claim {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the segment holds.
    pub fn read(&mut self) -> Result<Segment> {
        self.file
            .rewind()
            .with_context(|| format!("{}: read", self.path.display()))?;
        Ok(read_from(&self.file))
    }

    /// The segment is in the archive: removed (then unlocked).
    pub fn done(self) -> Result<()> {
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("{}: remove", self.path.display()))
            }
            _ => Ok(()),
        }
    }
}

/// The closed segments of `dir`, oldest first.
pub fn segments(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "seg"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("{}: list", dir.display())),
    };
    out.sort();
    Ok(out)
}

/// Reads a segment.
pub fn read(path: &Path) -> Result<Segment> {
    let f = File::open(path).with_context(|| format!("{}: open", path.display()))?;
    Ok(read_from(&f))
}

fn read_from(f: &File) -> Segment {
    let mut seg = Segment::default();
    for line in BufReader::new(f).lines() {
        let Ok(line) = line else {
            seg.damaged += 1;
            continue;
        };
        match line.split_once('\t') {
            Some(("R", json)) => match Record::parse(json) {
                Ok(r) => seg.records.push(r),
                Err(_) => seg.damaged += 1,
            },
            Some(("L", json)) => match serde_json::from_str(json) {
                Ok(l) => seg.runs.push(l),
                Err(_) => seg.damaged += 1,
            },
            _ if line.is_empty() => {}
            _ => seg.damaged += 1,
        }
    }
    seg
}

/// The batch name of a segment: its file name without the extension.
pub fn batch_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What waits in `dir`, open segments included (every process's).
pub fn backlog(dir: &Path) -> Backlog {
    backlog_where(dir, |_| true)
}

/// What waits in `dir` for one process's figures: the closed segments (whichever shipper
/// moves them) and its own open segment `own`, not those other processes are writing.
pub fn backlog_of(dir: &Path, own: Option<&Path>) -> Backlog {
    backlog_where(dir, |p| own == Some(p))
}

fn backlog_where(dir: &Path, open_counts: impl Fn(&Path) -> bool) -> Backlog {
    let mut b = Backlog::default();
    let Ok(rd) = fs::read_dir(dir) else {
        return b;
    };
    for p in rd.filter_map(|e| e.ok().map(|e| e.path())) {
        let counted = match p.extension().and_then(|e| e.to_str()) {
            Some("seg") => true,
            Some("open") => open_counts(&p),
            _ => false,
        };
        if !counted {
            continue;
        }
        let first: Option<Ms> = batch_name(&p)
            .split('-')
            .next()
            .and_then(|t| t.parse().ok());
        let lines = File::open(&p)
            .map(|f| BufReader::new(f).lines().count() as u64)
            .unwrap_or(0);
        if lines == 0 {
            continue;
        }
        b.segments += 1;
        b.lines += lines;
        b.oldest_ms = match (b.oldest_ms, first) {
            (Some(a), Some(f)) => Some(a.min(f)),
            (a, f) => a.or(f),
        };
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use nowcast_core::record::Metric;

    #[test]
    fn segments_close_by_age_and_survive_a_crash() {
        let dir = std::env::temp_dir().join(format!("nowcast-spool-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut s = Spool::open(&dir, false).unwrap();
        let r = Record::new(1_000.0, "nowcast tcp", Metric::Rtt, 1.5, "h:1");
        s.append(&[r.clone(), r.clone()], &[], 1_000).unwrap();
        assert!(segments(&dir).unwrap().is_empty(), "still open");
        assert_eq!(backlog(&dir).lines, 2);
        s.rotate(1_500).unwrap();
        assert!(segments(&dir).unwrap().is_empty());
        s.rotate(2_000).unwrap();
        let segs = segments(&dir).unwrap();
        assert_eq!(segs.len(), 1);
        // A crash: an open segment with a torn last line.
        s.append(std::slice::from_ref(&r), &[], 3_000).unwrap();
        drop(s);
        let open = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "open"))
            .unwrap();
        let mut f = OpenOptions::new().append(true).open(&open).unwrap();
        f.write_all(b"R\t{\"schema_ver").unwrap();
        drop(f);
        let _s = Spool::open(&dir, false).unwrap();
        let segs = segments(&dir).unwrap();
        assert_eq!(segs.len(), 2);
        let seg = read(&segs[1]).unwrap();
        assert_eq!((seg.records.len(), seg.damaged), (1, 1));
        assert_eq!(read(&segs[0]).unwrap().records, vec![r.clone(), r]);
        assert_eq!(backlog(&dir).oldest_ms, Some(1_000));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Two processes' spools in one folder (here two in one process: a `flock` is held per
    /// open file): opening the second leaves the first's open segment alone, a closed
    /// segment is shipped by one shipper at a time, and an open segment whose writer is gone
    /// is closed by the next that looks.
    #[test]
    fn a_segment_being_written_is_left_to_its_writer() {
        let dir = std::env::temp_dir().join(format!("nowcast-spool-live-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let r = Record::new(1_000.0, "nowcast tcp", Metric::Rtt, 1.5, "h:1");
        let mut a = Spool::open(&dir, false).unwrap();
        a.append(std::slice::from_ref(&r), &[], 1_000).unwrap();
        let a_open = a.open_path().unwrap().to_path_buf();
        let mut b = Spool::open(&dir, false).unwrap();
        assert!(a_open.exists(), "the live writer's segment was taken");
        assert!(segments(&dir).unwrap().is_empty());
        assert_eq!(recover(&dir).unwrap(), 0);
        // The writer goes on, and closes its segment with every line.
        a.append(std::slice::from_ref(&r), &[], 1_100).unwrap();
        b.append(std::slice::from_ref(&r), &[], 1_200).unwrap();
        assert_eq!(backlog(&dir).lines, 3);
        assert_eq!(backlog_of(&dir, a.open_path()).lines, 2);
        a.close().unwrap();
        let segs = segments(&dir).unwrap();
        assert_eq!(segs.len(), 1);
        let mut c = claim(&segs[0]).unwrap().expect("free");
        assert!(
            claim(&segs[0]).unwrap().is_none(),
            "held by the first shipper"
        );
        assert_eq!(c.read().unwrap().records, vec![r.clone(), r.clone()]);
        c.done().unwrap();
        assert!(claim(&segs[0]).unwrap().is_none(), "gone");
        // The other writer dies (its file closed without a close): the next look closes it.
        let b_open = b.open_path().unwrap().to_path_buf();
        drop(b);
        assert_eq!(recover(&dir).unwrap(), 1);
        assert!(!b_open.exists());
        assert_eq!(segments(&dir).unwrap().len(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_spool_is_removed_and_one_holding_lines_is_kept() {
        let spools = std::env::temp_dir().join(format!("nowcast-spools-{}", std::process::id()));
        let _ = fs::remove_dir_all(&spools);
        let (a, b) = (spools.join("sqlite"), spools.join("clickhouse"));
        let r = Record::new(1_000.0, "nowcast tcp", Metric::Rtt, 1.5, "h:1");
        let mut sa = Spool::open(&a, false).unwrap();
        let mut sb = Spool::open(&b, false).unwrap();
        sa.append(std::slice::from_ref(&r), &[], 1_000).unwrap();
        // Open: kept.
        sa.remove_if_empty();
        assert_eq!(backlog(&a).lines, 1);
        // Closed, not shipped: kept.
        sa.close().unwrap();
        sa.remove_if_empty();
        assert_eq!(segments(&a).unwrap().len(), 1);
        // Another run sharing the folder appends after it was removed: made again.
        sb.remove_if_empty();
        assert!(
            !b.exists() && spools.exists(),
            "the other spool keeps the folder"
        );
        sb.append(std::slice::from_ref(&r), &[], 2_000).unwrap();
        assert_eq!((sb.held().0, backlog(&b).lines), (0, 1));
        sb.close().unwrap();
        // Shipped: both folders go, then the folder of spools.
        for seg in segments(&a)
            .unwrap()
            .into_iter()
            .chain(segments(&b).unwrap())
        {
            fs::remove_file(seg).unwrap();
        }
        sb.remove_if_empty();
        assert!(!b.exists() && a.exists());
        sa.remove_if_empty();
        assert!(!spools.exists());
    }
}
