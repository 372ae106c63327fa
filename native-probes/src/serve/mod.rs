//! `nowcast serve`: the Echo Server of JavaNws §2.1.1 for the TCP probe, and a UDP echo,
//! made to run on a public address.
//!
//! The rules live in deterministic cores: [`limits`] (clients by network prefix, token
//! buckets, the session table, the UDP gate), [`watchdog`] (a TCP session's handshake
//! deadline, lifetime, idle limit and minimum rate) and [`metrics`] (counters, the
//! `/metrics` text and its one HTTP route). The edges are thin: [`tcp`] accepts sessions and
//! answers them (one thread each, bounded by the session caps), this module runs the UDP
//! loop and the metrics listener. Every blocking call wakes at least every [`SLICE`] to
//! notice a stop or a limit; reads return as soon as data arrives, so the slice adds no
//! delay to an echo.

pub mod limits;
pub mod metrics;
mod tcp;
pub mod watchdog;

use crate::clock::Clock;
use crate::stop::Stop;
use crate::wire::UdpProbe;
use limits::{ClientBuckets, Prefixes, Rate, Sessions, UdpGate, UdpLimits};
use metrics::{Counters, Limit, Route};
use socket2::SockRef;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use watchdog::Timing;

/// How often blocked threads look at the stop flag and the session's clocks.
const SLICE: Duration = Duration::from_millis(200);

/// The server's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: IpAddr,
    /// 0 picks a free port.
    pub tcp_port: u16,
    pub udp_port: u16,
    /// Largest bulk probe accepted, in bytes.
    pub max_payload: u64,
    pub max_sessions: usize,
    pub max_sessions_per_client: usize,
    pub timing: Timing,
    /// Largest socket buffer the server's kernel may book for a client's session, bytes
    /// (what the welcome reports; Linux books twice the size asked, so a client's request
    /// is cut to half of this there).
    pub max_buffer: u32,
    /// How addresses group into clients, for the TCP caps and budget (the UDP limits carry
    /// their own copy).
    pub prefixes: Prefixes,
    /// Each client's TCP byte budget: payloads and messages, both ways.
    pub budget: Rate,
    pub udp: UdpLimits,
    /// Where to serve `/metrics`, if anywhere.
    pub metrics: Option<SocketAddr>,
}

impl Config {
    /// The limits as `/metrics` reports them (`nowcast_serve_limit{name}`).
    fn limits(&self) -> Vec<(&'static str, f64)> {
        let s = |n: u64| n as f64 / 1e9;
        vec![
            ("max_payload_bytes", self.max_payload as f64),
            ("max_sessions", self.max_sessions as f64),
            (
                "max_sessions_per_client",
                self.max_sessions_per_client as f64,
            ),
            ("max_buffer_bytes", f64::from(self.max_buffer)),
            ("handshake_seconds", s(self.timing.handshake)),
            ("idle_seconds", s(self.timing.idle)),
            ("lifetime_seconds", s(self.timing.lifetime)),
            ("min_rate_bytes_per_second", self.timing.min_rate as f64),
            ("budget_bytes_per_second", self.budget.per_second),
            ("budget_burst_bytes", self.budget.burst),
            ("ipv4_prefix", f64::from(self.prefixes.ipv4)),
            ("ipv6_prefix", f64::from(self.prefixes.ipv6)),
            ("max_datagram_bytes", self.udp.max_datagram as f64),
            ("udp_packets_per_second", self.udp.client[0].per_second),
            ("udp_bytes_per_second", self.udp.client[1].per_second),
            ("udp_total_packets_per_second", self.udp.total[0].per_second),
            ("udp_total_bytes_per_second", self.udp.total[1].per_second),
        ]
    }
}

/// A bound server, not yet answering.
pub struct Server {
    cfg: Config,
    tcp: TcpListener,
    udp: UdpSocket,
    metrics: Option<TcpListener>,
}

/// What the threads of a running server share.
struct Shared {
    cfg: Config,
    stop: Stop,
    counters: Arc<Counters>,
    sessions: Mutex<Sessions>,
    budgets: Mutex<ClientBuckets<1>>,
    clock: Clock,
}

/// Slots of the TCP budget table (one bucket each, 1 MiB).
const BUDGET_SLOTS: usize = 1 << 16;

/// A seed for the hash that spreads clients over the bucket tables: a different one every
/// run, so nobody can pick addresses that share a victim's slot.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}

impl Server {
    /// Binds the sockets; the error names the address and protocol.
    pub fn bind(cfg: Config) -> Result<Self, String> {
        let tcp_at = SocketAddr::new(cfg.bind, cfg.tcp_port);
        let udp_at = SocketAddr::new(cfg.bind, cfg.udp_port);
        let tcp = TcpListener::bind(tcp_at).map_err(|e| format!("{tcp_at}: bind tcp: {e}"))?;
        let udp = UdpSocket::bind(udp_at).map_err(|e| format!("{udp_at}: bind udp: {e}"))?;
        let metrics = cfg
            .metrics
            .map(|at| TcpListener::bind(at).map_err(|e| format!("{at}: bind metrics: {e}")))
            .transpose()?;
        Ok(Self {
            cfg,
            tcp,
            udp,
            metrics,
        })
    }

    pub fn tcp_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    pub fn udp_addr(&self) -> io::Result<SocketAddr> {
        self.udp.local_addr()
    }

    /// Where `/metrics` is served, when it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.local_addr().ok())
    }

    /// Answers until `stop` is raised, then closes every session and returns the counters.
    pub fn run(self, stop: Stop) -> io::Result<Arc<Counters>> {
        let cfg = self.cfg;
        let shared = Arc::new(Shared {
            sessions: Mutex::new(Sessions::new(cfg.max_sessions, cfg.max_sessions_per_client)),
            budgets: Mutex::new(ClientBuckets::new(
                [cfg.budget],
                BUDGET_SLOTS,
                random_seed(),
            )),
            cfg,
            stop: stop.clone(),
            counters: Arc::new(Counters::default()),
            clock: Clock::new(),
        });
        self.udp.set_read_timeout(Some(SLICE))?;
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name.into()).spawn(f)
        };
        let udp = {
            let (udp, shared) = (self.udp, shared.clone());
            spawn("udp-echo", Box::new(move || udp_loop(&udp, &shared)))?
        };
        let acceptor = {
            let (listener, shared) = (self.tcp.try_clone()?, shared.clone());
            spawn(
                "tcp-accept",
                Box::new(move || tcp::accept_loop(&listener, &shared)),
            )?
        };
        let metrics = match &self.metrics {
            Some(m) => {
                let (listener, shared) = (m.try_clone()?, shared.clone());
                let started = Instant::now();
                let limits = shared.cfg.limits();
                Some(spawn(
                    "metrics",
                    Box::new(move || {
                        metrics_loop(&listener, &shared.stop, &|| {
                            metrics::render(
                                &shared.counters,
                                &limits,
                                resident_bytes(),
                                started.elapsed().as_secs_f64(),
                            )
                        })
                    }),
                )?)
            }
            None => None,
        };
        stop.wait();
        // Linux wakes a thread blocked in accept() when the listening socket is shut down.
        let _ = SockRef::from(&self.tcp).shutdown(Shutdown::Both);
        if let Some(m) = &self.metrics {
            let _ = SockRef::from(m).shutdown(Shutdown::Both);
        }
        let _ = acceptor.join();
        let _ = udp.join();
        if let Some(m) = metrics {
            let _ = m.join();
        }
        // Sessions notice the flag within a slice; wait for them, boundedly.
        let until = Instant::now() + SLICE * 5;
        while shared.counters.open.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(shared.counters.clone())
    }
}

fn udp_loop(udp: &UdpSocket, shared: &Shared) {
    let (cfg, c) = (&shared.cfg, &shared.counters);
    let mut gate = UdpGate::new(cfg.udp, random_seed());
    // One byte more than the cap, so that an oversized datagram is seen as such.
    let mut buf = vec![0u8; cfg.udp.max_datagram.max(UdpProbe::HEADER_LEN) + 1];
    while !shared.stop.is_set() {
        match udp.recv_from(&mut buf) {
            Ok((n, peer)) => {
                c.datagrams_in.fetch_add(1, Ordering::Relaxed);
                c.udp_bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                let now = shared.clock.now();
                if let Err(drop) = gate.judge(&buf[..n], peer.ip(), peer.port(), now) {
                    c.reject(udp_limit(drop));
                    continue;
                }
                let reply = &mut buf[..n];
                UdpProbe::mark_reply(reply);
                // A failed send (a full buffer, an unreachable peer) loses one answer,
                // which the client counts as a lost probe.
                if udp.send_to(reply, peer).is_ok() {
                    c.datagrams_out.fetch_add(1, Ordering::Relaxed);
                    c.udp_bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Err(e) if crate::net::is_retry(&e) => {}
            // ICMP errors from earlier sends surface here (e.g. connection refused): they
            // concern one client, not the server.
            Err(_) => {}
        }
    }
}

fn udp_limit(drop: limits::UdpDrop) -> Limit {
    use limits::UdpDrop;
    match drop {
        UdpDrop::Malformed => Limit::UdpMalformed,
        UdpDrop::TooLarge => Limit::UdpTooLarge,
        UdpDrop::Reply => Limit::UdpReply,
        UdpDrop::SourcePort => Limit::UdpSourcePort,
        UdpDrop::ClientRate => Limit::UdpClientRate,
        UdpDrop::TotalRate => Limit::UdpTotalRate,
    }
}

/// How long a metrics request may take, from accept to the last byte written.
const METRICS_DEADLINE: Duration = Duration::from_secs(2);

/// Answers `GET /metrics`, one connection at a time: a scraper needs no more, and a client
/// that holds the listener up costs at most [`METRICS_DEADLINE`] per connection, never a
/// thread. Bind it to a private address. `render` gives the page's text; `nowcast campaign`
/// serves its own figures through the same loop.
pub fn metrics_loop(listener: &TcpListener, stop: &Stop, render: &dyn Fn() -> String) {
    loop {
        let accepted = listener.accept();
        if stop.is_set() {
            return;
        }
        let Ok((mut s, _)) = accepted else {
            if stop.wait_timeout(SLICE) {
                return;
            }
            continue;
        };
        let by = Instant::now() + METRICS_DEADLINE;
        let mut head = Vec::with_capacity(512);
        let mut chunk = [0u8; 1024];
        while !metrics::head_complete(&head) && head.len() < metrics::MAX_HEAD {
            let Ok(left) = crate::net::remaining(by) else {
                break;
            };
            let _ = s.set_read_timeout(Some(left));
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        let route = metrics::route(&head);
        let body = if route == Route::Metrics {
            render()
        } else {
            String::new()
        };
        let _ = s.set_write_timeout(Some(
            crate::net::remaining(by).unwrap_or(Duration::from_millis(1)),
        ));
        let _ = s.write_all(&metrics::response(route, &body));
    }
}

/// Wakes a thread blocked in `accept` on `listener` (Linux wakes it when the listening
/// socket is shut down).
pub fn wake(listener: &TcpListener) {
    let _ = SockRef::from(listener).shutdown(Shutdown::Both);
}

/// This process's resident memory, from /proc (Linux); `None` elsewhere.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
