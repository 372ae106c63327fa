//! Evaluating forecasters over a series (the `nowcast forecast` report): every primary, the
//! faithful and improved NWS selections, the oracle, the baselines of other tools, the
//! timeout rules, and the forecast of the next value. The parts are independent so the
//! command can run them on separate threads: one [`BankPart`] per mode asked for.
//!
//! Deterministic core.

use crate::format::BAND_K;
use nowcast_core::iepm::{Ewma, MeanOfLast};
use nowcast_core::timeout::{Bounds, Outcome, TimeoutRules};
use nowcast_core::{Accum, Bank, Forecast, Mode, NextForecasts, Primaries};
use serde::Serialize;

/// Errors of one forecast over the points it forecast (points 2..n).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub id: String,
    pub name: String,
    /// The bank's mode, for the NWS forecasts and the primaries (none for the baselines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    pub n: u64,
    /// NaN (JSON null) when no forecast was checked (n = 0): not a perfect 0.
    pub mae: f64,
    pub rmse: f64,
}

impl Row {
    fn new(id: &str, name: &str, mode: Option<Mode>, a: Accum) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            mode,
            n: a.n,
            mae: if a.n > 0 { a.mae() } else { f64::NAN },
            rmse: if a.n > 0 { a.rmse() } else { f64::NAN },
        }
    }
}

/// The forecast of the value after the last one, as a probe's record carries it: the
/// MSE-selected forecast and its error, the root of the whole-history MSE.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NextForecast {
    pub mode: Mode,
    pub selector: &'static str,
    /// The forecaster chosen, e.g. `median_31`, and its name; in improved mode, where the
    /// forecast combines every forecaster, the one with the largest weight.
    pub method: String,
    pub method_name: String,
    /// In improved mode, that forecaster's share of the forecast, in (0, 1]; None (JSON null)
    /// where it is the whole forecast (faithful mode).
    pub share: Option<f64>,
    pub value: f64,
    /// None (JSON null) while unknown: after one value, whose forecast nothing has checked
    /// (`record::error_known`; "± 0" would claim a certainty nothing measured).
    pub error: Option<f64>,
    /// The likely range, forecast ± [`BAND_K`]·error (the command narrows it to the
    /// range of the series' unit when it knows the unit); None with the error.
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// The baselines of other tools, fed alongside a bank.
#[derive(Clone, Debug)]
struct Baselines {
    mean5: MeanOfLast,
    ewma: Ewma,
    /// RFC 6298's smoothed RTT used as a forecast.
    srtt: Option<f64>,
    mean5_acc: Accum,
    ewma_acc: Accum,
    srtt_acc: Accum,
}

impl Baselines {
    fn new() -> Self {
        Self {
            mean5: MeanOfLast::new(5),
            ewma: Ewma::new(0.7),
            srtt: None,
            mean5_acc: Accum::default(),
            ewma_acc: Accum::default(),
            srtt_acc: Accum::default(),
        }
    }

    fn observe(&mut self, x: f64) {
        if let Some((m, _)) = self.mean5.forecast() {
            self.mean5_acc.add(x - m);
        }
        if let Some(f) = self.ewma.forecast() {
            self.ewma_acc.add(x - f);
        }
        if let Some(s) = self.srtt {
            self.srtt_acc.add(x - s);
        }
        self.mean5.observe(x);
        self.ewma.observe(x);
        self.srtt = Some(self.srtt.map_or(x, |s| 0.875 * s + 0.125 * x));
    }
}

/// What learns from a bank's values besides the bank: the timeout rules (judged by the
/// bank's forecasts) and the baselines. Apart from the bank, so that they can run on a
/// thread of their own, a chunk behind it.
#[derive(Default)]
pub struct Judges {
    rules: Option<TimeoutRules>,
    baselines: Option<Baselines>,
}

impl Judges {
    /// Whether there is anything to feed.
    pub fn is_empty(&self) -> bool {
        self.rules.is_none() && self.baselines.is_none()
    }

    /// Whether [`Judges::push`] needs the bank's forecasts.
    pub fn wants_forecasts(&self) -> bool {
        self.rules.is_some()
    }

    /// Feeds `xs`; `before[i]` is the bank's forecast made before `xs[i]` (read only when
    /// [`Judges::wants_forecasts`]).
    pub fn push(&mut self, xs: &[f64], before: &[Option<Forecast>]) {
        for (i, &x) in xs.iter().enumerate() {
            if let Some(b) = &mut self.baselines {
                b.observe(x);
            }
            if let Some(r) = &mut self.rules {
                r.observe(x, before[i].as_ref());
            }
        }
    }
}

/// One mode's bank, with the timeout rules and the baselines when asked for.
pub struct BankPart {
    mode: Mode,
    /// The bank (the timeout rules are in `judges`).
    bank: Bank,
    judges: Judges,
}

impl BankPart {
    /// A bank in `mode`; the timeout rules within `bounds` when `timeouts` is set
    /// (otherwise the bank alone, faster); the baselines when `baselines` is set.
    pub fn new(mode: Mode, bounds: Bounds, timeouts: bool, baselines: bool) -> Self {
        Self {
            mode,
            bank: Bank::new(mode),
            judges: Judges {
                rules: timeouts.then(|| TimeoutRules::standard(bounds)),
                baselines: baselines.then(Baselines::new),
            },
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Feeds `xs` to the bank and to the judges, on this thread.
    pub fn push(&mut self, xs: &[f64]) {
        let want = self.judges.wants_forecasts();
        let mut before = Vec::with_capacity(if want { xs.len() } else { 0 });
        for &x in xs {
            if want {
                before.push(self.bank.forecast_values());
            }
            // Values were validated by the reader; out-of-range ones are refused there too.
            let _ = self.bank.update(x);
        }
        self.judges.push(xs, &before);
    }

    /// Feeds `xs` to a bank whose primaries run apart ([`BankPart::take_primaries`]):
    /// `next` holds their forecasts after each of `xs`. With `before`, appends there the
    /// forecast the bank made before each value, for [`Judges::push`].
    pub fn push_given(
        &mut self,
        xs: &[f64],
        next: &NextForecasts,
        mut before: Option<&mut Vec<Option<Forecast>>>,
    ) {
        for (i, &x) in xs.iter().enumerate() {
            if let Some(b) = before.as_deref_mut() {
                b.push(self.bank.forecast_values());
            }
            // As in push: the reader validated the values.
            let _ = self.bank.update_given(x, next.get(i));
        }
    }

    /// Takes the bank's primaries out, to run on another thread ([`Bank::take_primaries`]);
    /// [`BankPart::set_primaries`] puts them back.
    pub fn take_primaries(&mut self) -> Primaries {
        self.bank.take_primaries()
    }

    pub fn set_primaries(&mut self, primaries: Primaries) {
        self.bank.set_primaries(primaries);
    }

    /// Takes the judges out (to feed them elsewhere); [`BankPart::set_judges`] puts them back.
    pub fn take_judges(&mut self) -> Judges {
        std::mem::take(&mut self.judges)
    }

    pub fn set_judges(&mut self, judges: Judges) {
        self.judges = judges;
    }

    fn label(&self) -> &'static str {
        match self.mode {
            Mode::Faithful => "faithful",
            Mode::Improved => "improved",
        }
    }

    /// The two selected forecasts of this mode.
    pub fn selected(&self) -> Vec<Row> {
        let bank = &self.bank;
        let (m, mode) = (self.label(), Some(self.mode));
        vec![
            Row::new(
                &format!("nws_{m}_mse"),
                &format!("NWS {m}, MSE-selected"),
                mode,
                bank.mse_accum(),
            ),
            Row::new(
                &format!("nws_{m}_mae"),
                &format!("NWS {m}, MAE-selected"),
                mode,
                bank.mae_accum(),
            ),
        ]
    }

    /// The best primary at each step, in hindsight.
    pub fn oracle(&self) -> Row {
        Row::new(
            "oracle",
            "Oracle (best primary each step)",
            Some(self.mode),
            self.bank.oracle_accum(),
        )
    }

    /// Every primary of the bank.
    pub fn primaries(&self) -> Vec<Row> {
        let bank = &self.bank;
        (0..bank.primaries())
            .map(|j| {
                let (id, name) = bank.method(j);
                Row::new(id, name, Some(self.mode), bank.primary_accum(j))
            })
            .collect()
    }

    /// Last value (the bank's first primary) and the baselines, if they were fed.
    pub fn baselines(&self) -> Vec<Row> {
        let Some(b) = &self.judges.baselines else {
            return Vec::new();
        };
        vec![
            Row::new("last_value", "Last value", None, self.bank.primary_accum(0)),
            Row::new("mean_5", "Mean of last 5 (IEPM-BW)", None, b.mean5_acc),
            Row::new("ewma_0.7", "EWMA w=0.7 (IEPM-BW)", None, b.ewma_acc),
            Row::new("rfc6298_srtt", "RFC 6298 SRTT", None, b.srtt_acc),
        ]
    }

    /// The timeout rules' outcomes, if they were kept.
    pub fn timeouts(&self) -> Vec<Outcome> {
        self.judges
            .rules
            .as_ref()
            .map_or_else(Vec::new, TimeoutRules::outcomes)
    }

    /// The forecast of the next value.
    pub fn next(&self) -> Option<NextForecast> {
        let f = self.bank.forecast()?;
        let (id, name) = self.bank.method(f.mse.method);
        let error = f.mse.error.max(0.0).sqrt();
        let error = nowcast_core::record::error_known(self.bank.len(), error).then_some(error);
        Some(NextForecast {
            mode: self.mode,
            selector: "mse",
            method: id.to_string(),
            method_name: name.to_string(),
            share: self.bank.mse_share(),
            value: f.mse.value,
            error,
            low: error.map(|e| f.mse.value - BAND_K * e),
            high: error.map(|e| f.mse.value + BAND_K * e),
        })
    }
}

/// The whole report over the parts that ran (one or both modes).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub points: u64,
    /// The forecast of the next value, one per mode (improved first).
    pub next: Vec<NextForecast>,
    /// The mode of the primaries, the oracle and the timeout rules: improved when both ran.
    pub primaries_mode: Mode,
    pub primaries: Vec<Row>,
    pub selected: Vec<Row>,
    pub baselines: Vec<Row>,
    pub timeouts: Vec<Outcome>,
}

impl Report {
    /// The report of `parts`; the last one is the one whose primaries, oracle, baselines and
    /// timeout rules are reported (the improved one when both modes ran).
    pub fn build(points: u64, parts: &[&BankPart]) -> Self {
        let main = parts.last().expect("at least one mode");
        let mut selected: Vec<Row> = parts.iter().flat_map(|p| p.selected()).collect();
        selected.push(main.oracle());
        let baselines = parts.iter().flat_map(|p| p.baselines()).collect();
        Self {
            points,
            next: parts.iter().rev().filter_map(|p| p.next()).collect(),
            primaries_mode: main.mode(),
            primaries: main.primaries(),
            selected,
            baselines,
            timeouts: main.timeouts(),
        }
    }

    /// The row with this id among the selected forecasts and baselines.
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.selected
            .iter()
            .chain(&self.baselines)
            .find(|r| r.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_covers_every_forecaster_and_rule() {
        let xs: Vec<f64> = (0..500).map(|i| 10.0 + ((i * 7) % 13) as f64).collect();
        let mut f = BankPart::new(Mode::Faithful, Bounds::UNBOUNDED, false, false);
        let mut g = BankPart::new(Mode::Improved, Bounds::UNBOUNDED, true, true);
        f.push(&xs);
        g.push(&xs);
        let r = Report::build(xs.len() as u64, &[&f, &g]);
        assert!(r.primaries.len() >= 18);
        for id in [
            "nws_faithful_mse",
            "nws_faithful_mae",
            "nws_improved_mse",
            "nws_improved_mae",
            "oracle",
            "last_value",
            "mean_5",
            "ewma_0.7",
            "rfc6298_srtt",
        ] {
            let row = r.row(id).unwrap_or_else(|| panic!("{id}"));
            assert_eq!(row.n, 499, "{id} forecasts points 2..n");
            assert!(row.mae.is_finite() && row.rmse >= row.mae);
        }
        assert!(r.row("oracle").unwrap().mae <= r.row("nws_improved_mae").unwrap().mae);
        assert_eq!(
            r.timeouts.len(),
            nowcast_core::timeout::Rule::standard().len()
        );
    }

    #[test]
    fn one_mode_reports_alone_and_the_next_forecast_is_its_mse_selection() {
        let xs: Vec<f64> = (0..300).map(|i| 5.0 + ((i * 11) % 7) as f64).collect();
        let mut f = BankPart::new(Mode::Faithful, Bounds::UNBOUNDED, true, true);
        f.push(&xs);
        let r = Report::build(xs.len() as u64, &[&f]);
        assert_eq!(r.primaries_mode, Mode::Faithful);
        assert_eq!(
            r.primaries.len(),
            nowcast_core::Bank::new(Mode::Faithful).primaries()
        );
        assert!(r
            .selected
            .iter()
            .all(|row| row.mode == Some(Mode::Faithful)));
        assert!(r.row("nws_improved_mse").is_none());
        assert!(!r.timeouts.is_empty() && r.row("last_value").is_some());
        let mut bank = nowcast_core::Bank::new(Mode::Faithful);
        bank.update_all(&xs).unwrap();
        let want = bank.forecast().unwrap().mse;
        assert_eq!(r.next.len(), 1);
        let next = &r.next[0];
        assert_eq!((next.mode, next.value), (Mode::Faithful, want.value));
        assert_eq!(next.error, Some(want.error.sqrt()));
        assert_eq!(next.method, bank.method(want.method).0);
        assert!(next.error > Some(0.0));

        // Both: the improved forecast first; a steady series is forecast exactly.
        let steady = vec![7.5; 50];
        let mut f = BankPart::new(Mode::Faithful, Bounds::UNBOUNDED, false, false);
        let mut g = BankPart::new(Mode::Improved, Bounds::UNBOUNDED, true, true);
        f.push(&steady);
        g.push(&steady);
        let r = Report::build(50, &[&f, &g]);
        let modes: Vec<Mode> = r.next.iter().map(|n| n.mode).collect();
        assert_eq!(modes, [Mode::Improved, Mode::Faithful]);
        assert!(r
            .next
            .iter()
            .all(|n| n.value == 7.5 && n.error == Some(0.0)));
        // One value: its forecast's error is unknown, and so is its range.
        let mut one = BankPart::new(Mode::Improved, Bounds::UNBOUNDED, true, true);
        one.push(&[5.0]);
        let r = Report::build(1, &[&one]);
        assert_eq!(
            (r.next[0].value, r.next[0].error, r.next[0].low),
            (5.0, None, None)
        );
    }
}
