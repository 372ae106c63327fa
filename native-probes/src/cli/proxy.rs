//! `nowcast proxy`: its flags, turned into [`nowcast::proxy::server::Options`]; runs the
//! server on a tokio runtime and prints where it listens and, when stopped, what it did.

use super::proxy_config::Selection;
use anyhow::{anyhow, bail, Result};
use nowcast::net::parse_seconds;
use nowcast::net::parse_size;
use nowcast::proxy::capture::{Capture, Choice};
use nowcast::proxy::policy::{self, Balance, ReplicaSpec, ServiceSpec};
use nowcast::proxy::server::{self, Options, ProbeSpec, UnitKey};
use nowcast::proxy::upstream::Target;
use nowcast_core::probed::TimeoutBounds;
use nowcast_core::timeout::Rule;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "Services, replicas and settings come from the flags or from --config FILE \
    (TOML; example in native-probes/examples/proxy.toml), not both. HTTP/1.1 and HTTP/2 \
    cleartext with prior knowledge are served on the same port. \
    Prints one line with the address it listens on when ready, then \
    proxies until SIGINT or SIGTERM, finishes the requests in flight (at most --grace \
    seconds) and prints what it did. Upload bandwidth comes from Wren's lower bounds on a live \
    capture of the upstream connections where the proxy may capture (CAP_NET_RAW), else from \
    the kernel's TCP_INFO delivery rate (uploads of 64 KiB or more; --bandwidth-source), \
    download bandwidth from the transfer's own rate; RTT from TCP_INFO. GET /healthz and GET /metrics are answered by the proxy. \
    See native-probes/README.md, \"nowcast proxy\"."
)]
pub struct Args {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// A TOML file with the services, their replicas and the settings below (example:
    /// native-probes/examples/proxy.toml). The flags it can hold are then refused, not
    /// merged: only --listen, --explain, --records, --seed and --threads go with it.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = [
            "replicas", "services", "balance", "epsilon", "explore_fresh", "error_k",
            "error_window", "ttl", "probe_path", "probe_bytes", "eject_after", "backoff",
            "backoff_max", "timeout_rule", "timeout_floor", "timeout_ceiling",
            "timeout_initial", "max_retries", "retry_ratio", "retry_per_sec", "retry_burst",
            "sticky", "max_header_bytes", "connect_timeout", "client_idle", "send_timeout",
            "head_timeout",
            "max_connections", "max_connections_per_client", "grace", "assumed_size",
            "bandwidth_source", "capture_interface",
        ]
    )]
    config: Option<std::path::PathBuf>,
    /// A replica: NAME=http://HOST[:PORT][/BASE] (repeat for each).
    #[arg(
        long = "replica",
        value_name = "NAME=URL",
        required_unless_present = "config"
    )]
    replicas: Vec<String>,
    /// A service: PREFIX=NAME,NAME,... routes paths under PREFIX to those replicas (repeat;
    /// the longest prefix wins). Without any, every path goes to every replica. Settings of
    /// its own follow, separated by ';', with the keys of a [[service]] table of --config:
    /// '/api=a,b;balance=p2c-peak-ewma;epsilon=0.1;timeout.rule=rfc6298'.
    #[arg(long = "service", value_name = "PREFIX=NAMES[;KEY=VALUE...]")]
    services: Vec<String>,
    /// How to choose: completion (lowest forecast completion time for the request's size),
    /// bandwidth (highest forecast bandwidth, the Wren proxy's rule), or a comparison rule:
    /// round-robin, least-connections, p2c-peak-ewma, nearest.
    #[arg(long, default_value = "completion")]
    balance: String,
    /// Share of requests sent to an alternate replica so that no forecast goes stale.
    #[arg(long, default_value_t = 0.05)]
    epsilon: f64,
    /// Explore fresh alternates too (the Wren proxy's rule); by default only alternates with
    /// no sample within --ttl are explored, since the probes keep the others fresh.
    #[arg(long)]
    explore_fresh: bool,
    /// Weight of the forecast errors in the completion time (0, the default: the point
    /// forecasts, the least expected time; k > 0 is averse to risk by k errors).
    #[arg(long, default_value_t = 0.0)]
    error_k: f64,
    /// Forecast errors kept per replica for the worst case's spread, the RMS of the recent
    /// shortfalls (bandwidth below, RTT above the forecast); 0: the forecast's whole-history
    /// two-sided RMSE.
    #[arg(long, default_value_t = 20)]
    error_window: usize,
    /// Seconds after which a replica with no newer sample is probed.
    #[arg(long, value_parser = parse_seconds, default_value_t = 1.0)]
    ttl: f64,
    /// Size assumed for a request while nothing is known of it: no Content-Length (or no body)
    /// and no exchange of its method and path, or of its service, completed yet (then: what
    /// those moved both ways, plus its own length). Sizes in KiB or with B/K/M/G.
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    assumed_size: u64,
    /// Probe path (GET, or POST of --probe-bytes zeros).
    #[arg(long, default_value = "/")]
    probe_path: String,
    /// Bytes an active probe uploads (0: a GET, RTT only). Sizes in KiB or with B/K/M/G.
    #[arg(long, default_value = "0B", value_parser = parse_size)]
    probe_bytes: u64,
    /// Failures in a row that eject a replica.
    #[arg(long, default_value_t = 3)]
    eject_after: u32,
    /// Seconds an ejected replica waits before a probe tries it again (doubling while it
    /// keeps failing, up to --backoff-max).
    #[arg(long, value_parser = parse_seconds, default_value_t = 1.0)]
    backoff: f64,
    #[arg(long, value_parser = parse_seconds, default_value_t = 30.0)]
    backoff_max: f64,
    /// Adaptive timeout rule of each replica's wait for a response: nws, allen_k1,
    /// allen_k2, rfc6298, windowed_k2_w20, target_miss_1pct, target_miss_2pct (k learnt
    /// online to time out that share of waits).
    #[arg(long, default_value = "nws")]
    timeout_rule: String,
    /// Timeout floor, ceiling and the timeout before the rule has data, seconds. Every
    /// duration here is in seconds, or takes a unit (250ms, 1.5s, 1min).
    #[arg(long, value_parser = parse_seconds, default_value_t = 1.0)]
    timeout_floor: f64,
    /// The ceiling is also how long a request waits for its head where its adaptive timeout
    /// passed and no retry could go (one replica up, a POST, the retry budget spent).
    #[arg(long, value_parser = parse_seconds, default_value_t = 60.0)]
    timeout_ceiling: f64,
    #[arg(long, value_parser = parse_seconds, default_value_t = 30.0)]
    timeout_initial: f64,
    /// Retries of one request at most, each to another replica that is up (0: none). Only a
    /// request that never reached its replica (no connection), or whose method is idempotent
    /// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and whose body was not taken, is retried.
    #[arg(long, default_value_t = 1, value_name = "N")]
    max_retries: u32,
    /// Retry budget: share of requests that may be retried, retries a second on top, and
    /// the most saved up.
    #[arg(long, default_value_t = 0.1)]
    retry_ratio: f64,
    #[arg(long, default_value_t = 1.0)]
    retry_per_sec: f64,
    #[arg(long, default_value_t = 10.0)]
    retry_burst: f64,
    /// What names a unit of work that must stay on one replica: header:NAME, cookie:NAME,
    /// query:NAME or path:N (the N-th path segment).
    #[arg(long)]
    sticky: Option<String>,
    /// Print, for every request, each replica's forecasts, errors and sample age and why the
    /// request went where it did (one JSON line each, on standard error).
    #[arg(long)]
    explain: bool,
    /// Write every measurement as an NDJSON record to this file (- for standard output).
    #[arg(long, value_name = "PATH")]
    records: Option<String>,
    /// Largest request head accepted (431 above it).
    #[arg(long, default_value = "32K", value_parser = parse_size)]
    max_header_bytes: u64,
    /// Seconds to connect to a replica.
    #[arg(long, value_parser = parse_seconds, default_value_t = 3.0)]
    connect_timeout: f64,
    /// Close a client connection that moves nothing either way for this many seconds.
    #[arg(long, value_parser = parse_seconds, default_value_t = 120.0)]
    client_idle: f64,
    /// Cut a client connection that takes none of what the proxy has to send it (a response
    /// it does not read) for this many seconds, as nginx's send_timeout.
    #[arg(long, value_parser = parse_seconds, default_value_t = 30.0)]
    send_timeout: f64,
    /// Seconds from a client's connection to its first request's head (HTTP/1.1 or HTTP/2).
    #[arg(long, value_parser = parse_seconds, default_value_t = 10.0)]
    head_timeout: f64,
    /// Most client connections at once.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// Most client connections at once from one client (an IPv4 address, or an IPv6 /64):
    /// one more is closed at accept and counted. 0: no cap but --max-connections. The
    /// default, 1/64 of --max-connections' default, takes 64 clients to fill the proxy; raise
    /// it (or 0) behind a load balancer, whose connections all come from its own address.
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_connections_per_client: usize,
    /// Seconds to finish requests in flight after SIGINT or SIGTERM.
    #[arg(long, value_parser = parse_seconds, default_value_t = 30.0)]
    grace: f64,
    /// Seed of the exploration draws (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Where upload bandwidth comes from: wren (Wren's lower bounds from a live capture of the
    /// upstream connections: needs CAP_NET_RAW, an error without it), tcp-info (the kernel's
    /// delivery rate of the upstream connection when the response ends), transfer (the
    /// upload's goodput: bytes over the time to the response head less the handshake), or
    /// auto: wren when the capture can be opened, else tcp-info, saying why.
    #[arg(long, alias = "bandwidth-from", default_value = "auto", value_parser = Choice::NAMES)]
    bandwidth_source: String,
    /// Interface to capture on for Wren (default: the one the routes to the replicas use,
    /// `any` when they are several).
    #[arg(long, value_name = "IFACE")]
    capture_interface: Option<String>,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    threads: Option<usize>,
}

fn rule(s: &str) -> Result<Rule> {
    Rule::standard()
        .into_iter()
        .find(|r| r.id() == s)
        .ok_or_else(|| {
            let ids: Vec<String> = Rule::standard().iter().map(Rule::id).collect();
            usage_err!("--timeout-rule '{s}' is not one of {}", ids.join(", "))
        })
}

fn secs(name: &str, v: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| usage_err!("--{name} {v}: not a number of seconds"))
}

/// The file's settings in place of the flags' defaults (the two are never mixed: clap
/// refuses the flags with --config), and its replicas and services.
fn apply(l: super::proxy_config::Loaded, a: &mut Args) {
    fn set<T>(to: &mut T, v: Option<T>) {
        if let Some(v) = v {
            *to = v;
        }
    }
    set(&mut a.balance, l.balance);
    set(&mut a.epsilon, l.epsilon);
    set(&mut a.explore_fresh, l.explore_fresh);
    set(&mut a.error_k, l.error_k);
    set(&mut a.error_window, l.error_window);
    set(&mut a.ttl, l.ttl);
    set(&mut a.probe_path, l.probe_path);
    set(&mut a.probe_bytes, l.probe_bytes);
    set(&mut a.eject_after, l.eject_after);
    set(&mut a.backoff, l.backoff);
    set(&mut a.backoff_max, l.backoff_max);
    set(&mut a.timeout_rule, l.timeout_rule);
    set(&mut a.timeout_floor, l.timeout_floor);
    set(&mut a.timeout_ceiling, l.timeout_ceiling);
    set(&mut a.timeout_initial, l.timeout_initial);
    set(&mut a.max_retries, l.max_retries);
    set(&mut a.retry_ratio, l.retry_ratio);
    set(&mut a.retry_per_sec, l.retry_per_sec);
    set(&mut a.retry_burst, l.retry_burst);
    a.sticky = l.sticky;
    set(&mut a.max_header_bytes, l.max_header_bytes);
    set(&mut a.connect_timeout, l.connect_timeout);
    set(&mut a.client_idle, l.client_idle);
    set(&mut a.send_timeout, l.send_timeout);
    set(&mut a.head_timeout, l.head_timeout);
    set(&mut a.max_connections, l.max_connections);
    set(
        &mut a.max_connections_per_client,
        l.max_connections_per_client,
    );
    set(&mut a.grace, l.grace);
    set(&mut a.bandwidth_source, l.bandwidth_source);
    if l.capture_interface.is_some() {
        a.capture_interface = l.capture_interface;
    }
    set(&mut a.assumed_size, l.assumed_size);
}

/// `top` with the settings `s` gives of its own (a `[[service]]` of --config).
fn service_config(top: &policy::Config, s: &Selection) -> Result<policy::Config> {
    let mut c = top.clone();
    if let Some(b) = &s.balance {
        c.balance = Balance::parse(b).map_err(|e| anyhow!("balance: {e}"))?;
    }
    let ms = |x: f64| x * 1e3;
    c.epsilon = s.epsilon.unwrap_or(c.epsilon);
    c.explore_fresh = s.explore_fresh.unwrap_or(c.explore_fresh);
    c.error_k = s.error_k.unwrap_or(c.error_k);
    c.error_window = s.error_window.unwrap_or(c.error_window);
    c.ttl_ms = s.ttl.map_or(c.ttl_ms, ms);
    c.eject_after = s.eject_after.unwrap_or(c.eject_after);
    c.backoff_min_ms = s.backoff.map_or(c.backoff_min_ms, ms);
    c.backoff_max_ms = s
        .backoff_max
        .map_or(c.backoff_max_ms, ms)
        .max(c.backoff_min_ms);
    c.default_size = s.assumed_size.map_or(c.default_size, |n| n as f64);
    if let Some(r) = &s.timeout_rule {
        c.timeout_rule = rule(r)?;
    }
    if let Some(f) = s.timeout_floor {
        c.timeout.floor_ms = ms(f);
        c.timeout.penalty_ms = ms(f);
    }
    c.timeout.ceiling_ms = s.timeout_ceiling.map_or(c.timeout.ceiling_ms, ms);
    c.timeout.initial_ms = s.timeout_initial.map_or(c.timeout.initial_ms, ms);
    Ok(c)
}

pub fn run(mut a: Args) -> Result<()> {
    let from_file = match a.config.clone() {
        Some(path) => {
            let mut l = super::proxy_config::load(&path)?;
            let topology = (
                std::mem::take(&mut l.replicas),
                std::mem::take(&mut l.services),
                std::mem::take(&mut l.service_settings),
            );
            apply(l, &mut a);
            Some(topology)
        }
        None => None,
    };
    // The caps first, before anything is built from the lists (policy::MAX_REPLICAS: each
    // replica keeps its forecasts and a connection; every request scores its service's).
    if a.replicas.len() > policy::MAX_REPLICAS {
        usage!(
            "{} --replica flags: at most {} replicas (each keeps its own forecasts and a \
             connection; see native-probes/README.md, \"nowcast proxy\")",
            a.replicas.len(),
            policy::MAX_REPLICAS
        );
    }
    if a.services.len() > policy::MAX_SERVICES {
        usage!(
            "{} --service flags: at most {} services",
            a.services.len(),
            policy::MAX_SERVICES
        );
    }
    let mut replicas = Vec::new();
    let mut by_name = std::collections::HashMap::new();
    for r in &a.replicas {
        let (name, url) = r
            .split_once('=')
            .ok_or_else(|| usage_err!("--replica '{r}': expected NAME=URL"))?;
        if name.is_empty() {
            usage!("--replica '{r}': no name before '='; expected NAME=URL");
        }
        if let Some(&i) = by_name.get(name) {
            let (first, _): &(ReplicaSpec, Target) = &replicas[i];
            usage!(
                "--replica '{r}': the name '{name}' is already given to --replica '{name}={}'; \
                 give each replica a name of its own",
                first.url
            );
        }
        let target = Target::parse(url).map_err(|e| usage_err!("--replica {name}: {e}"))?;
        by_name.insert(name, replicas.len());
        replicas.push((
            ReplicaSpec {
                name: name.into(),
                url: url.into(),
            },
            target,
        ));
    }
    let mut services = Vec::new();
    let mut own = Vec::new();
    for s in &a.services {
        let mut parts = s.split(';');
        let head = parts.next().unwrap_or_default();
        let pairs: Vec<&str> = parts.filter(|p| !p.trim().is_empty()).collect();
        own.push(
            super::proxy_config::service_flag(&pairs)
                .map_err(|e| usage_err!("--service '{s}': {e}"))?,
        );
        let (prefix, names) = head
            .split_once('=')
            .ok_or_else(|| usage_err!("--service '{s}': expected PREFIX=NAME,NAME"))?;
        if !prefix.starts_with('/') {
            usage!("--service '{s}': the prefix must start with /");
        }
        let listed = names.split(',').count();
        if listed > policy::MAX_SERVICE_REPLICAS {
            usage!(
                "--service '{prefix}=…': {listed} replicas listed: at most {} in a service \
                 (each request scores every replica of its service)",
                policy::MAX_SERVICE_REPLICAS
            );
        }
        // The config file's checks: one prefix, one service; a replica listed once in each.
        if services.iter().any(|x: &ServiceSpec| x.prefix == prefix) {
            usage!("--service '{s}': '{prefix}' is given to two services");
        }
        let mut idx = Vec::new();
        for n in names.split(',') {
            let i = *by_name
                .get(n)
                .ok_or_else(|| usage_err!("--service '{s}': no replica is named '{n}'"))?;
            if idx.contains(&i) {
                usage!("--service '{s}': replica '{n}' is listed twice in service '{prefix}'");
            }
            idx.push(i);
        }
        services.push(ServiceSpec {
            prefix: prefix.into(),
            replicas: idx,
            settings: None,
        });
    }
    if let Some((r, s, o)) = from_file {
        (replicas, services, own) = (r, s, o);
    }
    if services.is_empty() {
        services.push(ServiceSpec {
            prefix: "/".into(),
            replicas: (0..replicas.len()).collect(),
            settings: None,
        });
    }
    let balance = Balance::parse(&a.balance).map_err(|e| usage_err!("--balance: {e}"))?;
    if a.ttl.is_nan() || a.ttl <= 0.0 {
        usage!("--ttl {}: must be above 0", a.ttl);
    }
    // The policy's checks of the top-level settings, naming the flag each value came from
    // (or, with --config, the file's key; the file's own checks name its line too).
    let named = |flag: &str, key: &str| match &a.config {
        Some(p) => format!("--config {}: `{key}`", p.display()),
        None => format!("--{flag}"),
    };
    if !(0.0..=1.0).contains(&a.epsilon) {
        usage!(
            "{}: {} is not within 0..1",
            named("epsilon", "epsilon"),
            a.epsilon
        );
    }
    for (flag, key, v) in [
        ("timeout-floor", "timeout.floor", a.timeout_floor),
        ("timeout-initial", "timeout.initial", a.timeout_initial),
    ] {
        if v.is_nan() || v <= 0.0 {
            usage!("{}: {v} is not above 0", named(flag, key));
        }
    }
    if a.timeout_ceiling.is_nan() || a.timeout_ceiling < a.timeout_floor {
        usage!(
            "{}: {} is below {} {}",
            named("timeout-ceiling", "timeout.ceiling"),
            a.timeout_ceiling,
            if a.config.is_some() {
                "timeout.floor"
            } else {
                "--timeout-floor"
            },
            a.timeout_floor
        );
    }
    let cfg = policy::Config {
        balance,
        epsilon: a.epsilon,
        explore_fresh: a.explore_fresh,
        error_k: a.error_k,
        error_window: a.error_window,
        ttl_ms: a.ttl * 1e3,
        eject_after: a.eject_after,
        backoff_min_ms: a.backoff * 1e3,
        backoff_max_ms: a.backoff_max.max(a.backoff) * 1e3,
        timeout_rule: rule(&a.timeout_rule)?,
        timeout: TimeoutBounds {
            floor_ms: a.timeout_floor * 1e3,
            ceiling_ms: a.timeout_ceiling * 1e3,
            penalty_ms: a.timeout_floor * 1e3,
            initial_ms: a.timeout_initial * 1e3,
        },
        max_retries: a.max_retries,
        retry_ratio: a.retry_ratio,
        retry_per_sec: a.retry_per_sec,
        retry_burst: a.retry_burst,
        default_size: a.assumed_size as f64,
        ..policy::Config::default()
    };
    let sticky = a
        .sticky
        .as_deref()
        .map(UnitKey::parse)
        .transpose()
        .map_err(|e| usage_err!("{e}"))?;
    if a.max_connections == 0 {
        usage!(
            "{}: 0 would accept no client; give at least 1",
            named("max-connections", "max_connections")
        );
    }
    if !a.probe_path.starts_with('/') {
        usage!(
            "{}: '{}' must start with / (the path of the replicas' URL the probes ask for)",
            named("probe-path", "probe.path"),
            a.probe_path
        );
    }
    // Each service's settings: the top-level ones with those of its own (--config).
    let mut stickies = vec![sticky; services.len()];
    for (i, o) in own.iter().enumerate() {
        let whose = match a.config.as_deref() {
            Some(path) => format!(
                "--config {}: service '{}'",
                path.display(),
                services[i].prefix
            ),
            None => format!("--service '{}'", a.services[i]),
        };
        if *o != Selection::default() {
            let c = service_config(&cfg, o).map_err(|e| usage_err!("{whose}: {e}"))?;
            services[i].settings = Some(c);
        }
        if let Some(k) = &o.sticky {
            stickies[i] = k
                .as_deref()
                .map(UnitKey::parse)
                .transpose()
                .map_err(|e| usage_err!("{whose}: {e}"))?;
        }
    }
    // The policy's own checks (a replica shared by services that disagree on what it keeps,
    // say), before anything listens, naming the file they come from.
    let specs = replicas.iter().map(|(s, _)| s.clone()).collect();
    if let Err(e) = policy::Policy::new(cfg.clone(), specs, services.clone()) {
        match &a.config {
            Some(p) => bail!("--config {}: {e}", p.display()),
            None => bail!("{e}"),
        }
    }
    let records: Option<Box<dyn Write + Send>> = match a.records.as_deref() {
        None => None,
        Some("-") => Some(Box::new(std::io::stdout())),
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| usage_err!("--records {p}: {e}"))?,
        ))),
    };
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    // Wren where the capture opens (Zangrilli & Lowekamp §3–4), else the kernel's view.
    let choice =
        Choice::parse(&a.bandwidth_source).map_err(|e| usage_err!("--bandwidth-source: {e}"))?;
    let capture = if choice.wants_capture() {
        let eps: Vec<(usize, String)> = replicas
            .iter()
            .enumerate()
            .map(|(i, (_, t))| (i, t.authority.clone()))
            .collect();
        match Capture::open(&eps, a.capture_interface.as_deref()) {
            Ok(c) => Some(c),
            Err(e) if choice == Choice::Wren => usage!("--bandwidth-source wren: {e}"),
            Err(e) => {
                nowcast::warn_line!("nowcast proxy: bandwidth from tcp_info, not wren: {e}");
                None
            }
        }
    } else {
        None
    };
    let source = match &capture {
        Some(c) => format!(
            "wren (capture on {}; tcp_info without a recent wren sample)",
            c.iface
        ),
        None if choice == Choice::Transfer => "transfer".into(),
        None => "tcp_info".into(),
    };
    let opts = Options {
        listen: a.listen,
        policy: cfg,
        replicas,
        services,
        sticky: stickies,
        explain: a.explain,
        records,
        max_header_bytes: a.max_header_bytes as usize,
        probe: ProbeSpec {
            path: a.probe_path,
            bytes: a.probe_bytes,
        },
        seed,
        grace: secs("grace", a.grace)?,
        connect_timeout: secs("connect-timeout", a.connect_timeout)?,
        client_idle: secs("client-idle", a.client_idle)?,
        send_timeout: secs("send-timeout", a.send_timeout)?,
        head_timeout: secs("head-timeout", a.head_timeout)?,
        max_connections: a.max_connections,
        max_connections_per_client: a.max_connections_per_client,
        tcp_info_rate: choice != Choice::Transfer,
        capture,
    };
    // One thread: tokio's current-thread scheduler (one event loop, as an nginx worker),
    // which spares the work-stealing scheduler's cross-thread wake-ups and queues.
    let mut rt = match a.threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n.max(1));
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = rt.enable_all().build()?;
    if let Some(warning) = descriptors(a.max_connections) {
        nowcast::warn_line!("nowcast proxy: {warning}");
    }
    let to_stdout = a.records.as_deref() == Some("-");
    let summary = rt.block_on(server::serve(opts, true, |r| {
        let line = format!(
            "nowcast proxy: listening on {} (balance {}, bandwidth from {source}, RTT from tcp_info, seed {seed})",
            r.addr,
            balance.name(),
        );
        // With records on standard output, the ready line goes to standard error.
        if to_stdout {
            nowcast::warn_line!("{line}");
        } else {
            // A stdout nobody reads loses the line, not the proxy.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
    }))?;
    nowcast::warn_line!(
        "nowcast proxy: {} requests, {} failed, {} refused, {} of {} forecast decisions explored{}",
        summary.requests,
        summary.failed,
        summary.rejected,
        summary.explored,
        summary.decisions,
        if summary.unfinished > 0 {
            format!(", {} still in flight after the grace", summary.unfinished)
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Raises the soft limit on open descriptors to the hard one (as Go's runtime does for every
/// server): a shell's default soft limit, often 1,024, would stop a proxy far below its
/// `--max-connections`. Each client connection in flight takes one, and its upstream
/// connection two (the socket, and the duplicate TCP_INFO is read through). What to tell the
/// operator when even the hard limit is below what `max_connections` may need.
fn descriptors(max_connections: usize) -> Option<String> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return None;
    }
    // Within the kernel's own ceiling (fs.nr_open, 1,048,576 by default), which an unlimited
    // hard limit does not tell.
    let want = l.rlim_max.min(1 << 20);
    if l.rlim_cur < want {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: l.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            l.rlim_cur = want;
        }
    }
    let needed = 3 * max_connections as u64 + 64;
    (l.rlim_cur < needed).then(|| {
        format!(
            "at most {} open descriptors (the hard limit, `ulimit -Hn`), fewer than the {needed} \
             that --max-connections {max_connections} may need (3 a connection: the client's, and \
             the upstream socket with its duplicate); clients beyond it wait to be accepted. \
             Raise the limit (LimitNOFILE= in a systemd unit) or lower --max-connections",
            l.rlim_cur
        )
    })
}
