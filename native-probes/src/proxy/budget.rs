//! The proxy's two bounded tables, as deterministic cores (time is an argument, in ms):
//!
//! - [`RetryBudget`]: a token bucket that lets retries be at most a fixed share of the
//!   requests plus a small floor per second, so that retrying can never multiply the load on
//!   replicas that are failing (the "retry budget" of Finagle and gRPC's retry throttling,
//!   gRFC A6: tokens earned by requests, spent by retries).
//! - [`Sticky`]: which replica each unit of work went to (Zangrilli & Lowekamp §4: "all
//!   messages corresponding to the particular unit of work are forwarded to the same
//!   endpoint"), bounded in entries and forgotten after an idle time.

use std::collections::{HashMap, VecDeque};

/// Retry budget: `ratio` of a token per request, `per_sec` tokens a second, at most `burst`.
#[derive(Clone, Debug)]
pub struct RetryBudget {
    ratio: f64,
    per_sec: f64,
    burst: f64,
    tokens: f64,
    last_ms: Option<f64>,
    pub retries: u64,
    pub refused: u64,
}

impl RetryBudget {
    pub fn new(ratio: f64, per_sec: f64, burst: f64) -> Self {
        Self {
            ratio: ratio.max(0.0),
            per_sec: per_sec.max(0.0),
            burst: burst.max(0.0),
            tokens: burst.max(0.0),
            last_ms: None,
            retries: 0,
            refused: 0,
        }
    }

    fn refill(&mut self, now_ms: f64) {
        if let Some(last) = self.last_ms {
            let dt = ((now_ms - last) / 1e3).max(0.0);
            self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        }
        self.last_ms = Some(self.last_ms.map_or(now_ms, |l| l.max(now_ms)));
    }

    /// A first attempt of a request: earns `ratio` of a token.
    pub fn request(&mut self, now_ms: f64) {
        self.refill(now_ms);
        self.tokens = (self.tokens + self.ratio).min(self.burst);
    }

    /// May a retry go now? Spends a token when it may.
    pub fn try_retry(&mut self, now_ms: f64) -> bool {
        self.refill(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.retries += 1;
            true
        } else {
            self.refused += 1;
            false
        }
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

/// Unit of work → replica, at most `capacity` entries, each forgotten `idle_ms` after its
/// last use.
#[derive(Clone, Debug)]
pub struct Sticky {
    capacity: usize,
    idle_ms: f64,
    map: HashMap<(usize, String), (usize, f64)>,
    /// Uses in order of time; stale entries (a later use of the same key) are skipped.
    order: VecDeque<((usize, String), f64)>,
}

impl Sticky {
    pub fn new(capacity: usize, idle_ms: f64) -> Self {
        Self {
            capacity: capacity.max(1),
            idle_ms,
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn expire(&mut self, now_ms: f64) {
        while let Some((key, at)) = self.order.front() {
            let current = self.map.get(key).map(|e| e.1);
            let stale = current != Some(*at);
            let old = now_ms - at > self.idle_ms;
            let over = self.map.len() > self.capacity;
            if stale {
                self.order.pop_front();
            } else if old || over {
                let (key, _) = self.order.pop_front().expect("front");
                self.map.remove(&key);
            } else {
                break;
            }
        }
        // Keep the queue from growing with repeated uses of a few keys.
        if self.order.len() > 4 * self.capacity + 64 {
            let map = &self.map;
            self.order
                .retain(|(k, at)| map.get(k).map(|e| e.1) == Some(*at));
        }
    }

    /// The replica `unit` of `service` went to, if it is remembered.
    pub fn get(&mut self, service: usize, unit: &str, now_ms: f64) -> Option<usize> {
        self.expire(now_ms);
        self.map.get(&(service, unit.to_string())).map(|e| e.0)
    }

    /// Remembers (or refreshes) that `unit` goes to `replica`.
    pub fn set(&mut self, service: usize, unit: &str, replica: usize, now_ms: f64) {
        let key = (service, unit.to_string());
        self.map.insert(key.clone(), (replica, now_ms));
        self.order.push_back((key, now_ms));
        self.expire(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_bounded_by_the_share_of_requests_and_the_floor() {
        // 10 % of requests, 1 a second, burst 5.
        let mut b = RetryBudget::new(0.1, 1.0, 5.0);
        // An outage: every request fails and wants a retry, 1,000 requests in one second.
        let mut allowed = 0;
        for i in 0..1000 {
            let t = i as f64;
            b.request(t);
            if b.try_retry(t) {
                allowed += 1;
            }
        }
        // The burst (5) + 10 % of 1,000 (100) + 1 s of the floor (1), never more.
        assert!((100..=106).contains(&allowed), "{allowed}");
        assert_eq!(b.retries + b.refused, 1000);
        // Idle for a minute: the bucket refills only to its burst.
        b.request(61_000.0);
        assert!(b.tokens() <= 5.0);
    }

    #[test]
    fn sticky_units_keep_their_replica_until_idle_or_evicted() {
        let mut s = Sticky::new(2, 1000.0);
        s.set(0, "job-1", 1, 0.0);
        s.set(0, "job-2", 0, 10.0);
        assert_eq!(s.get(0, "job-1", 500.0), Some(1));
        assert_eq!(s.get(1, "job-1", 500.0), None, "services are apart");
        s.set(0, "job-1", 1, 900.0);
        // job-2 idle past 1 s; job-1 refreshed at 900.
        assert_eq!(s.get(0, "job-2", 1200.0), None);
        assert_eq!(s.get(0, "job-1", 1200.0), Some(1));
        // A third unit over capacity 2 evicts the least recently used.
        s.set(0, "job-3", 0, 1300.0);
        s.set(0, "job-4", 0, 1310.0);
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(0, "job-1", 1320.0), None);
        assert_eq!(s.get(0, "job-4", 1320.0), Some(0));
    }

    #[test]
    fn the_use_queue_stays_bounded_under_repeated_use() {
        let mut s = Sticky::new(4, 1e12);
        for i in 0..100_000 {
            s.set(0, "same", 0, i as f64);
        }
        assert!(s.order.len() <= 4 * 4 + 64 + 1, "{}", s.order.len());
    }
}
