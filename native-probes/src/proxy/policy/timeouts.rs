//! A replica's request timeout: the adaptive timeout of its waits (from the end of an
//! upload to the response head) by the rule in use, within its bounds (Allen, Wolski &
//! Plank §3); and how long a response may go silent mid-body ([`stall_limit_ms`]).

use super::*;

/// The least time a response may send nothing mid-body before it counts as stalled
/// ([`stall_limit_ms`]): longer than a healthy path's silence after a few losses in a row
/// (below).
pub const STALL_FLOOR_MS: f64 = 3_000.0;

/// How long a response from a replica whose timeout is `timeout_ms` may send nothing in the
/// middle of its body, while its client is ready for more, before the proxy gives it up as a
/// [`Failure::Stall`]: that timeout, at least [`STALL_FLOOR_MS`].
///
/// - Its timeout: the bound the proxy already keeps on how long this replica takes to say
///   something once asked (its waits' adaptive timeout, within `--timeout-floor` and
///   `--timeout-ceiling`; `--timeout-initial` while they are unknown). A pause mid-body is
///   the same silence, the replica making (or not) its next bytes: a replica silent for
///   longer than it ever waits before its head has stopped answering. The limit is the
///   replica's own, learnt as its waits are. A stall is counted as a failure (as a reset
///   is), but its silence is not fed to the waits' series as a timed-out wait: that series
///   times the heads, and each stall would lengthen the next limit and the head's timeout
///   with it (in a review, a replica stalling at every request and probe went from 1 s to
///   3.6 s within three stalls), so a replica that stalls would be found ever later.
/// - Silence, not the transfer's length: the clock restarts at every byte, so a transfer
///   slow but steady (a path slower than forecast, a replica streaming what it computes) is
///   never cut however long it takes. A deadline on the whole body from the bandwidth
///   forecast would cut exactly those, when the path has got worse than its forecast.
/// - The floor: a lost segment is sent again after one retransmission timeout (at least 1 s
///   by RFC 6298 §2.4; Linux: 200 ms, or more on a longer path), doubled at each loss in a
///   row, and nothing arrives meanwhile. Losses come in bursts, so three in a row on a
///   healthy path are silent for 0.2 + 0.4 + 0.8 = 1.4 s at Linux's least timer and 2.1 s at
///   a 300 ms one; a replica's runtime pausing for a collection is another second or two.
///   3 s is past both, and still cuts a stalled client off 40 times sooner than
///   `--client-idle` (nginx's `proxy_read_timeout` is 60 s). A replica that stalls is cut
///   off for good by ejection after `--eject-after` stalls, so the floor is paid a few
///   times, not at every request.
///
/// The edge runs the clock only while the response's client is ready for more (the body is
/// asked for the next part and the replica has none): a client that stops reading holds
/// its replica up without counting against it (`--client-idle` is for that client).
pub fn stall_limit_ms(timeout_ms: f64) -> f64 {
    timeout_ms.max(STALL_FLOOR_MS)
}

/// The series of a replica's waits, whose forecast sets its timeout by `cfg`'s rule within
/// its bounds. Of the standard rules it tracks only that one: the proxy reads no other, and
/// each rule's timeout depends on its own state and the bank's forecast alone, so the
/// timeout is the one a series tracking all of them gives.
pub(super) fn wait_series(cfg: &Config) -> Series {
    let b = cfg.timeout;
    let bounds = Bounds {
        floor: b.floor_ms,
        ceiling: b.ceiling_ms,
        penalty: b.penalty_ms,
    };
    let rules: Vec<Rule> = Rule::standard()
        .into_iter()
        .filter(|r| *r == cfg.timeout_rule)
        .collect();
    Series::with_rules(Mode::Improved, bounds, &rules)
}

impl Policy {
    /// How long a request of service `s` at replica `r` may still wait once its adaptive
    /// timeout has passed, ms: the replica's ceiling (`--timeout-ceiling`) when a retry could
    /// go nowhere (`retryable` false: its method or its body forbids sending it again; or no
    /// other replica of the service is up; or the retry budget is spent), else `None` (the
    /// request is given up there and retried elsewhere). The adaptive timeout is when to try
    /// another replica; with none to try, cutting the request off helps no one: a replica's
    /// first slow request (a listing it generates, a cold disk) was a 504 after the 1 s its
    /// fast requests had taught (a user's review, 2026-12-08).
    pub fn last_resort_ms(&self, s: usize, r: usize, now_ms: f64, retryable: bool) -> Option<f64> {
        let other_up = self.services[s]
            .spec
            .replicas
            .iter()
            .any(|&o| o != r && self.replicas[o].health == Health::Up);
        let nowhere = !retryable || !other_up || !self.budget.could_retry(now_ms);
        nowhere.then_some(self.replicas[r].cfg.timeout.ceiling_ms)
    }

    /// The request timeout for `r`, ms: the rule's timeout for the wait within the bounds,
    /// with the rules' own cold start while the wait's spread is unknown
    /// ([`nowcast_core::timeout::MIN_ERRORS`]: [`nowcast_core::timeout::COLD_FACTOR`] × the
    /// longest wait seen), or the initial timeout before any wait is known.
    pub fn timeout_ms(&self, r: usize) -> f64 {
        let rep = &self.replicas[r];
        let b = rep.cfg.timeout;
        let initial = b.initial_ms.max(b.floor_ms).min(b.ceiling_ms);
        rep.wait
            .as_ref()
            .and_then(|w| w.timeout_by(rep.cfg.timeout_rule))
            .unwrap_or(initial)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::testing::*;
    use crate::rng::Rng;

    #[test]
    fn a_stall_is_a_silence_as_long_as_the_timeout_and_never_under_the_floor() {
        for (timeout, limit) in [(200.0, 3_000.0), (3_000.0, 3_000.0), (7_500.0, 7_500.0)] {
            assert_eq!(stall_limit_ms(timeout), limit);
        }
    }

    #[test]
    fn timeouts_adapt_per_replica_and_timeouts_feed_back() {
        let mut p = two(Balance::Completion);
        assert_eq!(p.timeout_ms(0), 30_000.0, "initial timeout while cold");
        for i in 0..50 {
            let mut d = ok(0, i as f64 * 10.0, 50.0, 2.0, 1000);
            d.wait_ms = Some(200.0 + (i % 5) as f64 * 20.0);
            p.finish(&d);
            let mut d = ok(1, i as f64 * 10.0, 50.0, 2.0, 1000);
            d.wait_ms = Some(5_000.0 + (i % 5) as f64 * 500.0);
            p.finish(&d);
        }
        let (ta, tb) = (p.timeout_ms(0), p.timeout_ms(1));
        // a's waits are ≈ 240 ms: the floor (1 s) holds; b's ≈ 6 s, its timeout above them.
        assert_eq!(ta, 1_000.0);
        assert!((6_000.0..15_000.0).contains(&tb), "{tb}");
        let mut t = fail(1, 600.0, Failure::Timeout);
        t.total_ms = tb;
        t.wait_ms = Some(tb);
        let recs = p.finish(&t);
        assert!(
            recs.is_empty(),
            "the wait's, not a bandwidth sample: {recs:?}"
        );
        assert!(p.timeout_ms(1) > tb, "a timeout raises the next one");
    }

    #[test]
    fn the_wait_series_times_out_as_one_tracking_every_standard_rule() {
        for rule in Rule::standard() {
            let mut p = two_with(Config {
                timeout_rule: rule,
                ..Config::default()
            });
            let b = p.config().timeout;
            let bounds = Bounds {
                floor: b.floor_ms,
                ceiling: b.ceiling_ms,
                penalty: b.penalty_ms,
            };
            let mut all = Series::new(Mode::Improved, bounds);
            let initial = b.initial_ms.max(b.floor_ms).min(b.ceiling_ms);
            let mut rng = Rng::new(7);
            for i in 0..300 {
                let (t, w) = (i as f64 * 20.0, 20.0 + 200.0 * rng.unit());
                if i % 37 == 36 {
                    let mut d = fail(0, t, Failure::Timeout);
                    d.wait_ms = Some(w * 20.0);
                    p.finish(&d);
                    let _ = all.timed_out(w * 20.0);
                } else {
                    let mut d = ok(0, t, 50.0, 2.0, 1_000);
                    (d.wait_ms, d.probe) = (Some(w), true);
                    p.finish(&d);
                    let _ = all.observe(w);
                }
                let want = all.timeout_by(rule).unwrap_or(initial);
                assert_eq!(p.timeout_ms(0), want, "{} after {i}", rule.id());
            }
        }
    }
}
