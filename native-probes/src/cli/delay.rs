//! `nowcast delay`: its flags; starts the fixed-delay relay of the accuracy tests (see
//! `nowcast::delay`).
//! Hidden from `--help`: it emulates a link for testing and measures nothing.

use anyhow::{anyhow, Result};
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
    /// Delay added in each direction, in ms (a round trip gains twice this).
    #[arg(long)]
    one_way: f64,
}

pub fn run(args: Args) -> Result<()> {
    if !(args.one_way.is_finite() && args.one_way >= 0.0) {
        return Err(anyhow!("--one-way must be ≥ 0 ms"));
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
