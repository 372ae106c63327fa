//! `nowcast forecast FILE`: its flags, turned into a [`nowcast::forecast::Config`].

use anyhow::{bail, Result};
use nowcast::forecast::{self, Config};
use nowcast::series_input::{Column, Format, ReadOptions, MAX_LINE};
use nowcast_core::record::Metric;
use nowcast_core::timeout::Bounds;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Input formats: NDJSON measurement records (values of one metric; \
    records that timed out or failed are counted, not forecast), CSV (the column named \
    'value', else the last, or --column), `time<TAB>value`, or one number a line. Lines \
    starting with # are comments. Errors are measured over points 2..n: each forecast is \
    made before the value it forecasts."
)]
pub struct Args {
    /// The series file, or - for standard input.
    file: PathBuf,
    /// Input layout.
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    format: Format,
    /// CSV column holding the values: a header name or a 0-based index.
    #[arg(long)]
    column: Option<Column>,
    /// NDJSON: the metric to read (default: the first record's), e.g. rtt, bandwidth_down.
    #[arg(long, value_parser = parse_metric)]
    metric: Option<Metric>,
    /// Skip malformed lines (they are counted and reported) instead of stopping.
    #[arg(long)]
    skip_bad: bool,
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

fn parse_metric(s: &str) -> Result<Metric, String> {
    serde_json::from_value(serde_json::Value::String(s.into())).map_err(|_| {
        format!("unknown metric '{s}' (e.g. rtt, rtt_nagle, bandwidth_up, bandwidth_down, loss)")
    })
}

pub fn run(args: Args) -> Result<()> {
    let ceiling = args.timeout_ceiling.unwrap_or(f64::INFINITY);
    if !(args.timeout_floor >= 0.0 && ceiling >= args.timeout_floor) {
        bail!("--timeout-floor must be ≥ 0 and ≤ --timeout-ceiling");
    }
    let cfg = Config {
        file: args.file,
        read: ReadOptions {
            format: args.format,
            column: args.column,
            metric: args.metric,
            skip_bad: args.skip_bad,
            max_line: MAX_LINE,
        },
        json: args.json,
        bounds: Bounds {
            floor: args.timeout_floor,
            ceiling,
            penalty: 0.0,
        },
    };
    forecast::run(&cfg, &mut std::io::stdout().lock())
}
