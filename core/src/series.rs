//! One measured series as the page and the probes keep it: the forecaster bank plus the
//! adaptive timeout rules that learn from the same values. Saved and restored whole.

use crate::bank::{Bank, Forecast, Mode};
use crate::state::Saved;
use crate::timeout::{Bounds, Outcome, Rule, Tracker};
use crate::ForecastError;
use serde::{Deserialize, Serialize};

/// A series: forecasts, timeouts and the record of how each timeout rule fared.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    bank: Bank,
    trackers: Vec<Tracker>,
    bounds: Bounds,
    /// Probes that timed out and were fed back with a penalty.
    timeouts: u64,
}

impl Series {
    /// A series in `mode` with the standard timeout rules and the given bounds.
    pub fn new(mode: Mode, bounds: Bounds) -> Self {
        Self {
            bank: Bank::new(mode),
            trackers: Rule::standard().into_iter().map(Tracker::new).collect(),
            bounds,
            timeouts: 0,
        }
    }

    /// A series without timeout rules, for values that are not probe results (an imported
    /// series, say): the same forecasts without the rules' bookkeeping.
    pub fn without_timeouts(mode: Mode) -> Self {
        Self {
            trackers: Vec::new(),
            ..Self::new(mode, Bounds::UNBOUNDED)
        }
    }

    /// Feeds a measurement: timeout rules are judged against the forecast made before it.
    pub fn observe(&mut self, x: f64) -> Result<(), ForecastError> {
        Bank::check(x)?;
        if !self.trackers.is_empty() {
            let before = self.bank.forecast();
            for t in &mut self.trackers {
                t.observe(x, before.as_ref(), &self.bounds);
            }
        }
        self.bank.update(x)
    }

    /// Records a probe that timed out after `elapsed`: it is fed back as its duration plus
    /// the penalty (NWS), never dropped. Returns the value fed.
    pub fn timed_out(&mut self, elapsed: f64) -> Result<f64, ForecastError> {
        let v = self.bounds.timed_out_value(elapsed);
        self.observe(v)?;
        self.timeouts += 1;
        Ok(v)
    }

    pub fn forecast(&self) -> Option<Forecast> {
        self.bank.forecast()
    }

    pub fn bank(&self) -> &Bank {
        &self.bank
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    pub fn set_bounds(&mut self, bounds: Bounds) {
        self.bounds = bounds;
    }

    /// Number of probes that timed out.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// The timeout rule `id` (see [`Rule::id`]) sets for the next probe.
    pub fn timeout(&self, id: &str) -> Option<f64> {
        self.tracked(|r| r.id() == id)
    }

    /// The timeout `rule` sets for the next probe, if the series tracks that rule: the
    /// same as [`Series::timeout`] without building the rule's name.
    pub fn timeout_by(&self, rule: Rule) -> Option<f64> {
        self.tracked(|r| *r == rule)
    }

    fn tracked(&self, which: impl Fn(&Rule) -> bool) -> Option<f64> {
        let f = self.bank.forecast();
        self.trackers
            .iter()
            .find(|t| which(&t.rule))?
            .timeout(f.as_ref(), &self.bounds)
    }

    /// Miss rate and mean timeout of every rule so far.
    pub fn timeout_outcomes(&self) -> Vec<Outcome> {
        self.trackers.iter().map(Tracker::outcome).collect()
    }
}

impl Saved for Series {
    const FORMAT: &'static str = "nowcast.series-state";
    fn validate(&self) -> Result<(), String> {
        Saved::validate(&self.bank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state;

    #[test]
    fn timed_out_probes_are_fed_back_with_the_penalty() {
        let mut s = Series::new(Mode::Improved, Bounds::NWS_MS);
        for _ in 0..10 {
            s.observe(100.0).unwrap();
        }
        assert_eq!(s.timeout("nws"), Some(5_000.0), "floor applies");
        assert_eq!(s.timed_out(5_000.0).unwrap(), 10_000.0);
        assert_eq!(s.timeouts(), 1);
        assert_eq!(s.bank().len(), 11);
        let back: Series = state::restore(&state::save(&s)).unwrap();
        assert_eq!(back.timeout("nws"), s.timeout("nws"));
        assert_eq!(back.timeout_outcomes(), s.timeout_outcomes());
    }

    #[test]
    fn an_unbounded_series_saves_and_restores() {
        let mut s = Series::new(Mode::Faithful, Bounds::UNBOUNDED);
        s.observe(3.0).unwrap();
        let back: Series = state::restore(&state::save(&s)).unwrap();
        assert_eq!(back.bounds(), Bounds::UNBOUNDED);
    }
}
