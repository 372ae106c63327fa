//! The FOBS sender as a deterministic state machine (quinn-proto's shape): control
//! messages and times in through [`Sender::handle_control`], datagrams and control bytes out
//! through [`Sender::poll_transmit`], the next instant it needs the caller through
//! [`Sender::poll_timeout`], and what happened through [`Sender::poll_event`]. It never reads
//! the file: a data transmit names the payload's offset and length, and the edge copies those
//! bytes behind the header.
//!
//! Sending (Dickens §2): every packet is numbered; packets go out paced at the controller's
//! rate, grouped in transmission windows. A window closes when it holds `window` packets or
//! when it has been open for a smoothed round-trip time (so the controller hears from the
//! path about once per RTT whatever the rate; four times per RTT in slow start, see
//! [`SLOW_START_WINDOWS`]), and its end is announced on the control channel. The receiver
//! answers each window with its selective acknowledgement, the window's packet-loss
//! signature; lost packets go to the front of the queue and are sent
//! again in a later window, until every packet has been acknowledged.
//!
//! Congestion response (§2.2, §4.1): when a window had loss, the classifier is asked about
//! the signature of the last packets acknowledged, as many as the model's signatures hold
//! (`Model::signature_packets`: a fixed length, however short the windows are at low rates;
//! the shipped model's 16,384 packets are ~24 MB, where one lost packet is a loss rate below
//! the classifier's range, as in the paper's 100 MB windows, §4.1.1). Before the transfer
//! has sent that many, the slots before its first packet count as received, and a CPU
//! verdict also needs the window's own loss to hold a run (see `on_ack`). With P(CPU) ≥ 0.95
//! the loss is not answered (the controller sees `congestion: false`); otherwise, or without
//! a classifier (`--no-classifier`), it is answered as network congestion. Loss of more than
//! [`MAX_CPU_LOSS`] of the packets classified (of those sent, early in a transfer) is always
//! answered: a receiver that slow, or a queue overflowing at a steady overshoot (whose drops
//! are as regular as a stall's), is a reason to slow down whatever the cause. Loss already
//! answered does not count towards that share again, and the loss of a window sent before
//! the last answer took effect is part of that answer (held), whatever the classifier says.

use super::congestion::{Controller, LossCount, WindowReport, SLOW_START_WINDOWS};
use super::wire::Nanos;
use super::wire::{Ack, Control, DataHeader, Done, Hello, Refusal, WindowEnd, DATA_HEADER};
use crate::classify::signature::Signature;
use crate::classify::{Classifier, Verdict, CPU_THRESHOLD};
use std::collections::VecDeque;

/// Above this loss rate in the classified signature, loss is answered whatever the
/// classifier says.
pub const MAX_CPU_LOSS: f64 = 0.1;
/// Windows in flight at most (the receiver tracks as many).
pub const MAX_OUTSTANDING: usize = 64;
/// Most sending time a late caller may catch up at once (a burst), ns. A busy machine wakes
/// a sleeping sender milliseconds late; with less than that to catch up, the lost time is
/// lost rate (at 1 ms the bench's sender reached 45 % of a 1 Gbit/s link at load 12). 4 ms
/// at 1 Gbit/s is 500 KB, less than a TSO-sized TCP burst train and well inside the
/// bottleneck queues FOBS shares.
const MAX_BURST_NS: Nanos = 4_000_000;
/// Shortest time a window stays open, ns.
const MIN_WINDOW_NS: Nanos = 1_000_000;
/// Without any acknowledgement for this long while windows are outstanding, give up.
pub const STALL_NS: Nanos = 30_000_000_000;
/// Without the receiver's answer to the hello (its welcome or refusal) for this long, give
/// up: a `nowcast fobs recv` answers within a round trip and the time to open the file, and
/// a port that accepts the connection but says nothing (another service waiting for its own
/// protocol's first words) must not be taken for a transfer in progress for [`STALL_NS`].
/// The receiver gives a hello as long (`io::HELLO_NS`). A receiver busy with another
/// transfer refuses at once (`Refusal::Busy`, within a tenth of a second).
pub const OFFER_NS: Nanos = 5_000_000_000;

/// What a sender sends and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub hello: Hello,
    /// The rate to start at, bytes/s.
    pub initial_rate: f64,
    /// Packets in each signature reported for training ([`Event::Signature`]); 0 for none.
    pub signature_packets: usize,
}

/// A datagram or control bytes, written into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// A data datagram: the header is in the buffer; append `len` file bytes from `offset`.
    Data { offset: u64, len: usize },
    /// Control bytes for the TCP connection: the whole buffer.
    Control,
}

/// What the controller did about a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The window had no loss.
    None,
    /// Loss diagnosed as CPU contention: no corrective action (§2.2).
    Ignored,
    /// Loss answered as network congestion: long-term loss rate and rate updated.
    Responded,
    /// Network loss in a window sent before the last answer took effect: already answered.
    Held,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Ignored => "no_corrective_action",
            Action::Responded => "rate_from_response",
            Action::Held => "already_answered",
        }
    }
}

/// One acknowledged window, as reported to the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowOutcome {
    pub window: u32,
    pub packets: u64,
    pub lost: u64,
    /// The classifier's verdict on the last packets acknowledged, as many as its model's
    /// signatures hold (when there was loss and a classifier).
    pub verdict: Option<Verdict>,
    pub action: Action,
    /// The long-term loss rate after the window.
    pub loss_rate: f64,
    /// What that loss rate counts (none under a fixed rate).
    pub loss_count: Option<LossCount>,
    /// The pacing rate after the window, bytes/s.
    pub rate: f64,
    /// The smoothed RTT, seconds.
    pub rtt: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The receiver took the transfer; `held` packets were already there (resume).
    Accepted {
        held: u64,
    },
    Refused(Refusal),
    Window(WindowOutcome),
    /// A block of `signature_packets` consecutive acknowledged packets that had loss (for
    /// signature files: non-overlapping).
    Signature(Signature),
    /// The receiver's last word.
    Finished(Done),
    /// The protocol broke (an unexpected message, a stall).
    Failed(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Hello,
    Sending,
    Finished,
}

struct Outstanding {
    id: u32,
    seqs: Vec<u64>,
    /// When its first datagram was sent and when it closed.
    opened: Nanos,
    ended: Nanos,
}

/// Counters for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub sent: u64,
    pub retransmitted: u64,
    pub lost: u64,
    /// Transmission windows sent, and of them acknowledged (`lost` counts the losses those
    /// acknowledgements showed: the receiver's verdict on the file may come before the last
    /// windows' acknowledgements, or all of them on a fast path).
    pub windows: u64,
    pub acknowledged: u64,
    pub cpu_verdicts: u64,
    pub network_verdicts: u64,
    pub inconclusive: u64,
    /// The highest delivery rate (payload bytes/s) over any stretch of at least two round
    /// trips and [`PEAK_SPAN_MIN`]: what the path carried at its best in this transfer, whatever the controller
    /// then chose (the path memory's measure). Measured as BBR estimates delivery rate
    /// (draft-cheng-iccrg-delivery-rate-estimation): packets newly delivered between two
    /// acknowledgements over the longer of the time between them and the time between the
    /// ends of the windows they acknowledge, so neither acknowledgements bunched at the
    /// sender nor datagrams bunched in the receiver's socket read faster than the path.
    pub peak_delivery: u64,
}

/// [`Stats::peak_delivery`]'s stretches are at least two round trips and this long (ns):
/// a token-bucket shaper passes its bucket at line rate (a tbf's burst is commonly 10 ms of
/// its rate), and over 100 ms that can add no more than a tenth.
const PEAK_SPAN_MIN: Nanos = 100_000_000;

pub struct Sender {
    cfg: Config,
    phase: Phase,
    total: u64,
    delivered: Vec<u64>,
    delivered_count: u64,
    /// (acknowledged at, the window's end, packets delivered by then) of recent
    /// acknowledgements, for [`Stats::peak_delivery`].
    acked: VecDeque<(Nanos, Nanos, u64)>,
    next_new: u64,
    retx: VecDeque<u64>,
    session: u64,
    next_id: u32,
    /// Windows below this id were sent before the last answer to congestion took effect.
    recovery_until: u32,
    /// Windows opened before this time are part of the answered slow-start overshoot too.
    recovery_until_time: Nanos,
    current: Vec<u64>,
    opened: Nanos,
    outstanding: VecDeque<Outstanding>,
    controller: Box<dyn Controller>,
    classifier: Option<Classifier>,
    next_send: Nanos,
    hello_sent: Nanos,
    srtt: Option<f64>,
    last_ack: Nanos,
    control: VecDeque<Control>,
    events: VecDeque<Event>,
    /// The last `history` acknowledged outcomes, oldest first: what the classifier reads.
    recent: VecDeque<Slot>,
    history: usize,
    /// Outcomes since the last signature block was cut.
    block: Vec<bool>,
    pub stats: Stats,
}

/// One acknowledged packet as the classifier's history holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Received,
    /// Lost, in a window whose loss was not answered (yet).
    Lost,
    /// Lost, in a window whose loss was answered as congestion (or held as part of an
    /// answered event): still a 0 in the signature, but not counted again by
    /// [`MAX_CPU_LOSS`].
    Answered,
}

fn packets_of(size: u64, packet: u16) -> u64 {
    size.div_ceil(u64::from(packet.max(1)))
}

impl Sender {
    /// A sender that will say hello at its first [`Sender::poll_transmit`].
    pub fn new(
        cfg: Config,
        controller: Box<dyn Controller>,
        classifier: Option<Classifier>,
    ) -> Self {
        let total = packets_of(cfg.hello.size, cfg.hello.packet);
        let history = classifier.as_ref().map_or(0, |c| c.model.signature_packets);
        let mut control = VecDeque::new();
        control.push_back(Control::Hello(cfg.hello.clone()));
        Self {
            phase: Phase::Hello,
            total,
            delivered: vec![0; total.div_ceil(64) as usize],
            delivered_count: 0,
            acked: VecDeque::new(),
            next_new: 0,
            retx: VecDeque::new(),
            session: 0,
            next_id: 0,
            recovery_until: 0,
            recovery_until_time: 0,
            current: Vec::new(),
            opened: 0,
            outstanding: VecDeque::new(),
            controller,
            classifier,
            next_send: 0,
            hello_sent: 0,
            srtt: None,
            last_ack: 0,
            control,
            events: VecDeque::new(),
            recent: VecDeque::with_capacity(history),
            history,
            block: Vec::new(),
            stats: Stats::default(),
            cfg,
        }
    }

    pub fn total_packets(&self) -> u64 {
        self.total
    }

    pub fn delivered_packets(&self) -> u64 {
        self.delivered_count
    }

    /// The file's bytes the receiver holds: those of the packets it acknowledged (or held
    /// already, resuming), the last packet counted at its own, shorter length.
    pub fn delivered_bytes(&self) -> u64 {
        let packet = u64::from(self.cfg.hello.packet);
        let mut bytes = self.delivered_count * packet;
        if self.total > 0 && self.is_delivered(self.total - 1) {
            bytes -= self.total * packet - self.cfg.hello.size;
        }
        bytes
    }

    pub fn rate(&self) -> f64 {
        self.controller.rate()
    }

    /// Payload bytes per packet.
    pub fn packet_size(&self) -> u16 {
        self.cfg.hello.packet
    }

    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    fn is_delivered(&self, seq: u64) -> bool {
        self.delivered[(seq / 64) as usize] >> (seq % 64) & 1 == 1
    }

    fn deliver(&mut self, seq: u64) {
        if !self.is_delivered(seq) {
            self.delivered[(seq / 64) as usize] |= 1 << (seq % 64);
            self.delivered_count += 1;
        }
    }

    fn rtt_s(&self) -> f64 {
        self.srtt.unwrap_or(0.1)
    }

    fn next_seq(&mut self) -> Option<u64> {
        while let Some(s) = self.retx.pop_front() {
            if !self.is_delivered(s) {
                self.stats.retransmitted += 1;
                return Some(s);
            }
        }
        while self.next_new < self.total {
            let s = self.next_new;
            self.next_new += 1;
            if !self.is_delivered(s) {
                return Some(s);
            }
        }
        None
    }

    fn close_window(&mut self, now: Nanos) {
        let seqs = std::mem::take(&mut self.current);
        self.control.push_back(Control::WindowEnd(WindowEnd {
            window: self.next_id,
            count: seqs.len() as u32,
        }));
        self.stats.windows += 1;
        self.outstanding.push_back(Outstanding {
            id: self.next_id,
            seqs,
            opened: self.opened,
            ended: now,
        });
        self.next_id = self.next_id.wrapping_add(1);
    }

    /// The next thing to send at `now`, written into `buf` (cleared first).
    pub fn poll_transmit(&mut self, now: Nanos, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        if let Some(c) = self.control.pop_front() {
            if matches!(c, Control::Hello(_)) {
                self.hello_sent = now;
            }
            c.encode(buf);
            return Some(Transmit::Control);
        }
        if self.phase != Phase::Sending || now < self.next_send {
            return None;
        }
        let per_rtt = if self.controller.in_slow_start() {
            SLOW_START_WINDOWS
        } else {
            1.0
        };
        let window_time = ((self.rtt_s() * 1e9 / per_rtt) as Nanos).max(MIN_WINDOW_NS);
        if !self.current.is_empty() && now.saturating_sub(self.opened) >= window_time {
            self.close_window(now);
            return self.poll_transmit(now, buf);
        }
        if self.outstanding.len() >= MAX_OUTSTANDING {
            return None;
        }
        let Some(seq) = self.next_seq() else {
            if !self.current.is_empty() {
                self.close_window(now);
                return self.poll_transmit(now, buf);
            }
            return None;
        };
        if self.current.is_empty() {
            self.opened = now;
        }
        let index = self.current.len() as u32;
        self.current.push(seq);
        let packet = u64::from(self.cfg.hello.packet);
        let offset = seq * packet;
        let len = (self.cfg.hello.size - offset).min(packet) as usize;
        buf.resize(DATA_HEADER, 0);
        DataHeader {
            session: self.session,
            window: self.next_id,
            index,
            seq,
        }
        .encode(buf);
        self.stats.sent += 1;
        // Pacing: one packet's time at the current rate; a caller that woke late may catch
        // up at most MAX_BURST_NS of sending at once.
        let gap = ((len + DATA_HEADER) as f64 / self.controller.rate() * 1e9) as Nanos;
        self.next_send = self.next_send.max(now.saturating_sub(MAX_BURST_NS)) + gap;
        if self.current.len() >= self.cfg.hello.window as usize {
            self.close_window(now);
        }
        Some(Transmit::Data { offset, len })
    }

    /// When the sender next needs [`Sender::poll_transmit`] or [`Sender::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Nanos> {
        match self.phase {
            Phase::Finished => None,
            _ if !self.control.is_empty() => Some(0),
            Phase::Hello => Some(self.hello_sent + OFFER_NS),
            Phase::Sending => {
                let stall = self.last_ack + STALL_NS;
                let busy = !self.current.is_empty()
                    || (self.outstanding.len() < MAX_OUTSTANDING
                        && (!self.retx.is_empty() || self.next_new < self.total));
                Some(if busy {
                    self.next_send.min(stall)
                } else {
                    stall
                })
            }
        }
    }

    /// Gives up when the receiver has been silent too long.
    pub fn handle_timeout(&mut self, now: Nanos) {
        match self.phase {
            Phase::Hello if now >= self.hello_sent + OFFER_NS => self.fail(format!(
                "the receiver did not answer the offer within {} s",
                OFFER_NS / 1_000_000_000
            )),
            Phase::Sending if now >= self.last_ack + STALL_NS => {
                self.fail("the receiver stopped answering".into())
            }
            _ => {}
        }
    }

    fn fail(&mut self, why: String) {
        self.phase = Phase::Finished;
        self.events.push_back(Event::Failed(why));
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Takes one control message from the receiver.
    pub fn handle_control(&mut self, now: Nanos, msg: Control) {
        match (self.phase, msg) {
            (Phase::Hello, Control::Welcome(w)) => {
                if w.status != Refusal::Accepted {
                    self.phase = Phase::Finished;
                    self.events.push_back(Event::Refused(w.status));
                    return;
                }
                self.session = w.session;
                let have = Signature::from_bitmap(self.total as usize, &w.have);
                let mut held = 0;
                if !w.have.is_empty() {
                    for seq in 0..self.total {
                        if have.received(seq as usize) {
                            self.deliver(seq);
                            held += 1;
                        }
                    }
                }
                self.srtt = Some((now.saturating_sub(self.hello_sent) as f64 / 1e9).max(1e-5));
                self.controller.set_cap(w.max_rate as f64);
                self.phase = Phase::Sending;
                self.next_send = now;
                self.last_ack = now;
                // When everything is there already, the receiver verifies and says done.
                self.events.push_back(Event::Accepted { held });
            }
            (Phase::Sending, Control::Ack(a)) => self.on_ack(now, a),
            // "Stored" is believed only of a file whose every packet has been sent (or was
            // held from before): a receiver that says it earlier (buggy, or not FOBS's)
            // cannot have checked the hash of the file. (The last windows' acknowledgements
            // may still be on their way: the receiver's verdict comes first.)
            (Phase::Hello | Phase::Sending, Control::Done(Done::Stored)) if self.unsent() > 0 => {
                self.fail(format!(
                    "the receiver said it stored the file before {} of its {} packets were sent",
                    self.unsent(),
                    self.total
                ))
            }
            (Phase::Hello | Phase::Sending, Control::Done(d)) => {
                self.phase = Phase::Finished;
                self.events.push_back(Event::Finished(d));
            }
            (Phase::Finished, _) => {}
            (_, other) => self.fail(format!("unexpected message from the receiver: {other:?}")),
        }
    }

    /// Packets neither sent yet nor held by the receiver.
    fn unsent(&self) -> u64 {
        (self.next_new..self.total)
            .filter(|&i| !self.is_delivered(i))
            .count() as u64
    }

    /// Updates [`Stats::peak_delivery`] at an acknowledgement received at `now` of a window
    /// that ended at `ended`.
    fn delivery_sample(&mut self, now: Nanos, ended: Nanos) {
        let span = ((2.0 * self.srtt.unwrap_or(0.0) * 1e9) as Nanos).max(PEAK_SPAN_MIN);
        self.acked.push_back((now, ended, self.delivered_count));
        while self.acked.len() >= 2 && now.saturating_sub(self.acked[1].0) >= span {
            self.acked.pop_front();
        }
        let (at, end, delivered) = self.acked[0];
        let elapsed = now.saturating_sub(at).max(ended.saturating_sub(end));
        if elapsed >= span {
            let bytes = (self.delivered_count - delivered) * u64::from(self.cfg.hello.packet);
            let rate = (bytes as f64 / (elapsed as f64 / 1e9)) as u64;
            self.stats.peak_delivery = self.stats.peak_delivery.max(rate);
        }
    }

    fn on_ack(&mut self, now: Nanos, a: Ack) {
        let Some(pos) = self.outstanding.iter().position(|o| o.id == a.window) else {
            return self.fail(format!("acknowledgement of unknown window {}", a.window));
        };
        let o = self.outstanding.remove(pos).expect("found");
        if a.count as usize != o.seqs.len() {
            return self.fail(format!(
                "window {} acknowledged with {} packets, {} sent",
                a.window,
                a.count,
                o.seqs.len()
            ));
        }
        self.last_ack = now;
        let sig = Signature::from_bitmap(o.seqs.len(), &a.bitmap);
        let mut lost = 0u64;
        for (i, &seq) in o.seqs.iter().enumerate() {
            let got = sig.received(i);
            if got {
                self.deliver(seq);
            } else {
                lost += 1;
                if !self.is_delivered(seq) {
                    self.retx.push_back(seq);
                }
            }
            self.remember(got);
        }
        self.stats.lost += lost;
        self.stats.acknowledged += 1;
        let sample = now.saturating_sub(o.ended).saturating_sub(a.held_ns) as f64 / 1e9;
        let sample = sample.max(1e-5);
        self.srtt = Some(match self.srtt {
            Some(s) => 0.875 * s + 0.125 * sample,
            None => sample,
        });
        let received = o.seqs.len() as u64 - lost;
        // The span runs from the first arrival to the last: it holds the arrival times of
        // all but the first packet (n packets over n − 1 gaps; counting all n made a
        // 3-packet window read 1.5 times its rate, and slow start overshoot by as much).
        let bytes = (received.saturating_sub(1)) as f64
            * (f64::from(self.cfg.hello.packet) + DATA_HEADER as f64);
        let receive_rate =
            (received >= 2 && a.span_ns > 0).then(|| bytes / (a.span_ns as f64 / 1e9));
        self.delivery_sample(now, o.ended);
        let verdict = if lost > 0 {
            self.classifier.as_mut().map(|c| {
                // Always the model's length: before the transfer has sent that many packets,
                // the slots before its first packet count as received (nothing was sent, so
                // nothing was lost). Classifying the shorter signature as it is would read a
                // metric the model was not fitted on: a few thousand packets of random loss
                // hold fewer distinct words than 16,384 at the same loss rate, and read as
                // CPU bursts (the bench's 0.5 % loss run left 12 of 57 events unanswered).
                let history = c.model.signature_packets;
                let start = history - self.recent.len();
                let mut s = Signature::all_received(history);
                for (i, slot) in self.recent.iter().enumerate() {
                    if *slot != Slot::Received {
                        s.lose(start + i);
                    }
                }
                c.classify(&s)
            })
        } else {
            None
        };
        if let Some(v) = verdict {
            match v.diagnosis() {
                crate::classify::Diagnosis::Cpu => self.stats.cpu_verdicts += 1,
                crate::classify::Diagnosis::Network => self.stats.network_verdicts += 1,
                _ => self.stats.inconclusive += 1,
            }
        }
        // Until the sender has a whole signature of its own, the padded one the classifier
        // reads holds the transfer's few losses in a stretch far denser than the signature's
        // loss rate says, and one pair of adjacent random drops early on reads as a stall's
        // run, and stays in the signature for the next 16,384 packets (on the bench's 0.5 %
        // loss link shared with iperf3, 15 of 71 events were left unanswered that way in one
        // run). Then a CPU verdict also needs this window's own loss to hold a run: a stall
        // behind a socket buffer loses consecutive packets when it loses any.
        let whole = self.recent.len() >= self.history;
        // The share lost of the packets actually sent (the padded signature's loss rate
        // would understate it early on), leaving out loss already answered: the overshoot
        // that ended slow start loses a large share of a few windows (in the simulator, 631
        // of a warm start's first 6,000 packets), and counted again it made the first stall
        // after it "more than MAX_CPU_LOSS" though the classifier said CPU with P = 1.0: the
        // rate fell from 850 to 7 Mbit/s.
        let lost_share = if verdict.is_some() {
            self.recent.iter().filter(|s| **s == Slot::Lost).count() as f64
                / self.recent.len() as f64
        } else {
            0.0
        };
        let cpu = verdict.is_some_and(|v| v.p_cpu >= CPU_THRESHOLD)
            && lost_share <= MAX_CPU_LOSS
            && (whole || (1..o.seqs.len()).any(|i| !sig.received(i - 1) && !sig.received(i)));
        // A window sent before the last answer took effect: its loss belongs to the event
        // already answered, whatever the classifier reads in it (a queue the overshoot
        // filled, draining, loses runs as a stall does).
        let hold = lost > 0
            && (a.window.wrapping_sub(self.recovery_until) >= u32::MAX / 2
                || o.opened < self.recovery_until_time);
        let congestion = lost > 0 && (!cpu || hold);
        if congestion && !hold && self.controller.in_slow_start() {
            // The end of slow start: the rate was up to twice the path's for a round trip
            // before this news arrived, and that backlog still fills the bottleneck's queue
            // when the first windows at the answered rate reach it. Their loss is the same
            // congestion event (RFC 5348 §5.2: losses within a round trip of the first are
            // one event; RFC 5681 §3.2: one reduction per window of data).
            self.recovery_until_time = now + (self.rtt_s() * 1e9) as Nanos;
        }
        if congestion && !hold {
            // Every window already sent was sent at the old rate: its loss belongs to this
            // congestion event.
            self.recovery_until = self
                .next_id
                .wrapping_add(u32::from(!self.current.is_empty()));
        }
        self.controller.on_window(&WindowReport {
            packets: o.seqs.len() as u64,
            lost,
            congestion,
            hold,
            receive_rate,
            rtt: self.rtt_s(),
            rtt_sample: sample,
        });
        if congestion {
            // This window's loss is answered (or held as part of an answer).
            let n = o.seqs.len().min(self.recent.len());
            let len = self.recent.len();
            for slot in self.recent.range_mut(len - n..) {
                if *slot == Slot::Lost {
                    *slot = Slot::Answered;
                }
            }
        }
        let action = match (lost, congestion, hold) {
            (0, _, _) => Action::None,
            (_, true, false) => Action::Responded,
            (_, true, true) => Action::Held,
            (_, false, _) => Action::Ignored,
        };
        self.events.push_back(Event::Window(WindowOutcome {
            window: a.window,
            packets: o.seqs.len() as u64,
            lost,
            verdict,
            action,
            loss_rate: self.controller.loss_rate(),
            loss_count: self.controller.loss_count(),
            rate: self.controller.rate(),
            rtt: self.rtt_s(),
        }));
    }

    fn remember(&mut self, got: bool) {
        if self.history > 0 {
            if self.recent.len() == self.history {
                self.recent.pop_front();
            }
            self.recent
                .push_back(if got { Slot::Received } else { Slot::Lost });
        }
        let w = self.cfg.signature_packets;
        if w == 0 {
            return;
        }
        self.block.push(got);
        if self.block.len() == w {
            if self.block.iter().any(|g| !g) {
                let mut s = Signature::all_received(w);
                for (i, g) in self.block.iter().enumerate() {
                    if !g {
                        s.lose(i);
                    }
                }
                self.events.push_back(Event::Signature(s));
            }
            self.block.clear();
        }
    }
}
