//! `nowcast proxy`'s caps on the lists it is given (`proxy::policy::MAX_REPLICAS`,
//! `MAX_SERVICE_REPLICAS`, `MAX_SERVICES`): over them, from a config file or from the flags,
//! it refuses to start, naming the count, the cap and the file or flag, before it builds
//! anything; at them it starts. And its active probes of many replicas start a quarter at a
//! time, not all in the same instant. On loopback, without root.

use crate::common;

use common::http::Proxy;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A config file in `dir`: one service with `n` replicas (all at `url`), after `settings`.
fn config(dir: &Path, settings: &str, n: usize, url: &str) -> PathBuf {
    let mut t = format!("bandwidth_source = \"transfer\"\n{settings}[[service]]\nprefix = \"/\"\n");
    t.push_str("replicas = [\n");
    for i in 0..n {
        t.push_str(&format!("  {{ name = \"r{i}\", url = \"{url}\" }},\n"));
    }
    t.push_str("]\n");
    let path = dir.join(format!("replicas-{n}.toml"));
    std::fs::write(&path, t).unwrap();
    path
}

fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nwp-limits-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `nowcast proxy ARGS`, which must fail: its standard error.
fn refused(args: &[String]) -> String {
    let mut all = vec!["proxy", "--listen", "127.0.0.1:0"];
    all.extend(args.iter().map(String::as_str));
    let out = common::nowcast(&all, Duration::from_secs(60));
    assert!(
        !out.status.success(),
        "started with {} arguments",
        args.len()
    );
    common::text(&out.stderr)
}

#[test]
fn proxy_refuses_more_replicas_or_services_than_its_caps_naming_the_count_and_the_cap() {
    let dir = scratch("over");
    // A file: the line of the list, its count and the cap.
    let file = config(&dir, "", 1_025, "http://127.0.0.1:9");
    let e = refused(&["--config".into(), file.display().to_string()]);
    assert!(
        e.contains(&format!(
            "--config {}: line 4, column 12: `service.replicas`: service '/' lists 1025 \
             replicas: at most 1024 in a service",
            file.display()
        )),
        "{e}"
    );
    // The flags.
    let replicas: Vec<String> = (0..1_025)
        .flat_map(|i| ["--replica".into(), format!("r{i}=http://127.0.0.1:9")])
        .collect();
    let e = refused(&replicas);
    assert!(
        e.contains("1025 --replica flags: at most 1024 replicas"),
        "{e}"
    );
    let names = vec!["a"; 1_025].join(",");
    let e = refused(&[
        "--replica".into(),
        "a=http://127.0.0.1:9".into(),
        "--service".into(),
        format!("/={names}"),
    ]);
    assert!(
        e.contains("--service '/=…': 1025 replicas listed: at most 1024 in a service"),
        "{e}"
    );
    let mut services = vec!["--replica".to_string(), "a=http://127.0.0.1:9".into()];
    for i in 0..1_025 {
        services.extend(["--service".into(), format!("/s{i}=a")]);
    }
    let e = refused(&services);
    assert!(
        e.contains("1025 --service flags: at most 1024 services"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The flags are held to the config file's checks: one prefix, one service; a replica listed
/// once in a service.
#[test]
fn proxy_service_flags_refuse_a_replica_listed_twice_and_a_prefix_given_twice() {
    let two = |service: &[&str]| {
        let mut args: Vec<String> = ["--replica", "a=http://127.0.0.1:9"]
            .into_iter()
            .chain(["--replica", "b=http://127.0.0.1:9"])
            .map(String::from)
            .collect();
        for s in service {
            args.extend(["--service".to_string(), s.to_string()]);
        }
        refused(&args)
    };
    let e = two(&["/api=a,b,a"]);
    assert!(
        e.contains("--service '/api=a,b,a': replica 'a' is listed twice in service '/api'"),
        "{e}"
    );
    let e = two(&["/api=a", "/api=b"]);
    assert!(
        e.contains("--service '/api=b': '/api' is given to two services"),
        "{e}"
    );
}

#[test]
fn proxy_starts_with_as_many_replicas_as_its_cap() {
    let dir = scratch("at");
    let file = config(&dir, "grace = 1.0\n", 1_024, "http://127.0.0.1:9");
    let mut p = Proxy::start(&["--config", file.to_str().unwrap()]);
    let up = p
        .metrics()
        .lines()
        .filter(|l| l.starts_with("nowcast_proxy_up{"))
        .count();
    assert_eq!(up, 1_024);
    assert!(p.terminate(Duration::from_secs(10)).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A listener that accepts every connection, notes when, and holds it unanswered (so that
/// each replica's first probe stays in flight and is not repeated).
struct Holder {
    addr: std::net::SocketAddr,
    accepted: Arc<Mutex<Vec<Instant>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Holder {
    fn start() -> Holder {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_reuse_address(true).unwrap();
        s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        // A backlog for every probe at once, so that none waits on a SYN retransmission.
        s.listen(1_024).unwrap();
        let l: std::net::TcpListener = s.into();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a2, s2) = (accepted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !s2.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => {
                        a2.lock().unwrap().push(Instant::now());
                        held.push(c);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Holder {
            addr,
            accepted,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn proxy_probes_many_replicas_a_quarter_at_a_time_not_all_at_once() {
    // 300 replicas on one upstream, a TTL of 2 s: the prober looks every 500 ms and starts
    // at most 75 probes (a quarter) each time, so the 300 first probes come in four waves.
    let h = Holder::start();
    let dir = scratch("spread");
    let url = format!("http://{}", h.addr);
    let file = config(&dir, "ttl = 2.0\ngrace = 1.0\n", 300, &url);
    let mut p = Proxy::start(&["--config", file.to_str().unwrap()]);
    let end = Instant::now() + Duration::from_secs(10);
    while h.accepted.lock().unwrap().len() < 300 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let at = h.accepted.lock().unwrap().clone();
    assert!(p.terminate(Duration::from_secs(10)).is_some());
    assert_eq!(at.len(), 300, "every replica probed once");
    let first = at[0];
    let wave = at
        .iter()
        .filter(|&&t| t - first < Duration::from_millis(250))
        .count();
    assert!(wave <= 75, "{wave} probes in the first 250 ms");
    let span = at[299] - first;
    assert!(
        span >= Duration::from_millis(1_250),
        "the 300 probes started within {span:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `nowcast proxy` raises its soft limit on open descriptors to the hard one (a shell's soft
/// 1,024 would stop it far below `--max-connections`), and says so when even the hard limit
/// is below what `--max-connections` may need. Run under util-linux's `prlimit`, which sets
/// the limits and then runs the proxy in its own process.
#[test]
fn proxy_raises_its_descriptor_limit_and_says_when_the_hard_one_is_too_low() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: prlimit (util-linux) is not installed");
        return;
    }
    for (hard, max_connections, warned) in [(8192u64, "1024", false), (1024, "4096", true)] {
        let mut child = Command::new("prlimit")
            .arg(format!("--nofile=256:{hard}"))
            .args([common::BIN, "proxy", "--listen", "127.0.0.1:0"])
            .args([
                "--replica",
                "a=http://127.0.0.1:9",
                "--bandwidth-source",
                "transfer",
            ])
            .args(["--max-connections", max_connections])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert!(ready.contains("listening on"), "{ready:?}");
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
        let soft = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .unwrap()
            .to_string();
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        let stderr = common::text(&out.stderr);
        assert_eq!(soft, hard.to_string(), "{limits}");
        assert_eq!(
            stderr.contains(&format!(
                "at most {hard} open descriptors (the hard limit, `ulimit -Hn`), fewer than the \
                 12352 that --max-connections 4096 may need"
            )),
            warned,
            "{stderr}"
        );
    }
}
