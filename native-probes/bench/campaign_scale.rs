//! `cargo bench -p native-probes --bench campaign_scale`: one `nowcast campaign` probing
//! 1,000 targets every minute on loopback (1,000 `nowcast serve` servers, run in this
//! process through the library, one port each), for three minutes. Reports how well the
//! schedule held (start delay after the due time: median, p99, max, from the archive's run
//! log), the runs by outcome, and the campaign process's CPU time and peak memory.
//!
//! NOWCAST_BENCH_TARGETS=N and NOWCAST_BENCH_SECONDS=S change the size; BENCH_QUICK=1 runs
//! 70 s.

use nowcast::archive::sqlite::Sqlite;
use nowcast::runlog::Outcome;
use nowcast::serve::limits::{Prefixes, Rate, UdpLimits};
use nowcast::serve::watchdog::{Timing, GRACE, WINDOW};
use nowcast::serve::{Config, Server};
use nowcast::stop::Stop;
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nowcast");

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn server_config() -> Config {
    let prefixes = Prefixes { ipv4: 32, ipv6: 64 };
    Config {
        bind: "127.0.0.1".parse().unwrap(),
        tcp_port: 0,
        udp_port: 0,
        max_payload: 1 << 20,
        max_sessions: 16,
        max_sessions_per_client: 8,
        timing: Timing {
            handshake: 5_000_000_000,
            idle: 30_000_000_000,
            lifetime: 300_000_000_000,
            min_rate: 0,
            window: WINDOW,
            grace: GRACE,
        },
        max_buffer: 4 << 20,
        prefixes,
        budget: Rate {
            per_second: 1e9,
            burst: 1e9,
        },
        udp: UdpLimits {
            max_datagram: 9000,
            client: [Rate::per_second(2000.0), Rate::per_second(1e6)],
            total: [Rate::per_second(1e5), Rate::per_second(128e6)],
            prefixes,
        },
        metrics: None,
    }
}

/// utime + stime of a process, seconds, and its peak resident memory, KiB.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime), counted from the state field as 3.
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    (cpu, hwm)
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let n = env("NOWCAST_BENCH_TARGETS", 1000) as usize;
    let secs = env("NOWCAST_BENCH_SECONDS", if quick { 70 } else { 180 });
    let dir = std::env::temp_dir().join(format!("nowcast-bench-campaign-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stop = Stop::new();
    let started = Instant::now();
    let mut threads = Vec::new();
    let mut cfg = String::from(
        "name = \"scale\"\nseed = 11\nmax_parallel = 64\nshutdown_grace = \"10s\"\n\n\
         [[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"1m\"\nslip = \"30s\"\ntimeout = \"5s\"\n\n",
    );
    for i in 0..n {
        let server = Server::bind(server_config()).expect("bind a server");
        let (tcp, udp) = (
            server.tcp_addr().unwrap().port(),
            server.udp_addr().unwrap().port(),
        );
        let st = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || server.run(st))
                .unwrap(),
        );
        let _ = write!(cfg, "[[targets]]\nname = \"t{i}\"\nhost = \"127.0.0.1\"\nport = {tcp}\nudp_port = {udp}\n\n");
    }
    println!(
        "campaign scale bench: {n} targets (nowcast serve on {n} loopback ports, started in {:.1} s), a TCP RTT probe of each every minute with a slip below 30 s, for {secs} s",
        started.elapsed().as_secs_f64()
    );
    let path = dir.join("scale.toml");
    std::fs::write(&path, cfg).unwrap();
    let mut child = Command::new(BIN)
        .args(["campaign", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let (cpu, hwm) = usage(pid);
    let wall = t0.elapsed().as_secs_f64();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let stopping = Instant::now();
    let status = child.wait().unwrap();
    let stop_s = stopping.elapsed().as_secs_f64();
    stop.trigger();
    for t in threads {
        let _ = t.join();
    }
    let mut db = Sqlite::open_read(&dir.join("scale.sqlite")).unwrap();
    let rows = db.runs("scale", 0).unwrap();
    let mut delays: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.started_ms.map(|s| (s - r.due_ms) as f64))
        .collect();
    delays.sort_by(f64::total_cmp);
    let count = |o: Outcome| {
        rows.iter()
            .filter(|r| r.outcome == o)
            .map(|r| r.slots)
            .sum::<u64>()
    };
    let records = db.count().unwrap();
    println!("exit after SIGTERM: {status} in {stop_s:.2} s");
    println!(
        "runs: {} ok, {} failed, {} killed, {} skipped, {} missed; {records} records archived",
        count(Outcome::Ok),
        count(Outcome::Failed),
        count(Outcome::Killed),
        count(Outcome::Skipped),
        count(Outcome::Missed)
    );
    if !delays.is_empty() {
        println!(
            "start delay after the due time: median {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} runs)",
            quantile(&delays, 0.5),
            quantile(&delays, 0.99),
            delays[delays.len() - 1],
            delays.len()
        );
    }
    println!(
        "campaign process: CPU {:.2} s in {:.0} s of wall time ({:.1} % of one core), peak RSS {:.1} MB",
        cpu,
        wall,
        cpu / wall * 100.0,
        hwm as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}
