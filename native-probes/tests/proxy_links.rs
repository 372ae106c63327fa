//! `nowcast proxy` on emulated links: the Wren proxy's experiment (Zangrilli & Lowekamp §5.1,
//! Figs. 7–10), reproduced. Two replicas in network namespaces, each behind a router whose
//! egress to it is a 100 Mbit/s tbf; `iperf3 -u` cross traffic of 25 Mbit/s on the path to
//! the first throughout, and of 75 Mbit/s on the path to the second for the first half of
//! the run, then none. A client in the proxy's namespace uploads units of work through the
//! proxy at a rate that saturates neither path. The same workload and cross-traffic schedule
//! run through `nowcast proxy` (completion-time rule) and through the comparison rules
//! (round-robin, least connections, P2C peak-EWMA, nearest), and through an oracle that
//! knows the cross traffic (a proxy pinned to the first replica, then to the second).
//!
//! Bounds: addresses in the namespaces only, every step with a time limit, processes killed
//! by PID before their namespace is deleted. `on_emulated_links` in the name: `cargo test
//! --workspace` skips it, `npm test` runs it alone (as root) so that its figures print.
//! Length: PROXY_LINKS_SECS per half (default 4; `npm run bench` runs longer ones and the
//! case where the replicas do not differ, PROXY_LINKS_EQUAL=1). PROXY_LINKS_OURS adds flags
//! to our rule's proxy; PROXY_LINKS_EXPLAIN=1 prints its decisions and every unit;
//! PROXY_LINKS_CROSS="C1,C2" sets other cross-traffic rates and PROXY_LINKS_RULES="a,b" runs
//! only those rules (trials: then nothing is asserted); PROXY_LINKS_PACE=1 makes the proxy's
//! sender pace each packet, as Wren's trains need (with PROXY_LINKS_OURS="--bandwidth-source
//! wren"). PROXY_LINKS_SIZES="16K:9,2M:1" runs a mix of request sizes (size:weight, drawn
//! per request from a fixed seed, the same sequence for every rule) at the paper's workload's
//! byte rate, instead of its uniform 512 KiB units (the comparison rules' P2C and nearest run
//! too; what is asserted is that no request fails). PROXY_LINKS_ALIKE=C runs only the case where the replicas do not differ, with C
//! Mbit/s of cross traffic to both (a trial: nothing is asserted).

mod common;

use common::http::{read_response, thread_in, Proxy, Upstream};
use common::netns::Netns;
use common::{root_missing, sh};
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// proxy ─ router i (tbf toward server i) ─ server i, for i = 1, 2: namespaces
/// [proxy, router 1, router 2, server 1, server 2], each server running `iperf3 -s`.
struct Net(Netns);

const S_IP: [&str; 2] = ["10.241.11.2", "10.241.12.2"];

impl std::ops::Deref for Net {
    type Target = Netns;
    fn deref(&self) -> &Netns {
        &self.0
    }
}

impl Net {
    fn new(rate_mbit: u32) -> Net {
        let id = std::process::id();
        let names = ["p", "r1", "r2", "s1", "s2"].map(|n| format!("nwx{n}{id}"));
        let mut net = Netns::new(&names);
        let [p, r1, r2, s1, s2] = &names;
        for (i, (r, s)) in [(r1, s1), (r2, s2)].into_iter().enumerate() {
            let k = i + 1;
            let dev = |d: &str| format!("x{d}{k}{id}");
            let (pv, rp, rs, sv) = (dev("p"), dev("rp"), dev("rs"), dev("s"));
            let addr = |net: &str, host: u8| format!("10.241.{net}.{host}/24");
            let (near, far) = (k.to_string(), format!("1{k}"));
            net.veth((p, &pv, &addr(&near, 1)), (r, &rp, &addr(&near, 254)));
            net.veth((r, &rs, &addr(&far, 254)), (s, &sv, &addr(&far, 2)));
            if std::env::var("PROXY_LINKS_PACE").is_ok() {
                // The proxy's sender paces each packet (one segment per GSO packet; the
                // machine's TCP is BBR, which paces): Wren's trains need it (tests/proxy_wren.rs).
                sh(&["ip", "-n", p, "link", "set", &pv, "gso_max_segs", "1"]);
            }
            let via = |host: &str| format!("10.241.{host}.254");
            net.route(p, &[&format!("10.241.{far}.0/24"), "via", &via(&near)]);
            net.route(s, &["default", "via", &via(&far)]);
            net.forward(r);
            net.tbf(r, &rs, rate_mbit, "15000b", "20ms");
        }
        for i in [3, 4] {
            net.spawn(i, &["iperf3", "-s", "-p", "5201"]);
        }
        std::thread::sleep(Duration::from_millis(300));
        Net(net)
    }

    /// `iperf3 -u` from the proxy's namespace to server `i` at `mbit` for `secs`.
    fn cross(&mut self, i: usize, mbit: f64, secs: f64) -> usize {
        let (rate, time) = (format!("{mbit}M"), format!("{}", secs.ceil() as u64 + 1));
        self.0.spawn(
            0,
            &[
                "iperf3",
                "-u",
                "-c",
                S_IP[i],
                "-p",
                "5201",
                "-l",
                "1400",
                "-b",
                &rate,
                "--pacing-timer",
                "100",
                "-t",
                &time,
            ],
        )
    }

    fn stop(&mut self, k: usize) {
        self.0.stop(k, "-KILL");
    }
}

/// One upload: when it started (s from the run's start), how long it took (ms), where it went,
/// its size.
#[derive(Clone, Debug)]
struct Unit {
    start_s: f64,
    ms: f64,
    replica: String,
    bytes: usize,
}

/// The uploads' sizes: one size (the paper's experiment), or a mix.
#[derive(Clone, Debug)]
struct Sizes {
    /// (bytes, weight).
    mix: Vec<(usize, f64)>,
}

impl Sizes {
    /// "16K:9,2M:1": sizes (K, M: KiB, MiB) and their weights.
    fn parse(v: &str) -> Sizes {
        let mix = v
            .split(',')
            .map(|part| {
                let (size, weight) = part.split_once(':').unwrap_or((part, "1"));
                let size = size.trim();
                let (num, unit) = match size.as_bytes().last() {
                    Some(b'K' | b'k') => (&size[..size.len() - 1], 1024),
                    Some(b'M' | b'm') => (&size[..size.len() - 1], 1024 * 1024),
                    _ => (size, 1),
                };
                let n: usize = num
                    .parse()
                    .unwrap_or_else(|_| panic!("PROXY_LINKS_SIZES: bad size {size:?} in {v:?}"));
                let w: f64 = weight.trim().parse().unwrap_or_else(|_| {
                    panic!("PROXY_LINKS_SIZES: bad weight {weight:?} in {v:?}")
                });
                assert!(n > 0 && w > 0.0, "PROXY_LINKS_SIZES: {part:?} must be > 0");
                (n * unit, w)
            })
            .collect();
        Sizes { mix }
    }

    fn mixed(&self) -> bool {
        self.mix.len() > 1
    }

    fn mean(&self) -> f64 {
        let w: f64 = self.mix.iter().map(|m| m.1).sum();
        self.mix.iter().map(|m| m.0 as f64 * m.1).sum::<f64>() / w
    }

    fn largest(&self) -> usize {
        self.mix.iter().map(|m| m.0).max().unwrap_or(0)
    }

    /// The size of request `k`: a draw from the mix by a fixed hash of k (SplitMix64's
    /// finalizer), so every rule uploads the same sequence.
    fn of(&self, k: usize) -> usize {
        if let [(n, _)] = self.mix[..] {
            return n;
        }
        let mut z = (k as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        let total: f64 = self.mix.iter().map(|m| m.1).sum();
        let mut acc = 0.0;
        for &(n, w) in &self.mix {
            acc += w / total;
            if u < acc {
                return n;
            }
        }
        self.mix[self.mix.len() - 1].0
    }
}

/// The workload: uploads of `sizes` every `period` for `secs`, by `workers` keep-alive
/// clients in the proxy's namespace; `path(t)` says which path a unit goes to.
fn workload(
    ns: &str,
    proxy: std::net::SocketAddr,
    sizes: &Sizes,
    period: Duration,
    secs: f64,
    path: Arc<dyn Fn(f64) -> String + Send + Sync>,
) -> Vec<Unit> {
    let n = (secs / period.as_secs_f64()) as usize;
    let next = Arc::new(Mutex::new(0usize));
    let units = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let (next, units, path) = (next.clone(), units.clone(), path.clone());
            let sizes = sizes.clone();
            thread_in(Some(ns.to_string()), move || {
                let body = vec![0x42u8; sizes.largest()];
                let mut conn: Option<(TcpStream, BufReader<TcpStream>)> = None;
                loop {
                    let k = {
                        let mut g = next.lock().unwrap();
                        let k = *g;
                        *g += 1;
                        k
                    };
                    if k >= n {
                        break;
                    }
                    let at = t0 + period * k as u32;
                    let now = Instant::now();
                    if at > now {
                        std::thread::sleep(at - now);
                    }
                    let start = Instant::now();
                    let start_s = (start - t0).as_secs_f64();
                    if conn.is_none() {
                        let s = TcpStream::connect(proxy).expect("connect to the proxy");
                        s.set_nodelay(true).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                        conn = Some((s.try_clone().unwrap(), BufReader::new(s)));
                    }
                    let (w, r) = conn.as_mut().unwrap();
                    let p = path(start_s);
                    let bytes = sizes.of(k);
                    let ok = write!(
                        w,
                        "POST {p} HTTP/1.1\r\nhost: x\r\ncontent-length: {bytes}\r\n\r\n"
                    )
                    .and_then(|_| w.write_all(&body[..bytes]))
                    .is_ok();
                    let resp = if ok { read_response(r).ok() } else { None };
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    match resp {
                        Some(resp) if resp.status == 200 => {
                            let replica = resp
                                .headers
                                .iter()
                                .find(|h| h.0 == "x-replica")
                                .map(|h| h.1.clone())
                                .unwrap_or_default();
                            units.lock().unwrap().push(Unit {
                                start_s,
                                ms,
                                replica,
                                bytes,
                            });
                        }
                        _ => {
                            units.lock().unwrap().push(Unit {
                                start_s,
                                ms,
                                replica: "failed".into(),
                                bytes,
                            });
                            conn = None;
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let mut v = units.lock().unwrap().clone();
    v.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    v
}

struct Outcome {
    name: String,
    mean: f64,
    p95: f64,
    total: f64,
    /// Share of units after the change + 2 s that went to the better replica.
    after: f64,
    failed: usize,
    /// With a mix of sizes: the mean and p95 (ms) of each size, smallest first.
    by_size: Vec<(usize, f64, f64)>,
}

fn mean_p95(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let n = ms.len().max(1);
    (
        ms.iter().sum::<f64>() / n as f64,
        ms.get(((ms.len() as f64 * 0.95).ceil() as usize).clamp(1, n) - 1)
            .copied()
            .unwrap_or(f64::NAN),
    )
}

fn summarize(name: &str, units: &[Unit], half: f64, better_after: &str, sizes: &Sizes) -> Outcome {
    let mut ms: Vec<f64> = units.iter().map(|u| u.ms).collect();
    ms.sort_by(f64::total_cmp);
    let total: f64 = ms.iter().sum();
    let mut classes: Vec<usize> = sizes.mix.iter().map(|m| m.0).collect();
    classes.sort_unstable();
    classes.dedup();
    let by_size = if sizes.mixed() {
        classes
            .into_iter()
            .map(|b| {
                let (m, p) = mean_p95(
                    units
                        .iter()
                        .filter(|u| u.bytes == b)
                        .map(|u| u.ms)
                        .collect(),
                );
                (b, m, p)
            })
            .collect()
    } else {
        Vec::new()
    };
    let late: Vec<&Unit> = units.iter().filter(|u| u.start_s >= half + 2.0).collect();
    let good = late.iter().filter(|u| u.replica == better_after).count();
    Outcome {
        name: name.into(),
        mean: total / ms.len().max(1) as f64,
        p95: ms[((ms.len() as f64 * 0.95).ceil() as usize).clamp(1, ms.len()) - 1],
        total,
        after: good as f64 / late.len().max(1) as f64,
        failed: units.iter().filter(|u| u.replica == "failed").count(),
        by_size,
    }
}

fn secs() -> f64 {
    std::env::var("PROXY_LINKS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4.0)
}

/// One run of every rule on the same schedule: cross traffic `c1` on path 1 throughout,
/// `c2` on path 2 in the first half.
fn compare(
    net: &mut Net,
    ups: &[Upstream],
    c1: f64,
    c2: f64,
    alike: bool,
    half: f64,
    sizes: &Sizes,
) -> Vec<Outcome> {
    // The paper's offered load: 512 KiB every 250 ms (16.8 Mbit/s, below the 25 Mbit/s left
    // on the loaded path); a mix of sizes comes at the same byte rate.
    let bytes = 512 * 1024;
    let period = Duration::from_secs_f64(0.25 * sizes.mean() / bytes as f64);
    let replicas = [
        format!("s1=http://{}:{}", S_IP[0], ups[0].addr.port()),
        format!("s2=http://{}:{}", S_IP[1], ups[1].addr.port()),
    ];
    let better_after = if c1 > 0.0 { "s2" } else { "s1" };
    let mut out = Vec::new();
    let rules: [&str; 8] = [
        "completion",
        "completion-explore-fresh",
        "completion-tcp-info",
        "round-robin",
        "least-connections",
        "p2c-peak-ewma",
        "nearest",
        "oracle",
    ];
    // The variants of our rule (explore fresh alternates too; TCP_INFO's delivery rate as the
    // bandwidth) and the rules the short run asserts nothing of (P2C, nearest) only in the
    // bench's long run.
    let long = std::env::var("PROXY_LINKS_EQUAL").is_ok() || sizes.mixed();
    // PROXY_LINKS_RULES="completion,oracle" runs only those (a trial; nothing is asserted).
    let only = std::env::var("PROXY_LINKS_RULES").ok();
    for rule in rules
        .into_iter()
        .filter(|r| {
            long || only.is_some()
                || !(r.starts_with("completion-") || matches!(*r, "p2c-peak-ewma" | "nearest"))
        })
        .filter(|r| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|x| x == *r))
        })
    {
        let prefix = ["ip", "netns", "exec", net.ns[0].as_str()];
        let mut args: Vec<String> = vec![
            "--replica".into(),
            replicas[0].clone(),
            "--replica".into(),
            replicas[1].clone(),
            "--seed".into(),
            "7".into(),
            "--probe-path".into(),
            "/probe".into(),
            // Probes as large as the units: through a FIFO queue a smaller transfer reads a
            // higher rate (the queue takes its first part at line rate: 256 KiB probes read
            // 84 Mbit/s where the 512 KiB units had 77), and the forecast mixes both.
            "--probe-bytes".into(),
            format!("{}K", bytes / 1024),
            "--ttl".into(),
            "0.5".into(),
        ];
        let oracle = rule == "oracle";
        if rule.starts_with("completion") {
            // Extra flags for our rule (e.g. PROXY_LINKS_OURS="--error-k 0"), to try settings.
            if let Ok(extra) = std::env::var("PROXY_LINKS_OURS") {
                args.extend(extra.split_whitespace().map(String::from));
            }
        }
        if rule == "completion" {
            args.push("--explain".into());
        }
        if oracle {
            args.extend(["--service", "/s1=s1", "--service", "/s2=s2"].map(String::from));
        } else if rule == "completion-tcp-info" {
            args.extend(
                ["--balance", "completion", "--bandwidth-source", "tcp-info"].map(String::from),
            );
        } else if rule == "completion-explore-fresh" {
            args.extend(["--balance", "completion", "--explore-fresh"].map(String::from));
        } else {
            args.extend(["--balance".to_string(), rule.to_string()]);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let proxy = Proxy::start_in(&prefix, &argv);
        // Let the proxy see both paths as they are before the run (its probes; the others
        // learn from traffic) with the cross traffic already on.
        let k1 = (c1 > 0.0).then(|| net.cross(0, c1, 2.0 * half + 1.5));
        let k2_secs = if alike { 2.0 * half + 1.5 } else { half + 1.5 };
        let k2 = (c2 > 0.0).then(|| net.cross(1, c2, k2_secs));
        std::thread::sleep(Duration::from_millis(1500));
        let h = half;
        let s1_better_first = c1 <= c2;
        let path: Arc<dyn Fn(f64) -> String + Send + Sync> = Arc::new(move |t: f64| {
            if !oracle {
                return "/up".into();
            }
            let first = if s1_better_first { "/s1/up" } else { "/s2/up" };
            let second = if better_after == "s2" && !alike {
                "/s2/up"
            } else {
                first
            };
            (if t < h { first } else { second }).into()
        });
        // The second half starts when path 2's cross traffic stops.
        let stopper = k2.filter(|_| !alike).map(|k| {
            let pid = net.children[k].id();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(h));
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
            })
        });
        let units = workload(&net.ns[0], proxy.addr, sizes, period, 2.0 * half, path);
        if let Some(s) = stopper {
            s.join().unwrap();
        }
        for k in [k1, k2].into_iter().flatten() {
            net.stop(k);
        }
        let name = if oracle { "oracle" } else { rule };
        if rule == "completion" {
            // Where our rule sent each unit, and what it believed then (--explain).
            let err = proxy.stderr.lock().unwrap().clone();
            for l in err.lines().filter(|l| l.starts_with('{')) {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let views: Vec<String> = v["replicas"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| {
                        format!(
                            "{} bw {:.0}±{:.0} {} rtt {:.2} t {:.0}/{:.0} age {:.0} backlog {:.0}K",
                            r["replica"].as_str().unwrap_or(""),
                            r["bandwidth_mbit"]["value"].as_f64().unwrap_or(f64::NAN),
                            r["bandwidth_mbit"]["error"].as_f64().unwrap_or(f64::NAN),
                            r["bandwidth_source"].as_str().unwrap_or("-"),
                            r["rtt_ms"]["value"].as_f64().unwrap_or(f64::NAN),
                            r["time_ms"].as_f64().unwrap_or(f64::NAN),
                            r["worst_ms"].as_f64().unwrap_or(f64::NAN),
                            r["sample_age_ms"].as_f64().unwrap_or(f64::NAN),
                            r["backlog_bytes"].as_f64().unwrap_or(f64::NAN) / 1024.0,
                        )
                    })
                    .collect();
                if std::env::var("PROXY_LINKS_EXPLAIN").is_ok() {
                    eprintln!(
                        "  {:.0} ms {} B: {} {:<10} | {}",
                        v["timestamp_ms"].as_f64().unwrap_or(f64::NAN),
                        v["size_bytes"].as_f64().unwrap_or(f64::NAN),
                        v["chose"].as_str().unwrap_or(""),
                        v["reason"].as_str().unwrap_or(""),
                        views.join(" | ")
                    );
                }
            }
            if std::env::var("PROXY_LINKS_EXPLAIN").is_ok() {
                for u in &units {
                    eprintln!(
                        "  unit {:.2} s {:.1} ms {} {} B",
                        u.start_s, u.ms, u.replica, u.bytes
                    );
                }
            }
        }
        if std::env::var("PROXY_LINKS_EXPLAIN").is_ok() {
            // Every rule's failed requests, and what its proxy said of them.
            for u in units.iter().filter(|u| u.replica == "failed") {
                eprintln!(
                    "  {name}: failed at {:.2} s after {:.1} ms, {} B",
                    u.start_s, u.ms, u.bytes
                );
            }
            let err = proxy.stderr.lock().unwrap().clone();
            for l in err.lines().filter(|l| !l.starts_with('{')) {
                eprintln!("  {name} proxy: {l}");
            }
            let addr = proxy.addr;
            let text = Arc::new(Mutex::new(String::new()));
            let into = text.clone();
            let _ = thread_in(Some(net.ns[0].clone()), move || {
                let r = common::http::request(addr, b"GET /metrics HTTP/1.1\r\nhost: p\r\n\r\n");
                *into.lock().unwrap() = r.text();
            })
            .join();
            let metrics = text.lock().unwrap().clone();
            for l in metrics
                .lines()
                .filter(|l| l.contains("errors_total") || l.contains("timeout"))
                .filter(|l| !l.starts_with('#') && !l.ends_with(" 0"))
            {
                eprintln!("  {name} metrics: {l}");
            }
        }
        out.push(summarize(name, &units, half, better_after, sizes));
        drop(proxy);
        std::thread::sleep(Duration::from_millis(300));
    }
    out
}

fn print(title: &str, rows: &[Outcome]) {
    eprintln!("\n{title}");
    eprintln!(
        "{:<20} {:>10} {:>10} {:>12} {:>22} {:>7}",
        "rule", "mean ms", "p95 ms", "total s", "after change: better", "failed"
    );
    for r in rows {
        eprintln!(
            "{:<20} {:>10.1} {:>10.1} {:>12.2} {:>21.1}% {:>7}",
            r.name,
            r.mean,
            r.p95,
            r.total / 1e3,
            100.0 * r.after,
            r.failed
        );
    }
    if rows.iter().any(|r| !r.by_size.is_empty()) {
        eprintln!("by size, mean / p95 ms:");
        for r in rows {
            let cells: Vec<String> = r
                .by_size
                .iter()
                .map(|(b, m, p)| format!("{} KiB {m:.1} / {p:.1}", b / 1024))
                .collect();
            eprintln!("{:<20} {}", r.name, cells.join("   "));
        }
    }
}

/// Goals (printed, not asserted on a shared test machine): ≥ 95 % to the better replica 2 s
/// after the change, total within 10 % of the oracle, mean and p95 ≥ 20 % better than every
/// comparison rule. Asserted, with room for the machine's load: no failed request, the total
/// within 20 % of the oracle's, and a lower mean than the rules that ignore paths.
fn within_bounds(rows: &[Outcome]) -> Result<(), String> {
    let get = |n: &str| rows.iter().find(|r| r.name == n).unwrap();
    let (ours, oracle) = (get("completion"), get("oracle"));
    if ours.failed != 0 {
        return Err(format!("{} requests failed", ours.failed));
    }
    if ours.total > oracle.total * 1.2 {
        return Err(format!(
            "total {:.2} s vs oracle {:.2} s",
            ours.total / 1e3,
            oracle.total / 1e3
        ));
    }
    for other in ["round-robin", "least-connections"] {
        let o = get(other);
        if ours.mean >= o.mean {
            return Err(format!("mean {} vs {other} {}", ours.mean, o.mean));
        }
    }
    Ok(())
}

#[test]
fn on_emulated_links_the_proxy_follows_the_available_bandwidth() {
    if let Some(why) = root_missing(&["ip", "tc", "ethtool", "iperf3"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let half = secs();
    let mut net = Net::new(100);
    let ups = [
        Upstream::start("s1", &format!("{}:0", S_IP[0]), Some(&net.ns[3])),
        Upstream::start("s2", &format!("{}:0", S_IP[1]), Some(&net.ns[4])),
    ];
    // PROXY_LINKS_CROSS="C1,C2" runs another scenario than the paper's 25 and 75 Mbit/s.
    let cross: Vec<f64> = std::env::var("PROXY_LINKS_CROSS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .filter(|v: &Vec<f64>| v.len() == 2)
        .unwrap_or(vec![25.0, 75.0]);
    let (c1, c2) = (cross[0], cross[1]);
    let sizes = std::env::var("PROXY_LINKS_SIZES")
        .map(|v| Sizes::parse(&v))
        .unwrap_or(Sizes {
            mix: vec![(512 * 1024, 1.0)],
        });
    let what = if sizes.mixed() {
        let mix: Vec<String> = sizes
            .mix
            .iter()
            .map(|(b, w)| format!("{} KiB ×{w}", b / 1024))
            .collect();
        format!(
            "uploads of {} (mean {:.0} KiB) at 16.8 Mbit/s",
            mix.join(", "),
            sizes.mean() / 1024.0
        )
    } else {
        "512 KiB uploads every 250 ms".to_string()
    };
    if let Some(c) = std::env::var("PROXY_LINKS_ALIKE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
    {
        let rows = compare(&mut net, &ups, c, c, true, half, &sizes);
        print(
            &format!("replicas alike: {c} Mbit/s cross traffic to both throughout; {what}"),
            &rows,
        );
        return;
    }
    let title = format!(
        "replicas differ: {c1} Mbit/s cross to s1 throughout, {c2} to s2 for {half} s then \
         none; {what}"
    );
    let rows = compare(&mut net, &ups, c1, c2, false, half, &sizes);
    print(&title, &rows);
    if std::env::var("PROXY_LINKS_RULES").is_ok() {
        return;
    }
    if sizes.mixed() {
        // A second comparison, measured and printed: the bounds below are the paper's
        // experiment's. Every request of every rule must still succeed.
        for r in &rows {
            assert_eq!(r.failed, 0, "{}: {} requests failed", r.name, r.failed);
        }
        if std::env::var("PROXY_LINKS_EQUAL").is_ok() {
            let rows = compare(&mut net, &ups, 25.0, 25.0, true, half, &sizes);
            print(
                &format!("replicas alike: 25 Mbit/s cross traffic to both throughout; {what}"),
                &rows,
            );
        }
        return;
    }
    // A busy machine can slow one upload enough to read as a slow path (the forecast follows
    // it and the next units go to the loaded replica): one comparison out of bounds is
    // measured again, and the second must hold.
    if let Err(why) = within_bounds(&rows) {
        eprintln!("out of bounds ({why}); measuring the comparison once more");
        let rows = compare(&mut net, &ups, c1, c2, false, half, &sizes);
        print(&title, &rows);
        if let Err(why) = within_bounds(&rows) {
            panic!("{why}");
        }
    }
    if std::env::var("PROXY_LINKS_EQUAL").is_ok() {
        let rows = compare(&mut net, &ups, 25.0, 25.0, true, half, &sizes);
        print(
            &format!("replicas alike: 25 Mbit/s cross traffic to both throughout; {what}"),
            &rows,
        );
    }
    drop(ups);
}
