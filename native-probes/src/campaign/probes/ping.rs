//! A campaign's `ping` run: `ping -n -c COUNT -i INTERVAL -w DEADLINE HOST` (iputils), its
//! summary lines read into `rtt` (the average, as IEPM-BW's ping RTT), `jitter` (mdev) and
//! `loss`.

use super::external::{self, Cancel};
use crate::campaign::plan::{PingParams, Target};
use crate::series::SeriesSet;
use crate::when::Ms;
use nowcast_core::probed::Outcome;
use nowcast_core::record::{Metric, Probe, Record};

pub fn run(
    p: &PingParams,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    cancel: &Cancel,
) -> Vec<Record> {
    let started = crate::clock::wall_ms();
    let mut args = vec![
        "-n".to_string(),
        "-c".into(),
        p.count.to_string(),
        "-i".into(),
        format!("{:.3}", p.interval_ms as f64 / 1e3),
        // ping's own deadline, a second inside the bound.
        "-w".into(),
        ((bound_ms / 1000 - 1).max(1)).to_string(),
    ];
    if let Some(s) = p.size {
        args.extend(["-s".into(), s.to_string()]);
    }
    args.push(target.host.clone());
    let result = external::run(&p.program, &args, cancel).and_then(|out| {
        parse(&out.stdout).ok_or_else(|| {
            let why = if out.stderr.trim().is_empty() {
                out.stdout.lines().last().unwrap_or("").to_string()
            } else {
                out.stderr.trim().to_string()
            };
            format!("ping: no summary ({why})")
        })
    });
    let metrics = [Metric::Rtt, Metric::Jitter, Metric::Loss];
    let probe = Probe {
        payload_bytes: Some(u64::from(p.size.unwrap_or(56))),
        ..Probe::default()
    };
    super::observe(
        set,
        &metrics,
        started,
        bound_ms,
        probe,
        result.map(|s| {
            let m = |value| Outcome::Measured {
                value,
                duration_ms: None,
            };
            let mut out = Vec::new();
            match (s.avg_ms, s.mdev_ms) {
                (Some(avg), Some(mdev)) => {
                    out.push((Metric::Rtt, m(avg)));
                    out.push((Metric::Jitter, m(mdev)));
                }
                _ => {
                    let error = format!("ping: {} sent, none answered", s.sent);
                    out.push((
                        Metric::Rtt,
                        Outcome::Failed {
                            error: error.clone(),
                        },
                    ));
                    out.push((Metric::Jitter, Outcome::Failed { error }));
                }
            }
            out.push((Metric::Loss, m(s.loss())));
            out
        }),
    )
}

/// What ping's summary says.
#[derive(Clone, Debug, PartialEq)]
pub struct PingSummary {
    pub sent: u32,
    pub received: u32,
    pub avg_ms: Option<f64>,
    pub mdev_ms: Option<f64>,
}

impl PingSummary {
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            1.0
        } else {
            1.0 - f64::from(self.received.min(self.sent)) / f64::from(self.sent)
        }
    }
}

/// Reads `N packets transmitted, M received` and `rtt min/avg/max/mdev = a/b/c/d ms`
/// (iputils; BSD's `round-trip min/avg/max/stddev` too).
pub fn parse(out: &str) -> Option<PingSummary> {
    let counts = out.lines().find(|l| l.contains("packets transmitted"))?;
    let mut nums = counts.split(',').map(|part| {
        part.split_whitespace()
            .next()
            .and_then(|n| n.parse::<u32>().ok())
    });
    let sent = nums.next()??;
    let received = nums.next()??;
    let (avg_ms, mdev_ms) = match out.lines().find(|l| l.contains("min/avg/max")) {
        Some(l) => {
            let vals = l.split('=').nth(1)?.split_whitespace().next()?;
            let v: Vec<f64> = vals.split('/').filter_map(|x| x.parse().ok()).collect();
            (v.get(1).copied(), v.get(3).copied())
        }
        None => (None, None),
    };
    Some(PingSummary {
        sent,
        received,
        avg_ms,
        mdev_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iputils_and_bsd_summaries() {
        let linux = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.030 ms\n\n--- 127.0.0.1 ping statistics ---\n5 packets transmitted, 4 received, 20% packet loss, time 4099ms\nrtt min/avg/max/mdev = 0.021/0.034/0.052/0.011 ms\n";
        let s = parse(linux).unwrap();
        assert_eq!(
            (s.sent, s.received, s.avg_ms, s.mdev_ms),
            (5, 4, Some(0.034), Some(0.011))
        );
        assert!((s.loss() - 0.2).abs() < 1e-12);
        let bsd = "--- h ping statistics ---\n3 packets transmitted, 3 packets received, 0.0% packet loss\nround-trip min/avg/max/stddev = 1.1/2.2/3.3/0.4 ms\n";
        assert_eq!(parse(bsd).unwrap().avg_ms, Some(2.2));
        let none = "--- h ping statistics ---\n3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2040ms\n";
        let s = parse(none).unwrap();
        assert_eq!((s.avg_ms, s.loss()), (None, 1.0));
        assert_eq!(parse("ping: unknown host"), None);
    }
}
