//! `nowcast fobs recv` on loopback, under clients that hold connections without a word, that
//! are refused and do not close, and that stop halfway: none of them holds up a sender with
//! the token, and a `--discard` receiver keeps nothing of a transfer that stopped.
//!
//! Real processes and sockets, 127.0.0.1 only; every process and file is cleaned up.

mod common;

use common::fobs::{file_of, send, Receiver};
use common::{text, wait_child, TempDir};
use nowcast::fobs::wire::{Control, Framer, Hello, Refusal};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// Whether the server has closed `s` (EOF or reset), without waiting.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn silent_and_refused_connections_hold_up_no_sender_and_discard_keeps_nothing() {
    let src_dir = TempDir::new("fobs-recv-src");
    let rx_dir = TempDir::new("fobs-recv-rx");
    let (src_dir, rx_dir) = (&src_dir.0, &rx_dir.0);
    let src = file_of(src_dir, "src.bin", 2 << 20);
    let rx = Receiver::start(rx_dir, &["--discard"], LIMIT);
    let target = format!("127.0.0.1:{}", rx.port);

    // Eight connections that say nothing (each would have held a receiver that serves one
    // connection at a time for its 5 s hello deadline: 40 s), and one refused for a wrong
    // token that then neither reads nor closes (it held such a receiver 2 s more).
    let mut silent: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", rx.port)).unwrap())
        .collect();
    let mut stranger = TcpStream::connect(("127.0.0.1", rx.port)).unwrap();
    let mut hello = Vec::new();
    Control::Hello(Hello {
        token: [0xee; 16],
        size: 1 << 20,
        packet: 1400,
        window: 64,
        resume: false,
        hash: [0; 32],
        name: "x.bin".into(),
    })
    .encode(&mut hello);
    stranger.write_all(&hello).unwrap();
    rx.wait_for("wrong token", LIMIT);

    // A sender with the token is served while all of them are still open.
    let started = Instant::now();
    let out = wait_child(
        send(&target, &src, &["--no-path-memory", "--name", "ok.bin"]),
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = rx.wait_for("ok.bin: ", LIMIT);
    assert!(line.contains("hash verified"), "{line}");
    let took = started.elapsed();
    // Served at once, not after their 5 s deadlines: the receiver waited on none of them.
    assert!(
        took < Duration::from_secs(4),
        "{took:?}: the receiver waited on them"
    );
    // When the transfer began, each was told the receiver is busy (a refusal welcome), and
    // closed.
    for s in &mut silent {
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        let mut framer = Framer::with_limit(4096);
        framer.push(&got);
        match framer.next_message() {
            Ok(Some(Control::Welcome(w))) => assert_eq!(w.status, Refusal::Busy),
            other => panic!("{other:?} from {got:?}"),
        }
        assert!(closed_by_server(s));
    }

    // A transfer that stops halfway leaves nothing under `--discard`.
    let mut slow = send(
        &target,
        &src,
        &[
            "--no-path-memory",
            "--name",
            "half.bin",
            "--fixed-rate",
            "4M",
        ],
    );
    rx.wait_for("receiving half.bin", LIMIT);
    std::thread::sleep(Duration::from_millis(800));
    let _ = slow.kill();
    let _ = slow.wait();
    let line = rx.wait_for("half.bin: ", LIMIT);
    assert!(!line.contains("hash verified"), "{line}");
    let left: Vec<_> = std::fs::read_dir(rx_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "a --discard receiver kept {left:?}");

    // With no transfer under way, a connection that says nothing is closed at its deadline,
    // and named.
    let _quiet = TcpStream::connect(("127.0.0.1", rx.port)).unwrap();
    rx.wait_for("no hello within 5 s", LIMIT);
    drop(rx);
}
