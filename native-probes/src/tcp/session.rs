//! One NWS TCP probe session (JavaNws §2.1.1) as a state machine. Each session measures,
//! in order:
//!
//! 1. `handshake_rtt`: the TCP connect (SYN to SYN-ACK), then the session hello; then one
//!    un-timed two-byte warm-up echo, recorded nowhere (see [`WARM_UP`]);
//! 2. `rtt`: a two-byte echo with Nagle off (`TCP_NODELAY`);
//! 3. `rtt_nagle`: the same echo with Nagle on, reported separately;
//! 4. `bandwidth_up`: N bytes to the server, timed until its two-byte acknowledgement, with
//!    the predicted non-Nagle RTT subtracted (the raw time is kept in the record). N is fixed
//!    (`--size 64`: JavaNws's 64 KB) or automatic ([`ProbeSize::Auto`], the default): a
//!    quarter second of the series' forecast rate, or two predicted round trips of it on a
//!    longer path (the core's `transfer::auto_size`, the page's rule), moved first untimed
//!    on the session's new connection (a warm-up: `transfer::warm_up_size`), so that the
//!    timed transfer does not time slow start; and on a series' first probe, unrecorded
//!    tries growing from 64 KiB (`transfer::cold_burst_next`) until one lasts that long and
//!    reads no more than the one before, so that the first recorded probe is already long
//!    enough to be timed, on a connection they warmed. After the warm-up (or the tries) the
//!    sender says where it is in its congestion control's start (the client's socket on an
//!    upload, the server's answer to `wire::START_QUERY` on a download), and the warm-ups go
//!    on, each twice the last, while it is still in it (`transfer::warm_again`);
//! 5. `bandwidth_down` (when asked): N bytes from the server, timed from the request to the
//!    last byte, which is also one round trip more than the transfer, so the same
//!    prediction is subtracted.
//!
//! Deterministic core, in quinn-proto's shape: [`Session::poll`] says what to do next
//! (connect with these socket options, send these bytes and read N back by this deadline,
//! discard N bytes, quit, done) and [`Session::handle`] takes what happened (the bytes read,
//! the times, the error). Times are nanoseconds on the caller's monotonic clock, the
//! records' wall-clock stamp is an argument, and the sockets live in `tcp::io`; so a test
//! scripts any server, any timing and any failure exactly. Every step waits at most its
//! series' adaptive timeout, capped by the hard deadline; a step that fails ends the session,
//! and each series of the session's later steps gets an error record saying it was not tried
//! and which step failed, so that no series asked for silently vanishes from an experiment.
//! For people, the session sums such an end up in one line ([`Trouble`]): the cause and the
//! series not tried.
//!
//! The hello's answer is read only as long as it agrees with the start of a welcome
//! ([`Action::Exchange`]'s `expect`): a peer that is not a `nowcast serve` (a web server's
//! `HTTP/1.0 400`, an SSH banner) is told apart at once, quoted ([`quote`]), and marked as
//! such ([`Trouble::wrong_server`]), instead of waiting for the hello's timeout.

use crate::format::number;
use crate::format::{quote_answer, ANSWER_MAX, ASK_SERVE};
use crate::series::SeriesSet;
use crate::wire::{self, Hello, Reply as Answer, Status as Accepted, Welcome, WireError};
use nowcast_core::probed::{Observation, Outcome};
use nowcast_core::record::{Metric, Probe, Record, Status, Transport};
use nowcast_core::transfer::{
    auto_size, cold_burst_next, rate_minus_rtt, warm_again, warm_up_size, Start, AUTO_MIN_BYTES,
};

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// The payload byte of the un-timed warm-up echo that follows the session hello (the timed
/// echoes carry the session's number; all are read in order on one stream).
///
/// Why a warm-up: on a fresh TCP connection the first data exchange after the hello costs
/// more than the following ones, whichever probe makes it (about 2 µs on loopback, 14.5
/// against 12.3 µs; with the order of the two timed echoes swapped, the Nagle-on echo
/// became the slow one). That cost belongs to the new connection (first use of its paths
/// in the kernel and the server), not to the round trip the series forecasts, and peers
/// such as `sockperf ping-pong` measure a warm, long-lived connection. JavaNws §2.1.1 opens
/// each experiment with a handshake before the timed packets; this echo completes that
/// handshake, so the timed `rtt` and `rtt_nagle` are both exchanges on a warm connection.
/// `handshake_rtt` times only the connect.
pub const WARM_UP: u8 = 0xff;

/// How long the closing quit may take; nothing waits for an answer to it.
const QUIT_NS: Nanos = 100_000_000;

/// The first bytes of every welcome this build understands: the magic and the version. The
/// hello's answer is read only as long as it agrees with them.
pub const WELCOME_START: [u8; 5] = {
    let m = wire::TCP_MAGIC;
    [m[0], m[1], m[2], m[3], wire::VERSION]
};

const _: () = assert!(
    ANSWER_MAX >= Welcome::LEN,
    "an answer's buffer holds a welcome"
);

/// What to tell the user when the hello got no answer before its timeout. (A `nowcast serve`
/// too slow to answer in time reads it too: the question is asked, not answered.)
const SILENT: &str =
    "the port accepts connections but did not answer the hello: is `nowcast serve` running there?";

/// The most an automatic probe moves, bytes (and the server's cap, when lower). A quarter
/// second at 8 Gbit/s; faster paths (loopback) are timed over a shorter probe.
pub const AUTO_MAX_BYTES: u64 = 256 << 20;

/// A bandwidth probe's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeSize {
    /// This many bytes, every probe.
    Fixed(u64),
    /// Sized from the series' forecast to last a quarter second or two predicted round trips,
    /// after an untimed warm-up (see the module's text).
    Auto,
}

impl std::fmt::Display for ProbeSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeSize::Fixed(n) => write!(f, "of {n} bytes"),
            // Short: it ends the command's first line, which fits 100 columns.
            ProbeSize::Auto => f.write_str("of ¼ s or 2 RTTs at the forecast rate, warmed up"),
        }
    }
}

/// What a session measures and asks for.
#[derive(Clone, Debug)]
pub struct Config {
    /// `host:port`, named in error messages.
    pub host: String,
    /// Bandwidth probe payload.
    pub size: ProbeSize,
    /// SO_SNDBUF and SO_RCVBUF to ask for on this side (`None`: the kernel's default).
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
    /// The buffer sizes to ask the server for.
    pub hello: Hello,
    /// Hard limit on every step, ms, whatever its adaptive timeout.
    pub deadline_ms: f64,
    /// The bandwidth series measured, in order (`bandwidth_up`, `bandwidth_down`).
    pub bulk: Vec<Metric>,
}

impl Config {
    /// Every series of a session, in the order of its steps.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = vec![Metric::HandshakeRtt, Metric::Rtt, Metric::RttNagle];
        m.extend(&self.bulk);
        m
    }
}

/// At most a hello's worth of bytes to send, without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    buf: [u8; Hello::LEN],
    len: usize,
}

impl Message {
    fn of(bytes: &[u8]) -> Self {
        let mut buf = [0u8; Hello::LEN];
        buf[..bytes.len()].copy_from_slice(bytes);
        Self {
            buf,
            len: bytes.len(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// What the caller should do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a connection with these socket buffers (Nagle off), before `by`.
    Connect {
        sndbuf: Option<usize>,
        rcvbuf: Option<usize>,
        by: Nanos,
    },
    /// Set Nagle as asked, then, timed: send `send`, then `payload` bytes (of any value),
    /// then read exactly `read` bytes; all before `by`. When `expect` is not empty and the
    /// bytes read stop agreeing with it, stop waiting for the rest: read on briefly for the
    /// peer's first line (at most [`ANSWER_MAX`] bytes in all) and hand over what came.
    Exchange {
        send: Message,
        payload: u64,
        read: usize,
        nodelay: bool,
        expect: &'static [u8],
        by: Nanos,
    },
    /// Read and discard `len` bytes before `by`.
    Discard { len: u64, by: Nanos },
    /// Say where this side's sender is in its congestion control's start (the socket's
    /// `TCP_INFO`; after an upload's warm-up): [`Event::SenderStart`].
    SenderStart,
    /// Send the quit message, without waiting for anything, and close.
    Quit { send: Message, by: Nanos },
    /// The session is over; its records are ready.
    Done,
}

/// What happened to the last action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Connected: the connect's own start and end, the local address and the socket
    /// buffer sizes the kernel granted.
    Connected {
        started: Nanos,
        ended: Nanos,
        local: Option<String>,
        sndbuf: u64,
        rcvbuf: u64,
    },
    /// The exchange's bytes read, with the time just before its first write and just
    /// after its last read: as many as asked, or, when they disagreed with the action's
    /// `expect`, what came.
    Exchanged {
        started: Nanos,
        ended: Nanos,
        read: &'a [u8],
    },
    /// The discard ended (its last byte read) at `ended`.
    Discarded { ended: Nanos },
    /// Where this side's sender is in its start ([`Action::SenderStart`]).
    SenderStart(Start),
    /// The deadline passed: the action began at `started` and was given up at `at`.
    TimedOut { started: Nanos, at: Nanos },
    /// The action failed; the text says why (the operating system's error, or the socket
    /// option that could not be set).
    Failed { error: String },
    /// The quit was sent (or not: nothing depends on it).
    Closed,
    /// The user stopped the command (Ctrl-C) during the action: it is given up and the
    /// session ends. Neither it nor any later step is recorded: a probe cut short measured
    /// nothing of the path (not a timeout, which is fed to the series' timeout), and a step
    /// never tried is no failure of the path's either.
    Stopped,
}

/// Why a session ended before its last step, for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trouble {
    /// One line: the cause and the series therefore not tried (whose records say so one by
    /// one).
    pub line: String,
    /// What to ask about the target when the hello got another protocol's answer or none:
    /// whether `nowcast serve` runs there.
    pub hint: Option<&'static str>,
    /// Set when the peer answered the hello with something this build cannot talk to:
    /// another protocol, another version of this one, or a refusal of the hello as not
    /// understood. What to tell the user (the cause and the hint); another session would
    /// get the same answer.
    pub wrong_server: Option<String>,
}

impl Trouble {
    /// The line and, as a sentence after it, the hint.
    pub fn hinted(&self) -> String {
        match self.hint {
            Some(hint) => format!("{}. {}", self.line, capitalised(hint)),
            None => self.line.clone(),
        }
    }
}

/// The sizes the kernels granted, known once the server welcomed the session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Granted {
    pub sndbuf: u64,
    pub rcvbuf: u64,
    pub server_rcvbuf: u32,
    pub server_sndbuf: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Connect,
    Hello,
    WarmUp,
    /// The two-byte echo, Nagle off (`false`) then on (`true`).
    Echo(bool),
    /// The bandwidth probe of `bulk[i]`: its header and acknowledgement (and the payload up).
    Bulk(usize),
    /// The payload of a download after its acknowledgement.
    BulkBody(usize),
    /// After a warm-up (or the last try) of `bulk[i]`: where the sender is in its
    /// congestion control's start (see [`warm_again`]).
    Start(usize),
    Quit,
    Done,
}

/// One session over one connection.
pub struct Session<'a> {
    cfg: &'a Config,
    series: &'a mut SeriesSet,
    /// The session's number: the timed echoes carry its low byte.
    number: u64,
    wall_ms: f64,
    step: Step,
    /// When the handshake began (its timeouts count from there).
    step_started: Nanos,
    /// The time the current step may take, ms (recorded as its timeout).
    budget_ms: f64,
    by: Nanos,
    from: Option<String>,
    probe: Probe,
    granted: Option<Granted>,
    local: Granted,
    max_payload: u64,
    handshake_ms: f64,
    predicted_rtt: Option<f64>,
    bulk_started: Nanos,
    /// The bulk step whose size is chosen, its payload, and whether it is an unrecorded try.
    sized_for: Option<usize>,
    bulk_bytes: u64,
    trying: bool,
    /// Whether the transfer about to run (or running) is the untimed warm-up of an automatic
    /// probe: the same payload, moved first on the new connection so that the timed one
    /// runs past TCP's slow start (see [`Session::size_bulk`]).
    warming: bool,
    /// The timed probe's payload while the warm-up (of [`warm_up_size`]) runs.
    after_warm_up: u64,
    /// The warm transfers of this step so far (the warm-ups, or the tries): their time in
    /// all, ms; the last one's bytes, raw time and reading; and the reading it is judged
    /// against ([`warm_again`]'s `before`).
    warmed_ms: f64,
    warm_last: (u64, f64, f64),
    warm_before: Option<f64>,
    /// What the last of the first run's tries read, Mbit/s.
    last_try: Option<f64>,
    records: Vec<Record>,
    /// What to check, for the line of a session that failed (see [`Trouble`]).
    hint: Option<&'static str>,
    /// The hello's answer was not one this build can talk to: what to tell the user.
    wrong_server: Option<String>,
    trouble: Option<Trouble>,
    /// The step [`Event::Stopped`] cut short.
    interrupted: Option<&'static str>,
}

fn ms(from: Nanos, to: Nanos) -> f64 {
    to.saturating_sub(from) as f64 / 1e6
}

impl<'a> Session<'a> {
    /// Session `number` of `cfg`, its records stamped `wall_ms` (ms since 1970), fed to
    /// `series`.
    pub fn new(cfg: &'a Config, series: &'a mut SeriesSet, number: u64, wall_ms: f64) -> Self {
        Self {
            cfg,
            series,
            number,
            wall_ms,
            step: Step::Connect,
            step_started: 0,
            budget_ms: 0.0,
            by: 0,
            from: None,
            probe: Probe {
                transport: Some(Transport::Tcp),
                ..Probe::default()
            },
            granted: None,
            local: Granted::default(),
            max_payload: 0,
            handshake_ms: 0.0,
            predicted_rtt: None,
            bulk_started: 0,
            sized_for: None,
            bulk_bytes: 0,
            trying: false,
            warming: false,
            after_warm_up: 0,
            warmed_ms: 0.0,
            warm_last: (0, 0.0, 0.0),
            warm_before: None,
            last_try: None,
            records: Vec::new(),
            hint: None,
            wrong_server: None,
            trouble: None,
            interrupted: None,
        }
    }

    /// The time a step of `metric` may take: its adaptive timeout, capped by the deadline.
    fn budget(&mut self, metric: Metric, now: Nanos) {
        let t = self.series.timeout_ms(metric);
        self.budget_ms = t.map_or(self.cfg.deadline_ms, |t| t.min(self.cfg.deadline_ms));
        self.by = now.saturating_add((self.budget_ms * 1e6) as Nanos);
    }

    /// A step that is no measurement (a warm-up, and asking the sender after it): its time is
    /// not the series' to time out, and the hard deadline alone bounds it.
    fn deadline_only(&mut self, now: Nanos) {
        self.budget_ms = self.cfg.deadline_ms;
        self.by = now.saturating_add((self.budget_ms * 1e6) as Nanos);
    }

    fn bulk_metric(&self, i: usize) -> Metric {
        self.cfg.bulk[i]
    }

    fn ping(&self) -> [u8; wire::PING_LEN] {
        [wire::OP_PING, self.number as u8]
    }

    /// What to do next, at `now`.
    pub fn poll(&mut self, now: Nanos) -> Action {
        match self.step {
            Step::Connect => {
                self.budget(Metric::HandshakeRtt, now);
                self.step_started = now;
                Action::Connect {
                    sndbuf: self.cfg.sndbuf,
                    rcvbuf: self.cfg.rcvbuf,
                    by: self.by,
                }
            }
            Step::Hello => Action::Exchange {
                send: Message::of(&self.cfg.hello.encode()),
                payload: 0,
                read: Welcome::LEN,
                nodelay: true,
                expect: &WELCOME_START,
                by: self.by,
            },
            Step::WarmUp => {
                self.budget(Metric::Rtt, now);
                Action::Exchange {
                    send: Message::of(&[wire::OP_PING, WARM_UP]),
                    payload: 0,
                    read: wire::PING_LEN,
                    nodelay: true,
                    expect: &[],
                    by: self.by,
                }
            }
            Step::Echo(nagle) => {
                self.budget(echo_metric(nagle), now);
                Action::Exchange {
                    send: Message::of(&self.ping()),
                    payload: 0,
                    read: wire::PING_LEN,
                    nodelay: !nagle,
                    expect: &[],
                    by: self.by,
                }
            }
            Step::Bulk(i) => {
                let metric = self.bulk_metric(i);
                self.budget(metric, now);
                if self.sized_for != Some(i) {
                    self.size_bulk(i);
                }
                if self.warming {
                    self.deadline_only(now);
                }
                if self.bulk_bytes > self.max_payload {
                    let msg = format!(
                        "{}: {}: {} bytes is above the server's cap of {} bytes",
                        self.cfg.host,
                        bulk_step(metric),
                        self.bulk_bytes,
                        self.max_payload
                    );
                    self.fail(metric, msg, self.bulk_probe());
                    return Action::Done;
                }
                let (op, payload) = if metric == Metric::BandwidthDown {
                    (wire::OP_BULK_DOWN, 0)
                } else {
                    (wire::OP_BULK, self.bulk_bytes)
                };
                Action::Exchange {
                    send: Message::of(&wire::bulk_header(op, self.bulk_bytes)),
                    payload,
                    read: wire::ACK.len(),
                    // Nagle off, so the last partial segment is not held back for an ACK.
                    nodelay: true,
                    expect: &[],
                    by: self.by,
                }
            }
            Step::BulkBody(_) => Action::Discard {
                len: self.bulk_bytes,
                by: self.by,
            },
            Step::Start(i) => {
                self.deadline_only(now);
                if self.bulk_metric(i) == Metric::BandwidthDown {
                    Action::Exchange {
                        send: Message::of(&[wire::OP_PING, wire::START_QUERY]),
                        payload: 0,
                        read: wire::PING_LEN,
                        nodelay: true,
                        expect: &[],
                        by: self.by,
                    }
                } else {
                    Action::SenderStart
                }
            }
            Step::Quit => Action::Quit {
                send: Message::of(&[wire::OP_QUIT]),
                by: now.saturating_add(QUIT_NS),
            },
            Step::Done => Action::Done,
        }
    }

    /// Takes what happened to the action [`Session::poll`] last returned.
    pub fn handle(&mut self, event: Event<'_>) {
        if matches!(event, Event::Stopped) {
            if !matches!(self.step, Step::Quit | Step::Done) {
                self.interrupted = Some(self.step_name());
            }
            self.step = Step::Done;
            return;
        }
        let host = self.cfg.host.clone();
        match (self.step, event) {
            (
                Step::Connect,
                Event::Connected {
                    started,
                    ended,
                    local,
                    sndbuf,
                    rcvbuf,
                },
            ) => {
                self.handshake_ms = ms(started, ended);
                self.from = local;
                self.local = Granted {
                    sndbuf,
                    rcvbuf,
                    ..Granted::default()
                };
                self.probe.sndbuf_bytes = Some(sndbuf);
                self.probe.rcvbuf_bytes = Some(rcvbuf);
                self.step = Step::Hello;
            }
            (Step::Hello, Event::Exchanged { read, .. }) if !agrees(read, &wire::TCP_MAGIC) => {
                // Not the start of any message of this protocol: another service has the
                // port (a web server's error page, an SSH banner).
                let answered = format!("it answered \"{}\"", quote_answer(read));
                self.wrong_server = Some(format!(
                    "{host} does not speak nowcast's protocol ({answered}): {ASK_SERVE}"
                ));
                self.hint = Some(ASK_SERVE);
                let msg = format!(
                    "{host}: hello: the peer does not speak nowcast's protocol ({answered})"
                );
                self.fail(Metric::HandshakeRtt, msg, self.probe.clone());
            }
            (Step::Hello, Event::Exchanged { read, .. }) => match Welcome::decode(read) {
                Ok(w) if w.status == Accepted::Ok => {
                    self.granted = Some(Granted {
                        server_rcvbuf: w.rcvbuf,
                        server_sndbuf: w.sndbuf,
                        ..self.local
                    });
                    self.max_payload = w.max_payload;
                    let outcome = Outcome::Measured {
                        value: self.handshake_ms,
                        duration_ms: Some(self.handshake_ms),
                    };
                    self.record(Metric::HandshakeRtt, outcome, self.probe.clone());
                    self.step = Step::WarmUp;
                }
                Ok(w) => {
                    let retry = match w.retry_after_ms {
                        0 => String::new(),
                        ms => format!("; try again in {:.1} s", f64::from(ms) / 1e3),
                    };
                    let msg = format!("{host}: hello: {}{retry}", w.status.reason());
                    // A server that does not understand this build's hello never will.
                    if w.status == Accepted::BadHello {
                        self.wrong_server = Some(msg.clone());
                    }
                    self.fail(Metric::HandshakeRtt, msg, self.probe.clone())
                }
                Err(e) => {
                    let msg = format!("{host}: hello: {e}");
                    if matches!(e, WireError::Version { .. }) {
                        self.wrong_server = Some(msg.clone());
                    }
                    self.fail(Metric::HandshakeRtt, msg, self.probe.clone())
                }
            },
            (step @ (Step::Connect | Step::Hello), other) => {
                let name = if step == Step::Connect {
                    "connect"
                } else {
                    "hello"
                };
                if step == Step::Hello && matches!(other, Event::TimedOut { .. }) {
                    // The port took the connection; whatever listens there said nothing.
                    self.hint = Some(SILENT);
                }
                let since = self.step_started;
                self.failed(Metric::HandshakeRtt, name, other, since, self.probe.clone());
            }
            (Step::WarmUp, Event::Exchanged { read, .. }) => {
                let want = [wire::OP_PING, WARM_UP];
                if read == want {
                    self.step = Step::Echo(false);
                } else {
                    let msg = match refusal(read) {
                        Some(why) => format!("{host}: rtt warm-up: {why}"),
                        None => format!(
                            "{host}: rtt warm-up: the echo differs from the probe ({read:?} for {want:?})"
                        ),
                    };
                    self.fail(Metric::Rtt, msg, self.echo_probe(false));
                }
            }
            (Step::WarmUp, other) => {
                let since = started_of(&other);
                self.failed(
                    Metric::Rtt,
                    "rtt warm-up",
                    other,
                    since,
                    self.echo_probe(false),
                );
            }
            (
                Step::Echo(nagle),
                Event::Exchanged {
                    started,
                    ended,
                    read,
                },
            ) => {
                let metric = echo_metric(nagle);
                let ping = self.ping();
                if read == ping {
                    let v = ms(started, ended);
                    let outcome = Outcome::Measured {
                        value: v,
                        duration_ms: Some(v),
                    };
                    if self.record(metric, outcome, self.echo_probe(nagle)) {
                        self.step = if nagle {
                            self.after_echoes()
                        } else {
                            Step::Echo(true)
                        };
                    } else {
                        self.end_after_failure();
                    }
                } else {
                    let step = echo_step(nagle);
                    let msg = match refusal(read) {
                        Some(why) => format!("{host}: {step}: {why}"),
                        None => format!(
                            "{host}: {step}: the echo differs from the probe ({read:?} for {ping:?})"
                        ),
                    };
                    self.fail(metric, msg, self.echo_probe(nagle));
                }
            }
            (Step::Echo(nagle), other) => {
                let since = started_of(&other);
                self.failed(
                    echo_metric(nagle),
                    echo_step(nagle),
                    other,
                    since,
                    self.echo_probe(nagle),
                );
            }
            (
                Step::Bulk(i),
                Event::Exchanged {
                    started,
                    ended,
                    read,
                },
            ) => {
                let metric = self.bulk_metric(i);
                let step = bulk_step(metric);
                match Answer::decode(read) {
                    Ok(Answer::Ack) if metric == Metric::BandwidthDown => {
                        self.bulk_started = started;
                        self.step = Step::BulkBody(i);
                    }
                    Ok(Answer::Ack) => self.transferred(i, started, ended),
                    Ok(Answer::Refused(why)) => {
                        // An automatic probe moves a quarter second of the path, each
                        // experiment: at a short period on a fast path, more than a server's
                        // per-client budget allows (`nowcast serve`: 2 GiB a minute).
                        let hint = match self.cfg.size {
                            ProbeSize::Auto => {
                                " (an automatic probe and its warm-up move half a second of \
                                 the path or more: a longer --period, or a smaller fixed \
                                 --size, asks less)"
                            }
                            ProbeSize::Fixed(_) => "",
                        };
                        let msg = format!(
                            "{host}: {step}: the server refused {} bytes: {why}{hint}",
                            self.bulk_bytes
                        );
                        self.fail(metric, msg, self.bulk_probe());
                    }
                    _ => {
                        let msg = format!("{host}: {step}: unexpected acknowledgement {read:?}");
                        self.fail(metric, msg, self.bulk_probe());
                    }
                }
            }
            (Step::BulkBody(i), Event::Discarded { ended }) => {
                self.transferred(i, self.bulk_started, ended);
            }
            (Step::Start(i), Event::SenderStart(start)) => self.started(i, start),
            (Step::Start(i), Event::Exchanged { read, .. }) => match wire::start_of(read) {
                Some(start) => self.started(i, start),
                None => {
                    let metric = self.bulk_metric(i);
                    let why = refusal(read).unwrap_or_else(|| {
                        format!("the server's answer {read:?} is not a sender's start")
                    });
                    let msg = format!("{host}: {} warm-up: {why}", bulk_step(metric));
                    self.fail(metric, msg, self.bulk_probe());
                }
            },
            (Step::Start(i), other) => {
                let metric = self.bulk_metric(i);
                let since = started_of(&other);
                self.failed(metric, bulk_step(metric), other, since, self.bulk_probe());
            }
            (Step::Bulk(i) | Step::BulkBody(i), other) => {
                let metric = self.bulk_metric(i);
                let since = match self.step {
                    Step::BulkBody(_) => self.bulk_started,
                    _ => started_of(&other),
                };
                self.failed(metric, bulk_step(metric), other, since, self.bulk_probe());
            }
            (Step::Quit | Step::Done, _) => self.step = Step::Done,
        }
    }

    /// The step after the two echoes.
    fn after_echoes(&self) -> Step {
        if self.cfg.bulk.is_empty() {
            Step::Quit
        } else {
            Step::Bulk(0)
        }
    }

    /// Chooses the payload of `bulk[i]`'s probe as the step begins: the fixed size; or the
    /// automatic size of the series' forecast, moved twice: first untimed (a warm-up), then
    /// timed; or, with no forecast yet (the series' first probe), the first of the unrecorded
    /// tries, which warm the connection for the probe after them.
    ///
    /// Why the warm-up: each session is a new connection, and a new connection's slow start
    /// takes log₂(BDP / initial window) round trips to fill the path, then overshoots its
    /// queue and recovers. Timed from the first byte, less one predicted RTT (JavaNws
    /// §2.1.1), a probe of the automatic size read 43 Mbit/s of a 100 Mbit/s path behind
    /// 50 ms on every probe, and 2.3 of 40 behind 150 ms (the sizes those readings asked for
    /// were smaller still: a fixed point). After the warm-up the timed transfer starts with
    /// the window TCP found, as the page's probes do on the connections the browser keeps
    /// open, and it is sized and timed by the same rule. A fixed `--size` (JavaNws's 64 KB
    /// probe) is timed as JavaNws times it: once, from a new connection.
    fn size_bulk(&mut self, i: usize) {
        self.sized_for = Some(i);
        if i == 0 {
            // JavaNws §2.1.1: the RTT forecast made from the exchanges so far.
            self.predicted_rtt = self.series.next(Metric::Rtt).map(|f| f.value);
        }
        (self.bulk_bytes, self.trying) = match self.cfg.size {
            ProbeSize::Fixed(n) => (n, false),
            ProbeSize::Auto => match self.series.next(self.bulk_metric(i)) {
                Some(f) => (
                    auto_size(Some(f.value), self.predicted_rtt, self.auto_cap()),
                    false,
                ),
                None => (AUTO_MIN_BYTES.min(self.auto_cap()), true),
            },
        };
        self.last_try = None;
        self.warmed_ms = 0.0;
        self.warming = matches!(self.cfg.size, ProbeSize::Auto) && !self.trying;
        if self.warming {
            let forecast = self.series.next(self.bulk_metric(i)).map(|f| f.value);
            self.after_warm_up = self.bulk_bytes;
            self.warm_before = None;
            self.bulk_bytes = warm_up_size(forecast, self.predicted_rtt, self.auto_cap());
        }
    }

    /// After a warm transfer of `bulk[i]` (a warm-up or the last try), the sender said
    /// `start`: another warm-up, or the timed probe ([`warm_again`]).
    fn started(&mut self, i: usize, start: Start) {
        let (bytes, raw_ms, mbit_s) = self.warm_last;
        let before = self.warm_before.replace(mbit_s);
        let cap = self.auto_cap();
        let rtt = self.predicted_rtt;
        match warm_again(
            start,
            bytes,
            raw_ms,
            mbit_s,
            before,
            self.warmed_ms,
            rtt,
            cap,
        ) {
            Some(next) => {
                self.warming = true;
                self.bulk_bytes = next;
            }
            None => {
                // The timed transfer lasts two round trips of the forecast or of what the last
                // warm-up read, whichever is more: a forecast that a slow start's readings
                // made low would time a transfer too short to be timed on the warm window.
                self.warming = false;
                self.bulk_bytes = self.after_warm_up.max(auto_size(Some(mbit_s), rtt, cap));
            }
        }
        self.step = Step::Bulk(i);
    }

    /// The most an automatic probe of this session moves: [`AUTO_MAX_BYTES`], or the
    /// server's cap when lower.
    fn auto_cap(&self) -> u64 {
        AUTO_MAX_BYTES.min(self.max_payload)
    }

    /// A bandwidth probe of `bulk[i]` that moved its payload between `started` and `ended`:
    /// recorded, or, for a try, the next try's size or the recorded probe's.
    fn transferred(&mut self, i: usize, started: Nanos, ended: Nanos) {
        let metric = self.bulk_metric(i);
        let raw_ms = ms(started, ended);
        let rtt = self.predicted_rtt;
        let mbit_s =
            rate_minus_rtt(self.bulk_bytes as f64, raw_ms, rtt).map_or(0.0, |r| r.mbit_per_s);
        if self.warming {
            self.warmed_ms += raw_ms;
            self.warm_last = (self.bulk_bytes, raw_ms, mbit_s);
            self.step = Step::Start(i);
            return;
        }
        if self.trying {
            // The tries are sizing steps, not measurements (the page's burst, round.ts): none
            // is recorded or fed to the series. The last one's rate sizes the recorded probe.
            let cap = self.auto_cap();
            let previous = self.last_try.replace(mbit_s);
            self.warmed_ms += raw_ms;
            match cold_burst_next(self.bulk_bytes, mbit_s, previous, raw_ms, rtt, cap) {
                Some(next) => {
                    self.bulk_bytes = next;
                    self.step = Step::Bulk(i);
                }
                None => {
                    // The tries warmed the connection: the recorded probe is next, once the
                    // sender has left its start.
                    self.trying = false;
                    self.warming = true;
                    self.warm_last = (self.bulk_bytes, raw_ms, mbit_s);
                    self.warm_before = previous;
                    self.after_warm_up = if mbit_s > 0.0 {
                        auto_size(Some(mbit_s), rtt, cap)
                    } else {
                        self.bulk_bytes
                    };
                    self.step = Step::Start(i);
                }
            }
            return;
        }
        let mut p = self.bulk_probe();
        let outcome = match rate_minus_rtt(self.bulk_bytes as f64, raw_ms, self.predicted_rtt) {
            Some(b) => {
                p.raw_ms = Some(b.raw_ms);
                p.rtt_subtracted_ms = Some(b.subtracted_ms);
                Outcome::Measured {
                    value: b.mbit_per_s,
                    duration_ms: Some(raw_ms),
                }
            }
            None => Outcome::Failed {
                error: format!(
                    "{}: {}: the probe took no measurable time",
                    self.cfg.host,
                    bulk_step(metric)
                ),
            },
        };
        let ok = self.record(metric, outcome, p);
        match (ok, i + 1 < self.cfg.bulk.len()) {
            (false, _) => self.end_after_failure(),
            (true, true) => self.step = Step::Bulk(i + 1),
            (true, false) => self.step = Step::Quit,
        }
    }

    fn echo_probe(&self, nagle: bool) -> Probe {
        Probe {
            payload_bytes: Some(wire::PING_LEN as u64),
            nagle: Some(nagle),
            ..self.probe.clone()
        }
    }

    /// The probe of the bulk step under way (during its warm-up, the timed probe's).
    fn bulk_probe(&self) -> Probe {
        let bytes = if self.warming {
            self.after_warm_up
        } else {
            self.bulk_bytes
        };
        Probe {
            payload_bytes: Some(bytes),
            nagle: Some(false),
            ..self.probe.clone()
        }
    }

    /// The probe of a bulk step that never ran (after a failure): the size asked for, if one
    /// was (an automatic size is chosen only as its step begins).
    fn untried_bulk_probe(&self) -> Probe {
        let bytes = match self.cfg.size {
            ProbeSize::Fixed(n) => Some(n),
            ProbeSize::Auto => None,
        };
        Probe {
            payload_bytes: bytes,
            nagle: Some(false),
            ..self.probe.clone()
        }
    }

    /// Records `outcome` for `metric`; whether it was a value.
    fn record(&mut self, metric: Metric, outcome: Outcome, probe: Probe) -> bool {
        let obs = Observation {
            probe: Some(probe),
            from: self.from.clone(),
            ..Observation::new(self.wall_ms, outcome, Some(self.budget_ms))
        };
        let r = self.series.observe(metric, obs);
        let ok = r.status == Status::Ok;
        self.records.push(r);
        ok
    }

    /// A failure that ends the session.
    fn fail(&mut self, metric: Metric, error: String, probe: Probe) {
        self.record(metric, Outcome::Failed { error }, probe);
        self.end_after_failure();
    }

    /// A step that ended without a value: a timeout (counted from `since`) or an error
    /// that names the host, the step and the cause.
    fn failed(&mut self, metric: Metric, step: &str, event: Event<'_>, since: Nanos, probe: Probe) {
        let outcome = match event {
            Event::TimedOut { at, .. } => Outcome::TimedOut {
                elapsed_ms: ms(since, at),
            },
            Event::Failed { error } => Outcome::Failed {
                error: format!("{}: {step}: {error}", self.cfg.host),
            },
            other => Outcome::Failed {
                error: format!("{}: {step}: unexpected {other:?}", self.cfg.host),
            },
        };
        self.record(metric, outcome, probe);
        self.end_after_failure();
    }

    /// Ends the session after the current step gave no value. Each series the session has not
    /// recorded yet (the later steps') gets an error record naming the step that failed:
    /// without it, a download after a refused upload would leave no trace in the records,
    /// the table or the summary, as if it had never been asked for. The record has no
    /// timeout (none was in force: the step never ran) and feeds no timeout or forecast.
    fn end_after_failure(&mut self) {
        let failed = self.step_name();
        let failed_metric = self.records.last().map(|r| r.metric);
        let cause = self.records.last().map(|r| match r.status {
            Status::Timeout => format!(
                "{}: {} timed out after {} ms",
                self.cfg.host,
                r.metric,
                r.timeout_ms.map(number).unwrap_or_default()
            ),
            _ => r.error.clone().unwrap_or_default(),
        });
        let mut untried = Vec::new();
        for metric in self.cfg.metrics() {
            if self.records.iter().any(|r| r.metric == metric) {
                continue;
            }
            let probe = match metric {
                Metric::Rtt => self.echo_probe(false),
                Metric::RttNagle => self.echo_probe(true),
                Metric::BandwidthUp | Metric::BandwidthDown => self.untried_bulk_probe(),
                _ => self.probe.clone(),
            };
            let error = format!(
                "{}: {}: not tried because the {failed} step{} failed",
                self.cfg.host,
                step_of(metric),
                failed_metric.map_or(String::new(), |m| format!(" ({m})")),
            );
            let obs = Observation {
                probe: Some(probe),
                from: self.from.clone(),
                ..Observation::new(self.wall_ms, Outcome::Failed { error }, None)
            };
            let r = self.series.observe(metric, obs);
            self.records.push(r);
            untried.push(metric.to_string());
        }
        self.step = Step::Done;
        self.trouble = cause.map(|cause| {
            let mut line = cause;
            if !untried.is_empty() {
                line.push_str(&format!("; {} not tried", and_list(&untried)));
            }
            Trouble {
                line,
                hint: self.hint,
                wrong_server: self.wrong_server.clone(),
            }
        });
    }

    /// The name of the current step, as error messages give it.
    fn step_name(&self) -> &'static str {
        match self.step {
            Step::Connect => "connect",
            Step::Hello => "hello",
            Step::WarmUp => "rtt warm-up",
            Step::Echo(nagle) => echo_step(nagle),
            Step::Bulk(i) | Step::BulkBody(i) | Step::Start(i) => bulk_step(self.bulk_metric(i)),
            Step::Quit => "quit",
            Step::Done => "session",
        }
    }

    /// The buffer sizes granted, once the server welcomed the session.
    pub fn granted(&self) -> Option<Granted> {
        self.granted
    }

    /// The step a stop ([`Event::Stopped`]) cut short, if one did: the session recorded
    /// nothing of it or of the steps after it.
    pub fn interrupted(&self) -> Option<&'static str> {
        self.interrupted
    }

    /// Why the session ended before its last step, once it has.
    pub fn trouble(&self) -> Option<&Trouble> {
        self.trouble.as_ref()
    }

    /// The session's records, in step order.
    pub fn into_records(self) -> Vec<Record> {
        self.records
    }
}

/// Whether `read` agrees with `expect` as far as both go (what has come could still be the
/// start of it, or holds it whole).
pub fn agrees(read: &[u8], expect: &[u8]) -> bool {
    let n = read.len().min(expect.len());
    read[..n] == expect[..n]
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `text` with its first letter in capitals, to start a sentence.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |c| {
        c.to_uppercase().chain(chars).collect::<String>()
    })
}

/// The server's reason when `read` (in place of an echo) is a refusal.
fn refusal(read: &[u8]) -> Option<String> {
    match Answer::decode(read) {
        Ok(Answer::Refused(why)) => Some(format!("the server ended the session: {why}")),
        _ => None,
    }
}

fn started_of(e: &Event<'_>) -> Nanos {
    match e {
        Event::TimedOut { started, .. } => *started,
        _ => 0,
    }
}

fn echo_metric(nagle: bool) -> Metric {
    if nagle {
        Metric::RttNagle
    } else {
        Metric::Rtt
    }
}

fn echo_step(nagle: bool) -> &'static str {
    if nagle {
        "rtt with Nagle on"
    } else {
        "rtt"
    }
}

/// The step that measures `metric`, as error messages name it.
fn step_of(metric: Metric) -> &'static str {
    match metric {
        Metric::HandshakeRtt => "connect",
        Metric::Rtt => echo_step(false),
        Metric::RttNagle => echo_step(true),
        other => bulk_step(other),
    }
}

fn bulk_step(metric: Metric) -> &'static str {
    if metric == Metric::BandwidthDown {
        "bandwidth down"
    } else {
        "bandwidth"
    }
}

#[cfg(test)]
mod tests;
