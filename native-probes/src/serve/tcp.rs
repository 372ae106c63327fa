//! The TCP edge of `nowcast serve`: accepts sessions within the caps of the session table,
//! and answers each on its own thread, charging its client's byte budget and asking the
//! session's watchdog before every read and write.
//!
//! A session the server ends for a limit is aborted (SO_LINGER 0: a reset, RFC 9293 §3.10.5
//! ABORT), so that the kernel frees its buffers at once: a plain close would keep a full send
//! buffer queued for a client that does not read, for as long as the client keeps its
//! window shut. Where the client waits for a two-byte reply, the reason is written first.

use super::limits::{Client, Full};
use super::metrics::Limit;
use super::watchdog::{Close, Watchdog};
use super::{Shared, SLICE};
use crate::net::is_retry;
use crate::wire::{self, Hello, Refusal, Request, Status, Welcome};
use socket2::SockRef;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Read size while draining a bulk probe, and write size of a download: large calls keep
/// the server cheap per byte.
const CHUNK: usize = 256 * 1024;
/// Read-ahead of a session: a ping (opcode and byte) or a bulk header arrives in one
/// segment and is taken in one system call instead of one per field. Reads of a bulk
/// probe's body are larger and bypass it.
const READ_AHEAD: usize = 64;
/// When a busy client should try again.
const BUSY_RETRY_MS: u32 = 5_000;

/// Accepts sessions until the server stops.
pub(super) fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stop.is_set() {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors or memory: say so, pause, and keep serving.
                crate::warn_line!("nowcast serve: accept: {e}");
                if shared.stop.wait_timeout(SLICE) {
                    return;
                }
                continue;
            }
        };
        let client = shared.cfg.prefixes.client(peer.ip());
        let admitted = lock(&shared.sessions).open(client);
        if let Err(full) = admitted {
            let (status, limit) = match full {
                Full::Total => (Status::Busy, Limit::SessionsTotal),
                Full::Client => (Status::ClientBusy, Limit::SessionsPerClient),
            };
            shared.counters.reject(limit);
            refuse(&stream, &Welcome::refusal(status, BUSY_RETRY_MS).encode());
            continue;
        }
        shared.counters.sessions.fetch_add(1, Ordering::Relaxed);
        shared.counters.open.fetch_add(1, Ordering::AcqRel);
        let place = Place {
            client,
            shared: shared.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("session".into())
            .spawn(move || {
                let shared = place.shared.clone();
                let mut session = Session::new(&stream, client, &shared);
                let end = session.run().err().unwrap_or(End::Done);
                session.finish(end);
                drop(place);
            });
        if let Err(e) = spawned {
            crate::warn_line!("nowcast serve: cannot start a session thread for {peer}: {e}");
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes `reason` without waiting, then closes: the client reads it before the end of the
/// stream. What it sent meanwhile (a hello) is read and dropped, so that the close is a
/// FIN rather than a reset that could overtake the reason.
/// What a two-byte ping is charged against the client's byte budget: what it costs the
/// server. Each takes a read, a write and a segment each way; measured on loopback, a
/// million pipelined pings took 4.8 s of the server's CPU, where 2 MB of upload took under
/// 0.01 s: a ping costs what about a kilobyte of payload does. Charged at its four bytes, a
/// client that pipelines pings (a real probe waits for each echo, and sends three a
/// session) kept a core busy within the budget.
const PING_COST: u64 = 1024;

fn refuse(s: &TcpStream, reason: &[u8]) {
    let _ = s.set_nonblocking(true);
    let _ = (&*s).write(reason);
    let _ = s.shutdown(Shutdown::Write);
    let _ = (&*s).read(&mut [0u8; READ_AHEAD]);
}

/// A session's place under the caps, given back when it ends, however it ends.
struct Place {
    client: Client,
    shared: Arc<Shared>,
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.shared.sessions).close(self.client);
        self.shared.counters.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How a session ended.
enum End {
    /// The client quit or closed.
    Done,
    /// Refused for `Limit`, the reason already written: a graceful close.
    Refused(Limit),
    /// The watchdog's limit.
    Closed(Close),
    /// A message that is not this protocol: an abort.
    Broken(Limit),
    Stopping,
    /// The connection failed (a reset, an error).
    Failed,
}

/// One session: the stream, its read-ahead and its watchdog.
struct Session<'a> {
    s: &'a TcpStream,
    r: BufReader<&'a TcpStream>,
    wd: Watchdog,
    shared: &'a Shared,
    client: Client,
    welcomed: bool,
    /// Payload is being sent: a refusal now would be read as payload.
    in_payload: bool,
    /// The transfer buffer, made at the first transfer.
    buf: Vec<u8>,
    /// The session has had a download: a ping of [`wire::START_QUERY`] now asks where the
    /// sender is in its start.
    downloaded: bool,
}

impl<'a> Session<'a> {
    fn new(s: &'a TcpStream, client: Client, shared: &'a Shared) -> Self {
        Self {
            s,
            r: BufReader::with_capacity(READ_AHEAD, s),
            wd: Watchdog::new(shared.cfg.timing, shared.clock.now()),
            shared,
            client,
            welcomed: false,
            in_payload: false,
            buf: Vec::new(),
            downloaded: false,
        }
    }

    fn run(&mut self) -> Result<(), End> {
        // Replies leave at once: the client's Nagle setting is what the probe measures.
        let setup = || -> io::Result<()> {
            self.s.set_nodelay(true)?;
            crate::net::pace(self.s.as_raw_fd());
            self.s.set_read_timeout(Some(SLICE))?;
            self.s.set_write_timeout(Some(SLICE))
        };
        setup().map_err(|_| End::Failed)?;
        let mut hello = [0u8; Hello::LEN];
        if !self.read_full(&mut hello)? {
            return Ok(());
        }
        let Ok(hello) = Hello::decode(&hello) else {
            self.write_all(&Welcome::refusal(Status::BadHello, 0).encode())?;
            return Err(End::Refused(Limit::BadHello));
        };
        if let Err(wait) = self.charge((Hello::LEN + Welcome::LEN) as u64) {
            let retry = u32::try_from(wait.div_ceil(1_000_000)).unwrap_or(u32::MAX);
            self.write_all(&Welcome::refusal(Status::OverBudget, retry).encode())?;
            return Err(End::Refused(Limit::ByteBudget));
        }
        let welcome = self.set_buffers(&hello);
        self.write_all(&welcome.encode())?;
        self.welcomed = true;
        self.wd.welcomed();
        loop {
            let mut msg = [0u8; wire::BULK_HEADER_LEN];
            if !self.read_full(&mut msg[..1])? {
                return Ok(());
            }
            let len = Request::len(msg[0]).map_err(|_| End::Broken(Limit::BadRequest))?;
            if !self.read_full(&mut msg[1..len])? {
                return Err(End::Failed);
            }
            match Request::decode(&msg[..len]).map_err(|_| End::Broken(Limit::BadRequest))? {
                Request::Ping(wire::START_QUERY) if self.downloaded => {
                    self.charge_or_refuse(PING_COST)?;
                    let start = crate::net::sender_start(self.s.as_raw_fd());
                    self.write_all(&[wire::OP_PING, wire::start_byte(start)])?;
                }
                Request::Ping(x) => {
                    self.charge_or_refuse(PING_COST)?;
                    self.write_all(&[wire::OP_PING, x])?;
                }
                Request::Up(len) | Request::Down(len) if len > self.shared.cfg.max_payload => {
                    return Err(self.refuse(Refusal::PayloadCap, Limit::PayloadCap));
                }
                Request::Up(len) => {
                    self.charge_or_refuse(len)?;
                    self.drain(len)?;
                    self.write_all(&wire::ACK)?;
                    self.bulk(len);
                }
                Request::Down(len) => {
                    self.charge_or_refuse(len)?;
                    self.write_all(&wire::ACK)?;
                    self.send(len)?;
                    self.bulk(len);
                    self.downloaded = true;
                }
                Request::Quit => return Ok(()),
            }
        }
    }

    fn bulk(&self, len: u64) {
        let c = &self.shared.counters;
        c.bulk_bytes.fetch_add(len, Ordering::Relaxed);
    }

    /// Takes `bytes` from the client's budget; `Err` is how long until they would fit.
    fn charge(&self, bytes: u64) -> Result<(), u64> {
        let now = self.shared.clock.now();
        lock(&self.shared.budgets).take(&self.client, [bytes as f64], now)
    }

    fn charge_or_refuse(&mut self, bytes: u64) -> Result<(), End> {
        match self.charge(bytes) {
            Ok(()) => Ok(()),
            Err(_) => Err(self.refuse(Refusal::Budget, Limit::ByteBudget)),
        }
    }

    /// Writes `why` in place of a reply; the session then ends.
    fn refuse(&mut self, why: Refusal, limit: Limit) -> End {
        match self.write_all(&why.code()) {
            Ok(()) => End::Refused(limit),
            Err(end) => end,
        }
    }

    /// Sets the socket buffers the hello asks for, within the cap; the welcome to send.
    fn set_buffers(&self, hello: &Hello) -> Welcome {
        let cfg = &self.shared.cfg;
        // Linux books (and reports) twice the size asked for.
        let most = if cfg!(target_os = "linux") {
            cfg.max_buffer / 2
        } else {
            cfg.max_buffer
        };
        let sock = SockRef::from(self.s);
        let ask = |asked: u32| {
            if asked > most {
                self.shared
                    .counters
                    .buffers_capped
                    .fetch_add(1, Ordering::Relaxed);
            }
            asked.min(most) as usize
        };
        // A buffer the kernel refuses to set stays at its default: no reason to end the
        // session, and the welcome reports what is in force.
        if hello.rcvbuf > 0 {
            let _ = sock.set_recv_buffer_size(ask(hello.rcvbuf));
        }
        if hello.sndbuf > 0 {
            let _ = sock.set_send_buffer_size(ask(hello.sndbuf));
        }
        let granted =
            |n: io::Result<usize>| n.map(|n| u32::try_from(n).unwrap_or(u32::MAX)).unwrap_or(0);
        Welcome {
            status: Status::Ok,
            max_payload: cfg.max_payload,
            rcvbuf: granted(sock.recv_buffer_size()),
            sndbuf: granted(sock.send_buffer_size()),
            retry_after_ms: 0,
        }
    }

    /// Whether the session may go on: the server is not stopping and no limit is reached.
    fn check(&mut self) -> Result<(), End> {
        if self.shared.stop.is_set() {
            return Err(End::Stopping);
        }
        self.wd.check(self.shared.clock.now()).map_err(End::Closed)
    }

    fn moved(&mut self, bytes: usize, out: bool) {
        let c = &self.shared.counters;
        let counter = if out { &c.tcp_out } else { &c.tcp_in };
        counter.fetch_add(bytes as u64, Ordering::Relaxed);
        self.wd.moved(bytes as u64, self.shared.clock.now());
    }

    /// Reads what has arrived (at least a byte, or 0 at the end of the stream).
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, End> {
        loop {
            self.check()?;
            match self.r.read(buf) {
                Ok(n) => {
                    self.moved(n, false);
                    return Ok(n);
                }
                Err(e) if is_retry(&e) => {}
                Err(_) => return Err(End::Failed),
            }
        }
    }

    /// Reads exactly `buf.len()` bytes; `Ok(false)` when the stream ended before the first.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<bool, End> {
        let mut n = 0;
        while n < buf.len() {
            match self.read_some(&mut buf[n..])? {
                0 if n == 0 => return Ok(false),
                0 => return Err(End::Failed),
                k => n += k,
            }
        }
        Ok(true)
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), End> {
        while !bytes.is_empty() {
            self.check()?;
            match (&*self.s).write(bytes) {
                Ok(0) => return Err(End::Failed),
                Ok(n) => {
                    self.moved(n, true);
                    bytes = &bytes[n..];
                }
                Err(e) if is_retry(&e) => {}
                Err(_) => return Err(End::Failed),
            }
        }
        Ok(())
    }

    fn transfer_buffer(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(CHUNK, 0);
        buf
    }

    /// Reads and discards `len` bytes.
    fn drain(&mut self, len: u64) -> Result<(), End> {
        let mut buf = self.transfer_buffer();
        let mut left = len;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            match self.read_some(&mut buf[..want]) {
                Ok(0) => break Err(End::Failed),
                Ok(k) => left -= k as u64,
                Err(end) => break Err(end),
            }
        };
        self.buf = buf;
        result
    }

    /// Sends `len` bytes of payload.
    fn send(&mut self, len: u64) -> Result<(), End> {
        let buf = self.transfer_buffer();
        self.in_payload = true;
        let mut left = len;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            match self.write_all(&buf[..n]) {
                Ok(()) => left -= n as u64,
                Err(end) => break Err(end),
            }
        };
        self.in_payload = result.is_err();
        self.buf = buf;
        result
    }

    /// Ends the session: counts why, tells the client when it waits for a reply, and
    /// closes (aborting when the server ended it for a limit).
    fn finish(&mut self, end: End) {
        let c = &self.shared.counters;
        let (code, abort) = match end {
            End::Done | End::Failed => (None, matches!(end, End::Failed)),
            End::Refused(limit) => {
                c.reject(limit);
                (None, false)
            }
            End::Broken(limit) => {
                c.reject(limit);
                (None, true)
            }
            End::Stopping => (Some(Refusal::Stopping), false),
            End::Closed(close) => {
                let (limit, code) = match close {
                    Close::Handshake => (Limit::HandshakeTimeout, None),
                    Close::Lifetime => (Limit::Lifetime, Some(Refusal::Lifetime)),
                    Close::Slow => (Limit::SlowClient, Some(Refusal::Slow)),
                    Close::Idle => (Limit::IdleTimeout, Some(Refusal::Idle)),
                };
                c.reject(limit);
                (code, true)
            }
        };
        if let Some(code) = code.filter(|_| self.welcomed && !self.in_payload) {
            let _ = self.s.set_nonblocking(true);
            let _ = (&*self.s).write(&code.code());
        }
        if abort {
            let _ = SockRef::from(self.s).set_linger(Some(Duration::ZERO));
        } else {
            let _ = self.s.shutdown(Shutdown::Write);
        }
    }
}
