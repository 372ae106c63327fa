//! The per-client connection cap: a client is an IPv4 address or an IPv6 /64, and the table
//! holds only clients with a connection open.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// The bits of an IPv6 address that name a client: a /64, one site's or one host's subnet.
pub const CLIENT_V6_PREFIX: u32 = 64;

/// What a connection from `ip` counts against for the per-client cap: an IPv4 address (an
/// IPv4-mapped IPv6 address, from a dual-stack listener, is its IPv4 address), or the /64
/// of an IPv6 address, since one host or site is usually given a whole /64 and can pick any
/// address in it.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(a),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mask = u128::MAX << (128 - CLIENT_V6_PREFIX);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        },
    }
}

/// Client connections open per client ([`client_key`]), for the per-client cap. A client has
/// an entry only while it has a connection open (removed when its count returns to 0), so
/// the table holds at most one entry per open connection: `max_connections` at most, however
/// many addresses connect.
pub struct PerClient {
    /// 0: no cap (the table is kept all the same, for `nowcast_proxy_clients_open`).
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in [`PerClient`], given back when dropped.
pub struct ClientSlot {
    table: Arc<PerClient>,
    key: IpAddr,
}

impl PerClient {
    pub fn new(cap: usize) -> Arc<PerClient> {
        Arc::new(PerClient {
            cap,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a connection from `ip`, or `None` when its client has `cap` open already.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let key = client_key(ip);
        let mut open = self.open.lock().expect("per-client table");
        let n = open.entry(key).or_insert(0);
        if self.cap > 0 && *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            table: self.clone(),
            key,
        })
    }

    /// Clients with a connection open (the table's entries).
    pub fn clients(&self) -> usize {
        self.open.lock().expect("per-client table").len()
    }

    /// Connections open from `ip`'s client (for the tests).
    #[cfg(test)]
    fn open(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().expect("per-client table");
        open.get(&client_key(ip)).copied().unwrap_or(0)
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().expect("per-client table");
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(client_key(ip("192.0.2.7")), ip("192.0.2.7"));
        // Addresses of one /64 are one client; the next /64 is another.
        assert_eq!(client_key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            client_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            ip("2001:db8:1:2::")
        );
        assert_ne!(
            client_key(ip("2001:db8:1:3::1")),
            client_key(ip("2001:db8:1:2::1"))
        );
        // IPv4 through a dual-stack listener: its own address, not the ::ffff:0:0/96's /64.
        assert_eq!(client_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_ne!(
            client_key(ip("::ffff:192.0.2.7")),
            client_key(ip("::ffff:192.0.2.8"))
        );
    }

    #[test]
    fn the_per_client_cap_refuses_the_client_over_it_only_and_forgets_closed_clients() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let t = PerClient::new(2);
        let a1 = t.admit(ip("2001:db8::1")).unwrap();
        let a2 = t.admit(ip("2001:db8::2")).unwrap();
        // A third from the same /64 is refused, from anywhere else admitted.
        assert!(t.admit(ip("2001:db8::ffff")).is_none());
        let b = t.admit(ip("192.0.2.1")).unwrap();
        assert_eq!((t.open(ip("2001:db8::9")), t.clients()), (2, 2));
        drop(a1);
        let a3 = t.admit(ip("2001:db8::3")).unwrap();
        drop((a2, a3, b));
        assert_eq!(t.clients(), 0, "entries go with their last connection");
        // A flood of addresses, one connection each: the table holds the open ones only.
        let slots: Vec<ClientSlot> = (0..10_000u32)
            .map(|i| {
                t.admit(IpAddr::from((0x0a00_0000 + i).to_be_bytes()))
                    .unwrap()
            })
            .collect();
        assert_eq!(t.clients(), 10_000);
        drop(slots);
        assert_eq!(t.clients(), 0);
        // 0: no cap.
        let free = PerClient::new(0);
        let held: Vec<ClientSlot> = (0..100)
            .map(|_| free.admit(ip("192.0.2.1")).unwrap())
            .collect();
        assert_eq!(free.open(ip("192.0.2.1")), 100);
        drop(held);
        assert_eq!(free.clients(), 0);
    }
}
