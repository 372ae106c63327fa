//! Measuring the replicas outside the choice: the active probes due (a replica with no
//! sample within its TTL, or on trial after its backoff; [`PROBE_BURST`] at a time), whether
//! a request's end is an RTT and wait sample, and bandwidth samples from outside requests
//! (Wren's lower bounds from the capture).

use super::*;

impl Policy {
    /// How often the prober should look for due probes, ms: a quarter of the shortest TTL of
    /// the replicas that are probed, and of the shortest backoff of those that are not (under
    /// a comparison rule a replica is probed only on trial, once its backoff is over, to be
    /// taken back); `None` when there is no replica.
    pub fn probe_tick_ms(&self) -> Option<f64> {
        self.replicas
            .iter()
            .map(|r| {
                if r.probed {
                    r.cfg.ttl_ms / 4.0
                } else {
                    r.cfg.backoff_min_ms / 4.0
                }
            })
            .min_by(f64::total_cmp)
    }

    /// Replicas that need an active probe now: on trial after their backoff (whatever the
    /// rule of their services: an ejected replica comes back only through its trial probe),
    /// or listed by a service that chooses by forecasts (or the nearest) and with no sample
    /// younger than the TTL, in the order of the replicas. Each is marked as being
    /// probed until its probe finishes. At most [`PROBE_BURST`] (or a quarter of the probed
    /// replicas) at once: the next look starts after the last one taken, so the others'
    /// turn comes at the next.
    pub fn due_probes(&mut self, now_ms: f64) -> Vec<usize> {
        self.update_health(now_ms);
        let n = self.replicas.len();
        let mut due = Vec::new();
        for k in 0..n {
            let i = (self.probe_next + k) % n;
            let rep = &mut self.replicas[i];
            if rep.probing {
                continue;
            }
            if due.len() == self.probe_burst {
                break;
            }
            let ttl = rep.cfg.ttl_ms;
            let stale = rep.last_sample_ms.is_none_or(|t| now_ms - t > ttl);
            let want = match rep.health {
                Health::Trial => true,
                Health::Up => rep.probed && stale,
                Health::Ejected { .. } => false,
            };
            if want {
                rep.probing = true;
                rep.counters.probes += 1;
                due.push(i);
            }
        }
        if let (true, Some(&last)) = (due.len() == self.probe_burst, due.last()) {
            self.probe_next = (last + 1) % n;
        }
        due.sort_unstable();
        due
    }

    /// Whether a request to `r` that ends now would be an RTT and wait sample (at most one
    /// per [`Config::sample_gap_ms`]); the edge reads TCP_INFO only then.
    pub fn sample_due(&self, r: usize, now_ms: f64) -> bool {
        let rep = &self.replicas[r];
        rep.fed < WARM_SAMPLES
            || rep
                .last_fed_ms
                .is_none_or(|t| now_ms - t >= self.cfg.sample_gap_ms)
    }

    /// A probe of `bytes` was started by [`Policy::due_probes`]'s caller: count it in flight.
    pub fn probe_started(&mut self, r: usize, bytes: u64, now_ms: f64) {
        self.fill_backlog(r, bytes as f64, now_ms);
        self.replicas[r].inflight += 1;
    }

    /// A bandwidth sample the edge measured outside a request, such as Wren's lower bound from
    /// the capture (§3.2), taken at `ts_ms`; `bytes`: the bytes it measured. Returns its record.
    pub fn bandwidth_sample(
        &mut self,
        r: usize,
        src: Source,
        ts_ms: f64,
        mbit: f64,
        bytes: u64,
    ) -> Option<Record> {
        if !(mbit.is_finite() && mbit > 0.0) {
            return None;
        }
        let probe = Probe {
            transport: Some(if src == Source::Wren {
                Transport::Pcap
            } else {
                Transport::Http
            }),
            payload_bytes: Some(bytes),
            ..Probe::default()
        };
        let rep = self.replicas.get_mut(r)?;
        let window = rep.cfg.error_window;
        Some(rep.bandwidth_sample(src, true, (ts_ms, mbit, None), probe, window))
    }

    /// Age of the newest sample of `src` for `r`, ms.
    pub fn bandwidth_age_ms(&self, r: usize, src: Source, now_ms: f64) -> Option<f64> {
        self.replicas[r].bw_last_ms[src.index()].map(|t| (now_ms - t).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::testing::*;

    #[test]
    fn an_active_probe_in_flight_counts_against_its_replica() {
        // a is a little faster, but its 512 KiB probe has just started: a unit goes to b.
        let mut p = alike(82.0);
        p.probe_started(0, 512 << 10, 300.0);
        let d = p.choose(0, Some(512 << 10), None, 301.0, [0.9, 0.0]);
        assert_eq!((d.replica, d.reason), (1, Reason::Best));
        // A small request shares only its own size with it: a, still the faster, takes it.
        let small = p.choose(0, Some(2_000), None, 301.0, [0.9, 0.0]);
        assert_eq!(small.replica, 0);
    }

    #[test]
    fn unmeasured_replicas_are_measured_first_and_probes_follow_the_ttl() {
        let mut p = two(Balance::Completion);
        let d = p.choose(0, Some(1000), None, 0.0, [0.5, 0.5]);
        assert_eq!(d.reason, Reason::Unmeasured);
        assert_eq!(p.due_probes(0.0), vec![0, 1]);
        assert!(p.due_probes(10.0).is_empty(), "already being probed");
        p.probe_started(0, 0, 10.0);
        let mut pr = ok(0, 20.0, 50.0, 2.0, 1000);
        pr.probe = true;
        p.finish(&pr);
        // Fresh until the TTL (1 s), due after.
        assert!(!p.due_probes(900.0).contains(&0));
        assert!(p.due_probes(1_100.0).contains(&0));
    }

    #[test]
    fn requests_give_rtt_and_wait_samples_at_most_once_per_sample_gap() {
        let mut p = two(Balance::Completion);
        // 1,000 small requests 1 ms apart to a: the first 100 are all samples, then one each
        // 10 ms (t = 109, 119 … 999: 90), the wait series fed as often; probes and failures
        // are always taken.
        let mut rtt_records = 0;
        for i in 0..1_000 {
            let t = i as f64;
            let due = i < 100 || (i >= 109 && (i - 109) % 10 == 0);
            assert_eq!(p.sample_due(0, t), due, "at {t}");
            let mut d = ok(0, t, 50.0, 2.0, 1000);
            d.bandwidth = None;
            rtt_records += p.finish(&d).len();
        }
        assert_eq!(rtt_records, 190);
        let waits = |p: &Policy| p.replicas[0].wait.as_ref().map_or(0, |w| w.bank().len());
        assert_eq!(waits(&p), 190);
        assert_eq!(p.counters(0).completed, 1_000);
        let mut probe = ok(0, 1_000.5, 50.0, 2.0, 1000);
        (probe.probe, probe.bandwidth) = (true, None);
        assert_eq!(p.finish(&probe).len(), 1, "a probe is always a sample");
        let mut t = fail(0, 1_000.6, Failure::Timeout);
        t.wait_ms = Some(5_000.0);
        p.finish(&t);
        assert_eq!(waits(&p), 192, "a timeout is always fed back");
        // Bandwidth samples (transfers of 64 KiB or more) are all taken.
        p.replicas[1].fed = WARM_SAMPLES;
        let mut bw = 0;
        for i in 0..20 {
            bw += p
                .finish(&ok(1, 2_000.0 + i as f64, 50.0, 2.0, 1 << 20))
                .len();
        }
        assert_eq!(bw, 20 + 2, "20 bandwidth records and 2 RTT ones");
        // A gap of 0: every request is a sample.
        let mut every = two_with(Config {
            sample_gap_ms: 0.0,
            ..Config::default()
        });
        let n: usize = (0..50)
            .map(|i| every.finish(&ok(0, i as f64 * 0.1, 50.0, 2.0, 1000)).len())
            .sum();
        assert_eq!(n, 100);
    }

    #[test]
    fn wren_samples_from_the_capture_are_preferred_while_fresh_and_recorded_as_lower_bounds() {
        let mut p = two(Balance::Bandwidth);
        for i in 0..5 {
            let t = i as f64 * 100.0;
            p.finish(&ok(0, t, 20.0, 2.0, 1 << 20));
            p.finish(&ok(1, t, 60.0, 2.0, 1 << 20));
        }
        // The capture says a's path has 90 Mbit/s: Wren is preferred, and a is now best.
        let mut recs = Vec::new();
        for i in 0..5 {
            let t = 450.0 + i as f64 * 10.0;
            recs.extend(p.bandwidth_sample(0, Source::Wren, t, 90.0, 15_000));
        }
        assert!(p
            .bandwidth_sample(0, Source::Wren, 500.0, f64::NAN, 1)
            .is_none());
        assert!(p.bandwidth_sample(9, Source::Wren, 500.0, 1.0, 1).is_none());
        let d = p.choose(0, Some(1 << 20), None, 500.0, [0.9, 0.0]);
        assert_eq!((d.replica, d.reason), (0, Reason::Best));
        let views = p.views(0, (1 << 20) as f64, 500.0);
        let a = &views[0];
        assert_eq!(a.bandwidth_source, Some(Source::Wren));
        assert_eq!(a.bandwidth_age_ms, Some(10.0));
        assert_eq!(views[1].bandwidth_source, Some(Source::TcpInfo));
        assert_eq!(p.counters(0).bandwidth_samples, [5, 5, 0]);
        let r = recs.last().unwrap();
        assert_eq!(r.metric, Metric::AvailBwLowerBound);
        assert_eq!(r.source, SOURCE);
        assert_eq!(r.timestamp_ms, 490.0);
        assert_eq!(r.probe.as_ref().unwrap().transport, Some(Transport::Pcap));
        // Ten TTLs without a Wren sample: TCP_INFO's forecast is in use again.
        p.finish(&ok(0, 20_000.0, 20.0, 2.0, 1 << 20));
        let v = p.view(0, 1e6, 20_000.0);
        assert_eq!(v.bandwidth_source, Some(Source::TcpInfo));
    }

    #[test]
    fn probes_of_many_replicas_start_a_quarter_at_a_time_each_in_turn() {
        // Up to PROBE_BURST replicas: all at once, as they always were.
        let mut p = many(PROBE_BURST, PROBE_BURST).unwrap();
        assert_eq!(p.due_probes(0.0), (0..PROBE_BURST).collect::<Vec<_>>());
        // 1,000: a quarter at each of the prober's looks (four a TTL), each replica once.
        let mut p = many(1_000, 1_000).unwrap();
        let mut probed = vec![0; 1_000];
        for k in 0..4 {
            let due = p.due_probes(k as f64 * 250.0);
            assert_eq!(due.len(), 250, "look {k}");
            assert_eq!(due, (k * 250..(k + 1) * 250).collect::<Vec<_>>());
            for r in due {
                probed[r] += 1;
            }
        }
        assert!(probed.iter().all(|&n| n == 1));
        assert!(p.due_probes(1_000.0).is_empty(), "all in flight");
        // Probes that ended (failed: stale still) make room; the next look starts after
        // the last replica taken, so none waits for ever behind the others.
        for r in 0..1_000 {
            let mut d = fail(r, 1_100.0, Failure::Connect);
            d.probe = true;
            p.finish(&d);
        }
        let due = p.due_probes(1_250.0);
        assert_eq!(due, (0..250).collect::<Vec<_>>());
        assert_eq!(p.due_probes(1_500.0), (250..500).collect::<Vec<_>>());
    }

    #[test]
    fn an_ejected_replica_is_tried_again_under_every_rule() {
        for balance in [
            Balance::RoundRobin,
            Balance::LeastConnections,
            Balance::P2cPeakEwma,
            Balance::Completion,
        ] {
            let mut p = two(balance);
            assert_eq!(p.probe_tick_ms(), Some(250.0), "{balance:?}");
            if !balance.forecasts() {
                assert!(
                    p.due_probes(0.0).is_empty(),
                    "{balance:?}: no probe while up"
                );
            }
            for i in 0..3 {
                p.finish(&fail(1, 10.0 + i as f64, Failure::Connect));
            }
            assert!(matches!(p.health(1), Health::Ejected { .. }));
            assert!(
                !p.due_probes(500.0).contains(&1),
                "{balance:?}: backing off"
            );
            // After the 1 s backoff: on trial, probed, and back once the probe succeeds.
            assert!(p.due_probes(1_100.0).contains(&1), "{balance:?}");
            p.probe_started(1, 0, 1_100.0);
            let mut good = ok(1, 1_110.0, 80.0, 2.0, 1000);
            good.probe = true;
            p.finish(&good);
            assert_eq!(p.health(1), Health::Up, "{balance:?}");
            let chosen: Vec<usize> = (0..4)
                .map(|i| {
                    p.choose(0, None, None, 1_200.0 + i as f64, [0.9, 0.1])
                        .replica
                })
                .collect();
            if balance == Balance::RoundRobin {
                assert!(chosen.contains(&1), "{balance:?}: {chosen:?}");
            }
        }
    }
}
