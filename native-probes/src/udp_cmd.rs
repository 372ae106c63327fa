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
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wasm_forecast::record::{Metric, Probe, Transport};

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
/// How often the receiver looks at the clock when no reply comes.
const SLICE: Duration = Duration::from_millis(5);

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
    sock.set_read_timeout(Some(SLICE))?;
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

/// Sends `count` probes `interval` apart while a second thread takes the replies, until
/// every probe is answered or `wait` has passed since the last send (never past `hard`).
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
    let state = Mutex::new(Burst::new(first_seq, n));
    // u64::MAX while sending; then the monotonic time of the last send.
    let last_send = AtomicU64::new(u64::MAX);
    let wait_ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    let (state_ref, last_send_ref) = (&state, &last_send);
    std::thread::scope(|scope| {
        let receiver = scope.spawn(move || -> io::Result<()> {
            let (state, last_send) = (state_ref, last_send_ref);
            let mut buf = vec![0u8; 65_536];
            loop {
                if Instant::now() >= hard {
                    return Ok(());
                }
                let done_at = last_send.load(Ordering::Acquire);
                if done_at != u64::MAX {
                    let lock = state.lock().unwrap_or_else(|p| p.into_inner());
                    if lock.all_answered() || ns_since(clock0) >= done_at.saturating_add(wait_ns) {
                        return Ok(());
                    }
                }
                match sock.recv(&mut buf) {
                    Ok(len) => {
                        let now = ns_since(clock0);
                        if let Ok(p) = UdpProbe::decode(&buf[..len]) {
                            state
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .received(p.seq, now);
                        }
                    }
                    Err(e) if nowcast::net::is_retry(&e) => {}
                    // An ICMP error (port unreachable) from an earlier send: the probe is lost,
                    // which the accounting already says; keep listening.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(io::Error::new(e.kind(), format!("receive: {e}"))),
                }
            }
        });
        let mut buf = vec![0u8; size];
        let start = Instant::now();
        let mut send_error = None;
        for i in 0..count {
            let due = start + interval.mul_f64(i as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if Instant::now() >= hard {
                break;
            }
            let seq = first_seq + i;
            let sent_ns = ns_since(clock0);
            UdpProbe { seq, sent_ns }.encode(&mut buf);
            state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .sent(seq, sent_ns);
            match sock.send(&buf) {
                Ok(_) => {}
                // A refused earlier probe reports here too; this one may still have left.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => {
                    send_error = Some(io::Error::new(e.kind(), format!("send: {e}")));
                    break;
                }
            }
        }
        last_send.store(ns_since(clock0), Ordering::Release);
        let received = receiver
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("receiver panicked")));
        if let Some(e) = send_error {
            return Err(e);
        }
        received
    })?;
    Ok(state
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .summary())
}
