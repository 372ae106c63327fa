//! `nowcast forecast FILE`: its flags, turned into a [`nowcast::forecast::Config`].

use anyhow::Result;
use nowcast::forecast::{self, Config, Modes};
use nowcast::series_input::{parse_column, Column, Format, ReadOptions, MAX_LINE};
use nowcast_core::import::Select;
use nowcast_core::record::{Metric, Transport};
use nowcast_core::timeout::Bounds;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Prints the forecast of the next value with its likely range (the forecast ± \
    2·error, the error being the RMSE of the MSE-selected forecast, as on the page and in \
    `nowcast tcp` records), then every forecaster's errors, in the series' unit (from the \
    file's metric, or a CSV column named like rtt_ms; rates scaled to kbit/s, Mbit/s or \
    Gbit/s). --json prints one object: mode, unit, input (what was read) and report (next, \
    selected, baselines, primaries, timeouts; each NWS row names its mode).\n\n\
    Input formats, told apart by their content (the page imports the same, \
    through the same reader): NDJSON measurement records (one series per metric, transport, \
    target and source; records that timed out or failed are counted, not forecast), CSV (with or \
    without a header; the page's export, whose metric column makes one series per metric), \
    `time<TAB>value`, one number a line, iperf3 -J (bandwidth up or down; UDP jitter and \
    loss), ping output (Linux iputils), mtr --json (the last hop's RTT and loss), irtt JSON \
    (RTT, jitter, loss) and sockperf --full-log. A file with several series: the first is \
    read (in CSV the column named 'value', else the last column of numbers: columns of \
    text are never chosen, and the one read is named), and the others \
    are listed with the options that choose them (--metric, --target, --transport, \
    --source, --column). Lines starting with # are comments. Errors are measured over points 2..n: \
    each forecast is made before the value it forecasts (in faithful mode the Exp Smooth \
    forecasters, which start at 0 as the original NWS library's do, and the oracle over \
    1..n). A compressed file is named, not read: decompress it first (gzip -dc FILE | \
    nowcast forecast -)."
)]
pub struct Args {
    /// The series file, or - for standard input.
    file: PathBuf,
    /// Input layout.
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    format: Format,
    /// CSV column holding the values: a header name or a 0-based index.
    #[arg(long, value_parser = parse_column)]
    column: Option<Column>,
    /// The series of this metric (default: the first series), e.g. rtt, bandwidth_down.
    #[arg(long, value_parser = parse_name::<Metric>)]
    metric: Option<Metric>,
    /// The series measured to this target (a record's `to`, e.g. host:port; a client's series
    /// from one service as its name gives it, e.g. '10.0.0.5 from 10.0.0.1:80').
    #[arg(long)]
    target: Option<String>,
    /// The series measured over this transport (websocket, http, tcp, udp, …).
    #[arg(long, value_parser = parse_name::<Transport>)]
    transport: Option<Transport>,
    /// The series measured by this tool (a record's `source`: nowcast tcp, pcap, pcap
    /// timestamps, browser, …).
    #[arg(long)]
    source: Option<String>,
    /// Skip malformed lines (they are counted and reported) instead of stopping.
    #[arg(long)]
    skip_bad: bool,
    /// Which forecaster bank: the original NWS library's (faithful), Nowcast's (improved),
    /// or both side by side. Primaries, oracle and timeout rules are the improved bank's
    /// when both run.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
    /// Lowest timeout, in the series' unit.
    #[arg(long, default_value_t = 0.0)]
    timeout_floor: f64,
    /// Highest timeout, in the series' unit (default: none).
    #[arg(long)]
    timeout_ceiling: Option<f64>,
}

/// A name of the record schema (a metric, a transport), as the core's table spells it.
fn parse_name<T: std::str::FromStr<Err = String>>(s: &str) -> Result<T, String> {
    s.parse()
}

pub fn run(args: Args) -> Result<()> {
    let ceiling = args.timeout_ceiling.unwrap_or(f64::INFINITY);
    if !(args.timeout_floor >= 0.0 && ceiling >= args.timeout_floor) {
        usage!("--timeout-floor must be ≥ 0 and ≤ --timeout-ceiling");
    }
    let cfg = Config {
        file: args.file,
        read: ReadOptions {
            format: args.format,
            select: Select {
                metric: args.metric,
                target: args.target,
                transport: args.transport,
                source: args.source,
                column: args.column,
            },
            skip_bad: args.skip_bad,
            max_line: MAX_LINE,
        },
        modes: args.mode,
        json: args.json,
        bounds: Bounds {
            floor: args.timeout_floor,
            ceiling,
            penalty: 0.0,
        },
    };
    forecast::run(&cfg, &mut std::io::stdout().lock())
}
