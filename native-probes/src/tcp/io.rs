//! The edge of `nowcast tcp`: the sockets a [`Session`] asks for, and the periodic loop that
//! runs one session per experiment. Socket buffers are set before connecting (so the window
//! scale fits them) and the sizes the kernel granted are reported, because buffer sizes
//! change what is measured (JavaNws §4).

use super::session::{Action, Config, Event, Granted, Nanos, ProbeSize, Session};
use crate::clock::{wall_ms, Clock};
use crate::net::{discard_by, prime, read_exact_by, remaining, write_all_by};
use crate::output::{Heading, RecordSink};
use crate::periodic::{self, Plan, Report};
use crate::series::{SeriesSet, Settings};
use crate::stop::Stop;
use crate::wire::Welcome;
use anyhow::Result;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream};
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
            "nowcast tcp → {} ({}), bandwidth probe {}",
            cfg.host, probe.addrs[0], cfg.size
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
    let result = periodic::run(plan, &clock, stop, sink, |index| {
        let timestamp_ms = wall_ms();
        let mut session = Session::new(cfg, &mut set, index, timestamp_ms);
        drive(&mut session, &probe.addrs, &clock, &mut bufs);
        let granted = session.granted();
        let records = session.into_records();
        let mut notes = Vec::new();
        if let Some(g) = granted.filter(|g| shown != Some(*g)) {
            notes.push(format!(
                "buffers granted: here SO_SNDBUF {} SO_RCVBUF {}, server SO_RCVBUF {} SO_SNDBUF {}",
                g.sndbuf, g.rcvbuf, g.server_rcvbuf, g.server_sndbuf
            ));
            shown = Some(g);
        }
        Report {
            timestamp_ms,
            records,
            next: metrics.iter().map(|&m| set.next(m)).collect(),
            extra: Vec::new(),
            notes,
        }
    });
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
    drive(&mut session, &probe.addrs, &clock, &mut bufs);
    session.into_records()
}

/// The event of an I/O error: a timeout (the deadline passed) or a failure.
fn failure(e: io::Error, started: Nanos, clock: &Clock) -> Event<'static> {
    if e.kind() == io::ErrorKind::TimedOut {
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

/// Does what `session` asks until it is done.
fn drive(session: &mut Session<'_>, addrs: &[SocketAddr], clock: &Clock, bufs: &mut Buffers) {
    let mut stream: Option<TcpStream> = None;
    let mut nodelay = true;
    let mut read = [0u8; Welcome::LEN];
    loop {
        let now = clock.now();
        match session.poll(now) {
            Action::Done => return,
            Action::Connect { sndbuf, rcvbuf, by } => {
                match connect(addrs, sndbuf, rcvbuf, clock.instant(by), clock) {
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
                    Err(e) => session.handle(failure(e, now, clock)),
                }
            }
            Action::Exchange {
                send,
                payload,
                read: n,
                nodelay: want,
                by,
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
                let by = clock.instant(by);
                // The socket timeouts are set before the clock starts.
                if let Err(e) = prime(s, by) {
                    session.handle(failure(e, clock.now(), clock));
                    continue;
                }
                let started = clock.now();
                let r = exchange(s, send.bytes(), payload, &bufs.payload, &mut read[..n], by);
                let ended = clock.now();
                session.handle(match r {
                    Ok(()) => Event::Exchanged {
                        started,
                        ended,
                        read: &read[..n],
                    },
                    Err(e) => failure(e, started, clock),
                });
            }
            Action::Discard { len, by } => {
                let Some(s) = stream.as_mut() else {
                    session.handle(Event::Failed {
                        error: "not connected".into(),
                    });
                    continue;
                };
                let by = clock.instant(by);
                let r = prime(s, by).and_then(|()| discard_by(s, len, &mut bufs.down, by));
                session.handle(match r {
                    Ok(()) => Event::Discarded { ended: clock.now() },
                    Err(e) => failure(e, now, clock),
                });
            }
            Action::Quit { send, by } => {
                if let Some(s) = stream.as_mut() {
                    let by = clock.instant(by);
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
    by: Instant,
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
            let left = remaining(by)?;
            let started = clock.now();
            sock.connect_timeout(&addr.into(), left)?;
            Ok((sock.into(), started, clock.now()))
        })();
        match attempt {
            Ok(x) => return Ok(x),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Writes `send`, then `payload` bytes from `buf` (repeated), then reads `read` full.
fn exchange(
    s: &mut TcpStream,
    send: &[u8],
    payload: u64,
    buf: &[u8],
    read: &mut [u8],
    by: Instant,
) -> io::Result<()> {
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
                .and_then(|()| read_exact_by(s, read, soon))
                .map_err(|_| e)
        }
        Err(e) => Err(e),
        Ok(()) => read_exact_by(s, read, by),
    }
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
