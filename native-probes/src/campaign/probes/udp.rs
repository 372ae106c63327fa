//! A campaign's `udp` run: one burst of `nowcast udp` (the library's [`crate::udp::io`]).
//!
//! The burst ends by itself a little before the run's bound ([`burst_deadline`]): its sending
//! and its wait for replies both fit in what is left of the bound, so a burst that gets no
//! reply (a dead target, 100 % loss) is an ordinary run recording its loss, not a run the
//! scheduler kills. The burst runs inside this process, where a kill cannot stop it (there
//! is no process to signal): it can only abandon the run and throw its records away.

use crate::campaign::plan::{Target, UdpParams};
use crate::net::resolve;
use crate::series::SeriesSet;
use crate::udp::io::{self, Bursts};
use crate::when::Ms;
use nowcast_core::probed::{Observation, Outcome};
use nowcast_core::record::{Metric, Record};
use std::time::{Duration, Instant};

/// How long before its bound a burst ends, at most (a tenth of short bounds): the time to
/// start the run's thread, open the socket, write the records and hand them to the runner,
/// which kills a run still going at its bound.
const MARGIN_MS: Ms = 250;

pub fn run(
    p: &UdpParams,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    index: u64,
) -> Vec<Record> {
    let started = Instant::now();
    let host = target.address(target.udp_port);
    let result = resolve(&host, target.udp_port).and_then(|t| {
        let b = Bursts {
            host: host.clone(),
            addr: t.addrs[0],
            probes: p.probes,
            interval: Duration::from_millis(p.interval_ms as u64),
            size: p.size,
            // What the name's resolution took is no longer the burst's.
            deadline: burst_deadline(bound_ms).saturating_sub(started.elapsed()),
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

/// The time a burst of a run bounded by `bound_ms` may take, from the run's start: the bound
/// less [`MARGIN_MS`] (a tenth of bounds under 2.5 s), at least 1 ms. The burst fits its
/// sending and its wait in it ([`Bursts::wait_cap`]).
fn burst_deadline(bound_ms: Ms) -> Duration {
    let margin = MARGIN_MS.min(bound_ms / 10);
    Duration::from_millis(bound_ms.saturating_sub(margin).max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::plan::Kind;
    use nowcast_core::record::Status;
    use std::net::UdpSocket;

    #[test]
    fn the_burst_ends_before_the_bound_with_room_for_its_sending() {
        let p = UdpParams {
            probes: 10,
            interval_ms: 5,
            size: 64,
        };
        // The default bound of the configuration that was killed every other run: 3050 ms.
        let bound = Kind::Udp(p.clone()).default_bound_ms();
        assert_eq!(bound, 3_050);
        assert_eq!(burst_deadline(bound), Duration::from_millis(2_800));
        // The least bound a configuration may give keeps a wait after the sending.
        let least = Kind::Udp(p).least_bound_ms();
        let b = Bursts {
            host: "h:1".into(),
            addr: "127.0.0.1:1".parse().unwrap(),
            probes: 10,
            interval: Duration::from_millis(5),
            size: 64,
            deadline: burst_deadline(least),
        };
        assert_eq!(b.deadline, Duration::from_millis(135));
        assert_eq!(b.wait_cap(), Duration::from_millis(90));
    }

    /// Consecutive runs to a port where nothing listens: each ends before its bound, whatever
    /// the adaptive timeout has grown to, its RTT and loss errors that say so.
    #[test]
    fn runs_to_a_dead_port_end_within_their_bound_saying_nothing_listens() {
        // Bind then drop a socket to find a port with nothing behind it.
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let target = Target {
            name: "dead".into(),
            host: "127.0.0.1".into(),
            port,
            udp_port: port,
            iperf3_port: 5201,
            fobs_port: port,
            fobs_token: None,
            url: None,
            groups: vec![],
            tags: Default::default(),
        };
        let p = UdpParams {
            probes: 10,
            interval_ms: 5,
            size: 64,
        };
        let kind = Kind::Udp(p.clone());
        // Shorter than the adaptive timeout after the first run (3.4 s), so that the later
        // waits are cut to fit; long enough for a loaded machine to start the run's thread.
        let bound: Ms = 800;
        let mut set = super::super::series(&kind, &target, Some(1_000.0), kind.source().into());
        for index in 0..3 {
            let t = Instant::now();
            let records = run(&p, &target, bound, &mut set, index);
            let took = t.elapsed();
            assert!(
                took < Duration::from_millis(bound as u64),
                "run {index} took {took:?}, past its bound of {bound} ms"
            );
            // The host said nothing listens (ICMP port unreachable): neither a round trip
            // nor the path's loss was measured, and the records say why.
            for metric in [Metric::Rtt, Metric::Loss] {
                let r = records.iter().find(|r| r.metric == metric).unwrap();
                assert_eq!(r.status, Status::Error, "{r:?}");
                assert!(
                    r.error.as_deref().unwrap().contains("port unreachable"),
                    "{r:?}"
                );
                let waited = r.timeout_ms.unwrap();
                assert!(
                    waited + 45.0 <= (bound - bound / 10) as f64,
                    "the sending and the wait fit in the bound: {r:?}"
                );
            }
        }
    }
}
