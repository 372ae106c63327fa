//! A campaign's `udp` run: one burst of `nowcast udp` (the library's [`crate::udp::io`]).

use crate::campaign::plan::{Target, UdpParams};
use crate::net::resolve;
use crate::series::SeriesSet;
use crate::udp::io::{self, Bursts};
use crate::when::Ms;
use nowcast_core::probed::{Observation, Outcome};
use nowcast_core::record::{Metric, Record};
use std::time::Duration;

pub fn run(
    p: &UdpParams,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    index: u64,
) -> Vec<Record> {
    let host = target.address(target.udp_port);
    let result = resolve(&host, target.udp_port).and_then(|t| {
        let b = Bursts {
            host: host.clone(),
            addr: t.addrs[0],
            probes: p.probes,
            interval: Duration::from_millis(p.interval_ms as u64),
            size: p.size,
            deadline: Duration::from_millis(bound_ms.max(1) as u64),
        };
        io::once(&b, set, index).map_err(|e| format!("{e:#}"))
    });
    match result {
        Ok(records) => records,
        Err(error) => vec![set.observe(
            Metric::Rtt,
            Observation::new(crate::clock::wall_ms(), Outcome::Failed { error }, None),
        )],
    }
}
