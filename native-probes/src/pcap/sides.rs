//! Where a capture was taken, judged per address from the handshakes it holds: which
//! directions of a flow Wren can analyse ([`super::analysis::WrenSide::Sender`]).

use super::decode::{Addr, KeyHasher};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// What [`Sides`] reads of a flow: its two addresses (`a` sent the SYN), the [`ttl`] classes
/// seen a→b and b→a, and its handshake's times.
#[derive(Clone, Copy, Debug)]
pub(super) struct Handshake {
    pub(super) a: Addr,
    pub(super) b: Addr,
    pub(super) ttl: [u8; 2],
    pub(super) syn_ns: Option<i64>,
    pub(super) synack_ns: Option<i64>,
    pub(super) ack3_ns: Option<i64>,
}

/// Where the capture was taken, for [`WrenSide::Sender`]: Wren's trains need the data's
/// departures from the sender (Wren §3.1 timestamps outgoing packets as they are handed to
/// the device), so a direction is analysed only where its sender is at the capture point.
///
/// A capture is taken on one host (or a few), so the question is asked of addresses, not of
/// flows: each captured handshake is evidence about both of its addresses, pooled here for
/// all their flows.
/// - **IP TTLs** (RFC 1812 §5.3.1: every router decrements them; RFC 8200 §3 the same of the
///   hop limit): a host sends at its initial value (64, 128 or 255), so a handshake whose one
///   side's packets are at an initial value and the other's a few below one puts the first at
///   the capture point and the second behind a router. Wrong only behind a middlebox that
///   rewrites TTLs; silent on a LAN (both at an initial value) and in the middle of a path
///   (neither). It outweighs any number of timings.
/// - **Handshake timing**: near the initiator, SYN→SYN/ACK takes the round trip and
///   SYN/ACK→ACK only the host's own time; near the responder, the other way round. On a
///   short path the host's own time (a busy softirq, a queue on its way out) can exceed the
///   round trip and the vote flips: on namespaces some µs apart, a few in a thousand with
///   nothing else running and up to one in five under CPU load (`tests/it/pcap_side.rs`). Each
///   vote flips alone, so the majority of an address's handshakes is right where one is not
///   (with a vote wrong independently at a rate ε < ½, the likelihood ratio of "here"
///   against "there" is ((1−ε)/ε) to the power of the votes' margin: the majority is the
///   likelihood ratio's decision). A standing queue on the host's own way out, ahead of the
///   capture point, delays every ACK alike: timing is then wrong for all, and only TTLs tell.
///
/// A flow is judged when its first data needs Wren, and again as evidence grows while the
/// judgement is weak (its handshake alone on a short path, or a margin under
/// [`FIRM_MARGIN`]). Meanwhile its data directions are analysed tentatively: their trains are
/// held ([`HELD_PER_DIRECTION`], [`HELD_TRAINS`] in all) and reported, or dropped with the
/// reason, once the judgement is firm, the hold is full, or the flow ends: the first flows
/// of a capture are judged with the evidence of those after them.
///
/// Left out, though suggested by offloads: TSO/GSO super-segments show in the data direction
/// at the receiver too (GRO and LRO merge segments before a packet socket sees them), and a
/// checksum left for the NIC (the pseudo-header sum Linux writes) reaches the receiver
/// unfinished over veth and virtio and after GRO: neither tells the ends apart.
///
/// Memory: one small entry per address seen in a captured handshake, at most
/// [`MAX_ADDRESSES`]; beyond that the half with the fewest handshakes is forgotten (the
/// capture's own addresses have the most).
#[derive(Default)]
pub(super) struct Sides {
    pub(super) addrs: HashMap<Addr, Evidence, BuildHasherDefault<KeyHasher>>,
    /// Handshakes counted so far: a judgement made on weak evidence is made again once it
    /// has grown.
    pub(super) version: u64,
}

/// Most addresses [`Sides`] holds (about 3 MB).
pub const MAX_ADDRESSES: usize = 1 << 16;

/// An address's evidence: each count is the handshakes that put it at the capture point
/// less those that put it at the far end.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Evidence {
    pub(super) ttl: i32,
    pub(super) timing: i32,
    /// Handshakes it took part in.
    pub(super) handshakes: u32,
}

/// A margin of handshake votes (an address's minus its peer's) beyond which a judgement is
/// not made again: 6 is the margin of 5 handshakes of one address, all agreeing, against a
/// peer seen once.
const FIRM_MARGIN: i64 = 6;

/// A handshake delay this long is a round trip, not a host's own time to answer (a busy host
/// answers within a scheduler tick, 4 ms at 250 Hz).
const CLEARLY_A_ROUND_TRIP_NS: i64 = 10_000_000;

/// TTL classes, as bits of what a direction's packets showed.
pub(super) mod ttl {
    /// A sender's initial TTL or hop limit (RFC 1700's 64, Windows' 128, 255).
    pub const INITIAL: u8 = 1;
    /// Up to 32 below one of them: behind at least one router.
    pub const FEWER: u8 = 2;
    pub const OTHER: u8 = 4;

    pub fn class(ttl: u8) -> u8 {
        match ttl {
            64 | 128 | 255 => INITIAL,
            32..=63 | 96..=127 | 223..=254 => FEWER,
            _ => OTHER,
        }
    }
}

/// What the pooled evidence judged a flow's capture point to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Judged {
    /// The capture is at `a` (the SYN's sender).
    pub(super) near_a: bool,
    pub(super) basis: Basis,
    /// Not made again as evidence grows.
    pub(super) firm: bool,
    /// [`Sides::version`] when judged.
    pub(super) version: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Basis {
    Ttl,
    /// The handshakes of the flow's addresses, this one's and others'.
    Handshakes,
    /// This flow's handshake alone (nothing else seen of its addresses, or a tie).
    OwnHandshake,
}

impl Sides {
    /// Counts the evidence of a flow whose handshake was just captured.
    pub(super) fn count(&mut self, f: &Handshake) {
        let Some(own) = own_vote(f) else {
            return;
        };
        let by_ttl = match (f.ttl[0], f.ttl[1]) {
            (ttl::INITIAL, ttl::FEWER) => Some(true),
            (ttl::FEWER, ttl::INITIAL) => Some(false),
            _ => None,
        };
        for (addr, is_a) in [(f.a, true), (f.b, false)] {
            let sign = |near_a: bool| if near_a == is_a { 1 } else { -1 };
            let e = self.entry(addr);
            e.handshakes = e.handshakes.saturating_add(1);
            e.timing = e.timing.saturating_add(sign(own));
            if let Some(near_a) = by_ttl {
                e.ttl = e.ttl.saturating_add(sign(near_a));
            }
        }
        self.version += 1;
    }

    fn entry(&mut self, addr: Addr) -> &mut Evidence {
        if self.addrs.len() >= MAX_ADDRESSES && !self.addrs.contains_key(&addr) {
            self.forget_half();
        }
        self.addrs.entry(addr).or_default()
    }

    /// Forgets the half of the addresses with the fewest handshakes (ties by address, so
    /// that a capture analysed twice is judged the same), once per half a table of new ones.
    fn forget_half(&mut self) {
        let mut by_weight: Vec<(u32, Addr)> =
            self.addrs.iter().map(|(a, e)| (e.handshakes, *a)).collect();
        let half = by_weight.len() / 2;
        by_weight.select_nth_unstable(half);
        for (_, a) in &by_weight[..half] {
            self.addrs.remove(a);
        }
    }

    /// Judges a flow whose handshake was captured; `None` otherwise.
    pub(super) fn judge(&self, f: &Handshake) -> Option<Judged> {
        let own = own_vote(f)?;
        let get = |a: Addr| self.addrs.get(&a).copied().unwrap_or_default();
        let (ea, eb) = (get(f.a), get(f.b));
        let judged = |near_a: bool, basis: Basis, firm: bool| Judged {
            near_a,
            basis,
            firm,
            version: self.version,
        };
        // An address is local when more of its handshakes' TTLs said so than not; two local
        // ones (a capture where both hosts are zero hops away) are told apart by timing.
        let (la, lb) = (ea.ttl > 0, eb.ttl > 0);
        if la != lb {
            return Some(judged(la, Basis::Ttl, true));
        }
        let margin = i64::from(ea.timing) - i64::from(eb.timing);
        // This flow's own handshake is counted once in each address.
        let others = ea.handshakes.saturating_add(eb.handshakes) > 2;
        if margin != 0 && others {
            return Some(judged(
                margin > 0,
                Basis::Handshakes,
                margin.abs() >= FIRM_MARGIN,
            ));
        }
        let (d1, d2) = handshake_delays(f)?;
        let clear = d1.max(d2) >= CLEARLY_A_ROUND_TRIP_NS;
        Some(judged(own, Basis::OwnHandshake, clear))
    }
}

/// SYN→SYN/ACK and SYN/ACK→ACK, when the handshake was captured.
fn handshake_delays(f: &Handshake) -> Option<(i64, i64)> {
    let (syn, synack, ack3) = (f.syn_ns?, f.synack_ns?, f.ack3_ns?);
    Some((synack - syn, ack3 - synack))
}

/// A flow's own handshake's vote: is the capture near `a`, the initiator? Near the
/// initiator, SYN→SYN/ACK takes the round trip and SYN/ACK→ACK almost nothing; near the
/// responder, the other way round.
fn own_vote(f: &Handshake) -> Option<bool> {
    let (d1, d2) = handshake_delays(f)?;
    Some(d1 >= d2)
}

impl Judged {
    /// Why the direction toward `a` or away from it is not analysed, when the capture is at
    /// its receiver.
    pub(super) fn receiver_reason(&self) -> &'static str {
        match (self.basis, self.firm) {
            (Basis::Ttl, _) => "the capture is at the receiver (IP TTLs)",
            (Basis::Handshakes, true) => "the capture is at the receiver (its hosts' handshakes)",
            (Basis::Handshakes, false) => {
                "the capture is at the receiver (a guess: its hosts' few handshakes)"
            }
            (Basis::OwnHandshake, true) => "the capture is at the receiver (its handshake)",
            (Basis::OwnHandshake, false) => {
                "the capture is at the receiver (a guess: its handshake alone, on a short path)"
            }
        }
    }
}
