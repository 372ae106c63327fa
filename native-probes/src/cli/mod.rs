//! The command line: clap's flags parsed into plain configuration, handed to the library.
//! Nothing here measures or decides; each subcommand's module only converts and wires.

/// Refuses a bad option value, naming the flag: exit status 2 ([`EXIT_ERROR`]), as clap's own
/// refusals of a flag it cannot parse, whichever command it is.
macro_rules! usage {
    ($($t:tt)*) => {
        return Err($crate::cli::Usage(format!($($t)*)).into())
    };
}

/// [`usage!`] as a value (for `map_err` and `ok_or_else`).
macro_rules! usage_err {
    ($($t:tt)*) => {
        anyhow::Error::from($crate::cli::Usage(format!($($t)*)))
    };
}

mod archive;
mod bench;
mod campaign;
mod classify;
mod common;
mod delay;
mod fobs;
mod forecast;
mod pcap;
mod proxy;
mod proxy_config;
mod report;
mod serve;
mod tcp;
mod udp;

use clap::{Parser, Subcommand};
use nowcast::output::is_broken_pipe;
use nowcast::periodic::Unmeasured;
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
    /// Diagnose packet-loss signatures (CPU or network loss), or train a model.
    Classify(classify::Args),
    /// FOBS bulk transfer over UDP with the loss classifier.
    Fobs(fobs::Args),
    /// Forecast the next value of a series with its likely range, and report every
    /// forecaster's errors (faithful and improved NWS banks, baselines, timeout rules).
    Forecast(forecast::Args),
    /// Passive analysis of TCP traffic in capture files or live: per-flow throughput, RTT
    /// (data→ACK and timestamps), retransmissions, IEPM-BW transfers, Wren available bandwidth.
    Pcap(pcap::Args),
    /// HTTP/1.1 and HTTP/2 reverse proxy sending each request to the replica forecast to be fastest
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
    /// Relay TCP or UDP with a fixed delay added each way: an emulated longer link.
    Delay(delay::Args),
    /// Delay IP packets between two TUN devices (emulated links in the FOBS benchmark).
    // Hidden: a part of the benchmark's harness, which makes the devices and routes through
    // them as root (native-probes/BENCHMARKS.md); nothing a user runs on its own.
    #[command(hide = true)]
    DelayTun(delay::TunArgs),
}

/// Exit status of `nowcast tcp` and `nowcast udp` when a series measured nothing (every
/// probe of it lost, timed out or refused), as ping's 1 when no reply came.
pub const EXIT_UNMEASURED: u8 = 1;
/// Exit status of `nowcast tcp` and `nowcast udp` when they could not run (a bad option, a
/// name that does not resolve, an output that cannot be written, a target that answers in
/// another protocol), as ping's 2.
pub const EXIT_ERROR: u8 = 2;

/// A bad option value ([`usage!`]): exit status [`EXIT_ERROR`] for every command.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A command that could not run because of what it was pointed at (a peer that speaks
/// another protocol, or none: `nowcast fobs send` to a port that is not a FOBS receiver):
/// exit status [`EXIT_ERROR`], as `nowcast tcp`'s for a port held by another service,
/// whichever command it is.
#[derive(Debug)]
pub struct CouldNotRun(pub String);

impl std::fmt::Display for CouldNotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CouldNotRun {}

/// Every flag that takes a value takes a negative number as its value, so that the flag's own
/// parser refuses it by name (`--interval -1` said "unexpected argument '-1' found", with a tip
/// to pass it as the target).
fn negative_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_num_args().is_none_or(|n| n.takes_values()) && !a.is_positional() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negative_values)
}

/// [`Cli`] from the command line, with [`negative_values`]. A value refused after parsing
/// (`--since` after `--until`) is said with the usage of the subcommand it was given to, as
/// clap says its own refusals (it printed the top's `Usage: nowcast <COMMAND>`).
fn parse_args() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let mut cmd = negative_values(Cli::command());
    let matches = cmd.get_matches_mut();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| {
        let (mut sub, mut m) = (&mut cmd, &matches);
        while let Some((name, next)) = m.subcommand() {
            // The matches are this command's: each name is one of its subcommands.
            sub = sub
                .find_subcommand_mut(name)
                .expect("a subcommand it matched");
            m = next;
        }
        e.format(sub).exit()
    })
}

/// Parses the command line, runs the subcommand and turns its result into an exit status:
/// a reader that went away (`| head`) is a quiet success, as for any Unix filter; the probe
/// commands tell a measurement that got nothing ([`EXIT_UNMEASURED`]) from one that could
/// not run ([`EXIT_ERROR`]); other commands fail with 1, or 2 for a bad option value
/// ([`Usage`]) or a target that is not what it should be ([`CouldNotRun`]).
pub fn main() -> ExitCode {
    let cli = parse_args();
    let probe = matches!(cli.command, Command::Tcp(_) | Command::Udp(_));
    let result = match cli.command {
        Command::Classify(args) => classify::run(args),
        Command::Fobs(args) => fobs::run(args),
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
        Command::DelayTun(args) => delay::run_tun(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            nowcast::warn_line!("nowcast: {e:#}");
            match (probe, e.downcast_ref::<Unmeasured>()) {
                (true, Some(_)) => ExitCode::from(EXIT_UNMEASURED),
                (true, None) => ExitCode::from(EXIT_ERROR),
                (false, _) if e.is::<CouldNotRun>() || e.is::<Usage>() => {
                    ExitCode::from(EXIT_ERROR)
                }
                (false, _) => ExitCode::FAILURE,
            }
        }
    }
}
