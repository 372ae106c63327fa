//! Connections to the replicas (edge): an HTTP/1.1 client connection per request in flight,
//! kept alive in a small pool per replica, and the kernel's view of each connection
//! (TCP_INFO: smoothed and least RTT and delivery rate, RFC 9293's sender state as Linux
//! reports it).

use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

use super::body::UpBody;
use crate::net::{tcp_info, Info};

/// The most an upstream connection reads at once (hyper's read buffer; its default is about
/// 400 KiB): a response head must fit in it (nginx's `proxy_buffer_size` is 4 or 8 KiB), and
/// each part of a body read is a piece of it that holds the whole buffer until the client's
/// connection has taken that part. A response whose client reads nothing holds about four
/// times this (the read buffer, the part waiting to be sent down and the one queued for the
/// client): 391 KiB with hyper's default, 277 KiB with 64 KiB, 128 KiB with 32 KiB (100 such
/// HTTP/1.1 downloads, the test `stalled_downloads_hold_little_memory…`). On loopback 64 KiB
/// downloads 64 MiB at 13.7 and 12.5 Gbit/s where 32 KiB reads 11.8 and 9.9 (two runs of
/// `cargo bench --bench proxy`, medians of 5, nginx 14.3 and 12.8 in the same runs): the bulk
/// rate is worth the memory, which `--max-connections-per-client` bounds per client.
pub const READ_BUFFER: usize = 64 << 10;

/// Where a replica is.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// host:port to connect to.
    pub authority: String,
    /// Path prefix prepended to every request's path ("" for none).
    pub base_path: String,
}

impl Target {
    /// Parses `http://host[:port][/path]` (the scheme in any case, RFC 3986 §3.1). An error
    /// quotes the URL and says what to write instead.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
                return Err(format!(
                    "'{url}': only http:// replicas are supported (the proxy does not speak TLS \
                     upstream)"
                ))
            }
            Some((scheme, _)) => {
                return Err(format!(
                    "'{url}': the scheme '{scheme}' is not http; write http://HOST[:PORT][/BASE]"
                ))
            }
            None => {
                return Err(format!(
                    "'{url}' has no scheme; write http://{}",
                    url.trim_start_matches('/')
                ))
            }
        };
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        // A user and password would be taken for the host (and every request would fail
        // to connect), and the proxy sends no credentials upstream; the URL is not quoted,
        // so that the password is not printed.
        if auth.contains('@') {
            return Err(
                "a user or password in a replica URL ('USER@' before the host) is not \
                 supported: the proxy sends no credentials upstream; write \
                 http://HOST[:PORT][/BASE]"
                    .into(),
            );
        }
        // BASE is a path every request's path goes after: a query or a fragment there would
        // swallow the request's path.
        if let Some(c) = rest.chars().find(|c| matches!(c, '?' | '#')) {
            return Err(format!(
                "'{url}': '{c}' in a replica URL; write http://HOST[:PORT][/BASE] (each \
                 request's path and query follow BASE)"
            ));
        }
        if auth.is_empty() {
            return Err(format!("'{url}': no host"));
        }
        let authority = if let Some(rest) = auth.strip_prefix('[') {
            let (host, port) = rest
                .split_once(']')
                .ok_or_else(|| format!("'{url}': the IPv6 address has no closing ']'"))?;
            host.parse::<std::net::Ipv6Addr>()
                .map_err(|_| format!("'{url}': '{host}' is not an IPv6 address"))?;
            match port.strip_prefix(':') {
                Some(p) => {
                    p.parse::<u16>()
                        .map_err(|_| format!("'{url}': port '{p}' is not a number"))?;
                    auth.to_string()
                }
                None if port.is_empty() => format!("{auth}:80"),
                None => return Err(format!("'{url}': '{port}' after the IPv6 address")),
            }
        } else if auth.contains(':') {
            let port = auth.rsplit(':').next().unwrap_or("");
            port.parse::<u16>()
                .map_err(|_| format!("'{url}': port '{port}' is not a number"))?;
            auth.to_string()
        } else {
            format!("{auth}:80")
        };
        Ok(Target {
            authority,
            base_path: path.to_string(),
        })
    }
}

/// Why no connection to a replica could be had.
#[derive(Debug, PartialEq)]
pub enum ConnectError {
    /// The replica did not take it: refused, unreachable, timed out.
    Replica(String),
    /// The proxy's own resources ran out before the replica was reached: no descriptor
    /// (EMFILE, ENFILE), no memory or buffers (ENOMEM, ENOBUFS), no local port
    /// (EADDRNOTAVAIL). Clients can cause this (each request in flight holds an upstream
    /// socket and its duplicate, and an HTTP/2 connection carries 128 of them), so it says
    /// nothing of the replica and must not count against it.
    Local(String),
}

impl ConnectError {
    /// `e`, met while doing `what`, as the replica's failure or the proxy's own.
    pub fn of(e: &std::io::Error, what: &str) -> ConnectError {
        let local = matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
        );
        let text = format!("{what}: {e}");
        if local {
            ConnectError::Local(text)
        } else {
            ConnectError::Replica(text)
        }
    }
}

/// One upstream connection: hyper's request handle and a duplicate of the socket, through
/// which the kernel's counters are read.
pub struct Conn {
    pub send: SendRequest<UpBody>,
    fd: OwnedFd,
    /// The TCP handshake's duration (SYN to SYN-ACK), ms, for a new connection.
    pub handshake_ms: Option<f64>,
}

impl Conn {
    pub fn info(&self) -> Option<Info> {
        tcp_info(self.fd.as_raw_fd())
    }

    /// The socket's descriptor, for [`tcp_info`] while hyper holds the connection's handle
    /// (valid as long as the `Conn` lives).
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Ends the connection both ways now, whoever still holds hyper's side of it (a
    /// response body the server has not dropped yet): the replica sees it closed at once.
    pub fn shut_down(&self) {
        let _ = socket2::SockRef::from(&self.fd).shutdown(std::net::Shutdown::Both);
    }
}

/// A replica's idle connections.
pub struct Pool {
    pub target: Target,
    /// The `Host` header of every request to it (its authority), made once.
    pub host: Option<hyper::header::HeaderValue>,
    idle: Mutex<VecDeque<(Conn, Instant)>>,
    max_idle: usize,
    idle_for: Duration,
}

impl Pool {
    pub fn new(target: Target, max_idle: usize, idle_for: Duration) -> Self {
        Self {
            host: hyper::header::HeaderValue::from_str(&target.authority).ok(),
            target,
            idle: Mutex::new(VecDeque::new()),
            max_idle,
            idle_for,
        }
    }

    /// An idle connection still open at `now` and waiting for a request, if there is one.
    /// No await: a request's future then holds no connect or handshake of its own, which
    /// would make it larger, and it is moved whole at every step ([`Pool::connect`] is
    /// the rare path).
    pub fn take_idle(&self, now: Instant) -> Option<Conn> {
        loop {
            let (mut c, at) = self.idle.lock().expect("pool lock").pop_back()?;
            if now.saturating_duration_since(at) < self.idle_for
                && !c.send.is_closed()
                && c.send.is_ready()
            {
                c.handshake_ms = None;
                return Some(c);
            }
        }
    }

    /// A new connection within `connect_timeout`.
    pub async fn connect(&self, connect_timeout: Duration) -> Result<Conn, ConnectError> {
        let start = Instant::now();
        let authority = &self.target.authority;
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(authority))
            .await
            .map_err(|_| ConnectError::Replica(format!("connect to {authority}: timed out")))?
            .map_err(|e| ConnectError::of(&e, &format!("connect to {authority}")))?;
        let handshake_ms = start.elapsed().as_secs_f64() * 1e3;
        stream
            .set_nodelay(true)
            .map_err(|e| ConnectError::of(&e, &format!("TCP_NODELAY on {authority}")))?;
        let fd = stream
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| ConnectError::of(&e, &format!("dup of the socket to {authority}")))?;
        let (send, conn) = http1::Builder::new()
            .max_buf_size(READ_BUFFER)
            .handshake::<_, UpBody>(TokioIo::new(stream))
            .await
            .map_err(|e| ConnectError::Replica(format!("HTTP/1.1 to {authority}: {e}")))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send,
            fd,
            handshake_ms: Some(handshake_ms),
        })
    }

    /// Gives back a connection whose last response was read to its end, at `now`.
    pub fn put(&self, c: Conn, now: Instant) {
        if c.send.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().expect("pool lock");
        while idle.len() >= self.max_idle {
            idle.pop_front();
        }
        idle.push_back((c, now));
    }
}

/// The type of a response from a replica.
pub type UpResponse = hyper::Response<Incoming>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxys_own_shortages_are_not_the_replicas_failures() {
        let os = std::io::Error::from_raw_os_error;
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ] {
            assert!(matches!(
                ConnectError::of(&os(errno), "connect"),
                ConnectError::Local(_)
            ));
        }
        for errno in [
            libc::ECONNREFUSED,
            libc::EHOSTUNREACH,
            libc::ENETUNREACH,
            libc::ETIMEDOUT,
        ] {
            assert!(matches!(
                ConnectError::of(&os(errno), "connect"),
                ConnectError::Replica(_)
            ));
        }
        // A message made up for the error (no OS code) is the replica's.
        let other = std::io::Error::other("resolve h: no such host");
        assert!(matches!(
            ConnectError::of(&other, "connect"),
            ConnectError::Replica(_)
        ));
    }

    #[test]
    fn replica_urls_parse_or_say_what_is_wrong() {
        assert_eq!(
            Target::parse("http://10.0.0.1:8080/base/").unwrap(),
            Target {
                authority: "10.0.0.1:8080".into(),
                base_path: "/base".into()
            }
        );
        assert_eq!(Target::parse("http://h").unwrap().authority, "h:80");
        assert_eq!(Target::parse("http://[::1]").unwrap().authority, "[::1]:80");
        assert_eq!(Target::parse("HTTP://h").unwrap().authority, "h:80");
        assert!(Target::parse("https://h")
            .unwrap_err()
            .contains("only http://"));
        assert_eq!(
            Target::parse("127.0.0.1:28081").unwrap_err(),
            "'127.0.0.1:28081' has no scheme; write http://127.0.0.1:28081"
        );
        assert_eq!(
            Target::parse("ftp://h").unwrap_err(),
            "'ftp://h': the scheme 'ftp' is not http; write http://HOST[:PORT][/BASE]"
        );
        assert!(Target::parse("http://h:x")
            .unwrap_err()
            .contains("port 'x'"));
        assert!(Target::parse("http:///p").unwrap_err().contains("no host"));
        assert_eq!(
            Target::parse("http://[::1]:8080").unwrap().authority,
            "[::1]:8080"
        );
        assert!(Target::parse("http://[::1")
            .unwrap_err()
            .contains("no closing ']'"));
        assert!(Target::parse("http://[zz]")
            .unwrap_err()
            .contains("not an IPv6 address"));
        assert!(Target::parse("http://[::1]x")
            .unwrap_err()
            .contains("after the IPv6"));
        // Credentials are refused, and not repeated in the error.
        let e = Target::parse("http://user:s3cret@10.0.0.1:8080/b").unwrap_err();
        assert!(e.contains("a user or password"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        for (url, c) in [("http://h/base?x=1", '?'), ("http://h#f", '#')] {
            let e = Target::parse(url).unwrap_err();
            assert!(e.contains(&format!("'{c}' in a replica URL")), "{e}");
        }
    }
}
