//! `nowcast proxy` against hostile clients and replicas on loopback, for what
//! `tests/it/proxy.rs` does not cover: paths whose dot-segments would leave the service they
//! are routed by, what the replica is sent (`X-Forwarded-For` over several lines, options
//! of `Connection` naming end-to-end fields, `Transfer-Encoding` over several lines),
//! replicas answering with both framings or with a 101, the proxy's own shortage of
//! descriptors (not the replica's failure), and replica URLs with credentials. Every test
//! bounds its time and stops what it started.

use crate::common;

use common::http::{read_response, request, Proxy, RawReplica, Upstream};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A replica that answers every request with what it received: the head as the proxy
/// sent it (lower-case names, one `name: value` line each) and, after a blank line, the
/// body as it arrived once its framing (Content-Length or chunked) is taken off. One
/// thread per connection; stopped on drop.
struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// One request off `r`: its head lines (without the final blank line) and its body.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<(Vec<String>, Vec<u8>)> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let field = |name: &str| {
        head.iter()
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    let mut body = Vec::new();
    if field("transfer-encoding")
        .last()
        .is_some_and(|v| v.ends_with("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0u8; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = field("content-length")
        .first()
        .and_then(|v| v.parse::<usize>().ok())
    {
        body.resize(n, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some((head, body))
}

impl Echo {
    fn start() -> Echo {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s2.load(Relaxed) {
                let Ok((c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                std::thread::spawn(move || {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut w = c.try_clone().unwrap();
                    let mut r = BufReader::new(c);
                    while let Some((head, body)) = read_request(&mut r) {
                        let mut out = head.join("\n").into_bytes();
                        out.extend_from_slice(b"\n\n");
                        out.extend_from_slice(&body);
                        let h = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", out.len());
                        if w.write_all(h.as_bytes()).is_err() || w.write_all(&out).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Echo {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the echo replica was sent for `raw`: the head's lines, and the body.
fn upstream_saw(proxy: SocketAddr, raw: &[u8]) -> (Vec<String>, String) {
    let r = request(proxy, raw);
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let (head, body) = text.split_once("\n\n").expect("head and body");
    (head.lines().map(str::to_string).collect(), body.to_string())
}

/// The values of the lines of `head` named `name`.
fn lines_of<'a>(head: &'a [String], name: &str) -> Vec<&'a str> {
    head.iter()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .collect()
}

/// Services are chosen by the path as it comes, and the path is forwarded unchanged: a
/// dot-segment would take a request routed by `/api` to `/admin` at `/api`'s replicas
/// (and out of a replica's BASE) once they resolve it. Such paths are refused with 400
/// before routing, however they are spelt, and never reach a replica; dots that are not
/// whole segments (names, the query) pass.
#[test]
fn paths_with_dot_segments_are_refused_before_they_are_routed() {
    let (api, admin) = (
        Upstream::start("api", "127.0.0.1:0", None),
        Upstream::start("admin", "127.0.0.1:0", None),
    );
    let p = Proxy::start(&[
        "--replica",
        &format!("api={}/v1", api.url()),
        "--replica",
        &format!("admin={}", admin.url()),
        "--service",
        "/api=api",
        "--service",
        "/admin=admin",
        "--balance",
        "round-robin",
    ]);
    for path in [
        "/api/../admin/users",
        "/api/x/../../admin",
        "/api/%2e%2e/admin",
        "/api/%2E./admin",
        "/api/..%2fadmin",
        "/api/..%5Cadmin",
        "/api/..\\admin",
        "/api/..;jsessionid=1/admin",
        "/api/./x",
        "/api/..",
    ] {
        let raw = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        let r = request(p.addr, raw.as_bytes());
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(r.text().contains("'..' segment"), "{path}: {}", r.text());
    }
    assert_eq!(
        api.requests.load(Relaxed),
        0,
        "nothing reached /api's replica"
    );
    assert_eq!(admin.requests.load(Relaxed), 0, "nor /admin's");
    // Dots inside names, a leading-dot name and a query with dots are served.
    for path in ["/api/a..b/.well-known/x.y", "/api/x?next=../..", "/api/..x"] {
        let raw = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        let r = request(p.addr, raw.as_bytes());
        assert_eq!((r.status, r.text()), (200, "api".to_string()), "{path}");
    }
    assert!(p.metric("nowcast_proxy_rejected_total").unwrap() >= 10.0);
}

/// Services are matched on the path as a replica reads it: `//api/x` and `/%61pi/x` are
/// `/api/x` (they went to `/`'s replica, which served `/api/x` from outside `/api`'s
/// service); a path that a lenient server reads as another service's (an encoded slash or
/// backslash, a `;` parameter: `/api%2fx`, `/api;x/y`) is refused with 400. Paths whose
/// readings agree pass as they came.
#[test]
fn paths_are_routed_as_the_replicas_read_them_or_refused() {
    let (r1, r3) = (
        Upstream::start("r1", "127.0.0.1:0", None),
        Upstream::start("r3", "127.0.0.1:0", None),
    );
    let p = Proxy::start(&[
        "--replica",
        &format!("r1={}", r1.url()),
        "--replica",
        &format!("r3={}", r3.url()),
        "--service",
        "/api=r1",
        "--service",
        "/=r3",
    ]);
    let get = |path: &str| {
        let raw = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        request(p.addr, raw.as_bytes())
    };
    for (path, to) in [
        ("//api/x.txt", "r1"),
        ("/%61pi/x.txt", "r1"),
        ("/%61%70%69//x.txt", "r1"),
        ("/api/x;v=1", "r1"),
        ("/api/a%2fb", "r1"),
        ("/static;v=1/x", "r3"),
        ("/apix/y", "r3"),
        ("/%2561pi/x", "r3"),
    ] {
        let r = get(path);
        assert_eq!((r.status, r.text()), (200, to.to_string()), "{path}");
    }
    let before = (r1.requests.load(Relaxed), r3.requests.load(Relaxed));
    for path in [
        "/api%2fx.txt",
        "/api%2Fx",
        "/api%5cx",
        "/api;x/x.txt",
        "//api;x/y",
    ] {
        let r = get(path);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(
            r.text().contains("routed to another service"),
            "{path}: {}",
            r.text()
        );
    }
    let after = (r1.requests.load(Relaxed), r3.requests.load(Relaxed));
    assert_eq!(before, after, "none reached a replica");
}

/// What the replica is sent: `X-Forwarded-For` keeps every line the request came with (a
/// proxy in front may add its own line, after the client's claim) before the client's
/// address; a client's `Connection` cannot remove `X-Forwarded-For` nor the framing (a
/// GET's chunked body went up without its body once its `Transfer-Encoding` was dropped);
/// `Transfer-Encoding` over several lines goes up as one.
#[test]
fn the_replica_gets_the_whole_forwarded_chain_and_the_bodys_own_framing() {
    let echo = Echo::start();
    let p = Proxy::start(&[
        "--replica",
        &format!("e=http://{}", echo.addr),
        "--balance",
        "round-robin",
    ]);
    // Two lines, as HAProxy's `option forwardfor` sends them (the client's claim first,
    // the address HAProxy saw last), and an empty one.
    let (head, _) = upstream_saw(
        p.addr,
        b"GET /a HTTP/1.1\r\nhost: x\r\nx-forwarded-for: 203.0.113.9\r\n\
          x-forwarded-for: 198.51.100.7\r\nx-forwarded-for:\r\n\r\n",
    );
    assert_eq!(
        lines_of(&head, "x-forwarded-for"),
        ["203.0.113.9, 198.51.100.7, 127.0.0.1"],
        "{head:?}"
    );
    assert_eq!(lines_of(&head, "host"), [echo.addr.to_string()], "{head:?}");
    // `Connection` naming X-Forwarded-For, Host and a field of its own: only the latter goes.
    let (head, _) = upstream_saw(
        p.addr,
        b"GET /a HTTP/1.1\r\nhost: x\r\nconnection: x-forwarded-for, host, x-hop\r\n\
          x-forwarded-for: 198.51.100.7\r\nx-hop: 1\r\n\r\n",
    );
    assert_eq!(
        lines_of(&head, "x-forwarded-for"),
        ["198.51.100.7, 127.0.0.1"],
        "{head:?}"
    );
    assert!(lines_of(&head, "x-hop").is_empty(), "{head:?}");
    assert!(lines_of(&head, "connection").is_empty(), "{head:?}");
    // A GET with a chunked body whose framing `Connection` names: the body still goes up.
    let (head, body) = upstream_saw(
        p.addr,
        b"GET /a HTTP/1.1\r\nhost: x\r\nconnection: transfer-encoding, content-length\r\n\
          transfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!(body, "abc", "{head:?}");
    // Content-Length named by `Connection`: the body goes up with its length.
    let (head, body) = upstream_saw(
        p.addr,
        b"POST /a HTTP/1.1\r\nhost: x\r\nconnection: content-length\r\n\
          content-length: 5\r\n\r\nhello",
    );
    assert_eq!(
        (lines_of(&head, "content-length"), body.as_str()),
        (vec!["5"], "hello"),
        "{head:?}"
    );
    // Transfer-Encoding over two lines: one line upstream, the body re-chunked.
    let (head, body) = upstream_saw(
        p.addr,
        b"POST /a HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip\r\n\
          transfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!(
        (lines_of(&head, "transfer-encoding"), body.as_str()),
        (vec!["gzip, chunked"], "abc"),
        "{head:?}"
    );
}

/// A replica that answers with both a Content-Length and a chunked Transfer-Encoding: the
/// body is read by its chunks and the Content-Length must not go down with it (RFC 9112
/// §6.3; passed down, hyper cut the client's connection without sending a byte). A replica
/// that answers 101 to a request that asked for no upgrade: 502, never a 101 down.
#[test]
fn a_replica_answering_with_both_framings_or_an_unasked_101_is_not_passed_down_as_is() {
    let both = RawReplica::start(|mut c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\n",
        );
    });
    let switching = RawReplica::start(|mut c| {
        let _ = c.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\
              connection: upgrade\r\n\r\nnot http",
        );
        std::thread::sleep(Duration::from_millis(200));
    });
    let p = Proxy::start(&[
        "--replica",
        &format!("both=http://{}", both.addr),
        "--replica",
        &format!("switching=http://{}", switching.addr),
        "--service",
        "/both=both",
        "--service",
        "/switching=switching",
        "--balance",
        "round-robin",
    ]);
    for _ in 0..2 {
        let mut s = TcpStream::connect(p.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /both HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let r = read_response(&mut BufReader::new(s)).expect("a response, not a closed connection");
        assert_eq!(
            (r.status, r.text(), r.truncated),
            (200, "abc".to_string(), false)
        );
        assert!(
            !r.headers.iter().any(|(k, _)| k == "content-length"),
            "{:?}",
            r.headers
        );
    }
    let r = request(p.addr, b"GET /switching HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 502, "{:?} {}", r.headers, r.text());
}

/// Each request in flight holds an upstream socket and its duplicate, and one HTTP/2
/// connection carries up to 128 of them: clients can run the proxy out of descriptors.
/// That is the proxy's shortage, not the replica's: the requests it hits get 503 (with
/// Retry-After), counted as `kind="local"`, and the replica is neither charged with
/// connect errors nor ejected (before, it was: 92 connect errors and the replica ejected
/// from one connection's 128 streams under a limit of 200 descriptors, /healthz 503).
#[test]
fn running_out_of_descriptors_is_not_charged_to_the_replica() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    // The shell lowers both limits, so the proxy cannot raise its soft limit past them.
    let p = Proxy::start_in(
        &["sh", "-c", "ulimit -n 64 && exec \"$0\" \"$@\""],
        // Every stream waits 1.5 s alike, so the adaptive timeout learns a spread of almost
        // nothing; the floor keeps timeouts out of a test of descriptors.
        &[
            "--replica",
            &format!("a={}", a.url()),
            "--eject-after",
            "3",
            "--timeout-floor",
            "10",
        ],
    );
    let addr = p.addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let statuses: Vec<u16> = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .unwrap();
        let driver = tokio::spawn(conn);
        // 100 streams at once, each held 1.5 s by the replica: about 25 descriptors'
        // worth are taken, the rest find none.
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let mut send = send.clone();
                tokio::spawn(async move {
                    let req = hyper::Request::get(format!("http://{addr}/sleep/1500"))
                        .body(http_body_util::Empty::<bytes::Bytes>::new())
                        .unwrap();
                    let r = tokio::time::timeout(Duration::from_secs(15), send.send_request(req))
                        .await
                        .expect("a response within 15 s")
                        .expect("a response");
                    r.status().as_u16()
                })
            })
            .collect();
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.push(t.await.unwrap());
        }
        drop(send);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        statuses
    });
    let served = statuses.iter().filter(|&&s| s == 200).count();
    let short = statuses.iter().filter(|&&s| s == 503).count();
    eprintln!(
        "{served} served, {short} out of descriptors, of {}",
        statuses.len()
    );
    assert!(short > 0, "the limit was reached: {statuses:?}");
    assert_eq!(served + short, statuses.len(), "{statuses:?}");
    // Descriptors are back once the streams end: the page can be asked for.
    let end = Instant::now() + Duration::from_secs(10);
    let page = loop {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nhost: p\r\n\r\n");
        match read_response(&mut BufReader::new(s)) {
            Ok(r) if r.status == 200 => break r.text(),
            _ if Instant::now() < end => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("no metrics page: {other:?}"),
        }
    };
    let value = |line: &str| {
        page.lines()
            .find(|l| l.starts_with(line))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {line} in {page}"))
    };
    assert_eq!(
        value("nowcast_proxy_errors_total{replica=\"a\",kind=\"connect\"}"),
        0.0
    );
    assert_eq!(value("nowcast_proxy_ejections_total{replica=\"a\"}"), 0.0);
    assert_eq!(value("nowcast_proxy_up{replica=\"a\"}"), 1.0);
    assert!(value("nowcast_proxy_errors_total{replica=\"a\",kind=\"local\"}") >= short as f64);
    let hz = request(addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(hz.status, 200, "{}", hz.text());
    let ok = request(addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!((ok.status, ok.text()), (200, "a".to_string()));
}

/// A replica URL with a user and password was taken whole for the host (`user:pw@h:80`):
/// the proxy started and every request failed to connect. It is refused before the proxy
/// listens, naming the replica, without printing the password.
#[test]
fn a_replica_url_with_credentials_is_refused_without_printing_them() {
    let out = common::nowcast(
        &[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--replica",
            "a=http://user:s3cret@127.0.0.1:9",
        ],
        Duration::from_secs(10),
    );
    let err = common::text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--replica a:"), "{err}");
    assert!(err.contains("a user or password"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    assert!(common::text(&out.stdout).is_empty(), "it never listened");
}
