// The NWS forecaster bank in faithful mode (JavaNws §2.1.2), written in TypeScript as the
// peer that the WebAssembly build of the core crate (nowcast-core) is benchmarked against. It
// follows the Rust bank step for step (core/src: bank.rs, errors.rs, primary.rs, window.rs),
// down to the order of the floating-point additions: exact ties (the running mean and the
// sliding means agree for the first 5 or 31 values) then resolve to the same method index in
// both.
//
// Costs per update: O(1) for the 18 primaries except the sorted windows (a binary search and a
// shift of the entries between the leaving and the entering value, ≤ 51), 7 × 18 window-sum
// moves and 16 arg-mins over 18 values. Nothing is allocated after construction.

const HISTORY = 128;
/** Steps of error history kept for the windowed selectors. */
const RING = 100;
const PRIMARIES = 18;
/** Selector windows; the original's "100" spans 97 errors (errors.rs, bank.rs). */
const WINDOWS = [1, 5, 10, 20, 30, 50, 97] as const;
const LONGEST = 97;
const SELECTORS = 2 + 2 * WINDOWS.length;
const GAINS = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75] as const;
const FIRST_SMOOTHER = 2;
const SMOOTHERS_END = FIRST_SMOOTHER + GAINS.length;
/** Largest accepted magnitude, as in the Rust bank: squared errors must stay finite. */
const MAX_MAGNITUDE = 1e100;

/** One of the two reported forecasts. */
export interface NwsSelected {
  value: number;
  /** Index of the primary whose forecast this is. */
  method: number;
  /** Whole-history MSE (MSE forecast) or MAE (MAE forecast) of the reported forecast. */
  error: number;
}

export interface NwsForecast {
  mse: NwsSelected;
  mae: NwsSelected;
}

/** The last HISTORY values in arrival order. */
class History {
  readonly ring = new Float64Array(HISTORY);
  count = 0;
  /** Slot the next value goes to. */
  private end = 0;

  push(x: number): void {
    this.ring[this.end] = x;
    this.end = (this.end + 1) & (HISTORY - 1);
    this.count++;
  }

  held(): number {
    return this.count < HISTORY ? this.count : HISTORY;
  }

  /** The value `k` steps before the newest; `k` < held(). */
  ago(k: number): number {
    return this.ring[(this.end - 1 - k) & (HISTORY - 1)]!;
  }

  private readonly newest = new Float64Array(HISTORY);

  /** Median of the newest n values (the adaptive medians' short candidates, n ≤ 4). */
  medianOfNewest(n: number): number {
    const v = this.newest.subarray(0, n);
    for (let k = 0; k < n; k++) v[k] = this.ago(k);
    v.sort();
    const h = n >> 1;
    return n & 1 ? v[h]! : (v[h - 1]! + v[h]!) / 2;
  }
}

/**
 * Sum of the last `w` values for a sliding mean, kept as primary.rs keeps it: added value by
 * value while the window fills (the running mean's own additions, so the two tie exactly),
 * then moved by each entering and leaving value, and re-added from scratch once every `w`
 * steps so that subtraction residue cannot build up.
 */
class SlidingSum {
  private sum = 0;
  private lap = 0;

  constructor(private readonly w: number) {}

  /** `hist` already holds `x`; returns the mean of the last min(w, count) values. */
  push(x: number, hist: History): number {
    const { w } = this;
    const n = hist.count;
    if (n <= w) {
      this.sum += x;
    } else if (this.lap === 0) {
      let total = 0;
      for (let k = w - 1; k >= 0; k--) total += hist.ago(k);
      this.sum = total;
      this.lap = w;
    } else {
      this.sum += x - hist.ago(w);
    }
    this.lap = Math.max(this.lap - 1, 0);
    return this.sum / Math.min(w, n);
  }
}

/** Position of `x` in the ascending `vals[0..size)`: the number of values below it. */
function rank(vals: Float64Array, size: number, x: number): number {
  let lo = 0;
  let hi = size;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (vals[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The last `len` values of the series (fewer at its start), kept in ascending order. */
class SortedWindow {
  private readonly vals = new Float64Array(HISTORY);
  private size = 0;

  constructor(private len: number) {}

  /**
   * Takes in the newest value of `hist` and lets go of the one that left the window. Equal
   * values are interchangeable, so replacing any copy of the leaving value is exact.
   */
  push(hist: History): void {
    const x = hist.ago(0);
    const v = this.vals;
    if (hist.count <= this.len) {
      const j = rank(v, this.size, x);
      v.copyWithin(j + 1, j, this.size);
      v[j] = x;
      this.size++;
      return;
    }
    // One shift of the entries between the two slots instead of closing one gap and opening
    // another: the shift is short when the new value lands near the old one.
    const i = rank(v, this.size, hist.ago(this.len));
    const j = rank(v, this.size, x);
    if (j <= i) {
      for (let k = i; k > j; k--) v[k] = v[k - 1]!;
      v[j] = x;
    } else {
      for (let k = i; k < j - 1; k++) v[k] = v[k + 1]!;
      v[j - 1] = x;
    }
  }

  /** Changes the length, adding older values from `hist` or dropping the oldest. */
  resize(len: number, hist: History): void {
    const v = this.vals;
    const want = Math.min(len, hist.held());
    for (let k = this.size; k < want; k++) {
      const x = hist.ago(k);
      const j = rank(v, this.size, x);
      v.copyWithin(j + 1, j, this.size);
      v[j] = x;
      this.size++;
    }
    for (let k = this.size - 1; k >= want; k--) {
      const j = rank(v, this.size, hist.ago(k));
      v.copyWithin(j, j + 1, this.size);
      this.size--;
    }
    this.len = len;
  }

  /** Smallest value of a non-empty window. */
  min(): number {
    return this.vals[0]!;
  }

  /** Median (mean of the two middle values when even) of a non-empty window. */
  median(): number {
    const m = this.size;
    const h = m >> 1;
    return m & 1 ? this.vals[h]! : (this.vals[h - 1]! + this.vals[h]!) / 2;
  }

  /** Drops ⌊0.3·m⌋ values from each end of a non-empty window and averages the rest. */
  trimmedMean(): number {
    const m = this.size;
    const drop = Math.floor(0.3 * m);
    // Four running partial sums, then the tail, in window.rs's `sum` order.
    const end = m - drop;
    const whole = drop + Math.floor((end - drop) / 4) * 4;
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    for (let i = drop; i < whole; i += 4) {
      a0 += this.vals[i]!;
      a1 += this.vals[i + 1]!;
      a2 += this.vals[i + 2]!;
      a3 += this.vals[i + 3]!;
    }
    let tail = 0;
    for (let i = whole; i < end; i++) tail += this.vals[i]!;
    return (a0 + a1 + (a2 + a3) + tail) / (end - drop);
  }
}

/**
 * Adaptive median as the original library adapts it (primary.rs `faithful_step`, reproduced
 * over its 2,000-value state): the median of all values until `max` have arrived; then, per
 * value x, |x − candidate| for the candidates m(step) (smaller), the current window
 * (middle) and m(step) while win + step ≤ max, else m(max − win − 1) (larger), with m(n) the
 * median of the newest n for n ≥ 2, the smallest of the last `max` for n = 1 and 0 below;
 * the window moves by one (down if the smaller is strictly best, else up if the larger
 * beats the middle), capped at `max`, and the forecast is the median over the new window.
 */
class FaithfulAdaptiveMedian {
  private readonly window: SortedWindow;
  private win: number;

  constructor(
    start: number,
    private readonly max: number,
    private readonly step: number,
  ) {
    this.win = start;
    this.window = new SortedWindow(start);
  }

  /** `hist` already holds `x`; `all` is the sorted window of the last `max` values and
   * `stepMedian` the median of the newest `step` values (read when `step` > 1). */
  observe(x: number, hist: History, all: SortedWindow, stepMedian: number): number {
    this.window.push(hist);
    if (hist.count < this.max) return all.median();
    const m = (n: number): number => {
      if (n === 1) return all.min();
      if (n < 1) return 0;
      return n === this.step ? stepMedian : hist.medianOfNewest(n);
    };
    const lo = Math.abs(x - m(this.step));
    const hi = Math.abs(
      x - m(this.win + this.step <= this.max ? this.step : this.max - this.win - 1),
    );
    const mid = Math.abs(x - this.window.median());
    let next = this.win;
    if (lo < mid && lo < hi) next--;
    else if (hi < mid) next++;
    next = Math.max(1, Math.min(next, this.max));
    if (next !== this.win) {
      this.win = next;
      this.window.resize(next, hist);
    }
    return this.window.median();
  }
}

/** Index of the first smallest of `row[from .. from + PRIMARIES)`, relative to `from`. */
function argminRow(row: Float64Array, from: number): number {
  let best = 0;
  let min = row[from]!;
  for (let j = 1; j < PRIMARIES; j++) {
    const v = row[from + j]!;
    if (v < min) {
      min = v;
      best = j;
    }
  }
  return best;
}

/** Index of the first smallest of `row`. */
function argmin(row: Float64Array): number {
  let best = 0;
  let min = row[0]!;
  for (let j = 1; j < row.length; j++) {
    const v = row[j]!;
    if (v < min) {
      min = v;
      best = j;
    }
  }
  return best;
}

/**
 * Whole-history and sliding-window squared and absolute errors of the 18 primaries, as the
 * original keeps them. Rows of PRIMARIES values, one per step or window, in flat arrays.
 */
class ErrorTable {
  readonly scored = new Float64Array(PRIMARIES);
  readonly cumSe = new Float64Array(PRIMARIES);
  readonly cumAe = new Float64Array(PRIMARIES);
  /** Running totals after each of the last RING steps (`totals[i % RING]` after step i). */
  private readonly totalsSe = new Float64Array(RING * PRIMARIES);
  private readonly totalsAe = new Float64Array(RING * PRIMARIES);
  private steps = 0;
  readonly winSe = new Float64Array(WINDOWS.length * PRIMARIES);
  readonly winAe = new Float64Array(WINDOWS.length * PRIMARIES);
  /** Every primary has a full longest window of errors. */
  steady = false;
  private readonly scratch = new Float64Array(PRIMARIES);

  /**
   * Records one step of errors (measurement minus forecast). At the first value only the
   * smoothers had a forecast, the original's 0; the others get no error that step. Window
   * sums are the running totals now minus those `w` steps before, as the original forms
   * them (rounding included: it decides ties between equal recent errors).
   */
  record(err: Float64Array, smoothersOnly: boolean): void {
    const { totalsSe, totalsAe, winSe, winAe, cumSe, cumAe } = this;
    for (let j = 0; j < PRIMARIES; j++) {
      const scoredNow = !smoothersOnly || (j >= FIRST_SMOOTHER && j < SMOOTHERS_END);
      const e = scoredNow ? err[j]! : 0;
      if (scoredNow) this.scored[j]!++;
      cumSe[j]! += e * e;
      cumAe[j]! += Math.abs(e);
    }
    this.steps++;
    const row = (this.steps % RING) * PRIMARIES;
    totalsSe.set(cumSe, row);
    totalsAe.set(cumAe, row);
    for (let wi = 0; wi < WINDOWS.length; wi++) {
      const at = wi * PRIMARIES;
      const w = WINDOWS[wi]!;
      const old = this.steps >= w ? ((this.steps - w) % RING) * PRIMARIES : -1;
      for (let j = 0; j < PRIMARIES; j++) {
        winSe[at + j] = cumSe[j]! - (old < 0 ? 0 : totalsSe[old + j]!);
        winAe[at + j] = cumAe[j]! - (old < 0 ? 0 : totalsAe[old + j]!);
      }
    }
    if (!this.steady) {
      let all = true;
      for (let j = 0; j < PRIMARIES; j++) all &&= this.scored[j]! >= LONGEST;
      this.steady = all;
    }
  }

  /**
   * The primary with the lowest mean error over the whole history (`wi` < 0) or over window
   * `wi`; primaries without errors rank as infinite, ties go to the lower index.
   */
  best(squared: boolean, wi: number): number {
    if (this.steady) {
      if (wi >= 0) return argminRow(squared ? this.winSe : this.winAe, wi * PRIMARIES);
      const cum = squared ? this.cumSe : this.cumAe;
      for (let j = 0; j < PRIMARIES; j++) this.scratch[j] = cum[j]! / this.scored[j]!;
      return argminRow(this.scratch, 0);
    }
    let best = 0;
    let min = Infinity;
    for (let j = 0; j < PRIMARIES; j++) {
      const n = this.scored[j]!;
      let score = Infinity;
      if (n > 0 && wi < 0) {
        score = (squared ? this.cumSe : this.cumAe)[j]! / n;
      } else if (n > 0) {
        // The original compares raw window totals, full or not.
        score = (squared ? this.winSe : this.winAe)[wi * PRIMARIES + j]!;
      }
      if (score < min) {
        min = score;
        best = j;
      }
    }
    return best;
  }
}

/** Errors of one forecast: count and sums, as the core crate (nowcast-core)'s `Accum`. */
export interface Accum {
  n: number;
  sumSe: number;
  sumAe: number;
}

function add(acc: Accum, e: number): void {
  acc.n++;
  acc.sumSe += e * e;
  acc.sumAe += Math.abs(e);
}

/** The NWS bank in faithful mode: 18 primaries, 16 selectors, the reported forecasts. */
export class NwsFaithfulBank {
  private readonly hist = new History();
  private readonly median31 = new SortedWindow(31);
  private readonly median5 = new SortedWindow(5);
  private readonly window51 = new SortedWindow(51);
  private readonly window21 = new SortedWindow(21);
  private readonly adaptive5to21 = new FaithfulAdaptiveMedian(10, 21, 1);
  private readonly adaptive21to51 = new FaithfulAdaptiveMedian(30, 51, 5);
  private readonly sliding31 = new SlidingSum(31);
  private readonly sliding5 = new SlidingSum(5);
  private sum = 0;
  /** Each primary's forecast for the next value; the smoothers' start at the original's 0. */
  private readonly fc = new Float64Array(PRIMARIES);
  private readonly err = new Float64Array(PRIMARIES);
  private readonly errors = new ErrorTable();
  /** Each selector's primary, and its own cumulative squared and absolute errors. */
  private readonly picks = new Int32Array(SELECTORS);
  private readonly selSe = new Float64Array(SELECTORS);
  private readonly selAe = new Float64Array(SELECTORS);
  private mseValue = 0;
  private mseMethod = -1;
  private maeValue = 0;
  private maeMethod = 0;
  private readonly mseAcc: Accum = { n: 0, sumSe: 0, sumAe: 0 };
  private readonly maeAcc: Accum = { n: 0, sumSe: 0, sumAe: 0 };
  /** The original charges its MAE forecast |0 − x₁| at the first value. */
  private firstMaeCharge = 0;
  private readonly oracleAcc: Accum = { n: 0, sumSe: 0, sumAe: 0 };

  /** Number of values seen. */
  get count(): number {
    return this.hist.count;
  }

  /** Feeds one measurement; throws on NaN, ±Infinity and magnitudes above 1e100. */
  update(x: number): void {
    if (!Number.isFinite(x)) throw new RangeError(`${x} is not a finite number`);
    if (Math.abs(x) > MAX_MAGNITUDE) throw new RangeError(`${x} is out of range (|x| ≤ 1e100)`);
    const first = this.hist.count === 0;
    const { fc, err } = this;

    // As the original updates: the reported forecasts, then the selectors.
    if (first) {
      this.firstMaeCharge = Math.abs(x);
    } else {
      add(this.mseAcc, x - this.mseValue);
      add(this.maeAcc, x - this.maeValue);
      for (let s = 0; s < SELECTORS; s++) {
        const e = x - fc[this.picks[s]!]!;
        this.selSe[s]! += e * e;
        this.selAe[s]! += Math.abs(e);
      }
    }
    // Step 3: the primaries that had a forecast, and the oracle (best primary this step).
    let best = Infinity;
    for (let j = 0; j < PRIMARIES; j++) {
      const e = x - fc[j]!;
      err[j] = e;
      const had = !first || (j >= FIRST_SMOOTHER && j < SMOOTHERS_END);
      if (had && Math.abs(e) < Math.abs(best)) best = e;
    }
    this.errors.record(err, first);
    if (best !== Infinity) add(this.oracleAcc, best);
    // Steps 4–5: append, then every primary's next forecast.
    const hist = this.hist;
    hist.push(x);
    this.median31.push(hist);
    this.median5.push(hist);
    this.window51.push(hist);
    this.window21.push(hist);
    const n = hist.count;
    fc[0] = x;
    this.sum += x;
    fc[1] = this.sum / n;
    for (let g = 0; g < GAINS.length; g++) {
      const pred = fc[FIRST_SMOOTHER + g]!;
      fc[FIRST_SMOOTHER + g] = first ? x : pred + GAINS[g]! * (x - pred);
    }
    fc[10] = this.median31.median();
    fc[11] = this.median5.median();
    fc[12] = this.sliding31.push(x, hist);
    fc[13] = this.sliding5.push(x, hist);
    fc[14] = this.median31.trimmedMean();
    fc[15] = this.window51.trimmedMean();
    fc[16] = this.adaptive5to21.observe(x, hist, this.window21, x);
    fc[17] = this.adaptive21to51.observe(x, hist, this.window51, fc[11]!);
    this.choose();
  }

  /** Feeds every value; throws at the first bad one, naming its index (earlier ones stay). */
  updateAll(xs: Float64Array): void {
    for (let i = 0; i < xs.length; i++) {
      try {
        this.update(xs[i]!);
      } catch (e) {
        throw new RangeError(`value at index ${i}: ${(e as Error).message}`);
      }
    }
  }

  /** Every selector picks a primary; the reported forecasts are the selectors' with the
   * lowest own cumulative squared and absolute errors (ties to the lower index). */
  private choose(): void {
    const { errors, picks } = this;
    picks[0] = errors.best(true, -1);
    picks[1] = errors.best(false, -1);
    for (let wi = 0; wi < WINDOWS.length; wi++) {
      picks[2 + 2 * wi] = errors.best(true, wi);
      picks[3 + 2 * wi] = errors.best(false, wi);
    }
    this.mseMethod = picks[argmin(this.selSe)]!;
    this.maeMethod = picks[argmin(this.selAe)]!;
    this.mseValue = this.fc[this.mseMethod]!;
    this.maeValue = this.fc[this.maeMethod]!;
  }

  /** The reported forecasts for the next value; undefined before the first value. */
  forecast(): NwsForecast | undefined {
    if (this.mseMethod < 0) return undefined;
    const mse = this.mseAcc;
    const mae = this.maeAcc;
    return {
      mse: {
        value: this.mseValue,
        method: this.mseMethod,
        error: mse.n === 0 ? 0 : mse.sumSe / mse.n,
      },
      mae: {
        value: this.maeValue,
        method: this.maeMethod,
        error: (mae.sumAe + this.firstMaeCharge) / (mae.n + 1),
      },
    };
  }

  /** Primary `j`'s forecast for the next value; undefined before the first value. */
  primaryForecast(j: number): number | undefined {
    return this.hist.count === 0 ? undefined : this.fc[j];
  }

  /** Whole-history errors of primary `j`. */
  primaryAccum(j: number): Accum {
    const t = this.errors;
    return { n: t.scored[j]!, sumSe: t.cumSe[j]!, sumAe: t.cumAe[j]! };
  }

  /** Errors of the oracle: the best primary at each step, a lower bound for any selector. */
  oracleAccum(): Accum {
    return { ...this.oracleAcc };
  }
}
