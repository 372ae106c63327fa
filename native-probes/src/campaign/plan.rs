//! A campaign as data (Cloudflare speedtest's plan-as-data): the targets, the probe types
//! with their parameters, when each runs, and the jobs (one probe on one target) the
//! scheduler drives. The configuration reader (`campaign::config`) builds a [`Plan`]; the
//! scheduler and the runner only read it.
//!
//! Every run's longest duration is computed here, before it starts ([`Kind::bound_ms`]), so
//! that the scheduler can kill a run that overruns it (IEPM-BW §III.A.3: "each and every
//! probe must have a time out mechanism").
//!
//! Adding a probe type is one variant of [`Kind`] (with its parameters, metrics and bound)
//! and one module under `campaign/probes/` that runs it.
//!
//! Deterministic core: plain data and arithmetic.

use super::cron::Cron;
use crate::format::bytes;
use crate::runlog::{Outcome, RunLog};
use crate::when::{exact, Ms, SECOND};
use nowcast_core::record::{Metric, Probe, Record, Status, Transport};
use std::collections::BTreeMap;

/// One host probed by the campaign.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The name in reports and `status`; unique.
    pub name: String,
    /// Host name or address.
    pub host: String,
    /// `nowcast serve`'s TCP port.
    pub port: u16,
    /// `nowcast serve`'s UDP port (usually the same).
    pub udp_port: u16,
    /// iperf3's server port.
    pub iperf3_port: u16,
    /// `nowcast fobs recv`'s port (TCP control and UDP data).
    pub fobs_port: u16,
    /// The token of the target's `nowcast fobs recv` (32 hex digits), when it has one of
    /// its own; it overrides the probe's.
    pub fobs_token: Option<String>,
    /// The URL of the HTTP download probe, when the target has one.
    pub url: Option<String>,
    pub groups: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

impl Target {
    /// `host:port` with IPv6 literals in brackets.
    pub fn address(&self, port: u16) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }

    /// What the records of `kind` name in `to`.
    pub fn record_to(&self, kind: &Kind) -> String {
        match kind {
            Kind::Tcp(_) => self.address(self.port),
            Kind::Udp(_) => self.address(self.udp_port),
            Kind::Iperf3(p) => self.address(p.port.unwrap_or(self.iperf3_port)),
            Kind::Http(p) => p.url_for(self),
            Kind::Ping(_) => self.host.clone(),
            Kind::Fobs(p) => self.address(p.port.unwrap_or(self.fobs_port)),
        }
    }
}

/// Which way a transfer moves its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
    Both,
}

/// `nowcast tcp`'s session: handshake, RTT with Nagle off and on, and, with `size`, the
/// bandwidth probe (JavaNws §2.1.1).
#[derive(Clone, Debug, PartialEq)]
pub struct TcpParams {
    /// Bandwidth probe payload in bytes; `None` for the round trips only.
    pub size: Option<u64>,
    pub direction: Direction,
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
}

/// `nowcast udp`'s burst: RTT, jitter and loss.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpParams {
    pub probes: u64,
    pub interval_ms: Ms,
    pub size: usize,
}

/// A timed HTTP download (`bandwidth_down`).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpParams {
    /// The URL, or a template with `{host}`; `None` takes the target's `url`.
    pub url: Option<String>,
    /// Bytes read at most (the rest is not downloaded).
    pub max_bytes: u64,
}

impl HttpParams {
    pub fn url_for(&self, t: &Target) -> String {
        match &self.url {
            Some(u) => u.replace("{host}", &t.host),
            None => t.url.clone().unwrap_or_default(),
        }
    }
}

/// `iperf3 -c … -J`: TCP throughput with `streams` parallel streams and a window, as
/// IEPM-BW ran iperf (§II.A, §III.D).
#[derive(Clone, Debug, PartialEq)]
pub struct Iperf3Params {
    pub duration_s: u32,
    pub streams: u32,
    /// Socket buffer / window (`-w`), bytes.
    pub window: Option<u64>,
    /// Server to client (`-R`).
    pub reverse: bool,
    /// Overrides the target's iperf3 port.
    pub port: Option<u16>,
    /// The command to run (default `iperf3`).
    pub program: String,
}

/// `ping -c N`: RTT (the average), jitter (mdev) and loss.
#[derive(Clone, Debug, PartialEq)]
pub struct PingParams {
    pub count: u32,
    pub interval_ms: Ms,
    pub size: Option<u32>,
    pub program: String,
}

/// A FOBS transfer (Dickens §2–5, `nowcast fobs send`) of `size` bytes to the target's
/// `nowcast fobs recv`: its goodput, the share of packets lost, and one record per
/// congestion event with the loss classifier's reading.
#[derive(Clone, Debug, PartialEq)]
pub struct FobsParams {
    /// Bytes sent.
    pub size: u64,
    /// The rate to start at, bytes/s.
    pub rate: f64,
    /// The highest rate, bytes/s.
    pub max_rate: f64,
    /// The slowest rate the bound allows for (bytes/s): a run is given the time to send
    /// `size` at this rate, and no more.
    pub min_rate: f64,
    /// Payload bytes per packet.
    pub packet: u16,
    /// Packets per signature and most packets per transmission window.
    pub window: u32,
    /// The loss classifier on (CPU loss not answered) or off (all loss answered).
    pub classifier: bool,
    /// The receivers' token when a target has none of its own.
    pub token: Option<String>,
    /// Overrides the target's `fobs_port`.
    pub port: Option<u16>,
}

impl FobsParams {
    /// The time to send `size` bytes at `rate` bytes/s, ms (rounded up).
    fn send_ms(&self, rate: f64) -> Ms {
        (self.size as f64 * 1e3 / rate.max(1.0)).ceil() as Ms
    }
}

/// A probe type and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Tcp(TcpParams),
    Udp(UdpParams),
    Http(HttpParams),
    Iperf3(Iperf3Params),
    Ping(PingParams),
    Fobs(FobsParams),
}

impl Kind {
    /// The name of the type in configurations.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Tcp(_) => "tcp",
            Kind::Udp(_) => "udp",
            Kind::Http(_) => "http",
            Kind::Iperf3(_) => "iperf3",
            Kind::Ping(_) => "ping",
            Kind::Fobs(_) => "fobs",
        }
    }

    /// The records' `source`.
    pub fn source(&self) -> &'static str {
        match self {
            Kind::Tcp(_) => "nowcast tcp",
            Kind::Udp(_) => "nowcast udp",
            Kind::Http(_) => "nowcast http",
            Kind::Iperf3(_) => "iperf3",
            Kind::Ping(_) => "ping",
            Kind::Fobs(_) => crate::fobs::record::SOURCE,
        }
    }

    pub fn transport(&self) -> Option<Transport> {
        match self {
            Kind::Tcp(_) | Kind::Iperf3(_) => Some(Transport::Tcp),
            Kind::Udp(_) => Some(Transport::Udp),
            Kind::Http(_) => Some(Transport::Http),
            Kind::Ping(_) => None,
            Kind::Fobs(_) => Some(Transport::Fobs),
        }
    }

    /// The series a run produces, in order: a run that fails or is killed, skipped or
    /// missed gets one record of each, with the reason.
    pub fn metrics(&self) -> Vec<Metric> {
        match self {
            Kind::Tcp(p) => {
                let mut m = vec![Metric::HandshakeRtt, Metric::Rtt, Metric::RttNagle];
                if p.size.is_some() {
                    m.extend(match p.direction {
                        Direction::Up => &[Metric::BandwidthUp][..],
                        Direction::Down => &[Metric::BandwidthDown],
                        Direction::Both => &[Metric::BandwidthUp, Metric::BandwidthDown],
                    });
                }
                m
            }
            Kind::Udp(_) | Kind::Ping(_) => vec![Metric::Rtt, Metric::Jitter, Metric::Loss],
            Kind::Http(_) => vec![Metric::BandwidthDown],
            Kind::Iperf3(_) => vec![Metric::Throughput],
            // Congestion events add `loss` records of their own, outside the series.
            Kind::Fobs(_) => vec![Metric::Throughput, Metric::Loss],
        }
    }

    /// Whether runs of this type load the link (bandwidth and transfers): such runs never
    /// overlap on a target or on this host's link.
    pub fn loads_the_link(&self) -> bool {
        match self {
            Kind::Tcp(p) => p.size.is_some(),
            Kind::Http(_) | Kind::Iperf3(_) | Kind::Fobs(_) => true,
            Kind::Udp(_) | Kind::Ping(_) => false,
        }
    }

    /// The longest a run may take when `timeout_ms` is not configured.
    pub fn default_bound_ms(&self) -> Ms {
        match self {
            Kind::Tcp(p) if p.size.is_some() => 60 * SECOND,
            Kind::Tcp(_) => 10 * SECOND,
            // Saturating: parameters read from a file may be absurd (the reader then refuses
            // the bound).
            Kind::Udp(p) => (p.probes as Ms)
                .saturating_mul(p.interval_ms)
                .saturating_add(3 * SECOND),
            Kind::Http(_) => 60 * SECOND,
            // iperf3's own connect, parameter exchange and results after the test.
            Kind::Iperf3(p) => Ms::from(p.duration_s) * SECOND + 10 * SECOND,
            Kind::Ping(p) => Ms::from(p.count)
                .saturating_mul(p.interval_ms)
                .saturating_add(3 * SECOND),
            // Connecting, the hash at both ends and the receiver's verdict: 5 s.
            Kind::Fobs(p) => p.send_ms(p.min_rate).saturating_add(5 * SECOND),
        }
    }

    /// The least bound that lets a run of this type finish when all is well.
    pub fn least_bound_ms(&self) -> Ms {
        match self {
            Kind::Udp(p) => (p.probes as Ms)
                .saturating_mul(p.interval_ms)
                .saturating_add(100),
            Kind::Iperf3(p) => Ms::from(p.duration_s) * SECOND + SECOND,
            Kind::Ping(p) => Ms::from(p.count.saturating_sub(1))
                .saturating_mul(p.interval_ms)
                .saturating_add(SECOND),
            Kind::Fobs(p) => p.send_ms(p.max_rate).saturating_add(SECOND),
            _ => 100,
        }
    }

    /// The steps of a TCP session, among which its bound is shared: connect, hello, warm-up,
    /// two echoes, each transfer, quit.
    pub fn tcp_steps(p: &TcpParams) -> u32 {
        6 + match (p.size, p.direction) {
            (None, _) => 0,
            (Some(_), Direction::Both) => 2,
            (Some(_), _) => 1,
        }
    }

    /// One line for people: the type and its parameters.
    pub fn describe(&self) -> String {
        match self {
            Kind::Tcp(p) => match p.size {
                Some(s) => format!(
                    "tcp, bandwidth {} {}",
                    bytes(s),
                    format!("{:?}", p.direction).to_lowercase()
                ),
                None => "tcp round trips".into(),
            },
            Kind::Udp(p) => format!("udp, {} probes every {} ms", p.probes, p.interval_ms),
            Kind::Http(p) => format!(
                "http download{}",
                p.url.as_ref().map(|u| format!(" {u}")).unwrap_or_default()
            ),
            Kind::Iperf3(p) => format!(
                "iperf3 {} s, {} stream{}{}{}",
                p.duration_s,
                p.streams,
                if p.streams == 1 { "" } else { "s" },
                p.window
                    .map(|w| format!(", window {}", bytes(w)))
                    .unwrap_or_default(),
                if p.reverse { ", reverse" } else { "" }
            ),
            Kind::Ping(p) => format!("ping ×{}", p.count),
            Kind::Fobs(p) => format!(
                "fobs {}, from {:.0} Mbit/s{}",
                bytes(p.size),
                p.rate * 8e-6,
                if p.classifier { "" } else { ", classifier off" }
            ),
        }
    }
}

/// When a probe runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Every {
    /// Every `period_ms` from the anchor.
    Period(Ms),
    Cron(Cron),
}

#[derive(Clone, Debug, PartialEq)]
pub struct When {
    pub every: Every,
    /// Each start is delayed by a random slip in [0, slip_ms), the same for a slot on every
    /// restart (it is drawn from the campaign's seed, the job and the slot), so that
    /// targets do not all fire together.
    pub slip_ms: Ms,
    /// No slot before this; the grid of a period starts here when given.
    pub start_ms: Option<Ms>,
    /// No slot after this.
    pub until_ms: Option<Ms>,
    /// Runs at most (counted across restarts).
    pub max_runs: Option<u64>,
}

impl When {
    pub fn describe(&self) -> String {
        let mut s = match &self.every {
            Every::Period(p) => format!("every {}", exact(*p)),
            Every::Cron(c) => format!("cron '{}'", c.text()),
        };
        if self.slip_ms > 0 {
            s.push_str(&format!(" + slip < {}", exact(self.slip_ms)));
        }
        if let Some(n) = self.max_runs {
            s.push_str(&format!(", at most {n} runs"));
        }
        s
    }
}

/// One probe type with its parameters and schedule, applied to some targets.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSpec {
    /// Unique name (the job key is `target/probe`).
    pub name: String,
    pub kind: Kind,
    pub when: When,
    /// Longest duration of a run; a run still going then is killed.
    pub bound_ms: Ms,
    /// Runs never overlap with other exclusive runs on the same target or on this host's
    /// link.
    pub exclusive: bool,
    /// This probe is its targets' sanity check (IEPM-BW §II.A: "if ping … fails, the other
    /// measurements are not attempted").
    pub gate: bool,
    /// Runs only after a fresh successful sanity check of the target.
    pub gated: bool,
}

/// The probe type's source in a record's `source`: `iperf3` of `iperf3 (sweep-s4-w1M)`, the
/// name [`Plan::source`] adds taken off. A window/streams sweep's probes write a series each
/// (their forecasts are their own), and its table reads them together.
pub fn source_type(source: &str) -> &str {
    match source.strip_suffix(')').and_then(|s| s.rsplit_once(" (")) {
        Some((kind, _)) if !kind.is_empty() => kind,
        _ => source,
    }
}

/// The longest `source` a record may have (the schema's `maxLength`).
const MAX_SOURCE_CHARS: usize = 64;

/// One probe on one target.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub target: usize,
    pub probe: usize,
    /// `target/probe`: the name of the job in the archive's run log, stable across edits.
    pub key: String,
}

/// A whole campaign.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub name: String,
    /// Seed of the slips.
    pub seed: u64,
    /// Runs in flight at most.
    pub max_parallel: usize,
    /// Exclusive runs in flight at most (this host's link).
    pub link_slots: usize,
    /// How old a sanity check may be and still let a gated run start.
    pub gate_max_age_ms: Ms,
    pub targets: Vec<Target>,
    pub probes: Vec<ProbeSpec>,
    pub jobs: Vec<Job>,
    /// Each target's sanity-check job (the first gate probe on it), filled in with the jobs.
    pub gate_jobs: Vec<Option<usize>>,
}

impl Plan {
    /// Builds the jobs: every probe on each of the targets `applies(probe, target)` selects.
    pub fn with_jobs(self, applies: impl Fn(usize, usize) -> bool) -> Self {
        let all: Vec<usize> = (0..self.targets.len()).collect();
        let on: Vec<Vec<usize>> = (0..self.probes.len())
            .map(|pi| all.iter().copied().filter(|&ti| applies(pi, ti)).collect())
            .collect();
        self.with_jobs_on(|pi| Some(on[pi].as_slice()))
    }

    /// Builds the jobs: every probe on the targets `targets_of(probe)` lists (ascending; all
    /// targets for `None`). Takes time in proportion to the jobs, not probes × targets.
    pub fn with_jobs_on<'a>(mut self, targets_of: impl Fn(usize) -> Option<&'a [usize]>) -> Self {
        self.jobs.clear();
        let all: Vec<usize> = (0..self.targets.len()).collect();
        for (pi, p) in self.probes.iter().enumerate() {
            for &ti in targets_of(pi).unwrap_or(&all) {
                self.jobs.push(Job {
                    target: ti,
                    probe: pi,
                    key: format!("{}/{}", self.targets[ti].name, p.name),
                });
            }
        }
        self.gate_jobs = vec![None; self.targets.len()];
        for (j, job) in self.jobs.iter().enumerate() {
            if self.probes[job.probe].gate && self.gate_jobs[job.target].is_none() {
                self.gate_jobs[job.target] = Some(j);
            }
        }
        self
    }

    pub fn probe(&self, job: usize) -> &ProbeSpec {
        &self.probes[self.jobs[job].probe]
    }

    /// What the archive needs to take up the schedule (`Sqlite::resume`): for each job its
    /// key, whether its runs are counted (it has `max_runs`) and whether it is a sanity check.
    pub fn resume_jobs(&self) -> Vec<(String, bool, bool)> {
        self.jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                let p = self.probe(j);
                (job.key.clone(), p.when.max_runs.is_some(), p.gate)
            })
            .collect()
    }

    pub fn target(&self, job: usize) -> &Target {
        &self.targets[self.jobs[job].target]
    }

    /// The `source` of `job`'s records: its probe type's (`nowcast tcp`), with the probe's
    /// name after it (`nowcast tcp (bulk)`) when another probe on the same target would
    /// write a series of the same metric to the same address. A series is a metric, an
    /// address and a source, in the archive, the report and the page: two probes of one type
    /// on one target (a small and a large download) would otherwise be one series, their
    /// values and forecasts mixed.
    pub fn source(&self, job: usize) -> String {
        let (spec, target) = (self.probe(job), self.target(job));
        let (source, to) = (spec.kind.source(), target.record_to(&spec.kind));
        let metrics = spec.kind.metrics();
        let shared = self.jobs.iter().enumerate().any(|(j, other)| {
            let o = &self.probes[other.probe];
            j != job
                && other.target == self.jobs[job].target
                && o.kind.source() == source
                && target.record_to(&o.kind) == to
                && o.kind.metrics().iter().any(|m| metrics.contains(m))
        });
        if !shared {
            return source.to_string();
        }
        // The schema's limit on a source (64 characters): the probe's name cut to fit.
        let room = MAX_SOURCE_CHARS - source.chars().count() - " ()".len();
        let name: String = spec.name.chars().take(room).collect();
        format!("{source} ({name})")
    }

    /// The records that stand for `job`'s run `run` when it measured nothing: one per metric
    /// of the probe, status `timeout` for a run killed at its bound `bound_ms` (given as
    /// `timeout_ms`) and `error` otherwise (skipped, missed, or killed with no bound given:
    /// the campaign stopped and its grace ran out, which says nothing of the path), the
    /// reason in `error`. A run that failed on its own already gave such records.
    pub fn records_for_run(&self, run: &RunLog, job: usize, bound_ms: Option<Ms>) -> Vec<Record> {
        // None for a run that gave its own records (ok or failed).
        let Some(reason) = run.stand_in_error() else {
            return Vec::new();
        };
        let spec = self.probe(job);
        let target = self.target(job);
        let to = target.record_to(&spec.kind);
        let (status, bound_ms) = match (run.outcome, bound_ms) {
            (Outcome::Killed, Some(b)) => (Status::Timeout, b),
            _ => (Status::Error, 0),
        };
        spec.kind
            .metrics()
            .into_iter()
            .map(|m| {
                let mut r = Record::new(run.stand_in_time_ms(), &self.source(job), m, 0.0, &to);
                r.status = status;
                r.value = None;
                r.error = Some(reason.clone());
                r.timeout_ms = (status == Status::Timeout).then_some(bound_ms.max(1) as f64);
                r.probe = spec.kind.transport().map(|t| Probe {
                    transport: Some(t),
                    ..Probe::default()
                });
                r
            })
            .collect()
    }

    /// The sanity-check job of `job`'s target, if it has one (the first gate probe on it).
    pub fn gate_of(&self, job: usize) -> Option<usize> {
        let t = self.jobs[job].target;
        match self.gate_jobs.get(t) {
            Some(gate) => *gate,
            // Jobs not built by `with_jobs`: look.
            None => self
                .jobs
                .iter()
                .position(|j| j.target == t && self.probes[j.probe].gate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_and_bounds_follow_the_parameters() {
        let rtt = Kind::Tcp(TcpParams {
            size: None,
            direction: Direction::Up,
            sndbuf: None,
            rcvbuf: None,
        });
        assert_eq!(rtt.metrics().len(), 3);
        assert!(!rtt.loads_the_link());
        let bw = Kind::Tcp(TcpParams {
            size: Some(1 << 20),
            direction: Direction::Both,
            sndbuf: None,
            rcvbuf: None,
        });
        assert_eq!(bw.metrics().len(), 5);
        assert!(bw.loads_the_link());
        let iperf = Kind::Iperf3(Iperf3Params {
            duration_s: 10,
            streams: 4,
            window: None,
            reverse: false,
            port: None,
            program: "iperf3".into(),
        });
        assert_eq!(iperf.default_bound_ms(), 20_000);
        assert_eq!(iperf.least_bound_ms(), 11_000);
        let t = Target {
            name: "v6".into(),
            host: "::1".into(),
            port: 8060,
            udp_port: 8060,
            iperf3_port: 5201,
            fobs_port: 8070,
            fobs_token: None,
            url: None,
            groups: vec![],
            tags: BTreeMap::new(),
        };
        assert_eq!(t.record_to(&iperf), "[::1]:5201");
        assert_eq!(t.record_to(&rtt), "[::1]:8060");
        let fobs = Kind::Fobs(FobsParams {
            size: 100_000_000,
            rate: 2.5e6,
            max_rate: 1.25e9,
            min_rate: 1.25e6,
            packet: 1400,
            window: 4096,
            classifier: true,
            token: None,
            port: None,
        });
        // 100 MB at 10 Mbit/s is 80 s, plus 5 s; at the most, 10 Gbit/s, 80 ms plus 1 s.
        assert_eq!(fobs.default_bound_ms(), 85_000);
        assert_eq!(fobs.least_bound_ms(), 1_080);
        assert!(fobs.loads_the_link());
        assert_eq!(fobs.metrics(), [Metric::Throughput, Metric::Loss]);
        assert_eq!(t.record_to(&fobs), "[::1]:8070");
    }
}
