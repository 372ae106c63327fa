//! `nowcast udp` against a real `nowcast serve` on loopback.

mod common;

use common::{nowcast, records, text, Server};
use nowcast_core::record::{Metric, Status};
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
