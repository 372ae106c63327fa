//! The edge of `nowcast tcp`: the sockets a [`Session`] asks for, and the periodic loop that
//! runs one session per experiment. Socket buffers are set before connecting (so the window
//! scale fits them) and the sizes the kernel granted are reported, because buffer sizes
//! change what is measured (JavaNws §4).

use super::session::{agrees, Action, Config, Event, Granted, Nanos, ProbeSize, Session};
use crate::clock::{wall_ms, Clock};
use crate::format::ANSWER_MAX;
use crate::net::{
    connect_by, discard_by, is_stopped, prime, read_by_unless, shown, write_all_by, By,
};
use crate::output::{Heading, RecordSink};
use crate::periodic::{self, Plan, Report, Unmeasured};
use crate::series::{SeriesSet, Settings};
use crate::stop::Stop;
use anyhow::{anyhow, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A `nowcast tcp` run: what each session does and where it connects.
#[derive(Clone, Debug)]
pub struct Probe {
    pub session: Config,
    /// The target's addresses, tried in order.
    pub addrs: Vec<SocketAddr>,
    /// Bytes handed to the kernel per write of a bandwidth probe (JavaNws §4: the size of
    /// the sends changes the result on some hosts).
    pub write_size: usize,
}

/// Reusable buffers of the sessions' transfers.
struct Buffers {
    payload: Vec<u8>,
    down: Vec<u8>,
}

/// Runs the sessions of `probe` per `plan`, feeding `settings`' series, writing to `sink`.
///
/// A session that failed is one line on standard error
/// ([`Trouble`](super::session::Trouble)): the cause and the series therefore not tried,
/// where the records have one error each; until a session of the run has been welcomed,
/// with the question the hello's answer (or its silence) raises, whether `nowcast serve`
/// runs there.
///
/// A peer that answers the first hello of the run with something this build cannot talk to
/// (another service on the port, another version of the protocol) ends the run after that
/// experiment, with the error the command exits 2 for ("could not run"), as ping stops at
/// once on a host it cannot resolve: it is a mistake in the command's target, not a
/// measurement of the path, and every later experiment would get the same answer and add
/// rows of loss that read as the network's. Once a `nowcast serve` has welcomed a session of
/// the run, the target was right: a later answer of another kind (the server replaced while
/// a long run goes on) is recorded as that experiment's failure and the run goes on, as for
/// a server that is down. A hello that times out is never taken for a wrong server: a slow
/// `nowcast serve` does the same.
///
/// A raised `stop` (Ctrl-C) cuts the session under way short within
/// [`crate::net::STOP_POLL`], whatever its step's timeout (a minute for a bandwidth probe):
/// the probe it interrupted and the later steps are not recorded (a note says so), and the
/// run ends with its summary.
pub fn run(
    probe: &Probe,
    settings: &Settings,
    plan: &Plan,
    stop: &Stop,
    sink: &mut dyn RecordSink,
) -> Result<()> {
    let cfg = &probe.session;
    let metrics = cfg.metrics();
    let mut set = SeriesSet::new(&metrics, settings)?;
    let clock = Clock::new();
    sink.begin(&Heading {
        title: format!(
            "nowcast tcp → {}, bandwidth probe {}",
            shown(&cfg.host, probe.addrs[0]),
            cfg.size
        ),
        metrics: metrics.clone(),
        extra: Vec::new(),
    })?;
    let write_size = write_size(probe);
    let mut bufs = Buffers {
        payload: vec![0u8; write_size],
        down: vec![0u8; write_size.max(256 * 1024)],
    };
    let mut shown: Option<Granted> = None;
    let mut welcomed = false;
    let mut wrong_server = None;
    let result = periodic::run(plan, &clock, stop, sink, |index| {
        let timestamp_ms = wall_ms();
        let mut session = Session::new(cfg, &mut set, index, timestamp_ms);
        drive(&mut session, &probe.addrs, &clock, &mut bufs, Some(stop));
        let interrupted = session.interrupted();
        let granted = session.granted();
        let trouble = session.trouble().cloned();
        let records = session.into_records();
        let mut notes = Vec::new();
        if let Some(step) = interrupted {
            notes.push(format!(
                "interrupted during the {step} step: the probe under way and the steps after it are not recorded"
            ));
        }
        if let Some(g) = granted.filter(|g| shown != Some(*g)) {
            notes.push(format!(
                "buffers granted: here SO_SNDBUF {} SO_RCVBUF {}, server SO_RCVBUF {} SO_SNDBUF {}",
                g.sndbuf, g.rcvbuf, g.server_rcvbuf, g.server_sndbuf
            ));
            shown = Some(g);
        }
        welcomed |= granted.is_some();
        // A failed session is one line (or none: a wrong server is said once, as the
        // command's error, after the table's summary).
        let said = trouble.map(|t| match (&t.wrong_server, welcomed) {
            (Some(why), false) => {
                wrong_server = Some(why.clone());
                vec![]
            }
            // A `nowcast serve` has answered at this address: no question about it.
            (_, true) => vec![t.line],
            (None, false) => vec![t.hinted()],
        });
        Report {
            timestamp_ms,
            records,
            next: metrics.iter().map(|&m| set.next(m)).collect(),
            extra: Vec::new(),
            notes,
            said,
            last: wrong_server.is_some(),
        }
    });
    let result = match (result, wrong_server) {
        (Ok(()), Some(why)) => Err(anyhow!(why)),
        (Err(e), Some(why)) if e.is::<Unmeasured>() => Err(anyhow!(why)),
        (result, _) => result,
    };
    periodic::finish(result, sink, &set.stats())
}

/// Bytes per write of a bandwidth probe: as asked, and no more than a fixed probe's payload.
fn write_size(probe: &Probe) -> usize {
    match probe.session.size {
        ProbeSize::Fixed(n) => probe.write_size.clamp(1, n.max(1) as usize),
        ProbeSize::Auto => probe.write_size.max(1),
    }
}

/// One session of `probe` (a campaign's run), feeding `set`: its records.
pub fn once(probe: &Probe, set: &mut SeriesSet, index: u64) -> Vec<nowcast_core::record::Record> {
    let clock = Clock::new();
    let cfg = &probe.session;
    let write_size = write_size(probe);
    let mut bufs = Buffers {
        payload: vec![0u8; write_size],
        down: vec![0u8; write_size.max(256 * 1024)],
    };
    let mut session = Session::new(cfg, set, index, wall_ms());
    drive(&mut session, &probe.addrs, &clock, &mut bufs, None);
    session.into_records()
}

/// The event of an I/O error: a stop (the flag was raised: whatever the error, the probe was
/// cut short by it, not by the path), a timeout (the deadline passed) or a failure.
fn failure(e: io::Error, started: Nanos, clock: &Clock, stop: Option<&Stop>) -> Event<'static> {
    if is_stopped(&e) || stop.is_some_and(Stop::is_set) {
        Event::Stopped
    } else if e.kind() == io::ErrorKind::TimedOut {
        Event::TimedOut {
            started,
            at: clock.now(),
        }
    } else {
        Event::Failed {
            error: e.to_string(),
        }
    }
}

/// Does what `session` asks until it is done. A raised `stop` cuts the step under way short
/// (within [`crate::net::STOP_POLL`]) and ends the session ([`Event::Stopped`]).
fn drive(
    session: &mut Session<'_>,
    addrs: &[SocketAddr],
    clock: &Clock,
    bufs: &mut Buffers,
    stop: Option<&Stop>,
) {
    let mut stream: Option<TcpStream> = None;
    let mut nodelay = true;
    let mut read = [0u8; ANSWER_MAX];
    let by = |at: Nanos| By {
        at: clock.instant(at),
        stop,
    };
    loop {
        let now = clock.now();
        if stop.is_some_and(Stop::is_set) {
            session.handle(Event::Stopped);
        }
        match session.poll(now) {
            Action::Done => return,
            Action::Connect {
                sndbuf,
                rcvbuf,
                by: at,
            } => match connect(addrs, sndbuf, rcvbuf, by(at), clock) {
                Ok((s, started, ended)) => {
                    let sock = SockRef::from(&s);
                    let event = Event::Connected {
                        started,
                        ended,
                        local: s.local_addr().ok().map(|a| a.to_string()),
                        sndbuf: sock.send_buffer_size().unwrap_or(0) as u64,
                        rcvbuf: sock.recv_buffer_size().unwrap_or(0) as u64,
                    };
                    stream = Some(s);
                    nodelay = true;
                    session.handle(event);
                }
                Err(e) => session.handle(failure(e, now, clock, stop)),
            },
            Action::Exchange {
                send,
                payload,
                read: n,
                nodelay: want,
                expect,
                by: at,
            } => {
                let Some(s) = stream.as_mut() else {
                    session.handle(Event::Failed {
                        error: "not connected".into(),
                    });
                    continue;
                };
                if want != nodelay {
                    if let Err(e) = s.set_nodelay(want) {
                        session.handle(Event::Failed {
                            error: format!("set TCP_NODELAY: {e}"),
                        });
                        continue;
                    }
                    nodelay = want;
                }
                let by = by(at);
                // The socket timeouts are set before the clock starts.
                if let Err(e) = prime(s, by) {
                    session.handle(failure(e, clock.now(), clock, stop));
                    continue;
                }
                let started = clock.now();
                let answer = Answer {
                    buf: &mut read,
                    want: n,
                    expect,
                };
                let r = exchange(s, send.bytes(), payload, &bufs.payload, answer, by);
                let ended = clock.now();
                session.handle(match r {
                    Ok(got) => Event::Exchanged {
                        started,
                        ended,
                        read: &read[..got],
                    },
                    Err(e) => failure(e, started, clock, stop),
                });
            }
            Action::Discard { len, by: at } => {
                let Some(s) = stream.as_mut() else {
                    session.handle(Event::Failed {
                        error: "not connected".into(),
                    });
                    continue;
                };
                let by = by(at);
                let r = prime(s, by).and_then(|()| discard_by(s, len, &mut bufs.down, by));
                session.handle(match r {
                    Ok(()) => Event::Discarded { ended: clock.now() },
                    Err(e) => failure(e, now, clock, stop),
                });
            }
            Action::SenderStart => session.handle(match stream.as_ref() {
                Some(s) => Event::SenderStart(crate::net::sender_start(s.as_raw_fd())),
                None => Event::Failed {
                    error: "not connected".into(),
                },
            }),
            Action::Quit { send, by: at } => {
                if let Some(s) = stream.as_mut() {
                    let by = by(at);
                    let _ = prime(s, by).and_then(|()| write_all_by(s, send.bytes(), by));
                }
                session.handle(Event::Closed);
            }
        }
    }
}

/// Connects to the first address that answers; the connect's own start and end.
fn connect(
    addrs: &[SocketAddr],
    sndbuf: Option<usize>,
    rcvbuf: Option<usize>,
    by: By<'_>,
    clock: &Clock,
) -> io::Result<(TcpStream, Nanos, Nanos)> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for &addr in addrs {
        let attempt = (|| {
            let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            if let Some(n) = sndbuf {
                sock.set_send_buffer_size(n)?;
            }
            if let Some(n) = rcvbuf {
                sock.set_recv_buffer_size(n)?;
            }
            sock.set_nodelay(true)?;
            crate::net::pace(sock.as_raw_fd());
            let started = clock.now();
            connect_by(&sock, addr, by)?;
            Ok((sock.into(), started, clock.now()))
        })();
        match attempt {
            Ok(x) => return Ok(x),
            // Ctrl-C is not a reason to try the next address.
            Err(e) if is_stopped(&e) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Where an exchange's answer goes: `want` bytes into `buf`, unless they stop agreeing with
/// `expect` (see [`Action::Exchange`]).
struct Answer<'a> {
    buf: &'a mut [u8],
    want: usize,
    expect: &'static [u8],
}

/// Writes `send`, then `payload` bytes from `buf` (repeated), then reads the answer: the
/// number of its bytes read.
fn exchange(
    s: &mut TcpStream,
    send: &[u8],
    payload: u64,
    buf: &[u8],
    answer: Answer<'_>,
    by: By<'_>,
) -> io::Result<usize> {
    let sent = (|| {
        write_all_by(s, send, by)?;
        let mut left = payload;
        while left > 0 {
            let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            write_all_by(s, &buf[..n], by)?;
            left -= n as u64;
        }
        Ok(())
    })();
    match sent {
        // A server that refuses an upload (its budget, its rate rule) writes its reason and
        // closes without reading the rest: the reason is what the user should see, not the
        // reset that stopped the writes, so it is read if it came.
        Err(e) if is_closed(&e) => {
            let soon = by.min(Instant::now() + REASON_WAIT);
            prime(s, soon)
                .and_then(|()| read_answer(s, answer, soon))
                .map_err(|r| if is_stopped(&r) { r } else { e })
        }
        Err(e) => Err(e),
        Ok(()) => read_answer(s, answer, by),
    }
}

/// Reads `answer.want` bytes by `by` (after [`prime`]); or, when what comes stops agreeing
/// with `answer.expect`, what came with the rest of its first line, read for at most
/// [`REASON_WAIT`]: a peer of another protocol is told at once, not when the timeout expires.
/// The number of bytes read.
fn read_answer(s: &mut TcpStream, answer: Answer<'_>, by: By<'_>) -> io::Result<usize> {
    let Answer { buf, want, expect } = answer;
    let n = read_by_unless(s, &mut buf[..want], by, |got| !agrees(got, expect))?;
    if agrees(&buf[..n], expect) {
        Ok(n)
    } else {
        Ok(rest_of_line(s, buf, n, by))
    }
}

/// Reads on into `buf` after its first `n` bytes until it holds a line's end, is full, the
/// peer closes or [`REASON_WAIT`] has passed (at most until `by`): the bytes it then holds.
fn rest_of_line(s: &mut TcpStream, buf: &mut [u8], mut n: usize, by: By<'_>) -> usize {
    let soon = by.min(Instant::now() + REASON_WAIT);
    while n < buf.len() && !buf[..n].contains(&b'\n') {
        if prime(s, soon).is_err() {
            break;
        }
        match s.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    n
}

/// How long a client whose writes were cut off waits for the server's reason.
const REASON_WAIT: Duration = Duration::from_millis(200);

fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
    )
}
