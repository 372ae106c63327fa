//! `nowcast serve`: its flags, turned into a [`nowcast::serve::Config`]; starts the server and
//! says where it listens and, when stopped, what it did.

use anyhow::{anyhow, Result};
use nowcast::net::parse_seconds;
use nowcast::net::parse_size;
use nowcast::serve::limits::{Prefixes, Rate, UdpLimits};
use nowcast::serve::metrics::Limit;
use nowcast::serve::watchdog::{Timing, GRACE, WINDOW};
use nowcast::serve::{Config, Server};
use nowcast::stop::Stop;
use nowcast::wire::{UdpProbe, DEFAULT_PORT, DEFAULT_UDP_PACKETS_PER_SECOND};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

#[derive(clap::Args)]
#[command(
    after_help = "Prints one line with the bound TCP and UDP addresses (and the metrics \
    address) when ready (port 0 picks free ports), then answers until SIGINT or SIGTERM, and \
    prints what it did. Sizes are KiB, or with B/K/M/G. A client is a network: IPv4 addresses \
    per --ipv4-prefix, IPv6 per --ipv6-prefix; the per-client caps, budgets and rates are \
    shared by its addresses. See native-probes/README.md, \"nowcast serve on a public \
    address\"."
)]
pub struct Args {
    /// Address to listen on (e.g. 127.0.0.1, ::, 0.0.0.0).
    #[arg(long, default_value = "0.0.0.0")]
    bind: IpAddr,
    /// Port for both TCP and UDP.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// TCP port (overrides --port).
    #[arg(long)]
    tcp_port: Option<u16>,
    /// UDP port (overrides --port).
    #[arg(long)]
    udp_port: Option<u16>,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9460); keep it on a
    /// private address.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Largest bulk probe accepted.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    max_payload: u64,
    /// Most TCP sessions at once.
    #[arg(long, default_value_t = 256)]
    max_sessions: usize,
    /// Most TCP sessions at once from one client (network).
    #[arg(long, default_value_t = 8)]
    max_sessions_per_client: usize,
    /// Seconds a client has to send its hello after connecting.
    #[arg(long, value_parser = parse_seconds, default_value_t = 5.0)]
    handshake: f64,
    /// Close a session that moves nothing, either way, for this many seconds.
    #[arg(long, value_parser = parse_seconds, default_value_t = 30.0)]
    idle: f64,
    /// Close any session after this many seconds.
    #[arg(long, value_parser = parse_seconds, default_value_t = 300.0)]
    lifetime: f64,
    /// Close a session that moves fewer bytes per second than this (either way) over a
    /// window of --rate-window seconds, once --rate-grace seconds have passed (0: no minimum).
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    min_rate: u64,
    /// Length of the windows over which --min-rate is judged, seconds.
    #[arg(long, value_parser = parse_seconds, default_value_t = WINDOW as f64 / 1e9)]
    rate_window: f64,
    /// Windows that begin in the first this many seconds of a session are not judged (a
    /// probe's echoes take a few round trips).
    #[arg(long, value_parser = parse_seconds, default_value_t = GRACE as f64 / 1e9)]
    rate_grace: f64,
    /// Largest socket buffer a client may have the server's kernel book, per direction
    /// (what the welcome reports; Linux books twice the size asked, so requests are cut
    /// to half of this there).
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    max_buffer: u64,
    /// TCP byte budget per client: bytes per minute (the token bucket's refill), payloads
    /// and messages, both ways.
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    bytes_per_minute: u64,
    /// TCP byte budget per client: the most it may move at once (the bucket's capacity; at
    /// least --max-payload).
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    burst_bytes: u64,
    /// IPv4 clients in one prefix of this length share their limits.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u8).range(0..=32))]
    ipv4_prefix: u8,
    /// IPv6 clients in one prefix of this length share their limits.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(0..=128))]
    ipv6_prefix: u8,
    /// Largest UDP datagram answered, in bytes.
    #[arg(long, default_value_t = 9000)]
    max_datagram: usize,
    /// UDP requests answered per second per client (bursts of one second's worth).
    #[arg(long, default_value_t = DEFAULT_UDP_PACKETS_PER_SECOND)]
    udp_packets_per_second: f64,
    /// UDP bytes answered per second per client (bursts of one second's worth).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    udp_bytes_per_second: u64,
    /// UDP requests answered per second, all clients together.
    #[arg(long, default_value_t = 100_000.0)]
    udp_total_packets_per_second: f64,
    /// UDP bytes answered per second, all clients together.
    #[arg(long, default_value = "128M", value_parser = parse_size)]
    udp_total_bytes_per_second: u64,
}

fn seconds(v: f64, flag: &str) -> Result<u64> {
    if !(v.is_finite() && v > 0.0) {
        usage!("{flag} must be a positive number of seconds");
    }
    Ok((v * 1e9).min(u64::MAX as f64) as u64)
}

fn rate(v: f64, flag: &str) -> Result<Rate> {
    if !(v.is_finite() && v > 0.0) {
        usage!("{flag} must be a positive number");
    }
    Ok(Rate::per_second(v))
}

pub fn run(args: Args) -> Result<()> {
    if args.burst_bytes < args.max_payload {
        usage!(
            "--burst-bytes ({}) must be at least --max-payload ({}): a transfer is charged whole",
            args.burst_bytes,
            args.max_payload
        );
    }
    if args.bytes_per_minute == 0 {
        usage!("--bytes-per-minute must be above 0");
    }
    let prefixes = Prefixes {
        ipv4: args.ipv4_prefix,
        ipv6: args.ipv6_prefix,
    };
    let cfg = Config {
        bind: args.bind,
        tcp_port: args.tcp_port.unwrap_or(args.port),
        udp_port: args.udp_port.unwrap_or(args.port),
        max_payload: args.max_payload,
        max_sessions: args.max_sessions.max(1),
        max_sessions_per_client: args.max_sessions_per_client.max(1),
        timing: Timing {
            handshake: seconds(args.handshake, "--handshake")?,
            idle: seconds(args.idle, "--idle")?,
            lifetime: seconds(args.lifetime, "--lifetime")?,
            min_rate: args.min_rate,
            window: seconds(args.rate_window, "--rate-window")?,
            grace: if args.rate_grace == 0.0 {
                0
            } else {
                seconds(args.rate_grace, "--rate-grace")?
            },
        },
        max_buffer: u32::try_from(args.max_buffer).unwrap_or(u32::MAX),
        prefixes,
        budget: Rate {
            per_second: args.bytes_per_minute as f64 / 60.0,
            burst: args.burst_bytes as f64,
        },
        udp: UdpLimits {
            max_datagram: args.max_datagram.max(UdpProbe::HEADER_LEN),
            client: [
                rate(args.udp_packets_per_second, "--udp-packets-per-second")?,
                rate(args.udp_bytes_per_second as f64, "--udp-bytes-per-second")?,
            ],
            total: [
                rate(
                    args.udp_total_packets_per_second,
                    "--udp-total-packets-per-second",
                )?,
                rate(
                    args.udp_total_bytes_per_second as f64,
                    "--udp-total-bytes-per-second",
                )?,
            ],
            prefixes,
        },
        metrics: args.metrics,
    };
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let server = Server::bind(cfg).map_err(|e| anyhow!(e))?;
    let (tcp, udp) = (server.tcp_addr()?, server.udp_addr()?);
    {
        let mut out = std::io::stdout().lock();
        write!(out, "nowcast serve: listening on tcp {tcp} udp {udp}")?;
        if let Some(m) = server.metrics_addr() {
            write!(out, " metrics http://{m}/metrics")?;
        }
        writeln!(out)?;
        out.flush()?;
    }
    let c = server.run(stop)?;
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (tcp_refused, udp_dropped) = c.rejected_total();
    let details: Vec<String> = Limit::ALL
        .iter()
        .filter(|&&l| c.rejected(l) > 0)
        .map(|&l| format!("{} {}", l.name(), c.rejected(l)))
        .collect();
    writeln!(
        std::io::stdout().lock(),
        "nowcast serve: stopped after {} sessions ({tcp_refused} refused or closed by a limit), {} bulk bytes, {} of {} datagrams answered ({udp_dropped} dropped){}",
        get(&c.sessions),
        get(&c.bulk_bytes),
        get(&c.datagrams_out),
        get(&c.datagrams_in),
        if details.is_empty() {
            String::new()
        } else {
            format!("; limits: {}", details.join(", "))
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: Args,
    }

    /// The per-client UDP defaults are the wire's constants, which `nowcast udp` reckons with
    /// when it says a burst was faster than a server answers (`udp::burst::over_default_rate`).
    #[test]
    fn the_udp_defaults_are_the_ones_the_client_reckons_with() {
        let a = Serve::parse_from(["serve"]).args;
        assert_eq!(a.udp_packets_per_second, DEFAULT_UDP_PACKETS_PER_SECOND);
        assert_eq!(
            a.udp_bytes_per_second,
            nowcast::wire::DEFAULT_UDP_BYTES_PER_SECOND
        );
    }
}
