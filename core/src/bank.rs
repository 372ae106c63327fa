//! The NWS forecaster bank: primaries, sixteen selectors, and the reported MSE and MAE
//! forecasts (algorithms.md §1; Wolski's NWS as used in JavaNws §2.1.2).

use crate::aggregate::{Aggregate, Loss, Settings};
use crate::errors::{argmin, Accum, ErrorTable, Kind};
#[cfg(target_arch = "x86_64")]
use crate::isa::Avx2;
use crate::isa::{Baseline, Isa, Row, LANES};
use crate::method::{describe, Mode, Rule, CANDIDATES, NWS_PRIMARIES};
use crate::primaries::{advance, Next, Primaries};
use crate::primary::{self, State};
use crate::window::Windows;
use crate::ForecastError;
use serde::{Deserialize, Serialize};

/// Selector windows. The original's "100" spans 97 errors: its window totals are running
/// totals minus those of 97 steps before (reproduced over the long golden trace).
const FAITHFUL_WINDOWS: [usize; 7] = [1, 5, 10, 20, 30, 50, 97];
/// The original's windows as intended, for an improved bank reporting by its selectors.
pub const SELECTION_WINDOWS: [usize; 7] = [1, 5, 10, 20, 30, 50, 100];
/// The windows of the selection that improved mode's aggregates start from (their anchor):
/// the original's seven. Sets of two or three forecast as well on the dev traces and save a
/// sixth of an update, but without the one-error window the MAE forecast of a spiky series
/// (the benchmark's: an AR(1) with 1 % of values tripled) is 17 % worse (README, "Forecast
/// accuracy").
pub const ANCHOR_WINDOWS: &[usize] = &SELECTION_WINDOWS;
/// Two whole-history selectors plus two per window, for at most seven windows.
pub const SELECTORS: usize = 16;

/// Largest accepted magnitude: squares of errors must stay finite over long runs.
pub const MAX_MAGNITUDE: f64 = 1e100;

/// The forecasters improved mode adds to the 18 primaries, for its aggregates only (the
/// original's selection still ranks the 18): Exp Smooth 1 % (a long memory of the level),
/// the remedian of nine consecutive 51-value windows (a robust long-run level over the last
/// 459 values, which absolute loss rewards on RTT series: nearly independent noise around a
/// level; as accurate there as the median of the last 255 values at a tenth of its cost),
/// and an AR(1) around Exp Smooth 1 % (a forecast between the last value and the level,
/// as far towards the level as the deviations' lag-one autocorrelation says: none of the
/// primaries pulls the last value back towards a level; added 2026-12-05, and with it the
/// MAE forecast chosen on one half beats faithful on every group of the other). Chosen on
/// one half of the dev traces and checked on the other (README, "Forecast accuracy").
pub const IMPROVED_EXTRAS: [Rule; 3] = [
    Rule::ExpSmooth(0.01),
    Rule::Remedian(51, 9),
    Rule::Ar1(0.01),
];

/// How many of a bank's first forecasters the original selection ranks in improved mode:
/// those that are NWS primaries; the rest serve the aggregates only.
fn selected_primaries(rules: &[Rule]) -> usize {
    rules
        .iter()
        .take_while(|r| NWS_PRIMARIES.iter().any(|(p, _, _)| p == *r))
        .count()
        .max(1)
}

/// One of the two reported forecasts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Selected {
    /// Forecast of the next value.
    pub value: f64,
    /// Index of the primary whose forecast this is.
    pub method: usize,
    /// Whole-history MSE (for the MSE forecast) or MAE (for the MAE forecast).
    pub error: f64,
}

/// The bank's reported forecasts for the next value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Forecast {
    pub mse: Selected,
    pub mae: Selected,
}

/// One row of the per-forecaster table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrimaryRow {
    pub index: usize,
    pub id: &'static str,
    pub name: &'static str,
    /// Its forecast for the next value, if it has one.
    pub forecast: Option<f64>,
    pub n: u64,
    pub mse: f64,
    pub mae: f64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Reported {
    mse_value: f64,
    mse_method: usize,
    mae_value: f64,
    mae_method: usize,
}

/// A bank of forecasters for one series.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Bank {
    mode: Mode,
    rules: Vec<Rule>,
    states: Vec<State>,
    windows: Windows,
    n: u64,
    /// Each primary's forecast for the next value, valid where `has`.
    fc: Vec<f64>,
    has: Vec<bool>,
    all_have_forecasts: bool,
    /// The original selection ranks the first `selected` forecasters (all of them but in
    /// improved mode's aggregates, where it ranks the 18 primaries); `errors` holds theirs.
    selected: usize,
    errors: ErrorTable,
    /// Whole-history errors of the forecasters after the first `selected`.
    extra_errors: Vec<Accum>,
    /// Each selector's choice of primary for the next value.
    picks: [usize; SELECTORS],
    sel_se: [f64; SELECTORS],
    sel_ae: [f64; SELECTORS],
    reported: Option<Reported>,
    mse_acc: Accum,
    mae_acc: Accum,
    /// Faithful mode: the original charges its MAE forecast |0 − x₁| at the first value.
    first_mae_charge: Option<f64>,
    oracle: Accum,
    /// Improved mode: the reported forecasts are aggregates of every forecaster's and the
    /// selection's, not the selection alone.
    aggregates: Option<Box<Aggregates>>,
    #[serde(skip)]
    scratch: Vec<f64>,
    #[serde(skip)]
    expert_buf: Vec<f64>,
}

/// The two aggregates of improved mode: by squared loss for the MSE forecast, by absolute
/// loss for the MAE forecast (`aggregate.rs`). Their experts are every forecaster plus the
/// original's two-level selection (its MSE pick for the MSE aggregate, its MAE pick for the
/// MAE one), last.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Aggregates {
    mse: Aggregate,
    mae: Aggregate,
    /// The original's two-level selection for the next value.
    selected: Option<Reported>,
}

/// The experts' forecasts for one aggregate: every forecaster's, then the selection's. The
/// buffer keeps its length, so that only the forecasts are copied.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn expert_forecasts<'a>(fc: &[f64], selection: f64, buf: &'a mut Vec<f64>) -> &'a [f64] {
    let p = fc.len();
    if buf.len() != p + 1 {
        buf.resize(p + 1, 0.0);
    }
    copy_short(&mut buf[..p], fc);
    buf[p] = selection;
    buf
}

/// `dst.copy_from_slice(src)` for the bank's few forecasters: a call to `memcpy` for some
/// twenty values a step cost more than the copy. From 16 to 32 of them (the banks' 18 and
/// 20), as two blocks of 16 of known size, overlapping; otherwise in blocks of four.
#[inline(always)]
fn copy_short<T: Copy>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len());
    let n = dst.len();
    if (16..=32).contains(&n) {
        let head: &[T; 16] = src[..16].try_into().expect("16 of them");
        let tail: &[T; 16] = src[n - 16..].try_into().expect("16 of them");
        let (head, tail) = (*head, *tail);
        dst[..16].copy_from_slice(&head);
        dst[n - 16..].copy_from_slice(&tail);
        return;
    }
    let mut d = dst.chunks_exact_mut(4);
    let mut s = src.chunks_exact(4);
    for (d, s) in (&mut d).zip(&mut s) {
        let block: [T; 4] = [s[0], s[1], s[2], s[3]];
        d.copy_from_slice(&block);
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = *s;
    }
}

/// The oracle's error this step: of the forecasters that had a forecast, the first error of
/// the smallest magnitude; `None` if none had one.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn oracle_error(isa: impl Isa, err: &[f64], has: &[bool]) -> Option<f64> {
    if err.len() > LANES {
        return err
            .iter()
            .zip(has)
            .filter(|(_, &h)| h)
            .fold(None, |best: Option<f64>, (&e, _)| match best {
                Some(b) if e.abs() >= b.abs() => best,
                _ => Some(e),
            });
    }
    // Magnitudes in a row (+∞ where no forecast), its minimum, then where it first is:
    // straight vector code where a running comparison waited on itself at every forecaster.
    let mut size: Row = [f64::INFINITY; LANES];
    for ((s, &e), &h) in size.iter_mut().zip(err).zip(has) {
        *s = if h { e.abs() } else { f64::INFINITY };
    }
    let smallest = isa.row_min(&size);
    smallest
        .is_finite()
        .then(|| err[isa.first_equal(&size, smallest)])
}

/// [`expert_forecasts`] with another selection: the forecasters' part is already there.
#[cfg_attr(target_arch = "x86_64", inline(always))]
fn with_selection(buf: &mut [f64], selection: f64) -> &[f64] {
    let last = buf.len() - 1;
    buf[last] = selection;
    buf
}

/// Improved mode's aggregation settings, chosen on one half of the evaluation data and
/// checked on the other (README, "Forecast accuracy"). Without an exponentiated-gradient
/// mixture: with the top level learning from the squared error itself, neither half chose
/// one.
pub const MSE_AGGREGATE: Settings = Settings {
    loss: Loss::Squared,
    eta: 0.1,
    shares: [0.0005, 0.01],
    eg_rate: 0.0,
    eg_share: 0.002,
    scale_gain: 0.2,
    clip: 25.0,
    prior_last: 0.0,
    leader: true,
};
/// See [`MSE_AGGREGATE`]. The mixtures start from even weights; the original's own MAE
/// selection is a top-level input besides.
pub const MAE_AGGREGATE: Settings = Settings {
    loss: Loss::Absolute,
    eta: 0.3,
    shares: [0.0005, 0.01],
    eg_rate: 0.0,
    eg_share: 0.002,
    scale_gain: 0.2,
    clip: 25.0,
    prior_last: 0.0,
    leader: false,
};

/// How a bank turns its forecasters' forecasts into the two reported ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reporting {
    /// The original's two-level selection (algorithms.md §1.2).
    Selectors,
    /// Two-level aggregates by squared and absolute loss (`aggregate.rs`), starting from the
    /// original's two-level selection with selectors over `windows` (1 to 7 of them, each
    /// at most 100 errors).
    Aggregates {
        mse: Settings,
        mae: Settings,
        windows: &'static [usize],
    },
}

impl crate::state::Saved for Bank {
    const FORMAT: &'static str = "nowcast.forecaster-state";
    fn validate(&self) -> Result<(), String> {
        self.check_restored()
    }
}

impl Bank {
    /// A bank in `mode` with its standard forecasters: the 18 NWS primaries, and in
    /// improved mode [`IMPROVED_EXTRAS`] after them.
    pub fn new(mode: Mode) -> Self {
        let mut rules: Vec<Rule> = NWS_PRIMARIES.iter().map(|(r, _, _)| *r).collect();
        if mode == Mode::Improved {
            rules.extend(IMPROVED_EXTRAS);
        }
        Self::with_rules(mode, rules)
    }

    /// The reporting a bank in `mode` uses by default: the selectors when faithful, the
    /// aggregates when improved.
    pub fn default_reporting(mode: Mode) -> Reporting {
        match mode {
            Mode::Faithful => Reporting::Selectors,
            Mode::Improved => Reporting::Aggregates {
                mse: MSE_AGGREGATE,
                mae: MAE_AGGREGATE,
                windows: ANCHOR_WINDOWS,
            },
        }
    }

    /// A bank with an explicit list of forecasters (for evaluation studies). The first 18
    /// should be the NWS primaries so that method indices keep their meaning.
    pub fn with_rules(mode: Mode, rules: Vec<Rule>) -> Self {
        Self::with_reporting(mode, rules, Self::default_reporting(mode))
    }

    /// A bank with explicit forecasters and reporting (for evaluation studies).
    pub fn with_reporting(mode: Mode, rules: Vec<Rule>, reporting: Reporting) -> Self {
        let faithful = mode == Mode::Faithful;
        let p = rules.len();
        assert!(p > 0, "a bank needs a forecaster");
        let windows = Windows::new(&primary::fixed_windows(&rules, faithful));
        let states = rules
            .iter()
            .map(|r| State::new(r, faithful, &windows))
            .collect();
        // The original's smoothers hold a forecast of 0 before any value (algorithms.md §1.1).
        let has = rules
            .iter()
            .map(|r| faithful && matches!(r, Rule::ExpSmooth(_)))
            .collect();
        let selector_windows: &[usize] = match reporting {
            _ if faithful => &FAITHFUL_WINDOWS,
            Reporting::Aggregates { windows, .. } => windows,
            Reporting::Selectors => &SELECTION_WINDOWS,
        };
        assert!(
            (1..=(SELECTORS - 2) / 2).contains(&selector_windows.len()),
            "1 to {} selector windows",
            (SELECTORS - 2) / 2
        );
        let selected = match reporting {
            Reporting::Aggregates { .. } if !faithful => selected_primaries(&rules),
            _ => p,
        };
        Self {
            mode,
            states,
            windows,
            n: 0,
            fc: vec![0.0; p],
            has,
            all_have_forecasts: false,
            selected,
            errors: if faithful {
                ErrorTable::running(selected, selector_windows)
            } else {
                ErrorTable::new(selected, selector_windows)
            },
            extra_errors: vec![Accum::default(); p - selected],
            picks: [0; SELECTORS],
            sel_se: [0.0; SELECTORS],
            sel_ae: [0.0; SELECTORS],
            reported: None,
            mse_acc: Accum::default(),
            mae_acc: Accum::default(),
            first_mae_charge: None,
            oracle: Accum::default(),
            aggregates: match reporting {
                Reporting::Selectors => None,
                Reporting::Aggregates { mse, mae, .. } => Some(Box::new(Aggregates {
                    mse: Aggregate::new(p + 1, mse),
                    mae: Aggregate::new(p + 1, mae),
                    selected: None,
                })),
            },
            scratch: vec![0.0; p],
            expert_buf: Vec::new(),
            rules,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Number of values seen.
    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Number of primary forecasters.
    pub fn primaries(&self) -> usize {
        self.rules.len()
    }

    /// Checks that `x` can enter the bank.
    pub fn check(x: f64) -> Result<(), ForecastError> {
        if !x.is_finite() {
            Err(ForecastError::NotFinite(x))
        } else if x.abs() > MAX_MAGNITUDE {
            Err(ForecastError::OutOfRange(x))
        } else {
            Ok(())
        }
    }

    /// Feeds one measurement, in the original's order (algorithms.md §1.3): score the
    /// reported forecasts, the selectors and the primaries made before `x`, then append `x`
    /// and update every primary, then let the selectors choose again.
    ///
    /// On an x86-64 processor with AVX2 the same code runs compiled for it (its rows are four
    /// doubles or eight singles to an instruction instead of two or four): the operations and
    /// their order are the same, and Rust never fuses a multiply and an add on its own, so the
    /// results are bit for bit those of the baseline build (tested).
    ///
    /// Panics if the primaries are out ([`Bank::take_primaries`]).
    pub fn update(&mut self, x: f64) -> Result<(), ForecastError> {
        Self::check(x)?;
        assert!(!self.states.is_empty(), "the bank's primaries are out");
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, checked just above.
            unsafe { self.step_avx2(x) };
            return Ok(());
        }
        self.step(Baseline, x);
        Ok(())
    }

    /// [`step`](Self::step) compiled for AVX2; everything it calls on the hot path is
    /// inlined into it (`inline(always)` on x86-64), so it is compiled for AVX2 too.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn step_avx2(&mut self, x: f64) {
        // SAFETY: this function is only called where the processor has AVX2.
        self.step(unsafe { Avx2::assume() }, x)
    }

    /// Takes in a checked value (see [`update`](Self::update)).
    #[inline(always)]
    fn step(&mut self, isa: impl Isa, x: f64) {
        self.score(isa, x);
        // 4. Append to the history. 5. Update every primary and take its next forecast.
        self.n += 1;
        self.all_have_forecasts = advance(
            &self.rules,
            &mut self.states,
            &mut self.windows,
            self.n,
            x,
            &mut self.fc,
            &mut self.has,
        );
        self.choose(isa);
    }

    /// Steps 1–3 of [`update`](Self::update): everything that scores the forecasts made
    /// before `x`.
    #[inline(always)]
    fn score(&mut self, isa: impl Isa, x: f64) {
        let faithful = self.mode == Mode::Faithful;

        // 1. The reported forecasts.
        match self.reported {
            Some(r) => {
                self.mse_acc.add(x - r.mse_value);
                self.mae_acc.add(x - r.mae_value);
            }
            None if faithful => self.first_mae_charge = Some(x.abs()),
            None => {}
        }
        // 2. The aggregates learn from every forecaster's forecast and the selection's, and
        // the selectors (each forecast what its chosen primary forecast) are scored.
        if let (Some(agg), true) = (&mut self.aggregates, self.all_have_forecasts) {
            if let Some(r) = agg.selected {
                let experts = expert_forecasts(&self.fc, r.mse_value, &mut self.expert_buf);
                agg.mse.update(x, experts);
                agg.mae
                    .update(x, with_selection(&mut self.expert_buf, r.mae_value));
            }
        }
        // Every forecaster's error (measurement minus forecast).
        let p = self.rules.len();
        if self.scratch.len() != p {
            self.scratch.resize(p, 0.0);
        }
        for (e, &f) in self.scratch.iter_mut().zip(&self.fc) {
            *e = x - f;
        }
        if self.reported.is_some() {
            let n = self.selectors();
            isa.add_picked(
                &self.scratch,
                &self.picks,
                n,
                &mut self.sel_se,
                &mut self.sel_ae,
            );
        }
        // 3. The primaries that had a forecast, and the oracle (best primary this step).
        let sel = self.selected;
        self.errors
            .record_with(isa, &self.scratch[..sel], &self.has[..sel]);
        for (acc, j) in self.extra_errors.iter_mut().zip(sel..) {
            if self.has[j] {
                acc.add(self.scratch[j]);
            }
        }
        if let Some(best) = oracle_error(isa, &self.scratch, &self.has) {
            self.oracle.add(best);
        }
    }

    /// Takes the primaries out of the bank, to run on another thread: their forecasts
    /// depend on the values alone, never on the scores or the selection, so an update splits
    /// into two stages that can run side by side, the primaries a few values ahead
    /// ([`Primaries::push`], then [`Bank::update_given`] with what it wrote, value by value).
    /// [`Bank::set_primaries`] puts them back; until then [`Bank::update`] panics, and a
    /// saved state would not restore.
    pub fn take_primaries(&mut self) -> Primaries {
        assert!(!self.states.is_empty(), "the primaries are already out");
        Primaries::of_bank(
            self.mode,
            self.rules.clone(),
            std::mem::take(&mut self.states),
            std::mem::replace(&mut self.windows, Windows::new(&[])),
            self.n,
            self.fc.clone(),
            self.has.clone(),
        )
    }

    /// Puts back the primaries [`Bank::take_primaries`] took, once the bank has been given
    /// every forecast they made. Panics if they are not this bank's or are ahead of it.
    pub fn set_primaries(&mut self, p: Primaries) {
        assert!(self.states.is_empty(), "the bank has its primaries");
        assert!(
            p.banks.len() == 1 && p.rules == self.rules && p.n == self.n,
            "primaries of another bank, of several, or ahead of it"
        );
        self.states = p.states;
        self.windows = p.windows;
    }

    /// [`update`](Self::update) for a bank whose primaries were taken out: `next` holds their
    /// forecasts after `x`, as [`Primaries::push`] wrote them for it. The same operations
    /// in the same order, so the bank is bit for bit the one [`update`](Self::update) makes
    /// (tested).
    pub fn update_given(&mut self, x: f64, next: Next<'_>) -> Result<(), ForecastError> {
        Self::check(x)?;
        assert!(
            self.states.is_empty() && next.fc.len() == self.fc.len(),
            "forecasts given to a bank that has its primaries, or of another bank"
        );
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, checked just above.
            unsafe { self.step_given_avx2(x, next) };
            return Ok(());
        }
        self.step_given(Baseline, x, next);
        Ok(())
    }

    /// [`step_given`](Self::step_given) compiled for AVX2, as [`step_avx2`](Self::step_avx2).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn step_given_avx2(&mut self, x: f64, next: Next<'_>) {
        // SAFETY: this function is only called where the processor has AVX2.
        self.step_given(unsafe { Avx2::assume() }, x, next)
    }

    #[inline(always)]
    fn step_given(&mut self, isa: impl Isa, x: f64, next: Next<'_>) {
        self.score(isa, x);
        self.n += 1;
        copy_short(&mut self.fc, next.fc);
        copy_short(&mut self.has, next.has);
        self.all_have_forecasts = next.all;
        self.choose(isa);
    }

    /// Feeds a batch of measurements; stops at the first invalid one, reporting its index.
    pub fn update_all(&mut self, xs: &[f64]) -> Result<(), (usize, ForecastError)> {
        for (i, &x) in xs.iter().enumerate() {
            self.update(x).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Lets every selector pick a primary, then picks the reported forecasts among the
    /// selectors by their own whole-history errors (ties to the lower index); in improved
    /// mode the reported forecasts are then the aggregates' over that selection and every
    /// forecaster.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn choose(&mut self, isa: impl Isa) {
        self.select(isa);
        if let (Some(agg), true) = (&mut self.aggregates, self.all_have_forecasts) {
            agg.selected = self.reported;
            let Some(r) = self.reported else { return };
            let (fc, buf) = (&self.fc, &mut self.expert_buf);
            let mse_value = agg.mse.forecast(expert_forecasts(fc, r.mse_value, buf));
            let mae_value = agg.mae.forecast(with_selection(buf, r.mae_value));
            // The methods stay the selection's here; `forecast` names the aggregates' when
            // asked (their weights do not change until the next value).
            self.reported = Some(Reported {
                mse_value,
                mae_value,
                ..r
            });
        }
    }

    /// How many selectors there are: two whole-history ones and two per window.
    fn selectors(&self) -> usize {
        2 + 2 * self.errors.window_count()
    }

    /// The original's two-level selection (algorithms.md §1.2) into `reported`.
    #[cfg_attr(target_arch = "x86_64", inline(always))]
    fn select(&mut self, isa: impl Isa) {
        let windows = self.errors.window_count();
        if self.all_have_forecasts && self.errors.steady() {
            self.picks[0] = self.errors.best_steady(isa, Kind::Squared, None);
            self.picks[1] = self.errors.best_steady(isa, Kind::Absolute, None);
            for wi in 0..windows {
                self.picks[2 + 2 * wi] = self.errors.best_steady(isa, Kind::Squared, Some(wi));
                self.picks[3 + 2 * wi] = self.errors.best_steady(isa, Kind::Absolute, Some(wi));
            }
        } else {
            let has = &self.has;
            self.picks[0] = self.errors.best(Kind::Squared, None, has).unwrap_or(0);
            self.picks[1] = self.errors.best(Kind::Absolute, None, has).unwrap_or(0);
            for wi in 0..windows {
                self.picks[2 + 2 * wi] =
                    self.errors.best(Kind::Squared, Some(wi), has).unwrap_or(0);
                self.picks[3 + 2 * wi] =
                    self.errors.best(Kind::Absolute, Some(wi), has).unwrap_or(0);
            }
        }
        let used = self.selectors();
        let (ms, as_) = (
            self.picks[argmin(&self.sel_se[..used])],
            self.picks[argmin(&self.sel_ae[..used])],
        );
        self.reported = Some(Reported {
            mse_value: self.fc[ms],
            mse_method: ms,
            mae_value: self.fc[as_],
            mae_method: as_,
        });
    }

    /// The reported forecasts for the next value; `None` before the first value. In
    /// improved mode each names the forecaster with the largest share of its aggregate (the
    /// selection's share counting for the forecaster the selection picked).
    pub fn forecast(&self) -> Option<Forecast> {
        let mut f = self.forecast_values()?;
        if let (Some(agg), true) = (&self.aggregates, self.all_have_forecasts) {
            let p = self.rules.len();
            let name = |a: &Aggregate, selection: usize| match a.leader() {
                lead if lead < p => lead,
                _ => selection,
            };
            f.mse.method = name(&agg.mse, f.mse.method);
            f.mae.method = name(&agg.mae, f.mae.method);
        }
        Some(f)
    }

    /// The share of the MSE forecast that its named method ([`forecast`](Self::forecast))
    /// has, in (0, 1]: `None` where that method is the whole forecast (faithful mode, and
    /// improved mode until every forecaster has a forecast). The page says it beside the name:
    /// early in a series the shares are near even, and the largest says little.
    pub fn mse_share(&self) -> Option<f64> {
        match (&self.aggregates, self.all_have_forecasts) {
            (Some(agg), true) => Some(agg.mse.leader_share().1),
            _ => None,
        }
    }

    /// [`forecast`](Self::forecast) with the selection's methods (what the timeout rules
    /// read: values and errors, not names), without weighing the aggregates' shares.
    pub fn forecast_values(&self) -> Option<Forecast> {
        let r = self.reported?;
        Some(Forecast {
            mse: Selected {
                value: r.mse_value,
                method: r.mse_method,
                error: self.mse_acc.mse(),
            },
            mae: Selected {
                value: r.mae_value,
                method: r.mae_method,
                error: self.mae_error(),
            },
        })
    }

    fn mae_error(&self) -> f64 {
        match self.first_mae_charge {
            Some(c) => (self.mae_acc.sum_ae + c) / (self.mae_acc.n + 1) as f64,
            None => self.mae_acc.mae(),
        }
    }

    /// Errors of the reported MSE forecast over the values it forecast.
    pub fn mse_accum(&self) -> Accum {
        self.mse_acc
    }

    /// Errors of the reported MAE forecast over the values it forecast (without the
    /// faithful first-value charge).
    pub fn mae_accum(&self) -> Accum {
        self.mae_acc
    }

    /// Errors of the oracle: the best primary at each step, a lower bound for any selector.
    pub fn oracle_accum(&self) -> Accum {
        self.oracle
    }

    /// Whole-history errors of primary `j`.
    pub fn primary_accum(&self, j: usize) -> Accum {
        if j < self.selected {
            self.errors.accum(j)
        } else {
            self.extra_errors[j - self.selected]
        }
    }

    /// Each primary's current forecast, if it has one.
    pub fn primary_forecast(&self, j: usize) -> Option<f64> {
        self.has[j].then_some(self.fc[j])
    }

    /// The per-forecaster table: forecast, MSE and MAE of every primary.
    pub fn table(&self) -> Vec<PrimaryRow> {
        self.rules
            .iter()
            .enumerate()
            .map(|(j, rule)| {
                let (id, name) = describe(rule);
                let acc = self.primary_accum(j);
                PrimaryRow {
                    index: j,
                    id,
                    name,
                    forecast: self.primary_forecast(j),
                    n: acc.n,
                    mse: acc.mse(),
                    mae: acc.mae(),
                }
            })
            .collect()
    }

    #[doc(hidden)]
    pub fn aggregate_weights(&self) -> Option<(Vec<f64>, Vec<f64>)> {
        let a = self.aggregates.as_ref()?;
        Some((a.mse.effective_weights(), a.mae.effective_weights()))
    }

    /// Id and name of primary `j`.
    pub fn method(&self, j: usize) -> (&'static str, &'static str) {
        describe(&self.rules[j])
    }

    /// Checks the internal consistency of a restored bank, so that a damaged state is
    /// refused instead of failing later.
    fn check_restored(&self) -> Result<(), String> {
        let p = self.rules.len();
        if p == 0 || self.states.len() != p || self.fc.len() != p || self.has.len() != p {
            return Err("forecaster lists have different lengths".into());
        }
        let faithful = self.mode == Mode::Faithful;
        for (rule, state) in self.rules.iter().zip(&self.states) {
            let fresh = State::new(rule, faithful, &self.windows);
            if std::mem::discriminant(state) != std::mem::discriminant(&fresh) {
                return Err(format!("state does not match forecaster {rule:?}"));
            }
            primary::validate(state, &self.windows)?;
        }
        if self.selected > p || self.extra_errors.len() != p - self.selected {
            return Err("forecaster lists have different lengths".into());
        }
        self.errors.validate(self.selected)?;
        self.windows
            .validate(&primary::fixed_windows(&self.rules, faithful))?;
        if self.errors.window_count() == 0 || self.selectors() > SELECTORS {
            return Err("selector windows are damaged".into());
        }
        if self.picks.iter().any(|&k| k >= self.selected.max(1)) {
            return Err("a selector points past the forecasters".into());
        }
        if self.windows.hist.count() != self.n {
            return Err("history length disagrees with the value count".into());
        }
        if let Some(agg) = &self.aggregates {
            agg.mse.validate(p + 1)?;
            agg.mae.validate(p + 1)?;
        }
        Ok(())
    }

    /// Every candidate rule that improved mode may use (for evaluation studies).
    pub fn candidates() -> impl Iterator<Item = Rule> {
        CANDIDATES.iter().map(|(r, _, _)| *r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primaries::NextForecasts;

    /// A bank whose primaries run apart ([`Bank::take_primaries`], [`Primaries::push`],
    /// [`Bank::update_given`]) is bit for bit the bank [`Bank::update`] makes, in both modes,
    /// taken out at the start or part-way, in runs of any length, and goes on as one
    /// once they are back.
    #[test]
    fn primaries_run_apart_give_the_same_bank() {
        let xs: Vec<f64> = (0..3_000)
            .map(|i| 50.0 + ((i * 7919) % 101) as f64 * 0.3 + if i % 97 == 0 { 200.0 } else { 0.0 })
            .collect();
        for mode in [Mode::Faithful, Mode::Improved] {
            let mut whole = Bank::new(mode);
            whole.update_all(&xs).unwrap();
            for start in [0, 1, 40, 777] {
                let mut split = Bank::new(mode);
                split.update_all(&xs[..start]).unwrap();
                let mut primaries = split.take_primaries();
                let mut next = NextForecasts::default();
                let mut at = start;
                for len in [1, 2, 500, 1_000].into_iter().cycle() {
                    let run = &xs[at..(at + len).min(2_000)];
                    next.clear();
                    primaries.push(run, std::slice::from_mut(&mut next));
                    assert_eq!(next.len(), run.len());
                    for (i, &x) in run.iter().enumerate() {
                        split.update_given(x, next.get(i)).unwrap();
                    }
                    at += run.len();
                    if at == 2_000 {
                        break;
                    }
                }
                split.set_primaries(primaries);
                split.update_all(&xs[2_000..]).unwrap();
                assert_eq!(
                    crate::state::save(&split),
                    crate::state::save(&whole),
                    "{mode:?} from {start}"
                );
            }
        }
    }

    /// Banks whose primaries are joined ([`Primaries::join`]) and pushed as one, in both
    /// modes or the same one, in either order, are bit for bit the banks that run alone, and
    /// go on alone once [`Primaries::split`] gives each its own back. Both modes share all
    /// but the adaptive medians.
    #[test]
    fn joined_primaries_give_each_bank_its_own() {
        let xs: Vec<f64> = (0..3_000)
            .map(|i| 50.0 + ((i * 7919) % 101) as f64 * 0.3 + if i % 89 == 0 { 300.0 } else { 0.0 })
            .collect();
        use Mode::{Faithful, Improved};
        for modes in [
            [Faithful, Improved],
            [Improved, Faithful],
            [Improved, Improved],
        ] {
            let mut banks = modes.map(Bank::new);
            let wholes = modes.map(|m| {
                let mut b = Bank::new(m);
                b.update_all(&xs).unwrap();
                b
            });
            let [a, b] = &mut banks;
            let mut joint = a.take_primaries().join(b.take_primaries());
            assert_eq!(joint.banks(), 2);
            let stepped = joint.rules.len();
            assert_eq!(
                stepped,
                if modes[0] == modes[1] { 21 } else { 23 },
                "{modes:?}"
            );
            let mut next = [NextForecasts::default(), NextForecasts::default()];
            let mut at = 0;
            for len in [1, 3, 700].into_iter().cycle() {
                let run = &xs[at..(at + len).min(2_000)];
                next.iter_mut().for_each(NextForecasts::clear);
                joint.push(run, &mut next);
                for (bank, next) in banks.iter_mut().zip(&next) {
                    assert_eq!(next.len(), run.len());
                    for (i, &x) in run.iter().enumerate() {
                        bank.update_given(x, next.get(i)).unwrap();
                    }
                }
                at += run.len();
                if at == 2_000 {
                    break;
                }
            }
            for ((bank, own), whole) in banks.iter_mut().zip(joint.split()).zip(&wholes) {
                bank.set_primaries(own);
                bank.update_all(&xs[2_000..]).unwrap();
                assert_eq!(
                    crate::state::save(bank),
                    crate::state::save(whole),
                    "{modes:?}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "have taken no value")]
    fn only_fresh_primaries_join() {
        let (mut a, mut b) = (Bank::new(Mode::Faithful), Bank::new(Mode::Improved));
        a.update(1.0).unwrap();
        let _ = a.take_primaries().join(b.take_primaries());
    }

    #[test]
    #[should_panic(expected = "primaries are out")]
    fn a_bank_without_its_primaries_cannot_update_alone() {
        let mut bank = Bank::new(Mode::Improved);
        let _primaries = bank.take_primaries();
        let _ = bank.update(1.0);
    }

    /// The AVX2 build of the update (taken by [`Bank::update`] where the processor has it)
    /// and the baseline one give the same bank, bit for bit, in both modes: a state saved on
    /// one machine continues identically on another.
    #[test]
    fn the_avx2_update_is_bit_identical_to_the_baseline_one() {
        let mut s: u64 = 17;
        let mut level = 40.0;
        let xs: Vec<f64> = (0..30_000)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 11) as f64 / (1u64 << 53) as f64;
                if i % 5000 == 0 {
                    level *= 1.7;
                }
                let spike = if (s >> 7) % 97 == 0 { 8.0 } else { 1.0 };
                level * (0.8 + 0.4 * u) * spike
            })
            .collect();
        for mode in [Mode::Faithful, Mode::Improved] {
            let (mut dispatched, mut baseline) = (Bank::new(mode), Bank::new(mode));
            for &x in &xs {
                dispatched.update(x).unwrap();
                baseline.step(Baseline, x);
            }
            assert_eq!(
                crate::state::save(&dispatched),
                crate::state::save(&baseline),
                "{mode:?}"
            );
        }
    }
}
