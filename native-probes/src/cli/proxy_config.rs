//! `nowcast proxy --config FILE`: the TOML file (serde + the `toml` crate, as for campaigns)
//! that holds the services, their replicas and the settings the flags otherwise give. Every
//! error names the file, the line and column and the key, and says what is wrong: syntax and
//! type errors come from toml's spans, the checks of values here from `toml::Spanned`.
//! Example: native-probes/examples/proxy.toml.

use anyhow::{anyhow, bail, Context, Result};
use nowcast::proxy::policy::{Balance, ReplicaSpec, ServiceSpec};
use nowcast::proxy::server::UnitKey;
use nowcast::proxy::upstream::Target;
use nowcast_core::timeout::Rule;
use serde::Deserialize;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileService {
    prefix: Spanned<String>,
    replicas: Spanned<Vec<FileReplica>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
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
    bandwidth_source: Option<Spanned<String>>,
    capture_interface: Option<String>,
    max_header_bytes: Option<Spanned<Size>>,
    connect_timeout: Option<Spanned<f64>>,
    client_idle: Option<Spanned<f64>>,
    head_timeout: Option<Spanned<f64>>,
    max_connections: Option<Spanned<usize>>,
    grace: Option<Spanned<f64>>,
    probe: Option<FileProbe>,
    timeout: Option<FileTimeout>,
    retry: Option<FileRetry>,
    #[serde(default)]
    service: Vec<FileService>,
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
    pub head_timeout: Option<f64>,
    pub max_connections: Option<usize>,
    pub grace: Option<f64>,
    pub probe_path: Option<String>,
    pub probe_bytes: Option<u64>,
    pub timeout_rule: Option<String>,
    pub timeout_floor: Option<f64>,
    pub timeout_ceiling: Option<f64>,
    pub timeout_initial: Option<f64>,
    pub retry_ratio: Option<f64>,
    pub retry_per_sec: Option<f64>,
    pub retry_burst: Option<f64>,
}

/// "line L, column C" of a byte offset in `text` (both from 1).
fn place(text: &str, at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {col}")
}

/// Reads and checks the file at `path`; every error starts with the path.
pub fn load(path: &Path) -> Result<Loaded> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--config {}: cannot read it", path.display()))?;
    parse(&text).map_err(|e| anyhow!("--config {}: {e}", path.display()))
}

/// Checks the text of a file.
pub fn parse(text: &str) -> Result<Loaded> {
    // toml's message carries the line, column and a snippet of the offending text.
    let f: File = toml::from_str(text).map_err(|e| anyhow!("{}", e.to_string().trim_end()))?;
    let err = |span: Range<usize>, key: &str, what: String| {
        anyhow!("{}: `{key}`: {what}", place(text, span.start))
    };
    // A number of seconds (or a share, a rate) that must be finite and above `min`
    // (`or_equal`: at least `min`).
    let num = |v: &Option<Spanned<f64>>, key: &str, min: f64, or_equal: bool| {
        let Some(s) = v else { return Ok(None) };
        let x = *s.get_ref();
        let ok = x.is_finite() && if or_equal { x >= min } else { x > min };
        if !ok {
            let bound = if or_equal { "at least" } else { "above" };
            return Err(err(s.span(), key, format!("{x} must be {bound} {min}")));
        }
        Ok(Some(x))
    };
    let size = |v: &Option<Spanned<Size>>, key: &str| -> Result<Option<u64>> {
        let Some(s) = v else { return Ok(None) };
        match s.get_ref() {
            Size::Bytes(n) => Ok(Some(*n)),
            Size::Text(t) => nowcast::net::parse_size(t)
                .map(Some)
                .map_err(|e| err(s.span(), key, e)),
        }
    };
    let mut l = Loaded {
        explore_fresh: f.explore_fresh,
        error_window: f.error_window,
        ..Loaded::default()
    };
    if let Some(b) = &f.balance {
        Balance::parse(b.get_ref()).map_err(|e| err(b.span(), "balance", e))?;
        l.balance = Some(b.get_ref().clone());
    }
    if let Some(e) = &f.epsilon {
        let x = *e.get_ref();
        if !(0.0..=1.0).contains(&x) {
            return Err(err(e.span(), "epsilon", format!("{x} is not within 0..1")));
        }
        l.epsilon = Some(x);
    }
    l.error_k = num(&f.error_k, "error_k", 0.0, true)?;
    l.ttl = num(&f.ttl, "ttl", 0.0, false)?;
    if let Some(s) = &f.sticky {
        UnitKey::parse(s.get_ref()).map_err(|e| err(s.span(), "sticky", e))?;
        l.sticky = Some(s.get_ref().clone());
    }
    if let Some(n) = &f.eject_after {
        if *n.get_ref() == 0 {
            return Err(err(n.span(), "eject_after", "must be at least 1".into()));
        }
        l.eject_after = Some(*n.get_ref());
    }
    l.backoff = num(&f.backoff, "backoff", 0.0, false)?;
    l.backoff_max = num(&f.backoff_max, "backoff_max", 0.0, false)?;
    if let Some(b) = &f.bandwidth_source {
        nowcast::proxy::capture::Choice::parse(b.get_ref())
            .map_err(|e| err(b.span(), "bandwidth_source", e))?;
        l.bandwidth_source = Some(b.get_ref().clone());
    }
    l.capture_interface = f.capture_interface;
    l.max_header_bytes = size(&f.max_header_bytes, "max_header_bytes")?;
    l.connect_timeout = num(&f.connect_timeout, "connect_timeout", 0.0, false)?;
    l.client_idle = num(&f.client_idle, "client_idle", 0.0, false)?;
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
    if let Some(t) = &f.timeout {
        if let Some(r) = &t.rule {
            if !Rule::standard().iter().any(|x| x.id() == *r.get_ref()) {
                let ids: Vec<String> = Rule::standard().iter().map(Rule::id).collect();
                return Err(err(
                    r.span(),
                    "timeout.rule",
                    format!("'{}' is not one of {}", r.get_ref(), ids.join(", ")),
                ));
            }
            l.timeout_rule = Some(r.get_ref().clone());
        }
        l.timeout_floor = num(&t.floor, "timeout.floor", 0.0, false)?;
        l.timeout_ceiling = num(&t.ceiling, "timeout.ceiling", 0.0, false)?;
        l.timeout_initial = num(&t.initial, "timeout.initial", 0.0, false)?;
        if let (Some(lo), Some(hi), Some(c)) = (l.timeout_floor, l.timeout_ceiling, &t.ceiling) {
            if hi < lo {
                return Err(err(
                    c.span(),
                    "timeout.ceiling",
                    format!("{hi} is below timeout.floor {lo}"),
                ));
            }
        }
    }
    if let Some(r) = &f.retry {
        l.retry_ratio = num(&r.ratio, "retry.ratio", 0.0, true)?;
        l.retry_per_sec = num(&r.per_sec, "retry.per_sec", 0.0, true)?;
        l.retry_burst = num(&r.burst, "retry.burst", 0.0, true)?;
    }
    if f.service.is_empty() {
        bail!("no [[service]]: give at least one, with its prefix and replicas");
    }
    for s in &f.service {
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
            let i = match l.replicas.iter().position(|(spec, _)| spec.name == *name) {
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
                    l.replicas.len() - 1
                }
            };
            if idx.contains(&i) {
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
        });
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
        assert_eq!(l.head_timeout, Some(10.0));
        assert_eq!(l.bandwidth_source.as_deref(), Some("auto"));
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
        // Unknown keys (a typo) are refused, not ignored.
        let e = with("epsilom = 0.1\n");
        assert!(e.contains("epsilom") && e.contains("line 1"), "{e}");
        // A setting after a [[service]] belongs to that service's table: named as such.
        let e = fails(&format!("{ONE}epsilon = 0.1\n"));
        assert!(
            e.contains("line 4") && e.contains("unknown field `epsilon`"),
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
    fn proxy_config_shares_a_replica_named_in_two_services() {
        let l = parse(&format!(
            "{ONE}[[service]]\nprefix = \"/x\"\nreplicas = [{{ name = \"b\", url = \"http://127.0.0.1:2\" }}, {{ name = \"a\", url = \"http://127.0.0.1:1\" }}]\n"
        ))
        .unwrap();
        assert_eq!(l.replicas.len(), 2);
        assert_eq!(l.services[1].replicas, [1, 0]);
    }
}
