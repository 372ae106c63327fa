//! The timeout experiment's model (Allen, Wolski & Plank, "Adaptive timeout discovery using
//! the Network Weather Service", §4–5), as a deterministic core: a binary reduction tree whose
//! every send is followed by an application acknowledgement and is cancelled, reconnected and
//! resent when its timeout expires (5 attempts, then abandoned); a seeded per-link delay
//! model with heavy-tailed stalls, links ten times slower than others and a regime change
//! half-way; and the timeout policies compared.
//!
//! Times here are "paper seconds": the experiment runs them scaled (`--scale`). A delay is a
//! pure function of (seed, reduction, link, attempt), so the same trace is replayed for every
//! policy and any run replays exactly from its seed.

use crate::rng::Rng;
use nowcast_core::timeout::{Bounds, Rule};
use nowcast_core::{Mode, Series};

/// Attempts of one send before it is abandoned (the paper: 5).
pub const ATTEMPTS: usize = 5;

/// The delay model.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub procs: usize,
    /// Median send time of a fast link, s, and the lognormal spread around it.
    pub fast_median_s: f64,
    pub sigma: f64,
    /// Every `slow_every`-th link is `slow_factor` times slower.
    pub slow_every: usize,
    pub slow_factor: f64,
    /// Probability that an attempt stalls, and the stall's Pareto scale, shape and cap, s.
    pub stall_p: f64,
    pub stall_xm_s: f64,
    pub stall_alpha: f64,
    pub stall_cap_s: f64,
    /// After the change (at `change_at` of the reductions): which links are slow moves, and
    /// fast links get this much slower.
    pub change_at: f64,
    pub fast_after: f64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            procs: 16,
            fast_median_s: 0.5,
            sigma: 0.3,
            slow_every: 4,
            slow_factor: 10.0,
            stall_p: 0.02,
            stall_xm_s: 5.0,
            stall_alpha: 1.2,
            stall_cap_s: 120.0,
            change_at: 0.5,
            fast_after: 1.5,
        }
    }
}

fn mix(mut h: u64, v: u64) -> u64 {
    h ^= v
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(h << 6)
        .wrapping_add(h >> 2);
    Rng::new(h).next_u64()
}

impl Params {
    /// Links are numbered by the sending process (1..procs).
    pub fn links(&self) -> usize {
        self.procs.saturating_sub(1)
    }

    /// Whether `link` is slow in reduction `r` of `total`.
    pub fn slow(&self, link: usize, r: usize, total: usize) -> bool {
        let after = (r as f64) >= self.change_at * total as f64;
        let phase = if after { 3 } else { 1 };
        link % self.slow_every == phase % self.slow_every
    }

    /// The time attempt `attempt` of `link`'s send in reduction `r` (of `total`) takes, s.
    pub fn delay(&self, seed: u64, r: usize, total: usize, link: usize, attempt: usize) -> f64 {
        let h = mix(mix(mix(seed, r as u64), link as u64), attempt as u64);
        let mut rng = Rng::new(h);
        let after = (r as f64) >= self.change_at * total as f64;
        let mut median = self.fast_median_s * if after { self.fast_after } else { 1.0 };
        if self.slow(link, r, total) {
            median *= self.slow_factor;
        }
        let mut d = rng.lognormal(median.ln(), self.sigma);
        if rng.unit() < self.stall_p {
            d += rng
                .pareto(self.stall_xm_s, self.stall_alpha)
                .min(self.stall_cap_s);
        }
        d
    }
}

/// A timeout policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    Static(f64),
    /// One of the library's adaptive rules.
    Dynamic(Rule),
    /// A second copy sent at the forecast p95 (no cancel), within a retry budget, then the
    /// improved rule's timeout for cancel–resend.
    Hedge,
}

impl Policy {
    /// The policies of the experiment, in the tables' order.
    pub fn all() -> Vec<Policy> {
        vec![
            Policy::Static(2.0),
            Policy::Static(5.0),
            Policy::Static(15.0),
            Policy::Static(45.0),
            Policy::Dynamic(Rule::Allen { k: 1.0 }),
            Policy::Dynamic(Rule::Allen { k: 2.0 }),
            Policy::Dynamic(Rule::Nws),
            Policy::Dynamic(Rule::Windowed { k: 2.0, window: 20 }),
            Policy::Dynamic(Rule::DEFAULT),
            Policy::Dynamic(Rule::Rfc6298 { granularity: 0.0 }),
            Policy::Hedge,
        ]
    }

    pub fn name(&self) -> String {
        match self {
            Policy::Static(t) => format!("static {t} s"),
            Policy::Dynamic(Rule::Allen { k }) => format!("mean+{k}sd"),
            Policy::Dynamic(Rule::Nws) => "nws original".into(),
            Policy::Dynamic(Rule::Windowed { .. }) => "windowed".into(),
            Policy::Dynamic(Rule::Target { miss }) => {
                format!("improved (target {}%)", miss * 100.0)
            }
            Policy::Dynamic(Rule::Rfc6298 { .. }) => "rfc 6298".into(),
            Policy::Hedge => "hedge at p95".into(),
        }
    }

    pub fn is_static(&self) -> bool {
        matches!(self, Policy::Static(_))
    }
}

/// The bounds of every dynamic rule: the paper's static minimum (§6; here 1 s), a ceiling
/// of the most generous static timeout, and a penalty of the floor for a timed-out attempt.
pub const BOUNDS: Bounds = Bounds {
    floor: 1.0,
    ceiling: 45.0,
    penalty: 1.0,
};
/// The timeout of a link whose rule has nothing to go on yet: the most generous static one.
pub const INITIAL_S: f64 = 45.0;

/// One sender's state for one link under one policy.
#[derive(Clone, Debug)]
pub struct Link {
    policy: Policy,
    series: Series,
    /// Hedging's budget: tokens earned per send, spent per hedge.
    tokens: f64,
    /// Hedges sent.
    pub hedges: u64,
}

/// How one send went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Send {
    /// From the first attempt to the acknowledgement (or to giving up), s.
    pub time_s: f64,
    /// Attempts started (1 when the first succeeded; hedges count).
    pub attempts: usize,
    pub abandoned: bool,
}

impl Link {
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            series: Series::new(Mode::Improved, BOUNDS),
            tokens: 2.0,
            hedges: 0,
        }
    }

    /// The timeout of the next attempt, s.
    pub fn timeout_s(&self) -> f64 {
        let rule = match self.policy {
            Policy::Static(t) => return t,
            Policy::Dynamic(rule) => rule,
            Policy::Hedge => Rule::DEFAULT,
        };
        // The rules' own cold start (3 × the longest attempt seen until the spread is known);
        // the most generous static timeout before any attempt.
        self.series.timeout_by(rule).unwrap_or(INITIAL_S)
    }

    /// When hedging sends its second copy, s after the first: the forecast's p95 (MSE
    /// forecast + 1.645 RMSE), once the forecast has data.
    pub fn hedge_at_s(&self) -> Option<f64> {
        if self.policy != Policy::Hedge || self.tokens < 1.0 {
            return None;
        }
        let f = self.series.forecast()?;
        if self.series.bank().mse_accum().n < nowcast_core::timeout::MIN_ERRORS {
            return None;
        }
        Some((f.mse.value + 1.645 * f.mse.error.max(0.0).sqrt()).max(BOUNDS.floor))
    }

    /// An attempt timed out after `t` s: fed back as `t` plus the penalty (NWS), so the
    /// next attempt's timeout already knows.
    pub fn timed_out(&mut self, t: f64) {
        let _ = self.series.timed_out(t);
    }

    /// An attempt was acknowledged after `d` s.
    pub fn succeeded(&mut self, d: f64) {
        let _ = self.series.observe(d);
    }

    /// A send starts: hedging's budget earns a twentieth of a token (at most 5 % of sends
    /// are hedged, after a burst of 2).
    pub fn start(&mut self) {
        self.tokens = (self.tokens + 0.05).min(2.0);
    }

    /// A hedge was sent.
    pub fn hedged(&mut self) {
        self.tokens -= 1.0;
        self.hedges += 1;
    }

    /// Runs one send whose attempts take `delays` (s), as the policy would, and learns from
    /// it: the virtual-time twin of the loopback run.
    pub fn send(&mut self, delays: &[f64; ATTEMPTS]) -> Send {
        self.start();
        let mut elapsed = 0.0;
        let mut attempts = 0;
        let mut next = 0;
        if let Some(h) = self.hedge_at_s() {
            let t = self.timeout_s();
            if delays[0] > h && h < t {
                // The hedge goes at h; the first copy to arrive wins.
                self.hedged();
                attempts = 2;
                next = 2;
                let done = delays[0].min(h + delays[1]);
                if done <= t {
                    self.succeeded(done);
                    return Send {
                        time_s: done,
                        attempts,
                        abandoned: false,
                    };
                }
                elapsed = t;
                self.timed_out(t);
            }
        }
        for &d in &delays[next..] {
            let t = self.timeout_s();
            attempts += 1;
            if d <= t {
                self.succeeded(d);
                return Send {
                    time_s: elapsed + d,
                    attempts,
                    abandoned: false,
                };
            }
            elapsed += t;
            self.timed_out(t);
        }
        Send {
            time_s: elapsed,
            attempts,
            abandoned: true,
        }
    }
}

/// The tree: who sends to whom at each level (recursive halving: at level k, process i with
/// i mod 2^(k+1) = 2^k sends to i − 2^k). Returns (level, child, parent) in order.
pub fn tree(procs: usize) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut step = 1;
    let mut level = 0;
    while step < procs {
        let mut i = step;
        while i < procs {
            out.push((level, i, i - step));
            i += 2 * step;
        }
        step *= 2;
        level += 1;
    }
    out
}

/// One reduction in virtual time: its duration, s, and each send's outcome (by link).
pub fn reduce(
    params: &Params,
    seed: u64,
    r: usize,
    total: usize,
    links: &mut [Link],
) -> (f64, Vec<Send>) {
    let mut ready = vec![0.0f64; params.procs];
    let mut sends = Vec::with_capacity(params.links());
    for (_, child, parent) in tree(params.procs) {
        let mut delays = [0.0; ATTEMPTS];
        for (a, d) in delays.iter_mut().enumerate() {
            *d = params.delay(seed, r, total, child, a);
        }
        let s = links[child].send(&delays);
        let arrive = ready[child] + s.time_s;
        ready[parent] = ready[parent].max(arrive);
        sends.push(s);
    }
    (ready[0], sends)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_reduces_sixteen_processes_in_four_levels() {
        let t = tree(16);
        assert_eq!(t.len(), 15);
        assert_eq!(t.iter().map(|x| x.0).max(), Some(3));
        assert_eq!(t.last(), Some(&(3, 8, 0)));
        let mut children: Vec<usize> = t.iter().map(|x| x.1).collect();
        children.sort();
        assert_eq!(children, (1..16).collect::<Vec<_>>());
    }

    #[test]
    fn delays_are_a_pure_function_of_the_seed_and_follow_the_model() {
        let p = Params::default();
        assert_eq!(p.delay(7, 3, 100, 5, 0), p.delay(7, 3, 100, 5, 0));
        assert_ne!(p.delay(7, 3, 100, 5, 0), p.delay(8, 3, 100, 5, 0));
        let med = |link: usize, after: bool| {
            let mut v: Vec<f64> = (0..2000)
                .map(|i| p.delay(1, if after { 2000 + i } else { i }, 4000, link, 0))
                .collect();
            v.sort_by(f64::total_cmp);
            v[1000]
        };
        // Link 1 is slow before the change, link 3 after.
        assert!((med(1, false) / med(2, false) - 10.0).abs() < 1.5);
        assert!((med(3, true) / med(2, true) - 10.0).abs() < 1.5);
        assert!((med(2, false) - 0.5).abs() < 0.05);
        assert!((med(2, true) - 0.75).abs() < 0.07);
    }

    #[test]
    fn cancel_and_resend_follows_the_timeouts_and_abandons_after_five() {
        let mut l = Link::new(Policy::Static(2.0));
        let s = l.send(&[3.0, 1.0, 9.0, 9.0, 9.0]);
        assert_eq!((s.time_s, s.attempts, s.abandoned), (3.0, 2, false));
        let s = l.send(&[3.0; ATTEMPTS]);
        assert_eq!((s.time_s, s.attempts, s.abandoned), (10.0, 5, true));
    }

    #[test]
    fn where_stalls_dominate_a_dynamic_timeout_learns_each_link_and_cuts_the_tail() {
        // Little spread of the links' own, 3 % stalls: the regime where timeouts can help
        // (with the default σ 0.3 the links' spread dominates; BENCHMARKS.md has both).
        let p = Params {
            sigma: 0.1,
            stall_p: 0.03,
            ..Params::default()
        };
        let total = 400;
        let run = |policy: Policy| {
            let mut links: Vec<Link> = (0..p.procs).map(|_| Link::new(policy)).collect();
            let mut times: Vec<f64> = (0..total)
                .map(|r| reduce(&p, 11, r, total, &mut links).0)
                .collect();
            times.sort_by(f64::total_cmp);
            let mean = times.iter().sum::<f64>() / total as f64;
            (mean, times[total * 95 / 100])
        };
        let (m15, p15) = run(Policy::Static(15.0));
        let (m45, p45) = run(Policy::Static(45.0));
        let (md, pd) = run(Policy::Dynamic(Rule::Nws));
        assert!(
            pd < p15.min(p45),
            "p95: dynamic {pd}, static 15 {p15}, 45 {p45}"
        );
        assert!(md < m15.min(m45) * 1.05, "mean: {md} vs {m15}, {m45}");
        // A slow link's learned timeout sits above its sends, a fast link's near the floor.
        let mut links: Vec<Link> = (0..p.procs)
            .map(|_| Link::new(Policy::Dynamic(Rule::Allen { k: 2.0 })))
            .collect();
        for r in 0..100 {
            reduce(&p, 3, r, total, &mut links);
        }
        assert!(
            links[1].timeout_s() > 5.0,
            "slow link {}",
            links[1].timeout_s()
        );
        assert!(
            links[2].timeout_s() < 2.0,
            "fast link {}",
            links[2].timeout_s()
        );
    }

    #[test]
    fn hedging_sends_a_second_copy_only_within_its_budget() {
        let mut l = Link::new(Policy::Hedge);
        for _ in 0..30 {
            l.send(&[0.5; ATTEMPTS]);
        }
        let h = l.hedge_at_s().expect("a hedge time once warm");
        assert!((1.0..2.0).contains(&h), "{h}");
        let s = l.send(&[20.0, 0.5, 0.5, 0.5, 0.5]);
        assert_eq!(s.attempts, 2);
        assert!((s.time_s - (h + 0.5)).abs() < 1e-9);
        // The budget: a run of stalls gets at most a few hedges.
        let before = l.hedges;
        for _ in 0..20 {
            l.send(&[20.0, 20.0, 0.5, 0.5, 0.5]);
        }
        // At most what was saved (below 2) and a twentieth of a token a send.
        let hedged = l.hedges - before;
        assert!((1..=3).contains(&hedged), "{hedged}");
    }
}
