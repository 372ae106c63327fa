//! Where a request goes (§5): its unit of work's replica, the forecasts' best (the lowest
//! completion time, or the highest bandwidth), an alternate with probability ε, a replica
//! not measured yet, another replica for a retry, or a comparison rule (round-robin,
//! least connections, P2C peak-EWMA, nearest); and the request counted in flight there.

use super::*;

/// Why a request went where it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Its unit of work was sent there before.
    Sticky,
    /// The forecasts' best.
    Best,
    /// ε-exploration of an alternate.
    Explore,
    /// No forecast yet for this replica: measured first.
    Unmeasured,
    /// Every replica is ejected: the one retried soonest.
    AllEjected,
    /// A retry, to another replica where there is one.
    Retry,
    RoundRobin,
    LeastConnections,
    P2cPeakEwma,
    Nearest,
}

impl Reason {
    pub const ALL: [Reason; 10] = [
        Reason::Sticky,
        Reason::Best,
        Reason::Explore,
        Reason::Unmeasured,
        Reason::AllEjected,
        Reason::Retry,
        Reason::RoundRobin,
        Reason::LeastConnections,
        Reason::P2cPeakEwma,
        Reason::Nearest,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Sticky => "sticky",
            Reason::Best => "best",
            Reason::Explore => "explore",
            Reason::Unmeasured => "unmeasured",
            Reason::AllEjected => "all_ejected",
            Reason::Retry => "retry",
            Reason::RoundRobin => "round_robin",
            Reason::LeastConnections => "least_connections",
            Reason::P2cPeakEwma => "p2c_peak_ewma",
            Reason::Nearest => "nearest",
        }
    }
}

/// Where a request goes and why (every candidate's view: [`Policy::views`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub replica: usize,
    pub reason: Reason,
    /// The size its completion time was forecast for, and where it came from.
    pub size: Size,
    pub timeout_ms: f64,
}

impl Policy {
    /// Chooses the replica for a request to service `s` whose Content-Length is `length`
    /// (None: not given) and whose route is unknown; [`Policy::choose_sized`].
    pub fn choose(
        &mut self,
        s: usize,
        length: Option<u64>,
        unit: Option<&str>,
        now_ms: f64,
        draws: [f64; 2],
    ) -> Decision {
        let size = self.size_of(s, length, None);
        self.choose_sized(s, size, unit, now_ms, draws)
    }

    /// Chooses the replica for a request to service `s` of `size` ([`Policy::size_of`])
    /// whose unit of work is `unit`; `draws` are two uniform numbers in [0, 1). Counts the
    /// request as in flight there until [`Policy::finish`].
    pub fn choose_sized(
        &mut self,
        s: usize,
        size: Size,
        unit: Option<&str>,
        now_ms: f64,
        draws: [f64; 2],
    ) -> Decision {
        self.update_health(now_ms);
        self.budget.request(now_ms);
        let sticky = unit.and_then(|u| self.sticky.get(s, u, now_ms));
        let (replica, reason) = match sticky {
            Some(r) if self.replicas[r].health == Health::Up => (r, Reason::Sticky),
            _ => self.pick(s, size.bytes, now_ms, draws, None),
        };
        if let Some(u) = unit {
            self.sticky.set(s, u, replica, now_ms);
        }
        self.commit(replica, reason, size, now_ms)
    }

    /// A retry of a request to service `s` of `size` (its first decision's) that failed on
    /// `failed`: another replica of the service that is up, never `failed` itself (it would
    /// fail as it just did, and a request to a service of one replica, or whose others are
    /// all ejected, spent the whole budget on it). `None` when there is no such replica (no
    /// token is spent) or the retry budget refuses it.
    pub fn retry_sized(
        &mut self,
        s: usize,
        size: Size,
        failed: usize,
        now_ms: f64,
        draws: [f64; 2],
    ) -> Option<Decision> {
        self.update_health(now_ms);
        let other_up = self.services[s]
            .spec
            .replicas
            .iter()
            .any(|&r| r != failed && self.replicas[r].health == Health::Up);
        if !other_up || !self.budget.try_retry(now_ms) {
            return None;
        }
        let (replica, _) = self.pick(s, size.bytes, now_ms, draws, Some(failed));
        debug_assert_ne!(replica, failed, "a retry goes elsewhere");
        Some(self.commit(replica, Reason::Retry, size, now_ms))
    }

    fn commit(&mut self, r: usize, reason: Reason, size: Size, now_ms: f64) -> Decision {
        self.fill_backlog(r, size.bytes, now_ms);
        let rep = &mut self.replicas[r];
        rep.inflight += 1;
        rep.counters.chosen[reason as usize] += 1;
        Decision {
            replica: r,
            reason,
            size,
            timeout_ms: self.timeout_ms(r),
        }
    }

    fn pick(
        &mut self,
        s: usize,
        size: f64,
        now_ms: f64,
        draws: [f64; 2],
        avoid: Option<usize>,
    ) -> (usize, Reason) {
        // The healthy replicas, less the one that failed if another is healthy, gathered in
        // a list kept from one request to the next (not one allocated for each).
        let mut choices = std::mem::take(&mut self.choices);
        choices.clear();
        let all = &self.services[s].spec.replicas;
        let up = |r: usize| self.replicas[r].health == Health::Up;
        let skip = avoid.filter(|&a| all.iter().any(|&r| r != a && up(r)));
        choices.extend(all.iter().copied().filter(|&r| up(r) && Some(r) != skip));
        let picked = self.pick_among(s, &choices, size, now_ms, draws, avoid);
        self.choices = choices;
        picked
    }

    /// [`Policy::pick`] among `choices`, the healthy replicas of service `s` it may take.
    fn pick_among(
        &mut self,
        s: usize,
        choices: &[usize],
        size: f64,
        now_ms: f64,
        draws: [f64; 2],
        avoid: Option<usize>,
    ) -> (usize, Reason) {
        let all = &self.services[s].spec.replicas;
        if choices.is_empty() {
            // Every replica ejected or on trial: the one whose backoff ends first.
            let r = all
                .iter()
                .copied()
                .min_by(|&a, &b| {
                    let until = |r: usize| match self.replicas[r].health {
                        Health::Ejected { until_ms } => until_ms,
                        _ => f64::NEG_INFINITY,
                    };
                    until(a).total_cmp(&until(b))
                })
                .expect("a service has replicas");
            return (r, Reason::AllEjected);
        }
        let pick_index = |d: f64, n: usize| ((d * n as f64) as usize).min(n - 1);
        let cfg = &self.services[s].cfg;
        let (epsilon, explore_fresh, balance) = (cfg.epsilon, cfg.explore_fresh, cfg.balance);
        match balance {
            Balance::RoundRobin => {
                let svc = &mut self.services[s];
                let r = choices[svc.rr % choices.len()];
                svc.rr = svc.rr.wrapping_add(1);
                (r, Reason::RoundRobin)
            }
            Balance::LeastConnections => {
                let svc = &mut self.services[s];
                let n = choices.len();
                let start = svc.rr % n;
                svc.rr = svc.rr.wrapping_add(1);
                // Fewest in flight; ties broken in turn.
                let r = (0..n)
                    .map(|i| choices[(start + i) % n])
                    .min_by_key(|&r| self.replicas[r].inflight)
                    .expect("choices");
                (r, Reason::LeastConnections)
            }
            Balance::P2cPeakEwma => {
                let n = choices.len();
                let a = choices[pick_index(draws[0], n)];
                let b = if n > 1 {
                    let j = pick_index(draws[1], n - 1);
                    let i = choices.iter().position(|&x| x == a).expect("a");
                    choices[if j >= i { j + 1 } else { j }]
                } else {
                    a
                };
                // A replica without a latency yet costs nothing, so it is tried.
                let cost = |r: usize| self.ewma_cost(r, now_ms).unwrap_or(0.0);
                let r = if cost(b) < cost(a) { b } else { a };
                (r, Reason::P2cPeakEwma)
            }
            Balance::Nearest => {
                let fixed = self.services[s].nearest.filter(|r| choices.contains(r));
                if let Some(r) = fixed {
                    return (r, Reason::Nearest);
                }
                let rtts: Vec<Option<f64>> = choices
                    .iter()
                    .map(|&r| self.rtt(r).map(|e| e.value))
                    .collect();
                if rtts.iter().all(Option::is_some) {
                    let (i, _) = rtts
                        .iter()
                        .enumerate()
                        .min_by(|a, b| a.1.unwrap().total_cmp(&b.1.unwrap()))
                        .expect("choices");
                    let r = choices[i];
                    if avoid.is_none() {
                        self.services[s].nearest = Some(r);
                    }
                    (r, Reason::Nearest)
                } else {
                    (choices[0], Reason::Nearest)
                }
            }
            Balance::Completion | Balance::Bandwidth => {
                self.decisions += 1;
                // Replicas without an RTT yet first, the one with the fewest in flight,
                // ties in turn.
                let unmeasured: Vec<usize> = choices
                    .iter()
                    .copied()
                    .filter(|&r| self.rtt(r).is_none())
                    .collect();
                if !unmeasured.is_empty() {
                    let svc = &mut self.services[s];
                    let start = svc.rr % unmeasured.len();
                    svc.rr = svc.rr.wrapping_add(1);
                    let n = unmeasured.len();
                    let r = (0..n)
                        .map(|i| unmeasured[(start + i) % n])
                        .min_by_key(|&r| self.replicas[r].inflight)
                        .expect("unmeasured");
                    return (r, Reason::Unmeasured);
                }
                let best = self.best(s, choices, size, now_ms);
                if choices.len() > 1 && draws[0] < epsilon && avoid.is_none() {
                    // Alternates whose estimate has gone stale ([`Policy::stale`]), or
                    // every alternate when told to explore always (the paper's rule);
                    // not one whose active probe is under way: the probe is measuring it
                    // already, and a request sent there would share the path with it (a
                    // stale alternate is the one the prober picks, so the two met: twice a
                    // unit's time, the slowest units where the replicas are alike).
                    let others: Vec<usize> = choices
                        .iter()
                        .copied()
                        .filter(|&r| r != best)
                        .filter(|&r| {
                            !self.replicas[r].probing
                                && (explore_fresh || self.stale(r, best, now_ms))
                        })
                        .collect();
                    if !others.is_empty() {
                        self.explored += 1;
                        return (others[pick_index(draws[1], others.len())], Reason::Explore);
                    }
                }
                (best, Reason::Best)
            }
        }
    }

    /// Whether alternate `r`'s estimate has gone stale, so that ε-exploration may send it a
    /// request instead of `best`: no sample at all within its TTL, or no bandwidth sample
    /// within it while it has had one, or none ever while `best` has a fresh one. The active
    /// probes refresh its RTT at every TTL, but a GET probe (`--probe-bytes 0`, the default)
    /// measures no bandwidth, which only a transfer does: on the RTT alone, a replica that is
    /// not chosen kept the bandwidth it was measured at once (one unlucky sample), for ever.
    fn stale(&self, r: usize, best: usize, now_ms: f64) -> bool {
        let rep = &self.replicas[r];
        let ttl = rep.cfg.ttl_ms;
        let old = |t: f64| now_ms - t > ttl;
        let newest_bw = |r: usize| {
            self.replicas[r]
                .bw_last_ms
                .iter()
                .flatten()
                .copied()
                .reduce(f64::max)
        };
        rep.last_sample_ms.is_none_or(old)
            || match newest_bw(r) {
                Some(t) => old(t),
                None => newest_bw(best).is_some_and(|t| !old(t)),
            }
    }

    /// The best of `choices` by the forecast rule (all have an RTT forecast). While some
    /// have no bandwidth forecast yet (traffic too small to measure one), the completion
    /// rule compares the RTTs alone, and the bandwidth rule takes an unknown bandwidth as 0.
    fn best(&self, s: usize, choices: &[usize], size: f64, now_ms: f64) -> usize {
        if let [only] = choices {
            return *only;
        }
        let cfg = &self.services[s].cfg;
        let all_bw = choices.iter().all(|&r| self.bandwidth(r, now_ms).is_some());
        let k = cfg.error_k;
        let key = |r: usize| -> (f64, f64) {
            let bw = self.bandwidth(r, now_ms).map(|b| b.0);
            match cfg.balance {
                Balance::Bandwidth => (-bw.map_or(0.0, |b| b.value), 0.0),
                _ if !all_bw => {
                    let rtt = self.rtt(r).expect("measured");
                    (rtt.value + k * rtt.error.abs(), rtt.value)
                }
                _ => {
                    // Worst case first (errors weighed by k), the point forecast breaks
                    // ties (both infinite when bandwidth − k·error ≤ 0).
                    // The same forecast as the view's ([`Policy::site`]).
                    let (site, _, timed) = self.site(r, size, now_ms);
                    let p = rank::predict(&site, timed, k);
                    let t = p.time_ms.unwrap_or(f64::INFINITY);
                    (p.high_ms.unwrap_or(f64::INFINITY), t)
                }
            }
        };
        let keyed: Vec<(usize, (f64, f64))> = choices.iter().map(|&r| (r, key(r))).collect();
        keyed
            .iter()
            .min_by(|(_, ka), (_, kb)| ka.0.total_cmp(&kb.0).then(ka.1.total_cmp(&kb.1)))
            .map(|(r, _)| *r)
            .expect("choices")
    }

    pub(super) fn ewma_cost(&self, r: usize, now_ms: f64) -> Option<f64> {
        let rep = &self.replicas[r];
        let (cost, at) = rep.ewma?;
        // Decays towards nothing while no sample comes (Finagle decays towards 0 too), so
        // that an idle replica is tried again.
        let w = (-(now_ms - at).max(0.0) / self.cfg.ewma_tau_ms).exp();
        Some(cost * w * (rep.inflight as f64 + 1.0))
    }

    /// Share of forecast-rule decisions that explored.
    pub fn exploration_share(&self) -> f64 {
        if self.decisions == 0 {
            0.0
        } else {
            self.explored as f64 / self.decisions as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::testing::*;
    use crate::rng::Rng;

    /// Scripted run: every 100 ms a 1 MB upload; replica a has 75 Mbit/s, b 25 then 100
    /// after `change_ms`. Returns the share that went to the better replica after the change
    /// + `settle_ms`, and the share explored.
    fn scripted(balance: Balance, change_ms: f64, settle_ms: f64, end_ms: f64) -> (f64, f64) {
        let mut p = two(balance);
        let mut rng = Rng::new(42);
        let (mut good, mut after) = (0u32, 0u32);
        let mut t = 0.0;
        while t < end_ms {
            let bw = |r: usize| match (r, t >= change_ms) {
                (0, _) => 75.0,
                (_, false) => 25.0,
                (_, true) => 100.0,
            };
            run_due_probes(&mut p, t, bw);
            let d = p.choose(0, Some(1 << 20), None, t, [rng.unit(), rng.unit()]);
            let better = if t >= change_ms { 1 } else { 0 };
            if t >= change_ms + settle_ms {
                after += 1;
                good += (d.replica == better) as u32;
            }
            let done = ok(d.replica, t + 20.0, bw(d.replica), 5.0, 1 << 20);
            p.finish(&done);
            t += 100.0;
        }
        (good as f64 / after as f64, p.exploration_share())
    }

    #[test]
    fn the_forecast_rule_follows_a_change_of_available_bandwidth_within_two_seconds() {
        let (share, explored) = scripted(Balance::Completion, 30_000.0, 2_000.0, 60_000.0);
        assert!(share >= 0.9, "share to the better replica {share}");
        assert!((0.02..0.09).contains(&explored), "explored {explored}");
        let (share, _) = scripted(Balance::Bandwidth, 30_000.0, 2_000.0, 60_000.0);
        assert!(share >= 0.9, "bandwidth rule: {share}");
    }

    #[test]
    fn round_robin_does_not_follow_and_p2c_sees_only_latency() {
        let (rr, _) = scripted(Balance::RoundRobin, 30_000.0, 2_000.0, 60_000.0);
        assert!((0.45..=0.55).contains(&rr), "{rr}");
        let (near, _) = scripted(Balance::Nearest, 30_000.0, 2_000.0, 60_000.0);
        // Equal RTTs: the first is nearest and stays chosen, the worse one after the change.
        assert_eq!(near, 0.0);
    }

    #[test]
    fn completion_time_weighs_rtt_against_bandwidth_by_size() {
        let mut p = two(Balance::Completion);
        // a: 100 ms RTT, 100 Mbit/s; b: 5 ms, 10 Mbit/s. Small requests go to b, big to a.
        for i in 0..20 {
            let t = i as f64 * 10.0;
            p.finish(&ok(0, t, 100.0, 100.0, 1 << 20));
            p.finish(&ok(1, t, 10.0, 5.0, 1 << 20));
        }
        let small = p.choose(0, Some(1_000), None, 300.0, [0.9, 0.0]);
        assert_eq!((small.replica, small.reason), (1, Reason::Best));
        let big = p.choose(0, Some(10 << 20), None, 300.0, [0.9, 0.0]);
        assert_eq!((big.replica, big.reason), (0, Reason::Best));
        // The views say why: a's forecast time for 10 MB is below b's.
        let views = p.views(0, big.size.bytes, 300.0);
        let (a, b) = (&views[0], &views[1]);
        assert!(a.time_ms.unwrap() < b.time_ms.unwrap());
        assert_eq!(a.bandwidth_source, Some(Source::TcpInfo));
        assert!(a.sample_age_ms.unwrap() > 0.0);
        // Exploration: a draw under ε goes to the other one.
        let e = p.choose(0, Some(10 << 20), None, 300.0, [0.01, 0.5]);
        assert_eq!((e.replica, e.reason), (1, Reason::Explore));
    }

    #[test]
    fn a_replica_slow_to_answer_is_not_the_fastest_for_its_fast_path() {
        // 1 MiB downloads. a: 500 Mbit/s, answers at once; b: 2000 Mbit/s, takes 500 ms to
        // answer every request. Before the replica's time to answer was counted, b's
        // forecast was 1 ms + 4 ms and it was "best" (a user's review, 2026-12-08).
        let mut p = two(Balance::Completion);
        for i in 0..30 {
            let t = i as f64 * 600.0;
            for (r, mbit, think) in [(0, 500.0, 0.3), (1, 2000.0, 500.0)] {
                let mut d = ok(r, t, mbit, 1.0, 0);
                (d.bytes_up, d.bytes_down) = (0, 1 << 20);
                d.wait_ms = Some(1.0 + think);
                d.base_rtt_ms = Some(1.0);
                p.finish(&d);
            }
        }
        let d = p.choose(0, Some(1 << 20), None, 18_000.0, [0.9, 0.0]);
        assert_eq!((d.replica, d.reason), (0, Reason::Best));
        let views = p.views(0, (1 << 20) as f64, 18_000.0);
        let (a, b) = (&views[0], &views[1]);
        assert!((b.think_ms.unwrap() - 500.0).abs() < 5.0, "{b:?}");
        assert!(a.think_ms.unwrap() < 1.0, "{a:?}");
        // (a's view counts the request just sent there, in flight: twice 1 MiB at 500 Mbit/s.)
        assert!(
            b.time_ms.unwrap() > 500.0 && a.time_ms.unwrap() < 40.0,
            "{views:?}"
        );
        // An upload's wait holds the drain of its queued bytes: not the replica's time.
        let mut p = two(Balance::Completion);
        let mut d = ok(0, 0.0, 100.0, 1.0, 1 << 20);
        d.wait_ms = Some(80.0);
        p.finish(&d);
        assert_eq!(p.views(0, 1e6, 1.0)[0].think_ms, None);
    }

    #[test]
    fn concurrent_units_spread_over_alike_replicas_and_come_back_once_the_path_drains() {
        // a is a little faster: alone, every unit goes there.
        let mut p = alike(82.0);
        let first = p.choose(0, Some(512 << 10), None, 300.0, [0.9, 0.0]);
        assert_eq!((first.replica, first.reason), (0, Reason::Best));
        // A second unit 10 ms later would share a's path with the first's ~430 KB still to
        // go (≈ 94 ms there) against 53 ms alone on b: it goes to b, and the views say why.
        let views = p.views(0, (512 << 10) as f64, 310.0);
        let left = (512 << 10) as f64 - 82.0 * 125.0 * 10.0;
        assert!((views[0].backlog_bytes - left).abs() < 1.0, "{views:?}");
        assert_eq!(views[1].backlog_bytes, 0.0);
        assert!(views[0].time_ms.unwrap() > views[1].time_ms.unwrap() + 30.0);
        let second = p.choose(0, Some(512 << 10), None, 310.0, [0.9, 0.0]);
        assert_eq!((second.replica, second.reason), (1, Reason::Best));
        // A unit of a replica whose transfers are all done finds its path empty.
        let mut d = ok(0, 355.0, 82.0, 12.0, 512 << 10);
        d.base_rtt_ms = Some(1.0);
        p.finish(&d);
        let third = p.choose(0, Some(512 << 10), None, 356.0, [0.9, 0.0]);
        assert_eq!(third.replica, 0);
        // The forecast drains what it does not hear of: 60 ms after it was sent, a unit at
        // 82 Mbit/s has crossed (≈ 51 ms alone), and a fourth unit goes to a again although
        // the third's end has not been reported.
        let fourth = p.choose(0, Some(512 << 10), None, 420.0, [0.9, 0.0]);
        let views = p.views(0, fourth.size.bytes, 420.0);
        assert_eq!(fourth.replica, 0, "{views:?}");
    }

    #[test]
    fn an_alternate_whose_probe_is_under_way_is_not_explored() {
        // b is stale (no sample for 1.5 s, over the 1 s TTL) and due a probe: a draw under ε
        // would explore it, but not while its probe runs, and again once the probe is back.
        let mut p = alike(90.0);
        let e = p.choose(0, Some(512 << 10), None, 1_700.0, [0.01, 0.5]);
        assert_eq!((e.replica, e.reason), (1, Reason::Explore));
        let mut p = alike(90.0);
        assert_eq!(p.due_probes(1_700.0), vec![0, 1]);
        p.probe_started(1, 512 << 10, 1_700.0);
        let d = p.choose(0, Some(512 << 10), None, 1_701.0, [0.01, 0.5]);
        assert_eq!((d.replica, d.reason), (0, Reason::Best));
        let mut back = ok(1, 1_760.0, 80.0, 12.0, 512 << 10);
        back.probe = true;
        p.finish(&back);
        assert_eq!(
            p.replicas[1].backlog.0, 0.0,
            "nothing in flight, nothing left"
        );
    }

    #[test]
    fn by_default_only_stale_alternates_are_explored() {
        let mut p = two_with(Config::default());
        for i in 0..5 {
            let t = i as f64 * 10.0;
            p.finish(&ok(0, t, 100.0, 2.0, 1 << 20));
            p.finish(&ok(1, t, 10.0, 2.0, 1 << 20));
        }
        // b was sampled 10 ms ago: a draw under ε stays with the best.
        let d = p.choose(0, Some(1 << 20), None, 50.0, [0.01, 0.5]);
        assert_eq!((d.replica, d.reason), (0, Reason::Best));
        // Past the TTL with no sample, b is explored.
        let d = p.choose(0, Some(1 << 20), None, 1_100.0, [0.01, 0.5]);
        assert_eq!((d.replica, d.reason), (1, Reason::Explore));
    }

    #[test]
    fn all_ejected_still_answers_with_the_soonest_back() {
        let mut p = two(Balance::Completion);
        for r in 0..2 {
            for i in 0..3 {
                p.finish(&fail(r, (r * 100 + i) as f64, Failure::Connect));
            }
        }
        let d = p.choose(0, None, None, 150.0, [0.5, 0.5]);
        assert_eq!((d.replica, d.reason), (0, Reason::AllEjected));
    }

    #[test]
    fn a_unit_of_work_sticks_to_its_replica_unless_it_is_ejected() {
        let mut p = two(Balance::RoundRobin);
        let first = p.choose(0, None, Some("job-7"), 0.0, [0.0, 0.0]).replica;
        for i in 1..10 {
            let d = p.choose(0, None, Some("job-7"), i as f64, [0.0, 0.0]);
            assert_eq!((d.replica, d.reason), (first, Reason::Sticky));
        }
        for i in 0..3 {
            p.finish(&fail(first, 20.0 + i as f64, Failure::Status));
        }
        let moved = p.choose(0, None, Some("job-7"), 30.0, [0.0, 0.0]);
        assert_ne!(moved.replica, first);
        assert_eq!(
            p.choose(0, None, Some("job-7"), 31.0, [0.0, 0.0]).reason,
            Reason::Sticky
        );
    }

    #[test]
    fn p2c_prefers_the_lower_peak_ewma_and_least_connections_the_emptier() {
        let mut p = two(Balance::P2cPeakEwma);
        p.finish(&ok(0, 0.0, 10.0, 200.0, 1 << 20));
        p.finish(&ok(1, 0.0, 100.0, 2.0, 1 << 20));
        for _ in 0..10 {
            let d = p.choose(0, None, None, 10.0, [0.3, 0.3]);
            assert_eq!(d.replica, 1);
            p.finish(&ok(1, 10.0, 100.0, 2.0, 1 << 20));
        }
        let mut l = two(Balance::LeastConnections);
        let a = l.choose(0, None, None, 0.0, [0.0, 0.0]).replica;
        let b = l.choose(0, None, None, 0.0, [0.0, 0.0]).replica;
        assert_ne!(a, b);
        l.finish(&ok(a, 1.0, 1.0, 1.0, 1));
        assert_eq!(l.choose(0, None, None, 2.0, [0.0, 0.0]).replica, a);
    }

    #[test]
    fn retries_go_elsewhere_and_stop_at_the_budget() {
        let mut p = two(Balance::RoundRobin);
        let mut allowed = 0;
        for i in 0..200 {
            let d = p.choose(0, None, None, i as f64, [0.0, 0.0]);
            if let Some(r) = p.retry_sized(0, d.size, d.replica, i as f64, [0.0, 0.0]) {
                assert_ne!(r.replica, d.replica);
                assert_eq!(r.reason, Reason::Retry);
                allowed += 1;
            }
        }
        // Burst 10 + 10 % of 200 + a fifth of a second's floor.
        assert!((28..=31).contains(&allowed), "{allowed}");
    }

    #[test]
    fn a_retry_never_goes_back_to_the_replica_that_failed_nor_spends_a_token_for_nothing() {
        let mut p = two(Balance::RoundRobin);
        // b is ejected: a request that failed on a has nowhere else to go.
        for i in 0..3 {
            p.finish(&fail(1, i as f64, Failure::Connect));
        }
        let tokens = p.budget.tokens();
        let d = p.choose(0, None, None, 10.0, [0.0, 0.0]);
        assert_eq!(d.replica, 0);
        assert_eq!(p.retry_sized(0, d.size, 0, 10.0, [0.0, 0.0]), None);
        assert_eq!((p.budget.retries, p.budget.refused), (0, 0));
        assert!(p.budget.tokens() >= tokens, "no token spent");
        // A service of one replica: never retried.
        let mut one = many(1, 1).unwrap();
        let d = one.choose(0, None, None, 0.0, [0.0, 0.0]);
        assert_eq!(one.retry_sized(0, d.size, d.replica, 0.0, [0.0, 0.0]), None);
    }

    #[test]
    fn an_alternate_whose_bandwidth_went_stale_is_explored_though_probes_keep_its_rtt_fresh() {
        let mut p = two_with(Config::default());
        for i in 0..5 {
            let t = i as f64 * 10.0;
            p.finish(&ok(0, t, 100.0, 2.0, 1 << 20));
            p.finish(&ok(1, t, 10.0, 2.0, 1 << 20));
        }
        // From then on a's requests measure a, and GET probes (RTT only) keep b's RTT fresh.
        let mut t = 50.0;
        while t < 3_000.0 {
            let mut probe = ok(1, t, 10.0, 2.0, 0);
            (probe.probe, probe.bandwidth) = (true, None);
            p.finish(&probe);
            p.finish(&ok(0, t, 100.0, 2.0, 1 << 20));
            t += 100.0;
        }
        assert!(p.view(1, 1.0, t).sample_age_ms.unwrap() < 1_000.0);
        // b's bandwidth is 3 s old, past the 1 s TTL: a draw under ε explores it.
        let d = p.choose(0, Some(1 << 20), None, t, [0.01, 0.5]);
        assert_eq!((d.replica, d.reason), (1, Reason::Explore));
        // Once measured again, it is fresh: the best again.
        p.finish(&ok(1, t + 1.0, 10.0, 2.0, 1 << 20));
        let d = p.choose(0, Some(1 << 20), None, t + 2.0, [0.01, 0.5]);
        assert_eq!((d.replica, d.reason), (0, Reason::Best));
    }
}
