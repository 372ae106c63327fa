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
    forwarded_for, has_dot_segment, join_cookies, join_transfer_encoding, lenient_path,
    normalized_path, strip_hop_by_hop, X_FORWARDED_FOR,
};
use super::metrics::{self, Edge};
use super::policy::{
    Decision, Done, Failure, Health, Policy, ReplicaSpec, ServiceSpec, Source, View,
};
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
    /// How long a client may take none of what the proxy has to send it (a response it does
    /// not read) before its connection is cut: nginx's `send_timeout`.
    pub send_timeout: Duration,
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
    /// Connections cut because their client took none of a response for `send_timeout`.
    slow_readers: AtomicU64,
    /// Requests in flight until their response's end (`in_flight` counts them until the
    /// head): what a shutdown waits for.
    active: AtomicU64,
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
/// at least 100, nginx's default is 128: 100, since each stream whose client reads nothing
/// holds up to [`H2_SEND_BUFFER`] and an upstream read buffer ([`super::upstream::READ_BUFFER`])
/// until `--send-timeout`. An HTTP/1.1 connection carries one request at a time.
pub const H2_MAX_STREAMS: u32 = 100;
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
/// Response bytes queued per stream for the socket, at most (hyper's default is 400 KiB): a
/// client that opens its windows wide and reads nothing had 400 KiB a stream queued for it,
/// 128 streams a connection (≈ 32 MB a connection in a review). Past it, the stream stops
/// taking its replica's body until the socket takes more: the kernel's socket buffer keeps
/// a fast path busy meanwhile.
pub const H2_SEND_BUFFER: usize = 64 << 10;
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
    /// Retries of one request at most ([`super::policy::Config::max_retries`]).
    max_retries: u32,
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
            (true, Health::Ejected { until_ms }, Some(f)) => crate::warn_line!(
                "nowcast proxy: replica {} ({}) ejected, the last failure: {}; tried again in {:.1} s",
                spec.name,
                spec.url,
                f.describe(),
                ((until_ms - d.now_ms) / 1e3).max(0.0)
            ),
            (false, Health::Up, _) => {
                crate::warn_line!("nowcast proxy: replica {} ({}) is back", spec.name, spec.url)
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
        crate::warn_line!(
            "nowcast proxy: replica {} ({}) answered the probe {} {} with {status}: no \
             bandwidth from its probes (see --probe-path)",
            spec.name,
            spec.url,
            head.method,
            head.path_and_query
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
/// proxy's own want of resources is not the replica's failure and is not retried. `out`:
/// the request, which never reached the replica, whole for a retry whatever its method.
fn unconnected(e: &ConnectError, out: Outgoing) -> (Failure, Attempt) {
    match e {
        ConnectError::Local(_) => (Failure::Local, Attempt::Local),
        ConnectError::Replica(_) => (
            Failure::Connect,
            Attempt::Failed {
                failure: Failure::Connect,
                unsent: Some(out),
                bodiless: true,
                waited_for_ms: None,
            },
        ),
    }
}

/// An attempt counted in flight at its replica (by its decision, or
/// [`Policy::probe_started`]) until the policy is told how it ended, however it ends. hyper
/// drops a request's future when its client goes away before the response head (an HTTP/1.1
/// client that closes, an HTTP/2 RST_STREAM): the attempt was then never told, and its
/// replica kept it in flight for ever (least-connections and P2C avoided it from then on, and
/// its completion forecast counted a backlog that was not there). Dropped still charged, it
/// tells the policy the client broke off ([`Failure::Client`]: not the replica's failure).
struct Charged<'a> {
    sh: &'a Shared,
    replica: usize,
    probe: bool,
    start: Instant,
    told: bool,
}

impl Charged<'_> {
    /// Tells the policy the attempt failed as `f` before a response head, after `up` bytes of
    /// its upload.
    fn tell(&mut self, f: Failure, wait_ms: Option<f64>, up: u64) {
        self.told = true;
        self.sh.finish(Done {
            replica: self.replica,
            now_ms: self.sh.now_ms(),
            probe: self.probe,
            bytes_up: up,
            bytes_down: 0,
            total_ms: self.start.elapsed().as_secs_f64() * 1e3,
            wait_ms,
            rtt_ms: None,
            base_rtt_ms: None,
            bandwidth: None,
            failure: Some(f),
        });
    }

    fn fail(mut self, f: Failure, wait_ms: Option<f64>, up: u64) {
        self.tell(f, wait_ms, up);
    }

    /// The response's body ([`Pending`]) tells the policy from now on.
    fn handed_over(mut self) {
        self.told = true;
    }
}

impl Drop for Charged<'_> {
    fn drop(&mut self) {
        if !self.told {
            self.tell(Failure::Client, None, 0);
        }
    }
}

// The response is returned by value once an attempt, and matched at once; boxed, it would
// cost an allocation a request.
#[allow(clippy::large_enum_variant)]
enum Attempt {
    Ok(Response<DownBody>),
    /// Failed before a response head, as `failure` says.
    Failed {
        failure: Failure,
        /// The request, whole, when it never reached the replica (no connection could be
        /// had): any method may go again with it.
        unsent: Option<Outgoing>,
        /// Sent, but nothing of its body was taken (it had none): an idempotent method may
        /// go again (RFC 9110 §9.2.2).
        bodiless: bool,
        /// How long the head was waited for, ms, when it timed out (the adaptive timeout, or
        /// the ceiling where no retry could go: [`Patience`]).
        waited_for_ms: Option<f64>,
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
            slow_readers: sh.edge.slow_readers.load(Relaxed),
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

/// A client's request's way out when its adaptive timeout passes: its service, and whether
/// a retry may send it again (its method is idempotent and it has retries left; its body is
/// known only to the attempt). Where no retry could go, the attempt waits on up to the
/// replica's ceiling ([`Policy::last_resort_ms`]).
#[derive(Clone, Copy)]
struct Patience {
    service: usize,
    may_retry: bool,
}

/// One attempt at `replica`, begun at `start`: connect, send, wait for the head within the
/// adaptive timeout (and, for a client's request that could be retried nowhere, `patience`,
/// on to the replica's ceiling). `route`: a client's request's, whose sizes it teaches if it
/// completes (None: a probe).
#[allow(clippy::too_many_arguments)]
async fn attempt(
    sh: &Arc<Shared>,
    replica: usize,
    head: &Head,
    out: Outgoing,
    timeout_ms: f64,
    patience: Option<Patience>,
    route: &mut Option<RouteKey>,
    start: Instant,
) -> Attempt {
    let probe = route.is_none();
    let charged = Charged {
        sh: sh.as_ref(),
        replica,
        probe,
        start,
        told: false,
    };
    let pool = &sh.pools[replica];
    let progress = Arc::new(Progress::default());
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
            let (failure, attempt) = unconnected(&e, out);
            charged.fail(failure, None, 0);
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
    let mut timeout_ns = (timeout_ms * 1e6) as u64;
    let mut extended = false;
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
            // The adaptive timeout is when to try another replica. Where no retry could go,
            // the request waits on, up to the replica's ceiling, and its wait, when the head
            // comes, is what the replica's timeout learns.
            if let Some(pt) = patience.filter(|_| !extended) {
                let last = sh.policy.lock().expect("policy").last_resort_ms(
                    pt.service,
                    replica,
                    sh.now_ms(),
                    pt.may_retry && bodiless,
                );
                if let Some(ceiling) = last.filter(|&c| c > timeout_ms) {
                    timeout_ns = (ceiling * 1e6) as u64;
                    extended = true;
                    continue;
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
                        // The request was not written: whole still, for a retry.
                        let (parts, body) = req.into_parts();
                        let out = Outgoing {
                            headers: parts.headers,
                            body: body.inner,
                        };
                        let (failure, attempt) = unconnected(&e, out);
                        charged.fail(failure, None, 0);
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
            charged.fail(Failure::Client, None, up);
            Attempt::ClientFailed { stalled: true }
        }
        Some(Err(_)) if progress.client_failed.load(Relaxed) => {
            charged.fail(Failure::Client, None, up);
            Attempt::ClientFailed { stalled: false }
        }
        None => {
            let w = wait_ms(sh.ns());
            charged.fail(Failure::Timeout, w, up);
            Attempt::Failed {
                failure: Failure::Timeout,
                unsent: None,
                bodiless,
                waited_for_ms: Some(timeout_ns as f64 / 1e6),
            }
        }
        Some(Err(_)) => {
            charged.fail(Failure::Reset, wait_ms(sh.ns()), up);
            Attempt::Failed {
                failure: Failure::Reset,
                unsent: None,
                bodiless,
                waited_for_ms: None,
            }
        }
        // 101 to a request that asked for no upgrade (the proxy drops `Upgrade`): the
        // connection now speaks something else, and passed down it would leave the client's
        // connection with a final response that is not one (HTTP/2 has no 101 at all).
        // hyper's client reads past every other 1xx.
        Some(Ok(resp)) if resp.status().is_informational() => {
            charged.fail(Failure::Status, wait_ms(sh.ns()), up);
            Attempt::Failed {
                failure: Failure::Status,
                unsent: None,
                bodiless,
                waited_for_ms: None,
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
            charged.handed_over();
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
/// view as the policy saw it when it chose (`views`, taken before the choice: after it, the
/// chosen replica's time counted the request itself, in flight, and read as if a slower
/// replica had been "best"); `p` is the policy, still locked by the caller.
fn explain(
    sh: &Shared,
    p: &Policy,
    head: &Head,
    s: usize,
    retry: bool,
    d: &Decision,
    views: Vec<View>,
) {
    let now = sh.now_ms();
    let line = serde_json::json!({
        "timestamp_ms": now,
        "method": head.method.as_str(),
        "path": head.path_and_query.as_str(),
        "service": p.service_prefix(s),
        "retry": retry,
        "balance": p.service_config(s).balance.name(),
        "size_bytes": d.size.bytes.round() as u64,
        "size_from": d.size.from.name(),
        "size_samples": d.size.samples,
        "request_bytes": d.size.request_bytes,
        "chose": p.spec(d.replica).name,
        "reason": d.reason.name(),
        "timeout_ms": d.timeout_ms,
        "replicas": views,
    });
    crate::warn_line!("{line}");
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
    let Some(service) = (match route_path(&sh.prefixes, path) {
        Ok(s) => s,
        Err(read_as) => {
            sh.edge.rejected.fetch_add(1, Relaxed);
            return Ok(local(
                StatusCode::BAD_REQUEST,
                format!(
                    "nowcast proxy: the path {path} is routed to another service than the one \
                     of {read_as}, as a server may read it (an encoded '/' or '\\', or a ';' \
                     parameter in a segment); send it without them\n"
                ),
            ));
        }
    }) else {
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
        let views = sh.explain.then(|| p.views(service, size.bytes, now));
        let d = p.choose_sized(service, size, unit.as_deref(), now, draws);
        if let Some(views) = views {
            explain(&sh, &p, &head, service, false, &d, views);
        }
        (d, route)
    };
    let in_flight = InFlight::new(&sh.edge.in_flight);
    let mut body = Some(Up::Client(body));
    let mut d = decision;
    // Taken by the attempt that gets a response (its sizes are learnt once it completes).
    let mut route = Some(route);
    let mut at = start;
    // The replicas tried and how each failed, for the answer when all did.
    let mut tried: Vec<(usize, Failure, f64)> = Vec::new();
    let out = loop {
        let out = Outgoing {
            headers: first.take().unwrap_or_else(|| head.headers.clone()),
            body: body.take().unwrap_or(Up::Empty),
        };
        let patience = Patience {
            service,
            may_retry: idempotent(&head.method) && tried.len() < sh.max_retries as usize,
        };
        let timeout_ms = d.timeout_ms;
        match attempt(
            &sh,
            d.replica,
            &head,
            out,
            timeout_ms,
            Some(patience),
            &mut route,
            at,
        )
        .await
        {
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
            Attempt::Failed {
                failure,
                unsent,
                bodiless,
                waited_for_ms,
            } => {
                tried.push((d.replica, failure, waited_for_ms.unwrap_or(d.timeout_ms)));
                // Sent again only if it never reached the replica, or if sending it twice
                // does no harm (an idempotent method whose body, if any, was not taken): a
                // POST that timed out may have been carried out. At most `max_retries`
                // times, each to another replica that is up, within the budget.
                let again = unsent.is_some() || (bodiless && idempotent(&head.method));
                let next = if again && tried.len() <= sh.max_retries as usize {
                    let draws = sh.draws();
                    let now = sh.now_ms();
                    let mut p = sh.policy.lock().expect("policy");
                    let views = sh.explain.then(|| p.views(service, d.size.bytes, now));
                    let n = p.retry_sized(service, d.size, d.replica, now, draws);
                    if let (Some(n), Some(views)) = (&n, views) {
                        explain(&sh, &p, &head, service, true, n, views);
                    }
                    n
                } else {
                    None
                };
                match next {
                    Some(n) => {
                        if let Some(o) = unsent {
                            first = Some(o.headers);
                            body = Some(o.body);
                        }
                        d = n;
                        at = Instant::now();
                    }
                    None => {
                        sh.edge.failed.fetch_add(1, Relaxed);
                        let why = match (again, idempotent(&head.method)) {
                            (true, _) => None,
                            (false, true) => Some(
                                "; not retried: its body went to the replica, and the proxy \
                                 keeps no copy"
                                    .to_string(),
                            ),
                            (false, false) => Some(format!(
                                "; not retried: the {} reached the replica, and sending it \
                                 again could repeat what it does",
                                head.method
                            )),
                        };
                        break gave_up(&sh, &tried, why.as_deref());
                    }
                }
            }
        }
    };
    drop(in_flight);
    Ok(out)
}

/// Whether a request of `method` may be sent again once it reached a replica: the idempotent
/// methods of RFC 9110 §9.2.2 (GET, HEAD, OPTIONS, TRACE, PUT, DELETE).
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// The answer to a request whose every attempt failed (`tried`: each replica, how it failed,
/// and its timeout): 504 when the last one timed out, else 502, saying which replica failed
/// and why. `not_retried`: why it was not sent again, when that is the request's doing.
fn gave_up(
    sh: &Shared,
    tried: &[(usize, Failure, f64)],
    not_retried: Option<&str>,
) -> Response<DownBody> {
    let mut text = String::from("nowcast proxy: ");
    {
        let p = sh.policy.lock().expect("policy");
        for (i, &(r, f, timeout_ms)) in tried.iter().enumerate() {
            if i > 0 {
                text.push_str("; retried on ");
            }
            // The only status an attempt fails on before its head: an unasked-for 1xx.
            let how = match f {
                Failure::Status => "it answered 101 to a request that asked for no upgrade",
                f => f.describe(),
            };
            text.push_str(&format!("replica {}: {how}", p.spec(r).name));
            if f == Failure::Timeout {
                text.push_str(&format!(" ({:.1} s)", timeout_ms / 1e3));
            }
        }
    }
    if let Some(why) = not_retried {
        text.push_str(why);
    }
    text.push('\n');
    let timed_out = tried.last().is_some_and(|t| t.1 == Failure::Timeout);
    let status = if timed_out {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::BAD_GATEWAY
    };
    local(status, text)
}

/// The service of `path` (the index of its prefix in `prefixes`), matched as a replica reads
/// the path ([`normalized_path`]: `//api/x` and `/%61pi/x` are `/api/x`, routed as it is);
/// `Err` with the path as a lenient server reads it ([`lenient_path`]: `/api%2fx` and
/// `/api;x/y` as `/api/x` and `/api/y`) where that is another service's path: a replica of
/// the service it is routed to could serve it as a path of the other (the routing confusion
/// of Envoy's CVE-2019-9901, as the dot-segments refused before routing).
fn route_path(prefixes: &[String], path: &str) -> Result<Option<usize>, String> {
    let route = |p: &str| super::policy::route(prefixes.iter().map(String::as_str), p);
    let normal = normalized_path(path);
    let service = route(&normal);
    match lenient_path(&normal) {
        Some(lenient) if route(&lenient) != service => Err(lenient),
        _ => Ok(service),
    }
}

/// Gives the memory of connections that closed back to the system: the allocator (glibc's)
/// keeps what was freed for the next allocations, and the proxy's resident memory stayed at
/// its peak after the clients that made it left (300 stalled downloads: 11 MB before, 35 MB
/// after). Looked at every few seconds; trimmed when the connections open and the requests
/// in flight fell by at least 32 and by half since their peak since the last trim (a few ms
/// of one thread, rarely).
async fn give_back_memory(sh: Arc<Shared>) {
    let mut peak = 0u64;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let open = sh.edge.connections.load(Relaxed) + sh.edge.active.load(Relaxed);
        peak = peak.max(open);
        if peak >= open + 32 && open <= peak / 2 {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only returns free memory of the allocator's heaps.
            unsafe {
                libc::malloc_trim(0);
            }
            peak = open;
        }
    }
}

/// How a client connection's task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// hyper closed it (the client did, or a shutdown's last response went out).
    Served,
    /// It moved nothing for `--client-idle`, or sent no first head in time.
    Idle,
    /// Its client took none of a response for `--send-timeout`.
    SlowReader,
    /// Nothing in flight on it at a shutdown.
    Shutdown,
}

/// How long a connection with nothing in flight is quiet at a shutdown before the proxy
/// closes it: its last response and hyper's GOAWAY have left by then.
const SHUTDOWN_QUIET: Duration = Duration::from_millis(200);

/// A request counted in flight on its connection and in all, from the moment hyper hands
/// it over until hyper is done with its response's body (or drops the request before one).
struct Active {
    sh: Arc<Shared>,
    conn: Arc<Activity>,
}

impl Active {
    fn new(sh: &Arc<Shared>, conn: &Arc<Activity>) -> Active {
        conn.active.fetch_add(1, Relaxed);
        sh.edge.active.fetch_add(1, Relaxed);
        Active {
            sh: sh.clone(),
            conn: conn.clone(),
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.conn.active.fetch_sub(1, Relaxed);
        self.sh.edge.active.fetch_sub(1, Relaxed);
    }
}

/// A response on its way to its client, counted in flight ([`Active`]) until hyper drops it.
struct Held {
    inner: DownBody,
    _active: Active,
}

impl Body for Held {
    type Data = Bytes;
    type Error = super::body::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
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
    let max_retries = policy.config().max_retries;
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
        max_retries,
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
    let trimmer = tokio::spawn(give_back_memory(sh.clone()));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let (shutting_tx, shutting_rx) = tokio::sync::watch::channel(false);
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
            blocked: AtomicU64::new(0),
            active: AtomicU64::new(0),
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
        let act = activity.clone();
        let svc = hyper::service::service_fn(move |req| {
            st.store(true, Relaxed);
            let (sh, ip) = (shc.clone(), peer_ip.clone());
            let active = Active::new(&sh, &act);
            async move {
                let r = handle(sh, req, &ip).await;
                r.map(|r| {
                    r.map(|inner| Held {
                        inner,
                        _active: active,
                    })
                })
            }
        });
        // HTTP/1.1, or HTTP/2 with prior knowledge (h2c), told apart by the connection's
        // first bytes; upstream stays HTTP/1.1.
        let conn = builder.serve_connection(io, svc).into_owned();
        let conn = graceful.watch(conn);
        let idle = opts.client_idle.as_nanos() as u64;
        let send_timeout = opts.send_timeout.as_nanos() as u64;
        let head_timeout = opts.head_timeout;
        let sh2 = sh.clone();
        let mut shutting = shutting_rx.clone();
        sh.edge.connections.fetch_add(1, Relaxed);
        // The connection runs in a task of its own, and its deadlines (idle, a response the
        // client does not take, first head) in another that ends it when one passes: the
        // connection's task, woken for each request, then polls the connection alone, not
        // two timers each time.
        let mut served = tokio::spawn(conn);
        tokio::spawn(async move {
            let watchdog = async {
                loop {
                    let now = sh2.ns();
                    let idle_due = activity.last.load(Relaxed) + idle;
                    if now >= idle_due {
                        break Ended::Idle;
                    }
                    // Blocked: the socket took none of what the proxy has to send since then.
                    // Not blocked now: no cut can be due before a send timeout from now.
                    let blocked = activity.blocked.load(Relaxed);
                    let send_due = if blocked > 0 {
                        blocked + send_timeout
                    } else {
                        now + send_timeout
                    };
                    if blocked > 0 && now >= send_due {
                        break Ended::SlowReader;
                    }
                    let due = idle_due.min(send_due);
                    tokio::time::sleep(Duration::from_nanos(due - now)).await;
                }
            };
            let first_head = async {
                tokio::time::sleep(head_timeout).await;
                if started.load(Relaxed) {
                    std::future::pending::<()>().await;
                }
                Ended::Idle
            };
            // At shutdown, hyper tells the client (HTTP/2: GOAWAY) and closes the connection
            // once its last response is out, but an HTTP/2 client must first answer a PING,
            // which one that reads nothing never does: it held the shutdown for the whole
            // grace. A connection with no request in flight, quiet for a moment (its last
            // response written out, the GOAWAY too) is closed here.
            let quiet_at_shutdown = async {
                if shutting.wait_for(|s| *s).await.is_err() {
                    std::future::pending::<()>().await;
                }
                loop {
                    let now = sh2.ns();
                    let quiet_since = activity.last.load(Relaxed);
                    if activity.active.load(Relaxed) == 0
                        && activity.blocked.load(Relaxed) == 0
                        && now.saturating_sub(quiet_since) >= SHUTDOWN_QUIET.as_nanos() as u64
                    {
                        break Ended::Shutdown;
                    }
                    tokio::time::sleep(SHUTDOWN_QUIET / 4).await;
                }
            };
            let ended = tokio::select! {
                _ = &mut served => Ended::Served,
                e = watchdog => e,
                e = first_head => e,
                e = quiet_at_shutdown => e,
            };
            if ended != Ended::Served {
                // Closed once its task is gone, before its slots are given back; cut off
                // (idle, a slow reader, no first head) with a reset: Watched's drop.
                activity.cut.store(ended != Ended::Shutdown, Relaxed);
                served.abort();
                let _ = served.await;
                match ended {
                    Ended::Idle => {
                        sh2.edge.client_timeouts.fetch_add(1, Relaxed);
                    }
                    Ended::SlowReader => {
                        sh2.edge.client_timeouts.fetch_add(1, Relaxed);
                        sh2.edge.slow_readers.fetch_add(1, Relaxed);
                    }
                    Ended::Served | Ended::Shutdown => {}
                }
            }
            sh2.edge.connections.fetch_sub(1, Relaxed);
            drop(client_slot);
            drop(permit);
        });
    }
    drop(listener);
    let _ = shutting_tx.send(true);
    let finished = tokio::time::timeout(opts.grace, graceful.shutdown()).await;
    // The requests still going when the grace ran out (their responses unfinished), not the
    // connections: an idle one is no request in flight.
    let unfinished = sh.edge.active.load(Relaxed) as usize;
    prober.abort();
    trimmer.abort();
    // Gone before the state is unwrapped below (each holds it).
    let _ = prober.await;
    let _ = trimmer.await;
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
        unfinished: if finished.is_ok() { 0 } else { unfinished },
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
