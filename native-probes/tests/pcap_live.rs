//! `nowcast pcap --live` on a veth between two network namespaces while iperf3 sends 1 Gbit/s
//! of TCP: the table comes once a second, the final summary names libpcap's counters and
//! none is dropped; with `--json`, a SIGINT stops it cleanly with the flow's records written.
//! Without CAP_NET_RAW (run as `nobody`), a clear error names the capability.
//!
//! Needs root, ip, ethtool, iperf3 and setpriv; skips with a message otherwise.

mod common;

use common::{records, root_missing, run_bounded, sh, text, BIN};
use nowcast_core::record::Metric;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn missing() -> Option<String> {
    root_missing(&["ip", "ethtool", "iperf3", "setpriv"])
}

struct Pair {
    a: String,
    b: String,
    children: Vec<std::process::Child>,
}

impl Drop for Pair {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[test]
fn on_emulated_links_live_capture_at_one_gigabit() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let id = std::process::id();
    let mut p = Pair {
        a: format!("nwla{id}"),
        b: format!("nwlb{id}"),
        children: Vec::new(),
    };
    let (va, vb) = (format!("la{id}"), format!("lb{id}"));
    sh(&["ip", "netns", "add", &p.a]);
    sh(&["ip", "netns", "add", &p.b]);
    sh(&[
        "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
    ]);
    sh(&["ip", "link", "set", &va, "netns", &p.a]);
    sh(&["ip", "link", "set", &vb, "netns", &p.b]);
    for (ns, dev, ip) in [(&p.a, &va, "10.231.66.1/24"), (&p.b, &vb, "10.231.66.2/24")] {
        sh(&["ip", "-n", ns, "addr", "add", ip, "dev", dev]);
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        sh(&[
            "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro",
            "off",
        ]);
    }
    let server = Command::new("ip")
        .args(["netns", "exec", &p.b, "iperf3", "-s", "-p", "5201"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    p.children.push(server);
    std::thread::sleep(Duration::from_millis(500));

    // 1. The table, 6 s, while iperf3 sends 1 Gbit/s for 4 s.
    let mut live = Command::new("ip");
    live.args([
        "netns",
        "exec",
        &p.a,
        BIN,
        "pcap",
        "--live",
        &va,
        "--duration",
        "6",
    ]);
    let watcher = std::thread::spawn(move || run_bounded(live, LIMIT));
    std::thread::sleep(Duration::from_millis(1000));
    let mut iperf = Command::new("ip");
    iperf.args([
        "netns",
        "exec",
        &p.a,
        "iperf3",
        "-c",
        "10.231.66.2",
        "-b",
        "1G",
        "-t",
        "4",
    ]);
    let sent = run_bounded(iperf, LIMIT);
    assert!(sent.status.success(), "iperf3: {}", text(&sent.stderr));
    let out = watcher.join().unwrap();
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{}{}", shown, text(&out.stderr));
    let ticks = shown.lines().filter(|l| l.starts_with("-- ")).count();
    assert!(ticks >= 4, "a table each second: {shown}");
    let counters = shown
        .lines()
        .find(|l| l.contains("libpcap received"))
        .unwrap_or_else(|| panic!("no libpcap counters in {shown}"));
    eprintln!("{counters}");
    let dropped: u64 = counters
        .split("dropped ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("dropped count");
    assert_eq!(dropped, 0, "the analyser lost packets: {counters}");
    let rate = text(&sent.stdout)
        .lines()
        .find(|l| l.contains("sender"))
        .map(str::to_string)
        .unwrap_or_default();
    eprintln!("iperf3: {rate}");

    // 2. NDJSON records, stopped by SIGINT.
    let mut live = Command::new("ip");
    live.args(["netns", "exec", &p.a, BIN, "pcap", "--live", &va, "--json"]);
    let child = live
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(800));
    let mut iperf = Command::new("ip");
    iperf.args([
        "netns",
        "exec",
        &p.a,
        "iperf3",
        "-c",
        "10.231.66.2",
        "-b",
        "1G",
        "-t",
        "2",
    ]);
    assert!(run_bounded(iperf, LIMIT).status.success());
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "SIGINT is a clean stop: {}",
        text(&out.stderr)
    );
    let recs = records(&out);
    assert!(
        recs.iter()
            .any(|r| r.metric == Metric::Throughput && r.source == "pcap"),
        "the flow's records: {recs:?}"
    );
    assert!(
        text(&out.stderr).contains("libpcap received"),
        "the final summary goes to standard error with --json: {}",
        text(&out.stderr)
    );

    // 3. Without the privilege.
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .args([BIN, "pcap", "--live", "lo", "--duration", "1"]);
    let out = run_bounded(cmd, LIMIT);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("CAP_NET_RAW"), "{err}");
}
