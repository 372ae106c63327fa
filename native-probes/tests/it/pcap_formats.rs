//! `nowcast pcap` on captures as users bring them, made here with real tools and checked
//! against tshark and against the known rate of the link they were taken on:
//!
//! - behind a 50 Mbit/s tbf bottleneck (the capture after the queue that drops, as at a
//!   receiver), nanosecond pcap with a 96-byte snap length: goodput within 3 % of the link's
//!   goodput and its bytes exactly the sequence space tshark's segments cover (each byte
//!   once: data the queue dropped and the sender resent is new data, not a retransmission
//!   of data seen); the same capture with packets deleted (capture drops) gives the same
//!   goodput (holes acknowledged are delivered); read from standard input (`-`) the same
//!   output; with 802.1Q and 802.1ad+802.1Q tags inserted the same flows; gzip'd
//!   (`gzip -k`), the same flows, the headline saying gzip;
//! - IPv6 with offloads on, captured three ways at once: Linux cooked v1 (`tcpdump -i any
//!   -y LINUX_SLL`), Ethernet from the start, and Ethernet from the middle of the flow (no
//!   handshake, so no MSS): packets, bytes and retransmissions per direction as tshark's,
//!   goodput as tshark's covered sequence space, and the mid-flow capture's TSO
//!   super-segments counted in the flow as Wren counts them;
//! - without root: a small capture with a segment lost before the capture point, read from
//!   standard input; the same gzip'd, read from the file; a gzip cut short, named as such.
//!
//! The namespace tests need root, ip, tc, ethtool, tcpdump, iperf3, tshark and editcap, and
//! skip with a message otherwise. Namespaces are named after this process and removed at the
//! end, after every process started in them has been killed by PID; files live in a folder
//! of the test's own, removed at the end.

use crate::common;

use common::netns::Netns;
use common::{root_missing, run_bounded, sh, text, TempDir, BIN};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

fn missing() -> Option<String> {
    root_missing(&[
        "ip", "tc", "ethtool", "tcpdump", "iperf3", "tshark", "editcap",
    ])
}

const A4: &str = "10.231.78.1";
const B4: &str = "10.231.78.2";
const A6: &str = "fd31:78::1";
const B6: &str = "fd31:78::2";

/// Two namespaces joined by veth, A's egress shaped by tbf at 50 Mbit/s, an iperf3 server
/// in B; the namespaces and every process go with it ([`Netns`]).
struct Lab {
    net: Netns,
    va: String,
}

/// The namespaces' places in [`Lab::net`].
const A: usize = 0;
const B: usize = 1;

impl Lab {
    fn new(tag: &str, offloads: bool) -> Lab {
        let id = format!("{}{tag}", std::process::id());
        let mut lab = Lab {
            net: Netns::new(&[format!("nwfa{id}"), format!("nwfb{id}")]),
            va: format!("fa{id}"),
        };
        let vb = format!("fb{id}");
        let (a, b) = (lab.net.ns[A].clone(), lab.net.ns[B].clone());
        sh(&[
            "ip", "link", "add", &lab.va, "type", "veth", "peer", "name", &vb,
        ]);
        // Both address families, and the offloads as asked (Netns::veth turns them off).
        for (ns, dev, v4, v6) in [(&a, &lab.va, A4, A6), (&b, &vb, B4, B6)] {
            sh(&["ip", "link", "set", dev, "netns", ns]);
            let v4 = format!("{v4}/24");
            let v6 = format!("{v6}/64");
            sh(&["ip", "-n", ns, "addr", "add", &v4, "dev", dev]);
            sh(&["ip", "-n", ns, "addr", "add", &v6, "dev", dev, "nodad"]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            let v = if offloads { "on" } else { "off" };
            sh(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", v, "gso", v, "gro", v,
            ]);
        }
        lab.net.tbf(&a, &lab.va, 50, "32kb", "20ms");
        lab.net.spawn(B, &["iperf3", "-s", "-p", "5201"]);
        lab
    }

    /// tcpdump in A on `iface` into `file`; give it [`Lab::settle`] before traffic.
    fn tcpdump(&mut self, iface: &str, file: &Path, extra: &[&str]) -> usize {
        let f = file.to_str().unwrap().to_string();
        let mut args = vec!["tcpdump", "-i", iface, "-w", &f];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["tcp", "port", "5201"]);
        self.net.spawn(A, &args)
    }

    fn settle() {
        std::thread::sleep(Duration::from_millis(800));
    }

    /// SIGINT: tcpdump writes what it holds and exits.
    fn stop(&mut self, k: usize) {
        self.net.stop(k, "-INT");
    }

    fn iperf(&mut self, args: &[&str]) -> usize {
        let mut v = vec!["iperf3", "-c"];
        v.extend_from_slice(args);
        self.net.spawn(A, &v)
    }

    /// Waits (at most `limit`) for child `k` to exit; true if it exited 0.
    fn wait(&mut self, k: usize, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Ok(Some(s)) = self.net.children[k].try_wait() {
                return s.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// One direction of a flow as `nowcast pcap --flows` reports it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Dir {
    packets: u64,
    bytes: u64,
    payload: u64,
    new: u64,
    mbps: f64,
    retx: u64,
    super_segments: u64,
    handshake: bool,
}

/// "a:p>b:q" → the direction, from `--flows` blocks (each joined into one line).
fn flows_of(stdout: &str) -> HashMap<String, Dir> {
    let mut m = HashMap::new();
    let joined = stdout.replace("\n  ", " ");
    for line in joined.lines().filter(|l| l.starts_with("flow=")) {
        let (a, b) = (field(line, "a").unwrap(), field(line, "b").unwrap());
        for (tag, key) in [("ab", format!("{a}>{b}")), ("ba", format!("{b}>{a}"))] {
            let get = |k: &str| field(line, &format!("{tag}.{k}")).unwrap();
            let n = |k: &str| get(k).parse::<u64>().unwrap();
            if n("packets") == 0 {
                continue;
            }
            let d = m.entry(key).or_insert_with(Dir::default);
            d.packets += n("packets");
            d.bytes += n("bytes");
            d.payload += n("payload");
            d.new += n("new");
            d.retx += n("retx");
            d.super_segments += n("super");
            d.mbps = get("mbps").parse().unwrap_or(0.0);
            d.handshake = field(line, "handshake") == Some("true");
        }
    }
    m
}

fn ours(file: &Path) -> (Output, HashMap<String, Dir>) {
    let mut cmd = Command::new(BIN);
    cmd.args(["pcap", "--flows", s(file)]);
    let out = run_bounded(cmd, LIMIT);
    assert!(out.status.success(), "{file:?}: {}", text(&out.stderr));
    assert!(
        out.stderr.is_empty(),
        "problems reading {file:?}: {}",
        text(&out.stderr)
    );
    let flows = flows_of(&text(&out.stdout));
    (out, flows)
}

/// The direction that carried the most payload.
fn data_dir(m: &HashMap<String, Dir>) -> (String, Dir) {
    m.iter()
        .max_by_key(|(_, d)| d.payload)
        .map(|(k, d)| (k.clone(), d.clone()))
        .expect("a flow")
}

/// tshark's view per direction: packets, frame bytes, retransmissions, and the bytes of
/// sequence space its data segments cover (each byte once: tcptrace's "unique bytes").
#[derive(Debug, Default)]
struct Theirs {
    counts: HashMap<String, (u64, u64, u64)>,
    covered: HashMap<String, u64>,
    /// From the lowest sequence number seen to the highest data end: the covered bytes and
    /// the gaps between them (segments the capture dropped, under load).
    span: HashMap<String, u64>,
}

fn theirs(file: &Path) -> Theirs {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r", s(file), "-Y", "tcp", "-T", "fields"])
        .args(["-E", "separator=|"])
        .args(["-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport"])
        .args(["-e", "ip.dst", "-e", "ipv6.dst", "-e", "tcp.dstport"])
        .args(["-e", "frame.len", "-e", "tcp.analysis.retransmission"])
        .args(["-e", "tcp.seq", "-e", "tcp.len", "-e", "tcp.stream"]);
    let out = run_bounded(cmd, LIMIT);
    assert!(out.status.success(), "tshark: {}", text(&out.stderr));
    let mut t = Theirs::default();
    let mut ranges: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
    for line in text(&out.stdout).lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() < 11 {
            continue;
        }
        let host = |v4: &str, v6: &str| {
            if v4.is_empty() {
                format!("[{v6}]")
            } else {
                v4.to_string()
            }
        };
        let dir = format!(
            "{}:{}>{}:{}",
            host(f[0], f[1]),
            f[2],
            host(f[3], f[4]),
            f[5]
        );
        let c = t.counts.entry(dir.clone()).or_default();
        c.0 += 1;
        c.1 += f[6].parse::<u64>().unwrap();
        c.2 += u64::from(!f[7].is_empty());
        let (seq, len): (u64, u64) = (f[8].parse().unwrap(), f[9].parse().unwrap_or(0));
        if len > 0 {
            ranges.entry(dir).or_default().push((seq, seq + len));
        }
    }
    for (dir, mut v) in ranges {
        v.sort_unstable();
        let lo = v.first().map_or(0, |r| r.0);
        let hi = v.iter().map(|r| r.1).max().unwrap_or(lo);
        t.span.insert(dir.clone(), hi - lo);
        let (mut total, mut upto) = (0u64, 0u64);
        for (a, b) in v {
            let a = a.max(upto);
            if b > a {
                total += b - a;
                upto = b;
            }
        }
        t.covered.insert(dir, total);
    }
    t
}

/// Packets, bytes and retransmissions per direction as tshark's; the data direction's new
/// bytes equal to the sequence space tshark's segments cover. Returns a line of figures.
fn agree_with_tshark(file: &Path, ours: &HashMap<String, Dir>) -> String {
    let t = theirs(file);
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    let mine: HashMap<String, (u64, u64, u64)> = ours
        .iter()
        .map(|(k, d)| (k.clone(), (d.packets, d.bytes, d.retx)))
        .collect();
    assert_eq!(
        mine, t.counts,
        "{name}: packets, bytes, retransmissions per direction"
    );
    let (k, d) = data_dir(ours);
    let (covered, span) = (t.covered[&k], t.span[&k]);
    if covered == span {
        assert_eq!(
            d.new, covered,
            "{name}: {k}: new bytes vs the sequence space tshark's segments cover"
        );
    } else {
        // The capture dropped segments (tcpdump under the suite's load): their bytes count
        // as new once acknowledged (as tcptrace's unique bytes), beyond what tshark's
        // segments cover and within the span of sequence space seen.
        assert!(
            covered <= d.new && d.new <= span,
            "{name}: {k}: new bytes {} vs tshark's covered {covered} and span {span}",
            d.new
        );
    }
    format!(
        "{name}: {k}: {} packets, {} retransmissions, new bytes {} = covered {}, payload {}, goodput {:.2} Mbit/s",
        d.packets, d.retx, d.new, covered, d.payload, d.mbps
    )
}

/// The goodput a 50 Mbit/s tbf leaves to TCP segments of `mss` payload bytes in 1514-byte
/// Ethernet frames (tbf counts the frame).
fn link_goodput(mss: f64) -> f64 {
    50.0 * mss / 1514.0
}

/// A classic little-endian pcap with `tags` (TPID, VLAN id) inserted after the MAC
/// addresses of every frame.
fn with_vlan_tags(src: &Path, dst: &Path, tags: &[(u16, u16)]) {
    let b = std::fs::read(src).unwrap();
    let le = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(le(0), 0xa1b2_3c4d, "a nanosecond little-endian pcap");
    let mut ins = Vec::new();
    for (tpid, id) in tags {
        ins.extend_from_slice(&tpid.to_be_bytes());
        ins.extend_from_slice(&id.to_be_bytes());
    }
    let mut out = b[..24].to_vec();
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = le(at + 8) as usize;
        let frame = &b[at + 16..at + 16 + caplen];
        out.extend_from_slice(&b[at..at + 8]);
        out.extend_from_slice(&((caplen + ins.len()) as u32).to_le_bytes());
        out.extend_from_slice(&(le(at + 12) + ins.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame[..12]);
        out.extend_from_slice(&ins);
        out.extend_from_slice(&frame[12..]);
        at += 16 + caplen;
    }
    std::fs::write(dst, out).unwrap();
}

fn nowcast_stdin(args: &[&str], input: Vec<u8>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nowcast");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = common::wait_child(child, LIMIT);
    let _ = feeder.join();
    out
}

#[test]
fn behind_a_50_mbit_bottleneck_goodput_is_the_link_s_in_every_form_of_the_capture() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("pcap-formats-bottleneck");
    let p = |n: &str| -> PathBuf { dir.join(n) };
    let mut lab = Lab::new("g", false);
    Lab::settle();
    let va = lab.va.clone();
    let cap = p("behind.pcap");
    let dump = lab.tcpdump(&va, &cap, &["-s", "96", "--time-stamp-precision", "nano"]);
    Lab::settle();
    let client = lab.iperf(&[B4, "-t", "2"]);
    assert!(lab.wait(client, LIMIT), "iperf3 failed");
    std::thread::sleep(Duration::from_millis(300));
    lab.stop(dump);
    drop(lab);

    // Goodput: the link's, and the sequence space tshark sees covered.
    let (out, flows) = ours(&cap);
    let mut lines = vec![agree_with_tshark(&cap, &flows)];
    let (k, d) = data_dir(&flows);
    let want = link_goodput(1448.0);
    assert!(
        (d.mbps - want).abs() <= 0.03 * want,
        "{k}: goodput {} Mbit/s, the link's is {want:.2}",
        d.mbps
    );
    lines.push(format!(
        "goodput {:.2} Mbit/s vs the link's {want:.2} ({:+.2} %), {} retransmissions",
        d.mbps,
        (d.mbps / want - 1.0) * 100.0,
        d.retx
    ));

    // Capture drops: every 40th packet deleted; the holes are acknowledged, so delivered.
    // Not in the capture's last part, where the acknowledgement of a hole may be the very
    // packet deleted, with none after it (then the hole is rightly not counted).
    let mut del = vec![s(&cap).to_string(), s(&p("drops.pcap")).to_string()];
    del.extend((100..d.packets).step_by(40).map(|n| n.to_string()));
    let mut cmd = Command::new("editcap");
    cmd.args(&del);
    let e = run_bounded(cmd, LIMIT);
    assert!(e.status.success(), "editcap: {}", text(&e.stderr));
    let (_, dropped) = ours(&p("drops.pcap"));
    let dd = &dropped[&k];
    assert!(dd.packets < d.packets && dd.payload < d.payload);
    assert_eq!(
        dd.new, d.new,
        "{k}: data the capture missed but the receiver acknowledged is goodput"
    );
    lines.push(format!(
        "drops.pcap: {} of {} packets, payload {} of {}, new bytes {} (the same)",
        dd.packets, d.packets, dd.payload, d.payload, dd.new
    ));

    // Standard input: the same output.
    let piped = nowcast_stdin(&["pcap", "--flows", "-"], std::fs::read(&cap).unwrap());
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    assert_eq!(text(&piped.stdout), text(&out.stdout), "read from `-`");

    // VLAN tags: the same flows, 4 bytes more per tag and frame.
    for (name, tags) in [
        ("vlan.pcap", &[(0x8100u16, 42u16)][..]),
        ("qinq.pcap", &[(0x88a8, 7), (0x8100, 42)][..]),
    ] {
        with_vlan_tags(&cap, &p(name), tags);
        let (_, tagged) = ours(&p(name));
        assert_eq!(tagged.len(), flows.len(), "{name}");
        for (k, d) in &flows {
            let t = &tagged[k];
            let mut expect = d.clone();
            expect.bytes += 4 * tags.len() as u64 * d.packets;
            assert_eq!(t, &expect, "{name}: {k}");
        }
        lines.push(agree_with_tshark(&p(name), &tagged));
    }

    // gzip'd (as `tcpdump -z gzip` leaves a rotated file): read through, the same flows.
    let gz = p("behind.pcap.gz");
    let mut cmd = Command::new("gzip");
    cmd.args(["-k", s(&cap)]);
    if run_bounded(cmd, LIMIT).status.success() {
        let (_, unzipped) = ours(&gz);
        assert_eq!(unzipped, flows, "the gzip'd capture's flows");
        let mut cmd = Command::new(BIN);
        cmd.args(["pcap", s(&gz)]);
        let out = run_bounded(cmd, LIMIT);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(", gzip)"),
            "{}",
            text(&out.stdout)
        );
    }
    for l in lines {
        eprintln!("{l}");
    }
}

#[test]
fn ipv6_with_offloads_as_cooked_v1_whole_and_mid_flow_captures() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("pcap-formats-v6");
    let p = |n: &str| -> PathBuf { dir.join(n) };
    let mut lab = Lab::new("s", true);
    Lab::settle();
    let va = lab.va.clone();
    let (cooked, whole, mid) = (p("cooked_v1.pcap"), p("whole.pcap"), p("mid.pcap"));
    let d1 = lab.tcpdump("any", &cooked, &["-s", "128", "-y", "LINUX_SLL"]);
    let d2 = lab.tcpdump(&va, &whole, &["-s", "128"]);
    Lab::settle();
    let client = lab.iperf(&[B6, "-t", "3"]);
    std::thread::sleep(Duration::from_millis(1200));
    let d3 = lab.tcpdump(&va, &mid, &["-s", "128"]);
    std::thread::sleep(Duration::from_millis(1200));
    lab.stop(d3);
    assert!(lab.wait(client, LIMIT), "iperf3 failed");
    std::thread::sleep(Duration::from_millis(300));
    lab.stop(d1);
    lab.stop(d2);
    drop(lab);

    let mut lines = Vec::new();
    for f in [&cooked, &whole, &mid] {
        let (_, flows) = ours(f);
        lines.push(agree_with_tshark(f, &flows));
        let (k, d) = data_dir(&flows);
        assert!(k.starts_with('['), "{k}: an IPv6 flow");
        if f == &whole {
            // MSS 1428: 1500 less the IPv6 and TCP headers and the timestamp option.
            let want = link_goodput(1428.0);
            assert!(
                (d.mbps - want).abs() <= 0.03 * want,
                "{k}: goodput {} Mbit/s, the link's is {want:.2}",
                d.mbps
            );
            lines.push(format!(
                "whole: goodput {:.2} vs the link's {want:.2}",
                d.mbps
            ));
        }
        if f == &mid {
            // No handshake, so no MSS: super-segments are told by an Ethernet MTU's worth,
            // in the flow's count as in Wren's.
            assert!(!d.handshake);
            let (out, _) = {
                let mut cmd = Command::new(BIN);
                cmd.args(["pcap", s(f)]);
                let o = run_bounded(cmd, LIMIT);
                (o, ())
            };
            let table = text(&out.stdout);
            assert!(
                table.contains(&format!("{} TSO/GSO super-segments", d.super_segments)),
                "{k}: {} super-segments in the flow, Wren's note differs: {table}",
                d.super_segments
            );
            assert!(d.super_segments > 0, "offloads on: super-segments captured");
            lines.push(format!("mid: {} super-segments", d.super_segments));
        }
    }
    for l in lines {
        eprintln!("{l}");
    }
}

/// An Ethernet + IPv4 + TCP frame between 192.0.2.1:40000 and 192.0.2.2:80 (`up` from the
/// first).
fn frame(up: bool, seq: u32, ack: u32, flags: u8, payload: usize) -> Vec<u8> {
    let (src, dst, sp, dp) = if up {
        ([192, 0, 2, 1], [192, 0, 2, 2], 40000u16, 80u16)
    } else {
        ([192, 0, 2, 2], [192, 0, 2, 1], 80, 40000)
    };
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (40 + payload) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sp.to_be_bytes());
    f.extend_from_slice(&dp.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.resize(f.len() + payload, 0x61);
    f
}

#[test]
fn a_segment_lost_before_the_capture_point_counts_once_read_from_standard_input() {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const FIN: u8 = 0x01;
    let mut frames = vec![
        frame(true, 999, 0, SYN, 0),
        frame(false, 4999, 1000, SYN | ACK, 0),
        frame(true, 1000, 5000, ACK, 0),
    ];
    // Five segments of 1000 bytes; the third never reaches the capture point, is
    // acknowledged around (duplicate ACKs), resent, and then all is acknowledged.
    for i in [0u32, 1, 3, 4] {
        frames.push(frame(true, 1000 + i * 1000, 5000, ACK, 1000));
        frames.push(frame(
            false,
            5000,
            if i < 2 { 2000 + i * 1000 } else { 3000 },
            ACK,
            0,
        ));
    }
    frames.push(frame(true, 3000, 5000, ACK, 1000));
    frames.push(frame(false, 5000, 6000, ACK, 0));
    frames.push(frame(true, 6000, 5000, FIN | ACK, 0));
    frames.push(frame(false, 5000, 6001, FIN | ACK, 0));
    frames.push(frame(true, 6001, 5001, ACK, 0));
    let mut pcap = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        pcap.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        let us = 1_700_000_000_000_000u64 + i as u64 * 1000;
        pcap.extend_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
        pcap.extend_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(f);
    }
    let out = nowcast_stdin(&["pcap", "--flows", "-"], pcap.clone());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let flows = flows_of(&text(&out.stdout));
    let up = &flows["192.0.2.1:40000>192.0.2.2:80"];
    assert_eq!((up.payload, up.retx), (5000, 1), "{up:?}");
    assert_eq!(
        up.new, 5000,
        "the resent segment's data is new at the capture point"
    );

    // The same capture gzip'd is read from its file, with the same flows; one cut short is
    // named as such.
    let dir = TempDir::new("pcap-formats-gz");
    let gz = dir.join("trace.pcap.gz");
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &pcap).unwrap();
    let zipped = z.finish().unwrap();
    std::fs::write(&gz, &zipped).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["pcap", "--flows", s(&gz)]);
    let out = run_bounded(cmd, LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(flows_of(&text(&out.stdout)), flows);
    std::fs::write(&gz, &zipped[..zipped.len() - 12]).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["pcap", s(&gz)]);
    let out = run_bounded(cmd, LIMIT);
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}: ", s(&gz))) && err.contains("the gzip stream is cut short"),
        "{err}"
    );
}
