//! One measured series as the page and the probes keep it: the forecaster bank plus the
//! adaptive timeout rules that learn from the same values. Saved and restored whole.

use crate::bank::{Bank, Forecast};
use crate::method::Mode;
use crate::state::Saved;
use crate::timeout::{Bounds, Outcome, Rule, TimeoutRules};
use crate::ForecastError;
use serde::{Deserialize, Serialize};

/// A series: forecasts, timeouts and the record of how each timeout rule fared.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    bank: Bank,
    /// Saved as their fields (`trackers`, `bounds`) beside the bank's.
    #[serde(flatten)]
    rules: TimeoutRules,
    /// Probes that timed out and were fed back with a penalty.
    timeouts: u64,
}

impl Series {
    /// A series in `mode` with the standard timeout rules and the given bounds.
    pub fn new(mode: Mode, bounds: Bounds) -> Self {
        Self {
            bank: Bank::new(mode),
            rules: TimeoutRules::standard(bounds),
            timeouts: 0,
        }
    }

    /// A series in `mode` that tracks only `rules` (say, the one a caller times out by, when
    /// it is not one of [`Rule::standard`]).
    pub fn with_rules(mode: Mode, bounds: Bounds, rules: &[Rule]) -> Self {
        Self {
            rules: TimeoutRules::new(rules, bounds),
            ..Self::new(mode, bounds)
        }
    }

    /// A series without timeout rules, for values that are not probe results (an imported
    /// series, say): the same forecasts without the rules' bookkeeping.
    pub fn without_timeouts(mode: Mode) -> Self {
        Self {
            rules: TimeoutRules::new(&[], Bounds::UNBOUNDED),
            ..Self::new(mode, Bounds::UNBOUNDED)
        }
    }

    /// Feeds a measurement: timeout rules are judged against the forecast made before it.
    pub fn observe(&mut self, x: f64) -> Result<(), ForecastError> {
        Bank::check(x)?;
        if !self.rules.is_empty() {
            let before = self.bank.forecast_values();
            self.rules.observe(x, before.as_ref());
        }
        self.bank.update(x)
    }

    /// Records a probe that gave up after `at_least` (its value is at least that): the
    /// value is censored, not known. The rules are judged as [`crate::timeout::Tracker::observe_censored`]
    /// says, and the bank is fed `at_least`, a lower bound (never a made-up penalty), so its
    /// forecasts learn that the path got slower. Returns the value fed.
    pub fn censored(&mut self, at_least: f64) -> Result<f64, ForecastError> {
        Bank::check(at_least)?;
        let before = self.bank.forecast_values();
        self.rules.observe_censored(at_least, before.as_ref());
        self.bank.update(at_least)?;
        self.timeouts += 1;
        Ok(at_least)
    }

    /// Records a probe that timed out after `elapsed` the original NWS way: fed back as its
    /// duration plus the penalty, as a value (see [`Series::censored`] for the improved way).
    /// Returns the value fed.
    pub fn timed_out(&mut self, elapsed: f64) -> Result<f64, ForecastError> {
        let v = self.rules.bounds().timed_out_value(elapsed);
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
        self.rules.bounds()
    }

    pub fn set_bounds(&mut self, bounds: Bounds) {
        self.rules.set_bounds(bounds);
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
        self.rules
            .timeout(which, self.bank.forecast_values().as_ref())
    }

    /// Miss rate and mean timeout of every rule so far.
    pub fn timeout_outcomes(&self) -> Vec<Outcome> {
        self.rules.outcomes()
    }
}

impl Saved for Series {
    const FORMAT: &'static str = "nowcast.series-state";
    fn validate(&self) -> Result<(), String> {
        self.rules.validate()?;
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
        assert_eq!(s.timeout("target_miss_2pct"), Some(5_000.0));
        assert_eq!(s.timed_out(5_000.0).unwrap(), 10_000.0);
        assert_eq!(s.timeouts(), 1);
        assert_eq!(s.bank().len(), 11);
        let back: Series = state::restore(&state::save(&s)).unwrap();
        assert_eq!(back.timeout("nws"), s.timeout("nws"));
        assert_eq!(back.timeout_outcomes(), s.timeout_outcomes());
    }

    /// A state saved before the rules stopped keeping a sum no timeout read (`se_sum`, and
    /// every rule's SRTT and running error) restores, and goes on as one saved now.
    #[test]
    fn a_state_saved_with_the_rules_old_fields_restores() {
        let mut s = Series::new(Mode::Improved, Bounds::NWS_MS);
        for i in 0..300 {
            s.observe(100.0 + (i % 9) as f64 * 4.0).unwrap();
        }
        let now = state::save(&s);
        let old = now.replace("\"se_n\":", "\"se_sum\":1234.5,\"se_n\":");
        assert_eq!(old.matches("se_sum").count(), Rule::standard().len());
        let (mut a, mut b): (Series, Series) =
            (state::restore(&now).unwrap(), state::restore(&old).unwrap());
        for i in 0..100 {
            let x = 90.0 + (i % 13) as f64 * 5.0;
            a.observe(x).unwrap();
            b.observe(x).unwrap();
        }
        assert_eq!(state::save(&a), state::save(&b));
    }

    #[test]
    fn no_timeout_comes_from_too_few_errors_to_know_the_spread() {
        // The probe bug this fixes: the second timeout was the first duration exactly.
        let mut s = Series::new(Mode::Improved, Bounds::UNBOUNDED);
        assert_eq!(s.timeout("target_miss_2pct"), None, "no value, no timeout");
        s.observe(100.0).unwrap();
        for id in ["nws", "allen_k2", "windowed_k2_w20", "target_miss_2pct"] {
            assert_eq!(
                s.timeout(id),
                Some(300.0),
                "{id}: cold start, 3 × the largest"
            );
        }
        for x in [101.0, 99.0, 140.0, 100.0, 102.0] {
            s.observe(x).unwrap();
        }
        let t = s.timeout("target_miss_2pct").unwrap();
        assert!(t > 100.0 && t < 300.0, "{t}");
    }

    #[test]
    fn a_censored_probe_counts_as_a_miss_and_feeds_its_lower_bound() {
        let mut s = Series::new(Mode::Improved, Bounds::UNBOUNDED);
        for i in 0..50 {
            s.observe(100.0 + (i % 5) as f64).unwrap();
        }
        let t = s.timeout("target_miss_2pct").unwrap();
        let before = s.timeout_outcomes();
        assert_eq!(s.censored(t + 1.0).unwrap(), t + 1.0);
        assert_eq!(s.bank().len(), 51);
        let after = s.timeout_outcomes();
        let id = |o: &Vec<Outcome>| {
            o.iter()
                .find(|o| o.rule == "target_miss_2pct")
                .map(|o| (o.judged, (o.miss_rate * o.judged as f64).round() as u64))
                .unwrap()
        };
        let (j0, m0) = id(&before);
        assert_eq!(id(&after), (j0 + 1, m0 + 1));
        assert!(
            s.timeout("target_miss_2pct").unwrap() > t,
            "k and the forecast moved up"
        );
    }

    #[test]
    fn a_probe_given_up_at_its_own_timeout_is_a_miss_of_the_rule_that_fired() {
        // The caller waits exactly the rule's timeout and enters the wait censored: that rule
        // missed (its probe was not answered by then), or its miss rate would never learn
        // from its own timeouts.
        let rule = Rule::Target { miss: 0.03 };
        let mut s = Series::with_rules(Mode::Improved, Bounds::UNBOUNDED, &[rule]);
        for i in 0..50 {
            s.observe(100.0 + (i % 5) as f64).unwrap();
        }
        let t = s.timeout_by(rule).unwrap();
        let before = s.timeout_outcomes()[0].clone();
        s.censored(t).unwrap();
        let after = s.timeout_outcomes()[0].clone();
        assert_eq!(after.judged, before.judged + 1);
        assert!(after.miss_rate > before.miss_rate, "{before:?} → {after:?}");
        assert_eq!(s.timeout_outcomes().len(), 1, "only the rule asked for");
    }

    #[test]
    fn the_target_rule_meets_its_miss_rate_on_heavy_tailed_values() {
        let mut s = Series::new(Mode::Improved, Bounds::UNBOUNDED);
        let mut r: u64 = 5;
        for _ in 0..20_000 {
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            // Pareto-tailed delays around 20 ms.
            s.observe(20.0 + 2.0 / u.sqrt()).unwrap();
        }
        let o = s
            .timeout_outcomes()
            .into_iter()
            .find(|o| o.rule == "target_miss_2pct")
            .unwrap();
        assert!((o.miss_rate - 0.02).abs() < 0.004, "{o:?}");
    }

    #[test]
    fn an_unbounded_series_saves_and_restores() {
        let mut s = Series::new(Mode::Faithful, Bounds::UNBOUNDED);
        s.observe(3.0).unwrap();
        let back: Series = state::restore(&state::save(&s)).unwrap();
        assert_eq!(back.bounds(), Bounds::UNBOUNDED);
    }

    #[test]
    fn rules_apart_from_the_bank_judge_as_the_series_does() {
        use crate::timeout::TimeoutRules;
        let mut whole = Series::new(Mode::Improved, Bounds::NWS_MS);
        let mut bank = Series::without_timeouts(Mode::Improved);
        let mut rules = TimeoutRules::standard(Bounds::NWS_MS);
        for i in 0..500 {
            let x = 100.0 + (i % 7) as f64 * 3.0 + if i % 50 == 0 { 400.0 } else { 0.0 };
            rules.observe(x, bank.bank().forecast_values().as_ref());
            bank.observe(x).unwrap();
            whole.observe(x).unwrap();
        }
        assert_eq!(rules.outcomes(), whole.timeout_outcomes());
        assert!(rules.outcomes().iter().all(|o| o.judged > 400));
    }
}
