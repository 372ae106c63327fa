//! The options and the loop that `nowcast tcp` and `nowcast udp` share: one experiment per
//! period (JavaNws §2.1: a series of probes, each forecast before it is measured), until
//! the count is reached or the user interrupts.

use anyhow::{anyhow, bail, Result};
use nowcast::probe::report::Sink;
use nowcast::stop::Stop;
use nowcast_core::record::{Record, Status};
use nowcast_core::timeout::Bounds;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args, Clone)]
pub struct Common {
    /// Seconds from the start of one experiment to the start of the next. Without --count,
    /// experiments continue until SIGINT or SIGTERM.
    #[arg(long)]
    pub period: Option<f64>,
    /// Number of experiments (default: 1, or unlimited with --period).
    #[arg(long)]
    pub count: Option<u64>,
    /// Write NDJSON measurement records to standard output instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the NDJSON records to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Lowest adaptive timeout, in ms (default: 1000 for tcp, 100 for udp).
    #[arg(long)]
    pub timeout_floor: Option<f64>,
    /// Highest adaptive timeout, in ms.
    #[arg(long, default_value_t = 120_000.0)]
    pub timeout_ceiling: f64,
    /// Hard limit on every probe, in seconds, whatever its adaptive timeout.
    #[arg(long, default_value_t = 60.0)]
    pub deadline: f64,
}

impl Common {
    /// Timeout bounds in ms; the penalty fed back for a timed-out probe is the floor.
    pub fn bounds(&self, default_floor_ms: f64) -> Result<Bounds> {
        let floor = self.timeout_floor.unwrap_or(default_floor_ms);
        if !(floor > 0.0 && self.timeout_ceiling >= floor) {
            bail!("--timeout-floor must be > 0 and ≤ --timeout-ceiling");
        }
        Ok(Bounds {
            floor,
            ceiling: self.timeout_ceiling,
            penalty: floor,
        })
    }

    pub fn deadline(&self) -> Result<Duration> {
        if !(self.deadline.is_finite() && self.deadline > 0.0) {
            bail!("--deadline must be a positive number of seconds");
        }
        Ok(Duration::from_secs_f64(self.deadline))
    }

    fn period(&self) -> Result<Duration> {
        match self.period {
            Some(p) if !(p.is_finite() && p >= 0.0) => bail!("--period must be ≥ 0 seconds"),
            Some(p) => Ok(Duration::from_secs_f64(p)),
            None => Ok(Duration::ZERO),
        }
    }

    fn count(&self) -> Option<u64> {
        match (self.count, self.period) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(1),
        }
    }
}

/// Runs `one(seq)` per period and writes what it returns (records and a table row). Fails
/// only when no probe of any experiment succeeded (the sink has shown why).
pub fn run(
    common: &Common,
    stop: &Stop,
    sink: &mut Sink,
    mut one: impl FnMut(u64) -> (Vec<Record>, String),
) -> Result<()> {
    let period = common.period()?;
    let count = common.count();
    let start = Instant::now();
    let mut ok = 0u64;
    let mut seq = 0u64;
    while !matches!(count, Some(n) if seq >= n) && !stop.is_set() {
        let (records, row) = one(seq);
        ok += records.iter().filter(|r| r.status == Status::Ok).count() as u64;
        sink.experiment(&records, Some(row))?;
        seq += 1;
        if count.is_some_and(|n| seq >= n) {
            break;
        }
        let next = start + period.mul_f64(seq as f64);
        if stop.wait_timeout(next.saturating_duration_since(Instant::now())) {
            break;
        }
    }
    if ok == 0 && seq > 0 {
        return Err(anyhow!("no probe succeeded"));
    }
    Ok(())
}
