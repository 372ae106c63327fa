//! The FOBS receiver as a deterministic state machine: control messages, datagrams and
//! times in; control bytes, file writes ([`Store`]) and events out. It decides everything a
//! receiver on a public address must decide and does none of the I/O: the edge opens the
//! files it is told to, writes where it is told, hashes when told, and reports back.
//!
//! Admission (SECURITY.md, "FOBS receiver"): a Hello must carry the receiver's token
//! (compared in constant time), a size within the cap, sane packet and window sizes, and a
//! plain file name (`wire::valid_name`). Datagrams are trusted for nothing: each must come
//! from the control connection's address, carry the session number (64 random bits the
//! receiver chose and sent only on that connection), name a window the receiver is
//! tracking, an index inside the window, a packet inside the file and exactly that packet's
//! length, and fit the receiver's rate cap. Anything else is dropped and counted by reason.
//! The receiver never sends a datagram, so nothing it receives can make it send one.
//!
//! Acknowledgements (Dickens §2): when the sender announces a window's end, the receiver
//! waits `grace` (for the window's last datagrams, which may still be in the socket or on the
//! wire behind the announcement) and sends the window's bitmap: its packet-loss signature.

use super::wire::Nanos;
use super::wire::{
    valid_name, Ack, Control, DataHeader, Done, Hello, Refusal, Welcome, DATA_HEADER, MAX_WINDOW,
};
use crate::classify::signature::Signature;
use std::collections::VecDeque;

/// Windows tracked at once (as many as a sender keeps outstanding).
pub const MAX_PENDING: usize = super::sender::MAX_OUTSTANDING;

/// What a receiver accepts.
#[derive(Clone, Debug)]
pub struct Config {
    pub token: [u8; super::wire::TOKEN_LEN],
    /// Largest file, bytes.
    pub max_size: u64,
    /// Highest data rate taken, bytes/s (datagrams beyond it are dropped and counted).
    pub max_rate: f64,
    /// How long to wait after a window's end before acknowledging it, ns.
    pub grace_ns: Nanos,
    /// Without any valid datagram or message for this long, the transfer is abandoned, ns.
    pub idle_ns: Nanos,
    /// The session number (random, from the edge).
    pub session: u64,
    /// The UDP port data goes to.
    pub udp_port: u16,
}

/// Write `bytes[start..end]` of the datagram at `offset` of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Store {
    pub offset: u64,
    pub start: usize,
    pub end: usize,
}

/// Why datagrams were dropped: counters by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// Not a FOBS data datagram (short, wrong magic, version or kind).
    pub malformed: u64,
    /// From another address than the control connection's.
    pub source: u64,
    /// Wrong session number (forged, stale, or no transfer open).
    pub session: u64,
    /// A window not being tracked, or an index past the window's size.
    pub window: u64,
    /// A packet number past the file, or a payload of the wrong length.
    pub packet: u64,
    /// Over the rate cap.
    pub rate: u64,
    /// Control messages that broke the protocol (the connection is closed).
    pub control: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.malformed
            + self.source
            + self.session
            + self.window
            + self.packet
            + self.rate
            + self.control
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Open (or reopen, when `resume`) the temporary file for `hello.name`; answer with
    /// [`Receiver::opened`] or [`Receiver::refuse`].
    Open { hello: Hello },
    /// A window was acknowledged with this signature.
    Window { window: u32, signature: Signature },
    /// Every packet is stored: flush, hash and put the file in place, then
    /// [`Receiver::verified`].
    Complete,
    /// The transfer ended (after the Done was queued).
    Finished(Done),
    /// The control connection must be closed: the peer broke the protocol, or went idle.
    Failed(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Hello,
    Opening,
    Receiving,
    Verifying,
    Finished,
}

struct Pending {
    got: Vec<u8>,
    count: Option<u32>,
    first: Option<Nanos>,
    last: Nanos,
    ack_at: Option<Nanos>,
    ended_at: Nanos,
}

pub struct Receiver {
    cfg: Config,
    phase: Phase,
    hello: Option<Hello>,
    total: u64,
    have: Vec<u64>,
    have_count: u64,
    /// Window `next_ack + i` is `pending[i]`.
    pending: VecDeque<Option<Pending>>,
    next_ack: u32,
    control: VecDeque<Control>,
    events: VecDeque<Event>,
    tokens: f64,
    refilled: Nanos,
    last_heard: Nanos,
    pub drops: Drops,
    /// Datagrams for packets already stored (retransmissions of late arrivals).
    pub duplicates: u64,
    pub received: u64,
}

/// Constant-time comparison: the time taken does not depend on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Receiver {
    pub fn new(cfg: Config, now: Nanos) -> Self {
        Self {
            phase: Phase::Hello,
            hello: None,
            total: 0,
            have: Vec::new(),
            have_count: 0,
            pending: VecDeque::new(),
            next_ack: 0,
            control: VecDeque::new(),
            events: VecDeque::new(),
            tokens: cfg.max_rate * 0.05,
            refilled: now,
            last_heard: now,
            drops: Drops::default(),
            duplicates: 0,
            received: 0,
            cfg,
        }
    }

    pub fn hello(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    pub fn total_packets(&self) -> u64 {
        self.total
    }

    pub fn stored_packets(&self) -> u64 {
        self.have_count
    }

    /// The file's bytes stored (held from an earlier transfer included): the stored
    /// packets' bytes, the last packet counted at its own, shorter length.
    pub fn stored_bytes(&self) -> u64 {
        let Some(h) = &self.hello else { return 0 };
        let packet = u64::from(h.packet);
        let mut bytes = self.have_count * packet;
        let last = self.total.wrapping_sub(1);
        let word = self.have.get((last / 64) as usize).copied().unwrap_or(0);
        if self.total > 0 && word >> (last % 64) & 1 == 1 {
            bytes -= self.total * packet - h.size;
        }
        bytes
    }

    /// The first packet at or after `from` not yet stored (`total_packets()` when every one
    /// from there on is): the packets `from..` it can be hashed in order as they stand in the
    /// file, before the transfer completes.
    pub fn first_missing(&self, from: u64) -> u64 {
        let mut i = from;
        while i < self.total {
            let below = (1u64 << (i % 64)) - 1;
            let word = self.have[(i / 64) as usize] | below;
            if word != u64::MAX {
                return (i / 64 * 64 + u64::from((!word).trailing_zeros())).min(self.total);
            }
            i = (i / 64 + 1) * 64;
        }
        self.total
    }

    /// The packets held, as a bitmap (bit i of byte i / 8): what a resume state file keeps.
    pub fn have_bitmap(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.total.div_ceil(8) as usize);
        for i in 0..self.total.div_ceil(8) {
            out.push((self.have[(i / 8) as usize] >> ((i % 8) * 8)) as u8);
        }
        out
    }

    fn refuse_now(&mut self, why: Refusal) {
        self.control.push_back(Control::Welcome(Welcome {
            status: why,
            session: 0,
            udp_port: 0,
            max_rate: 0,
            have: Vec::new(),
        }));
        self.phase = Phase::Finished;
        self.events
            .push_back(Event::Failed(format!("refused: {}", why.reason())));
    }

    fn fail(&mut self, why: String) {
        self.drops.control += 1;
        self.phase = Phase::Finished;
        self.events.push_back(Event::Failed(why));
    }

    /// Takes one control message from the sender.
    pub fn handle_control(&mut self, now: Nanos, msg: Control) {
        self.last_heard = now;
        match (self.phase, msg) {
            (Phase::Hello, Control::Hello(h)) => {
                if !same(&h.token, &self.cfg.token) {
                    return self.refuse_now(Refusal::Token);
                }
                if !valid_name(&h.name) {
                    return self.refuse_now(Refusal::Name);
                }
                if h.size > self.cfg.max_size {
                    return self.refuse_now(Refusal::TooLarge);
                }
                if !(64..=65_000).contains(&h.packet) || !(64..=MAX_WINDOW).contains(&h.window) {
                    return self.refuse_now(Refusal::Parameters);
                }
                self.total = h.size.div_ceil(u64::from(h.packet));
                self.have = vec![0; self.total.div_ceil(64) as usize];
                self.phase = Phase::Opening;
                self.events.push_back(Event::Open { hello: h.clone() });
                self.hello = Some(h);
            }
            (Phase::Receiving | Phase::Verifying, Control::WindowEnd(e)) => {
                let window = self.hello.as_ref().map_or(0, |h| h.window);
                if e.count == 0 || e.count > window {
                    return self.fail(format!("window end with {} packets", e.count));
                }
                let grace = self.cfg.grace_ns;
                let Some(p) = self.pending_mut(e.window, now) else {
                    return self.fail(format!("window end of window {} out of order", e.window));
                };
                if p.ack_at.is_some() {
                    return self.fail(format!("second end of window {}", e.window));
                }
                p.count = Some(e.count);
                p.ended_at = now;
                p.ack_at = Some(now + grace);
            }
            (Phase::Finished, _) => {}
            (_, other) => {
                let kind = match other {
                    Control::Hello(_) => "Hello",
                    Control::Welcome(_) => "Welcome",
                    Control::WindowEnd(_) => "WindowEnd",
                    Control::Ack(_) => "Ack",
                    Control::Done(_) => "Done",
                };
                self.fail(format!("unexpected {kind} from the sender"));
            }
        }
    }

    /// The edge opened the files; `have` is the resume bitmap of packets already stored
    /// (empty for a fresh transfer).
    pub fn opened(&mut self, now: Nanos, have: &[u8]) {
        if self.phase != Phase::Opening {
            return;
        }
        let held = Signature::from_bitmap(self.total as usize, have);
        if !have.is_empty() {
            for i in 0..self.total {
                if held.received(i as usize) {
                    self.have[(i / 64) as usize] |= 1 << (i % 64);
                    self.have_count += 1;
                }
            }
        }
        self.control.push_back(Control::Welcome(Welcome {
            status: Refusal::Accepted,
            session: self.cfg.session,
            udp_port: self.cfg.udp_port,
            max_rate: self.cfg.max_rate as u64,
            have: if have.is_empty() {
                Vec::new()
            } else {
                self.have_bitmap()
            },
        }));
        self.phase = Phase::Receiving;
        self.last_heard = now;
        self.check_complete();
    }

    /// The edge could not open the files (or the name exists).
    pub fn refuse(&mut self, why: Refusal) {
        if self.phase == Phase::Opening {
            self.refuse_now(why);
        }
    }

    fn check_complete(&mut self) {
        if self.phase == Phase::Receiving && self.have_count == self.total {
            self.phase = Phase::Verifying;
            self.events.push_back(Event::Complete);
        }
    }

    /// The edge checked the file's hash and put it in place (or failed to).
    pub fn verified(&mut self, result: Done) {
        if self.phase == Phase::Verifying {
            self.control.push_back(Control::Done(result));
            self.phase = Phase::Finished;
            self.events.push_back(Event::Finished(result));
        }
    }

    /// Ends the transfer before its verdict, telling the sender why: [`Done::Stopped`] (the
    /// operator stopped the receiver), [`Done::Abandoned`] (no progress) or
    /// [`Done::StorageFailed`] (the edge could not write what arrived: a full disk).
    pub fn end(&mut self, why: Done) {
        if self.phase != Phase::Finished {
            self.control.push_back(Control::Done(why));
            self.phase = Phase::Finished;
            self.events.push_back(Event::Finished(why));
        }
    }

    fn pending_mut(&mut self, window: u32, now: Nanos) -> Option<&mut Pending> {
        let i = window.wrapping_sub(self.next_ack) as usize;
        if i >= MAX_PENDING {
            return None;
        }
        while self.pending.len() <= i {
            self.pending.push_back(None);
        }
        let bytes = self
            .hello
            .as_ref()
            .map_or(0, |h| h.window as usize)
            .div_ceil(8);
        Some(self.pending[i].get_or_insert_with(|| Pending {
            got: vec![0; bytes],
            count: None,
            first: None,
            last: now,
            ack_at: None,
            ended_at: now,
        }))
    }

    /// Takes one datagram; `from_peer`: it came from the control connection's address.
    /// Returns where to store its payload, if anywhere.
    pub fn handle_datagram(&mut self, now: Nanos, from_peer: bool, bytes: &[u8]) -> Option<Store> {
        let h = match DataHeader::decode(bytes) {
            Ok(h) => h,
            Err(_) => {
                self.drops.malformed += 1;
                return None;
            }
        };
        if !from_peer {
            self.drops.source += 1;
            return None;
        }
        if !matches!(self.phase, Phase::Receiving | Phase::Verifying)
            || h.session != self.cfg.session
        {
            self.drops.session += 1;
            return None;
        }
        let hello = self.hello.as_ref().expect("receiving");
        let (packet, size, window) = (u64::from(hello.packet), hello.size, hello.window);
        if h.seq >= self.total {
            self.drops.packet += 1;
            return None;
        }
        let offset = h.seq * packet;
        let len = (size - offset).min(packet) as usize;
        if bytes.len() != DATA_HEADER + len {
            self.drops.packet += 1;
            return None;
        }
        if h.index >= window {
            self.drops.window += 1;
            return None;
        }
        // The rate cap: a token bucket of 50 ms at the cap.
        let elapsed = now.saturating_sub(self.refilled) as f64 / 1e9;
        self.refilled = now;
        let burst = (self.cfg.max_rate * 0.05).max(65_536.0);
        self.tokens = (self.tokens + elapsed * self.cfg.max_rate).min(burst);
        if self.tokens < bytes.len() as f64 {
            self.drops.rate += 1;
            return None;
        }
        self.tokens -= bytes.len() as f64;
        // A late datagram belongs to a window already answered (windows count from 0 and
        // do not wrap): not to one "before" the first.
        let late =
            h.window < self.next_ack && (self.next_ack - h.window) as usize <= 4 * MAX_PENDING;
        if !late {
            let Some(p) = self.pending_mut(h.window, now) else {
                self.drops.window += 1;
                return None;
            };
            if p.count.is_some_and(|c| h.index >= c) {
                self.drops.window += 1;
                return None;
            }
            p.got[(h.index / 8) as usize] |= 1 << (h.index % 8);
            p.first.get_or_insert(now);
            p.last = now;
        }
        self.last_heard = now;
        self.received += 1;
        let (slot, bit) = ((h.seq / 64) as usize, h.seq % 64);
        if self.have[slot] >> bit & 1 == 1 {
            self.duplicates += 1;
            return None;
        }
        self.have[slot] |= 1 << bit;
        self.have_count += 1;
        self.check_complete();
        Some(Store {
            offset,
            start: DATA_HEADER,
            end: DATA_HEADER + len,
        })
    }

    /// Acknowledges the windows whose grace has passed; abandons an idle transfer.
    pub fn handle_timeout(&mut self, now: Nanos) {
        while let Some(Some(p)) = self.pending.front() {
            match (p.ack_at, p.count) {
                (Some(at), Some(count)) if at <= now => {
                    let p = self.pending.pop_front().flatten().expect("front");
                    let bitmap = p.got[..(count as usize).div_ceil(8)].to_vec();
                    let mut bitmap = bitmap;
                    if count % 8 != 0 {
                        if let Some(last) = bitmap.last_mut() {
                            *last &= (1u8 << (count % 8)) - 1;
                        }
                    }
                    let window = self.next_ack;
                    self.next_ack = self.next_ack.wrapping_add(1);
                    if self.phase == Phase::Receiving || self.phase == Phase::Verifying {
                        self.events.push_back(Event::Window {
                            window,
                            signature: Signature::from_bitmap(count as usize, &bitmap),
                        });
                        self.control.push_back(Control::Ack(Ack {
                            window,
                            count,
                            span_ns: p.first.map_or(0, |f| p.last.saturating_sub(f)),
                            held_ns: now.saturating_sub(p.ended_at),
                            bitmap,
                        }));
                    }
                }
                _ => break,
            }
        }
        if self.phase != Phase::Finished && now.saturating_sub(self.last_heard) >= self.cfg.idle_ns
        {
            self.phase = Phase::Finished;
            self.events
                .push_back(Event::Failed("the sender went silent".into()));
        }
    }

    /// When the receiver next needs [`Receiver::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if !self.control.is_empty() {
            return Some(0);
        }
        if self.phase == Phase::Finished {
            return None;
        }
        let ack = self
            .pending
            .front()
            .and_then(|p| p.as_ref())
            .and_then(|p| p.ack_at);
        let idle = self.last_heard + self.cfg.idle_ns;
        Some(ack.map_or(idle, |a| a.min(idle)))
    }

    /// The next control bytes to send, appended to `buf`; false when there are none.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.control.pop_front() {
            Some(c) => {
                c.encode(buf);
                true
            }
            None => false,
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished && self.control.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_missing_finds_the_end_of_the_stored_run() {
        let mut rx = Receiver::new(
            Config {
                token: [0; crate::fobs::wire::TOKEN_LEN],
                max_size: 1 << 30,
                max_rate: 1e9,
                grace_ns: 0,
                idle_ns: 1,
                session: 1,
                udp_port: 1,
            },
            0,
        );
        rx.total = 200;
        rx.have = vec![0; 4];
        assert_eq!(rx.first_missing(0), 0);
        for i in (0..130).chain(140..200) {
            rx.have[i / 64] |= 1 << (i % 64);
        }
        assert_eq!(rx.first_missing(0), 130);
        assert_eq!(rx.first_missing(63), 130);
        assert_eq!(rx.first_missing(128), 130);
        assert_eq!(rx.first_missing(130), 130);
        assert_eq!(
            rx.first_missing(140),
            200,
            "the last word's unused bits are not packets"
        );
        assert_eq!(rx.first_missing(200), 200);
        for i in 130..140 {
            rx.have[i / 64] |= 1 << (i % 64);
        }
        assert_eq!(rx.first_missing(5), 200);
    }
}
