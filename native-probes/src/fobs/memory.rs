//! Path memory: the rate `nowcast fobs send` starts at on a path it has used before.
//!
//! A transfer spends its first round trips finding the path's rate: from the default 20
//! Mbit/s, slow start needs about six doublings to reach 1 Gbit/s, ~0.2 s at a 30 ms round
//! trip, which is a tenth of a 200 MiB transfer. A sender that moved a file to the same
//! receiver minutes ago already knows roughly what the path delivers. This module keeps, per
//! receiver address, the peak delivery rate of the last [`KEEP`] transfers (the highest rate
//! at which the receiver saw a window arrive, `sender::Stats::peak_delivery`: what the path
//! was seen to carry, not what the controller or a busy receiver made of the whole transfer,
//! so a transfer run with `--no-classifier` or slowed by its receiver's CPU after its slow
//! start does not make the next one start low), and starts the next transfer at [`START_SHARE`] of the Network Weather Service
//! forecast of that series (the forecaster bank's MSE-selected forecast), still in slow
//! start. The idea is TCP's temporal sharing of congestion state between consecutive
//! connections to one host (RFC 9040, which replaced RFC 2140; Linux keeps such a cache per
//! destination, `tcp_metrics`).
//!
//! Half, because that is the rate slow start itself sends at in its last round trip before it
//! finds the path full: if the path is as it was, one doubling reaches it; if it has become
//! twice as busy, the first round trip overshoots by no more than slow start's would. Never
//! below the cold start (`--rate`'s default), never above the sender's cap. Rates older than
//! [`MAX_AGE_MS`] are forgotten: the load on a path changes over hours.
//!
//! Deterministic core: the caller reads and writes the file and gives the time.

use nowcast_core::{Bank, Mode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file's format version.
pub const VERSION: u32 = 1;
/// Transfers kept per path.
pub const KEEP: usize = 16;
/// Paths kept (the least recently used are dropped beyond it).
pub const MAX_PATHS: usize = 1024;
/// A rate older than this (ms) is not used.
pub const MAX_AGE_MS: f64 = 3_600_000.0;
/// The share of the forecast peak delivery rate to start at.
pub const START_SHARE: f64 = 0.5;

/// One finished transfer to a path.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transfer {
    /// When it finished, Unix ms.
    pub at_ms: f64,
    /// Its peak delivery rate (payload), Mbit/s.
    pub peak_delivery_mbit_s: f64,
}

/// What is remembered: transfers per receiver address, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathMemory {
    version: u32,
    paths: BTreeMap<String, Vec<Transfer>>,
}

/// Where a transfer's start rate came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Basis {
    /// Nothing remembered for this path in the last hour: the cold start.
    Cold,
    /// The forecast of the path's peak delivery rate from `transfers` recent transfers.
    Remembered {
        transfers: usize,
        forecast_mbit_s: f64,
    },
}

/// The rate to start at (bytes/s) and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Start {
    pub rate: f64,
    pub basis: Basis,
}

impl PathMemory {
    pub fn new() -> Self {
        Self {
            version: VERSION,
            paths: BTreeMap::new(),
        }
    }

    /// Reads a memory file's text; the error names what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let v: Versioned = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if v.version != VERSION {
            return Err(format!(
                "version {}; this nowcast reads version {VERSION}",
                v.version
            ));
        }
        let m: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (path, ts) in &m.paths {
            if let Some(t) = ts
                .iter()
                .find(|t| !(t.at_ms.is_finite() && t.peak_delivery_mbit_s.is_finite()))
            {
                return Err(format!("path {path}: a transfer that is not finite: {t:?}"));
            }
            if let Some(t) = ts.iter().find(|t| t.peak_delivery_mbit_s <= 0.0) {
                return Err(format!(
                    "path {path}: peak delivery {} ≤ 0",
                    t.peak_delivery_mbit_s
                ));
            }
        }
        Ok(m)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a memory serializes") + "\n"
    }

    /// The rates of `path` young enough to use at `now_ms`, oldest first.
    fn recent(&self, path: &str, now_ms: f64) -> Vec<f64> {
        self.paths.get(path).map_or_else(Vec::new, |ts| {
            ts.iter()
                .filter(|t| now_ms - t.at_ms <= MAX_AGE_MS && t.at_ms <= now_ms + 60_000.0)
                .map(|t| t.peak_delivery_mbit_s)
                .collect()
        })
    }

    /// Where a transfer to `path` starts at `now_ms`: [`START_SHARE`] of the forecast of its
    /// recent peak delivery rates, within `cold..=max` (bytes/s), or `cold` with nothing recent.
    pub fn start(&self, path: &str, now_ms: f64, cold: f64, max: f64) -> Start {
        let recent = self.recent(path, now_ms);
        let mut bank = Bank::new(Mode::Improved);
        if recent.is_empty() || bank.update_all(&recent).is_err() {
            return Start {
                rate: cold.min(max),
                basis: Basis::Cold,
            };
        }
        let forecast = bank
            .forecast()
            .map_or(recent[recent.len() - 1], |f| f.mse.value);
        Start {
            rate: (START_SHARE * forecast * 1e6 / 8.0).max(cold).min(max),
            basis: Basis::Remembered {
                transfers: recent.len(),
                forecast_mbit_s: forecast,
            },
        }
    }

    /// Adds a finished transfer to `path`, forgetting what is too old or beyond [`KEEP`],
    /// and the least recently used paths beyond [`MAX_PATHS`].
    pub fn remember(&mut self, path: &str, t: Transfer) {
        let ts = self.paths.entry(path.to_string()).or_default();
        ts.retain(|x| t.at_ms - x.at_ms <= MAX_AGE_MS);
        ts.push(t);
        if ts.len() > KEEP {
            ts.drain(..ts.len() - KEEP);
        }
        self.paths
            .retain(|_, ts| ts.last().is_some_and(|x| t.at_ms - x.at_ms <= MAX_AGE_MS));
        while self.paths.len() > MAX_PATHS {
            let oldest = self
                .paths
                .iter()
                .min_by(|a, b| {
                    a.1[a.1.len() - 1]
                        .at_ms
                        .total_cmp(&b.1[b.1.len() - 1].at_ms)
                })
                .map(|(k, _)| k.clone())
                .expect("more than MAX_PATHS paths");
            self.paths.remove(&oldest);
        }
    }

    /// The paths remembered.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLD: f64 = 20e6 / 8.0;
    const MAX: f64 = 10e9 / 8.0;
    const HOUR: f64 = 3_600_000.0;

    fn t(at_ms: f64, peak_delivery_mbit_s: f64) -> Transfer {
        Transfer {
            at_ms,
            peak_delivery_mbit_s,
        }
    }

    #[test]
    fn a_new_path_starts_cold() {
        let m = PathMemory::new();
        assert_eq!(
            m.start("10.0.0.2", 1e12, COLD, MAX),
            Start {
                rate: COLD,
                basis: Basis::Cold
            }
        );
    }

    #[test]
    fn a_remembered_path_starts_at_half_its_forecast_delivery_rate() {
        let mut m = PathMemory::new();
        m.remember("10.0.0.2", t(1e12, 900.0));
        let s = m.start("10.0.0.2", 1e12 + 60_000.0, COLD, MAX);
        assert_eq!(
            s.basis,
            Basis::Remembered {
                transfers: 1,
                forecast_mbit_s: 900.0
            }
        );
        assert_eq!(s.rate, 450e6 / 8.0);
        // Another receiver is another path.
        assert_eq!(m.start("10.0.0.3", 1e12, COLD, MAX).basis, Basis::Cold);
        // Within the cold start and the cap.
        assert_eq!(
            m.start("10.0.0.2", 1e12, COLD, 100e6 / 8.0).rate,
            100e6 / 8.0
        );
        let mut slow = PathMemory::new();
        slow.remember("h", t(1e12, 7.0));
        assert_eq!(slow.start("h", 1e12, COLD, MAX).rate, COLD);
    }

    #[test]
    fn the_forecast_follows_the_series() {
        let mut m = PathMemory::new();
        for (i, g) in [100.0, 110.0, 90.0, 105.0, 95.0, 100.0]
            .into_iter()
            .enumerate()
        {
            m.remember("h", t(1e12 + i as f64 * 1000.0, g));
        }
        let Basis::Remembered {
            transfers,
            forecast_mbit_s,
        } = m.start("h", 1e12 + 10_000.0, COLD, MAX).basis
        else {
            panic!("remembered")
        };
        assert_eq!(transfers, 6);
        assert!(
            (90.0..=110.0).contains(&forecast_mbit_s),
            "{forecast_mbit_s}"
        );
    }

    #[test]
    fn old_transfers_are_forgotten() {
        let mut m = PathMemory::new();
        m.remember("h", t(1e12, 900.0));
        assert_eq!(
            m.start("h", 1e12 + HOUR + 1.0, COLD, MAX).basis,
            Basis::Cold
        );
        m.remember("h", t(1e12 + 2.0 * HOUR, 400.0));
        assert_eq!(
            m.start("h", 1e12 + 2.0 * HOUR, COLD, MAX).basis,
            Basis::Remembered {
                transfers: 1,
                forecast_mbit_s: 400.0
            }
        );
        // A rate from the future (a clock set back) is not trusted either.
        assert_eq!(m.start("h", 1e12, COLD, MAX).basis, Basis::Cold);
        // At most KEEP per path, the newest.
        for i in 0..40 {
            m.remember("h", t(1e12 + 2.0 * HOUR + f64::from(i), f64::from(i + 1)));
        }
        assert_eq!(m.paths["h"].len(), KEEP);
        assert_eq!(m.paths["h"][KEEP - 1].peak_delivery_mbit_s, 40.0);
    }

    #[test]
    fn at_most_max_paths_the_least_recently_used_go() {
        let mut m = PathMemory::new();
        for i in 0..MAX_PATHS + 5 {
            m.remember(
                &format!("10.0.{}.{}", i / 256, i % 256),
                t(1e12 + i as f64, 50.0),
            );
        }
        assert_eq!(m.len(), MAX_PATHS);
        assert!(!m.paths.contains_key("10.0.0.4"));
        assert!(m.paths.contains_key("10.0.0.5"));
    }

    #[test]
    fn the_file_reads_back_and_bad_files_say_what_is_wrong() {
        let mut m = PathMemory::new();
        m.remember("10.0.0.2", t(1e12, 912.5));
        m.remember("[fd00::2]", t(1e12 + 5.0, 33.25));
        assert_eq!(PathMemory::parse(&m.to_json()), Ok(m));
        let e = PathMemory::parse("{\"version\": 1, \"paths\": {\"h\": [{\"at_ms\": 1}]}}")
            .unwrap_err();
        assert!(
            e.contains("peak_delivery_mbit_s") && e.contains("line 1"),
            "{e}"
        );
        let e = PathMemory::parse("{\"version\": 7, \"paths\": {}}").unwrap_err();
        assert!(e.contains("version 7"), "{e}");
        let e = PathMemory::parse(
            "{\"version\": 1, \"paths\": {\"h\": [{\"at_ms\": 1, \"peak_delivery_mbit_s\": -3}]}}",
        )
        .unwrap_err();
        assert!(e.contains("path h") && e.contains("-3"), "{e}");
        assert!(PathMemory::parse("not json")
            .unwrap_err()
            .contains("line 1"));
    }
}
