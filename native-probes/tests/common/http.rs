//! Real HTTP servers and a plain HTTP/1.1 client for the proxy's tests: upstream replicas
//! (hyper, on their own thread and runtime, optionally inside a network namespace), a replica
//! that resets in the middle of a body, a running `nowcast proxy`, and a client on raw
//! sockets so that malformed and oversized requests can be sent as they are.

use super::BIN;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(s: impl Into<Bytes>) -> Body {
    Full::new(s.into()).boxed()
}

/// An upstream replica: answers
/// - any request with a body: reads it all, answers `read N` (N bytes) with the body's
///   BLAKE3 in `x-blake3`;
/// - `GET /bytes/N`: N bytes, streamed in 64 KiB chunks;
/// - `GET /sleep/MS`: `slept` after MS milliseconds;
/// - anything else: its name.
pub struct Upstream {
    pub addr: SocketAddr,
    /// Requests other than the proxy's probes.
    pub requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

async fn answer(name: Arc<String>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let has_body = req
        .headers()
        .get("content-length")
        .is_some_and(|v| v != "0")
        || req.headers().contains_key("transfer-encoding");
    if has_body {
        let mut body = req.into_body();
        let mut n = 0u64;
        let mut hash = blake3::Hasher::new();
        while let Some(f) = body.frame().await {
            match f {
                Ok(f) => {
                    if let Some(d) = f.data_ref() {
                        n += d.len() as u64;
                        hash.update(d);
                    }
                }
                Err(_) => break,
            }
        }
        let mut r = Response::new(full(format!("read {n}")));
        r.headers_mut()
            .insert("x-replica", name.as_str().parse().unwrap());
        r.headers_mut().insert(
            "x-blake3",
            hash.finalize().to_hex().as_str().parse().unwrap(),
        );
        return Ok(r);
    }
    // Paths keep any service prefix: match the last segments.
    let tail = |key: &str| {
        path.rsplit_once(key)
            .and_then(|(_, n)| n.parse::<u64>().ok())
    };
    if let Some(n) = tail("/bytes/") {
        let chunk = Bytes::from(vec![0x61u8; 64 * 1024]);
        return Ok(Response::new(BodyExt::boxed(Chunks { left: n, chunk })));
    }
    if let Some(ms) = tail("/sleep/") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        return Ok(Response::new(full("slept")));
    }
    Ok(Response::new(full(name.as_bytes().to_vec())))
}

/// `n` bytes as frames of at most `chunk`'s length.
struct Chunks {
    left: u64,
    chunk: Bytes,
}

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return std::task::Poll::Ready(None);
        }
        let n = (self.chunk.len() as u64).min(self.left) as usize;
        self.left -= n as u64;
        std::task::Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }
    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

/// Runs `f` on a new thread, inside network namespace `ns` when given.
pub fn thread_in(
    ns: Option<String>,
    f: impl FnOnce() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Some(ns) = ns {
            let path = format!("/var/run/netns/{ns}");
            let file = std::fs::File::open(&path).expect("open the namespace");
            // SAFETY: setns on this thread only, with a namespace descriptor.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}");
        }
        f()
    })
}

impl Upstream {
    /// Starts a replica named `name` on `bind` (port 0: a free one), in `ns` if given.
    pub fn start(name: &str, bind: &str, ns: Option<&str>) -> Upstream {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let (name, bind) = (Arc::new(name.to_string()), bind.to_string());
        let (stop2, req2) = (stop.clone(), requests.clone());
        let thread = thread_in(ns.map(str::to_string), move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::bind(&bind)
                    .await
                    .expect("bind upstream");
                tx.send(l.local_addr().unwrap()).unwrap();
                while !stop2.load(Ordering::Relaxed) {
                    let accepted =
                        tokio::time::timeout(Duration::from_millis(100), l.accept()).await;
                    let Ok(Ok((s, _))) = accepted else { continue };
                    let _ = s.set_nodelay(true);
                    let (name, req2) = (name.clone(), req2.clone());
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |r: Request<Incoming>| {
                            // The proxy's own probes are not counted.
                            let probe = r
                                .headers()
                                .get("user-agent")
                                .is_some_and(|v| v == "nowcast-proxy-probe");
                            if !probe {
                                req2.fetch_add(1, Ordering::Relaxed);
                            }
                            answer(name.clone(), r)
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                            .await;
                    });
                }
            });
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("upstream address");
        Upstream {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A replica on a raw socket: for each connection, reads the request's head (never its
/// body) and hands the connection to `answer`, one connection at a time. Stopped on drop.
pub struct RawReplica {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawReplica {
    pub fn start(answer: impl Fn(TcpStream) + Send + 'static) -> RawReplica {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                let Ok((c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                answer(c);
            }
        });
        RawReplica {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for RawReplica {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A replica that answers every request with the head of a 1 MiB body, sends 64 KiB of it
/// and resets the connection.
pub fn resetter() -> RawReplica {
    RawReplica::start(|mut c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1048576\r\n\r\n");
        let _ = c.write_all(&vec![b'r'; 64 * 1024]);
        std::thread::sleep(Duration::from_millis(50));
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: SO_LINGER with a valid linger struct: close sends a reset.
        unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    })
}

/// A replica that speaks HTTP/1.0 as simple servers do (Python's `http.server`): it never
/// reads a request's body, answers `response` and closes the connection (a reset, when an
/// upload it did not read is still arriving).
pub fn one_shot(response: &'static [u8]) -> RawReplica {
    RawReplica::start(move |mut c| {
        let _ = c.write_all(response);
    })
}

/// A running `nowcast proxy`, stopped (SIGKILL) on drop if still running.
pub struct Proxy {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: Arc<std::sync::Mutex<String>>,
    /// The ready line.
    pub ready: String,
    /// The thread collecting standard error: joined once the proxy has exited, so that
    /// `stderr` then holds everything it wrote (on a busy machine the thread can still be
    /// behind when the exit status is in).
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts `nowcast proxy --listen 127.0.0.1:0 ARGS` (inside `prefix`, e.g. `ip netns exec
    /// NS`, when given) and waits for its ready line.
    pub fn start_in(prefix: &[&str], args: &[&str]) -> Proxy {
        let mut cmd = if prefix.is_empty() {
            Command::new(BIN)
        } else {
            let mut c = Command::new(prefix[0]);
            c.args(&prefix[1..]).arg(BIN);
            c
        };
        // The proxy's other tests keep the bandwidth source they were written against (as
        // root, `auto` would capture); tests/proxy_wren.rs tests the source itself.
        let pinned = args
            .iter()
            .any(|a| *a == "--bandwidth-source" || *a == "--config");
        let mut child = cmd
            .arg("proxy")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .args(if pinned {
                &[][..]
            } else {
                &["--bandwidth-source", "transfer"][..]
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nowcast proxy");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("ready line");
        let addr = line
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let stderr = Arc::new(std::sync::Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let e2 = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                e2.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        Proxy {
            child,
            addr,
            stderr,
            ready: line,
            stderr_reader: Some(stderr_reader),
        }
    }

    pub fn start(args: &[&str]) -> Proxy {
        Self::start_in(&[], args)
    }

    /// SIGTERM, then waits at most `limit` for the exit status.
    pub fn terminate(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Ok(Some(s)) = self.child.try_wait() {
                if let Some(t) = self.stderr_reader.take() {
                    let _ = t.join();
                }
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }

    pub fn metrics(&self) -> String {
        let r = request(self.addr, b"GET /metrics HTTP/1.1\r\nhost: p\r\n\r\n");
        assert_eq!(r.status, 200, "{}", r.text());
        r.text()
    }

    /// The value of a metric line that starts with `prefix` (name and labels).
    pub fn metric(&self, prefix: &str) -> Option<f64> {
        self.metrics()
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response as read off the wire.
#[derive(Debug)]
pub struct Resp {
    /// The status line's version, e.g. "HTTP/1.1".
    pub version: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was cut before its content-length.
    pub truncated: bool,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response (head and a content-length or chunked body) from `r`.
pub fn read_response(r: &mut BufReader<TcpStream>) -> std::io::Result<Resp> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let version = line.split_whitespace().next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |k: &str| headers.iter().find(|h| h.0 == k).map(|h| h.1.clone());
    let mut body = Vec::new();
    let mut truncated = false;
    if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        let mut got = 0;
        while got < n {
            match r.read(&mut body[got..]) {
                Ok(0) | Err(_) => {
                    truncated = true;
                    break;
                }
                Ok(k) => got += k,
            }
        }
        body.truncate(got);
    } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                truncated = true;
                break;
            }
            let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            if r.read_exact(&mut chunk).is_err() {
                truncated = true;
                break;
            }
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if status != 204 && status != 304 {
        let _ = r.read_to_end(&mut body);
    }
    Ok(Resp {
        version,
        status,
        headers,
        body,
        truncated,
    })
}

/// Sends `raw` on a new connection and reads one response (10 s limit).
pub fn request(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect to the proxy");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw).unwrap();
    let mut r = BufReader::new(s);
    read_response(&mut r).expect("a response")
}

/// A replica that answers every request with the head of a 1 MiB body (`Content-Length`, or
/// chunked when `chunked`), sends 64 KiB of it and then stalls: sends nothing more and keeps
/// the connection open, reading, until the proxy closes it (at most 30 s). Each connection
/// has a thread of its own, so that a stalled one holds up no other (the proxy's probes
/// among them). `closed` counts the connections the proxy closed while they stalled.
pub fn staller(chunked: bool, closed: Arc<AtomicU64>) -> RawReplica {
    RawReplica::start(move |mut c| {
        let closed = closed.clone();
        std::thread::spawn(move || {
            let part = vec![b's'; 64 * 1024];
            let sent = if chunked {
                c.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    .and_then(|_| c.write_all(format!("{:x}\r\n", part.len()).as_bytes()))
                    .and_then(|_| c.write_all(&part))
                    .and_then(|_| c.write_all(b"\r\n"))
            } else {
                c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1048576\r\n\r\n")
                    .and_then(|_| c.write_all(&part))
            };
            if sent.is_err() {
                return;
            }
            let until = Instant::now() + Duration::from_secs(30);
            let mut buf = [0u8; 4096];
            while Instant::now() < until {
                match c.read(&mut buf) {
                    Ok(0) => {
                        closed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        closed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err(_) => {}
                }
            }
        });
    })
}

/// A replica slow but steady: answers every request with `chunks` × `chunk` bytes
/// (`Content-Length`), one chunk every `every`, and closes the connection. Each connection
/// on a thread of its own.
pub fn trickler(chunk: usize, every: Duration, chunks: usize) -> RawReplica {
    RawReplica::start(move |mut c| {
        std::thread::spawn(move || {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                chunk * chunks
            );
            if c.write_all(head.as_bytes()).is_err() {
                return;
            }
            for _ in 0..chunks {
                std::thread::sleep(every);
                if c.write_all(&vec![b't'; chunk]).is_err() {
                    return;
                }
            }
        });
    })
}
