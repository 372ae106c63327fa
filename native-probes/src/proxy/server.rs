//! The proxy's server (edge): accepts HTTP/1.1 and HTTP/2 cleartext clients (hyper; h2c with
//! prior knowledge, on the same port), asks the [`Policy`] where each
//! request goes, streams the request body up and the response body down without holding
//! either whole, enforces the replica's adaptive timeout (on its head, and on a body that
//! stalls: [`super::policy::stall_limit_ms`]), retries what can be retried within
//! the budget, runs the active probes the policy asks for, and tells the policy how each
//! attempt went (at the end of its response body: `pending`). `/healthz` and `/metrics` are
//! answered here; everything else is proxied. Client connections are held as `watched`
//! sockets, for the idle limit.

use super::body::{Counting, Down, Progress, Up};
use super::budget::RouteKey;
use super::clients::PerClient;
use super::headers::{
    forwarded_for, has_dot_segment, join_cookies, join_transfer_encoding, strip_hop_by_hop,
    X_FORWARDED_FOR,
};
use super::metrics::{self, Edge};
use super::policy::{Decision, Done, Failure, Health, Policy, ReplicaSpec, ServiceSpec, Source};
use super::upstream::{ConnectError, Pool, Target};
use crate::rng::Rng;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::uri::PathAndQuery;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use nowcast_core::record::Record;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Notify;

mod background;
mod pending;
mod watched;
use background::{feed_wren, record_writer, run_probes, Zeros};
use pending::{Pending, Tracked};
use watched::{Activity, Watched};

/// Smallest transfer whose rate is a bandwidth sample.
pub const MIN_SAMPLE_BYTES: u64 = 64 * 1024;

/// How a request names its unit of work.
#[derive(Clone, Debug, PartialEq)]
pub enum UnitKey {
    Header(HeaderName),
    Cookie(String),
    Query(String),
    /// The n-th segment of the path (0: the first after the leading `/`).
    Path(usize),
}

impl UnitKey {
    pub fn parse(s: &str) -> Result<UnitKey, String> {
        let (kind, name) = s.split_once(':').ok_or_else(|| {
            format!("--sticky '{s}': expected header:NAME, cookie:NAME, query:NAME or path:N")
        })?;
        match kind {
            "header" => HeaderName::from_bytes(name.as_bytes())
                .map(UnitKey::Header)
                .map_err(|_| format!("--sticky '{s}': '{name}' is not a header name")),
            "cookie" if !name.is_empty() => Ok(UnitKey::Cookie(name.into())),
            "query" if !name.is_empty() => Ok(UnitKey::Query(name.into())),
            "path" => name
                .parse()
                .map(UnitKey::Path)
                .map_err(|_| format!("--sticky '{s}': '{name}' is not a segment number")),
            _ => Err(format!(
                "--sticky '{s}': expected header:NAME, cookie:NAME, query:NAME or path:N"
            )),
        }
    }

    /// The unit of work `uri` and `headers` name, if any.
    pub fn of(&self, uri: &Uri, headers: &HeaderMap) -> Option<String> {
        match self {
            UnitKey::Header(h) => headers.get(h)?.to_str().ok().map(str::to_string),
            UnitKey::Cookie(name) => headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|kv| kv.trim().split_once('='))
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_string()),
            UnitKey::Query(name) => uri
                .query()?
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_string()),
            UnitKey::Path(n) => uri
                .path()
                .split('/')
                .skip(1)
                .nth(*n)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        }
        .filter(|u| u.len() <= 256)
    }
}

/// An active probe: GET the path, or POST this many bytes to it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSpec {
    pub path: String,
    pub bytes: u64,
}

/// Everything `nowcast proxy` runs with.
pub struct Options {
    pub listen: SocketAddr,
    pub policy: super::policy::Config,
    pub replicas: Vec<(ReplicaSpec, Target)>,
    pub services: Vec<ServiceSpec>,
    /// What names a unit of work in each service (in the order of `services`).
    pub sticky: Vec<Option<UnitKey>>,
    pub explain: bool,
    pub records: Option<Box<dyn Write + Send>>,
    pub max_header_bytes: usize,
    pub probe: ProbeSpec,
    pub seed: u64,
    pub grace: Duration,
    pub connect_timeout: Duration,
    pub client_idle: Duration,
    /// Time from accept to the first request's head (HTTP/1.1's header read timeout; for
    /// HTTP/2, the preface, SETTINGS and the first HEADERS).
    pub head_timeout: Duration,
    pub max_connections: usize,
    /// Most client connections at once from one client ([`client_key`]: an IPv4 address or
    /// an IPv6 /64); 0: no cap but `max_connections`.
    pub max_connections_per_client: usize,
    /// Upload bandwidth from TCP_INFO's delivery rate at the end of the response instead of
    /// the upload's goodput.
    pub tcp_info_rate: bool,
    /// The live capture whose Wren lower bounds are the preferred bandwidth samples.
    pub capture: Option<super::capture::Capture>,
}

#[derive(Default)]
struct EdgeCounts {
    requests: AtomicU64,
    in_flight: AtomicU64,
    connections: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    client_timeouts: AtomicU64,
    /// Connections closed at accept because their client had its cap open already.
    refused_per_client: AtomicU64,
}

/// A client request in flight: counted from its decision until its response head (or its
/// end, however it ends: hyper drops the request's future when an HTTP/2 client resets the
/// stream or a client goes away before the head).
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn new(n: &'a AtomicU64) -> InFlight<'a> {
        n.fetch_add(1, Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// HTTP/2 from clients: streams open at once per connection (SETTINGS_MAX_CONCURRENT_STREAMS;
/// a stream beyond it is refused with RST_STREAM(REFUSED_STREAM)). RFC 9113 §5.1.2 asks for
/// at least 100; nginx's default is 128. An HTTP/1.1 connection carries one request at a time.
pub const H2_MAX_STREAMS: u32 = 128;
/// Streams a client opened and reset before the proxy took them (HTTP/2 "rapid reset",
/// CVE-2023-44487): beyond this many waiting at once, GOAWAY(ENHANCE_YOUR_CALM) and the
/// connection is closed. h2's own default, set here so that it cannot change under us.
pub const H2_MAX_PENDING_RESETS: usize = 20;
/// Streams the proxy may reset for a client's protocol errors (including streams refused
/// over [`H2_MAX_STREAMS`]) over a connection's life before GOAWAY(ENHANCE_YOUR_CALM)
/// ("MadeYouReset", CVE-2025-8671); h2's default.
pub const H2_MAX_ERROR_RESETS: usize = 1024;
/// HTTP/2 flow-control windows (per stream, per connection): what a client may send before
/// the proxy has passed it on. hyper's defaults, set explicitly: at most 1 MiB of a
/// connection's uploads is held at once, whatever its streams.
pub const H2_WINDOW: u32 = 1 << 20;
/// Largest HTTP/2 frame the proxy accepts (the protocol's default and least).
pub const H2_MAX_FRAME: u32 = 16 << 10;
/// Response bytes queued per stream ahead of the client's window (hyper's default).
pub const H2_SEND_BUFFER: usize = 400 << 10;
/// The least head size hyper's HTTP/1.1 server takes (its read buffer's floor); both
/// protocols are held to `max(--max-header-bytes, this)`.
pub const MIN_HEAD_BYTES: usize = 8192;

struct Shared {
    policy: Mutex<Policy>,
    /// The last `/metrics` page, when it was rendered and how long that took: see
    /// [`metrics_page`].
    metrics_page: Mutex<Option<(Instant, Duration, Bytes)>>,
    rng: Mutex<Rng>,
    pools: Vec<Pool>,
    /// Services' prefixes, in the policy's order (routing reads them without its lock).
    prefixes: Vec<String>,
    sticky: Vec<Option<UnitKey>>,
    explain: bool,
    probe: ProbeSpec,
    probe_zeros: Zeros,
    connect_timeout: Duration,
    tcp_info_rate: bool,
    origin: Instant,
    wall0_ms: f64,
    edge: EdgeCounts,
    clients: Arc<PerClient>,
    records: Option<std::sync::mpsc::Sender<Record>>,
    capture: Option<Arc<super::capture::Counts>>,
    /// Per replica: whether a probe's refusal (a status other than 2xx) has been told.
    probe_refusal_told: Vec<AtomicBool>,
}

impl Shared {
    fn now_ms(&self) -> f64 {
        self.ms_at(Instant::now())
    }

    fn ns(&self) -> u64 {
        self.ns_at(Instant::now())
    }

    /// `t` as the policy's clock (wall-clock ms), for an instant already read: a request
    /// reads the clock a few times, not at every step.
    fn ms_at(&self, t: Instant) -> f64 {
        self.wall0_ms + (t - self.origin).as_secs_f64() * 1e3
    }

    /// `t` as ns since the proxy's start.
    fn ns_at(&self, t: Instant) -> u64 {
        (t - self.origin).as_nanos() as u64
    }

    fn draws(&self) -> [f64; 2] {
        let mut r = self.rng.lock().expect("rng");
        [r.unit(), r.unit()]
    }

    fn finish(&self, d: Done) {
        let recs = self.account(&mut self.policy.lock().expect("policy"), &d);
        self.write(recs);
    }

    /// The policy's account of an attempt (`p`: the policy, locked), and a line on standard
    /// error when it ejects the replica or takes it back, so that an operator sees a replica
    /// go down and come back without reading `/metrics`. A replica that stays down is told
    /// once, not at every trial.
    fn account(&self, p: &mut Policy, d: &Done) -> Vec<Record> {
        let was_up = p.health(d.replica) == Health::Up;
        let recs = p.finish(d);
        let spec = p.spec(d.replica);
        match (was_up, p.health(d.replica), d.failure) {
            (true, Health::Ejected { until_ms }, Some(f)) => eprintln!(
                "nowcast proxy: replica {} ({}) ejected, the last failure: {}; tried again in {:.1} s",
                spec.name,
                spec.url,
                f.describe(),
                ((until_ms - d.now_ms) / 1e3).max(0.0)
            ),
            (false, Health::Up, _) => {
                eprintln!("nowcast proxy: replica {} ({}) is back", spec.name, spec.url)
            }
            _ => {}
        }
        recs
    }

    /// A probe answered with `status`, not 2xx: its upload was refused, maybe unread, so the
    /// probes of this replica measure its RTT and no bandwidth. Told once per replica: the
    /// operator's `--probe-path` wants a path that takes the probe's request.
    fn probe_refused(&self, replica: usize, head: &Head, status: StatusCode) {
        if self.probe_refusal_told[replica].swap(true, Relaxed) {
            return;
        }
        let p = self.policy.lock().expect("policy");
        let spec = p.spec(replica);
        eprintln!(
            "nowcast proxy: replica {} ({}) answered the probe {} {} with {status}: no \
             bandwidth from its probes (see --probe-path)",
            spec.name, spec.url, head.method, head.path_and_query
        );
    }

    fn write(&self, recs: Vec<Record>) {
        if let Some(tx) = &self.records {
            for r in recs {
                let _ = tx.send(r);
            }
        }
    }
}

/// A response body on its way to a client: a replica's, or the proxy's own.
type DownBody = Down<Tracked>;

fn local(status: StatusCode, text: impl Into<Bytes>) -> Response<DownBody> {
    let mut r = Response::new(Down::Local(Full::new(text.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The parts of a request needed to send it again.
#[derive(Clone)]
struct Head {
    method: Method,
    path_and_query: PathAndQuery,
    headers: HeaderMap,
}

/// What one attempt sends besides the head's method and path: its header map (the request's
/// own for the first, a copy for a retry) and its body.
struct Outgoing {
    headers: HeaderMap,
    body: Up,
}

/// What an attempt that got no connection to its replica records, and how it ends: the
/// proxy's own want of resources is not the replica's failure and is not retried.
fn unconnected(e: &ConnectError) -> (Failure, Attempt) {
    match e {
        ConnectError::Local(_) => (Failure::Local, Attempt::Local),
        ConnectError::Replica(_) => (Failure::Connect, Attempt::Failed { retryable: true }),
    }
}

// The response is returned by value once an attempt, and matched at once; boxed, it would
// cost an allocation a request.
#[allow(clippy::large_enum_variant)]
enum Attempt {
    Ok(Response<DownBody>),
    /// Failed before a response head; `retryable` when nothing of the body was taken.
    Failed {
        retryable: bool,
    },
    /// The client's request failed: its body broke off, or `stalled` waiting on the client.
    ClientFailed {
        stalled: bool,
    },
    /// The proxy could not open a connection for want of its own resources (descriptors,
    /// memory, local ports): not the replica's failure, and no retry would fare better.
    Local,
}

/// The `/metrics` page. Rendering it holds the policy's lock, which every request takes, for
/// a time that grows with the replicas (4 ms with 1,024): a client asking for it over many
/// connections held every request up (1 ms to 60–130 ms). A page is therefore rendered at
/// most once in 50 times its own rendering time, and served as it was in between: with a
/// few replicas that is under a millisecond, with 1,024 200 ms (a scrape every 15 s never
/// sees the difference); concurrent askers wait for one rendering, not for the lock.
fn metrics_page(sh: &Shared) -> Bytes {
    let mut cache = sh.metrics_page.lock().expect("metrics page");
    if let Some((at, took, page)) = cache.as_ref() {
        if at.elapsed() < (*took * 50).min(Duration::from_secs(1)) {
            return page.clone();
        }
    }
    let start = Instant::now();
    let text = {
        let p = sh.policy.lock().expect("policy");
        let e = Edge {
            requests: sh.edge.requests.load(Relaxed),
            in_flight: sh.edge.in_flight.load(Relaxed),
            connections_open: sh.edge.connections.load(Relaxed),
            rejected: sh.edge.rejected.load(Relaxed),
            failed: sh.edge.failed.load(Relaxed),
            retries_refused: p.budget.refused,
            client_timeouts: sh.edge.client_timeouts.load(Relaxed),
            refused_per_client: sh.edge.refused_per_client.load(Relaxed),
            clients_open: sh.clients.clients() as u64,
            uptime_s: sh.origin.elapsed().as_secs_f64(),
            bandwidth_source: if sh.capture.as_ref().is_some_and(|c| c.running()) {
                Source::Wren.name()
            } else if sh.tcp_info_rate {
                Source::TcpInfo.name()
            } else {
                Source::Transfer.name()
            },
            capture: sh.capture.as_ref().map(|c| c.snapshot()),
        };
        metrics::render(&p, &e, sh.now_ms())
    };
    let page = Bytes::from(text);
    *cache = Some((start, start.elapsed(), page.clone()));
    page
}

/// One attempt at `replica`, begun at `start`: connect, send, wait for the head within the
/// adaptive timeout. `route`: a client's request's, whose sizes it teaches if it completes
/// (None: a probe).
async fn attempt(
    sh: &Arc<Shared>,
    replica: usize,
    head: &Head,
    out: Outgoing,
    timeout_ms: f64,
    route: &mut Option<RouteKey>,
    start: Instant,
) -> Attempt {
    let probe = route.is_none();
    let pool = &sh.pools[replica];
    let progress = Arc::new(Progress::default());
    let fail = |f: Failure, wait: Option<f64>, up: u64| {
        sh.finish(Done {
            replica,
            now_ms: sh.now_ms(),
            probe,
            bytes_up: up,
            bytes_down: 0,
            total_ms: start.elapsed().as_secs_f64() * 1e3,
            wait_ms: wait,
            rtt_ms: None,
            base_rtt_ms: None,
            bandwidth: None,
            failure: Some(f),
        });
    };
    // A new connection is the rare path: boxed, so that its futures (the connect, hyper's
    // handshake) do not make every request's future larger, to be moved at every step.
    let (got, sent_from) = match pool.take_idle(start) {
        Some(c) => (Ok(c), start),
        None => (
            Box::pin(pool.connect(sh.connect_timeout)).await,
            Instant::now(),
        ),
    };
    let mut conn = match got {
        Ok(c) => c,
        Err(e) => {
            let (failure, attempt) = unconnected(&e);
            fail(failure, None, 0);
            return attempt;
        }
    };
    let uri = if pool.target.base_path.is_empty() {
        Uri::from(head.path_and_query.clone())
    } else {
        format!("{}{}", pool.target.base_path, head.path_and_query)
            .parse()
            .unwrap_or_else(|_| Uri::from(head.path_and_query.clone()))
    };
    // Made in place (the builder moves the whole request at each step).
    let Outgoing { headers, body } = out;
    let mut req = Request::new(Counting {
        inner: body,
        progress: progress.clone(),
        origin: sh.origin,
    });
    *req.method_mut() = head.method.clone();
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    if let Some(v) = &pool.host {
        req.headers_mut().insert(header::HOST, v.clone());
    }
    let bodiless = req.body().is_end_stream();
    let sent_at = sh.ns_at(sent_from);
    if bodiless {
        progress.done_ns.store(sent_at.max(1), Relaxed);
    }
    let mut fd = conn.raw_fd();
    let fut = conn.send.try_send_request(req);
    tokio::pin!(fut);
    let timeout_ns = (timeout_ms * 1e6) as u64;
    // The peer's acknowledgements when a deadline was last reached, and when they last grew.
    let mut acked: Option<u64> = None;
    let mut acked_at = 0u64;
    let mut now = sent_at;
    let result = loop {
        // The clock runs from the end of the upload, or from its last progress while it goes.
        let done = progress.done_ns.load(Relaxed);
        let from = if done > 0 {
            done.max(acked_at)
        } else {
            progress.last_ns.load(Relaxed).max(sent_at)
        };
        let deadline = from + timeout_ns;
        if now >= deadline {
            // The body has left hyper, but the kernel may still be sending it from the
            // socket's buffer (megabytes: a bulk upload on a slow path takes seconds to
            // drain), and a wait from the end of the upload would then time out a transfer
            // that is going. While the socket still sends and the peer's acknowledgements
            // grow from one deadline to the next, the clock restarts. TCP_INFO is read only
            // here, when a deadline is reached.
            if done > 0 {
                if let Some(i) = crate::net::tcp_info(fd) {
                    if i.sending && acked.is_none_or(|a| i.bytes_acked > a) {
                        acked = Some(i.bytes_acked);
                        acked_at = now;
                        continue;
                    }
                }
            }
            break None;
        }
        // The deadline as an instant already known (no clock read); the response first.
        let sleep = tokio::time::sleep_until((sh.origin + Duration::from_nanos(deadline)).into());
        let r = tokio::select! {
            biased;
            r = &mut fut => Some(r),
            _ = sleep => None,
        };
        match r {
            // A connection from the pool that the replica closed as it was taken (its task
            // saw the close before the request): the request was not written, and goes on
            // another connection, as it would have had the close come a moment sooner.
            Some(Err(e)) if conn.handshake_ms.is_none() && e.message().is_some() => {
                let mut e = e;
                let req = e.take_message().expect("a request");
                let next = match pool.take_idle(Instant::now()) {
                    Some(c) => Ok(c),
                    None => Box::pin(pool.connect(sh.connect_timeout)).await,
                };
                conn = match next {
                    Ok(c) => c,
                    Err(e) => {
                        let (failure, attempt) = unconnected(&e);
                        fail(failure, None, 0);
                        return attempt;
                    }
                };
                fd = conn.raw_fd();
                fut.set(conn.send.try_send_request(req));
                now = sh.ns();
            }
            Some(r) => break Some(r.map_err(|e| e.into_error())),
            None => now = sh.ns(),
        }
    };
    let up = progress.bytes.load(Relaxed);
    let done = progress.done_ns.load(Relaxed);
    // From the end of the upload, or of its drain from the socket's buffer where a deadline
    // saw it still going.
    let waited_from = done.max(acked_at);
    let wait_ms = |now: u64| (done > 0).then(|| now.saturating_sub(waited_from) as f64 / 1e6);
    match result {
        // The client's upload broke off or stalled: nothing to say of the replica, and
        // nothing to retry. An error of the replica's connection while the upload waited on
        // the client is the replica's (it reset the connection: an early answer to an
        // upload it did not read); only a stall is the client's then.
        None if progress.client_at_fault() => {
            fail(Failure::Client, None, up);
            Attempt::ClientFailed { stalled: true }
        }
        Some(Err(_)) if progress.client_failed.load(Relaxed) => {
            fail(Failure::Client, None, up);
            Attempt::ClientFailed { stalled: false }
        }
        None => {
            let w = wait_ms(sh.ns());
            fail(Failure::Timeout, w, up);
            Attempt::Failed {
                retryable: bodiless,
            }
        }
        Some(Err(_)) => {
            fail(Failure::Reset, wait_ms(sh.ns()), up);
            Attempt::Failed {
                retryable: bodiless,
            }
        }
        // 101 to a request that asked for no upgrade (the proxy drops `Upgrade`): the
        // connection now speaks something else, and passed down it would leave the client's
        // connection with a final response that is not one (HTTP/2 has no 101 at all).
        // hyper's client reads past every other 1xx.
        Some(Ok(resp)) if resp.status().is_informational() => {
            fail(Failure::Status, wait_ms(sh.ns()), up);
            Attempt::Failed {
                retryable: bodiless,
            }
        }
        Some(Ok(mut resp)) => {
            let head_at = Instant::now();
            let status = resp.status();
            if probe && !status.is_success() {
                sh.probe_refused(replica, head, status);
            }
            // The proxy's own version to its clients (RFC 9110 §6.2), not the replica's: an
            // HTTP/1.0 replica's version passed down would close every client connection
            // after one response. hyper answers an HTTP/1.0 client in 1.0 still.
            *resp.version_mut() = hyper::Version::HTTP_11;
            let headers = resp.headers_mut();
            strip_hop_by_hop(headers);
            // Both framings: the body was read by Transfer-Encoding, and its Content-Length,
            // passed down, would make the client's framing disagree with the body (hyper
            // then cuts the connection without a byte). An intermediary must drop it (RFC
            // 9112 §6.3), and the connection that carried it is not used again.
            let both_framings = headers.contains_key(header::TRANSFER_ENCODING)
                && headers.remove(header::CONTENT_LENGTH).is_some();
            let pending = Pending {
                sh: sh.clone(),
                replica,
                conn: Some(conn),
                start,
                head: head_at,
                progress,
                probe,
                route: route.take(),
                wait_ms: wait_ms(sh.ns_at(head_at)),
                status_failure: matches!(status.as_u16(), 502..=504),
                refused_probe: probe && !status.is_success(),
                bytes_down: 0,
                reuse: !both_framings,
            };
            Attempt::Ok(resp.map(|inner| Down::Replica(Tracked::new(inner, pending, timeout_ms))))
        }
    }
}

/// One `--explain` line: where a request to service `s` went and why, with every replica's
/// view as the policy saw it (`p` is the policy, still locked by the caller).
fn explain(sh: &Shared, p: &Policy, head: &Head, s: usize, retry: bool, d: &Decision) {
    let now = sh.now_ms();
    let line = serde_json::json!({
        "timestamp_ms": now,
        "method": head.method.as_str(),
        "path": head.path_and_query.as_str(),
        "service": if retry { "retry" } else { p.service_prefix(s) },
        "balance": p.service_config(s).balance.name(),
        "size_bytes": d.size.bytes,
        "size_from": d.size.from.name(),
        "size_samples": d.size.samples,
        "request_bytes": d.size.request_bytes,
        "chose": p.spec(d.replica).name,
        "reason": d.reason.name(),
        "timeout_ms": d.timeout_ms,
        "replicas": p.views(s, d.size.bytes, now),
    });
    eprintln!("{line}");
}

async fn handle(
    sh: Arc<Shared>,
    req: Request<Incoming>,
    peer: &HeaderValue,
) -> Result<Response<DownBody>, Infallible> {
    sh.edge.requests.fetch_add(1, Relaxed);
    let path = req.uri().path();
    if req.method() == Method::GET && path == "/healthz" {
        let up = {
            let p = sh.policy.lock().expect("policy");
            let now = sh.now_ms();
            (0..p.replica_count())
                .filter(|&r| p.view(r, 0.0, now).health == Health::Up)
                .count()
        };
        return Ok(if up > 0 {
            local(StatusCode::OK, format!("ok: {up} replica(s) up\n"))
        } else {
            local(StatusCode::SERVICE_UNAVAILABLE, "no replica up\n")
        });
    }
    if req.method() == Method::GET && path == "/metrics" {
        let mut r = local(StatusCode::OK, metrics_page(&sh));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        );
        return Ok(r);
    }
    if has_dot_segment(path) {
        sh.edge.rejected.fetch_add(1, Relaxed);
        return Ok(local(
            StatusCode::BAD_REQUEST,
            format!(
                "nowcast proxy: the path {path} has a '.' or '..' segment (perhaps \
                 percent-encoded); send it resolved (RFC 3986 §5.2.4)\n"
            ),
        ));
    }
    let Some(service) = super::policy::route(sh.prefixes.iter().map(String::as_str), path) else {
        sh.edge.rejected.fetch_add(1, Relaxed);
        return Ok(local(
            StatusCode::NOT_FOUND,
            format!("nowcast proxy: no service for path {path}\n"),
        ));
    };
    // The upload, when known: none without a body (HTTP/2: END_STREAM on its head), else
    // its Content-Length (none for a chunked or streamed body).
    let length = if req.body().is_end_stream() {
        Some(0)
    } else {
        req.headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let unit = sh.sticky[service]
        .as_ref()
        .and_then(|k| k.of(req.uri(), req.headers()));
    let (parts, body) = req.into_parts();
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    // Which of the fields rewritten below are there, in one pass over the names: most
    // requests have none, and each look-up by name hashes it.
    let (mut cookie, mut te, mut xff) = (false, false, false);
    for k in headers.keys() {
        cookie |= k == header::COOKIE;
        te |= k == header::TRANSFER_ENCODING;
        xff |= k == X_FORWARDED_FOR;
    }
    if cookie {
        join_cookies(&mut headers);
    }
    if te {
        join_transfer_encoding(&mut headers);
    }
    let xff = if xff {
        forwarded_for(&headers, peer)
    } else {
        peer.clone()
    };
    headers.insert(X_FORWARDED_FOR, xff);
    // The first attempt sends the request's own header map (hyper's, with room to spare:
    // it comes back from the upstream connection to parse the response into), a retry a
    // copy of the one kept here.
    let kept = headers.clone();
    let mut first = Some(headers);
    let head = Head {
        method: parts.method,
        path_and_query: parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/")),
        headers: kept,
    };
    let start = Instant::now();
    let (decision, route) = {
        let draws = sh.draws();
        let now = sh.ms_at(start);
        let mut p = sh.policy.lock().expect("policy");
        let route = p.route_key(service, head.method.as_str(), head.path_and_query.path());
        let size = p.size_of(service, length, Some(&route));
        let d = p.choose_sized(service, size, unit.as_deref(), now, draws);
        if sh.explain {
            explain(&sh, &p, &head, service, false, &d);
        }
        (d, route)
    };
    let in_flight = InFlight::new(&sh.edge.in_flight);
    let mut body = Some(Up::Client(body));
    let mut d = decision;
    // Taken by the attempt that gets a response (its sizes are learnt once it completes).
    let mut route = Some(route);
    let mut at = start;
    let out = loop {
        let out = Outgoing {
            headers: first.take().unwrap_or_else(|| head.headers.clone()),
            body: body.take().unwrap_or(Up::Empty),
        };
        match attempt(&sh, d.replica, &head, out, d.timeout_ms, &mut route, at).await {
            Attempt::Ok(r) => break r,
            Attempt::Local => {
                sh.edge.failed.fetch_add(1, Relaxed);
                let mut r = local(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "nowcast proxy: out of descriptors, memory or local ports to reach the \
                     replica; try again\n",
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                break r;
            }
            Attempt::ClientFailed { stalled } => {
                sh.edge.failed.fetch_add(1, Relaxed);
                break if stalled {
                    local(
                        StatusCode::REQUEST_TIMEOUT,
                        "nowcast proxy: the request's body stopped arriving\n",
                    )
                } else {
                    local(
                        StatusCode::BAD_REQUEST,
                        "nowcast proxy: the request's body broke off or was malformed\n",
                    )
                };
            }
            Attempt::Failed { retryable } => {
                let next = if retryable {
                    let draws = sh.draws();
                    let now = sh.now_ms();
                    let mut p = sh.policy.lock().expect("policy");
                    let n = p.retry_sized(service, d.size, d.replica, now, draws);
                    if let (Some(n), true) = (&n, sh.explain) {
                        explain(&sh, &p, &head, service, true, n);
                    }
                    n
                } else {
                    None
                };
                match next {
                    Some(n) => {
                        d = n;
                        at = Instant::now();
                    }
                    None => {
                        sh.edge.failed.fetch_add(1, Relaxed);
                        break local(
                            StatusCode::BAD_GATEWAY,
                            "nowcast proxy: the replica failed or timed out\n",
                        );
                    }
                }
            }
        }
    };
    drop(in_flight);
    Ok(out)
}

/// What the proxy did, for its closing line.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub failed: u64,
    pub rejected: u64,
    pub explored: u64,
    pub decisions: u64,
    pub unfinished: usize,
}

/// A running proxy: where it listens, and how to stop it.
pub struct Running {
    pub addr: SocketAddr,
    stop: Arc<Notify>,
}

impl Running {
    pub fn stop(&self) {
        self.stop.notify_one();
    }
}

/// How client connections are served, HTTP/1.1 and HTTP/2 alike.
fn connections(
    max_header_bytes: usize,
    head_timeout: Duration,
) -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // One limit on a request's head for both protocols: HTTP/1.1's read buffer (431 above
    // it; hyper also refuses more than 100 header fields) and HTTP/2's
    // SETTINGS_MAX_HEADER_LIST_SIZE (431 on that stream only; the list size counts 32 bytes
    // a field on top of its name and value, and bounds the CONTINUATION frames too).
    let head_bytes = max_header_bytes.clamp(MIN_HEAD_BYTES, u32::MAX as usize);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout)
        .keep_alive(true)
        .max_buf_size(head_bytes);
    // Every HTTP/2 limit explicit, so that none moves with a hyper or h2 upgrade. No
    // keep-alive PINGs: the proxy's own idle limit (`client_idle`) closes a connection that
    // moves nothing, and PINGs would count as traffic and keep it open.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(head_bytes as u32)
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_RESETS)
        .max_local_error_reset_streams(H2_MAX_ERROR_RESETS)
        .initial_stream_window_size(H2_WINDOW)
        .initial_connection_window_size(H2_WINDOW)
        .adaptive_window(false)
        .max_frame_size(H2_MAX_FRAME)
        .max_send_buf_size(H2_SEND_BUFFER)
        .keep_alive_interval(None);
    builder
}

/// Binds and serves until `stop` (or SIGINT/SIGTERM when `signals`); then finishes the
/// requests in flight, for at most `grace`. `ready` is told the bound address first.
pub async fn serve(
    opts: Options,
    signals: bool,
    ready: impl FnOnce(&Running),
) -> std::io::Result<Summary> {
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("listen on {}: {e}", opts.listen)))?;
    let addr = listener.local_addr()?;
    let (specs, targets): (Vec<ReplicaSpec>, Vec<Target>) = opts.replicas.into_iter().unzip();
    let policy = Policy::new(opts.policy, specs, opts.services)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let (tx, writer) = opts.records.map(record_writer).unzip();
    let tick_ms = policy.probe_tick_ms();
    let policy_replicas = policy.replica_count();
    let prefixes = (0..policy.service_count())
        .map(|s| policy.service_prefix(s).to_string())
        .collect();
    let mut sticky = opts.sticky;
    sticky.resize(policy.service_count(), None);
    let sh = Arc::new(Shared {
        policy: Mutex::new(policy),
        rng: Mutex::new(Rng::new(opts.seed)),
        pools: targets
            .into_iter()
            .map(|t| Pool::new(t, 64, Duration::from_secs(30)))
            .collect(),
        prefixes,
        sticky,
        explain: opts.explain,
        probe_zeros: Zeros::new(opts.probe.bytes),
        probe: opts.probe,
        connect_timeout: opts.connect_timeout,
        tcp_info_rate: opts.tcp_info_rate,
        origin: Instant::now(),
        metrics_page: Mutex::new(None),
        wall0_ms: crate::clock::wall_ms(),
        edge: EdgeCounts::default(),
        clients: PerClient::new(opts.max_connections_per_client),
        records: tx,
        capture: opts.capture.as_ref().map(|c| c.counts()),
        probe_refusal_told: (0..policy_replicas)
            .map(|_| AtomicBool::new(false))
            .collect(),
    });
    let mut capture = opts.capture;
    let feeder = capture
        .as_mut()
        .and_then(super::capture::Capture::take_samples)
        .map(|rx| tokio::spawn(feed_wren(sh.clone(), rx)));
    let stop = Arc::new(Notify::new());
    // The signal handlers exist before the ready line: a SIGTERM right after it must stop
    // the proxy cleanly, not kill it.
    let handlers = if signals {
        use tokio::signal::unix::{signal, SignalKind};
        Some((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    } else {
        None
    };
    ready(&Running {
        addr,
        stop: stop.clone(),
    });
    let prober = tokio::spawn(run_probes(sh.clone(), tick_ms));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = connections(opts.max_header_bytes, opts.head_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(opts.max_connections.max(1)));
    let signal = async move {
        match handlers {
            Some((mut term, mut int)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(signal);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("semaphore"),
            _ = stop.notified() => break,
            _ = &mut signal => break,
        };
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    // Out of descriptors or a reset before accept: wait a little.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.notified() => break,
            _ = &mut signal => break,
        };
        // A client with its share open already: closed at once, with a reset (no
        // TIME_WAIT left on the proxy, not a byte sent, nothing read), before any state
        // for the connection exists. The global slot goes back with `permit`.
        let Some(client_slot) = sh.clients.admit(peer.ip()) else {
            sh.edge.refused_per_client.fetch_add(1, Relaxed);
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity {
            last: AtomicU64::new(sh.ns()),
            cut: AtomicBool::new(false),
        });
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: activity.clone(),
            origin: sh.origin,
        });
        let shc = sh.clone();
        // X-Forwarded-For's value for this client, made once per connection.
        let peer_ip = HeaderValue::from_str(&peer.ip().to_string()).expect("an address");
        // Set by the first request: until then the connection has `head_timeout` (the
        // version sniffing and an h2 preface have no timeout of their own).
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = started.clone();
        let svc = hyper::service::service_fn(move |req| {
            st.store(true, Relaxed);
            let (sh, ip) = (shc.clone(), peer_ip.clone());
            async move { handle(sh, req, &ip).await }
        });
        // HTTP/1.1, or HTTP/2 with prior knowledge (h2c), told apart by the connection's
        // first bytes; upstream stays HTTP/1.1.
        let conn = builder.serve_connection(io, svc).into_owned();
        let conn = graceful.watch(conn);
        let idle = opts.client_idle;
        let head_timeout = opts.head_timeout;
        let sh2 = sh.clone();
        sh.edge.connections.fetch_add(1, Relaxed);
        // The connection runs in a task of its own, and its deadlines (idle, first head) in
        // another that ends it when one passes: the connection's task, woken for each request,
        // then polls the connection alone, not two timers each time.
        let mut served = tokio::spawn(conn);
        tokio::spawn(async move {
            let watchdog = async {
                loop {
                    let now = sh2.ns();
                    let at = activity.last.load(Relaxed);
                    let due = at + idle.as_nanos() as u64;
                    if now >= due {
                        break;
                    }
                    tokio::time::sleep(Duration::from_nanos(due - now)).await;
                }
            };
            let first_head = async {
                tokio::time::sleep(head_timeout).await;
                if started.load(Relaxed) {
                    std::future::pending::<()>().await;
                }
            };
            let timed_out = tokio::select! {
                _ = &mut served => false,
                _ = watchdog => true,
                _ = first_head => true,
            };
            if timed_out {
                // Closed once its task is gone (with a reset: Watched's drop), before its
                // slots are given back.
                activity.cut.store(true, Relaxed);
                served.abort();
                let _ = served.await;
                sh2.edge.client_timeouts.fetch_add(1, Relaxed);
            }
            sh2.edge.connections.fetch_sub(1, Relaxed);
            drop(client_slot);
            drop(permit);
        });
    }
    drop(listener);
    let unfinished = sh.edge.in_flight.load(Relaxed) as usize;
    let finished = tokio::time::timeout(opts.grace, graceful.shutdown()).await;
    prober.abort();
    if let Some(f) = feeder {
        f.abort();
        let _ = f.await;
    }
    if let Some(c) = capture.as_mut() {
        c.stop();
    }
    let (explored, decisions) = {
        let p = sh.policy.lock().expect("policy");
        (p.explored, p.decisions)
    };
    let summary = Summary {
        requests: sh.edge.requests.load(Relaxed),
        failed: sh.edge.failed.load(Relaxed),
        rejected: sh.edge.rejected.load(Relaxed),
        explored,
        decisions,
        unfinished: if finished.is_ok() {
            0
        } else {
            unfinished.max(1)
        },
    };
    // Close the record channel so the writer ends, once every body holding the state is gone.
    if let Ok(shared) = Arc::try_unwrap(sh) {
        drop(shared);
    }
    if let Some(w) = writer {
        // Bodies still held by a connection past the grace keep a sender: do not wait forever.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !w.is_finished() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_probes_share_one_buffer_of_zeros() {
        let z = Zeros::new(256 << 10);
        let (a, b) = (z.get(), z.get());
        assert_eq!(a.len(), 256 << 10);
        assert!(a.iter().all(|&x| x == 0));
        assert_eq!(a.as_ptr(), b.as_ptr(), "one buffer, not one a probe");
    }

    #[test]
    fn proxy_joins_split_cookies_for_http1_upstreams() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::COOKIE, HeaderValue::from_static("unit=j7; b=2"));
        h.append(header::HOST, HeaderValue::from_static("x"));
        join_cookies(&mut h);
        let all: Vec<&str> = h
            .get_all(header::COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(all, ["a=1; unit=j7; b=2"]);
        let key = UnitKey::parse("cookie:unit").unwrap();
        assert_eq!(key.of(&Uri::from_static("/"), &h).as_deref(), Some("j7"));
        // One field is left as it is.
        let mut one = HeaderMap::new();
        one.append(header::COOKIE, HeaderValue::from_static("a=1"));
        join_cookies(&mut one);
        assert_eq!(one.get(header::COOKIE).unwrap(), "a=1");
    }
}
