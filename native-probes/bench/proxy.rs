//! `cargo bench -p native-probes --bench proxy`: what `nowcast proxy` costs on loopback, next
//! to nginx as a reverse proxy (the Debian package) in the same run. One upstream (hyper,
//! answering 1 KiB to any GET and `GET /bytes/N` with N bytes) is reached directly, through
//! `nowcast proxy` and through nginx (keep-alive both sides, one worker thread each):
//! - latency added: p50 and p99 of one client's back-to-back requests, minus the direct ones;
//! - request throughput: 32 keep-alive clients (one event loop), requests a second, and the
//!   CPU time the proxy spent per request (its processes' user + system time, from /proc);
//! - bulk: 64 MiB downloads, Gbit/s.
//!
//! Fairness: on a machine with 2 or more cores the proxy under test (nowcast or nginx) runs
//! alone on the last core (`taskset`), the load generator and the upstream on the others, so
//! each proxy gets the same CPU and the generator does not take from it; the targets are
//! measured in turn within each run (the order rotating), so a load that comes and goes on a
//! shared machine falls on all of them. `direct` shows what the generator and the upstream
//! reach without a proxy: a proxy cannot be measured above it.
//!
//! Each figure is the median of RUNS runs (BENCH_QUICK=1: fewer and shorter).
//! PROXY_BENCH_SOURCE=wren runs the proxy with its live capture for Wren (default transfer).
//! NOWCAST_BENCH_BEFORE=/path/to/an/older/nowcast adds it as a column, measured in the same
//! run (before/after a change); several, separated by commas, add a column each (`before`,
//! `before 2`, … in that order: the steps of a series of changes).
//! NOWCAST_BENCH_NO_PIN=1 leaves every process on every core.
//! PROXY_BENCH_HOLD=SECS runs only the throughput phase, SECS seconds for each proxy in turn,
//! printing each one's pid first: time for a profiler (`perf record -p PID`) to attach;
//! PROXY_BENCH_ROUNDS=N repeats that N times, the proxies' order turning each time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;

struct Chunks {
    left: u64,
    chunk: Bytes,
}

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return std::task::Poll::Ready(None);
        }
        let n = (self.chunk.len() as u64).min(self.left) as usize;
        self.left -= n as u64;
        std::task::Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

fn upstream() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            let small = Bytes::from(vec![b'x'; 1024]);
            let big = Bytes::from(vec![b'y'; 256 * 1024]);
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                let _ = s.set_nodelay(true);
                let (small, big) = (small.clone(), big.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: hyper::Request<_>| {
                        let path = req.uri().path().to_string();
                        let body = match path.strip_prefix("/bytes/").and_then(|n| n.parse().ok()) {
                            Some(n) => Chunks {
                                left: n,
                                chunk: big.clone(),
                            }
                            .boxed(),
                            None => Full::new(small.clone()).map_err(|e| match e {}).boxed(),
                        };
                        async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(body)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                        .await;
                });
            }
        });
    });
    rx.recv().unwrap()
}

/// One keep-alive client.
struct Client {
    w: TcpStream,
    r: BufReader<TcpStream>,
    buf: Vec<u8>,
}

impl Client {
    fn new(to: SocketAddr) -> Client {
        let s = TcpStream::connect(to).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client {
            w: s.try_clone().unwrap(),
            r: BufReader::with_capacity(256 * 1024, s),
            buf: vec![0; 256 * 1024],
        }
    }

    /// GET `path`; returns the body length.
    fn get(&mut self, path: &str) -> u64 {
        write!(self.w, "GET {path} HTTP/1.1\r\nhost: b\r\n\r\n").unwrap();
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        assert!(line.contains(" 200 "), "{line:?}");
        let mut len = None;
        loop {
            line.clear();
            self.r.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            let l = line.to_ascii_lowercase();
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse::<u64>().ok();
            }
        }
        let mut left = len.expect("content-length");
        let total = left;
        while left > 0 {
            let n = (left as usize).min(self.buf.len());
            self.r.read_exact(&mut self.buf[..n]).unwrap();
            left -= n as u64;
        }
        total
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

/// (p50, p99) of `n` back-to-back 1 KiB GETs, µs.
fn latency(to: SocketAddr, n: usize) -> (f64, f64) {
    let mut c = Client::new(to);
    for _ in 0..200 {
        c.get("/");
    }
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            c.get("/");
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    (pct(&mut v, 0.5), pct(&mut v, 0.99))
}

/// One keep-alive client on the generator's event loop: GET / and read the response (its
/// head and Content-Length bytes).
async fn get_async(s: &mut tokio::net::TcpStream, buf: &mut [u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(b"GET / HTTP/1.1\r\nhost: b\r\n\r\n")
        .await
        .expect("write");
    let mut len = 0;
    let total = loop {
        let n = s.read(&mut buf[len..]).await.expect("read");
        assert!(n > 0, "the connection closed");
        len += n;
        if let Some(end) = buf[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).expect("head");
            assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
            let cl = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .expect("content-length");
            break end + 4 + cl;
        }
    };
    assert!(total <= buf.len(), "response larger than the buffer");
    while len < total {
        let n = s.read(&mut buf[len..total]).await.expect("read");
        assert!(n > 0, "the connection closed");
        len += n;
    }
}

/// CPU time per request, µs: user and system.
#[derive(Clone, Copy)]
struct Cpu {
    user: f64,
    system: f64,
}

impl Cpu {
    fn total(self) -> f64 {
        self.user + self.system
    }
}

/// Requests a second with `conns` keep-alive clients for `secs`, all on one event loop (one
/// thread: the generator's cost stays small and on its own core), and the CPU time `pids`
/// (the proxy's processes) spent per request.
fn throughput(to: SocketAddr, conns: usize, secs: f64, pids: &[u32]) -> (f64, Option<Cpu>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..conns)
            .map(|_| {
                let (stop, count) = (stop.clone(), count.clone());
                tokio::spawn(async move {
                    let mut s = tokio::net::TcpStream::connect(to).await.expect("connect");
                    s.set_nodelay(true).unwrap();
                    let mut buf = vec![0u8; 16 * 1024];
                    while !stop.load(Ordering::Relaxed) {
                        get_async(&mut s, &mut buf).await;
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (c0, t0, cpu0) = (count.load(Ordering::Relaxed), Instant::now(), cpu_us(pids));
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let (c1, cpu1) = (count.load(Ordering::Relaxed), cpu_us(pids));
        let rate = (c1 - c0) as f64 / t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        let per = match (cpu0, cpu1) {
            (Some(a), Some(b)) if c1 > c0 => Some(Cpu {
                user: (b.user - a.user) / (c1 - c0) as f64,
                system: (b.system - a.system) / (c1 - c0) as f64,
            }),
            _ => None,
        };
        (rate, per)
    })
}

/// User and system CPU time of `pids` and their children (nginx's workers), µs; `None` for
/// no process or where /proc does not tell.
fn cpu_us(pids: &[u32]) -> Option<Cpu> {
    if pids.is_empty() {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (mut user, mut system) = (0u64, 0u64);
    let mut all: Vec<u32> = pids.to_vec();
    for &p in pids {
        let kids = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).ok()?;
        all.extend(
            kids.split_whitespace()
                .filter_map(|k| k.parse::<u32>().ok()),
        );
    }
    for p in all {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        // Fields after the command's closing parenthesis: state is the 3rd field overall,
        // utime and stime the 14th and 15th.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        user += f.get(11)?.parse::<u64>().ok()?;
        system += f.get(12)?.parse::<u64>().ok()?;
    }
    Some(Cpu {
        user: user as f64 / hz * 1e6,
        system: system as f64 / hz * 1e6,
    })
}

/// Gbit/s of `n` downloads of 64 MiB.
fn bulk(to: SocketAddr, n: usize) -> f64 {
    let mut c = Client::new(to);
    let t = Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        bytes += c.get("/bytes/67108864");
    }
    bytes as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e9
}

fn wait_port(a: SocketAddr) {
    let end = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(a).is_err() {
        assert!(Instant::now() < end, "nothing listens on {a}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child stopped on drop: SIGTERM first (nginx's master then stops its workers; a SIGKILL
/// would leave them running), SIGKILL after 5 s.
struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The cores of this machine, and the one the proxy under test gets (`None`: no pinning).
fn proxy_core() -> Option<usize> {
    if std::env::var("NOWCAST_BENCH_NO_PIN").is_ok() {
        return None;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let taskset = ["/usr/bin/taskset", "/bin/taskset"]
        .into_iter()
        .any(|p| std::path::Path::new(p).exists());
    (n >= 2 && taskset).then_some(n - 1)
}

/// Keeps this process (the generator, the upstream) off core `c`.
fn avoid_core(c: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for i in 0..c {
            libc::CPU_SET(i, &mut set);
        }
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity");
    }
}

/// `bin args`, on core `core` when given.
fn pinned(bin: &str, core: Option<usize>) -> Command {
    match core {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", &c.to_string(), bin]);
            cmd
        }
        None => Command::new(bin),
    }
}

fn nowcast_proxy(bin: &str, up: SocketAddr, core: Option<usize>) -> (Killed, SocketAddr) {
    let mut c = pinned(bin, core)
        .args(["proxy", "--listen", "127.0.0.1:0", "--threads", "1"])
        .args(["--replica", &format!("u=http://{up}")])
        // The source the figures were measured with (as root, `auto` would capture on lo);
        // PROXY_BENCH_SOURCE=wren measures the live capture's cost (Zangrilli & Lowekamp §4.1).
        .args([
            "--bandwidth-source",
            &std::env::var("PROXY_BENCH_SOURCE").unwrap_or_else(|_| "transfer".into()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("nowcast proxy");
    let mut line = String::new();
    BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("address");
    (Killed(c), addr)
}

fn nginx(
    up: SocketAddr,
    dir: &std::path::Path,
    core: Option<usize>,
) -> Option<(Killed, SocketAddr)> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    let port = free_port();
    let conf = dir.join("nginx.conf");
    // One worker, no access log (nowcast proxy writes no records here either), keep-alive to
    // the clients and to the upstream without a request limit on either side, no buffering
    // of responses (nowcast proxy streams them) through a 64 KiB buffer (the default 4 or
    // 8 KiB holds its bulk rate back).
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests 1000000;\n client_body_temp_path {d};\n proxy_temp_path {d};\n\
             upstream u {{ server {up}; keepalive 64; keepalive_requests 1000000; keepalive_timeout 60s; }}\n\
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://u;\n\
             proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off;\n\
             proxy_buffer_size 64k; proxy_buffers 8 64k; proxy_busy_buffers_size 128k; }} }}\n}}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let c = pinned(bin, core)
        .args(["-c", conf.to_str().unwrap(), "-p", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_port(addr);
    Some((Killed(c), addr))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The runs' ratios, lowest to highest.
fn spread(v: &[f64]) -> String {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn median_opt(v: &[Option<f64>]) -> Option<f64> {
    let x: Vec<f64> = v.iter().flatten().copied().collect();
    (!x.is_empty()).then(|| median(x))
}

struct Target {
    name: String,
    addr: SocketAddr,
    pids: Vec<u32>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    rps: Vec<f64>,
    cpu: Vec<Option<f64>>,
    gbit: Vec<f64>,
}

fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok();
    let runs = if quick { 3 } else { 5 };
    let (n_lat, secs, n_bulk) = if quick {
        (2_000, 2.0, 4)
    } else {
        (10_000, 5.0, 16)
    };
    let core = proxy_core();
    if let Some(c) = core {
        avoid_core(c);
    }
    let up = upstream();
    wait_port(up);
    let dir = std::env::temp_dir().join(format!("nwpb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut children = Vec::new();
    let mut targets = vec![("direct".to_string(), up, vec![])];
    let (p, proxy) = nowcast_proxy(env!("CARGO_BIN_EXE_nowcast"), up, core);
    wait_port(proxy);
    targets.push(("nowcast proxy".into(), proxy, vec![p.0.id()]));
    children.push(p);
    let befores = std::env::var("NOWCAST_BENCH_BEFORE").unwrap_or_default();
    for (i, before) in befores.split(',').filter(|b| !b.is_empty()).enumerate() {
        let (p, addr) = nowcast_proxy(before, up, core);
        wait_port(addr);
        let name = match i {
            0 => "before".to_string(),
            _ => format!("before {}", i + 1),
        };
        targets.push((name, addr, vec![p.0.id()]));
        children.push(p);
    }
    match nginx(up, &dir, core) {
        Some((n, addr)) => {
            targets.push(("nginx".into(), addr, vec![n.0.id()]));
            children.push(n);
        }
        None => println!("nginx is not installed (apt-get install nginx): its column is missing"),
    }
    let mut t: Vec<Target> = targets
        .into_iter()
        .map(|(name, addr, pids)| Target {
            name,
            addr,
            pids,
            p50: vec![],
            p99: vec![],
            rps: vec![],
            cpu: vec![],
            gbit: vec![],
        })
        .collect();
    let n = t.len();
    if let Some(hold) = std::env::var("PROXY_BENCH_HOLD")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        // Only the throughput phase, `hold` seconds a proxy, for a profiler to attach to;
        // PROXY_BENCH_ROUNDS=N does it N times, the order of the proxies turning each time
        // (an A/B of CPU time per request, user and system apart).
        let rounds = std::env::var("PROXY_BENCH_ROUNDS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(1);
        for round in 0..rounds {
            for i in 0..n - 1 {
                let x = &t[1 + (round + i) % (n - 1)];
                println!("{} (pid {:?}): {hold} s of 32 connections", x.name, x.pids);
                let (rps, cpu) = throughput(x.addr, 32, hold, &x.pids);
                let (u, s) = cpu.map_or((f64::NAN, f64::NAN), |c| (c.user, c.system));
                println!(
                    "  {rps:.0} requests/s, {:.1} CPU µs/request (user {u:.1}, system {s:.1})",
                    u + s
                );
            }
        }
        drop(children);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    for run in 0..runs {
        for i in 0..n {
            let x = &mut t[(run + i) % n];
            let (a, b) = latency(x.addr, n_lat);
            x.p50.push(a);
            x.p99.push(b);
            let (rps, cpu) = throughput(x.addr, 32, secs, &x.pids);
            x.rps.push(rps);
            x.cpu.push(cpu.map(Cpu::total));
            x.gbit.push(bulk(x.addr, n_bulk));
        }
    }
    match core {
        Some(c) => println!(
            "each proxy alone on core {c}; the generator (one event loop) and the upstream on the \
             other cores"
        ),
        None => {
            println!("no pinning: the proxies, the generator and the upstream share every core")
        }
    }
    println!(
        "{:<14} {:>9} {:>9} {:>14} {:>16} {:>11} {:>13}",
        "through",
        "p50 µs",
        "p99 µs",
        "p50/p99 added",
        "req/s (32 conn)",
        "CPU µs/req",
        "64 MiB Gbit/s"
    );
    let (d50, d99) = (median(t[0].p50.clone()), median(t[0].p99.clone()));
    let rows: Vec<(String, f64, f64, f64, Option<f64>, f64)> = t
        .iter()
        .map(|x| {
            (
                x.name.clone(),
                median(x.p50.clone()),
                median(x.p99.clone()),
                median(x.rps.clone()),
                median_opt(&x.cpu),
                median(x.gbit.clone()),
            )
        })
        .collect();
    for (name, p50, p99, rps, cpu, gbit) in &rows {
        println!(
            "{:<14} {:>9.1} {:>9.1} {:>14} {:>16.0} {:>11} {:>13.2}",
            name,
            p50,
            p99,
            format!("{:.0}/{:.0}", p50 - d50, p99 - d99),
            rps,
            cpu.map_or("-".into(), |c| format!("{c:.1}")),
            gbit
        );
    }
    // The spread behind each median: the lowest and highest of the runs.
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.0}–{hi:.0}")
    };
    for x in &t {
        println!(
            "  {:<14} runs' range: p99 µs {}, req/s {}, Gbit/s {}",
            x.name,
            range(&x.p99),
            range(&x.rps),
            {
                let lo = x.gbit.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = x.gbit.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{lo:.2}–{hi:.2}")
            }
        );
    }
    let find = |n: &str| rows.iter().position(|r| r.0 == n);
    if let (Some(p), Some(g)) = (find("nowcast proxy"), find("nginx")) {
        // The ratio of each run, then their median: both measured within the same minute.
        let ratios: Vec<f64> = t[p].rps.iter().zip(&t[g].rps).map(|(a, b)| a / b).collect();
        println!(
            "nowcast proxy / nginx: {:.2}× the requests a second (median of the runs' ratios {:.2}×, \
             they were {}; goal ≥ 0.8×), {:.2}× the bulk rate; p99 added {:.0} µs (goal ≤ 1000 µs); medians of {runs} runs",
            rows[p].3 / rows[g].3,
            median(ratios.clone()),
            spread(&ratios),
            rows[p].5 / rows[g].5,
            rows[p].2 - d99
        );
    }
    if let Some(p) = find("nowcast proxy") {
        for (b, row) in rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.0.starts_with("before"))
        {
            let ratios: Vec<f64> = t[p].rps.iter().zip(&t[b].rps).map(|(a, b)| a / b).collect();
            println!(
                "nowcast proxy / {}: {:.2}× the requests a second (runs' ratios {})",
                row.0,
                rows[p].3 / row.3,
                spread(&ratios)
            );
        }
        if let Some(g) = find("nginx") {
            for (b, row) in rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.0.starts_with("before"))
            {
                let ratios: Vec<f64> = t[b].rps.iter().zip(&t[g].rps).map(|(a, b)| a / b).collect();
                println!(
                    "{} / nginx: {:.2}× the requests a second (runs' ratios {})",
                    row.0,
                    row.3 / rows[g].3,
                    spread(&ratios)
                );
            }
        }
    }
    drop(children);
    let _ = std::fs::remove_dir_all(&dir);
}
