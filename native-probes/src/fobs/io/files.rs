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
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(STATE_MAGIC)?;
    f.write_all(&h.size.to_le_bytes())?;
    f.write_all(&h.packet.to_le_bytes())?;
    f.write_all(&h.hash)?;
    f.write_all(have)?;
    f.sync_data()?;
    std::fs::rename(&tmp, path)
}

/// The packets a state file says are held, if it describes the same transfer.
pub(super) fn read_state(path: &Path, h: &crate::fobs::wire::Hello) -> Option<Vec<u8>> {
    // Not blocking on a FIFO planted under the name, and only this user's regular file.
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    own_regular_file(&f).ok()?;
    let mut b = Vec::new();
    f.read_to_end(&mut b).ok()?;
    let head = 8 + 8 + 2 + HASH_LEN;
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

/// Opens (creating, or truncating unless `resume`) the part file at `path`, and reserves
/// `size` bytes for it, so that a file the disk cannot hold is refused at its hello, not
/// failed part-way. The file must be a regular file of this user: in a shared directory
/// (`--dir /tmp`) someone else's file, or a FIFO, under that name is refused, not written
/// to (or waited on).
pub(super) fn open_part(path: &Path, resume: bool, size: u64) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(!resume)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
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
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_file() || m.uid() != me {
        return Err(io::Error::other(
            "a file of that name is there that is not a regular file of this user",
        ));
    }
    Ok(())
}
