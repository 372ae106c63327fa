//! The wire protocol between the probes (`nowcast tcp`, `nowcast udp`) and `nowcast serve`.
//!
//! TCP follows the JavaNws Communicator / Echo Server exchange (JavaNws §2.1.1): a handshake
//! opens an experiment session, a two-byte packet is echoed for the round-trip time, and a
//! "long" transfer is answered by a two-byte acknowledgement for the bandwidth. Every
//! message has a fixed size or carries its length, so neither side ever guesses where one
//! ends. All integers are big-endian.
//!
//! ```text
//! client → server  Hello    "NWCT" version:u8 flags:u8 rcvbuf:u32 sndbuf:u32      (14 bytes)
//! server → client  Welcome  "NWCT" version:u8 status:u8 max_payload:u64
//!                           rcvbuf:u32 sndbuf:u32                                 (22 bytes)
//! client → server  Ping     'P' x:u8          server echoes the same 2 bytes
//! client → server  Bulk     'B' len:u64, then len bytes;  server answers "AK" (2 bytes),
//!                           or "NO" and closes if len is above max_payload
//! client → server  BulkDown 'D' len:u64;  server answers "AK" then len bytes, or "NO"
//!                           and closes if len is above max_payload
//! client → server  Quit     'Q'               server closes
//! ```
//!
//! UDP datagrams are echoed unchanged: `"NWCU" version:u8 kind:u8 seq:u64 sent_ns:u64`
//! (22 bytes) followed by padding up to the probe size. The server checks the header and the
//! size cap and nothing else, so it keeps no state per client.

use std::fmt;

/// Default port of `nowcast serve`, TCP and UDP (the NWS sensor's port).
pub const DEFAULT_PORT: u16 = 8060;
/// Protocol version spoken by this build.
pub const VERSION: u8 = 1;
pub const TCP_MAGIC: [u8; 4] = *b"NWCT";
pub const UDP_MAGIC: [u8; 4] = *b"NWCU";

/// Opcodes of the messages a client sends inside a session.
pub const OP_PING: u8 = b'P';
pub const OP_BULK: u8 = b'B';
/// A bulk transfer from the server: it answers [`ACK`] (or [`REFUSED`]) and the payload.
pub const OP_BULK_DOWN: u8 = b'D';
pub const OP_QUIT: u8 = b'Q';
/// The NWS round-trip probe is two bytes each way: the opcode and one byte of payload.
pub const PING_LEN: usize = 2;
/// Opcode and the u64 length that precede a bulk transfer.
pub const BULK_HEADER_LEN: usize = 9;
/// The two-byte application acknowledgement of a bulk transfer (JavaNws §2.1.1).
pub const ACK: [u8; 2] = *b"AK";
/// Sent instead of [`ACK`] when a bulk transfer is above the server's cap.
pub const REFUSED: [u8; 2] = *b"NO";

/// Why bytes from the peer were not a valid message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The peer is not a nowcast server or client (first bytes differ from the magic).
    BadMagic([u8; 4]),
    /// The peer speaks another protocol version.
    Version(u8),
    /// Too few bytes for the message.
    Short { need: usize, got: usize },
    /// An unknown status or opcode.
    Unknown(u8),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadMagic(m) => write!(
                f,
                "the peer is not a nowcast server (it sent {:?} instead of the protocol magic)",
                String::from_utf8_lossy(m)
            ),
            WireError::Version(v) => write!(
                f,
                "the peer speaks protocol version {v}, this build speaks {VERSION}"
            ),
            WireError::Short { need, got } => {
                write!(f, "message too short: {got} bytes, need {need}")
            }
            WireError::Unknown(b) => write!(f, "unknown status or opcode 0x{b:02x}"),
        }
    }
}

impl std::error::Error for WireError {}

fn check_magic(b: &[u8], magic: [u8; 4]) -> Result<(), WireError> {
    let got: [u8; 4] = b[..4].try_into().expect("caller checked the length");
    if got != magic {
        return Err(WireError::BadMagic(got));
    }
    if b[4] != VERSION {
        return Err(WireError::Version(b[4]));
    }
    Ok(())
}

fn need(b: &[u8], len: usize) -> Result<(), WireError> {
    if b.len() < len {
        return Err(WireError::Short {
            need: len,
            got: b.len(),
        });
    }
    Ok(())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("length checked"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("length checked"))
}

/// The client's session request: the socket buffer sizes it asks the server to use on its
/// side of the connection (0: leave the kernel's default). JavaNws §4 shows that buffer
/// sizes change what a bandwidth probe measures, so both ends must be controllable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    pub rcvbuf: u32,
    pub sndbuf: u32,
}

impl Hello {
    pub const LEN: usize = 14;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&TCP_MAGIC);
        b[4] = VERSION;
        b[6..10].copy_from_slice(&self.rcvbuf.to_be_bytes());
        b[10..14].copy_from_slice(&self.sndbuf.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        need(b, Self::LEN)?;
        check_magic(b, TCP_MAGIC)?;
        Ok(Self {
            rcvbuf: u32_at(b, 6),
            sndbuf: u32_at(b, 10),
        })
    }
}

/// Whether the server accepted the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok = 0,
    /// Over the server's connection caps; try again later.
    Busy = 1,
}

/// The server's answer to [`Hello`]: its payload cap and the buffer sizes the kernel
/// actually granted on its socket (Linux reports twice the size asked, for its bookkeeping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub status: Status,
    pub max_payload: u64,
    pub rcvbuf: u32,
    pub sndbuf: u32,
}

impl Welcome {
    pub const LEN: usize = 22;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&TCP_MAGIC);
        b[4] = VERSION;
        b[5] = self.status as u8;
        b[6..14].copy_from_slice(&self.max_payload.to_be_bytes());
        b[14..18].copy_from_slice(&self.rcvbuf.to_be_bytes());
        b[18..22].copy_from_slice(&self.sndbuf.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        need(b, Self::LEN)?;
        check_magic(b, TCP_MAGIC)?;
        let status = match b[5] {
            0 => Status::Ok,
            1 => Status::Busy,
            other => return Err(WireError::Unknown(other)),
        };
        Ok(Self {
            status,
            max_payload: u64_at(b, 6),
            rcvbuf: u32_at(b, 14),
            sndbuf: u32_at(b, 18),
        })
    }
}

/// The header of a bulk transfer of `len` payload bytes: `op` is [`OP_BULK`] (to the
/// server) or [`OP_BULK_DOWN`] (from it).
pub fn bulk_header(op: u8, len: u64) -> [u8; BULK_HEADER_LEN] {
    let mut b = [0u8; BULK_HEADER_LEN];
    b[0] = op;
    b[1..].copy_from_slice(&len.to_be_bytes());
    b
}

/// The payload length of a bulk header's last eight bytes.
pub fn bulk_len(b: &[u8; 8]) -> u64 {
    u64::from_be_bytes(*b)
}

/// One UDP probe: its sequence number and the sender's monotonic send time, both echoed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpProbe {
    pub seq: u64,
    /// Nanoseconds on the sender's monotonic clock; only the sender interprets it.
    pub sent_ns: u64,
}

impl UdpProbe {
    pub const HEADER_LEN: usize = 22;

    /// Writes the header at the start of `buf` (at least [`Self::HEADER_LEN`] bytes); the
    /// rest of `buf` is padding and left as it is.
    pub fn encode(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&UDP_MAGIC);
        buf[4] = VERSION;
        buf[5] = 0;
        buf[6..14].copy_from_slice(&self.seq.to_be_bytes());
        buf[14..22].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        need(b, Self::HEADER_LEN)?;
        check_magic(b, UDP_MAGIC)?;
        if b[5] != 0 {
            return Err(WireError::Unknown(b[5]));
        }
        Ok(Self {
            seq: u64_at(b, 6),
            sent_ns: u64_at(b, 14),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let h = Hello {
            rcvbuf: 1 << 20,
            sndbuf: 7,
        };
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        let w = Welcome {
            status: Status::Busy,
            max_payload: 1 << 40,
            rcvbuf: 3,
            sndbuf: 4,
        };
        assert_eq!(Welcome::decode(&w.encode()), Ok(w));
        let p = UdpProbe {
            seq: u64::MAX - 1,
            sent_ns: 123_456_789,
        };
        let mut buf = [0u8; 64];
        p.encode(&mut buf);
        assert_eq!(UdpProbe::decode(&buf), Ok(p));
        let hdr = bulk_header(OP_BULK, 65_536);
        assert_eq!(hdr[0], OP_BULK);
        assert_eq!(bulk_len(hdr[1..].try_into().unwrap()), 65_536);
    }

    #[test]
    fn foreign_bytes_are_refused_with_a_reason() {
        assert_eq!(
            Hello::decode(b"GET / HTTP/1.1"),
            Err(WireError::BadMagic(*b"GET "))
        );
        let mut w = Welcome {
            status: Status::Ok,
            max_payload: 1,
            rcvbuf: 0,
            sndbuf: 0,
        }
        .encode();
        w[4] = 9;
        assert_eq!(Welcome::decode(&w), Err(WireError::Version(9)));
        assert_eq!(
            UdpProbe::decode(&UDP_MAGIC),
            Err(WireError::Short { need: 22, got: 4 })
        );
    }

    #[test]
    fn the_decoders_never_panic_on_any_prefix() {
        // Every length and a spread of byte values: decoding is total.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..64 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as u8
                    })
                    .collect();
                let _ = Hello::decode(&bytes);
                let _ = Welcome::decode(&bytes);
                let _ = UdpProbe::decode(&bytes);
            }
        }
    }
}
