//! What the policy's tests share: policies of two replicas (alike, or not) and of many,
//! and attempts that ended well or failed.

use super::*;

pub(super) fn two(balance: Balance) -> Policy {
    two_with(Config {
        balance,
        explore_fresh: true,
        ..Config::default()
    })
}

pub(super) fn two_with(cfg: Config) -> Policy {
    Policy::new(
        cfg,
        vec![
            ReplicaSpec {
                name: "a".into(),
                url: "http://10.0.0.1:80".into(),
            },
            ReplicaSpec {
                name: "b".into(),
                url: "http://10.0.0.2:80".into(),
            },
        ],
        vec![ServiceSpec {
            prefix: "/".into(),
            replicas: vec![0, 1],
            settings: None,
        }],
    )
    .unwrap()
}

/// Two replicas alike (80 Mbit/s, 1 ms least RTT) but for `a`'s bandwidth, `mbit_a`.
pub(super) fn alike(mbit_a: f64) -> Policy {
    let mut p = two_with(Config::default());
    for i in 0..20 {
        let t = i as f64 * 10.0;
        for (r, mbit) in [(0, mbit_a), (1, 80.0)] {
            let mut d = ok(r, t, mbit, 12.0, 512 << 10);
            d.base_rtt_ms = Some(1.0);
            p.finish(&d);
        }
    }
    p
}

/// `n` replicas and one service that lists `listed` of them (in turn: past `n`, again).
pub(super) fn many(n: usize, listed: usize) -> Result<Policy, String> {
    let reps = (0..n)
        .map(|i| ReplicaSpec {
            name: format!("r{i}"),
            url: "http://10.0.0.1:80".into(),
        })
        .collect();
    let svc = ServiceSpec {
        prefix: "/".into(),
        replicas: (0..listed).map(|i| i % n).collect(),
        settings: None,
    };
    Policy::new(Config::default(), reps, vec![svc])
}

/// A completed upload of `bytes` to `r` at `mbit` with RTT `rtt`.
pub(super) fn ok(r: usize, now: f64, mbit: f64, rtt: f64, bytes: u64) -> Done {
    let total = rtt + bytes as f64 * 8.0 / (mbit * 1e3);
    Done {
        replica: r,
        now_ms: now,
        probe: false,
        bytes_up: bytes,
        bytes_down: 100,
        total_ms: total,
        wait_ms: Some(rtt),
        rtt_ms: Some(rtt),
        base_rtt_ms: None,
        bandwidth: Some((mbit, Source::TcpInfo)),
        failure: None,
    }
}

pub(super) fn fail(r: usize, now: f64, f: Failure) -> Done {
    Done {
        replica: r,
        now_ms: now,
        probe: false,
        bytes_up: 0,
        bytes_down: 0,
        total_ms: 50.0,
        wait_ms: None,
        rtt_ms: None,
        base_rtt_ms: None,
        bandwidth: None,
        failure: Some(f),
    }
}

/// Runs the probes the policy says are due at `t`, each measuring `bw(r)` Mbit/s over a
/// 5 ms round trip.
pub(super) fn run_due_probes(p: &mut Policy, t: f64, mut bw: impl FnMut(usize) -> f64) {
    for r in p.due_probes(t) {
        p.probe_started(r, 0, t);
        let mut d = ok(r, t, bw(r), 5.0, 256 * 1024);
        d.probe = true;
        p.finish(&d);
    }
}
