//! Socket edges shared by the probes and the server: targets, sizes, and reads and writes
//! that give up at a deadline, so that a dead or hung peer can never hang the command
//! (IEPM-BW's lesson: every probe must time out).

use crate::stop::Stop;
use nowcast_core::transfer::Start;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// When a blocking exchange gives up: at `at`, or, with a `stop` flag, within
/// [`STOP_POLL`] of the flag being raised (Ctrl-C during a probe whose timeout is a minute
/// away), with the error [`stopped`].
#[derive(Clone, Copy)]
pub struct By<'a> {
    pub at: Instant,
    pub stop: Option<&'a Stop>,
}

impl By<'_> {
    /// A deadline no signal cuts short.
    pub fn at(at: Instant) -> By<'static> {
        By { at, stop: None }
    }

    /// The same flag, an earlier deadline if `at` is earlier.
    pub fn min(self, at: Instant) -> Self {
        By {
            at: self.at.min(at),
            ..self
        }
    }

    fn stopped(&self) -> bool {
        self.stop.is_some_and(Stop::is_set)
    }
}

/// How often a blocking call under a stop flag wakes to look at it: socket timeouts are at
/// most this long, so a raised flag ends the call this soon.
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// The marker of [`stopped`]'s error.
#[derive(Debug)]
struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped")
    }
}

impl std::error::Error for Stopped {}

/// The error of a call that gave up because the stop flag was raised.
pub fn stopped() -> io::Error {
    io::Error::other(Stopped)
}

/// Whether `e` is [`stopped`]'s.
pub fn is_stopped(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|x| x.is::<Stopped>())
}

/// Connects `sock` to `addr` by `by`: `TimedOut` once it passes, [`stopped`] soon after its
/// flag is raised. `sock` is left blocking.
pub fn connect_by(sock: &socket2::Socket, addr: SocketAddr, by: By<'_>) -> io::Result<()> {
    sock.set_nonblocking(true)?;
    let started = match sock.connect(&addr.into()) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) || is_retry(&e) => {
            wait_connected(sock, by)
        }
        Err(e) => Err(e),
    };
    sock.set_nonblocking(false)?;
    started
}

/// Waits for a non-blocking connect of `sock` to end.
fn wait_connected(sock: &socket2::Socket, by: By<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        if by.stopped() {
            return Err(stopped());
        }
        let left = match remaining(by.at) {
            Ok(left) => left,
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection timed out",
                ))
            }
        };
        let slice = if by.stop.is_some() {
            left.min(STOP_POLL)
        } else {
            left
        };
        let mut p = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms =
            libc::c_int::try_from(slice.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            continue;
        }
        return match sock.take_error()? {
            Some(e) => Err(e),
            None if p.revents & (libc::POLLHUP | libc::POLLERR) != 0 => {
                Err(io::Error::other("the connection failed with no error set"))
            }
            None => Ok(()),
        };
    }
}

/// A probe target: the text the user gave (with the port made explicit) and its addresses.
#[derive(Clone, Debug)]
pub struct Target {
    /// `host:port` as shown in output and written to records.
    pub name: String,
    pub addrs: Vec<SocketAddr>,
}

/// A target as a command's first line names it: `host:port`, with the address it resolved
/// to after it when that is not the same text (`localhost:8060 (127.0.0.1:8060)`).
pub fn shown(host: &str, addr: SocketAddr) -> String {
    let addr = addr.to_string();
    if addr == host {
        addr
    } else {
        format!("{host} ({addr})")
    }
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
                // A word ("abc") is no size with an odd suffix.
                _ if !t[..i].bytes().any(|b| b.is_ascii_digit()) => {
                    return Err(format!("'{s}' is not a size (e.g. 64, 512K, 10M, 100B)"))
                }
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

/// Parses a duration flag: a bare number in the flag's own unit (`bare`: "ms" or "s", as its
/// help says), or a duration with its units as a campaign's file writes them (`250ms`, `1.5s`,
/// `5m`, `1h30m`: [`crate::when::with_units_ms`]), so that a value copied from a flag in the
/// other unit, or from a campaign, is read as meant. The result is in `bare`'s unit; negative,
/// infinite and NaN values are refused.
pub fn parse_duration_in(s: &str, bare: &str) -> Result<f64, String> {
    let ms_per_bare = if bare == "ms" { 1.0 } else { 1e3 };
    let t = s.trim();
    let ms = match t.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n * ms_per_bare),
        Ok(_) => Err(format!("'{s}' is not a duration")),
        Err(_) => crate::when::with_units_ms(t),
    }
    .map_err(|e| format!("{e} (e.g. 250ms, 1.5s, 5m; a bare number is in {bare})"))?;
    Ok(ms / ms_per_bare)
}

/// [`parse_duration_in`] for a flag in milliseconds.
pub fn parse_ms(s: &str) -> Result<f64, String> {
    parse_duration_in(s, "ms")
}

/// [`parse_duration_in`] for a flag in seconds.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    parse_duration_in(s, "s")
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
/// Under a stop flag, the timeouts are at most [`STOP_POLL`].
pub fn prime(s: &TcpStream, by: By<'_>) -> io::Result<()> {
    if by.stopped() {
        return Err(stopped());
    }
    let mut left = remaining(by.at)?;
    if by.stop.is_some() {
        left = left.min(STOP_POLL);
    }
    s.set_read_timeout(Some(left))?;
    s.set_write_timeout(Some(left))
}

/// A socket timeout expired: `TimedOut` once `by` has passed, [`stopped`] once its flag is
/// raised, else the timeouts are set to the time left and the caller retries.
fn expired(s: &TcpStream, by: By<'_>) -> io::Result<()> {
    match remaining(by.at) {
        Ok(_) => prime(s, by),
        Err(_) if by.stopped() => Err(stopped()),
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "timed out")),
    }
}

/// Reads exactly `buf.len()` bytes by `by` (after [`prime`]).
pub fn read_exact_by(s: &mut TcpStream, buf: &mut [u8], by: By<'_>) -> io::Result<()> {
    read_by_unless(s, buf, by, |_| false).map(|_| ())
}

/// Reads `buf.len()` bytes by `by` (after [`prime`]), or fewer once `stop` says of the bytes
/// read so far that no more are wanted: how many were read.
pub fn read_by_unless(
    s: &mut TcpStream,
    buf: &mut [u8],
    by: By<'_>,
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
pub fn discard_by(s: &mut TcpStream, len: u64, buf: &mut [u8], by: By<'_>) -> io::Result<()> {
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

/// Writes all of `buf` by `by` (after [`prime`]). The stop flag is looked at before every
/// write, not only when one blocks: on loopback each write of an upload's chunk completes at
/// once, and a 1 GiB upload ran 0.4 s past Ctrl-C and was recorded.
pub fn write_all_by(s: &mut TcpStream, buf: &[u8], by: By<'_>) -> io::Result<()> {
    let mut n = 0;
    while n < buf.len() {
        if by.stopped() {
            return Err(stopped());
        }
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

/// What TCP_INFO says of a connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Info {
    /// Smoothed RTT, ms: with the queue the connection's own transfers built.
    pub rtt_ms: f64,
    /// The lowest RTT seen over the connection's life, ms (Linux ≥ 4.6; 0 when unknown): the
    /// path without the queue a transfer builds.
    pub min_rtt_ms: f64,
    /// The most recent delivery rate, Mbit/s (Linux ≥ 4.9; 0 when unknown).
    pub delivery_mbits: f64,
    /// Bytes the peer acknowledged over the connection's life.
    pub bytes_acked: u64,
    /// Whether the socket still holds data to send or to see acknowledged (segments in
    /// flight, or bytes not sent yet).
    pub sending: bool,
    /// Time since the socket last received data, ms.
    pub last_data_recv_ms: u64,
    /// The slow-start threshold, segments: [`INFINITE_SSTHRESH`] until the congestion
    /// control's start ends.
    pub snd_ssthresh: u32,
    /// The congestion window, segments.
    pub snd_cwnd: u32,
}

/// TCP_INFO of the socket `fd`.
pub fn tcp_info(fd: i32) -> Option<Info> {
    // SAFETY: getsockopt writes at most `len` bytes into `info`, a plain C struct.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then(|| Info {
        rtt_ms: info.tcpi_rtt as f64 / 1e3,
        min_rtt_ms: info.tcpi_min_rtt as f64 / 1e3,
        delivery_mbits: info.tcpi_delivery_rate as f64 * 8.0 / 1e6,
        bytes_acked: info.tcpi_bytes_acked,
        sending: info.tcpi_unacked > 0 || info.tcpi_notsent_bytes > 0,
        last_data_recv_ms: info.tcpi_last_data_recv.into(),
        snd_ssthresh: info.tcpi_snd_ssthresh,
        snd_cwnd: info.tcpi_snd_cwnd,
    })
}

/// `tcpi_snd_ssthresh` of a connection whose start has not ended (Linux's
/// `TCP_INFINITE_SSTHRESH`).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// The name of the congestion control of the socket `fd` (`TCP_CONGESTION`): "bbr", "cubic".
pub fn congestion_control(fd: i32) -> Option<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `name`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let name = &name[..(len as usize).min(name.len())];
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Turns on the kernel's pacing for the TCP socket `fd`, at no cap (Linux ≥ 4.13: setting
/// `SO_MAX_PACING_RATE` to anything but "unlimited" asks TCP to pace itself; BBR always
/// does). Without it a loss-based control (CUBIC, Reno) sends its window at line rate when a
/// transfer starts on a warm connection, and a shallow bottleneck queue drops most of it:
/// behind 150 ms (40 Mbit/s, a 20 ms queue) a window of 358 packets lost 214 of them, and
/// `nowcast tcp` read 4.5 Mbit/s where iperf3's longer CUBIC transfer read 31.8. Paced at
/// twice the window per round trip in slow start and 1.2 times it after (Linux's
/// `tcp_update_pacing_rate`), the window reaches the queue no faster than the path drains
/// it. Best effort: where the option is refused, the socket is left as it is.
pub fn pace(fd: i32) {
    let no_cap: u64 = u64::MAX - 1;
    // SAFETY: setsockopt reads `size_of::<u64>()` bytes from `no_cap`.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&no_cap as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        );
    }
}

/// Where the sender of the socket `fd` is in its congestion control's start ([`Start`]):
/// BBR is in its startup until it sets the slow-start threshold as it leaves it; a loss-based
/// control (Reno, CUBIC) is in slow start while its window is below the threshold (infinite
/// until the first loss; after a retransmission timeout the window restarts from one packet).
pub fn sender_start(fd: i32) -> Start {
    let Some(info) = tcp_info(fd) else {
        return Start::Unknown;
    };
    match congestion_control(fd) {
        Some(name) if name.starts_with("bbr") => {
            if info.snd_ssthresh < INFINITE_SSTHRESH {
                Start::Over
            } else {
                Start::Startup
            }
        }
        Some(_) if info.snd_cwnd < info.snd_ssthresh => Start::SlowStart,
        Some(_) => Start::Over,
        None => Start::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pacing is on, at no cap; a new connection that has sent nothing is in its start, and
    /// its congestion control has a name.
    #[test]
    fn a_paced_new_connection_is_in_its_start() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let fd = c.as_raw_fd();
        pace(fd);
        let mut rate: u64 = 0;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `rate`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_MAX_PACING_RATE,
                (&mut rate as *mut u64).cast(),
                &mut len,
            )
        };
        assert_eq!((rc, rate), (0, u64::MAX - 1));
        let start = sender_start(fd);
        assert!(
            matches!(start, Start::Startup | Start::SlowStart),
            "{start:?}"
        );
        assert!(!congestion_control(fd).unwrap_or_default().is_empty());
        let info = tcp_info(fd).unwrap();
        assert_eq!(info.snd_ssthresh, INFINITE_SSTHRESH);
    }

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
        assert_eq!(
            parse_size("abc"),
            Err("'abc' is not a size (e.g. 64, 512K, 10M, 100B)".into())
        );
        assert_eq!(
            parse_size("9X"),
            Err("'9X': unknown size suffix 'X' (B, K, M or G)".into())
        );
    }

    #[test]
    fn a_duration_is_read_in_its_flags_unit_or_in_its_own() {
        // `--timeout-floor 1` means 1 ms to `nowcast tcp` and 1 s to `nowcast proxy`; with a
        // unit, the same text means the same time to both.
        assert_eq!(parse_ms("250"), Ok(250.0));
        assert_eq!(parse_ms("1.5s"), Ok(1500.0));
        assert_eq!(parse_ms("1s"), parse_seconds("1000ms").map(|s| s * 1e3));
        assert_eq!(parse_seconds("2"), Ok(2.0));
        assert_eq!(parse_seconds("250ms"), Ok(0.25));
        assert_eq!(parse_seconds("1min"), Ok(60.0));
        assert_eq!(parse_seconds(" 3s "), Ok(3.0));
        // The campaign file's units too, so that a value copied from it means the same.
        assert_eq!(parse_seconds("5m"), Ok(300.0));
        assert_eq!(parse_seconds("1h30m"), Ok(5400.0));
        assert_eq!(parse_ms("0.5ms"), Ok(0.5));
        assert_eq!(parse_ms("2d"), Ok(172_800_000.0));
        let unit = parse_ms("5x").unwrap_err();
        assert!(
            unit.contains("unknown unit 'x' (ms, s, m, h, d)")
                && unit.contains("bare number is in ms"),
            "{unit}"
        );
        for bad in ["", "s", "-1", "inf", "NaN", "1.2.3s", "1e999"] {
            let e = parse_seconds(bad).unwrap_err();
            assert!(e.contains("a bare number is in s"), "{bad}: {e}");
        }
    }
}
