//! What the end of an attempt teaches ([`Policy::finish`]): a success's samples enter the
//! replica's series; a failure is counted by kind, and the replica's own ([`Failure`]: not
//! the client's, nor the proxy's want of resources) count towards its ejection, after which
//! it is probed again after a backoff that doubles while it keeps failing.

use super::forecast::estimate;
use super::timeouts::wait_series;
use super::*;

/// How a failed attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    Connect,
    /// Reset or closed before a whole response.
    Reset,
    /// No response head within the adaptive timeout, or no upload progress for as long.
    Timeout,
    /// The response stopped in the middle of its body: nothing more from the replica for
    /// its timeout (at least [`STALL_FLOOR_MS`]) while the client was ready for more.
    Stall,
    /// 502, 503 or 504 from the replica.
    Status,
    /// The client's request broke off or stalled before the replica answered (its body
    /// failed, or the upload waited on the client until the timeout): counted, but not
    /// against the replica, which is neither ejected nor sampled for it.
    Client,
    /// The proxy's own resources ran out before the replica was reached (no descriptor, no
    /// memory, no local port: [`super::upstream::ConnectError::Local`]): counted, but not
    /// against the replica, as [`Failure::Client`].
    Local,
}

impl Failure {
    pub const ALL: [Failure; 7] = [
        Failure::Connect,
        Failure::Reset,
        Failure::Timeout,
        Failure::Stall,
        Failure::Status,
        Failure::Client,
        Failure::Local,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Reset => "reset",
            Failure::Timeout => "timeout",
            Failure::Stall => "stall",
            Failure::Status => "status",
            Failure::Client => "client",
            Failure::Local => "local",
        }
    }

    /// What happened, in words for an operator.
    pub fn describe(self) -> &'static str {
        match self {
            Failure::Connect => "no connection",
            Failure::Reset => "the connection broke before a whole response",
            Failure::Timeout => "no answer within its timeout",
            Failure::Stall => "its response stopped mid-body for longer than its timeout",
            Failure::Status => "it answered 502, 503 or 504",
            Failure::Client => "the client broke off",
            Failure::Local => "the proxy ran out of descriptors, memory or ports",
        }
    }
}

/// Everything the policy is told about one finished attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Done {
    pub replica: usize,
    pub now_ms: f64,
    /// An active probe, not a client's request.
    pub probe: bool,
    /// Bytes sent to the replica (request body) and received (response body).
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// From dispatch to the end of the response (or the failure), ms.
    pub total_ms: f64,
    /// From the end of the upload to the response head, ms.
    pub wait_ms: Option<f64>,
    /// RTT of the upstream connection (TCP_INFO's smoothed RTT, or the handshake), ms.
    pub rtt_ms: Option<f64>,
    /// The connection's least RTT (TCP_INFO's `min_rtt`), ms: the path without the queue its
    /// own transfers built, which a transfer's bandwidth sample was taken net of.
    pub base_rtt_ms: Option<f64>,
    /// A bandwidth sample in Mbit/s and where it came from.
    pub bandwidth: Option<(f64, Source)>,
    pub failure: Option<Failure>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Health {
    Up,
    Ejected {
        until_ms: f64,
    },
    /// Its backoff is over; the next probe decides.
    Trial,
}

/// Per-replica counters, for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counters {
    pub chosen: [u64; Reason::ALL.len()],
    pub failures: [u64; Failure::ALL.len()],
    pub completed: u64,
    pub probes: u64,
    pub ejections: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Bandwidth samples taken, by [`Source`].
    pub bandwidth_samples: [u64; Source::ALL.len()],
}

impl Replica {
    /// One bandwidth sample from `src`: (time ms, Mbit/s, the transfer's duration ms).
    pub(super) fn bandwidth_sample(
        &mut self,
        src: Source,
        upload: bool,
        (ts_ms, mbit, duration_ms): (f64, f64, Option<f64>),
        probe: Probe,
        window: usize,
    ) -> Record {
        let url = &self.spec.url;
        let series =
            self.bw[src.index()].get_or_insert_with(|| Box::new(series(src.metric(upload), url)));
        let mut o = Observation::new(
            ts_ms,
            Outcome::Measured {
                value: mbit,
                duration_ms,
            },
            None,
        );
        o.probe = Some(probe);
        if let Some((f, _)) = estimate(series).filter(|_| window > 0) {
            self.bw_short[src.index()].push(f - mbit, window);
        }
        let rec = series.observe(o);
        let last = &mut self.bw_last_ms[src.index()];
        *last = Some(last.map_or(ts_ms, |t| t.max(ts_ms)));
        self.last_sample_ms = Some(self.last_sample_ms.map_or(ts_ms, |t| t.max(ts_ms)));
        self.counters.bandwidth_samples[src.index()] += 1;
        rec
    }
}

impl Policy {
    pub(super) fn update_health(&mut self, now_ms: f64) {
        for rep in &mut self.replicas {
            if let Health::Ejected { until_ms } = rep.health {
                if now_ms >= until_ms {
                    rep.health = Health::Trial;
                }
            }
        }
    }

    /// An attempt (request or probe) finished: learn from it. Returns the records of its
    /// measurements (RTT, bandwidth), each with the forecast made before it.
    pub fn finish(&mut self, d: &Done) -> Vec<Record> {
        let tau = self.cfg.ewma_tau_ms;
        let rep = &mut self.replicas[d.replica];
        let cfg_min = rep.cfg.backoff_min_ms;
        let cfg_max = rep.cfg.backoff_max_ms;
        let eject_after = rep.cfg.eject_after.max(1);
        let window = rep.cfg.error_window;
        rep.inflight = rep.inflight.saturating_sub(1);
        if rep.inflight == 0 {
            rep.backlog = (0.0, d.now_ms);
        }
        if d.probe {
            rep.probing = false;
        }
        rep.counters.bytes_up += d.bytes_up;
        rep.counters.bytes_down += d.bytes_down;
        let mut out = Vec::new();
        let payload = d.bytes_up.max(d.bytes_down);
        let probe_info = Probe {
            transport: Some(Transport::Http),
            payload_bytes: Some(payload),
            ..Probe::default()
        };
        let fed = d.probe
            || rep.fed < WARM_SAMPLES
            || rep
                .last_fed_ms
                .is_none_or(|t| d.now_ms - t >= self.cfg.sample_gap_ms);
        match d.failure {
            None => {
                rep.counters.completed += 1;
                rep.failures_in_row = 0;
                if rep.health != Health::Up {
                    rep.health = Health::Up;
                }
                rep.backoff_ms = cfg_min;
                if fed && (d.wait_ms.is_some() || d.rtt_ms.is_some()) {
                    rep.last_fed_ms = Some(d.now_ms);
                    rep.fed += 1;
                }
                if let Some(w) = d.wait_ms.filter(|w| fed && w.is_finite() && *w >= 0.0) {
                    let cfg = &rep.cfg;
                    let wait = rep.wait.get_or_insert_with(|| Box::new(wait_series(cfg)));
                    let _ = wait.observe(w);
                }
                if let Some(b) = d.base_rtt_ms.filter(|x| x.is_finite() && *x > 0.0) {
                    rep.base_rtt_ms = Some(b);
                }
                // The replica's time to answer, from a request whose body was sent before it
                // could (module header): its wait less the path's least RTT.
                let least = rep.base_rtt_ms.or(d.rtt_ms);
                if let (Some(w), Some(least)) = (
                    d.wait_ms
                        .filter(|w| fed && w.is_finite() && d.bytes_up <= THINK_UPLOAD_MAX),
                    least.filter(|x| x.is_finite()),
                ) {
                    let think = rep
                        .think
                        .get_or_insert_with(|| Box::new(Series::without_timeouts(Mode::Improved)));
                    let _ = think.observe((w - least).max(0.0));
                }
                if let Some(rtt) = d.rtt_ms.filter(|x| fed && x.is_finite() && *x >= 0.0) {
                    let mut o = Observation::new(
                        d.now_ms,
                        Outcome::Measured {
                            value: rtt,
                            duration_ms: None,
                        },
                        None,
                    );
                    o.probe = Some(Probe {
                        transport: Some(Transport::Tcp),
                        ..Probe::default()
                    });
                    let url = &rep.spec.url;
                    let series = rep
                        .rtt
                        .get_or_insert_with(|| Box::new(series(Metric::Rtt, url)));
                    if let Some((f, _)) = estimate(series).filter(|_| window > 0) {
                        rep.rtt_short.push(rtt - f, window);
                    }
                    out.push(series.observe(o));
                    rep.last_sample_ms = Some(d.now_ms);
                }
                if let Some((mbit, src)) = d.bandwidth.filter(|b| b.0.is_finite() && b.0 > 0.0) {
                    let upload = d.bytes_up >= d.bytes_down;
                    let sample = (d.now_ms, mbit, Some(d.total_ms));
                    out.push(rep.bandwidth_sample(src, upload, sample, probe_info, window));
                }
                // Peak EWMA of completion time (Finagle): jumps up, decays down.
                let x = d.total_ms.max(0.0);
                rep.ewma = Some(match rep.ewma {
                    None => (x, d.now_ms),
                    Some((c, at)) => {
                        let w = (-(d.now_ms - at).max(0.0) / tau).exp();
                        let c = c * w;
                        (if x > c { x } else { c * w + x * (1.0 - w) }, d.now_ms)
                    }
                });
            }
            Some(f @ (Failure::Client | Failure::Local)) => rep.counters.failures[f as usize] += 1,
            Some(f) => {
                rep.counters.failures[f as usize] += 1;
                rep.failures_in_row += 1;
                if f == Failure::Timeout {
                    let cfg = &rep.cfg;
                    let wait = rep.wait.get_or_insert_with(|| Box::new(wait_series(cfg)));
                    let _ = wait.timed_out(d.wait_ms.unwrap_or(d.total_ms));
                }
                // What a failure costs in peak-EWMA terms: its time, at least the timeout.
                let x = d.total_ms.max(1.0);
                rep.ewma = Some((rep.ewma.map_or(x, |e| e.0.max(x)), d.now_ms));
                // A failure of the connection (no connection, a reset, a stall, a 502–504) is
                // recorded in the bandwidth series in use, as an error without a value. Not a
                // timeout: the head came late because the replica took long to answer this
                // request (its wait's series above takes it, and sets its timeout), which says
                // nothing of what its path carries. Fed to the bandwidth series as a timed-out
                // transfer of its payload (0 bytes for a GET), one slow request to a slow
                // endpoint set the replica's bandwidth forecast to 0 Mbit/s and steered every
                // request away from it.
                if let Some(src) = Source::ALL
                    .into_iter()
                    .find(|s| rep.bw[s.index()].is_some())
                    .filter(|_| f != Failure::Timeout)
                {
                    let series = rep.bw[src.index()].as_mut().expect("found");
                    let outcome = Outcome::Failed {
                        error: format!("{} failed: {}", rep.spec.name, f.name()),
                    };
                    let mut o = Observation::new(d.now_ms, outcome, None);
                    o.probe = Some(probe_info);
                    out.push(series.observe(o));
                }
                let trial = rep.health == Health::Trial;
                if trial || rep.failures_in_row >= eject_after {
                    if trial {
                        rep.backoff_ms = (rep.backoff_ms * 2.0).min(cfg_max);
                    }
                    rep.health = Health::Ejected {
                        until_ms: d.now_ms + rep.backoff_ms,
                    };
                    rep.counters.ejections += 1;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::testing::*;

    #[test]
    fn the_proxys_own_shortages_neither_eject_nor_sample_a_replica() {
        let mut p = two(Balance::Completion);
        p.finish(&ok(1, 0.0, 80.0, 2.0, 1000));
        let before = p.view(1, 1.0, 1.0);
        // Out of descriptors, many times in a row: counted, the replica stays up.
        for i in 0..10 {
            p.choose(0, Some(1000), None, 10.0, [0.9, 0.0]);
            p.finish(&fail(1, 10.0 + i as f64, Failure::Local));
        }
        assert_eq!(p.view(1, 1.0, 30.0).health, Health::Up);
        assert_eq!(p.counters(1).ejections, 0);
        assert_eq!(p.counters(1).failures[Failure::Local as usize], 10);
        assert_eq!(p.counters(1).failures[Failure::Connect as usize], 0);
        assert_eq!(p.view(1, 1.0, 1.0).rtt, before.rtt, "no sample");
    }

    #[test]
    fn failing_replicas_are_ejected_retried_later_with_backoff_and_restored() {
        let mut p = two(Balance::Completion);
        for i in 0..5 {
            p.finish(&ok(0, i as f64, 50.0, 2.0, 1000));
            p.finish(&ok(1, i as f64, 80.0, 2.0, 1000));
        }
        for i in 0..3 {
            p.choose(0, Some(1000), None, 10.0, [0.9, 0.0]);
            p.finish(&fail(1, 10.0 + i as f64, Failure::Reset));
        }
        assert!(matches!(
            p.view(1, 1.0, 20.0).health,
            Health::Ejected { .. }
        ));
        // While b is out, everything goes to a.
        for _ in 0..20 {
            let d = p.choose(0, Some(1000), None, 100.0, [0.0, 0.0]);
            assert_eq!(d.replica, 0);
            p.finish(&ok(0, 100.0, 50.0, 2.0, 1000));
        }
        // After the 1 s backoff, b is on trial and probed; the probe fails: 2 s backoff.
        let due = p.due_probes(1_013.0);
        assert!(due.contains(&1), "{due:?}");
        p.probe_started(1, 0, 1_013.0);
        let mut f = fail(1, 1_013.0, Failure::Connect);
        f.probe = true;
        p.finish(&f);
        assert_eq!(
            p.view(1, 1.0, 1_014.0).health,
            Health::Ejected { until_ms: 3_013.0 }
        );
        assert!(!p.due_probes(2_000.0).contains(&1));
        assert!(p.due_probes(3_100.0).contains(&1));
        p.probe_started(1, 0, 3_100.0);
        let mut good = ok(1, 3_110.0, 80.0, 2.0, 1000);
        good.probe = true;
        p.finish(&good);
        assert_eq!(p.view(1, 1.0, 3_120.0).health, Health::Up);
        assert_eq!(p.counters(1).ejections, 2);
        assert_eq!(p.counters(1).failures[Failure::Reset as usize], 3);
    }

    #[test]
    fn a_stall_mid_body_is_the_replicas_failure_and_leaves_its_timeout_alone() {
        let mut p = two(Balance::Completion);
        for i in 0..5 {
            p.finish(&ok(0, i as f64, 50.0, 2.0, 1000));
            p.finish(&ok(1, i as f64, 80.0, 2.0, 1000));
        }
        let timeout = p.timeout_ms(1);
        for i in 0..3 {
            p.finish(&fail(1, 10.0 + i as f64, Failure::Stall));
        }
        assert!(matches!(
            p.view(1, 1.0, 20.0).health,
            Health::Ejected { .. }
        ));
        assert_eq!(p.counters(1).failures[Failure::Stall as usize], 3);
        assert_eq!(p.counters(1).ejections, 1);
        assert_eq!(p.timeout_ms(1), timeout, "not fed to the waits' series");
        assert_eq!(Failure::Stall.name(), "stall");
    }

    #[test]
    fn records_carry_the_forecast_made_before_each_sample() {
        let mut p = two(Balance::Completion);
        let r1 = p.finish(&ok(0, 0.0, 50.0, 2.0, 1 << 20));
        let r2 = p.finish(&ok(0, 10.0, 60.0, 2.0, 1 << 20));
        assert_eq!(r1.len(), 2);
        let bw = r2.iter().find(|r| r.metric == Metric::BandwidthUp).unwrap();
        assert_eq!(bw.source, SOURCE);
        assert_eq!(bw.value, Some(60.0));
        assert_eq!(bw.forecast.as_ref().unwrap().value, 50.0);
        assert_eq!(bw.to, "http://10.0.0.1:80");
        let line = serde_json::to_string(bw).unwrap();
        assert_eq!(Record::parse(&line).unwrap(), *bw);
    }

    #[test]
    fn a_replica_keeps_no_series_until_its_first_sample() {
        let mut p = two(Balance::Completion);
        let none = |p: &Policy, r: usize| {
            let rep = &p.replicas[r];
            (
                rep.rtt.is_none(),
                rep.wait.is_none(),
                rep.bw.iter().all(Option::is_none),
            )
        };
        assert_eq!(none(&p, 0), (true, true, true));
        // Without one: no forecast, the initial timeout, as a new series would say.
        assert_eq!(p.timeout_ms(0), Config::default().timeout.initial_ms);
        let v = p.view(0, 1_000.0, 0.0);
        assert_eq!((v.rtt, v.bandwidth), (None, None));
        // A probe's RTT, wait and bandwidth make those three.
        p.probe_started(0, 0, 0.0);
        let mut d = ok(0, 1.0, 50.0, 2.0, 1 << 20);
        d.probe = true;
        assert_eq!(
            p.finish(&d).len(),
            2,
            "the RTT's and the bandwidth's records"
        );
        assert!(p.replicas[0].rtt.is_some() && p.replicas[0].wait.is_some());
        assert!(p.replicas[0].bw[Source::TcpInfo.index()].is_some());
        assert_eq!(none(&p, 1), (true, true, true));
        // A timeout fed back makes the wait's series alone.
        let mut t = fail(1, 2.0, Failure::Timeout);
        t.wait_ms = Some(100.0);
        p.finish(&t);
        assert_eq!(none(&p, 1), (true, false, true));
        assert!(p.timeout_ms(1) > 100.0);
    }

    #[test]
    fn a_timeout_is_the_replicas_wait_not_a_bandwidth_sample() {
        let mut p = two(Balance::Completion);
        for i in 0..5 {
            let mut d = ok(0, i as f64, 50.0, 2.0, 1000);
            d.bandwidth = Some((50.0, Source::Transfer));
            (d.bytes_up, d.bytes_down) = (0, 1 << 20);
            p.finish(&d);
        }
        let before = p.view(0, 1.0, 10.0).bandwidth.unwrap().value;
        let timeout = p.timeout_ms(0);
        // A GET that timed out (a slow endpoint): nothing moved, 3 s waited.
        let mut t = fail(0, 10.0, Failure::Timeout);
        (t.total_ms, t.wait_ms) = (3_000.0, Some(3_000.0));
        assert!(p.finish(&t).is_empty(), "no bandwidth record");
        assert_eq!(p.view(0, 1.0, 11.0).bandwidth.unwrap().value, before);
        assert!(p.timeout_ms(0) > timeout, "the wait's series took it");
        assert_eq!(p.counters(0).failures[Failure::Timeout as usize], 1);
        // A reset is recorded in the bandwidth series, without a value.
        let recs = p.finish(&fail(0, 12.0, Failure::Reset));
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].value, None);
        assert_eq!(p.view(0, 1.0, 13.0).bandwidth.unwrap().value, before);
    }
}
