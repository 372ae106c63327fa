//! `nowcast tcp` against a real `nowcast serve` on loopback.

use crate::common;

use common::{nowcast, records, shows, summary, text, Server};
use nowcast_core::record::{Metric, Record, Status};
use std::net::TcpListener;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn periodic_probes_write_schema_records_with_forecasts_and_the_server_stops_cleanly() {
    let mut server = Server::start(&["--bind", "127.0.0.1"]);
    let out_file = std::env::temp_dir().join(format!("nowcast-tcp-{}.ndjson", std::process::id()));
    let out = nowcast(
        &[
            "tcp",
            &server.tcp,
            "--count",
            "4",
            "--period",
            "0.05",
            "--size",
            "256",
            "--sndbuf",
            "256K",
            "--server-rcvbuf",
            "512K",
            "--json",
            "--out",
            out_file.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recs = records(&out);
    assert_eq!(recs.len(), 16, "four experiments of four metrics");
    let saved = std::fs::read_to_string(&out_file).unwrap();
    let _ = std::fs::remove_file(&out_file);
    assert_eq!(saved, text(&out.stdout), "--out holds the same records");
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.seq, Some(i as u64 / 4));
        assert_eq!(r.source, "nowcast tcp");
        assert_eq!(r.to, server.tcp);
        assert!(r.timeout_ms.is_some(), "every probe had a timeout in force");
        let p = r.probe.as_ref().unwrap();
        // Linux grants twice the size asked, for its bookkeeping.
        assert_eq!(p.sndbuf_bytes, Some(512 * 1024), "{p:?}");
        // From the second experiment on, each value carries the forecast made before it.
        assert_eq!(r.forecast.is_some(), i >= 4, "{r:?}");
    }
    let metrics: Vec<Metric> = recs[..4].iter().map(|r| r.metric).collect();
    assert_eq!(
        metrics,
        [
            Metric::HandshakeRtt,
            Metric::Rtt,
            Metric::RttNagle,
            Metric::BandwidthUp
        ]
    );
    let nagle: Vec<Option<bool>> = recs[1..3]
        .iter()
        .map(|r| r.probe.as_ref().unwrap().nagle)
        .collect();
    assert_eq!(nagle, [Some(false), Some(true)]);
    for bw in recs.iter().filter(|r| r.metric == Metric::BandwidthUp) {
        let p = bw.probe.as_ref().unwrap();
        assert_eq!(p.payload_bytes, Some(256 * 1024));
        let raw = p.raw_ms.unwrap();
        let sub = p.rtt_subtracted_ms.unwrap();
        assert!(sub < raw);
        // The reported rate is the payload over the raw time less the subtracted RTT.
        let expect = 256.0 * 1024.0 * 8.0 / ((raw - sub) / 1e3) / 1e6;
        assert!((bw.value.unwrap() - expect).abs() < 1e-6 * expect);
        if bw.seq == Some(0) {
            // The first RTT, where it leaves half the raw time (core/src/transfer.rs); on a
            // busy machine a 256 KiB upload on loopback can take under twice a slow RTT.
            let rtt = recs[1].value.unwrap();
            let want = if raw - rtt >= raw / 2.0 { rtt } else { 0.0 };
            assert_eq!(
                sub, want,
                "the first subtraction is the first RTT (raw {raw} ms)"
            );
        }
    }
    for r in recs
        .iter()
        .filter(|r| matches!(r.metric, Metric::Rtt | Metric::RttNagle))
    {
        let v = r.value.unwrap();
        assert!(v > 0.0 && v < 50.0, "loopback RTT {v} ms");
    }
    assert!(server.terminate(), "the server exits 0 on SIGTERM");
}

#[test]
fn the_table_is_for_people_and_a_refused_connection_names_host_step_and_os_error() {
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let out = nowcast(&["tcp", &server.tcp, "--size", "16"], LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("rtt_nagle ms") && table.contains("buffers granted"),
        "{table}"
    );
    drop(server);

    // A port with nothing behind it: bind then drop a listener to find one.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{port}");
    let out = nowcast(&["tcp", &target, "--json"], LIMIT);
    assert_eq!(out.status.code(), Some(1), "nothing measured: ping's 1");
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{target}: connect: Connection refused")),
        "{err}"
    );
    let recs = records(&out);
    let metrics: Vec<Metric> = recs.iter().map(|r| r.metric).collect();
    assert_eq!(
        metrics,
        [
            Metric::HandshakeRtt,
            Metric::Rtt,
            Metric::RttNagle,
            Metric::BandwidthUp
        ],
        "every series asked for has its record: {recs:?}"
    );
    assert!(recs.iter().all(|r| r.status == Status::Error), "{recs:?}");
    // Only the handshake was tried; the later steps say why they were not.
    assert_eq!(
        recs[2].error.as_deref(),
        Some(
            format!("{target}: rtt with Nagle on: not tried because the connect step (handshake_rtt) failed")
                .as_str()
        )
    );
    assert!(
        err.contains(
            "no handshake_rtt, rtt, rtt_nagle or bandwidth_up measured: the probe of each failed"
        ),
        "{err}"
    );

    // The table's summary says so too, for every experiment; the exit status is the same.
    let out = nowcast(&["tcp", &target, "--count", "3"], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    let rows = summary(&text(&out.stdout));
    assert_eq!(rows.len(), 4, "{rows:?}");
    for series in ["handshake_rtt", "rtt", "rtt_nagle"] {
        assert_eq!(rows[series], ["ms", "3", "100.0%", "-", "-", "-", "-", "-"]);
    }
    assert_eq!(rows["bandwidth_up"][1..3], ["3", "100.0%"], "{rows:?}");
    assert!(
        text(&out.stderr)
            .contains("no handshake_rtt, rtt, rtt_nagle or bandwidth_up measured: all 3 probes of each failed"),
        "{}",
        text(&out.stderr)
    );

    // A command that cannot run at all is told apart from one that measured nothing.
    let out = nowcast(&["tcp", &target, "--write-size", "0"], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = nowcast(&["tcp", &target, "--period", "-1"], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a_silent_peer_times_out_at_the_deadline_instead_of_hanging() {
    // A listener that accepts (the kernel completes the handshake) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = silent.local_addr().unwrap().to_string();
    let started = Instant::now();
    let out = nowcast(&["tcp", &target, "--json", "--deadline", "0.5"], LIMIT);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!out.status.success());
    let recs = records(&out);
    let hello = &recs[0];
    assert_eq!(
        (hello.metric, hello.status),
        (Metric::HandshakeRtt, Status::Timeout),
        "{recs:?}"
    );
    assert_eq!(hello.timeout_ms, Some(500.0));
    assert!(
        recs[1..].iter().all(|r| r.status == Status::Error
            && r.error
                .as_deref()
                .unwrap()
                .ends_with("not tried because the hello step (handshake_rtt) failed")),
        "{recs:?}"
    );
    assert!(text(&out.stderr).contains("timed out"));
}

#[test]
fn the_server_enforces_its_payload_and_session_caps() {
    let server = Server::start(&[
        "--bind",
        "127.0.0.1",
        "--max-payload",
        "100K",
        "--max-sessions-per-client",
        "1",
    ]);
    let out = nowcast(&["tcp", &server.tcp, "--size", "1M", "--json"], LIMIT);
    let recs = records(&out);
    let bw = recs
        .iter()
        .find(|r| r.metric == Metric::BandwidthUp)
        .unwrap();
    assert_eq!(bw.status, Status::Error);
    assert!(
        bw.error
            .as_ref()
            .unwrap()
            .contains("above the server's cap"),
        "{bw:?}"
    );
    // The RTT probes succeeded, but the bandwidth asked for was never measured.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no bandwidth_up measured: its probe failed"),
        "{}",
        text(&out.stderr)
    );

    // Hold the only session this client may have; the next one is refused as busy.
    let mut held = std::net::TcpStream::connect(&server.tcp).unwrap();
    std::io::Write::write_all(&mut held, &nowcast::wire::Hello::default().encode()).unwrap();
    let mut w = [0u8; nowcast::wire::Welcome::LEN];
    std::io::Read::read_exact(&mut held, &mut w).unwrap();
    let out = nowcast(&["tcp", &server.tcp, "--json"], LIMIT);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("busy"), "{}", text(&out.stderr));
}

#[test]
fn downloads_measure_bandwidth_down_after_the_upload_and_the_server_caps_them() {
    let server = Server::start(&["--bind", "127.0.0.1", "--max-payload", "2M"]);
    let out = nowcast(
        &[
            "tcp",
            &server.tcp,
            "--direction",
            "both",
            "--size",
            "1M",
            "--count",
            "2",
            "--period",
            "0",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recs = records(&out);
    let metrics: Vec<Metric> = recs.iter().map(|r| r.metric).collect();
    let session = [
        Metric::HandshakeRtt,
        Metric::Rtt,
        Metric::RttNagle,
        Metric::BandwidthUp,
        Metric::BandwidthDown,
    ];
    assert_eq!(metrics, [session, session].concat());
    for down in recs.iter().filter(|r| r.metric == Metric::BandwidthDown) {
        assert_eq!(down.status, Status::Ok, "{down:?}");
        let p = down.probe.as_ref().unwrap();
        assert_eq!(p.payload_bytes, Some(1 << 20));
        let (raw, sub) = (p.raw_ms.unwrap(), p.rtt_subtracted_ms.unwrap());
        let expect = (1u64 << 20) as f64 * 8.0 / ((raw - sub) / 1e3) / 1e6;
        assert!((down.value.unwrap() - expect).abs() < 1e-6 * expect);
    }

    // The client does not ask for more than the welcome's cap; a raw request above it is
    // refused by the server itself.
    let out = nowcast(
        &["tcp", &server.tcp, "--direction", "down", "--size", "3M"],
        LIMIT,
    );
    assert!(text(&out.stderr).contains("bandwidth down: 3145728 bytes is above the server's cap"));
    use nowcast::wire::{self, Hello, Welcome};
    use std::io::{Read, Write};
    let mut raw = std::net::TcpStream::connect(&server.tcp).unwrap();
    raw.set_read_timeout(Some(LIMIT)).unwrap();
    raw.write_all(&Hello::default().encode()).unwrap();
    let mut w = [0u8; Welcome::LEN];
    raw.read_exact(&mut w).unwrap();
    raw.write_all(&wire::bulk_header(wire::OP_BULK_DOWN, 3 << 20))
        .unwrap();
    let mut answer = [0u8; 2];
    raw.read_exact(&mut answer).unwrap();
    assert_eq!(answer, wire::REFUSED);
}

/// A ping of the start query is an echo until the session has had a download; after one,
/// the server answers where its sender is in its congestion control's start, read from its
/// socket: BBR's startup or over with BBR, slow start or over with a loss-based control.
#[test]
fn after_a_download_the_server_says_where_its_sender_is_in_its_start() {
    use nowcast::wire::{self, Hello, Welcome};
    use nowcast_core::transfer::Start;
    use std::io::{Read, Write};
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let mut raw = std::net::TcpStream::connect(&server.tcp).unwrap();
    raw.set_read_timeout(Some(LIMIT)).unwrap();
    raw.write_all(&Hello::default().encode()).unwrap();
    let mut w = [0u8; Welcome::LEN];
    raw.read_exact(&mut w).unwrap();
    let ask = |raw: &mut std::net::TcpStream| {
        raw.write_all(&[wire::OP_PING, wire::START_QUERY]).unwrap();
        let mut answer = [0u8; 2];
        raw.read_exact(&mut answer).unwrap();
        answer
    };
    assert_eq!(ask(&mut raw), [wire::OP_PING, wire::START_QUERY], "an echo");
    raw.write_all(&wire::bulk_header(wire::OP_BULK_DOWN, 1 << 20))
        .unwrap();
    let mut body = vec![0u8; wire::ACK.len() + (1 << 20)];
    raw.read_exact(&mut body).unwrap();
    assert_eq!(body[..2], wire::ACK);
    let start = wire::start_of(&ask(&mut raw)).unwrap();
    let control = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let could = if control.trim().starts_with("bbr") {
        [Start::Startup, Start::Over]
    } else {
        [Start::SlowStart, Start::Over]
    };
    assert!(could.contains(&start), "{start:?} with {control}");
}

#[test]
fn a_download_after_a_refused_upload_is_recorded_as_not_tried() {
    let server = Server::start(&["--bind", "127.0.0.1", "--max-payload", "1M"]);
    let args = [
        "tcp",
        &server.tcp,
        "--direction",
        "both",
        "--size",
        "2M",
        "--count",
        "2",
        "--period",
        "0",
    ];
    let out = nowcast(&[&args[..], &["--json"]].concat(), LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let recs = records(&out);
    let metrics: Vec<Metric> = recs.iter().map(|r| r.metric).collect();
    let session = [
        Metric::HandshakeRtt,
        Metric::Rtt,
        Metric::RttNagle,
        Metric::BandwidthUp,
        Metric::BandwidthDown,
    ];
    assert_eq!(metrics, [session, session].concat(), "{recs:?}");
    for (i, down) in recs
        .iter()
        .filter(|r| r.metric == Metric::BandwidthDown)
        .enumerate()
    {
        assert_eq!(down.status, Status::Error, "{down:?}");
        assert_eq!(
            down.error.as_deref(),
            Some(
                format!(
                    "{}: bandwidth down: not tried because the bandwidth step (bandwidth_up) failed",
                    server.tcp
                )
                .as_str()
            )
        );
        assert_eq!(down.seq, Some(i as u64));
        assert_eq!(down.timeout_ms, None, "the step never ran: {down:?}");
        down.validate().unwrap();
    }
    let err = text(&out.stderr);
    assert!(
        err.contains("no bandwidth_up or bandwidth_down measured: all 2 probes of each failed"),
        "{err}"
    );
    // One line per experiment names the failure and the series it left untried.
    assert_eq!(
        err.matches("; bandwidth_down not tried").count(),
        2,
        "each experiment's probes not tried are named: {err}"
    );
    assert!(
        !err.contains("not tried because"),
        "not one line per step: {err}"
    );

    // The table's summary has the download's row, as lost, like the upload's.
    let out = nowcast(&args, LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let rows = summary(&text(&out.stdout));
    for series in ["bandwidth_up", "bandwidth_down"] {
        let row = rows
            .get(series)
            .unwrap_or_else(|| panic!("{series}: {rows:?}"));
        assert_eq!(row[1..3], ["2", "100.0%"], "{series}: {rows:?}");
    }
}

#[test]
fn the_warm_up_echo_after_the_hello_is_made_but_not_counted() {
    // A scripted server that delays only the session's first echo by 300 ms: if that
    // exchange were timed, `rtt` would read at least 300 ms.
    use nowcast::wire::{self, Hello, Status as Accepted, Welcome};
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut hello = [0u8; Hello::LEN];
        s.read_exact(&mut hello).unwrap();
        Hello::decode(&hello).unwrap();
        let welcome = Welcome {
            status: Accepted::Ok,
            max_payload: 1 << 20,
            rcvbuf: 0,
            sndbuf: 0,
            retry_after_ms: 0,
        };
        s.write_all(&welcome.encode()).unwrap();
        let mut pings = Vec::new();
        let mut op = [0u8; 1];
        while s.read_exact(&mut op).is_ok() {
            match op[0] {
                wire::OP_PING => {
                    let mut x = [0u8; 1];
                    s.read_exact(&mut x).unwrap();
                    if pings.is_empty() {
                        std::thread::sleep(Duration::from_millis(300));
                    }
                    pings.push(x[0]);
                    s.write_all(&[wire::OP_PING, x[0]]).unwrap();
                }
                wire::OP_BULK => {
                    let mut len = [0u8; 8];
                    s.read_exact(&mut len).unwrap();
                    let mut body = vec![0u8; wire::bulk_len(&len) as usize];
                    s.read_exact(&mut body).unwrap();
                    s.write_all(&wire::ACK).unwrap();
                }
                _ => break,
            }
        }
        pings
    });
    let out = nowcast(&["tcp", &target, "--size", "16B", "--json"], LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pings = server.join().unwrap();
    assert_eq!(
        pings,
        [0xff, 0, 0],
        "the warm-up echo, then rtt and rtt_nagle"
    );
    let recs = records(&out);
    let metrics: Vec<Metric> = recs.iter().map(|r| r.metric).collect();
    assert_eq!(
        metrics,
        [
            Metric::HandshakeRtt,
            Metric::Rtt,
            Metric::RttNagle,
            Metric::BandwidthUp
        ],
        "the warm-up has no record of its own"
    );
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        // Neither the handshake nor any timed echo includes the delayed warm-up.
        if r.metric != Metric::BandwidthUp {
            assert!(r.value.unwrap() < 150.0, "{r:?}");
        }
    }
}

/// The factor from the schema unit to the unit a summary row names.
fn factor(unit: &str) -> f64 {
    match unit {
        "ms" | "Mbit/s" => 1.0,
        "Gbit/s" => 1e-3,
        "kbit/s" => 1e3,
        "%" => 100.0,
        other => panic!("unknown unit {other}"),
    }
}

#[test]
fn the_summary_is_ping_and_mtr_like_and_agrees_with_the_records() {
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let file = std::env::temp_dir().join(format!("nowcast-tcp-sum-{}.ndjson", std::process::id()));
    let out = nowcast(
        &[
            "tcp",
            &server.tcp,
            "--count",
            "5",
            "--period",
            "0",
            "--size",
            "4M",
            "--direction",
            "both",
            "--out",
            file.to_str().unwrap(),
        ],
        LIMIT,
    );
    let saved = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let recs: Vec<Record> = saved.lines().map(|l| Record::parse(l).unwrap()).collect();
    assert_eq!(recs.len(), 25, "{saved}");

    // Rates in the rows are scaled per value as iperf3 does: never four-digit Mbit/s.
    let rows_of_rates: Vec<&str> = table.lines().filter(|l| l.contains("bit/s →")).collect();
    assert_eq!(rows_of_rates.len(), 5, "{table}");
    for l in &rows_of_rates {
        for w in l.split("bit/s").collect::<Vec<_>>().windows(2) {
            let number = w[0].split_whitespace().rev().nth(1).unwrap();
            let n: f64 = number.parse().unwrap();
            assert!((1.0..1000.0).contains(&n) || n == 0.0, "{number} in {l}");
        }
    }

    let rows = summary(&table);
    assert_eq!(rows.len(), 5, "{table}");
    for metric in [
        Metric::HandshakeRtt,
        Metric::Rtt,
        Metric::RttNagle,
        Metric::BandwidthUp,
        Metric::BandwidthDown,
    ] {
        let row = &rows[&metric.to_string()];
        let values: Vec<f64> = recs
            .iter()
            .filter(|r| r.metric == metric)
            .map(|r| r.value.unwrap())
            .collect();
        let n = values.len() as f64;
        let avg = values.iter().sum::<f64>() / n;
        let mdev = (values.iter().map(|v| v * v).sum::<f64>() / n - avg * avg)
            .max(0.0)
            .sqrt();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // The next forecast: the improved bank's MSE selection fed the same values.
        let mut bank = nowcast_core::Bank::new(nowcast_core::Mode::Improved);
        bank.update_all(&values).unwrap();
        let f = bank.forecast().unwrap().mse;
        let k = factor(&row[0]);
        assert_eq!(&row[1..3], ["5", "0.0%"], "{metric}: {row:?}");
        for (shown, want) in
            row[3..]
                .iter()
                .zip([min, avg, max, mdev, f.value, 2.0 * f.error.sqrt()])
        {
            assert!(
                shows(shown, want * k),
                "{metric}: {shown} shows {} ({row:?})\n{table}",
                want * k
            );
        }
        if metric.unit() == nowcast_core::record::Unit::MbitPerS {
            let top: f64 = row[5].parse().unwrap();
            assert!(top < 1000.0, "{metric} scaled: {row:?}");
        }
    }
}
