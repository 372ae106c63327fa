//! `nowcast delay`: its flags; starts the fixed-delay relay of the accuracy tests (see
//! `nowcast::delay`), listed in `--help` as any command a user may run (a longer link to
//! try `nowcast tcp` and `udp` on). `nowcast delay-tun`, a part of the FOBS benchmark's
//! harness, stays hidden.

use anyhow::{anyhow, Result};
use nowcast::net::parse_ms;
use nowcast::stop::Stop;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Proto {
    Tcp,
    Udp,
}

#[derive(clap::Args)]
#[command(
    after_help = "Prints one line with the address it listens on when ready, then relays until \
    SIGINT or SIGTERM. One relay carries one protocol: run one for tcp and one for udp to \
    delay both. A TCP relay answers the handshake itself: handshake_rtt is not delayed.\n\nExample, 20 ms more each way in front of `nowcast serve` (port 8060):\n  \
    nowcast delay tcp --listen 127.0.0.1:9060 --to 127.0.0.1:8060 --one-way 20\n  \
    nowcast tcp 127.0.0.1:9060"
)]
pub struct Args {
    /// What to relay.
    #[arg(value_enum)]
    proto: Proto,
    /// Address to listen on (port 0 picks a free one).
    #[arg(long)]
    listen: SocketAddr,
    /// Address to pass everything on to.
    #[arg(long)]
    to: SocketAddr,
    /// Delay added in each direction, in ms, or with a unit (0.1s) (a round trip gains twice
    /// this).
    #[arg(long, value_parser = parse_ms)]
    one_way: f64,
}

pub fn run(args: Args) -> Result<()> {
    if !(args.one_way.is_finite() && args.one_way >= 0.0) {
        return Err(usage_err!("--one-way must be ≥ 0 ms"));
    }
    let delay = Duration::from_secs_f64(args.one_way / 1e3);
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let ready = |proto: &str, at: std::io::Result<SocketAddr>| -> Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "nowcast delay: {proto} {} → {}, +{} ms each way",
            at?, args.to, args.one_way
        )?;
        Ok(out.flush()?)
    };
    let (listen, to) = (args.listen, args.to);
    match args.proto {
        Proto::Tcp => {
            let l = TcpListener::bind(listen).map_err(|e| anyhow!("{listen}: bind tcp: {e}"))?;
            ready("tcp", l.local_addr())?;
            nowcast::delay::tcp(l, to, delay, &stop).map_err(|e| anyhow!("{listen}: relay: {e}"))
        }
        Proto::Udp => {
            let s = UdpSocket::bind(listen).map_err(|e| anyhow!("{listen}: bind udp: {e}"))?;
            ready("udp", s.local_addr())?;
            nowcast::delay::udp(s, to, delay, &stop).map_err(|e| anyhow!("{listen}: relay: {e}"))
        }
    }
}

#[derive(clap::Args)]
pub struct TunArgs {
    /// The TUN device packets are read from (created if missing; routed into by the caller).
    #[arg(long)]
    from: String,
    /// The TUN device packets are written into, the delay later.
    #[arg(long)]
    to: String,
    /// Delay added, in ms, or with a unit (0.1s).
    #[arg(long, value_parser = parse_ms)]
    one_way: f64,
}

/// `nowcast delay-tun`: the packet-level delay line of the bulk-transfer benchmarks.
pub fn run_tun(args: TunArgs) -> Result<()> {
    if !(args.one_way.is_finite() && args.one_way >= 0.0) {
        return Err(usage_err!("--one-way must be ≥ 0 ms"));
    }
    let from = nowcast::delay::open_tun(&args.from).map_err(|e| anyhow!("{}: {e}", args.from))?;
    let to = nowcast::delay::open_tun(&args.to).map_err(|e| anyhow!("{}: {e}", args.to))?;
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "nowcast delay-tun: {} → {}, +{} ms",
            args.from, args.to, args.one_way
        )?;
        out.flush()?;
    }
    nowcast::delay::tun(from, to, Duration::from_secs_f64(args.one_way / 1e3), &stop)
        .map_err(|e| anyhow!("delay-tun: {e}"))
}
