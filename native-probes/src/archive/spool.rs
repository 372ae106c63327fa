//! The queue on disk in front of each archive: records and run log rows are appended to
//! segment files (one line each, `R` or `L`, a tab, the JSON) and a shipper moves whole
//! segments into the archive, deleting a segment only once the archive has it. So an
//! archive that is down or slow never blocks a measurement and never loses one: the backlog
//! waits on disk, and survives a restart.
//!
//! A segment is written as `NAME.open` and renamed `NAME.seg` when closed (after
//! `max_lines` lines or `max_age` of age); names begin with the time of their first line,
//! so they sort in time order. A `.open` file left by a crash is closed on the next start.
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
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// Lines per segment at most.
pub const MAX_LINES: usize = 20_000;
/// Age of the open segment at most, ms.
pub const MAX_AGE_MS: Ms = 1_000;
/// Lines held in memory at most (bytes) while the spool cannot be written: beyond it an
/// append is refused with the error.
pub const MAX_HELD_BYTES: usize = 64 << 20;

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
    /// The spool in `dir` (created if need be); segments left open by a crash are closed.
    pub fn open(dir: &Path, fsync: bool) -> Result<Spool> {
        fs::create_dir_all(dir).with_context(|| format!("{}: create the spool", dir.display()))?;
        for entry in fs::read_dir(dir)? {
            let p = entry?.path();
            if p.extension().is_some_and(|e| e == "open") {
                fs::rename(&p, p.with_extension("seg"))
                    .with_context(|| format!("{}: close", p.display()))?;
            }
        }
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
            let create = || OpenOptions::new().create_new(true).append(true).open(&path);
            let file = match create() {
                // Removed when it was empty, by another run sharing it ([`Spool::remove_if_empty`]).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    fs::create_dir_all(&self.dir).and_then(|()| create())
                }
                file => file,
            }
            .with_context(|| format!("{}: create", path.display()))?;
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
    Ok(seg)
}

/// The batch name of a segment: its file name without the extension.
pub fn batch_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What waits in `dir`, open segment included.
pub fn backlog(dir: &Path) -> Backlog {
    let mut b = Backlog::default();
    let Ok(rd) = fs::read_dir(dir) else {
        return b;
    };
    for p in rd.filter_map(|e| e.ok().map(|e| e.path())) {
        if !p.extension().is_some_and(|e| e == "seg" || e == "open") {
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
