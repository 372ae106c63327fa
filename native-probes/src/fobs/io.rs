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

use super::receiver::{self, Receiver};
use super::sender::{self, Sender, Transmit};
use super::wire::{Control, Done, Framer, Refusal, Welcome, DATA_HEADER, HASH_LEN, TOKEN_LEN};
use crate::clock::{Clock, Nanos};
use crate::format::{quote_answer, ANSWER_MAX};
use crate::stop::Stop;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
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

/// What `nowcast fobs send` reports as it goes.
pub enum SendUpdate<'a> {
    Event(&'a sender::Event),
    /// Every ~100 ms: packets acknowledged, total, the rate now (bytes/s).
    Progress {
        delivered: u64,
        total: u64,
        rate: f64,
    },
}

/// The end of a send.
#[derive(Clone, Debug)]
pub struct SendSummary {
    pub done: Option<Done>,
    pub refused: Option<Refusal>,
    pub failed: Option<String>,
    /// Whether the receiver welcomed the transfer: without a welcome nothing was started,
    /// and there is nothing to resume.
    pub welcomed: bool,
    /// Why a peer that was not refused never welcomed the transfer (set with `failed`).
    pub unanswered: Option<Unanswered>,
    /// From the receiver's welcome to its last word, seconds.
    pub seconds: f64,
    /// The file's size.
    pub bytes: u64,
    /// Bytes already at the receiver (resume).
    pub held_bytes: u64,
    /// Bytes the receiver holds at the end (acknowledged, and held before): all of the file
    /// only when it was stored; what a failed or interrupted transfer actually delivered.
    pub delivered_bytes: u64,
    pub stats: sender::Stats,
    pub local: Option<SocketAddr>,
}

/// How the peer failed to answer a hello: it is likely not a `nowcast fobs recv` at all, and
/// its port was given by mistake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// Bytes that are not a FOBS welcome: another protocol's answer (its first
    /// [`ANSWER_MAX`] bytes).
    Other(Vec<u8>),
    /// The peer closed the connection without a word.
    Closed,
    /// The peer accepted the connection and said nothing for [`sender::OFFER_NS`].
    Silent,
}

impl Unanswered {
    /// What the peer did, after its name: "does not speak FOBS (it answered \"…\")".
    pub fn describe(&self) -> String {
        match self {
            Unanswered::Other(read) => {
                format!(
                    "does not speak FOBS (it answered \"{}\")",
                    quote_answer(read)
                )
            }
            Unanswered::Closed => "closed the connection without answering the offer".into(),
            // A receiver busy with another transfer says so at once: this is not one.
            Unanswered::Silent => format!(
                "accepted the connection but did not answer the offer within {} s",
                sender::OFFER_NS / 1_000_000_000
            ),
        }
    }
}

/// Datagrams of one size sent by one `sendmsg` with UDP generic segmentation offload
/// (`UDP_SEGMENT`): the kernel cuts the buffer into datagrams of `seg` bytes. At 1 Gbit/s
/// that is 89,000 datagrams a second; one system call per datagram costs more CPU than a
/// loaded core has for it. Without GSO (an old kernel, a device that refuses it) each
/// datagram is sent on its own.
struct Batch {
    buf: Vec<u8>,
    seg: usize,
    count: usize,
    gso: bool,
}

/// Most datagrams in one GSO send (the kernel's UDP_MAX_SEGMENTS is 64) and most bytes.
const GSO_SEGMENTS: usize = 64;
const GSO_BYTES: usize = 65_000;

impl Batch {
    fn new() -> Self {
        Self {
            buf: Vec::with_capacity(GSO_BYTES + 65_536),
            seg: 0,
            count: 0,
            gso: true,
        }
    }

    /// Appends a datagram of `header` and `len` payload bytes (sending what is queued first
    /// if it does not fit); returns the payload's slice for the caller to fill.
    fn push<'a>(
        &'a mut self,
        udp: &UdpSocket,
        header: &[u8],
        len: usize,
    ) -> io::Result<&'a mut [u8]> {
        let size = header.len() + len;
        if self.count > 0
            && (size != self.seg
                || self.count >= GSO_SEGMENTS
                || self.buf.len() + size > GSO_BYTES
                || !self.gso)
        {
            self.flush(udp)?;
        }
        self.seg = size;
        self.count += 1;
        let start = self.buf.len();
        self.buf.extend_from_slice(header);
        self.buf.resize(start + size, 0);
        Ok(&mut self.buf[start + header.len()..])
    }

    fn flush(&mut self, udp: &UdpSocket) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let result = if self.count == 1 {
            send_one(udp, &self.buf)
        } else {
            match send_gso(udp, &self.buf, self.seg) {
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT)
                    ) =>
                {
                    self.gso = false;
                    self.buf.chunks(self.seg).try_for_each(|d| send_one(udp, d))
                }
                r => r,
            }
        };
        self.buf.clear();
        self.count = 0;
        result
    }
}

fn send_one(udp: &UdpSocket, d: &[u8]) -> io::Result<()> {
    loop {
        match udp.send(d) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The local queue is full (ENOBUFS): the packets are lost here, the window's
            // acknowledgement will say so.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// One `sendmsg` of `buf` on the connected socket with a `UDP_SEGMENT` of `seg` bytes.
fn send_gso(udp: &UdpSocket, buf: &[u8], seg: usize) -> io::Result<()> {
    const SOL_UDP: libc::c_int = 17;
    const UDP_SEGMENT: libc::c_int = 103;
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
    let mut control = [0u64; 4]; // 32 bytes, aligned: room for one u16 cmsg
    assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points to `space` bytes; CMSG_FIRSTHDR is non-null for that size,
    // and the data written (a u16) fits in CMSG_LEN(2).
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = SOL_UDP;
        (*c).cmsg_type = UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg as u16);
    }
    loop {
        // SAFETY: msg and everything it points to live until the call returns.
        let n = unsafe { libc::sendmsg(udp.as_raw_fd(), &msg, 0) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::ENOBUFS) => return Ok(()),
            _ => return Err(e),
        }
    }
}

/// Reads the file ahead in blocks of 1 MiB, so that packets sent in order cost one `pread`
/// per block instead of one per packet; a retransmission behind the block is read alone.
struct ReadAhead {
    block: Vec<u8>,
    start: u64,
}

const READ_AHEAD: usize = 1 << 20;

impl ReadAhead {
    fn new() -> Self {
        Self {
            block: Vec::new(),
            start: 0,
        }
    }

    fn read_at(&mut self, file: &File, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let end = offset + out.len() as u64;
        if offset < self.start {
            // A retransmission behind the block: read just that packet.
            return file.read_exact_at(out, offset);
        }
        if end > self.start + self.block.len() as u64 {
            self.block.resize(READ_AHEAD.max(out.len()), 0);
            let mut got = 0;
            while got < self.block.len() {
                match file.read_at(&mut self.block[got..], offset + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.block.truncate(got);
            self.start = offset;
            if got < out.len() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file shrank while it was being sent",
                ));
            }
        }
        let from = (offset - self.start) as usize;
        out.copy_from_slice(&self.block[from..from + out.len()]);
        Ok(())
    }
}

/// Sends with `sender` to the receiver at `to` (control on TCP, data on UDP to the port
/// its welcome names), reading payloads from `file`.
pub fn send(
    mut sender: Sender,
    file: &File,
    to: SocketAddr,
    stop: &Stop,
    update: &mut dyn FnMut(SendUpdate<'_>),
) -> io::Result<SendSummary> {
    let clock = Clock::new();
    // Pacing sleeps are short (tens of µs between datagrams): wake on time, not up to the
    // default 50 µs timer slack late.
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes a number and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let mut tcp = match connect(to, stop)? {
        Some(tcp) => tcp,
        // Stopped while connecting: nothing was offered, nothing to resume.
        None => return Ok(SendSummary::stopped()),
    };
    tcp.set_nodelay(true)?;
    tcp.set_nonblocking(true)?;
    let local = tcp.local_addr().ok();
    let bind: SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse().expect("addr")
    } else {
        "[::]:0".parse().expect("addr")
    };
    let udp = UdpSocket::bind(bind)?;
    let _ = socket2::SockRef::from(&udp).set_send_buffer_size(4 << 20);
    let mut framer = Framer::default();
    let mut buf = Vec::with_capacity(65_536);
    let mut summary = SendSummary::new(local);
    let mut welcomed: Option<u64> = None;
    // The first bytes the peer said before any welcome, to quote if they are not one, and
    // whether it closed the connection (or it failed).
    let mut answer: Vec<u8> = Vec::new();
    let mut closed = false;
    let mut last_progress = 0;
    let mut connected = false;
    let mut batch = Batch::new();
    let mut reader = ReadAhead::new();
    loop {
        let now = clock.now();
        let mut budget = 512;
        while budget > 0 {
            let Some(t) = sender.poll_transmit(now, &mut buf) else {
                break;
            };
            budget -= 1;
            match t {
                Transmit::Control => {
                    // A window's end must not overtake its datagrams.
                    batch.flush(&udp)?;
                    write_all_nb(&mut tcp, &buf, Duration::from_secs(10))?
                }
                Transmit::Data { offset, len } => {
                    let at = batch.push(&udp, &buf[..DATA_HEADER], len)?;
                    reader.read_at(file, offset, at)?;
                }
            }
        }
        batch.flush(&udp)?;
        let tap = welcomed.is_none().then_some(&mut answer);
        match read_available_tap(&mut tcp, &mut framer, tap) {
            Ok(true) => {}
            Ok(false) => {
                closed = true;
                summary
                    .failed
                    .get_or_insert_with(|| "the receiver closed the control connection".into());
            }
            Err(e) => {
                closed = true;
                summary
                    .failed
                    .get_or_insert_with(|| format!("the control connection failed: {e}"));
            }
        }
        loop {
            match framer.next_message() {
                Ok(Some(m)) => {
                    if let Control::Welcome(w) = &m {
                        if w.status == Refusal::Accepted && !connected {
                            udp.connect(SocketAddr::new(to.ip(), w.udp_port))?;
                            connected = true;
                            welcomed = Some(clock.now());
                        }
                    }
                    sender.handle_control(clock.now(), m);
                }
                Ok(None) => break,
                Err(e) => {
                    summary.failed = Some(format!(
                        "malformed control message from the receiver ({e:?})"
                    ));
                    break;
                }
            }
        }
        while let Some(e) = sender.poll_event() {
            match &e {
                // Nothing is acknowledged before the welcome: what is delivered now is what
                // the receiver held.
                sender::Event::Accepted { .. } => summary.held_bytes = sender.delivered_bytes(),
                sender::Event::Refused(r) => summary.refused = Some(*r),
                sender::Event::Finished(d) => summary.done = Some(*d),
                sender::Event::Failed(f) => summary.failed = Some(f.clone()),
                _ => {}
            }
            update(SendUpdate::Event(&e));
        }
        let now = clock.now();
        // No progress before the welcome: there is no transfer yet to show.
        if welcomed.is_some() && now.saturating_sub(last_progress) >= 100_000_000 {
            last_progress = now;
            update(SendUpdate::Progress {
                delivered: sender.delivered_packets(),
                total: sender.total_packets(),
                rate: sender.rate(),
            });
        }
        if sender.is_finished() || summary.failed.is_some() || stop.is_set() {
            break;
        }
        sender.handle_timeout(now);
        let due = sender.poll_timeout().unwrap_or(now + 50_000_000);
        let wait = Duration::from_nanos(due.saturating_sub(clock.now()).min(50_000_000));
        if !wait.is_zero() {
            wait_readable(&[tcp.as_raw_fd()], wait)?;
        }
    }
    let answered = summary.refused.is_some() || summary.done.is_some();
    if welcomed.is_none() && !answered && summary.failed.is_some() {
        // The hello went unanswered: not a receiver that refused, but a peer that said
        // something else, closed, or nothing at all.
        let u = if !answer.is_empty() {
            Unanswered::Other(answer)
        } else if closed {
            Unanswered::Closed
        } else {
            Unanswered::Silent
        };
        summary.failed = Some(format!("the peer {}", u.describe()));
        summary.unanswered = Some(u);
    }
    if stop.is_set() && summary.done.is_none() {
        summary.failed.get_or_insert_with(|| "stopped".into());
    }
    summary.welcomed = welcomed.is_some();
    summary.seconds = welcomed.map_or(0.0, |w| clock.now().saturating_sub(w) as f64 / 1e9);
    summary.stats = sender.stats;
    summary.bytes = file.metadata()?.len();
    summary.delivered_bytes = sender.delivered_bytes();
    Ok(summary)
}

/// How long the sender waits for the receiver's control connection to be accepted.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

/// The control connection to `to`, within [`CONNECT_LIMIT`]; `None` when `stop` is raised
/// first (Ctrl-C ends the wait at once, not when a silent host's connect times out).
fn connect(to: SocketAddr, stop: &Stop) -> io::Result<Option<TcpStream>> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    let by = crate::net::By {
        at: std::time::Instant::now() + CONNECT_LIMIT,
        stop: Some(stop),
    };
    match crate::net::connect_by(&sock, to, by) {
        Ok(()) => Ok(Some(sock.into())),
        Err(e) if crate::net::is_stopped(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

impl SendSummary {
    /// The summary of a send from `local` that has not started yet.
    fn new(local: Option<SocketAddr>) -> Self {
        Self {
            done: None,
            refused: None,
            failed: None,
            welcomed: false,
            unanswered: None,
            seconds: 0.0,
            bytes: 0,
            held_bytes: 0,
            delivered_bytes: 0,
            stats: sender::Stats::default(),
            local,
        }
    }

    /// The summary of a send stopped before it connected.
    fn stopped() -> Self {
        Self {
            failed: Some("stopped".into()),
            ..Self::new(None)
        }
    }
}

/// [`read_available`], keeping a copy of the first [`ANSWER_MAX`] bytes read in `tap`.
fn read_available_tap(
    s: &mut TcpStream,
    framer: &mut Framer,
    tap: Option<&mut Vec<u8>>,
) -> io::Result<bool> {
    let Some(tap) = tap else {
        return read_available(s, framer);
    };
    read_available_into(s, |b| {
        let room = ANSWER_MAX.saturating_sub(tap.len());
        tap.extend_from_slice(&b[..b.len().min(room)]);
        framer.push(b);
    })
}

/// Datagrams read per `recvmmsg`.
const RECV_BATCH: usize = 32;

/// Reads up to [`RECV_BATCH`] datagrams per system call (`recvmmsg`), each with its source.
struct Datagrams {
    bufs: Vec<u8>,
    lens: [usize; RECV_BATCH],
    addrs: Vec<libc::sockaddr_storage>,
    addr_lens: [libc::socklen_t; RECV_BATCH],
}

/// Room for the largest datagram a receiver accepts (65,000 payload bytes and the header).
const DGRAM_ROOM: usize = 65_536;

impl Datagrams {
    fn new() -> Self {
        Self {
            bufs: vec![0; RECV_BATCH * DGRAM_ROOM],
            lens: [0; RECV_BATCH],
            // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
            addrs: vec![unsafe { std::mem::zeroed() }; RECV_BATCH],
            addr_lens: [0; RECV_BATCH],
        }
    }

    /// Reads what the nonblocking socket holds, up to the batch; the count read.
    fn recv(&mut self, udp: &UdpSocket) -> io::Result<usize> {
        let mut iovs: Vec<libc::iovec> = self
            .bufs
            .chunks_mut(DGRAM_ROOM)
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .zip(self.addrs.iter_mut())
            .map(|(iov, addr)| {
                // SAFETY: a zeroed mmsghdr is valid; its pointers are set right here.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
                m.msg_hdr.msg_name = addr as *mut libc::sockaddr_storage as *mut libc::c_void;
                m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
                m
            })
            .collect();
        // SAFETY: msgs holds RECV_BATCH valid headers whose buffers and addresses outlive the
        // call; MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recvmmsg(
                udp.as_raw_fd(),
                msgs.as_mut_ptr(),
                RECV_BATCH as _,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for (i, m) in msgs.iter().take(n).enumerate() {
            self.lens[i] = m.msg_len as usize;
            self.addr_lens[i] = m.msg_hdr.msg_namelen;
        }
        Ok(n)
    }

    /// The `i`th datagram of the last read, and its source address when it has one.
    fn get(&self, i: usize) -> (&[u8], Option<IpAddr>) {
        let d = &self.bufs[i * DGRAM_ROOM..i * DGRAM_ROOM + self.lens[i].min(DGRAM_ROOM)];
        let a = &self.addrs[i];
        let ip = match a.ss_family as libc::c_int {
            libc::AF_INET
                if self.addr_lens[i] as usize >= std::mem::size_of::<libc::sockaddr_in>() =>
            {
                // SAFETY: the family says this storage holds a sockaddr_in.
                let v4 = unsafe { &*(a as *const _ as *const libc::sockaddr_in) };
                Some(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()))
            }
            libc::AF_INET6
                if self.addr_lens[i] as usize >= std::mem::size_of::<libc::sockaddr_in6>() =>
            {
                // SAFETY: the family says this storage holds a sockaddr_in6.
                let v6 = unsafe { &*(a as *const _ as *const libc::sockaddr_in6) };
                Some(IpAddr::from(v6.sin6_addr.s6_addr))
            }
            _ => None,
        };
        (d, ip)
    }
}

/// Payloads that follow each other in the file, written with one `pwrite` (at most 1 MiB).
#[derive(Default)]
struct Writes {
    buf: Vec<u8>,
    offset: u64,
}

impl Writes {
    fn add(&mut self, f: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        if !self.buf.is_empty()
            && (offset != self.offset + self.buf.len() as u64
                || self.buf.len() + data.len() > 1 << 20)
        {
            self.flush(f)?;
        }
        if self.buf.is_empty() {
            self.offset = offset;
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self, f: &File) -> io::Result<()> {
        if !self.buf.is_empty() {
            f.write_all_at(&self.buf, self.offset)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// The file's BLAKE3 hash computed as it arrives: the run of packets stored from the start
/// is read back from the file (the page cache) and hashed a step at a time, so that when
/// the last packet arrives only what follows the run is left to hash. Hashing the whole
/// file at the end, and writing it all to disk then, made the sender wait: a 200 MiB
/// transfer's verdict came ~0.25 s after its last datagram (BLAKE3 and `fdatasync` of
/// 200 MiB), a tenth of the transfer at 1 Gbit/s. What is hashed is what the file holds,
/// as before. Each hashed stretch is also handed to the kernel's writeback
/// (`sync_file_range`), so that the `fdatasync` before the rename has little left to do.
struct Digest {
    hasher: blake3::Hasher,
    /// Bytes hashed: the file's first `hashed` bytes.
    hashed: u64,
    /// Bytes handed to writeback.
    flushed: u64,
    buf: Vec<u8>,
}

/// Most bytes hashed per pass of the receiving loop while datagrams arrive (~0.1 ms of
/// BLAKE3: the loop must get back to its socket, whose buffer may be small).
const DIGEST_STEP: usize = 256 * 1024;
/// Writeback is started every this many hashed bytes.
const WRITEBACK_STEP: u64 = 8 << 20;

impl Digest {
    fn new() -> Self {
        Self {
            hasher: blake3::Hasher::new(),
            hashed: 0,
            flushed: 0,
            buf: vec![0; DIGEST_STEP],
        }
    }

    /// Hashes what is stored in order past what was hashed, `budget` bytes at most.
    fn advance(&mut self, f: &File, rx: &Receiver, budget: u64) -> io::Result<()> {
        let Some(h) = rx.hello() else { return Ok(()) };
        let packet = u64::from(h.packet.max(1));
        let ready = (rx.first_missing(self.hashed / packet) * packet).min(h.size);
        let until = ready.min(self.hashed.saturating_add(budget));
        while self.hashed < until {
            let n = ((until - self.hashed) as usize).min(self.buf.len());
            f.read_exact_at(&mut self.buf[..n], self.hashed)?;
            self.hasher.update(&self.buf[..n]);
            self.hashed += n as u64;
        }
        if self.hashed >= self.flushed + WRITEBACK_STEP
            || (self.hashed == h.size && self.hashed > self.flushed)
        {
            // SAFETY: a plain system call on an open descriptor; it only starts writeback.
            unsafe {
                libc::sync_file_range(
                    f.as_raw_fd(),
                    self.flushed as libc::off64_t,
                    (self.hashed - self.flushed) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            self.flushed = self.hashed;
        }
        Ok(())
    }

    /// The hash of the whole file (`size` bytes), hashing what is left.
    fn finish(&mut self, f: &File, rx: &Receiver, size: u64) -> io::Result<[u8; HASH_LEN]> {
        self.advance(f, rx, u64::MAX)?;
        if self.hashed != size {
            return Err(io::Error::other("the file is not whole"));
        }
        Ok(*self.hasher.finalize().as_bytes())
    }
}

/// What a receiver is configured with, beyond the core's [`receiver::Config`].
#[derive(Clone, Debug)]
pub struct RecvOptions {
    pub listen: SocketAddr,
    pub dir: PathBuf,
    pub token: [u8; TOKEN_LEN],
    pub max_size: u64,
    pub max_rate: f64,
    pub grace: Duration,
    pub idle: Duration,
    /// SO_RCVBUF of the data socket (bytes); a small one makes CPU-like loss for
    /// experiments.
    pub rcvbuf: Option<usize>,
    /// Stop after one transfer.
    pub once: bool,
    /// Delete each file once its hash matched instead of keeping it (a measuring receiver).
    pub discard: bool,
    /// Connections per client (/32, /64) per minute.
    pub per_client_per_minute: f64,
}

/// What a receiver reports.
pub enum RecvUpdate<'a> {
    Listening {
        tcp: SocketAddr,
    },
    Refused {
        peer: SocketAddr,
        why: String,
    },
    Transfer {
        peer: SocketAddr,
        name: &'a str,
        size: u64,
        resumed: u64,
    },
    Window {
        signature: &'a crate::classify::signature::Signature,
    },
    Progress {
        stored: u64,
        total: u64,
    },
    Finished {
        peer: SocketAddr,
        name: &'a str,
        result: Result<Done, String>,
        drops: receiver::Drops,
        seconds: f64,
        /// The file's size (0 for a refused hello).
        size: u64,
        /// The bytes that arrived in this transfer: not those a resume found already held,
        /// which a rate must leave out.
        received: u64,
        /// The bytes held at the end, those held before included: of an unfinished
        /// transfer, what arrived, not the file's size.
        held: u64,
        /// Whether an unfinished transfer's part file and state are kept for `--resume`.
        kept: bool,
    },
}

fn part_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join(format!(".{name}.fobs-part")),
        dir.join(format!(".{name}.fobs-state")),
        dir.join(name),
    )
}

const STATE_MAGIC: &[u8; 8] = b"FOBSST01";

fn write_state(path: &Path, h: &super::wire::Hello, have: &[u8]) -> io::Result<()> {
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
fn read_state(path: &Path, h: &super::wire::Hello) -> Option<Vec<u8>> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
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

fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
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

/// Receives transfers into `opts.dir` until `stop` (or one, with `once`).
pub fn recv(
    opts: &RecvOptions,
    stop: &Stop,
    update: &mut dyn FnMut(RecvUpdate<'_>),
) -> io::Result<()> {
    use crate::serve::limits::{ClientBuckets, Prefixes, Rate};
    // Errors name the address and the socket, as `nowcast serve`'s do: "address in use"
    // alone does not say which of the two sockets on the port found it taken.
    fn named(at: SocketAddr, what: &str) -> impl FnOnce(io::Error) -> io::Error + '_ {
        move |e| io::Error::new(e.kind(), format!("{at}: {what}: {e}"))
    }
    let listener = TcpListener::bind(opts.listen).map_err(named(opts.listen, "bind tcp"))?;
    let at = listener.local_addr()?;
    let udp = UdpSocket::bind(at).map_err(named(at, "bind udp"))?;
    if let Some(n) = opts.rcvbuf {
        let s = socket2::SockRef::from(&udp);
        s.set_recv_buffer_size(n)
            .map_err(named(at, "udp: SO_RCVBUF (--rcvbuf)"))?;
    } else {
        // As large as the kernel allows: a burst that the receiver is late to read is
        // CPU loss, the thing the classifier exists to recognise, but there is no reason
        // to make more of it.
        let _ = socket2::SockRef::from(&udp).set_recv_buffer_size(16 << 20);
    }
    udp.set_nonblocking(true)?;
    listener.set_nonblocking(true)?;
    update(RecvUpdate::Listening { tcp: at });
    let clock = Clock::new();
    let prefixes = Prefixes::default();
    let mut buckets: ClientBuckets<1> = ClientBuckets::new(
        [Rate {
            per_second: opts.per_client_per_minute / 60.0,
            burst: opts.per_client_per_minute.max(1.0),
        }],
        4096,
        random_u64(),
    );
    let mut junk = vec![0u8; 65_536];
    // Connections that have not yet said their hello, oldest first, and connections being
    // closed. Both are served between transfers without blocking, so that a connection
    // that says nothing (or refuses to close) holds up no one: only a whole hello starts a
    // transfer, and only a transfer holds the receiver (hellos without the token are
    // refused at once).
    let mut waiting: std::collections::VecDeque<Waiting> = Default::default();
    let mut closing: std::collections::VecDeque<(TcpStream, u64)> = Default::default();
    while !stop.is_set() {
        // Datagrams with no transfer open are read and dropped (never answered).
        while udp.recv_from(&mut junk).is_ok() {}
        let now = clock.now();
        loop {
            let (conn, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let client = prefixes.client(peer.ip());
            if buckets.take(&client, [1.0], now).is_err() {
                update(RecvUpdate::Refused {
                    peer,
                    why: "too many connections from its network".into(),
                });
                continue;
            }
            if conn.set_nonblocking(true).is_err() {
                continue;
            }
            if waiting.len() >= MAX_WAITING {
                // The oldest has had the longest to say its hello.
                if let Some(w) = waiting.pop_front() {
                    update(RecvUpdate::Refused {
                        peer: w.peer,
                        why: "no hello before the queue of connections filled".into(),
                    });
                }
            }
            waiting.push_back(Waiting {
                conn,
                peer,
                framer: Framer::with_limit(4096),
                by: now + HELLO_NS,
            });
        }
        let mut ready = None;
        let mut i = 0;
        while i < waiting.len() {
            let w = &mut waiting[i];
            let open = read_available(&mut w.conn, &mut w.framer).unwrap_or(false);
            if w.framer.ready() {
                ready = waiting.remove(i);
                break;
            }
            if !open || now > w.by {
                let w = waiting.remove(i).expect("in range");
                update(RecvUpdate::Refused {
                    peer: w.peer,
                    why: if open {
                        "no hello within 5 s".into()
                    } else {
                        "closed before its hello".into()
                    },
                });
                continue;
            }
            i += 1;
        }
        closing.retain_mut(|(c, by)| !drained(c) && now < *by);
        if let Some(w) = ready {
            let peer = w.peer;
            // The receiver takes one transfer at a time: whoever else is connected, or
            // connects before it ends, is told so at once (its sender says "busy" instead
            // of waiting out its offer), within the same per-network rate.
            let mut busy = Busy {
                listener: &listener,
                admit: &mut |peer: SocketAddr, now| {
                    buckets
                        .take(&prefixes.client(peer.ip()), [1.0], now)
                        .is_ok()
                },
                closing: &mut closing,
                last: 0,
            };
            for w in waiting.drain(..) {
                busy.turn_away(w.conn, w.peer, now, update);
            }
            match transfer(opts, w, &udp, &clock, stop, &mut busy, update) {
                Ok(conn) => {
                    if opts.once {
                        let mut conn = conn;
                        close_gracefully(&mut conn, Duration::from_secs(2));
                        break;
                    }
                    let _ = conn.shutdown(std::net::Shutdown::Write);
                    if closing.len() >= MAX_WAITING {
                        closing.pop_front();
                    }
                    closing.push_back((conn, clock.now() + 2_000_000_000));
                }
                Err(e) => {
                    update(RecvUpdate::Refused {
                        peer,
                        why: e.to_string(),
                    });
                    if opts.once {
                        break;
                    }
                }
            }
            continue;
        }
        let mut fds = vec![listener.as_raw_fd(), udp.as_raw_fd()];
        fds.extend(waiting.iter().map(|w| w.conn.as_raw_fd()));
        fds.extend(closing.iter().map(|(c, _)| c.as_raw_fd()));
        wait_readable(&fds, Duration::from_millis(200))?;
    }
    Ok(())
}

/// Connections waiting for their hello (and being closed) at most; a newer one pushes out
/// the oldest, which has had the longest to say it. A sender's hello arrives a round trip
/// after it connects, so it is pushed out only by this many connections within that time.
const MAX_WAITING: usize = 64;
/// How long a connection has to say its hello.
const HELLO_NS: u64 = 5_000_000_000;

/// A connection that has not said its whole hello yet.
struct Waiting {
    conn: TcpStream,
    peer: SocketAddr,
    framer: Framer,
    /// When it is closed without one.
    by: u64,
}

/// Reads and discards what a closing connection sends; whether the peer has closed it (or
/// it failed), so that it can be dropped without a reset.
fn drained(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// One transfer, from the connection's hello to its verdict. Returns the connection for the
/// caller to close (after the sender has read the verdict), or the error that ended it.
/// Connections that come while a transfer holds the receiver.
struct Busy<'a> {
    listener: &'a TcpListener,
    /// Whether a connection from this peer is within its network's rate (taking one).
    admit: &'a mut dyn FnMut(SocketAddr, Nanos) -> bool,
    closing: &'a mut std::collections::VecDeque<(TcpStream, u64)>,
    /// When the listener was last looked at.
    last: Nanos,
}

impl Busy<'_> {
    /// How often a transfer looks for connections to turn away.
    const EVERY_NS: Nanos = 100_000_000;

    /// Turns away what has connected since the last look (at most every
    /// [`Busy::EVERY_NS`]), and closes what was turned away before.
    fn poll(&mut self, now: Nanos, update: &mut dyn FnMut(RecvUpdate<'_>)) {
        if now.saturating_sub(self.last) < Self::EVERY_NS {
            return;
        }
        self.last = now;
        self.closing.retain_mut(|(c, by)| !drained(c) && now < *by);
        loop {
            match self.listener.accept() {
                Ok((conn, peer)) => {
                    if (self.admit)(peer, now) && conn.set_nonblocking(true).is_ok() {
                        self.turn_away(conn, peer, now, update);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// Tells `conn` the receiver is busy (a refusal welcome: 24 bytes, whatever it sent, so
    /// nothing is amplified and the token is not needed to learn it), then closes it as a
    /// finished transfer's connection is closed (what it sent read first, so that the
    /// refusal is not lost to a reset).
    fn turn_away(
        &mut self,
        mut conn: TcpStream,
        peer: SocketAddr,
        now: Nanos,
        update: &mut dyn FnMut(RecvUpdate<'_>),
    ) {
        let mut refusal = Vec::new();
        Control::Welcome(Welcome {
            status: Refusal::Busy,
            session: 0,
            udp_port: 0,
            max_rate: 0,
            have: Vec::new(),
        })
        .encode(&mut refusal);
        let _ = read_available_into(&mut conn, |_| {});
        let _ = conn.write(&refusal);
        let _ = conn.shutdown(std::net::Shutdown::Write);
        if self.closing.len() >= MAX_WAITING {
            self.closing.pop_front();
        }
        self.closing.push_back((conn, now + 2_000_000_000));
        update(RecvUpdate::Refused {
            peer,
            why: "busy with another transfer".into(),
        });
    }
}

fn transfer(
    opts: &RecvOptions,
    w: Waiting,
    udp: &UdpSocket,
    clock: &Clock,
    stop: &Stop,
    busy: &mut Busy<'_>,
    update: &mut dyn FnMut(RecvUpdate<'_>),
) -> io::Result<TcpStream> {
    let Waiting {
        mut conn,
        peer,
        mut framer,
        by: hello_by,
    } = w;
    conn.set_nodelay(true)?;
    let start = clock.now();
    let mut rx = Receiver::new(
        receiver::Config {
            token: opts.token,
            max_size: opts.max_size,
            max_rate: opts.max_rate,
            grace_ns: opts.grace.as_nanos() as u64,
            idle_ns: opts.idle.as_nanos() as u64,
            session: random_u64(),
            udp_port: udp.local_addr()?.port(),
        },
        start,
    );
    // The sender says only small things: a hello (≈ 330 bytes) and window ends; the framer
    // holds the hello the wait read.
    let mut part: Option<File> = None;
    let mut paths: Option<(PathBuf, PathBuf, PathBuf)> = None;
    let mut out = Vec::new();
    let mut dgrams = Datagrams::new();
    let mut writes = Writes::default();
    let mut digest = Digest::new();
    let peer_ip: IpAddr = peer.ip().to_canonical();
    let mut result: Option<Result<Done, String>> = None;
    let mut last_save = start;
    let mut last_progress = start;
    let mut name = String::new();
    let mut size = 0;
    let mut held_at_open = 0;
    loop {
        let now = clock.now();
        // Data first: everything the socket holds, so that a window's end read below
        // finds its datagrams already counted.
        for _ in 0..4096 / RECV_BATCH {
            let got = match dgrams.recv(udp) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error from an earlier exchange: nothing to do with this socket.
                Err(_) => break,
            };
            for i in 0..got {
                let (d, from) = dgrams.get(i);
                let from_peer = from.is_some_and(|ip| ip.to_canonical() == peer_ip);
                if let Some(s) = rx.handle_datagram(clock.now(), from_peer, d) {
                    if let Some(f) = &part {
                        writes.add(f, s.offset, &d[s.start..s.end])?;
                    }
                }
            }
            if got < RECV_BATCH {
                break;
            }
        }
        // Everything stored is on its way to the file before a window's end is answered,
        // the hash is computed or the resume state is saved.
        if let Some(f) = &part {
            writes.flush(f)?;
            digest.advance(f, &rx, DIGEST_STEP as u64)?;
        }
        let open = read_available(&mut conn, &mut framer).unwrap_or(false);
        loop {
            match framer.next_message() {
                Ok(Some(m)) => rx.handle_control(clock.now(), m),
                Ok(None) => break,
                Err(_) => {
                    rx.drops.control += 1;
                    result.get_or_insert(Err("malformed control message".into()));
                    break;
                }
            }
        }
        if rx.hello().is_none() && now > hello_by {
            result.get_or_insert(Err("no hello within 5 s".into()));
        }
        rx.handle_timeout(clock.now());
        while let Some(e) = rx.poll_event() {
            match e {
                receiver::Event::Open { hello } => {
                    let (p, s, f) = part_paths(&opts.dir, &hello.name);
                    name = hello.name.clone();
                    size = hello.size;
                    if f.symlink_metadata().is_ok() {
                        rx.refuse(Refusal::Exists);
                        continue;
                    }
                    let have = if hello.resume {
                        read_state(&s, &hello)
                    } else {
                        None
                    };
                    let file = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(have.is_none())
                        .mode(0o600)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&p);
                    match file.and_then(|f| f.set_len(hello.size).map(|_| f)) {
                        Ok(f) => {
                            part = Some(f);
                            paths = Some((p, s, f_path(&opts.dir, &hello.name)));
                            let have = have.unwrap_or_default();
                            rx.opened(clock.now(), &have);
                            held_at_open = rx.stored_bytes();
                            update(RecvUpdate::Transfer {
                                peer,
                                name: &name,
                                size,
                                resumed: rx.stored_packets(),
                            });
                        }
                        Err(_) => rx.refuse(Refusal::Storage),
                    }
                }
                receiver::Event::Window { signature, .. } => update(RecvUpdate::Window {
                    signature: &signature,
                }),
                receiver::Event::Complete => {
                    let (p, s, f) = paths.clone().expect("open");
                    let expected = rx.hello().map(|h| h.hash).unwrap_or_default();
                    let verdict = (|| -> io::Result<Done> {
                        let file = part.as_ref().expect("open");
                        let hash = digest.finish(file, &rx, size)?;
                        file.sync_data()?;
                        if hash != expected {
                            let _ = std::fs::remove_file(&p);
                            let _ = std::fs::remove_file(&s);
                            return Ok(Done::HashMismatch);
                        }
                        if opts.discard {
                            std::fs::remove_file(&p)?;
                        } else {
                            rename_noreplace(&p, &f)?;
                        }
                        let _ = std::fs::remove_file(&s);
                        Ok(Done::Stored)
                    })();
                    rx.verified(verdict.unwrap_or(Done::StorageFailed));
                }
                receiver::Event::Finished(d) => {
                    result.get_or_insert(Ok(d));
                }
                receiver::Event::Failed(why) => {
                    result.get_or_insert(Err(why));
                }
            }
        }
        out.clear();
        while rx.poll_transmit(&mut out) {}
        if !out.is_empty() {
            if let Err(e) = write_all_nb(&mut conn, &out, Duration::from_secs(5)) {
                // A sender that died resets the connection (the write fails at once); one that
                // is alive but does not read stalls it until the limit.
                result.get_or_insert(Err(if e.kind() == io::ErrorKind::TimedOut {
                    "the sender stopped reading".into()
                } else {
                    "the sender closed the control connection".into()
                }));
            }
        }
        if stop.is_set() && result.is_none() {
            rx.abandon();
            out.clear();
            while rx.poll_transmit(&mut out) {}
            let _ = write_all_nb(&mut conn, &out, Duration::from_secs(1));
            result = Some(Ok(Done::Abandoned));
        }
        if !open {
            result.get_or_insert(Err("the sender closed the control connection".into()));
        }
        let now = clock.now();
        busy.poll(now, update);
        if now.saturating_sub(last_progress) >= 200_000_000 && rx.total_packets() > 0 {
            last_progress = now;
            update(RecvUpdate::Progress {
                stored: rx.stored_packets(),
                total: rx.total_packets(),
            });
        }
        // What a later `--resume` can continue: not a stored file, not one whose hash
        // failed (deleted), and nothing under `--discard`, which keeps no file.
        let resumable = !opts.discard
            && !matches!(
                result,
                Some(Ok(Done::Stored)) | Some(Ok(Done::HashMismatch))
            );
        if let (Some(h), Some((_, s, _))) = (rx.hello(), &paths) {
            if resumable && (result.is_some() || now.saturating_sub(last_save) >= 2_000_000_000) {
                last_save = now;
                let _ = write_state(s, h, &rx.have_bitmap());
            }
        }
        if result.is_some() {
            break;
        }
        let due = rx
            .poll_timeout()
            .unwrap_or(now + 50_000_000)
            .min(now + 50_000_000);
        let wait = Duration::from_nanos(due.saturating_sub(clock.now()));
        if !wait.is_zero() {
            wait_readable(&[conn.as_raw_fd(), udp.as_raw_fd()], wait)?;
        }
    }
    let result = result.expect("set");
    let stored = rx.stored_bytes();
    let kept = paths.is_some()
        && !opts.discard
        && !matches!(result, Ok(Done::Stored) | Ok(Done::HashMismatch));
    if opts.discard && !matches!(result, Ok(Done::Stored)) {
        // A measuring receiver keeps nothing: what an unfinished transfer held goes too, so
        // that its disk holds at most one transfer's file at a time.
        if let Some((p, s, _)) = &paths {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_file(s);
        }
    }
    let seconds = clock.now().saturating_sub(start) as f64 / 1e9;
    update(RecvUpdate::Finished {
        peer,
        name: &name,
        result,
        drops: rx.drops,
        seconds,
        size,
        received: stored.saturating_sub(held_at_open),
        held: stored,
        kept,
    });
    Ok(conn)
}

fn f_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
