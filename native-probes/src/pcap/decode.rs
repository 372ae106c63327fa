//! One captured frame to the TCP facts the analysis needs: addresses, ports, sequence and
//! acknowledgement numbers, flags, window, lengths and the timestamp and MSS options.
//! Deterministic core: bytes in, a [`Packet`] or the reason it was skipped out. Header
//! decoding is etherparse's (lax slicing, so a payload cut short by the snap length still
//! yields its headers); the link-layer framings that etherparse does not slice on its own
//! (Linux cooked SLL and SLL2, BSD loopback) are stripped here.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};
use etherparse::err::Layer;
use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TcpOptionElement, TransportSlice};

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
    /// IP, but not TCP (UDP, ICMP, …).
    NotTcp,
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
            Skip::NotTcp => f.write_str("not TCP"),
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

fn layer_name(l: Layer) -> &'static str {
    match l {
        Layer::Ethernet2Header => "Ethernet header",
        Layer::VlanHeader => "VLAN tag",
        Layer::Ipv4Header | Layer::IpHeader => "IP header",
        Layer::Ipv6Header => "IPv6 header",
        Layer::Ipv6ExtHeader
        | Layer::Ipv6HopByHopHeader
        | Layer::Ipv6DestOptionsHeader
        | Layer::Ipv6RouteHeader
        | Layer::Ipv6FragHeader
        | Layer::IpAuthHeader => "IPv6 extension header",
        Layer::TcpHeader => "TCP header",
        _ => "header",
    }
}

fn truncated(layer: &'static str, need: usize, have: usize) -> Skip {
    Skip::Truncated { layer, need, have }
}

/// Decodes one frame of link type `link` captured at `ts_ns`, of which `data` was kept and
/// `orig_len` was on the wire.
pub fn decode(link: u32, data: &[u8], orig_len: u32, ts_ns: i64) -> Result<Packet, Skip> {
    use linktype::*;
    let sliced = match link {
        ETHERNET => LaxSlicedPacket::from_ethernet(data)
            .map_err(|e| truncated("Ethernet header", e.required_len, e.len))?,
        LINUX_SLL => {
            let need = 16;
            if data.len() < need {
                return Err(truncated("Linux cooked header", need, data.len()));
            }
            let proto = u16::from_be_bytes([data[14], data[15]]);
            ether(proto, &data[need..])?
        }
        LINUX_SLL2 => {
            let need = 20;
            if data.len() < need {
                return Err(truncated("Linux cooked v2 header", need, data.len()));
            }
            let proto = u16::from_be_bytes([data[0], data[1]]);
            ether(proto, &data[need..])?
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
            let proto = match family {
                2 => ETHERTYPE_IPV4,
                10 | 24 | 28 | 30 => ETHERTYPE_IPV6,
                _ => return Err(Skip::NotIp),
            };
            ether(proto, &data[4..])?
        }
        RAW | RAW_12 | RAW_14 | IPV4 | IPV6 => ip(data)?,
        other => return Err(Skip::Link(other)),
    };
    segment(&sliced, data, orig_len, ts_ns)
}

fn ether(proto: u16, rest: &[u8]) -> Result<LaxSlicedPacket<'_>, Skip> {
    match proto {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => {
            Ok(LaxSlicedPacket::from_ether_type(EtherType(proto), rest))
        }
        _ => Err(Skip::NotIp),
    }
}

fn ip(data: &[u8]) -> Result<LaxSlicedPacket<'_>, Skip> {
    if data.is_empty() {
        return Err(truncated("IP header", 20, 0));
    }
    LaxSlicedPacket::from_ip(data).map_err(|e| {
        use etherparse::err::ip::LaxHeaderSliceError as E;
        match e {
            E::Len(l) => truncated("IP header", l.required_len, l.len),
            E::Content(c) => Skip::Malformed(c.to_string()),
        }
    })
}

fn segment(
    s: &LaxSlicedPacket<'_>,
    frame: &[u8],
    orig_len: u32,
    ts_ns: i64,
) -> Result<Packet, Skip> {
    let Some(net) = &s.net else {
        return Err(match &s.stop_err {
            Some((err, layer)) => stop_error(err, *layer),
            None => Skip::NotIp,
        });
    };
    let (src, dst, ip_start, ip_total, payload) = match net {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            let start = offset(frame, h.slice());
            let total = match h.total_len() {
                0 => orig_len.saturating_sub(start as u32), // TSO captures may carry 0
                n => n as u32,
            };
            (
                Addr::v4(h.source()),
                Addr::v4(h.destination()),
                start,
                total,
                v4.payload(),
            )
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            let start = offset(frame, h.slice());
            let total = match h.payload_length() {
                0 => orig_len.saturating_sub(start as u32), // jumbogram or TSO
                n => 40 + n as u32,
            };
            (
                Addr::v6(h.source()),
                Addr::v6(h.destination()),
                start,
                total,
                v6.payload(),
            )
        }
        LaxNetSlice::Arp(_) => return Err(Skip::NotIp),
    };
    if payload.fragmented {
        return Err(Skip::Fragment);
    }
    if payload.ip_number != etherparse::IpNumber::TCP {
        return Err(Skip::NotTcp);
    }
    let tcp = match &s.transport {
        Some(TransportSlice::Tcp(t)) => t,
        _ => {
            return Err(match &s.stop_err {
                Some((err, layer)) => stop_error(err, *layer),
                None => truncated("TCP header", 20, payload.payload.len()),
            })
        }
    };
    let tcp_start = offset(frame, tcp.slice()) as u32;
    let header_len = tcp.data_offset() as u32 * 4;
    let payload_len = (ip_start as u32 + ip_total)
        .checked_sub(tcp_start + header_len)
        .ok_or_else(|| {
            Skip::Malformed(format!(
                "IP length {ip_total} is shorter than its IP and TCP headers"
            ))
        })?;
    let mut timestamps = None;
    let mut mss = None;
    for o in tcp.options_iterator() {
        match o {
            Ok(TcpOptionElement::Timestamp(v, e)) => timestamps = Some((v, e)),
            Ok(TcpOptionElement::MaximumSegmentSize(m)) => mss = Some(m),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let h = tcp.slice();
    Ok(Packet {
        ts_ns,
        src: Endpoint {
            addr: src,
            port: tcp.source_port(),
        },
        dst: Endpoint {
            addr: dst,
            port: tcp.destination_port(),
        },
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags: h[13],
        window: tcp.window_size(),
        payload_len,
        ip_len: ip_total,
        timestamps,
        mss,
    })
}

fn stop_error(err: &etherparse::err::packet::SliceError, layer: Layer) -> Skip {
    use etherparse::err::packet::SliceError as E;
    match err {
        E::Len(l) => truncated(layer_name(layer), l.required_len, l.len),
        other => Skip::Malformed(other.to_string()),
    }
}

/// Byte offset of `inner` within `outer` (both slices of one frame).
fn offset(outer: &[u8], inner: &[u8]) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet frame with an IPv4/TCP segment of `payload` bytes and the given options.
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
        assert!(p.has(flag::ACK) && !p.has(flag::SYN));
        // Snap length of 66 bytes: the headers are whole, the payload length still known.
        let p = decode(linktype::ETHERNET, &f[..66], f.len() as u32, 5).unwrap();
        assert_eq!(p.payload_len, 100);
        // Snap length of 40: the TCP header is cut.
        let e = decode(linktype::ETHERNET, &f[..40], f.len() as u32, 5).unwrap_err();
        assert!(e.is_problem(), "{e}");
        assert!(e.to_string().contains("TCP header"), "{e}");
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
