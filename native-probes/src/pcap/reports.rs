//! What the analyser reports: per flow and direction (counts, RTTs, Wren's trains and
//! bounds), live rows, IEPM-BW transfers, and the measurement records made from them.

use super::decode::{Addr, Endpoint};
use super::samples::Summary;
use nowcast_core::record::{Metric, Probe, Record, RecordForecast, Transport};
use nowcast_core::wren::{Skipped, Train};

/// The records' source.
pub const SOURCE: &str = "pcap";
/// The source of the timestamp-method RTT records (a series of its own on the page).
pub const SOURCE_TS: &str = "pcap timestamps";

/// One direction of a finished flow.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionReport {
    pub from: Endpoint,
    pub to: Endpoint,
    pub packets: u64,
    pub frame_bytes: u64,
    pub payload_bytes: u64,
    pub new_bytes: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    /// Goodput: new payload bits over the direction's duration, Mbit/s.
    pub throughput_mbps: Option<f64>,
    /// Segments tshark's `tcp.analysis.retransmission` counts (fast and spurious included).
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub spurious_retransmissions: u64,
    pub out_of_order: u64,
    pub data_packets: u64,
    /// Retransmitted data segments over data segments.
    pub loss: Option<f64>,
    pub ack_rtt: Option<Summary>,
    pub ts_rtt: Option<Summary>,
    pub super_segments: u64,
    pub wren: Option<WrenReport>,
    /// Why Wren did not analyse this direction, when it sent data.
    pub wren_off: Option<&'static str>,
}

impl DirectionReport {
    pub fn duration_s(&self) -> f64 {
        (self.last_ns - self.first_ns) as f64 * 1e-9
    }
}

/// How many trains got each verdict that is not a lower bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    pub increasing: u64,
    pub rates_differ: u64,
    /// Fewer than two packets with an explicit ACK (delayed or stretch ACKs).
    pub too_few_acks: u64,
    pub acks_at_one_instant: u64,
    pub unacknowledged: u64,
}

impl Verdicts {
    pub(super) fn add(&mut self, o: &Verdicts) {
        self.increasing += o.increasing;
        self.rates_differ += o.rates_differ;
        self.too_few_acks += o.too_few_acks;
        self.acks_at_one_instant += o.acks_at_one_instant;
        self.unacknowledged += o.unacknowledged;
    }
}

/// What Wren made of every direction it analysed since the analyser started, open flows
/// included ([`super::analysis::Analyzer::wren_totals`]): the flow reports say it per direction, but only once a
/// flow ends, and a capture that never ends (the proxy's, whose connections are kept alive)
/// must say while they are open why they give no lower bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrenTotals {
    /// Directions that sent data and were analysed.
    pub directions: u64,
    pub trains: u64,
    pub lower_bounds: u64,
    /// The trains that gave no lower bound, by why.
    pub verdicts: Verdicts,
    /// Packets and runs left out of trains, by why.
    pub skipped: Skipped,
}

/// Wren's results for one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct WrenReport {
    pub trains: u64,
    pub lower_bounds: u64,
    pub verdicts: Verdicts,
    pub last_bound_mbps: Option<f64>,
    /// The forecaster bank's forecast of the next lower bound.
    pub forecast: Option<RecordForecast>,
    pub skipped: Skipped,
}

/// A finished flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowReport {
    /// 0-based, in order of first packet (tshark's `tcp.stream`).
    pub id: u64,
    pub a: Endpoint,
    pub b: Endpoint,
    pub start_ns: i64,
    pub last_ns: i64,
    /// The handshake was captured (SYN, SYN/ACK and the ACK).
    pub handshake: bool,
    pub closed: bool,
    /// Reported before it closed or went idle, to make room in a full flow table
    /// ([`Config::max_flows`]).
    pub evicted: bool,
    /// a→b, then b→a.
    pub directions: [DirectionReport; 2],
}

/// A Wren train with its flow.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainReport {
    pub flow: u64,
    pub from: Endpoint,
    pub to: Endpoint,
    /// The flow's first packet, ns since 1970 (train times are relative to it).
    pub flow_start_ns: i64,
    pub train: Train,
}

/// One RTT sample, for `--samples` (comparison with tshark packet by packet).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RttSample {
    /// The flow's number (`--flows`' `flow=`).
    pub flow: u64,
    /// The direction whose data or TSval the sample times: 0 from the flow's `a` to `b`
    /// (`--flows`' `ab.`), 1 back (`ba.`). The packet that completed it went the other way.
    pub direction: usize,
    /// 1-based number of the packet that completed the sample (tshark's `frame.number`).
    pub packet: u64,
    /// `true` for the timestamp method, `false` for data→ACK.
    pub timestamps: bool,
    pub rtt_s: f64,
}

/// An IEPM-BW transfer: flows between two hosts starting within the gap of each other.
#[derive(Clone, Debug, PartialEq)]
pub struct TransferReport {
    pub from: Addr,
    pub to: Addr,
    pub start_ns: i64,
    pub streams: usize,
    pub bytes: f64,
    /// Methods 1, 2 and 3, Mbit/s.
    pub mbps: [f64; 3],
}

/// Frames that gave no TCP segment, by reason; and RTT samples left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skips {
    pub not_ip: u64,
    /// IP, not TCP; of them, UDP and ICMP (v4 and v6).
    pub not_tcp: u64,
    pub udp: u64,
    pub icmp: u64,
    pub fragments: u64,
    pub unknown_link: u64,
    pub truncated: u64,
    pub malformed: u64,
    /// RTT samples that spanned a step of the capture's clock ([`tcp::MAX_RTT_S`]).
    pub clock_steps: u64,
}

/// The live view of a flow still open.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveRow {
    pub id: u64,
    pub from: Endpoint,
    pub to: Endpoint,
    pub new_bytes: u64,
    pub packets: u64,
    pub ack_rtt_median_s: Option<f64>,
    pub ts_rtt_median_s: Option<f64>,
    pub retransmissions: u64,
    pub last_bound_mbps: Option<f64>,
    pub forecast_mbps: Option<f64>,
}
/// The records of one finished flow direction that sent data, to `to` (its receiver as a
/// target: [`Flow::target`](super::analysis)): throughput, both RTTs, loss;
/// timed at the direction's first packet, as the transfers' records and every probe's are.
/// The throughput's probe carries the time it was measured over (`raw_ms`, the direction's
/// duration) beside its bytes, so that `nowcast report` can group flows into transfers and
/// compare them with active runs by IEPM-BW's three methods: without it every flow was
/// compared only "as recorded", and its end time (what the records carried) was a transfer's
/// length away from the run it belonged to.
pub(super) fn flow_records(d: &DirectionReport, to: &str, out: &mut Vec<Record>) {
    if d.payload_bytes == 0 {
        return;
    }
    let from = d.from.to_string();
    let ts_ms = d.first_ns as f64 / 1e6;
    let mut push = |source: &str, metric: Metric, value: f64, raw_ms: Option<f64>| {
        let mut r = Record::new(ts_ms, source, metric, value, to);
        r.from = Some(from.clone());
        r.probe = Some(Probe {
            transport: Some(Transport::Pcap),
            payload_bytes: Some(d.new_bytes),
            raw_ms,
            ..Probe::default()
        });
        out.push(r);
    };
    if let Some(t) = d.throughput_mbps {
        push(SOURCE, Metric::Throughput, t, Some(d.duration_s() * 1e3));
    }
    if let Some(s) = d.ack_rtt {
        push(SOURCE, Metric::Rtt, s.median * 1e3, None);
    }
    if let Some(s) = d.ts_rtt {
        push(SOURCE_TS, Metric::Rtt, s.median * 1e3, None);
    }
    if let Some(l) = d.loss {
        push(SOURCE, Metric::Loss, l, None);
    }
}
