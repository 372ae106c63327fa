//! `nowcast udp HOST[:PORT]`: bursts of numbered UDP probes echoed by `nowcast serve`.
//! Each burst gives the median RTT, the jitter and the loss (with reordering and
//! duplicates counted); periodic bursts are forecast like the TCP series. Times come from
//! the monotonic clock; a probe not answered within the adaptive timeout after the last
//! send (1 s before there is a forecast, RFC 6298 §2.1's initial RTO) counts as lost.

use crate::periodic::{self, Common};
use anyhow::{anyhow, bail, Result};
use nowcast::net::resolve;
use nowcast::probe::report::{cell, clock, heading, now_ms, Sink, Table};
use nowcast::probe::series_set::{Context, Measurement, Outcome, SeriesSet};
use nowcast::probe::udp::{Burst, Summary};
use nowcast::probe::wire::{UdpProbe, DEFAULT_PORT};
use nowcast::stop::Stop;
use nowcast_core::record::{Metric, Probe, Transport};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(
    after_help = "Example: nowcast udp example.org --probes 200 --interval 5 --period 10\n\
    Records per burst: rtt (median, ms), jitter (mean |ΔRTT| of consecutive probes, ms) and \
    loss (fraction). Reordered and duplicated replies are shown in the table."
)]
pub struct Args {
    /// The server (`nowcast serve`), HOST or HOST:PORT ([v6]:PORT).
    target: String,
    /// Probes per burst.
    #[arg(long, default_value_t = 100)]
    probes: u64,
    /// Milliseconds between probes of a burst.
    #[arg(long, default_value_t = 10.0)]
    interval: f64,
    /// Datagram size in bytes (at least the 22-byte header).
    #[arg(long, default_value_t = 64)]
    size: usize,
    #[command(flatten)]
    common: Common,
}

const METRICS: [(Metric, bool); 3] = [
    (Metric::Rtt, false),
    (Metric::Jitter, false),
    (Metric::Loss, false),
];
/// Reply wait before the RTT series has a forecast (RFC 6298 §2.1).
const INITIAL_WAIT: Duration = Duration::from_secs(1);

pub fn run(args: Args) -> Result<()> {
    let bounds = args.common.bounds(100.0)?;
    let deadline = args.common.deadline()?;
    if args.size < UdpProbe::HEADER_LEN || args.size > 65_507 {
        bail!(
            "--size must be between {} and 65507 bytes",
            UdpProbe::HEADER_LEN
        );
    }
    if args.probes == 0 {
        bail!("--probes must be at least 1");
    }
    if !(args.interval.is_finite() && args.interval >= 0.0) {
        bail!("--interval must be ≥ 0 ms");
    }
    let target = resolve(&args.target, DEFAULT_PORT).map_err(|e| anyhow!(e))?;
    let addr = target.addrs[0];
    let host = target.name.clone();
    let local: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .expect("literal address");
    let sock = UdpSocket::bind(local).map_err(|e| anyhow!("{host}: bind udp: {e}"))?;
    sock.connect(addr)
        .map_err(|e| anyhow!("{host}: connect udp: {e}"))?;
    // Never blocks: `burst` waits in ppoll and drains what has arrived.
    sock.set_nonblocking(true)?;
    let from = sock.local_addr().ok().map(|a| a.to_string());
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let mut sink = Sink::new(args.common.json, args.common.out.as_deref())?;
    let mut set = SeriesSet::new(&METRICS, bounds);
    let mut headings = vec!["#".to_string(), "time (UTC)".to_string()];
    headings.extend(METRICS.iter().map(|(m, _)| heading(*m)));
    headings.extend(["lost".into(), "reordered".into(), "duplicates".into()]);
    let (table, head) = Table::new(&headings);
    if !sink.json() {
        println!(
            "nowcast udp → {host} ({addr}), {} probes of {} bytes every {} ms per burst",
            args.probes, args.size, args.interval
        );
    }
    let clock0 = Instant::now();
    let interval = Duration::from_secs_f64(args.interval / 1e3);
    let result = periodic::run(&args.common, &stop, &mut sink, |seq| {
        let ctx = Context {
            timestamp_ms: now_ms(),
            source: "nowcast udp",
            from: from.clone(),
            to: host.clone(),
            seq,
        };
        let wait = set
            .timeout_ms(Metric::Rtt)
            .map_or(INITIAL_WAIT, |ms| Duration::from_secs_f64(ms / 1e3))
            .min(deadline);
        let first_seq = seq * args.probes;
        let started = Instant::now();
        let burst = burst(
            &sock,
            clock0,
            first_seq,
            args.probes,
            args.size,
            interval,
            wait,
            started + deadline,
        );
        let wait_ms = wait.as_secs_f64() * 1e3;
        let probe = Probe {
            transport: Some(Transport::Udp),
            payload_bytes: Some(args.size as u64),
            ..Probe::default()
        };
        let mut records = Vec::new();
        let mut add = |set: &mut SeriesSet, metric, outcome| {
            records.push(set.observe(
                &ctx,
                Measurement {
                    metric,
                    outcome,
                    timeout_ms: Some(wait_ms),
                    probe: Some(probe.clone()),
                },
            ))
        };
        let summary = match burst {
            Err(e) => {
                add(
                    &mut set,
                    Metric::Rtt,
                    Outcome::Error(format!("{host}: {e}")),
                );
                None
            }
            Ok(s) => {
                let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
                let rtt = match s.rtt_median_ms {
                    Some(v) => Outcome::Ok {
                        value: v,
                        duration_ms: v,
                    },
                    None => Outcome::Timeout { elapsed_ms },
                };
                add(&mut set, Metric::Rtt, rtt);
                if s.received >= 2 {
                    let j = s.jitter_ms;
                    add(
                        &mut set,
                        Metric::Jitter,
                        Outcome::Ok {
                            value: j,
                            duration_ms: j,
                        },
                    );
                }
                let loss = Outcome::Ok {
                    value: s.loss,
                    duration_ms: elapsed_ms,
                };
                add(&mut set, Metric::Loss, loss);
                Some(s)
            }
        };
        let mut cells = vec![(seq + 1).to_string(), clock(ctx.timestamp_ms)];
        for (m, _) in METRICS {
            let r = records.iter().find(|r| r.metric == m);
            cells.push(cell(r, r.and(set.forecast(m)).map(|f| f.value)));
        }
        if let Some(s) = &summary {
            cells.extend([
                (s.sent - s.received).to_string(),
                s.reordered.to_string(),
                s.duplicates.to_string(),
            ]);
        }
        let row = table.row(&cells);
        (
            records,
            if seq == 0 {
                format!("{head}\n{row}")
            } else {
                row
            },
        )
    });
    sink.summary(&set.stats())?;
    result
}

fn ns_since(clock0: Instant) -> u64 {
    u64::try_from(clock0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Sends `count` probes `interval` apart and takes the replies on the same thread, until
/// every probe is answered or `wait` has passed since the last send (never past `hard`).
///
/// One thread, like sockperf's client: between sends it sleeps in `ppoll` on the socket
/// (nanosecond timeout, unlike `SO_RCVTIMEO`'s jiffies), so a reply wakes the thread that
/// stamps it, with no hand-over between threads; before each send it drains what has
/// arrived, so a fast burst never overflows the receive buffer.
#[allow(clippy::too_many_arguments)]
fn burst(
    sock: &UdpSocket,
    clock0: Instant,
    first_seq: u64,
    count: u64,
    size: usize,
    interval: Duration,
    wait: Duration,
    hard: Instant,
) -> io::Result<Summary> {
    let n = usize::try_from(count).map_err(|_| io::Error::other("too many probes"))?;
    let mut state = Burst::new(first_seq, n);
    let mut out = vec![0u8; size];
    let mut inbox = vec![0u8; 65_536];
    let start = Instant::now();
    let mut next = 0u64;
    let mut last_send = start;
    loop {
        // Every reply already queued, each stamped as it is taken.
        loop {
            match sock.recv(&mut inbox) {
                Ok(len) => {
                    let now = ns_since(clock0);
                    if let Ok(p) = UdpProbe::decode(&inbox[..len]) {
                        state.received(p.seq, now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error (port unreachable) from an earlier send: the probe is lost,
                // which the accounting already says; keep listening.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("receive: {e}"))),
            }
        }
        let now = Instant::now();
        if now >= hard {
            break;
        }
        let until = if next < count {
            let due = start + interval.mul_f64(next as f64);
            if due <= now {
                let seq = first_seq + next;
                let sent_ns = ns_since(clock0);
                UdpProbe { seq, sent_ns }.encode(&mut out);
                state.sent(seq, sent_ns);
                next += 1;
                last_send = Instant::now();
                match sock.send(&out) {
                    Ok(_) => continue,
                    // A refused earlier probe reports here too; this one may still have left.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    // The send buffer is full: this probe did not leave, which counts as lost.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(io::Error::new(e.kind(), format!("send: {e}"))),
                }
            }
            due
        } else {
            if state.all_answered() {
                break;
            }
            let end = last_send + wait;
            if end <= now {
                break;
            }
            end
        };
        wait_readable(sock, until.min(hard) - now)?;
    }
    Ok(state.summary())
}

/// Sleeps until `sock` has a datagram to read or `timeout` has passed.
fn wait_readable(sock: &UdpSocket, timeout: Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let r = {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: one valid pollfd for the duration of the call, a valid timespec, no mask.
        unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) }
    };
    // Elsewhere poll(2), whole milliseconds rounded up: a send may leave up to 1 ms late.
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let r = {
        let ms = timeout.as_nanos().div_ceil(1_000_000);
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe {
            libc::poll(
                &mut fd,
                1,
                libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX),
            )
        }
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(io::Error::new(e.kind(), format!("poll: {e}")));
        }
    }
    Ok(())
}
