//! One direction of a TCP connection as seen at the capture point: counts, the kind of every
//! segment (new data, retransmission, out of order, …), and RTT samples measured two ways.
//! Deterministic core: packets and their capture times in, counts and samples out.
//!
//! - Segment kinds follow the sequence analysis that Wireshark documents (its user's guide,
//!   "TCP Analysis"), so that counts can be checked against `tcp.analysis.retransmission`: a
//!   segment that carries data (or SYN/FIN) below the highest sequence number seen is a
//!   *fast retransmission* when the other side sent two or more duplicate ACKs for it less
//!   than 20 ms before, *out of order* when it came within the connection's first RTT (3 ms
//!   if unknown) of the highest segment and does not end exactly there, *spurious* when the
//!   other side had already acknowledged all of it, and a plain *retransmission* otherwise;
//!   keep-alives (one byte or none just below the next sequence number) are none of these.
//! - Data→ACK RTT: the time from a segment to the first ACK whose number is the segment's end
//!   (the rule of tshark's `tcp.analysis.ack_rtt` and of tcptrace), skipping segments that were
//!   sent more than once: Karn's rule (RFC 6298 §3), since their ACK cannot be attributed.
//! - Timestamp RTT (RFC 7323 §3, pping's rule): the time from the first packet carrying a
//!   TSval to the first packet of the other direction echoing it in TSecr; each TSval is
//!   matched once.
//!
//! Sequence numbers compare modulo 2³² (RFC 9293 §3.4).

use super::decode::{flag, Packet};
use super::samples::Samples;
use std::collections::VecDeque;

/// Most unacknowledged segments remembered per direction (beyond, new ones are not timed).
pub const MAX_UNACKED: usize = 32_768;
/// Most TSvals awaiting their echo per direction.
pub const MAX_TSVALS: usize = 32_768;
/// Most holes in the sequence space (data skipped over, not yet seen) remembered per
/// direction for the goodput.
pub const MAX_HOLES: usize = 256;
/// The out-of-order window when the handshake was not seen.
const DEFAULT_OOO_NS: i64 = 3_000_000;
/// How soon after a duplicate ACK a retransmission counts as fast.
const FAST_RETRANSMIT_NS: i64 = 20_000_000;

pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
pub fn seq_le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}
pub fn seq_gt(a: u32, b: u32) -> bool {
    seq_lt(b, a)
}

/// A segment is a super-segment when it carries more than the MSS announced (1460 bytes for
/// IPv4 and 1440 for IPv6 when the SYN was not captured: an Ethernet MTU's worth). The
/// flow's count and Wren's trains use this one rule.
pub fn is_super(p: &Packet, mss: Option<u16>) -> bool {
    let mss = mss
        .map(u32::from)
        .unwrap_or(if p.src.addr.v6 { 1440 } else { 1460 });
    p.payload_len > mss
}

/// What one segment was, for the direction that sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No data and no SYN/FIN (a pure ACK, a window update, a RST).
    Control,
    /// Data (or SYN/FIN) at or beyond the highest sequence number seen.
    New,
    Retransmission,
    FastRetransmission,
    SpuriousRetransmission,
    OutOfOrder,
    KeepAlive,
}

impl Kind {
    /// Counted by tshark's `tcp.analysis.retransmission` (fast and spurious ones included).
    pub fn is_retransmission(self) -> bool {
        matches!(
            self,
            Kind::Retransmission | Kind::FastRetransmission | Kind::SpuriousRetransmission
        )
    }
    /// Data below the highest sequence number seen: sent before (or reordered).
    pub fn is_resent(self) -> bool {
        self.is_retransmission() || self == Kind::OutOfOrder
    }
}

#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u32,
    end: u32,
    t: i64,
    resent: bool,
}

/// One direction's counts and analysis state.
#[derive(Clone, Debug, Default)]
pub struct Half {
    pub packets: u64,
    /// Bytes of the captured frames as they were on the wire (the frames' original lengths).
    pub frame_bytes: u64,
    /// TCP payload bytes, retransmissions included.
    pub payload_bytes: u64,
    /// Payload bytes seen for the first time, or skipped over and then acknowledged (data
    /// the capture missed): the goodput's bytes, each byte of the sequence space once
    /// (tcptrace's "unique bytes" when the capture missed nothing).
    pub new_bytes: u64,
    /// Segments carrying data.
    pub data_packets: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub spurious_retransmissions: u64,
    pub out_of_order: u64,
    /// Data→ACK RTT samples of this direction's segments, seconds.
    pub ack_rtt: Samples,
    /// Timestamp RTT samples of this direction's TSvals, seconds.
    pub ts_rtt: Samples,
    /// Segments longer than the MSS (TSO/GSO super-segments as captured on the host).
    pub super_segments: u64,
    /// The MSS this side announced in its SYN.
    pub mss: Option<u16>,
    /// Largest payload seen.
    pub max_payload: u32,
    next_seq: Option<u32>,
    next_seq_ns: i64,
    last_ack: Option<u32>,
    last_ack_ns: i64,
    dup_acks: u32,
    window: Option<u16>,
    last_was_keepalive: bool,
    unacked: VecDeque<Seg>,
    /// Sequence ranges skipped over and not yet seen or acknowledged, in order.
    holes: VecDeque<(u32, u32)>,
    tsvals: VecDeque<(u32, i64, bool)>,
    last_tsval: Option<u32>,
}

/// The longest RTT sample believed, s. A segment not retransmitted (Karn's rule leaves the
/// others out) is acknowledged within the sender's retransmission timeout, at most minutes
/// (RFC 6298 §2.5 allows a ceiling of 60 s or more; Linux's is 120 s): a sample of more than
/// an hour, or below zero, spans a step of the capture's clock (a clock set while capturing,
/// a merged or damaged file), not the network, and is left out and counted.
pub const MAX_RTT_S: f64 = 3600.0;

/// `r` as an RTT sample, unless it spans a step of the capture's clock ([`MAX_RTT_S`]).
fn believed(r: f64, clock_steps: &mut u32) -> Option<f64> {
    if (0.0..=MAX_RTT_S).contains(&r) {
        Some(r)
    } else {
        *clock_steps += 1;
        None
    }
}

/// What [`observe`] found in one packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seen {
    pub kind: Kind,
    /// A data→ACK RTT sample this packet completed (for the other direction's data), s.
    pub ack_rtt: Option<f64>,
    /// A timestamp RTT sample this packet completed (for the other direction's TSval), s.
    pub ts_rtt: Option<f64>,
    /// Samples this packet completed that spanned a step of the capture's clock and were
    /// left out ([`MAX_RTT_S`]).
    pub clock_steps: u32,
}

impl Half {
    /// The highest sequence number sent so far (just past the data).
    pub fn next_seq(&self) -> Option<u32> {
        self.next_seq
    }

    /// `start..end` was skipped over by a segment beyond it. Past [`MAX_HOLES`], the
    /// lowest hole is taken as delivered (as nearly all are) and counted.
    fn note_hole(&mut self, start: u32, end: u32) {
        if self.holes.len() >= MAX_HOLES {
            if let Some((s, e)) = self.holes.pop_front() {
                self.new_bytes += e.wrapping_sub(s) as u64;
            }
        }
        self.holes.push_back((start, end));
    }

    /// The bytes of `start..end` that fill holes, which shrink or split accordingly.
    fn fill_holes(&mut self, start: u32, end: u32) -> u64 {
        let mut filled = 0u64;
        let mut i = 0;
        while i < self.holes.len() {
            let (hs, he) = self.holes[i];
            if seq_le(end, hs) {
                break;
            }
            if seq_le(he, start) {
                i += 1;
                continue;
            }
            let (a, b) = (
                if seq_gt(start, hs) { start } else { hs },
                if seq_lt(end, he) { end } else { he },
            );
            filled += b.wrapping_sub(a) as u64;
            match (a == hs, b == he) {
                (true, true) => {
                    self.holes.remove(i);
                }
                (true, false) => {
                    self.holes[i].0 = b;
                    i += 1;
                }
                (false, true) => {
                    self.holes[i].1 = a;
                    i += 1;
                }
                (false, false) => {
                    self.holes[i].1 = a;
                    self.holes.insert(i + 1, (b, he));
                    i += 2;
                }
            }
        }
        filled
    }

    /// The other side acknowledged up to `ack`: holes below it were delivered (the capture
    /// missed their data, or its resending) and are new data.
    fn holes_acked(&mut self, ack: u32) {
        while let Some(&(hs, he)) = self.holes.front() {
            if seq_le(ack, hs) {
                break;
            }
            if seq_le(he, ack) {
                self.new_bytes += he.wrapping_sub(hs) as u64;
                self.holes.pop_front();
            } else {
                self.new_bytes += ack.wrapping_sub(hs) as u64;
                self.holes[0].0 = ack;
                break;
            }
        }
    }
}

/// Analyses packet `p` sent by the side whose state is `fwd`, the other side's being `rev`;
/// `first_rtt_ns` is the connection's handshake RTT, if seen.
pub fn observe(
    fwd: &mut Half,
    rev: &mut Half,
    p: &Packet,
    orig_len: u32,
    first_rtt_ns: Option<i64>,
) -> Seen {
    let t = p.ts_ns;
    let seglen = p.payload_len;
    let syn_fin = p.flags & (flag::SYN | flag::FIN) != 0;
    if fwd.packets == 0 {
        fwd.first_ns = t;
    }
    fwd.packets += 1;
    fwd.frame_bytes += orig_len as u64;
    fwd.payload_bytes += seglen as u64;
    fwd.last_ns = t;
    if seglen > 0 {
        fwd.data_packets += 1;
        fwd.max_payload = fwd.max_payload.max(seglen);
        if is_super(p, fwd.mss.or(rev.mss)) {
            fwd.super_segments += 1;
        }
    }
    if p.has(flag::SYN) {
        fwd.mss = p.mss.or(fwd.mss);
    }

    let zero_window_probe = seglen == 1 && Some(p.seq) == fwd.next_seq && rev.window == Some(0);
    let mut keepalive = false;
    if !zero_window_probe {
        let plain = p.flags & (flag::SYN | flag::FIN | flag::RST) == 0;
        keepalive =
            seglen <= 1 && plain && fwd.next_seq.is_some_and(|n| p.seq == n.wrapping_sub(1));
        let dup_ack = seglen == 0
            && plain
            && p.window != 0
            && Some(p.window) == fwd.window
            && Some(p.seq) == fwd.next_seq
            && Some(p.ack) == fwd.last_ack
            && !rev.last_was_keepalive;
        if dup_ack {
            fwd.dup_acks += 1;
        }
    }
    if Some(p.ack) != fwd.last_ack {
        fwd.dup_acks = 0;
    }

    let mut kind = if seglen > 0 || syn_fin {
        Kind::New
    } else {
        Kind::Control
    };
    if let Some(next) = fwd.next_seq {
        if (seglen > 0 || syn_fin) && seq_lt(p.seq, next) {
            kind = if keepalive {
                Kind::KeepAlive
            } else if rev.dup_acks >= 2
                && rev.last_ack == Some(p.seq)
                && t - rev.last_ack_ns < FAST_RETRANSMIT_NS
            {
                Kind::FastRetransmission
            } else if t - fwd.next_seq_ns < first_rtt_ns.unwrap_or(DEFAULT_OOO_NS)
                && next != p.seq.wrapping_add(seglen)
            {
                Kind::OutOfOrder
            } else if seglen > 0
                && rev
                    .last_ack
                    .is_some_and(|a| seq_le(p.seq.wrapping_add(seglen), a))
            {
                Kind::SpuriousRetransmission
            } else {
                Kind::Retransmission
            };
        }
    }
    match kind {
        Kind::Retransmission => fwd.retransmissions += 1,
        Kind::FastRetransmission => fwd.fast_retransmissions += 1,
        Kind::SpuriousRetransmission => fwd.spurious_retransmissions += 1,
        Kind::OutOfOrder => fwd.out_of_order += 1,
        _ => {}
    }
    fwd.last_was_keepalive = keepalive;

    let end = p.seq.wrapping_add(seglen).wrapping_add(u32::from(syn_fin));
    if seglen > 0 || syn_fin {
        if kind.is_resent() || kind == Kind::KeepAlive {
            // Karn's rule: every remembered segment this one overlaps was sent twice.
            for s in fwd.unacked.iter_mut().rev() {
                if seq_le(s.end, p.seq) {
                    break;
                }
                if seq_lt(s.start, end) {
                    s.resent = true;
                }
            }
        } else if fwd.unacked.len() < MAX_UNACKED {
            fwd.unacked.push_back(Seg {
                start: p.seq,
                end,
                t,
                resent: false,
            });
        }
    }
    let advances = fwd.next_seq.is_none_or(|n| seq_gt(end, n));
    let data_end = p.seq.wrapping_add(seglen);
    if advances && !zero_window_probe {
        if let Some(n) = fwd.next_seq {
            if seq_gt(p.seq, n) && !p.has(flag::RST) {
                // Sequence space skipped (by data, a FIN or an ACK): lost before the capture
                // point (a bottleneck upstream, the capture at the receiver), reordered, or
                // dropped by the capture. New data when it is seen or acknowledged.
                fwd.note_hole(n, p.seq);
            }
            if seglen > 0 && seq_gt(data_end, n) {
                let from = if seq_gt(p.seq, n) {
                    p.seq
                } else {
                    // Resent data with new data after it: its old part may fill holes.
                    if seq_lt(p.seq, n) && !fwd.holes.is_empty() {
                        fwd.new_bytes += fwd.fill_holes(p.seq, n);
                    }
                    n
                };
                fwd.new_bytes += data_end.wrapping_sub(from) as u64;
            }
        } else {
            fwd.new_bytes += seglen as u64;
        }
        fwd.next_seq = Some(end);
        fwd.next_seq_ns = t;
    } else if seglen > 0 && kind != Kind::KeepAlive && !fwd.holes.is_empty() {
        // Below the highest sequence number: new data only where it fills a hole.
        fwd.new_bytes += fwd.fill_holes(p.seq, data_end);
    }
    fwd.window = Some(p.window);

    // The ACK this packet carries times the other direction's segments. A RST's ACK does
    // not: a closed socket answers whatever segment arrived last, so it says nothing of when
    // the data it covers came (tshark's ack_rtt leaves RSTs out too).
    let mut clock_steps = 0;
    let mut ack_rtt = None;
    if p.has(flag::ACK) {
        if !rev.holes.is_empty() && !p.has(flag::RST) {
            rev.holes_acked(p.ack);
        }
        let times = !p.has(flag::RST);
        while let Some(s) = rev.unacked.front_mut() {
            if seq_le(s.end, p.ack) {
                if s.end == p.ack && !s.resent && times {
                    ack_rtt = believed((t - s.t) as f64 * 1e-9, &mut clock_steps);
                }
                rev.unacked.pop_front();
            } else {
                if seq_gt(p.ack, s.start) {
                    s.start = p.ack;
                }
                break;
            }
        }
        if let Some(r) = ack_rtt {
            rev.ack_rtt.push(r);
        }
    }
    fwd.last_ack = Some(p.ack);
    fwd.last_ack_ns = t;

    // RFC 7323 §3: TSval first seen here, TSecr echoing the other side's.
    let mut ts_rtt = None;
    if let Some((val, ecr)) = p.timestamps {
        if fwd.last_tsval.is_none_or(|l| seq_gt(val, l)) {
            fwd.last_tsval = Some(val);
            if fwd.tsvals.len() >= MAX_TSVALS {
                fwd.tsvals.pop_front();
            }
            fwd.tsvals.push_back((val, t, false));
        }
        if ecr != 0 && p.has(flag::ACK) {
            while rev.tsvals.front().is_some_and(|f| seq_lt(f.0, ecr)) {
                rev.tsvals.pop_front();
            }
            if let Some(f) = rev.tsvals.front_mut() {
                if f.0 == ecr && !f.2 {
                    f.2 = true;
                    if let Some(r) = believed((t - f.1) as f64 * 1e-9, &mut clock_steps) {
                        rev.ts_rtt.push(r);
                        ts_rtt = Some(r);
                    }
                }
            }
        }
    }
    Seen {
        kind,
        ack_rtt,
        ts_rtt,
        clock_steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::decode::{Addr, Endpoint};

    fn pkt(t_us: i64, seq: u32, ack: u32, flags: u8, len: u32, ts: Option<(u32, u32)>) -> Packet {
        let e = Endpoint {
            addr: Addr::v4([1, 1, 1, 1]),
            port: 1,
        };
        Packet {
            ts_ns: t_us * 1000,
            src: e,
            dst: e,
            seq,
            ack,
            flags,
            window: 100,
            payload_len: len,
            ip_len: len + 40,
            timestamps: ts,
            mss: None,
            ttl: 64,
        }
    }

    const A: u8 = flag::ACK;

    #[test]
    fn a_reset_acknowledging_data_gives_no_sample() {
        // iperf3's server closes its data socket mid-stream: the kernel answers the next
        // segment with RST|ACK, whose ACK covers earlier data (a fresh clone's run of
        // tests/pcap_peers found our sample with no tshark twin).
        let (mut s, mut r) = (Half::default(), Half::default());
        let rtt = Some(1_000_000);
        observe(&mut s, &mut r, &pkt(0, 1000, 1, A, 100, None), 140, rtt);
        observe(&mut s, &mut r, &pkt(100, 1100, 1, A, 100, None), 140, rtt);
        let rst = pkt(150, 1, 1100, A | flag::RST, 0, None);
        assert_eq!(observe(&mut r, &mut s, &rst, 54, rtt).ack_rtt, None);
        assert!(s.ack_rtt.is_empty());
    }

    #[test]
    fn samples_across_a_step_of_the_capture_clock_are_left_out_and_counted() {
        let (mut s, mut r) = (Half::default(), Half::default());
        let rtt = Some(10_000_000);
        // Data at 0 and at 1 ms; the first is acknowledged "two hours later" (the clock was
        // set), the second "before it was sent" (a merged file out of order).
        observe(&mut s, &mut r, &pkt(0, 1000, 1, A, 100, None), 140, rtt);
        let hours = 2 * 3600 * 1_000_000;
        let seen = observe(&mut r, &mut s, &pkt(hours, 1, 1100, A, 0, None), 54, rtt);
        assert_eq!((seen.ack_rtt, seen.clock_steps), (None, 1));
        observe(
            &mut s,
            &mut r,
            &pkt(hours + 1000, 1100, 1, A, 100, None),
            140,
            rtt,
        );
        let seen = observe(
            &mut r,
            &mut s,
            &pkt(hours - 5000, 1, 1200, A, 0, None),
            54,
            rtt,
        );
        assert_eq!((seen.ack_rtt, seen.clock_steps), (None, 1));
        assert!(s.ack_rtt.is_empty(), "no sample kept");
        // Within the hour, a sample is believed however long.
        observe(&mut s, &mut r, &pkt(hours, 1200, 1, A, 100, None), 140, rtt);
        let seen = observe(
            &mut r,
            &mut s,
            &pkt(hours + 3_000_000_000, 1, 1300, A, 0, None),
            54,
            rtt,
        );
        assert_eq!((seen.ack_rtt, seen.clock_steps), (Some(3000.0), 0));
    }

    #[test]
    fn data_ack_rtt_with_karns_rule_and_retransmission_kinds() {
        let (mut s, mut r) = (Half::default(), Half::default());
        let rtt = Some(10_000_000);
        observe(
            &mut r,
            &mut s,
            &pkt(0, 0, 1000, flag::SYN | A, 0, None),
            54,
            rtt,
        );
        // Three segments of 100 bytes at 0, 1, 2 ms.
        for i in 0..3u32 {
            let k = observe(
                &mut s,
                &mut r,
                &pkt(i as i64 * 1000, 1000 + i * 100, 1, A, 100, None),
                140,
                rtt,
            );
            assert_eq!(k.kind, Kind::New);
        }
        // ACK of the first two at 12 ms: one sample, 11 ms after the second segment.
        let seen = observe(&mut r, &mut s, &pkt(12_000, 1, 1200, A, 0, None), 54, rtt);
        assert!((seen.ack_rtt.unwrap() - 0.011).abs() < 1e-12, "{seen:?}");
        // Two duplicate ACKs, then the third segment again within 20 ms: fast retransmission.
        observe(&mut r, &mut s, &pkt(13_000, 1, 1200, A, 0, None), 54, rtt);
        observe(&mut r, &mut s, &pkt(14_000, 1, 1200, A, 0, None), 54, rtt);
        let k = observe(
            &mut s,
            &mut r,
            &pkt(15_000, 1200, 1, A, 100, None),
            140,
            rtt,
        );
        assert_eq!(k.kind, Kind::FastRetransmission);
        // Its ACK gives no sample (Karn), and a later plain resend is a retransmission.
        let seen = observe(&mut r, &mut s, &pkt(25_000, 1, 1300, A, 0, None), 54, rtt);
        assert_eq!(seen.ack_rtt, None);
        let k = observe(&mut s, &mut r, &pkt(60_000, 1250, 1, A, 50, None), 90, rtt);
        assert_eq!(k.kind, Kind::SpuriousRetransmission, "already acknowledged");
        let k = observe(
            &mut s,
            &mut r,
            &pkt(61_000, 1300, 1, A, 100, None),
            140,
            rtt,
        );
        assert_eq!(k.kind, Kind::New);
        let k = observe(
            &mut s,
            &mut r,
            &pkt(200_000, 1300, 1, A, 100, None),
            140,
            rtt,
        );
        assert_eq!(k.kind, Kind::Retransmission);
        assert_eq!(
            (
                s.retransmissions,
                s.fast_retransmissions,
                s.spurious_retransmissions
            ),
            (1, 1, 1)
        );
        assert_eq!(s.new_bytes, 400);
        assert_eq!(s.ack_rtt.len(), 1);
    }

    #[test]
    fn data_lost_before_the_capture_point_or_reordered_counts_once_in_the_goodput() {
        let (mut s, mut r) = (Half::default(), Half::default());
        let rtt = Some(10_000_000);
        let send = |s: &mut Half, r: &mut Half, t: i64, seq: u32, len: u32| {
            observe(s, r, &pkt(t, seq, 1, A, len, None), 140, rtt).kind
        };
        assert_eq!(send(&mut s, &mut r, 0, 1000, 100), Kind::New);
        // 1100..1200 was dropped upstream: the capture sees 1200 next, then the resend.
        assert_eq!(send(&mut s, &mut r, 1_000, 1200, 100), Kind::New);
        assert_eq!(s.new_bytes, 200);
        assert_eq!(
            send(&mut s, &mut r, 50_000, 1100, 100),
            Kind::Retransmission
        );
        assert_eq!(s.new_bytes, 300);
        // 1400 overtakes 1300 (reordered within the first RTT).
        assert_eq!(send(&mut s, &mut r, 51_000, 1400, 100), Kind::New);
        assert_eq!(send(&mut s, &mut r, 51_500, 1300, 100), Kind::OutOfOrder);
        // A true resend of data already seen adds nothing.
        assert_eq!(
            send(&mut s, &mut r, 90_000, 1000, 100),
            Kind::Retransmission
        );
        assert_eq!(
            s.new_bytes, 500,
            "the sequence space 1000..1500, each byte once"
        );
        // A resend that fills half a hole and carries new data after it.
        send(&mut s, &mut r, 91_000, 1600, 100); // hole 1500..1600
        send(&mut s, &mut r, 92_000, 1550, 200); // fills 1550..1600, new 1700..1750
        assert_eq!(s.new_bytes, 700);
        // The capture missed 1500..1550 (never seen): delivered once the receiver
        // acknowledges past it.
        observe(&mut r, &mut s, &pkt(93_000, 1, 1750, A, 0, None), 54, rtt);
        assert_eq!(s.new_bytes, 750);
        // A hole never seen nor acknowledged (the receiver reset) is not goodput.
        send(&mut s, &mut r, 94_000, 1850, 100);
        observe(
            &mut r,
            &mut s,
            &pkt(95_000, 1, 1750, flag::RST | A, 0, None),
            54,
            rtt,
        );
        assert_eq!(s.new_bytes, 850);
        assert_eq!(s.payload_bytes, 1000);
    }

    #[test]
    fn timestamp_rtt_matches_the_first_packet_of_each_tsval_once() {
        let (mut s, mut r) = (Half::default(), Half::default());
        observe(
            &mut s,
            &mut r,
            &pkt(0, 1000, 1, A, 100, Some((50, 7))),
            140,
            None,
        );
        observe(
            &mut s,
            &mut r,
            &pkt(500, 1100, 1, A, 100, Some((50, 7))),
            140,
            None,
        );
        let seen = observe(
            &mut r,
            &mut s,
            &pkt(4_000, 1, 1200, A, 0, Some((9, 50))),
            54,
            None,
        );
        assert!((seen.ts_rtt.unwrap() - 0.004).abs() < 1e-12);
        let again = observe(
            &mut r,
            &mut s,
            &pkt(5_000, 1, 1200, A, 0, Some((9, 50))),
            54,
            None,
        );
        assert_eq!(again.ts_rtt, None);
        assert_eq!(s.ts_rtt.len(), 1);
    }
}
