//! `nowcast tcp HOST[:PORT]`: its flags, turned into a [`nowcast::tcp::io::Probe`], the
//! series' settings and the sink, then handed to the library.

use super::common::Common;
use anyhow::{anyhow, Result};
use nowcast::net::{parse_size, resolve};
use nowcast::stop::Stop;
use nowcast::tcp::{self, io::Probe};
use nowcast::wire::{Hello, DEFAULT_PORT};
use nowcast_core::record::{Metric, Transport};

#[derive(clap::Args)]
#[command(
    after_help = "Example: nowcast tcp example.org --period 10 --out probes.ndjson\n\
    Table cells show the measurement and, after the arrow, the forecast of the next value; \
    rates are scaled per value (kbit/s, Mbit/s, Gbit/s). At the end, per series: probes sent, \
    the share lost (timed out or failed), min/avg/max/mdev of the values (mdev as ping's) and \
    the next forecast ± 2·error (error: RMSE of the forecast). \
    Records: handshake_rtt, rtt (Nagle off), rtt_nagle (Nagle on) in ms, bandwidth_up and \
    bandwidth_down in Mbit/s with probe.raw_ms and probe.rtt_subtracted_ms. Every probe waits at most its \
    series' adaptive timeout (the NWS rule: MAE forecast of its durations + 3·RMSE, within \
    the floor and ceiling), capped by --deadline; a timed-out probe is recorded and fed back. Ctrl-C ends the probe \
    under way at once: it and the session's later steps are not recorded, and the summary \
    follows. After the handshake, each session \
    makes one un-timed two-byte warm-up echo, recorded nowhere: a new connection's first data \
    exchange is slower than the next ones (the cost of the new connection, not of the round \
    trip), so rtt and rtt_nagle are both timed on a warm connection.\n\n\
    Exit status: 0 when every series probed measured at least one value (partial loss \
    included: the summary gives it); 1 when a series measured nothing (every probe of it \
    refused, failed or timed out, e.g. the server is down or refuses the size); 2 when the \
    command could not run (a bad option, a name that does not resolve, an output that \
    cannot be written, or a target whose first answer is not nowcast's protocol, e.g. a web \
    server: the run stops there). A failed session is one line on standard error: the cause \
    and the series it left untried. A reader that goes away (| head) ends it quietly with 0."
)]
pub struct Args {
    /// The server (`nowcast serve`), HOST or HOST:PORT ([v6]:PORT).
    target: String,
    /// Bandwidth probe size: auto (a quarter second of the forecast rate, or two predicted
    /// round trips of it on a longer path, as a power of two from 64 KiB to 256 MiB; a series'
    /// first probe is sized by unrecorded tries growing from 64 KiB until one lasts that long;
    /// each later probe follows untimed warm-ups on its new connection, repeated while the
    /// sender is still in slow start or BBR's startup (at most 40 round trips), so that
    /// neither is timed; both ends pace their sockets), or KiB, or with a suffix B, K, M or G (e.g. 64 for JavaNws's 64 KB
    /// probe, 512K, 10M). A fixed small probe reads what TCP's first round trips and a
    /// shaper's burst make of it, not the path's rate. With --period, an automatic probe and
    /// its warm-up move half a second of the path or more each experiment and direction: on a fast path
    /// at a short period, more than a server's per-client budget (`nowcast serve`: 2 GiB a
    /// minute) allows; give a longer period or a fixed size for long runs.
    #[arg(long, default_value = "auto", value_parser = probe_size, value_name = "auto|SIZE")]
    size: tcp::ProbeSize,
    /// Bytes handed to the kernel per write during the bandwidth probe (JavaNws §4: the
    /// size of the sends changes the result on some hosts).
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    write_size: u64,
    /// Which way the bandwidth probe moves its payload: up (to the server, as NWS does),
    /// down, or both (up first).
    #[arg(long, value_enum, default_value_t = Direction::Up)]
    direction: Direction,
    /// SO_SNDBUF to ask for on this side (KiB, or with B/K/M/G); default: the kernel's.
    #[arg(long, value_parser = parse_size)]
    sndbuf: Option<u64>,
    /// SO_RCVBUF to ask for on this side.
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<u64>,
    /// SO_RCVBUF to ask the server for (it caps it at its --max-buffer).
    #[arg(long, value_parser = parse_size)]
    server_rcvbuf: Option<u64>,
    /// SO_SNDBUF to ask the server for.
    #[arg(long, value_parser = parse_size)]
    server_sndbuf: Option<u64>,
    #[command(flatten)]
    common: Common,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Direction {
    Up,
    Down,
    Both,
}

impl Direction {
    /// The bandwidth series measured, in the order of the session's steps.
    fn metrics(self) -> Vec<Metric> {
        match self {
            Direction::Up => vec![Metric::BandwidthUp],
            Direction::Down => vec![Metric::BandwidthDown],
            Direction::Both => vec![Metric::BandwidthUp, Metric::BandwidthDown],
        }
    }
}

fn usize_of(n: Option<u64>, flag: &str) -> Result<Option<usize>> {
    n.map(|n| usize::try_from(n).map_err(|_| anyhow!("{flag} is too large")))
        .transpose()
}

fn probe_size(text: &str) -> Result<tcp::ProbeSize, String> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(tcp::ProbeSize::Auto);
    }
    match parse_size(text)? {
        0 => Err("a probe of 0 bytes measures nothing (auto, or a size)".into()),
        n => Ok(tcp::ProbeSize::Fixed(n)),
    }
}

fn u32_of(n: Option<u64>, flag: &str) -> Result<u32> {
    u32::try_from(n.unwrap_or(0)).map_err(|_| anyhow!("{flag} must be below 4 GiB"))
}

pub fn run(args: Args) -> Result<()> {
    let target = resolve(&args.target, DEFAULT_PORT).map_err(|e| anyhow!(e))?;
    if args.write_size == 0 {
        usage!("--write-size must be at least 1 byte");
    }
    let probe = Probe {
        session: tcp::Config {
            host: target.name.clone(),
            size: args.size,
            sndbuf: usize_of(args.sndbuf, "--sndbuf")?,
            rcvbuf: usize_of(args.rcvbuf, "--rcvbuf")?,
            hello: Hello {
                rcvbuf: u32_of(args.server_rcvbuf, "--server-rcvbuf")?,
                sndbuf: u32_of(args.server_sndbuf, "--server-sndbuf")?,
            },
            deadline_ms: args.common.deadline()?.as_secs_f64() * 1e3,
            bulk: args.direction.metrics(),
        },
        addrs: target.addrs,
        write_size: usize_of(Some(args.write_size), "--write-size")?.unwrap_or(1),
    };
    let settings = args
        .common
        .settings("nowcast tcp", &target.name, Transport::Tcp);
    args.common
        .check_timeouts(&settings, &probe.session.metrics())?;
    let plan = args.common.plan()?;
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let mut sink = args.common.sink()?;
    tcp::io::run(&probe, &settings, &plan, &stop, &mut sink)
}
