//! Reads a campaign's TOML file into a [`Plan`] and its archive and service settings. Every
//! mistake is reported with the probe or target it concerns; unknown keys are refused (a
//! misspelt `timout` must not silently mean the default), and so are values out of range
//! (nothing is silently clamped). Errors name the line. The commented example is
//! `native-probes/examples/campaign.toml`.
//!
//! Limits, far beyond any real campaign, that bound the memory and time a hostile or
//! mistaken file can take: a file of at most [`MAX_FILE_BYTES`], names of at most
//! [`MAX_NAME`] characters without control characters, and at most [`MAX_JOBS`] probes (a
//! sweep counts one per pair) and jobs, counted before anything is expanded.

use super::cron::Cron;
use super::plan::{
    Direction, Every, FobsParams, HttpParams, Iperf3Params, Kind, PingParams, Plan, ProbeSpec,
    Target, TcpParams, UdpParams, When,
};
use crate::archive::clickhouse::ClickhouseConfig;
use crate::archive::ArchiveConfig;
use crate::fobs::wire::{self as fobs_wire, DEFAULT_PORT as FOBS_PORT};
use crate::net::parse_size;
use crate::when::{datetime, exact, parse_duration, parse_time, Ms, MINUTE, SECOND};
use crate::wire::DEFAULT_PORT;
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// The largest configuration file read (16 MiB); a campaign of [`MAX_JOBS`] jobs fits in a
/// few.
pub const MAX_FILE_BYTES: u64 = crate::config_file::MAX_BYTES;
/// The longest campaign, target or probe name, in characters (a job is `target/probe`).
pub const MAX_NAME: usize = 64;
/// The most jobs (one probe on one target), and the most probes once sweeps are expanded,
/// a campaign may have: IEPM-BW ran tens of targets; this bounds the memory and the time
/// of reading and scheduling a campaign.
pub const MAX_JOBS: usize = 100_000;
/// The longest bound a run may have.
pub const MAX_BOUND_MS: Ms = 7 * 24 * 60 * MINUTE;
/// The latest `start` or `until`: the end of year 9999.
const LAST_MS: Ms = 253_402_300_799_999;

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
    name: Spanned<String>,
    host: Spanned<String>,
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

    fn len(&self) -> usize {
        match self {
            OneOrMany::One(_) => 1,
            OneOrMany::Many(v) => v.len(),
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
    name: Spanned<String>,
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
    /// How many stream counts and windows an iperf3 sweep has (1 and 1 for other kinds).
    fn sweep(&self) -> (usize, usize) {
        if self.kind != "iperf3" {
            return (1, 1);
        }
        (
            self.streams.as_ref().map_or(1, OneOrMany::len),
            self.window.as_ref().map_or(1, OneOrMany::len),
        )
    }

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
    let text = crate::config_file::read(path, "a campaign file", "split the campaign into several")
        .with_context(|| format!("{}", path.display()))?;
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
    // Whatever a message quotes from the file, it stays short and prints no control
    // characters.
    parse_text(text, dir, stem)
        .map_err(|e| anyhow!("{}", crate::config_file::bounded(&format!("{e:#}"), 2000)))
}

/// A name as an error shows it: at most 40 characters, escaped for a terminal.
fn shown(name: &str) -> String {
    let head: String = name.chars().take(40).collect();
    let cut = if head.len() < name.len() { "…" } else { "" };
    crate::format::clean(&head) + cut
}

/// Why `name` cannot name a target or probe, if it cannot.
fn bad_name(name: &str) -> Option<String> {
    let n = name.chars().count();
    if n == 0 || name.contains('/') {
        return Some("a name must be non-empty and without '/'".into());
    }
    if n > MAX_NAME {
        return Some(format!(
            "a name is at most {MAX_NAME} characters, this one has {n}; give a shorter one"
        ));
    }
    control(name).map(|c| format!("a name must not contain control characters ({c})"))
}

/// Why `host` cannot be a target's host, if it cannot: empty, with spaces, a URL, or with
/// a port (which goes in `port =`; `127.0.0.1:18061` was taken for an IPv6 address and
/// never resolved). A host name, an IPv4 address or an IPv6 one, bare or in brackets, can.
fn bad_host(host: &str) -> Option<String> {
    use std::net::Ipv6Addr;
    if host.trim().is_empty() {
        return Some(
            "host is empty: give the target's host name or IP address (host = \"10.0.0.2\")".into(),
        );
    }
    let quoted = shown(host);
    if host.contains("://") {
        return Some(format!(
            "host '{quoted}' is a URL: give its host name alone (an HTTP probe's URL goes in `url =`)"
        ));
    }
    if host.chars().any(char::is_whitespace) {
        return Some(format!(
            "host '{quoted}' contains a space: give one host name or IP address"
        ));
    }
    if let Some(inner) = host.strip_prefix('[') {
        return match inner.split_once(']') {
            Some((addr, "")) if addr.parse::<Ipv6Addr>().is_ok() => None,
            Some((addr, rest)) => match rest.strip_prefix(':').map(str::parse::<u16>) {
                Some(Ok(port)) if addr.parse::<Ipv6Addr>().is_ok() => Some(format!(
                    "host '{quoted}' includes a port: put the port in `port =` (host = \"{addr}\", port = {port})"
                )),
                _ => Some(format!("host '{quoted}' is not an IPv6 address in brackets")),
            },
            None => Some(format!("host '{quoted}' is not an IPv6 address in brackets")),
        };
    }
    if !host.contains(':') || host.parse::<Ipv6Addr>().is_ok() {
        return None;
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && !name.contains(':') && port.parse::<u16>().is_ok() => {
            Some(format!(
                "host '{quoted}' includes a port: put the port in `port =` (host = \"{}\", port = {port})",
                shown(name)
            ))
        }
        _ => Some(format!(
            "host '{quoted}' is neither a host name nor an IP address"
        )),
    }
}

/// The first control character in `s`, escaped.
fn control(s: &str) -> Option<String> {
    s.chars()
        .find(|c| c.is_control())
        .map(|c| c.escape_default().collect())
}

/// The line numbers (from 1) of byte offsets in a text.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Lines {
        Lines(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }

    fn of(&self, span: Range<usize>) -> usize {
        self.0.partition_point(|&nl| nl < span.start) + 1
    }
}

/// The targets each selector of probes' `targets` lists selects, by name, `group:G` or
/// `tag:K=V`.
struct Index<'a> {
    names: HashMap<&'a str, usize>,
    groups: HashMap<&'a str, Vec<usize>>,
    /// By key, then value.
    tags: HashMap<&'a str, HashMap<&'a str, Vec<usize>>>,
}

impl Index<'_> {
    fn targets(&self, sel: &str) -> &[usize] {
        let found = if let Some(g) = sel.strip_prefix("group:") {
            self.groups.get(g)
        } else if let Some(kv) = sel.strip_prefix("tag:") {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            self.tags.get(k).and_then(|values| values.get(v))
        } else {
            return self.names.get(sel).map_or(&[], std::slice::from_ref);
        };
        found.map_or(&[], |v| v.as_slice())
    }
}

fn parse_text(text: &str, dir: &Path, stem: &str) -> Result<Campaign> {
    if text.len() as u64 > MAX_FILE_BYTES {
        bail!(
            "{} bytes: a campaign file is at most {} MiB; split the campaign into several",
            text.len(),
            MAX_FILE_BYTES >> 20
        );
    }
    let f: File = toml::from_str(text).map_err(|e| crate::config_file::toml_error(text, &e))?;
    let lines = Lines::new(text);
    let name = f.name.clone().unwrap_or_else(|| stem.to_string());
    // The name is the default archive's file name (`NAME.sqlite` beside the file); else the
    // rules of every name.
    if name.contains(['/', '\\']) || name == "." || name == ".." {
        bail!(
            "name: '{}' names the campaign's archive file (NAME.sqlite), so it cannot contain '/' or '\\' or be '.' or '..'",
            shown(&name)
        );
    }
    if let Some(why) = bad_name(&name) {
        bail!("name: {why}");
    }
    let mut index = Index {
        names: HashMap::with_capacity(f.targets.len()),
        groups: HashMap::new(),
        tags: HashMap::new(),
    };
    let mut targets = Vec::with_capacity(f.targets.len());
    for (i, t) in f.targets.iter().enumerate() {
        let what = format!(
            "line {}: target '{}'",
            lines.of(t.name.span()),
            shown(t.name.get_ref())
        );
        if let Some(why) = bad_name(t.name.get_ref()) {
            bail!("{what}: {why}");
        }
        if let Some(&first) = index.names.get(t.name.get_ref().as_str()) {
            bail!(
                "{what} is named twice (first on line {}); give each target a name of its own",
                lines.of(f.targets[first].name.span())
            );
        }
        index.names.insert(t.name.get_ref(), i);
        let texts = [("host", t.host.get_ref())]
            .into_iter()
            .chain(t.url.iter().map(|u| ("url", u)))
            .chain(t.groups.iter().map(|g| ("groups", g)))
            .chain(t.tags.iter().flat_map(|(k, v)| [("tags", k), ("tags", v)]));
        for (key, s) in texts {
            if let Some(c) = control(s) {
                bail!("{what}: {key}: no control characters ({c})");
            }
        }
        if let Some(why) = bad_host(t.host.get_ref()) {
            // The host's own line, which may not be the name's.
            bail!(
                "line {}: target '{}': {why}",
                lines.of(t.host.span()),
                shown(t.name.get_ref())
            );
        }
        for g in &t.groups {
            index.groups.entry(g).or_default().push(i);
        }
        for (k, v) in &t.tags {
            index
                .tags
                .entry(k)
                .or_default()
                .entry(v)
                .or_default()
                .push(i);
        }
        targets.push(Target {
            name: t.name.get_ref().clone(),
            host: t.host.get_ref().clone(),
            port: t.port.unwrap_or(DEFAULT_PORT),
            udp_port: t.udp_port.or(t.port).unwrap_or(DEFAULT_PORT),
            iperf3_port: t.iperf3_port.unwrap_or(5201),
            fobs_port: t.fobs_port.unwrap_or(FOBS_PORT),
            fobs_token: match &t.fobs_token {
                Some(tok) => {
                    fobs_wire::parse_token(tok).map_err(|e| anyhow!("{what}: fobs_token: {e}"))?;
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
    // Each [[probes]] entry's targets (None: all), and the probes and jobs it makes, counted
    // before its sweep is expanded.
    let mut on_targets: Vec<Option<Vec<usize>>> = Vec::with_capacity(f.probes.len());
    let mut marked = vec![usize::MAX; targets.len()];
    let (mut probe_count, mut job_count) = (0usize, 0usize);
    let mut probes = Vec::new();
    let mut entry_of = Vec::new();
    let mut probe_names: HashMap<String, usize> = HashMap::new();
    for (e, p) in f.probes.iter().enumerate() {
        let line = lines.of(p.name.span());
        let what = format!("line {line}: probe '{}'", shown(p.name.get_ref()));
        let on = match &p.targets {
            None => None,
            Some(sels) => {
                let mut on = Vec::new();
                let mut seen = HashSet::new();
                for sel in sels {
                    if !seen.insert(sel.as_str()) {
                        continue;
                    }
                    let selected = index.targets(sel);
                    if selected.is_empty() {
                        bail!("{what}: the target selector '{}' selects no target (a target's name, group:G or tag:K=V)", shown(sel));
                    }
                    for &t in selected {
                        if marked[t] != e {
                            marked[t] = e;
                            on.push(t);
                        }
                    }
                }
                on.sort_unstable();
                Some(on)
            }
        };
        let n_targets = on.as_ref().map_or(targets.len(), Vec::len);
        let (streams, windows) = p.sweep();
        let n_probes = streams.saturating_mul(windows);
        let n_jobs = n_probes.saturating_mul(n_targets);
        let made = if n_probes > 1 {
            format!("{streams} stream counts × {windows} windows on {n_targets} target(s)")
        } else {
            format!("{n_targets} target(s)")
        };
        if probe_count.saturating_add(n_probes) > MAX_JOBS {
            bail!(
                "{what}: {made} make {n_probes} probes{}; a campaign has at most {MAX_JOBS} (sweep fewer values, or split the campaign into several)",
                if probe_count > 0 { format!(", {} with the probes above", probe_count + n_probes) } else { String::new() }
            );
        }
        if job_count.saturating_add(n_jobs) > MAX_JOBS {
            bail!(
                "{what}: {made} make {n_jobs} jobs{}; a campaign has at most {MAX_JOBS} (select fewer targets, sweep fewer values, or split the campaign into several)",
                if job_count > 0 { format!(", {} with the probes above", job_count.saturating_add(n_jobs)) } else { String::new() }
            );
        }
        probe_count += n_probes;
        job_count += n_jobs;
        on_targets.push(on);
        for spec in probe_specs(p, &what)? {
            if let Some(&first) = probe_names.get(&spec.name) {
                bail!(
                    "line {line}: probe '{}' is named twice (first on line {}); give each probe a name of its own",
                    shown(&spec.name),
                    lines.of(f.probes[first].name.span())
                );
            }
            probe_names.insert(spec.name.clone(), e);
            probes.push(spec);
            entry_of.push(e);
        }
    }
    if probes.is_empty() {
        bail!("no [[probes]]");
    }
    let max_parallel = f.max_parallel.unwrap_or(64);
    let link_slots = f.link_slots.unwrap_or(1);
    if max_parallel == 0 || link_slots == 0 {
        bail!("max_parallel and link_slots: at least 1");
    }
    let plan = Plan {
        name: name.clone(),
        seed: f.seed.unwrap_or(1),
        max_parallel,
        link_slots,
        gate_max_age_ms: duration(&f.gate_max_age, 10 * MINUTE, "gate_max_age")?,
        targets,
        probes,
        jobs: Vec::new(),
        gate_jobs: Vec::new(),
    }
    .with_jobs_on(|pi| on_targets[entry_of[pi]].as_deref());
    for j in &plan.jobs {
        let (probe, target) = (&plan.probes[j.probe], &plan.targets[j.target]);
        if let Kind::Fobs(fp) = &probe.kind {
            if fp.token.is_none() && target.fobs_token.is_none() {
                bail!(
                    "line {}: probe '{}' on target '{}': no token for its `nowcast fobs recv` (give the probe a token or the target a fobs_token)",
                    lines.of(f.probes[entry_of[j.probe]].name.span()),
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
        let database = ch.database.clone().unwrap_or_else(|| "nowcast".into());
        // Refused here rather than by every write while the campaign runs.
        crate::archive::query::identifier(&database).map_err(|e| {
            anyhow!(
                "archive.clickhouse.database: {}",
                e.replace(&database, &shown(&database))
            )
        })?;
        archive.clickhouse = Some(ClickhouseConfig {
            url: ch.url.clone(),
            database,
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

/// The probes a `[[probes]]` entry stands for (one per window and stream count when they
/// are lists, IEPM-BW §III.D's sweep); `what` names it in errors.
fn probe_specs(p: &ProbeFile, what: &str) -> Result<Vec<ProbeSpec>> {
    let wrap = |e: anyhow::Error| anyhow!("{what}: {e}");
    if let Some(why) = bad_name(p.name.get_ref()) {
        bail!("{what}: {why}");
    }
    let Some(allowed) = allowed(&p.kind) else {
        bail!(
            "{what}: unknown kind '{}' (tcp, udp, http, iperf3, ping, fobs)",
            shown(&p.kind)
        );
    };
    if let Some(bad) = p.given().into_iter().find(|g| !allowed.contains(g)) {
        bail!(
            "{what}: '{bad}' is not a parameter of kind {} ({})",
            p.kind,
            allowed.join(", ")
        );
    }
    for (key, s) in [("url", &p.url), ("program", &p.program)] {
        if let Some(c) = s.as_deref().and_then(control) {
            bail!("{what}: {key}: no control characters ({c})");
        }
    }
    let every = match (&p.every, &p.cron) {
        (Some(e), None) => {
            let period = parse_duration(e).map_err(|e| anyhow!("{what}: every: {e}"))?;
            if period < SECOND {
                bail!("{what}: every: at least 1s");
            }
            Every::Period(period)
        }
        (None, Some(c)) => {
            let cron = Cron::parse(c).map_err(|e| anyhow!("{what}: {e}"))?;
            if cron.next_after(0).is_none() {
                bail!(
                    "{what}: cron '{}' never fires: none of its months has its day of month (February 30 or 31, April 31, …); give a day one of them has",
                    cron.text()
                );
            }
            Every::Cron(cron)
        }
        _ => bail!("{what}: give one of every = \"90m\" or cron = \"0 */2 * * *\""),
    };
    let slip_ms = duration(&p.slip, 0, "slip").map_err(wrap)?;
    if slip_ms > 0 {
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
    }
    let start_ms = time(&p.start, "start").map_err(wrap)?;
    let until_ms = time(&p.until, "until").map_err(wrap)?;
    for (key, t) in [("start", start_ms), ("until", until_ms)] {
        if t.is_some_and(|t| !(0..=LAST_MS).contains(&t)) {
            bail!("{what}: {key}: a time from 1970 to 9999");
        }
    }
    if let (Some(s), Some(u)) = (start_ms, until_ms) {
        if u < s {
            bail!(
                "{what}: until ({}) is before start ({}): no slot could ever run; give an until after the start",
                datetime(u),
                datetime(s)
            );
        }
    }
    let when = When {
        every,
        slip_ms,
        start_ms,
        until_ms,
        max_runs: p.max_runs,
    };
    // A value outside [lo, hi] is an error that says the range, never a silent clamp.
    let within = |key: &str, v: u64, lo: u64, hi: u64, unit: &str| -> Result<u64> {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            bail!("{what}: {key} = {v}{unit} is out of range: give {lo} to {hi}{unit}")
        }
    };
    let kinds: Vec<(String, Kind)> = match p.kind.as_str() {
        "tcp" => vec![(
            p.name.get_ref().clone(),
            Kind::Tcp(TcpParams {
                size: size(&p.size, "size").map_err(wrap)?,
                direction: match p.direction.as_deref() {
                    None | Some("up") => Direction::Up,
                    Some("down") => Direction::Down,
                    Some("both") => Direction::Both,
                    Some(d) => bail!("{what}: direction '{}' (up, down or both)", shown(d)),
                },
                sndbuf: size(&p.sndbuf, "sndbuf").map_err(wrap)?,
                rcvbuf: size(&p.rcvbuf, "rcvbuf").map_err(wrap)?,
            }),
        )],
        "udp" => vec![(
            p.name.get_ref().clone(),
            Kind::Udp(UdpParams {
                probes: within("probes", p.probes.unwrap_or(10), 1, 100_000, "")?,
                interval_ms: duration(&p.interval, 10, "interval").map_err(wrap)?,
                size: within(
                    "size",
                    size(&p.size, "size").map_err(wrap)?.unwrap_or(64),
                    32,
                    65_000,
                    " bytes",
                )? as usize,
            }),
        )],
        "http" => vec![(
            p.name.get_ref().clone(),
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
            if !(1..=3600 * SECOND).contains(&d) {
                bail!("{what}: duration: give more than 0s and at most 1h");
            }
            let mut out = Vec::new();
            for w in &windows {
                for &s in &streams {
                    if !(1..=128).contains(&s) {
                        bail!("{what}: streams between 1 and 128");
                    }
                    let name = if sweep {
                        format!(
                            "{}-s{s}{}",
                            p.name.get_ref(),
                            w.map(|w| format!("-w{}", crate::format::bytes_short(w)))
                                .unwrap_or_default()
                        )
                    } else {
                        p.name.get_ref().clone()
                    };
                    out.push((
                        name,
                        Kind::Iperf3(Iperf3Params {
                            duration_s: ((d + 999) / 1000) as u32,
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
        "ping" => {
            let interval_ms = duration(&p.interval, SECOND, "interval").map_err(wrap)?;
            if interval_ms < 200 {
                bail!(
                    "{what}: interval: at least 200ms (ping's shortest for users other than root)"
                );
            }
            vec![(
                p.name.get_ref().clone(),
                Kind::Ping(PingParams {
                    count: within("count", u64::from(p.count.unwrap_or(10)), 1, 10_000, "")? as u32,
                    interval_ms,
                    size: size(&p.size, "size")
                        .map_err(wrap)?
                        .map(|s| within("size", s, 0, 65_000, " bytes").map(|s| s as u32))
                        .transpose()?,
                    program: p.program.clone().unwrap_or_else(|| "ping".into()),
                }),
            )]
        }
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
                p.name.get_ref().clone(),
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
        if bound_ms > MAX_BOUND_MS {
            bail!(
                "{what}: a run may take at most {}, and this one's bound is {}{}",
                exact(MAX_BOUND_MS),
                exact(bound_ms),
                if p.timeout.is_some() {
                    "; give a shorter timeout"
                } else {
                    " (from its parameters); give a smaller size, count or interval"
                }
            );
        }
        let heavy = kind.loads_the_link();
        out.push(ProbeSpec {
            name,
            when: when.clone(),
            bound_ms,
            exclusive: p.exclusive.unwrap_or(heavy),
            gate: p.gate.unwrap_or(false),
            gated: p.gated.unwrap_or(heavy),
            kind,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_of_one_type_on_one_target_write_series_of_their_own() {
        let text = include_str!("../../examples/campaign.toml");
        let plan = parse(text, Path::new("/var/lib/nowcast"), "campaign")
            .unwrap()
            .plan;
        let source = |target: &str, probe: &str| {
            let key = format!("{target}/{probe}");
            let job = plan.jobs.iter().position(|j| j.key == key).unwrap();
            plan.source(job)
        };
        // `rtt` and `bw` both time round trips with nowcast tcp on the target's port, and
        // `iperf` and the sweep's iperf3 runs all measure its throughput: each its own series
        // (they were one, two probes' values and forecasts mixed).
        assert_eq!(source("caltech", "rtt"), "nowcast tcp (rtt)");
        assert_eq!(source("caltech", "bw"), "nowcast tcp (bw)");
        assert_eq!(source("caltech", "iperf"), "iperf3 (iperf)");
        let sweep: Vec<String> = plan
            .probes
            .iter()
            .filter(|p| p.name.starts_with("sweep-"))
            .map(|p| source("caltech", &p.name))
            .collect();
        assert!(
            sweep.iter().all(|s| s.starts_with("iperf3 (sweep-")),
            "{sweep:?}"
        );
        // Alone of its type on the target, a probe's source is its type's.
        assert_eq!(source("caltech", "udp"), "nowcast udp");
        assert_eq!(source("caltech", "ping"), "ping");
        // Within the schema's 64 characters, whatever the probe's name.
        let long = text.replace("name = \"bw\"", &format!("name = \"{}\"", "b".repeat(64)));
        let plan = parse(&long, Path::new("/x"), "campaign").unwrap().plan;
        let job = plan
            .jobs
            .iter()
            .position(|j| j.key.ends_with(&"b".repeat(64)))
            .unwrap();
        assert_eq!(plan.source(job).chars().count(), 64);
    }

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
            // A transfer at 1 kbit/s stalls: the floor of `nowcast fobs send --rate` holds here.
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1m\"\nsize = \"1M\"\nrate = \"1K\"\n", "rate: '1K' is below the least rate a transfer can use"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1m\"\nsize = \"1M\"\nstreams = 2\n", "'streams' is not a parameter of kind fobs"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1h\"\nsize = \"1G\"\ntimeout = \"1s\"\n", "shorter than a run needs"),
            ("[[probes]]\nname = \"p\"\nkind = \"fobs\"\nevery = \"1h\"\nsize = \"1M\"\n", "probe 'p' on target 'a': no token"),
            ("[[probes]]\nname = \"p\"\nkind = \"tcp\"\nevery = \"1m\"\nslip = \"40s\"\n", "slip must be at most half"),
            ("[[probes]]\nname = \"p\"\nkind = \"iperf3\"\nevery = \"1h\"\ntimeout = \"5s\"\n", "shorter than a run needs"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ntargets = [\"group:x\"]\n", "selects no target"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevry = \"1m\"\n", "unknown field `evry`"),
            // Out of range is an error that says the range, never a silent clamp.
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ncount = 4000000000\n", "line 5: probe 'p': count = 4000000000 is out of range: give 1 to 10000"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ncount = 0\n", "count = 0 is out of range"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ninterval = \"10ms\"\n", "interval: at least 200ms"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\nsize = 70000\n", "size = 70000 bytes is out of range"),
            ("[[probes]]\nname = \"p\"\nkind = \"udp\"\nevery = \"1m\"\nprobes = 1000000\n", "probes = 1000000 is out of range: give 1 to 100000"),
            ("[[probes]]\nname = \"p\"\nkind = \"udp\"\nevery = \"1m\"\nsize = 16\n", "size = 16 bytes is out of range: give 32 to 65000 bytes"),
            ("[[probes]]\nname = \"p\"\nkind = \"iperf3\"\nevery = \"1m\"\nduration = \"2h\"\n", "duration: give more than 0s and at most 1h"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ncount = 10000\ninterval = \"1h\"\n", "a run may take at most 7d"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\ntimeout = \"30d\"\n", "give a shorter timeout"),
            ("[[probes]]\nname = \"p\"\nkind = \"udp\"\nevery = \"1m\"\nprobes = 100000\ninterval = \"11574d\"\n", "a run may take at most 7d"),
            // Schedules that could never run.
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\nstart = 2030-01-01T00:00:00Z\nuntil = 2029-01-01T00:00:00Z\n", "until (2029-01-01T00:00:00Z) is before start (2030-01-01T00:00:00Z)"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\ncron = \"0 0 31 2 *\"\n", "cron '0 0 31 2 *' never fires"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\ncron = \"0 0 31 apr,jun *\"\n", "never fires"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\nstart = \"99999999999999999\"\n", "start: a time from 1970 to 9999"),
            // Names: bounded, without control characters, named once.
            (&format!("[[probes]]\nname = \"{}\"\nkind = \"ping\"\nevery = \"1m\"\n", "p".repeat(65)), "line 5: probe 'pppppppppppppppppppppppppppppppppppppppp…': a name is at most 64 characters, this one has 65"),
            ("[[probes]]\nname = \"p\\u001b[2J\"\nkind = \"ping\"\nevery = \"1m\"\n", "probe 'p\\u{1b}[2J': a name must not contain control characters (\\u{1b})"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\n\n[[probes]]\nname = \"p\"\nkind = \"tcp\"\nevery = \"1m\"\n", "line 10: probe 'p' is named twice (first on line 5)"),
            ("[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\nprogram = \"ping\\n\"\n", "program: no control characters (\\n)"),
            ("[[targets]]\nname = \"a\"\nhost = \"127.0.0.2\"\n", "line 5: target 'a' is named twice (first on line 2)"),
            ("[[targets]]\nname = \"b\"\nhost = \"127.0.0.2\\r\"\n", "line 5: target 'b': host: no control characters (\\r)"),
            ("[[targets]]\nname = \"b\"\nhost = \"10.0.0.1:80\"\n", "line 6: target 'b': host '10.0.0.1:80' includes a port: put the port in `port =` (host = \"10.0.0.1\", port = 80)"),
            ("[[targets]]\nname = \"b\"\nhost = \"\"\n", "line 6: target 'b': host is empty"),
        ];
        for (probe, says) in rows {
            let e = format!(
                "{:#}",
                parse(&format!("{base}{probe}"), Path::new("."), "c").unwrap_err()
            );
            assert!(e.contains(says), "{probe}: {e}");
            // No control character reaches the terminal.
            assert!(!e.chars().any(|c| c.is_control() && c != '\n'), "{e:?}");
        }
        let e = parse(
            &format!(
                "link_slots = 0\n{base}[[probes]]\nname = \"p\"\nkind = \"tcp\"\nevery = \"1m\"\n"
            ),
            Path::new("."),
            "c",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("max_parallel and link_slots: at least 1"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            parse(
                &format!(
                    "[[targets]]\nname = \"{}\"\nhost = \"h\"\n",
                    "t".repeat(70_000)
                ),
                Path::new("."),
                "c"
            )
            .unwrap_err()
        );
        assert!(
            e.starts_with("line 2: target 'tttt")
                && e.contains("a name is at most 64 characters, this one has 70000")
                && e.len() < 200,
            "{e}"
        );
        // The campaign's name is its default archive's file name: no directories.
        for name in ["../x", "a/b", "a\\\\b", ".."] {
            let text = format!("name = \"{name}\"\n{base}[[probes]]\nname = \"p\"\nkind = \"ping\"\nevery = \"1m\"\n");
            let e = format!("{:#}", parse(&text, Path::new("."), "c").unwrap_err());
            assert!(
                e.contains("cannot contain '/' or '\\' or be '.' or '..'"),
                "{name}: {e}"
            );
        }
    }

    fn targets(n: usize, extra: &str) -> String {
        (0..n)
            .map(|i| format!("[[targets]]\nname = \"t{i}\"\nhost = \"10.0.0.1\"\n{extra}"))
            .collect()
    }

    #[test]
    fn too_many_jobs_are_refused_before_they_are_made() {
        // 3000 × 3000 = 9 million probes, from a 30 KB file: refused at once, by the count.
        let streams: Vec<String> = (0..3000).map(|i| (1 + i % 128).to_string()).collect();
        let windows: Vec<String> = (0..3000).map(|i| (65_536 + i).to_string()).collect();
        let text = format!(
            "{}[[probes]]\nname = \"sweep\"\nkind = \"iperf3\"\nevery = \"1h\"\nstreams = [{}]\nwindow = [{}]\n",
            targets(1, ""),
            streams.join(","),
            windows.join(",")
        );
        let e = format!("{:#}", parse(&text, Path::new("."), "c").unwrap_err());
        assert!(
            e.starts_with("line 5: probe 'sweep': 3000 stream counts × 3000 windows on 1 target(s) make 9000000 probes; a campaign has at most 100000"),
            "{e}"
        );
        // 128 × 4 = 512 probes on 200 targets: 102 400 jobs.
        let sweep = "[[probes]]\nname = \"s\"\nkind = \"iperf3\"\nevery = \"1h\"\nstreams = [";
        let all: Vec<String> = (1..=128).map(|s| s.to_string()).collect();
        let text = format!(
            "{}[[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"1m\"\n{sweep}{}]\nwindow = [\"64K\", \"128K\", \"256K\", \"512K\"]\n",
            targets(200, ""),
            all.join(",")
        );
        let e = format!("{:#}", parse(&text, Path::new("."), "c").unwrap_err());
        assert!(
            e.contains("probe 's': 128 stream counts × 4 windows on 200 target(s) make 102400 jobs, 102600 with the probes above; a campaign has at most 100000"),
            "{e}"
        );
        // The same on 194 targets is allowed: 99 328 + 194 jobs.
        let text = format!(
            "{}[[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"1m\"\n{sweep}{}]\nwindow = [\"64K\", \"128K\", \"256K\", \"512K\"]\n",
            targets(194, ""),
            all.join(",")
        );
        let c = parse(&text, Path::new("."), "c").unwrap();
        assert_eq!((c.plan.probes.len(), c.plan.jobs.len()), (513, 99_522));
    }

    #[test]
    fn a_large_campaign_reads_with_its_jobs_in_order() {
        // 20 000 targets (a quadratic check of their names took seconds), each in group
        // "all" and half in "even"; probes on all, on a group, on a tag and on names.
        let mut text = String::new();
        for i in 0..20_000 {
            let group = if i % 2 == 0 {
                "\"all\", \"even\""
            } else {
                "\"all\""
            };
            text.push_str(&format!(
                "[[targets]]\nname = \"t{i}\"\nhost = \"10.0.0.1\"\ngroups = [{group}]\ntags = {{ site = \"s{}\" }}\n",
                i % 3
            ));
        }
        text.push_str("[[probes]]\nname = \"ping\"\nkind = \"ping\"\nevery = \"1m\"\ngate = true\ntargets = [\"group:even\"]\n");
        text.push_str("[[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"1m\"\n");
        text.push_str("[[probes]]\nname = \"bw\"\nkind = \"tcp\"\nsize = \"1M\"\nevery = \"1h\"\ntargets = [\"tag:site=s1\", \"t5\", \"t4\", \"t5\", \"group:even\"]\n");
        let c = parse(&text, Path::new("."), "c").unwrap();
        let plan = &c.plan;
        assert_eq!(plan.targets.len(), 20_000);
        // 10 000 + 20 000 + (6 667 with site s1, 10 000 even, 3 333 of them both, and t5)
        // jobs.
        let bw: Vec<&str> = plan
            .jobs
            .iter()
            .filter(|j| plan.probes[j.probe].name == "bw")
            .map(|j| j.key.as_str())
            .collect();
        assert_eq!(plan.jobs.len(), 10_000 + 20_000 + 13_335);
        assert_eq!(&bw[..5], ["t0/bw", "t1/bw", "t2/bw", "t4/bw", "t5/bw"]);
        // Jobs probe by probe, targets in order; each gated run finds its target's check.
        assert!(plan
            .jobs
            .windows(2)
            .all(|w| (w[0].probe, w[0].target) < (w[1].probe, w[1].target)));
        let bw5 = plan.jobs.iter().position(|j| j.key == "t5/bw").unwrap();
        let bw4 = plan.jobs.iter().position(|j| j.key == "t4/bw").unwrap();
        assert_eq!(plan.gate_of(bw5), None);
        assert_eq!(plan.jobs[plan.gate_of(bw4).unwrap()].key, "t4/ping");
    }

    #[test]
    fn errors_quote_a_bounded_part_of_a_line() {
        // A syntax error at the end of a line of a million characters.
        let text = format!(
            "seed = 1\n[[targets]]\nname = \"{}\" junk\n",
            "x".repeat(1_000_000)
        );
        let e = format!("{:#}", parse(&text, Path::new("."), "c").unwrap_err());
        assert!(e.len() < 600, "{} bytes: {}", e.len(), &e[..600]);
        assert!(
            e.starts_with("line 3, column 1000011: unexpected key or value"),
            "{e}"
        );
        // The excerpt ends at the error, its caret under it.
        let lines: Vec<&str> = e.lines().collect();
        assert!(
            lines[1].starts_with("  | …xxx") && lines[1].ends_with("\" junk"),
            "{e}"
        );
        let caret = lines[2].find('^').unwrap();
        assert_eq!(lines[1].chars().nth(caret), Some('j'), "{e}");
        // A value a message would quote whole: its middle is left out.
        let text = format!("seed = \"{}\"\n", "9".repeat(100_000));
        let e = format!("{:#}", parse(&text, Path::new("."), "c").unwrap_err());
        assert!(
            e.len() < 1200 && e.contains(" … "),
            "{}",
            &e[..e.len().min(2000)]
        );
        // Larger than a campaign file may be.
        let text = format!("# {}\n", " ".repeat(MAX_FILE_BYTES as usize));
        let e = format!("{:#}", parse(&text, Path::new("."), "c").unwrap_err());
        assert!(e.contains("a campaign file is at most 16 MiB"), "{e}");
    }

    #[test]
    fn a_file_too_large_is_not_read() {
        let dir = std::env::temp_dir().join(format!("nowcast-campaign-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.toml");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = format!("{:#}", read(&path).unwrap_err());
        assert!(
            e.ends_with("big.toml: 16777217 bytes: a campaign file is at most 16 MiB; split the campaign into several"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
