//! FOBS on an emulated link (docs/testing.md), the short version of
//! `native-probes/bench/fobs_link.py`: two network namespaces joined by a veth pair with a
//! 400 Mbit/s tbf on the sender's side, a `nowcast fobs recv` in one and `nowcast fobs send`
//! in the other. In one run:
//! - a file sent through 1 % random loss (nft `numgen random` drops) arrives intact: the
//!   stored copy's SHA-256 (computed by `sha256sum`, not by the tool) equals the source's;
//! - an interrupted transfer leaves nothing under the final name, and `--resume` finishes
//!   it without sending again what the receiver already held;
//! - forged datagrams sent to the receiver during a transfer (a well-formed data header
//!   with a guessed session, and garbage) are dropped and counted by reason, and the file
//!   still arrives intact;
//! - a sender without the receiver's token is refused, and nothing is created;
//! - fresh labelled signatures (network: 3 % random drops; CPU: the receiver stopped with
//!   SIGSTOP/SIGCONT for a few ms at a time behind a small SO_RCVBUF) are diagnosed by the
//!   shipped model as their cause (at least 70 % correct, at most 20 % wrong, in this short
//!   run of about six signatures each; the held-out accuracy is measured by the bench).
//!
//! Needs root, iproute2, nft, ethtool and sha256sum; skips with a message otherwise. Namespaces and
//! devices are named after this process; every process started in a namespace is killed by
//! PID before the namespace is deleted, and the files live in a directory removed at the end.

use crate::common;

use common::{clear_random_drop, random_drop, root_missing, run_bounded, sh, text, BIN};
use nowcast_core::record::LossCount;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RX_IP: &str = "10.232.0.2";
const TX_IP: &str = "10.232.0.1";
const TOKEN: &str = "00112233445566778899aabbccddeeff";
const PORT: &str = "8071";
const LIMIT: Duration = Duration::from_secs(60);

/// A receiver's output lines, collected as they come.
type Lines = Arc<Mutex<Vec<String>>>;

/// Two namespaces, a veth pair, a tbf on the sender's egress, and a scratch directory.
struct Link {
    tx: String,
    rx: String,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Link {
    fn new() -> Link {
        let id = std::process::id();
        let dir = std::env::temp_dir().join(format!("nowcast-fobs-link-{id}"));
        std::fs::create_dir_all(dir.join("rx")).expect("scratch directory");
        let link = Link {
            tx: format!("nwft{id}"),
            rx: format!("nwfr{id}"),
            dir,
            children: Vec::new(),
        };
        let (dt, dr) = (format!("vft{id}"), format!("vfr{id}"));
        sh(&["ip", "netns", "add", &link.tx]);
        sh(&["ip", "netns", "add", &link.rx]);
        sh(&[
            "ip", "link", "add", &dt, "type", "veth", "peer", "name", &dr,
        ]);
        sh(&["ip", "link", "set", &dt, "netns", &link.tx]);
        sh(&["ip", "link", "set", &dr, "netns", &link.rx]);
        sh(&[
            "ip",
            "-n",
            &link.tx,
            "addr",
            "add",
            &format!("{TX_IP}/24"),
            "dev",
            &dt,
        ]);
        sh(&[
            "ip",
            "-n",
            &link.rx,
            "addr",
            "add",
            &format!("{RX_IP}/24"),
            "dev",
            &dr,
        ]);
        for (ns, dev) in [(&link.tx, &dt), (&link.rx, &dr)] {
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        // The sender's UDP GSO batches are cut into datagrams before the veth (as a NIC puts
        // them on the wire one by one); otherwise a batch crosses as one buffer and a random
        // drop loses 64 datagrams at once.
        sh(&[
            "ip",
            "netns",
            "exec",
            &link.tx,
            "ethtool",
            "-K",
            &dt,
            "tx-udp-segmentation",
            "off",
        ]);
        sh(&[
            "ip", "netns", "exec", &link.tx, "tc", "qdisc", "add", "dev", &dt, "root", "tbf",
            "rate", "400mbit", "burst", "500kb", "latency", "20ms",
        ]);
        link
    }

    fn in_ns(&self, ns: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]);
        // The senders' path memory in the test's own directory, not the user's.
        c.env("XDG_STATE_HOME", self.dir.join("state"));
        c
    }

    fn rx_dir(&self) -> PathBuf {
        self.dir.join("rx")
    }

    /// Starts `nowcast fobs recv` (and `extra` flags); returns its index and its lines.
    fn receiver(&mut self, extra: &[&str]) -> (usize, Lines) {
        let mut cmd = self.in_ns(&self.rx);
        cmd.args([
            BIN, "fobs", "recv", "--listen", RX_IP, "--port", PORT, "--token", TOKEN,
        ])
        .arg("--dir")
        .arg(self.rx_dir())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("start nowcast fobs recv");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut first = String::new();
        out.read_line(&mut first).expect("the listening line");
        assert!(first.contains("listening on"), "{first}");
        let lines: Lines = Arc::default();
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        self.children.push(child);
        (self.children.len() - 1, lines)
    }

    fn stop(&mut self, i: usize) {
        end(&mut self.children[i]);
    }

    fn send_cmd(&self, file: &Path, name: &str, extra: &[&str]) -> Command {
        let mut cmd = self.in_ns(&self.tx);
        cmd.args([BIN, "fobs", "send"])
            .arg(file)
            .arg(format!("{RX_IP}:{PORT}"))
            .args(["--token", TOKEN, "--name", name, "-q"])
            .args(extra);
        cmd
    }

    fn send(&self, file: &Path, name: &str, extra: &[&str]) -> std::process::Output {
        run_bounded(self.send_cmd(file, name, extra), LIMIT)
    }

    fn random_drop(&self, per_100k: u32) {
        random_drop(&self.rx, "nwfloss", TX_IP, "udp", per_100k, 100_000);
    }

    fn clear_drop(&self) {
        clear_random_drop(&self.rx, "nwfloss");
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for c in &mut self.children {
            end(c);
        }
        for ns in [&self.tx, &self.rx] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kills a child, continuing it first in case it is stopped; signals only a child not yet
/// reaped (its PID cannot have been reused).
fn end(c: &mut Child) {
    if let Ok(None) = c.try_wait() {
        // SAFETY: kill(2) on the PID of our own unreaped child.
        unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
        let _ = c.kill();
    }
    let _ = c.wait();
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "sha256sum {}", path.display());
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A file of `mb` MiB of pseudo-random bytes (xorshift, so no two blocks are alike).
fn make_file(path: &Path, mb: usize, seed: u64) {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(mb << 20);
    while v.len() < mb << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, v).expect("write the source file");
}

/// Waits until a line containing `what` arrives (or `limit` passes); returns it.
fn wait_line(lines: &Lines, what: &str, limit: Duration) -> String {
    let until = Instant::now() + limit;
    loop {
        if let Some(l) = lines.lock().unwrap().iter().find(|l| l.contains(what)) {
            return l.clone();
        }
        assert!(
            Instant::now() < until,
            "no line with {what:?} within {limit:?}: {:?}",
            lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The number after `label` in `line` ("wrong session 12" → 12).
fn count_after(line: &str, label: &str) -> u64 {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {line}"))
        + label.len();
    line[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count after {label:?} in {line}"))
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Transfers of the 48 MiB file per cause for the fresh signatures.
const SIGNATURE_SENDS: usize = 3;

#[test]
fn fobs_transfers_resumes_drops_forgeries_refuses_strangers_and_classifies() {
    if let Some(why) = root_missing(&["ip", "tc", "nft", "ethtool", "sha256sum"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut link = Link::new();
    let src = link.dir.join("src.bin");
    make_file(&src, 48, 0x5eed);
    let want = sha256(&src);
    let rx_dir = link.rx_dir();
    let (_, lines) = link.receiver(&[]);

    // 1. Intact through 1 % random loss, at the controller's own pace.
    link.random_drop(1000);
    let out = link.send(&src, "lossy.bin", &["--json"]);
    link.clear_drop();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sha256(&rx_dir.join("lossy.bin")),
        want,
        "the stored copy differs"
    );
    let records = common::records(&out);
    // Each congestion event says what the long-term loss rate counts: loss events, unless
    // `--loss-rate packets` was given.
    let counts: Vec<_> = records
        .iter()
        .filter_map(|r| r.congestion.as_ref().map(|c| c.loss_count))
        .collect();
    assert!(!counts.is_empty(), "no congestion event under 1 % loss");
    assert!(
        counts.iter().all(|c| *c == Some(LossCount::Events)),
        "{counts:?}"
    );
    let loss = records
        .into_iter()
        .find(|r| r.metric == nowcast_core::record::Metric::Loss && r.congestion.is_none())
        .expect("a loss record")
        .value
        .expect("a loss value");
    // At least most of the 1 % dropped; more when slow start overshoots the tbf (its queue
    // drops too: 6 % was seen once on a loaded machine), but not a runaway.
    assert!(
        (0.003..0.25).contains(&loss),
        "loss {loss} under 1 % random drops"
    );
    wait_line(&lines, "\"lossy.bin\": stored, hash verified", LIMIT);

    // 1b. The path memory: each finished transfer's peak delivery rate is kept per receiver,
    // and the next transfer to it starts at half the forecast of those rates.
    let memory = link.dir.join("state/nowcast/fobs-paths.json");
    let remembered = || -> Vec<f64> {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&memory).expect("the path memory"))
                .expect("the path memory is JSON");
        v["paths"][RX_IP]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["peak_delivery_mbit_s"].as_f64())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(remembered().len(), 1, "the lossy transfer is remembered");
    let out = link.send(&src, "clean.bin", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rates = remembered();
    assert_eq!(rates.len(), 2, "{rates:?}");
    // At most what the path can carry over the peak's shortest stretch, 100 ms: the tbf's
    // rate and its 500 KB bucket, 441 Mbit/s (a fresh clone's run read 423.8, the bound was
    // 420 until then).
    assert!(
        (300.0..=441.0).contains(&rates[1]),
        "the clean transfer's peak on a 400 Mbit/s link: {rates:?}"
    );
    let loud = |name: &str| {
        let mut cmd = link.in_ns(&link.tx);
        cmd.args([BIN, "fobs", "send"])
            .arg(&src)
            .arg(format!("{RX_IP}:{PORT}"))
            .args(["--token", TOKEN, "--name", name]);
        run_bounded(cmd, LIMIT)
    };
    let out = loud("warm.bin");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    let start = count_after(&said, "starting at ");
    assert!(
        start >= 50 && said.contains(&format!("from 2 transfers to {RX_IP}")),
        "{said}"
    );
    assert_eq!(remembered().len(), 3);
    // A memory file that cannot be read is named, left as it is, and costs only the warm
    // start.
    std::fs::write(&memory, "{\"version\": 1, \"paths\": [").unwrap();
    let out = loud("cold.bin");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("warning: path memory")
            && said.contains("fobs-paths.json")
            && said.contains("line 1"),
        "{said}"
    );
    assert!(!said.contains("starting at"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&memory).unwrap(),
        "{\"version\": 1, \"paths\": ["
    );
    std::fs::remove_file(&memory).unwrap();

    // 2. Interrupted, then resumed.
    let mut cmd = link.send_cmd(&src, "resumed.bin", &["--fixed-rate", "80M"]);
    let mut first = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("send");
    wait_line(&lines, "receiving \"resumed.bin\"", LIMIT);
    std::thread::sleep(Duration::from_millis(1500));
    first.kill().expect("interrupt the sender");
    first.wait().expect("wait");
    wait_line(&lines, "\"resumed.bin\": the sender closed", LIMIT);
    let names = names_in(&rx_dir);
    assert!(!names.contains(&"resumed.bin".to_string()), "{names:?}");
    assert!(
        names.contains(&".resumed.bin.fobs-part".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&".resumed.bin.fobs-state".to_string()),
        "{names:?}"
    );
    let out = link.send(&src, "resumed.bin", &["--resume", "--fixed-rate", "300M"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let again = wait_line(&lines, "receiving \"resumed.bin\" (", LIMIT);
    let held = lines
        .lock()
        .unwrap()
        .iter()
        .rfind(|l| l.contains("receiving \"resumed.bin\""))
        .map(|l| count_after(l, "bytes, "))
        .unwrap_or(0);
    assert!(held > 5_000, "resumed with {held} packets held: {again}");
    assert_eq!(sha256(&rx_dir.join("resumed.bin")), want);
    let names = names_in(&rx_dir);
    assert!(
        !names.iter().any(|n| n.starts_with('.')),
        "left behind: {names:?}"
    );

    // 3. Forged datagrams during a transfer: 40 well-formed data headers with a guessed
    // session, 40 of garbage, from the sender's namespace to the receiver's data port.
    let mut cmd = link.send_cmd(&src, "forged.bin", &["--fixed-rate", "100M"]);
    let sender = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("send");
    wait_line(&lines, "receiving \"forged.bin\"", LIMIT);
    // One datagram per write: the forged one is written whole from a file by `cat`, the
    // garbage has no newline (printf would write up to each newline separately).
    let mut forged = vec![0xb5, 0xf0, 1, 0];
    forged.extend_from_slice(&0x8877_6655_4433_2211u64.to_le_bytes());
    forged.extend_from_slice(&[0; 16]);
    forged.extend_from_slice(&[b'x'; 1400]);
    let forged_path = link.dir.join("forged.dgram");
    std::fs::write(&forged_path, &forged).expect("write the forged datagram");
    let script = format!(
        "exec 3>/dev/udp/{RX_IP}/{PORT}; for i in $(seq 40); do \
         cat {} >&3; printf 'GET / HTTP/1.0' >&3; done",
        forged_path.display()
    );
    let mut forge = link.in_ns(&link.tx);
    forge.args(["bash", "-c", &script]);
    let f = run_bounded(forge, LIMIT);
    assert!(f.status.success(), "forging: {}", text(&f.stderr));
    let out = common::wait_child(sender, LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let done = wait_line(&lines, "\"forged.bin\": stored, hash verified", LIMIT);
    assert_eq!(count_after(&done, "malformed"), 40, "{done}");
    assert!(count_after(&done, "wrong session") >= 40, "{done}");
    assert_eq!(sha256(&rx_dir.join("forged.bin")), want);

    // 4. No token, no transfer.
    let before = names_in(&rx_dir);
    let mut cmd = link.in_ns(&link.tx);
    cmd.args([BIN, "fobs", "send"])
        .arg(&src)
        .arg(format!("{RX_IP}:{PORT}"))
        .args([
            "--token",
            "ffeeddccbbaa99887766554433221100",
            "--name",
            "stranger.bin",
            "-q",
        ]);
    let out = run_bounded(cmd, LIMIT);
    assert!(!out.status.success(), "a wrong token was accepted");
    assert!(
        text(&out.stderr).contains("refused"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(names_in(&rx_dir), before, "a refused sender created files");
    for n in ["lossy.bin", "resumed.bin", "forged.bin"] {
        std::fs::remove_file(rx_dir.join(n)).expect("remove");
    }

    // 5. Fresh labelled signatures, diagnosed with the shipped model.
    let sigs = link.dir.join("sigs");
    std::fs::create_dir_all(&sigs).expect("mkdir");
    let net = sigs.join("network.sig");
    let cpu = sigs.join("cpu.sig");
    // 3 % random drops and stalls of 3–8 ms: loss rates of 0.01–0.1, where the causes'
    // complexities lie far apart (the held-out accuracy over all rates is the bench's).
    link.random_drop(3000);
    let sig_args = |path: &Path, label: &str| {
        vec![
            "--fixed-rate".to_string(),
            "300M".into(),
            "--signatures".into(),
            path.display().to_string(),
            "--label".into(),
            label.into(),
        ]
    };
    // A signature is 16,384 packets (the shipped model's length), two of this file's 36,000:
    // three transfers of it for each cause.
    let a = sig_args(&net, "network");
    for _ in 0..SIGNATURE_SENDS {
        let out = link.send(
            &src,
            "n.bin",
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::remove_file(rx_dir.join("n.bin")).expect("remove");
    }
    link.clear_drop();
    // A second receiver with a small socket buffer, stopped for 3–8 ms every 40–200 ms.
    link.stop(0);
    let (k, _) = link.receiver(&["--rcvbuf", "64K", "-q"]);
    let pid = link.children[k].id() as i32;
    let a = sig_args(&cpu, "cpu");
    for i in 0..SIGNATURE_SENDS {
        let mut cmd = link.send_cmd(
            &src,
            "c.bin",
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let sender = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("send");
        let stalls = stall(pid, sender, 0xc0ffee + i as u64);
        assert!(stalls.status.success(), "{}", text(&stalls.stderr));
        std::fs::remove_file(rx_dir.join("c.bin")).expect("remove");
    }
    let mut cmd = Command::new(BIN);
    cmd.args(["classify"]).arg(&net).arg(&cpu);
    let out = run_bounded(cmd, LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    eprintln!("{table}");
    for cause in ["network", "cpu"] {
        let row = table
            .lines()
            .find(|l| l.starts_with(cause))
            .unwrap_or_else(|| panic!("no {cause} row: {table}"));
        let f: Vec<f64> = row
            .split_whitespace()
            .skip(1)
            .map(|w| w.trim_end_matches('%').parse().expect("number"))
            .collect();
        let (n, correct, wrong) = (f[0], f[1], f[2]);
        assert!(n >= 5.0, "{cause}: only {n} signatures in range: {table}");
        assert!(correct >= 70.0 && wrong <= 20.0, "{cause}: {row}");
    }
}

/// Stops and continues `pid` (3–8 ms stopped, 40–200 ms running) until `sender` exits;
/// returns the sender's output. The process is left running.
fn stall(pid: i32, mut sender: Child, seed: u64) -> std::process::Output {
    let mut x = seed;
    let mut rnd = move |lo: f64, hi: f64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lo + (hi - lo) * ((x >> 11) as f64 / (1u64 << 53) as f64)
    };
    let until = Instant::now() + LIMIT;
    // SAFETY: kill(2) with a PID this test started and still holds (not yet reaped).
    let signal = |s| unsafe { libc::kill(pid, s) };
    while sender.try_wait().expect("wait").is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_secs_f64(rnd(40.0, 200.0) / 1e3));
        signal(libc::SIGSTOP);
        std::thread::sleep(Duration::from_secs_f64(rnd(3.0, 8.0) / 1e3));
        signal(libc::SIGCONT);
    }
    common::wait_child(sender, LIMIT)
}
