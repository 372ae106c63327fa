//! The proxy's bounded tables, as deterministic cores (time is an argument, in ms):
//!
//! - [`RetryBudget`]: a token bucket that lets retries be at most a fixed share of the
//!   requests plus a small floor per second, so that retrying can never multiply the load on
//!   replicas that are failing (the "retry budget" of Finagle and gRPC's retry throttling,
//!   gRFC A6: tokens earned by requests, spent by retries).
//! - [`Sticky`]: which replica each unit of work went to (Zangrilli & Lowekamp §4: "all
//!   messages corresponding to the particular unit of work are forwarded to the same
//!   endpoint"), bounded in entries and forgotten after an idle time.
//! - [`Routes`]: what completed exchanges of each route moved, for [`estimate_size`], the
//!   size a request's completion time is forecast for: what the request says of itself (its
//!   upload: its Content-Length, or none when it has no body), and for the rest what
//!   exchanges like it moved both ways (request body + response body).
//!
//! A request is like those of the same service, method and path (its route: the query is
//! left out, so that `/file?id=1` and `/file?id=2` are one route). Each route keeps the
//! running mean of its exchanges' upload and download bytes ([`Learned`]: the plain mean of
//! the first [`MEAN_OF`], then an exponential mean of weight 1/[`MEAN_OF`], which follows a
//! route whose answers change), and so does each service, for a route not seen yet. Only
//! exchanges that completed with a response count: a failure's bytes are the part that got
//! through.
//!
//! The size of a request whose upload is known (a Content-Length, or no body) is that upload
//! plus the mean download of its route (or service); of one whose upload is not (a chunked
//! or streamed body of unknown length), the mean upload and download of its route (or
//! service). With nothing learned, it is its upload alone if it has one, else the service's
//! assumed size (`--assumed-size`). A download is never sized by others' uploads: a GET after
//! a 20 MB POST is timed for what GETs of its path (or the service's responses) moved.
//!
//! The routes' memory stays bounded whatever the clients send: they are kept in two
//! generations of at most [`ROUTES`] / 2 entries each (a route found in the old one moves to
//! the new one; when the new one is full it becomes the old one, and the old one is dropped),
//! so that the table holds at most [`ROUTES`] routes, those used recently, at O(1) per
//! exchange, each key at most [`ROUTE_TEXT`] bytes. A client that asks for endless new paths
//! can push every route out (their requests then fall back to their service's mean), but it
//! cannot grow the table.

use serde::Serialize;
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

    /// Whether a retry could go now, without spending a token.
    pub fn could_retry(&self, now_ms: f64) -> bool {
        let dt = self.last_ms.map_or(0.0, |l| ((now_ms - l) / 1e3).max(0.0));
        (self.tokens + dt * self.per_sec).min(self.burst) >= 1.0
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

/// Routes whose sizes are kept, at most.
pub const ROUTES: usize = 4096;

/// Bytes of a route's method and path kept in its key, at most (longer paths that share
/// their first bytes are one route).
pub const ROUTE_TEXT: usize = 256;

/// Exchanges over which a route's mean is a plain mean, and the inverse weight of a new one
/// after that.
pub const MEAN_OF: u64 = 8;

/// The running mean bytes of completed exchanges: uploaded (request body) and downloaded
/// (response body).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Learned {
    pub up: f64,
    pub down: f64,
    /// Exchanges seen.
    pub n: u64,
}

impl Learned {
    /// Enters one completed exchange.
    pub fn add(&mut self, up: u64, down: u64) {
        self.n = self.n.saturating_add(1);
        let w = 1.0 / self.n.min(MEAN_OF) as f64;
        self.up += w * (up as f64 - self.up);
        self.down += w * (down as f64 - self.down);
    }
}

/// A route: a service, a method and a path (at most [`ROUTE_TEXT`] bytes of both), as a key
/// into [`Routes`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RouteKey {
    pub service: usize,
    text: String,
}

/// Where the size a request is timed for came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeFrom {
    /// The request's Content-Length alone (nothing learned yet to add its response).
    ContentLength,
    /// The mean of completed exchanges of the same method and path (with the request's own
    /// upload in place of theirs, when it is known).
    MethodPath,
    /// The mean of completed exchanges of the service (a route not seen yet; with the
    /// request's own upload in place of theirs, when it is known).
    Service,
    /// The service's assumed size (`--assumed-size`): nothing known.
    Default,
}

impl SizeFrom {
    pub fn name(self) -> &'static str {
        match self {
            SizeFrom::ContentLength => "content_length",
            SizeFrom::MethodPath => "method_path",
            SizeFrom::Service => "service",
            SizeFrom::Default => "default",
        }
    }
}

/// The size a request is timed for, and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Size {
    pub bytes: f64,
    pub from: SizeFrom,
    /// The request's upload, when it is known: its Content-Length, or 0 without a body.
    pub request_bytes: Option<u64>,
    /// Completed exchanges the learned part is the mean of (0: none).
    pub samples: u64,
}

/// The size of a request whose upload is `length` bytes (its Content-Length, 0 without a
/// body, None when not known), knowing what its route and its service moved (the route's
/// first), or `default` when nothing is known.
pub fn estimate_size(
    length: Option<u64>,
    route: Option<&Learned>,
    service: Option<&Learned>,
    default: f64,
) -> Size {
    let learned = route
        .filter(|l| l.n > 0)
        .map(|l| (l, SizeFrom::MethodPath))
        .or_else(|| service.filter(|l| l.n > 0).map(|l| (l, SizeFrom::Service)));
    let (bytes, from, samples) = match (length, learned) {
        (Some(n), Some((l, from))) => (n as f64 + l.down, from, l.n),
        (None, Some((l, from))) => (l.up + l.down, from, l.n),
        (Some(n), None) if n > 0 => (n as f64, SizeFrom::ContentLength, 0),
        (_, None) => (default, SizeFrom::Default, 0),
    };
    Size {
        bytes,
        from,
        request_bytes: length,
        samples,
    }
}

/// What the routes moved, for at most [`ROUTES`] routes (the module's header).
#[derive(Clone, Debug)]
pub struct Routes {
    new: HashMap<RouteKey, Learned>,
    old: HashMap<RouteKey, Learned>,
    /// Routes per generation.
    half: usize,
}

impl Default for Routes {
    fn default() -> Self {
        Self::with_capacity(ROUTES)
    }
}

impl Routes {
    /// A table of at most `capacity` routes (at least 2).
    pub fn with_capacity(capacity: usize) -> Routes {
        Routes {
            new: HashMap::new(),
            old: HashMap::new(),
            half: (capacity / 2).max(1),
        }
    }

    /// The key of `method` and `path` (without its query) in service `s`: one allocation of
    /// at most [`ROUTE_TEXT`] bytes (a key is made for every request).
    pub fn key(s: usize, method: &str, path: &str) -> RouteKey {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let whole = method.len() + 1 + path.len();
        let mut text = String::with_capacity(whole.min(ROUTE_TEXT));
        // "METHOD PATH", cut at the last character boundary within ROUTE_TEXT bytes.
        for part in [method, " ", path] {
            let room = ROUTE_TEXT - text.len();
            if part.len() <= room {
                text.push_str(part);
                continue;
            }
            let mut end = room;
            while !part.is_char_boundary(end) {
                end -= 1;
            }
            text.push_str(&part[..end]);
            break;
        }
        RouteKey { service: s, text }
    }

    /// What the route moved, if it is kept.
    pub fn get(&self, k: &RouteKey) -> Option<&Learned> {
        self.new.get(k).or_else(|| self.old.get(k))
    }

    /// Enters one completed exchange of route `k`.
    pub fn add(&mut self, k: &RouteKey, up: u64, down: u64) {
        if let Some(l) = self.new.get_mut(k) {
            l.add(up, down);
            return;
        }
        let mut l = self.old.remove(k).unwrap_or_default();
        l.add(up, down);
        if self.new.len() >= self.half {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(k.clone(), l);
    }

    /// Routes kept.
    pub fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn the_mean_is_plain_then_follows_a_change() {
        let mut l = Learned::default();
        for (up, down) in [(0, 10), (0, 20), (0, 30)] {
            l.add(up, down);
        }
        assert_eq!((l.up, l.down, l.n), (0.0, 20.0, 3));
        // After MEAN_OF, a new value moves the mean by 1/MEAN_OF of its distance.
        let mut l = Learned::default();
        for _ in 0..MEAN_OF {
            l.add(100, 0);
        }
        l.add(900, 0);
        assert_eq!(l.up, 200.0);
    }

    #[test]
    fn a_request_is_sized_by_its_length_its_route_its_service_or_the_default() {
        let get = Learned {
            up: 0.0,
            down: 12.0,
            n: 5,
        };
        let post = Learned {
            up: 20e6,
            down: 9.0,
            n: 1,
        };
        let svc = Learned {
            up: 4e6,
            down: 1e6,
            n: 7,
        };
        // A GET (no body): what its route moved, not the service's mean nor an upload's
        // length.
        let s = estimate_size(Some(0), Some(&get), Some(&svc), 65_536.0);
        assert_eq!(
            (s.bytes, s.from, s.samples),
            (12.0, SizeFrom::MethodPath, 5)
        );
        // An upload: its own length plus the response its route returns.
        let s = estimate_size(Some(20_000_000), Some(&post), Some(&svc), 65_536.0);
        assert_eq!(
            (s.bytes, s.from, s.request_bytes),
            (20_000_009.0, SizeFrom::MethodPath, Some(20_000_000))
        );
        // An upload of unknown length (chunked): what its route moved both ways.
        let s = estimate_size(None, Some(&post), Some(&svc), 65_536.0);
        assert_eq!((s.bytes, s.from), (20_000_009.0, SizeFrom::MethodPath));
        // A route not seen: the service's means, its own upload in place of theirs.
        let s = estimate_size(None, None, Some(&svc), 65_536.0);
        assert_eq!((s.bytes, s.from, s.samples), (5e6, SizeFrom::Service, 7));
        let s = estimate_size(Some(0), None, Some(&svc), 65_536.0);
        assert_eq!((s.bytes, s.from), (1e6, SizeFrom::Service));
        let s = estimate_size(Some(100), None, Some(&svc), 65_536.0);
        assert_eq!((s.bytes, s.from), (1_000_100.0, SizeFrom::Service));
        // Nothing learned: the upload alone, else the default.
        let s = estimate_size(Some(100), None, None, 65_536.0);
        assert_eq!(
            (s.bytes, s.from, s.samples),
            (100.0, SizeFrom::ContentLength, 0)
        );
        for length in [None, Some(0)] {
            let s = estimate_size(length, None, None, 65_536.0);
            assert_eq!((s.bytes, s.from), (65_536.0, SizeFrom::Default));
        }
        // A route with nothing in it counts as not seen.
        let s = estimate_size(None, Some(&Learned::default()), None, 1.0);
        assert_eq!(s.from, SizeFrom::Default);
    }

    #[test]
    fn routes_are_told_apart_by_service_method_and_path_not_query() {
        let mut t = Routes::default();
        let hello = Routes::key(0, "GET", "/hello.txt");
        t.add(&hello, 0, 12);
        t.add(&Routes::key(0, "POST", "/hello.txt"), 20_000_000, 9);
        t.add(&Routes::key(1, "GET", "/hello.txt"), 0, 1 << 20);
        assert_eq!(t.get(&hello).map(|l| l.down), Some(12.0));
        assert_eq!(
            t.get(&Routes::key(0, "GET", "/hello.txt?v=2")),
            t.get(&hello)
        );
        assert_eq!(t.get(&Routes::key(0, "GET", "/other")), None);
        assert_eq!(t.len(), 3);
        // A path of any length keeps at most ROUTE_TEXT bytes.
        let long = Routes::key(0, "GET", &"/é".repeat(1000));
        assert!(long.text.len() <= ROUTE_TEXT && long.text.len() > ROUTE_TEXT - 4);
    }

    #[test]
    fn a_route_key_is_method_and_path_cut_at_a_character_boundary() {
        // What the key is: "METHOD PATH" (no query), its first ROUTE_TEXT bytes or fewer,
        // never half a character.
        let reference = |method: &str, path: &str| {
            let path = path.split_once('?').map_or(path, |(p, _)| p);
            let mut text = format!("{method} {path}");
            let mut end = text.len().min(ROUTE_TEXT);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text
        };
        for n in [0, 1, 250, 251, 252, 253, 254, 255, 256, 300] {
            for unit in ["a", "é", "€", "𝄞"] {
                let path = format!("/{}", unit.repeat(n));
                for method in ["GET", "PROPFIND", ""] {
                    let k = Routes::key(3, method, &format!("{path}?q=1"));
                    assert_eq!(k.text, reference(method, &path), "{method} {n} {unit}");
                    assert_eq!(k.service, 3);
                }
            }
        }
        let long_method = "M".repeat(300);
        assert_eq!(
            Routes::key(0, &long_method, "/x").text,
            "M".repeat(ROUTE_TEXT)
        );
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_the_routes_in_use() {
        let mut t = Routes::with_capacity(64);
        let hot = Routes::key(0, "GET", "/hot");
        for i in 0..100_000u64 {
            // A client asking for endless new paths, and one route in use among them.
            let k = Routes::key(0, "GET", &format!("/junk/{i}"));
            t.add(&k, 0, i);
            if i % 16 == 0 {
                t.add(&hot, 0, 12);
            }
            assert!(t.len() <= 64, "{} routes at {i}", t.len());
        }
        assert_eq!(t.get(&hot).map(|l| l.down), Some(12.0));
        // An old route is forgotten: its requests fall back to the service's mean.
        assert_eq!(t.get(&Routes::key(0, "GET", "/junk/0")), None);
    }
}
