//! `nowcast proxy` on loopback against real upstream HTTP servers (hyper, and a raw socket
//! for the replicas that reset or stall): streaming both ways with keep-alive, services by prefix,
//! sticky units of work, `/healthz`, `/metrics`, `--explain`, the records, adaptive timeouts
//! with retries and ejection, bad input (malformed and oversized heads, a replica that
//! resets or stalls mid-body, a client that stops reading) and a clean shutdown that
//! finishes the requests in flight. Every test bounds its time and stops what it started.

use crate::common;

use common::http::{
    one_shot, read_response, request, resetter, staller, trickler, Proxy, Resp, Upstream,
};
use nowcast_core::record::Record;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn replica(name: &str, u: &Upstream) -> String {
    format!("{name}={}", u.url())
}

/// The `--explain` lines (one JSON object per decision) among a proxy's stderr.
fn decisions(stderr: &str) -> Vec<serde_json::Value> {
    stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Stops the proxy (it must exit with success) and returns what it wrote to stderr.
fn stopped_stderr(p: &mut Proxy) -> String {
    assert!(p
        .terminate(Duration::from_secs(10))
        .expect("exits")
        .success());
    let err = p.stderr.lock().unwrap();
    err.clone()
}

/// The decisions of one service.
fn in_service<'a>(lines: &'a [serde_json::Value], service: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|l| l["service"] == service).collect()
}

/// How many of `decisions` went where they did for `reason`.
fn with_reason(decisions: &[&serde_json::Value], reason: &str) -> usize {
    decisions.iter().filter(|l| l["reason"] == reason).count()
}

#[test]
fn streams_both_ways_with_keep_alive_and_writes_valid_records() {
    let (a, b) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
    );
    let dir = std::env::temp_dir().join(format!("nwp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recs = dir.join("records.ndjson");
    let mut p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--records",
        recs.to_str().unwrap(),
        "--explain",
        "--seed",
        "1",
    ]);
    let s = TcpStream::connect(p.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    // An 8 MiB upload, then a 16 MiB download, then a small GET, on one connection.
    let body = vec![7u8; 8 << 20];
    write!(
        w,
        "POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    w.write_all(&body).unwrap();
    let up = read_response(&mut r).unwrap();
    assert_eq!((up.status, up.text()), (200, format!("read {}", 8 << 20)));
    w.write_all(b"GET /bytes/16777216 HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let down = read_response(&mut r).unwrap();
    assert_eq!(down.status, 200);
    assert_eq!(down.body.len(), 16 << 20);
    assert!(!down.truncated);
    // A chunked upload of unknown length.
    chunked_upload(&mut w);
    let chunked = read_response(&mut r).unwrap();
    assert_eq!(chunked.text(), "read 262144");
    w.write_all(b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let who = read_response(&mut r).unwrap();
    assert!(who.text() == "a" || who.text() == "b", "{}", who.text());
    let h = request(p.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(h.status, 200, "{}", h.text());
    assert!(p.metric("nowcast_proxy_requests_total").unwrap() >= 4.0);
    assert!(p.metric("nowcast_proxy_bandwidth_forecast_mbits{").unwrap() > 0.0);
    drop((w, r));
    let status = p.terminate(Duration::from_secs(10)).expect("exits");
    assert!(status.success());
    let text = std::fs::read_to_string(&recs).unwrap();
    let records: Vec<Record> = text
        .lines()
        .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(records.iter().all(|r| r.source == "nowcast proxy"));
    assert!(records
        .iter()
        .any(|r| r.metric == nowcast_core::record::Metric::BandwidthUp));
    assert!(records
        .iter()
        .any(|r| r.metric == nowcast_core::record::Metric::Rtt));
    // --explain: one JSON line per decision with every replica's view and the reason.
    let err = p.stderr.lock().unwrap().clone();
    let lines = decisions(&err);
    assert!(lines.len() >= 4, "{err}");
    assert!(lines
        .iter()
        .all(|l| l["replicas"].as_array().unwrap().len() == 2 && l["reason"].is_string()));
    // Each forecast names its unit.
    let views: Vec<&serde_json::Value> = lines
        .iter()
        .flat_map(|l| l["replicas"].as_array().unwrap())
        .collect();
    assert!(views
        .iter()
        .all(|v| v.get("bandwidth_mbit").is_some() && v.get("rtt_ms").is_some()));
    let measured = |key: &str| {
        views
            .iter()
            .any(|v| v[key]["value"].as_f64().is_some_and(|x| x > 0.0))
    };
    assert!(measured("bandwidth_mbit") && measured("rtt_ms"), "{err}");
    // The views are those the choice was made on: a replica chosen as the best has the least
    // forecast time (taken after the choice, its time counted the request itself).
    for l in lines.iter().filter(|l| l["reason"] == "best") {
        let time = |v: &serde_json::Value| v["time_ms"].as_f64();
        let reps = l["replicas"].as_array().unwrap();
        let chosen = reps.iter().find(|v| v["replica"] == l["chose"]).unwrap();
        if let Some(t) = time(chosen) {
            assert!(
                reps.iter()
                    .filter(|v| v["health"]["state"] == "up")
                    .all(|v| time(v).is_none_or(|o| t <= o)),
                "{l}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn services_by_prefix_and_sticky_units_of_work() {
    let (a, b, c) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
        Upstream::start("c", "127.0.0.1:0", None),
    );
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--replica",
        &replica("c", &c),
        "--service",
        "/api=a,b",
        "--service",
        "/static=c",
        "--balance",
        "round-robin",
        "--sticky",
        "header:x-unit",
    ]);
    for _ in 0..4 {
        let r = request(p.addr, b"GET /static/x HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(r.text(), "c");
    }
    let no = request(p.addr, b"GET /other HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(no.status, 404);
    assert!(no.text().contains("no service for path /other"));
    // Round robin spreads; one unit of work stays put.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        seen.insert(request(p.addr, b"GET /api/x HTTP/1.1\r\nhost: x\r\n\r\n").text());
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    let first = request(
        p.addr,
        b"GET /api/x HTTP/1.1\r\nhost: x\r\nx-unit: job-9\r\n\r\n",
    )
    .text();
    for _ in 0..10 {
        let r = request(
            p.addr,
            b"GET /api/y HTTP/1.1\r\nhost: x\r\nx-unit: job-9\r\n\r\n",
        );
        assert_eq!(r.text(), first);
    }
    assert!(
        p.metric("nowcast_proxy_choices_total{replica=\"c\",reason=\"round_robin\"}")
            .unwrap()
            >= 4.0
    );
    assert!(p.metrics().contains("reason=\"sticky\"} 10"));
}

#[test]
fn malformed_and_oversized_requests_are_refused_and_others_served() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&["--replica", &replica("a", &a), "--max-header-bytes", "16K"]);
    let bad = request(p.addr, b"NOT A REQUEST\r\n\r\n");
    assert_eq!(bad.status, 400);
    let mut big = b"GET / HTTP/1.1\r\nhost: x\r\nx-big: ".to_vec();
    big.extend(std::iter::repeat_n(b'z', 64 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    let mut s = TcpStream::connect(p.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(&big);
    let resp = read_response(&mut BufReader::new(s)).unwrap();
    assert_eq!(resp.status, 431);
    let bad_len = request(
        p.addr,
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: zz\r\n\r\n",
    );
    assert_eq!(bad_len.status, 400);
    assert_eq!(
        a.requests.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "nothing reached the replica"
    );
    let ok = request(p.addr, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!((ok.status, ok.text()), (200, "a".to_string()));
}

#[test]
fn a_replica_that_resets_mid_body_affects_only_its_own_requests() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let bad = resetter();
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &format!("bad=http://{}", bad.addr),
        "--service",
        "/good=a",
        "--service",
        "/bad=bad",
    ]);
    // A download from the healthy replica runs throughout.
    let addr = p.addr;
    let good = std::thread::spawn(move || {
        request(
            addr,
            b"GET /good/bytes/33554432 HTTP/1.1\r\nhost: x\r\n\r\n",
        )
    });
    for _ in 0..3 {
        let r = request(p.addr, b"GET /bad/x HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(r.status, 200);
        assert!(r.truncated, "the client sees the body cut short");
        assert!(r.body.len() < 1 << 20);
    }
    let g = good.join().unwrap();
    assert_eq!(
        (g.status, g.body.len(), g.truncated),
        (200, 32 << 20, false)
    );
    let resets = p
        .metric("nowcast_proxy_errors_total{replica=\"bad\",kind=\"reset\"}")
        .unwrap();
    assert!(resets >= 3.0, "{resets}");
    let ok = request(p.addr, b"GET /good/who HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(ok.text(), "a");
}

/// A GET of `path` on a new connection: the response as read (the body cut short shows as
/// `truncated`) and how long the client waited for its end.
fn timed_get(addr: std::net::SocketAddr, path: &str) -> (Resp, Duration) {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let r = read_response(&mut BufReader::new(s)).unwrap_or_else(|e| {
        panic!(
            "{path}: no end of the response after {:?}: {e}",
            t0.elapsed()
        )
    });
    (r, t0.elapsed())
}

/// A replica that sends its head and part of its body and then stalls with its connection
/// open: the client's body is cut short once the replica has sent nothing for its adaptive
/// timeout (here the 1 s floor of that rule, over `--timeout-initial 0.5`), not at
/// `--client-idle`'s 120 s; HTTP/2 gets the stream reset; the stall is counted against the
/// replica (`kind="stall"`, ejected and said so), its connection is closed, and the next
/// request of a service it shares goes to the healthy replica. A replica slow but steady (a
/// chunk each 0.3 s for 3 s, three times its limit) is not cut, nor is one whose client
/// reads nothing for 2 s.
#[test]
fn a_replica_that_stalls_mid_body_is_cut_at_its_timeout_counted_and_avoided() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let closed = Arc::new(AtomicU64::new(0));
    let stall = staller(false, closed.clone());
    let stall_chunked = staller(true, closed.clone());
    let slow = trickler(16 * 1024, Duration::from_millis(300), 10);
    let mut p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &format!("stall=http://{}", stall.addr),
        "--replica",
        &format!("stallc=http://{}", stall_chunked.addr),
        "--replica",
        &format!("slow=http://{}", slow.addr),
        "--service",
        "/stall=stall",
        "--service",
        "/stallc=stallc",
        "--service",
        "/both=stall,a",
        "--service",
        "/slow=slow",
        "--service",
        "/good=a",
        "--timeout-floor",
        "0.2",
        "--timeout-initial",
        "0.5",
        "--eject-after",
        "1",
        "--backoff",
        "30",
        "--explain",
    ]);
    let addr = p.addr;
    let steady = std::thread::spawn(move || timed_get(addr, "/slow/x"));
    // A client that reads nothing for longer than the limit holds its replica up: not a stall.
    let paused = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        write!(
            s,
            "GET /good/bytes/{} HTTP/1.1\r\nhost: x\r\n\r\n",
            64 << 20
        )
        .unwrap();
        std::thread::sleep(Duration::from_secs(4));
        read_response(&mut BufReader::new(s)).unwrap()
    });
    let chunked = std::thread::spawn(move || timed_get(addr, "/stallc/x"));
    let (r, took) = timed_get(p.addr, "/stall/x");
    assert_eq!(r.status, 200);
    assert!(r.truncated, "the client sees the body cut short");
    assert_eq!(r.body.len(), 64 * 1024);
    let (rc, took_c) = chunked.join().unwrap();
    assert_eq!(rc.status, 200);
    assert!(
        rc.truncated,
        "no last chunk: the client sees the body cut short"
    );
    assert_eq!(rc.body.len(), 64 * 1024);
    eprintln!("stalled clients waited {took:?} (Content-Length), {took_c:?} (chunked)");
    for t in [took, took_c] {
        assert!(
            t >= Duration::from_millis(2_900) && t < Duration::from_millis(4_500),
            "{t:?}"
        );
    }
    // HTTP/2: the stream is reset, the connection and its other streams go on.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (h2_took, h2_err, other) = rt.block_on(async {
        use http_body_util::BodyExt;
        let (mut send, driver) = h2_from([127, 0, 0, 1], addr).await;
        let t0 = Instant::now();
        let (status, mut body) = h2_head(&mut send, addr, "/stall/h2").await;
        assert_eq!(status, 200);
        let mut got = 0;
        let err = tokio::time::timeout(Duration::from_secs(15), async {
            while let Some(f) = body.frame().await {
                match f {
                    Ok(f) => got += f.data_ref().map_or(0, |d| d.len()),
                    Err(e) => return Some(e.to_string()),
                }
            }
            None
        })
        .await
        .expect("the stream ends");
        let took = t0.elapsed();
        assert!(got < 1 << 20, "{got}");
        let (status, _, who) = h2(&mut send, addr, "GET", "/both/who", None).await;
        assert_eq!(status, 200);
        drop(send);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        (took, err, String::from_utf8_lossy(&who).into_owned())
    });
    // The client's connection closes with its runtime, so that the proxy can stop.
    drop(rt);
    eprintln!("the HTTP/2 stream was reset after {h2_took:?}: {h2_err:?}");
    assert!(
        h2_err.is_some(),
        "the HTTP/2 client sees an error, not an end"
    );
    assert!(
        h2_took >= Duration::from_millis(2_900) && h2_took < Duration::from_millis(4_500),
        "{h2_took:?}"
    );
    assert_eq!(
        other, "a",
        "on the same connection, served by the healthy replica"
    );
    // The stalls are the replicas' failures, their connections closed, not pooled.
    for r in ["stall", "stallc"] {
        let n = p
            .metric(&format!(
                "nowcast_proxy_errors_total{{replica=\"{r}\",kind=\"stall\"}}"
            ))
            .unwrap();
        assert!(n >= 1.0, "{r}: {n}");
        assert_eq!(
            p.metric(&format!("nowcast_proxy_up{{replica=\"{r}\"}}")),
            Some(0.0)
        );
    }
    let until = Instant::now() + Duration::from_secs(2);
    while closed.load(Relaxed) < 3 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(closed.load(Relaxed) >= 3, "{}", closed.load(Relaxed));
    // The next request of the service the staller shares goes to the healthy replica.
    let (ok, _) = timed_get(p.addr, "/both/who");
    assert_eq!((ok.status, ok.text()), (200, "a".to_string()));
    // Slow but steady is whole.
    let (s, took_s) = steady.join().unwrap();
    assert_eq!(
        (s.status, s.body.len(), s.truncated),
        (200, 160 * 1024, false)
    );
    assert!(took_s >= Duration::from_millis(2_500), "{took_s:?}");
    let r = paused.join().unwrap();
    assert_eq!(
        (r.status, r.body.len(), r.truncated),
        (200, 64 << 20, false)
    );
    for r in ["slow", "a"] {
        assert_eq!(
            p.metric(&format!(
                "nowcast_proxy_errors_total{{replica=\"{r}\",kind=\"stall\"}}"
            )),
            Some(0.0)
        );
    }
    let err = stopped_stderr(&mut p);
    assert!(
        err.contains(&format!(
            "replica stall (http://{}) ejected, the last failure: its response stopped \
             mid-body for longer than its timeout",
            stall.addr
        )),
        "{err}"
    );
    let last = decisions(&err)
        .into_iter()
        .rev()
        .find(|d| d["path"] == "/both/who")
        .unwrap();
    assert_eq!(last["chose"], "a");
    let view = |d: &serde_json::Value, r: &str| {
        d["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["replica"] == r)
            .unwrap()["health"]["state"]
            .clone()
    };
    assert_eq!(view(&last, "stall"), "ejected");
}

/// A replica that speaks HTTP/1.0 and closes after each response: the proxy answers its
/// HTTP/1.1 clients in HTTP/1.1 and keeps their connections open (RFC 9110 §6.2: an
/// intermediary sends its own version), rather than passing the replica's 1.0 down, which
/// made every client connection close after one request.
#[test]
fn a_replica_speaking_http_1_0_does_not_close_the_clients_connections() {
    let old = one_shot(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let p = Proxy::start(&["--replica", &format!("old=http://{}", old.addr)]);
    let s = TcpStream::connect(p.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    for i in 0..3 {
        w.write_all(b"GET /x HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let resp = read_response(&mut r).unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(
            (resp.version.as_str(), resp.status, resp.text().as_str()),
            ("HTTP/1.1", 200, "ok"),
            "request {i}"
        );
        let connection = resp.headers.iter().find(|h| h.0 == "connection");
        assert!(
            connection.is_none_or(|c| !c.1.eq_ignore_ascii_case("close")),
            "request {i}: {:?}",
            resp.headers
        );
    }
    // An HTTP/1.0 client still gets HTTP/1.0.
    let mut s = TcpStream::connect(p.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /x HTTP/1.0\r\n\r\n").unwrap();
    let mut head = String::new();
    BufReader::new(s).read_line(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.0 200"), "{head:?}");
}

/// A replica that answers an upload before reading it and closes (Python's `http.server`
/// to a POST: 501, then a reset as the unread body arrives) fails the request at the
/// replica, never "the client's body broke off" (400), and the upload it never read is no
/// bandwidth sample (it had only reached the socket buffers: tens of Gbit/s).
#[test]
fn an_upload_the_replica_answers_early_and_never_reads_is_not_the_clients_fault() {
    let early = one_shot(
        b"HTTP/1.0 501 Unsupported method\r\nContent-Length: 12\r\nConnection: close\r\n\r\nnot here\r\n\r\n",
    );
    let dir = std::env::temp_dir().join(format!("nwp-early-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recs = dir.join("records.ndjson");
    let p = Proxy::start(&[
        "--replica",
        &format!("early=http://{}", early.addr),
        "--records",
        recs.to_str().unwrap(),
    ]);
    // Larger than loopback's socket buffers: the answer comes while the upload goes.
    let body = vec![b'u'; 16 << 20];
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(p.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        // The proxy may answer (and close) before it has read the whole upload.
        let _ = s.write_all(&body);
        statuses.push(read_response(&mut BufReader::new(s)).map_or(0, |r| r.status));
    }
    let client_faults = p
        .metric("nowcast_proxy_errors_total{replica=\"early\",kind=\"client\"}")
        .unwrap_or(0.0);
    let metrics = p.metrics();
    drop(p);
    // The records read and the directory removed before any assertion, pass or fail.
    let text = std::fs::read_to_string(&recs).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        statuses.iter().all(|s| *s == 501 || *s == 502),
        "the replica's answer, or a failed replica: {statuses:?}"
    );
    assert_eq!(client_faults, 0.0, "{metrics}");
    let up: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"bandwidth_up\""))
        .collect();
    assert!(up.is_empty(), "{up:?}");
}

/// A client that cuts its upload short, or sends a malformed chunk, fails its own request
/// only: the replica is neither charged nor ejected, so clients cannot get replicas ejected
/// (and `/healthz` turned to 503) by breaking their own requests.
#[test]
fn uploads_the_client_breaks_off_count_against_the_client_not_the_replica() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let b = Upstream::start("b", "127.0.0.1:0", None);
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--eject-after",
        "2",
    ]);
    for i in 0..12 {
        let mut s = TcpStream::connect(p.addr).unwrap();
        if i % 2 == 0 {
            // Promises 100,000 bytes, sends 10 and goes away.
            s.write_all(
                b"POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n0123456789",
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(30));
        } else {
            // A chunk size that is not hexadecimal.
            s.write_all(
                b"POST /up HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            )
            .unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf);
        }
        drop(s);
    }
    // The proxy has seen every one of them fail.
    let until = Instant::now() + Duration::from_secs(10);
    let client_failures = || {
        ["a", "b"]
            .iter()
            .map(|r| {
                p.metric(&format!(
                    "nowcast_proxy_errors_total{{replica=\"{r}\",kind=\"client\"}}"
                ))
                .unwrap_or(0.0)
            })
            .sum::<f64>()
    };
    while client_failures() < 12.0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(client_failures(), 12.0, "{}", p.metrics());
    for r in ["a", "b"] {
        let ejected = p
            .metric(&format!("nowcast_proxy_ejections_total{{replica=\"{r}\"}}"))
            .unwrap();
        assert_eq!(ejected, 0.0, "{}", p.metrics());
        for kind in ["reset", "timeout"] {
            let n = p
                .metric(&format!(
                    "nowcast_proxy_errors_total{{replica=\"{r}\",kind=\"{kind}\"}}"
                ))
                .unwrap();
            assert_eq!(n, 0.0, "{r} charged with a {kind}: {}", p.metrics());
        }
    }
    let h = request(p.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(h.status, 200, "{}", h.text());
}

#[test]
fn a_client_that_stops_reading_is_cut_off_and_memory_stays_flat() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&["--replica", &replica("a", &a), "--client-idle", "1"]);
    let before = p.rss_kib();
    // Four clients ask for 1 GiB each and never read.
    let stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(p.addr).unwrap();
            s.write_all(b"GET /bytes/1073741824 HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Others are served meanwhile.
    let ok = request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(ok.text(), "a");
    let end = Instant::now() + Duration::from_secs(10);
    while p
        .metric("nowcast_proxy_client_timeouts_total")
        .unwrap_or(0.0)
        < 4.0
    {
        assert!(Instant::now() < end, "stalled clients not cut off");
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = p.rss_kib();
    // Nothing buffered per stalled client beyond the sockets' own buffers.
    assert!(
        after < before + 32 * 1024,
        "RSS {before} KiB -> {after} KiB"
    );
    // Cut off with a reset: closed the ordinary way, each would stay in the kernel with what
    // was queued for it (FIN-WAIT-1) for as long as its client keeps its end open.
    std::thread::sleep(Duration::from_millis(100));
    let ss = std::process::Command::new("ss")
        .args(["-tnH", "state", "fin-wait-1"])
        .arg(format!("( sport = :{} )", p.addr.port()))
        .output()
        .expect("ss");
    let lingering = String::from_utf8_lossy(&ss.stdout);
    assert_eq!(lingering.trim(), "", "closed, not reset");
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        assert!(total < 1 << 30, "the connection was closed before the end");
    }
}

#[test]
fn slow_replicas_time_out_adaptively_retries_stay_in_budget_and_dead_ones_are_ejected() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &format!("dead=http://{dead_addr}"),
        "--timeout-floor",
        "0.2",
        "--timeout-initial",
        "0.4",
        "--timeout-ceiling",
        "1",
        "--backoff",
        "30",
        "--retry-burst",
        "3",
        "--retry-per-sec",
        "0",
    ]);
    // Every GET succeeds: connect failures are retried on the other replica.
    for _ in 0..8 {
        let r = request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!((r.status, r.text()), (200, "a".to_string()));
    }
    assert_eq!(p.metric("nowcast_proxy_up{replica=\"dead\"}"), Some(0.0));
    assert!(
        p.metric("nowcast_proxy_errors_total{replica=\"dead\",kind=\"connect\"}")
            .unwrap()
            >= 1.0
    );
    // a learns fast waits: its adaptive timeout is near the 0.2 s floor. With dead ejected a
    // retry could go nowhere, so a request slower than that waits on, up to the ceiling
    // (1 s here): 0.6 s is answered (it was a 504 after 0.2 s before 2026-12-08), 3 s is cut
    // at the ceiling, not at 3 s.
    for _ in 0..10 {
        request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
    }
    let r = request(p.addr, b"GET /sleep/600 HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 200, "{}", r.text());
    let t0 = Instant::now();
    let r = request(p.addr, b"GET /sleep/3000 HTTP/1.1\r\nhost: x\r\n\r\n");
    let took = t0.elapsed();
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        r.text().contains("no answer within its timeout (1.0 s)"),
        "{}",
        r.text()
    );
    assert!(
        (Duration::from_millis(900)..Duration::from_millis(2_500)).contains(&took),
        "{took:?}"
    );
    assert!(
        p.metric("nowcast_proxy_errors_total{replica=\"a\",kind=\"timeout\"}")
            .unwrap()
            >= 1.0
    );
    // With dead ejected, a request that fails on a has no other replica to go to: it is not
    // sent to a again (each copy would take as long), and spends no retry.
    let retries = p.metric("nowcast_proxy_retries_total").unwrap();
    assert!(retries <= 3.0, "{retries}");
    let r = request(p.addr, b"GET /sleep/3000 HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(!r.text().contains("retried"), "{}", r.text());
    assert_eq!(p.metric("nowcast_proxy_retries_total"), Some(retries));
}

#[test]
fn the_operator_is_told_when_a_replica_goes_down_comes_back_or_refuses_the_probes() {
    // `late` is down at the start and comes up later on the same port; `refuser` answers
    // every request 405 without reading its body, the probes' uploads too.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let refuser = one_shot(b"HTTP/1.0 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n");
    let dir = std::env::temp_dir().join(format!("nwp-told-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recs = dir.join("records.ndjson");
    let mut p = Proxy::start(&[
        "--replica",
        &format!("late=http://127.0.0.1:{port}"),
        "--replica",
        &format!("refuser=http://{}", refuser.addr),
        "--probe-path",
        "/upload",
        "--probe-bytes",
        "256K",
        "--ttl",
        "0.2",
        "--backoff",
        "0.3",
        "--records",
        recs.to_str().unwrap(),
    ]);
    let told = |what: &str| {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if p.stderr.lock().unwrap().contains(what) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("not told {what:?}: {}", p.stderr.lock().unwrap());
    };
    for _ in 0..4 {
        request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
    }
    told("replica late (http://127.0.0.1:");
    told("ejected, the last failure: no connection; tried again in");
    told(&format!(
        "replica refuser (http://{}) answered the probe POST /upload with 405 Method Not Allowed",
        refuser.addr
    ));
    let late = Upstream::start("late", &format!("127.0.0.1:{port}"), None);
    told("replica late (http://127.0.0.1:");
    told(") is back");
    // Served once late is back (by late, 200, or the refuser, whose 405 is its answer).
    for _ in 0..20 {
        let status = request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n").status;
        assert!(status == 200 || status == 405, "{status}");
    }
    let err = stopped_stderr(&mut p);
    drop(late);
    // Told once each, not at every probe or trial.
    assert_eq!(err.matches("answered the probe").count(), 1, "{err}");
    assert_eq!(err.matches("ejected").count(), 1, "{err}");
    // No bandwidth from the refused probes: their uploads were never read.
    let text = std::fs::read_to_string(&recs).unwrap();
    let refused_bw = text
        .lines()
        .map(|l| Record::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .filter(|r| r.to.contains(&refuser.addr.to_string()))
        .filter(|r| r.metric == nowcast_core::record::Metric::BandwidthUp)
        .count();
    assert_eq!(refused_bw, 0, "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shutdown_finishes_the_requests_in_flight() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    // (A timeout above the request's 1.5 s: the probes' quick answers would make it 1 s.)
    let mut p = Proxy::start(&["--replica", &replica("a", &a), "--timeout-floor", "5"]);
    let addr = p.addr;
    let slow =
        std::thread::spawn(move || request(addr, b"GET /sleep/1500 HTTP/1.1\r\nhost: x\r\n\r\n"));
    std::thread::sleep(Duration::from_millis(300));
    let status = p
        .terminate(Duration::from_secs(10))
        .expect("exits within the grace");
    assert!(status.success());
    let r = slow.join().unwrap();
    assert_eq!((r.status, r.text()), (200, "slept".to_string()));
    assert!(TcpStream::connect(addr).is_err(), "no longer listening");
}

/// A request body streamed in 64 KiB frames from one buffer (the client holds it; the proxy
/// must not).
struct Frames {
    data: bytes::Bytes,
    at: usize,
}

impl hyper::body::Body for Frames {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        let at = self.at;
        if at >= self.data.len() {
            return std::task::Poll::Ready(None);
        }
        let end = (at + 64 * 1024).min(self.data.len());
        self.at = end;
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(self.data.slice(at..end)))))
    }
    fn is_end_stream(&self) -> bool {
        self.at >= self.data.len()
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact((self.data.len() - self.at) as u64)
    }
}

type H2Send = hyper::client::conn::http2::SendRequest<
    http_body_util::Either<Frames, http_body_util::Empty<bytes::Bytes>>,
>;

/// One HTTP/2 request on `send`; the status, the headers and the whole body.
async fn h2(
    send: &mut H2Send,
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<bytes::Bytes>,
) -> (u16, hyper::HeaderMap, Vec<u8>) {
    use http_body_util::BodyExt;
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    let body = match body {
        Some(data) => {
            b = b.header("content-length", data.len());
            http_body_util::Either::Left(Frames { data, at: 0 })
        }
        None => http_body_util::Either::Right(http_body_util::Empty::new()),
    };
    send.ready().await.expect("HTTP/2 connection ready");
    let resp = send
        .send_request(b.body(body).unwrap())
        .await
        .expect("HTTP/2 response");
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let (parts, incoming) = resp.into_parts();
    let got = incoming.collect().await.expect("HTTP/2 body").to_bytes();
    (parts.status.as_u16(), parts.headers, got.to_vec())
}

#[test]
fn http2_clients_with_prior_knowledge_stream_both_ways_on_concurrent_streams() {
    let (a, b) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
    );
    let mut p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--seed",
        "3",
        // The slow streams below wait 3 s: above the adaptive timeout's default floor.
        "--timeout-floor",
        "20",
    ]);
    let addr = p.addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let metrics_addr = addr;
    let pid = p.child.id();
    let counts = [a.requests.clone(), b.requests.clone()];
    use std::sync::atomic::Ordering::Relaxed;
    // HTTP/1.1 on the same port as HTTP/2.
    let r = request(
        p.addr,
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    rt.block_on(async move {
        tokio::time::timeout(Duration::from_secs(60), async move {
            let (mut send, driver) = h2_from([127, 0, 0, 1], addr).await;
            // A 24 MiB upload streamed in 64 KiB frames: the replica hashes what it reads.
            let mut data = vec![0u8; 24 << 20];
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for c in data.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
            }
            let want = blake3::hash(&data).to_hex().to_string();
            let (status, headers, body) = h2(
                &mut send,
                addr,
                "POST",
                "/up",
                Some(bytes::Bytes::from(data)),
            )
            .await;
            assert_eq!(status, 200);
            assert_eq!(String::from_utf8_lossy(&body), format!("read {}", 24 << 20));
            assert_eq!(headers.get("x-blake3").unwrap().to_str().unwrap(), want);
            // A head over --max-header-bytes (32 KiB) is refused (431) on its stream only;
            // the connection goes on.
            let big = hyper::Request::builder()
                .uri(format!("http://{addr}/big"))
                .header("x-big", "b".repeat(40 << 10))
                .body(http_body_util::Either::Right(http_body_util::Empty::new()))
                .unwrap();
            let before = counts.iter().map(|c| c.load(Relaxed)).sum::<u64>();
            send.ready().await.unwrap();
            let refused = send
                .send_request(big)
                .await
                .expect("a response, not a reset");
            assert_eq!(refused.status(), 431);
            let after = counts.iter().map(|c| c.load(Relaxed)).sum::<u64>();
            assert_eq!(before, after, "nothing reached a replica");
            // A 32 MiB download back on the same connection, intact.
            let (status, _, body) = h2(&mut send, addr, "GET", "/bytes/33554432", None).await;
            assert_eq!(status, 200);
            assert_eq!(body.len(), 32 << 20);
            assert!(body.iter().all(|&c| c == b'a'));
            // Eight concurrent streams on the one connection: six slow ones held open by the
            // replicas while two downloads and an upload go through; the proxy counts all
            // six in flight at once over one client connection besides the metrics' own.
            let mut tasks = Vec::new();
            for _ in 0..6 {
                let mut s = send.clone();
                tasks.push(tokio::spawn(async move {
                    h2(&mut s, addr, "GET", "/sleep/3000", None).await
                }));
            }
            let mut seen = (0.0, 0.0);
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until {
                let m = tokio::task::spawn_blocking(move || {
                    request(
                        metrics_addr,
                        b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
                    )
                    .text()
                })
                .await
                .unwrap();
                let val = |name: &str| {
                    m.lines()
                        .find(|l| l.starts_with(name))
                        .and_then(|l| l.split_whitespace().last())
                        .and_then(|v| v.parse::<f64>().ok())
                        .unwrap_or(0.0)
                };
                seen = (
                    val("nowcast_proxy_requests_in_flight"),
                    val("nowcast_proxy_connections_open"),
                );
                if seen.0 >= 6.0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(seen.0 >= 6.0, "in flight at once: {seen:?}");
            assert_eq!(
                seen.1, 2.0,
                "one HTTP/2 connection plus the metrics request"
            );
            for _ in 0..2 {
                let mut s = send.clone();
                tasks.push(tokio::spawn(async move {
                    h2(&mut s, addr, "GET", "/bytes/1048576", None).await
                }));
            }
            let mut s = send.clone();
            tasks.push(tokio::spawn(async move {
                h2(
                    &mut s,
                    addr,
                    "POST",
                    "/x",
                    Some(bytes::Bytes::from(vec![1u8; 3 << 20])),
                )
                .await
            }));
            let mut bodies = Vec::new();
            for t in tasks {
                let (status, _, body) = t.await.unwrap();
                assert_eq!(status, 200);
                bodies.push(body);
            }
            assert!(bodies[..6].iter().all(|b| b == b"slept"));
            assert!(bodies[6..8].iter().all(|b| b.len() == 1 << 20));
            assert_eq!(bodies[8], format!("read {}", 3 << 20).into_bytes());
            // SIGTERM while a stream is in flight: it is finished, then the proxy exits.
            let mut s = send.clone();
            let last =
                tokio::spawn(async move { h2(&mut s, addr, "GET", "/sleep/1500", None).await });
            let until = Instant::now() + Duration::from_secs(20);
            while h2_in_flight(addr).await < 1.0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let killed = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
            let (status, _, body) = last.await.unwrap();
            assert_eq!((status, body.as_slice()), (200, &b"slept"[..]));
            drop(send);
            let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        })
        .await
        .expect("the HTTP/2 exchange within 60 s");
    });
    let st = p.terminate(Duration::from_secs(10)).expect("exits");
    assert!(st.success(), "{}", p.stderr.lock().unwrap());
}

/// The proxy's requests in flight, from /metrics over HTTP/1.1.
async fn h2_in_flight(addr: std::net::SocketAddr) -> f64 {
    let m = tokio::task::spawn_blocking(move || {
        request(
            addr,
            b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .text()
    })
    .await
    .unwrap();
    m.lines()
        .find(|l| l.starts_with("nowcast_proxy_requests_in_flight"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_config_file_gives_services_replicas_and_settings() {
    let (a, b, c) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
        Upstream::start("c", "127.0.0.1:0", None),
    );
    let dir = std::env::temp_dir().join(format!("nwp-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The commented example, run as it is but for its replicas' addresses (loopback here).
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/proxy.toml"))
            .unwrap()
            .replace("http://10.0.1.2:8080", &a.url())
            .replace("http://10.0.2.2:8080", &b.url())
            .replace("http://10.0.3.2:8080", &c.url());
    let ex = dir.join("example.toml");
    std::fs::write(&ex, example).unwrap();
    let p = Proxy::start(&["--config", ex.to_str().unwrap(), "--seed", "5"]);
    // The example's sticky key holds a unit of work on one replica of /upload.
    let first = request(
        p.addr,
        b"GET /upload/x HTTP/1.1\r\nhost: x\r\nx-unit: j1\r\n\r\n",
    )
    .text();
    assert!(first == "a" || first == "b", "{first}");
    for _ in 0..5 {
        let r = request(
            p.addr,
            b"GET /upload/y HTTP/1.1\r\nhost: x\r\nx-unit: j1\r\n\r\n",
        );
        assert_eq!(r.text(), first);
    }
    let r = request(p.addr, b"GET /z HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 200);
    let m = p.metrics();
    for name in ["s1", "s2", "s3"] {
        assert!(m.contains(&format!("replica=\"{name}\"")), "{name} in {m}");
    }
    drop(p);

    // A file of its own: round-robin from the file, a replica shared by two services.
    let cfg = dir.join("proxy.toml");
    std::fs::write(
        &cfg,
        format!(
            "balance = \"round-robin\"\n\
             [[service]]\nprefix = \"/api\"\nreplicas = [{{ name = \"a\", url = \"{}\" }}, {{ name = \"b\", url = \"{}\" }}]\n\
             [[service]]\nprefix = \"/static\"\nreplicas = [{{ name = \"b\", url = \"{}\" }}]\n",
            a.url(),
            b.url(),
            b.url()
        ),
    )
    .unwrap();
    let p = Proxy::start(&["--config", cfg.to_str().unwrap()]);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        seen.insert(request(p.addr, b"GET /api/x HTTP/1.1\r\nhost: x\r\n\r\n").text());
    }
    assert_eq!(seen.len(), 2, "round-robin from the file: {seen:?}");
    for _ in 0..3 {
        let r = request(p.addr, b"GET /static/x HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(r.text(), "b");
    }
    assert_eq!(
        request(p.addr, b"GET /x HTTP/1.1\r\nhost: x\r\n\r\n").status,
        404
    );
    drop(p);

    // Bad files: the proxy does not start, and says which file, where and what.
    let run = |args: &[&str]| {
        let out = std::process::Command::new(common::BIN)
            .arg("proxy")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "ttl = 1.0\nepsilon = 2.0\n[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\", url = \"http://127.0.0.1:9\" }]\n",
    )
    .unwrap();
    let e = run(&["--config", bad.to_str().unwrap()]);
    assert!(
        e.contains(&format!(
            "--config {}: line 2, column 11: `epsilon`: 2 is not within 0..1",
            bad.display()
        )),
        "{e}"
    );
    std::fs::write(
        &bad,
        "[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\", url = 9 }]\n",
    )
    .unwrap();
    let e = run(&["--config", bad.to_str().unwrap()]);
    assert!(
        e.contains(&bad.display().to_string()) && e.contains("line 3") && e.contains("url"),
        "{e}"
    );
    // Flags and the file are not mixed.
    let e = run(&["--config", cfg.to_str().unwrap(), "--balance", "bandwidth"]);
    assert!(
        e.contains("'--config <FILE>' cannot be used with '--balance"),
        "{e}"
    );
    let e = run(&["--config", dir.join("none.toml").to_str().unwrap()]);
    assert!(e.contains("none.toml: cannot read it"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn services_on_the_command_line_choose_with_settings_of_their_own() {
    let (a, b) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
    );
    // As the config file's test: the flags' ε = 0.5 (fresh alternates too) is /wild's, which
    // takes the bandwidth rule; /calm never explores and keeps units of work on their replica.
    let mut p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--service",
        "/calm=a,b;epsilon=0;sticky=header:x-unit",
        "--service",
        "/wild=a,b;balance=bandwidth",
        "--epsilon",
        "0.5",
        "--explore-fresh",
        "--ttl",
        "30",
        "--explain",
        "--seed",
        "9",
    ]);
    for _ in 0..20 {
        for path in ["/calm/u", "/wild/u"] {
            let raw = format!("GET {path} HTTP/1.1\r\nhost: x\r\nx-unit: j1\r\n\r\n");
            assert_eq!(request(p.addr, raw.as_bytes()).status, 200);
        }
    }
    let err = stopped_stderr(&mut p);
    let lines = decisions(&err);
    let of = |service: &str| in_service(&lines, service);
    let (calm, wild) = (of("/calm"), of("/wild"));
    assert_eq!((calm.len(), wild.len()), (20, 20), "{err}");
    assert!(calm.iter().all(|l| l["balance"] == "completion"));
    assert!(wild.iter().all(|l| l["balance"] == "bandwidth"));
    assert_eq!(with_reason(&calm, "explore"), 0, "{err}");
    assert_eq!(with_reason(&calm, "sticky"), 19, "{err}");
    assert_eq!(
        with_reason(&wild, "sticky"),
        0,
        "no --sticky: no unit of work: {err}"
    );
    // A bad setting is refused before the proxy listens, naming the flag and the pair.
    let out = std::process::Command::new(common::BIN)
        .args(["proxy", "--listen", "127.0.0.1:0", "--replica"])
        .arg(replica("a", &a))
        .args(["--service", "/x=a;ttl=2;epsilon=3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(
            "--service '/x=a;ttl=2;epsilon=3': 'epsilon=3': `epsilon`: 3 is not within 0..1"
        ),
        "{e}"
    );
}

#[test]
fn services_in_a_config_file_choose_with_settings_of_their_own() {
    let (a, b) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
    );
    let dir = std::env::temp_dir().join(format!("nwp-services-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let reps = format!(
        "replicas = [{{ name = \"a\", url = \"{}\" }}, {{ name = \"b\", url = \"{}\" }}]\n",
        a.url(),
        b.url()
    );
    // The top level explores half of the requests, fresh alternates too; /calm never
    // explores and keeps units of work on their replica; /wild takes the bandwidth rule
    // and the top level's exploration, and has no unit of work.
    let cfg = dir.join("proxy.toml");
    std::fs::write(
        &cfg,
        format!(
            "epsilon = 0.5\nexplore_fresh = true\nttl = 30.0\n\
             [[service]]\nprefix = \"/calm\"\nepsilon = 0.0\nsticky = \"header:x-unit\"\n{reps}\
             [[service]]\nprefix = \"/wild\"\nbalance = \"bandwidth\"\n{reps}"
        ),
    )
    .unwrap();
    let mut p = Proxy::start(&[
        "--config",
        cfg.to_str().unwrap(),
        "--explain",
        "--seed",
        "9",
    ]);
    for _ in 0..40 {
        for path in ["/calm/x", "/wild/x"] {
            let r = request(
                p.addr,
                format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes(),
            );
            assert_eq!(r.status, 200, "{path}: {}", r.text());
        }
    }
    for _ in 0..5 {
        for path in ["/calm/u", "/wild/u"] {
            let raw = format!("GET {path} HTTP/1.1\r\nhost: x\r\nx-unit: j1\r\n\r\n");
            assert_eq!(request(p.addr, raw.as_bytes()).status, 200);
        }
    }
    let err = stopped_stderr(&mut p);
    let lines = decisions(&err);
    let of = |service: &str| in_service(&lines, service);
    let (calm, wild) = (of("/calm"), of("/wild"));
    assert_eq!((calm.len(), wild.len()), (45, 45), "{err}");
    assert!(calm.iter().all(|l| l["balance"] == "completion"));
    assert!(wild.iter().all(|l| l["balance"] == "bandwidth"));
    // ε = 0 in /calm: never an exploration; the top level's ε = 0.5 in /wild: about half.
    assert_eq!(with_reason(&calm, "explore"), 0, "{err}");
    let explored = with_reason(&wild, "explore");
    assert!(
        (8..=35).contains(&explored),
        "/wild explored {explored} of 45"
    );
    // The unit of work is /calm's only: its 4 requests after the first stay put.
    assert_eq!(with_reason(&calm, "sticky"), 4);
    assert_eq!(with_reason(&wild, "sticky"), 0);
    let calm_units: std::collections::HashSet<&str> = calm
        .iter()
        .rev()
        .take(5)
        .map(|l| l["chose"].as_str().unwrap())
        .collect();
    assert_eq!(calm_units.len(), 1, "one replica for the unit of work");

    // A key a service cannot have, misspelt or not, is refused with the file and its line;
    // so are services that share a replica and disagree on what it keeps.
    let run = |text: &str| {
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, text).unwrap();
        let out = std::process::Command::new(common::BIN)
            .args(["proxy", "--listen", "127.0.0.1:0", "--config"])
            .arg(&bad)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(e.contains(&format!("--config {}: ", bad.display())), "{e}");
        e
    };
    let one = format!("[[service]]\nprefix = \"/\"\n{reps}");
    let e = run(&format!("{one}epsilom = 0.1\n"));
    assert!(e.contains("line 4") && e.contains("epsilom"), "{e}");
    let e = run(&format!("{one}grace = 1.0\n"));
    assert!(
        e.contains("line 4") && e.contains("unknown field `grace`"),
        "{e}"
    );
    let e = run(&format!("{one}[service.timeout]\nfloor = -1.0\n"));
    assert!(
        e.contains("line 5, column 9: `service.timeout.floor`: -1 must be above 0"),
        "{e}"
    );
    let e = run(&format!(
        "[[service]]\nprefix = \"/x\"\nttl = 2.0\n{reps}[[service]]\nprefix = \"/y\"\n{reps}"
    ));
    assert!(
        e.contains("replica 'a' is in services '/x' and '/y', whose ttl differ"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_http2_client_that_stops_reading_its_streams_is_cut_off_and_memory_stays_flat() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&["--replica", &replica("a", &a), "--client-idle", "1"]);
    let addr = p.addr;
    let before = p.rss_kib();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (during, cut, idle_cut) = rt.block_on(async {
        let (mut send, driver) = h2_from([127, 0, 0, 1], addr).await;
        // Eight streams of 1 GiB each, whose bodies are never read: HTTP/2's flow control
        // stops the proxy, which stops reading the replica.
        let mut held = Vec::new();
        for _ in 0..8 {
            let (status, body) = tokio::time::timeout(
                Duration::from_secs(10),
                h2_head(&mut send, addr, "/bytes/1073741824"),
            )
            .await
            .expect("a response head");
            assert_eq!(status, 200);
            held.push(body);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Memory while the eight streams are stalled.
        let during = p.rss_kib();
        tokio::task::spawn_blocking(move || {
            // Others are served meanwhile.
            let ok = request(addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
            assert_eq!(ok.text(), "a");
        })
        .await
        .unwrap();
        // The connection moves nothing: cut off after --client-idle; the bodies end early.
        let mut cut = 0;
        for mut b in held {
            use http_body_util::BodyExt;
            let mut total = 0u64;
            let r = tokio::time::timeout(Duration::from_secs(20), async {
                while let Some(f) = b.frame().await {
                    match f {
                        Ok(f) => total += f.data_ref().map_or(0, |d| d.len() as u64),
                        Err(_) => return false,
                    }
                }
                true
            })
            .await
            .expect("the stream ends within 20 s");
            if !r && total < 1 << 30 {
                cut += 1;
            }
        }
        // The connection is cut as idle, counted. Asked while the client still holds it
        // open: once it lets go (below), the proxy sees a close, not an idle connection, and
        // on a loaded machine that close could come first.
        // (Blocking this runtime's one thread meanwhile: the client has nothing to do.)
        let idle_cut = metrics_until(&p, Duration::from_secs(10), |v| {
            v("nowcast_proxy_client_timeouts_total") >= 1.0
        });
        drop(send);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        (during, cut, idle_cut)
    });
    assert_eq!(cut, 8, "every stalled stream was cut before its end");
    assert!(
        idle_cut
            .lines()
            .any(|l| l.starts_with("nowcast_proxy_client_timeouts_total") && !l.ends_with(" 0")),
        "{idle_cut}"
    );
    let after = p.rss_kib();
    eprintln!("RSS {before} KiB, {during} KiB stalled, {after} KiB after");
    // Nothing buffered per stalled stream beyond HTTP/2's windows and the sockets' buffers.
    for rss in [during, after] {
        assert!(
            rss < before + 32 * 1024,
            "RSS {before} KiB -> {during} KiB stalled -> {after} KiB"
        );
    }
}

/// One HTTP/2 GET on `send`: the status and the body, not read.
async fn h2_head(
    send: &mut H2Send,
    addr: std::net::SocketAddr,
    path: &str,
) -> (u16, hyper::body::Incoming) {
    let req = hyper::Request::builder()
        .uri(format!("http://{addr}{path}"))
        .body(http_body_util::Either::Right(http_body_util::Empty::new()))
        .unwrap();
    send.ready().await.unwrap();
    let resp = send.send_request(req).await.unwrap();
    (resp.status().as_u16(), resp.into_body())
}

#[test]
fn a_client_that_dribbles_its_head_or_the_http2_preface_is_cut_at_the_head_timeout() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--head-timeout",
        "1",
        "--client-idle",
        "60",
    ]);
    // Each byte comes before --client-idle; the whole head takes 4 s, over --head-timeout.
    for head in [
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
        &b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n"[..],
    ] {
        let mut s = TcpStream::connect(p.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let gap = Duration::from_millis(4000 / head.len() as u64);
        for &b in head {
            if s.write_all(&[b]).is_err() {
                break;
            }
            std::thread::sleep(gap);
        }
        // Served, the proxy would answer (HTTP/2 SETTINGS, or the replica's name); cut, the
        // stream ends without a byte.
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "answered {:?}", String::from_utf8_lossy(&buf[..n]));
    }
    // The preface is cut by the proxy's own deadline (counted); the HTTP/1.1 head by
    // hyper's header read timeout or that deadline, whichever fires first.
    assert!(
        p.metric("nowcast_proxy_client_timeouts_total")
            .unwrap_or(0.0)
            >= 1.0
    );
    // Clients that send their head at once are served, over HTTP/1.1 and HTTP/2.
    let r = request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.text(), "a");
    let addr = p.addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut send, driver) = h2_from([127, 0, 0, 1], addr).await;
        for _ in 0..3 {
            let (status, _, body) = tokio::time::timeout(
                Duration::from_secs(10),
                h2(&mut send, addr, "GET", "/who", None),
            )
            .await
            .unwrap();
            assert_eq!((status, body.as_slice()), (200, &b"a"[..]));
            // Later requests on the connection are not held to the first head's deadline.
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        drop(send);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
    });
}

#[test]
fn each_request_is_timed_for_what_requests_like_it_moved_not_for_the_last_upload() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let mut p = Proxy::start(&["--replica", &replica("a", &a), "--explain", "--seed", "3"]);
    let get = |path: &str| {
        let raw = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        let r = request(p.addr, raw.as_bytes());
        assert_eq!(r.status, 200);
        r
    };
    // Each request completes before the next is sent: what it moved is known by then.
    assert_eq!(get("/hello.txt").text(), "a");
    let body = vec![5u8; 20_000_000];
    let s = TcpStream::connect(p.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    write!(
        w,
        "POST /hello.txt HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    w.write_all(&body).unwrap();
    assert_eq!(read_response(&mut r).unwrap().text(), "read 20000000");
    for _ in 0..3 {
        assert_eq!(get("/hello.txt").text(), "a");
    }
    for _ in 0..2 {
        assert_eq!(get("/bytes/2097152").body.len(), 2 << 20);
    }
    // Uploads of unknown length (chunked), 256 KiB each.
    for _ in 0..2 {
        chunked_upload(&mut w);
        assert_eq!(read_response(&mut r).unwrap().text(), "read 262144");
    }
    drop((w, r));
    let err = stopped_stderr(&mut p);
    let lines = decisions(&err);
    let size = |l: &serde_json::Value| {
        (
            l["size_bytes"].as_f64().unwrap(),
            l["size_from"].as_str().unwrap().to_string(),
            l["request_bytes"].as_u64(),
        )
    };
    let sized: Vec<_> = lines.iter().map(size).collect();
    assert_eq!(sized.len(), 9, "{err}");
    // Nothing known: a GET is timed for the assumed size (64 KiB).
    assert_eq!(sized[0], (65_536.0, "default".into(), Some(0)), "{err}");
    // The upload: its own length, plus the service's mean response (1 byte) for the rest.
    assert_eq!(
        sized[1],
        (20_000_001.0, "service".into(), Some(20_000_000)),
        "{err}"
    );
    // The GETs after it: what GETs of /hello.txt moved (1 byte), not the upload's 20 MB.
    for (i, l) in lines[2..5].iter().enumerate() {
        assert_eq!(size(l), (1.0, "method_path".into(), Some(0)), "{err}");
        assert_eq!(l["size_samples"].as_u64(), Some(i as u64 + 1), "{err}");
    }
    // A path not seen yet: the service's mean response; then what it returned.
    assert_eq!(sized[5].1, "service", "{err}");
    assert!(sized[5].0 < 100.0, "{err}");
    assert_eq!(sized[6], ((2 << 20) as f64, "method_path".into(), Some(0)));
    // A chunked upload: no length; the second is timed for what the first moved both ways.
    assert_eq!(
        (sized[7].1.as_str(), sized[7].2),
        ("service", None),
        "{err}"
    );
    assert_eq!(
        sized[8],
        (
            (262_144 + "read 262144".len()) as f64,
            "method_path".into(),
            None
        ),
        "{err}"
    );
}

#[test]
fn bad_flags_are_refused_naming_the_flag_the_replica_and_the_fix() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(common::BIN)
            .args(["proxy", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--replica", "a=127.0.0.1:28081"]);
    assert!(
        e.contains("--replica a: '127.0.0.1:28081' has no scheme; write http://127.0.0.1:28081"),
        "{e}"
    );
    let e = run(&["--replica", "a=https://127.0.0.1:28081"]);
    assert!(e.contains("does not speak TLS upstream"), "{e}");
    // Usage errors all exit with 2, naming the flag.
    let usage = |args: &[&str], says: &str| {
        let out = std::process::Command::new(common::BIN)
            .args([
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--replica",
                "a=http://127.0.0.1:9",
            ])
            .args(args)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
    };
    usage(&["--sticky", "foo"], "--sticky 'foo': expected header:NAME");
    usage(
        &["--max-connections", "0"],
        "--max-connections: 0 would accept no client",
    );
    usage(
        &["--probe-path", "nohash"],
        "--probe-path: 'nohash' must start with /",
    );
    usage(&["--epsilon", "2"], "--epsilon: 2 is not within 0..1");
    let e = run(&["--replica", "a=http://127.0.0.1:9", "--epsilon", "2"]);
    assert!(e.contains("--epsilon: 2 is not within 0..1"), "{e}");
    let e = run(&[
        "--replica",
        "a=http://127.0.0.1:9",
        "--replica",
        "a=http://127.0.0.1:10",
    ]);
    assert!(
        e.contains("the name 'a' is already given to --replica 'a=http://127.0.0.1:9'"),
        "{e}"
    );
    // In a file: the line, the key and the fix.
    let dir = std::env::temp_dir().join(format!("nwp-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\", url = \"127.0.0.1:9\" }]\n",
    )
    .unwrap();
    let e = run(&["--config", bad.to_str().unwrap()]);
    assert!(
        e.contains("line 3")
            && e.contains(
                "`service.replicas.url`: '127.0.0.1:9' has no scheme; write http://127.0.0.1:9"
            ),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `POST /up` of 256 KiB in four chunks of 64 KiB, its length unknown to the proxy.
fn chunked_upload(w: &mut impl Write) {
    w.write_all(b"POST /up HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n")
        .unwrap();
    for _ in 0..4 {
        write!(w, "10000\r\n").unwrap();
        w.write_all(&vec![1u8; 0x10000]).unwrap();
        w.write_all(b"\r\n").unwrap();
    }
    w.write_all(b"0\r\n\r\n").unwrap();
}

/// A connection to `to` from the loopback address `from` (127.0.0.x): a client of its own
/// as the proxy counts them.
fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> TcpStream {
    try_connect_from(from, to).unwrap()
}

/// The same, or the error of a connection the proxy reset before `connect` returned.
fn try_connect_from(from: [u8; 4], to: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&std::net::SocketAddr::from((from, 0)).into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(5))?;
    Ok(s.into())
}

/// `raw` on a new connection from `from`, and its response; `None` when none came within
/// `limit`.
fn request_from(
    from: [u8; 4],
    to: std::net::SocketAddr,
    raw: &[u8],
    limit: Duration,
) -> Option<Resp> {
    let mut s = connect_from(from, to);
    s.set_read_timeout(Some(limit)).unwrap();
    s.write_all(raw).ok()?;
    read_response(&mut BufReader::new(s)).ok()
}

/// An HTTP/2 connection of hyper's client from the loopback address `from`.
async fn h2_from(
    from: [u8; 4],
    to: std::net::SocketAddr,
) -> (H2Send, tokio::task::JoinHandle<hyper::Result<()>>) {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    let tcp = sock.connect(to).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("HTTP/2 handshake with prior knowledge");
    (send, tokio::spawn(conn))
}

/// Waits (at most `limit`) until `ok` holds of the proxy's metrics page; the page last read.
fn metrics_until(p: &Proxy, limit: Duration, ok: impl Fn(&dyn Fn(&str) -> f64) -> bool) -> String {
    let end = Instant::now() + limit;
    loop {
        let m = p.metrics();
        let val = |name: &str| {
            m.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        if ok(&val) || Instant::now() >= end {
            return m;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

const REFUSED_PER_CLIENT: &str = "nowcast_proxy_connections_refused_total{reason=\"per_client\"}";

/// One client address cannot take every connection of the proxy: past
/// `--max-connections-per-client` its connections are closed at accept (counted), while
/// other clients, over HTTP/1.1 and HTTP/2, are served and `/healthz` stays 200. Without the
/// cap the same client locks every other one out, which is what the cap is for.
/// The address of a client that speaks HTTP/2 beside those the tests single out.
const OTHER_H2: [u8; 4] = [127, 0, 0, 3];

/// `n` requests to `/who` over one HTTP/2 connection from [`OTHER_H2`], each answered by
/// replica `a`, within 10 s.
fn served_over_h2(addr: std::net::SocketAddr, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (mut send, driver) = h2_from(OTHER_H2, addr).await;
            for _ in 0..n {
                let (status, _, body) = h2(&mut send, addr, "GET", "/who", None).await;
                assert_eq!((status, body.as_slice()), (200, &b"a"[..]));
            }
            drop(send);
            let _ = driver.await;
        })
        .await
        .expect("HTTP/2 served within 10 s");
    });
}

#[test]
fn one_client_over_its_connection_cap_does_not_lock_the_others_out() {
    const HOG: [u8; 4] = [127, 0, 0, 2];
    const ME: [u8; 4] = [127, 0, 0, 1];
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let start = |per_client: &str| {
        Proxy::start(&[
            "--replica",
            &replica("a", &a),
            "--max-connections",
            "16",
            "--max-connections-per-client",
            per_client,
            // The hog's idle connections are held for the whole test (it could renew them).
            "--head-timeout",
            "30",
        ])
    };
    let who = b"GET /who HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";

    // No per-client cap: the hog's 16 idle connections fill the proxy, and another client's
    // request is not even accepted.
    let p = start("0");
    let hog: Vec<TcpStream> = (0..16).map(|_| connect_from(HOG, p.addr)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let locked_out = request_from(ME, p.addr, who, Duration::from_millis(1500));
    assert!(
        locked_out.is_none(),
        "served without the cap: {locked_out:?}"
    );
    drop(hog);
    drop(p);

    // A cap of 4 per client: the hog gets 4 of its 16, the other 12 are reset at accept
    // (the reset may come before `connect` returns).
    let p = start("4");
    let hog: Vec<TcpStream> = (0..16)
        .filter_map(|_| try_connect_from(HOG, p.addr).ok())
        .collect();
    let m = metrics_until(&p, Duration::from_secs(5), |v| {
        v(REFUSED_PER_CLIENT) >= 12.0
    });
    assert!(m.contains(&format!("{REFUSED_PER_CLIENT} 12")), "{m}");
    let mut open = 0;
    for s in &hog {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 16];
        match (&*s).read(&mut buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                open += 1
            }
            Ok(0) | Err(_) => {}
            Ok(n) => panic!("a refused connection got {n} bytes"),
        }
    }
    assert_eq!(open, 4, "the hog's connections left open");
    // Everyone else is served, over HTTP/1.1 and HTTP/2, and the proxy says it is healthy.
    let t0 = Instant::now();
    let r = request_from(ME, p.addr, who, Duration::from_secs(5)).expect("served");
    assert_eq!((r.status, r.text()), (200, "a".to_string()));
    let h = request(p.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(h.status, 200, "{}", h.text());
    served_over_h2(p.addr, 3);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // Still over its cap, the hog is refused again; each refusal counted.
    let more: Vec<TcpStream> = (0..4)
        .filter_map(|_| try_connect_from(HOG, p.addr).ok())
        .collect();
    let m = metrics_until(&p, Duration::from_secs(5), |v| {
        v(REFUSED_PER_CLIENT) >= 16.0
    });
    assert!(m.contains(&format!("{REFUSED_PER_CLIENT} 16")), "{m}");
    // Once it closes them, it is forgotten (the table holds clients with a connection
    // open) and served like anyone.
    drop((hog, more));
    let m = metrics_until(&p, Duration::from_secs(5), |v| {
        v("nowcast_proxy_clients_open") == 1.0 && v("nowcast_proxy_connections_open") == 1.0
    });
    assert!(
        m.contains("nowcast_proxy_clients_open 1\n")
            && m.contains("nowcast_proxy_connections_open 1\n"),
        "only the metrics request's own: {m}"
    );
    let r = request_from(HOG, p.addr, who, Duration::from_secs(5)).expect("served");
    assert_eq!(r.text(), "a");
}

/// An HTTP/2 client writing its frames by hand (what hyper's client never sends), from a
/// loopback address of its own. Frames: (type, flags, stream, payload).
struct RawH2 {
    w: TcpStream,
    r: BufReader<TcpStream>,
    /// The proxy's SETTINGS: (identifier, value).
    settings: Vec<(u16, u32)>,
}

type H2Frame = (u8, u8, u32, Vec<u8>);

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HEADERS of `GET path` with END_STREAM and END_HEADERS (HPACK: :method GET, :scheme http
/// from the static table; :path and :authority literal, not indexed).
fn h2_get(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 1, b'x']);
    h2_frame(0x1, 0x5, stream, &block)
}

/// RST_STREAM(CANCEL).
fn h2_cancel(stream: u32) -> Vec<u8> {
    h2_frame(0x3, 0, stream, &8u32.to_be_bytes())
}

impl RawH2 {
    fn connect(from: [u8; 4], to: std::net::SocketAddr) -> RawH2 {
        let mut w = connect_from(from, to);
        w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(h2_frame(0x4, 0, 0, &[]));
        w.write_all(&hello).unwrap();
        let mut h = RawH2 {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
            settings: Vec::new(),
        };
        loop {
            let (kind, flags, _, payload) = h.frame().expect("the proxy's SETTINGS");
            if kind == 0x4 && flags & 1 == 0 {
                h.settings = payload
                    .chunks_exact(6)
                    .map(|c| {
                        (
                            u16::from_be_bytes([c[0], c[1]]),
                            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                        )
                    })
                    .collect();
                break;
            }
        }
        h.send(&h2_frame(0x4, 0x1, 0, &[]));
        h
    }

    fn setting(&self, id: u16) -> Option<u32> {
        self.settings.iter().find(|s| s.0 == id).map(|s| s.1)
    }

    fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }

    /// The next frame; `None` once the connection is closed (or nothing came for 10 s).
    fn frame(&mut self) -> Option<H2Frame> {
        let mut head = [0u8; 9];
        self.r.read_exact(&mut head).ok()?;
        let n = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; n];
        self.r.read_exact(&mut payload).ok()?;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        Some((head[3], head[4], stream, payload))
    }
}

/// HTTP/2's own limits against a client that writes its frames by hand: more streams at
/// once than SETTINGS_MAX_CONCURRENT_STREAMS (the excess refused with REFUSED_STREAM, never
/// sent to a replica), then a rapid-reset burst (CVE-2023-44487: a thousand streams opened
/// and cancelled at once, answered with GOAWAY(ENHANCE_YOUR_CALM)). Other clients are served
/// throughout, and the proxy's connections, requests in flight and memory come back to where
/// they were.
#[test]
fn http2_clients_over_the_stream_limit_or_resetting_in_bursts_affect_no_one_else() {
    const ATTACKER: [u8; 4] = [127, 0, 0, 2];
    use std::sync::atomic::Ordering::Relaxed;
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&["--replica", &replica("a", &a)]);
    let who = b"GET /who HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    assert_eq!(request(p.addr, who).text(), "a");
    let before = p.rss_kib();
    let served_before = a.requests.load(Relaxed);

    // 200 streams at once, each held 3 s by the replica: 100 are taken, 100 refused.
    let mut h = RawH2::connect(ATTACKER, p.addr);
    assert_eq!(h.setting(0x3), Some(100), "MAX_CONCURRENT_STREAMS");
    assert_eq!(h.setting(0x6), Some(32 << 10), "MAX_HEADER_LIST_SIZE");
    let burst: Vec<u8> = (0..200u32)
        .flat_map(|i| h2_get(1 + 2 * i, "/sleep/3000"))
        .collect();
    h.send(&burst);
    let mut refused = std::collections::HashSet::new();
    let end = Instant::now() + Duration::from_secs(10);
    while refused.len() < 100 && Instant::now() < end {
        match h.frame() {
            Some((0x3, _, s, code)) if code == 7u32.to_be_bytes() => {
                refused.insert(s);
            }
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(refused.len(), 100, "streams refused");
    assert!(
        refused.iter().all(|&s| s > 2 * 100),
        "the latest are refused"
    );
    let m = metrics_until(&p, Duration::from_secs(5), |v| {
        v("nowcast_proxy_requests_in_flight") >= 100.0
    });
    assert!(
        m.contains("nowcast_proxy_requests_in_flight 100\n"),
        "100 streams in flight, no more: {m}"
    );
    // Others are served meanwhile, at once.
    let t0 = Instant::now();
    assert_eq!(request(p.addr, who).text(), "a");
    let hz = request(p.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(hz.status, 200, "{}", hz.text());
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // The client goes away: its streams are cancelled.
    drop(h);

    // A rapid reset: 1,000 streams opened and cancelled in one burst.
    let mut r = RawH2::connect(ATTACKER, p.addr);
    let burst: Vec<u8> = (0..1000u32)
        .flat_map(|i| {
            let s = 1 + 2 * i;
            let mut f = h2_get(s, "/sleep/3000");
            f.extend(h2_cancel(s));
            f
        })
        .collect();
    r.send(&burst);
    let mut goaway = None;
    while let Some((kind, _, _, payload)) = r.frame() {
        if kind == 0x7 {
            goaway = Some(u32::from_be_bytes([
                payload[4], payload[5], payload[6], payload[7],
            ]));
        }
    }
    assert_eq!(goaway, Some(0xb), "GOAWAY(ENHANCE_YOUR_CALM), then closed");
    // Hardly any of it reached the replica: the 100 streams above, the two requests
    // here, and at most the few streams taken before the burst was cut.
    let reached = a.requests.load(Relaxed) - served_before;
    eprintln!("requests at the replica: {reached}");
    assert!(reached <= 100 + 2 + 20, "{reached} reached the replica");

    // Others are served as before, over HTTP/1.1 and HTTP/2.
    assert_eq!(request(p.addr, who).text(), "a");
    served_over_h2(p.addr, 1);
    // And the proxy is back where it was: no connection but the metrics request's own,
    // nothing in flight, one client known, memory flat.
    let m = metrics_until(&p, Duration::from_secs(10), |v| {
        v("nowcast_proxy_connections_open") == 1.0
            && v("nowcast_proxy_requests_in_flight") == 0.0
            && v("nowcast_proxy_clients_open") == 1.0
    });
    for line in [
        "nowcast_proxy_connections_open 1\n",
        "nowcast_proxy_requests_in_flight 0\n",
        "nowcast_proxy_clients_open 1\n",
    ] {
        assert!(m.contains(line), "{line}: {m}");
    }
    let after = p.rss_kib();
    eprintln!("RSS {before} KiB before, {after} KiB after");
    assert!(
        after < before + 32 * 1024,
        "RSS {before} KiB -> {after} KiB"
    );
}

/// A replica that reads each request's head and never answers (a hung server): the request
/// lines that reached it, in order; its connections held open until it is dropped.
struct Blackhole {
    addr: std::net::SocketAddr,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Blackhole {
    fn start() -> Blackhole {
        use std::sync::atomic::Ordering::Relaxed;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h2, s2) = (heads.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !s2.load(Relaxed) {
                let Ok((c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (h3, s3) = (h2.clone(), s2.clone());
                held.push(std::thread::spawn(move || {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                    let mut r = BufReader::new(c);
                    let mut line = String::new();
                    let mut first = None;
                    while !s3.load(Relaxed) {
                        match r.read_line(&mut line) {
                            Ok(0) => return,
                            Ok(_) if line == "\r\n" => {
                                h3.lock().unwrap().extend(first.take());
                            }
                            Ok(_) if first.is_none() => first = Some(line.trim_end().to_string()),
                            Ok(_) => {}
                            Err(_) => continue,
                        }
                        line.clear();
                    }
                }));
            }
            for t in held {
                let _ = t.join();
            }
        });
        Blackhole {
            addr,
            heads,
            stop,
            thread: Some(thread),
        }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An address nothing listens on.
fn closed_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A request is retried at most once, on another replica that is up, never on the one that
/// just failed (a service of one dead replica: one connect, not 11); a request that reached
/// its replica is sent again only if its method is idempotent (a POST that timed out may have
/// been carried out: it got 30 copies in a review); one that never reached it (no
/// connection) goes again whatever its method, its body whole. A timeout is a 504 that says
/// which replica and why.
#[test]
fn a_request_is_retried_at_most_once_elsewhere_and_a_post_once_sent_never() {
    // One dead replica: one attempt, a 502 naming it.
    // (Round-robin: a replica that is up is not probed, so that every connect counted here
    // is the request's.)
    let dead = closed_port();
    let p = Proxy::start(&[
        "--replica",
        &format!("dead=http://{dead}"),
        "--balance",
        "round-robin",
    ]);
    let r = request(p.addr, b"GET /x HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(
        r.text().contains("replica dead: no connection"),
        "{}",
        r.text()
    );
    let connects = "nowcast_proxy_errors_total{replica=\"dead\",kind=\"connect\"}";
    assert_eq!(p.metric(connects), Some(1.0), "{}", p.metrics());
    assert_eq!(p.metric("nowcast_proxy_retries_total"), Some(0.0));
    drop(p);

    // Two hung replicas and a 0.5 s timeout.
    let (h1, h2) = (Blackhole::start(), Blackhole::start());
    let mut p = Proxy::start(&[
        "--replica",
        &format!("h1=http://{}", h1.addr),
        "--replica",
        &format!("h2=http://{}", h2.addr),
        "--timeout-floor",
        "0.5",
        "--timeout-initial",
        "0.5",
        "--timeout-ceiling",
        "0.5",
        "--balance",
        "round-robin",
        "--retry-burst",
        "1",
        "--retry-per-sec",
        "0",
        "--retry-ratio",
        "0",
        "--explain",
    ]);
    let reached = |path: &str| {
        [&h1, &h2]
            .iter()
            .flat_map(|h| h.heads())
            .filter(|l| l.contains(path))
            .count()
    };
    let timed = |raw: &[u8]| {
        let t0 = Instant::now();
        let r = request(p.addr, raw);
        (r, t0.elapsed())
    };
    // A POST (no body: nothing keeps it from being sent again but its method) once.
    let (r, took) = timed(b"POST /pay HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(
        r.text().contains("no answer within its timeout (0.5 s)")
            && r.text()
                .contains("not retried: the POST reached the replica"),
        "{}",
        r.text()
    );
    // A DELETE is idempotent: once more, on the other replica, and no more.
    let (r, took) = timed(b"DELETE /order/42 HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(took < Duration::from_secs(4), "{took:?}");
    let text = r.text();
    assert!(
        text.contains("replica h1: no answer") && text.contains("retried on replica h2")
            || text.contains("replica h2: no answer") && text.contains("retried on replica h1"),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(reached("POST /pay"), 1, "{:?} {:?}", h1.heads(), h2.heads());
    assert_eq!(reached("DELETE /order/42"), 2);
    assert_eq!(
        h1.heads().iter().filter(|l| l.contains("DELETE")).count(),
        1,
        "one copy at each replica"
    );
    assert_eq!(p.metric("nowcast_proxy_retries_total"), Some(1.0));
    // The budget (one token here) still bounds the retries of all requests: a GET now is
    // tried once.
    let (r, took) = timed(b"GET /get/1 HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(took < Duration::from_millis(1_500), "{took:?}");
    assert_eq!(reached("GET /get/1"), 1);
    assert_eq!(p.metric("nowcast_proxy_retries_refused_total"), Some(1.0));
    // The retry's --explain line names its service, and says it is a retry.
    let err = stopped_stderr(&mut p);
    let lines = decisions(&err);
    let retries: Vec<_> = lines.iter().filter(|l| l["retry"] == true).collect();
    assert_eq!(retries.len(), 1, "{err}");
    assert_eq!(
        (&retries[0]["service"], &retries[0]["reason"]),
        (&"/".into(), &"retry".into())
    );
    drop((h1, h2));

    // A POST with a body to a dead replica never reached it: sent on the other, whole.
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&[
        "--replica",
        &format!("dead=http://{}", closed_port()),
        "--replica",
        &replica("a", &a),
        "--balance",
        "round-robin",
    ]);
    for _ in 0..4 {
        let r = request(
            p.addr,
            b"POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello",
        );
        assert_eq!((r.status, r.text()), (200, "read 5".to_string()));
    }
    assert!(p.metric(connects).unwrap() >= 1.0, "{}", p.metrics());
}

/// Under a comparison rule (round-robin, least connections, P2C) a replica is not probed
/// while it is up, but an ejected one is probed on trial once its backoff is over, and
/// taken back: it used to stay out for good ("tried again in 1.0 s" was never true).
#[test]
fn an_ejected_replica_comes_back_under_every_balancing_rule() {
    let r1 = Upstream::start("r1", "127.0.0.1:0", None);
    for balance in ["round-robin", "least-connections", "p2c-peak-ewma"] {
        let port = closed_port();
        let p = Proxy::start(&[
            "--replica",
            &replica("r1", &r1),
            "--replica",
            &format!("r9=http://{port}"),
            "--balance",
            balance,
            "--backoff",
            "0.2",
            "--eject-after",
            "1",
        ]);
        let up9 = "nowcast_proxy_up{replica=\"r9\"}";
        for _ in 0..10 {
            let r = request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n");
            assert_eq!((r.status, r.text()), (200, "r1".to_string()), "{balance}");
        }
        assert_eq!(p.metric(up9), Some(0.0), "{balance}: {}", p.metrics());
        let r9 = Upstream::start("r9", &port.to_string(), None);
        // Back within a few backoffs (0.2, 0.4, 0.8 s while it was still down).
        let m = metrics_until(&p, Duration::from_secs(5), |v| v(up9) == 1.0);
        assert!(
            m.contains(&format!("{up9} 1\n")),
            "{balance}: r9 not back: {m}"
        );
        // And chosen again (P2C takes it once its latency's peak has decayed below r1's).
        if balance != "p2c-peak-ewma" {
            let served: Vec<String> = (0..4)
                .map(|_| request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n").text())
                .collect();
            assert!(served.iter().any(|t| t == "r9"), "{balance}: {served:?}");
        }
        drop(r9);
    }
}

/// A client that gives up before the response's head (HTTP/1.1: it closes) leaves nothing
/// in flight at the replica: the count used to stay up for good, and least-connections then
/// sent everything elsewhere.
#[test]
fn a_client_that_gives_up_before_the_head_leaves_nothing_in_flight() {
    let (slow, other) = (
        Upstream::start("slow", "127.0.0.1:0", None),
        Upstream::start("other", "127.0.0.1:0", None),
    );
    let p = Proxy::start(&[
        "--replica",
        &replica("slow", &slow),
        "--replica",
        &replica("other", &other),
        "--service",
        "/sleep=slow",
        "--service",
        "/=slow,other",
        "--balance",
        "least-connections",
    ]);
    let gave_up: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = TcpStream::connect(p.addr).unwrap();
            s.write_all(b"GET /sleep/20000 HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    let slow_in_flight = "nowcast_proxy_in_flight{replica=\"slow\"}";
    metrics_until(&p, Duration::from_secs(5), |v| v(slow_in_flight) == 5.0);
    drop(gave_up);
    let m = metrics_until(&p, Duration::from_secs(5), |v| v(slow_in_flight) == 0.0);
    assert!(m.contains(&format!("{slow_in_flight} 0\n")), "{m}");
    assert!(m.contains("nowcast_proxy_requests_in_flight 0\n"), "{m}");
    assert!(
        m.contains("nowcast_proxy_errors_total{replica=\"slow\",kind=\"client\"} 5\n"),
        "{m}"
    );
    // Least connections spreads again over both.
    let seen: std::collections::HashSet<String> = (0..4)
        .map(|_| request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n").text())
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// An HTTP/2 client that made its requests and keeps its connection without reading holds
/// no shutdown (it held it for the whole --grace, as "1 still in flight"); a request really
/// unfinished at the end of the grace is counted as one.
#[test]
fn an_idle_http2_client_holds_no_shutdown_and_only_requests_count_as_in_flight() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let mut p = Proxy::start(&["--replica", &replica("a", &a), "--grace", "20"]);
    let mut h = RawH2::connect([127, 0, 0, 1], p.addr);
    h.send(&h2_get(1, "/who"));
    loop {
        let (kind, flags, stream, _) = h.frame().expect("the response");
        if kind == 0x0 && stream == 1 && flags & 0x1 != 0 {
            break;
        }
    }
    // The client now reads nothing more, and keeps its connection.
    let t0 = Instant::now();
    let status = p
        .terminate(Duration::from_secs(5))
        .expect("exits without waiting for the idle client");
    assert!(status.success());
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let err = p.stderr.lock().unwrap().clone();
    assert!(!err.contains("still in flight"), "{err}");
    drop(h);

    let mut p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--grace",
        "0.5",
        "--timeout-floor",
        "10",
    ]);
    let addr = p.addr;
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /sleep/3000 HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        read_response(&mut BufReader::new(s)).map(|r| r.status).ok()
    });
    // An idle HTTP/1.1 keep-alive connection beside it is no request either.
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.write_all(b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    read_response(&mut BufReader::new(idle.try_clone().unwrap())).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let err = stopped_stderr(&mut p);
    assert!(err.contains(", 1 still in flight after the grace"), "{err}");
    assert_ne!(slow.join().unwrap(), Some(200));
}

/// A request that times out waiting for its head (a slow endpoint) is the replica's wait,
/// not a sample of its path: one such request used to set the replica's bandwidth forecast
/// to 0 and steer every request away from it.
#[test]
fn a_head_timeout_leaves_the_replicas_bandwidth_forecast_alone() {
    let (a, b) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
    );
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--service",
        "/slow=a",
        "--service",
        "/=a,b",
        "--timeout-floor",
        "0.3",
        "--timeout-initial",
        "0.5",
        "--timeout-ceiling",
        "0.5",
    ]);
    for _ in 0..3 {
        let r = request(
            p.addr,
            b"GET /slow/bytes/1048576 HTTP/1.1\r\nhost: x\r\n\r\n",
        );
        assert_eq!(r.body.len(), 1 << 20);
    }
    let bw = "nowcast_proxy_bandwidth_forecast_mbits{replica=\"a\",source=\"transfer\"}";
    let before = p.metric(bw).expect("a's bandwidth");
    assert!(before > 0.0, "{before}");
    request(p.addr, b"GET /slow/sleep/2000 HTTP/1.1\r\nhost: x\r\n\r\n");
    let m = p.metrics();
    let timeouts = "nowcast_proxy_errors_total{replica=\"a\",kind=\"timeout\"}";
    assert!(p.metric(timeouts).unwrap() >= 1.0, "{m}");
    let after = p.metric(bw).unwrap();
    assert!(after > before / 2.0, "{before} -> {after} Mbit/s: {m}");
}

/// With GET probes (`--probe-bytes 0`, the default) an alternate's RTT stays fresh and its
/// bandwidth does not: ε-exploration must still measure it once its bandwidth is older than
/// the TTL. Here b's RTT is kept fresh by requests of its own service; its bandwidth used to
/// go unmeasured for the whole run while the `/` service chose a on it.
#[test]
fn an_alternate_whose_bandwidth_went_stale_is_explored_though_its_rtt_is_fresh() {
    let (a, b) = (
        Upstream::start("a", "127.0.0.1:0", None),
        Upstream::start("b", "127.0.0.1:0", None),
    );
    let mut p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--replica",
        &replica("b", &b),
        "--service",
        "/b=b",
        "--service",
        "/=a,b",
        "--ttl",
        "0.3",
        "--epsilon",
        "0.5",
        "--seed",
        "7",
        "--explain",
    ]);
    let big = b"GET /bytes/131072 HTTP/1.1\r\nhost: x\r\n\r\n";
    // Both measured once.
    request(p.addr, b"GET /b/bytes/131072 HTTP/1.1\r\nhost: x\r\n\r\n");
    request(p.addr, big);
    let end = Instant::now() + Duration::from_millis(2_500);
    while Instant::now() < end {
        request(p.addr, b"GET /b/who HTTP/1.1\r\nhost: x\r\n\r\n");
        request(p.addr, big);
    }
    let err = stopped_stderr(&mut p);
    let lines = decisions(&err);
    let root = in_service(&lines, "/");
    // A decision that kept to the best while the other's bandwidth was three TTLs old.
    let stale: Vec<_> = root
        .iter()
        .filter(|l| l["reason"] == "best")
        .filter(|l| {
            l["replicas"].as_array().unwrap().iter().any(|v| {
                v["replica"] != l["chose"]
                    && v["bandwidth_age_ms"]
                        .as_f64()
                        .is_some_and(|age| age > 900.0)
            })
        })
        .collect();
    assert!(
        stale.len() <= 2,
        "{} of {} decisions passed a stale alternate by",
        stale.len(),
        root.len()
    );
    assert!(with_reason(&root, "explore") >= 2, "{err}");
}

/// A client that takes none of its responses is cut at --send-timeout, over HTTP/1.1 and
/// HTTP/2 (where it may keep its connection busy otherwise: PINGs), and each of its stalled
/// responses holds little of the proxy's memory meanwhile (391 KiB over HTTP/1.1, 1 MB over
/// HTTP/2 with the client's windows wide open, before the proxy's buffers were bounded; with
/// 64 KiB upstream reads 277 KiB and 125–310 KiB, the more the more streams got going).
#[test]
fn stalled_downloads_hold_little_memory_and_are_cut_at_the_send_timeout() {
    let a = Upstream::start("a", "127.0.0.1:0", None);
    let p = Proxy::start(&[
        "--replica",
        &replica("a", &a),
        "--max-connections-per-client",
        "0",
        "--client-idle",
        "60",
        "--send-timeout",
        "2",
        // The replica's wait for its response headers is not under test: under the suite's
        // load, 200 downloads starting at once took the test's replica over the adaptive
        // timeout's 1 s floor, and the proxy failed and retried them (69 of 101 cut).
        "--timeout-floor",
        "30",
        "--timeout-initial",
        "30",
        "--timeout-ceiling",
        "60",
    ]);
    assert_eq!(
        request(p.addr, b"GET /who HTTP/1.1\r\nhost: x\r\n\r\n").text(),
        "a"
    );
    let before = p.rss_kib();
    // 100 downloads of 1 GiB over HTTP/1.1, never read (small socket buffers: what is queued
    // for them is the proxy's, not the kernel's).
    let stalled: Vec<TcpStream> = (0..100)
        .map(|_| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_recv_buffer_size(4096).unwrap();
            s.connect(&p.addr.into()).unwrap();
            let mut s: TcpStream = s.into();
            s.write_all(b"GET /bytes/1073741824 HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(600));
    let during = p.rss_kib();
    // And 100 streams of one HTTP/2 client that opens its windows wide and reads nothing.
    let mut h = RawH2::connect([127, 0, 0, 2], p.addr);
    assert_eq!(h.setting(0x3), Some(100), "MAX_CONCURRENT_STREAMS");
    let mut open = h2_frame(0x4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]);
    open.extend(h2_frame(
        0x8,
        0,
        0,
        &(0x7fff_ffffu32 - 65_535).to_be_bytes(),
    ));
    for i in 0..100u32 {
        open.extend(h2_get(1 + 2 * i, "/bytes/1073741824"));
    }
    h.send(&open);
    std::thread::sleep(Duration::from_millis(600));
    let during_h2 = p.rss_kib();
    eprintln!("RSS {before} KiB, {during} KiB with 100 stalled, {during_h2} KiB with 100 more");
    assert!(during < before + 100 * 320, "{before} -> {during} KiB");
    assert!(
        during_h2 < during + 100 * 400,
        "{during} -> {during_h2} KiB"
    );
    // PINGs keep the HTTP/2 connection from being idle, not from being cut.
    // Each is cut 2 s after its sends block, once its buffers are full: on a loaded machine
    // (the suite's other tests) filling 101 of them took more than 6 s (69 cut by then).
    let cut = |p: &Proxy, h: &mut RawH2| {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let m = p.metrics();
            if m.contains("nowcast_proxy_slow_readers_total 101\n") {
                return m;
            }
            assert!(Instant::now() < end, "{m}");
            let _ = h.w.write_all(&h2_frame(0x6, 0, 0, &[0; 8]));
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let m = cut(&p, &mut h);
    assert!(m.contains("nowcast_proxy_connections_open 1\n"), "{m}");
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        assert!(total < 1 << 30, "cut before the end");
    }
}
