//! The two classification metrics of a packet-loss signature (Dickens §3.1.1–§3.1.5).
//!
//! **Complexity** (d'Alessandro and Politi's first-order complexity, §3.1.1 eq. 4):
//! C¹ ≈ log₂ Nₐ(n) / n with n = 17, where Nₐ(n) is the number of distinct words of n symbols
//! seen through a sliding window over the signature. (The paper's text prints the divisor as
//! "2", an extraction error: the definition divides by n, so a random string tends to 1 and a
//! constant one to 0.) The paper inserts each word in a binary tree (§3.1.3); here each
//! 17-bit word indexes a 2¹⁷-bit set (16 KiB), so counting the distinct words takes one pass
//! over the signature with one bit test per packet: time linear in the signature's length,
//! memory constant. n = 17 is the paper's word size (§3.1.3: little changes beyond it).
//!
//! **Success proportion** (§3.1.5): network loss scatters single losses at random, CPU loss
//! drops a run of consecutive packets while the receiver is descheduled, so the share of
//! losses that are *contiguous* separates the causes even when there are too few losses for
//! 17-bit words to see any structure. The paper calls two consecutive 0s a "success". The
//! exact definition used here: among the lost packets that have a successor in the window
//! (positions 0 … len − 2), the proportion whose successor was lost too:
//!
//! ```text
//! SP = #{ i < len−1 : s[i] = 0 ∧ s[i+1] = 0 } / #{ i < len−1 : s[i] = 0 }
//! ```
//!
//! A run of k losses contributes k − 1 successes out of k (one fewer when it ends the window),
//! so one CPU stall of 50 packets gives 0.98, and independent losses at rate p give about p.
//! Undefined (no value) when no packet before the last was lost.

use super::signature::Signature;

/// The word length n of the complexity measure (§3.1.3).
pub const WORD: u32 = 17;
const WORDS: usize = 1 << WORD;
const MASK: u64 = (1 << WORD) - 1;

/// Reusable scratch space for [`Complexity::of`]: the set of words seen (16 KiB), kept
/// between calls so that classifying a window allocates nothing.
pub struct Complexity {
    seen: Vec<u64>,
    /// The set's words that were touched, to clear only those.
    touched: Vec<u32>,
}

impl Default for Complexity {
    fn default() -> Self {
        Self::new()
    }
}

impl Complexity {
    pub fn new() -> Self {
        Self {
            seen: vec![0; WORDS / 64],
            touched: Vec::new(),
        }
    }

    /// Nₐ(17): the number of distinct 17-bit words of `s`. One pass over the packets.
    pub fn admissible_words(&mut self, s: &Signature) -> usize {
        let n = s.len();
        if n < WORD as usize {
            return 0;
        }
        let mut count = 0usize;
        let mut word = 0u64;
        let words = s.words();
        for i in 0..n {
            let bit = words[i / 64] >> (i % 64) & 1;
            word = (word << 1 | bit) & MASK;
            if i + 1 >= WORD as usize {
                let (slot, b) = ((word >> 6) as usize, word & 63);
                let cell = &mut self.seen[slot];
                if *cell == 0 {
                    self.touched.push(slot as u32);
                }
                if *cell >> b & 1 == 0 {
                    *cell |= 1 << b;
                    count += 1;
                }
            }
        }
        for slot in self.touched.drain(..) {
            self.seen[slot as usize] = 0;
        }
        count
    }

    /// C¹ = log₂ Nₐ(17) / 17; `None` for a signature shorter than one word.
    pub fn of(&mut self, s: &Signature) -> Option<f64> {
        let na = self.admissible_words(s);
        (na > 0).then(|| (na as f64).log2() / f64::from(WORD))
    }
}

/// The success proportion (see the module's documentation); `None` when no packet before
/// the last was lost.
pub fn success_proportion(s: &Signature) -> Option<f64> {
    let n = s.len();
    let (mut zeros, mut successes) = (0usize, 0usize);
    for (a, b) in s.loss_runs() {
        let last = b.min(n.saturating_sub(2));
        if a > last {
            continue;
        }
        zeros += last - a + 1;
        // Every loss of the run but its last is followed by a loss; a run that reaches the
        // window's end has its last counted loss followed by the final loss.
        successes += if b == n - 1 { last - a + 1 } else { last - a };
    }
    (zeros > 0).then(|| successes as f64 / zeros as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::signature::Labelled;

    fn sig(bits: &str) -> Signature {
        let mut s = Signature::all_received(bits.len());
        for (i, c) in bits.chars().enumerate() {
            if c == '0' {
                s.lose(i);
            }
        }
        s
    }

    /// Nₐ by brute force, for comparison.
    fn brute(bits: &str, n: usize) -> usize {
        let mut set = std::collections::HashSet::new();
        for i in 0..=bits.len().saturating_sub(n) {
            if i + n <= bits.len() {
                set.insert(&bits[i..i + n]);
            }
        }
        set.len()
    }

    #[test]
    fn admissible_words_match_a_brute_force_count() {
        // The paper's 0010100 example is for short words; check 17 on longer strings.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut bits = String::new();
        for _ in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bits.push(if x % 10 < 3 { '0' } else { '1' });
        }
        let mut c = Complexity::new();
        for len in [0, 16, 17, 18, 100, 3000] {
            let b = &bits[..len];
            assert_eq!(c.admissible_words(&sig(b)), brute(b, 17), "len {len}");
        }
        // Scratch space is cleared between calls.
        assert_eq!(c.admissible_words(&sig(&"1".repeat(40))), 1);
        assert_eq!(c.of(&sig(&"1".repeat(40))), Some(0.0));
        assert_eq!(c.of(&sig("0101")), None);
    }

    #[test]
    fn isolated_losses_look_alike_and_a_stall_does_not() {
        // Losses further apart than a word all give the same 17 words with one 0, so 8 of
        // them are as "simple" as one: why complexity needs loss rates above 0.0005 (§3.1.5).
        let mut c = Complexity::new();
        let net = Labelled::parse("network 4096 10 300 711 1200 1999 2500 3100 3900").unwrap();
        let cpu = Labelled::parse("cpu 4096 1000-1007").unwrap();
        assert_eq!(c.admissible_words(&net.signature), 1 + 17);
        assert_eq!(c.admissible_words(&cpu.signature), 1 + 17 + 7);
        // Losses closer together than a word make new words each.
        let dense = Labelled::parse("network 4096 10 13 21 40 44 45 60 77 79 90").unwrap();
        assert!(c.of(&dense.signature).unwrap() > c.of(&cpu.signature).unwrap());
    }

    #[test]
    fn success_proportion_rows() {
        let rows: [(&str, Option<f64>); 8] = [
            ("1111", None),
            ("1110", None), // the only loss has no successor
            ("1011", Some(0.0)),
            ("1001", Some(0.5)), // 0 then 0: one success of two
            ("1000", Some(1.0)), // the run reaches the end: both counted losses are followed by a loss
            ("0000", Some(1.0)),
            ("0101", Some(0.0)),
            ("100011101", Some(2.0 / 4.0)),
        ];
        for (bits, want) in rows {
            assert_eq!(success_proportion(&sig(bits)), want, "{bits}");
        }
        let stall = Labelled::parse("cpu 4096 100-149").unwrap();
        assert_eq!(success_proportion(&stall.signature), Some(49.0 / 50.0));
    }
}
