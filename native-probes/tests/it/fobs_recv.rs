//! `nowcast fobs recv` on loopback, under clients that hold connections without a word, that
//! are refused and do not close, and that stop halfway: none of them holds up a sender with
//! the token, and a `--discard` receiver keeps nothing of a transfer that stopped.
//!
//! Real processes and sockets, 127.0.0.1 only; every process and file is cleaned up.

use crate::common;

use common::fobs::{file_of, send, Receiver, TOKEN};
use common::{root_missing, sh, text, wait_child, TempDir, Tmpfs};
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
    let line = rx.wait_for("\"ok.bin\": ", LIMIT);
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
    rx.wait_for("receiving \"half.bin\"", LIMIT);
    std::thread::sleep(Duration::from_millis(800));
    let _ = slow.kill();
    let _ = slow.wait();
    let line = rx.wait_for("\"half.bin\": ", LIMIT);
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

/// A hello for `name` of `size` bytes with `token`, encoded.
fn hello(token: [u8; 16], name: &str, size: u64) -> Vec<u8> {
    let mut b = Vec::new();
    Control::Hello(Hello {
        token,
        size,
        packet: 1400,
        window: 64,
        resume: false,
        hash: [0; 32],
        name: name.into(),
    })
    .encode(&mut b);
    b
}

/// The test receivers' token, as bytes.
fn token() -> [u8; 16] {
    let mut t = [0u8; 16];
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&TOKEN[2 * i..2 * i + 2], 16).unwrap();
    }
    t
}

/// The first control message `s` is sent (within `LIMIT`).
fn answer(s: &mut TcpStream) -> Control {
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut framer = Framer::with_limit(4096);
    let mut b = [0u8; 4096];
    loop {
        if let Ok(Some(m)) = framer.next_message() {
            return m;
        }
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed without an answer");
        framer.push(&b[..n]);
    }
}

#[test]
fn a_hello_without_the_token_turns_no_one_away() {
    let rx_dir = TempDir::new("fobs-recv-token");
    let rx = Receiver::start(&rx_dir, &["--discard"], LIMIT);
    // A sender whose hello is still on its way (half of it has arrived)…
    let mut sender = TcpStream::connect(("127.0.0.1", rx.port)).unwrap();
    let good = hello(token(), "a.bin", 1 << 20);
    sender.write_all(&good[..good.len() / 2]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // …while a stranger says a whole hello with the wrong token, then a frame that is not a
    // hello: each is refused alone.
    let mut stranger = TcpStream::connect(("127.0.0.1", rx.port)).unwrap();
    stranger.write_all(&hello([0xee; 16], "x.bin", 1)).unwrap();
    match answer(&mut stranger) {
        Control::Welcome(w) => assert_eq!(w.status, Refusal::Token),
        other => panic!("{other:?}"),
    }
    let mut junk = TcpStream::connect(("127.0.0.1", rx.port)).unwrap();
    junk.write_all(&[9, 0, 0, 0, 0]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The sender's hello then ends, and it is welcomed, not told the receiver is busy (as it
    // was before 2026-12-06: any whole frame turned every waiting connection away).
    sender.write_all(&good[good.len() / 2..]).unwrap();
    match answer(&mut sender) {
        Control::Welcome(w) => assert_eq!(w.status, Refusal::Accepted),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_fifo_under_the_resume_state_name_holds_up_nothing() {
    let src_dir = TempDir::new("fobs-recv-fifo-src");
    let rx_dir = TempDir::new("fobs-recv-fifo-rx");
    let src = file_of(&src_dir, "f.bin", 256 << 10);
    // Planted by someone who can write to the directory: opening it for reading would wait
    // for a writer forever (before 2026-12-06 it held the whole receiver).
    sh(&["mkfifo", rx_dir.join(".f.bin.fobs-state").to_str().unwrap()]);
    let rx = Receiver::start(&rx_dir, &[], LIMIT);
    let target = format!("127.0.0.1:{}", rx.port);
    let out = wait_child(
        send(&target, &src, &["--no-path-memory", "--resume"]),
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    rx.wait_for("\"f.bin\": stored, hash verified", LIMIT);
    assert_eq!(
        std::fs::read(rx_dir.join("f.bin")).unwrap(),
        std::fs::read(&src).unwrap()
    );
}

#[test]
fn a_flood_of_refused_connections_prints_a_few_lines() {
    let rx_dir = TempDir::new("fobs-recv-flood");
    let rx = Receiver::start(&rx_dir, &["--per-client-per-minute", "1"], LIMIT);
    // One connection a minute is taken; 200 more come at once, each refused.
    let conns: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(("127.0.0.1", rx.port)).unwrap())
        .collect();
    let lines = rx.lines_for(Duration::from_secs(1));
    let refused = lines
        .iter()
        .filter(|l| l.contains("too many connections from its network"))
        .count();
    // Ten lines a minute per network, not one a connection.
    assert!((1..=10).contains(&refused), "{refused} lines: {lines:?}");
    drop(conns);
    // A sender from that network is told why (until 2026-12-07 the connection was closed
    // without a word, and the sender said the port did not seem to be a FOBS receiver).
    let src_dir = TempDir::new("fobs-recv-flood-src");
    let src = file_of(&src_dir, "late.bin", 1000);
    let target = format!("127.0.0.1:{}", rx.port);
    let out = wait_child(send(&target, &src, &["--no-path-memory"]), LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("refused: too many connections from this network"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn what_is_planted_under_the_receivers_own_names_is_neither_waited_on_nor_written_through() {
    let src_dir = TempDir::new("fobs-recv-planted-src");
    let rx_dir = TempDir::new("fobs-recv-planted-rx");
    let elsewhere = TempDir::new("fobs-recv-planted-victim");
    let src = file_of(&src_dir, "p.bin", 3 << 20);
    // A FIFO where the resume state is written through (the receiver saves it as a transfer
    // opens): opening it for writing waited for a reader for ever, and held the receiver
    // until SIGKILL (before 2026-12-07).
    sh(&[
        "mkfifo",
        rx_dir.join(".p.bin.fobs-state-new").to_str().unwrap(),
    ]);
    // A hard link to a file outside the directory where the part file goes: the transfer
    // was written through it.
    let victim = elsewhere.join("victim.txt");
    std::fs::write(&victim, "not the receiver's").unwrap();
    std::fs::hard_link(&victim, rx_dir.join(".p.bin.fobs-part")).unwrap();
    let rx = Receiver::start(&rx_dir, &[], LIMIT);
    let target = format!("127.0.0.1:{}", rx.port);
    let out = wait_child(send(&target, &src, &["--no-path-memory"]), LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    rx.wait_for("\"p.bin\": stored, hash verified", LIMIT);
    assert_eq!(
        std::fs::read(rx_dir.join("p.bin")).unwrap(),
        std::fs::read(&src).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "not the receiver's"
    );
    let left: Vec<_> = std::fs::read_dir(&rx_dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "p.bin")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_file_the_disk_cannot_hold_is_refused_at_its_hello_and_the_receiver_goes_on() {
    if let Some(why) = root_missing(&["mount", "umount"]) {
        println!("skipped: {why} (mounting a small tmpfs needs root)");
        return;
    }
    let src_dir = TempDir::new("fobs-recv-full-src");
    let rx_dir = TempDir::new("fobs-recv-full-rx");
    let _disk = Tmpfs::mount(&rx_dir, "2m");
    let big = file_of(&src_dir, "big.bin", 5_000_000);
    let small = file_of(&src_dir, "small.bin", 100_000);
    let rx = Receiver::start(&rx_dir, &["--discard"], LIMIT);
    let target = format!("127.0.0.1:{}", rx.port);
    // Before 2026-12-06 this one was taken, failed part-way with the sender told only that
    // the connection was reset ("resume with --resume"), and left its part file filling
    // the disk, so that every later transfer failed too.
    let out = wait_child(send(&target, &big, &["--no-path-memory"]), LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).trim_end(),
        format!("nowcast: {target}: refused: the receiver cannot store the file")
    );
    let line = rx.wait_for("cannot store", LIMIT);
    assert!(
        line.contains("5000000 bytes in") && line.contains("No space left on device"),
        "{line}"
    );
    let left: Vec<_> = std::fs::read_dir(&rx_dir.0).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let out = wait_child(send(&target, &small, &["--no-path-memory"]), LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    rx.wait_for("\"small.bin\": received, hash verified, deleted", LIMIT);
    drop(rx);
}

#[test]
fn a_receiver_stopped_mid_transfer_tells_the_sender_so_and_keeps_the_part() {
    // It told the sender it "abandoned" the transfer ("no progress, or stopped"), as if it had
    // given up on a silent sender.
    let src_dir = TempDir::new("fobs-recv-stop-src");
    let rx_dir = TempDir::new("fobs-recv-stop-rx");
    let (src_dir, rx_dir) = (&src_dir.0, &rx_dir.0);
    let src = file_of(src_dir, "src.bin", 4 << 20);
    let mut rx = Receiver::start(rx_dir, &[], LIMIT);
    let target = format!("127.0.0.1:{}", rx.port);
    let sender = send(
        &target,
        &src,
        &[
            "--no-path-memory",
            "--name",
            "cut.bin",
            "--fixed-rate",
            "4M",
        ],
    );
    rx.wait_for("receiving \"cut.bin\"", LIMIT);
    std::thread::sleep(Duration::from_millis(600));
    rx.interrupt();
    let out = wait_child(sender, LIMIT);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("the receiver was stopped by its operator") && err.contains("--resume"),
        "{err}"
    );
    // The part is kept for a resume; nothing is under the final name.
    assert!(!rx_dir.join("cut.bin").exists());
    assert!(rx_dir.join(".cut.bin.fobs-part").exists());
}

#[test]
fn unfinished_transfers_are_named_at_the_start_and_deleted_once_older_than_kept() {
    // Part files of senders that never came back used to stay for good: a receiver that
    // many transfers reach filled its disk with them.
    let src_dir = TempDir::new("fobs-recv-keep-src");
    let rx_dir = TempDir::new("fobs-recv-keep-rx");
    let (src_dir, rx_dir) = (&src_dir.0, &rx_dir.0);
    let size = 4_000_000;
    let src = file_of(src_dir, "src.bin", size);
    let mut rx = Receiver::start(rx_dir, &[], LIMIT);
    let target = format!("127.0.0.1:{}", rx.port);
    for name in ["old.bin", "new.bin"] {
        let sender = send(
            &target,
            &src,
            &["--no-path-memory", "--name", name, "--fixed-rate", "8M"],
        );
        rx.wait_for(&format!("receiving \"{name}\""), LIMIT);
        std::thread::sleep(Duration::from_millis(700));
        // SAFETY: a signal to our own child, which has not been waited for.
        unsafe { libc::kill(sender.id() as i32, libc::SIGINT) };
        let out = wait_child(sender, LIMIT);
        assert!(!out.status.success(), "{}", text(&out.stdout));
        rx.wait_for(&format!("\"{name}\": "), LIMIT);
    }
    rx.interrupt();
    // The old one was last written two hours ago.
    let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
    for f in [".old.bin.fobs-part", ".old.bin.fobs-state"] {
        let f = std::fs::File::options()
            .write(true)
            .open(rx_dir.join(f))
            .unwrap();
        f.set_modified(two_hours_ago).unwrap();
    }
    let mut rx = Receiver::start(rx_dir, &["--keep-unfinished", "1h"], LIMIT);
    let deleted = rx.wait_for("deleted unfinished \"old.bin\"", LIMIT);
    assert!(
        deleted.contains(&format!(
            " of {} held, last written 2 h ago): kept 1h (--keep-unfinished)",
            format_size(size as u64)
        )),
        "{deleted}"
    );
    let kept = rx.wait_for("unfinished \"new.bin\" kept for --resume", LIMIT);
    let held: f64 = kept
        .split("kept for --resume (")
        .nth(1)
        .and_then(|r| r.split(" %").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no share held in {kept:?}"));
    assert!(held > 0.0 && held < 100.0, "{kept}");
    assert!(kept.contains(" s ago; "), "{kept}");
    assert!(
        kept.ends_with("deleted 1h after that: --keep-unfinished)"),
        "{kept}"
    );
    for f in [".old.bin.fobs-part", ".old.bin.fobs-state"] {
        assert!(!rx_dir.join(f).exists(), "{f} is still there");
    }
    for f in [".new.bin.fobs-part", ".new.bin.fobs-state"] {
        assert!(rx_dir.join(f).exists(), "{f} was deleted");
    }
    // A sender with the token that says hello for a large file and leaves holds nothing:
    // its part file, which reserved the whole size, is not kept.
    let mut c = TcpStream::connect(("127.0.0.1", rx.port)).unwrap();
    c.write_all(&hello(token(), "empty.bin", 256 << 20))
        .unwrap();
    let mut welcome = [0u8; 24];
    c.read_exact(&mut welcome).unwrap();
    drop(c);
    let line = rx.wait_for("\"empty.bin\": ", LIMIT);
    assert!(
        line.contains("after ") && !line.contains("kept for --resume"),
        "{line}"
    );
    for f in [".empty.bin.fobs-part", ".empty.bin.fobs-state"] {
        assert!(!rx_dir.join(f).exists(), "{f} was kept");
    }
    // What is kept resumes.
    let target = format!("127.0.0.1:{}", rx.port);
    let out = wait_child(
        send(
            &target,
            &src,
            &["--no-path-memory", "--name", "new.bin", "--resume"],
        ),
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    rx.wait_for("\"new.bin\": stored, hash verified", LIMIT);
    rx.interrupt();
}

/// A size as the receiver writes it (`format::bytes`).
fn format_size(n: u64) -> String {
    nowcast::format::bytes(n)
}

#[test]
fn a_directory_it_cannot_write_to_is_refused_at_the_start() {
    if let Some(why) = root_missing(&["mount", "umount"]) {
        println!("skipped: {why} (mounting a read-only tmpfs needs root)");
        return;
    }
    // It said "listening" and then refused every sender ("cannot store the file").
    let dir = TempDir::new("fobs-recv-ro");
    let rx_dir = dir.0.join("rx");
    let disk = Tmpfs::mount(&rx_dir, "1m");
    disk.remount("ro");
    let out = std::process::Command::new(common::BIN)
        .args(["fobs", "recv", "--listen", "127.0.0.1", "--port", "0"])
        .args(["--token", TOKEN, "--dir"])
        .arg(&rx_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot write there, where every transfer is stored")
            && err.contains("Read-only file system"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("listening"));
}
