//! `nowcast tcp HOST[:PORT]`: the NWS TCP probe (JavaNws §2.1.1). Each experiment opens a
//! session and measures, in order:
//!
//! 1. `handshake_rtt`: the TCP connect (SYN to SYN-ACK), then the session hello;
//!    then one un-timed two-byte warm-up echo, recorded nowhere (see [`WARM_UP`]);
//! 2. `rtt`: a two-byte echo with Nagle off (`TCP_NODELAY`);
//! 3. `rtt_nagle`: the same echo with Nagle on, reported separately;
//! 4. `bandwidth_up`: N KiB to the server, timed until its two-byte acknowledgement, with
//!    the predicted non-Nagle RTT subtracted (the raw time is kept in the record);
//! 5. `bandwidth_down` (with `--direction down` or `both`): N KiB from the server, timed
//!    from the request to the last byte, which is also one round trip more than the
//!    transfer, so the same prediction is subtracted.
//!
//! Socket buffers are set before connecting (so the window scale fits them) and the sizes
//! the kernel granted are reported, because buffer sizes change what is measured (JavaNws
//! §4). Every step waits at most its series' adaptive timeout, capped by the hard deadline.

use crate::periodic::{self, Common};
use anyhow::{anyhow, bail, Result};
use nowcast::net::{discard_by, parse_size, prime, read_exact_by, resolve, write_all_by, Target};
use nowcast::probe::bandwidth::bandwidth;
use nowcast::probe::report::{cell, clock, heading, now_ms, Sink, Table};
use nowcast::probe::series_set::{Context, Measurement, Outcome, SeriesSet};
use nowcast::probe::wire::{self, Hello, Status, Welcome, DEFAULT_PORT};
use nowcast::stop::Stop;
use nowcast_core::record::{Metric, Probe, Record, Transport};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The payload byte of the un-timed warm-up echo that follows the session hello (the timed
/// echoes carry the session's sequence number; all are read in order on one stream).
///
/// Why a warm-up: on a fresh TCP connection the first data exchange after the hello costs
/// more than the following ones, whichever probe makes it (about 2 µs on loopback, 14.5
/// against 12.3 µs; with the order of the two timed echoes swapped, the Nagle-on echo
/// became the slow one). That cost belongs to the new connection (first use of its paths
/// in the kernel and the server), not to the round trip the series forecasts, and peers
/// such as `sockperf ping-pong` measure a warm, long-lived connection. JavaNws §2.1.1 opens
/// each experiment with a handshake before the timed packets; this echo completes that
/// handshake, so the timed `rtt` and `rtt_nagle` are both exchanges on a warm connection.
/// `handshake_rtt` still times only the connect, as before.
const WARM_UP: u8 = 0xff;

#[derive(clap::Args)]
#[command(
    after_help = "Example: nowcast tcp example.org --period 10 --size 256 --out probes.ndjson\n\
    Table cells show the measurement and, after the arrow, the forecast of the next value. \
    Records: handshake_rtt, rtt (Nagle off), rtt_nagle (Nagle on) in ms, bandwidth_up in \
    Mbit/s with probe.raw_ms and probe.rtt_subtracted_ms. After the handshake, each session \
    makes one un-timed two-byte warm-up echo, recorded nowhere: a new connection's first data \
    exchange is slower than the next ones (the cost of the new connection, not of the round \
    trip), so rtt and rtt_nagle are both timed on a warm connection."
)]
pub struct Args {
    /// The server (`nowcast serve`), HOST or HOST:PORT ([v6]:PORT).
    target: String,
    /// Bandwidth probe size: KiB, or with a suffix B, K, M or G (e.g. 64, 512K, 10M).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    size: u64,
    /// Bytes handed to the kernel per write during the bandwidth probe (JavaNws §4: the
    /// size of the sends changes the result on some hosts).
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    write_size: u64,
    /// Which way the bandwidth probe moves its payload: up (to the server, as NWS does),
    /// down, or both (up first).
    #[arg(long, value_enum, default_value_t = Direction::Up)]
    direction: Direction,
    /// SO_SNDBUF to ask for on this side (KiB, or with B/K/M/G); default: the kernel's.
    #[arg(long, value_parser = parse_size)]
    sndbuf: Option<u64>,
    /// SO_RCVBUF to ask for on this side.
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<u64>,
    /// SO_RCVBUF to ask the server for (it caps it at its --max-buffer).
    #[arg(long, value_parser = parse_size)]
    server_rcvbuf: Option<u64>,
    /// SO_SNDBUF to ask the server for.
    #[arg(long, value_parser = parse_size)]
    server_sndbuf: Option<u64>,
    #[command(flatten)]
    common: Common,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Direction {
    Up,
    Down,
    Both,
}

impl Direction {
    /// The bandwidth series measured, in the order of the session's steps.
    fn metrics(self) -> &'static [Metric] {
        match self {
            Direction::Up => &[Metric::BandwidthUp],
            Direction::Down => &[Metric::BandwidthDown],
            Direction::Both => &[Metric::BandwidthUp, Metric::BandwidthDown],
        }
    }
}

/// Every series of a session, with whether it is a bandwidth (higher is better).
fn metrics(direction: Direction) -> Vec<(Metric, bool)> {
    let mut m = vec![
        (Metric::HandshakeRtt, false),
        (Metric::Rtt, false),
        (Metric::RttNagle, false),
    ];
    m.extend(direction.metrics().iter().map(|&b| (b, true)));
    m
}

struct Opts {
    target: Target,
    size: u64,
    write_size: usize,
    sndbuf: Option<usize>,
    rcvbuf: Option<usize>,
    hello: Hello,
    deadline: Duration,
    bulk: &'static [Metric],
}

/// The sizes the kernels granted, known after the first session.
#[derive(Clone, Copy, Default, PartialEq)]
struct Granted {
    sndbuf: u64,
    rcvbuf: u64,
    server_rcvbuf: u32,
    server_sndbuf: u32,
}

fn usize_of(n: Option<u64>, flag: &str) -> Result<Option<usize>> {
    n.map(|n| usize::try_from(n).map_err(|_| anyhow!("{flag} is too large")))
        .transpose()
}

fn u32_of(n: Option<u64>, flag: &str) -> Result<u32> {
    u32::try_from(n.unwrap_or(0)).map_err(|_| anyhow!("{flag} must be below 4 GiB"))
}

pub fn run(args: Args) -> Result<()> {
    let bounds = args.common.bounds(1000.0)?;
    let deadline = args.common.deadline()?;
    let target = resolve(&args.target, DEFAULT_PORT).map_err(|e| anyhow!(e))?;
    if args.write_size == 0 {
        bail!("--write-size must be at least 1 byte");
    }
    let opts = Opts {
        target,
        size: args.size,
        write_size: usize_of(Some(args.write_size), "--write-size")?
            .unwrap_or(1)
            .min(args.size.max(1) as usize),
        sndbuf: usize_of(args.sndbuf, "--sndbuf")?,
        rcvbuf: usize_of(args.rcvbuf, "--rcvbuf")?,
        hello: Hello {
            rcvbuf: u32_of(args.server_rcvbuf, "--server-rcvbuf")?,
            sndbuf: u32_of(args.server_sndbuf, "--server-sndbuf")?,
        },
        deadline,
        bulk: args.direction.metrics(),
    };
    let metrics = metrics(args.direction);
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let mut sink = Sink::new(args.common.json, args.common.out.as_deref())?;
    let mut set = SeriesSet::new(&metrics, bounds);
    let mut headings = vec!["#".to_string(), "time (UTC)".to_string()];
    headings.extend(metrics.iter().map(|(m, _)| heading(*m)));
    let (table, head) = Table::new(&headings);
    if !sink.json() {
        println!(
            "nowcast tcp → {} ({}), bandwidth probe {} bytes",
            opts.target.name, opts.target.addrs[0], opts.size
        );
    }
    let payload = vec![0u8; opts.write_size];
    let mut shown: Option<Granted> = None;
    let result = periodic::run(&args.common, &stop, &mut sink, |seq| {
        let (records, granted) = experiment(&opts, &mut set, seq, &payload);
        let mut lines = Vec::new();
        if let Some(g) = granted.filter(|g| shown != Some(*g)) {
            lines.push(format!(
                "buffers granted: here SO_SNDBUF {} SO_RCVBUF {}, server SO_RCVBUF {} SO_SNDBUF {}",
                g.sndbuf, g.rcvbuf, g.server_rcvbuf, g.server_sndbuf
            ));
            if shown.is_none() {
                lines.push(head.clone());
            }
            shown = Some(g);
        } else if shown.is_none() && seq == 0 {
            lines.push(head.clone());
        }
        let mut cells = vec![
            (seq + 1).to_string(),
            clock(records.first().map_or(0.0, |r| r.timestamp_ms)),
        ];
        for &(m, _) in &metrics {
            let r = records.iter().find(|r| r.metric == m);
            let next = r.and(set.forecast(m)).map(|f| f.value);
            cells.push(cell(r, next));
        }
        lines.push(table.row(&cells));
        (records, lines.join("\n"))
    });
    sink.summary(&set.stats())?;
    result
}

/// A step that did not produce a value: a timeout (with the time waited) or an error whose
/// message names the host, the step and the OS error.
fn failed(host: &str, step: &str, e: io::Error, started: Instant) -> Outcome {
    if e.kind() == io::ErrorKind::TimedOut {
        Outcome::Timeout {
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        }
    } else {
        Outcome::Error(format!("{host}: {step}: {e}"))
    }
}

/// The time a step may take: its adaptive timeout, capped by the hard deadline.
fn budget(set: &SeriesSet, metric: Metric, deadline: Duration) -> Duration {
    set.timeout_ms(metric)
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
        .map_or(deadline, |t| t.min(deadline))
}

fn connect(addr: SocketAddr, opts: &Opts, by: Instant) -> io::Result<(TcpStream, f64)> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(n) = opts.sndbuf {
        sock.set_send_buffer_size(n)?;
    }
    if let Some(n) = opts.rcvbuf {
        sock.set_recv_buffer_size(n)?;
    }
    sock.set_nodelay(true)?;
    let left = nowcast::net::remaining(by)?;
    let t0 = Instant::now();
    sock.connect_timeout(&addr.into(), left)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok((sock.into(), ms))
}

/// One two-byte ping and its echo (the socket's timeouts already primed for `by`).
fn echo(s: &mut TcpStream, x: u8, by: Instant) -> io::Result<[u8; wire::PING_LEN]> {
    let mut echo = [0u8; wire::PING_LEN];
    write_all_by(s, &[wire::OP_PING, x], by)?;
    read_exact_by(s, &mut echo, by)?;
    Ok(echo)
}

/// One session: its records (in step order) and the buffer sizes granted, if it got that far.
fn experiment(
    opts: &Opts,
    set: &mut SeriesSet,
    seq: u64,
    payload: &[u8],
) -> (Vec<Record>, Option<Granted>) {
    let host = opts.target.name.as_str();
    let mut ctx = Context {
        timestamp_ms: now_ms(),
        source: "nowcast tcp",
        from: None,
        to: host.to_string(),
        seq,
    };
    let mut records = Vec::new();
    let mut probe = Probe {
        transport: Some(Transport::Tcp),
        ..Probe::default()
    };
    let mut measure =
        |set: &mut SeriesSet, ctx: &Context, metric, outcome, timeout: Duration, probe: Probe| {
            let r = set.observe(
                ctx,
                Measurement {
                    metric,
                    outcome,
                    timeout_ms: Some(timeout.as_secs_f64() * 1e3),
                    probe: Some(probe),
                },
            );
            let ok = r.status == nowcast_core::record::Status::Ok;
            records.push(r);
            ok
        };

    // 1. Handshake: TCP connect, then the session hello.
    let t = budget(set, Metric::HandshakeRtt, opts.deadline);
    let started = Instant::now();
    let by = started + t;
    let mut connected = Err(io::Error::new(io::ErrorKind::NotFound, "no address"));
    for &addr in &opts.target.addrs {
        connected = connect(addr, opts, by);
        if connected.is_ok() {
            break;
        }
    }
    let (mut s, handshake_ms) = match connected {
        Ok(x) => x,
        Err(e) => {
            let outcome = failed(host, "connect", e, started);
            measure(set, &ctx, Metric::HandshakeRtt, outcome, t, probe);
            return (records, None);
        }
    };
    ctx.from = s.local_addr().ok().map(|a| a.to_string());
    let sock = SockRef::from(&s);
    let mut granted = Granted {
        sndbuf: sock.send_buffer_size().unwrap_or(0) as u64,
        rcvbuf: sock.recv_buffer_size().unwrap_or(0) as u64,
        ..Granted::default()
    };
    probe.sndbuf_bytes = Some(granted.sndbuf);
    probe.rcvbuf_bytes = Some(granted.rcvbuf);
    let welcome = prime(&s, by)
        .and_then(|()| write_all_by(&mut s, &opts.hello.encode(), by))
        .and_then(|()| {
            let mut b = [0u8; Welcome::LEN];
            read_exact_by(&mut s, &mut b, by)?;
            Welcome::decode(&b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        });
    let welcome = match welcome {
        Ok(w) if w.status == Status::Ok => w,
        Ok(_) => {
            let outcome = Outcome::Error(format!(
                "{host}: hello: the server is busy (over its session caps)"
            ));
            measure(set, &ctx, Metric::HandshakeRtt, outcome, t, probe.clone());
            return (records, None);
        }
        Err(e) => {
            measure(
                set,
                &ctx,
                Metric::HandshakeRtt,
                failed(host, "hello", e, started),
                t,
                probe.clone(),
            );
            return (records, None);
        }
    };
    granted.server_rcvbuf = welcome.rcvbuf;
    granted.server_sndbuf = welcome.sndbuf;
    let outcome = Outcome::Ok {
        value: handshake_ms,
        duration_ms: handshake_ms,
    };
    measure(set, &ctx, Metric::HandshakeRtt, outcome, t, probe.clone());

    // The un-timed warm-up echo (see WARM_UP), Nagle off, within the rtt step's budget. It
    // is recorded nowhere; if it fails, the failure is the rtt step's, named as the warm-up.
    let t = budget(set, Metric::Rtt, opts.deadline);
    let started = Instant::now();
    let by = started + t;
    let warm = prime(&s, by).and_then(|()| echo(&mut s, WARM_UP, by));
    let bad = match warm {
        Ok(e) if e == [wire::OP_PING, WARM_UP] => None,
        Ok(e) => Some(Outcome::Error(format!(
            "{host}: rtt warm-up: the echo differs from the probe ({e:?} for {:?})",
            [wire::OP_PING, WARM_UP]
        ))),
        Err(e) => Some(failed(host, "rtt warm-up", e, started)),
    };
    if let Some(outcome) = bad {
        let p = Probe {
            payload_bytes: Some(wire::PING_LEN as u64),
            nagle: Some(false),
            ..probe.clone()
        };
        measure(set, &ctx, Metric::Rtt, outcome, t, p);
        return (records, Some(granted));
    }

    // 2 and 3. The two-byte echo, Nagle off then on.
    for (metric, nagle) in [(Metric::Rtt, false), (Metric::RttNagle, true)] {
        let step = if nagle { "rtt with Nagle on" } else { "rtt" };
        let t = budget(set, metric, opts.deadline);
        let p = Probe {
            payload_bytes: Some(wire::PING_LEN as u64),
            nagle: Some(nagle),
            ..probe.clone()
        };
        if let Err(e) = s.set_nodelay(!nagle) {
            measure(
                set,
                &ctx,
                metric,
                Outcome::Error(format!("{host}: {step}: set TCP_NODELAY: {e}")),
                t,
                p,
            );
            return (records, Some(granted));
        }
        let ping = [wire::OP_PING, seq as u8];
        // The socket timeouts are set before the clock starts.
        let by = Instant::now() + t;
        if let Err(e) = prime(&s, by) {
            measure(
                set,
                &ctx,
                metric,
                Outcome::Error(format!("{host}: {step}: set timeout: {e}")),
                t,
                p,
            );
            return (records, Some(granted));
        }
        let started = Instant::now();
        let r = echo(&mut s, seq as u8, by);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let outcome = match r {
            Ok(echo) if echo == ping => Outcome::Ok {
                value: ms,
                duration_ms: ms,
            },
            Ok(echo) => Outcome::Error(format!(
                "{host}: {step}: the echo differs from the probe ({echo:?} for {ping:?})"
            )),
            Err(e) => failed(host, step, e, started),
        };
        if !measure(set, &ctx, metric, outcome, t, p) {
            return (records, Some(granted));
        }
    }

    // 4 and 5. Bandwidth: N bytes up then the two-byte acknowledgement, or the request and
    // the acknowledgement then N bytes down. Nagle off again, so the last partial segment
    // is not held back waiting for an ACK.
    let predicted_rtt = set.forecast(Metric::Rtt).map(|f| f.value);
    let _ = s.set_nodelay(true);
    let mut down_buf = Vec::new();
    for &metric in opts.bulk {
        let (step, op) = if metric == Metric::BandwidthDown {
            ("bandwidth down", wire::OP_BULK_DOWN)
        } else {
            ("bandwidth", wire::OP_BULK)
        };
        let t = budget(set, metric, opts.deadline);
        let mut p = Probe {
            payload_bytes: Some(opts.size),
            nagle: Some(false),
            ..probe.clone()
        };
        if opts.size > welcome.max_payload {
            let msg = format!(
                "{host}: {step}: {} bytes is above the server's cap of {} bytes",
                opts.size, welcome.max_payload
            );
            measure(set, &ctx, metric, Outcome::Error(msg), t, p);
            return (records, Some(granted));
        }
        if op == wire::OP_BULK_DOWN {
            down_buf.resize(payload.len().max(256 * 1024), 0);
        }
        let started = Instant::now();
        let by = started + t;
        let r = (|| {
            prime(&s, by)?;
            write_all_by(&mut s, &wire::bulk_header(op, opts.size), by)?;
            let mut ack = [0u8; 2];
            if op == wire::OP_BULK_DOWN {
                read_exact_by(&mut s, &mut ack, by)?;
                if ack == wire::ACK {
                    discard_by(&mut s, opts.size, &mut down_buf, by)?;
                }
            } else {
                let mut left = opts.size;
                while left > 0 {
                    let n = payload
                        .len()
                        .min(usize::try_from(left).unwrap_or(usize::MAX));
                    write_all_by(&mut s, &payload[..n], by)?;
                    left -= n as u64;
                }
                read_exact_by(&mut s, &mut ack, by)?;
            }
            Ok::<_, io::Error>(ack)
        })();
        let raw_ms = started.elapsed().as_secs_f64() * 1e3;
        let outcome = match r {
            Ok(wire::ACK) => match bandwidth(opts.size, raw_ms, predicted_rtt) {
                Some(b) => {
                    p.raw_ms = Some(b.raw_ms);
                    p.rtt_subtracted_ms = Some(b.subtracted_ms);
                    Outcome::Ok {
                        value: b.mbit_per_s,
                        duration_ms: raw_ms,
                    }
                }
                None => {
                    Outcome::Error(format!("{host}: {step}: the probe took no measurable time"))
                }
            },
            Ok(wire::REFUSED) => Outcome::Error(format!(
                "{host}: {step}: the server refused {} bytes",
                opts.size
            )),
            Ok(other) => Outcome::Error(format!(
                "{host}: {step}: unexpected acknowledgement {other:?}"
            )),
            Err(e) => failed(host, step, e, started),
        };
        if !measure(set, &ctx, metric, outcome, t, p) {
            return (records, Some(granted));
        }
    }
    let by = Instant::now() + Duration::from_millis(100);
    let _ = prime(&s, by).and_then(|()| write_all_by(&mut s, &[wire::OP_QUIT], by));
    (records, Some(granted))
}
