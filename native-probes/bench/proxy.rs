//! `cargo bench -p native-probes --bench proxy`: what `nowcast proxy` costs on loopback, next
//! to nginx as a reverse proxy (the Debian package) in the same run. One upstream (hyper,
//! answering 1 KiB to any GET and `GET /bytes/N` with N bytes) is reached directly, through
//! `nowcast proxy` and through nginx (keep-alive both sides, one worker each):
//! - latency added: p50 and p99 of one client's back-to-back requests, minus the direct ones;
//! - request throughput: 32 keep-alive clients, requests a second;
//! - bulk: 64 MiB downloads, Gbit/s.
//!
//! Each figure is the median of RUNS runs (BENCH_QUICK=1: fewer and shorter).
//! PROXY_BENCH_SOURCE=wren runs the proxy with its live capture for Wren (default transfer).

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

/// Requests a second with `conns` clients for `secs`.
fn throughput(to: SocketAddr, conns: usize, secs: f64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..conns)
        .map(|_| {
            let (stop, count) = (stop.clone(), count.clone());
            std::thread::spawn(move || {
                let mut c = Client::new(to);
                while !stop.load(Ordering::Relaxed) {
                    c.get("/");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (c0, t0) = (count.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let rate = (count.load(Ordering::Relaxed) - c0) as f64 / t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    rate
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

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
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

fn nowcast_proxy(up: SocketAddr) -> (Killed, SocketAddr) {
    let bin = env!("CARGO_BIN_EXE_nowcast");
    let mut c = Command::new(bin)
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

fn nginx(up: SocketAddr, dir: &std::path::Path) -> Option<(Killed, SocketAddr)> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    let port = free_port();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests 1000000;\n client_body_temp_path {d};\n proxy_temp_path {d};\n\
             upstream u {{ server {up}; keepalive 64; }}\n\
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://u;\n\
             proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }} }}\n}}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let c = Command::new(bin)
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

fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok();
    let runs = if quick { 3 } else { 5 };
    let (n_lat, secs, n_bulk) = if quick {
        (2_000, 2.0, 4)
    } else {
        (10_000, 5.0, 16)
    };
    let up = upstream();
    wait_port(up);
    let dir = std::env::temp_dir().join(format!("nwpb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_p, proxy) = nowcast_proxy(up);
    wait_port(proxy);
    let ng = nginx(up, &dir);
    if ng.is_none() {
        println!("nginx is not installed (apt-get install nginx): its column is missing");
    }
    let mut targets = vec![("direct", up), ("nowcast proxy", proxy)];
    if let Some((_, a)) = &ng {
        targets.push(("nginx", *a));
    }
    let mut rows = Vec::new();
    for (name, to) in &targets {
        let (mut p50, mut p99, mut rps, mut gbit) = (vec![], vec![], vec![], vec![]);
        for _ in 0..runs {
            let (a, b) = latency(*to, n_lat);
            p50.push(a);
            p99.push(b);
            rps.push(throughput(*to, 32, secs));
            gbit.push(bulk(*to, n_bulk));
        }
        rows.push((*name, median(p50), median(p99), median(rps), median(gbit)));
    }
    println!(
        "{:<14} {:>10} {:>10} {:>16} {:>16} {:>12}",
        "through", "p50 µs", "p99 µs", "p50/p99 added", "req/s (32 conn)", "64 MiB Gbit/s"
    );
    let (d50, d99) = (rows[0].1, rows[0].2);
    for (name, p50, p99, rps, gbit) in &rows {
        println!(
            "{:<14} {:>10.1} {:>10.1} {:>16} {:>16.0} {:>12.2}",
            name,
            p50,
            p99,
            format!("{:.0}/{:.0}", p50 - d50, p99 - d99),
            rps,
            gbit
        );
    }
    if rows.len() == 3 {
        println!(
            "nowcast proxy / nginx: {:.2}× the requests a second, {:.2}× the bulk rate \
             (goal ≥ 0.8×; p99 added goal ≤ 1000 µs); medians of {runs} runs",
            rows[1].3 / rows[2].3,
            rows[1].4 / rows[2].4
        );
    }
    drop(ng);
    let _ = std::fs::remove_dir_all(&dir);
}
