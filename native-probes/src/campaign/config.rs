//! Reads a campaign's TOML file into a [`Plan`] and its archive and service settings. Every
//! mistake is reported with the probe or target it concerns; unknown keys are refused (a
//! misspelt `timout` must not silently mean the default). The commented example is
//! `native-probes/examples/campaign.toml`.

use super::cron::Cron;
use super::plan::{
    Direction, Every, FobsParams, HttpParams, Iperf3Params, Kind, PingParams, Plan, ProbeSpec,
    Target, TcpParams, UdpParams, When,
};
use crate::archive::clickhouse::ClickhouseConfig;
use crate::archive::ArchiveConfig;
use crate::fobs::wire::{self as fobs_wire, DEFAULT_PORT as FOBS_PORT};
use crate::net::parse_size;
use crate::when::{parse_duration, parse_time, Ms, MINUTE, SECOND};
use crate::wire::DEFAULT_PORT;
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A campaign ready to run.
#[derive(Clone, Debug)]
pub struct Campaign {
    pub plan: Plan,
    pub archive: ArchiveConfig,
    /// Where to serve `/metrics`.
    pub metrics: Option<SocketAddr>,
    /// How long a stopping campaign waits for its runs in flight before killing them.
    pub shutdown_grace: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    seed: Option<u64>,
    max_parallel: Option<usize>,
    link_slots: Option<usize>,
    gate_max_age: Option<String>,
    metrics: Option<SocketAddr>,
    shutdown_grace: Option<String>,
    archive: Option<ArchiveFile>,
    #[serde(default)]
    targets: Vec<TargetFile>,
    #[serde(default)]
    probes: Vec<ProbeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchiveFile {
    sqlite: Option<PathBuf>,
    spool: Option<PathBuf>,
    fsync: Option<bool>,
    clickhouse: Option<ClickhouseFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClickhouseFile {
    url: String,
    database: Option<String>,
    user: Option<String>,
    password: Option<String>,
    timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFile {
    name: String,
    host: String,
    port: Option<u16>,
    udp_port: Option<u16>,
    iperf3_port: Option<u16>,
    fobs_port: Option<u16>,
    fobs_token: Option<String>,
    url: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    fn all(&self) -> Vec<T> {
        match self {
            OneOrMany::One(x) => vec![x.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A size: a number of bytes, or text with a unit (`64K`, `4M`).
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum SizeText {
    Bytes(u64),
    Text(String),
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum TimeText {
    Toml(toml::value::Datetime),
    Text(String),
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct ProbeFile {
    name: String,
    kind: String,
    every: Option<String>,
    cron: Option<String>,
    slip: Option<String>,
    start: Option<TimeText>,
    until: Option<TimeText>,
    max_runs: Option<u64>,
    timeout: Option<String>,
    exclusive: Option<bool>,
    gate: Option<bool>,
    gated: Option<bool>,
    targets: Option<Vec<String>>,
    // Parameters, by kind.
    size: Option<SizeText>,
    direction: Option<String>,
    sndbuf: Option<SizeText>,
    rcvbuf: Option<SizeText>,
    probes: Option<u64>,
    interval: Option<String>,
    url: Option<String>,
    max_bytes: Option<SizeText>,
    duration: Option<String>,
    streams: Option<OneOrMany<u32>>,
    window: Option<OneOrMany<SizeText>>,
    reverse: Option<bool>,
    port: Option<u16>,
    program: Option<String>,
    count: Option<u32>,
    rate: Option<String>,
    max_rate: Option<String>,
    min_rate: Option<String>,
    packet: Option<u16>,
    classifier: Option<bool>,
    token: Option<String>,
}

/// The parameters each kind takes.
fn allowed(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "tcp" => &["size", "direction", "sndbuf", "rcvbuf"],
        "udp" => &["probes", "interval", "size"],
        "http" => &["url", "max_bytes"],
        "iperf3" => &[
            "duration", "streams", "window", "reverse", "port", "program",
        ],
        "ping" => &["count", "interval", "size", "program"],
        "fobs" => &[
            "size",
            "rate",
            "max_rate",
            "min_rate",
            "packet",
            "window",
            "classifier",
            "token",
            "port",
        ],
        _ => return None,
    })
}

impl ProbeFile {
    fn given(&self) -> Vec<&'static str> {
        let mut g = Vec::new();
        let mut mark = |set: bool, name: &'static str| {
            if set {
                g.push(name)
            }
        };
        mark(self.size.is_some(), "size");
        mark(self.direction.is_some(), "direction");
        mark(self.sndbuf.is_some(), "sndbuf");
        mark(self.rcvbuf.is_some(), "rcvbuf");
        mark(self.probes.is_some(), "probes");
        mark(self.interval.is_some(), "interval");
        mark(self.url.is_some(), "url");
        mark(self.max_bytes.is_some(), "max_bytes");
        mark(self.duration.is_some(), "duration");
        mark(self.streams.is_some(), "streams");
        mark(self.window.is_some(), "window");
        mark(self.reverse.is_some(), "reverse");
        mark(self.port.is_some(), "port");
        mark(self.program.is_some(), "program");
        mark(self.count.is_some(), "count");
        mark(self.rate.is_some(), "rate");
        mark(self.max_rate.is_some(), "max_rate");
        mark(self.min_rate.is_some(), "min_rate");
        mark(self.packet.is_some(), "packet");
        mark(self.classifier.is_some(), "classifier");
        mark(self.token.is_some(), "token");
        g
    }
}

fn duration(text: &Option<String>, default: Ms, what: &str) -> Result<Ms> {
    match text {
        Some(t) => parse_duration(t).map_err(|e| anyhow!("{what}: {e}")),
        None => Ok(default),
    }
}

fn size(text: &Option<SizeText>, what: &str) -> Result<Option<u64>> {
    text.as_ref().map(|t| size_of(t, what)).transpose()
}

fn size_of(t: &SizeText, what: &str) -> Result<u64> {
    match t {
        SizeText::Bytes(n) => Ok(*n),
        SizeText::Text(t) => parse_size(t).map_err(|e| anyhow!("{what}: {e}")),
    }
}

fn time(t: &Option<TimeText>, what: &str) -> Result<Option<Ms>> {
    let Some(t) = t else { return Ok(None) };
    let text = match t {
        TimeText::Toml(d) => d.to_string(),
        TimeText::Text(s) => s.clone(),
    };
    parse_time(&text, 0)
        .map(Some)
        .map_err(|e| anyhow!("{what}: {e}"))
}

/// Reads the campaign in `path`; relative paths in it are taken from its directory.
pub fn read(path: &Path) -> Result<Campaign> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{}: read", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "campaign".into());
    parse(&text, dir, &stem).with_context(|| format!("{}", path.display()))
}

/// Parses a campaign from TOML text; `dir` anchors relative paths, `stem` names it by
/// default.
pub fn parse(text: &str, dir: &Path, stem: &str) -> Result<Campaign> {
    let f: File = toml::from_str(text).map_err(|e| anyhow!("{e}"))?;
    let name = f.name.clone().unwrap_or_else(|| stem.to_string());
    if name.is_empty() || name.len() > 64 {
        bail!("name: 1 to 64 characters");
    }
    let mut targets = Vec::new();
    for t in &f.targets {
        if targets.iter().any(|x: &Target| x.name == t.name) {
            bail!("target '{}' is named twice", t.name);
        }
        if t.name.is_empty() || t.name.contains('/') {
            bail!(
                "target '{}': a name must be non-empty and without '/'",
                t.name
            );
        }
        targets.push(Target {
            name: t.name.clone(),
            host: t.host.clone(),
            port: t.port.unwrap_or(DEFAULT_PORT),
            udp_port: t.udp_port.or(t.port).unwrap_or(DEFAULT_PORT),
            iperf3_port: t.iperf3_port.unwrap_or(5201),
            fobs_port: t.fobs_port.unwrap_or(FOBS_PORT),
            fobs_token: match &t.fobs_token {
                Some(tok) => {
                    fobs_wire::parse_token(tok)
                        .map_err(|e| anyhow!("target '{}': fobs_token: {e}", t.name))?;
                    Some(tok.trim().to_string())
                }
                None => None,
            },
            url: t.url.clone(),
            groups: t.groups.clone(),
            tags: t.tags.clone(),
        });
    }
    if targets.is_empty() {
        bail!("no [[targets]]");
    }
    let mut probes = Vec::new();
    let mut selectors = Vec::new();
    for p in &f.probes {
        for (spec, sel) in probe_specs(p)? {
            if probes.iter().any(|x: &ProbeSpec| x.name == spec.name) {
                bail!("probe '{}' is named twice", spec.name);
            }
            probes.push(spec);
            selectors.push(sel);
        }
    }
    if probes.is_empty() {
        bail!("no [[probes]]");
    }
    for sel in selectors.iter().flatten().flatten() {
        if !targets.iter().any(|t| selects(sel, t)) {
            bail!("the target selector '{sel}' selects no target");
        }
    }
    let plan = Plan {
        name: name.clone(),
        seed: f.seed.unwrap_or(1),
        max_parallel: f.max_parallel.unwrap_or(64).max(1),
        link_slots: f.link_slots.unwrap_or(1).max(1),
        gate_max_age_ms: duration(&f.gate_max_age, 10 * MINUTE, "gate_max_age")?,
        targets,
        probes,
        jobs: Vec::new(),
    };
    let plan = {
        let targets = plan.targets.clone();
        plan.with_jobs(|pi, ti| match &selectors[pi] {
            None => true,
            Some(sels) => sels.iter().any(|s| selects(s, &targets[ti])),
        })
    };
    for j in &plan.jobs {
        let (probe, target) = (&plan.probes[j.probe], &plan.targets[j.target]);
        if let Kind::Fobs(f) = &probe.kind {
            if f.token.is_none() && target.fobs_token.is_none() {
                bail!(
                    "probe '{}' on target '{}': no token for its `nowcast fobs recv` (give the probe a token or the target a fobs_token)",
                    probe.name,
                    target.name
                );
            }
        }
    }
    let a = f.archive.as_ref();
    let sqlite = a
        .and_then(|a| a.sqlite.clone())
        .map(|p| dir.join(p))
        .unwrap_or_else(|| dir.join(format!("{name}.sqlite")));
    let mut archive = ArchiveConfig::sqlite(sqlite);
    if let Some(spool) = a.and_then(|a| a.spool.clone()) {
        archive.spool = dir.join(spool);
    }
    archive.fsync = a.and_then(|a| a.fsync).unwrap_or(true);
    if let Some(ch) = a.and_then(|a| a.clickhouse.as_ref()) {
        archive.clickhouse = Some(ClickhouseConfig {
            url: ch.url.clone(),
            database: ch.database.clone().unwrap_or_else(|| "nowcast".into()),
            user: ch.user.clone(),
            password: ch.password.clone(),
            timeout: Duration::from_millis(duration(
                &ch.timeout,
                30 * SECOND,
                "archive.clickhouse.timeout",
            )? as u64),
        });
    }
    Ok(Campaign {
        plan,
        archive,
        metrics: f.metrics,
        shutdown_grace: Duration::from_millis(duration(
            &f.shutdown_grace,
            30 * SECOND,
            "shutdown_grace",
        )? as u64),
    })
}

/// Whether target `t` is selected by `sel`: its name, `group:G` or `tag:K=V`.
fn selects(sel: &str, t: &Target) -> bool {
    if let Some(g) = sel.strip_prefix("group:") {
        t.groups.iter().any(|x| x == g)
    } else if let Some(kv) = sel.strip_prefix("tag:") {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        t.tags.get(k).is_some_and(|x| x == v)
    } else {
        t.name == sel
    }
}

/// The probes a `[[probes]]` entry stands for (one per window and stream count when they
/// are lists, IEPM-BW §III.D's sweep), with its target selectors.
fn probe_specs(p: &ProbeFile) -> Result<Vec<(ProbeSpec, Option<Vec<String>>)>> {
    let what = format!("probe '{}'", p.name);
    let wrap = |e: anyhow::Error| anyhow!("{what}: {e}");
    if p.name.is_empty() || p.name.contains('/') {
        bail!("{what}: a name must be non-empty and without '/'");
    }
    let Some(allowed) = allowed(&p.kind) else {
        bail!(
            "{what}: unknown kind '{}' (tcp, udp, http, iperf3, ping, fobs)",
            p.kind
        );
    };
    if let Some(bad) = p.given().into_iter().find(|g| !allowed.contains(g)) {
        bail!(
            "{what}: '{bad}' is not a parameter of kind {} ({})",
            p.kind,
            allowed.join(", ")
        );
    }
    let every = match (&p.every, &p.cron) {
        (Some(e), None) => {
            let period = parse_duration(e).map_err(|e| anyhow!("{what}: every: {e}"))?;
            if period < SECOND {
                bail!("{what}: every: at least 1s");
            }
            Every::Period(period)
        }
        (None, Some(c)) => Every::Cron(Cron::parse(c).map_err(|e| anyhow!("{what}: {e}"))?),
        _ => bail!("{what}: give one of every = \"90m\" or cron = \"0 */2 * * *\""),
    };
    let slip_ms = duration(&p.slip, 0, "slip").map_err(wrap)?;
    let least_gap = match &every {
        Every::Period(period) => *period,
        Every::Cron(c) => {
            // The shortest gap between firings over the next weeks.
            let mut t = 0;
            let mut gap = Ms::MAX;
            for _ in 0..200 {
                let Some(n) = c.next_after(t) else { break };
                if t > 0 {
                    gap = gap.min(n - t);
                }
                t = n;
            }
            gap
        }
    };
    if slip_ms > least_gap / 2 {
        bail!(
            "{what}: slip must be at most half the time between slots ({} ms)",
            least_gap / 2
        );
    }
    let when = When {
        every,
        slip_ms,
        start_ms: time(&p.start, "start").map_err(wrap)?,
        until_ms: time(&p.until, "until").map_err(wrap)?,
        max_runs: p.max_runs,
    };
    let kinds: Vec<(String, Kind)> = match p.kind.as_str() {
        "tcp" => vec![(
            p.name.clone(),
            Kind::Tcp(TcpParams {
                size: size(&p.size, "size").map_err(wrap)?,
                direction: match p.direction.as_deref() {
                    None | Some("up") => Direction::Up,
                    Some("down") => Direction::Down,
                    Some("both") => Direction::Both,
                    Some(d) => bail!("{what}: direction '{d}' (up, down or both)"),
                },
                sndbuf: size(&p.sndbuf, "sndbuf").map_err(wrap)?,
                rcvbuf: size(&p.rcvbuf, "rcvbuf").map_err(wrap)?,
            }),
        )],
        "udp" => vec![(
            p.name.clone(),
            Kind::Udp(UdpParams {
                probes: p.probes.unwrap_or(10).clamp(1, 100_000),
                interval_ms: duration(&p.interval, 10, "interval").map_err(wrap)?,
                size: size(&p.size, "size")
                    .map_err(wrap)?
                    .unwrap_or(64)
                    .clamp(32, 65_000) as usize,
            }),
        )],
        "http" => vec![(
            p.name.clone(),
            Kind::Http(HttpParams {
                url: p.url.clone(),
                max_bytes: size(&p.max_bytes, "max_bytes")
                    .map_err(wrap)?
                    .unwrap_or(1 << 30),
            }),
        )],
        "iperf3" => {
            let streams = p.streams.as_ref().map_or(vec![1], |s| s.all());
            let windows: Vec<Option<u64>> = match &p.window {
                None => vec![None],
                Some(w) => w
                    .all()
                    .iter()
                    .map(|w| {
                        size_of(w, "window")
                            .map(Some)
                            .map_err(|e| anyhow!("{what}: {e}"))
                    })
                    .collect::<Result<_>>()?,
            };
            let sweep = streams.len() * windows.len() > 1;
            let d = duration(&p.duration, 10 * SECOND, "duration").map_err(wrap)?;
            let mut out = Vec::new();
            for w in &windows {
                for &s in &streams {
                    if !(1..=128).contains(&s) {
                        bail!("{what}: streams between 1 and 128");
                    }
                    let name = if sweep {
                        format!(
                            "{}-s{s}{}",
                            p.name,
                            w.map(|w| format!("-w{}", crate::report::text::bytes(w)))
                                .unwrap_or_default()
                        )
                    } else {
                        p.name.clone()
                    };
                    out.push((
                        name,
                        Kind::Iperf3(Iperf3Params {
                            duration_s: ((d + 999) / 1000).clamp(1, 3600) as u32,
                            streams: s,
                            window: *w,
                            reverse: p.reverse.unwrap_or(false),
                            port: p.port,
                            program: p.program.clone().unwrap_or_else(|| "iperf3".into()),
                        }),
                    ));
                }
            }
            out
        }
        "ping" => vec![(
            p.name.clone(),
            Kind::Ping(PingParams {
                count: p.count.unwrap_or(10).clamp(1, 10_000),
                interval_ms: duration(&p.interval, SECOND, "interval")
                    .map_err(wrap)?
                    .max(200),
                size: size(&p.size, "size")
                    .map_err(wrap)?
                    .map(|s| s.min(65_000) as u32),
                program: p.program.clone().unwrap_or_else(|| "ping".into()),
            }),
        )],
        "fobs" => {
            let rate = |text: &Option<String>, default: &str, key: &str| {
                fobs_wire::parse_rate(text.as_deref().unwrap_or(default))
                    .map_err(|e| anyhow!("{what}: {key}: {e}"))
            };
            let start = rate(&p.rate, "20M", "rate")?;
            let max_rate = rate(&p.max_rate, "10G", "max_rate")?;
            let min_rate = match &p.min_rate {
                Some(_) => rate(&p.min_rate, "", "min_rate")?,
                None => start / 2.0,
            };
            if !(min_rate <= start && start <= max_rate) {
                bail!("{what}: rates must be min_rate ≤ rate ≤ max_rate");
            }
            let size = size(&p.size, "size")
                .map_err(wrap)?
                .ok_or_else(|| anyhow!("{what}: give the bytes to send, size = \"64M\""))?;
            if size == 0 {
                bail!("{what}: size must be at least 1 byte");
            }
            let window = match &p.window {
                None => 4096,
                Some(OneOrMany::One(w)) => size_of(w, "window").map_err(wrap)?,
                Some(OneOrMany::Many(_)) => bail!("{what}: window is one number of packets"),
            };
            let packet = p.packet.unwrap_or(1400);
            if !(64..=65_000).contains(&packet) || !(64..=65_536).contains(&window) {
                bail!("{what}: packet must be 64–65000 bytes and window 64–65536 packets");
            }
            if let Some(t) = &p.token {
                fobs_wire::parse_token(t).map_err(|e| anyhow!("{what}: token: {e}"))?;
            }
            vec![(
                p.name.clone(),
                Kind::Fobs(FobsParams {
                    size,
                    rate: start,
                    max_rate,
                    min_rate,
                    packet,
                    window: window as u32,
                    classifier: p.classifier.unwrap_or(true),
                    token: p.token.as_ref().map(|t| t.trim().to_string()),
                    port: p.port,
                }),
            )]
        }
        _ => unreachable!("kinds are checked above"),
    };
    let mut out = Vec::new();
    for (name, kind) in kinds {
        let bound_ms = duration(&p.timeout, kind.default_bound_ms(), "timeout").map_err(wrap)?;
        if bound_ms < kind.least_bound_ms() {
            bail!(
                "{what}: timeout {bound_ms} ms is shorter than a run needs ({} ms)",
                kind.least_bound_ms()
            );
        }
        let heavy = kind.loads_the_link();
        out.push((
            ProbeSpec {
                name,
                when: when.clone(),
                bound_ms,
                exclusive: p.exclusive.unwrap_or(heavy),
                gate: p.gate.unwrap_or(false),
                gated: p.gated.unwrap_or(heavy),
                kind,
            },
            p.targets.clone(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_reads() {
        let text = include_str!("../../examples/campaign.toml");
        let c = parse(text, Path::new("/var/lib/nowcast"), "campaign").unwrap();
        assert_eq!(c.plan.name, "slac-like");
        assert!(c.plan.jobs.len() >= 6, "{:?}", c.plan.jobs);
        assert_eq!(
            c.archive.sqlite,
            Path::new("/var/lib/nowcast/slac-like.sqlite")
        );
        assert!(c.archive.clickhouse.is_none());
        // The window/streams sweep expands into one probe each.
        let sweep: Vec<&str> = c
            .plan
            .probes
            .iter()
            .filter(|p| p.name.starts_with("sweep-"))
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(sweep.len(), 4, "{sweep:?}");
        assert!(c
            .plan
            .probes
            .iter()
            .all(|p| p.bound_ms >= p.kind.least_bound_ms()));
        // The FOBS transfer: 256 MiB at 10 Mbit/s (214.75 s) and 5 s, exclusive and gated; the
        // target's own token.
        let t = c.plan.probes.iter().find(|p| p.name == "transfer").unwrap();
        assert!(t.exclusive && t.gated);
        assert_eq!(t.bound_ms, 214_749 + 5_000);
        let Kind::Fobs(f) = &t.kind else {
            panic!("{:?}", t.kind)
        };
        assert_eq!((f.rate, f.max_rate, f.min_rate), (2.5e6, 1.25e9, 1.25e6));
        assert_eq!((f.packet, f.window, f.classifier), (1400, 4096, true));
        let caltech = &c.plan.targets[0];
        assert_eq!(caltech.fobs_port, 8070);
        assert_eq!(
            caltech.fobs_token.as_deref(),
            Some("3f9c0b5e7a1d42c8b6e0f1a2d3c4b5a6")
        );
        assert_eq!(caltech.record_to(&t.kind), "127.0.0.1:8070");
    }

    #[test]
    fn mistakes_are_named() {
        let base = "[[targets]]\nname = \"a\"\nhost = \"127.0.0.1\"\n";
        let rows = [
            ("[[probes]]\nname = \"p\"\nkind = \"tcp\"\nevery = \"1m\"\nstreams = 4\n", "'streams' is not a parameter of kind tcp"),
            ("[[probes]]\nname = \"p\"\nkind = \"tcp\"\n", "give one of every"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs2\"\nevery = \"1m\"\n", "unknown kind 'fobs2'"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1m\"\n", "give the bytes to send"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1m\"\nsize = \"1M\"\ntoken = \"12\"\n", "probe 'p': token: a token is 32 hex digits"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1m\"\nsize = \"1M\"\nrate = \"fast\"\n", "rate: 'fast' is not a rate"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1m\"\nsize = \"1M\"\nstreams = 2\n", "'streams' is not a parameter of kind fobs"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1h\"\nsize = \"1G\"\ntimeout = \"1s\"\n", "shorter than a run needs"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1h\"\nsize = \"1M\"\n", "probe 'p' on target 'a': no token"),
            ("[[probes]]\nname = \"p\"\nkind = \"tcp\"\nevery = \"1m\"\nslip = \"40s\"\n", "slip must be at most half"),
            ("[[probes]]\nname = \"p\"\nkind = \"iperf3\"\nevery = \"1h\"\ntimeout = \"5s\"\n", "shorter than a run needs"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ntargets = [\"group:x\"]\n", "selects no target"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevry = \"1m\"\n", "unknown field `evry`"),
        ];
        for (probe, says) in rows {
            let e = format!(
                "{:#}",
                parse(&format!("{base}{probe}"), Path::new("."), "c").unwrap_err()
            );
            assert!(e.contains(says), "{probe}: {e}");
        }
    }
}
