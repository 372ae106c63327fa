//! A bank's primaries apart from the rest of it (algorithms.md §1.3, steps 4 and 5): their
//! forecasts depend on the values alone, never on the scores or the selection, so a caller
//! can run them on a thread of their own a few values ahead ([`crate::Bank::take_primaries`],
//! [`Primaries::push`], [`crate::Bank::update_given`]).

use crate::method::Rule;
use crate::primary::{self, State};
use crate::window::Windows;

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

/// A bank's primaries taken out of it ([`crate::Bank::take_primaries`]) to run on a thread of
/// their own.
#[derive(Clone, Debug)]
pub struct Primaries {
    pub(crate) rules: Vec<Rule>,
    pub(crate) states: Vec<State>,
    pub(crate) windows: Windows,
    pub(crate) n: u64,
    pub(crate) fc: Vec<f64>,
    pub(crate) has: Vec<bool>,
}

impl Primaries {
    /// Takes in `xs` (checked values, see [`crate::Bank::check`]) and appends to `out` every
    /// primary's forecast after each of them, for [`crate::Bank::update_given`].
    pub fn push(&mut self, xs: &[f64], out: &mut NextForecasts) {
        out.p = self.rules.len();
        out.fc.reserve(xs.len() * out.p);
        out.has.reserve(xs.len() * out.p);
        out.all.reserve(xs.len());
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, checked just above.
            unsafe { self.push_avx2(xs, out) };
            return;
        }
        self.push_each(xs, out);
    }

    /// [`push_each`](Self::push_each) compiled for AVX2, as [`crate::Bank::update`] is.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn push_avx2(&mut self, xs: &[f64], out: &mut NextForecasts) {
        self.push_each(xs, out)
    }

    #[inline(always)]
    fn push_each(&mut self, xs: &[f64], out: &mut NextForecasts) {
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
            out.fc.extend_from_slice(&self.fc);
            out.has.extend_from_slice(&self.has);
            out.all.push(all);
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
