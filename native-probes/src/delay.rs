//! A fixed-delay relay: the propagation delay of docs/testing.md's emulated links, where the
//! kernel has no `netem`. Every chunk of a TCP stream and every UDP datagram is held for the
//! same one-way delay in each direction before it is passed on, so a round trip through the
//! relay gains twice that delay and keeps the peers' own timing on top of it.
//!
//! A delay line is a FIFO: with one constant delay, items fall due in the order they came
//! in, so one writer thread sleeps until the head is due and sends it. The last
//! [`SPIN`] before a due time is spun rather than slept, because a sleeping thread wakes up
//! to the timer slack (50 µs by default) late, which would blur the delay being emulated.
//! The spinning costs a core while items are pending; this is a test instrument.

use crate::stop::Stop;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Below this much time left, the writer spins instead of sleeping.
const SPIN: Duration = Duration::from_micros(200);
/// How often blocked threads look at the stop flag.
const SLICE: Duration = Duration::from_millis(200);
/// Most UDP clients relayed at once (one upstream socket and reader thread each). A new
/// client past it takes the place of the one heard from least recently, so a relay in front
/// of a long campaign (a fresh source port per probe run) keeps relaying.
const MAX_UDP_CLIENTS: usize = 64;
/// Most bytes one direction of a TCP connection holds: the reader waits for the writer past
/// it, so a fast sender behind a slow link is held back as by a socket's buffer (unbounded,
/// the relay took in 2.2 GB in a 2 s `iperf3 -R` at 37 Mbit/s). 32 MiB is a delay line of
/// 1 Gbit/s for 268 ms.
const TCP_HELD_BYTES: usize = 32 << 20;

/// Waits until `due`: sleeps most of the way, spins the rest.
fn wait_until(due: Instant) {
    let now = Instant::now();
    if due > now + SPIN {
        std::thread::sleep(due - now - SPIN);
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Relays TCP connections from `listener` to `to`, each chunk delayed by `delay` in each
/// direction, until `stop` is raised. Nagle is off on both legs, so a small write leaves
/// when it is due and not when the previous one is acknowledged.
pub fn tcp(listener: TcpListener, to: SocketAddr, delay: Duration, stop: &Stop) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    while !stop.is_set() {
        match listener.accept() {
            Ok((client, _)) => {
                client.set_nonblocking(false)?;
                if let Err(e) = tcp_pair(client, to, delay) {
                    crate::warn_line!("nowcast delay: {to}: connect tcp: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Accept latency does not enter a probe's RTT (the handshake is the
                // kernel's), so polling at a millisecond is enough.
                if stop.wait_timeout(Duration::from_millis(1)) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Connects upstream and starts both directions of one relayed connection.
fn tcp_pair(client: TcpStream, to: SocketAddr, delay: Duration) -> io::Result<()> {
    let server = TcpStream::connect(to)?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
    }
    let (c2, s2) = (client.try_clone()?, server.try_clone()?);
    tcp_direction(client, server, delay)?;
    tcp_direction(s2, c2, delay)
}

/// One direction: a reader stamps each chunk, a writer passes it on when due. When the
/// source ends, the destination's write side is shut down after the last chunk; when
/// either side fails, both are closed.
fn tcp_direction(mut from: TcpStream, mut to: TcpStream, delay: Duration) -> io::Result<()> {
    let (tx, rx): (Sender<(Instant, Vec<u8>)>, Receiver<_>) = mpsc::channel();
    let from_again = from.try_clone()?;
    // Bytes read and not yet written ([`TCP_HELD_BYTES`] at most), and whether the writer
    // has gone.
    let held = Arc::new((Mutex::new((0usize, false)), Condvar::new()));
    let held_w = held.clone();
    std::thread::Builder::new()
        .name("delay-tcp-read".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                {
                    let (lock, room) = &*held;
                    let mut h = lock.lock().unwrap_or_else(|p| p.into_inner());
                    while h.0 >= TCP_HELD_BYTES && !h.1 {
                        h = room.wait(h).unwrap_or_else(|p| p.into_inner());
                    }
                    if h.1 {
                        return;
                    }
                }
                match from.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        held.0.lock().unwrap_or_else(|p| p.into_inner()).0 += n;
                        if tx
                            .send((Instant::now() + delay, buf[..n].to_vec()))
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        })?;
    std::thread::Builder::new()
        .name("delay-tcp-write".into())
        .spawn(move || {
            let (lock, room) = &*held_w;
            let gone = || {
                lock.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
                room.notify_all();
            };
            for (due, chunk) in rx {
                wait_until(due);
                if to.write_all(&chunk).is_err() {
                    gone();
                    let _ = from_again.shutdown(Shutdown::Both);
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
                let mut h = lock.lock().unwrap_or_else(|p| p.into_inner());
                h.0 -= chunk.len();
                room.notify_all();
            }
            gone();
            let _ = to.shutdown(Shutdown::Write);
        })?;
    Ok(())
}

/// Where a delayed datagram goes: back to a client through the front socket, or to the
/// server through that client's upstream socket.
enum Dest {
    Client(SocketAddr),
    Server(Arc<UdpSocket>),
}

/// One UDP client's leg to the server.
struct Upstream {
    socket: Arc<UdpSocket>,
    /// When a datagram last went either way (ms since the relay started): the least recent
    /// leg is evicted first. Replies count, so a client that mostly receives (a reverse
    /// stream) is not taken for an idle one.
    heard: Arc<AtomicU64>,
    /// Tells the leg's reader thread to end (it looks within a [`SLICE`]).
    evicted: Arc<AtomicBool>,
}

/// Relays UDP datagrams arriving at `front` to `to`, each delayed by `delay` in each
/// direction, until `stop` is raised. Every client gets an upstream socket of its own, so
/// the server's replies find their way back to the client that sent the request.
pub fn udp(front: UdpSocket, to: SocketAddr, delay: Duration, stop: &Stop) -> io::Result<()> {
    let front = Arc::new(front);
    front.set_read_timeout(Some(SLICE))?;
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>, Dest)>();
    let writer = {
        let front = front.clone();
        std::thread::Builder::new()
            .name("delay-udp-write".into())
            .spawn(move || {
                for (due, datagram, dest) in rx {
                    wait_until(due);
                    // A datagram that cannot be sent is lost, as on a real link.
                    let _ = match dest {
                        Dest::Client(addr) => front.send_to(&datagram, addr),
                        Dest::Server(up) => up.send(&datagram),
                    };
                }
            })?
    };
    let local = SocketAddr::new(
        if to.is_ipv4() {
            [0u8; 4].into()
        } else {
            [0u16; 8].into()
        },
        0,
    );
    let mut upstream: HashMap<SocketAddr, Upstream> = HashMap::new();
    let started = Instant::now();
    let since = move |t: Instant| t.duration_since(started).as_millis() as u64;
    // Reader threads alive, evicted ones still winding down included: a churn of new
    // clients may not run the relay out of sockets and threads.
    let readers = Arc::new(AtomicUsize::new(0));
    let mut buf = vec![0u8; 65_536];
    while !stop.is_set() {
        let (n, client) = match front.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if crate::net::is_retry(&e) => continue,
            // An ICMP error from an earlier send concerns one client only.
            Err(_) => continue,
        };
        let now = Instant::now();
        let due = now + delay;
        let up = match upstream.get(&client) {
            Some(leg) => {
                leg.heard.store(since(now), Ordering::Relaxed);
                leg.socket.clone()
            }
            // Too many legs still winding down: the datagram is lost, as on a full link.
            None if readers.load(Ordering::Relaxed) >= 2 * MAX_UDP_CLIENTS => continue,
            None => {
                if upstream.len() >= MAX_UDP_CLIENTS {
                    let stalest = upstream
                        .iter()
                        .min_by_key(|(_, leg)| leg.heard.load(Ordering::Relaxed))
                        .map(|(addr, _)| *addr);
                    if let Some(leg) = stalest.and_then(|addr| upstream.remove(&addr)) {
                        leg.evicted.store(true, Ordering::Relaxed);
                    }
                }
                let up = UdpSocket::bind(local)?;
                up.connect(to)?;
                up.set_read_timeout(Some(SLICE))?;
                let up = Arc::new(up);
                let evicted = Arc::new(AtomicBool::new(false));
                let heard = Arc::new(AtomicU64::new(since(now)));
                let (up2, tx2, stop2, evicted2, heard2, readers2) = (
                    up.clone(),
                    tx.clone(),
                    stop.clone(),
                    evicted.clone(),
                    heard.clone(),
                    readers.clone(),
                );
                readers.fetch_add(1, Ordering::Relaxed);
                std::thread::Builder::new()
                    .name("delay-udp-read".into())
                    .spawn(move || {
                        let mut buf = vec![0u8; 65_536];
                        while !stop2.is_set() && !evicted2.load(Ordering::Relaxed) {
                            if let Ok(n) = up2.recv(&mut buf) {
                                let now = Instant::now();
                                heard2.store(since(now), Ordering::Relaxed);
                                let item = (now + delay, buf[..n].to_vec(), Dest::Client(client));
                                if tx2.send(item).is_err() {
                                    break;
                                }
                            }
                        }
                        readers2.fetch_sub(1, Ordering::Relaxed);
                    })?;
                upstream.insert(
                    client,
                    Upstream {
                        socket: up.clone(),
                        heard,
                        evicted,
                    },
                );
                up
            }
        };
        if tx.send((due, buf[..n].to_vec(), Dest::Server(up))).is_err() {
            break;
        }
    }
    drop(tx);
    drop(upstream);
    // The upstream readers hold senders until they notice the stop, within a slice.
    let _ = writer.join();
    Ok(())
}

/// Opens the TUN device `name` (IFF_TUN, no packet information: each read is one IP packet).
pub fn open_tun(name: &str) -> io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    // struct ifreq: 16 bytes of name, then a short of flags (padded to 40 bytes).
    let mut req = [0u8; 40];
    let n = name.as_bytes();
    if n.is_empty() || n.len() > 15 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a device name is 1-15 bytes",
        ));
    }
    req[..n.len()].copy_from_slice(n);
    let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
    req[16..18].copy_from_slice(&flags.to_ne_bytes());
    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    // SAFETY: the fd is open and req is a valid, large enough ifreq buffer.
    if unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF, req.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

/// A packet-level delay line between two TUN devices: every IP packet the kernel routes into
/// `from` is written into `to` (the kernel receives it there and routes it on) `delay` later.
/// Unlike the TCP relay, this keeps a TCP connection end to end, so TCP's congestion control
/// sees the delay as path RTT (the emulated links' fixed delay for bulk-transfer benchmarks;
/// policy routing by input device sends one direction through it).
pub fn tun(from: std::fs::File, to: std::fs::File, delay: Duration, stop: &Stop) -> io::Result<()> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::Builder::new()
        .name("delay-tun-write".into())
        .spawn(move || {
            let mut to = to;
            for (due, packet) in rx {
                wait_until(due);
                // A packet the kernel refuses is lost, as on a real link.
                let _ = to.write(&packet);
            }
        })?;
    let mut from = from;
    let mut buf = vec![0u8; 65_536];
    while !stop.is_set() {
        // A read blocks until a packet comes, and SIGTERM restarts it: without packets (the
        // namespace deleted under it) the stop flag was never looked at. Wait at most a tenth
        // of a second for one.
        let mut ready = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&from),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        if unsafe { libc::poll(&mut ready, 1, 100) } <= 0 {
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    drop(tx);
    let _ = writer.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The delay is a floor; the ceiling only catches a relay that holds packets far too
    /// long (the accuracy of the added delay is measured against sockperf and irtt in
    /// tests/emulated_links.rs; a loaded CI machine may wake the relay late).
    fn within(elapsed: Duration, delay: Duration) -> bool {
        elapsed >= delay && elapsed < delay + Duration::from_millis(500)
    }

    /// A UDP relay adding `delay` each way in front of an echo that answers `answers`
    /// datagrams: the relay's address, its stop and its thread.
    fn udp_relay(
        delay: Duration,
        answers: usize,
    ) -> (SocketAddr, Stop, std::thread::JoinHandle<()>) {
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        let echo_at = echo.local_addr().unwrap();
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let front_at = front.local_addr().unwrap();
        let stop = Stop::new();
        let stop2 = stop.clone();
        let relay = std::thread::spawn(move || udp(front, echo_at, delay, &stop2).unwrap());
        std::thread::spawn(move || {
            let mut b = [0u8; 64];
            for _ in 0..answers {
                let (n, from) = echo.recv_from(&mut b).unwrap();
                echo.send_to(&b[..n], from).unwrap();
            }
        });
        (front_at, stop, relay)
    }

    #[test]
    fn udp_round_trips_gain_twice_the_delay() {
        let (front_at, stop, relay) = udp_relay(Duration::from_millis(15), 3);
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(front_at).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        for i in 0..3u8 {
            let t = Instant::now();
            client.send(&[i; 8]).unwrap();
            let mut b = [0u8; 64];
            let n = client.recv(&mut b).unwrap();
            assert_eq!(&b[..n], &[i; 8]);
            assert!(
                within(t.elapsed(), Duration::from_millis(30)),
                "{:?}",
                t.elapsed()
            );
        }
        stop.trigger();
        relay.join().unwrap();
    }

    #[test]
    fn udp_keeps_relaying_past_its_client_cap() {
        // A campaign sends each probe run from a fresh source port: the relay must not go
        // quiet after MAX_UDP_CLIENTS of them (it dropped every new client's datagrams).
        let clients = MAX_UDP_CLIENTS + 16;
        let (front_at, stop, relay) = udp_relay(Duration::from_millis(1), clients + 1);
        let round_trip = |client: &UdpSocket, tag: u8| {
            client.send(&[tag; 8]).unwrap();
            let mut b = [0u8; 64];
            let n = client.recv(&mut b).unwrap();
            assert_eq!(&b[..n], &[tag; 8], "client {tag}");
        };
        let first = UdpSocket::bind("127.0.0.1:0").unwrap();
        first.connect(front_at).unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        round_trip(&first, 0);
        for i in 1..clients {
            let client = UdpSocket::bind("127.0.0.1:0").unwrap();
            client.connect(front_at).unwrap();
            client
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            round_trip(&client, i as u8);
        }
        // The first client was evicted long ago; it is taken back as a new one.
        round_trip(&first, 0);
        stop.trigger();
        relay.join().unwrap();
    }

    #[test]
    fn tcp_round_trips_gain_twice_the_delay_and_closes_pass_on() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let server_at = server.local_addr().unwrap();
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_at = front.local_addr().unwrap();
        let stop = Stop::new();
        let stop2 = stop.clone();
        let relay = std::thread::spawn(move || {
            tcp(front, server_at, Duration::from_millis(10), &stop2).unwrap()
        });
        let echo = std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut b = [0u8; 2];
            while s.read_exact(&mut b).is_ok() {
                s.write_all(&b).unwrap();
            }
        });
        let mut c = TcpStream::connect(front_at).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for i in 0..3u8 {
            let t = Instant::now();
            c.write_all(&[i, i]).unwrap();
            let mut b = [0u8; 2];
            c.read_exact(&mut b).unwrap();
            assert_eq!(b, [i, i]);
            assert!(
                within(t.elapsed(), Duration::from_millis(20)),
                "{:?}",
                t.elapsed()
            );
        }
        c.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
        echo.join().unwrap();
        stop.trigger();
        relay.join().unwrap();
    }

    /// A sender faster than its receiver is held back once the relay holds
    /// [`TCP_HELD_BYTES`], as by a socket buffer: before, the relay read without bound.
    #[test]
    fn a_fast_sender_is_held_back_by_a_bounded_delay_line() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let server_at = server.local_addr().unwrap();
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_at = front.local_addr().unwrap();
        let stop = Stop::new();
        let stop2 = stop.clone();
        let relay = std::thread::spawn(move || {
            tcp(front, server_at, Duration::from_millis(1), &stop2).unwrap()
        });
        let mut c = TcpStream::connect(front_at).unwrap();
        // The server accepts and never reads.
        let (idle, _) = server.accept().unwrap();
        c.set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let chunk = vec![7u8; 1 << 20];
        let mut sent = 0usize;
        let until = Instant::now() + Duration::from_secs(10);
        while sent < 4 * TCP_HELD_BYTES && Instant::now() < until {
            match c.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        // The line, and the sockets' buffers either side of it (a few MiB on loopback).
        assert!(
            sent < TCP_HELD_BYTES + (24 << 20),
            "{} MiB taken in",
            sent >> 20
        );
        drop((c, idle));
        stop.trigger();
        relay.join().unwrap();
    }
}
