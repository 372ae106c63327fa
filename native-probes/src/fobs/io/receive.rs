//! The receiving side: the listener, the transfers waiting for their turn, and one
//! transfer's loop around the [`Receiver`] core.

use super::datagrams::{Datagrams, Digest, Writes, DIGEST_STEP, RECV_BATCH};
use super::files::{
    f_path, open_part, part_paths, read_state, remove_unfinished, rename_noreplace, unfinished,
    write_state,
};
use super::{
    close_gracefully, random_u64, read_available, read_available_into, wait_readable, write_all_nb,
};
use crate::clock::{Clock, Nanos};
use crate::fobs::receiver::{self, Receiver};
use crate::fobs::wire::{Control, Done, Framer, Refusal, Welcome, TOKEN_LEN};
use crate::stop::Stop;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

/// What a receiver is configured with, beyond the core's [`receiver::Config`].
#[derive(Clone, Debug)]
pub struct RecvOptions {
    pub listen: SocketAddr,
    pub dir: PathBuf,
    pub token: [u8; TOKEN_LEN],
    pub max_size: u64,
    pub max_rate: f64,
    pub grace: Duration,
    pub idle: Duration,
    /// SO_RCVBUF of the data socket (bytes); a small one makes CPU-like loss for
    /// experiments.
    pub rcvbuf: Option<usize>,
    /// Stop after one transfer.
    pub once: bool,
    /// Delete each file once its hash matched instead of keeping it (a measuring receiver).
    pub discard: bool,
    /// Connections per client (/32, /64) per minute.
    pub per_client_per_minute: f64,
    /// How long an unfinished transfer's part file and state are kept for `--resume` after
    /// they were last written; older ones are deleted (checked at the start and every
    /// [`EXPIRY_CHECK_NS`] between transfers), so that senders that never come back do not
    /// fill the disk.
    pub keep_unfinished: Duration,
}

/// How often a receiver between transfers looks for unfinished transfers to expire.
pub const EXPIRY_CHECK_NS: u64 = 600_000_000_000;

/// What a receiver reports.
pub enum RecvUpdate<'a> {
    Listening {
        tcp: SocketAddr,
    },
    Refused {
        peer: SocketAddr,
        why: String,
    },
    /// Trouble with the receiver itself, not one peer (file descriptors run out): it pauses
    /// and goes on.
    Warning {
        what: String,
    },
    Transfer {
        peer: SocketAddr,
        name: &'a str,
        size: u64,
        resumed: u64,
        /// Packets an earlier, unfinished transfer of the same file had left here, dropped
        /// because this sender did not ask to resume it.
        discarded: u64,
    },
    /// An unfinished transfer in the directory: at the start, each one kept for `--resume`
    /// (`deleted` false); at the start and later, each one deleted for being older than
    /// [`RecvOptions::keep_unfinished`]. `error` when it could not be deleted.
    Unfinished {
        found: &'a super::files::Unfinished,
        deleted: bool,
        error: Option<String>,
    },
    Window {
        signature: &'a crate::classify::signature::Signature,
    },
    Progress {
        stored: u64,
        total: u64,
    },
    Finished {
        peer: SocketAddr,
        name: &'a str,
        result: Result<Done, String>,
        drops: receiver::Drops,
        seconds: f64,
        /// The file's size (0 for a refused hello).
        size: u64,
        /// The bytes that arrived in this transfer: not those a resume found already held,
        /// which a rate must leave out.
        received: u64,
        /// The bytes held at the end, those held before included: of an unfinished
        /// transfer, what arrived, not the file's size.
        held: u64,
        /// Whether an unfinished transfer's part file and state are kept for `--resume`.
        kept: bool,
    },
}

/// Receives transfers into `opts.dir` until `stop` (or one, with `once`).
pub fn recv(
    opts: &RecvOptions,
    stop: &Stop,
    update: &mut dyn FnMut(RecvUpdate<'_>),
) -> io::Result<()> {
    use crate::serve::limits::{ClientBuckets, Prefixes, Rate};
    // Errors name the address and the socket, as `nowcast serve`'s do: "address in use"
    // alone does not say which of the two sockets on the port found it taken.
    fn named(at: SocketAddr, what: &str) -> impl FnOnce(io::Error) -> io::Error + '_ {
        move |e| io::Error::new(e.kind(), format!("{at}: {what}: {e}"))
    }
    // Both sockets on one port. With port 0 the kernel picks the TCP port, whose UDP port of
    // the same number may be another program's: then another pick (a test suite running many
    // at once met it), a few times before saying so.
    let mut tries = if opts.listen.port() == 0 { 16 } else { 1 };
    let (listener, at, udp) = loop {
        let listener = TcpListener::bind(opts.listen).map_err(named(opts.listen, "bind tcp"))?;
        let at = listener.local_addr()?;
        match UdpSocket::bind(at) {
            Ok(udp) => break (listener, at, udp),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && tries > 1 => tries -= 1,
            Err(e) => return Err(named(at, "bind udp")(e)),
        }
    };
    if let Some(n) = opts.rcvbuf {
        let s = socket2::SockRef::from(&udp);
        s.set_recv_buffer_size(n)
            .map_err(named(at, "udp: SO_RCVBUF (--rcvbuf)"))?;
    } else {
        // As large as the kernel allows: a burst that the receiver is late to read is
        // CPU loss, the thing the classifier exists to recognise, but there is no reason
        // to make more of it.
        let _ = socket2::SockRef::from(&udp).set_recv_buffer_size(16 << 20);
    }
    udp.set_nonblocking(true)?;
    listener.set_nonblocking(true)?;
    update(RecvUpdate::Listening { tcp: at });
    let clock = Clock::new();
    let prefixes = Prefixes::default();
    let mut buckets: ClientBuckets<1> = ClientBuckets::new(
        [Rate {
            per_second: opts.per_client_per_minute / 60.0,
            burst: opts.per_client_per_minute.max(1.0),
        }],
        4096,
        random_u64(),
    );
    // What the operator reads: a line per refusal, but at most ten a minute per client
    // network (a burst of ten), so that a flood of connections cannot flood the output; the
    // next line a network gets says how many were not printed.
    let mut lines: ClientBuckets<1> = ClientBuckets::new(
        [Rate {
            per_second: REFUSAL_LINES_PER_MINUTE / 60.0,
            burst: REFUSAL_LINES_PER_MINUTE,
        }],
        4096,
        random_u64(),
    );
    let mut unprinted: std::collections::HashMap<crate::serve::limits::Client, u64> =
        Default::default();
    let update: &mut dyn FnMut(RecvUpdate<'_>) = &mut |u| match u {
        RecvUpdate::Refused { peer, why } => {
            let client = prefixes.client(peer.ip());
            if lines.take(&client, [1.0], clock.now()).is_err() {
                if unprinted.len() < 4096 || unprinted.contains_key(&client) {
                    *unprinted.entry(client).or_default() += 1;
                }
                return;
            }
            let why = match unprinted.remove(&client) {
                Some(n) => format!("{why} (and {n} more refused from its network, not printed)"),
                None => why,
            };
            update(RecvUpdate::Refused { peer, why })
        }
        other => update(other),
    };
    let mut warned: Option<Nanos> = None;
    let mut junk = vec![0u8; 65_536];
    expire_unfinished(opts, true, update);
    let mut expiry_checked = clock.now();
    // Connections that have not yet said their hello, oldest first, and connections being
    // closed. Both are served between transfers without blocking, so that a connection
    // that says nothing (or refuses to close) holds up no one: only a whole hello starts a
    // transfer, and only a transfer holds the receiver (hellos without the token are
    // refused at once).
    let mut waiting: std::collections::VecDeque<Waiting> = Default::default();
    let mut closing: std::collections::VecDeque<(TcpStream, u64)> = Default::default();
    while !stop.is_set() {
        // Datagrams with no transfer open are read and dropped (never answered).
        while udp.recv_from(&mut junk).is_ok() {}
        let now = clock.now();
        loop {
            let (conn, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of file descriptors (or memory): the connections held are still
                    // served, and accepting is tried again after a pause, as `nowcast serve`
                    // does; said at most every 10 s.
                    if warned.is_none_or(|t| now.saturating_sub(t) >= 10_000_000_000) {
                        warned = Some(now);
                        update(RecvUpdate::Warning {
                            what: format!("accepting connections: {e}; trying again"),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    break;
                }
            };
            let client = prefixes.client(peer.ip());
            if conn.set_nonblocking(true).is_err() {
                continue;
            }
            if buckets.take(&client, [1.0], now).is_err() {
                // Said to the sender too (24 bytes, whatever it sent), so that it does not
                // read a closed connection as a peer that does not speak FOBS.
                refuse(conn, Refusal::TooMany, &mut closing, now);
                update(RecvUpdate::Refused {
                    peer,
                    why: "too many connections from its network".into(),
                });
                continue;
            }
            if waiting.len() >= MAX_WAITING {
                // The oldest has had the longest to say its hello.
                if let Some(w) = waiting.pop_front() {
                    update(RecvUpdate::Refused {
                        peer: w.peer,
                        why: "no hello before the queue of connections filled".into(),
                    });
                }
            }
            waiting.push_back(Waiting {
                conn,
                peer,
                framer: Framer::with_limit(4096),
                by: now + HELLO_NS,
            });
        }
        let mut ready = None;
        let mut i = 0;
        while i < waiting.len() {
            let w = &mut waiting[i];
            let open = read_available(&mut w.conn, &mut w.framer).unwrap_or(false);
            if w.framer.ready() {
                ready = waiting.remove(i);
                break;
            }
            if !open || now > w.by {
                let w = waiting.remove(i).expect("in range");
                update(RecvUpdate::Refused {
                    peer: w.peer,
                    why: if open {
                        "no hello within 5 s".into()
                    } else {
                        "closed before its hello".into()
                    },
                });
                continue;
            }
            i += 1;
        }
        closing.retain_mut(|(c, by)| !drained(c) && now < *by);
        if ready.is_none() && now.saturating_sub(expiry_checked) >= EXPIRY_CHECK_NS {
            expiry_checked = now;
            expire_unfinished(opts, false, update);
        }
        if let Some(w) = ready {
            let peer = w.peer;
            // The receiver takes one transfer at a time: once its hello is accepted, whoever
            // else is connected, or connects before it ends, is told so at once (its sender
            // says "busy" instead of waiting out its offer), within the same per-network rate.
            let mut busy = Busy {
                listener: &listener,
                admit: &mut |peer: SocketAddr, now| {
                    buckets
                        .take(&prefixes.client(peer.ip()), [1.0], now)
                        .is_ok()
                },
                closing: &mut closing,
                waiting: &mut waiting,
                open: false,
                last: 0,
            };
            match transfer(opts, w, &udp, &clock, stop, &mut busy, update) {
                Ok(conn) => {
                    if opts.once {
                        let mut conn = conn;
                        close_gracefully(&mut conn, Duration::from_secs(2));
                        break;
                    }
                    let _ = conn.shutdown(std::net::Shutdown::Write);
                    if closing.len() >= MAX_WAITING {
                        closing.pop_front();
                    }
                    closing.push_back((conn, clock.now() + 2_000_000_000));
                }
                Err(e) => {
                    update(RecvUpdate::Refused {
                        peer,
                        why: e.to_string(),
                    });
                    if opts.once {
                        break;
                    }
                }
            }
            continue;
        }
        let mut fds = vec![listener.as_raw_fd(), udp.as_raw_fd()];
        fds.extend(waiting.iter().map(|w| w.conn.as_raw_fd()));
        fds.extend(closing.iter().map(|(c, _)| c.as_raw_fd()));
        wait_readable(&fds, Duration::from_millis(200))?;
    }
    Ok(())
}

/// Deletes the unfinished transfers older than `opts.keep_unfinished` and says so; at the
/// start (`all`) also names each one kept.
fn expire_unfinished(opts: &RecvOptions, all: bool, update: &mut dyn FnMut(RecvUpdate<'_>)) {
    for found in unfinished(&opts.dir) {
        if found.age > opts.keep_unfinished {
            let error = remove_unfinished(&opts.dir, &found.name)
                .err()
                .map(|e| e.to_string());
            update(RecvUpdate::Unfinished {
                found: &found,
                deleted: true,
                error,
            });
        } else if all {
            update(RecvUpdate::Unfinished {
                found: &found,
                deleted: false,
                error: None,
            });
        }
    }
}

/// Connections waiting for their hello (and being closed) at most; a newer one pushes out
/// the oldest, which has had the longest to say it. A sender's hello arrives a round trip
/// after it connects, so it is pushed out only by this many connections within that time.
const MAX_WAITING: usize = 64;
/// How long a connection has to say its hello.
const HELLO_NS: u64 = 5_000_000_000;

/// A connection that has not said its whole hello yet.
struct Waiting {
    conn: TcpStream,
    peer: SocketAddr,
    framer: Framer,
    /// When it is closed without one.
    by: u64,
}

/// Reads and discards what a closing connection sends; whether the peer has closed it (or
/// it failed), so that it can be dropped without a reset.
fn drained(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// One transfer, from the connection's hello to its verdict. Returns the connection for the
/// caller to close (after the sender has read the verdict), or the error that ended it.
/// Connections that come while a transfer holds the receiver.
struct Busy<'a> {
    listener: &'a TcpListener,
    /// Whether a connection from this peer is within its network's rate (taking one).
    admit: &'a mut dyn FnMut(SocketAddr, Nanos) -> bool,
    closing: &'a mut std::collections::VecDeque<(TcpStream, u64)>,
    /// Connections still to say their hello, turned away once a transfer is open.
    waiting: &'a mut std::collections::VecDeque<Waiting>,
    /// Whether a transfer holds the receiver: its hello was accepted (the token, the name,
    /// the size) and its file opened. Until then nobody is told "busy": a hello without the
    /// token, or anything that is not a hello, turns no one away.
    open: bool,
    /// When the listener was last looked at.
    last: Nanos,
}

impl Busy<'_> {
    /// How often a transfer looks for connections to turn away.
    const EVERY_NS: Nanos = 100_000_000;

    /// Turns away what has connected since the last look (at most every
    /// [`Busy::EVERY_NS`]), and closes what was turned away before.
    fn poll(&mut self, now: Nanos, update: &mut dyn FnMut(RecvUpdate<'_>)) {
        if !self.open || now.saturating_sub(self.last) < Self::EVERY_NS {
            return;
        }
        self.last = now;
        self.closing.retain_mut(|(c, by)| !drained(c) && now < *by);
        loop {
            match self.listener.accept() {
                Ok((conn, peer)) => {
                    if conn.set_nonblocking(true).is_err() {
                    } else if (self.admit)(peer, now) {
                        self.turn_away(conn, peer, now, update);
                    } else {
                        refuse(conn, Refusal::TooMany, self.closing, now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// A transfer holds the receiver from now: whoever else is connected is told so at once
    /// (its sender says "busy" instead of waiting out its offer).
    fn opened(&mut self, now: Nanos, update: &mut dyn FnMut(RecvUpdate<'_>)) {
        self.open = true;
        self.last = now;
        while let Some(w) = self.waiting.pop_front() {
            self.turn_away(w.conn, w.peer, now, update);
        }
    }

    /// Tells `conn` the receiver is busy ([`refuse`]).
    fn turn_away(
        &mut self,
        conn: TcpStream,
        peer: SocketAddr,
        now: Nanos,
        update: &mut dyn FnMut(RecvUpdate<'_>),
    ) {
        refuse(conn, Refusal::Busy, self.closing, now);
        update(RecvUpdate::Refused {
            peer,
            why: "busy with another transfer".into(),
        });
    }
}

/// Tells `conn` (non-blocking) why it is refused before its hello is read (a refusal
/// welcome: 24 bytes, whatever it sent, so nothing is amplified and the token is not needed
/// to learn it), then closes it as a finished transfer's connection is closed (what it sent
/// read first, so that the refusal is not lost to a reset).
fn refuse(
    mut conn: TcpStream,
    why: Refusal,
    closing: &mut std::collections::VecDeque<(TcpStream, u64)>,
    now: Nanos,
) {
    let mut refusal = Vec::new();
    Control::Welcome(Welcome {
        status: why,
        session: 0,
        udp_port: 0,
        max_rate: 0,
        have: Vec::new(),
    })
    .encode(&mut refusal);
    let _ = read_available_into(&mut conn, |_| {});
    let _ = conn.write(&refusal);
    let _ = conn.shutdown(std::net::Shutdown::Write);
    if closing.len() >= MAX_WAITING {
        closing.pop_front();
    }
    closing.push_back((conn, now + 2_000_000_000));
}

fn transfer(
    opts: &RecvOptions,
    w: Waiting,
    udp: &UdpSocket,
    clock: &Clock,
    stop: &Stop,
    busy: &mut Busy<'_>,
    update: &mut dyn FnMut(RecvUpdate<'_>),
) -> io::Result<TcpStream> {
    let Waiting {
        mut conn,
        peer,
        mut framer,
        by: hello_by,
    } = w;
    conn.set_nodelay(true)?;
    let start = clock.now();
    let mut rx = Receiver::new(
        receiver::Config {
            token: opts.token,
            max_size: opts.max_size,
            max_rate: opts.max_rate,
            grace_ns: opts.grace.as_nanos() as u64,
            idle_ns: opts.idle.as_nanos() as u64,
            session: random_u64(),
            udp_port: udp.local_addr()?.port(),
        },
        start,
    );
    // The sender says only small things: a hello (≈ 330 bytes) and window ends; the framer
    // holds the hello the wait read.
    let mut part: Option<File> = None;
    let mut paths: Option<(PathBuf, PathBuf, PathBuf)> = None;
    let mut out = Vec::new();
    let mut dgrams = Datagrams::new();
    let mut writes = Writes::default();
    let mut digest = Digest::new();
    let peer_ip: IpAddr = peer.ip().to_canonical();
    let mut result: Option<Result<Done, String>> = None;
    // When the resume state was last saved; none yet: the first is saved as the part file
    // opens, so that a receiver killed in a transfer's first seconds leaves a part file
    // that `--resume` can continue, not one nothing describes.
    let mut last_save: Option<Nanos> = None;
    let mut last_progress = start;
    let mut name = String::new();
    let mut size = 0;
    let mut held_at_open = 0;
    // The first error writing or reading back the part file (a full disk): the transfer
    // ends there, the sender is told the file could not be stored, and the files are left
    // as any unfinished transfer's are (kept for `--resume`, or deleted under `--discard`).
    let mut storage: Option<io::Error> = None;
    // Whether the last state saved is there for `--resume` (a full disk can refuse it too).
    let mut state_saved = true;
    loop {
        let now = clock.now();
        // Data first: everything the socket holds, so that a window's end read below
        // finds its datagrams already counted.
        for _ in 0..4096 / RECV_BATCH {
            let got = match dgrams.recv(udp) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error from an earlier exchange: nothing to do with this socket.
                Err(_) => break,
            };
            for i in 0..got {
                let (d, from) = dgrams.get(i);
                let from_peer = from.is_some_and(|ip| ip.to_canonical() == peer_ip);
                if let Some(s) = rx.handle_datagram(clock.now(), from_peer, d) {
                    if let (Some(f), None) = (&part, &storage) {
                        if let Err(e) = writes.add(f, s.offset, &d[s.start..s.end]) {
                            storage = Some(e);
                        }
                    }
                }
            }
            if got < RECV_BATCH {
                break;
            }
        }
        // Everything stored is on its way to the file before a window's end is answered,
        // the hash is computed or the resume state is saved.
        if let (Some(f), None) = (&part, &storage) {
            let written = writes.flush(f);
            if let Err(e) = written.and_then(|_| digest.advance(f, &rx, DIGEST_STEP as u64)) {
                storage = Some(e);
            }
        }
        if let (Some(e), None) = (&storage, &result) {
            result = Some(Err(format!(
                "cannot store it in {}: {e}",
                opts.dir.display()
            )));
            rx.end(Done::StorageFailed);
        }
        let open = read_available(&mut conn, &mut framer).unwrap_or(false);
        loop {
            match framer.next_message() {
                Ok(Some(m)) => rx.handle_control(clock.now(), m),
                Ok(None) => break,
                Err(_) => {
                    rx.drops.control += 1;
                    result.get_or_insert(Err("malformed control message".into()));
                    break;
                }
            }
        }
        if rx.hello().is_none() && now > hello_by {
            result.get_or_insert(Err("no hello within 5 s".into()));
        }
        rx.handle_timeout(clock.now());
        while let Some(e) = rx.poll_event() {
            match e {
                receiver::Event::Open { hello } => {
                    let (p, s, f) = part_paths(&opts.dir, &hello.name);
                    name = hello.name.clone();
                    size = hello.size;
                    if f.symlink_metadata().is_ok() {
                        rx.refuse(Refusal::Exists);
                        continue;
                    }
                    let found = read_state(&s, &hello);
                    let discarded = match (&found, hello.resume) {
                        (Some(bits), false) => bits.iter().map(|b| u64::from(b.count_ones())).sum(),
                        _ => 0,
                    };
                    let have = found.filter(|_| hello.resume);
                    match open_part(&p, have.is_some(), hello.size) {
                        Ok(f) => {
                            busy.opened(clock.now(), update);
                            part = Some(f);
                            paths = Some((p, s, f_path(&opts.dir, &hello.name)));
                            let have = have.unwrap_or_default();
                            rx.opened(clock.now(), &have);
                            held_at_open = rx.stored_bytes();
                            update(RecvUpdate::Transfer {
                                peer,
                                name: &name,
                                size,
                                resumed: rx.stored_packets(),
                                discarded,
                            });
                        }
                        Err(e) => {
                            result.get_or_insert(Err(format!(
                                "refused: {} ({size} bytes in {}: {e})",
                                Refusal::Storage.reason(),
                                opts.dir.display()
                            )));
                            rx.refuse(Refusal::Storage);
                        }
                    }
                }
                receiver::Event::Window { signature, .. } => update(RecvUpdate::Window {
                    signature: &signature,
                }),
                receiver::Event::Complete => {
                    let (p, s, f) = paths.clone().expect("open");
                    let expected = rx.hello().map(|h| h.hash).unwrap_or_default();
                    let verdict = storage.is_none().then(|| -> io::Result<Done> {
                        let file = part.as_ref().expect("open");
                        let hash = digest.finish(file, &rx, size)?;
                        file.sync_data()?;
                        if hash != expected {
                            let _ = std::fs::remove_file(&p);
                            let _ = std::fs::remove_file(&s);
                            return Ok(Done::HashMismatch);
                        }
                        if opts.discard {
                            std::fs::remove_file(&p)?;
                        } else {
                            rename_noreplace(&p, &f)?;
                        }
                        let _ = std::fs::remove_file(&s);
                        Ok(Done::Stored)
                    });
                    match verdict {
                        Some(Ok(done)) => rx.verified(done),
                        Some(Err(e)) => {
                            result.get_or_insert(Err(format!(
                                "cannot store it in {}: {e}",
                                opts.dir.display()
                            )));
                            rx.verified(Done::StorageFailed);
                        }
                        None => rx.verified(Done::StorageFailed),
                    }
                }
                receiver::Event::Finished(d) => {
                    result.get_or_insert(Ok(d));
                }
                receiver::Event::Failed(why) => {
                    result.get_or_insert(Err(why));
                }
            }
        }
        out.clear();
        while rx.poll_transmit(&mut out) {}
        if !out.is_empty() {
            if let Err(e) = write_all_nb(&mut conn, &out, Duration::from_secs(5)) {
                // A sender that died resets the connection (the write fails at once); one that
                // is alive but does not read stalls it until the limit.
                result.get_or_insert(Err(if e.kind() == io::ErrorKind::TimedOut {
                    "the sender stopped reading".into()
                } else {
                    "the sender closed the control connection".into()
                }));
            }
        }
        if stop.is_set() && result.is_none() {
            rx.end(Done::Stopped);
            out.clear();
            while rx.poll_transmit(&mut out) {}
            let _ = write_all_nb(&mut conn, &out, Duration::from_secs(1));
            result = Some(Ok(Done::Stopped));
        }
        if !open {
            result.get_or_insert(Err("the sender closed the control connection".into()));
        }
        let now = clock.now();
        busy.poll(now, update);
        if now.saturating_sub(last_progress) >= 200_000_000 && rx.total_packets() > 0 {
            last_progress = now;
            update(RecvUpdate::Progress {
                stored: rx.stored_packets(),
                total: rx.total_packets(),
            });
        }
        // What a later `--resume` can continue: not a stored file, not one whose hash
        // failed (deleted), and nothing under `--discard`, which keeps no file.
        let resumable = !opts.discard
            && !matches!(
                result,
                Some(Ok(Done::Stored)) | Some(Ok(Done::HashMismatch))
            );
        if let (Some(h), Some((_, s, _))) = (rx.hello(), &paths) {
            let due = last_save.is_none_or(|t| now.saturating_sub(t) >= 2_000_000_000);
            if resumable && (result.is_some() || due) {
                last_save = Some(now);
                let saved = write_state(s, h, &rx.have_bitmap());
                if result.is_some() {
                    state_saved = saved.is_ok();
                }
            }
        }
        if result.is_some() {
            break;
        }
        let due = rx
            .poll_timeout()
            .unwrap_or(now + 50_000_000)
            .min(now + 50_000_000);
        let wait = Duration::from_nanos(due.saturating_sub(clock.now()));
        if !wait.is_zero() {
            if let Err(e) = wait_readable(&[conn.as_raw_fd(), udp.as_raw_fd()], wait) {
                result = Some(Err(format!("waiting for the sender: {e}")));
                rx.end(Done::Abandoned);
            }
        }
    }
    let result = result.expect("set");
    let stored = rx.stored_bytes();
    // An unfinished transfer that holds nothing is not kept: there is nothing to resume, and
    // its part file reserves the whole size (a sender with the token that said hello for
    // three 1 GiB names and left reserved 3 GiB, for as long as `--keep-unfinished`).
    let empty = stored == 0;
    let kept = paths.is_some()
        && !opts.discard
        && state_saved
        && !empty
        && !matches!(result, Ok(Done::Stored) | Ok(Done::HashMismatch));
    if (opts.discard || !state_saved || empty) && !matches!(result, Ok(Done::Stored)) {
        // A measuring receiver keeps nothing: what an unfinished transfer held goes too, so
        // that its disk holds at most one transfer's file at a time. Nor is a part file kept
        // that no state describes: nothing could continue it; nor one that holds nothing.
        if let Some((p, s, _)) = &paths {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_file(s);
        }
    }
    let seconds = clock.now().saturating_sub(start) as f64 / 1e9;
    update(RecvUpdate::Finished {
        peer,
        name: &name,
        result,
        drops: rx.drops,
        seconds,
        size,
        received: stored.saturating_sub(held_at_open),
        held: stored,
        kept,
    });
    Ok(conn)
}

/// Refusal lines a client network may have printed a minute (and at once).
const REFUSAL_LINES_PER_MINUTE: f64 = 10.0;
