//! The command line: clap's flags parsed into plain configuration, handed to the library.
//! Nothing here measures or decides; each subcommand's module only converts and wires.

mod archive;
mod bench;
mod campaign;
mod common;
mod delay;
mod forecast;
mod pcap;
mod proxy;
mod report;
mod serve;
mod tcp;
mod udp;

use clap::{Parser, Subcommand};
use nowcast::output::is_broken_pipe;
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
    Forecast(forecast::Args),
    /// Passive analysis of TCP traffic in capture files or live: per-flow throughput, RTT
    /// (data→ACK and timestamps), retransmissions, IEPM-BW transfers, Wren available bandwidth.
    Pcap(pcap::Args),
    /// HTTP/1.1 reverse proxy that sends each request to the replica forecast to be fastest
    /// (available bandwidth and RTT from the traffic it carries; Wren proxy, §4–5).
    Proxy(proxy::Args),
    /// Answer `nowcast tcp` and `nowcast udp` probes (TCP echo and sink, UDP echo).
    Serve(serve::Args),
    /// NWS TCP probe: handshake, 2-byte RTT with Nagle off and on, bandwidth, forecasts.
    Tcp(tcp::Args),
    /// UDP probe: RTT, jitter, loss, reordering and duplicates, with forecasts.
    Udp(udp::Args),
    /// Scheduled measurements to many targets (IEPM-BW): run, status, check.
    Campaign(campaign::Args),
    /// IEPM-BW's analysis of the archive: forecasts, diurnal fits, active vs passive.
    Report(report::Args),
    /// The measurement archive: import, export, query, schema.
    Archive(archive::Args),
    /// Experiments that reproduce the papers' tables (timeouts: Allen, Wolski & Plank).
    Bench(bench::Args),
    /// Relay TCP or UDP with a fixed added delay (emulated links in the accuracy tests).
    #[command(hide = true)]
    Delay(delay::Args),
}

/// Parses the command line, runs the subcommand and turns its result into an exit status:
/// a reader that went away (`| head`) is a quiet success, as for any Unix filter.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Forecast(args) => forecast::run(args),
        Command::Pcap(args) => pcap::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Tcp(args) => tcp::run(args),
        Command::Udp(args) => udp::run(args),
        Command::Delay(args) => delay::run(args),
        Command::Campaign(args) => campaign::run(args),
        Command::Report(args) => report::run(args),
        Command::Archive(args) => archive::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nowcast: {e:#}");
            ExitCode::FAILURE
        }
    }
}
