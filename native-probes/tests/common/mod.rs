//! Helpers of the integration tests: a real `nowcast serve` on loopback, run as a child
//! process that is always stopped, and runs of the built `nowcast` with a time bound.

#![allow(dead_code)]

pub mod campaign;
pub mod clickhouse;
pub mod corpus;
pub mod fobs;
pub mod http;
pub mod netns;
pub mod path3;
pub mod peer;

use nowcast_core::record::Record;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nowcast");

/// A `nowcast serve` child, killed on drop if still running.
pub struct Server {
    pub child: Child,
    pub tcp: String,
    pub udp: String,
    /// The metrics URL, when served.
    pub metrics: Option<String>,
}

impl Server {
    /// Starts a server on 127.0.0.1 with free ports and `extra` flags; waits for its
    /// "listening" line.
    pub fn start(extra: &[&str]) -> Server {
        Self::start_with(Command::new(BIN), extra)
    }

    /// The same inside a command prefix (e.g. `ip netns exec NS`).
    pub fn start_with(mut cmd: Command, extra: &[&str]) -> Server {
        let mut child = cmd
            .args(["serve", "--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start nowcast serve");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        let mut reader = BufReader::new(stdout);
        reader
            .read_line(&mut line)
            .expect("read the listening line");
        let mut server = Server {
            child,
            tcp: String::new(),
            udp: String::new(),
            metrics: None,
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = |proto: &str| {
            words
                .iter()
                .position(|w| *w == proto)
                .and_then(|i| words.get(i + 1))
                .unwrap_or_else(|| panic!("no {proto} address in {line:?}"))
                .to_string()
        };
        server.tcp = at("tcp");
        server.udp = at("udp");
        server.metrics = words
            .iter()
            .position(|w| *w == "metrics")
            .and_then(|i| words.get(i + 1))
            .map(|w| w.to_string());
        // Keep reading stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
        });
        server
    }

    /// Sends SIGTERM and waits (boundedly) for a clean exit; returns whether it exited 0.
    pub fn terminate(&mut self) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Server {
    /// The server's resident memory, KiB (Linux).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server runs");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.tcp.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to completion, killing it after `limit`.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start command");
    wait_named(child, limit, &format!("{cmd:?}"))
}

/// Waits for a child started with piped standard output and error, killing it after
/// `limit`.
pub fn wait_child(child: Child, limit: Duration) -> Output {
    wait_named(child, limit, "a command")
}

fn wait_named(mut child: Child, limit: Duration, name: &str) -> Output {
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let s = child.wait().expect("wait");
            panic!("{name} ran longer than {limit:?} and was killed ({s})");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// `nowcast ARGS`, bounded in time.
pub fn nowcast(args: &[&str], limit: Duration) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    run_bounded(cmd, limit)
}

/// Parses NDJSON stdout into records; every line must be a valid record.
pub fn records(out: &Output) -> Vec<Record> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("bad record {l}: {e}")))
        .collect()
}

/// `dir/name`: an NDJSON file of one valid record.
pub fn one_record(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    let rec = nowcast_core::record::Record::new(
        1_767_225_600_000.0,
        "nowcast tcp",
        nowcast_core::record::Metric::Rtt,
        1.5,
        "h:1",
    );
    std::fs::write(&p, rec.to_line() + "\n").unwrap();
    p
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Why a test that builds network namespaces cannot run here: not root, or one of `tools`
/// missing from the PATH. `None` when it can.
pub fn root_missing(tools: &[&str]) -> Option<String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .map(|o| text(&o.stdout));
    if uid.as_deref().map(str::trim) != Some("0") {
        return Some("not running as root (network namespaces need it)".into());
    }
    tools
        .iter()
        .find(|tool| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|tool| format!("{tool} is not installed"))
}

/// Random network loss (testing.md): in namespace `ns`, nftables table `table` drops `per`
/// in `out_of` of the `l4proto` packets that arrive from `from_ip` (`numgen random`), on
/// the input hook. [`clear_random_drop`] removes it.
pub fn random_drop(ns: &str, table: &str, from_ip: &str, l4proto: &str, per: u32, out_of: u32) {
    let nft = |args: &[&str]| {
        let mut v = vec!["ip", "netns", "exec", ns, "nft"];
        v.extend_from_slice(args);
        sh(&v);
    };
    let (per, out_of) = (per.to_string(), out_of.to_string());
    nft(&["add", "table", "inet", table]);
    nft(&[
        "add",
        "chain",
        "inet",
        table,
        "input",
        "{ type filter hook input priority 0; policy accept; }",
    ]);
    nft(&[
        "add", "rule", "inet", table, "input", "ip", "saddr", from_ip, "meta", "l4proto", l4proto,
        "numgen", "random", "mod", &out_of, "<", &per, "counter", "drop",
    ]);
}

/// Removes what [`random_drop`] added to `ns` (nothing if it is not there).
pub fn clear_random_drop(ns: &str, table: &str) {
    let _ = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "delete", "table", "inet", table])
        .stderr(Stdio::null())
        .status();
}

/// Runs a set-up command (`args[0]` with the rest as arguments); panics with its standard
/// error when it fails.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run set-up command");
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
}

/// The closing summary of a table: each series' row after its name (unit, sent, lost, min,
/// avg, max, mdev, then the next forecast and its band, or `-`), by series name: the
/// probes' tables (`nowcast tcp`, `nowcast udp`).
pub fn summary(table: &str) -> std::collections::HashMap<String, Vec<String>> {
    let mut lines = table.lines().skip_while(|l| !l.starts_with("--- "));
    assert!(lines.next().is_some(), "no summary in {table}");
    let head = lines.next().unwrap();
    assert!(
        head.starts_with("series") && head.contains("min") && head.contains("mdev"),
        "{head}"
    );
    lines
        .map(|l| {
            let mut words = l.split_whitespace().map(String::from);
            let name = words.next().unwrap();
            (name, words.filter(|w| w != "±").collect())
        })
        .collect()
}

/// Whether `shown` is `want` rounded to the digits shown.
pub fn shows(shown: &str, want: f64) -> bool {
    let decimals = shown.split('.').nth(1).map_or(0, str::len) as i32;
    let v: f64 = shown.parse().unwrap_or(f64::NAN);
    (v - want).abs() <= 0.5 * 10f64.powi(-decimals) * (1.0 + 1e-9) + 1e-12 * want.abs()
}

/// A test's directory (`nowcast-NAME-PID` in the system's temporary directory, made empty),
/// removed when the test ends, passed or failed.
/// A helper process (an iperf3 server, …) killed and reaped when dropped: also when the
/// test fails before its end (a failed campaign test once left its iperf3 server running).
pub struct Spawned(pub std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("nowcast-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the tests run as root (mounting a file system needs it).
#[allow(dead_code)]
pub fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}

/// A tmpfs mounted at a directory for one test (a small disk to fill), unmounted when
/// dropped, passed or failed. Root only: see [`is_root`].
#[allow(dead_code)]
pub struct Tmpfs(pub PathBuf);

#[allow(dead_code)]
impl Tmpfs {
    /// A tmpfs of `size` (`200k`, `2m`) at `dir`, made if missing.
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        sh(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size}"),
            "tmpfs",
            dir.to_str().unwrap(),
        ]);
        Tmpfs(dir.to_path_buf())
    }

    /// Mounts it again with `opts` (`size=4m`, `ro`).
    pub fn remount(&self, opts: &str) {
        sh(&[
            "mount",
            "-o",
            &format!("remount,{opts}"),
            self.0.to_str().unwrap(),
        ]);
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
