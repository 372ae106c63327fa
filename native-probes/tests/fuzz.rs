//! Fuzzing of every decoder that reads bytes from the network or a file, as bounded property
//! tests: random inputs and mutations of valid ones (the corpus in `tests/corpus/` and the
//! schema's example records). Each must never panic, and every error must name the place:
//! the message (`hello:`, `welcome:`, `request:`, `reply:`, `udp probe:`), the host and step
//! of a probe, the line of a file, the field of a record.
//!
//! `NOWCAST_FUZZ_CASES` sets the cases per property (default 1024, about a second in all);
//! the benchmark runs many more. Failures are kept in `tests/fuzz.proptest-regressions` and
//! replayed first on every run.

mod common;

use common::corpus;
use nowcast::series::{SeriesSet, Settings};
use nowcast::series_input::{read_values, Column, Format, ReadError, ReadOptions, QUOTE_CHARS};
use nowcast::serve::limits::{Prefixes, Rate, UdpGate, UdpLimits};
use nowcast::serve::metrics;
use nowcast::tcp::session::{Action, Config, Event, Session};
use nowcast::udp::burst::{Burst, Plan};
use nowcast::wire::{self, Hello, Kind, Reply, Request, UdpProbe, Welcome, WireError};
use nowcast_core::import::Select;
use nowcast_core::probed::Overrides;
use nowcast_core::record::{Metric, Record, Status, Transport};
use nowcast_core::transfer::Start;
use proptest::prelude::*;
use std::net::IpAddr;

fn cases() -> u32 {
    std::env::var("NOWCAST_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

/// One edit of a mutation: what, where, with which byte.
type Edit = (u8, u16, u8);

/// `seed` after `edits`: bytes set, bits flipped, bytes inserted and removed, a range
/// repeated, the end cut.
fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for &(op, pos, byte) in edits {
        let at = usize::from(pos) % (v.len() + 1);
        match op % 6 {
            0 if at < v.len() => v[at] = byte,
            1 if at < v.len() => v[at] ^= 1 << (byte % 8),
            2 => v.insert(at, byte),
            3 if at < v.len() => {
                v.remove(at);
            }
            4 => {
                let end = (at + usize::from(byte % 32)).min(v.len());
                let range = v[at..end].to_vec();
                v.splice(at..at, range);
            }
            5 => v.truncate(at),
            _ => {}
        }
    }
    v
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(any::<Edit>(), 0..8)
}

/// Random bytes, or a corpus case mutated.
fn bytes_from(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (prop::sample::select(seeds), edits()).prop_map(|(s, e)| mutate(&s, &e)),
    ]
}

fn tcp_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = corpus::load("tcp.txt")
        .into_iter()
        .map(|c| c.bytes[..c.bytes.len().min(256)].to_vec())
        .collect();
    // What the server sends, for the client's decoders.
    let w = Welcome {
        status: wire::Status::Ok,
        max_payload: 1 << 30,
        rcvbuf: 1 << 20,
        sndbuf: 1 << 20,
        retry_after_ms: 0,
    };
    seeds.push(w.encode().to_vec());
    seeds.push(
        Welcome::refusal(wire::Status::OverBudget, 1500)
            .encode()
            .to_vec(),
    );
    seeds.extend([
        wire::ACK.to_vec(),
        wire::REFUSED.to_vec(),
        b"P\x05".to_vec(),
    ]);
    seeds
}

fn udp_seeds() -> Vec<Vec<u8>> {
    corpus::load("udp.txt")
        .into_iter()
        .map(|c| c.bytes[..c.bytes.len().min(128)].to_vec())
        .collect()
}

/// A wire error names the message it was decoding.
fn names(e: &WireError, what: &str) -> bool {
    e.to_string().starts_with(&format!("{what}: "))
}

proptest! {
    #![proptest_config(config())]

    /// The server's decoders: a hello, then the stream of requests, cut where the server
    /// would cut it.
    #[test]
    fn the_server_decodes_any_client_bytes(b in bytes_from(tcp_seeds())) {
        match Hello::decode(&b) {
            Ok(h) => prop_assert_eq!(Hello::decode(&h.encode()), Ok(h)),
            Err(e) => prop_assert!(names(&e, "hello"), "{e}"),
        }
        let mut rest = &b[b.len().min(Hello::LEN)..];
        while let Some(&op) = rest.first() {
            let len = match Request::len(op) {
                Ok(len) => len,
                Err(e) => {
                    prop_assert!(names(&e, "request"), "{e}");
                    break;
                }
            };
            match Request::decode(rest) {
                Ok(r) => {
                    let (enc, n) = r.encode();
                    prop_assert_eq!(&enc[..n], &rest[..len]);
                    // The payload of an upload follows; the server drains it.
                    let skip = match r {
                        Request::Up(n) => usize::try_from(n).unwrap_or(usize::MAX),
                        _ => 0,
                    };
                    rest = &rest[len.saturating_add(skip).min(rest.len())..];
                }
                Err(e) => {
                    prop_assert!(names(&e, "request"), "{e}");
                    prop_assert!(rest.len() < len, "only a message cut short fails here");
                    break;
                }
            }
        }
    }

    /// The client's decoders: welcomes, replies and UDP probes.
    #[test]
    fn the_client_decodes_any_server_bytes(b in bytes_from(tcp_seeds()), u in bytes_from(udp_seeds())) {
        match Welcome::decode(&b) {
            Ok(w) => prop_assert_eq!(Welcome::decode(&w.encode()), Ok(w)),
            Err(e) => prop_assert!(names(&e, "welcome"), "{e}"),
        }
        match Reply::decode(&b) {
            Ok(_) => prop_assert!(b.len() >= 2),
            Err(e) => prop_assert!(names(&e, "reply"), "{e}"),
        }
        match UdpProbe::decode(&u) {
            Ok(p) => {
                let mut again = u.clone();
                p.encode(&mut again);
                prop_assert_eq!(&again, &u);
            }
            Err(e) => prop_assert!(names(&e, "udp probe"), "{e}"),
        }
        let mut burst = Burst::new(Plan { first_seq: 0, count: 4, interval: 1, wait: 10 }, 0, 100);
        burst.sent(1, 0);
        let reply = burst.datagram_received(&u, 5);
        let kind = UdpProbe::decode(&u).map(|p| p.kind);
        prop_assert!(reply.is_none() || kind == Ok(Kind::Reply), "{:?} taken as a reply", kind);
    }

    /// The probe session fed anything the server may answer, any failure at any step: every
    /// record is valid, and every error names the host and the step.
    #[test]
    fn a_probe_session_survives_any_server(
        replies in prop::collection::vec((0u8..6, bytes_from(tcp_seeds())), 0..10),
        exact in any::<bool>(),
        auto in any::<bool>(),
    ) {
        let cfg = Config {
            host: "h:1".into(),
            size: if auto {
                nowcast::tcp::ProbeSize::Auto
            } else {
                nowcast::tcp::ProbeSize::Fixed(1000)
            },
            sndbuf: None,
            rcvbuf: None,
            hello: Hello::default(),
            deadline_ms: 60_000.0,
            bulk: vec![Metric::BandwidthUp, Metric::BandwidthDown],
        };
        let settings = Settings {
            source: "nowcast tcp".into(),
            to: cfg.host.clone(),
            transport: Transport::Tcp,
            period_ms: None,
            overrides: Overrides::default(),
        };
        let mut set = SeriesSet::new(&cfg.metrics(), &settings).unwrap();
        let mut session = Session::new(&cfg, &mut set, 3, 1.7e12);
        let mut replies = replies.into_iter();
        let mut now = 1_000;
        for _ in 0..64 {
            let action = session.poll(now);
            let mut read;
            let event = match action {
                Action::Done => break,
                Action::Connect { .. } => Event::Connected {
                    started: now, ended: now + 1_000, local: None, sndbuf: 1, rcvbuf: 1,
                },
                Action::Exchange { read: n, .. } => match replies.next() {
                    Some((kind, bytes)) if kind < 4 => {
                        read = bytes;
                        // The edge reads exactly n bytes; the core must also take any.
                        if exact {
                            read.resize(n, 0);
                        }
                        Event::Exchanged { started: now, ended: now + 1_000, read: &read }
                    }
                    Some((4, _)) => Event::TimedOut { started: now, at: now + 5 },
                    _ => Event::Failed { error: "the server closed the connection".into() },
                },
                Action::Discard { .. } => Event::Discarded { ended: now + 1_000 },
                Action::SenderStart => Event::SenderStart(match replies.next() {
                    Some((0, _)) => Start::Startup,
                    Some((1, _)) => Start::SlowStart,
                    Some((2, _)) => Start::Over,
                    _ => Start::Unknown,
                }),
                Action::Quit { .. } => Event::Closed,
            };
            session.handle(event);
            now += 10_000;
        }
        for r in session.into_records() {
            prop_assert!(r.validate().is_ok(), "{r:?}");
            if r.status == Status::Error {
                let e = r.error.as_deref().unwrap_or_default();
                let step = ["connect", "hello", "rtt", "bandwidth"]
                    .iter()
                    .any(|s| e.starts_with(&format!("h:1: {s}")));
                prop_assert!(step, "{e}");
            }
        }
    }

    /// The UDP gate: whatever arrives from wherever, it answers only requests of at most the
    /// cap, from unprivileged ports, and each client within its rate.
    #[test]
    fn the_udp_gate_answers_only_requests_within_the_rates(
        datagrams in prop::collection::vec(
            (bytes_from(udp_seeds()), 0u8..4, any::<u16>(), 0u64..2_000_000),
            1..64,
        ),
    ) {
        let limits = UdpLimits {
            max_datagram: 100,
            client: [Rate::per_second(5.0), Rate::per_second(10_000.0)],
            total: [Rate::per_second(1e6), Rate::per_second(1e9)],
            prefixes: Prefixes::default(),
        };
        let mut gate = UdpGate::new(limits, 7);
        let mut now = 0;
        let mut answered = [0u32; 4];
        for (d, who, port, dt) in datagrams {
            now += dt;
            let ip = IpAddr::from([192, 0, 2, who]);
            if gate.judge(&d, ip, port, now).is_ok() {
                let p = UdpProbe::decode(&d);
                let request = matches!(p, Ok(UdpProbe { kind: Kind::Request, .. }));
                prop_assert!(request, "answered {:?}", p);
                prop_assert!(d.len() <= 100 && port >= 1024, "{} bytes from port {port}", d.len());
                answered[usize::from(who)] += 1;
            }
        }
        let most = 5.0 + 5.0 * now as f64 / 1e9;
        prop_assert!(answered.iter().all(|&n| f64::from(n) <= most + 1e-9), "{answered:?} in {now} ns");
    }

    /// The metrics listener's request parsing.
    #[test]
    fn the_metrics_route_takes_any_head(b in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (prop::sample::select(vec![
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            b"POST / HTTP/1.0\n\n".to_vec(),
        ]), edits()).prop_map(|(s, e)| mutate(&s, &e)),
    ]) {
        let r = metrics::route(&b);
        prop_assert!(r != metrics::Route::Metrics || b.starts_with(b"GET /metrics"));
        let _ = metrics::head_complete(&b);
    }
}

fn series_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(corpus::dir().join("series"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    seeds
}

/// Text made of what series files are made of.
fn series_text() -> impl Strategy<Value = Vec<u8>> {
    let alphabet: Vec<u8> = b"0123456789.,,\t\n\n\r\"#{}:e-+ xNa\xff".to_vec();
    prop_oneof![
        prop::collection::vec(prop::sample::select(alphabet), 0..200),
        (prop::sample::select(series_seeds()), edits()).prop_map(|(s, e)| mutate(&s, &e)),
    ]
}

fn record_seeds() -> Vec<Vec<u8>> {
    let examples =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../public/schema/examples");
    let valid = std::fs::read_to_string(examples.join("valid.ndjson")).unwrap();
    let mut seeds: Vec<Vec<u8>> = valid.lines().map(|l| l.as_bytes().to_vec()).collect();
    for e in std::fs::read_dir(examples.join("invalid")).unwrap() {
        seeds.push(std::fs::read(e.unwrap().path()).unwrap());
    }
    seeds
}

proptest! {
    #![proptest_config(config())]

    /// The file reader: any bytes, any options. Values or an error that names a line that
    /// exists and quotes at most a prefix of it.
    #[test]
    fn the_series_reader_takes_any_file(
        text in series_text(),
        format in prop::sample::select(vec![
            Format::Auto, Format::Plain, Format::Csv, Format::Tsv, Format::Ndjson, Format::Iperf3,
            Format::Ping, Format::Mtr, Format::Irtt, Format::Sockperf,
        ]),
        column in prop::option::of(prop_oneof![
            (0usize..4).prop_map(Column::Index),
            Just(Column::Name("value".into())),
        ]),
        skip_bad in any::<bool>(),
        max_line in prop::sample::select(vec![4usize, 32, 4096]),
    ) {
        let opts = ReadOptions {
            format,
            select: Select { column, ..Select::default() },
            skip_bad,
            max_line,
        };
        let mut values = 0;
        let lines = text.split(|&b| b == b'\n').count() as u64;
        match read_values(text.as_slice(), &opts, |v| {
            assert!(v.is_finite());
            values += 1;
        }) {
            Ok(stats) => {
                prop_assert_eq!(stats.values, values);
                prop_assert!(stats.lines <= lines);
            }
            Err(ReadError::Bad(b)) => {
                prop_assert!(b.line >= 1 && b.line <= lines, "line {} of {lines}", b.line);
                prop_assert!(b.text.chars().count() <= QUOTE_CHARS, "{b}");
                let prefix = format!("line {}: ", b.line);
                prop_assert!(b.to_string().starts_with(&prefix), "{b}");
                prop_assert!(b.to_string().chars().count() < 400, "{b}");
            }
            Err(ReadError::Usage(m)) => prop_assert!(m.chars().count() < 2_000, "{m}"),
            Err(ReadError::Io(e)) => prop_assert!(false, "a slice cannot fail to read: {e}"),
        }
    }

    /// `Record::parse` (core/src/record.rs): any line. A record, which writes back to the
    /// same record, or an error that names the field at fault or the place in the JSON.
    #[test]
    fn record_parse_takes_any_line(b in prop_oneof![
        prop::collection::vec(prop::sample::select(b"{}[]\":,0123456789.e-tfnul \\abcdegimrsv_".to_vec()), 0..120),
        (prop::sample::select(record_seeds()), edits()).prop_map(|(s, e)| mutate(&s, &e)),
    ]) {
        let line = String::from_utf8_lossy(&b);
        match Record::parse(&line) {
            Ok(r) => {
                let again = Record::parse(&r.to_line());
                prop_assert_eq!(again.as_ref(), Ok(&r), "{}", r.to_line());
            }
            Err(e) => {
                let named = match &e.field {
                    Some(f) => !f.is_empty(),
                    None => e.message.contains(" column ") || e.message == "a record must be a JSON object",
                };
                prop_assert!(named, "{e}");
            }
        }
    }
}

/// The campaign examples shipped with the project, as seeds of the campaign reader.
fn campaign_seeds() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(
        !seeds.is_empty(),
        "no campaign examples in {}",
        dir.display()
    );
    seeds
}

proptest! {
    #![proptest_config(config())]

    /// The campaign reader (`nowcast campaign FILE`): any text. A campaign, or an error with
    /// a bounded message; never a panic, and no file is touched (the directory given does
    /// not exist).
    #[test]
    fn the_campaign_reader_takes_any_file(b in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..400),
        (prop::sample::select(campaign_seeds()), edits()).prop_map(|(s, e)| mutate(&s, &e)),
    ]) {
        let text = String::from_utf8_lossy(&b);
        let dir = std::path::Path::new("/nonexistent/nowcast-fuzz");
        if let Err(e) = nowcast::campaign::config::parse(&text, dir, "fuzz") {
            let m = format!("{e:#}");
            prop_assert!(!m.is_empty());
            prop_assert!(m.chars().count() < 2_000 + text.chars().count(), "{m}");
        }
    }
}
