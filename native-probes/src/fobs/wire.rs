//! FOBS on the wire: data datagrams (UDP, sender → receiver only) and control messages
//! (one TCP connection, both ways). Decoders take untrusted bytes and never panic; anything
//! that does not parse exactly is an error the caller counts and drops.
//!
//! Why a TCP control channel: set-up, acknowledgements and completion must arrive, in
//! order, and TCP gives that without a second reliability layer; its handshake proves the
//! sender can receive at its address before the receiver commits anything, so the UDP side
//! is never answered at all (no reflection, no amplification: the receiver sends no UDP).
//! A window's acknowledgement is a few hundred bytes per window of up to 4,096 data packets,
//! so the control channel costs well under 0.1 % of the data rate.
//!
//! Data datagram (all integers little-endian), [`DATA_HEADER`] = 28 bytes then the payload:
//!
//! ```text
//! 0  u16 magic 0xF0B5   2 u8 version (1)   3 u8 kind (0 = data)
//! 4  u64 session (chosen by the receiver, secret to the two ends)
//! 12 u32 window          16 u32 index within the window
//! 20 u64 packet number (file offset = number × payload size)
//! ```
//!
//! Control frame: `u8 type, u32 body length, body` ([`MAX_BODY`] at most). Bodies:
//! Hello (type 1), Welcome (2), WindowEnd (3), Ack (4), Done (5); see each struct.

/// Nanoseconds on the caller's monotonic clock (every FOBS core's time).
pub type Nanos = u64;

/// The data datagram's magic number.
pub const MAGIC: u16 = 0xF0B5;
pub const VERSION: u8 = 1;
pub const DATA_HEADER: usize = 28;
/// Longest control body a framer takes by default: 8 MiB, the resume bitmap of 64 Mi packets
/// (a 16 GiB file in 1,400-byte packets needs 1.5 MiB). A sender takes a longer Welcome when
/// its own file's bitmap is longer ([`Framer::for_packets`]): 16 GiB in 64-byte packets is
/// 32 MiB.
pub const MAX_BODY: usize = 8 << 20;
/// A Welcome's body before its bitmap: status, session, UDP port, rate.
const WELCOME_HEAD: usize = 1 + 8 + 2 + 8;
/// The shared secret a receiver accepts transfers with.
pub const TOKEN_LEN: usize = 16;
pub const HASH_LEN: usize = 32;
/// Longest file name the wire carries (bytes).
pub const MAX_NAME: usize = 255;
/// Longest file name a receiver stores (bytes): its own files add 16 to it
/// (`.NAME.fobs-state-new`), and file systems hold names of at most 255 bytes. Longer, the
/// transfer was refused as unstorable (245–255 bytes) or lost its resume state (240–244).
pub const MAX_STORED_NAME: usize = 239;
/// Largest window a receiver tracks (packets).
pub const MAX_WINDOW: u32 = 65_536;
/// Default port (TCP control and UDP data use the same number).
pub const DEFAULT_PORT: u16 = 8070;

/// Why bytes were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    Short,
    Magic,
    Version,
    Kind,
    Length,
    Value,
}

/// One data datagram's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    pub session: u64,
    pub window: u32,
    pub index: u32,
    pub seq: u64,
}

impl DataHeader {
    pub fn encode(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        out[2] = VERSION;
        out[3] = 0;
        out[4..12].copy_from_slice(&self.session.to_le_bytes());
        out[12..16].copy_from_slice(&self.window.to_le_bytes());
        out[16..20].copy_from_slice(&self.index.to_le_bytes());
        out[20..28].copy_from_slice(&self.seq.to_le_bytes());
    }

    /// The header of a datagram; the payload is `bytes[DATA_HEADER..]`.
    pub fn decode(bytes: &[u8]) -> Result<DataHeader, Malformed> {
        if bytes.len() < DATA_HEADER {
            return Err(Malformed::Short);
        }
        if u16::from_le_bytes([bytes[0], bytes[1]]) != MAGIC {
            return Err(Malformed::Magic);
        }
        if bytes[2] != VERSION {
            return Err(Malformed::Version);
        }
        if bytes[3] != 0 {
            return Err(Malformed::Kind);
        }
        Ok(DataHeader {
            session: u64_at(bytes, 4),
            window: u32_at(bytes, 12),
            index: u32_at(bytes, 16),
            seq: u64_at(bytes, 20),
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The sender's request (type 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub token: [u8; TOKEN_LEN],
    /// File size, bytes.
    pub size: u64,
    /// Payload bytes per data packet.
    pub packet: u16,
    /// Most packets per transmission window.
    pub window: u32,
    /// Continue a transfer of the same file (same name, size, packet size and hash).
    pub resume: bool,
    /// BLAKE3 of the whole file.
    pub hash: [u8; HASH_LEN],
    pub name: String,
}

/// The receiver's answer to a Hello (type 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub status: Refusal,
    pub session: u64,
    pub udp_port: u16,
    /// The most the receiver takes, bytes per second.
    pub max_rate: u64,
    /// Packets already held (resume): bit i of byte i / 8, LSB first. Empty otherwise.
    pub have: Vec<u8>,
}

/// Whether a Hello was accepted, and why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Accepted = 0,
    Token = 1,
    TooLarge = 2,
    Name = 3,
    Busy = 4,
    Exists = 5,
    Parameters = 6,
    Storage = 7,
    TooMany = 8,
}

impl Refusal {
    fn from_u8(b: u8) -> Result<Self, Malformed> {
        use Refusal::*;
        Ok(match b {
            0 => Accepted,
            1 => Token,
            2 => TooLarge,
            3 => Name,
            4 => Busy,
            5 => Exists,
            6 => Parameters,
            7 => Storage,
            8 => TooMany,
            _ => return Err(Malformed::Value),
        })
    }

    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Accepted => "accepted",
            Refusal::Token => "wrong token",
            Refusal::TooLarge => "file larger than the receiver accepts",
            Refusal::Name => "file name not allowed (one plain name, no path, at most 239 bytes)",
            Refusal::Busy => "the receiver is busy with another transfer",
            Refusal::Exists => "a file of that name already exists at the receiver",
            Refusal::Parameters => "packet or window size out of range",
            Refusal::Storage => "the receiver cannot store the file",
            Refusal::TooMany => {
                "too many connections from this network to the receiver; try again in a minute"
            }
        }
    }
}

/// The end of a transmission window (type 3): its packets have all been sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowEnd {
    pub window: u32,
    pub count: u32,
}

/// A window's selective acknowledgement (type 4): its packet-loss signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    pub window: u32,
    pub count: u32,
    /// From the window's first to its last arrival at the receiver, ns.
    pub span_ns: u64,
    /// How long the receiver held the acknowledgement after the WindowEnd, ns.
    pub held_ns: u64,
    /// Bit i (LSB first in byte i / 8) = packet i of the window arrived.
    pub bitmap: Vec<u8>,
}

/// The transfer's end (type 5), one byte: its [`Done::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// The file's hash matched and it is in place under its name (deleted, by a receiver
    /// started with `--discard`). Code 0.
    Stored,
    /// Code 1.
    HashMismatch,
    /// Code 2.
    StorageFailed,
    /// The receiver gave up: no progress. Code 3.
    Abandoned,
    /// The receiver was stopped by its operator (a signal) with the transfer in flight.
    /// Code 4 (added after the others: a sender from before it reads it as [`Done::Other`]
    /// if it is as lenient as this one, and as a malformed message if not).
    Stopped,
    /// An ending this version does not know, from a newer receiver: the transfer ended
    /// without being stored, and a sender can say so (and keep what `--resume` needs)
    /// rather than call the receiver's message malformed.
    Other(u8),
}

impl Done {
    /// The byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            Done::Stored => 0,
            Done::HashMismatch => 1,
            Done::StorageFailed => 2,
            Done::Abandoned => 3,
            Done::Stopped => 4,
            Done::Other(c) => c,
        }
    }

    pub fn from_code(c: u8) -> Self {
        match c {
            0 => Done::Stored,
            1 => Done::HashMismatch,
            2 => Done::StorageFailed,
            3 => Done::Abandoned,
            4 => Done::Stopped,
            c => Done::Other(c),
        }
    }
}

impl std::fmt::Display for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Done::Stored => f.write_str("stored, hash verified"),
            Done::HashMismatch => {
                f.write_str("the file's hash did not match the sender's: not kept")
            }
            Done::StorageFailed => f.write_str("could not be stored (see above)"),
            Done::Abandoned => f.write_str("abandoned: no progress"),
            Done::Stopped => f.write_str("cut off: the receiver was stopped"),
            Done::Other(c) => write!(
                f,
                "ended by the receiver for a reason this version does not know (code {c}; \
                 a newer nowcast?)"
            ),
        }
    }
}

/// Any control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    Hello(Hello),
    Welcome(Welcome),
    WindowEnd(WindowEnd),
    Ack(Ack),
    Done(Done),
}

const HELLO_MAGIC: &[u8; 4] = b"FOBS";

impl Control {
    /// Appends the framed message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 5]);
        let kind = match self {
            Control::Hello(h) => {
                out.extend_from_slice(HELLO_MAGIC);
                out.push(VERSION);
                out.extend_from_slice(&h.token);
                out.extend_from_slice(&h.size.to_le_bytes());
                out.extend_from_slice(&h.packet.to_le_bytes());
                out.extend_from_slice(&h.window.to_le_bytes());
                out.push(u8::from(h.resume));
                out.extend_from_slice(&h.hash);
                let name = &h.name.as_bytes()[..h.name.len().min(MAX_NAME)];
                out.push(name.len() as u8);
                out.extend_from_slice(name);
                1
            }
            Control::Welcome(w) => {
                out.push(w.status as u8);
                out.extend_from_slice(&w.session.to_le_bytes());
                out.extend_from_slice(&w.udp_port.to_le_bytes());
                out.extend_from_slice(&w.max_rate.to_le_bytes());
                out.extend_from_slice(&w.have);
                2
            }
            Control::WindowEnd(e) => {
                out.extend_from_slice(&e.window.to_le_bytes());
                out.extend_from_slice(&e.count.to_le_bytes());
                3
            }
            Control::Ack(a) => {
                out.extend_from_slice(&a.window.to_le_bytes());
                out.extend_from_slice(&a.count.to_le_bytes());
                out.extend_from_slice(&a.span_ns.to_le_bytes());
                out.extend_from_slice(&a.held_ns.to_le_bytes());
                out.extend_from_slice(&a.bitmap);
                4
            }
            Control::Done(d) => {
                out.push(d.code());
                5
            }
        };
        let len = (out.len() - start - 5) as u32;
        out[start] = kind;
        out[start + 1..start + 5].copy_from_slice(&len.to_le_bytes());
    }

    /// Decodes one body of type `kind`.
    pub fn decode(kind: u8, b: &[u8]) -> Result<Control, Malformed> {
        let need = |n: usize| {
            if b.len() < n {
                Err(Malformed::Length)
            } else {
                Ok(())
            }
        };
        match kind {
            1 => {
                need(4 + 1 + TOKEN_LEN + 8 + 2 + 4 + 1 + HASH_LEN + 1)?;
                if &b[0..4] != HELLO_MAGIC {
                    return Err(Malformed::Magic);
                }
                if b[4] != VERSION {
                    return Err(Malformed::Version);
                }
                let mut at = 5;
                let token: [u8; TOKEN_LEN] = b[at..at + TOKEN_LEN].try_into().expect("len");
                at += TOKEN_LEN;
                let size = u64_at(b, at);
                let packet = u16::from_le_bytes([b[at + 8], b[at + 9]]);
                let window = u32_at(b, at + 10);
                let resume = match b[at + 14] {
                    0 => false,
                    1 => true,
                    _ => return Err(Malformed::Value),
                };
                at += 15;
                let hash: [u8; HASH_LEN] = b[at..at + HASH_LEN].try_into().expect("len");
                at += HASH_LEN;
                let n = usize::from(b[at]);
                at += 1;
                if b.len() != at + n {
                    return Err(Malformed::Length);
                }
                // Bytes that are not UTF-8 stand as U+FFFD, which no stored name may hold: the
                // receiver refuses the name as such (and says so to the sender) rather than
                // dropping the connection on a "malformed" hello.
                let name = String::from_utf8_lossy(&b[at..]);
                Ok(Control::Hello(Hello {
                    token,
                    size,
                    packet,
                    window,
                    resume,
                    hash,
                    name: name.to_string(),
                }))
            }
            2 => {
                need(WELCOME_HEAD)?;
                Ok(Control::Welcome(Welcome {
                    status: Refusal::from_u8(b[0])?,
                    session: u64_at(b, 1),
                    udp_port: u16::from_le_bytes([b[9], b[10]]),
                    max_rate: u64_at(b, 11),
                    have: b[WELCOME_HEAD..].to_vec(),
                }))
            }
            3 => {
                if b.len() != 8 {
                    return Err(Malformed::Length);
                }
                Ok(Control::WindowEnd(WindowEnd {
                    window: u32_at(b, 0),
                    count: u32_at(b, 4),
                }))
            }
            4 => {
                need(24)?;
                let count = u32_at(b, 4);
                if count > MAX_WINDOW || b.len() != 24 + (count as usize).div_ceil(8) {
                    return Err(Malformed::Length);
                }
                Ok(Control::Ack(Ack {
                    window: u32_at(b, 0),
                    count,
                    span_ns: u64_at(b, 8),
                    held_ns: u64_at(b, 16),
                    bitmap: b[24..].to_vec(),
                }))
            }
            5 => {
                if b.len() != 1 {
                    return Err(Malformed::Length);
                }
                Ok(Control::Done(Done::from_code(b[0])))
            }
            _ => Err(Malformed::Kind),
        }
    }
}

/// Splits a TCP byte stream into control messages. Holds at most one frame's bytes plus
/// what the caller pushes at once.
pub struct Framer {
    buf: Vec<u8>,
    limit: usize,
}

impl Default for Framer {
    fn default() -> Self {
        Self::with_limit(MAX_BODY)
    }
}

impl Framer {
    /// A framer that refuses bodies above `limit` bytes (a receiver takes only small ones).
    pub fn with_limit(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            limit: limit.min(MAX_BODY),
        }
    }

    /// A sender's framer for a file of `packets` packets: it takes a Welcome carrying that
    /// file's resume bitmap, however long, and nothing longer than the default otherwise.
    pub fn for_packets(packets: u64) -> Self {
        let bitmap = usize::try_from(packets.div_ceil(8)).unwrap_or(usize::MAX);
        Self {
            buf: Vec::new(),
            limit: MAX_BODY.max(WELCOME_HEAD.saturating_add(bitmap)),
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether [`Framer::next_message`] has something to say: a whole frame, or a length
    /// over the limit (an error).
    pub fn ready(&self) -> bool {
        self.buf.len() >= 5 && {
            let len = u32_at(&self.buf, 1) as usize;
            len > self.limit || self.buf.len() >= 5 + len
        }
    }

    /// The next whole message, `Ok(None)` when more bytes are needed; an error is final
    /// (the connection must be closed).
    pub fn next_message(&mut self) -> Result<Option<Control>, Malformed> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32_at(&self.buf, 1) as usize;
        if len > self.limit {
            return Err(Malformed::Length);
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        let msg = Control::decode(self.buf[0], &self.buf[5..5 + len]);
        self.buf.drain(..5 + len);
        msg.map(Some)
    }
}

/// Whether `name` may be stored: one plain file name (no directory part, not `.` or `..`,
/// no leading dot, which the receiver's own temporary files use), UTF-8 without control
/// or format characters, nor line or paragraph separators (U+2028, U+2029: a log viewer
/// breaks the line there, and what follows reads as a line of its own), nor U+FFFD (bytes
/// that were not UTF-8: the name stored would not be the one sent), at most
/// [`MAX_STORED_NAME`] bytes.
pub fn valid_name(name: &str) -> bool {
    name_problem(name).is_none()
}

/// Why `name` may not be stored ([`valid_name`]), in words for the sender to see before it
/// offers the file.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".into())
    } else if name.len() > MAX_STORED_NAME {
        Some(format!(
            "it is {} bytes long, and a receiver stores names of at most {MAX_STORED_NAME}",
            name.len()
        ))
    } else if name.contains(['/', '\\']) {
        // Before the dot: `../x` has a directory part, which is what is wrong with it.
        Some("it has a directory part ('/' or '\\')".into())
    } else if name.starts_with('.') {
        Some("it starts with a dot, which the receiver keeps for its own files".into())
    } else if name
        .chars()
        .any(|c| c.is_control() || is_format(c) || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        Some("it holds a control or invisible character".into())
    } else if name.contains('\u{fffd}') {
        Some("it holds bytes that are not UTF-8 (shown as U+FFFD)".into())
    } else {
        None
    }
}

/// Unicode's format characters (general category Cf, Unicode 15): invisible, and some
/// reorder the text around them (U+202E, right-to-left override), so that a name shown in
/// a log or a directory listing would read as another. `char` has no category test.
fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// The least rate a transfer takes, bytes/s (100 kbit/s: a 1400-byte packet every 0.11 s).
/// Below it a window outlasts the receiver's patience: `--rate 1` sent one packet in 30 s,
/// and each side then blamed the other.
pub const MIN_RATE: f64 = 100e3 / 8.0;

/// A rate in bits per second with an optional decimal K, M or G (`500M`, `1G`), returned in
/// bytes per second; at least [`MIN_RATE`] (for flags and campaign files alike).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (e.g. 500M, 1G)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("'{s}': a rate must be positive"));
    }
    let rate = v * mult / 8.0;
    if rate < MIN_RATE {
        return Err(format!(
            "'{s}' is below the least rate a transfer can use, 100 kbit/s (give 100K or more)"
        ));
    }
    Ok(rate)
}

/// A receiver's token: [`TOKEN_LEN`] bytes written as hex digits.
pub fn parse_token(s: &str) -> Result<[u8; TOKEN_LEN], String> {
    let s = s.trim();
    if s.len() != TOKEN_LEN * 2 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("a token is {} hex digits", TOKEN_LEN * 2));
    }
    let mut t = [0u8; TOKEN_LEN];
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex");
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn hello() -> Hello {
        Hello {
            token: [7; TOKEN_LEN],
            size: 1_000_000,
            packet: 1400,
            window: 4096,
            resume: false,
            hash: [9; HASH_LEN],
            name: "data.bin".into(),
        }
    }

    #[test]
    fn every_message_round_trips_through_the_framer() {
        let msgs = vec![
            Control::Hello(hello()),
            Control::Welcome(Welcome {
                status: Refusal::Accepted,
                session: 42,
                udp_port: 8070,
                max_rate: 125_000_000,
                have: vec![0xff, 0x01],
            }),
            Control::WindowEnd(WindowEnd {
                window: 3,
                count: 4096,
            }),
            Control::Ack(Ack {
                window: 3,
                count: 10,
                span_ns: 5,
                held_ns: 6,
                bitmap: vec![0xff, 0x02],
            }),
            Control::Done(Done::Stored),
            Control::Done(Done::Abandoned),
            Control::Done(Done::Stopped),
            Control::Done(Done::Other(200)),
        ];
        let mut bytes = Vec::new();
        for m in &msgs {
            m.encode(&mut bytes);
        }
        let mut f = Framer::default();
        let mut got = Vec::new();
        // One byte at a time: frames split anywhere.
        for b in bytes {
            f.push(&[b]);
            while let Some(m) = f.next_message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, msgs);
    }

    #[test]
    fn data_headers_round_trip_and_bad_ones_are_named() {
        let h = DataHeader {
            session: 1,
            window: 2,
            index: 3,
            seq: 4,
        };
        let mut b = [0u8; DATA_HEADER + 5];
        h.encode(&mut b);
        assert_eq!(DataHeader::decode(&b), Ok(h));
        assert_eq!(DataHeader::decode(&b[..27]), Err(Malformed::Short));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(DataHeader::decode(&bad), Err(Malformed::Magic));
        let mut bad = b;
        bad[2] = 2;
        assert_eq!(DataHeader::decode(&bad), Err(Malformed::Version));
        let mut bad = b;
        bad[3] = 1;
        assert_eq!(DataHeader::decode(&bad), Err(Malformed::Kind));
    }

    #[test]
    fn names_are_single_plain_components() {
        for ok in ["a", "data.bin", "ünïcode", "x y", "日本語.txt", "مرحبا"] {
            assert!(valid_name(ok), "{ok}");
        }
        // The longest name stored, with the receiver's own names for its files: each within
        // file systems' 255 bytes.
        let longest = "x".repeat(MAX_STORED_NAME);
        assert!(valid_name(&longest));
        assert!(format!(".{longest}.fobs-state-new").len() <= 255);
        let long = "x".repeat(MAX_STORED_NAME + 1);
        for bad in [
            "victim\u{2028}127.0.0.9:1: legit.iso: stored, hash verified",
            "a\u{2029}b",
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "/etc/passwd",
            "a\\b",
            "a\0b",
            "a\nb",
            "\u{202e}nib.exe",
            "a\u{200b}b",
            "\u{feff}x",
            "tag\u{e0041}",
            "\u{fffd}\u{fffd}",
            &long,
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn oversized_frames_are_refused_before_they_are_buffered() {
        let mut f = Framer::default();
        let mut b = vec![4u8];
        b.extend_from_slice(&(MAX_BODY as u32 + 1).to_le_bytes());
        f.push(&b);
        assert_eq!(f.next_message(), Err(Malformed::Length));
    }

    #[test]
    fn a_sender_takes_the_welcome_that_resumes_its_own_file_however_long() {
        // 5 GiB in 64-byte packets: a resume bitmap of 10 MiB, over the default limit (until
        // 2026-12-07 such a resume was read as a peer that does not speak FOBS).
        let packets = (5u64 << 30) / 64;
        let w = Control::Welcome(Welcome {
            status: Refusal::Accepted,
            session: 7,
            udp_port: 9,
            max_rate: 1,
            have: vec![0xff; packets.div_ceil(8) as usize],
        });
        let mut b = Vec::new();
        w.encode(&mut b);
        let mut default = Framer::default();
        default.push(&b);
        assert_eq!(default.next_message(), Err(Malformed::Length));
        let mut own = Framer::for_packets(packets);
        own.push(&b);
        assert_eq!(own.next_message(), Ok(Some(w)));
        // Nothing longer than its own file's bitmap.
        let mut longer = Vec::new();
        Control::Welcome(Welcome {
            status: Refusal::Accepted,
            session: 7,
            udp_port: 9,
            max_rate: 1,
            have: vec![0; packets.div_ceil(8) as usize + 1],
        })
        .encode(&mut longer);
        let mut own = Framer::for_packets(packets);
        own.push(&longer);
        assert_eq!(own.next_message(), Err(Malformed::Length));
    }

    #[test]
    fn a_name_a_receiver_would_refuse_is_said_why() {
        let long = "é".repeat(130);
        for (name, why) in [
            (long.as_str(), "260 bytes long"),
            (".hidden", "starts with a dot"),
            ("../x.bin", "directory part"),
            ("a/b", "directory part"),
            ("a\u{202e}b", "invisible"),
            ("", "empty"),
        ] {
            let said = name_problem(name).unwrap_or_default();
            assert!(said.contains(why), "{name:?}: {said:?}");
        }
        assert_eq!(name_problem("data.bin"), None);
    }

    /// A hello whose name is not UTF-8 reads, with U+FFFD standing for those bytes, so that
    /// the receiver refuses the name and says why (it used to drop a "malformed" hello).
    #[test]
    fn a_name_that_is_not_utf8_reads_and_is_refused_as_a_name() {
        let mut bytes = Vec::new();
        Control::Hello(Hello {
            token: [1; TOKEN_LEN],
            size: 10,
            packet: 1400,
            window: 64,
            resume: false,
            hash: [0; HASH_LEN],
            name: "ab".into(),
        })
        .encode(&mut bytes);
        let end = bytes.len();
        bytes[end - 2..].copy_from_slice(&[0xff, 0xfe]);
        let mut f = Framer::default();
        f.push(&bytes);
        let Ok(Some(Control::Hello(h))) = f.next_message() else {
            panic!("not a hello");
        };
        assert_eq!(h.name, "\u{fffd}\u{fffd}");
        assert!(name_problem(&h.name).unwrap().contains("not UTF-8"));
    }
}
