//! Packet-loss signatures (Dickens §3.1): one bit per packet of a transmission window, in
//! sequence order, 1 = received, 0 = lost. FOBS's selective acknowledgement of a window *is*
//! its signature, so the receiver's acknowledgement bitmap is used as it is.
//!
//! The text form (signature files, `nowcast classify`): one signature a line,
//! `LABEL LEN LOSSES…`, where LABEL is `cpu`, `network` or `?`, LEN the number of packets,
//! and LOSSES the 0-based positions of the lost packets, a run of consecutive losses written
//! `FIRST-LAST`. A window of 4,096 packets with packets 7 and 100 to 103 lost is
//! `network 4096 7 100-103`. Signatures are mostly ones, so this is compact and readable.

use std::fmt;

/// One window's packet-loss signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    len: usize,
    /// Bit i of word i / 64 is packet i; bits past `len` are zero.
    words: Vec<u64>,
}

/// The cause a labelled signature was produced by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Label {
    Cpu,
    Network,
}

impl Label {
    pub fn name(self) -> &'static str {
        match self {
            Label::Cpu => "cpu",
            Label::Network => "network",
        }
    }
}

impl Signature {
    /// A window of `len` packets, all received.
    pub fn all_received(len: usize) -> Self {
        let mut words = vec![u64::MAX; len.div_ceil(64)];
        if len % 64 != 0 {
            if let Some(last) = words.last_mut() {
                *last = (1u64 << (len % 64)) - 1;
            }
        }
        Self { len, words }
    }

    /// From an acknowledgement bitmap: bit i (LSB first in byte i / 8) = packet i received.
    /// Bytes beyond `len` bits are ignored; missing bytes count as lost packets.
    pub fn from_bitmap(len: usize, bitmap: &[u8]) -> Self {
        let mut words = vec![0u64; len.div_ceil(64)];
        for (i, b) in bitmap.iter().take(len.div_ceil(8)).enumerate() {
            words[i / 8] |= u64::from(*b) << ((i % 8) * 8);
        }
        if len % 64 != 0 {
            if let Some(last) = words.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
        Self { len, words }
    }

    /// The acknowledgement bitmap of this signature (see [`Signature::from_bitmap`]).
    pub fn to_bitmap(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len.div_ceil(8));
        for i in 0..self.len.div_ceil(8) {
            out.push((self.words[i / 8] >> ((i % 8) * 8)) as u8);
        }
        out
    }

    /// Marks packet `i` lost (ignored beyond the window).
    pub fn lose(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] &= !(1u64 << (i % 64));
        }
    }

    /// Marks packet `i` received (ignored beyond the window).
    pub fn receive(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] |= 1u64 << (i % 64);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether packet `i` was received.
    pub fn received(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] >> (i % 64) & 1 == 1
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Packets lost.
    pub fn lost(&self) -> usize {
        self.len
            - self
                .words
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>()
    }

    /// Lost packets / packets (0 for an empty window).
    pub fn loss_rate(&self) -> f64 {
        if self.len == 0 {
            0.0
        } else {
            self.lost() as f64 / self.len as f64
        }
    }

    /// The positions of lost packets, in order.
    pub fn losses(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(move |(wi, &w)| {
            let mut missing = !w;
            if wi == self.words.len() - 1 && self.len % 64 != 0 {
                missing &= (1u64 << (self.len % 64)) - 1;
            }
            std::iter::from_fn(move || {
                if missing == 0 {
                    return None;
                }
                let b = missing.trailing_zeros() as usize;
                missing &= missing - 1;
                Some(wi * 64 + b)
            })
        })
    }

    /// Runs of consecutive losses as inclusive `(first, last)` pairs.
    pub fn loss_runs(&self) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for i in self.losses() {
            match runs.last_mut() {
                Some((_, last)) if *last + 1 == i => *last = i,
                _ => runs.push((i, i)),
            }
        }
        runs
    }
}

/// A signature read from text, with its label when it has one.
#[derive(Clone, Debug, PartialEq)]
pub struct Labelled {
    pub label: Option<Label>,
    pub signature: Signature,
}

/// Most packets a signature read from text may have (16 Mi), so a hostile file cannot make
/// the reader allocate without bound.
pub const MAX_TEXT_LEN: usize = 1 << 24;

impl Labelled {
    /// One line of the text form. Errors say what is wrong with the line.
    pub fn parse(line: &str) -> Result<Labelled, String> {
        let mut words = line.split_ascii_whitespace();
        let label = match words.next() {
            Some("cpu") => Some(Label::Cpu),
            Some("network") => Some(Label::Network),
            Some("?") => None,
            Some(other) => {
                return Err(format!(
                    "label '{}' is not cpu, network or ?",
                    nowcast_core::quote::quote(other)
                ))
            }
            None => return Err("empty line".into()),
        };
        let word = words.next().ok_or("no length after the label")?;
        let len: usize = match word.parse() {
            Ok(n) => n,
            // All digits, and still no usize: too large, not "not a number".
            Err(_) if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(format!(
                    "length {} is above {MAX_TEXT_LEN}",
                    nowcast_core::quote::quote(word)
                ))
            }
            Err(_) => return Err("the length is not a number".to_string()),
        };
        if len > MAX_TEXT_LEN {
            return Err(format!("length {len} is above {MAX_TEXT_LEN}"));
        }
        let mut signature = Signature::all_received(len);
        let mut previous: Option<usize> = None;
        for w in words {
            let (a, b) = match w.split_once('-') {
                Some((a, b)) => (a, b),
                None => (w, w),
            };
            let parse = |s: &str| -> Result<usize, String> {
                s.parse().map_err(|_| {
                    format!(
                        "'{}' is not a position or FIRST-LAST",
                        nowcast_core::quote::quote(w)
                    )
                })
            };
            let (a, b) = (parse(a)?, parse(b)?);
            if a > b || b >= len || previous.is_some_and(|p| a <= p) {
                return Err(format!(
                    "'{}' is out of order or beyond the length {len}",
                    nowcast_core::quote::quote(w)
                ));
            }
            for i in a..=b {
                signature.lose(i);
            }
            previous = Some(b);
        }
        Ok(Labelled { label, signature })
    }
}

impl fmt::Display for Labelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = self.label.map_or("?", Label::name);
        write!(f, "{label} {}", self.signature.len())?;
        for (a, b) in self.signature.loss_runs() {
            if a == b {
                write!(f, " {a}")?;
            } else {
                write!(f, " {a}-{b}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let l = Labelled::parse("network 200 7 100-103 199").unwrap();
        assert_eq!(l.label, Some(Label::Network));
        assert_eq!(l.signature.len(), 200);
        assert_eq!(l.signature.lost(), 6);
        assert_eq!(
            l.signature.loss_runs(),
            vec![(7, 7), (100, 103), (199, 199)]
        );
        assert_eq!(l.to_string(), "network 200 7 100-103 199");
        for bad in [
            "",
            "wifi 10",
            "cpu",
            "cpu x",
            "cpu 10 10",
            "cpu 10 5 3",
            "cpu 10 4-2",
            "? 99999999999",
        ] {
            assert!(Labelled::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Labelled::parse("cpu 99999999999999999999 1").unwrap_err(),
            "length 99999999999999999999 is above 16777216"
        );
    }

    #[test]
    fn bitmaps_round_trip_and_ignore_slack_bits() {
        let mut s = Signature::all_received(77);
        s.lose(0);
        s.lose(64);
        s.lose(76);
        let b = s.to_bitmap();
        assert_eq!(b.len(), 10);
        assert_eq!(Signature::from_bitmap(77, &b), s);
        assert_eq!(
            Signature::from_bitmap(77, &[0xff; 20]),
            Signature::all_received(77)
        );
        assert_eq!(Signature::from_bitmap(70, &[]).lost(), 70);
        assert_eq!(s.losses().collect::<Vec<_>>(), vec![0, 64, 76]);
    }
}
