//! The wire protocol between the probes (`nowcast tcp`, `nowcast udp`) and `nowcast serve`,
//! version 2.
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
//!                           rcvbuf:u32 sndbuf:u32 retry_after_ms:u32              (26 bytes)
//! client → server  Ping     'P' x:u8          server echoes the same 2 bytes, except:
//! client → server  Ping     'P' '?'           after a download: the server answers 'P' and
//!                           where its sender is in its congestion control's start: 'B'
//!                           BBR's startup, 'S' a loss-based slow start, 'C' over, '?' not
//!                           known (see [`START_QUERY`])
//! client → server  Bulk     'B' len:u64, then len bytes;  server answers "AK" (2 bytes)
//!                           once all of them are in
//! client → server  BulkDown 'D' len:u64;  server answers "AK", then len bytes
//! client → server  Quit     'Q'               server closes
//! server → client  Refusal  'N' reason:u8     in place of an echo or "AK"; the server
//!                           then closes the session (see [`Refusal`])
//! ```
//!
//! A Welcome whose status is not `Ok` refuses the session (busy, over a per-client cap or
//! budget, a malformed hello) and says when to try again; the server then closes. Every
//! reply the server writes is one of the three two-byte shapes above, so a client waiting for
//! an echo or an acknowledgement always reads a reason when the server ends the session.
//!
//! UDP: `"NWCU" version:u8 kind:u8 seq:u64 sent_ns:u64` (22 bytes) followed by padding up to
//! the probe size; kind 0 is a request, kind 1 a reply. The server answers a request with
//! the same bytes, kind set to 1, to the address it came from: a reply is never larger than
//! its request (no amplification), and a server never answers a reply, so two servers (or a
//! server and an echo service, RFC 862) can never be set answering each other by one forged
//! datagram. Version 1 had no kind: its echo was itself a valid request.

use nowcast_core::transfer::Start;
use std::fmt;

/// Default port of `nowcast serve`, TCP and UDP (the NWS sensor's port).
pub const DEFAULT_PORT: u16 = 8060;

/// `nowcast serve`'s default UDP answers per client and second (`--udp-packets-per-second`),
/// from a bucket of one second's worth: a burst sent faster loses what is above it at the
/// server, not on the path (`udp::burst::over_default_rate`).
pub const DEFAULT_UDP_PACKETS_PER_SECOND: f64 = 2000.0;
/// ... and bytes (`--udp-bytes-per-second`, 1M).
pub const DEFAULT_UDP_BYTES_PER_SECOND: u64 = 1 << 20;
/// Protocol version spoken by this build. 2: UDP replies are marked as such, the Welcome
/// carries refusal reasons and a retry time, and refusals may replace any reply.
pub const VERSION: u8 = 2;
pub const TCP_MAGIC: [u8; 4] = *b"NWCT";
pub const UDP_MAGIC: [u8; 4] = *b"NWCU";

/// Opcodes of the messages a client sends inside a session.
pub const OP_PING: u8 = b'P';
pub const OP_BULK: u8 = b'B';
/// A bulk transfer from the server: it answers [`ACK`] (or a refusal) and the payload.
pub const OP_BULK_DOWN: u8 = b'D';
pub const OP_QUIT: u8 = b'Q';
/// The first byte of a refusal from the server.
pub const OP_REFUSAL: u8 = b'N';
/// The NWS round-trip probe is two bytes each way: the opcode and one byte of payload.
pub const PING_LEN: usize = 2;
/// The byte of a ping that asks, once the session has had a download, where the server's
/// sender is in its congestion control's start ([`start_byte`]): the client warms the
/// connection again before a timed download while it is ([`Start`]). Before a download the
/// ping is an echo like any other (a timed echo carries the session's number, which may be
/// this byte), and a server of an earlier build echoes it after one too, which reads as
/// [`Start::Unknown`]: no version change, and each side falls back to one warm-up.
pub const START_QUERY: u8 = b'?';

/// The answer's byte for `start` ([`START_QUERY`]).
pub const fn start_byte(start: Start) -> u8 {
    match start {
        Start::Startup => b'B',
        Start::SlowStart => b'S',
        Start::Over => b'C',
        Start::Unknown => START_QUERY,
    }
}

/// The start an answer to [`START_QUERY`] says; `None` for an answer that is not one.
pub fn start_of(answer: &[u8]) -> Option<Start> {
    let [OP_PING, b] = answer else {
        return None;
    };
    [
        Start::Startup,
        Start::SlowStart,
        Start::Over,
        Start::Unknown,
    ]
    .into_iter()
    .find(|s| start_byte(*s) == *b)
}

/// Opcode and the u64 length that precede a bulk transfer.
pub const BULK_HEADER_LEN: usize = 9;
/// The two-byte application acknowledgement of a bulk transfer (JavaNws §2.1.1).
pub const ACK: [u8; 2] = *b"AK";
/// Sent instead of [`ACK`] when a bulk transfer is above the server's cap.
pub const REFUSED: [u8; 2] = Refusal::PayloadCap.code();

/// Why bytes from the peer were not a valid message; each names the message (`what`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The first bytes differ from the protocol magic: the peer speaks something else.
    BadMagic { what: &'static str, got: [u8; 4] },
    /// The peer speaks another protocol version.
    Version { what: &'static str, got: u8 },
    /// Too few bytes for the message.
    Short {
        what: &'static str,
        need: usize,
        got: usize,
    },
    /// An unknown value (status, opcode, kind) at byte `at` of the message.
    Unknown {
        what: &'static str,
        at: usize,
        byte: u8,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadMagic { what, got } => write!(
                f,
                "{what}: the peer does not speak the nowcast protocol (it sent {:?} instead of the protocol magic)",
                String::from_utf8_lossy(got)
            ),
            WireError::Version { what, got } => write!(
                f,
                "{what}: the peer speaks protocol version {got}, this build speaks {VERSION}"
            ),
            WireError::Short { what, need, got } => {
                write!(f, "{what}: too short: {got} bytes, need {need}")
            }
            WireError::Unknown { what, at, byte } => {
                write!(f, "{what}: unknown value 0x{byte:02x} at byte {at}")
            }
        }
    }
}

impl std::error::Error for WireError {}

fn check_magic(what: &'static str, b: &[u8], magic: [u8; 4]) -> Result<(), WireError> {
    let got: [u8; 4] = b[..4].try_into().expect("caller checked the length");
    if got != magic {
        return Err(WireError::BadMagic { what, got });
    }
    if b[4] != VERSION {
        return Err(WireError::Version { what, got: b[4] });
    }
    Ok(())
}

fn need(what: &'static str, b: &[u8], len: usize) -> Result<(), WireError> {
    if b.len() < len {
        return Err(WireError::Short {
            what,
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
        need("hello", b, Self::LEN)?;
        check_magic("hello", b, TCP_MAGIC)?;
        Ok(Self {
            rcvbuf: u32_at(b, 6),
            sndbuf: u32_at(b, 10),
        })
    }
}

/// Whether the server accepted the session, and if not, why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok = 0,
    /// Every session the server runs at once is taken; try again later.
    Busy = 1,
    /// The client's network (its address's prefix) has as many sessions open as it may.
    ClientBusy = 2,
    /// The client's network has spent its byte budget; it refills with time.
    OverBudget = 3,
    /// The hello was not one this server understands (another version, or not the
    /// protocol at all).
    BadHello = 4,
}

impl Status {
    const ALL: [Status; 5] = [
        Status::Ok,
        Status::Busy,
        Status::ClientBusy,
        Status::OverBudget,
        Status::BadHello,
    ];

    /// What the status means, for people.
    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "accepted",
            Status::Busy => "the server is busy (all its sessions are taken)",
            Status::ClientBusy => {
                "the server is busy for this client (its network has as many sessions open as it may)"
            }
            Status::OverBudget => "this client's network has used up its byte budget on the server",
            Status::BadHello => "the server did not understand the hello (another protocol version?)",
        }
    }
}

/// The server's answer to [`Hello`]: its payload cap and the buffer sizes the kernel
/// actually granted on its socket (Linux reports twice the size asked, for its bookkeeping);
/// for a refusal, the status says why and `retry_after_ms` when to try again (0: no advice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub status: Status,
    pub max_payload: u64,
    pub rcvbuf: u32,
    pub sndbuf: u32,
    pub retry_after_ms: u32,
}

impl Welcome {
    pub const LEN: usize = 26;

    /// A refusal: no payload, no buffers.
    pub fn refusal(status: Status, retry_after_ms: u32) -> Self {
        Self {
            status,
            max_payload: 0,
            rcvbuf: 0,
            sndbuf: 0,
            retry_after_ms,
        }
    }

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&TCP_MAGIC);
        b[4] = VERSION;
        b[5] = self.status as u8;
        b[6..14].copy_from_slice(&self.max_payload.to_be_bytes());
        b[14..18].copy_from_slice(&self.rcvbuf.to_be_bytes());
        b[18..22].copy_from_slice(&self.sndbuf.to_be_bytes());
        b[22..26].copy_from_slice(&self.retry_after_ms.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        // The magic and version first: a server of another version sends a welcome of
        // another length, and the version is what the client should be told about.
        need("welcome", b, 5)?;
        check_magic("welcome", b, TCP_MAGIC)?;
        need("welcome", b, Self::LEN)?;
        let status =
            Status::ALL
                .into_iter()
                .find(|s| *s as u8 == b[5])
                .ok_or(WireError::Unknown {
                    what: "welcome",
                    at: 5,
                    byte: b[5],
                })?;
        Ok(Self {
            status,
            max_payload: u64_at(b, 6),
            rcvbuf: u32_at(b, 14),
            sndbuf: u32_at(b, 18),
            retry_after_ms: u32_at(b, 22),
        })
    }
}

/// A message from the client inside a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Echo these two bytes (the opcode and `x`).
    Ping(u8),
    /// `len` payload bytes follow, to be acknowledged once all are in.
    Up(u64),
    /// Acknowledge, then send `len` payload bytes.
    Down(u64),
    Quit,
}

impl Request {
    /// The length of the message that starts with `op` (the whole message, opcode
    /// included; a bulk transfer's payload is not part of it).
    pub fn len(op: u8) -> Result<usize, WireError> {
        match op {
            OP_PING => Ok(PING_LEN),
            OP_BULK | OP_BULK_DOWN => Ok(BULK_HEADER_LEN),
            OP_QUIT => Ok(1),
            byte => Err(WireError::Unknown {
                what: "request",
                at: 0,
                byte,
            }),
        }
    }

    /// Decodes one whole message (as long as [`Request::len`] of its first byte says).
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        need("request", b, 1)?;
        let len = Self::len(b[0])?;
        need("request", b, len)?;
        Ok(match b[0] {
            OP_PING => Request::Ping(b[1]),
            OP_BULK => Request::Up(u64_at(b, 1)),
            OP_BULK_DOWN => Request::Down(u64_at(b, 1)),
            _ => Request::Quit,
        })
    }

    /// The message's bytes, and how many of the array's are used.
    pub fn encode(&self) -> ([u8; BULK_HEADER_LEN], usize) {
        match *self {
            Request::Ping(x) => {
                let mut b = [0u8; BULK_HEADER_LEN];
                b[..2].copy_from_slice(&[OP_PING, x]);
                (b, PING_LEN)
            }
            Request::Up(len) => (bulk_header(OP_BULK, len), BULK_HEADER_LEN),
            Request::Down(len) => (bulk_header(OP_BULK_DOWN, len), BULK_HEADER_LEN),
            Request::Quit => {
                let mut b = [0u8; BULK_HEADER_LEN];
                b[0] = OP_QUIT;
                (b, 1)
            }
        }
    }
}

/// Why the server refused a request or ended a session, sent in place of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The bulk transfer asked for is above the server's payload cap.
    PayloadCap,
    /// The client's network has spent its byte budget.
    Budget,
    /// The session has lasted as long as a session may.
    Lifetime,
    /// The session moved fewer bytes than the server's minimum rate.
    Slow,
    /// The client sent nothing for the idle limit.
    Idle,
    /// The server is stopping.
    Stopping,
}

impl Refusal {
    pub const ALL: [Refusal; 6] = [
        Refusal::PayloadCap,
        Refusal::Budget,
        Refusal::Lifetime,
        Refusal::Slow,
        Refusal::Idle,
        Refusal::Stopping,
    ];

    /// The two bytes on the wire.
    pub const fn code(self) -> [u8; 2] {
        let reason = match self {
            Refusal::PayloadCap => b'O',
            Refusal::Budget => b'B',
            Refusal::Lifetime => b'L',
            Refusal::Slow => b'S',
            Refusal::Idle => b'I',
            Refusal::Stopping => b'X',
        };
        [OP_REFUSAL, reason]
    }

    /// What it means, for people.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::PayloadCap => "the transfer is above the server's payload cap",
            Refusal::Budget => "this client's network has used up its byte budget on the server",
            Refusal::Lifetime => "the session lasted as long as the server allows one to",
            Refusal::Slow => "the session moved data more slowly than the server's minimum rate",
            Refusal::Idle => "the client sent nothing for the server's idle limit",
            Refusal::Stopping => "the server is stopping",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// A two-byte answer from the server inside a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    Echo(u8),
    Ack,
    Refused(Refusal),
}

impl Reply {
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        need("reply", b, 2)?;
        let unknown = |at| WireError::Unknown {
            what: "reply",
            at,
            byte: b[at],
        };
        match b[0] {
            OP_PING => Ok(Reply::Echo(b[1])),
            _ if b[..2] == ACK => Ok(Reply::Ack),
            OP_REFUSAL => Refusal::ALL
                .into_iter()
                .find(|r| r.code()[1] == b[1])
                .map(Reply::Refused)
                .ok_or_else(|| unknown(1)),
            _ => Err(unknown(0)),
        }
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

/// Whether a UDP probe asks for an answer or is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request = 0,
    Reply = 1,
}

/// One UDP probe: its sequence number and the sender's monotonic send time, both echoed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpProbe {
    pub kind: Kind,
    pub seq: u64,
    /// Nanoseconds on the sender's monotonic clock; only the sender interprets it.
    pub sent_ns: u64,
}

impl UdpProbe {
    pub const HEADER_LEN: usize = 22;
    /// Where the kind is in the header.
    const KIND_AT: usize = 5;

    /// A request, as `nowcast udp` sends it.
    pub fn request(seq: u64, sent_ns: u64) -> Self {
        Self {
            kind: Kind::Request,
            seq,
            sent_ns,
        }
    }

    /// Writes the header at the start of `buf` (at least [`Self::HEADER_LEN`] bytes); the
    /// rest of `buf` is padding and left as it is.
    pub fn encode(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&UDP_MAGIC);
        buf[4] = VERSION;
        buf[Self::KIND_AT] = self.kind as u8;
        buf[6..14].copy_from_slice(&self.seq.to_be_bytes());
        buf[14..22].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        const WHAT: &str = "udp probe";
        need(WHAT, b, Self::HEADER_LEN)?;
        check_magic(WHAT, b, UDP_MAGIC)?;
        let kind = match b[Self::KIND_AT] {
            0 => Kind::Request,
            1 => Kind::Reply,
            byte => {
                return Err(WireError::Unknown {
                    what: WHAT,
                    at: Self::KIND_AT,
                    byte,
                })
            }
        };
        Ok(Self {
            kind,
            seq: u64_at(b, 6),
            sent_ns: u64_at(b, 14),
        })
    }

    /// Turns a request (already decoded as one) into its reply, in place: the same bytes and
    /// length, marked as a reply.
    pub fn mark_reply(datagram: &mut [u8]) {
        datagram[Self::KIND_AT] = Kind::Reply as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each start has its own byte, read back as itself; an echo of the query (a server of
    /// an earlier build) is "not known"; anything else is no answer.
    #[test]
    fn the_start_query_round_trips_and_an_echo_reads_as_unknown() {
        for start in [
            Start::Startup,
            Start::SlowStart,
            Start::Over,
            Start::Unknown,
        ] {
            assert_eq!(start_of(&[OP_PING, start_byte(start)]), Some(start));
        }
        assert_eq!(start_of(&[OP_PING, START_QUERY]), Some(Start::Unknown));
        assert_eq!(start_of(&[OP_PING, b'x']), None);
        assert_eq!(start_of(&REFUSED), None);
        assert_eq!(start_of(&[OP_PING]), None);
    }

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
            retry_after_ms: 5_000,
        };
        assert_eq!(Welcome::decode(&w.encode()), Ok(w));
        for status in Status::ALL {
            let w = Welcome::refusal(status, 9);
            assert_eq!(Welcome::decode(&w.encode()), Ok(w));
        }
        let p = UdpProbe::request(u64::MAX - 1, 123_456_789);
        let mut buf = [0u8; 64];
        p.encode(&mut buf);
        assert_eq!(UdpProbe::decode(&buf), Ok(p));
        UdpProbe::mark_reply(&mut buf);
        assert_eq!(
            UdpProbe::decode(&buf),
            Ok(UdpProbe {
                kind: Kind::Reply,
                ..p
            })
        );
        for r in [
            Request::Ping(9),
            Request::Up(65_536),
            Request::Down(u64::MAX),
            Request::Quit,
        ] {
            let (b, n) = r.encode();
            assert_eq!(Request::len(b[0]), Ok(n));
            assert_eq!(Request::decode(&b[..n]), Ok(r));
        }
        assert_eq!(
            bulk_len(bulk_header(OP_BULK, 7)[1..].try_into().unwrap()),
            7
        );
        assert_eq!(Reply::decode(&ACK), Ok(Reply::Ack));
        assert_eq!(Reply::decode(&[OP_PING, 3]), Ok(Reply::Echo(3)));
        for r in Refusal::ALL {
            assert_eq!(Reply::decode(&r.code()), Ok(Reply::Refused(r)));
        }
        assert_eq!(REFUSED, *b"NO", "version 1's refusal keeps its bytes");
    }

    #[test]
    fn foreign_bytes_are_refused_with_a_reason_that_names_the_message() {
        assert_eq!(
            Hello::decode(b"GET / HTTP/1.1"),
            Err(WireError::BadMagic {
                what: "hello",
                got: *b"GET "
            })
        );
        let mut w = Welcome::refusal(Status::Ok, 0).encode();
        w[4] = 1;
        let e = Welcome::decode(&w[..22]).unwrap_err();
        assert_eq!(
            e,
            WireError::Version {
                what: "welcome",
                got: 1
            }
        );
        assert_eq!(
            e.to_string(),
            "welcome: the peer speaks protocol version 1, this build speaks 2"
        );
        w[4] = VERSION;
        w[5] = 77;
        assert_eq!(
            Welcome::decode(&w).unwrap_err().to_string(),
            "welcome: unknown value 0x4d at byte 5"
        );
        assert_eq!(
            UdpProbe::decode(&UDP_MAGIC),
            Err(WireError::Short {
                what: "udp probe",
                need: 22,
                got: 4
            })
        );
        assert!(Request::decode(b"X")
            .unwrap_err()
            .to_string()
            .starts_with("request:"));
        assert!(Reply::decode(b"NZ")
            .unwrap_err()
            .to_string()
            .contains("at byte 1"));
    }

    #[test]
    fn a_version_1_echo_is_not_a_version_2_request() {
        // Version 1's datagrams had a zero kind byte and version 1: a server of this
        // version answers neither them nor anything marked as a reply.
        let mut v1 = [0u8; 22];
        UdpProbe::request(1, 2).encode(&mut v1);
        v1[4] = 1;
        assert!(matches!(
            UdpProbe::decode(&v1),
            Err(WireError::Version { got: 1, .. })
        ));
    }
}
