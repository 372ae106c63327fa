//! A record's target as text: its host and port, and which end of a passive flow is the
//! service. One parse for the report (matching active and passive runs) and the reader
//! (telling apart the series a client received from different services).

/// A target's host and port: `h:8060` → (`h`, 8060), `[::1]:5201` → (`::1`, 5201), a URL's
/// host with its port, or its scheme's (http and ws 80, https and wss 443), `10.0.0.2` →
/// (`10.0.0.2`, none). One parse for both, so that they never disagree on a target.
pub fn split_target(to: &str) -> (&str, Option<u16>) {
    let (scheme, rest) = to.split_once("://").map_or(("", to), |(s, r)| (s, r));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let (host, port) = match authority.strip_prefix('[') {
        Some(r) => match r.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => (r, None),
        },
        None => match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => {
                (h, Some(p))
            }
            _ => (authority, None),
        },
    };
    let port = match port {
        Some(p) => p.parse().ok(),
        None => match scheme.to_ascii_lowercase().as_str() {
            "http" | "ws" => Some(80),
            "https" | "wss" => Some(443),
            _ => None,
        },
    };
    (host, port)
}

/// The host part of a target ([`split_target`]).
pub fn host_of(to: &str) -> &str {
    split_target(to).0
}

/// The port a target names, or its URL's scheme implies ([`split_target`]).
pub fn port_of(to: &str) -> Option<u16> {
    split_target(to).1
}

/// The sender of a record when it, not the target, is the service: `nowcast pcap` names a
/// flow's receiver by its address alone when that end is the client (its port names one
/// connection), so a download's records go `to` the client `from` the service's `host:port`.
/// `None` when the target names its port (the service itself), or the sender names none.
pub fn sending_service<'a>(to: &str, from: Option<&'a str>) -> Option<&'a str> {
    let from = from?;
    (port_of(to).is_none() && port_of(from).is_some()).then_some(from)
}

/// The service a record's flow ran to ([`split_target`]): its target when that names a port,
/// else its [`sending_service`].
pub fn service_of<'a>(to: &'a str, from: Option<&'a str>) -> (&'a str, Option<u16>) {
    match sending_service(to, from) {
        Some(from) => split_target(from),
        None => split_target(to),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_host_and_port() {
        assert_eq!(host_of("[::1]:5201"), "::1");
        assert_eq!(host_of("http://h.example:8080/x"), "h.example");
        assert_eq!(host_of("10.0.0.2"), "10.0.0.2");
        assert_eq!(port_of("[::1]:5201"), Some(5201));
        assert_eq!(port_of("http://h.example:8080/x"), Some(8080));
        assert_eq!(port_of("http://h.example/x:1"), Some(80));
        assert_eq!(port_of("https://h.example?a=1:2"), Some(443));
        assert_eq!(host_of("https://h.example?a=1:2"), "h.example");
        assert_eq!(port_of("[::1]"), None);
        assert_eq!(host_of("[::1]"), "::1");
        assert_eq!(split_target("h:99999"), ("h", None));
        assert_eq!(port_of("10.0.0.2:80"), Some(80));
        assert_eq!(port_of("10.0.0.2"), None);
        assert_eq!(port_of("fe80::1"), None);
    }

    #[test]
    fn a_download_to_a_client_is_from_its_service() {
        assert_eq!(
            sending_service("10.0.0.5", Some("10.0.0.1:80")),
            Some("10.0.0.1:80")
        );
        assert_eq!(
            service_of("10.0.0.5", Some("10.0.0.1:80")),
            ("10.0.0.1", Some(80))
        );
        // An upload names its service; an active probe's sender is a host name.
        assert_eq!(sending_service("10.0.0.1:80", Some("10.0.0.5:40000")), None);
        assert_eq!(sending_service("h.example", Some("laptop")), None);
        assert_eq!(sending_service("h.example", None), None);
        assert_eq!(
            service_of("10.0.0.1:80", Some("10.0.0.5:40000")),
            ("10.0.0.1", Some(80))
        );
    }
}
