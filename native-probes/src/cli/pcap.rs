//! `nowcast pcap FILE…` and `nowcast pcap --live IFACE`: flags into the analysis'
//! configuration and the record sink, then [`nowcast::pcap::run`].

use anyhow::Result;
use nowcast::output::{Ndjson, RecordSink};
use nowcast::pcap::analysis::{Config, WrenSide, DEFAULT_MAX_FLOWS};
use nowcast::pcap::run::{self, Input, Show, DEFAULT_ROWS};
use nowcast_core::wren::Params;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  nowcast pcap trace.pcapng\n  nowcast pcap --json trace.pcap > records.ndjson\n  \
    nowcast pcap --flows --trains a.pcap b.pcapng\n  sudo nowcast pcap --live eth0 --filter 'tcp port 443' --duration 30\n\n\
    Per TCP flow and direction: packets, bytes (frames as on the wire, as tshark's conv,tcp), \
    goodput, retransmissions (as tshark's tcp.analysis.retransmission: fast and spurious \
    included), out-of-order segments, data→ACK RTT (Karn's rule) and timestamp RTT (pping's \
    rule) with min/median/p90/max; IEPM-BW multi-stream throughput per transfer (methods 1-3); \
    Wren's available-bandwidth lower bounds with the forecaster bank's next-value forecast.\n\
    Records (--json): source \"pcap\" (throughput, rtt, loss, avail_bw_lower_bound), \
    \"pcap timestamps\" (rtt by TCP timestamps), \"pcap iepm method N\" (transfer throughput); \
    the flow in from/to."
)]
pub struct Args {
    /// Capture files (pcap or pcapng), analysed in order as one capture; `-` reads standard
    /// input.
    #[arg(required_unless_present = "live", conflicts_with = "live")]
    files: Vec<PathBuf>,
    /// Capture live on this interface (`any` for all) instead of reading files. Needs the
    /// CAP_NET_RAW capability.
    #[arg(long, value_name = "IFACE")]
    live: Option<String>,
    /// BPF filter for --live (tcpdump's syntax).
    #[arg(long, value_name = "BPF", requires = "live")]
    filter: Option<String>,
    /// Stop --live after this many seconds (default: at Ctrl-C).
    #[arg(long, value_name = "S", requires = "live")]
    duration: Option<f64>,
    /// Bytes kept of each live packet.
    #[arg(long, default_value_t = 256, requires = "live")]
    snaplen: i32,
    /// NDJSON measurement records on standard output instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the NDJSON records to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// A block per flow instead of the summary table: key=value fields (RTTs in ms), the
    /// flow's line starting `flow=`, its directions' indented under it.
    #[arg(long)]
    flows: bool,
    /// Every Wren train: a table per direction.
    #[arg(long)]
    trains: bool,
    /// One line per RTT sample (ms) with the number of the packet that completed it.
    #[arg(long)]
    samples: bool,
    /// Wren: α of the train condition min log Δ > max log Δ − α (Wren §3.2).
    #[arg(long, default_value_t = 1.0)]
    wren_alpha: f64,
    /// Wren: fewest packets in a train (Wren §3.2).
    #[arg(long, default_value_t = 7)]
    wren_min_train: usize,
    /// Wren: most packets in a train (a longer evenly spaced run is cut).
    #[arg(long, default_value_t = 100)]
    wren_max_train: usize,
    /// Wren: the ISR and the ACK return rate are "similar" within this fraction of the ISR.
    #[arg(long, default_value_t = 0.1)]
    wren_tolerance: f64,
    /// Wren: count the first packet's bits in the rates (the paper's literal wording, which
    /// overstates a steady rate by n/(n−1)).
    #[arg(long)]
    wren_count_first: bool,
    /// Wren: analyse every direction that sends data, not only where the capture is at the
    /// sender.
    #[arg(long)]
    wren_any_side: bool,
    /// IEPM-BW: flows between the same hosts starting within this many seconds are one
    /// transfer.
    #[arg(long, default_value_t = 5.0)]
    transfer_gap: f64,
    /// A flow with no packet for this many seconds is reported and forgotten.
    #[arg(long, default_value_t = 300.0)]
    idle: f64,
    /// Most flows held at once: beyond it, the flows idle longest are reported as they stand
    /// to make room, and the output says how many.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FLOWS)]
    max_flows: usize,
    /// Most rows of the summary table: the flows with the most bytes, in the order they ended
    /// (the output says how many were left out; --flows or --json give every flow).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ROWS)]
    rows: usize,
}

pub fn run(args: Args) -> Result<()> {
    if !(args.wren_alpha.is_finite() && args.wren_alpha > 0.0) {
        usage!("--wren-alpha must be a positive number");
    }
    if args.wren_min_train < 3 || args.wren_max_train < args.wren_min_train {
        usage!("--wren-min-train must be at least 3 and at most --wren-max-train");
    }
    if !(args.wren_tolerance.is_finite() && args.wren_tolerance >= 0.0) {
        usage!("--wren-tolerance must be ≥ 0");
    }
    if !(args.transfer_gap.is_finite() && args.transfer_gap >= 0.0) {
        usage!("--transfer-gap must be ≥ 0 seconds");
    }
    if !(args.idle.is_finite() && args.idle > 0.0) {
        usage!("--idle must be a positive number of seconds");
    }
    if args.max_flows == 0 {
        usage!("--max-flows must be at least 1");
    }
    if args.rows == 0 {
        usage!("--rows must be at least 1 (--json alone prints no table)");
    }
    // clap's `requires` let these through with files, and they were ignored without a word.
    if args.live.is_none() {
        if let Some(f) = &args.filter {
            usage!(
                "--filter applies to --live captures; to analyse part of a file, filter it \
                 first: tcpdump -r IN.pcap -w OUT.pcap '{f}'"
            );
        }
        if args.duration.is_some() {
            usage!("--duration applies to --live captures; a file is read to its end");
        }
    }
    if let Some(out) = &args.out {
        super::common::refuse_an_input(
            out,
            &args.files,
            "writing the records would empty before it is read",
        )?;
    }
    let duration = match args.duration {
        Some(d) if !(d.is_finite() && d > 0.0) => usage!("--duration must be positive"),
        d => d.map(Duration::from_secs_f64),
    };
    let cfg = Config {
        wren: Params {
            alpha: args.wren_alpha,
            min_train: args.wren_min_train,
            max_train: args.wren_max_train,
            rate_tolerance: args.wren_tolerance,
            count_first_packet: args.wren_count_first,
            ..Params::default()
        },
        wren_side: if args.wren_any_side {
            WrenSide::Any
        } else {
            WrenSide::Sender
        },
        idle_ns: (args.idle * 1e9) as i64,
        transfer_gap_s: args.transfer_gap,
        max_flows: args.max_flows,
        ..Config::default()
    };
    let input = match args.live {
        Some(iface) => Input::Live {
            iface,
            filter: args.filter,
            duration,
            snaplen: args.snaplen.max(64),
        },
        None => Input::Files(args.files),
    };
    let show = Show {
        flows: args.flows,
        trains: args.trains,
        samples: args.samples,
        json: args.json,
        rows: args.rows,
    };
    // Records go to standard output with --json, to --out's file, or both; without either
    // they are made and dropped (the table shows them).
    let mut sink: Box<dyn RecordSink> = match (args.json, &args.out) {
        (true, Some(p)) => Box::new(nowcast::output::Tee(
            Ndjson::new(std::io::stdout()),
            Ndjson::create(p)?,
        )),
        (true, None) => Box::new(Ndjson::new(std::io::stdout())),
        (false, Some(p)) => Box::new(Ndjson::create(p)?),
        (false, None) => Box::new(Ndjson::new(std::io::sink())),
    };
    run::run(input, cfg, show, &mut *sink)
}
