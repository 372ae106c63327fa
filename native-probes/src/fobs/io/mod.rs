//! The FOBS edge: the UDP and TCP sockets, the files, the hash and the clock around the
//! [`Sender`] and [`Receiver`] cores. One thread per side: it waits in `ppoll` on the
//! control connection (and, at the receiver, the data socket) until the core's next timer,
//! then feeds the core what arrived and sends what it asks for.
//!
//! Files at the receiver (SECURITY.md, "FOBS receiver"): a transfer is written to
//! `DIR/.NAME.fobs-part`, opened with `O_NOFOLLOW` (a symbolic link planted there is
//! refused, not followed), and renamed to `DIR/NAME` with `RENAME_NOREPLACE` only after its
//! BLAKE3 hash matched the sender's; an interrupted transfer leaves the part file and
//! `DIR/.NAME.fobs-state` (size, packet size, hash and the packets held), which
//! `--resume` continues. Nothing is ever written under the final name before it is whole.

mod datagrams;
mod files;
mod receive;
mod send;

pub use files::Unfinished;
pub use receive::{recv, RecvOptions, RecvUpdate};
pub use send::{send, SendSummary, SendUpdate, Unanswered};

use super::wire::{Framer, HASH_LEN};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

/// 64 random bits from the kernel.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    fill_random(&mut b);
    u64::from_le_bytes(b)
}

/// Fills `b` from the kernel's random source.
pub fn fill_random(b: &mut [u8]) {
    let mut done = 0;
    while done < b.len() {
        // SAFETY: the pointer and length name the unfilled part of `b`.
        let n = unsafe { libc::getrandom(b[done..].as_mut_ptr().cast(), b.len() - done, 0) };
        if n > 0 {
            done += n as usize;
        }
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (nanosecond resolution).
fn wait_readable(fds: &[i32], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: pfds is a valid array of pollfd for its length; ts is a valid timespec.
    let n = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds
        .iter()
        .map(|p| p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
        .collect())
}

/// Reads what the nonblocking stream has; `Ok(false)` when the peer closed it.
fn read_available(s: &mut TcpStream, framer: &mut Framer) -> io::Result<bool> {
    read_available_into(s, |b| framer.push(b))
}

/// [`read_available`], handing each piece read to `take`.
fn read_available_into(s: &mut TcpStream, mut take: impl FnMut(&[u8])) -> io::Result<bool> {
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => take(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Ends a control connection without resetting it: closing a socket with unread bytes (a
/// window end the sender wrote before it read the verdict) sends a RST, which can destroy the
/// verdict in flight. So: no more writes, then read and discard until the peer closes (it
/// does once it has the verdict), for at most `limit`.
fn close_gracefully(s: &mut TcpStream, limit: Duration) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let until = std::time::Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() || wait_readable(&[s.as_raw_fd()], left).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// Writes all of `buf` to a nonblocking stream, waiting for room (bounded by `limit`).
fn write_all_nb(s: &mut TcpStream, mut buf: &[u8], limit: Duration) -> io::Result<()> {
    let until = std::time::Instant::now() + limit;
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= until {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "control connection stalled",
                    ));
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// BLAKE3 of a file (memory-mapped by the crate).
pub fn hash_file(path: &Path) -> io::Result<[u8; HASH_LEN]> {
    let mut h = blake3::Hasher::new();
    h.update_mmap(path)?;
    Ok(*h.finalize().as_bytes())
}

/// [`hash_file`] of a file already open (read from its start, whatever its position).
pub fn hash_open(file: &File) -> io::Result<[u8; HASH_LEN]> {
    let mut h = blake3::Hasher::new();
    let mut at = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read_at(&mut buf, at) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => r?,
        };
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(*h.finalize().as_bytes())
}
