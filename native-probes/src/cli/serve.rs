//! `nowcast serve`: its flags, turned into a [`nowcast::serve::Config`]; starts the server and
//! says where it listens and, when stopped, what it did.

use anyhow::{anyhow, Result};
use nowcast::net::parse_size;
use nowcast::serve::{Config, Server};
use nowcast::stop::Stop;
use nowcast::wire::{UdpProbe, DEFAULT_PORT};
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "Prints one line with the bound TCP and UDP addresses when ready \
    (port 0 picks free ports), then answers until SIGINT or SIGTERM, and prints what it did."
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
    /// Largest bulk probe accepted (KiB, or with B/K/M/G).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    max_payload: u64,
    /// Largest UDP datagram echoed, in bytes.
    #[arg(long, default_value_t = 9000)]
    max_datagram: usize,
    /// Most TCP sessions at once.
    #[arg(long, default_value_t = 256)]
    max_sessions: usize,
    /// Most TCP sessions at once from one client address.
    #[arg(long, default_value_t = 8)]
    max_sessions_per_client: usize,
    /// Close a session whose client sends nothing for this many seconds.
    #[arg(long, default_value_t = 30.0)]
    idle: f64,
    /// Largest socket buffer a client may ask for (KiB, or with B/K/M/G).
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    max_buffer: u64,
}

pub fn run(args: Args) -> Result<()> {
    if !(args.idle.is_finite() && args.idle > 0.0) {
        return Err(anyhow!("--idle must be a positive number of seconds"));
    }
    let cfg = Config {
        bind: args.bind,
        tcp_port: args.tcp_port.unwrap_or(args.port),
        udp_port: args.udp_port.unwrap_or(args.port),
        max_payload: args.max_payload,
        max_datagram: args.max_datagram.max(UdpProbe::HEADER_LEN),
        max_sessions: args.max_sessions.max(1),
        max_sessions_per_client: args.max_sessions_per_client.max(1),
        idle: Duration::from_secs_f64(args.idle),
        max_buffer: u32::try_from(args.max_buffer).unwrap_or(u32::MAX),
    };
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let server = Server::bind(cfg).map_err(|e| anyhow!(e))?;
    let (tcp, udp) = (server.tcp_addr()?, server.udp_addr()?);
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "nowcast serve: listening on tcp {tcp} udp {udp}")?;
        out.flush()?;
    }
    let c = server.run(stop)?;
    writeln!(
        std::io::stdout().lock(),
        "nowcast serve: stopped after {} sessions ({} refused as busy), {} bulk bytes, {} datagrams echoed ({} dropped)",
        c.sessions.load(Ordering::Relaxed),
        c.refused_busy.load(Ordering::Relaxed),
        c.bulk_bytes.load(Ordering::Relaxed),
        c.datagrams.load(Ordering::Relaxed),
        c.datagrams_dropped.load(Ordering::Relaxed),
    )?;
    Ok(())
}
