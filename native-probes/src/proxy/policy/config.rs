//! The policy's settings ([`Config`], every service's unless it has its own), the replicas
//! and services as configured, and the policy built from them ([`Policy::new`]): the caps,
//! the checks, and the settings each replica keeps, on which the services that list it
//! must agree. Which service a path goes to ([`route`]).

use super::*;

/// Which rule picks the replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Lowest forecast completion time (the default).
    Completion,
    /// Highest forecast available bandwidth (Zangrilli & Lowekamp §5).
    Bandwidth,
    RoundRobin,
    LeastConnections,
    /// Power of two choices over peak-EWMA latency × (in flight + 1).
    P2cPeakEwma,
    /// The replica with the lowest RTT, chosen once.
    Nearest,
}

impl Balance {
    pub fn name(self) -> &'static str {
        match self {
            Balance::Completion => "completion",
            Balance::Bandwidth => "bandwidth",
            Balance::RoundRobin => "round-robin",
            Balance::LeastConnections => "least-connections",
            Balance::P2cPeakEwma => "p2c-peak-ewma",
            Balance::Nearest => "nearest",
        }
    }

    pub fn parse(s: &str) -> Result<Balance, String> {
        [
            Balance::Completion,
            Balance::Bandwidth,
            Balance::RoundRobin,
            Balance::LeastConnections,
            Balance::P2cPeakEwma,
            Balance::Nearest,
        ]
        .into_iter()
        .find(|b| b.name() == s)
        .ok_or_else(|| {
            format!(
                "'{s}' is not a balancing rule (completion, bandwidth, round-robin, \
                 least-connections, p2c-peak-ewma, nearest)"
            )
        })
    }

    /// Whether the rule uses forecasts (and so needs probes).
    pub fn forecasts(self) -> bool {
        matches!(self, Balance::Completion | Balance::Bandwidth)
    }
}

/// The policy's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub balance: Balance,
    /// Share of requests sent to an alternate (forecast rules only).
    pub epsilon: f64,
    /// Explore fresh alternates too (Zangrilli & Lowekamp §4's rule). By default a request
    /// explores only alternates with no sample within the TTL: the active probes keep the
    /// others fresh, and a request sent to a replica known to be slower costs its client.
    pub explore_fresh: bool,
    /// Errors' weight in the completion time (0: the point forecast).
    pub error_k: f64,
    /// Forecast errors kept per series for the worst case's one-sided spread (20; 0: the
    /// forecast's whole-history two-sided RMSE).
    pub error_window: usize,
    /// A replica with no sample younger than this gets an active probe.
    pub ttl_ms: f64,
    pub eject_after: u32,
    pub backoff_min_ms: f64,
    pub backoff_max_ms: f64,
    /// The adaptive timeout rule and its bounds (floor, ceiling, penalty, initial).
    pub timeout_rule: Rule,
    pub timeout: probed::TimeoutBounds,
    /// Retries of one request at most (each to another replica that is up; 0: none).
    pub max_retries: u32,
    /// Retry budget: share of requests, tokens a second, burst.
    pub retry_ratio: f64,
    pub retry_per_sec: f64,
    pub retry_burst: f64,
    pub sticky_capacity: usize,
    pub sticky_idle_ms: f64,
    /// Peak-EWMA decay time.
    pub ewma_tau_ms: f64,
    /// Size assumed for a request that gives no length while nothing like it has completed
    /// ([`estimate_size`]).
    pub default_size: f64,
    /// A replica's RTT and wait samples from requests: at most one per this many ms (0: one
    /// per request) once it has [`WARM_SAMPLES`]. Probes, failures and bandwidth samples are
    /// always taken.
    pub sample_gap_ms: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            balance: Balance::Completion,
            epsilon: 0.05,
            explore_fresh: false,
            // The least expected completion time: the clients' mean is what the choice
            // serves; a worst case at 1 error held the better replica back after a change
            // on every emulated scenario (BENCHMARKS.md, "The worst case's spread").
            error_k: 0.0,
            // The recent shortfalls: chosen on two emulated scenarios other than the
            // reported one (BENCHMARKS.md, "The worst case's spread").
            error_window: 20,
            ttl_ms: 1_000.0,
            eject_after: 3,
            backoff_min_ms: 1_000.0,
            backoff_max_ms: 30_000.0,
            timeout_rule: probed::TIMEOUT_RULE,
            // The round-trip profile's floor (Allen, Wolski & Plank §6's static minimum),
            // a minute's ceiling for replicas that think long, and RFC 6298's 1 s start
            // raised to 30 s: a proxy must not cut a slow first answer.
            timeout: probed::TimeoutBounds {
                floor_ms: 1_000.0,
                ceiling_ms: 60_000.0,
                penalty_ms: 1_000.0,
                initial_ms: 30_000.0,
            },
            // One: a request that failed on one replica gets a second, on another, and no
            // more (Envoy's default `num_retries` is 1 too); each retry a token besides.
            max_retries: 1,
            retry_ratio: 0.1,
            retry_per_sec: 1.0,
            retry_burst: 10.0,
            sticky_capacity: 65_536,
            sticky_idle_ms: 600_000.0,
            ewma_tau_ms: 10_000.0,
            default_size: 65_536.0,
            // At most 100 RTT and wait samples a second per replica: beyond that, requests
            // would each pay two forecaster banks' updates (≈ 17,000 instructions each; with
            // their records 44 % of a request's instructions) for a sample that says what
            // the last one said 10 ms ago (TCP_INFO's RTT is the kernel's smoothed RTT),
            // and the banks' windows (the last 5 to 50 values) would span milliseconds.
            sample_gap_ms: 10.0,
        }
    }
}

/// A replica as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaSpec {
    pub name: String,
    /// Where it is (the records' `to`).
    pub url: String,
}

/// A service: a path prefix and the replicas that serve it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceSpec {
    pub prefix: String,
    pub replicas: Vec<usize>,
    /// Its own settings; `None`: the policy's.
    pub settings: Option<Config>,
}

impl Config {
    /// The first of the settings a replica keeps (its state's) that differ between `self`
    /// and `o`, by its name in the config file.
    fn replica_difference(&self, o: &Config) -> Option<&'static str> {
        let t = (self.timeout, o.timeout);
        [
            ("ttl", self.ttl_ms != o.ttl_ms),
            ("error_window", self.error_window != o.error_window),
            ("eject_after", self.eject_after != o.eject_after),
            ("backoff", self.backoff_min_ms != o.backoff_min_ms),
            ("backoff_max", self.backoff_max_ms != o.backoff_max_ms),
            ("timeout.rule", self.timeout_rule != o.timeout_rule),
            ("timeout.floor", t.0.floor_ms != t.1.floor_ms),
            ("timeout.ceiling", t.0.ceiling_ms != t.1.ceiling_ms),
            ("timeout.initial", t.0.initial_ms != t.1.initial_ms),
            ("timeout.penalty", t.0.penalty_ms != t.1.penalty_ms),
        ]
        .into_iter()
        .find(|(_, differ)| *differ)
        .map(|(name, _)| name)
    }

    /// Checks the values; `whose` names the settings in the message.
    fn check(&self, whose: &str) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.epsilon) {
            return Err(format!(
                "{whose}epsilon {} is not within 0..1",
                self.epsilon
            ));
        }
        if self.ttl_ms.is_nan() || self.ttl_ms <= 0.0 {
            return Err(format!("{whose}ttl {} ms is not above 0", self.ttl_ms));
        }
        if !(self.default_size.is_finite() && self.default_size >= 0.0) {
            return Err(format!(
                "{whose}size assumed {} is not a size",
                self.default_size
            ));
        }
        let b = self.timeout;
        if !(b.floor_ms > 0.0 && b.ceiling_ms >= b.floor_ms && b.initial_ms > 0.0) {
            return Err(format!(
                "{whose}timeouts need 0 < floor ≤ ceiling and initial > 0"
            ));
        }
        Ok(())
    }
}

/// Of `prefixes`, the index of the longest that `path` starts with (at a `/` boundary).
pub fn route<'a>(prefixes: impl IntoIterator<Item = &'a str>, path: &str) -> Option<usize> {
    prefixes
        .into_iter()
        .enumerate()
        .filter(|(_, prefix)| {
            let p = prefix.trim_end_matches('/');
            path.starts_with(p)
                && (p.is_empty()
                    || path.len() == p.len()
                    || path.as_bytes()[p.len()] == b'/'
                    || path.as_bytes()[p.len()] == b'?')
        })
        .max_by_key(|(_, prefix)| prefix.trim_end_matches('/').len())
        .map(|(i, _)| i)
}

impl Policy {
    pub fn new(
        cfg: Config,
        replicas: Vec<ReplicaSpec>,
        services: Vec<ServiceSpec>,
    ) -> Result<Policy, String> {
        if replicas.is_empty() {
            return Err("no replica: give at least one --replica NAME=URL".into());
        }
        if replicas.len() > MAX_REPLICAS {
            return Err(format!(
                "{} replicas: at most {MAX_REPLICAS} (each keeps its own forecasts and a \
                 connection)",
                replicas.len()
            ));
        }
        if services.len() > MAX_SERVICES {
            return Err(format!(
                "{} services: at most {MAX_SERVICES}",
                services.len()
            ));
        }
        for (i, s) in services.iter().enumerate() {
            if s.replicas.is_empty() {
                return Err(format!("service '{}' has no replica", s.prefix));
            }
            if s.replicas.len() > MAX_SERVICE_REPLICAS {
                return Err(format!(
                    "service '{}' lists {} replicas: at most {MAX_SERVICE_REPLICAS} (each \
                     request scores every replica of its service)",
                    s.prefix,
                    s.replicas.len()
                ));
            }
            if let Some(r) = s.replicas.iter().find(|&&r| r >= replicas.len()) {
                return Err(format!(
                    "service {i} names replica {r}, which does not exist"
                ));
            }
        }
        cfg.check("")?;
        let svc_cfgs: Vec<Config> = services
            .iter()
            .map(|s| s.settings.clone().unwrap_or_else(|| cfg.clone()))
            .collect();
        for (s, c) in services.iter().zip(&svc_cfgs) {
            c.check(&format!("service '{}': ", s.prefix))?;
        }
        // Each replica keeps the settings of the first service that lists it; the others
        // must agree on them. A replica in no service keeps the policy's.
        let mut owner: Vec<Option<usize>> = vec![None; replicas.len()];
        for (i, s) in services.iter().enumerate() {
            for &r in &s.replicas {
                match owner[r] {
                    None => owner[r] = Some(i),
                    Some(j) => {
                        if let Some(key) = svc_cfgs[j].replica_difference(&svc_cfgs[i]) {
                            return Err(format!(
                                "replica '{}' is in services '{}' and '{}', whose {key} \
                                 differ: a replica keeps one state (forecasts, timeout, \
                                 ejection), so they must agree on it; give both the same \
                                 {key}, or the replica another name in one of them",
                                replicas[r].name, services[j].prefix, s.prefix
                            ));
                        }
                    }
                }
            }
        }
        // Probed: listed by a service that chooses by forecasts (or the nearest).
        let mut probed = vec![false; replicas.len()];
        for (s, c) in services.iter().zip(&svc_cfgs) {
            if c.balance.forecasts() || c.balance == Balance::Nearest {
                for &r in &s.replicas {
                    probed[r] = true;
                }
            }
        }
        let probe_burst = PROBE_BURST.max(probed.iter().filter(|&&p| p).count().div_ceil(4));
        let reps = replicas
            .into_iter()
            .enumerate()
            .map(|(r, spec)| {
                let rc = owner[r].map_or_else(|| cfg.clone(), |i| svc_cfgs[i].clone());
                let probed = probed[r];
                Replica {
                    bw: [None, None, None],
                    bw_last_ms: [None; 3],
                    bw_short: Default::default(),
                    rtt: None,
                    rtt_short: Shortfalls::default(),
                    base_rtt_ms: None,
                    wait: None,
                    think: None,
                    last_sample_ms: None,
                    last_fed_ms: None,
                    fed: 0,
                    inflight: 0,
                    backlog: (0.0, 0.0),
                    health: Health::Up,
                    failures_in_row: 0,
                    backoff_ms: rc.backoff_min_ms,
                    probing: false,
                    ewma: None,
                    counters: Counters::default(),
                    spec,
                    cfg: rc,
                    probed,
                }
            })
            .collect();
        let services = services
            .into_iter()
            .zip(svc_cfgs)
            .map(|(spec, cfg)| Service {
                spec,
                cfg,
                rr: 0,
                nearest: None,
                sizes: Learned::default(),
            })
            .collect();
        Ok(Policy {
            sticky: Sticky::new(cfg.sticky_capacity, cfg.sticky_idle_ms),
            budget: RetryBudget::new(cfg.retry_ratio, cfg.retry_per_sec, cfg.retry_burst),
            cfg,
            replicas: reps,
            services,
            routes: Routes::default(),
            decisions: 0,
            explored: 0,
            probe_burst,
            probe_next: 0,
            choices: Vec::new(),
        })
    }

    /// The policy's settings (every service's unless it has its own).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The settings service `s` chooses with.
    pub fn service_config(&self, s: usize) -> &Config {
        &self.services[s].cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::testing::*;

    fn pair() -> Vec<ReplicaSpec> {
        ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, n)| ReplicaSpec {
                name: (*n).into(),
                url: format!("http://10.0.0.{}:80", i + 1),
            })
            .collect()
    }

    fn service(prefix: &str, settings: Option<Config>) -> ServiceSpec {
        ServiceSpec {
            prefix: prefix.into(),
            replicas: vec![0, 1],
            settings,
        }
    }

    #[test]
    fn each_service_chooses_with_its_own_settings() {
        let top = Config {
            explore_fresh: true,
            ..Config::default()
        };
        // /calm: the completion rule and no exploration; /wild: the bandwidth rule, no
        // exploration, a size assumed of its own; /curious: always explores.
        let calm = Config {
            epsilon: 0.0,
            ..top.clone()
        };
        let wild = Config {
            epsilon: 0.0,
            balance: Balance::Bandwidth,
            default_size: 1e6,
            ..top.clone()
        };
        let curious = Config {
            epsilon: 1.0,
            ..top.clone()
        };
        let mut p = Policy::new(
            top.clone(),
            pair(),
            vec![
                service("/calm", Some(calm)),
                service("/wild", Some(wild)),
                service("/curious", Some(curious)),
            ],
        )
        .unwrap();
        // The size assumed for a request without a length, before any was seen, is the
        // service's.
        assert_eq!(p.choose(1, None, None, 0.0, [0.5, 0.5]).size.bytes, 1e6);
        assert_eq!(
            p.choose(0, None, None, 0.0, [0.5, 0.5]).size.bytes,
            65_536.0
        );
        // a: 100 ms, 100 Mbit/s; b: 5 ms, 10 Mbit/s. Small requests finish first on b.
        for i in 0..20 {
            let t = i as f64 * 10.0;
            p.finish(&ok(0, t, 100.0, 100.0, 1 << 20));
            p.finish(&ok(1, t, 10.0, 5.0, 1 << 20));
        }
        for draw in [0.0, 0.5, 0.99] {
            let c = p.choose(0, Some(1_000), None, 300.0, [draw, draw]);
            assert_eq!((c.replica, c.reason), (1, Reason::Best), "calm at {draw}");
            let w = p.choose(1, Some(1_000), None, 300.0, [draw, draw]);
            assert_eq!((w.replica, w.reason), (0, Reason::Best), "wild at {draw}");
            let e = p.choose(2, Some(1_000), None, 300.0, [draw, 0.0]);
            assert_eq!(
                (e.replica, e.reason),
                (0, Reason::Explore),
                "curious at {draw}"
            );
        }
        assert_eq!(p.service_config(1).balance, Balance::Bandwidth);
        assert_eq!(p.config().balance, Balance::Completion);
    }

    #[test]
    fn a_replica_keeps_the_settings_of_its_services_which_must_agree() {
        // Replica settings (TTL, timeout, ejection) from the service that lists it.
        let own = Config {
            ttl_ms: 5_000.0,
            eject_after: 1,
            timeout: probed::TimeoutBounds {
                initial_ms: 4_000.0,
                ..Config::default().timeout
            },
            ..Config::default()
        };
        let mut p = Policy::new(
            Config::default(),
            pair(),
            vec![
                ServiceSpec {
                    prefix: "/a".into(),
                    replicas: vec![0],
                    settings: Some(own.clone()),
                },
                ServiceSpec {
                    prefix: "/b".into(),
                    replicas: vec![1],
                    settings: None,
                },
            ],
        )
        .unwrap();
        assert_eq!((p.timeout_ms(0), p.timeout_ms(1)), (4_000.0, 30_000.0));
        for r in p.due_probes(0.0) {
            p.probe_started(r, 0, 0.0);
            let mut d = ok(r, 10.0, 50.0, 2.0, 1000);
            d.probe = true;
            p.finish(&d);
        }
        // b's TTL is 1 s, a's 5 s.
        assert_eq!(p.due_probes(2_000.0), vec![1]);
        assert_eq!(p.probe_tick_ms(), Some(250.0));
        // One failure ejects a (eject_after 1), not b (3).
        p.finish(&fail(0, 2_100.0, Failure::Reset));
        p.finish(&fail(1, 2_100.0, Failure::Reset));
        assert!(matches!(
            p.view(0, 1.0, 2_200.0).health,
            Health::Ejected { .. }
        ));
        assert_eq!(p.view(1, 1.0, 2_200.0).health, Health::Up);
        // Two services that share a replica and disagree on what it keeps are refused; on
        // the choice alone they may differ.
        let e = Policy::new(
            Config::default(),
            pair(),
            vec![service("/x", Some(own)), service("/y", None)],
        )
        .err()
        .expect("refused");
        assert!(
            e.contains("replica 'a' is in services '/x' and '/y', whose ttl differ"),
            "{e}"
        );
        let choice_only = Config {
            epsilon: 0.0,
            balance: Balance::Bandwidth,
            error_k: 2.0,
            ..Config::default()
        };
        assert!(Policy::new(
            Config::default(),
            pair(),
            vec![service("/x", Some(choice_only)), service("/y", None)],
        )
        .is_ok());
        // A service's values are checked, naming it.
        let bad = Config {
            epsilon: 2.0,
            ..Config::default()
        };
        let e = Policy::new(Config::default(), pair(), vec![service("/x", Some(bad))])
            .err()
            .expect("refused");
        assert_eq!(e, "service '/x': epsilon 2 is not within 0..1");
        // Replicas only in services of a comparison rule are not probed while they are up
        // (on trial only, a quarter of their backoff after it ends at most).
        let rr = Config {
            balance: Balance::RoundRobin,
            ..Config::default()
        };
        let mut p = Policy::new(Config::default(), pair(), vec![service("/", Some(rr))]).unwrap();
        assert!(p.due_probes(0.0).is_empty());
        assert_eq!(p.probe_tick_ms(), Some(250.0));
    }

    #[test]
    fn services_route_by_longest_prefix_at_a_segment_boundary() {
        let p = Policy::new(
            Config::default(),
            vec![ReplicaSpec {
                name: "a".into(),
                url: "u".into(),
            }],
            vec![
                ServiceSpec {
                    prefix: "/".into(),
                    replicas: vec![0],
                    settings: None,
                },
                ServiceSpec {
                    prefix: "/api".into(),
                    replicas: vec![0],
                    settings: None,
                },
            ],
        )
        .unwrap();
        assert_eq!(p.route("/api/x"), Some(1));
        assert_eq!(p.route("/api"), Some(1));
        assert_eq!(p.route("/apix"), Some(0));
        assert_eq!(p.route("/"), Some(0));
        assert!(Policy::new(Config::default(), vec![], vec![]).is_err());
        assert!(Balance::parse("fastest")
            .unwrap_err()
            .contains("completion"));
    }

    #[test]
    fn policy_refuses_more_replicas_or_services_than_the_caps() {
        assert_eq!(
            many(MAX_REPLICAS, MAX_REPLICAS).unwrap().replica_count(),
            1_024
        );
        let e = many(MAX_REPLICAS + 1, 1).err().unwrap();
        assert!(e.starts_with("1025 replicas: at most 1024"), "{e}");
        // A name listed twice counts twice: the service's list is what each request scores.
        let e = many(2, MAX_SERVICE_REPLICAS + 1).err().unwrap();
        assert!(
            e.starts_with("service '/' lists 1025 replicas: at most 1024"),
            "{e}"
        );
        let services = |n: usize| {
            (0..n)
                .map(|i| ServiceSpec {
                    prefix: format!("/s{i}"),
                    replicas: vec![0],
                    settings: None,
                })
                .collect::<Vec<_>>()
        };
        let one = || {
            vec![ReplicaSpec {
                name: "a".into(),
                url: "http://10.0.0.1:80".into(),
            }]
        };
        assert!(Policy::new(Config::default(), one(), services(MAX_SERVICES)).is_ok());
        let e = Policy::new(Config::default(), one(), services(MAX_SERVICES + 1))
            .err()
            .unwrap();
        assert_eq!(e, "1025 services: at most 1024");
    }
}
