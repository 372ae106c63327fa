//! A bank's primaries apart from the rest of it (algorithms.md §1.3, steps 4 and 5): their
//! forecasts depend on the values alone, never on the scores or the selection, so a caller
//! can run them on a thread of their own a few values ahead ([`crate::Bank::take_primaries`],
//! [`Primaries::push`], [`crate::Bank::update_given`]).

use crate::method::Mode;
use crate::method::Rule;
use crate::primary::{self, State};
use crate::window::Windows;
use std::ops::Range;

/// Steps 4 and 5 of [`crate::Bank::update`]: appends `x` (the `n`-th value) to the history and
/// lets every primary take it, writing its next forecast into `fc` where it has one (`has`);
/// true when all of them have one. The one code for a bank's own primaries and for
/// [`Primaries`] taken out of it.
#[inline(always)]
pub(crate) fn advance(
    rules: &[Rule],
    states: &mut [State],
    windows: &mut Windows,
    n: u64,
    x: f64,
    fc: &mut [f64],
    has: &mut [bool],
) -> bool {
    windows.push(x);
    let mut all = true;
    for j in 0..rules.len() {
        match primary::step(&rules[j], &mut states[j], x, n, windows) {
            Some(f) => {
                fc[j] = f;
                has[j] = true;
            }
            None => {
                has[j] = false;
                all = false;
            }
        }
    }
    all
}

/// Primaries taken out of one bank ([`crate::Bank::take_primaries`]) or of several fed the
/// same values ([`Primaries::join`]), to run on a thread of their own. Joined, a forecaster
/// that two banks share, whose forecasts do not depend on the bank's mode, is stepped once
/// for both (in `nowcast forecast`'s both modes, 16 of the faithful bank's 18).
#[derive(Clone, Debug)]
pub struct Primaries {
    /// The forecasters stepped, each once.
    pub(crate) rules: Vec<Rule>,
    pub(crate) states: Vec<State>,
    pub(crate) windows: Windows,
    pub(crate) n: u64,
    pub(crate) fc: Vec<f64>,
    pub(crate) has: Vec<bool>,
    /// Whose forecasts they are: one entry a bank, in the order joined.
    pub(crate) banks: Vec<Share>,
}

/// One bank's forecasters among those a [`Primaries`] steps.
#[derive(Clone, Debug)]
pub(crate) struct Share {
    pub(crate) mode: Mode,
    /// Where the bank's forecasters are among the stepped ones, in order: runs of
    /// neighbours, each copied out at once.
    pub(crate) runs: Vec<Range<usize>>,
}

impl Share {
    /// Where each of the bank's forecasters is among the stepped ones.
    fn at(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs.iter().flat_map(Range::clone)
    }

    /// How many forecasters the bank has.
    fn len(&self) -> usize {
        self.runs.iter().map(ExactSizeIterator::len).sum()
    }
}

/// `at` as runs of consecutive indices.
fn runs(at: &[usize]) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for &k in at {
        match runs.last_mut() {
            Some(r) if r.end == k => r.end += 1,
            _ => runs.push(k..k + 1),
        }
    }
    runs
}

impl Primaries {
    /// One bank's primaries, stepped as that bank steps them.
    pub(crate) fn of_bank(
        mode: Mode,
        rules: Vec<Rule>,
        states: Vec<State>,
        windows: Windows,
        n: u64,
        fc: Vec<f64>,
        has: Vec<bool>,
    ) -> Self {
        let banks = vec![Share {
            mode,
            runs: std::iter::once(0..rules.len()).collect(),
        }];
        Self {
            rules,
            states,
            windows,
            n,
            fc,
            has,
            banks,
        }
    }

    /// The forecasters of `bank`, one of those it steps for, in that bank's order.
    fn rules_of(&self, bank: &Share) -> Vec<Rule> {
        bank.at().map(|k| self.rules[k]).collect()
    }

    /// How many banks' forecasts it writes ([`Primaries::push`] takes one
    /// [`NextForecasts`] for each).
    pub fn banks(&self) -> usize {
        self.banks.len()
    }

    /// Joins `other`'s primaries to these, so that one [`Primaries::push`] writes every
    /// bank's forecasts, those of `other` last, each exactly what its bank's own primaries
    /// would have written. A forecaster both hold stays one where its forecasts do not depend
    /// on the bank's mode (all but the adaptive medians, [`primary::depends_on_mode`]).
    /// [`Primaries::split`] gives each bank its own back.
    ///
    /// Panics unless both are fresh (no value taken yet): only then do shared forecasters
    /// certainly hold the same state.
    pub fn join(self, other: Primaries) -> Primaries {
        assert!(
            self.n == 0 && other.n == 0,
            "only the primaries of banks that have taken no value join"
        );
        let mut keys: Vec<(Rule, Option<Mode>)> = Vec::new();
        let mut banks: Vec<(Share, Vec<Rule>)> = [&self, &other]
            .into_iter()
            .flat_map(|p| p.banks.iter().map(|b| (b.clone(), p.rules_of(b))))
            .collect();
        for (bank, rules) in &mut banks {
            let at: Vec<usize> = rules
                .iter()
                .map(|r| {
                    let key = (*r, primary::depends_on_mode(r).then_some(bank.mode));
                    keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                        keys.push(key);
                        keys.len() - 1
                    })
                })
                .collect();
            bank.runs = runs(&at);
        }
        let faithful = |m: Option<Mode>| m == Some(Mode::Faithful);
        let lens: Vec<usize> = keys
            .iter()
            .flat_map(|&(r, m)| primary::fixed_windows(&[r], faithful(m)))
            .collect();
        let windows = Windows::new(&lens);
        let states = keys
            .iter()
            .map(|(r, m)| State::new(r, faithful(*m), &windows))
            .collect();
        Self {
            rules: keys.iter().map(|(r, _)| *r).collect(),
            states,
            windows,
            n: 0,
            fc: vec![0.0; keys.len()],
            has: vec![false; keys.len()],
            banks: banks.into_iter().map(|(b, _)| b).collect(),
        }
    }

    /// Each bank's own primaries back, in the order joined, with the states and windows
    /// they would have had stepped alone ([`crate::Bank::set_primaries`] takes them).
    pub fn split(self) -> Vec<Primaries> {
        let gather = |bank: &Share| -> (Vec<f64>, Vec<bool>) {
            bank.at().map(|k| (self.fc[k], self.has[k])).unzip()
        };
        self.banks
            .iter()
            .map(|bank| {
                let rules = self.rules_of(bank);
                let lens = primary::fixed_windows(&rules, bank.mode == Mode::Faithful);
                let windows = self.windows.subset(&lens);
                let states = bank
                    .at()
                    .map(|k| self.states[k].reindexed(&self.windows, &windows))
                    .collect();
                let (fc, has) = gather(bank);
                Primaries::of_bank(bank.mode, rules, states, windows, self.n, fc, has)
            })
            .collect()
    }

    /// Takes in `xs` (checked values, see [`crate::Bank::check`]) and appends to `outs[b]`
    /// every primary of bank `b`'s forecast after each of them, for
    /// [`crate::Bank::update_given`]. Panics unless there is one `outs` a bank.
    pub fn push(&mut self, xs: &[f64], outs: &mut [NextForecasts]) {
        assert_eq!(outs.len(), self.banks.len(), "one NextForecasts a bank");
        for (out, bank) in outs.iter_mut().zip(&self.banks) {
            out.p = bank.len();
            out.fc.reserve(xs.len() * out.p);
            out.has.reserve(xs.len() * out.p);
            out.all.reserve(xs.len());
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, checked just above.
            unsafe { self.push_avx2(xs, outs) };
            return;
        }
        self.push_each(xs, outs);
    }

    /// [`push_each`](Self::push_each) compiled for AVX2, as [`crate::Bank::update`] is.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn push_avx2(&mut self, xs: &[f64], outs: &mut [NextForecasts]) {
        self.push_each(xs, outs)
    }

    #[inline(always)]
    fn push_each(&mut self, xs: &[f64], outs: &mut [NextForecasts]) {
        for &x in xs {
            self.n += 1;
            let all = advance(
                &self.rules,
                &mut self.states,
                &mut self.windows,
                self.n,
                x,
                &mut self.fc,
                &mut self.has,
            );
            for (out, bank) in outs.iter_mut().zip(&self.banks) {
                for r in &bank.runs {
                    out.fc.extend_from_slice(&self.fc[r.clone()]);
                    out.has.extend_from_slice(&self.has[r.clone()]);
                }
                out.all.push(
                    all || bank
                        .runs
                        .iter()
                        .all(|r| self.has[r.clone()].iter().all(|&h| h)),
                );
            }
        }
    }
}

/// The primaries' forecasts after each of a run of values, as [`Primaries::push`] writes
/// them; [`NextForecasts::get`] gives one value's to [`crate::Bank::update_given`].
#[derive(Clone, Debug, Default)]
pub struct NextForecasts {
    p: usize,
    fc: Vec<f64>,
    has: Vec<bool>,
    all: Vec<bool>,
}

/// The primaries' forecasts after one value: each one's, whether it has one, whether all do.
#[derive(Clone, Copy, Debug)]
pub struct Next<'a> {
    pub(crate) fc: &'a [f64],
    pub(crate) has: &'a [bool],
    pub(crate) all: bool,
}

impl NextForecasts {
    /// How many values' forecasts it holds.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Empties it, keeping its memory (to be filled again).
    pub fn clear(&mut self) {
        self.fc.clear();
        self.has.clear();
        self.all.clear();
    }

    /// The forecasts after the `i`-th value pushed.
    pub fn get(&self, i: usize) -> Next<'_> {
        let row = i * self.p..(i + 1) * self.p;
        Next {
            fc: &self.fc[row.clone()],
            has: &self.has[row],
            all: self.all[i],
        }
    }
}
