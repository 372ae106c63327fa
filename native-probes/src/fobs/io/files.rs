//! The receiver's files: the part file, its resume state, and the final rename.

use crate::fobs::wire::HASH_LEN;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub(super) fn part_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join(format!(".{name}.fobs-part")),
        dir.join(format!(".{name}.fobs-state")),
        dir.join(name),
    )
}

const STATE_MAGIC: &[u8; 8] = b"FOBSST01";

pub(super) fn write_state(
    path: &Path,
    h: &crate::fobs::wire::Hello,
    have: &[u8],
) -> io::Result<()> {
    let tmp = path.with_extension("fobs-state-new");
    // A new file, never one found under the name: a FIFO planted there would block the
    // open, a hard link to a file elsewhere would be written through. What is there is
    // removed first (in a sticky shared directory another user's cannot be, and the
    // exclusive create then refuses it).
    let _ = std::fs::remove_file(&tmp);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(STATE_MAGIC)?;
            f.write_all(&h.size.to_le_bytes())?;
            f.write_all(&h.packet.to_le_bytes())?;
            f.write_all(&h.hash)?;
            f.write_all(have)?;
            f.sync_data()?;
            std::fs::rename(&tmp, path)
        });
    if written.is_err() {
        // A full disk leaves no empty state file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A state file's bytes: not blocking on a FIFO planted under the name, only this user's
/// regular file, and at most what the largest file's state holds (one bit per packet).
fn state_bytes(path: &Path) -> Option<Vec<u8>> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    own_regular_file(&f).ok()?;
    let mut b = Vec::new();
    f.take((STATE_HEAD as u64) + (1 << 32))
        .read_to_end(&mut b)
        .ok()?;
    Some(b)
}

/// A state file's header: magic, file size, packet size, hash.
const STATE_HEAD: usize = 8 + 8 + 2 + HASH_LEN;

/// The packets a state file says are held, if it describes the same transfer.
pub(super) fn read_state(path: &Path, h: &crate::fobs::wire::Hello) -> Option<Vec<u8>> {
    let b = state_bytes(path)?;
    let head = STATE_HEAD;
    let bits = h.size.div_ceil(u64::from(h.packet)).div_ceil(8) as usize;
    (b.len() == head + bits
        && &b[..8] == STATE_MAGIC
        && b[8..16] == h.size.to_le_bytes()
        && b[16..18] == h.packet.to_le_bytes()
        && b[18..head] == h.hash)
        .then(|| b[head..].to_vec())
}

pub(super) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(from.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: both are valid NUL-terminated paths.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(super) fn f_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Opens the part file at `path`: the one a resumed transfer left, or else a new one (what
/// was under the name is removed first, and the file is created exclusively, so that
/// nothing found there is written through), and reserves `size` bytes for it, so that a
/// file the disk cannot hold is refused at its hello, not failed part-way. A part file
/// resumed must be a regular file of this user with no other name: in a shared directory
/// (`--dir /tmp`) someone else's file, a FIFO, or a hard link to a file elsewhere under
/// that name is refused, not written to (or waited on).
pub(super) fn open_part(path: &Path, resume: bool, size: u64) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    if !resume {
        let _ = std::fs::remove_file(path);
        options.create_new(true);
    }
    let f = options.open(path)?;
    own_regular_file(&f)?;
    f.set_len(size)?;
    let len = libc::off_t::try_from(size).map_err(|_| io::Error::other("size out of range"))?;
    if len > 0 {
        // SAFETY: a valid descriptor; mode 0 only allocates (the size is already `size`).
        if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) } != 0 {
            let e = io::Error::last_os_error();
            // A file system that cannot reserve space: a full disk is then found by the
            // writes, and the transfer ends there, saying so.
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                if !resume {
                    let _ = std::fs::remove_file(path);
                }
                return Err(e);
            }
        }
    }
    Ok(f)
}

/// Whether `f` is a regular file owned by this process's user.
fn own_regular_file(f: &File) -> io::Result<()> {
    if !own_regular(&f.metadata()?) {
        return Err(io::Error::other(
            "a file of that name is there that is not a regular file of this user alone",
        ));
    }
    Ok(())
}

/// Whether `m` is a regular file of this process's user with no other name.
fn own_regular(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    m.file_type().is_file() && m.uid() == me && m.nlink() == 1
}

/// An unfinished transfer found in the receiver's directory: its part file and resume state.
#[derive(Clone, Debug, PartialEq)]
pub struct Unfinished {
    pub name: String,
    /// The file's size and the bytes its state says are held (0 for a part file whose state
    /// was never saved).
    pub size: u64,
    pub held: u64,
    /// Since its part file or state was last written.
    pub age: std::time::Duration,
}

/// The unfinished transfers in `dir` (`.NAME.fobs-part` files, with their `.NAME.fobs-state`
/// when there is one), oldest first. Only this user's regular files named so are counted; a
/// state file of another format is left out (and left alone).
pub fn unfinished(dir: &Path) -> Vec<Unfinished> {
    let now = std::time::SystemTime::now();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(name) = file
            .to_str()
            .and_then(|f| f.strip_prefix('.'))
            .and_then(|f| f.strip_suffix(".fobs-part"))
        else {
            continue;
        };
        let (part, state, _) = part_paths(dir, name);
        let Some(part_m) = own_file_metadata(&part) else {
            continue;
        };
        let mut newest = part_m.modified().unwrap_or(now);
        let mut size = part_m.len();
        let mut held = 0;
        if let Some(state_m) = own_file_metadata(&state) {
            match state_summary(&state) {
                Some((s, h)) => {
                    (size, held) = (s, h);
                    newest = newest.max(state_m.modified().unwrap_or(now));
                }
                // Not a state this version wrote: the pair is not ours to judge.
                None => continue,
            }
        }
        out.push(Unfinished {
            name: name.to_string(),
            size,
            held,
            age: now.duration_since(newest).unwrap_or_default(),
        });
    }
    out.sort_by(|a, b| b.age.cmp(&a.age).then_with(|| a.name.cmp(&b.name)));
    out
}

/// Deletes the part file and state of the unfinished transfer of `name` in `dir`.
pub fn remove_unfinished(dir: &Path, name: &str) -> io::Result<()> {
    let (part, state, _) = part_paths(dir, name);
    match std::fs::remove_file(&state) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::remove_file(part)
}

/// The metadata of `path` if it is a regular file (not followed through a link) of this
/// user alone.
fn own_file_metadata(path: &Path) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(path).ok().filter(own_regular)
}

/// A state file's file size and the bytes its bitmap says are held.
fn state_summary(path: &Path) -> Option<(u64, u64)> {
    let b = state_bytes(path)?;
    let head = STATE_HEAD;
    if b.len() < head || &b[..8] != STATE_MAGIC {
        return None;
    }
    let size = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let packet = u64::from(u16::from_le_bytes(b[16..18].try_into().ok()?));
    if packet == 0 || b.len() as u64 != head as u64 + size.div_ceil(packet).div_ceil(8) {
        return None;
    }
    let n = size.div_ceil(packet);
    let has = |i: u64| b[head + (i / 8) as usize] & (1 << (i % 8)) != 0;
    let packets: u64 = b[head..].iter().map(|x| u64::from(x.count_ones())).sum();
    // Every packet is whole but the last.
    let held = match n {
        0 => 0,
        n if has(n - 1) => (packets - 1) * packet + (size - (n - 1) * packet),
        _ => packets * packet,
    };
    Some((size, held))
}
