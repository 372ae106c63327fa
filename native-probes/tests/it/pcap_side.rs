//! Which end of its flows a capture was taken at, as `nowcast pcap` judges it for Wren (the
//! default, `WrenSide::Sender`: only the directions whose sender is at the capture point are
//! analysed), on namespaces where one handshake's timing can say either: a round trip of
//! some microseconds, and the host's own time from the SYN/ACK to its ACK stretched by load.
//!
//! Hosts A and B, each in its namespace, joined through a third:
//! - **a LAN**: the third bridges them (TTLs at 64 both ways, as through a switch, so the
//!   TTLs say nothing and only the pooled handshakes can); A uploads to B;
//! - **a routed path**: the third routes (each host's packets reach the other at 63); B,
//!   the server, sends: the data's sender is the responder.
//!
//! Load: a busy loop pinned to core 0 (taskset) and the clients' three threads pinned there
//! too, 70 short connections each (64 KB), while tcpdump captures at both ends. Both ends'
//! captures show super-segments (the sender's TSO ones, which veth, the bridge and the
//! router pass on whole, as GRO merges segments at a receiver on a real NIC), so these do
//! not tell the ends apart. For each capture it counts the
//! flows whose own handshake says the capture is at the receiver (the rule before the
//! handshakes were pooled per address) and the data directions `nowcast pcap` leaves out as
//! captured at the receiver: at the sender none may be, at the receiver all.
//!
//! Needs root, ip, tcpdump and taskset; skips with a message otherwise. Namespaces
//! are named after this process and removed at the end, after every process started in them
//! has been killed by PID; the captures live in a folder of the test's own, removed at the
//! end (NOWCAST_KEEP_CAPTURES names a folder to keep them in). PCAP_SIDE_CONNECTIONS sets
//! the connections per client (70) for a longer run.

use crate::common;

use common::netns::{in_ns, Netns};
use common::{nowcast, root_missing, sh, text, TempDir};
use nowcast::pcap::decode::{self, flag, Endpoint};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);
const PORT: u16 = 5301;
const BODY: usize = 64 * 1024;
const CLIENTS: usize = 3;
const IO: Duration = Duration::from_secs(5);

fn missing() -> Option<String> {
    root_missing(&["ip", "tcpdump", "taskset"])
}

/// Who sends the data.
#[derive(Clone, Copy, PartialEq)]
enum Data {
    /// The client (the initiator).
    Uploads,
    /// The server (the responder).
    Downloads,
}

/// A, B and the namespace between them; everything goes when it is dropped ([`Netns`]).
struct Lab {
    net: Netns,
    a_ip: String,
    b_ip: String,
}

/// The namespaces' places in [`Lab::net`].
const A: usize = 0;
const M: usize = 1;
const B: usize = 2;

impl Lab {
    /// `routed`: the middle namespace routes (else it bridges). The veths keep their
    /// offloads (TSO and GSO on).
    fn new(tag: &str, routed: bool) -> Lab {
        let id = format!("{tag}{}", std::process::id());
        let net = Netns::new(&["a", "m", "b"].map(|r| format!("nwq{r}{id}")));
        let ns = |i: usize| net.ns[i].as_str();
        let [qa, qma, qb, qmb] = ["a", "ma", "b", "mb"].map(|d| format!("q{d}{id}"));
        for (host, dev, mid) in [(A, &qa, &qma), (B, &qb, &qmb)] {
            sh(&[
                "ip", "link", "add", dev, "type", "veth", "peer", "name", mid,
            ]);
            sh(&["ip", "link", "set", dev, "netns", ns(host)]);
            sh(&["ip", "link", "set", mid, "netns", ns(M)]);
            sh(&["ip", "-n", ns(host), "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns(M), "link", "set", mid, "up"]);
        }
        let (a_ip, b_ip) = if routed {
            for (dev, addr) in [(&qma, "10.232.1.254/24"), (&qmb, "10.232.2.254/24")] {
                sh(&["ip", "-n", ns(M), "addr", "add", addr, "dev", dev]);
            }
            sh(&[
                "ip",
                "netns",
                "exec",
                ns(M),
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ]);
            ("10.232.1.1", "10.232.2.2")
        } else {
            let br = format!("qbr{id}");
            sh(&["ip", "-n", ns(M), "link", "add", &br, "type", "bridge"]);
            sh(&["ip", "-n", ns(M), "link", "set", &br, "up"]);
            for dev in [&qma, &qmb] {
                sh(&["ip", "-n", ns(M), "link", "set", dev, "master", &br]);
            }
            ("10.232.1.1", "10.232.1.2")
        };
        for (host, dev, ip, gw) in [
            (A, &qa, a_ip, "10.232.1.254"),
            (B, &qb, b_ip, "10.232.2.254"),
        ] {
            let addr = format!("{ip}/24");
            sh(&["ip", "-n", ns(host), "addr", "add", &addr, "dev", dev]);
            if routed {
                sh(&["ip", "-n", ns(host), "route", "add", "default", "via", gw]);
            }
        }
        Lab {
            a_ip: a_ip.into(),
            b_ip: b_ip.into(),
            net,
        }
    }
}

/// Pins the calling thread to core 0.
fn pin_to_core_0() {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes into it, and
    // sched_setaffinity (pid 0: this thread) only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity");
    }
}

/// Reads until the peer's FIN (or the time limit).
fn drain(s: &mut TcpStream) {
    let mut buf = vec![0u8; 1 << 16];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}

/// The server in B: serves `total` connections (or stops at the time limit); returns how
/// many it served.
fn server(ns: &str, data: Data, total: usize) -> std::thread::JoinHandle<usize> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = in_ns(ns, move || {
        let l = TcpListener::bind(("0.0.0.0", PORT)).expect("bind the server");
        l.set_nonblocking(true).unwrap();
        tx.send(()).unwrap();
        let until = Instant::now() + LIMIT;
        let mut served = Vec::new();
        while served.len() < total && Instant::now() < until {
            match l.accept() {
                Ok((mut c, _)) => served.push(std::thread::spawn(move || {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(IO)).unwrap();
                    c.set_write_timeout(Some(IO)).unwrap();
                    if data == Data::Downloads {
                        let _ = c.write_all(&[0x5a; BODY]);
                        let _ = c.shutdown(Shutdown::Write);
                    }
                    drain(&mut c);
                })),
                Err(_) => std::thread::sleep(Duration::from_micros(100)),
            }
        }
        let n = served.len();
        served.into_iter().for_each(|h| h.join().unwrap());
        n
    });
    rx.recv_timeout(Duration::from_secs(5)).expect("the server");
    h
}

/// One client thread in A, pinned to core 0: `n` connections one after another.
fn client(ns: &str, to: SocketAddr, data: Data, n: usize) -> std::thread::JoinHandle<()> {
    in_ns(ns, move || {
        pin_to_core_0();
        for _ in 0..n {
            let mut s = TcpStream::connect_timeout(&to, IO).expect("connect");
            s.set_read_timeout(Some(IO)).unwrap();
            s.set_write_timeout(Some(IO)).unwrap();
            if data == Data::Uploads {
                s.write_all(&[0x5a; BODY]).expect("upload");
                s.shutdown(Shutdown::Write).unwrap();
            }
            drain(&mut s);
        }
    })
}

/// What one capture showed.
#[derive(Debug, Default)]
struct Seen {
    /// Flows with a whole handshake.
    handshakes: usize,
    /// Of them, those whose own handshake says the capture is at the data's receiver (the
    /// rule before the handshakes were pooled: near the initiator when SYN→SYN/ACK ≥
    /// SYN/ACK→ACK).
    own_says_receiver: usize,
    /// Data directions in `nowcast pcap`'s table, and those it left out as captured at the
    /// receiver.
    data_directions: usize,
    left_out: usize,
    /// Super-segments in the data directions (`--flows`).
    super_segments: u64,
}

/// The handshakes of `file`, each judged by its own timing alone.
fn own_handshakes(file: &Path, sender: &str, seen: &mut Seen) {
    #[derive(Clone, Copy)]
    struct Hs {
        initiator: Endpoint,
        syn: i64,
        synack: Option<i64>,
    }
    let mut open: HashMap<(Endpoint, Endpoint), Hs> = HashMap::new();
    let src = std::fs::File::open(file).expect("the capture");
    nowcast::pcap::read::read_capture(
        std::io::BufReader::new(src),
        |fr| {
            let Ok(p) = decode::decode(fr.link, fr.data, fr.orig_len, fr.ts_ns) else {
                return;
            };
            let key = if p.src <= p.dst {
                (p.src, p.dst)
            } else {
                (p.dst, p.src)
            };
            let (syn, ack) = (p.has(flag::SYN), p.has(flag::ACK));
            if syn && !ack {
                let hs = Hs {
                    initiator: p.src,
                    syn: p.ts_ns,
                    synack: None,
                };
                open.insert(key, hs);
                return;
            }
            match open.get_mut(&key) {
                Some(h) if syn && ack && h.synack.is_none() => h.synack = Some(p.ts_ns),
                Some(h) if !syn && ack && p.src == h.initiator && h.synack.is_some() => {
                    let synack = h.synack.unwrap_or_default();
                    let near_initiator = synack - h.syn >= p.ts_ns - synack;
                    let sender_initiates = h.initiator.addr.to_string() == sender;
                    seen.handshakes += 1;
                    seen.own_says_receiver += usize::from(near_initiator != sender_initiates);
                    open.remove(&key);
                }
                _ => {}
            }
        },
        |_| {},
    )
    .expect("read the capture");
}

/// `nowcast pcap`'s judgement of `file`, whose data `sender` sent.
fn judged(file: &Path, sender: &str, seen: &mut Seen) {
    let f = file.to_str().unwrap();
    let table = nowcast(&["pcap", "--rows", "1000000", f], LIMIT);
    assert!(table.status.success(), "{}", text(&table.stderr));
    // A direction's row, then its details indented below it (Wren's among them).
    let mut from_sender = false;
    for line in text(&table.stdout).lines() {
        if line.starts_with(' ') {
            if from_sender {
                seen.left_out +=
                    usize::from(line.contains("no avail bw: the capture is at the receiver"));
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        from_sender = words.get(2) == Some(&"→")
            && words[1]
                .rsplit_once(':')
                .is_some_and(|(ip, _)| ip == sender);
        seen.data_directions += usize::from(from_sender);
    }
    let flows = nowcast(&["pcap", "--flows", f], LIMIT);
    assert!(flows.status.success(), "{}", text(&flows.stderr));
    for w in text(&flows.stdout).split_whitespace() {
        if let Some(n) = w
            .strip_prefix("ab.super=")
            .or_else(|| w.strip_prefix("ba.super="))
        {
            seen.super_segments += n.parse::<u64>().unwrap();
        }
    }
}

/// Runs the connections on `lab` under load, captured at both ends; returns what the
/// capture at the data's sender and the one at its receiver showed.
fn run(mut lab: Lab, data: Data, per_client: usize, dir: &Path, tag: &str) -> [Seen; 2] {
    let files = [A, B].map(|i| dir.join(format!("{tag}-{}.pcap", ["a", "m", "b"][i])));
    let port = PORT.to_string();
    let dumps = [A, B].map(|i| {
        let f = files[usize::from(i == B)].to_str().unwrap().to_string();
        lab.net.spawn(
            i,
            &[
                "tcpdump",
                "-U",
                "--immediate-mode",
                "-i",
                "any",
                "-s",
                "128",
                "--time-stamp-precision=nano",
                "-w",
                &f,
                "tcp",
                "port",
                &port,
            ],
        )
    });
    // tcpdump writes the file's header (-U: at once) once its filter is set; each packet
    // then as it comes (--immediate-mode: none waits in a buffer block that SIGINT drops).
    let until = Instant::now() + Duration::from_secs(5);
    let ready = |f: &Path| std::fs::metadata(f).is_ok_and(|m| m.len() >= 24);
    while !files.iter().all(|f| ready(f)) {
        assert!(Instant::now() < until, "tcpdump did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let busy = lab.net.spawn(
        A,
        &["taskset", "-c", "0", "sh", "-c", "while :; do :; done"],
    );
    let total = CLIENTS * per_client;
    let srv = server(&lab.net.ns[B], data, total);
    let to: SocketAddr = format!("{}:{PORT}", lab.b_ip).parse().unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| client(&lab.net.ns[A], to, data, per_client))
        .collect();
    clients.into_iter().for_each(|c| c.join().expect("client"));
    assert_eq!(srv.join().unwrap(), total, "connections served");
    lab.net.stop(busy, "-KILL");
    std::thread::sleep(Duration::from_millis(300));
    for k in dumps {
        lab.net.stop(k, "-INT");
    }
    let (sender, at_sender) = match data {
        Data::Uploads => (lab.a_ip.clone(), A),
        Data::Downloads => (lab.b_ip.clone(), B),
    };
    drop(lab);
    if let Ok(keep) = std::env::var("NOWCAST_KEEP_CAPTURES") {
        for f in &files {
            let _ = std::fs::copy(f, Path::new(&keep).join(f.file_name().unwrap()));
        }
    }
    let mut seen = [Seen::default(), Seen::default()];
    for (i, s) in seen.iter_mut().enumerate() {
        let at = if i == 0 { at_sender } else { A + B - at_sender };
        let file = &files[usize::from(at == B)];
        own_handshakes(file, &sender, s);
        judged(file, &sender, s);
        assert_eq!(s.handshakes, total, "{file:?}: handshakes captured, {s:?}");
        assert_eq!(s.data_directions, total, "{file:?}: data directions, {s:?}");
    }
    seen
}

#[test]
fn the_capture_side_is_judged_from_every_handshake_under_load() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let per_client = std::env::var("PCAP_SIDE_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(70);
    let dir = TempDir::new("pcap-side");
    let t0 = Instant::now();
    let mut failures = Vec::new();
    for (what, routed, data) in [
        ("LAN (bridged), uploads", false, Data::Uploads),
        ("routed path, downloads", true, Data::Downloads),
    ] {
        let tag = if routed { "r" } else { "l" };
        let lab = Lab::new(tag, routed);
        let [snd, rcv] = run(lab, data, per_client, &dir, tag);
        eprintln!(
            "{what}, {} connections: at the sender, {} handshakes alone say receiver, nowcast pcap left out {} data directions ({} super-segments); at the receiver, {} handshakes alone say receiver, nowcast pcap left out {} of {} ({} super-segments)",
            snd.handshakes,
            snd.own_says_receiver,
            snd.left_out,
            snd.super_segments,
            rcv.own_says_receiver,
            rcv.left_out,
            rcv.data_directions,
            rcv.super_segments,
        );
        if snd.left_out != 0 {
            failures.push(format!("{what}: {snd:?} at the sender"));
        }
        if rcv.left_out != rcv.data_directions {
            failures.push(format!("{what}: {rcv:?} at the receiver"));
        }
        // Both ends' captures have super-segments.
        if snd.super_segments == 0 || rcv.super_segments == 0 {
            failures.push(format!("{what}: super-segments {snd:?} {rcv:?}"));
        }
    }
    eprintln!("({:.1} s)", t0.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{failures:#?}");
}
