//! Hostile clients against a real `nowcast serve` on loopback: the corpus of malformed
//! hellos and requests, tricklers and clients that stop reading, forged UDP replies, floods
//! from many 127.x.y.z sources, many sessions from one address, oversized buffer requests
//! and a client over its byte budget. Each is answered or refused, and a control client is
//! served meanwhile. 127.0.0.0/8 is all loopback, so sockets bound to 127.0.0.2, 127.0.0.3, …
//! are distinct sources.

mod common;

use common::{corpus, nowcast, records, text, Server};
use nowcast::wire::{self, Hello, Kind, Refusal, Request, Status as Accepted, UdpProbe, Welcome};
use nowcast_core::record::{Metric, Status};
use socket2::{Domain, Socket, Type};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: &str, to: &str) -> TcpStream {
    let to: SocketAddr = to.parse().unwrap();
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into())
        .unwrap();
    s.connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Everything the server sends until it closes (a reset ends it too), within `limit`.
fn read_to_close(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let until = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return got,
        }
    }
    panic!(
        "the server did not close within {limit:?} ({} bytes read)",
        got.len()
    );
}

fn welcome(s: &mut TcpStream, hello: Hello) -> Welcome {
    s.write_all(&hello.encode()).unwrap();
    let mut w = [0u8; Welcome::LEN];
    s.read_exact(&mut w).unwrap();
    Welcome::decode(&w).unwrap()
}

/// A well-behaved session from `from`: hello, echo, quit; how long it took.
fn control(tcp: &str, from: &str) -> Duration {
    let t0 = Instant::now();
    let mut s = connect_from(from, tcp);
    let w = welcome(&mut s, Hello::default());
    assert_eq!(w.status, Accepted::Ok, "the control client is served");
    s.write_all(b"P\x2a").unwrap();
    let mut echo = [0u8; 2];
    s.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"P\x2a");
    s.write_all(b"Q").unwrap();
    t0.elapsed()
}

/// Whether what the server sent matches a corpus expectation.
fn meets(expect: &str, got: &[u8]) -> bool {
    let status = |s: Accepted| {
        got.len() >= Welcome::LEN
            && Welcome::decode(&got[..Welcome::LEN]).map(|w| w.status) == Ok(s)
    };
    match expect {
        "nothing" => got.is_empty(),
        "bad-hello" => got.len() == Welcome::LEN && status(Accepted::BadHello),
        "ok" => got.len() == Welcome::LEN && status(Accepted::Ok),
        other => {
            let want =
                corpus::bytes_of(other.strip_prefix("ok+").expect("an expectation")).unwrap();
            status(Accepted::Ok) && got[Welcome::LEN..] == want[..]
        }
    }
}

#[test]
fn the_tcp_corpus_is_answered_or_refused_and_the_server_keeps_serving() {
    let server = Server::start(&["--bind", "127.0.0.1", "--handshake", "2"]);
    let cases = corpus::load("tcp.txt");
    let pass = || {
        for case in &cases {
            let mut s = connect_from("127.0.0.1", &server.tcp);
            // A server that refuses early stops reading: a failed write is an answer too.
            let _ = s.write_all(&case.bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let got = read_to_close(&mut s, Duration::from_secs(10));
            assert!(
                meets(&case.expect, &got),
                "{}: expected {}, got {} bytes {:?}",
                case.name,
                case.expect,
                got.len(),
                &got[..got.len().min(40)]
            );
        }
        control(&server.tcp, "127.0.0.2")
    };
    pass();
    let before = server.rss_kib();
    let mut latencies = Vec::new();
    for _ in 0..3 {
        latencies.push(pass());
    }
    let after = server.rss_kib();
    println!(
        "tcp corpus: {} cases x 3 passes answered or refused; control session {:?}; server RSS {before} -> {after} KiB",
        cases.len(),
        latencies
    );
    assert!(after < before + 4 * 1024, "RSS {before} -> {after} KiB");
    assert!(latencies.iter().all(|l| *l < Duration::from_secs(2)));
}

fn udp_from(from: &str, to: &str) -> UdpSocket {
    let u = UdpSocket::bind(format!("{from}:0")).unwrap();
    u.connect(to).unwrap();
    u
}

/// The datagrams that come back within `wait`.
fn replies(u: &UdpSocket, wait: Duration) -> Vec<Vec<u8>> {
    u.set_read_timeout(Some(wait)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = u.recv(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

#[test]
fn the_udp_corpus_is_answered_or_dropped_and_a_forged_reply_starts_no_loop() {
    let a = Server::start(&["--bind", "127.0.0.1"]);
    let b = Server::start(&["--bind", "127.0.0.1"]);
    let u = udp_from("127.0.0.1", &a.udp);
    for case in corpus::load("udp.txt") {
        u.send(&case.bytes).unwrap();
        let got = replies(&u, Duration::from_millis(150));
        match case.expect.as_str() {
            "answer" => {
                let mut want = case.bytes.clone();
                UdpProbe::mark_reply(&mut want);
                assert_eq!(got, [want], "{}", case.name);
            }
            _ => assert!(got.is_empty(), "{}: answered", case.name),
        }
    }
    // A's answer, delivered to B as a spoofed request would have it: B stays silent, so one
    // forged datagram cannot set two servers answering each other.
    let mut probe = [0u8; 64];
    UdpProbe::request(9, 9).encode(&mut probe);
    u.send(&probe).unwrap();
    let answer = replies(&u, Duration::from_millis(150))
        .pop()
        .expect("A answers");
    assert_eq!(UdpProbe::decode(&answer).unwrap().kind, Kind::Reply);
    let to_b = udp_from("127.0.0.1", &b.udp);
    to_b.send(&answer).unwrap();
    assert!(replies(&to_b, Duration::from_millis(300)).is_empty());
    // And a request to B is still answered.
    to_b.send(&probe).unwrap();
    assert_eq!(replies(&to_b, Duration::from_millis(300)).len(), 1);
}

/// Sockets of the server's port other than its listener and TIME_WAIT entries (which hold no
/// buffers), from /proc/net/tcp: what the
/// kernel still holds for sessions.
fn server_side_sockets(port: u16) -> usize {
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

#[test]
fn tricklers_slow_hellos_and_clients_that_stop_reading_are_closed() {
    let server = Server::start(&[
        "--bind",
        "127.0.0.1",
        "--handshake",
        "1",
        "--rate-grace",
        "1",
        "--rate-window",
        "1",
        "--min-rate",
        "16K",
    ]);
    // A hello that never completes: closed at the handshake deadline, nothing said.
    let t0 = Instant::now();
    let mut slow = connect_from("127.0.0.1", &server.tcp);
    slow.write_all(b"NWCT").unwrap();
    assert!(read_to_close(&mut slow, Duration::from_secs(5)).is_empty());
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // A ping trickled a byte at a time, each well inside the idle limit: the minimum rate
    // closes it, and the reason comes in place of the echo.
    let t0 = Instant::now();
    let mut trickler = connect_from("127.0.0.1", &server.tcp);
    assert_eq!(
        welcome(&mut trickler, Hello::default()).status,
        Accepted::Ok
    );
    trickler.write_all(b"P").unwrap();
    let got = read_to_close(&mut trickler, Duration::from_secs(6));
    assert_eq!(got, Refusal::Slow.code(), "{got:?}");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());

    // Clients that ask for a download with big buffers and never read: closed, and the
    // kernel's memory for them released at once (an abort, not a close that waits).
    let mut stalled: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = connect_from("127.0.0.2", &server.tcp);
            let w = welcome(
                &mut s,
                Hello {
                    rcvbuf: 0,
                    sndbuf: 8 << 20,
                },
            );
            assert!(w.sndbuf <= 4 << 20, "the buffer is capped: {w:?}");
            s.write_all(&Request::Down(64 << 20).encode().0[..wire::BULK_HEADER_LEN])
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(server_side_sockets(server.port()) >= 8);
    let until = Instant::now() + Duration::from_secs(6);
    while server_side_sockets(server.port()) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        server_side_sockets(server.port()),
        0,
        "the server holds nothing for stalled clients that still hold their end"
    );
    assert!(control(&server.tcp, "127.0.0.3") < Duration::from_secs(2));
    stalled.clear();
}

#[test]
fn a_flood_from_many_loopback_sources_is_limited_per_client_and_by_prefix() {
    for (prefix, per_source) in [("32", true), ("24", false)] {
        let server = Server::start(&[
            "--bind",
            "127.0.0.1",
            "--udp-packets-per-second",
            "50",
            "--ipv4-prefix",
            prefix,
        ]);
        let mut probe = [0u8; 64];
        UdpProbe::request(1, 1).encode(&mut probe);
        let sources: Vec<UdpSocket> = (2..34)
            .map(|i| udp_from(&format!("127.0.0.{i}"), &server.udp))
            .collect();
        // 6,400 datagrams over about half a second: paced so that the kernel drops none
        // before the server sees them.
        let t0 = Instant::now();
        for _ in 0..200 {
            for s in &sources {
                let _ = s.send(&probe);
            }
            std::thread::sleep(Duration::from_micros(2500));
        }
        let elapsed = t0.elapsed().as_secs_f64();
        let answered: Vec<usize> = sources
            .iter()
            .map(|s| replies(s, Duration::from_millis(100)).len())
            .collect();
        let total: usize = answered.iter().sum();
        // A bucket holds 50 and refills 50 a second.
        let bound = 50.0 + 50.0 * (elapsed + 0.2);
        if per_source {
            assert!(answered.iter().all(|&n| n as f64 <= bound), "{answered:?}");
            assert!(
                answered.iter().all(|&n| n >= 40),
                "each source its own share: {answered:?}"
            );
        } else {
            assert!(
                (total as f64) <= bound,
                "one /24 shares one bucket: {total}"
            );
        }
        println!(
            "udp flood, /{prefix}: {} datagrams in from 32 sources, {total} answered",
            200 * 32
        );
        // A client of another network is answered meanwhile.
        let other = udp_from("127.1.0.1", &server.udp);
        other.send(&probe).unwrap();
        assert_eq!(replies(&other, Duration::from_millis(300)).len(), 1);
    }
}

#[test]
fn many_sessions_from_one_network_are_capped_and_a_control_client_is_served() {
    for (prefix, sources) in [("32", 1u8..2), ("24", 2..40)] {
        let server = Server::start(&["--bind", "127.0.0.1", "--ipv4-prefix", prefix]);
        let mut held = Vec::new();
        let mut busy = 0;
        for i in 0..60 {
            let from = format!(
                "127.0.0.{}",
                sources.start + i % (sources.end - sources.start)
            );
            let mut s = connect_from(&from, &server.tcp);
            match welcome(&mut s, Hello::default()) {
                Welcome {
                    status: Accepted::Ok,
                    ..
                } => held.push(s),
                Welcome {
                    status: Accepted::ClientBusy,
                    retry_after_ms,
                    ..
                } => {
                    assert!(retry_after_ms > 0);
                    busy += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((held.len(), busy), (8, 52), "/{prefix}");
        // The client prints the reason.
        if prefix == "32" {
            let out = nowcast(&["tcp", &server.tcp, "--json"], LIMIT);
            assert!(
                text(&out.stderr).contains(
                    "the server is busy for this client (its network has as many sessions open as it may); try again in 5.0 s"
                ),
                "{}",
                text(&out.stderr)
            );
        }
        // Another network is served; so is the same one once a place is free.
        assert!(control(&server.tcp, "127.1.0.1") < Duration::from_secs(2));
        held.pop();
        std::thread::sleep(Duration::from_millis(200));
        let from = format!("127.0.0.{}", sources.start);
        assert!(control(&server.tcp, &from) < Duration::from_secs(2));
    }
}

#[test]
fn the_byte_budget_refuses_with_a_reason_the_client_prints() {
    let server = Server::start(&[
        "--bind",
        "127.0.0.1",
        "--max-payload",
        "2M",
        "--burst-bytes",
        "3M",
        "--bytes-per-minute",
        "1M",
    ]);
    let out = nowcast(
        &[
            "tcp",
            &server.tcp,
            "--size",
            "2M",
            "--direction",
            "both",
            "--json",
        ],
        LIMIT,
    );
    let recs = records(&out);
    let up = recs
        .iter()
        .find(|r| r.metric == Metric::BandwidthUp)
        .unwrap();
    assert_eq!(up.status, Status::Ok, "{up:?}");
    let down = recs
        .iter()
        .find(|r| r.metric == Metric::BandwidthDown)
        .unwrap();
    assert_eq!(down.status, Status::Error);
    assert!(
        down.error.as_deref().unwrap().ends_with(
            "bandwidth down: the server refused 2097152 bytes: this client's network has used up its byte budget on the server"
        ),
        "{down:?}"
    );
    // An upload over the budget: the server refuses before reading it, and the client
    // shows the reason rather than the reset that cut its writes.
    let out = nowcast(&["tcp", &server.tcp, "--size", "2M", "--json"], LIMIT);
    let err = text(&out.stderr);
    assert!(err.contains("bandwidth: the server refused 2097152 bytes: this client's network has used up its byte budget"), "{err}");
}

#[test]
fn pipelined_pings_are_charged_what_they_cost_the_server() {
    // A budget of 1 MB at once (refilled at 1 MB a minute): a ping is charged 1 KiB, so a
    // client that sends 4,000 pings without waiting for their echoes gets at most a thousand
    // echoes, then the budget's refusal and the end of the session. Charged its two bytes
    // each way, it had all 4,000 and the session went on.
    let server = Server::start(&[
        "--bind",
        "127.0.0.1",
        "--max-payload",
        "512K",
        "--burst-bytes",
        "1M",
        "--bytes-per-minute",
        "1M",
        "--metrics",
        "127.0.0.1:0",
    ]);
    let mut s = connect_from("127.0.0.1", &server.tcp);
    assert_eq!(welcome(&mut s, Hello::default()).status, Accepted::Ok);
    let pings: Vec<u8> = (0..4000u32)
        .flat_map(|i| Request::Ping(i as u8).encode().0[..wire::PING_LEN].to_vec())
        .collect();
    // Written by another thread while this one reads, as the server answers: the session
    // ends with a reset (pings still unread), which discards what the client had not read.
    let mut writer = s.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        let _ = writer.write_all(&pings);
    });
    let got = read_to_close(&mut s, Duration::from_secs(10));
    writing.join().unwrap();
    let echoes = got
        .chunks(wire::PING_LEN)
        .take_while(|c| c[0] == wire::OP_PING)
        .count();
    assert!(echoes <= 1030, "{echoes} echoes");
    // Ended for the byte budget.
    let url = server.metrics.clone().expect("a metrics address");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let mut m = TcpStream::connect(&addr).unwrap();
    m.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    m.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    m.read_to_string(&mut page).unwrap();
    assert!(
        page.contains("\nnowcast_serve_limit_rejections_total{limit=\"byte_budget\"} 1\n"),
        "{page}"
    );
}

#[test]
fn metrics_count_every_refusal_and_only_get_metrics_is_served() {
    let server = Server::start(&["--bind", "127.0.0.1", "--metrics", "127.0.0.1:0"]);
    let url = server.metrics.clone().expect("a metrics address");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let get = |request: &str| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let u = udp_from("127.0.0.1", &server.udp);
    let mut reply = [0u8; 64];
    UdpProbe::request(1, 1).encode(&mut reply);
    UdpProbe::mark_reply(&mut reply);
    u.send(&reply).unwrap();
    let mut raw = connect_from("127.0.0.1", &server.tcp);
    welcome(&mut raw, Hello::default());
    raw.write_all(&wire::bulk_header(wire::OP_BULK_DOWN, u64::MAX))
        .unwrap();
    read_to_close(&mut raw, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(200));
    let page = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    for line in [
        "nowcast_serve_limit_rejections_total{limit=\"udp_reply\"} 1",
        "nowcast_serve_limit_rejections_total{limit=\"payload_cap\"} 1",
        "nowcast_serve_sessions_total 1",
        "nowcast_serve_datagrams_total{direction=\"in\"} 1",
        "nowcast_serve_datagrams_total{direction=\"out\"} 0",
        "nowcast_serve_limit{name=\"max_sessions_per_client\"} 8",
    ] {
        assert!(page.contains(&format!("\n{line}\n")), "{line} in\n{page}");
    }
    assert!(get("GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
    assert!(get("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
    assert!(get("NWCT\x02\x00\r\n\r\n").starts_with("HTTP/1.1 400 "));
    // A client that says nothing holds the listener at most its deadline.
    let _silent = TcpStream::connect(&addr).unwrap();
    let t0 = Instant::now();
    assert!(get("GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200 "));
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn the_default_limits_let_a_64_mib_probe_and_a_default_udp_burst_through() {
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let out = nowcast(
        &[
            "tcp",
            &server.tcp,
            "--size",
            "64M",
            "--direction",
            "both",
            "--count",
            "3",
            "--period",
            "0",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recs = records(&out);
    assert_eq!(recs.len(), 15);
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
    let out = nowcast(&["udp", &server.udp, "--json"], LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let loss = records(&out)
        .into_iter()
        .find(|r| r.metric == Metric::Loss)
        .unwrap();
    assert_eq!(loss.value, Some(0.0));
}
