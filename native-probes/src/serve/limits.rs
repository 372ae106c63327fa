//! Who a client is and what it may spend: the server's admission rules.
//!
//! Deterministic core: addresses, byte counts and times (nanoseconds on the caller's
//! monotonic clock) in, decisions out; no sockets, no clock. The edges (`serve::tcp`,
//! `serve::udp`) ask it before they answer anything.
//!
//! - A **client** is a network, not an address: IPv6 addresses count per /64 (by default),
//!   since one host or subscriber is normally given a whole /64 and chooses its interface
//!   identifier freely (RFC 4291 §2.5.1, RFC 8981); IPv4 addresses per /32, configurable.
//!   An IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 peer) is an IPv4
//!   client.
//! - **Token buckets** (packets, bytes) per client and in total, all or nothing: a request
//!   either fits every bucket it draws from or takes nothing. Client buckets live in a
//!   fixed table indexed by a keyed hash of the client, so memory does not grow with the
//!   number of sources (spoofed UDP floods invent any number); two clients that share a slot
//!   share a budget, which is never more permissive than separate ones.
//! - The **session table** counts open TCP sessions per client and in total.
//! - The **UDP gate** decides, for one datagram, answer or drop: a request (never a reply,
//!   so no two servers answer each other), from a port that expects an answer, within its
//!   client's rate and the server's total rate (RFC 8085 §6: a UDP responder should limit
//!   the requests it answers in a time interval; §3.1: a UDP sender controls its
//!   rate). Its answer is the request's own bytes, so never larger (QUIC's anti-
//!   amplification limit, RFC 9000 §8, allows three times the request; this allows one).

use crate::wire::{Kind, UdpProbe};
use core::net::IpAddr;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

const NS_PER_S: f64 = 1e9;

/// The prefix lengths that group addresses into clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefixes {
    /// 0–32.
    pub ipv4: u8,
    /// 0–128.
    pub ipv6: u8,
}

impl Default for Prefixes {
    fn default() -> Self {
        Self { ipv4: 32, ipv6: 64 }
    }
}

/// A client: the network its address belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    net: IpAddr,
    len: u8,
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

impl Prefixes {
    /// The client `ip` belongs to.
    pub fn client(&self, ip: IpAddr) -> Client {
        match ip.to_canonical() {
            IpAddr::V4(a) => {
                let len = self.ipv4.min(32);
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                Client {
                    net: IpAddr::V4((u32::from(a) & mask).into()),
                    len,
                }
            }
            IpAddr::V6(a) => {
                let len = self.ipv6.min(128);
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                Client {
                    net: IpAddr::V6((u128::from(a) & mask).into()),
                    len,
                }
            }
        }
    }
}

/// A token bucket's refill rate and capacity, in its unit (bytes or packets).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    /// Refills at `per_second`, holds one second's worth.
    pub fn per_second(per_second: f64) -> Self {
        Self {
            per_second,
            burst: per_second,
        }
    }
}

/// One token bucket's state; its [`Rate`] is kept by the owner (one rate, many buckets).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    tokens: f64,
    at: Nanos,
}

impl Bucket {
    /// A bucket as full as any: created at time 0 with a capacity nobody exceeds, it is
    /// capped to its rate's burst at the first refill.
    const FULL: Bucket = Bucket {
        tokens: f64::MAX,
        at: 0,
    };

    fn refill(&mut self, rate: &Rate, now: Nanos) {
        let dt = now.saturating_sub(self.at) as f64 / NS_PER_S;
        self.tokens = (self.tokens + dt * rate.per_second).min(rate.burst);
        self.at = self.at.max(now);
    }

    /// How long until `cost` fits (0 if it does now); `None` if it never will.
    fn wait(&self, rate: &Rate, cost: f64) -> Option<Nanos> {
        if cost <= self.tokens {
            return Some(0);
        }
        if cost > rate.burst || rate.per_second <= 0.0 {
            return None;
        }
        Some(((cost - self.tokens) / rate.per_second * NS_PER_S).ceil() as Nanos)
    }
}

/// Refills `buckets` to `now` and takes `costs` from all of them, or from none: `Err` with
/// how long until they would fit (`Nanos::MAX`: never).
fn take_all<const N: usize>(
    buckets: &mut [Bucket; N],
    rates: &[Rate; N],
    costs: [f64; N],
    now: Nanos,
) -> Result<(), Nanos> {
    let mut wait = 0;
    for i in 0..N {
        buckets[i].refill(&rates[i], now);
        wait = wait.max(buckets[i].wait(&rates[i], costs[i]).unwrap_or(Nanos::MAX));
    }
    if wait > 0 {
        return Err(wait);
    }
    for i in 0..N {
        buckets[i].tokens -= costs[i];
    }
    Ok(())
}

/// Token buckets per client (`N` of them each: e.g. packets and bytes), in a fixed table.
#[derive(Clone, Debug)]
pub struct ClientBuckets<const N: usize> {
    rates: [Rate; N],
    seed: u64,
    slots: Vec<[Bucket; N]>,
}

impl<const N: usize> ClientBuckets<N> {
    /// `slots` (rounded up to a power of two) buckets of each rate; `seed` keys the hash
    /// that spreads clients over them (an edge passes a random one, so that nobody can
    /// choose addresses that land in a victim's slot).
    pub fn new(rates: [Rate; N], slots: usize, seed: u64) -> Self {
        Self {
            rates,
            seed,
            slots: vec![[Bucket::FULL; N]; slots.max(1).next_power_of_two()],
        }
    }

    fn slot(&self, client: &Client) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.seed.hash(&mut h);
        client.hash(&mut h);
        (h.finish() as usize) & (self.slots.len() - 1)
    }

    /// Takes `costs` from `client`'s buckets, all or nothing; `Err` is how long until it
    /// would fit (`Nanos::MAX`: it never will).
    pub fn take(&mut self, client: &Client, costs: [f64; N], now: Nanos) -> Result<(), Nanos> {
        let i = self.slot(client);
        take_all(&mut self.slots[i], &self.rates, costs, now)
    }

    /// What `client` has left in each bucket at `now`.
    pub fn level(&self, client: &Client, now: Nanos) -> [f64; N] {
        let mut b = self.slots[self.slot(client)];
        std::array::from_fn(|i| {
            b[i].refill(&self.rates[i], now);
            b[i].tokens
        })
    }
}

/// Why a TCP session was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Every session the server runs at once is taken.
    Total,
    /// The client has as many sessions open as it may.
    Client,
}

/// Open TCP sessions, per client and in total.
#[derive(Clone, Debug)]
pub struct Sessions {
    max_total: usize,
    max_per_client: usize,
    open: HashMap<Client, usize>,
    total: usize,
}

impl Sessions {
    pub fn new(max_total: usize, max_per_client: usize) -> Self {
        Self {
            max_total,
            max_per_client,
            open: HashMap::new(),
            total: 0,
        }
    }

    /// Opens a session for `client` if the caps allow; [`Sessions::close`] gives it back.
    pub fn open(&mut self, client: Client) -> Result<(), Full> {
        if self.total >= self.max_total {
            return Err(Full::Total);
        }
        let mine = self.open.entry(client).or_insert(0);
        if *mine >= self.max_per_client {
            return Err(Full::Client);
        }
        *mine += 1;
        self.total += 1;
        Ok(())
    }

    pub fn close(&mut self, client: Client) {
        if let Some(n) = self.open.get_mut(&client) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.open.remove(&client);
            }
        }
    }

    /// Sessions open in total.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// What the UDP gate allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpLimits {
    /// Largest datagram answered, bytes.
    pub max_datagram: usize,
    /// Per client: packets, then bytes.
    pub client: [Rate; 2],
    /// All clients together: packets, then bytes.
    pub total: [Rate; 2],
    pub prefixes: Prefixes,
}

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpDrop {
    /// Not a probe of this protocol version.
    Malformed,
    /// Above the size cap.
    TooLarge,
    /// A reply: answering it could start a loop between two servers.
    Reply,
    /// From port 0 (RFC 768: no answer wanted) or a privileged port (< 1024), where the
    /// services that answer anything live (echo, chargen, RFC 862/864), never a prober.
    SourcePort,
    /// Over the client's packet or byte rate.
    ClientRate,
    /// Over the server's total rate.
    TotalRate,
}

/// Ports below this are never answered.
pub const FIRST_ANSWERED_PORT: u16 = 1024;

/// The UDP admission rule; see the module's documentation.
#[derive(Clone, Debug)]
pub struct UdpGate {
    limits: UdpLimits,
    clients: ClientBuckets<2>,
    total: [Bucket; 2],
}

/// Slots of the client table: 64 Ki slots of two buckets, 2 MiB.
pub const CLIENT_SLOTS: usize = 1 << 16;

impl UdpGate {
    pub fn new(limits: UdpLimits, seed: u64) -> Self {
        Self {
            clients: ClientBuckets::new(limits.client, CLIENT_SLOTS, seed),
            total: [Bucket::FULL; 2],
            limits,
        }
    }

    /// Whether to answer `datagram`, received at `now` from `ip`:`port`.
    pub fn judge(
        &mut self,
        datagram: &[u8],
        ip: IpAddr,
        port: u16,
        now: Nanos,
    ) -> Result<(), UdpDrop> {
        if datagram.len() > self.limits.max_datagram {
            return Err(UdpDrop::TooLarge);
        }
        let probe = UdpProbe::decode(datagram).map_err(|_| UdpDrop::Malformed)?;
        if probe.kind != Kind::Request {
            return Err(UdpDrop::Reply);
        }
        if port < FIRST_ANSWERED_PORT {
            return Err(UdpDrop::SourcePort);
        }
        let cost = [1.0, datagram.len() as f64];
        let client = self.limits.prefixes.client(ip);
        self.clients
            .take(&client, cost, now)
            .map_err(|_| UdpDrop::ClientRate)?;
        take_all(&mut self.total, &self.limits.total, cost, now).map_err(|_| UdpDrop::TotalRate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;
    const MS: Nanos = 1_000_000;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn clients_are_prefixes_and_mapped_ipv4_is_ipv4() {
        let p = Prefixes::default();
        let rows = [
            ("192.0.2.77", "192.0.2.77/32"),
            ("::ffff:192.0.2.77", "192.0.2.77/32"),
            ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
            ("::1", "::/64"),
        ];
        for (a, want) in rows {
            assert_eq!(p.client(ip(a)).to_string(), want, "{a}");
        }
        let wide = Prefixes { ipv4: 24, ipv6: 48 };
        assert_eq!(wide.client(ip("10.1.2.3")), wide.client(ip("10.1.2.200")));
        assert_ne!(wide.client(ip("10.1.2.3")), wide.client(ip("10.1.3.3")));
        assert_eq!(
            wide.client(ip("2001:db8:1:ffff::1")).to_string(),
            "2001:db8:1::/48"
        );
        let all = Prefixes { ipv4: 0, ipv6: 0 };
        assert_eq!(all.client(ip("1.2.3.4")).to_string(), "0.0.0.0/0");
        assert_eq!(all.client(ip("ff::")).to_string(), "::/0");
        // Out-of-range lengths are the longest.
        let long = Prefixes {
            ipv4: 99,
            ipv6: 200,
        };
        assert_eq!(long.client(ip("1.2.3.4")).to_string(), "1.2.3.4/32");
    }

    #[test]
    fn a_bucket_starts_full_refills_at_its_rate_and_is_all_or_nothing() {
        let rates = [Rate::per_second(10.0), Rate::per_second(1000.0)];
        let mut b = ClientBuckets::new(rates, 4, 7);
        let c = Prefixes::default().client(ip("192.0.2.1"));
        // Ten packets of 100 bytes empty both buckets at once.
        for _ in 0..10 {
            assert_eq!(b.take(&c, [1.0, 100.0], 0), Ok(()));
        }
        assert_eq!(
            b.take(&c, [1.0, 1.0], 0),
            Err(100 * MS),
            "one packet refills in 0.1 s"
        );
        // After 0.1 s one packet fits but not 200 bytes: nothing is taken.
        assert_eq!(b.take(&c, [1.0, 200.0], 100 * MS), Err(100 * MS));
        assert_eq!(b.level(&c, 100 * MS), [1.0, 100.0]);
        assert_eq!(b.take(&c, [1.0, 100.0], 100 * MS), Ok(()));
        // Never more than the burst, however long the wait.
        assert_eq!(b.level(&c, 3600 * S), [10.0, 1000.0]);
        assert_eq!(b.take(&c, [1.0, 1001.0], 3600 * S), Err(Nanos::MAX));
        // Time that runs backwards refills nothing.
        let mut d = ClientBuckets::new([Rate::per_second(1.0)], 1, 0);
        assert_eq!(d.take(&c, [1.0], 10 * S), Ok(()));
        assert_eq!(d.take(&c, [1.0], 5 * S), Err(S));
    }

    #[test]
    fn sessions_are_capped_per_client_and_in_total_and_given_back() {
        let p = Prefixes::default();
        let a = p.client(ip("2001:db8::1"));
        let a2 = p.client(ip("2001:db8::ffff:2"));
        let b = p.client(ip("192.0.2.1"));
        let mut s = Sessions::new(3, 2);
        assert_eq!(s.open(a), Ok(()));
        assert_eq!(s.open(a2), Ok(()), "the same /64");
        assert_eq!(s.open(a), Err(Full::Client));
        assert_eq!(s.open(b), Ok(()));
        assert_eq!(s.open(b), Err(Full::Total));
        s.close(a);
        assert_eq!(s.total(), 2);
        assert_eq!(s.open(a2), Ok(()));
        s.close(b);
        s.close(b);
        assert_eq!(s.total(), 2, "closing what is not open changes nothing");
    }

    fn limits() -> UdpLimits {
        UdpLimits {
            max_datagram: 100,
            client: [Rate::per_second(5.0), Rate::per_second(1_000.0)],
            total: [Rate::per_second(8.0), Rate::per_second(1e6)],
            prefixes: Prefixes { ipv4: 24, ipv6: 64 },
        }
    }

    fn request(len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        UdpProbe::request(1, 2).encode(&mut d);
        d
    }

    #[test]
    fn the_udp_gate_answers_requests_only_and_never_replies() {
        let mut g = UdpGate::new(limits(), 1);
        let a = ip("192.0.2.1");
        assert_eq!(g.judge(&request(64), a, 40_000, 0), Ok(()));
        let mut reply = request(64);
        UdpProbe::mark_reply(&mut reply);
        assert_eq!(g.judge(&reply, a, 40_000, 0), Err(UdpDrop::Reply));
        assert_eq!(g.judge(&request(101), a, 40_000, 0), Err(UdpDrop::TooLarge));
        assert_eq!(
            g.judge(&request(64)[..21], a, 40_000, 0),
            Err(UdpDrop::Malformed)
        );
        assert_eq!(
            g.judge(b"GET / HTTP/1.1\r\n\r\n", a, 40_000, 0),
            Err(UdpDrop::Malformed)
        );
        for port in [0, 7, 19, 1023] {
            assert_eq!(g.judge(&request(64), a, port, 0), Err(UdpDrop::SourcePort));
        }
        assert_eq!(g.judge(&request(64), a, 1024, 0), Ok(()));
    }

    #[test]
    fn the_udp_gate_limits_each_network_and_the_total() {
        let mut g = UdpGate::new(limits(), 1);
        // One /24: five packets a second between all its addresses.
        let answered = (0..20)
            .filter(|i| {
                g.judge(&request(64), ip(&format!("192.0.2.{i}")), 40_000, 0)
                    .is_ok()
            })
            .count();
        assert_eq!(answered, 5);
        assert_eq!(
            g.judge(&request(64), ip("192.0.2.200"), 40_000, 0),
            Err(UdpDrop::ClientRate)
        );
        // Other networks: the total (8 a second) binds after 3 more.
        let others: Vec<_> = (0..6)
            .map(|i| g.judge(&request(64), ip(&format!("198.51.{i}.1")), 40_000, 0))
            .collect();
        assert_eq!(others.iter().filter(|r| r.is_ok()).count(), 3);
        assert_eq!(others[5], Err(UdpDrop::TotalRate));
        // A second later the budgets are back.
        assert_eq!(g.judge(&request(64), ip("192.0.2.9"), 40_000, S), Ok(()));
        // Bytes bind too: 1,000 bytes a second is ten 100-byte datagrams, fewer than the
        // packets allow only if they are larger.
        let mut g = UdpGate::new(
            UdpLimits {
                client: [Rate::per_second(100.0), Rate::per_second(1_000.0)],
                total: [Rate::per_second(1e6), Rate::per_second(1e9)],
                ..limits()
            },
            1,
        );
        let big = (0..100)
            .filter(|_| g.judge(&request(100), ip("203.0.113.5"), 40_000, 0).is_ok())
            .count();
        assert_eq!(big, 10);
    }

    #[test]
    fn a_forged_flood_from_many_sources_gets_at_most_the_total_rate() {
        let mut g = UdpGate::new(limits(), 99);
        let mut answered = 0;
        // 10,000 distinct sources over one second of time.
        for i in 0..10_000u32 {
            let a = IpAddr::V4((0x0a00_0000 + (i << 8)).into());
            if g.judge(&request(64), a, 50_000, Nanos::from(i) * 100_000)
                .is_ok()
            {
                answered += 1;
            }
        }
        // The total bucket: 8 at the start, 8 more over the second.
        assert!((8..=17).contains(&answered), "{answered}");
    }
}
