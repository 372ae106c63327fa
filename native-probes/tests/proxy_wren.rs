//! Where `nowcast proxy` takes its replicas' bandwidth from (`--bandwidth-source`), and Wren
//! on the proxy's own upstream connections (Zangrilli & Lowekamp §3.2, §4.2, Fig. 8).
//!
//! - On loopback, any user: `tcp-info` says so in the ready line, `/metrics`, `--explain` and
//!   the records; `auto` without CAP_NET_RAW (as `nobody` through `setpriv` when the test runs
//!   as root) or on an interface that cannot be opened falls back to TCP_INFO and prints why;
//!   `wren` on such an interface is an error naming it.
//! - On an emulated link (root; `on_emulated_links` in the name: `cargo test --workspace` skips
//!   it, `npm test` runs it alone so that its figures print): proxy ─ router (tbf 100 Mbit/s)
//!   ─ replica, 25 Mbit/s of `iperf3 -u` cross traffic on the path; a client uploads 512 KiB
//!   every 100 ms (about 42 Mbit/s, below the path's available bandwidth) through the proxy
//!   with `--bandwidth-source wren`. The proxy's samples must be Wren's (`/metrics`, records)
//!   and their median within [`TOLERANCE`] of the available bandwidth, shown next to the
//!   TCP_INFO delivery rates of the same run, which are the run's control: a run whose
//!   TCP_INFO median is off by more than [`CONTROL`] was disturbed and runs again, once (it
//!   must be within it then). The proxy's namespace is set up as a sender
//!   that paces each packet: BBR (which paces in the kernel, without fq) and one segment per
//!   GSO packet (`gso_max_segs 1`); Linux's sender otherwise leaves the wire in line-rate
//!   bursts that Wren rightly rejects (BENCHMARKS.md, Wren on emulated links).
//!   PROXY_WREN_SECS sets the upload phase (default 5 s; `npm run bench` runs longer);
//!   PROXY_WREN_PACE=0 leaves the sender as it is (a trial: the figures print, and the test
//!   fails if Wren then finds too few bounds); PROXY_WREN_IFACE names the capture's interface
//!   (`any`: every interface, with Linux's cooked header).
//!
//! Bounds: loopback and namespaces the test creates only, every step with a time limit,
//! processes killed by PID before their namespace is deleted, files removed.

mod common;

use common::path3::Path3;

use common::http::{read_response, request, thread_in, Proxy, Upstream};
use common::{root_missing, run_bounded, sh, text, BIN};
use nowcast_core::record::{Metric, Record};
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);
/// Largest relative distance of Wren's median lower bound from the available bandwidth.
const TOLERANCE: f64 = 0.15;

fn upload(addr: std::net::SocketAddr, bytes: usize) -> u16 {
    let mut raw =
        format!("POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: {bytes}\r\n\r\n").into_bytes();
    raw.extend(std::iter::repeat_n(b'u', bytes));
    request(addr, &raw).status
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("nowcast-proxy-wren-{}-{name}", std::process::id()))
}

fn read_records(path: &std::path::Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("bad record {l}: {e}")))
        .collect()
}

/// Whether this process holds CAP_NET_RAW (bit 13 of the effective set).
fn has_net_raw() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("CapEff:"))
                .and_then(|l| u64::from_str_radix(l[7..].trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 13) != 0)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn proxy_bandwidth_source_says_which_is_in_use_without_the_privilege() {
    let up = Upstream::start("a", "127.0.0.1:0", None);
    let replica = format!("a={}", up.url());

    // 1. tcp-info, asked for.
    let recs = temp("tcp-info.ndjson");
    let mut p = Proxy::start(&[
        "--replica",
        &replica,
        "--bandwidth-source",
        "tcp-info",
        "--explain",
        "--records",
        recs.to_str().unwrap(),
    ]);
    assert!(
        p.ready.contains("bandwidth from tcp_info,"),
        "ready line: {}",
        p.ready
    );
    assert_eq!(upload(p.addr, 1 << 20), 200);
    let m = p.metrics();
    assert!(
        m.contains("nowcast_proxy_info{bandwidth_source=\"tcp_info\""),
        "{m}"
    );
    assert!(
        m.contains("nowcast_proxy_bandwidth_samples_total{replica=\"a\",source=\"tcp_info\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("nowcast_proxy_bandwidth_samples_total{replica=\"a\",source=\"wren\"} 0"),
        "{m}"
    );
    assert!(
        m.contains("nowcast_proxy_bandwidth_sample_age_seconds{replica=\"a\",source=\"tcp_info\"}"),
        "{m}"
    );
    assert!(!m.contains("nowcast_proxy_capture_"), "{m}");
    // A second upload: its decision shows the source in use and its sample's age.
    assert_eq!(upload(p.addr, 1 << 20), 200);
    assert!(p.terminate(LIMIT).is_some_and(|s| s.success()));
    let err = p.stderr.lock().unwrap().clone();
    let last: serde_json::Value = err
        .lines()
        .rfind(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .expect("an --explain line");
    let view = &last["replicas"][0];
    assert_eq!(view["bandwidth_source"], "tcp_info", "{last}");
    assert!(
        view["bandwidth_age_ms"].as_f64().is_some_and(|a| a >= 0.0),
        "{last}"
    );
    let rs = read_records(&recs);
    let _ = std::fs::remove_file(&recs);
    assert!(
        rs.iter()
            .any(|r| r.metric == Metric::BandwidthUp && r.source == "nowcast proxy"),
        "{rs:?}"
    );
    assert!(!rs.iter().any(|r| r.metric == Metric::AvailBwLowerBound));

    // 2. auto without CAP_NET_RAW: as nobody when the test runs as root.
    let prefix: Vec<&str> = if is_root() {
        vec![
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ]
    } else {
        vec![]
    };
    let setpriv = Command::new("sh")
        .args(["-c", "command -v setpriv"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !is_root() && has_net_raw() {
        eprintln!("part 2 skipped: this process holds CAP_NET_RAW, so auto would capture");
    } else if is_root() && !setpriv {
        eprintln!("part 2 skipped: running as root and setpriv is not installed");
    } else {
        let mut p = Proxy::start_in(
            &prefix,
            &["--replica", &replica, "--bandwidth-source", "auto"],
        );
        assert!(
            p.ready.contains("bandwidth from tcp_info,"),
            "ready line: {}",
            p.ready
        );
        assert_eq!(upload(p.addr, 1 << 20), 200);
        let m = p.metrics();
        assert!(
            m.contains("nowcast_proxy_info{bandwidth_source=\"tcp_info\""),
            "{m}"
        );
        assert!(p.terminate(LIMIT).is_some_and(|s| s.success()));
        let err = p.stderr.lock().unwrap().clone();
        let why = err
            .lines()
            .find(|l| l.starts_with("nowcast proxy: bandwidth from tcp_info, not wren: "))
            .unwrap_or_else(|| panic!("no line saying why: {err}"));
        assert!(why.contains("cannot capture on "), "{why}");
        assert!(why.contains("CAP_NET_RAW"), "{why}");
        assert_eq!(err.matches("not wren").count(), 1, "{err}");
    }

    // 3. An interface that cannot be opened: auto (the default, here from a config file that
    // names the interface) falls back and says so; wren refuses.
    let cfg = temp("none.toml");
    std::fs::write(
        &cfg,
        format!(
            "capture_interface = \"nowcast-none0\"\n[[service]]\nprefix = \"/\"\n\
             replicas = [{{ name = \"a\", url = \"{}\" }}]\n",
            up.url()
        ),
    )
    .unwrap();
    let mut p = Proxy::start(&["--config", cfg.to_str().unwrap()]);
    let _ = std::fs::remove_file(&cfg);
    assert!(p.ready.contains("bandwidth from tcp_info,"), "{}", p.ready);
    // It serves while it falls back.
    let h = request(p.addr, b"GET /healthz HTTP/1.1\r\nhost: p\r\n\r\n");
    assert_eq!(h.status, 200, "{}", h.text());
    assert!(p.terminate(LIMIT).is_some_and(|s| s.success()));
    let err = p.stderr.lock().unwrap().clone();
    assert!(
        err.contains("bandwidth from tcp_info, not wren: cannot capture on nowcast-none0"),
        "{err}"
    );
    let mut cmd = Command::new(BIN);
    cmd.args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--replica",
        &replica,
        "--bandwidth-source",
        "wren",
        "--capture-interface",
        "nowcast-none0",
    ]);
    let out = run_bounded(cmd, LIMIT);
    assert!(!out.status.success());
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("--bandwidth-source wren: cannot capture on nowcast-none0"),
        "{err}"
    );
}

/// Cross traffic datagram payload, and its frame on the wire.
const UDP_LEN: f64 = 1400.0;
const UDP_FRAME: f64 = 1400.0 + 8.0 + 20.0 + 14.0;

/// Available bandwidth for the monitored flow's IP packets, Mbit/s: what the bottleneck
/// leaves of its rate (counted in frames) after the cross traffic's frames.
fn available(rate: f64, cross_payload: f64) -> f64 {
    (rate - cross_payload * UDP_FRAME / UDP_LEN) * 1500.0 / 1514.0
}

/// The proxy's `/metrics`, asked from inside namespace `ns`.
fn metrics_in(ns: &str, addr: std::net::SocketAddr) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    thread_in(Some(ns.to_string()), move || {
        let r = request(addr, b"GET /metrics HTTP/1.1\r\nhost: p\r\n\r\n");
        let _ = tx.send(r.text());
    })
    .join()
    .expect("metrics");
    rx.recv().expect("metrics")
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Largest relative distance of the TCP_INFO delivery rates' median from the available
/// bandwidth in a run that measures Wren: further off, the run itself was disturbed (the VM's
/// neighbours took the cores; once seen: TCP_INFO −31.7 % and Wren +16.4 %, where undisturbed
/// runs read −3.6 to +0.6 % and +7.5 to +8.3 %), and it is run again, once.
const CONTROL: f64 = 0.2;

#[test]
fn on_emulated_links_the_proxy_takes_wren_from_its_own_uploads() {
    if let Some(why) = root_missing(&["ip", "tc", "ethtool", "iperf3"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let secs: f64 = std::env::var("PROXY_WREN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let pace = std::env::var("PROXY_WREN_PACE").as_deref() != Ok("0");
    let mut runs = Vec::new();
    for _ in 0..2 {
        let run = wren_trial(secs, pace);
        let undisturbed = (run.tcp_info / run.truth - 1.0).abs() <= CONTROL;
        runs.push(run);
        if undisturbed {
            break;
        }
        eprintln!("proxy_wren: TCP_INFO's median is off by more than {CONTROL}: run again");
    }
    let run = runs.last().expect("a run");
    assert!(
        (run.tcp_info / run.truth - 1.0).abs() <= CONTROL,
        "TCP_INFO's median {:.1} Mbit/s is not within {CONTROL} of {:.1} in {} runs",
        run.tcp_info,
        run.truth,
        runs.len()
    );
    assert!(
        (run.wren / run.truth - 1.0).abs() <= TOLERANCE,
        "Wren's median {:.1} Mbit/s is not within {TOLERANCE} of {:.1}",
        run.wren,
        run.truth
    );
}

/// One run's medians, Mbit/s, and the available bandwidth they estimate.
struct WrenRun {
    truth: f64,
    wren: f64,
    tcp_info: f64,
}

/// The emulated link, the proxy with `--bandwidth-source wren` and the uploads through it;
/// asserts what does not depend on timing (Wren's samples are the ones in use, enough of
/// them, a clean stop) and returns the medians.
fn wren_trial(secs: f64, pace: bool) -> WrenRun {
    let (rate, cross) = (100.0, 25.0);
    let truth = available(rate, cross);
    // proxy ─ router (tbf toward the replica) ─ replica.
    let mut net = Path3::new("y", ["10.243.1", "10.243.2"], rate as u32);
    if pace {
        // A sender that paces each packet: one segment per GSO packet, and BBR, which
        // paces in the kernel without fq (TCP's internal pacing).
        let p = net.ns[0].clone();
        sh(&[
            "ip",
            "-n",
            &p,
            "link",
            "set",
            &net.sender_dev,
            "gso_max_segs",
            "1",
        ]);
        sh(&[
            "ip",
            "netns",
            "exec",
            &p,
            "sysctl",
            "-qw",
            "net.ipv4.tcp_congestion_control=bbr",
        ]);
    }
    let s_ip = net.receiver_ip.clone();
    let up = Upstream::start("s", "0.0.0.0:0", Some(&net.ns[2]));
    net.spawn(2, &["iperf3", "-s", "-p", "5201"]);
    let recs = temp("wren.ndjson");
    let replica = format!("s=http://{s_ip}:{}", up.addr.port());
    let prefix = ["ip", "netns", "exec", net.ns[0].as_str()];
    // PROXY_WREN_IFACE=any captures on every interface (Linux's cooked header).
    let iface = std::env::var("PROXY_WREN_IFACE").ok();
    let mut args = vec![
        "--replica",
        &replica,
        "--bandwidth-source",
        "wren",
        "--records",
        recs.to_str().unwrap(),
    ];
    if let Some(i) = &iface {
        args.extend(["--capture-interface", i.as_str()]);
    }
    let mut proxy = Proxy::start_in(&prefix, &args);
    let expect = format!(
        "bandwidth from wren (capture on {}",
        iface.as_deref().unwrap_or(&net.sender_dev)
    );
    assert!(proxy.ready.contains(&expect), "ready line: {}", proxy.ready);
    std::thread::sleep(Duration::from_millis(300));
    let k = net.spawn(
        0,
        &[
            "iperf3",
            "-u",
            "-c",
            &s_ip,
            "-p",
            "5201",
            "-l",
            "1400",
            "-b",
            &format!("{cross}M"),
            "--pacing-timer",
            "100",
            "-t",
            &format!("{}", secs.ceil() as u64 + 3),
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    // The client: 512 KiB every 100 ms on one kept-alive connection.
    let addr = proxy.addr;
    let client = thread_in(Some(net.ns[0].clone()), move || {
        let body = vec![0x42u8; 512 * 1024];
        let s = TcpStream::connect(addr).expect("connect to the proxy");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let t0 = Instant::now();
        let mut k = 0u32;
        while t0.elapsed().as_secs_f64() < secs {
            let at = t0 + Duration::from_millis(100) * k;
            if let Some(d) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            k += 1;
            write!(
                w,
                "POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )
            .unwrap();
            w.write_all(&body).unwrap();
            let resp = read_response(&mut r).expect("a response");
            assert_eq!(resp.status, 200);
        }
    });
    client.join().expect("the client");
    let m = metrics_in(&net.ns[0], addr);
    net.stop(k, "-KILL");
    let t_stop = Instant::now();
    let status = proxy.terminate(LIMIT);
    let stop_s = t_stop.elapsed().as_secs_f64();
    let rs = read_records(&recs);
    let _ = std::fs::remove_file(&recs);
    drop(up);
    drop(net);
    let wren: Vec<f64> = rs
        .iter()
        .filter(|r| r.metric == Metric::AvailBwLowerBound && r.source == "nowcast proxy")
        .filter_map(|r| r.value)
        .collect();
    let tcp_info: Vec<f64> = rs
        .iter()
        .filter(|r| r.metric == Metric::BandwidthUp && r.source == "nowcast proxy")
        .filter_map(|r| r.value)
        .collect();
    let (mw, mt) = (median(wren.clone()), median(tcp_info.clone()));
    let pick = |name: &str| {
        m.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_string()
    };
    // Why Wren's trains gave no lower bound (and what it left out of them), from the labelled
    // counters' lines `name{label="value"} n`.
    let by = |name: &str, what: &str| {
        let prefix = format!("{name}{{");
        let values: Vec<String> = m
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter_map(|l| {
                let (label, n) = l.split_once("} ")?;
                Some(format!("{} {n}", label.split('"').nth(1)?))
            })
            .collect();
        if values.is_empty() {
            String::new()
        } else {
            format!("; {what}: {}", values.join(", "))
        }
    };
    eprintln!(
        "proxy_wren: available {truth:.1} Mbit/s; wren {} lower bounds, median {:.1} ({:+.1} %); \
         tcp_info {} samples, median {:.1} ({:+.1} %); {}; {}{}{}{}; stopped in {stop_s:.2} s",
        wren.len(),
        mw.unwrap_or(f64::NAN),
        (mw.unwrap_or(f64::NAN) / truth - 1.0) * 100.0,
        tcp_info.len(),
        mt.unwrap_or(f64::NAN),
        (mt.unwrap_or(f64::NAN) / truth - 1.0) * 100.0,
        pick("nowcast_proxy_capture_packets_total"),
        pick("nowcast_proxy_capture_kernel_dropped_total"),
        by("nowcast_proxy_capture_trains_total", "trains"),
        by(
            "nowcast_proxy_capture_packets_outside_trains_total",
            "packets outside trains"
        ),
        m.lines()
            .find_map(|l| l.strip_prefix("nowcast_proxy_capture_short_runs_total "))
            .map_or(String::new(), |n| format!("; short runs {n}")),
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "the proxy did not stop cleanly"
    );
    assert!(
        m.contains("nowcast_proxy_info{bandwidth_source=\"wren\""),
        "{m}"
    );
    assert!(
        m.contains("nowcast_proxy_bandwidth_forecast_mbits{replica=\"s\",source=\"wren\"}"),
        "the forecast in use is not Wren's: {m}"
    );
    assert!(
        wren.len() >= 10,
        "only {} lower bounds{}",
        wren.len(),
        by("nowcast_proxy_capture_trains_total", "trains")
    );
    WrenRun {
        truth,
        wren: mw.expect("lower bounds"),
        tcp_info: mt.unwrap_or(f64::NAN),
    }
}
