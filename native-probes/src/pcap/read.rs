//! The capture edges: pcap and pcapng files read as a stream (a fixed buffer, whatever the
//! file's size), and live capture through libpcap.
//!
//! Files: classic pcap in both byte orders with micro- or nanosecond timestamps, and pcapng
//! (sections of either byte order, several interfaces with their own link types, timestamp
//! resolutions and offsets). The blocks are framed here (so that every problem can name its
//! byte offset and the reader can find the next good block after a damaged one) and parsed
//! by the pcap-parser crate. Damage never stops the analysis of the rest: a truncated last
//! packet, a record header that cannot be right, or a corrupt pcapng block is reported with
//! its offset and packet number, and reading resumes at the next plausible record or block.

use pcap_parser::pcapng::{parse_block_be, parse_block_le, Block};
use pcap_parser::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_header};
use std::fmt;
use std::io::{self, Read};

/// One captured frame.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// 1-based number in the capture (tshark's `frame.number`).
    pub number: u64,
    /// LINKTYPE_ of the interface it was captured on.
    pub link: u32,
    /// Capture time, ns since 1970.
    pub ts_ns: i64,
    /// The bytes kept (at most the snap length).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// Something wrong in the file, where it is, and what was done about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset in the file.
    pub offset: u64,
    /// The packet concerned (the number it has or would have had), if any.
    pub packet: Option<u64>,
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.packet {
            Some(n) => write!(f, "byte {} (packet {n}): {}", self.offset, self.what),
            None => write!(f, "byte {}: {}", self.offset, self.what),
        }
    }
}

/// Largest record or block believed: anything longer is damage (a packet of 16 MiB is far
/// beyond any link's MTU or TSO segment).
const MAX_RECORD: usize = 16 << 20;
/// Read size.
const CHUNK: usize = 4 << 20;
/// What became of a packet the end of the file cut short, in pcap and pcapng alike: it is
/// not a packet of the capture (tshark does not show or count it either), and a capture still
/// being written will have it whole later.
const CUT_SHORT: &str =
    "(cut short, or still being written): that packet is not analysed or counted";

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;
const PCAP_MICRO: u32 = 0xA1B2_C3D4;
const PCAP_NANO: u32 = 0xA1B2_3C4D;

/// Capture times are kept between 1970 and 2^62 ns (year 2116): a damaged timestamp
/// cannot make the analysis' time differences overflow.
fn clamp_ns(ns: i64) -> i64 {
    ns.clamp(0, 1 << 62)
}

/// Timestamp units per second of a pcapng `if_tsresol` (RFC draft-ietf-opsawg-pcapng §4.2):
/// 10^n, or 2^n when the high bit is set; `None` past what 64 bits hold. (pcap-parser 0.17's
/// `ts_resolution` refuses every power of two, which then read as microseconds.)
fn units_per_second(tsresol: u8) -> Option<u64> {
    let n = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(n)
    } else {
        (n < 64).then(|| 1u64 << n)
    }
}

/// The farthest an interface's `if_tsoffset` is believed, seconds (from 1970 to 2100): a
/// larger one put every packet at one clamped instant.
const MAX_TS_OFFSET_S: i64 = 4_102_444_800;

/// A byte source with a window that can be grown, compacted and advanced, tracking the file
/// offset of its first byte.
struct Window<R> {
    src: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    eof: bool,
}

impl<R: Read> Window<R> {
    fn new(src: R) -> Self {
        Self {
            src,
            buf: vec![0; CHUNK],
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
        }
    }

    fn avail(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Makes at least `n` bytes available if the file has them; returns how many are.
    fn fill(&mut self, n: usize) -> io::Result<usize> {
        while self.end - self.start < n && !self.eof {
            if self.start > 0 && self.buf.len() - self.start < n.max(CHUNK / 2) {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.start < n {
                self.buf.resize(self.start + n.max(CHUNK), 0);
            }
            let end = self.end;
            match self.src.read(&mut self.buf[end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start)
    }

    fn advance(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.offset += n as u64;
    }
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    link: u32,
    /// Timestamp units per second.
    units: u64,
    /// Seconds added to every timestamp.
    offset_s: i64,
}

impl Interface {
    /// A packet block's 64-bit timestamp, ns.
    fn ns(&self, ts_high: u32, ts_low: u32) -> i64 {
        let ts = (u64::from(ts_high) << 32) | u64::from(ts_low);
        let ns = u128::from(ts) * 1_000_000_000 / u128::from(self.units.max(1));
        clamp_ns(
            (ns.min(i64::MAX as u128) as i64)
                .saturating_add(self.offset_s.saturating_mul(1_000_000_000)),
        )
    }
}

/// What a file turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Pcap {
        big_endian: bool,
        nanoseconds: bool,
        gzip: bool,
    },
    PcapNg {
        gzip: bool,
    },
}

impl Format {
    fn gzipped(self) -> Format {
        match self {
            Format::Pcap {
                big_endian,
                nanoseconds,
                ..
            } => Format::Pcap {
                big_endian,
                nanoseconds,
                gzip: true,
            },
            Format::PcapNg { .. } => Format::PcapNg { gzip: true },
        }
    }
}

impl std::fmt::Display for Format {
    /// As a person names it: `pcap`, `pcap (ns, big-endian)`, `pcapng (gzip)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, notes) = match *self {
            Format::PcapNg { gzip } => ("pcapng", [(gzip, "gzip"), (false, ""), (false, "")]),
            Format::Pcap {
                big_endian,
                nanoseconds,
                gzip,
            } => (
                "pcap",
                [
                    (nanoseconds, "ns"),
                    (big_endian, "big-endian"),
                    (gzip, "gzip"),
                ],
            ),
        };
        let notes: Vec<&str> = notes
            .iter()
            .filter_map(|&(on, n)| on.then_some(n))
            .collect();
        if notes.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name} ({})", notes.join(", "))
        }
    }
}

/// Totals of one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileStats {
    pub packets: u64,
    pub bytes: u64,
    pub problems: u64,
}

/// Reads a whole capture from `src` (`name` for messages), calling `on_frame` for every
/// frame and `on_problem` for every problem. Returns an error only when the source cannot be
/// read or is not a capture at all.
pub fn read_capture<R: Read>(
    src: R,
    mut on_frame: impl FnMut(&Frame<'_>),
    mut on_problem: impl FnMut(Problem),
) -> io::Result<(Format, FileStats)> {
    let mut w = Window::new(src);
    if w.fill(2)? >= 2 && w.avail()[..2] == [0x1f, 0x8b] {
        // gzip (`tcpdump -z gzip`, an archived capture): read through the decompressor, as
        // tshark does. Offsets are those of the decompressed capture, and say so; a stream
        // cut short or corrupt ends the read with the decompressor's error, the packets
        // before it analysed. A gzip inside the gzip is named, not opened again.
        let head = io::Cursor::new(w.avail().to_vec());
        let inner = Window::new(Gunzip(flate2::read::MultiGzDecoder::new(head.chain(w.src))));
        let mut on_problem = |mut p: Problem| {
            p.what.push_str(" (offset in the decompressed capture)");
            on_problem(p)
        };
        return read_window(inner, &mut on_frame, &mut on_problem)
            .map(|(format, stats)| (format.gzipped(), stats));
    }
    read_window(w, &mut on_frame, &mut on_problem)
}

/// A gzip decompressor whose errors say that they are the gzip stream's.
struct Gunzip<R>(R);

impl<R: Read> Read for Gunzip<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| match e.kind() {
            io::ErrorKind::Interrupted => e,
            kind => io::Error::new(
                kind,
                format!("the gzip stream is cut short or damaged ({e})"),
            ),
        })
    }
}

/// [`read_capture`] of a source as it stands.
fn read_window<R: Read>(
    mut w: Window<R>,
    mut on_frame: &mut impl FnMut(&Frame<'_>),
    on_problem: &mut impl FnMut(Problem),
) -> io::Result<(Format, FileStats)> {
    let have = w.fill(4)?;
    if have < 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            if have == 0 {
                "the file is empty, not a capture".to_string()
            } else {
                format!("{have} bytes: too short to be a capture")
            },
        ));
    }
    let magic: [u8; 4] = w.avail()[..4].try_into().expect("4 bytes");
    let le = u32::from_le_bytes(magic);
    let be = u32::from_be_bytes(magic);
    let mut stats = FileStats::default();
    let mut problem = |p: Problem, stats: &mut FileStats| {
        stats.problems += 1;
        on_problem(p)
    };
    if le == PCAPNG_SHB {
        pcapng(&mut w, &mut on_frame, &mut problem, &mut stats)?;
        Ok((Format::PcapNg { gzip: false }, stats))
    } else if [le, be].iter().any(|m| *m == PCAP_MICRO || *m == PCAP_NANO) {
        let format = Format::Pcap {
            big_endian: be == PCAP_MICRO || be == PCAP_NANO,
            nanoseconds: le == PCAP_NANO || be == PCAP_NANO,
            gzip: false,
        };
        pcap(&mut w, format, &mut on_frame, &mut problem, &mut stats)?;
        Ok((format, stats))
    } else {
        let start = format!(
            "{:02x} {:02x} {:02x} {:02x}",
            magic[0], magic[1], magic[2], magic[3]
        );
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            // A compressed capture (gzip is read above, once: a gzip inside a gzip is named).
            match nowcast_core::import::compression(&magic) {
                Some((name, tool)) => format!(
                    "{name}-compressed (it starts with {start}), not a capture as it stands: decompress it first, e.g. `{tool} -dc FILE | nowcast pcap -`"
                ),
                None => format!(
                    "not a capture file: it starts with {start}, not a pcap or pcapng magic number"
                ),
            },
        ))
    }
}

fn u32_at(b: &[u8], at: usize, big: bool) -> u32 {
    let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big {
        u32::from_be_bytes(w)
    } else {
        u32::from_le_bytes(w)
    }
}

/// A classic pcap record header that could be right.
fn plausible_record(h: &[u8], big: bool, nano: bool) -> bool {
    let frac = u32_at(h, 4, big);
    let caplen = u32_at(h, 8, big) as usize;
    let orig = u32_at(h, 12, big) as usize;
    frac < if nano { 1_000_000_000 } else { 1_000_000 }
        && caplen <= MAX_RECORD
        && orig <= MAX_RECORD
}

fn pcap<R: Read>(
    w: &mut Window<R>,
    format: Format,
    on_frame: &mut impl FnMut(&Frame<'_>),
    problem: &mut impl FnMut(Problem, &mut FileStats),
    stats: &mut FileStats,
) -> io::Result<()> {
    let Format::Pcap {
        big_endian: big,
        nanoseconds: nano,
        ..
    } = format
    else {
        unreachable!("called for pcap only")
    };
    let have = w.fill(24)?;
    if have < 24 {
        // Not even the header: nothing to analyse, as with an empty file.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{have} bytes: a pcap file header cut short (it is 24 bytes)"),
        ));
    }
    let link = match parse_pcap_header(w.avail()) {
        Ok((_, h)) => h.network.0 as u32,
        Err(e) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad pcap file header: {e:?}"),
            ))
        }
    };
    w.advance(24);
    let mut number = 0u64;
    loop {
        let have = w.fill(16)?;
        if have == 0 {
            return Ok(());
        }
        let next = number + 1;
        if have < 16 {
            problem(
                Problem {
                    offset: w.offset,
                    packet: Some(next),
                    what: format!("the file ends inside a record header ({have} of 16 bytes)"),
                },
                stats,
            );
            return Ok(());
        }
        if !plausible_record(&w.avail()[..16], big, nano) {
            let at = w.offset;
            let skipped = resync_pcap(w, big, nano)?;
            problem(
                Problem {
                    offset: at,
                    packet: Some(next),
                    what: format!(
                        "a record header that cannot be right (time fraction or length out of range); skipped {skipped} bytes to the next plausible record"
                    ),
                },
                stats,
            );
            continue;
        }
        let caplen = u32_at(w.avail(), 8, big) as usize;
        let have = w.fill(16 + caplen)?;
        number = next;
        let head = &w.avail()[..16];
        let ts_s = u32_at(head, 0, big) as i64;
        let frac = u32_at(head, 4, big) as i64;
        let orig_len = u32_at(head, 12, big);
        let ts_ns = clamp_ns(ts_s * 1_000_000_000 + if nano { frac } else { frac * 1000 });
        if have < 16 + caplen {
            problem(
                Problem {
                    offset: w.offset,
                    packet: Some(number),
                    what: format!(
                        "truncated: the record is {} bytes long, the file ends after {have} {CUT_SHORT}",
                        16 + caplen
                    ),
                },
                stats,
            );
            return Ok(());
        }
        let parsed = if big {
            parse_pcap_frame_be(w.avail())
        } else {
            parse_pcap_frame(w.avail())
        };
        match parsed {
            Ok((_, block)) => {
                stats.packets += 1;
                stats.bytes += orig_len as u64;
                on_frame(&Frame {
                    number,
                    link,
                    ts_ns,
                    data: block.data,
                    orig_len: block.origlen,
                });
            }
            Err(e) => problem(
                Problem {
                    offset: w.offset,
                    packet: Some(number),
                    what: format!("record not readable: {e:?}"),
                },
                stats,
            ),
        }
        w.advance(16 + caplen);
    }
}

/// Skips to the next offset where a plausible record header is followed by another one (or
/// by the end of the file); returns the bytes skipped.
fn resync_pcap<R: Read>(w: &mut Window<R>, big: bool, nano: bool) -> io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        w.advance(1);
        skipped += 1;
        let have = w.fill(16)?;
        if have < 16 {
            w.advance(have);
            return Ok(skipped + have as u64);
        }
        if !plausible_record(&w.avail()[..16], big, nano) {
            continue;
        }
        let caplen = u32_at(w.avail(), 8, big) as usize;
        let have = w.fill(16 + caplen + 16)?;
        if have == 16 + caplen
            || (have >= 32 + caplen
                && plausible_record(&w.avail()[16 + caplen..32 + caplen], big, nano))
        {
            return Ok(skipped);
        }
    }
}

/// A pcapng block's framing: type and total length in the section's byte order, the length
/// repeated at the end.
fn plausible_block(b: &[u8], big: bool, have: usize) -> Option<usize> {
    if b.len() < 12 {
        return None;
    }
    let len = u32_at(b, 4, big) as usize;
    if len < 12 || len % 4 != 0 || len > MAX_RECORD || len > have {
        return None;
    }
    (u32_at(b, len - 4, big) as usize == len).then_some(len)
}

fn pcapng<R: Read>(
    w: &mut Window<R>,
    on_frame: &mut impl FnMut(&Frame<'_>),
    problem: &mut impl FnMut(Problem, &mut FileStats),
    stats: &mut FileStats,
) -> io::Result<()> {
    let mut big = false;
    let mut ifaces: Vec<Interface> = Vec::new();
    let mut number = 0u64;
    let mut last_ts = 0i64;
    loop {
        let have = w.fill(12)?;
        if have == 0 {
            return Ok(());
        }
        if have < 12 {
            if w.offset == 0 {
                return Err(header_cut(have, 12));
            }
            problem(
                Problem {
                    offset: w.offset,
                    packet: None,
                    what: format!("the file ends inside a block header ({have} of 12 bytes)"),
                },
                stats,
            );
            return Ok(());
        }
        let ty = u32_at(w.avail(), 0, false);
        if ty == PCAPNG_SHB {
            // The byte-order magic decides how this section is read.
            match u32_at(w.avail(), 8, false) {
                PCAPNG_BOM => big = false,
                m if m.swap_bytes() == PCAPNG_BOM => big = true,
                _ => {}
            }
        }
        let claimed = u32_at(w.avail(), 4, big) as usize;
        let want = claimed.clamp(12, MAX_RECORD);
        let have = w.fill(want)?;
        let Some(len) = plausible_block(w.avail(), big, have) else {
            let at = w.offset;
            let eof_cut =
                claimed >= 12 && claimed % 4 == 0 && claimed <= MAX_RECORD && have < claimed;
            if eof_cut && w.eof {
                if at == 0 {
                    return Err(header_cut(have, claimed));
                }
                problem(
                    Problem {
                        offset: at,
                        packet: is_packet_block(ty, big).then_some(number + 1),
                        what: format!(
                            "truncated: the block is {claimed} bytes long, the file ends after {have} {}",
                            if is_packet_block(ty, big) { CUT_SHORT } else { "(cut short, or still being written)" }
                        ),
                    },
                    stats,
                );
                return Ok(());
            }
            // A length past the limit may be a real block (a vendor's, an attachment): if the
            // next good block starts where it said it ends and its closing length agrees, it
            // was one, and skipped whole; the search for the next block, not a seek, found
            // that out, so a damaged length field costs no more than any other damage.
            let oversized = (claimed > MAX_RECORD && claimed % 4 == 0).then_some(claimed);
            let (skipped, whole) = resync_pcapng(w, big, oversized)?;
            if whole {
                let packet = is_packet_block(ty, big).then(|| {
                    number += 1;
                    number
                });
                let ty = if big { ty.swap_bytes() } else { ty };
                problem(
                    Problem {
                        offset: at,
                        packet,
                        what: format!(
                            "a block of type {ty:#x} and {claimed} bytes, longer than the {} MiB believed of a block; skipped whole{}",
                            MAX_RECORD >> 20,
                            if packet.is_some() { " (a packet that size is not a network's)" } else { "" }
                        ),
                    },
                    stats,
                );
                continue;
            }
            problem(
                Problem {
                    offset: at,
                    packet: None,
                    what: format!(
                        "corrupt block (type {ty:#x}, length {claimed}: its framing does not hold); skipped {skipped} bytes to the next good block"
                    ),
                },
                stats,
            );
            continue;
        };
        let block = &w.avail()[..len];
        let parsed = if big {
            parse_block_be(block)
        } else {
            parse_block_le(block)
        };
        match parsed {
            Ok((_, Block::SectionHeader(_))) => ifaces.clear(),
            Ok((_, Block::InterfaceDescription(idb))) => {
                let units = units_per_second(idb.if_tsresol).unwrap_or_else(|| {
                    problem(
                        Problem {
                            offset: w.offset,
                            packet: None,
                            what: format!(
                                "interface {}: timestamp resolution {:#04x} (if_tsresol) is not \
                                 10^0 to 10^19 or 2^0 to 2^63 units a second; its times read \
                                 as microseconds",
                                ifaces.len(),
                                idb.if_tsresol
                            ),
                        },
                        stats,
                    );
                    1_000_000
                });
                let mut offset_s = idb.ts_offset();
                if offset_s.abs() > MAX_TS_OFFSET_S {
                    problem(
                        Problem {
                            offset: w.offset,
                            packet: None,
                            what: format!(
                                "interface {}: timestamp offset {offset_s} s (if_tsoffset) is \
                                 beyond the year 2100; left out",
                                ifaces.len()
                            ),
                        },
                        stats,
                    );
                    offset_s = 0;
                }
                ifaces.push(Interface {
                    link: idb.linktype.0 as u32,
                    units,
                    offset_s,
                });
            }
            Ok((_, Block::EnhancedPacket(epb))) => {
                number += 1;
                match ifaces.get(epb.if_id as usize) {
                    None => problem(
                        Problem {
                            offset: w.offset,
                            packet: Some(number),
                            what: format!(
                                "packet on interface {} which no interface block described; skipped",
                                epb.if_id
                            ),
                        },
                        stats,
                    ),
                    Some(i) => {
                        let ts_ns = i.ns(epb.ts_high, epb.ts_low);
                        last_ts = ts_ns;
                        let caplen = (epb.caplen as usize).min(epb.data.len());
                        stats.packets += 1;
                        stats.bytes += epb.origlen as u64;
                        on_frame(&Frame {
                            number,
                            link: i.link,
                            ts_ns,
                            data: &epb.data[..caplen],
                            orig_len: epb.origlen,
                        });
                    }
                }
            }
            Ok((_, Block::SimplePacket(spb))) => {
                number += 1;
                if let Some(i) = ifaces.first() {
                    stats.packets += 1;
                    stats.bytes += spb.origlen as u64;
                    let caplen = spb.data.len().min(spb.origlen as usize);
                    on_frame(&Frame {
                        number,
                        link: i.link,
                        ts_ns: last_ts,
                        data: &spb.data[..caplen],
                        orig_len: spb.origlen,
                    });
                }
            }
            Ok((_, Block::Unknown(_))) if block_type(ty, big) == 2 && len >= 32 => {
                // The obsolete Packet Block (pcapng's appendix; written by old tools), which
                // pcap-parser leaves unread: an interface (16 bits), a drop count (16), a
                // timestamp, the captured and original lengths, the data.
                number += 1;
                let if_id = if big {
                    u16::from_be_bytes([block[8], block[9]])
                } else {
                    u16::from_le_bytes([block[8], block[9]])
                };
                let caplen = (u32_at(block, 20, big) as usize).min(len - 32);
                let orig_len = u32_at(block, 24, big);
                match ifaces.get(usize::from(if_id)) {
                    None => problem(
                        Problem {
                            offset: w.offset,
                            packet: Some(number),
                            what: format!(
                                "packet on interface {if_id} which no interface block described; skipped"
                            ),
                        },
                        stats,
                    ),
                    Some(i) => {
                        let ts_ns = i.ns(u32_at(block, 12, big), u32_at(block, 16, big));
                        last_ts = ts_ns;
                        stats.packets += 1;
                        stats.bytes += u64::from(orig_len);
                        on_frame(&Frame {
                            number,
                            link: i.link,
                            ts_ns,
                            data: &block[28..28 + caplen],
                            orig_len,
                        });
                    }
                }
            }
            Ok(_) => {}
            Err(e) => problem(
                Problem {
                    offset: w.offset,
                    packet: is_packet_block(ty, big).then_some(number + 1),
                    what: format!(
                        "block of type {:#x} not readable ({}); skipped",
                        block_type(ty, big),
                        match e {
                            pcap_parser::nom::Err::Incomplete(_) => {
                                "a length inside it runs past the block's end".to_string()
                            }
                            pcap_parser::nom::Err::Error(e) | pcap_parser::nom::Err::Failure(e) => {
                                match e {
                                    pcap_parser::PcapError::NomError(_, kind) => format!(
                                        "its fields do not hold together: {}",
                                        kind.description()
                                    ),
                                    e => e.to_string(),
                                }
                            }
                        }
                    ),
                },
                stats,
            ),
        }
        w.advance(len);
    }
}

/// A pcapng file that ends inside its first block, the section header: nothing to analyse,
/// as with an empty file.
fn header_cut(have: usize, needed: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{have} bytes: a pcapng section header cut short (it is {needed} bytes)"),
    )
}

/// A block's type as its section's byte order reads it (`ty` was read little-endian).
fn block_type(ty: u32, big: bool) -> u32 {
    if big {
        ty.swap_bytes()
    } else {
        ty
    }
}

fn is_packet_block(ty: u32, big: bool) -> bool {
    matches!(block_type(ty, big), 2 | 3 | 6)
}

/// Skips to the next offset holding a block whose framing holds and whose type is a known
/// one; returns the bytes skipped, and whether they were a block of `oversized` bytes whose
/// framing held (its closing length passed by on the way, and the next block starts where it
/// ends).
fn resync_pcapng<R: Read>(
    w: &mut Window<R>,
    big: bool,
    oversized: Option<usize>,
) -> io::Result<(u64, bool)> {
    let mut skipped = 0u64;
    let mut closing_agrees = false;
    let whole = |skipped: u64, closing_agrees: bool| {
        closing_agrees && oversized.is_some_and(|len| skipped == len as u64)
    };
    loop {
        w.advance(1);
        skipped += 1;
        if let Some(len) = oversized {
            if skipped == len as u64 - 4 && w.fill(4)? >= 4 {
                closing_agrees = u32_at(w.avail(), 0, big) as usize == len;
            }
        }
        let have = w.fill(12)?;
        if have < 12 {
            // The file ends: a block that ends with it has its closing length in these bytes.
            if let Some(len) = oversized.map(|l| l as u64) {
                if skipped + 4 <= len && skipped + have as u64 == len {
                    let at = (len - 4 - skipped) as usize;
                    closing_agrees = u32_at(w.avail(), at, big) as u64 == len;
                }
            }
            w.advance(have);
            let skipped = skipped + have as u64;
            return Ok((skipped, whole(skipped, closing_agrees)));
        }
        let ty = u32_at(w.avail(), 0, big);
        let known = matches!(ty, 1..=10) || ty == PCAPNG_SHB || ty == 0xBAD || ty == 0x40000BAD;
        if !known {
            continue;
        }
        let claimed = (u32_at(w.avail(), 4, big) as usize).clamp(12, MAX_RECORD);
        let have = w.fill(claimed)?;
        if plausible_block(w.avail(), big, have).is_some() {
            return Ok((skipped, whole(skipped, closing_agrees)));
        }
    }
}

/// Live capture through libpcap.
pub mod live {
    use std::time::Duration;

    /// What libpcap counted.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Stats {
        pub received: u64,
        /// Dropped because the analyser did not read fast enough (the kernel buffer was full).
        pub dropped: u64,
        /// Dropped by the interface or its driver.
        pub if_dropped: u64,
    }

    /// An open live capture.
    pub struct Live {
        cap: pcap::Capture<pcap::Active>,
        pub link: u32,
        number: u64,
    }

    /// Why a live capture could not start, in words a user can act on.
    fn explain(iface: &str, e: pcap::Error) -> String {
        let text = e.to_string();
        let lower = text.to_lowercase();
        if lower.contains("permission") || lower.contains("operation not permitted") {
            format!(
                "cannot capture on {iface}: {text}. Live capture needs the CAP_NET_RAW capability: run as root, or grant it once with `sudo setcap cap_net_raw,cap_net_admin=eip $(command -v nowcast)`"
            )
        } else if lower.contains("no such device") || lower.contains("doesn't exist") {
            format!("cannot capture on {iface}: no such interface ({text})")
        } else {
            format!("cannot capture on {iface}: {text}")
        }
    }

    impl Live {
        /// Opens `iface` (`any` for every interface) with an optional BPF `filter`.
        pub fn open(iface: &str, filter: Option<&str>, snaplen: i32) -> Result<Self, String> {
            Self::open_with(iface, filter, snaplen, 64 << 20)
        }

        /// [`Live::open`] with a kernel ring of `buffer` bytes.
        pub fn open_with(
            iface: &str,
            filter: Option<&str>,
            snaplen: i32,
            buffer: i32,
        ) -> Result<Self, String> {
            let cap = pcap::Capture::from_device(iface)
                .map_err(|e| explain(iface, e))?
                .promisc(false)
                .snaplen(snaplen)
                .immediate_mode(true)
                .timeout(100)
                .buffer_size(buffer)
                .precision(pcap::Precision::Nano)
                .open()
                .map_err(|e| explain(iface, e))?
                // Non-blocking: a quiet interface must not hold the loop past --duration or
                // a signal (libpcap's read timeout is not honoured in immediate mode).
                .setnonblock()
                .map_err(|e| explain(iface, e))?;
            let mut cap = cap;
            if let Some(f) = filter {
                cap.filter(f, true)
                    .map_err(|e| format!("bad --filter {f:?}: {e}"))?;
            }
            let link = cap.get_datalink().0 as u32;
            Ok(Self {
                cap,
                link,
                number: 0,
            })
        }

        /// The next frame, or `None` after a short wait ([`POLL`]) when none is waiting.
        pub fn next_frame(&mut self) -> Result<Option<super::Frame<'_>>, String> {
            match self.cap.next_packet() {
                Ok(p) => {
                    self.number += 1;
                    let ts = p.header.ts;
                    // Opened with nanosecond precision: tv_usec holds nanoseconds. (timeval's
                    // field types differ between platforms, hence the casts.)
                    #[allow(clippy::unnecessary_cast)]
                    let ts_ns =
                        super::clamp_ns(ts.tv_sec as i64 * 1_000_000_000 + ts.tv_usec as i64);
                    Ok(Some(super::Frame {
                        number: self.number,
                        link: self.link,
                        ts_ns,
                        data: p.data,
                        orig_len: p.header.len,
                    }))
                }
                Err(pcap::Error::TimeoutExpired) => {
                    // Nothing waiting: the kernel's ring (64 MiB) holds what comes meanwhile.
                    std::thread::sleep(POLL);
                    Ok(None)
                }
                Err(e) => Err(format!("live capture failed: {e}")),
            }
        }

        pub fn stats(&mut self) -> Stats {
            self.cap
                .stats()
                .map(|s| Stats {
                    received: s.received as u64,
                    dropped: s.dropped as u64,
                    if_dropped: s.if_dropped as u64,
                })
                .unwrap_or_default()
        }
    }

    /// How long the read loop sleeps when no packet is waiting.
    pub const POLL: Duration = Duration::from_millis(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap_file(big: bool, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let w = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let h = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut f = Vec::new();
        f.extend_from_slice(&w(PCAP_MICRO));
        f.extend_from_slice(&h(2));
        f.extend_from_slice(&h(4));
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&w(65535));
        f.extend_from_slice(&w(1));
        for (s, us, data) in records {
            f.extend_from_slice(&w(*s));
            f.extend_from_slice(&w(*us));
            f.extend_from_slice(&w(data.len() as u32));
            f.extend_from_slice(&w(data.len() as u32));
            f.extend_from_slice(data);
        }
        f
    }

    fn read(bytes: &[u8]) -> (Vec<(u64, i64, usize)>, Vec<Problem>) {
        let mut frames = Vec::new();
        let mut problems = Vec::new();
        read_capture(
            bytes,
            |f| frames.push((f.number, f.ts_ns, f.data.len())),
            |p| problems.push(p),
        )
        .unwrap();
        (frames, problems)
    }

    /// A pcapng block of type `ty` holding `body` (padded to 32 bits), little-endian.
    fn block(ty: u32, body: &[u8]) -> Vec<u8> {
        let pad = (4 - body.len() % 4) % 4;
        let len = (12 + body.len() + pad) as u32;
        let mut b = Vec::new();
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&vec![0; pad]);
        b.extend_from_slice(&len.to_le_bytes());
        b
    }

    /// A pcapng section with one raw-IP interface of `if_tsresol` and `if_tsoffset`, then
    /// `packets` (as `(block type, timestamp, data)`: 6 enhanced, 2 the obsolete Packet Block).
    fn pcapng_file(tsresol: u8, tsoffset: i64, packets: &[(u32, u64, &[u8])]) -> Vec<u8> {
        let mut shb = PCAPNG_BOM.to_le_bytes().to_vec();
        shb.extend_from_slice(&[1, 0, 0, 0]);
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        let mut f = block(PCAPNG_SHB, &shb);
        let mut idb = Vec::new();
        idb.extend_from_slice(&101u16.to_le_bytes()); // LINKTYPE_RAW
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&65535u32.to_le_bytes());
        idb.extend_from_slice(&[9, 0, 1, 0, tsresol, 0, 0, 0]);
        idb.extend_from_slice(&[14, 0, 8, 0]);
        idb.extend_from_slice(&tsoffset.to_le_bytes());
        idb.extend_from_slice(&[0, 0, 0, 0]);
        f.extend(block(1, &idb));
        for (ty, ts, data) in packets {
            let mut b = Vec::new();
            if *ty == 2 {
                b.extend_from_slice(&0u16.to_le_bytes());
                b.extend_from_slice(&0u16.to_le_bytes());
            } else {
                b.extend_from_slice(&0u32.to_le_bytes());
            }
            b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
            b.extend_from_slice(&(*ts as u32).to_le_bytes());
            b.extend_from_slice(&(data.len() as u32).to_le_bytes());
            b.extend_from_slice(&(data.len() as u32).to_le_bytes());
            b.extend_from_slice(data);
            f.extend(block(*ty, &b));
        }
        f
    }

    /// pcapng timestamps in powers of ten and of two (pcap-parser 0.17 read every power of
    /// two as microseconds), the obsolete Packet Block, and resolutions and offsets that
    /// cannot be right said so.
    #[test]
    fn pcapng_resolutions_offsets_and_the_obsolete_packet_block() {
        let data: &[u8] = &[0x45; 40];
        // 2^-10 s: 1024 units are a second.
        let (frames, problems) = read(&pcapng_file(0x8a, 0, &[(6, 1024, data), (6, 3072, data)]));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(frames, [(1, 1_000_000_000, 40), (2, 3_000_000_000, 40)]);
        // 10^-9 s, an offset of 100 s, and a Packet Block (type 2) between two enhanced ones.
        let (frames, problems) = read(&pcapng_file(
            9,
            100,
            &[(6, 5, data), (2, 7, data), (6, 9, data)],
        ));
        assert!(problems.is_empty(), "{problems:?}");
        let ns = |t: i64| 100_000_000_000 + t;
        assert_eq!(frames, [(1, ns(5), 40), (2, ns(7), 40), (3, ns(9), 40)]);
        // 10^127 and an offset past the year 2100: named, read as microseconds and no offset.
        let (frames, problems) = read(&pcapng_file(0x7f, 1 << 62, &[(6, 2_000_000, data)]));
        assert_eq!(frames, [(1, 2_000_000_000, 40)]);
        let said: Vec<&str> = problems.iter().map(|p| p.what.as_str()).collect();
        assert!(
            said[0].contains("timestamp resolution 0x7f (if_tsresol)"),
            "{said:?}"
        );
        assert!(
            said[1].contains("timestamp offset 4611686018427387904 s (if_tsoffset)"),
            "{said:?}"
        );
    }

    #[test]
    fn classic_pcap_both_byte_orders_and_a_truncated_last_packet() {
        for big in [false, true] {
            let f = pcap_file(big, &[(1, 5, &[1; 60]), (2, 6, &[2; 70])]);
            let (frames, problems) = read(&f);
            assert_eq!(frames, vec![(1, 1_000_005_000, 60), (2, 2_000_006_000, 70)]);
            assert!(problems.is_empty());
            // The last packet cut short: named, not read as a packet (as in pcapng).
            let (frames, problems) = read(&f[..f.len() - 10]);
            assert_eq!(frames.len(), 1);
            assert_eq!(problems.len(), 1);
            assert_eq!(problems[0].packet, Some(2));
            assert_eq!(problems[0].offset, 24 + 16 + 60);
            assert!(problems[0].what.contains("not analysed or counted"));
        }
    }

    #[test]
    fn a_damaged_record_header_is_skipped_and_the_rest_read() {
        let mut f = pcap_file(
            false,
            &[(1, 0, &[1; 60]), (2, 0, &[2; 60]), (3, 0, &[3; 60])],
        );
        // Packet 2's caplen becomes absurd.
        let at = 24 + 16 + 60 + 8;
        f[at..at + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        let (frames, problems) = read(&f);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].offset, 24 + 16 + 60);
        assert_eq!(frames.last().unwrap().1, 3_000_000_000);
    }

    #[test]
    fn not_a_capture_is_an_error_naming_its_first_bytes() {
        let e = read_capture(&b"hello world"[..], |_| {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("68 65 6c 6c"), "{e}");
        let e = read_capture(&b""[..], |_| {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        // A header cut short is not a capture either.
        let f = pcap_file(false, &[]);
        let e = read_capture(&f[..10], |_| {}, |_| {}).unwrap_err();
        assert_eq!(
            e.to_string(),
            "10 bytes: a pcap file header cut short (it is 24 bytes)"
        );
        let e = read_capture(&[0x28, 0xb5, 0x2f, 0xfd, 0][..], |_| {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("zstd-compressed"), "{e}");
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(bytes).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn a_gzip_capture_is_read_through_and_its_damage_named() {
        let f = pcap_file(false, &[(1, 5, &[1; 60]), (2, 6, &[2; 70])]);
        let (frames, problems) = read(&gzip(&f));
        assert_eq!(frames, read(&f).0);
        assert!(problems.is_empty());
        let (format, stats) = read_capture(&gzip(&f)[..], |_| {}, |_| {}).unwrap();
        assert_eq!(format.to_string(), "pcap (gzip)");
        assert_eq!(stats.packets, 2);
        // Two members, as `cat a.gz b.gz` makes: read as one stream.
        let (half, rest) = f.split_at(24 + 16 + 30);
        let two = [gzip(half), gzip(rest)].concat();
        assert_eq!(read(&two).0, read(&f).0);
        // Damage inside is named by its offset in the decompressed capture.
        let mut bad = pcap_file(
            false,
            &[(1, 0, &[1; 60]), (2, 0, &[2; 60]), (3, 0, &[3; 60])],
        );
        let at = 24 + 16 + 60 + 8;
        bad[at..at + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        let (frames, problems) = read(&gzip(&bad));
        assert_eq!(frames.len(), 2);
        assert_eq!(problems.len(), 1);
        assert!(problems[0]
            .what
            .ends_with("(offset in the decompressed capture)"));
        // Cut short: the packets before the cut are read, then the decompressor's error.
        let big: Vec<(u32, u32, &[u8])> = (0..2000).map(|i| (i, 0, &[7u8; 200][..])).collect();
        let z = gzip(&pcap_file(false, &big));
        let mut n = 0;
        let e = read_capture(&z[..z.len() / 2], |_| n += 1, |_| {}).unwrap_err();
        assert!(n > 0 && n < 2000, "{n} frames before the cut");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(
            e.to_string().starts_with("the gzip stream is cut short"),
            "{e}"
        );
        // Garbage inside a gzip is not a capture; a gzip inside a gzip is named.
        let e = read_capture(&gzip(b"hello world")[..], |_| {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("not a capture file"), "{e}");
        let e = read_capture(&gzip(&gzip(&f))[..], |_| {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("gzip-compressed"), "{e}");
    }
}
