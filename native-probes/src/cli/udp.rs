//! `nowcast udp HOST[:PORT]`: its flags, turned into [`nowcast::udp::io::Bursts`], the
//! series' settings and the sink, then handed to the library. A probe not answered within
//! the adaptive timeout after the last send of its burst (1 s before there is a forecast,
//! RFC 6298 §2.1's initial RTO) counts as lost.

use super::common::Common;
use anyhow::{anyhow, Result};
use nowcast::net::parse_ms;
use nowcast::net::resolve;
use nowcast::stop::Stop;
use nowcast::udp::io::{self, Bursts};
use nowcast::wire::{UdpProbe, DEFAULT_PORT};
use nowcast_core::record::Transport;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "Example: nowcast udp example.org --probes 200 --interval 5 --period 10\n\
    Records per burst: rtt (median, ms), jitter (mean |ΔRTT| of consecutive probes, ms) and \
    loss (a fraction from 0 to 1 in the records; in % in the table). Lost, reordered and \
    duplicated replies are counted in the table. At the end, per series: bursts sent, the \
    share whose series got no value (a burst without a reply has no rtt), min/avg/max/mdev \
    (mdev as ping's) and the next forecast ± 2·error (error: RMSE of the forecast). Ctrl-C \
    ends the burst under way at once: it is not recorded (its unanswered probes are no \
    loss), and the summary follows.\n\n\
    Exit status: 0 when some reply came (partial loss included: the summary gives it); 1 \
    when no burst had a reply (100 % loss, or a port where nothing listens: ICMP port \
    unreachable); 2 when the command could not run (a bad option, a name that does not \
    resolve, an output that cannot be written, or a target whose first answer is not \
    nowcast's protocol: another service, or an echo service sending the probes back; the \
    run stops there). A reader that goes away (| head) ends it quietly with 0."
)]
pub struct Args {
    /// The server (`nowcast serve`), HOST or HOST:PORT ([v6]:PORT).
    target: String,
    /// Probes per burst.
    #[arg(long, default_value_t = 100)]
    probes: u64,
    /// Milliseconds between probes of a burst.
    #[arg(long, value_parser = parse_ms, default_value_t = 10.0)]
    interval: f64,
    /// Datagram size in bytes (at least the 22-byte header).
    #[arg(long, default_value_t = 64)]
    size: usize,
    #[command(flatten)]
    common: Common,
}

pub fn run(args: Args) -> Result<()> {
    if args.size < UdpProbe::HEADER_LEN || args.size > 65_507 {
        usage!(
            "--size must be between {} and 65507 bytes",
            UdpProbe::HEADER_LEN
        );
    }
    if args.probes == 0 {
        usage!("--probes must be at least 1");
    }
    if !(args.interval.is_finite() && args.interval >= 0.0) {
        usage!("--interval must be ≥ 0 ms");
    }
    let target = resolve(&args.target, DEFAULT_PORT).map_err(|e| anyhow!(e))?;
    let bursts = Bursts {
        host: target.name.clone(),
        addr: target.addrs[0],
        probes: args.probes,
        interval: Duration::from_secs_f64(args.interval / 1e3),
        size: args.size,
        deadline: args.common.deadline()?,
    };
    let settings = args
        .common
        .settings("nowcast udp", &target.name, Transport::Udp);
    args.common.check_timeouts(&settings, &io::METRICS)?;
    let plan = args.common.plan()?;
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let mut sink = args.common.sink()?;
    io::run(&bursts, &settings, &plan, &stop, &mut sink)
}
