//! `nowcast`: the native companion of the Nowcast page. Each subcommand prints for humans by
//! default and NDJSON / JSON with `--json`.

mod delay_cmd;
mod forecast_cmd;
mod periodic;
mod serve_cmd;
mod tcp_cmd;
mod udp_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "nowcast",
    version,
    about = "Network weather from the command line: probes, forecasts and their evaluation",
    long_about = "Network weather from the command line. Measures RTT and bandwidth with \
                  NWS-style probes, forecasts measurement series with the Network Weather \
                  Service forecaster bank, and evaluates forecasters and timeout rules over \
                  recorded series. Records use the Nowcast measurement schema \
                  (public/schema/measurement-record.v1.schema.json)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the forecaster bank over a series and report every forecaster's errors.
    Forecast(forecast_cmd::Args),
    /// Answer `nowcast tcp` and `nowcast udp` probes (TCP echo and sink, UDP echo).
    Serve(serve_cmd::Args),
    /// NWS TCP probe: handshake, 2-byte RTT with Nagle off and on, bandwidth, forecasts.
    Tcp(tcp_cmd::Args),
    /// UDP probe: RTT, jitter, loss, reordering and duplicates, with forecasts.
    Udp(udp_cmd::Args),
    /// Relay TCP or UDP with a fixed added delay (emulated links in the accuracy tests).
    #[command(hide = true)]
    Delay(delay_cmd::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Forecast(args) => forecast_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Tcp(args) => tcp_cmd::run(args),
        Command::Udp(args) => udp_cmd::run(args),
        Command::Delay(args) => delay_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nowcast: {e:#}");
            ExitCode::FAILURE
        }
    }
}
