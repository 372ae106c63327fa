//! Wren's passive available bandwidth from a sender-side trace of one TCP flow (Zangrilli and
//! Lowekamp, "Using Passive Traces of Application Traffic in a Network Monitoring System",
//! §3.2; algorithms.md §4). A one-pass state machine in the quinn-proto shape: the caller
//! hands it each outgoing data packet ([`Wren::depart`]) and each returning ACK
//! ([`Wren::ack`]) with its capture time, and collects the finished [`Train`]s; nothing here
//! reads a clock or a socket, so a recorded or scripted trace replays exactly.
//!
//! The steps, as the paper gives them:
//! 1. Trains: consecutive outgoing data packets whose inter-departure times Δᵢ satisfy
//!    `min log Δᵢ > max log Δⱼ − α` (α = 1), at least 7 packets, maximal.
//! 2. ISR = bits of the train / (last departure − first departure).
//! 3. ACK return rate = bits / (last matching ACK − first matching ACK), from the packets
//!    that have an explicit ACK (an ACK whose number is the packet's end).
//! 4. RTT trend: increasing when RTTᵢ < RTTᵢ₊₁ for every consecutive pair of acknowledged
//!    packets (the ISR was above the available bandwidth); otherwise non-increasing.
//! 5. A non-increasing train whose ISR is close to its ACK return rate reports the ISR as a
//!    lower bound on the available bandwidth.
//!
//! Choices the paper leaves open, each a [`Params`] field: how close "close" is
//! ([`Params::rate_tolerance`]); which bits a rate counts ([`Params::count_first_packet`]:
//! the paper's wording divides the bits of all n packets by the n − 1 gaps between their
//! departures, which overstates a steady rate by n/(n − 1), 17 % for 7 packets; by default the
//! first packet's bits are left out so that a constant-rate train reports its rate); and a
//! longest train ([`Params::max_train`]), so that a perfectly paced flow still yields a
//! measurement every so often and memory stays bounded (a longer run is cut into trains).
//! Trains are formed greedily: a train grows while the next gap keeps the condition of step 1
//! and ends when it would break it; the next train starts at the last packet of the one before.
//! Packets that are not single packets on the wire (TSO/GSO super-segments) and
//! retransmissions (whose ACK cannot be told apart, RFC 6298 §3) end a train and are counted.

use serde::Serialize;
use std::collections::VecDeque;

/// The algorithm's parameters; [`Params::default`] holds the paper's values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Params {
    /// α of the train condition `min log Δ > max log Δ − α` (natural log; the paper: 1).
    pub alpha: f64,
    /// Fewest packets in a train (the paper: 7).
    pub min_train: usize,
    /// Most packets in a train; a longer run of evenly spaced packets is cut (not in the
    /// paper: it bounds memory and latency).
    pub max_train: usize,
    /// ISR and ACK return rate are "close" when they differ by at most this fraction of the
    /// ISR.
    pub rate_tolerance: f64,
    /// Count the first packet's bits in the rates (the paper's literal wording).
    pub count_first_packet: bool,
    /// Fewest explicitly acknowledged packets for a trend and an ACK rate (two make one pair).
    pub min_acked: usize,
    /// Trains waiting for their ACKs beyond this many are given up (oldest first).
    pub max_pending: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            alpha: 1.0,
            min_train: 7,
            max_train: 100,
            rate_tolerance: 0.1,
            count_first_packet: false,
            min_acked: 2,
            max_pending: 64,
        }
    }
}

/// One outgoing data packet as captured at the sender.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Departure {
    /// Capture time, seconds.
    pub t: f64,
    /// Bytes on the wire the rate counts (the IP packet).
    pub bytes: u32,
    /// Sequence number just past the packet's data (what an explicit ACK carries).
    pub end_seq: u32,
    /// A TSO/GSO super-segment (more than one packet's worth of data): not one departure.
    pub super_segment: bool,
    /// A retransmission: its ACK is ambiguous (Karn's rule, RFC 6298 §3).
    pub retransmission: bool,
}

/// Why a train gave no lower bound, or that it gave one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Non-increasing RTTs and an ISR close to the ACK return rate: the ISR is a lower bound.
    LowerBound,
    /// The RTTs rose through the train: its ISR was above the available bandwidth.
    Increasing,
    /// Non-increasing, but the ACKs came back at a rate unlike the ISR.
    RatesDiffer,
    /// Fewer than [`Params::min_acked`] packets had an explicit ACK (delayed or stretch ACKs).
    TooFewAcks,
    /// The acknowledged packets' ACKs arrived at one instant: no ACK rate.
    AcksAtOneInstant,
    /// The flow ended (or too many trains waited) before the train was acknowledged.
    Unacknowledged,
}

/// A finished train.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Train {
    /// First and last departure, seconds.
    pub start: f64,
    pub end: f64,
    pub packets: usize,
    /// Bits the rates count.
    pub bits: f64,
    /// Initial sending rate, bit/s.
    pub isr_bps: f64,
    /// ACK return rate, bit/s, when at least two packets had an explicit ACK at two instants.
    pub ack_rate_bps: Option<f64>,
    /// Packets with an explicit ACK.
    pub acked: usize,
    /// Their RTTs, seconds, in departure order.
    pub rtts: Vec<f64>,
    pub verdict: Verdict,
}

impl Train {
    /// The lower bound on the available bandwidth, bit/s, if the train gives one.
    pub fn lower_bound_bps(&self) -> Option<f64> {
        (self.verdict == Verdict::LowerBound).then_some(self.isr_bps)
    }
}

/// Counts of what was left out of trains, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Super-segments (TSO/GSO) seen; each ends a train.
    pub super_segments: u64,
    /// Retransmissions seen; each ends a train.
    pub retransmissions: u64,
    /// Packets departing at the same instant as the one before (Δ = 0, log Δ = −∞).
    pub zero_gaps: u64,
    /// Runs of consistently spaced packets shorter than [`Params::min_train`] (3 or more).
    pub short_runs: u64,
    /// Trains dropped unevaluated because more than [`Params::max_pending`] waited for ACKs.
    pub given_up: u64,
}

impl Skipped {
    /// Adds `o`'s counts (totals over several flows).
    pub fn add(&mut self, o: &Skipped) {
        self.super_segments += o.super_segments;
        self.retransmissions += o.retransmissions;
        self.zero_gaps += o.zero_gaps;
        self.short_runs += o.short_runs;
        self.given_up += o.given_up;
    }
}

#[derive(Clone, Copy, Debug)]
struct Pkt {
    t: f64,
    bytes: u32,
    end_seq: u32,
    ack_t: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Building {
    pkts: Vec<Pkt>,
    min_gap: f64,
    max_gap: f64,
    /// Packets before this index are known to be cumulatively acknowledged.
    acked_to: usize,
}

impl Building {
    fn match_ack(&mut self, ack: u32, t: f64) {
        while let Some(p) = self.pkts.get_mut(self.acked_to) {
            if !seq_le(p.end_seq, ack) {
                break;
            }
            if p.end_seq == ack && p.ack_t.is_none() {
                p.ack_t = Some(t);
            }
            self.acked_to += 1;
        }
    }
}

/// `a ≤ b` in sequence space (RFC 9293 §3.4: modulo 2³²).
fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// Wren's analysis of one flow direction.
#[derive(Clone, Debug)]
pub struct Wren {
    params: Params,
    /// The train being formed.
    current: Building,
    /// Closed trains waiting for their last ACK, oldest first.
    pending: VecDeque<Building>,
    skipped: Skipped,
    /// Departure time of the previous packet, for the gap of the next.
    last_t: Option<f64>,
    /// e^(−α): the smallest gap of a train over its largest must exceed it.
    spread: f64,
}

impl Wren {
    pub fn new(params: Params) -> Self {
        Self {
            params,
            current: Building::default(),
            pending: VecDeque::new(),
            skipped: Skipped::default(),
            last_t: None,
            spread: (-params.alpha).exp(),
        }
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// An outgoing data packet; trains that finish (acknowledged while still forming) are
    /// pushed to `out`.
    pub fn depart(&mut self, d: Departure, out: &mut Vec<Train>) {
        if d.super_segment || d.retransmission {
            if d.super_segment {
                self.skipped.super_segments += 1;
            } else {
                self.skipped.retransmissions += 1;
            }
            self.close();
            self.current.pkts.clear();
            self.last_t = None;
            return;
        }
        let pkt = Pkt {
            t: d.t,
            bytes: d.bytes,
            end_seq: d.end_seq,
            ack_t: None,
        };
        let gap = self.last_t.map(|l| d.t - l);
        self.last_t = Some(d.t);
        match gap {
            None => self.restart(pkt, None),
            Some(g) if g.is_nan() || g <= 0.0 => {
                self.skipped.zero_gaps += 1;
                self.restart(pkt, None);
            }
            Some(g) => {
                let n = self.current.pkts.len();
                let (lo, hi) = if n >= 2 {
                    (self.current.min_gap.min(g), self.current.max_gap.max(g))
                } else {
                    (g, g)
                };
                // min log Δ > max log Δ − α  ⇔  min Δ > max Δ · e^(−α)
                let fits = lo > hi * self.spread;
                if n >= 1 && fits && n < self.params.max_train {
                    self.current.pkts.push(pkt);
                    self.current.min_gap = lo;
                    self.current.max_gap = hi;
                } else {
                    self.restart(pkt, Some(g));
                }
            }
        }
        self.drain(out);
    }

    /// Ends the current train and starts the next with its last packet (when the gap to the
    /// new one is usable) and the new packet.
    fn restart(&mut self, pkt: Pkt, gap: Option<f64>) {
        let last = self.current.pkts.last().copied();
        self.close();
        self.current = Building::default();
        if let (Some(l), Some(g)) = (last, gap) {
            self.current.pkts.push(l);
            self.current.min_gap = g;
            self.current.max_gap = g;
        }
        self.current.pkts.push(pkt);
    }

    /// Moves the current train to the pending queue if long enough.
    fn close(&mut self) {
        let b = std::mem::take(&mut self.current);
        if b.pkts.len() >= self.params.min_train {
            self.pending.push_back(b);
            if self.pending.len() > self.params.max_pending {
                self.pending.pop_front();
                self.skipped.given_up += 1;
            }
        } else if b.pkts.len() >= 3 {
            self.skipped.short_runs += 1;
        }
    }

    /// A returning ACK carrying acknowledgement number `ack`, captured at `t` seconds.
    pub fn ack(&mut self, ack: u32, t: f64, out: &mut Vec<Train>) {
        for b in self.pending.iter_mut() {
            b.match_ack(ack, t);
        }
        self.current.match_ack(ack, t);
        self.drain(out);
    }

    /// Evaluates the pending trains whose every packet is acknowledged.
    fn drain(&mut self, out: &mut Vec<Train>) {
        while self
            .pending
            .front()
            .is_some_and(|b| b.acked_to == b.pkts.len())
        {
            let b = self.pending.pop_front().expect("front exists");
            out.push(self.evaluate(&b.pkts, false));
        }
    }

    /// The flow ended: the current train closes and every train still waiting is evaluated
    /// with the ACKs it had.
    pub fn finish(&mut self, out: &mut Vec<Train>) {
        self.close();
        while let Some(b) = self.pending.pop_front() {
            let complete = b.acked_to == b.pkts.len();
            out.push(self.evaluate(&b.pkts, !complete));
        }
    }

    fn evaluate(&self, pkts: &[Pkt], unacked: bool) -> Train {
        let p = &self.params;
        let bits_of = |ps: &[Pkt]| ps.iter().map(|q| q.bytes as f64 * 8.0).sum::<f64>();
        let first = pkts[0];
        let last = pkts[pkts.len() - 1];
        let bits = if p.count_first_packet {
            bits_of(pkts)
        } else {
            bits_of(&pkts[1..])
        };
        let span = last.t - first.t;
        let isr_bps = bits / span;
        let acked: Vec<(usize, f64)> = pkts
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.ack_t.map(|a| (i, a)))
            .collect();
        let rtts: Vec<f64> = acked.iter().map(|&(i, a)| a - pkts[i].t).collect();
        let ack_rate_bps = match (acked.first(), acked.last()) {
            (Some(&(i0, a0)), Some(&(i1, a1))) if i1 > i0 && a1 > a0 => {
                let b = if p.count_first_packet {
                    bits_of(&pkts[i0..=i1])
                } else {
                    bits_of(&pkts[i0 + 1..=i1])
                };
                Some(b / (a1 - a0))
            }
            _ => None,
        };
        let verdict = if acked.len() < p.min_acked.max(2) {
            if unacked {
                Verdict::Unacknowledged
            } else {
                Verdict::TooFewAcks
            }
        } else if rtts.windows(2).all(|w| w[0] < w[1]) {
            Verdict::Increasing
        } else {
            match ack_rate_bps {
                None => Verdict::AcksAtOneInstant,
                Some(r) if (r - isr_bps).abs() <= p.rate_tolerance * isr_bps => Verdict::LowerBound,
                Some(_) => Verdict::RatesDiffer,
            }
        };
        Train {
            start: first.t,
            end: last.t,
            packets: pkts.len(),
            bits,
            isr_bps,
            ack_rate_bps,
            acked: acked.len(),
            rtts,
            verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender of `n` packets of 1500 bytes spaced `gap` seconds apart from `t0`, each
    /// acknowledged after `rtt(i)` (every `ack_every`-th packet explicitly).
    fn run(
        n: usize,
        t0: f64,
        gap: impl Fn(usize) -> f64,
        rtt: impl Fn(usize) -> f64,
        ack_every: usize,
        params: Params,
    ) -> Vec<Train> {
        let mut w = Wren::new(params);
        let mut out = Vec::new();
        let mut events: Vec<(f64, Option<u32>, Option<Departure>)> = Vec::new();
        let mut t = t0;
        for i in 0..n {
            let end = (i as u32 + 1) * 1448;
            events.push((
                t,
                None,
                Some(Departure {
                    t,
                    bytes: 1500,
                    end_seq: end,
                    super_segment: false,
                    retransmission: false,
                }),
            ));
            if (i + 1) % ack_every == 0 {
                events.push((t + rtt(i), Some(end), None));
            }
            t += gap(i);
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (t, ack, dep) in events {
            match (ack, dep) {
                (Some(a), _) => w.ack(a, t, &mut out),
                (_, Some(d)) => w.depart(d, &mut out),
                _ => {}
            }
        }
        w.finish(&mut out);
        out
    }

    #[test]
    fn an_evenly_spaced_train_with_flat_rtts_reports_its_rate() {
        // 12 Mbit/s: 1500 bytes every 1 ms.
        let trains = run(20, 0.0, |_| 0.001, |_| 0.010, 1, Params::default());
        assert_eq!(trains.len(), 1, "{trains:?}");
        let t = &trains[0];
        assert_eq!(t.packets, 20);
        assert!((t.isr_bps - 12e6).abs() < 1.0, "{t:?}");
        assert_eq!(t.verdict, Verdict::LowerBound);
        assert_eq!(t.lower_bound_bps(), Some(t.isr_bps));
        let literal = run(
            20,
            0.0,
            |_| 0.001,
            |_| 0.010,
            1,
            Params {
                count_first_packet: true,
                ..Params::default()
            },
        );
        assert!((literal[0].isr_bps - 12e6 * 20.0 / 19.0).abs() < 1.0);
    }

    #[test]
    fn rising_rtts_mark_the_isr_as_above_the_available_bandwidth() {
        let trains = run(
            10,
            0.0,
            |_| 0.001,
            |i| 0.010 + i as f64 * 0.0005,
            2,
            Params::default(),
        );
        assert_eq!(trains[0].verdict, Verdict::Increasing);
        assert_eq!(trains[0].acked, 5, "delayed ACKs: every other packet");
        assert_eq!(trains[0].lower_bound_bps(), None);
    }

    #[test]
    fn acks_returning_slower_than_the_isr_are_not_a_bound() {
        // RTTs that wobble (non-increasing) while the ACKs spread out to half the rate.
        let trains = run(
            10,
            0.0,
            |_| 0.001,
            |i| 0.010 + i as f64 * 0.001 * if i % 4 == 3 { 0.5 } else { 1.0 },
            1,
            Params::default(),
        );
        assert_eq!(trains[0].verdict, Verdict::RatesDiffer, "{:?}", trains[0]);
    }

    #[test]
    fn gaps_beyond_alpha_split_trains_and_short_runs_are_counted() {
        // Seven packets 1 ms apart, a 10 ms pause, then eight packets 1 ms apart.
        let trains = run(
            15,
            0.0,
            |i| if i == 6 { 0.010 } else { 0.001 },
            |_| 0.005,
            1,
            Params::default(),
        );
        assert_eq!(trains.len(), 2, "{trains:?}");
        assert_eq!(trains[0].packets, 7);
        assert_eq!(trains[1].packets, 8, "the gap itself fits no train");
        assert!((trains[1].start - 0.016).abs() < 1e-9);
        // Alternating 1 and 3 ms gaps (ratio above e) never make a train.
        let none = run(
            20,
            0.0,
            |i| if i % 2 == 0 { 0.001 } else { 0.003 },
            |_| 0.005,
            1,
            Params::default(),
        );
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn long_runs_are_cut_at_the_longest_train_and_pending_trains_finish_at_the_end() {
        let p = Params {
            max_train: 10,
            ..Params::default()
        };
        let trains = run(30, 0.0, |_| 0.001, |_| 0.002, 1, p);
        assert_eq!(trains.len(), 3, "{trains:?}");
        assert!(trains.iter().all(|t| t.verdict == Verdict::LowerBound));
        // Without ACKs, every train is given up at the end.
        let mut w = Wren::new(Params::default());
        let mut out = Vec::new();
        for i in 0..10 {
            let d = Departure {
                t: i as f64 * 0.001,
                bytes: 1500,
                end_seq: (i + 1) * 1448,
                super_segment: false,
                retransmission: false,
            };
            w.depart(d, &mut out);
        }
        assert!(out.is_empty());
        w.finish(&mut out);
        assert_eq!(out[0].verdict, Verdict::Unacknowledged);
    }

    #[test]
    fn super_segments_and_retransmissions_end_trains_and_are_counted() {
        let mut w = Wren::new(Params::default());
        let mut out = Vec::new();
        for i in 0..20u32 {
            let d = Departure {
                t: i as f64 * 0.001,
                bytes: if i == 3 { 64_000 } else { 1500 },
                end_seq: (i + 1) * 1448,
                super_segment: i == 3,
                retransmission: i == 11,
            };
            w.depart(d, &mut out);
            w.ack((i + 1) * 1448, i as f64 * 0.001 + 0.004, &mut out);
        }
        w.finish(&mut out);
        let s = w.skipped();
        assert_eq!((s.super_segments, s.retransmissions), (1, 1));
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].packets, 7, "packets 4..=10");
        assert_eq!(out[1].packets, 8, "packets 12..=19");
    }
}
