//! Ctrl-C during a probe or a transfer's connect, and what the probe commands and
//! `nowcast classify` print (a new user's review):
//! - SIGINT stops `nowcast fobs send` while it connects to a host that drops everything, at
//!   once, not at the connect's 10 s timeout;
//! - SIGINT stops `nowcast tcp` and `nowcast udp` in the middle of a probe, at once, and the
//!   probe cut short is recorded neither as a timeout nor as anything else;
//! - the probes' first lines fit 100 columns;
//! - `nowcast classify` prints a verdict per unlabelled signature, refuses a file without
//!   signatures and wants at least one file.
//!
//! The tests with namespaces need root, iproute2, nft and tc, and skip with a message
//! otherwise; namespaces are named after this process and deleted, and every process they
//! start is killed by PID.

use crate::common;

use common::netns::Netns;
use common::{nowcast, root_missing, sh, text, wait_child, Server, TempDir, BIN};
use nowcast_core::record::{Metric, Record, Status};
use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);
/// How long a command may take to end after SIGINT.
const PROMPT: Duration = Duration::from_secs(1);
const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// Starts `cmd` with piped output.
fn start(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nowcast")
}

/// Sends SIGINT to `child` after `after`, then waits for it (at most [`LIMIT`]): its output
/// and how long it took to end after the signal.
fn interrupt(child: Child, after: Duration) -> (Output, Duration) {
    std::thread::sleep(after);
    // SAFETY: kill(2) on the PID of our own child, not yet reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "kill -INT");
    let signalled = Instant::now();
    let out = wait_child(child, LIMIT);
    (out, signalled.elapsed())
}

fn said(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Two namespaces joined by a veth pair, `{a}` at 10.79.x.1 and `{b}` at 10.79.x.2.
fn link(tag: &str, subnet: u8) -> Netns {
    let id = std::process::id() % 100_000;
    let names = [format!("ia{tag}{id}"), format!("ib{tag}{id}")];
    let net = Netns::new(&names);
    let (va, vb) = (format!("va{tag}{id}"), format!("vb{tag}{id}"));
    let (aa, ab) = (
        format!("10.79.{subnet}.1/24"),
        format!("10.79.{subnet}.2/24"),
    );
    net.veth((&names[0], &va, &aa), (&names[1], &vb, &ab));
    net
}

#[test]
fn sigint_stops_fobs_send_while_it_connects() {
    if let Some(why) = root_missing(&["ip", "nft", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let net = link("f", 11);
    let b = &net.ns[1];
    sh(&["ip", "netns", "exec", b, "nft", "add", "table", "inet", "f"]);
    sh(&[
        "ip",
        "netns",
        "exec",
        b,
        "nft",
        "add",
        "chain",
        "inet",
        "f",
        "in",
        "{ type filter hook input priority 0; policy drop; }",
    ]);
    let d = TempDir::new("interrupt-fobs");
    let file = d.join("f.bin");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.ns[0], BIN, "fobs", "send"])
        .arg(&file)
        .args(["10.79.11.2", "--token", TOKEN, "--no-path-memory"]);
    let (out, took) = interrupt(start(cmd), Duration::from_millis(700));
    let s = said(&out);
    assert!(took < PROMPT, "{took:?} after SIGINT: {s}");
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(
        text(&out.stderr).contains("10.79.11.2:8070: stopped before the receiver answered"),
        "{s}"
    );
    assert!(!s.contains("timed out"), "{s}");
}

#[test]
fn sigint_ends_a_bandwidth_probe_at_once_and_records_none_of_it() {
    if let Some(why) = root_missing(&["ip", "tc", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let net = link("t", 12);
    // 2 Mbit/s: a 4 MiB probe takes 17 s, more than the 15 s a first probe may take.
    let dev = format!("vat{}", std::process::id() % 100_000);
    net.tbf(&net.ns[0], &dev, 2, "4kb", "50ms");
    let mut prefix = Command::new("ip");
    prefix.args(["netns", "exec", &net.ns[1], BIN]);
    // Dropped (killed) before the namespaces.
    let server = Server::start_with(prefix, &[]);
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.ns[0], BIN, "tcp"])
        .arg(format!("10.79.12.2:{}", server.port()))
        .args(["--size", "4M", "--json"]);
    let (out, took) = interrupt(start(cmd), Duration::from_millis(1500));
    let s = said(&out);
    assert!(took < PROMPT, "{took:?} after SIGINT: {s}");
    let records: Vec<Record> = text(&out.stdout)
        .lines()
        .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let metrics: Vec<Metric> = records.iter().map(|r| r.metric).collect();
    assert_eq!(
        metrics,
        [Metric::HandshakeRtt, Metric::Rtt, Metric::RttNagle],
        "the bandwidth probe cut short is not recorded: {s}"
    );
    assert!(records.iter().all(|r| r.status == Status::Ok), "{s}");
    assert_eq!(out.status.code(), Some(0), "{s}");
}

#[test]
fn sigint_ends_an_upload_on_loopback_at_once() {
    // On loopback each write of an upload's chunk completes at once: the stop flag was looked
    // at only when a write blocked, and a 1 GiB upload ran 0.4 s past Ctrl-C and was recorded.
    // 8 GiB take seconds here, so the signal lands in the upload (or, on a slow machine,
    // before it: then nothing of it runs either).
    let server = Server::start(&[
        "--max-payload",
        "8G",
        "--bytes-per-minute",
        "64G",
        "--burst-bytes",
        "64G",
    ]);
    let mut cmd = Command::new(BIN);
    cmd.arg("tcp")
        .arg(format!("127.0.0.1:{}", server.port()))
        .args(["--size", "8G", "--direction", "up", "--json"]);
    let (out, took) = interrupt(start(cmd), Duration::from_millis(400));
    let s = said(&out);
    assert!(
        took < Duration::from_millis(300),
        "{took:?} after SIGINT: {s}"
    );
    let records: Vec<Record> = text(&out.stdout)
        .lines()
        .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        records.iter().all(|r| r.metric != Metric::BandwidthUp),
        "the upload cut short is not recorded: {s}"
    );
    assert_eq!(out.status.code(), Some(0), "{s}");
}

/// A TCP port that takes connections and reads what comes, never answering: a session's
/// hello waits there until its timeout (3 s for a first one).
fn silent_tcp() -> (String, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.set_read_timeout(Some(LIMIT));
            let mut buf = [0u8; 1024];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        }
    });
    (at, t)
}

#[test]
fn sigint_during_a_tcp_hello_records_no_timeout() {
    let (at, t) = silent_tcp();
    let mut cmd = Command::new(BIN);
    cmd.args(["tcp", &at, "--period", "5"]);
    let (out, took) = interrupt(start(cmd), Duration::from_millis(700));
    t.join().unwrap();
    let s = said(&out);
    assert!(took < PROMPT, "{took:?} after SIGINT: {s}");
    assert!(!s.contains("timeout") && !s.contains("timed out"), "{s}");
    assert!(s.contains("interrupted during the hello step"), "{s}");
    // The summary, as after any run.
    assert!(
        s.contains(&format!("--- nowcast tcp → {at}: 1 experiment ---")),
        "{s}"
    );
    assert_eq!(out.status.code(), Some(0), "nothing was lost: {s}");
}

#[test]
fn sigint_during_a_udp_burst_records_nothing_of_it() {
    // A UDP port that never answers (no ICMP either): a burst of 1 s of sends, then a wait.
    let quiet = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = quiet.local_addr().unwrap().to_string();
    let mut cmd = Command::new(BIN);
    cmd.args(["udp", &at, "--json", "--period", "5"]);
    let (out, took) = interrupt(start(cmd), Duration::from_millis(700));
    drop(quiet);
    let s = said(&out);
    assert!(took < PROMPT, "{took:?} after SIGINT: {s}");
    assert!(text(&out.stdout).trim().is_empty(), "no records: {s}");
    assert!(!s.contains("timed out"), "{s}");
    assert_eq!(out.status.code(), Some(0), "{s}");
}

#[test]
fn the_probes_first_lines_fit_100_columns() {
    let server = Server::start(&[]);
    for (cmd, at) in [("tcp", &server.tcp), ("udp", &server.udp)] {
        let out = nowcast(
            &[cmd, at, "--probes", "3"][..if cmd == "udp" { 4 } else { 2 }],
            LIMIT,
        );
        let s = said(&out);
        assert!(out.status.success(), "{s}");
        let first = text(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(first.chars().count() <= 100, "{first}");
        assert!(
            first.starts_with(&format!("nowcast {cmd} → {at},")),
            "{first}"
        );
        assert!(!first.contains(&format!("({at})")), "{first}");
    }
    let out = nowcast(&["tcp", &server.tcp], LIMIT);
    assert!(
        text(&out.stdout).starts_with(&format!(
            "nowcast tcp → {}, bandwidth probe of ¼ s or 2 RTTs at the forecast rate, warmed up\n",
            server.tcp
        )),
        "{}",
        said(&out)
    );
}

#[test]
fn fobs_send_help_describes_its_arguments() {
    let out = nowcast(&["fobs", "send", "--help"], LIMIT);
    let help = text(&out.stdout);
    for arg in ["<FILE>", "<TARGET>"] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(arg))
            .unwrap_or_else(|| panic!("no {arg} in {help}"));
        assert!(line.trim() != arg, "{arg} has no description: {help}");
    }
}

#[test]
fn classify_gives_a_verdict_per_unlabelled_signature() {
    let d = TempDir::new("classify-rows");
    let unl = d.join("unl.sig");
    let lines = "? 512 3 7-9 100\n# a comment\n? 512 1 40 41 200-260\n? 512 5\n";
    std::fs::write(&unl, lines).unwrap();
    let out = nowcast(&["classify", unl.to_str().unwrap()], LIMIT);
    let s = said(&out);
    assert!(out.status.success(), "{s}");
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{}: 3 unlabelled signatures\n", unl.display())),
        "{s}"
    );
    let rows: Vec<&str> = stdout.lines().skip(2).take(3).collect();
    for (row, line) in rows.iter().zip(["1", "3", "4"]) {
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(words[0], line, "{s}");
        assert_eq!(words[1], "512", "{s}");
        // 512 packets, not the model's length: marked `?` where the model decided.
        let verdict = words.last().unwrap().trim_end_matches('?');
        assert!(
            ["cpu", "network", "inconclusive", "range"].contains(&verdict),
            "{s}"
        );
    }
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{s}");
    // The totals, as before; no scoring table without labels.
    assert!(stdout.contains("\nunlabelled: cpu "), "{s}");
    assert!(stdout.contains("\ncost: "), "{s}");
    assert!(!stdout.contains("correct"), "{s}");
}

#[test]
fn classify_refuses_an_empty_file_and_no_file() {
    let d = TempDir::new("classify-empty");
    let empty = d.join("empty.txt");
    std::fs::write(&empty, "# nothing\n\n").unwrap();
    let out = nowcast(&["classify", empty.to_str().unwrap()], LIMIT);
    let s = said(&out);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(
        text(&out.stderr).contains(&format!("{}: no signatures", empty.display())),
        "{s}"
    );
    assert!(text(&out.stdout).is_empty(), "{s}");
    let out = nowcast(&["classify"], LIMIT);
    let s = said(&out);
    assert_eq!(out.status.code(), Some(2), "{s}");
    assert!(text(&out.stderr).contains("no signature files"), "{s}");
}
