//! Socket edges shared by the probes and the server: targets, sizes, and reads and writes
//! that give up at a deadline, so that a dead or hung peer can never hang the command
//! (IEPM-BW's lesson: every probe must time out).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A probe target: the text the user gave (with the port made explicit) and its addresses.
#[derive(Clone, Debug)]
pub struct Target {
    /// `host:port` as shown in output and written to records.
    pub name: String,
    pub addrs: Vec<SocketAddr>,
}

/// Splits `HOST[:PORT]` (IPv6 in brackets when a port is given) into host and port.
pub fn split_host_port(s: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad_port = |p: &str| format!("'{p}' in '{s}' is not a port number (1-65535)");
    if let Some(rest) = s.strip_prefix('[') {
        let (host, tail) = rest
            .split_once(']')
            .ok_or_else(|| format!("'{s}': missing ']' after the IPv6 address"))?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad_port(p))?,
            None if tail.is_empty() => default_port,
            None => return Err(format!("'{s}': unexpected '{tail}' after ']'")),
        };
        return Ok((host.to_string(), port));
    }
    match s.matches(':').count() {
        0 => Ok((s.to_string(), default_port)),
        1 => {
            let (host, p) = s.split_once(':').expect("one colon");
            Ok((host.to_string(), p.parse().map_err(|_| bad_port(p))?))
        }
        // A bare IPv6 address.
        _ => Ok((s.to_string(), default_port)),
    }
}

/// Resolves `HOST[:PORT]`; the error names the host.
pub fn resolve(s: &str, default_port: u16) -> Result<Target, String> {
    let (host, port) = split_host_port(s, default_port)?;
    if host.is_empty() {
        return Err(format!("'{s}': no host"));
    }
    // Port 0 is "any port" to a listener; no server is reached there.
    if port == 0 {
        return Err(format!("'0' in '{s}' is not a port number (1-65535)"));
    }
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}: resolve: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host}: resolve: no addresses"));
    }
    let name = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(Target { name, addrs })
}

/// Parses a size: a number of KiB (`64`), or with a suffix `B`, `K`, `M` or `G` (powers of
/// 1024, as JavaNws's "64KB").
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'B' => 1,
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("'{s}': unknown size suffix '{c}' (B, K, M or G)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1 << 10),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 64, 512K, 10M, 100B)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Time left until `by`, or a `TimedOut` error once it has passed.
pub fn remaining(by: Instant) -> io::Result<Duration> {
    let left = by.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
    } else {
        Ok(left)
    }
}

/// Blocking sockets report an expired SO_RCVTIMEO/SO_SNDTIMEO as WouldBlock on Unix.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A socket timeout or a signal: nothing is wrong, the caller checks its clock and goes on.
pub fn is_retry(e: &io::Error) -> bool {
    is_timeout(e) || e.kind() == io::ErrorKind::Interrupted
}

/// Sets both socket timeouts to the time left until `by`. Call it before a timed exchange
/// starts its clock: [`read_exact_by`] and [`write_all_by`] then make no extra system call
/// in the common case of one read or one write, and reset the timeouts only after partial
/// progress, so no call blocks past `by` by more than the time since this one.
pub fn prime(s: &TcpStream, by: Instant) -> io::Result<()> {
    let left = remaining(by)?;
    s.set_read_timeout(Some(left))?;
    s.set_write_timeout(Some(left))
}

/// A socket timeout expired: `TimedOut` once `by` has passed, else the timeouts are set to
/// the time left and the caller retries.
fn expired(s: &TcpStream, by: Instant) -> io::Result<()> {
    match remaining(by) {
        Ok(_) => prime(s, by),
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "timed out")),
    }
}

/// Reads exactly `buf.len()` bytes by `by` (after [`prime`]).
pub fn read_exact_by(s: &mut TcpStream, buf: &mut [u8], by: Instant) -> io::Result<()> {
    read_by_unless(s, buf, by, |_| false).map(|_| ())
}

/// Reads `buf.len()` bytes by `by` (after [`prime`]), or fewer once `stop` says of the bytes
/// read so far that no more are wanted: how many were read.
pub fn read_by_unless(
    s: &mut TcpStream,
    buf: &mut [u8],
    by: Instant,
    mut stop: impl FnMut(&[u8]) -> bool,
) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                ))
            }
            Ok(k) => {
                n += k;
                if stop(&buf[..n]) {
                    break;
                }
                if n < buf.len() {
                    prime(s, by)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => expired(s, by)?,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// How often a long [`discard_by`] resets the socket timeouts to the time left: often
/// enough that no read blocks far past the deadline, rarely enough to cost nothing per byte.
const REPRIME: Duration = Duration::from_millis(10);

/// Reads and discards `len` bytes by `by` (after [`prime`]), up to `buf.len()` per read.
pub fn discard_by(s: &mut TcpStream, len: u64, buf: &mut [u8], by: Instant) -> io::Result<()> {
    let mut left = len;
    let mut primed = Instant::now();
    while left > 0 {
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match s.read(&mut buf[..n]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                ))
            }
            Ok(k) => left -= k as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => expired(s, by)?,
            Err(e) => return Err(e),
        }
        if left > 0 && primed.elapsed() >= REPRIME {
            prime(s, by)?;
            primed = Instant::now();
        }
    }
    Ok(())
}

/// Writes all of `buf` by `by` (after [`prime`]).
pub fn write_all_by(s: &mut TcpStream, buf: &[u8], by: Instant) -> io::Result<()> {
    let mut n = 0;
    while n < buf.len() {
        match s.write(&buf[n..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "wrote nothing")),
            Ok(k) => {
                n += k;
                if n < buf.len() {
                    prime(s, by)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => expired(s, by)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_host_and_port() {
        let rows = [
            ("example.org", ("example.org", 8060)),
            ("example.org:9", ("example.org", 9)),
            ("127.0.0.1:65535", ("127.0.0.1", 65535)),
            ("[::1]:7", ("::1", 7)),
            ("[::1]", ("::1", 8060)),
            ("::1", ("::1", 8060)),
        ];
        for (s, (h, p)) in rows {
            assert_eq!(split_host_port(s, 8060), Ok((h.to_string(), p)), "{s}");
        }
        for bad in ["host:", "host:70000", "[::1", "[::1]x"] {
            assert!(split_host_port(bad, 8060).is_err(), "{bad}");
        }
        let t = resolve("[::1]:9", 1).unwrap();
        assert_eq!(t.name, "[::1]:9");
        assert!(resolve(":9", 1).is_err());
        assert_eq!(
            resolve("127.0.0.1:0", 1).unwrap_err(),
            "'0' in '127.0.0.1:0' is not a port number (1-65535)"
        );
    }

    #[test]
    fn sizes_default_to_kib() {
        let rows = [
            ("64", 65_536),
            ("512K", 524_288),
            ("10m", 10 << 20),
            ("1G", 1 << 30),
            ("100B", 100),
            ("0", 0),
        ];
        for (s, n) in rows {
            assert_eq!(parse_size(s), Ok(n), "{s}");
        }
        for bad in ["", "K", "1.5", "-3", "9X", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
