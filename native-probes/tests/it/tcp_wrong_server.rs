//! What `nowcast tcp` says when its target is not a working `nowcast serve`: nothing
//! listening, another service on the port (one that talks first, one that answers and
//! closes, one that says nothing), another protocol version, a busy server, a slow one. Real
//! sockets on loopback: `nowcast serve` children where a nowcast server is involved, and
//! listeners of this process for the others, each stopped and joined when the test ends.

use crate::common;

use common::peer::{bad_request, wait_for_close, Peer};
use common::{nowcast, records, summary, text, Server, BIN};
use nowcast_core::record::{Metric, Status};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// The series of a default session, in order.
const SESSION: [Metric; 4] = [
    Metric::HandshakeRtt,
    Metric::Rtt,
    Metric::RttNagle,
    Metric::BandwidthUp,
];

/// A service that talks first (SSH, SMTP) and then waits for a line that never comes.
fn banner(text: &'static [u8]) -> impl Fn(TcpStream, usize) + Send + Sync + 'static {
    move |mut s, _| {
        let _ = s.write_all(text);
        wait_for_close(&mut s);
    }
}

/// The lines of standard error.
fn lines(err: &[u8]) -> Vec<String> {
    text(err).lines().map(String::from).collect()
}

#[test]
fn a_refused_connection_is_one_line_per_experiment_and_the_records_keep_every_step() {
    // A port with nothing behind it: bind then drop a listener to find one.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{port}");
    let out = nowcast(&["tcp", &target, "--count", "3", "--period", "0"], LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = lines(&out.stderr);
    assert_eq!(
        err.len(),
        4,
        "one line per experiment, then the verdict: {err:#?}"
    );
    for line in &err[..3] {
        assert!(
            line.starts_with(&format!("nowcast: {target}: connect: Connection refused"))
                && line.ends_with("; rtt, rtt_nagle and bandwidth_up not tried"),
            "{line}"
        );
    }
    assert_eq!(
        err[3],
        "nowcast: no handshake_rtt, rtt, rtt_nagle or bandwidth_up measured: all 3 probes of each \
         failed or were not tried"
    );
    // The table and its summary are as they were: every series' row, lost.
    let rows = summary(&text(&out.stdout));
    for series in ["handshake_rtt", "rtt", "rtt_nagle", "bandwidth_up"] {
        assert_eq!(rows[series][1..3], ["3", "100.0%"], "{rows:?}");
    }

    // The records still say, one by one, which step each series was not tried for.
    let out = nowcast(&["tcp", &target, "--json", "--direction", "both"], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    let recs = records(&out);
    let metrics: Vec<Metric> = recs.iter().map(|r| r.metric).collect();
    assert_eq!(metrics, [&SESSION[..], &[Metric::BandwidthDown]].concat());
    let errors: Vec<&str> = recs.iter().map(|r| r.error.as_deref().unwrap()).collect();
    assert!(errors[0].starts_with(&format!("{target}: connect: Connection refused")));
    for (error, step) in
        errors[1..]
            .iter()
            .zip(["rtt", "rtt with Nagle on", "bandwidth", "bandwidth down"])
    {
        assert_eq!(
            *error,
            format!("{target}: {step}: not tried because the connect step (handshake_rtt) failed")
        );
    }
    assert!(recs.iter().all(|r| r.status == Status::Error));
    assert!(
        lines(&out.stderr)[0]
            .ends_with("; rtt, rtt_nagle, bandwidth_up and bandwidth_down not tried"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn another_service_on_the_port_is_named_at_once_and_the_run_stops_with_status_2() {
    // Rows: the peer, what the message quotes.
    let rows: Vec<(Peer, &str)> = vec![
        (
            Peer::start(|s, _| bad_request(s)),
            "HTTP/1.0 400 Bad request",
        ),
        (
            Peer::start(banner(b"SSH-2.0-OpenSSH_9.2\r\n")),
            "SSH-2.0-OpenSSH_9.2",
        ),
        (
            Peer::start(banner(
                b"220 mail.example.org ESMTP Postfix (Debian/GNU)\r\n",
            )),
            "220 mail.example.org ESMTP Postfix (Debi…",
        ),
        // Bytes that would drive the terminal are shown, not sent.
        (
            Peer::start(banner(b"\x1b[2J\x1b]0;owned\x07\r\n")),
            "\\x1b[2J\\x1b]0;owned\\x07",
        ),
    ];
    for (peer, quoted) in &rows {
        let target = &peer.addr;
        let started = Instant::now();
        let out = nowcast(&["tcp", target, "--count", "5", "--period", "0"], LIMIT);
        let took = started.elapsed();
        let err = lines(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "could not run: {err:#?}");
        // Told at once, not at the hello's timeout (3 s).
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(
            err,
            [format!(
                "nowcast: {target} does not speak nowcast's protocol (it answered \"{quoted}\"): \
                 is `nowcast serve` running there?"
            )],
            "said once"
        );
        assert!(!out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b));
        // One experiment, not five: the table has its row and its summary.
        let table = text(&out.stdout);
        assert!(table.contains(": 1 experiment ---"), "{table}");
        assert_eq!(summary(&table)["handshake_rtt"][1..3], ["1", "100.0%"]);
        assert_eq!(peer.accepted(), 1, "{target} was asked once");
    }

    // The records of that experiment say the same, for programs.
    let peer = &rows[0].0;
    let out = nowcast(&["tcp", &peer.addr, "--json", "--count", "3"], LIMIT);
    assert_eq!(out.status.code(), Some(2));
    let recs = records(&out);
    let metrics: Vec<Metric> = recs.iter().map(|r| r.metric).collect();
    assert_eq!(metrics, SESSION);
    assert_eq!(
        recs[0].error.as_deref(),
        Some(
            format!(
                "{}: hello: the peer does not speak nowcast's protocol \
                 (it answered \"HTTP/1.0 400 Bad request\")",
                peer.addr
            )
            .as_str()
        )
    );
    assert!(recs[1..].iter().all(|r| r
        .error
        .as_deref()
        .unwrap()
        .ends_with("not tried because the hello step (handshake_rtt) failed")));
}

#[test]
fn another_version_of_the_protocol_stops_the_run_at_once() {
    // A welcome of version 3, cut short: a version-2 client must not wait for the rest.
    let peer = Peer::start(banner(b"NWCT\x03\x00\x00\x00"));
    let started = Instant::now();
    let out = nowcast(&["tcp", &peer.addr, "--count", "3", "--period", "0"], LIMIT);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        lines(&out.stderr),
        [format!(
            "nowcast: {}: hello: welcome: the peer speaks protocol version 3, this build speaks 2",
            peer.addr
        )]
    );
    assert_eq!(peer.accepted(), 1);
}

#[test]
fn a_port_that_accepts_and_says_nothing_is_asked_about_when_the_hello_times_out() {
    let peer = Peer::start(|mut s, _| wait_for_close(&mut s));
    let target = &peer.addr;
    let args = ["tcp", target, "--deadline", "0.3", "--count", "2"];
    let out = nowcast(&[&args[..], &["--period", "0"]].concat(), LIMIT);
    // Not taken for a wrong server: a slow `nowcast serve` does the same. Both experiments
    // ran, and the run measured nothing.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(peer.accepted(), 2);
    let err = lines(&out.stderr);
    assert_eq!(err.len(), 3, "{err:#?}");
    for line in &err[..2] {
        assert_eq!(
            *line,
            format!(
                "nowcast: {target}: handshake_rtt timed out after 300.0 ms; rtt, rtt_nagle and \
                 bandwidth_up not tried. The port accepts connections but did not answer the \
                 hello: is `nowcast serve` running there?"
            )
        );
    }
}

/// A `nowcast delay` relay in front of `to`, adding `one_way_ms` each way; killed on drop.
struct Relay {
    child: Child,
    addr: String,
}

impl Relay {
    fn start(to: &str, one_way_ms: u32) -> Relay {
        let mut child = Command::new(BIN)
            .args(["delay", "tcp", "--listen", "127.0.0.1:0", "--to", to])
            .args(["--one-way", &one_way_ms.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nowcast delay");
        // "nowcast delay: tcp ADDR → TO, +N ms each way"
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.split_whitespace().nth(3).unwrap().to_string();
        Relay { child, addr }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_slow_nowcast_serve_times_out_as_before_and_is_probed_again() {
    let server = Server::start(&["--bind", "127.0.0.1"]);
    // 400 ms a round trip: a hello given 300 ms times out, then the welcome comes late.
    let relay = Relay::start(&server.tcp, 200);
    let args = [
        "tcp",
        &relay.addr,
        "--count",
        "2",
        "--period",
        "0",
        "--json",
    ];
    let out = nowcast(&[&args[..], &["--deadline", "0.3"]].concat(), LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let recs = records(&out);
    assert_eq!(recs.len(), 8, "both experiments ran: {recs:?}");
    for hello in recs.iter().filter(|r| r.metric == Metric::HandshakeRtt) {
        assert_eq!(hello.status, Status::Timeout, "{hello:?}");
        assert_eq!(hello.timeout_ms, Some(300.0));
    }
    let err = text(&out.stderr);
    assert!(!err.contains("does not speak"), "{err}");
    assert_eq!(
        err.matches("handshake_rtt timed out after 300.0 ms")
            .count(),
        2,
        "{err}"
    );

    // Given the time, the same relay and server measure every series.
    let out = nowcast(&[&args[..], &["--size", "16B"]].concat(), LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let recs = records(&out);
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
    let rtt = recs[1].value.unwrap();
    assert!(rtt >= 400.0, "an echo through the relay: {rtt} ms");
}

#[test]
fn a_server_replaced_during_a_run_is_a_failed_experiment_not_the_end_of_the_run() {
    // The first connection reaches a real `nowcast serve`; later ones a web server.
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let upstream = server.tcp.clone();
    let peer = Peer::start(move |mut s, n| {
        if n > 0 {
            return bad_request(s);
        }
        let mut up = TcpStream::connect(&upstream).unwrap();
        up.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (mut down_from, mut down_to) = (up.try_clone().unwrap(), s.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut down_from, &mut down_to);
            let _ = down_to.shutdown(Shutdown::Write);
        });
        let _ = std::io::copy(&mut s, &mut up);
        let _ = up.shutdown(Shutdown::Write);
        let _ = back.join();
    });
    let target = &peer.addr;
    let out = nowcast(
        &[
            "tcp", target, "--count", "3", "--period", "0", "--size", "16B",
        ],
        LIMIT,
    );
    // Every series measured once: the run's status is that of partial loss.
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(peer.accepted(), 3, "the run went on");
    // A `nowcast serve` has answered there: the line asks nothing.
    let line = format!(
        "nowcast: {target}: hello: the peer does not speak nowcast's protocol (it answered \
         \"HTTP/1.0 400 Bad request\"); rtt, rtt_nagle and bandwidth_up not tried"
    );
    assert_eq!(lines(&out.stderr), [line.clone(), line]);
    let rows = summary(&text(&out.stdout));
    assert_eq!(rows["rtt"][1..3], ["3", "66.7%"], "{rows:?}");
}

#[test]
fn a_busy_nowcast_serve_says_so_and_is_asked_again() {
    let server = Server::start(&["--bind", "127.0.0.1", "--max-sessions-per-client", "1"]);
    // Hold the only session this client may have.
    let mut held = TcpStream::connect(&server.tcp).unwrap();
    held.set_read_timeout(Some(LIMIT)).unwrap();
    held.write_all(&nowcast::wire::Hello::default().encode())
        .unwrap();
    let mut w = [0u8; nowcast::wire::Welcome::LEN];
    held.read_exact(&mut w).unwrap();
    let out = nowcast(
        &["tcp", &server.tcp, "--count", "2", "--period", "0"],
        LIMIT,
    );
    // A refusal for now, not a wrong server: every experiment is tried, and none measured.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = lines(&out.stderr);
    assert_eq!(err.len(), 3, "{err:#?}");
    for line in &err[..2] {
        assert_eq!(
            *line,
            format!(
                "nowcast: {}: hello: the server is busy for this client (its network has as \
                 many sessions open as it may); try again in 5.0 s; rtt, rtt_nagle and \
                 bandwidth_up not tried",
                server.tcp
            )
        );
    }
}
