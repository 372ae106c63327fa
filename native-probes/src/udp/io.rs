//! The edge of `nowcast udp`: the socket work of a [`Burst`] and the periodic loop of bursts.
//!
//! One thread sends and takes the replies, like sockperf's client: between sends it sleeps
//! in `ppoll` on the socket (nanosecond timeout, unlike `SO_RCVTIMEO`'s jiffies), so a reply
//! wakes the thread that stamps it, with no hand-over between threads; before each send it
//! drains what has arrived, so a fast burst never overflows the receive buffer.

use super::burst::{self, Action, Burst, Plan};
use crate::clock::{wall_ms, Clock};
use crate::format::{quote_answer, ANSWER_MAX, ASK_SERVE};
use crate::net::{shown, STOP_POLL};
use crate::output::{Heading, RecordSink};
use crate::periodic::{self, Report};
use crate::series::{SeriesSet, Settings};
use crate::stop::Stop;
use crate::wire::{Kind, UdpProbe, DEFAULT_UDP_BYTES_PER_SECOND, DEFAULT_UDP_PACKETS_PER_SECOND};
use anyhow::{anyhow, Result};
use nowcast_core::probed::{Observation, Outcome};
use nowcast_core::record::{Metric, Probe, Transport};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// A `nowcast udp` run.
#[derive(Clone, Debug)]
pub struct Bursts {
    /// `host:port`, named in records and messages.
    pub host: String,
    pub addr: SocketAddr,
    /// Probes per burst.
    pub probes: u64,
    /// Time between the probes of a burst.
    pub interval: Duration,
    /// Datagram size, bytes (at least the header).
    pub size: usize,
    /// Hard limit on a burst, from its first send: the sending and the wait after it fit
    /// in it (see [`Bursts::wait_cap`]).
    pub deadline: Duration,
}

impl Bursts {
    /// The longest wait after the last send that still ends the burst by its deadline: the
    /// deadline less the sending (the last probe leaves `interval × (probes − 1)` after the
    /// first), and at least 1 ms, so that the timeout recorded is never 0 (a deadline shorter
    /// than the sending cuts the burst there anyway). Capping the wait here, not only at the
    /// deadline, keeps the timeout a record states the time the burst really waited.
    pub fn wait_cap(&self) -> Duration {
        let sending = self
            .interval
            .saturating_mul(u32::try_from(self.probes.saturating_sub(1)).unwrap_or(u32::MAX));
        self.deadline
            .saturating_sub(sending)
            .max(Duration::from_millis(1))
    }
}

/// The series of `nowcast udp`, in the order of its table.
pub const METRICS: [Metric; 3] = [Metric::Rtt, Metric::Jitter, Metric::Loss];

/// Runs bursts per `plan`, feeding `settings`' series, writing to `sink`.
pub fn run(
    b: &Bursts,
    settings: &Settings,
    plan: &periodic::Plan,
    stop: &Stop,
    sink: &mut dyn RecordSink,
) -> Result<()> {
    let host = &b.host;
    // Never blocks: a burst waits in ppoll and drains what has arrived.
    let (sock, from) = socket(b)?;
    let mut set = SeriesSet::new(&METRICS, settings)?;
    let clock = Clock::new();
    sink.begin(&Heading {
        title: format!(
            "nowcast udp → {}, {} probes of {} bytes every {} ms per burst",
            shown(host, b.addr),
            b.probes,
            b.size,
            b.interval.as_secs_f64() * 1e3
        ),
        metrics: METRICS.to_vec(),
        extra: vec!["lost".into(), "reordered".into(), "duplicates".into()],
    })?;
    // Whether a nowcast server has answered at this address; until one has, a port held by
    // another service ends the run (as `nowcast tcp` does), said once as its error.
    let mut answered = false;
    let mut wrong_server = None;
    let result = periodic::run(plan, &clock, stop, sink, |index| {
        let (mut r, wrong) = one_burst(b, &sock, &from, &mut set, &clock, index, Some(stop));
        answered |= r
            .records
            .iter()
            .any(|x| x.metric == Metric::Rtt && x.value.is_some());
        if let (Some(why), false) = (wrong, answered) {
            wrong_server = Some(why);
            r.said = Some(Vec::new());
            r.last = true;
        }
        r
    });
    let result = match (result, wrong_server) {
        (Ok(()), Some(why)) => Err(anyhow!(why)),
        (Err(e), Some(why)) if e.is::<periodic::Unmeasured>() => Err(anyhow!(why)),
        (result, _) => result,
    };
    periodic::finish(result, sink, &set.stats())
}

/// Binds a socket to `b`'s server for bursts, non-blocking (a burst waits in ppoll).
fn socket(b: &Bursts) -> Result<(UdpSocket, Option<String>)> {
    let host = &b.host;
    let local: SocketAddr = if b.addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .expect("literal address");
    let sock = UdpSocket::bind(local).map_err(|e| anyhow!("{host}: bind udp: {e}"))?;
    sock.connect(b.addr)
        .map_err(|e| anyhow!("{host}: connect udp: {e}"))?;
    sock.set_nonblocking(true)?;
    let from = sock.local_addr().ok().map(|a| a.to_string());
    Ok((sock, from))
}

/// One burst of `b` (a campaign's run), feeding `set`: its records.
pub fn once(
    b: &Bursts,
    set: &mut SeriesSet,
    index: u64,
) -> Result<Vec<nowcast_core::record::Record>> {
    let (sock, from) = socket(b)?;
    Ok(one_burst(b, &sock, &from, set, &Clock::new(), index, None)
        .0
        .records)
}

/// Runs burst `index` on `sock` and feeds its outcomes to `set`: what the loop shows, and
/// the message when another service answered in place of a nowcast server. A burst that
/// `stop` cuts short is dropped: no record (its unanswered probes are no loss, its wait no
/// timeout), and nothing fed to the series.
fn one_burst(
    b: &Bursts,
    sock: &UdpSocket,
    from: &Option<String>,
    set: &mut SeriesSet,
    clock: &Clock,
    index: u64,
    stop: Option<&Stop>,
) -> (Report, Option<String>) {
    let host = &b.host;
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let timestamp_ms = wall_ms();
    let cap = b.wait_cap();
    let wait_ms = set
        .timeout_ms(Metric::Rtt)
        .map_or(cap, |ms| Duration::from_secs_f64(ms / 1e3))
        .min(cap)
        .as_secs_f64()
        * 1e3;
    let started = clock.now();
    let burst = Burst::new(
        Plan {
            first_seq: index * b.probes,
            count: b.probes,
            interval: nanos(b.interval),
            wait: (wait_ms * 1e6) as u64,
        },
        started,
        started.saturating_add(nanos(b.deadline)),
    );
    let probe = Probe {
        transport: Some(Transport::Udp),
        payload_bytes: Some(b.size as u64),
        ..Probe::default()
    };
    let mut notes = Vec::new();
    let mut said = None;
    let mut wrong = None;
    let (outcomes, extra) = match drive(burst, sock, b.size, clock, stop) {
        Ok(None) => {
            let r = Report {
                timestamp_ms,
                next: METRICS.iter().map(|&m| set.next(m)).collect(),
                notes: vec!["interrupted: the burst under way is not recorded".into()],
                ..Report::default()
            };
            return (r, None);
        }
        Err(e) => {
            let error = format!("{host}: {e}");
            (vec![(Metric::Rtt, Outcome::Failed { error })], Vec::new())
        }
        // No reply, and an answer that says why: another service has the port (what came
        // back is not a reply), or the host said that nothing listens (each probe was
        // refused). The burst measured neither a round trip nor the path's loss (no probe
        // timed out, and a lost probe would read 100 % loss), so both are errors, said once.
        Ok(Some((s, besides)))
            if s.received == 0 && (besides.stranger.is_some() || besides.refused > 0) =>
        {
            let error = match &besides.stranger {
                Some(stranger) => {
                    let error = format!(
                        "{host} does not speak nowcast's protocol ({}): {ASK_SERVE}",
                        stranger.answered()
                    );
                    wrong = Some(error.clone());
                    error
                }
                None => format!(
                    "{host}: port unreachable ({} ICMP errors): nothing listens there, or a \
                     firewall rejects the probes",
                    besides.refused
                ),
            };
            said = Some(vec![error.clone()]);
            let extra = vec![s.sent, s.reordered, s.duplicates];
            let failed = || Outcome::Failed {
                error: error.clone(),
            };
            (
                vec![(Metric::Rtt, failed()), (Metric::Loss, failed())],
                extra,
            )
        }
        Ok(Some((s, _))) => {
            let elapsed_ms = clock.now().saturating_sub(started) as f64 / 1e6;
            let extra = vec![s.sent - s.received, s.reordered, s.duplicates];
            if s.received == 0 {
                notes.push(no_reply(host, b.size));
            } else if s.received < s.sent {
                let over = burst::over_default_rate(b.probes, nanos(b.interval), b.size);
                if over > 0 {
                    notes.push(faster_than_served(b, over));
                }
            }
            (burst::outcomes(&s, elapsed_ms), extra)
        }
    };
    let mut r = report(set, outcomes, &probe, from, timestamp_ms, wait_ms, &extra);
    r.notes = notes;
    r.said = said;
    (r, wrong)
}

/// Why a burst lost probes it sent faster than a server answers by default.
fn faster_than_served(b: &Bursts, over: u64) -> String {
    format!(
        "about {over} of these {} probes are more than `nowcast serve` answers by default ({} a \
         second and {} KiB/s per client, after a second's worth at once): the loss may be \
         the server's limit, not the path's; send slower (--interval) or raise the server's \
         --udp-packets-per-second and --udp-bytes-per-second",
        b.probes,
        DEFAULT_UDP_PACKETS_PER_SECOND,
        DEFAULT_UDP_BYTES_PER_SECOND >> 10
    )
}

/// Why a burst may have had no reply at all, for the person reading the table.
fn no_reply(host: &str, size: usize) -> String {
    format!(
        "{host}: no reply to any probe: the host or its server is down, a firewall drops \
         them, or the server refuses them (`nowcast serve` drops datagrams over its \
         --max-datagram, 9000 bytes by default, and more than its per-client rate; these \
         were {size} bytes)"
    )
}

/// Feeds a burst's outcomes to their series and returns what the sink shows.
fn report(
    set: &mut SeriesSet,
    outcomes: Vec<(Metric, Outcome)>,
    probe: &Probe,
    from: &Option<String>,
    timestamp_ms: f64,
    wait_ms: f64,
    extra: &[u64],
) -> Report {
    let records = outcomes
        .into_iter()
        .map(|(metric, outcome)| {
            let o = Observation {
                probe: Some(probe.clone()),
                from: from.clone(),
                ..Observation::new(timestamp_ms, outcome, Some(wait_ms))
            };
            set.observe(metric, o)
        })
        .collect();
    Report {
        timestamp_ms,
        records,
        next: METRICS.iter().map(|&m| set.next(m)).collect(),
        extra: extra.iter().map(u64::to_string).collect(),
        ..Report::default()
    }
}

/// What came back to a burst besides its replies.
#[derive(Debug, Default)]
struct Besides {
    /// ICMP errors (port unreachable).
    refused: u64,
    /// The first datagram that was not a probe reply (another service has the port).
    stranger: Option<Stranger>,
}

/// A datagram from something that is not a nowcast server.
#[derive(Debug)]
enum Stranger {
    /// One of the burst's own probes, sent back (an echo service).
    Echoed,
    /// Anything else: as much of it as a message quotes.
    Answered(Vec<u8>),
}

impl Stranger {
    fn of(datagram: &[u8]) -> Stranger {
        if UdpProbe::decode(datagram).is_ok_and(|p| p.kind == Kind::Request) {
            Stranger::Echoed
        } else {
            Stranger::Answered(datagram[..datagram.len().min(ANSWER_MAX)].to_vec())
        }
    }

    /// What the port answered, for a message: "it answered \"...\"", or that it echoed.
    fn answered(&self) -> String {
        match self {
            Stranger::Echoed => {
                "it sent the probes back unanswered, as an echo service does".into()
            }
            Stranger::Answered(first) => format!("it answered \"{}\"", quote_answer(first)),
        }
    }
}

/// Does what `burst` asks until it is done: its figures, and what came back besides replies;
/// `None` when `stop` was raised first (its waits last at most [`STOP_POLL`]).
fn drive(
    mut burst: Burst,
    sock: &UdpSocket,
    size: usize,
    clock: &Clock,
    stop: Option<&Stop>,
) -> io::Result<Option<(burst::Summary, Besides)>> {
    let mut out = vec![0u8; size];
    let mut inbox = vec![0u8; 65_536];
    let mut besides = Besides::default();
    loop {
        // Every reply already queued, each stamped as it is taken.
        loop {
            match sock.recv(&mut inbox) {
                Ok(len) => {
                    let now = clock.now();
                    let datagram = &inbox[..len];
                    if burst.datagram_received(datagram, now).is_none() {
                        besides
                            .stranger
                            .get_or_insert_with(|| Stranger::of(datagram));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error (port unreachable) from an earlier send: the probe is lost,
                // which the accounting already says; keep listening.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => besides.refused += 1,
                Err(e) => return Err(io::Error::new(e.kind(), format!("receive: {e}"))),
            }
        }
        // Every probe sent, none answered, and the host said that nothing listens (ICMP port
        // unreachable): no reply is coming, so the burst ends rather than wait out its
        // timeout (seconds, growing after each such burst). Linux may fold several ICMP
        // errors into one, so their count is not matched against the probes'.
        // The same when another service has answered (the burst's answers are its, not a
        // nowcast server's).
        let unanswered = besides.refused > 0 || besides.stranger.is_some();
        if unanswered && burst.all_sent() && !burst.any_answered() {
            return Ok(Some((burst.summary(), besides)));
        }
        if stop.is_some_and(Stop::is_set) {
            return Ok(None);
        }
        let now = clock.now();
        match burst.poll(now) {
            Action::Done => return Ok(Some((burst.summary(), besides))),
            Action::Send { seq } => {
                let sent = clock.now();
                burst.datagram(seq, sent, &mut out);
                burst.sent(seq, sent);
                match sock.send(&out) {
                    Ok(_) => {}
                    // A refused earlier probe reports here too; this one may still have left.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => besides.refused += 1,
                    // The send buffer is full: this probe did not leave, which counts as lost.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(io::Error::new(e.kind(), format!("send: {e}"))),
                }
            }
            Action::Wait { until } => {
                let mut wait = Duration::from_nanos(until.saturating_sub(now));
                if stop.is_some() {
                    wait = wait.min(STOP_POLL);
                }
                wait_readable(sock, wait)?
            }
        }
    }
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
