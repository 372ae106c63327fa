//! The sending side: paced batches of datagrams (GSO where the kernel has it), the file
//! read ahead, and the control connection's loop around the [`Sender`] core.

use super::{read_available, read_available_into, wait_readable, write_all_nb};
use crate::clock::Clock;
use crate::fobs::sender::{self, Sender, Transmit};
use crate::fobs::wire::{Control, Done, Framer, Refusal, DATA_HEADER};
use crate::format::{quote_answer, ANSWER_MAX};
use crate::stop::Stop;
use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;

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

/// A socket that failed while the transfer ran.
enum Sending {
    Data(io::Error),
    Control(io::Error),
}

impl std::fmt::Display for Sending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // A connected UDP socket hears of the receiver's closed port (ICMP) as this.
            Sending::Data(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                write!(f, "the receiver's data port is closed ({e})")
            }
            Sending::Data(e) => write!(f, "sending datagrams failed: {e}"),
            Sending::Control(e) => write!(f, "the control connection failed: {e}"),
        }
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
    let mut framer = Framer::for_packets(sender.total_packets());
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
        // A socket that fails once the transfer runs (the receiver gone: its data port
        // refuses datagrams, its control connection resets) ends the transfer with a summary
        // and what is left to resume, as a control connection that closes does; only the
        // file itself failing is an error without one.
        let mut sent: Result<(), Sending> = Ok(());
        while budget > 0 && sent.is_ok() {
            let Some(t) = sender.poll_transmit(now, &mut buf) else {
                break;
            };
            budget -= 1;
            sent = match t {
                Transmit::Control => {
                    // A window's end must not overtake its datagrams.
                    batch.flush(&udp).map_err(Sending::Data).and_then(|()| {
                        write_all_nb(&mut tcp, &buf, Duration::from_secs(10))
                            .map_err(Sending::Control)
                    })
                }
                Transmit::Data { offset, len } => {
                    match batch.push(&udp, &buf[..DATA_HEADER], len) {
                        Ok(at) => reader.read_at(file, offset, at).map(|()| Ok(()))?,
                        Err(e) => Err(Sending::Data(e)),
                    }
                }
            };
        }
        if let Err(e) = sent.and_then(|()| batch.flush(&udp).map_err(Sending::Data)) {
            summary.failed.get_or_insert_with(|| e.to_string());
        }
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
                            if let Err(e) = udp.connect(SocketAddr::new(to.ip(), w.udp_port)) {
                                summary.failed = Some(format!(
                                    "the receiver named data port {}, which cannot be used ({e})",
                                    w.udp_port
                                ));
                                break;
                            }
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
