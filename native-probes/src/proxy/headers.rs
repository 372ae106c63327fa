//! What the proxy does to a request's and a response's header fields on their way through:
//! the hop-by-hop fields dropped (RFC 9110 §7.6.1), `Transfer-Encoding` and `Cookie` joined,
//! `X-Forwarded-For` extended, and paths with dot-segments found before routing.

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use std::borrow::Cow;

/// The hop-by-hop fields (RFC 9110 §7.6.1, with `Keep-Alive`, `Proxy-Connection` and
/// `Proxy-Authorization`).
pub(super) const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

/// Fields that a `Connection` header cannot make hop-by-hop: the message's framing
/// (hyper frames the message the proxy sends by them: a GET's chunked body whose
/// `Transfer-Encoding` was dropped would be sent without its body), `Host`, and the
/// `X-Forwarded-For` the proxy appends to (RFC 9110 §7.6.1: a sender must not list a field
/// meant for every recipient; a client that does so is not obeyed, as Traefik after
/// CVE-2024-45410).
pub(super) const END_TO_END: [HeaderName; 4] = [
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::HOST,
    X_FORWARDED_FOR,
];

/// `X-Forwarded-For`, made once: a name made from its text at each request costs two
/// allocations (the name, and the shared copy its clone upstream makes).
pub(super) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Hop-by-hop headers and those the `Connection` header lists (but [`END_TO_END`]).
pub(super) fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Which hop-by-hop fields are there: one pass over the names, without hashing any. Most
    // requests have none; most responses of servers that speak HTTP/1.0 too have one,
    // `Connection: keep-alive`, and are stripped without an allocation.
    let mut present = 0u8;
    for k in h.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|n| n == k) {
            present |= 1 << i;
        }
    }
    if present == 0 {
        return;
    }
    // Empty (no allocation) unless `Connection` names fields of its own.
    let listed: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        // The usual options name no header that is not hop-by-hop already.
        .filter(|n| !n.eq_ignore_ascii_case("keep-alive") && !n.eq_ignore_ascii_case("close"))
        .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
        .filter(|n| !END_TO_END.contains(n))
        .collect();
    for n in listed {
        h.remove(n);
    }
    for (i, n) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            h.remove(n);
        }
    }
}

/// The field lines named `name` as one line, their values joined by ", " (RFC 9110 §5.3),
/// empty values left out; `None` when there is none but empty ones.
pub(super) fn joined(h: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    for x in h.get_all(name) {
        let x = x.as_bytes().trim_ascii();
        if !x.is_empty() {
            if !v.is_empty() {
                v.extend_from_slice(b", ");
            }
            v.extend_from_slice(x);
        }
    }
    (!v.is_empty()).then_some(v)
}

/// `Transfer-Encoding` sent upstream as one line: hyper reads the codings of every line, but
/// a replica that reads only the first or the last of several would frame the body its own
/// way (request smuggling, RFC 9112 §11.2).
pub(super) fn join_transfer_encoding(h: &mut HeaderMap) {
    if h.get_all(header::TRANSFER_ENCODING).iter().count() < 2 {
        return;
    }
    if let Some(v) =
        joined(h, &header::TRANSFER_ENCODING).and_then(|v| HeaderValue::from_bytes(&v).ok())
    {
        h.insert(header::TRANSFER_ENCODING, v);
    }
}

/// `X-Forwarded-For` as the replica gets it: every line the request came with, in order,
/// then the client's address `peer`. A proxy in front that adds its own line (HAProxy's
/// `option forwardfor` does) puts the address it saw after the client's own claim: keeping
/// only the first line would pass on the claim and drop the address seen.
pub(super) fn forwarded_for(h: &HeaderMap, peer: &HeaderValue) -> HeaderValue {
    match joined(h, &X_FORWARDED_FOR) {
        Some(mut v) => {
            v.extend_from_slice(b", ");
            v.extend_from_slice(peer.as_bytes());
            HeaderValue::from_bytes(&v).unwrap_or_else(|_| peer.clone())
        }
        None => peer.clone(),
    }
}

/// Whether `path` has a dot-segment (RFC 3986 §3.3: `.` or `..`), written out or as a
/// replica may read it: percent-encoded (`%2e%2e`), behind an encoded slash or a backslash
/// (`..%2f`, `..\`), or with a segment parameter (`..;x`, as Tomcat reads it). Services
/// are chosen by the path as it comes and it is forwarded unchanged, so `/api/../admin`
/// would go to `/api`'s replicas, which resolve it to `/admin` (and out of a replica's
/// BASE): a path outside the prefix it was routed by (Envoy's CVE-2019-9901). Clients
/// resolve dot-segments before sending (browsers, curl without `--path-as-is`).
pub(super) fn has_dot_segment(path: &str) -> bool {
    // Most paths have neither: one pass, no copy. A file's name (`/pub/x.iso`) is read as
    // it is; only an escape, a backslash or a `;` costs a decoded copy.
    if !path.bytes().any(|b| b == b'.' || b == b'%') {
        return false;
    }
    // Read as servers read it (`%2e` decoded), and as a lenient one may (`%2f`, `%5c`, `\`
    // taken for `/`, `;` parameters dropped).
    let normal = normalized_path(path);
    let lenient = lenient_path(&normal);
    lenient
        .as_deref()
        .unwrap_or(&normal)
        .split('/')
        .any(|seg| seg == "." || seg == "..")
}

/// `path` as services are matched against it: as servers read it before they look for the
/// file or handler, percent-encoded unreserved characters decoded (RFC 3986 §2.3 and §6.2.2.2:
/// `/%61pi` is `/api`) and runs of `/` merged (`//api/x` is `/api/x` to nginx, Apache and
/// most frameworks). Routed on the path as it came, either reached another service's replicas
/// than the one whose path the replica then served. Borrowed when there is nothing to do.
pub(super) fn normalized_path(path: &str) -> Cow<'_, str> {
    if !path.contains("//") && !path.contains('%') {
        return Cow::Borrowed(path);
    }
    let b = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < b.len() {
        let decoded = (b[i] == b'%')
            .then(|| b.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~'));
        let (c, n) = match decoded {
            Some(c) => (c as char, 3),
            None => {
                // A whole character (the path is text: hyper took only visible ASCII, but
                // an HTTP/2 :path may hold more).
                let c = path[i..].chars().next().expect("a character");
                (c, c.len_utf8())
            }
        };
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
        i += n;
    }
    Cow::Owned(out)
}

/// `path` (normalized) as a lenient server may also read it, if that differs: an encoded
/// slash or backslash (`%2f`, `%5c`) or a backslash taken for a `/` (IIS, some Java and
/// Node.js servers), and `;` parameters dropped from each segment (Tomcat and Jetty read
/// `/api;x/y` as `/api/y`). `None` when the path has none of them.
pub(super) fn lenient_path(path: &str) -> Option<String> {
    const SLASHES: [&str; 5] = ["%2f", "%2F", "%5c", "%5C", "\\"];
    if !path.contains(';') && !SLASHES.iter().any(|e| path.contains(e)) {
        return None;
    }
    let mut slashed = path.to_string();
    for e in SLASHES {
        slashed = slashed.replace(e, "/");
    }
    let mut out = String::with_capacity(slashed.len());
    for (k, seg) in slashed.split('/').enumerate() {
        if k > 0 && !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(seg.split(';').next().unwrap_or(""));
    }
    Some(out)
}

/// HTTP/2 clients may split `Cookie` into several fields; HTTP/1.1 allows one, so they are
/// joined with "; " before going upstream (RFC 9113 §8.2.3).
pub(super) fn join_cookies(h: &mut HeaderMap) {
    if h.get_all(header::COOKIE).iter().count() < 2 {
        return;
    }
    let joined: Vec<&[u8]> = h
        .get_all(header::COOKIE)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    if let Ok(v) = HeaderValue::from_bytes(&joined.join(&b"; "[..])) {
        h.insert(header::COOKIE, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_are_found_written_out_or_encoded_and_names_with_dots_are_not() {
        for p in [
            "/a/../b",
            "/a/./b",
            "/a/..",
            "/a/%2E%2e/b",
            "/a/..%2fb",
            "/a/..%5Cb",
            "/a/..\\b",
            "/a/..;x/b",
        ] {
            assert!(has_dot_segment(p), "{p}");
        }
        for p in [
            "/pub/file.iso",
            "/a..b/c",
            "/.well-known/x",
            "/a/...",
            "/a/b%20c",
            "/",
        ] {
            assert!(!has_dot_segment(p), "{p}");
        }
    }

    #[test]
    fn paths_are_routed_as_servers_read_them() {
        for (p, want) in [
            ("/api/x", "/api/x"),
            ("//api//x", "/api/x"),
            ("/%61pi/x", "/api/x"),
            ("/%41%7e%2D/x", "/A~-/x"),
            ("/api%2fx", "/api%2fx"),
            ("/a%20b", "/a%20b"),
            ("/a%", "/a%"),
            ("/a%zz", "/a%zz"),
        ] {
            assert_eq!(normalized_path(p), want, "{p}");
        }
        assert!(matches!(normalized_path("/api/x"), Cow::Borrowed(_)));
        for (p, want) in [
            ("/api%2fx.txt", Some("/api/x.txt")),
            ("/api%2Fx", Some("/api/x")),
            ("/api%5cx", Some("/api/x")),
            ("/api\\x", Some("/api/x")),
            ("/api;x/x.txt", Some("/api/x.txt")),
            ("/a/b;v=1", Some("/a/b")),
            ("/api/x", None),
        ] {
            assert_eq!(lenient_path(p).as_deref(), want, "{p}");
        }
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_lists_are_dropped() {
        let mut h = HeaderMap::new();
        h.append(
            header::CONNECTION,
            HeaderValue::from_static("x-trace, close"),
        );
        h.append("x-trace", HeaderValue::from_static("1"));
        h.append("keep-alive", HeaderValue::from_static("timeout=5"));
        h.append(header::TE, HeaderValue::from_static("trailers"));
        h.append(header::HOST, HeaderValue::from_static("x"));
        h.append("x-unit", HeaderValue::from_static("j1"));
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["host", "x-unit"]);
        // Nothing hop-by-hop: nothing changes.
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
        // The usual response: `Connection: keep-alive` alone goes; a field meant for every
        // recipient stays even when listed; every value of a listed field goes.
        for (connection, left) in [
            ("keep-alive", vec!["date", "x-a"]),
            ("Keep-Alive, X-A", vec!["date"]),
            ("host, content-length, x-forwarded-for", vec!["date", "x-a"]),
        ] {
            let mut h = HeaderMap::new();
            h.append(
                header::CONNECTION,
                HeaderValue::from_str(connection).unwrap(),
            );
            h.append(header::DATE, HeaderValue::from_static("now"));
            h.append("x-a", HeaderValue::from_static("1"));
            h.append("x-a", HeaderValue::from_static("2"));
            h.append(header::UPGRADE, HeaderValue::from_static("h2c"));
            h.append("proxy-connection", HeaderValue::from_static("keep-alive"));
            strip_hop_by_hop(&mut h);
            let mut names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
            names.sort_unstable();
            assert_eq!(names, left, "{connection}");
        }
    }
}
