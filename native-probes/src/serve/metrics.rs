//! What the server counts, and the text of its `/metrics` page (Prometheus text exposition
//! format 0.0.4), with the one HTTP request the metrics listener answers.
//!
//! Deterministic core: counters are plain atomics the edges add to; [`render`] turns a
//! snapshot into text and [`route`] decides the answer to a request's head. The listener
//! itself (`serve::mod`) is a few lines of socket code around them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every reason the server refuses or drops something, one counter each; the names are the
/// `limit` label of `nowcast_serve_limit_rejections_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// TCP: all sessions taken.
    SessionsTotal,
    /// TCP: the client's network has its cap of sessions open.
    SessionsPerClient,
    /// TCP: a request or a hello over the client's byte budget.
    ByteBudget,
    /// TCP: a transfer above the payload cap.
    PayloadCap,
    /// TCP: no complete hello within the handshake deadline.
    HandshakeTimeout,
    /// TCP: nothing moved for the idle limit.
    IdleTimeout,
    /// TCP: the session reached its lifetime.
    Lifetime,
    /// TCP: below the minimum rate.
    SlowClient,
    /// TCP: a hello of another protocol or version.
    BadHello,
    /// TCP: an unknown opcode inside a session.
    BadRequest,
    /// UDP: not a probe.
    UdpMalformed,
    /// UDP: above the datagram cap.
    UdpTooLarge,
    /// UDP: a reply sent to the server (never answered).
    UdpReply,
    /// UDP: from port 0 or a privileged port.
    UdpSourcePort,
    /// UDP: over the client's packet or byte rate.
    UdpClientRate,
    /// UDP: over the server's total rate.
    UdpTotalRate,
}

impl Limit {
    pub const ALL: [Limit; 16] = [
        Limit::SessionsTotal,
        Limit::SessionsPerClient,
        Limit::ByteBudget,
        Limit::PayloadCap,
        Limit::HandshakeTimeout,
        Limit::IdleTimeout,
        Limit::Lifetime,
        Limit::SlowClient,
        Limit::BadHello,
        Limit::BadRequest,
        Limit::UdpMalformed,
        Limit::UdpTooLarge,
        Limit::UdpReply,
        Limit::UdpSourcePort,
        Limit::UdpClientRate,
        Limit::UdpTotalRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Limit::SessionsTotal => "sessions_total",
            Limit::SessionsPerClient => "sessions_per_client",
            Limit::ByteBudget => "byte_budget",
            Limit::PayloadCap => "payload_cap",
            Limit::HandshakeTimeout => "handshake_timeout",
            Limit::IdleTimeout => "idle_timeout",
            Limit::Lifetime => "lifetime",
            Limit::SlowClient => "slow_client",
            Limit::BadHello => "bad_hello",
            Limit::BadRequest => "bad_request",
            Limit::UdpMalformed => "udp_malformed",
            Limit::UdpTooLarge => "udp_too_large",
            Limit::UdpReply => "udp_reply",
            Limit::UdpSourcePort => "udp_source_port",
            Limit::UdpClientRate => "udp_client_rate",
            Limit::UdpTotalRate => "udp_total_rate",
        }
    }
}

/// What the server did; the edges add, the report and `/metrics` read.
#[derive(Debug, Default)]
pub struct Counters {
    /// TCP sessions admitted.
    pub sessions: AtomicU64,
    /// TCP sessions open now.
    pub open: AtomicU64,
    /// Bytes read from and written to TCP clients (messages and payloads).
    pub tcp_in: AtomicU64,
    pub tcp_out: AtomicU64,
    /// Bulk payload bytes moved.
    pub bulk_bytes: AtomicU64,
    /// Socket buffer requests cut to the cap.
    pub buffers_capped: AtomicU64,
    pub datagrams_in: AtomicU64,
    pub datagrams_out: AtomicU64,
    pub udp_bytes_in: AtomicU64,
    pub udp_bytes_out: AtomicU64,
    rejections: [AtomicU64; Limit::ALL.len()],
}

impl Counters {
    pub fn reject(&self, limit: Limit) {
        self.rejections[limit as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn rejected(&self, limit: Limit) -> u64 {
        self.rejections[limit as usize].load(Ordering::Relaxed)
    }

    /// Rejections of every kind, TCP and UDP.
    pub fn rejected_total(&self) -> (u64, u64) {
        Limit::ALL.iter().fold((0, 0), |(tcp, udp), &l| {
            if l.name().starts_with("udp_") {
                (tcp, udp + self.rejected(l))
            } else {
                (tcp + self.rejected(l), udp)
            }
        })
    }
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// The `/metrics` text: the counters, the configured limits (`limits`: name and value) and
/// the process figures the edge measured.
pub fn render(
    c: &Counters,
    limits: &[(&str, f64)],
    rss_bytes: Option<u64>,
    uptime_s: f64,
) -> String {
    let mut out = String::with_capacity(4096);
    let mut family = |name: &str, kind: &str, help: &str, rows: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    let one = |v: u64| vec![(String::new(), v as f64)];
    let dir = |i: &AtomicU64, o: &AtomicU64| {
        vec![
            ("{direction=\"in\"}".to_string(), get(i) as f64),
            ("{direction=\"out\"}".to_string(), get(o) as f64),
        ]
    };
    family(
        "nowcast_serve_sessions_total",
        "counter",
        "TCP sessions admitted.",
        &one(get(&c.sessions)),
    );
    family(
        "nowcast_serve_sessions_open",
        "gauge",
        "TCP sessions open now.",
        &one(get(&c.open)),
    );
    family(
        "nowcast_serve_tcp_bytes_total",
        "counter",
        "Bytes read from (in) and written to (out) TCP clients.",
        &dir(&c.tcp_in, &c.tcp_out),
    );
    family(
        "nowcast_serve_bulk_bytes_total",
        "counter",
        "Bulk transfer payload bytes moved, both directions.",
        &one(get(&c.bulk_bytes)),
    );
    family(
        "nowcast_serve_buffers_capped_total",
        "counter",
        "Socket buffer sizes asked by clients and cut to --max-buffer.",
        &one(get(&c.buffers_capped)),
    );
    family(
        "nowcast_serve_datagrams_total",
        "counter",
        "UDP datagrams received (in) and answered (out).",
        &dir(&c.datagrams_in, &c.datagrams_out),
    );
    family(
        "nowcast_serve_udp_bytes_total",
        "counter",
        "UDP bytes received (in) and answered (out).",
        &dir(&c.udp_bytes_in, &c.udp_bytes_out),
    );
    let rejections: Vec<(String, f64)> = Limit::ALL
        .iter()
        .map(|&l| (format!("{{limit=\"{}\"}}", l.name()), c.rejected(l) as f64))
        .collect();
    family(
        "nowcast_serve_limit_rejections_total",
        "counter",
        "Sessions, requests and datagrams refused, closed or dropped, by limit.",
        &rejections,
    );
    let configured: Vec<(String, f64)> = limits
        .iter()
        .map(|(name, v)| (format!("{{name=\"{name}\"}}"), *v))
        .collect();
    family(
        "nowcast_serve_limit",
        "gauge",
        "The configured limits (bytes, seconds, counts, bytes or packets per second).",
        &configured,
    );
    family(
        "nowcast_serve_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
        &[(String::new(), uptime_s)],
    );
    if let Some(rss) = rss_bytes {
        family(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            &one(rss),
        );
    }
    out
}

/// The answer to an HTTP request, from its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics` (a query string is ignored).
    Metrics,
    /// Any other path.
    NotFound,
    /// Any other method.
    MethodNotAllowed,
    /// Not an HTTP/1.x request line.
    BadRequest,
}

impl Route {
    /// Status line and a short body for people.
    pub fn status(self) -> (&'static str, &'static str) {
        match self {
            Route::Metrics => ("200 OK", ""),
            Route::NotFound => ("404 Not Found", "only /metrics is served here\n"),
            Route::MethodNotAllowed => ("405 Method Not Allowed", "only GET is served here\n"),
            Route::BadRequest => ("400 Bad Request", "not an HTTP/1.x request\n"),
        }
    }
}

/// Largest request head the listener reads.
pub const MAX_HEAD: usize = 8192;

/// Decides the answer to a request whose head (or its first bytes) is `head`: only the
/// request line is read (RFC 9112 §3: method SP request-target SP HTTP-version).
pub fn route(head: &[u8]) -> Route {
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = head[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&head[..line_end]);
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with(b"HTTP/1.") || method.is_empty() {
        return Route::BadRequest;
    }
    if method != b"GET" {
        return Route::MethodNotAllowed;
    }
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    if path == b"/metrics" {
        Route::Metrics
    } else {
        Route::NotFound
    }
}

/// Whether `buf` holds a whole request head (an empty line after the request line).
pub fn head_complete(buf: &[u8]) -> bool {
    buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")
}

/// The whole response to `route`, with `body` for [`Route::Metrics`].
pub fn response(route: Route, body: &str) -> Vec<u8> {
    let (status, text) = route.status();
    let (kind, body) = match route {
        Route::Metrics => ("text/plain; version=0.0.4; charset=utf-8", body),
        _ => ("text/plain; charset=utf-8", text),
    };
    let allow = if route == Route::MethodNotAllowed {
        "Allow: GET\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{allow}Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        let rows: [(&[u8], Route); 9] = [
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", Route::Metrics),
            (b"GET /metrics?x=1 HTTP/1.0\n\n", Route::Metrics),
            (b"GET / HTTP/1.1\r\n\r\n", Route::NotFound),
            (b"GET /metrics/ HTTP/1.1\r\n\r\n", Route::NotFound),
            (b"POST /metrics HTTP/1.1\r\n\r\n", Route::MethodNotAllowed),
            (b"GET /metrics HTTP/2\r\n\r\n", Route::BadRequest),
            (b"GET  /metrics HTTP/1.1\r\n\r\n", Route::BadRequest),
            (b"NWCT\x02\x00\x00\x00", Route::BadRequest),
            (b"", Route::BadRequest),
        ];
        for (head, want) in rows {
            assert_eq!(route(head), want, "{:?}", String::from_utf8_lossy(head));
        }
        assert!(head_complete(b"GET / HTTP/1.1\r\n\r\n"));
        assert!(!head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n"));
        let r = String::from_utf8(response(Route::MethodNotAllowed, "")).unwrap();
        assert!(
            r.starts_with("HTTP/1.1 405 ") && r.contains("Allow: GET\r\n"),
            "{r}"
        );
    }

    #[test]
    fn every_limit_has_a_counter_line() {
        let c = Counters::default();
        c.reject(Limit::UdpReply);
        c.reject(Limit::UdpReply);
        c.reject(Limit::SlowClient);
        c.datagrams_in.store(5, Ordering::Relaxed);
        assert_eq!(c.rejected_total(), (1, 2));
        let text = render(&c, &[("max_sessions", 256.0)], Some(1 << 20), 1.5);
        assert!(text.contains("nowcast_serve_limit_rejections_total{limit=\"udp_reply\"} 2\n"));
        assert!(text.contains("nowcast_serve_datagrams_total{direction=\"in\"} 5\n"));
        assert!(text.contains("nowcast_serve_limit{name=\"max_sessions\"} 256\n"));
        assert!(text.contains("process_resident_memory_bytes 1048576\n"));
        for l in Limit::ALL {
            assert!(
                text.contains(&format!("{{limit=\"{}\"}}", l.name())),
                "{l:?}"
            );
        }
        // Every sample line belongs to a family declared just above it.
        let mut declared = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                declared.push(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert_eq!(declared.last().map(String::as_str), Some(name), "{line}");
            }
        }
    }
}
