//! The proxy's choice of replica, as a deterministic core (Zangrilli & Lowekamp, "Using
//! passive traces of application traffic in a network monitoring system", §4–5): measurements
//! of each replica's path in, decisions and records out. No socket, no clock: the edge passes
//! the time (ms) and the random draws, so a scripted trace replays exactly.
//!
//! Per replica, fed from the traffic the proxy carries and from its own probes:
//! - available bandwidth, from Wren's lower bounds when a capture of the upstream traffic is
//!   available (§3.2, [`Source::Wren`]), else the kernel's TCP_INFO delivery rate of the
//!   upstream connection ([`Source::TcpInfo`]), else the transfer's own bytes over time
//!   ([`Source::Transfer`]); each source its own probed series, forecast by the bank;
//! - the RTT, a probed series of its own;
//! - the time from the end of a request's upload to the response head ("wait"), whose
//!   forecast sets the replica's request timeout with one of the library's adaptive rules
//!   (Allen, Wolski & Plank §3; algorithms.md §2);
//! - the replica's time to answer ("think"): the waits of requests with small bodies, less
//!   the path's least RTT ([`THINK_UPLOAD_MAX`]).
//!
//! Choice (§5): the lowest forecast completion time for the request's size (RTT + think +
//! size ÷ bandwidth: a replica that takes 500 ms to answer is not the fastest for its fast
//! path; by default the point forecasts, the least expected time; with `error_k` > 0
//! `core::rank`'s worst case at `error_k` errors, averse to risk), or by flag
//! the highest forecast bandwidth (the paper's rule). A share ε of requests goes to an
//! alternate so that no estimate goes stale (§4: "the proxy will divert a small fraction of
//! requests to alternate servers"), and a replica with no sample younger than the TTL gets an
//! active probe. A replica that fails `eject_after` times in a row (connect error, reset,
//! timeout, a response stalled mid-body, 502–504) is ejected, then probed again after a
//! backoff that doubles while it keeps failing. A unit of work stays with its replica ([`Sticky`]). Retries spend a token
//! ([`RetryBudget`]).
//!
//! The worst case's spread is each forecast's lower semideviation over its last
//! `error_window` (20) errors ([`Shortfalls`]): the root mean square of the shortfalls only
//! (bandwidth below its forecast, RTT above it), the one-sided risk measure of Markowitz
//! (1959, ch. 9) for a one-sided bound, over a window as the library's windowed timeout rule
//! keeps one (`windowed_k2_w20`), so that a replica that got better is not made to look
//! riskier by it. With `error_window` 0 it is the forecast's whole-history RMSE, which holds
//! the jump at a change and the old regime's noise for as long as the history lasts
//! (BENCHMARKS.md, "The worst case's spread").
//!
//! The size timed is the request's plus the proxy's own bytes still in flight to that replica
//! that it would share the path with ([`shared_bytes`], [`backlog_at`]): a fluid backlog each
//! request and probe fills and the forecast bandwidth drains, of which a flow in flight counts
//! at most the new request's size (processor sharing), so that concurrent transfers do not all
//! herd to the replica with the lowest forecast. ε-exploration skips an alternate whose probe
//! is under way (the two would share its path).
//!
//! The RTT is the path's least ([`Done::rtt_ms`]) and a transfer's bandwidth is its bytes over
//! its time less one such RTT, so that RTT + size ÷ bandwidth gives back a transfer's time and
//! the queue a transfer builds is counted once, in its bandwidth.
//!
//! Settings: the policy's [`Config`] is the default of every service; a service may have its
//! own (`ServiceSpec::settings`, from `[[service]]` tables of `nowcast proxy --config`). The
//! choice (rule, ε, error weight, size assumed) is the service's; what a replica keeps (its
//! TTL, error window, ejection and timeout) is the replica's, set by the services that list
//! it, which must agree on it (one replica, one state: [`Policy::new`] refuses otherwise).
//!
//! The comparison policies of the emulated-link experiment are here too, so that every one
//! sees the same inputs: round-robin, least connections, power of two choices with peak-EWMA
//! latency (Finagle's `P2CPeakEwma`: latency EWMA with decay τ that jumps to any higher
//! sample, times the requests in flight + 1) and the nearest replica (lowest RTT, chosen
//! once).

//!
//! Files by concept: `config.rs` (the settings, the services and building the policy from
//! them), `choice.rs` (where a request goes: the rules, exploration, sticky units,
//! retries), `forecast.rs` (each replica's estimates, the backlog and the views `--explain`
//! and `/metrics` show), `sizes.rs` (the size a request is timed for), `health.rs` (what
//! an attempt's end teaches: samples, failures, ejection), `probes.rs` (the active probes
//! and the samples taken outside requests) and `timeouts.rs` (the request timeout and the
//! limit of a stalled response).

mod choice;
mod config;
mod forecast;
mod health;
mod probes;
mod sizes;
#[cfg(test)]
mod testing;
mod timeouts;

pub use choice::{Decision, Reason};
pub use config::{route, Balance, Config, ReplicaSpec, ServiceSpec};
pub use forecast::{backlog_at, shared_bytes, Shortfalls, View};
pub use health::{Counters, Done, Failure, Health};
pub use timeouts::{stall_limit_ms, STALL_FLOOR_MS};

use super::budget::{estimate_size, Learned, RetryBudget, RouteKey, Routes, Size, Sticky};
use nowcast_core::probed::{self, Observation, Outcome, ProbedSeries};
use nowcast_core::rank::{self, Estimate, Site};
use nowcast_core::record::{Metric, Probe, Record, Transport};
use nowcast_core::timeout::{Bounds, Rule};
use nowcast_core::{Mode, Series};
use serde::Serialize;

/// The records' `source`.
pub const SOURCE: &str = "nowcast proxy";

/// RTT and wait samples a replica takes from every request before
/// [`Config::sample_gap_ms`] spaces them: its forecasts and timeout learn from a burst at
/// the start as they did from every request.
pub const WARM_SAMPLES: u64 = 100;

/// The largest request body whose wait times the replica's answer ([`Replica::think`]): a
/// body that fits a path's first flights is sent before the replica can answer, so its wait
/// is a round trip and the replica's own time; a larger upload's wait also holds the drain
/// of the bytes still queued on the path, which its bandwidth already counts.
pub const THINK_UPLOAD_MAX: u64 = 64 * 1024;

/// Most replicas in all. Each keeps its forecasts, made on its first sample: ≈ 100 KB once
/// it has an RTT and a wait (two forecaster banks), up to ≈ 390 KB with bandwidth from all
/// three sources, and the edge keeps a connection to it alive (two descriptors). 1,024 of them
/// measured take 100 to 400 MB; a generated config that lists 50,000 by mistake would have
/// taken 5 to 20 GB, and is refused instead.
pub const MAX_REPLICAS: usize = 1_024;

/// Most replicas one service lists (a name listed twice counts twice). Every request scores
/// each replica of its service under the policy's lock: ≈ 16 µs for 256, 0.1 ms for 1,024
/// (at most ≈ 10,000 requests a second), 2.4 ms for 4,096.
pub const MAX_SERVICE_REPLICAS: usize = 1_024;

/// Most services: every request's path is matched against each prefix.
pub const MAX_SERVICES: usize = 1_024;

/// Most active probes [`Policy::due_probes`] starts at once, unless a quarter of the probed
/// replicas is more (the prober looks four times a TTL, so that each can still be probed
/// once a TTL): a thousand replicas are probed in four waves a quarter of a TTL apart, not
/// with a thousand connections opened at the same instant; up to 64, all at once.
pub const PROBE_BURST: usize = 64;

/// Where a bandwidth sample came from, in the order of preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Wren's lower bound on the available bandwidth, from a capture (§3.2).
    Wren,
    /// The kernel's delivery rate of the upstream connection (TCP_INFO).
    TcpInfo,
    /// Bytes over the time the transfer took, measured by the proxy.
    Transfer,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::Wren, Source::TcpInfo, Source::Transfer];

    pub fn name(self) -> &'static str {
        match self {
            Source::Wren => "wren",
            Source::TcpInfo => "tcp_info",
            Source::Transfer => "transfer",
        }
    }

    /// The metric of its records.
    pub fn metric(self, upload: bool) -> Metric {
        match self {
            Source::Wren => Metric::AvailBwLowerBound,
            Source::TcpInfo | Source::Transfer if upload => Metric::BandwidthUp,
            _ => Metric::BandwidthDown,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

struct Replica {
    spec: ReplicaSpec,
    /// The settings of the services that list it (they agree on what a replica keeps).
    cfg: Config,
    /// Whether a service that lists it chooses by forecasts (or the nearest), and so probes.
    probed: bool,
    /// Its series, each made on its first sample (a forecaster bank is ≈ 47 KB, a rate's
    /// series two of them): a replica never measured keeps none, and one that has none
    /// answers as a new series would (no forecast, the initial timeout). Boxed, so that an
    /// empty one takes a pointer, not the series' few KB.
    bw: [Option<Box<ProbedSeries>>; 3],
    bw_last_ms: [Option<f64>; 3],
    bw_short: [Shortfalls; 3],
    rtt: Option<Box<ProbedSeries>>,
    rtt_short: Shortfalls,
    /// The newest least RTT of its connections ([`Done::base_rtt_ms`]).
    base_rtt_ms: Option<f64>,
    /// The wait's series, tracking only the timeout rule in use ([`wait_series`]).
    wait: Option<Box<Series>>,
    /// Its time to answer: the waits of requests with small bodies less the path's least
    /// RTT ([`THINK_UPLOAD_MAX`]), which a completion time adds to the path's own.
    think: Option<Box<Series>>,
    last_sample_ms: Option<f64>,
    /// When a request's RTT and wait were last fed to the series, and how many were.
    last_fed_ms: Option<f64>,
    fed: u64,
    inflight: u32,
    /// The proxy's own bytes still to cross the path to it, as (bytes, when): a fluid queue
    /// that each request and probe sent there fills by its size and that drains at the
    /// forecast bandwidth ([`backlog_at`]); empty when nothing is in flight.
    backlog: (f64, f64),
    health: Health,
    failures_in_row: u32,
    backoff_ms: f64,
    probing: bool,
    /// Peak EWMA of completion time (ms) and when it was last updated.
    ewma: Option<(f64, f64)>,
    counters: Counters,
}

struct Service {
    spec: ServiceSpec,
    cfg: Config,
    rr: usize,
    nearest: Option<usize>,
    /// What its completed exchanges moved, for a request whose route is not known
    /// ([`estimate_size`]).
    sizes: Learned,
}

/// The policy: every replica's state, the services, the sticky table and the retry budget.
pub struct Policy {
    cfg: Config,
    replicas: Vec<Replica>,
    services: Vec<Service>,
    /// What each route (service, method, path) moved, for the sizes of its requests.
    routes: Routes,
    sticky: Sticky,
    pub budget: RetryBudget,
    /// Requests chosen by a forecast rule, and how many of them explored.
    pub decisions: u64,
    pub explored: u64,
    /// Most probes started at once ([`PROBE_BURST`]), and the replica the next look for due
    /// probes starts from: the one after the last taken by a look that took that many.
    probe_burst: usize,
    probe_next: usize,
    /// [`Policy::pick`]'s list of the replicas it may take, kept between requests.
    choices: Vec<usize>,
}

fn series(metric: Metric, to: &str) -> ProbedSeries {
    let c = probed::Config::new(metric, Some(Transport::Http), SOURCE, to);
    ProbedSeries::new(c).expect("the profiles' bounds are valid")
}

impl Policy {
    pub fn replica_count(&self) -> usize {
        self.replicas.len()
    }

    pub fn spec(&self, r: usize) -> &ReplicaSpec {
        &self.replicas[r].spec
    }

    /// Replica `r`'s health as its last attempt left it (an ejection whose backoff is over
    /// still reads as one until the next decision makes it a trial).
    pub fn health(&self, r: usize) -> Health {
        self.replicas[r].health
    }

    pub fn counters(&self, r: usize) -> &Counters {
        &self.replicas[r].counters
    }

    pub fn service_prefix(&self, s: usize) -> &str {
        &self.services[s].spec.prefix
    }

    pub fn service_count(&self) -> usize {
        self.services.len()
    }

    /// The service whose prefix is the longest that `path` starts with (at a `/` boundary).
    pub fn route(&self, path: &str) -> Option<usize> {
        route(self.services.iter().map(|s| s.spec.prefix.as_str()), path)
    }
}
