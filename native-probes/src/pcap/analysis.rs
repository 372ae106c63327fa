//! The passive analysis of a packet stream: frames in (link type, bytes, capture time), flow
//! reports, Wren trains, IEPM-BW transfers and measurement records out. Deterministic core:
//! the capture clock is the only clock (idle flows expire by capture time), so a file
//! analysed twice gives the same output, and the live capture runs the same code. That clock
//! never goes back: [`super::timeline`] reads a step back on from where it was.
//!
//! Memory grows with the number of live flows, not with the capture: a flow's state is
//! bounded ([`super::tcp::MAX_UNACKED`], [`super::samples::EXACT`], Wren's
//! [`nowcast_core::wren::Params::max_pending`]), and a flow that closed (FIN both ways, or RST)
//! or went idle is reported and dropped, leaving only its summary. The live flows are bounded
//! too ([`Config::max_flows`]): a capture of a million one-packet flows (a SYN flood, a port
//! scan) would otherwise hold them all until `idle_ns` passed. When the table is full, the
//! flows idle longest are reported as they stand and dropped ([`Analyzer::evicted`]). Where
//! the capture was taken is judged per address ([`WrenSide::Sender`]), at most
//! [`MAX_ADDRESSES`] of them.

use super::decode::{self, flag, Addr, Endpoint, KeyHasher, Packet, Skip};
use super::reports::flow_records;
pub use super::reports::{
    DirectionReport, FlowReport, LiveRow, RttSample, Skips, TrainReport, TransferReport, Verdicts,
    WrenReport, WrenTotals, SOURCE, SOURCE_TS,
};
pub use super::sides::MAX_ADDRESSES;
use super::sides::{ttl, Handshake, Judged, Sides};
use super::tcp::{self, Half, Kind};
use super::timeline::Timeline;
use nowcast_core::iepm;
use nowcast_core::probed::{Config as SeriesConfig, Observation, Outcome, ProbedSeries};
use nowcast_core::record::{Metric, Probe, Record, Transport};
use nowcast_core::wren::{self, Departure, Train, Verdict, Wren};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Which flow directions Wren analyses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrenSide {
    /// Only where the capture was taken at the sender, judged per address from every
    /// captured handshake (this module's `Sides`): IP TTLs where they tell (a sender's
    /// initial value one way, fewer the other), else the majority of the handshakes' timings
    /// (the side whose packets are answered after a full RTT is the near one; on a path of
    /// some tens of microseconds one handshake alone is a guess, see
    /// [`WrenSide::Initiator`]); flows whose handshake was not captured are analysed.
    Sender,
    /// Only the direction from the side that opened the connection (the SYN's sender), for a
    /// capture known to be taken on that host: a proxy's capture of its own upstream
    /// connections (Zangrilli & Lowekamp §4). Nothing is judged from the handshake's timing,
    /// which on a path of some tens of microseconds can say either: the host's own time from
    /// the SYN/ACK to its ACK (a busy softirq, a queue on its way out) can exceed the round
    /// trip. Flows whose handshake was not captured are analysed both ways, as under
    /// [`WrenSide::Sender`].
    Initiator,
    /// Every direction that sends data.
    Any,
}

/// Settings of the analysis.
#[derive(Clone, Debug)]
pub struct Config {
    pub wren: wren::Params,
    pub wren_side: WrenSide,
    /// An open flow with no packet for this long (capture time) is reported and dropped.
    pub idle_ns: i64,
    /// A closed flow is kept this long for its last ACKs and retransmitted FINs.
    pub linger_ns: i64,
    /// IEPM-BW: flows between the same hosts starting within this many seconds are one
    /// transfer (the paper: 5).
    pub transfer_gap_s: f64,
    /// Keep every RTT sample with its packet number (for `--samples`).
    pub keep_samples: bool,
    /// Keep every train (for `--trains`), not only the lower bounds.
    pub keep_trains: bool,
    /// Keep each finished flow's totals for IEPM-BW's transfers at the end ([`Analyzer::finish`]);
    /// off for a capture that never ends (the proxy's), whose memory must not grow with the
    /// flows it has seen.
    pub transfers: bool,
    /// Most flows held at once (at least 1). A new flow beyond it first makes room: the
    /// flows idle longest are reported as they stand and dropped, and counted
    /// ([`Analyzer::evicted`]); a packet of one of them later starts a new flow.
    pub max_flows: usize,
}

/// [`Config::max_flows`] by default: about 100 MB of flow state, far more flows than a
/// link's normal traffic holds open at once (idle ones expire after `idle_ns`).
pub const DEFAULT_MAX_FLOWS: usize = 100_000;

impl Default for Config {
    fn default() -> Self {
        Self {
            wren: wren::Params::default(),
            wren_side: WrenSide::Sender,
            idle_ns: 300_000_000_000,
            linger_ns: 30_000_000_000,
            transfer_gap_s: 5.0,
            keep_samples: false,
            keep_trains: false,
            transfers: true,
            max_flows: DEFAULT_MAX_FLOWS,
        }
    }
}

type Key = (Endpoint, Endpoint);

/// Wren's state for one direction.
#[derive(Debug)]
enum WrenState {
    Undecided,
    /// Not analysed, and why.
    Off(&'static str),
    On(Box<WrenDir>),
}

impl WrenState {
    /// Itself, unless analysed tentatively ([`WrenDir::held`]): then as if undecided.
    fn analysed(&self) -> &WrenState {
        match self {
            WrenState::On(w) if w.held.is_some() => &WrenState::Undecided,
            w => w,
        }
    }
}

#[derive(Debug)]
struct WrenDir {
    wren: Wren,
    series: Option<ProbedSeries>,
    trains: u64,
    bounds: u64,
    verdicts: Verdicts,
    last_bound_mbps: Option<f64>,
    /// While the flow's capture point is judged on weak evidence, its trains wait here, and
    /// go out or are dropped once it is judged for good ([`settle`]); `None` after that.
    held: Option<Vec<Train>>,
}

impl WrenDir {
    fn new(params: wren::Params, tentative: bool) -> Box<Self> {
        Box::new(Self {
            wren: Wren::new(params),
            series: None,
            trains: 0,
            bounds: 0,
            verdicts: Verdicts::default(),
            last_bound_mbps: None,
            held: tentative.then(Vec::new),
        })
    }
}

/// Trains one direction holds while its flow's capture point is judged on weak evidence:
/// beyond them it is judged on what there is ([`settle`]).
const HELD_PER_DIRECTION: usize = 32;
/// Trains all flows hold at once (a train keeps up to `max_train` RTTs: about 1 MB).
const HELD_TRAINS: usize = 1024;

/// Where Wren's trains go: the reports and records, or a tentative direction's hold.
struct Out<'a> {
    trains: &'a mut Vec<TrainReport>,
    records: &'a mut Vec<Record>,
    keep: bool,
    /// Trains held by all flows ([`HELD_TRAINS`]).
    held: &'a mut usize,
}

#[derive(Debug)]
struct Flow {
    id: u64,
    /// The side that sent the first packet (the SYN, when captured).
    a: Endpoint,
    b: Endpoint,
    halves: [Half; 2],
    start_ns: i64,
    last_ns: i64,
    syn_ns: Option<i64>,
    synack_ns: Option<i64>,
    ack3_ns: Option<i64>,
    fin: [bool; 2],
    rst: bool,
    /// [`ttl`] classes seen, a→b and b→a.
    ttl: [u8; 2],
    /// Where the capture was taken, for [`WrenSide::Sender`] ([`Sides`]).
    side: Option<Judged>,
    wren: [WrenState; 2],
}

impl Flow {
    /// What [`Sides`] reads of it.
    fn handshake(&self) -> Handshake {
        Handshake {
            a: self.a.addr,
            b: self.b.addr,
            ttl: self.ttl,
            syn_ns: self.syn_ns,
            synack_ns: self.synack_ns,
            ack3_ns: self.ack3_ns,
        }
    }
    fn first_rtt_ns(&self) -> Option<i64> {
        Some(self.ack3_ns? - self.syn_ns?)
    }
    fn closed(&self) -> bool {
        self.rst || (self.fin[0] && self.fin[1])
    }
    /// The end that opened the connection, whose port names the connection and not a service:
    /// the SYN's sender when the SYN or the SYN/ACK was captured; else the one end whose port
    /// is in the ephemeral range ([`EPHEMERAL_PORTS`]), if only one is.
    fn client_end(&self) -> Option<Endpoint> {
        if self.syn_ns.is_some() || self.synack_ns.is_some() {
            return Some(self.a);
        }
        match (
            self.a.port >= EPHEMERAL_PORTS,
            self.b.port >= EPHEMERAL_PORTS,
        ) {
            (true, false) => Some(self.a),
            (false, true) => Some(self.b),
            _ => None,
        }
    }
    /// The target of direction `d`'s records: its receiver, by its address alone when it
    /// opened the connection ([`Flow::client_end`]). A client's ephemeral port names one
    /// connection, so with it every connection of a capture was a series (a target) of its
    /// own in the report and on the page; a service's port stays.
    fn target(&self, d: usize) -> String {
        let (_, to) = self.endpoints(d);
        if self.client_end() == Some(to) {
            to.addr.to_string()
        } else {
            to.to_string()
        }
    }
    fn endpoints(&self, d: usize) -> (Endpoint, Endpoint) {
        if d == 0 {
            (self.a, self.b)
        } else {
            (self.b, self.a)
        }
    }
}

/// The first port of Linux's ephemeral range (`net.ipv4.ip_local_port_range`, 32768–60999;
/// IANA's, which Windows and the BSDs use, starts at 49152): a port from here on, opposite one
/// below it, marks a connection's client when its handshake was not captured.
const EPHEMERAL_PORTS: u16 = 32768;

/// The analyser.
pub struct Analyzer {
    cfg: Config,
    /// Boxed: a slot of the map (and each of the spare slots it keeps, up to half of them)
    /// costs a key and a pointer rather than a whole flow (about 900 bytes), and growing the
    /// map moves pointers.
    flows: HashMap<Key, Box<Flow>, BuildHasherDefault<KeyHasher>>,
    next_id: u64,
    first_ns: Option<i64>,
    now_ns: i64,
    next_sweep_ns: i64,
    pub packets: u64,
    pub tcp_packets: u64,
    pub skips: Skips,
    /// Flows reported before they ended because the flow table was full
    /// ([`Config::max_flows`]).
    pub evicted: u64,
    finished: Vec<FlowReport>,
    trains: Vec<TrainReport>,
    samples: Vec<RttSample>,
    records: Vec<Record>,
    transfer_flows: Vec<((Addr, Addr), i64, iepm::Flow)>,
    scratch: Vec<Train>,
    /// Wren's totals of the flows already reported.
    wren_done: WrenTotals,
    /// Where the capture was taken, per address ([`WrenSide::Sender`]).
    sides: Sides,
    /// Trains held by tentative directions ([`HELD_TRAINS`]).
    held_trains: usize,
    /// The capture's times as read: never going back ([`Timeline`]).
    pub timeline: Timeline,
}

impl Analyzer {
    pub fn new(cfg: Config) -> Self {
        Self {
            cfg,
            flows: HashMap::default(),
            next_id: 0,
            first_ns: None,
            now_ns: 0,
            next_sweep_ns: i64::MIN,
            packets: 0,
            tcp_packets: 0,
            skips: Skips::default(),
            evicted: 0,
            finished: Vec::new(),
            trains: Vec::new(),
            samples: Vec::new(),
            records: Vec::new(),
            transfer_flows: Vec::new(),
            scratch: Vec::new(),
            wren_done: WrenTotals::default(),
            sides: Sides::default(),
            held_trains: 0,
            timeline: Timeline::default(),
        }
    }

    /// One captured frame: `packet` is its 1-based number in the capture, `ts_ns` its capture
    /// time as the capture gives it (read through [`Analyzer::timeline`]).
    pub fn frame(
        &mut self,
        packet: u64,
        link: u32,
        data: &[u8],
        orig_len: u32,
        ts_ns: i64,
    ) -> Result<(), Skip> {
        self.packets += 1;
        let ts_ns = self.timeline.read(packet, ts_ns);
        match decode::decode(link, data, orig_len, ts_ns) {
            Ok(p) => {
                self.tcp_packets += 1;
                self.segment(packet, &p, orig_len);
                Ok(())
            }
            Err(e) => {
                let s = &mut self.skips;
                match e {
                    Skip::NotIp => s.not_ip += 1,
                    Skip::NotTcp(protocol) => {
                        s.not_tcp += 1;
                        match protocol {
                            17 => s.udp += 1,
                            1 | 58 => s.icmp += 1,
                            _ => {}
                        }
                    }
                    Skip::Fragment => s.fragments += 1,
                    Skip::Link(_) => s.unknown_link += 1,
                    Skip::Truncated { .. } => s.truncated += 1,
                    Skip::Malformed(_) => s.malformed += 1,
                }
                Err(e)
            }
        }
    }

    /// One decoded TCP segment, its time already as the analysis reads it.
    pub fn segment(&mut self, packet: u64, p: &Packet, orig_len: u32) {
        let t = p.ts_ns;
        self.first_ns.get_or_insert(t);
        self.now_ns = self.now_ns.max(t);
        if self.now_ns >= self.next_sweep_ns {
            self.sweep(false);
            self.next_sweep_ns = self.now_ns + 1_000_000_000;
        }
        let key = if p.src <= p.dst {
            (p.src, p.dst)
        } else {
            (p.dst, p.src)
        };
        // A new SYN on a closed flow's ports is a new connection.
        if p.flags & (flag::SYN | flag::ACK) == flag::SYN
            && self.flows.get(&key).is_some_and(|f| f.closed())
        {
            if let Some(f) = self.flows.remove(&key) {
                self.finish_flow(f, false);
            }
        }
        // The lookup is paid only once the table is full.
        if self.flows.len() >= self.cfg.max_flows.max(1) && !self.flows.contains_key(&key) {
            self.make_room();
        }
        let next_id = &mut self.next_id;
        let flow = self.flows.entry(key).or_insert_with(|| {
            let id = *next_id;
            *next_id += 1;
            // The SYN/ACK's sender is the responder.
            let (a, b) = if p.flags & (flag::SYN | flag::ACK) == flag::SYN | flag::ACK {
                (p.dst, p.src)
            } else {
                (p.src, p.dst)
            };
            Box::new(Flow {
                id,
                a,
                b,
                halves: Default::default(),
                start_ns: t,
                last_ns: t,
                syn_ns: None,
                synack_ns: None,
                ack3_ns: None,
                fin: [false; 2],
                rst: false,
                ttl: [0; 2],
                side: None,
                wren: [WrenState::Undecided, WrenState::Undecided],
            })
        });
        flow.last_ns = t;
        let d = usize::from(p.src != flow.a);
        flow.ttl[d] |= ttl::class(p.ttl);
        // The handshake's times (for the out-of-order window and the capture side).
        let syn_ack = p.flags & (flag::SYN | flag::ACK);
        if syn_ack == flag::SYN && d == 0 && flow.synack_ns.is_none() {
            // The most recent SYN (Wireshark's `ts_mru_syn`): a SYN lost and sent again a
            // second later must not make the first RTT a second long, or every retransmission
            // within that second would read as out of order.
            flow.syn_ns = Some(t);
        } else if syn_ack == flag::SYN | flag::ACK && d == 1 && flow.synack_ns.is_none() {
            flow.synack_ns = Some(t);
        } else if syn_ack == flag::ACK
            && d == 0
            && flow.synack_ns.is_some()
            && flow.ack3_ns.is_none()
        {
            flow.ack3_ns = Some(t);
            if self.cfg.wren_side == WrenSide::Sender {
                self.sides.count(&flow.handshake());
            }
        }
        if p.has(flag::FIN) {
            flow.fin[d] = true;
        }
        if p.has(flag::RST) {
            flow.rst = true;
        }
        let first_rtt = flow.first_rtt_ns();
        let [h0, h1] = &mut flow.halves;
        let (fwd, rev) = if d == 0 { (h0, h1) } else { (h1, h0) };
        let seen = tcp::observe(fwd, rev, p, orig_len, first_rtt);
        self.skips.clock_steps += u64::from(seen.clock_steps);
        if self.cfg.keep_samples {
            for (rtt, ts) in [(seen.ack_rtt, false), (seen.ts_rtt, true)] {
                if let Some(r) = rtt {
                    self.samples.push(RttSample {
                        flow: flow.id,
                        direction: 1 - d,
                        packet,
                        timestamps: ts,
                        rtt_s: r,
                    });
                }
            }
        }
        // Wren: this direction's data departures, the other direction's ACKs.
        let rel = (t - flow.start_ns) as f64 * 1e-9;
        let mut out = Out {
            trains: &mut self.trains,
            records: &mut self.records,
            keep: self.cfg.keep_trains,
            held: &mut self.held_trains,
        };
        if p.payload_len > 0 {
            if self.cfg.wren_side == WrenSide::Sender {
                refresh(flow, &self.sides);
                if flow.side.is_some_and(|j| j.firm) {
                    settle(flow, &mut out);
                }
            }
            if matches!(flow.wren[d], WrenState::Undecided) {
                flow.wren[d] = decide_wren(flow, d, &self.cfg);
            }
            let mss = flow.halves[d].mss.or(flow.halves[1 - d].mss);
            if let WrenState::On(w) = &mut flow.wren[d] {
                let dep = Departure {
                    t: rel,
                    bytes: p.ip_len,
                    end_seq: p.seq.wrapping_add(p.payload_len),
                    super_segment: tcp::is_super(p, mss),
                    retransmission: seen.kind.is_resent() || seen.kind == Kind::KeepAlive,
                };
                w.wren.depart(dep, &mut self.scratch);
                if !self.scratch.is_empty() {
                    deliver(flow, d, std::mem::take(&mut self.scratch), &mut out);
                }
            }
        }
        if p.has(flag::ACK) {
            if let WrenState::On(w) = &mut flow.wren[1 - d] {
                w.wren.ack(p.ack, rel, &mut self.scratch);
                if !self.scratch.is_empty() {
                    deliver(flow, 1 - d, std::mem::take(&mut self.scratch), &mut out);
                }
            }
        }
    }

    /// Reports and drops flows that closed or went idle (all of them when `all`).
    fn sweep(&mut self, all: bool) {
        let now = self.now_ns;
        let (idle, linger) = (self.cfg.idle_ns, self.cfg.linger_ns);
        let done: Vec<Key> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                all || now - f.last_ns > idle || (f.closed() && now - f.last_ns > linger)
            })
            .map(|(k, _)| *k)
            .collect();
        let mut flows: Vec<Box<Flow>> = done.iter().filter_map(|k| self.flows.remove(k)).collect();
        flows.sort_by_key(|f| f.id);
        for f in flows {
            self.finish_flow(f, false);
        }
    }

    /// The flow table is full: reports and drops the flows idle longest, a sixteenth of the
    /// table at once, so that the scan of the table is paid once per batch of new flows
    /// rather than once per new flow. Capture time and flow ids decide (ties go to the older
    /// flow), so that a file analysed twice gives the same output.
    fn make_room(&mut self) {
        let n = (self.flows.len() / 16).max(1);
        let mut by_idle: Vec<(i64, u64, Key)> = self
            .flows
            .iter()
            .map(|(k, f)| (f.last_ns, f.id, *k))
            .collect();
        if n < by_idle.len() {
            by_idle.select_nth_unstable_by_key(n - 1, |x| (x.0, x.1));
            by_idle.truncate(n);
        }
        let mut flows: Vec<Box<Flow>> = by_idle
            .iter()
            .filter_map(|x| self.flows.remove(&x.2))
            .collect();
        flows.sort_by_key(|f| f.id);
        self.evicted += flows.len() as u64;
        for f in flows {
            self.finish_flow(f, true);
        }
    }

    fn finish_flow(&mut self, mut f: Box<Flow>, evicted: bool) {
        let mut out = Out {
            trains: &mut self.trains,
            records: &mut self.records,
            keep: self.cfg.keep_trains,
            held: &mut self.held_trains,
        };
        // The flow's side is judged for good now, on all the evidence counted so far.
        if self.cfg.wren_side == WrenSide::Sender {
            refresh(&mut f, &self.sides);
        }
        settle(&mut f, &mut out);
        let mut trains = Vec::new();
        for d in 0..2 {
            if let WrenState::On(w) = &mut f.wren[d] {
                w.wren.finish(&mut trains);
                emit_trains(&mut f, d, std::mem::take(&mut trains), &mut out);
            }
            self.wren_done.add(&f.wren[d]);
        }
        let report = FlowReport {
            id: f.id,
            a: f.a,
            b: f.b,
            start_ns: f.start_ns,
            last_ns: f.last_ns,
            handshake: f.ack3_ns.is_some(),
            closed: f.closed(),
            evicted,
            directions: [0, 1].map(|d| direction_report(&f, d)),
        };
        for (d, dr) in report.directions.iter().enumerate() {
            flow_records(dr, &f.target(d), &mut self.records);
            // IEPM-BW's flow records (Netflow-like): the direction that carried the data,
            // over the flow's whole duration.
            let other = &report.directions[1 - d];
            if self.cfg.transfers && dr.payload_bytes > 0 && dr.payload_bytes >= other.payload_bytes
            {
                self.transfer_flows.push((
                    (dr.from.addr, dr.to.addr),
                    report.start_ns,
                    iepm::Flow {
                        start_s: report.start_ns as f64 * 1e-9,
                        duration_s: (report.last_ns - report.start_ns) as f64 * 1e-9,
                        bytes: dr.payload_bytes as f64,
                    },
                ));
            }
        }
        self.finished.push(report);
    }

    /// Flows finished since the last call, in order of their first packet within a sweep.
    pub fn take_finished(&mut self) -> Vec<FlowReport> {
        std::mem::take(&mut self.finished)
    }

    /// Records made since the last call, in the order they were made.
    pub fn take_records(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.records)
    }

    pub fn take_trains(&mut self) -> Vec<TrainReport> {
        std::mem::take(&mut self.trains)
    }

    pub fn take_samples(&mut self) -> Vec<RttSample> {
        std::mem::take(&mut self.samples)
    }

    /// Reports and drops up to `max` of the flows still open, the oldest first as
    /// [`Analyzer::finish`] does, and returns how many: for a caller that takes the reports
    /// between batches, so that a full flow table's reports are never all held at once.
    pub fn finish_open(&mut self, max: usize) -> usize {
        let mut open: Vec<(u64, Key)> = self.flows.iter().map(|(k, f)| (f.id, *k)).collect();
        if max < open.len() {
            open.select_nth_unstable_by_key(max, |x| x.0);
            open.truncate(max);
        }
        open.sort_unstable_by_key(|x| x.0);
        for (_, k) in &open {
            if let Some(f) = self.flows.remove(k) {
                self.finish_flow(f, false);
            }
        }
        open.len()
    }

    /// Wren's totals so far, the open flows' included. Costs a look at every open flow.
    pub fn wren_totals(&self) -> WrenTotals {
        let mut t = self.wren_done;
        for f in self.flows.values() {
            f.wren.iter().for_each(|w| t.add(w));
        }
        t
    }

    /// Flows seen so far, open, finished or evicted.
    pub fn flows_seen(&self) -> u64 {
        self.next_id
    }

    /// Flows still open.
    pub fn live_flows(&self) -> usize {
        self.flows.len()
    }

    /// The end of the capture: every open flow is reported, then the IEPM-BW transfers
    /// (with their records) are formed from all flows.
    pub fn finish(&mut self) -> Vec<TransferReport> {
        self.sweep(true);
        let mut by_pair: HashMap<(Addr, Addr), Vec<(i64, iepm::Flow)>> = HashMap::new();
        for (pair, start, f) in std::mem::take(&mut self.transfer_flows) {
            by_pair.entry(pair).or_default().push((start, f));
        }
        let mut pairs: Vec<_> = by_pair.into_iter().collect();
        pairs.sort_by_key(|(_, v)| v.iter().map(|x| x.0).min());
        let mut out = Vec::new();
        for ((from, to), flows) in pairs {
            let only: Vec<iepm::Flow> = flows.iter().map(|x| x.1).collect();
            for group in iepm::group_transfers(&only, self.cfg.transfer_gap_s) {
                let Some(m) = iepm::multi_stream(&group) else {
                    continue;
                };
                let start_s = group.iter().map(|g| g.start_s).fold(f64::MAX, f64::min);
                let t = TransferReport {
                    from,
                    to,
                    start_ns: (start_s * 1e9).round() as i64,
                    streams: group.len(),
                    bytes: group.iter().map(|g| g.bytes).sum(),
                    mbps: [m.method1, m.method2, m.method3].map(|b| b * 8.0 / 1e6),
                };
                for (i, v) in t.mbps.iter().enumerate() {
                    let mut r = Record::new(
                        start_s * 1e3,
                        &format!("pcap iepm method {}", i + 1),
                        Metric::Throughput,
                        *v,
                        &to.to_string(),
                    );
                    r.from = Some(from.to_string());
                    r.probe = Some(Probe {
                        transport: Some(Transport::Pcap),
                        payload_bytes: Some(t.bytes as u64),
                        streams: Some(t.streams as u32),
                        ..Probe::default()
                    });
                    self.records.push(r);
                }
                out.push(t);
            }
        }
        out
    }

    /// The flows still open, for the live table.
    pub fn live_rows(&self) -> Vec<LiveRow> {
        let mut rows = Vec::new();
        // A flow both ends closed is over: reported when it is swept, not shown as open.
        for f in self.flows.values().filter(|f| !f.closed()) {
            for d in 0..2 {
                let h = &f.halves[d];
                if h.payload_bytes == 0 {
                    continue;
                }
                let (from, to) = f.endpoints(d);
                let (last, fc) = match f.wren[d].analysed() {
                    WrenState::On(w) => (
                        w.last_bound_mbps,
                        w.series.as_ref().and_then(|s| s.next()).map(|n| n.value),
                    ),
                    _ => (None, None),
                };
                rows.push(LiveRow {
                    id: f.id,
                    from,
                    to,
                    new_bytes: h.new_bytes,
                    packets: h.packets,
                    ack_rtt_median_s: h.ack_rtt.summary().map(|s| s.median),
                    ts_rtt_median_s: h.ts_rtt.summary().map(|s| s.median),
                    retransmissions: h.retransmissions
                        + h.fast_retransmissions
                        + h.spurious_retransmissions,
                    last_bound_mbps: last,
                    forecast_mbps: fc,
                });
            }
        }
        rows.sort_by_key(|r| (r.id, r.from));
        rows
    }
}

/// Judges the flow's capture point ([`WrenSide::Sender`]) once its handshake was captured,
/// and again while the judgement is weak and more evidence has been counted since.
fn refresh(f: &mut Flow, sides: &Sides) {
    let stale = match f.side {
        None => f.ack3_ns.is_some(),
        Some(j) => !j.firm && j.version != sides.version,
    };
    if stale {
        f.side = sides.judge(&f.handshake());
    }
}

/// Commits the directions analysed tentatively to the flow's judgement as it stands: the
/// sender's direction has its held trains reported, the receiver's is dropped unreported.
fn settle(f: &mut Flow, out: &mut Out) {
    for d in 0..2 {
        let held = match &mut f.wren[d] {
            WrenState::On(w) => w.held.take(),
            _ => None,
        };
        let Some(held) = held else {
            continue;
        };
        *out.held -= held.len();
        match f.side {
            Some(j) if j.near_a != (d == 0) => f.wren[d] = WrenState::Off(j.receiver_reason()),
            _ => emit_trains(f, d, held, out),
        }
    }
}

/// New trains of direction `d`: held while it is analysed tentatively and there is room,
/// reported otherwise (a full hold has the flow judged on the evidence there is).
fn deliver(f: &mut Flow, d: usize, trains: Vec<Train>, out: &mut Out) {
    if let WrenState::On(w) = &mut f.wren[d] {
        if let Some(held) = &mut w.held {
            if held.len() + trains.len() <= HELD_PER_DIRECTION
                && *out.held + trains.len() <= HELD_TRAINS
            {
                *out.held += trains.len();
                held.extend(trains);
                return;
            }
            settle(f, out);
        }
    }
    emit_trains(f, d, trains, out);
}

fn decide_wren(f: &Flow, d: usize, cfg: &Config) -> WrenState {
    let near_initiator = match cfg.wren_side {
        WrenSide::Any => None,
        WrenSide::Sender => match f.side {
            // Weak evidence: analysed, its trains held until it is judged for good.
            Some(j) if !j.firm => return WrenState::On(WrenDir::new(cfg.wren, true)),
            side => side.map(|j| (j.near_a, j.receiver_reason())),
        },
        // `a` is the SYN's sender once the SYN or the SYN/ACK was seen.
        WrenSide::Initiator => (f.syn_ns.is_some() || f.synack_ns.is_some())
            .then_some((true, "the capture is at the receiver")),
    };
    if let Some((_, why)) = near_initiator.filter(|(near, _)| *near != (d == 0)) {
        return WrenState::Off(why);
    }
    WrenState::On(WrenDir::new(cfg.wren, false))
}

/// Reports direction `d`'s trains (nothing unless it is analysed): counts, lower bounds into
/// its series and records, and the trains themselves when kept.
fn emit_trains(f: &mut Flow, d: usize, trains: Vec<Train>, out: &mut Out) {
    let (id, flow_start_ns) = (f.id, f.start_ns);
    let (from, to) = f.endpoints(d);
    let target = f.target(d);
    let WrenState::On(w) = &mut f.wren[d] else {
        return;
    };
    for train in trains {
        w.trains += 1;
        let v = &mut w.verdicts;
        match train.verdict {
            Verdict::LowerBound => {}
            Verdict::Increasing => v.increasing += 1,
            Verdict::RatesDiffer => v.rates_differ += 1,
            Verdict::TooFewAcks => v.too_few_acks += 1,
            Verdict::AcksAtOneInstant => v.acks_at_one_instant += 1,
            Verdict::Unacknowledged => v.unacknowledged += 1,
        }
        if let Some(bps) = train.lower_bound_bps() {
            w.bounds += 1;
            let mbps = bps / 1e6;
            w.last_bound_mbps = Some(mbps);
            let series = w.series.get_or_insert_with(|| {
                let mut c = SeriesConfig::new(
                    Metric::AvailBwLowerBound,
                    Some(Transport::Pcap),
                    SOURCE,
                    &target,
                );
                c.from = Some(from.to_string());
                ProbedSeries::new(c).expect("the default profile is valid")
            });
            let ts_ms = flow_start_ns as f64 / 1e6 + train.end * 1e3;
            let mut obs = Observation::new(
                ts_ms,
                Outcome::Measured {
                    value: mbps,
                    duration_ms: None,
                },
                None,
            );
            obs.probe = Some(Probe {
                transport: Some(Transport::Pcap),
                payload_bytes: Some((train.bits / 8.0) as u64),
                ..Probe::default()
            });
            out.records.push(series.observe(obs));
        }
        if out.keep {
            out.trains.push(TrainReport {
                flow: id,
                from,
                to,
                flow_start_ns,
                train,
            });
        }
    }
}

impl WrenTotals {
    fn add(&mut self, w: &WrenState) {
        // A tentative direction is not yet known to be analysed.
        if let WrenState::On(w) = w.analysed() {
            self.directions += 1;
            self.trains += w.trains;
            self.lower_bounds += w.bounds;
            self.verdicts.add(&w.verdicts);
            self.skipped.add(&w.wren.skipped());
        }
    }
}

fn direction_report(f: &Flow, d: usize) -> DirectionReport {
    let h = &f.halves[d];
    let (from, to) = f.endpoints(d);
    let duration = (h.last_ns - h.first_ns) as f64 * 1e-9;
    let retrans = h.retransmissions + h.fast_retransmissions + h.spurious_retransmissions;
    let (wren, wren_off) = match &f.wren[d] {
        WrenState::On(w) => (
            Some(WrenReport {
                trains: w.trains,
                lower_bounds: w.bounds,
                verdicts: w.verdicts,
                last_bound_mbps: w.last_bound_mbps,
                forecast: w.series.as_ref().and_then(|s| s.next()),
                skipped: w.wren.skipped(),
            }),
            None,
        ),
        WrenState::Off(why) => (None, Some(*why)),
        WrenState::Undecided => (None, None),
    };
    DirectionReport {
        from,
        to,
        packets: h.packets,
        frame_bytes: h.frame_bytes,
        payload_bytes: h.payload_bytes,
        new_bytes: h.new_bytes,
        first_ns: h.first_ns,
        last_ns: h.last_ns,
        throughput_mbps: (h.new_bytes > 0 && duration > 0.0)
            .then(|| h.new_bytes as f64 * 8.0 / duration / 1e6),
        retransmissions: retrans,
        fast_retransmissions: h.fast_retransmissions,
        spurious_retransmissions: h.spurious_retransmissions,
        out_of_order: h.out_of_order,
        data_packets: h.data_packets,
        loss: (h.data_packets > 0).then(|| (retrans as f64 / h.data_packets as f64).min(1.0)),
        ack_rtt: h.ack_rtt.summary(),
        ts_rtt: h.ts_rtt.summary(),
        super_segments: h.super_segments,
        wren,
        wren_off,
    }
}

#[cfg(test)]
mod tests;
