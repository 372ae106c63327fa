//! Evaluating forecasters over a series (the `nowcast forecast` report): every primary, the
//! faithful and improved NWS selections, the oracle, the baselines of other tools, and the
//! timeout rules. The parts are independent so the command can run them on separate threads.

use nowcast_core::iepm::{Ewma, MeanOfLast};
use nowcast_core::timeout::{Bounds, Outcome};
use nowcast_core::{Accum, Bank, Mode, Series};
use serde::Serialize;

/// Errors of one forecast over the points it forecast (points 2..n).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub id: String,
    pub name: String,
    pub n: u64,
    pub mae: f64,
    pub rmse: f64,
}

impl Row {
    fn new(id: &str, name: &str, a: Accum) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            n: a.n,
            mae: a.mae(),
            rmse: a.rmse(),
        }
    }
}

/// The faithful bank: the original library's two selected forecasts.
pub struct FaithfulPart {
    bank: Bank,
}

impl Default for FaithfulPart {
    fn default() -> Self {
        Self {
            bank: Bank::new(Mode::Faithful),
        }
    }
}

impl FaithfulPart {
    pub fn push(&mut self, xs: &[f64]) {
        for &x in xs {
            // Values were validated by the reader; out-of-range ones are refused there too.
            let _ = self.bank.update(x);
        }
    }

    pub fn rows(&self) -> Vec<Row> {
        vec![
            Row::new(
                "nws_faithful_mse",
                "NWS faithful, MSE-selected",
                self.bank.mse_accum(),
            ),
            Row::new(
                "nws_faithful_mae",
                "NWS faithful, MAE-selected",
                self.bank.mae_accum(),
            ),
        ]
    }
}

/// The improved bank with its timeout rules, and the baselines.
pub struct ImprovedPart {
    series: Series,
    mean5: MeanOfLast,
    ewma: Ewma,
    /// RFC 6298's smoothed RTT used as a forecast.
    srtt: Option<f64>,
    mean5_acc: Accum,
    ewma_acc: Accum,
    srtt_acc: Accum,
}

impl ImprovedPart {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            series: Series::new(Mode::Improved, bounds),
            mean5: MeanOfLast::new(5),
            ewma: Ewma::new(0.7),
            srtt: None,
            mean5_acc: Accum::default(),
            ewma_acc: Accum::default(),
            srtt_acc: Accum::default(),
        }
    }

    pub fn push(&mut self, xs: &[f64]) {
        for &x in xs {
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
            let _ = self.series.observe(x);
        }
    }

    /// Every primary of the improved bank.
    pub fn primaries(&self) -> Vec<Row> {
        let bank = self.series.bank();
        (0..bank.primaries())
            .map(|j| {
                let (id, name) = bank.method(j);
                Row::new(id, name, bank.primary_accum(j))
            })
            .collect()
    }

    pub fn selected(&self) -> Vec<Row> {
        let bank = self.series.bank();
        vec![
            Row::new(
                "nws_improved_mse",
                "NWS improved, MSE-selected",
                bank.mse_accum(),
            ),
            Row::new(
                "nws_improved_mae",
                "NWS improved, MAE-selected",
                bank.mae_accum(),
            ),
            Row::new(
                "oracle",
                "Oracle (best primary each step)",
                bank.oracle_accum(),
            ),
        ]
    }

    pub fn baselines(&self) -> Vec<Row> {
        vec![
            Row::new(
                "last_value",
                "Last value",
                self.series.bank().primary_accum(0),
            ),
            Row::new("mean_5", "Mean of last 5 (IEPM-BW)", self.mean5_acc),
            Row::new("ewma_0.7", "EWMA w=0.7 (IEPM-BW)", self.ewma_acc),
            Row::new("rfc6298_srtt", "RFC 6298 SRTT", self.srtt_acc),
        ]
    }

    pub fn timeouts(&self) -> Vec<Outcome> {
        self.series.timeout_outcomes()
    }
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub points: u64,
    pub primaries: Vec<Row>,
    pub selected: Vec<Row>,
    pub baselines: Vec<Row>,
    pub timeouts: Vec<Outcome>,
}

impl Report {
    pub fn build(points: u64, faithful: &FaithfulPart, improved: &ImprovedPart) -> Self {
        let mut selected = faithful.rows();
        selected.extend(improved.selected());
        Self {
            points,
            primaries: improved.primaries(),
            selected,
            baselines: improved.baselines(),
            timeouts: improved.timeouts(),
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
        let mut f = FaithfulPart::default();
        let mut g = ImprovedPart::new(Bounds::UNBOUNDED);
        f.push(&xs);
        g.push(&xs);
        let r = Report::build(xs.len() as u64, &f, &g);
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
}
