//! A campaign's `tcp` run: one session of `nowcast tcp` (the library's [`crate::tcp::io`]),
//! its bound shared among the session's steps.

use crate::campaign::plan::{Direction, Kind, Target, TcpParams};
use crate::net::resolve;
use crate::series::SeriesSet;
use crate::tcp::{self, io::Probe};
use crate::when::Ms;
use crate::wire::Hello;
use nowcast_core::probed::{Observation, Outcome};
use nowcast_core::record::{Metric, Record};

pub fn run(
    p: &TcpParams,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    index: u64,
) -> Vec<Record> {
    let kind = Kind::Tcp(p.clone());
    let to = target.address(target.port);
    let addrs = match resolve(&to, target.port) {
        Ok(t) => t.addrs,
        Err(e) => {
            return kind
                .metrics()
                .into_iter()
                .map(|m| {
                    set.observe(
                        m,
                        Observation::new(
                            crate::clock::wall_ms(),
                            Outcome::Failed { error: e.clone() },
                            None,
                        ),
                    )
                })
                .collect()
        }
    };
    let steps = Kind::tcp_steps(p);
    let probe = Probe {
        session: tcp::Config {
            host: to,
            // A campaign's sizes are fixed: its plan counts every probe's bytes in advance.
            size: tcp::ProbeSize::Fixed(p.size.unwrap_or(0)),
            sndbuf: p.sndbuf.map(|n| n as usize),
            rcvbuf: p.rcvbuf.map(|n| n as usize),
            hello: Hello {
                rcvbuf: 0,
                sndbuf: 0,
            },
            // Each step at most its share of the bound, so the session ends within it.
            deadline_ms: (bound_ms as f64 / f64::from(steps)).max(50.0),
            bulk: match (p.size, p.direction) {
                (None, _) => Vec::new(),
                (Some(_), Direction::Up) => vec![Metric::BandwidthUp],
                (Some(_), Direction::Down) => vec![Metric::BandwidthDown],
                (Some(_), Direction::Both) => vec![Metric::BandwidthUp, Metric::BandwidthDown],
            },
        },
        addrs,
        write_size: 64 * 1024,
    };
    tcp::io::once(&probe, set, index)
}
