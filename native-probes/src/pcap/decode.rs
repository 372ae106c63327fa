//! One captured frame to the TCP facts the analysis needs: addresses, ports, sequence and
//! acknowledgement numbers, flags, window, lengths and the timestamp and MSS options.
//! Deterministic core: bytes in, a [`Packet`] or the reason it was skipped out. Header
//! decoding is etherparse's header slices (each header is checked on its own, so a payload
//! cut short by the snap length still yields its headers, and lengths come from the IP
//! header, not from what was kept); the link-layer framings (Ethernet with VLAN tags, Linux
//! cooked SLL and SLL2, BSD loopback, raw IP) are told apart here.

use core::fmt;
use core::hash::Hasher;
use core::net::{Ipv4Addr, Ipv6Addr};
use etherparse::{
    Ethernet2HeaderSlice, IpNumber, Ipv4HeaderSlice, Ipv6ExtensionsSlice, Ipv6HeaderSlice,
    SingleVlanHeaderSlice, TcpHeaderSlice,
};

/// Link-layer header types (the tcpdump.org LINKTYPE_ registry) this decoder reads.
pub mod linktype {
    pub const NULL: u32 = 0;
    pub const ETHERNET: u32 = 1;
    /// OpenBSD's DLT_RAW value and the usual one; 12 and 14 are older raw-IP values.
    pub const RAW: u32 = 101;
    pub const RAW_12: u32 = 12;
    pub const RAW_14: u32 = 14;
    pub const LOOP: u32 = 108;
    pub const LINUX_SLL: u32 = 113;
    pub const IPV4: u32 = 228;
    pub const IPV6: u32 = 229;
    pub const LINUX_SLL2: u32 = 276;
}

/// TCP flag bits (RFC 9293 §3.1).
pub mod flag {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

/// An IPv4 or IPv6 address, stored as 16 bytes (IPv4 in the first four) so that flow keys
/// hash and compare as plain bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    pub bytes: [u8; 16],
    pub v6: bool,
}

impl Addr {
    pub fn v4(a: [u8; 4]) -> Self {
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&a);
        Self { bytes, v6: false }
    }
    pub fn v6(a: [u8; 16]) -> Self {
        Self { bytes: a, v6: true }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.v6 {
            write!(f, "{}", Ipv6Addr::from(self.bytes))
        } else {
            let b = self.bytes;
            write!(f, "{}", Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        }
    }
}

/// An address and port; shown as `a.b.c.d:p` or `[v6]:p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub addr: Addr,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.addr.v6 {
            write!(f, "[{}]:{}", self.addr, self.port)
        } else {
            write!(f, "{}:{}", self.addr, self.port)
        }
    }
}

/// The TCP facts of one captured segment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packet {
    /// Capture time, ns since 1970.
    pub ts_ns: i64,
    pub src: Endpoint,
    pub dst: Endpoint,
    pub seq: u32,
    pub ack: u32,
    /// [`flag`] bits.
    pub flags: u8,
    /// The window field as sent (unscaled).
    pub window: u16,
    /// TCP payload bytes, from the IP length fields (not what the snap length kept).
    pub payload_len: u32,
    /// Bytes of the IP packet.
    pub ip_len: u32,
    /// TSval and TSecr of the timestamp option (RFC 7323 §3).
    pub timestamps: Option<(u32, u32)>,
    /// The MSS option (SYN segments, RFC 9293 §3.7.1).
    pub mss: Option<u16>,
    /// The IPv4 TTL or IPv6 hop limit as captured (RFC 791 §3.1, RFC 8200 §3).
    pub ttl: u8,
}

impl Packet {
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Why a frame gave no TCP segment. Only truncation and malformed headers are problems; the
/// rest are traffic the analysis does not look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// A link type this decoder does not read.
    Link(u32),
    /// Not IPv4 or IPv6 (ARP, LLDP, …).
    NotIp,
    /// IP, but not TCP: the IP protocol number (17 UDP, 1 ICMP, 58 ICMPv6, …).
    NotTcp(u8),
    /// A non-first IP fragment, or a first one (its TCP header may be whole but its length
    /// is not the segment's).
    Fragment,
    /// The snap length kept fewer bytes than the headers need.
    Truncated {
        layer: &'static str,
        need: usize,
        have: usize,
    },
    /// A header that cannot be decoded.
    Malformed(String),
}

impl Skip {
    /// True for damage worth reporting (truncated or malformed headers).
    pub fn is_problem(&self) -> bool {
        matches!(self, Skip::Truncated { .. } | Skip::Malformed(_))
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::Link(l) => write!(f, "link type {l} is not one this reader decodes"),
            Skip::NotIp => f.write_str("not IP"),
            Skip::NotTcp(_) => f.write_str("not TCP"),
            Skip::Fragment => f.write_str("an IP fragment"),
            Skip::Truncated { layer, need, have } => write!(
                f,
                "snap length shorter than the headers: the {layer} needs {need} bytes, {have} captured"
            ),
            Skip::Malformed(m) => write!(f, "malformed header: {m}"),
        }
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

fn truncated(layer: &'static str, need: usize, have: usize) -> Skip {
    Skip::Truncated { layer, need, have }
}

/// An IP length no longer than the frame that carried it (`wire`: the frame's length on the
/// wire from the IP header on): one packet claiming 65,535 bytes in 40 would count as a
/// super-segment's worth of data.
fn within_frame(total: u32, wire: u32) -> Result<u32, Skip> {
    if total > wire {
        Err(Skip::Malformed(format!(
            "IP length {total} is longer than the packet, {wire} bytes on the wire"
        )))
    } else {
        Ok(total)
    }
}

/// Decodes one frame of link type `link` captured at `ts_ns`, of which `data` was kept and
/// `orig_len` was on the wire. A header that claims more than a frame captured whole holds is
/// malformed, not cut by the snap length.
pub fn decode(link: u32, data: &[u8], orig_len: u32, ts_ns: i64) -> Result<Packet, Skip> {
    decode_frame(link, data, orig_len, ts_ns).map_err(|e| match e {
        Skip::Truncated { layer, need, have } if data.len() as u64 >= u64::from(orig_len) => {
            Skip::Malformed(format!(
                "the {layer} claims {need} bytes, and the frame, captured whole, has {have} there"
            ))
        }
        e => e,
    })
}

fn decode_frame(link: u32, data: &[u8], orig_len: u32, ts_ns: i64) -> Result<Packet, Skip> {
    use linktype::*;
    let (proto, ip_at) = match link {
        ETHERNET => ethernet(data)?,
        LINUX_SLL => {
            if data.len() < 16 {
                return Err(truncated("Linux cooked header", 16, data.len()));
            }
            (u16::from_be_bytes([data[14], data[15]]), 16)
        }
        LINUX_SLL2 => {
            if data.len() < 20 {
                return Err(truncated("Linux cooked v2 header", 20, data.len()));
            }
            (u16::from_be_bytes([data[0], data[1]]), 20)
        }
        NULL | LOOP => {
            if data.len() < 4 {
                return Err(truncated("loopback header", 4, data.len()));
            }
            let word = [data[0], data[1], data[2], data[3]];
            // DLT_NULL is in the writer's byte order, DLT_LOOP in network order: a family
            // is a small number, so whichever order reads small is the one.
            let le = u32::from_le_bytes(word);
            let family = if le < 256 {
                le
            } else {
                u32::from_be_bytes(word)
            };
            match family {
                2 => (ETHERTYPE_IPV4, 4),
                10 | 24 | 28 | 30 => (ETHERTYPE_IPV6, 4),
                _ => return Err(Skip::NotIp),
            }
        }
        RAW | RAW_12 | RAW_14 | IPV4 | IPV6 => match data.first().map(|b| b >> 4) {
            Some(4) => (ETHERTYPE_IPV4, 0),
            Some(6) => (ETHERTYPE_IPV6, 0),
            Some(_) => return Err(Skip::Malformed("IP version is neither 4 nor 6".into())),
            None => return Err(truncated("IP header", 20, 0)),
        },
        other => return Err(Skip::Link(other)),
    };
    let ip = &data[ip_at..];
    // The IP length available on the wire, for headers that say 0 (TSO captures).
    let wire = orig_len.saturating_sub(ip_at as u32);
    let (src, dst, ip_total, ttl, tcp) = match proto {
        ETHERTYPE_IPV4 => {
            let h = Ipv4HeaderSlice::from_slice(ip).map_err(|e| {
                use etherparse::err::ipv4::HeaderSliceError as E;
                match e {
                    E::Len(l) => truncated("IP header", l.required_len, l.len),
                    E::Content(c) => Skip::Malformed(c.to_string()),
                }
            })?;
            if h.is_fragmenting_payload() {
                return Err(Skip::Fragment);
            }
            if h.protocol() != IpNumber::TCP {
                return Err(Skip::NotTcp(h.protocol().0));
            }
            let total = match h.total_len() {
                0 => wire,
                n => within_frame(u32::from(n), wire)?,
            };
            let hl = h.slice().len();
            (
                Addr::v4(h.source()),
                Addr::v4(h.destination()),
                total,
                h.ttl(),
                (hl, &ip[hl..]),
            )
        }
        ETHERTYPE_IPV6 => {
            let h = Ipv6HeaderSlice::from_slice(ip).map_err(|e| {
                use etherparse::err::ipv6::HeaderSliceError as E;
                match e {
                    E::Len(l) => truncated("IPv6 header", l.required_len, l.len),
                    E::Content(c) => Skip::Malformed(c.to_string()),
                }
            })?;
            let total = match h.payload_length() {
                0 => wire,
                n => within_frame(40 + u32::from(n), wire)?,
            };
            let (exts, next, rest) = Ipv6ExtensionsSlice::from_slice(h.next_header(), &ip[40..])
                .map_err(|e| {
                    use etherparse::err::ipv6_exts::HeaderSliceError as E;
                    match e {
                        E::Len(l) => truncated("IPv6 extension header", l.required_len, l.len),
                        E::Content(c) => Skip::Malformed(c.to_string()),
                    }
                })?;
            if exts.is_fragmenting_payload() {
                return Err(Skip::Fragment);
            }
            if next != IpNumber::TCP {
                return Err(Skip::NotTcp(next.0));
            }
            let hl = ip.len() - rest.len();
            (
                Addr::v6(h.source()),
                Addr::v6(h.destination()),
                total,
                h.hop_limit(),
                (hl, rest),
            )
        }
        _ => return Err(Skip::NotIp),
    };
    let (ip_header_len, tcp_bytes) = tcp;
    let fixed = match TcpHeaderSlice::from_slice(tcp_bytes) {
        Ok(t) => Tcp {
            header_len: t.slice().len() as u32,
            options: options(t.options()),
            bytes: t.slice(),
        },
        Err(etherparse::err::tcp::HeaderSliceError::Len(l)) if tcp_bytes.len() >= 20 => {
            // The snap length cut the options: the fixed header still tells the segment
            // (RFC 9293 §3.1), without its timestamps.
            let _ = l;
            Tcp {
                header_len: (tcp_bytes[12] >> 4) as u32 * 4,
                options: (None, None),
                bytes: &tcp_bytes[..20],
            }
        }
        Err(e) => {
            use etherparse::err::tcp::HeaderSliceError as E;
            return Err(match e {
                E::Len(l) => truncated("TCP header", l.required_len, l.len),
                E::Content(c) => Skip::Malformed(c.to_string()),
            });
        }
    };
    let payload_len = ip_total
        .checked_sub(ip_header_len as u32 + fixed.header_len)
        .ok_or_else(|| {
            Skip::Malformed(format!(
                "IP length {ip_total} is shorter than its IP and TCP headers"
            ))
        })?;
    let h = fixed.bytes;
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let (timestamps, mss) = fixed.options;
    Ok(Packet {
        ts_ns,
        src: Endpoint {
            addr: src,
            port: be16(0),
        },
        dst: Endpoint {
            addr: dst,
            port: be16(2),
        },
        seq: be32(4),
        ack: be32(8),
        flags: h[13],
        window: be16(14),
        payload_len,
        ip_len: ip_total,
        timestamps,
        mss,
        ttl,
    })
}

/// A TCP header as far as it was captured.
struct Tcp<'a> {
    /// From the data offset field.
    header_len: u32,
    options: (Option<(u32, u32)>, Option<u16>),
    /// At least the 20 fixed bytes.
    bytes: &'a [u8],
}

/// The ethertype after the Ethernet header and any VLAN tags (802.1Q, 802.1ad), and where
/// the network header starts.
fn ethernet(data: &[u8]) -> Result<(u16, usize), Skip> {
    let eth = Ethernet2HeaderSlice::from_slice(data)
        .map_err(|e| truncated("Ethernet header", e.required_len, e.len))?;
    let mut proto = eth.ether_type().0;
    let mut at = 14;
    // At most three stacked tags.
    for _ in 0..3 {
        if !matches!(proto, 0x8100 | 0x88a8 | 0x9100) {
            break;
        }
        let tag = SingleVlanHeaderSlice::from_slice(&data[at..])
            .map_err(|e| truncated("VLAN tag", e.required_len, e.len))?;
        proto = tag.ether_type().0;
        at += 4;
    }
    Ok((proto, at))
}

/// The timestamp and MSS options (RFC 9293 §3.1 option format: kind, length, value; kinds
/// 0 and 1 have no length).
fn options(mut o: &[u8]) -> (Option<(u32, u32)>, Option<u16>) {
    let (mut ts, mut mss) = (None, None);
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => o = &o[1..],
            _ => {
                let Some(&len) = o.get(1) else { break };
                let len = len as usize;
                if len < 2 || len > o.len() {
                    break;
                }
                match (kind, len) {
                    // RFC 7323 §3: TSval and TSecr.
                    (8, 10) => {
                        let v = u32::from_be_bytes([o[2], o[3], o[4], o[5]]);
                        let e = u32::from_be_bytes([o[6], o[7], o[8], o[9]]);
                        ts = Some((v, e));
                    }
                    (2, 4) => mss = Some(u16::from_be_bytes([o[2], o[3]])),
                    _ => {}
                }
                o = &o[len..];
            }
        }
    }
    (ts, mss)
}

/// A small, fast hasher for flow keys (a multiply-rotate mix of the key's words); flow keys
/// are not attacker-chosen in a way that matters to an offline analyser.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.mix(i as u64)
    }
    fn write_u16(&mut self, i: u16) {
        self.mix(i as u64)
    }
    fn write_u64(&mut self, i: u64) {
        self.mix(i)
    }
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

impl KeyHasher {
    #[inline]
    fn mix(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet frame with an IPv4/TCP segment of `payload` bytes and the given options.
    #[allow(clippy::too_many_arguments)]
    pub fn ipv4_tcp(
        src: [u8; 4],
        dst: [u8; 4],
        ports: (u16, u16),
        seq: u32,
        ack: u32,
        flags: u8,
        payload: usize,
        ts: Option<(u32, u32)>,
    ) -> Vec<u8> {
        let mut opts = Vec::new();
        if let Some((v, e)) = ts {
            opts.extend_from_slice(&[1, 1, 8, 10]);
            opts.extend_from_slice(&v.to_be_bytes());
            opts.extend_from_slice(&e.to_be_bytes());
        }
        let tcp_len = 20 + opts.len();
        let total = 20 + tcp_len + payload;
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        f.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            6,
        ]);
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&ports.0.to_be_bytes());
        f.extend_from_slice(&ports.1.to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&ack.to_be_bytes());
        f.push(((tcp_len / 4) as u8) << 4);
        f.push(flags);
        f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(&opts);
        f.resize(f.len() + payload, 0xab);
        f
    }

    #[test]
    fn ethernet_ipv4_tcp_with_timestamps() {
        let f = ipv4_tcp(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            (40000, 80),
            1000,
            7,
            flag::ACK | flag::PSH,
            100,
            Some((11, 22)),
        );
        let p = decode(linktype::ETHERNET, &f, f.len() as u32, 5).unwrap();
        assert_eq!(p.src.to_string(), "10.0.0.1:40000");
        assert_eq!(p.dst.to_string(), "10.0.0.2:80");
        assert_eq!((p.seq, p.ack, p.payload_len, p.ip_len), (1000, 7, 100, 152));
        assert_eq!(p.timestamps, Some((11, 22)));
        assert_eq!(p.ttl, 64);
        assert!(p.has(flag::ACK) && !p.has(flag::SYN));
        // Snap length of 66 bytes: the headers are whole, the payload length still known.
        let p = decode(linktype::ETHERNET, &f[..66], f.len() as u32, 5).unwrap();
        assert_eq!(p.payload_len, 100);
        // Snap length of 60: the options are cut; the segment is still known.
        let p = decode(linktype::ETHERNET, &f[..60], f.len() as u32, 5).unwrap();
        assert_eq!((p.seq, p.payload_len, p.timestamps), (1000, 100, None));
        // Snap length of 40: the TCP header is cut.
        let e = decode(linktype::ETHERNET, &f[..40], f.len() as u32, 5).unwrap_err();
        assert!(e.is_problem(), "{e}");
        assert!(e.to_string().contains("TCP header"), "{e}");
    }

    /// An IP length beyond the frame that carried it is malformed (one 40-byte SYN claiming
    /// 65,535 bytes counted 65,495 bytes of data); a header cut in a frame captured whole is
    /// malformed too, not cut by the snap length.
    #[test]
    fn lengths_beyond_the_frame_are_malformed_not_data_or_the_snap_length() {
        let mut f = ipv4_tcp([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 0, 0, flag::SYN, 0, None);
        f[16..18].copy_from_slice(&65535u16.to_be_bytes());
        let e = decode(linktype::ETHERNET, &f, f.len() as u32, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed header: IP length 65535 is longer than the packet, 40 bytes on the wire"
        );
        // Cut by the snap length (the wire had more): still the snap length's.
        let f = ipv4_tcp(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            (1, 2),
            0,
            0,
            flag::ACK,
            100,
            None,
        );
        let e = decode(linktype::ETHERNET, &f[..40], f.len() as u32, 0).unwrap_err();
        assert!(e.to_string().starts_with("snap length shorter"), "{e}");
        // The same 40 bytes as a whole frame: its IP header claims more than it holds.
        let e = decode(linktype::ETHERNET, &f[..40], 40, 0).unwrap_err();
        assert!(e.to_string().starts_with("malformed header:"), "{e}");
    }

    #[test]
    fn the_ipv6_hop_limit_is_read_as_the_ttl() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 20, 6, 57]);
        f.extend_from_slice(&[0xfd; 16]);
        f.extend_from_slice(&[0xfe; 16]);
        f.extend_from_slice(&[0, 80, 0x9c, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flag::SYN]);
        f.resize(f.len() + 6, 0);
        let p = decode(linktype::ETHERNET, &f, f.len() as u32, 0).unwrap();
        assert!(p.src.addr.v6 && p.has(flag::SYN));
        assert_eq!((p.src.port, p.dst.port, p.ttl), (80, 40000, 57));
    }

    #[test]
    fn cooked_loopback_and_raw_framings() {
        let f = ipv4_tcp([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 0, 0, flag::SYN, 0, None);
        let ip = &f[14..];
        let mut sll = vec![0u8; 16];
        sll[14] = 0x08;
        sll.extend_from_slice(ip);
        let mut sll2 = vec![0x08, 0];
        sll2.resize(20, 0);
        sll2.extend_from_slice(ip);
        let mut null = 2u32.to_le_bytes().to_vec();
        null.extend_from_slice(ip);
        let mut lp = 2u32.to_be_bytes().to_vec();
        lp.extend_from_slice(ip);
        for (link, frame) in [
            (linktype::LINUX_SLL, &sll[..]),
            (linktype::LINUX_SLL2, &sll2[..]),
            (linktype::NULL, &null[..]),
            (linktype::LOOP, &lp[..]),
            (linktype::RAW, ip),
        ] {
            let p = decode(link, frame, frame.len() as u32, 0).unwrap();
            assert_eq!(p.src.to_string(), "1.1.1.1:1", "link {link}");
        }
        assert_eq!(decode(999, ip, 40, 0), Err(Skip::Link(999)));
        assert!(decode(linktype::RAW, &[], 0, 0).unwrap_err().is_problem());
    }
}
