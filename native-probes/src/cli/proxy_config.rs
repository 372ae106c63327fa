//! `nowcast proxy --config FILE`: the TOML file (serde + the `toml` crate, as for campaigns)
//! that holds the services, their replicas and the settings the flags otherwise give. Every
//! error names the file, the line and column and the key, and says what is wrong: syntax and
//! type errors come from toml's spans, the checks of values here from `toml::Spanned`.
//! The selection settings (rule, ε, error weight and window, TTL, unit of work, ejection,
//! timeout, size assumed) may also be given in a `[[service]]` table, for that service: the
//! top-level ones are the defaults. Example: native-probes/examples/proxy.toml.

use anyhow::{anyhow, bail, Result};
use nowcast::proxy::policy::{
    Balance, ReplicaSpec, ServiceSpec, MAX_REPLICAS, MAX_SERVICES, MAX_SERVICE_REPLICAS,
};
use nowcast::proxy::server::UnitKey;
use nowcast::proxy::upstream::Target;
use nowcast_core::timeout::Rule;
use serde::Deserialize;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// A size: bytes as an integer, or a string with a unit as the flags take it ("32K").
#[derive(Deserialize)]
#[serde(untagged)]
enum Size {
    Bytes(u64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProbe {
    path: Option<Spanned<String>>,
    bytes: Option<Spanned<Size>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTimeout {
    rule: Option<Spanned<String>>,
    floor: Option<Spanned<f64>>,
    ceiling: Option<Spanned<f64>>,
    initial: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRetry {
    max: Option<u32>,
    ratio: Option<Spanned<f64>>,
    per_sec: Option<Spanned<f64>>,
    burst: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileReplica {
    name: Spanned<String>,
    url: Spanned<String>,
}

/// Declares a table with the selection keys (a `[[service]]` table's, which the top level and
/// the `--service` flag have too) after its own fields, and `keys()`, which lends them to
/// [`selection`]. serde's `flatten` would share one struct of them, but not under
/// `deny_unknown_fields`.
macro_rules! selection_table {
    ($(#[$doc:meta])* struct $name:ident { $($(#[$fa:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            $($(#[$fa])* $field: $ty,)*
            balance: Option<Spanned<String>>,
            epsilon: Option<Spanned<f64>>,
            explore_fresh: Option<bool>,
            error_k: Option<Spanned<f64>>,
            error_window: Option<usize>,
            ttl: Option<Spanned<f64>>,
            sticky: Option<Spanned<String>>,
            eject_after: Option<Spanned<u32>>,
            backoff: Option<Spanned<f64>>,
            backoff_max: Option<Spanned<f64>>,
            assumed_size: Option<Spanned<Size>>,
            timeout: Option<FileTimeout>,
        }

        impl $name {
            fn keys(&self) -> SelectionKeys<'_> {
                SelectionKeys {
                    balance: &self.balance,
                    epsilon: &self.epsilon,
                    explore_fresh: self.explore_fresh,
                    error_k: &self.error_k,
                    error_window: self.error_window,
                    ttl: &self.ttl,
                    sticky: &self.sticky,
                    eject_after: &self.eject_after,
                    backoff: &self.backoff,
                    backoff_max: &self.backoff_max,
                    assumed_size: &self.assumed_size,
                    timeout: &self.timeout,
                }
            }
        }
    };
}

selection_table! {
    /// A service: its prefix, its replicas, and the selection settings it has of its own (the
    /// same keys as at the top level; `sticky = "none"` for no unit of work).
    struct FileService {
        prefix: Spanned<String>,
        replicas: Spanned<Vec<FileReplica>>,
    }
}

selection_table! {
    /// The whole file: the top level's settings, then its services.
    struct File {
        bandwidth_source: Option<Spanned<String>>,
        capture_interface: Option<String>,
        max_header_bytes: Option<Spanned<Size>>,
        connect_timeout: Option<Spanned<f64>>,
        client_idle: Option<Spanned<f64>>,
        send_timeout: Option<Spanned<f64>>,
        head_timeout: Option<Spanned<f64>>,
        max_connections: Option<Spanned<usize>>,
        max_connections_per_client: Option<usize>,
        grace: Option<Spanned<f64>>,
        probe: Option<FileProbe>,
        retry: Option<FileRetry>,
        #[serde(default)]
        service: Vec<FileService>,
    }
}

/// What a file gives, checked; `None`: the flag's default.
#[derive(Debug, Default)]
pub struct Loaded {
    pub replicas: Vec<(ReplicaSpec, Target)>,
    pub services: Vec<ServiceSpec>,
    pub balance: Option<String>,
    pub epsilon: Option<f64>,
    pub explore_fresh: Option<bool>,
    pub error_k: Option<f64>,
    pub error_window: Option<usize>,
    pub ttl: Option<f64>,
    pub sticky: Option<String>,
    pub eject_after: Option<u32>,
    pub backoff: Option<f64>,
    pub backoff_max: Option<f64>,
    pub bandwidth_source: Option<String>,
    pub capture_interface: Option<String>,
    pub max_header_bytes: Option<u64>,
    pub connect_timeout: Option<f64>,
    pub client_idle: Option<f64>,
    pub send_timeout: Option<f64>,
    pub head_timeout: Option<f64>,
    pub max_connections: Option<usize>,
    pub max_connections_per_client: Option<usize>,
    pub grace: Option<f64>,
    pub probe_path: Option<String>,
    pub probe_bytes: Option<u64>,
    pub timeout_rule: Option<String>,
    pub timeout_floor: Option<f64>,
    pub timeout_ceiling: Option<f64>,
    pub timeout_initial: Option<f64>,
    pub max_retries: Option<u32>,
    pub retry_ratio: Option<f64>,
    pub retry_per_sec: Option<f64>,
    pub retry_burst: Option<f64>,
    pub assumed_size: Option<u64>,
    /// Each service's own selection settings, in the order of `services`.
    pub service_settings: Vec<Selection>,
}

/// The selection settings a `[[service]]` gives of its own, checked; `None`: the top-level
/// setting (or the flag's default).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    pub balance: Option<String>,
    pub epsilon: Option<f64>,
    pub explore_fresh: Option<bool>,
    pub error_k: Option<f64>,
    pub error_window: Option<usize>,
    pub ttl: Option<f64>,
    /// `Some(None)`: no unit of work in this service ("none").
    pub sticky: Option<Option<String>>,
    pub eject_after: Option<u32>,
    pub backoff: Option<f64>,
    pub backoff_max: Option<f64>,
    pub assumed_size: Option<u64>,
    pub timeout_rule: Option<String>,
    pub timeout_floor: Option<f64>,
    pub timeout_ceiling: Option<f64>,
    pub timeout_initial: Option<f64>,
}

/// The selection keys of a table (the top level's or a service's).
struct SelectionKeys<'a> {
    balance: &'a Option<Spanned<String>>,
    epsilon: &'a Option<Spanned<f64>>,
    explore_fresh: Option<bool>,
    error_k: &'a Option<Spanned<f64>>,
    error_window: Option<usize>,
    ttl: &'a Option<Spanned<f64>>,
    sticky: &'a Option<Spanned<String>>,
    eject_after: &'a Option<Spanned<u32>>,
    backoff: &'a Option<Spanned<f64>>,
    backoff_max: &'a Option<Spanned<f64>>,
    assumed_size: &'a Option<Spanned<Size>>,
    timeout: &'a Option<FileTimeout>,
}

fn err(text: &str, span: Range<usize>, key: &str, what: String) -> anyhow::Error {
    anyhow!("{}: `{key}`: {what}", place(text, span.start))
}

/// A number of seconds (or a share, a rate) that must be finite and above `min`
/// (`or_equal`: at least `min`).
fn num(
    text: &str,
    v: &Option<Spanned<f64>>,
    key: &str,
    min: f64,
    or_equal: bool,
) -> Result<Option<f64>> {
    let Some(s) = v else { return Ok(None) };
    let x = *s.get_ref();
    let ok = x.is_finite() && if or_equal { x >= min } else { x > min };
    if !ok {
        let bound = if or_equal { "at least" } else { "above" };
        return Err(err(
            text,
            s.span(),
            key,
            format!("{x} must be {bound} {min}"),
        ));
    }
    Ok(Some(x))
}

fn size(text: &str, v: &Option<Spanned<Size>>, key: &str) -> Result<Option<u64>> {
    let Some(s) = v else { return Ok(None) };
    match s.get_ref() {
        Size::Bytes(n) => Ok(Some(*n)),
        Size::Text(t) => nowcast::net::parse_size(t)
            .map(Some)
            .map_err(|e| err(text, s.span(), key, e)),
    }
}

/// Checks the selection keys of a table; `scope` ("" or "service.") prefixes the keys named
/// in errors.
fn selection(text: &str, k: SelectionKeys, scope: &str) -> Result<Selection> {
    let key = |name: &str| format!("{scope}{name}");
    let mut l = Selection {
        explore_fresh: k.explore_fresh,
        error_window: k.error_window,
        ..Selection::default()
    };
    if let Some(b) = k.balance {
        Balance::parse(b.get_ref()).map_err(|e| err(text, b.span(), &key("balance"), e))?;
        l.balance = Some(b.get_ref().clone());
    }
    if let Some(e) = k.epsilon {
        let x = *e.get_ref();
        if !(0.0..=1.0).contains(&x) {
            return Err(err(
                text,
                e.span(),
                &key("epsilon"),
                format!("{x} is not within 0..1"),
            ));
        }
        l.epsilon = Some(x);
    }
    l.error_k = num(text, k.error_k, &key("error_k"), 0.0, true)?;
    l.ttl = num(text, k.ttl, &key("ttl"), 0.0, false)?;
    if let Some(s) = k.sticky {
        if s.get_ref() == "none" {
            l.sticky = Some(None);
        } else {
            UnitKey::parse(s.get_ref()).map_err(|e| err(text, s.span(), &key("sticky"), e))?;
            l.sticky = Some(Some(s.get_ref().clone()));
        }
    }
    if let Some(n) = k.eject_after {
        if *n.get_ref() == 0 {
            return Err(err(
                text,
                n.span(),
                &key("eject_after"),
                "must be at least 1".into(),
            ));
        }
        l.eject_after = Some(*n.get_ref());
    }
    l.backoff = num(text, k.backoff, &key("backoff"), 0.0, false)?;
    l.backoff_max = num(text, k.backoff_max, &key("backoff_max"), 0.0, false)?;
    l.assumed_size = size(text, k.assumed_size, &key("assumed_size"))?;
    if let Some(t) = k.timeout {
        if let Some(r) = &t.rule {
            if !Rule::standard().iter().any(|x| x.id() == *r.get_ref()) {
                let ids: Vec<String> = Rule::standard().iter().map(Rule::id).collect();
                return Err(err(
                    text,
                    r.span(),
                    &key("timeout.rule"),
                    format!("'{}' is not one of {}", r.get_ref(), ids.join(", ")),
                ));
            }
            l.timeout_rule = Some(r.get_ref().clone());
        }
        l.timeout_floor = num(text, &t.floor, &key("timeout.floor"), 0.0, false)?;
        l.timeout_ceiling = num(text, &t.ceiling, &key("timeout.ceiling"), 0.0, false)?;
        l.timeout_initial = num(text, &t.initial, &key("timeout.initial"), 0.0, false)?;
        if let (Some(lo), Some(hi), Some(c)) = (l.timeout_floor, l.timeout_ceiling, &t.ceiling) {
            if hi < lo {
                return Err(err(
                    text,
                    c.span(),
                    &key("timeout.ceiling"),
                    format!("{hi} is below timeout.floor {lo}"),
                ));
            }
        }
    }
    Ok(l)
}

selection_table! {
    /// The selection keys a `--service` flag may set (those of a `[[service]]` table).
    struct FlagSelection {}
}

/// The settings of one `--service PREFIX=NAMES;KEY=VALUE;...` flag: the keys of a
/// `[[service]]` table (`timeout.rule`, `timeout.floor`, ... for its timeout table), checked
/// by the file's checks. Each pair is one line of a TOML document (a value that is not a TOML
/// number or boolean is taken as a string); an error names the pair and says what is wrong.
pub fn service_flag(pairs: &[&str]) -> Result<Selection> {
    let mut top = Vec::new();
    let mut timeout = Vec::new();
    for &pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("'{pair}': expected KEY=VALUE"))?;
        let (k, v) = (k.trim(), v.trim());
        let bare = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let (table, key) = match k.strip_prefix("timeout.") {
            Some(key) => (&mut timeout, key),
            None => (&mut top, k),
        };
        if key.is_empty() || !key.chars().all(bare) {
            bail!("'{pair}': '{k}' is not a setting of a service");
        }
        // Numbers as TOML writes them (".5" and "1." are numbers here too), then booleans.
        let value = if let Ok(n) = v.parse::<i64>() {
            n.to_string()
        } else if let Some(x) = v.parse::<f64>().ok().filter(|x| x.is_finite()) {
            format!("{x:?}")
        } else if v == "true" || v == "false" {
            v.to_string()
        } else {
            // A TOML basic string: quotes, backslashes and control characters escaped.
            let mut q = String::from("\"");
            for c in v.chars() {
                match c {
                    '"' | '\\' => {
                        q.push('\\');
                        q.push(c);
                    }
                    c if c.is_control() => q.push_str(&format!("\\u{:04X}", c as u32)),
                    c => q.push(c),
                }
            }
            q.push('"');
            q
        };
        table.push((pair, format!("{key} = {value}")));
    }
    // The document, and which pair each of its lines is.
    let mut text = String::new();
    let mut of_line: Vec<Option<&str>> = Vec::new();
    for (pair, line) in &top {
        text.push_str(line);
        text.push('\n');
        of_line.push(Some(pair));
    }
    if !timeout.is_empty() {
        text.push_str("[timeout]\n");
        of_line.push(None);
        for (pair, line) in &timeout {
            text.push_str(line);
            text.push('\n');
            of_line.push(Some(pair));
        }
    }
    let named = |at: usize, what: &str| -> anyhow::Error {
        let line = text[..at.min(text.len())].matches('\n').count();
        match of_line.get(line).copied().flatten() {
            Some(pair) => anyhow!("'{pair}': {what}"),
            None => anyhow!("{what}"),
        }
    };
    let f: FlagSelection = toml::from_str(&text).map_err(|e| {
        let what = e.message().trim_end().to_string();
        named(e.span().map_or(0, |s| s.start), &what)
    })?;
    selection(&text, f.keys(), "").map_err(|e| {
        // The file's checks name a line and column: here, the pair.
        let msg = e.to_string();
        let line: Option<usize> = msg
            .strip_prefix("line ")
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok());
        let what = msg.split_once(": ").map_or(msg.as_str(), |(_, w)| w);
        match line.and_then(|l| of_line.get(l - 1).copied().flatten()) {
            Some(pair) => anyhow!("'{pair}': {what}"),
            None => anyhow!("{msg}"),
        }
    })
}

/// "line L, column C" of a byte offset in `text` (both from 1).
fn place(text: &str, at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {col}")
}

/// Reads and checks the file at `path`; every error starts with the flag and the path, and
/// is the flag's refusal (exit status 2, as a bad value of any other flag).
pub fn load(path: &Path) -> Result<Loaded> {
    let text = nowcast::config_file::read(path, "a proxy config", "a config is a page of settings")
        .map_err(|e| match e.downcast_ref::<std::io::Error>() {
            Some(io) => usage_err!("--config {}: cannot read it: {io}", path.display()),
            None => usage_err!("--config {}: {e:#}", path.display()),
        })?;
    parse(&text).map_err(|e| usage_err!("--config {}: {e}", path.display()))
}

/// Checks the text of a file.
pub fn parse(text: &str) -> Result<Loaded> {
    let f: File = toml::from_str(text).map_err(|e| nowcast::config_file::toml_error(text, &e))?;
    let err = |span: Range<usize>, key: &str, what: String| err(text, span, key, what);
    let num = |v: &Option<Spanned<f64>>, key: &str, min: f64, or_equal: bool| {
        num(text, v, key, min, or_equal)
    };
    let size = |v: &Option<Spanned<Size>>, key: &str| size(text, v, key);
    let top = selection(text, f.keys(), "")?;
    let mut l = Loaded {
        balance: top.balance,
        epsilon: top.epsilon,
        explore_fresh: top.explore_fresh,
        error_k: top.error_k,
        error_window: top.error_window,
        ttl: top.ttl,
        sticky: top.sticky.flatten(),
        eject_after: top.eject_after,
        backoff: top.backoff,
        backoff_max: top.backoff_max,
        assumed_size: top.assumed_size,
        timeout_rule: top.timeout_rule,
        timeout_floor: top.timeout_floor,
        timeout_ceiling: top.timeout_ceiling,
        timeout_initial: top.timeout_initial,
        ..Loaded::default()
    };
    if let Some(b) = &f.bandwidth_source {
        nowcast::proxy::capture::Choice::parse(b.get_ref())
            .map_err(|e| err(b.span(), "bandwidth_source", e))?;
        l.bandwidth_source = Some(b.get_ref().clone());
    }
    l.capture_interface = f.capture_interface;
    l.max_header_bytes = size(&f.max_header_bytes, "max_header_bytes")?;
    l.connect_timeout = num(&f.connect_timeout, "connect_timeout", 0.0, false)?;
    l.client_idle = num(&f.client_idle, "client_idle", 0.0, false)?;
    l.send_timeout = num(&f.send_timeout, "send_timeout", 0.0, false)?;
    l.head_timeout = num(&f.head_timeout, "head_timeout", 0.0, false)?;
    if let Some(n) = &f.max_connections {
        if *n.get_ref() == 0 {
            return Err(err(
                n.span(),
                "max_connections",
                "must be at least 1".into(),
            ));
        }
        l.max_connections = Some(*n.get_ref());
    }
    // 0 is allowed: no cap but max_connections (as the flag).
    l.max_connections_per_client = f.max_connections_per_client;
    l.grace = num(&f.grace, "grace", 0.0, true)?;
    if let Some(p) = &f.probe {
        if let Some(path) = &p.path {
            if !path.get_ref().starts_with('/') {
                return Err(err(path.span(), "probe.path", "must start with /".into()));
            }
            l.probe_path = Some(path.get_ref().clone());
        }
        l.probe_bytes = size(&p.bytes, "probe.bytes")?;
    }
    if let Some(r) = &f.retry {
        l.max_retries = r.max;
        l.retry_ratio = num(&r.ratio, "retry.ratio", 0.0, true)?;
        l.retry_per_sec = num(&r.per_sec, "retry.per_sec", 0.0, true)?;
        l.retry_burst = num(&r.burst, "retry.burst", 0.0, true)?;
    }
    if f.service.is_empty() {
        bail!("no [[service]]: give at least one, with its prefix and replicas");
    }
    // The caps (`MAX_*` in proxy::policy, which says why), before anything is built from the
    // lists: the [[service]] tables, each one's replicas, and the replicas in all (one name in
    // several services is one replica).
    if let Some(s) = f.service.get(MAX_SERVICES) {
        return Err(err(
            s.prefix.span(),
            "service",
            format!(
                "{} [[service]] tables: at most {MAX_SERVICES} (this is the first over)",
                f.service.len()
            ),
        ));
    }
    for s in &f.service {
        let n = s.replicas.get_ref().len();
        if n > MAX_SERVICE_REPLICAS {
            return Err(err(
                s.replicas.span(),
                "service.replicas",
                format!(
                    "service '{}' lists {n} replicas: at most {MAX_SERVICE_REPLICAS} in a \
                     service (each request scores every replica of its service)",
                    s.prefix.get_ref()
                ),
            ));
        }
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut over = None;
    for r in f.service.iter().flat_map(|s| s.replicas.get_ref()) {
        let next = names.len();
        names.entry(r.name.get_ref()).or_insert(next);
        if names.len() > MAX_REPLICAS && over.is_none() {
            over = Some(r);
        }
    }
    if let Some(r) = over {
        return Err(err(
            r.name.span(),
            "service.replicas",
            format!(
                "{} replicas (names) in all: at most {MAX_REPLICAS} (each keeps its own \
                 forecasts and a connection); '{}' is the first over",
                names.len(),
                r.name.get_ref()
            ),
        ));
    }
    // Where each name is in `l.replicas`, and the service that listed it last.
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut listed_by: Vec<usize> = Vec::new();
    for (si, s) in f.service.iter().enumerate() {
        let prefix = s.prefix.get_ref();
        if !prefix.starts_with('/') {
            return Err(err(
                s.prefix.span(),
                "service.prefix",
                format!("'{prefix}' must start with /"),
            ));
        }
        if l.services.iter().any(|x| x.prefix == *prefix) {
            return Err(err(
                s.prefix.span(),
                "service.prefix",
                format!("'{prefix}' is given to two services"),
            ));
        }
        if s.replicas.get_ref().is_empty() {
            return Err(err(
                s.replicas.span(),
                "service.replicas",
                format!("service '{prefix}' has no replica"),
            ));
        }
        let mut idx = Vec::new();
        for r in s.replicas.get_ref() {
            let (name, url) = (r.name.get_ref(), r.url.get_ref());
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(err(
                    r.name.span(),
                    "service.replicas.name",
                    "a name must be non-empty and without spaces".into(),
                ));
            }
            let target =
                Target::parse(url).map_err(|e| err(r.url.span(), "service.replicas.url", e))?;
            // The same name in several services is the same replica: it must have one URL.
            let i = match index.get(name.as_str()).copied() {
                Some(i) if l.replicas[i].0.url != *url => {
                    return Err(err(
                        r.url.span(),
                        "service.replicas.url",
                        format!(
                            "replica '{name}' already has URL {}; one name, one replica",
                            l.replicas[i].0.url
                        ),
                    ));
                }
                Some(i) => i,
                None => {
                    l.replicas.push((
                        ReplicaSpec {
                            name: name.clone(),
                            url: url.clone(),
                        },
                        target,
                    ));
                    index.insert(name, l.replicas.len() - 1);
                    listed_by.push(usize::MAX);
                    l.replicas.len() - 1
                }
            };
            if std::mem::replace(&mut listed_by[i], si) == si {
                return Err(err(
                    r.name.span(),
                    "service.replicas.name",
                    format!("replica '{name}' is listed twice in service '{prefix}'"),
                ));
            }
            idx.push(i);
        }
        l.services.push(ServiceSpec {
            prefix: prefix.clone(),
            replicas: idx,
            settings: None,
        });
        l.service_settings
            .push(selection(text, s.keys(), "service.")?);
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_config_example_loads_with_every_key() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/proxy.toml");
        let l = load(&path).unwrap();
        let names: Vec<&str> = l.replicas.iter().map(|(s, _)| s.name.as_str()).collect();
        assert_eq!(names, ["s1", "s2", "s3"]);
        let svc: Vec<(&str, &[usize])> = l
            .services
            .iter()
            .map(|s| (s.prefix.as_str(), s.replicas.as_slice()))
            .collect();
        assert_eq!(svc, [("/upload", &[0, 1][..]), ("/", &[0, 1, 2][..])]);
        assert_eq!(l.balance.as_deref(), Some("completion"));
        assert_eq!(l.sticky.as_deref(), Some("header:x-unit"));
        assert_eq!(l.probe_bytes, Some(256 << 10));
        assert_eq!(l.max_header_bytes, Some(32 << 10));
        assert_eq!(l.timeout_rule.as_deref(), Some("nws"));
        assert_eq!(l.retry_burst, Some(10.0));
        assert_eq!((l.send_timeout, l.max_retries), (Some(30.0), Some(1)));
        assert_eq!(l.head_timeout, Some(10.0));
        assert_eq!(l.bandwidth_source.as_deref(), Some("auto"));
        assert_eq!(l.assumed_size, Some(64 << 10));
        assert_eq!(l.max_connections_per_client, Some(64));
        assert_eq!(
            parse(&format!("max_connections_per_client = 0\n{ONE}"))
                .unwrap()
                .max_connections_per_client,
            Some(0),
            "0: no per-client cap, as the flag"
        );
        assert_eq!(
            l.service_settings,
            [
                Selection {
                    balance: Some("bandwidth".into()),
                    epsilon: Some(0.1),
                    assumed_size: Some(1 << 20),
                    ..Selection::default()
                },
                Selection::default()
            ]
        );
    }

    #[test]
    fn proxy_config_takes_the_send_timeout_and_the_retries_of_a_request() {
        let l = parse(&format!("send_timeout = 5.0\n[retry]\nmax = 0\n{ONE}")).unwrap();
        assert_eq!((l.send_timeout, l.max_retries), (Some(5.0), Some(0)));
        let e = fails(&format!("send_timeout = 0.0\n{ONE}"));
        assert!(e.contains("`send_timeout`: 0 must be above 0"), "{e}");
    }

    fn fails(text: &str) -> String {
        format!("{:#}", parse(text).unwrap_err())
    }

    const ONE: &str = "[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\", url = \"http://127.0.0.1:1\" }]\n";

    #[test]
    fn proxy_config_errors_name_the_line_the_key_and_the_fault() {
        assert!(parse(ONE).is_ok());
        // Settings come before the first [[service]]; `pre` is put first.
        let with = |pre: &str| fails(&format!("{pre}{ONE}"));
        // Syntax and types: toml's span.
        let e = with("ttl = \"soon\"\n");
        assert!(e.contains("line 1") && e.contains("ttl"), "{e}");
        let e = with("balance = \n");
        assert!(e.contains("line 1"), "{e}");
        // A line of a megabyte is quoted in part, not whole.
        let e = with(&format!("ttl = \"{}\n", "x".repeat(1 << 20)));
        assert!(e.contains("line 1") && e.len() < 1000, "{} bytes", e.len());
        // Unknown keys (a typo) are refused, not ignored.
        let e = with("epsilom = 0.1\n");
        assert!(e.contains("epsilom") && e.contains("line 1"), "{e}");
        // A setting after a [[service]] belongs to that service's table: one a service
        // cannot have of its own is refused there, named as such.
        let e = fails(&format!("{ONE}grace = 1.0\n"));
        assert!(
            e.contains("line 4") && e.contains("unknown field `grace`"),
            "{e}"
        );
        // Values.
        let e = with("epsilon = 1.5\n");
        assert_eq!(e, "line 1, column 11: `epsilon`: 1.5 is not within 0..1");
        let e = with("balance = \"fastest\"\n");
        assert!(e.starts_with("line 1, column 11: `balance`:"), "{e}");
        let e = with("[timeout]\nrule = \"never\"\n");
        assert!(
            e.starts_with("line 2, column 8: `timeout.rule`: 'never' is not one of"),
            "{e}"
        );
        let e = with("[timeout]\nfloor = 5.0\nceiling = 2.0\n");
        assert!(e.starts_with("line 3, column 11: `timeout.ceiling`"), "{e}");
        let e = with("[probe]\nbytes = \"12Q\"\n");
        assert!(e.starts_with("line 2, column 9: `probe.bytes`"), "{e}");
        let e = with("sticky = \"body:x\"\n");
        assert!(e.starts_with("line 1, column 10: `sticky`"), "{e}");
        let e = with("bandwidth_source = \"tcp_info\"\n");
        assert!(
            e.starts_with(
                "line 1, column 20: `bandwidth_source`: 'tcp_info' is not a bandwidth source"
            ),
            "{e}"
        );
        let e = with("ttl = 0.0\n");
        assert_eq!(e, "line 1, column 7: `ttl`: 0 must be above 0");
        // Services and replicas.
        let e = fails("ttl = 1.0\n");
        assert!(e.starts_with("no [[service]]"), "{e}");
        let e = fails("[[service]]\nprefix = \"api\"\nreplicas = []\n");
        assert!(e.starts_with("line 2, column 10: `service.prefix`"), "{e}");
        let e = fails("[[service]]\nprefix = \"/\"\nreplicas = []\n");
        assert!(
            e.starts_with("line 3, column 12: `service.replicas`"),
            "{e}"
        );
        let e = fails(&format!(
            "{ONE}[[service]]\nprefix = \"/x\"\nreplicas = [{{ name = \"a\", url = \"http://127.0.0.1:2\" }}]\n"
        ));
        assert!(
            e.starts_with("line 6, column 33: `service.replicas.url`: replica 'a' already has URL"),
            "{e}"
        );
        let e = fails(
            "[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\", url = \"ftp://h\" }]\n",
        );
        assert!(
            e.starts_with("line 3, column 33: `service.replicas.url`"),
            "{e}"
        );
        let e = fails("[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\" }]\n");
        assert!(e.contains("line 3") && e.contains("url"), "{e}");
    }

    #[test]
    fn proxy_config_services_have_selection_settings_of_their_own() {
        let l = parse(&format!(
            "epsilon = 0.2\nsticky = \"header:x-unit\"\n{ONE}balance = \"bandwidth\"\nepsilon = 0.0\n\
             explore_fresh = true\nerror_k = 2.0\nerror_window = 20\nttl = 3.0\n\
             sticky = \"cookie:job\"\neject_after = 5\nbackoff = 2.0\nbackoff_max = 8.0\n\
             assumed_size = \"1M\"\n[service.timeout]\nrule = \"rfc6298\"\nfloor = 0.5\n\
             ceiling = 9.0\ninitial = 4.0\n\
             [[service]]\nprefix = \"/x\"\nsticky = \"none\"\n\
             replicas = [{{ name = \"b\", url = \"http://127.0.0.1:2\" }}]\n"
        ))
        .unwrap();
        assert_eq!(
            (l.epsilon, l.sticky.as_deref()),
            (Some(0.2), Some("header:x-unit"))
        );
        assert_eq!(
            l.service_settings[0],
            Selection {
                balance: Some("bandwidth".into()),
                epsilon: Some(0.0),
                explore_fresh: Some(true),
                error_k: Some(2.0),
                error_window: Some(20),
                ttl: Some(3.0),
                sticky: Some(Some("cookie:job".into())),
                eject_after: Some(5),
                backoff: Some(2.0),
                backoff_max: Some(8.0),
                assumed_size: Some(1 << 20),
                timeout_rule: Some("rfc6298".into()),
                timeout_floor: Some(0.5),
                timeout_ceiling: Some(9.0),
                timeout_initial: Some(4.0),
            }
        );
        assert_eq!(
            l.service_settings[1],
            Selection {
                sticky: Some(None),
                ..Selection::default()
            }
        );
        // Their values are checked and named with their line.
        let e = fails(&format!("{ONE}epsilon = 3.0\n"));
        assert_eq!(
            e,
            "line 4, column 11: `service.epsilon`: 3 is not within 0..1"
        );
        let e = fails(&format!("{ONE}[service.timeout]\nrule = \"never\"\n"));
        assert!(
            e.starts_with("line 5, column 8: `service.timeout.rule`: 'never' is not one of"),
            "{e}"
        );
        let e = fails(&format!("{ONE}sticky = \"body:x\"\n"));
        assert!(e.starts_with("line 4, column 10: `service.sticky`"), "{e}");
        let e = fails(&format!("{ONE}epsilom = 0.1\n"));
        assert!(
            e.contains("line 4") && e.contains("unknown field `epsilom`"),
            "{e}"
        );
    }

    #[test]
    fn service_flag_settings_are_the_service_tables_keys_with_the_same_checks() {
        let l = service_flag(&[
            "balance=p2c-peak-ewma",
            "epsilon=.1",
            "explore_fresh=true",
            "error_window=5",
            "sticky=none",
            "assumed_size=1M",
            "timeout.rule=rfc6298",
            "timeout.floor=0.5",
        ])
        .unwrap();
        assert_eq!(
            l,
            Selection {
                balance: Some("p2c-peak-ewma".into()),
                epsilon: Some(0.1),
                explore_fresh: Some(true),
                error_window: Some(5),
                sticky: Some(None),
                assumed_size: Some(1 << 20),
                timeout_rule: Some("rfc6298".into()),
                timeout_floor: Some(0.5),
                ..Selection::default()
            }
        );
        assert_eq!(service_flag(&[]).unwrap(), Selection::default());
        let e = |pairs: &[&str]| service_flag(pairs).unwrap_err().to_string();
        assert_eq!(
            e(&["ttl=2", "epsilon=3"]),
            "'epsilon=3': `epsilon`: 3 is not within 0..1"
        );
        assert!(e(&["balance=fastest"]).starts_with("'balance=fastest': `balance`"));
        assert!(
            e(&["timeout.rule=never"]).starts_with("'timeout.rule=never': `timeout.rule`"),
            "{}",
            e(&["timeout.rule=never"])
        );
        let unknown = e(&["ttl=1", "colour=red"]);
        assert!(
            unknown.starts_with("'colour=red': unknown field `colour`"),
            "{unknown}"
        );
        assert_eq!(e(&["ttl"]), "'ttl': expected KEY=VALUE");
        assert!(
            e(&["ttl=soon"]).starts_with("'ttl=soon': "),
            "{}",
            e(&["ttl=soon"])
        );
        assert!(e(&["a b=1"]).contains("is not a setting"));
    }

    #[test]
    fn proxy_config_shares_a_replica_named_in_two_services() {
        let l = parse(&format!(
            "{ONE}[[service]]\nprefix = \"/x\"\nreplicas = [{{ name = \"b\", url = \"http://127.0.0.1:2\" }}, {{ name = \"a\", url = \"http://127.0.0.1:1\" }}]\n"
        ))
        .unwrap();
        assert_eq!(l.replicas.len(), 2);
        assert_eq!(l.services[1].replicas, [1, 0]);
    }

    /// A `[[service]]` with `prefix` and the replicas named `r{from}`..`r{to}` (one URL).
    fn service_of(prefix: &str, names: std::ops::Range<usize>) -> String {
        let mut t = format!("[[service]]\nprefix = \"{prefix}\"\nreplicas = [\n");
        for i in names {
            t.push_str(&format!(
                "  {{ name = \"r{i}\", url = \"http://127.0.0.1:9\" }},\n"
            ));
        }
        t + "]\n"
    }

    #[test]
    fn proxy_config_refuses_more_replicas_or_services_than_the_caps() {
        // At the caps: taken (a service of 1,024; 1,024 names over two services, sharing).
        let l = parse(&service_of("/", 0..MAX_SERVICE_REPLICAS)).unwrap();
        assert_eq!(l.replicas.len(), 1_024);
        let l = parse(&(service_of("/a", 0..600) + &service_of("/b", 424..1_024))).unwrap();
        assert_eq!(
            (l.replicas.len(), l.services[1].replicas.len()),
            (1_024, 600)
        );
        // One over in a service: named at its list, with the count and the cap.
        let e = fails(&service_of("/", 0..1_025));
        assert!(
            e.starts_with(
                "line 3, column 12: `service.replicas`: service '/' lists 1025 replicas: at \
                 most 1024 in a service"
            ),
            "{e}"
        );
        // One over in all: named at the first name over.
        let e = fails(&(service_of("/a", 0..600) + &service_of("/b", 600..1_200)));
        assert!(
            e.starts_with(
                "line 1032, column 12: `service.replicas`: 1200 replicas (names) in all: at \
                 most 1024"
            ) && e.contains("'r1024' is the first over"),
            "{e}"
        );
        // Services: at the cap taken, one over refused at its prefix.
        let many = |n: usize| -> String {
            (0..n)
                .map(|i| format!("[[service]]\nprefix = \"/s{i}\"\nreplicas = [{{ name = \"a\", url = \"http://127.0.0.1:9\" }}]\n"))
                .collect()
        };
        assert_eq!(parse(&many(MAX_SERVICES)).unwrap().services.len(), 1_024);
        let e = fails(&many(1_025));
        assert!(
            e.starts_with("line 3074, column 10: `service`: 1025 [[service]] tables: at most 1024"),
            "{e}"
        );
    }
}
