//! `nowcast serve`: the Echo Server of JavaNws §2.1.1 for the TCP probe, and a UDP echo.
//!
//! One thread accepts TCP sessions and one thread per session answers them (the connection
//! caps bound the threads); one thread echoes UDP. Limits in the spirit of echo-node's:
//! a payload cap per bulk probe and per datagram, a cap on sessions in total and per client
//! address, and an idle timeout that closes a session whose client sends nothing. Every
//! blocking call wakes at least every [`SLICE`] to notice a stop; reads return as soon as
//! data arrives, so the slice adds no delay to an echo.

use crate::stop::Stop;
use crate::wire::{self, Hello, Status, UdpProbe, Welcome};
use socket2::SockRef;
use std::collections::HashMap;
use std::io::{self, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often blocked threads look at the stop flag and the idle clock.
const SLICE: Duration = Duration::from_millis(200);
/// Read size while draining a bulk probe: large reads keep the sink cheap per byte.
const DRAIN_CHUNK: usize = 256 * 1024;
/// Read-ahead of a session: a ping (opcode and byte) or a bulk header arrives in one
/// segment and is taken in one system call instead of one per field. Reads of a bulk
/// probe's body are larger and bypass it.
const READ_AHEAD: usize = 64;

/// The server's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: IpAddr,
    /// 0 picks a free port.
    pub tcp_port: u16,
    pub udp_port: u16,
    /// Largest bulk probe accepted, in bytes.
    pub max_payload: u64,
    /// Largest datagram echoed, in bytes.
    pub max_datagram: usize,
    pub max_sessions: usize,
    pub max_sessions_per_client: usize,
    /// A session whose client sends nothing for this long is closed.
    pub idle: Duration,
    /// Largest socket buffer a client may ask for, in bytes.
    pub max_buffer: u32,
}

/// What the server did, reported when it stops.
#[derive(Debug, Default)]
pub struct Counters {
    pub sessions: AtomicU64,
    pub refused_busy: AtomicU64,
    pub bulk_bytes: AtomicU64,
    pub datagrams: AtomicU64,
    pub datagrams_dropped: AtomicU64,
}

/// A bound server, not yet answering.
pub struct Server {
    cfg: Config,
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Server {
    /// Binds both sockets; the error names the address and protocol.
    pub fn bind(cfg: Config) -> Result<Self, String> {
        let tcp_at = SocketAddr::new(cfg.bind, cfg.tcp_port);
        let udp_at = SocketAddr::new(cfg.bind, cfg.udp_port);
        let tcp = TcpListener::bind(tcp_at).map_err(|e| format!("{tcp_at}: bind tcp: {e}"))?;
        let udp = UdpSocket::bind(udp_at).map_err(|e| format!("{udp_at}: bind udp: {e}"))?;
        Ok(Self { cfg, tcp, udp })
    }

    pub fn tcp_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    pub fn udp_addr(&self) -> io::Result<SocketAddr> {
        self.udp.local_addr()
    }

    /// Answers until `stop` is raised, then closes every session and returns the counters.
    pub fn run(self, stop: Stop) -> io::Result<Arc<Counters>> {
        let counters = Arc::new(Counters::default());
        let active = Arc::new(AtomicUsize::new(0));
        let per_client = Arc::new(Mutex::new(HashMap::<IpAddr, usize>::new()));
        self.udp.set_read_timeout(Some(SLICE))?;
        let udp = {
            let (udp, cfg, stop, counters) =
                (self.udp, self.cfg.clone(), stop.clone(), counters.clone());
            std::thread::Builder::new()
                .name("udp-echo".into())
                .spawn(move || udp_echo(&udp, &cfg, &stop, &counters))?
        };
        let listener = self.tcp.try_clone()?;
        let acceptor = {
            let (cfg, stop, counters, active) = (
                self.cfg.clone(),
                stop.clone(),
                counters.clone(),
                active.clone(),
            );
            std::thread::Builder::new()
                .name("tcp-accept".into())
                .spawn(move || {
                    accept_loop(&listener, &cfg, &stop, &counters, &active, &per_client)
                })?
        };
        stop.wait();
        // Linux wakes a thread blocked in accept() when the listening socket is shut down.
        let _ = SockRef::from(&self.tcp).shutdown(Shutdown::Both);
        let _ = acceptor.join();
        let _ = udp.join();
        // Sessions notice the flag within a slice; wait for them, boundedly.
        let until = Instant::now() + SLICE * 5;
        while active.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(counters)
    }
}

/// Releases a session's place under the caps when it ends, however it ends.
struct Place {
    ip: IpAddr,
    active: Arc<AtomicUsize>,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.active.fetch_sub(1, Ordering::AcqRel);
        let mut map = self.per_client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    cfg: &Config,
    stop: &Stop,
    counters: &Arc<Counters>,
    active: &Arc<AtomicUsize>,
    per_client: &Arc<Mutex<HashMap<IpAddr, usize>>>,
) {
    loop {
        let accepted = listener.accept();
        if stop.is_set() {
            return;
        }
        let (mut stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors or memory: say so, pause, and keep serving.
                eprintln!("nowcast serve: accept: {e}");
                if stop.wait_timeout(SLICE) {
                    return;
                }
                continue;
            }
        };
        let admitted = {
            let mut map = per_client.lock().unwrap_or_else(|p| p.into_inner());
            let mine = map.get(&peer.ip()).copied().unwrap_or(0);
            if active.load(Ordering::Acquire) >= cfg.max_sessions
                || mine >= cfg.max_sessions_per_client
            {
                false
            } else {
                *map.entry(peer.ip()).or_insert(0) += 1;
                active.fetch_add(1, Ordering::AcqRel);
                true
            }
        };
        if !admitted {
            counters.refused_busy.fetch_add(1, Ordering::Relaxed);
            let busy = Welcome {
                status: Status::Busy,
                max_payload: cfg.max_payload,
                rcvbuf: 0,
                sndbuf: 0,
            };
            let _ = stream.set_write_timeout(Some(SLICE));
            let _ = stream.write_all(&busy.encode());
            continue;
        }
        counters.sessions.fetch_add(1, Ordering::Relaxed);
        let place = Place {
            ip: peer.ip(),
            active: active.clone(),
            per_client: per_client.clone(),
        };
        let (cfg, stop, counters) = (cfg.clone(), stop.clone(), counters.clone());
        let spawned = std::thread::Builder::new()
            .name("session".into())
            .spawn(move || {
                let _place = place;
                // A session ends on the client's quit, its close, an idle timeout, a protocol
                // error or a stop; none of them concerns the other sessions.
                let _ = session(stream, &cfg, &stop, &counters);
            });
        if let Err(e) = spawned {
            eprintln!("nowcast serve: cannot start a session thread for {peer}: {e}");
        }
    }
}

/// Reads exactly `buf.len()` bytes, waiting at most `idle` between bytes. `Ok(false)` when
/// the client closed before sending anything.
fn read_full(s: &mut impl Read, buf: &mut [u8], cfg: &Config, stop: &Stop) -> io::Result<bool> {
    let mut n = 0;
    let mut last = Instant::now();
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) if n == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => {
                n += k;
                last = Instant::now();
            }
            Err(e) => idle_or_fail(e, last, cfg, stop)?,
        }
    }
    Ok(true)
}

/// The idle rule after a failed read: a socket timeout or a signal is fine until the client
/// has been silent for the idle limit (or the server is stopping); anything else is an error.
fn idle_or_fail(e: io::Error, last: Instant, cfg: &Config, stop: &Stop) -> io::Result<()> {
    if crate::net::is_retry(&e) {
        if stop.is_set() || last.elapsed() >= cfg.idle {
            return Err(io::ErrorKind::TimedOut.into());
        }
        return Ok(());
    }
    Err(e)
}

/// Reads and discards `len` bytes under the same idle rule.
fn drain(s: &mut impl Read, len: u64, buf: &mut [u8], cfg: &Config, stop: &Stop) -> io::Result<()> {
    let mut left = len;
    let mut last = Instant::now();
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match s.read(&mut buf[..want]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => {
                left -= k as u64;
                last = Instant::now();
            }
            Err(e) => idle_or_fail(e, last, cfg, stop)?,
        }
    }
    Ok(())
}

/// Writes `len` bytes from `buf` over and over. The write timeout (the idle time) ends a
/// transfer to a client that stops reading; a stop ends it between writes.
fn send(w: &mut impl Write, len: u64, buf: &[u8], stop: &Stop) -> io::Result<()> {
    let mut left = len;
    while left > 0 {
        if stop.is_set() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        w.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

fn clamp_buffer(asked: u32, max: u32) -> usize {
    asked.min(max) as usize
}

fn session(s: TcpStream, cfg: &Config, stop: &Stop, counters: &Counters) -> io::Result<()> {
    // Replies leave at once: the client's Nagle setting is what the probe measures.
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(SLICE))?;
    s.set_write_timeout(Some(cfg.idle))?;
    let mut r = BufReader::with_capacity(READ_AHEAD, &s);
    let mut w = &s;
    let mut hello = [0u8; Hello::LEN];
    if !read_full(&mut r, &mut hello, cfg, stop)? {
        return Ok(());
    }
    let hello = Hello::decode(&hello).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let sock = SockRef::from(&s);
    if hello.rcvbuf > 0 {
        sock.set_recv_buffer_size(clamp_buffer(hello.rcvbuf, cfg.max_buffer))?;
    }
    if hello.sndbuf > 0 {
        sock.set_send_buffer_size(clamp_buffer(hello.sndbuf, cfg.max_buffer))?;
    }
    let granted =
        |n: io::Result<usize>| n.map(|n| u32::try_from(n).unwrap_or(u32::MAX)).unwrap_or(0);
    let welcome = Welcome {
        status: Status::Ok,
        max_payload: cfg.max_payload,
        rcvbuf: granted(sock.recv_buffer_size()),
        sndbuf: granted(sock.send_buffer_size()),
    };
    w.write_all(&welcome.encode())?;
    let mut buf = vec![0u8; DRAIN_CHUNK];
    loop {
        let mut op = [0u8; 1];
        if !read_full(&mut r, &mut op, cfg, stop)? {
            return Ok(());
        }
        match op[0] {
            wire::OP_PING => {
                let mut x = [0u8; 1];
                read_full(&mut r, &mut x, cfg, stop)?;
                w.write_all(&[wire::OP_PING, x[0]])?;
            }
            op @ (wire::OP_BULK | wire::OP_BULK_DOWN) => {
                let mut len = [0u8; 8];
                read_full(&mut r, &mut len, cfg, stop)?;
                let len = wire::bulk_len(&len);
                if len > cfg.max_payload {
                    w.write_all(&wire::REFUSED)?;
                    return Ok(());
                }
                if op == wire::OP_BULK {
                    // Up: the payload, then the acknowledgement once all of it is in.
                    drain(&mut r, len, &mut buf, cfg, stop)?;
                    w.write_all(&wire::ACK)?;
                } else {
                    // Down: the acknowledgement, then the payload.
                    w.write_all(&wire::ACK)?;
                    send(&mut w, len, &buf, stop)?;
                }
                counters.bulk_bytes.fetch_add(len, Ordering::Relaxed);
            }
            wire::OP_QUIT => return Ok(()),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    wire::WireError::Unknown(other),
                ))
            }
        }
    }
}

fn udp_echo(udp: &UdpSocket, cfg: &Config, stop: &Stop, counters: &Counters) {
    // One byte more than the cap, so that an oversized datagram is seen as such.
    let mut buf = vec![0u8; cfg.max_datagram + 1];
    while !stop.is_set() {
        match udp.recv_from(&mut buf) {
            Ok((n, peer)) => {
                if n > cfg.max_datagram || UdpProbe::decode(&buf[..n]).is_err() {
                    counters.datagrams_dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                match udp.send_to(&buf[..n], peer) {
                    Ok(_) => counters.datagrams.fetch_add(1, Ordering::Relaxed),
                    Err(_) => counters.datagrams_dropped.fetch_add(1, Ordering::Relaxed),
                };
            }
            Err(e) if crate::net::is_retry(&e) => {}
            // ICMP errors from earlier sends surface here (e.g. connection refused): they
            // concern one client, not the server.
            Err(_) => {}
        }
    }
}
