//! `nowcast udp` against a real `nowcast serve` on loopback.

use crate::common;

use common::{nowcast, records, shows, summary, text, Server};
use nowcast_core::record::{Metric, Record, Status};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn bursts_give_rtt_jitter_and_loss_records_with_forecasts() {
    let mut server = Server::start(&["--bind", "127.0.0.1"]);
    let out = nowcast(
        &[
            "udp",
            &server.udp,
            "--count",
            "3",
            "--probes",
            "40",
            "--interval",
            "0.5",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recs = records(&out);
    assert_eq!(recs.len(), 9, "{recs:?}");
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.seq, Some(i as u64 / 3));
        assert_eq!(r.forecast.is_some(), i >= 3);
        assert_eq!(r.probe.as_ref().unwrap().payload_bytes, Some(64));
        match r.metric {
            Metric::Rtt => assert!(r.value.unwrap() > 0.0 && r.value.unwrap() < 50.0),
            Metric::Jitter => assert!(r.value.unwrap() >= 0.0),
            Metric::Loss => assert_eq!(r.value, Some(0.0), "no loss on loopback"),
            other => panic!("unexpected metric {other:?}"),
        }
    }
    assert!(server.terminate());
}

#[test]
fn an_unanswered_burst_is_all_lost_and_waits_no_longer_than_its_timeout() {
    // A bound socket that never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = silent.local_addr().unwrap().to_string();
    let started = Instant::now();
    let out = nowcast(
        &["udp", &target, "--probes", "5", "--interval", "1", "--json"],
        LIMIT,
    );
    // One burst: the initial 1 s wait after the last send, and no more.
    assert!(started.elapsed() < Duration::from_secs(5));
    let recs = records(&out);
    let rtt = recs.iter().find(|r| r.metric == Metric::Rtt).unwrap();
    assert_eq!(
        (rtt.status, rtt.timeout_ms),
        (Status::Timeout, Some(1000.0))
    );
    let loss = recs.iter().find(|r| r.metric == Metric::Loss).unwrap();
    assert_eq!(loss.value, Some(1.0));
    assert!(
        recs.iter().all(|r| r.metric != Metric::Jitter),
        "no jitter without replies"
    );
    assert!(text(&out.stderr).contains("timed out"));
    // 100 % loss is a failed measurement, as ping's 1 when no reply came.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no rtt measured: its probe timed out"),
        "{}",
        text(&out.stderr)
    );

    // In the table: the summary gives the loss in % and the RTT as lost.
    let out = nowcast(
        &[
            "udp",
            &target,
            "--probes",
            "4",
            "--interval",
            "1",
            "--count",
            "2",
            "--timeout-initial",
            "100",
            "--timeout-floor",
            "100",
            "--timeout-ceiling",
            "200",
        ],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("loss %"), "{table}");
    assert!(table.contains("100.0 →100.0"), "{table}");
    let rows = summary(&table);
    assert_eq!(rows["rtt"][..3], ["ms", "2", "100.0%"], "{table}");
    assert_eq!(
        rows["loss"],
        ["%", "2", "-", "100.0", "100.0", "100.0", "0.0", "100.0", "0.0"],
        "{table}"
    );
    assert!(!rows.contains_key("jitter"), "{table}");
    // The table says why there may have been no reply.
    assert!(table.contains("no reply to any probe"), "{table}");

    // A port where nothing listens answers with ICMP port unreachable: said so.
    let dead = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = nowcast(
        &["udp", &dead.to_string(), "--probes", "4", "--interval", "1"],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // Not a timeout, nor a loss of 100 %: every probe was refused. One line says so.
    let errors = text(&out.stderr);
    assert_eq!(errors.matches("port unreachable (").count(), 1, "{errors}");
    assert!(errors.contains("nothing listens there"), "{errors}");
    assert!(!errors.contains("timed out"), "{errors}");
    assert!(
        errors.contains("no rtt or loss measured: the probe of each failed"),
        "{errors}"
    );
    // Once every probe is sent and the host said nothing listens, a burst ends: three
    // experiments do not wait out their timeouts (1 s, then growing: 14 s in all before).
    let started = std::time::Instant::now();
    let out = nowcast(
        &["udp", &dead.to_string(), "--probes", "4", "--count", "3"],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn partial_loss_is_a_success_with_its_figure_in_percent() {
    // The server answers 10 requests a second per client (a bucket of 10): a burst of 30
    // probes in 15 ms loses about two thirds of them.
    let server = Server::start(&["--bind", "127.0.0.1", "--udp-packets-per-second", "10"]);
    let file = std::env::temp_dir().join(format!("nowcast-udp-sum-{}.ndjson", std::process::id()));
    let out = nowcast(
        &[
            "udp",
            &server.udp,
            "--probes",
            "30",
            "--interval",
            "0.5",
            "--count",
            "2",
            "--timeout-initial",
            "200",
            "--timeout-floor",
            "200",
            "--out",
            file.to_str().unwrap(),
        ],
        LIMIT,
    );
    let saved = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let recs: Vec<Record> = saved.lines().map(|l| Record::parse(l).unwrap()).collect();
    let losses: Vec<f64> = recs
        .iter()
        .filter(|r| r.metric == Metric::Loss)
        .map(|r| r.value.unwrap())
        .collect();
    assert_eq!(losses.len(), 2, "{saved}");
    assert!(
        losses.iter().all(|l| *l > 0.3 && *l < 1.0),
        "partial loss: {losses:?}"
    );
    let table = text(&out.stdout);
    let rows = summary(&table);
    // The rows show each burst's loss in %, and the summary its min/avg/max/mdev.
    for l in &losses {
        assert!(
            table.contains(&format!("{:.1} →", l * 100.0)),
            "{l} in {table}"
        );
    }
    let loss = &rows["loss"];
    assert_eq!(loss[..3], ["%", "2", "-"], "{table}");
    let avg = (losses[0] + losses[1]) / 2.0;
    let min = losses[0].min(losses[1]);
    let max = losses[0].max(losses[1]);
    let mdev = (losses[0] - losses[1]).abs() / 2.0;
    for (shown, want) in loss[3..7].iter().zip([min, avg, max, mdev]) {
        assert!(shows(shown, want * 100.0), "{shown} vs {want}: {table}");
    }
    // Every burst had replies: its RTT was measured, and nothing of it was lost.
    let rtts: Vec<f64> = recs
        .iter()
        .filter(|r| r.metric == Metric::Rtt)
        .map(|r| r.value.unwrap())
        .collect();
    let rtt = &rows["rtt"];
    assert_eq!(rtt[..3], ["ms", "2", "0.0%"], "{table}");
    assert!(shows(&rtt[3], rtts[0].min(rtts[1])), "{table}");
    assert!(shows(&rtt[5], rtts[0].max(rtts[1])), "{table}");
}

#[test]
fn the_server_drops_datagrams_that_are_not_probes_or_are_too_large() {
    let server = Server::start(&["--bind", "127.0.0.1", "--max-datagram", "100"]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.connect(&server.udp).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut probe = vec![0u8; 200];
    nowcast::wire::UdpProbe::request(7, 1).encode(&mut probe);
    let mut buf = [0u8; 512];
    c.send(b"hello, is this an echo server?").unwrap();
    c.send(&probe).unwrap();
    assert!(
        c.recv(&mut buf).is_err(),
        "neither a foreign nor an oversized datagram is echoed"
    );
    c.send(&probe[..100]).unwrap();
    assert_eq!(
        c.recv(&mut buf).unwrap(),
        100,
        "the reply is the request's size"
    );
    nowcast::wire::UdpProbe::mark_reply(&mut probe);
    assert_eq!(
        &buf[..100],
        &probe[..100],
        "the request's bytes, marked as a reply"
    );
}

/// How a [`Stranger`] answers a datagram (nothing when it gives none).
type Answer = fn(&[u8]) -> Option<Vec<u8>>;

/// A UDP service on 127.0.0.1 that answers each datagram with `answer(datagram)` (nothing
/// when it gives none) on its own thread, until dropped.
struct Stranger {
    addr: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stranger {
    fn start(answer: Answer) -> Stranger {
        use std::sync::atomic::{AtomicBool, Ordering};
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = sock.local_addr().unwrap().to_string();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 65_536];
            while !stopped.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    if let Some(a) = answer(&buf[..n]) {
                        let _ = sock.send_to(&a, from);
                    }
                }
            }
        });
        Stranger {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Another service on the port (one that answers in its own protocol, an echo service) is
/// named at once, quoting what it said, and the run stops with status 2 ("could not run"),
/// as `nowcast tcp` does: before, its answers were not replies and the path read 100 % loss.
#[test]
fn another_service_on_the_port_is_named_at_once_not_read_as_loss() {
    let rows: [(Answer, &str); 3] = [
        (
            |_| Some(b"\x1b]0;owned\x07 DNS says: FORMERR".to_vec()),
            "it answered \"\\x1b]0;owned\\x07 DNS says: FORMERR\"",
        ),
        (
            |_| Some(b"SSH-2.0-OpenSSH_9.2\r\nmore".to_vec()),
            "it answered \"SSH-2.0-OpenSSH_9.2\"",
        ),
        (
            |d| Some(d.to_vec()),
            "it sent the probes back unanswered, as an echo service does",
        ),
    ];
    for (answer, said) in rows {
        let peer = Stranger::start(answer);
        let target = &peer.addr;
        let started = Instant::now();
        let out = nowcast(
            &[
                "udp",
                target,
                "--probes",
                "4",
                "--interval",
                "1",
                "--count",
                "5",
                "--period",
                "0",
            ],
            LIMIT,
        );
        let took = started.elapsed();
        let err: Vec<String> = text(&out.stderr).lines().map(String::from).collect();
        assert_eq!(out.status.code(), Some(2), "could not run: {err:#?}");
        assert_eq!(
            err,
            [format!(
                "nowcast: {target} does not speak nowcast's protocol ({said}): \
                 is `nowcast serve` running there?"
            )],
            "said once"
        );
        assert!(!out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b));
        // One burst, not five, and no wait for a reply after the answers came.
        let table = text(&out.stdout);
        assert!(table.contains(": 1 experiment ---"), "{table}");
        assert!(took < Duration::from_secs(1), "{took:?}");
        // Neither the round trip nor the loss was measured.
        assert!(!table.contains("100.0 →"), "no loss figure: {table}");
    }

    // The records say so, for programs: rtt and loss failed with the reason.
    let peer = Stranger::start(|_| Some(b"nope".to_vec()));
    let out = nowcast(&["udp", &peer.addr, "--probes", "3", "--json"], LIMIT);
    assert_eq!(out.status.code(), Some(2));
    let recs = records(&out);
    for m in [Metric::Rtt, Metric::Loss] {
        let r = recs.iter().find(|r| r.metric == m).unwrap();
        assert_eq!(r.status, Status::Error);
        assert!(
            r.error
                .as_deref()
                .unwrap()
                .contains("does not speak nowcast's protocol (it answered \"nope\")"),
            "{r:?}"
        );
    }
}
