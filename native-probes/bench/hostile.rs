//! `nowcast serve` against hostile clients on loopback, measured in one run:
//!
//! 1. the hostile-input corpus (tests/corpus/tcp.txt and udp.txt) in several passes: cases
//!    answered or refused as expected, the server alive, its RSS before and after;
//! 2. 1,000 connections from one address: how many are accepted, how the rest are refused,
//!    and a control client's session time meanwhile against its time before;
//! 3. one client trying every request type (echoes, uploads, downloads, reconnections) for
//!    10 s: the bytes it got the server to move against its budget;
//! 4. UDP reflection: a spoof-like flood from 256 loopback sources and forged replies, the
//!    datagrams and bytes in and out;
//! 5. kernel memory: 64 sessions that ask for 8 MiB buffers and a download they never read,
//!    TCP memory in /proc/net/sockstat before, while they stall, and once the server has
//!    closed them (the clients still holding their ends).
//!
//! `cargo bench -p native-probes --bench hostile` (the server is the release build's
//! `nowcast`). Benchmarks are not tests: nothing here fails on a number.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{corpus, Server};
use nowcast::serve::metrics::Limit;
use nowcast::wire::{self, Hello, Request, Status as Accepted, UdpProbe, Welcome};
use socket2::{Domain, Socket, Type};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn connect_from(from: &str, to: &str) -> std::io::Result<TcpStream> {
    let to: SocketAddr = to.parse().unwrap();
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(5))?;
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(s)
}

fn read_to_close(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let until = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    got
}

fn welcome(s: &mut TcpStream, hello: Hello) -> std::io::Result<Welcome> {
    s.write_all(&hello.encode())?;
    let mut w = [0u8; Welcome::LEN];
    s.read_exact(&mut w)?;
    Welcome::decode(&w).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))
}

/// A well-behaved session (hello, echo, quit) from `from`: its time, or why it failed.
fn control(tcp: &str, from: &str) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut s = connect_from(from, tcp).map_err(|e| e.to_string())?;
    let w = welcome(&mut s, Hello::default()).map_err(|e| e.to_string())?;
    if w.status != Accepted::Ok {
        return Err(w.status.reason().into());
    }
    s.write_all(b"P\x2a").map_err(|e| e.to_string())?;
    let mut echo = [0u8; 2];
    s.read_exact(&mut echo).map_err(|e| e.to_string())?;
    let _ = s.write_all(b"Q");
    Ok(t0.elapsed())
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn us(d: &[Duration]) -> String {
    let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    format!(
        "median {:.0} µs, p99 {:.0} µs, max {:.0} µs ({} sessions)",
        percentile(&mut v, 0.5),
        percentile(&mut v, 0.99),
        percentile(&mut v, 1.0),
        v.len()
    )
}

/// The server's counters, from its /metrics page: name with labels → value.
fn metrics(server: &Server) -> BTreeMap<String, f64> {
    let url = server.metrics.as_ref().expect("--metrics");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    page.lines()
        .filter(|l| l.starts_with("nowcast_serve") || l.starts_with("process_"))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn start(extra: &[&str]) -> Server {
    let mut args = vec!["--bind", "127.0.0.1", "--metrics", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

fn rejections(m: &BTreeMap<String, f64>) -> String {
    m.iter()
        .filter(|(k, v)| k.starts_with("nowcast_serve_limit_rejections_total") && **v > 0.0)
        .map(|(k, v)| {
            let name = k.split('"').nth(1).unwrap_or(k);
            format!("{name} {v}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn corpus_section() {
    println!("\n-- 1. hostile-input corpus against a server with the default limits");
    let server = start(&[]);
    let tcp_cases = corpus::load("tcp.txt");
    let udp_cases = corpus::load("udp.txt");
    let run_pass = || {
        let mut met = 0;
        for case in &tcp_cases {
            let Ok(mut s) = connect_from("127.0.0.1", &server.tcp) else {
                continue;
            };
            let _ = s.write_all(&case.bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let got = read_to_close(&mut s, Duration::from_secs(10));
            let status = |want: Accepted| {
                got.len() >= Welcome::LEN
                    && Welcome::decode(&got[..Welcome::LEN]).map(|w| w.status) == Ok(want)
            };
            let ok = match case.expect.as_str() {
                "nothing" => got.is_empty(),
                "bad-hello" => got.len() == Welcome::LEN && status(Accepted::BadHello),
                "ok" => got.len() == Welcome::LEN && status(Accepted::Ok),
                other => {
                    let want = corpus::bytes_of(&other[3..]).unwrap();
                    status(Accepted::Ok) && got[Welcome::LEN..] == want[..]
                }
            };
            met += usize::from(ok);
        }
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.connect(&server.udp).unwrap();
        u.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 65536];
        for case in &udp_cases {
            let _ = u.send(&case.bytes);
            let answered = u.recv(&mut buf).is_ok();
            met += usize::from(answered == (case.expect == "answer"));
        }
        met
    };
    run_pass();
    let before = server.rss_kib();
    let passes = 5;
    let mut met = 0;
    let mut controls = Vec::new();
    for _ in 0..passes {
        met += run_pass();
        controls.push(control(&server.tcp, "127.0.0.2").expect("served"));
    }
    let after = server.rss_kib();
    let cases = tcp_cases.len() + udp_cases.len();
    println!(
        "{} TCP + {} UDP cases x {passes} passes: {met} of {} answered or refused as expected; server alive (control {}); RSS {before} -> {after} KiB",
        tcp_cases.len(),
        udp_cases.len(),
        cases * passes,
        us(&controls)
    );
    println!("refusals counted: {}", rejections(&metrics(&server)));
}

fn connections_section() {
    println!("\n-- 2. 1,000 connections from one address (default limits: 8 sessions per client, 256 in all)");
    let server = start(&[]);
    let mut base = Vec::new();
    for _ in 0..200 {
        base.push(control(&server.tcp, "127.0.0.2").expect("served"));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let controller = {
        let (tcp, stop) = (server.tcp.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut times, mut failed) = (Vec::new(), Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match control(&tcp, "127.0.0.2") {
                    Ok(t) => times.push(t),
                    Err(e) => failed.push(e),
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (times, failed)
        })
    };
    let t0 = Instant::now();
    let mut held = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut refuse_times = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        let outcome = match connect_from("127.0.0.1", &server.tcp) {
            Err(e) => format!("connect failed: {e}"),
            Ok(mut s) => match welcome(&mut s, Hello::default()) {
                Ok(w) if w.status == Accepted::Ok => {
                    held.push(s);
                    "accepted".into()
                }
                Ok(w) => {
                    refuse_times.push(t.elapsed());
                    format!(
                        "refused: {} (retry after {} ms)",
                        w.status.reason(),
                        w.retry_after_ms
                    )
                }
                Err(e) => format!("no welcome: {e}"),
            },
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    let opened = t0.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (during, failed) = controller.join().unwrap();
    for (outcome, n) in &outcomes {
        println!("{n:>5}  {outcome}");
    }
    println!(
        "1,000 connections opened in {:.2} s; a refusal took {}",
        opened.as_secs_f64(),
        us(&refuse_times)
    );
    println!("control client (127.0.0.2) before: {}", us(&base));
    println!(
        "control client meanwhile:          {}; {} failed",
        us(&during),
        failed.len()
    );
    drop(held);
}

fn budget_section() {
    println!("\n-- 3. one client trying every request type for 10 s: echoes, uploads and downloads from 1 GiB down to 64 KiB, reconnecting when refused (default budget: 2 GiB at once, 2 GiB a minute)");
    let server = start(&[]);
    let secs = 10.0;
    let t0 = Instant::now();
    let (mut sessions, mut refusals) = (0, BTreeMap::<String, usize>::new());
    let mut buf = vec![0u8; 1 << 20];
    // The largest transfers first; after a refusal, half the size (down to 64 KiB), so the
    // client takes whatever the bucket has refilled.
    let mut size: u64 = 1 << 30;
    while t0.elapsed().as_secs_f64() < secs {
        sessions += 1;
        let Ok(mut s) = connect_from("127.0.0.1", &server.tcp) else {
            continue;
        };
        match welcome(&mut s, Hello::default()) {
            Ok(w) if w.status == Accepted::Ok => {}
            Ok(w) => {
                *refusals
                    .entry(format!("hello: {}", w.status.reason()))
                    .or_default() += 1;
                continue;
            }
            Err(_) => continue,
        }
        // Echoes, then the largest upload and download, then again, until refused.
        'session: loop {
            for _ in 0..64 {
                if s.write_all(b"P\x01").is_err() {
                    break 'session;
                }
            }
            let mut echoes = [0u8; 128];
            if s.read_exact(&mut echoes).is_err() {
                break;
            }
            if let Some(r) = echoes.chunks(2).find(|c| c[0] == wire::OP_REFUSAL) {
                *refusals
                    .entry(format!("echo: {:?}", wire::Reply::decode(r)))
                    .or_default() += 1;
                break;
            }
            for req in [Request::Up(size), Request::Down(size)] {
                let (h, n) = req.encode();
                if s.write_all(&h[..n]).is_err() {
                    break 'session;
                }
                if let Request::Up(len) = req {
                    let mut left = len;
                    while left > 0 {
                        let k = buf.len().min(left as usize);
                        if s.write_all(&buf[..k]).is_err() {
                            break;
                        }
                        left -= k as u64;
                    }
                }
                let mut ack = [0u8; 2];
                if s.read_exact(&mut ack).is_err() {
                    break 'session;
                }
                if ack != wire::ACK {
                    let kind = if matches!(req, Request::Up(_)) {
                        "upload"
                    } else {
                        "download"
                    };
                    *refusals
                        .entry(format!("{kind}: {:?}", wire::Reply::decode(&ack)))
                        .or_default() += 1;
                    size = (size / 2).max(64 << 10);
                    break 'session;
                }
                if let Request::Down(len) = req {
                    let mut left = len;
                    while left > 0 {
                        let k = buf.len().min(left as usize);
                        match s.read(&mut buf[..k]) {
                            Ok(0) | Err(_) => break 'session,
                            Ok(n) => left -= n as u64,
                        }
                    }
                }
            }
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let m = metrics(&server);
    let moved = m["nowcast_serve_tcp_bytes_total{direction=\"in\"}"]
        + m["nowcast_serve_tcp_bytes_total{direction=\"out\"}"];
    let budget = 2.0 * (1u64 << 30) as f64 * (1.0 + elapsed / 60.0);
    let gib = |b: f64| b / (1u64 << 30) as f64;
    println!(
        "{sessions} sessions in {elapsed:.1} s; the server moved {:.3} GiB (payload {:.3} GiB) for a budget of {:.3} GiB (2 GiB + {elapsed:.1} s of refill): ratio {:.3}",
        gib(moved),
        gib(m["nowcast_serve_bulk_bytes_total"]),
        gib(budget),
        moved / budget
    );
    for (why, n) in refusals {
        println!("{n:>5}  refused: {why}");
    }
    println!("refusals counted: {}", rejections(&m));
}

fn udp_section() {
    println!("\n-- 4. UDP reflection (default limits: 2,000 requests and 1 MiB a second per client, 100,000 and 128 MiB in all)");
    let server = start(&[]);
    let mut probe = vec![0u8; 64];
    UdpProbe::request(1, 1).encode(&mut probe);
    let mut reply = probe.clone();
    UdpProbe::mark_reply(&mut reply);
    let sources: Vec<UdpSocket> = (0..256)
        .map(|i| {
            let u = UdpSocket::bind(format!("127.0.{}.{}:0", 10 + i / 200, 2 + i % 200)).unwrap();
            u.connect(&server.udp).unwrap();
            u.set_nonblocking(true).unwrap();
            u
        })
        .collect();
    let mut buf = [0u8; 65536];
    // Sends `per_round` requests from each of `n` sources every 10 ms for `rounds`, and a
    // forged reply each round; what each source got back.
    let mut flood = |n: usize, per_round: usize, rounds: u64| {
        let mut answered = vec![0usize; n];
        let t0 = Instant::now();
        for round in 0..rounds {
            for s in &sources[..n] {
                for _ in 0..per_round {
                    let _ = s.send(&probe);
                }
            }
            let _ = sources[round as usize % n].send(&reply);
            for (i, s) in sources[..n].iter().enumerate() {
                while s.recv(&mut buf).is_ok() {
                    answered[i] += 1;
                }
            }
            let due = t0 + Duration::from_millis(10 * (round + 1));
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        std::thread::sleep(Duration::from_millis(100));
        for (i, s) in sources[..n].iter().enumerate() {
            while s.recv(&mut buf).is_ok() {
                answered[i] += 1;
            }
        }
        (answered, t0.elapsed().as_secs_f64())
    };
    let mut last = metrics(&server);
    let report = |server: &Server,
                  last: &mut BTreeMap<String, f64>,
                  what: &str,
                  answered: &[usize],
                  elapsed: f64,
                  sent: usize,
                  bound: &str| {
        let m = metrics(server);
        let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
        let delta = |k: &str| get(&m, k) - get(last, k);
        let (din, dout) = (
            delta("nowcast_serve_datagrams_total{direction=\"in\"}"),
            delta("nowcast_serve_datagrams_total{direction=\"out\"}"),
        );
        let (bin, bout) = (
            delta("nowcast_serve_udp_bytes_total{direction=\"in\"}"),
            delta("nowcast_serve_udp_bytes_total{direction=\"out\"}"),
        );
        println!(
            "{what}, {elapsed:.2} s: {sent} sent, {din} received by the server, {dout} answered ({:.3}), bytes out / in {:.3}; per source at most {} ({bound})",
            dout / din,
            bout / bin,
            answered.iter().max().copied().unwrap_or(0),
        );
        let drops: Vec<String> = Limit::ALL
            .iter()
            .map(|l| {
                (
                    l.name(),
                    format!(
                        "nowcast_serve_limit_rejections_total{{limit=\"{}\"}}",
                        l.name()
                    ),
                )
            })
            .filter(|(_, k)| delta(k) > 0.0)
            .map(|(name, k)| format!("{name} {}", delta(&k)))
            .collect();
        println!("  dropped: {}", drops.join(", "));
        *last = m;
    };
    // Phase 1: 16 sources, each three times its packet rate (6,000 a second; 96,000 in
    // all, under the total): the per-client bucket binds.
    let (answered, elapsed) = flood(16, 60, 200);
    let bound = format!(
        "its bucket: 2,000 + 2,000/s x {elapsed:.2} s = {:.0}",
        2000.0 * (1.0 + elapsed)
    );
    report(
        &server,
        &mut last,
        "64-byte requests from 16 sources at 3x their rate",
        &answered,
        elapsed,
        200 * (16 * 60 + 1),
        &bound,
    );
    // Phase 2: 256 sources, each under its rate (800 a second), 204,800 a second in all.
    // One loaded machine cannot carry enough datagrams to reach the default total of
    // 100,000 a second, so this phase runs against a server whose total is 20,000.
    drop(server);
    let server = start(&["--udp-total-packets-per-second", "20000"]);
    for s in &sources {
        s.connect(&server.udp).unwrap();
    }
    last = metrics(&server);
    let (answered, elapsed) = flood(256, 8, 200);
    let bound = format!(
        "all sources together: 20,000 + 20,000/s x {elapsed:.2} s = {:.0}",
        2e4 * (1.0 + elapsed)
    );
    report(
        &server,
        &mut last,
        "64-byte requests from 256 sources under their own rate, over a total of 20,000/s",
        &answered,
        elapsed,
        200 * (256 * 8 + 1),
        &bound,
    );
    // Phase 2: the largest datagrams, where the byte rate binds first.
    let big = {
        let mut b = vec![0u8; 8900];
        UdpProbe::request(2, 2).encode(&mut b);
        b
    };
    let victim = &sources[0];
    let mut got = 0;
    let t0 = Instant::now();
    for round in 0..100 {
        for _ in 0..20 {
            let _ = victim.send(&big);
        }
        while victim.recv(&mut buf).is_ok() {
            got += 1;
        }
        let due = t0 + Duration::from_millis(10 * (round as u64 + 1));
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    std::thread::sleep(Duration::from_millis(100));
    while victim.recv(&mut buf).is_ok() {
        got += 1;
    }
    println!(
        "8,900-byte requests from one source for {:.2} s: 2,000 sent, {got} answered ({:.2} MiB; its bucket: 1 MiB + 1 MiB/s)",
        t0.elapsed().as_secs_f64(),
        got as f64 * 8900.0 / (1 << 20) as f64
    );
}

/// TCP memory in use (/proc/net/sockstat, pages of 4 KiB), in MiB: for the whole machine.
fn tcp_mem_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/net/sockstat").unwrap();
    let line = s.lines().find(|l| l.starts_with("TCP:")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let pages: f64 = words[words.iter().position(|w| *w == "mem").unwrap() + 1]
        .parse()
        .unwrap();
    pages * 4096.0 / (1 << 20) as f64
}

/// Sockets of the server's port other than its listener and TIME_WAIT entries (no buffers).
fn server_sockets(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&local) && !matches!(f[3], "0A" | "06")
        })
        .count()
}

fn memory_section() {
    println!("\n-- 5. kernel memory of 64 stalled downloads asking for 8 MiB buffers (default limits: 4 MiB booked at most; closed below 4 KiB/s over 5 s windows from 10 s)");
    let server = start(&[]);
    let before = tcp_mem_mib();
    let t0 = Instant::now();
    // One address each (no cap or budget in the way); a small receive buffer on the
    // client side, so that what stays queued is the server's.
    let stalled: Vec<TcpStream> = (0..64)
        .map(|i| {
            let to: SocketAddr = server.tcp.parse().unwrap();
            let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            sock.set_recv_buffer_size(64 << 10).unwrap();
            sock.bind(
                &format!("127.0.1.{}:0", 1 + i)
                    .parse::<SocketAddr>()
                    .unwrap()
                    .into(),
            )
            .unwrap();
            sock.connect(&to.into()).unwrap();
            let mut s: TcpStream = sock.into();
            let w = welcome(
                &mut s,
                Hello {
                    rcvbuf: 8 << 20,
                    sndbuf: 8 << 20,
                },
            )
            .unwrap();
            assert_eq!(w.status, Accepted::Ok);
            let (h, n) = Request::Down(1 << 30).encode();
            s.write_all(&h[..n]).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let stalled_mem = tcp_mem_mib();
    let held = server_sockets(server.port());
    let until = Instant::now() + Duration::from_secs(40);
    while server_sockets(server.port()) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let closed_after = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    let after_server = tcp_mem_mib();
    drop(stalled);
    std::thread::sleep(Duration::from_millis(500));
    let after_all = tcp_mem_mib();
    let m = metrics(&server);
    println!(
        "TCP memory (whole machine, /proc/net/sockstat): {before:.1} MiB before, {stalled_mem:.1} MiB with 64 stalled ({held} server sockets), {after_server:.1} MiB once the server closed them ({closed_after:.1} s after they opened; {} server sockets left, the clients still holding theirs), {after_all:.1} MiB after the clients closed",
        server_sockets(server.port())
    );
    println!(
        "buffer requests capped: {}; refusals counted: {}",
        m.get("nowcast_serve_buffers_capped_total")
            .copied()
            .unwrap_or(0.0),
        rejections(&m)
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("nowcast serve hostile bench: run it with cargo bench");
        return;
    }
    println!(
        "machine: {} cores; load {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    corpus_section();
    connections_section();
    budget_section();
    udp_section();
    memory_section();
}
