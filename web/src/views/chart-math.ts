// The arithmetic of the graphs (chart-view.ts), apart from the canvas: which points a plot of
// a given width can show, where the x axis goes, and the extremes of a sliding window.

export interface Point {
  x: number;
  y: number;
}

/**
 * The most extreme of a window of values that are added at the back and leave from the front
 * (a monotonic queue, O(1) amortised a value): the y axis's extremes over 10,000 points
 * without a pass over them per point. Values are numbered by the caller, in order.
 */
export class WindowExtreme {
  private readonly at: number[] = [];
  private readonly values: number[] = [];
  private head = 0;

  /** `beats(a, b)`: whether a is more extreme than b (`>` for the maximum). */
  constructor(private readonly beats: (a: number, b: number) => boolean) {}

  /** Adds value `v` numbered `n` (greater than every number before it). */
  push(n: number, v: number): void {
    // A value that the new one beats or equals can never again be the extreme.
    while (this.values.length > this.head && !this.beats(this.values.at(-1)!, v)) {
      this.values.pop();
      this.at.pop();
    }
    this.at.push(n);
    this.values.push(v);
  }

  /** Forgets the values numbered below `n`. */
  dropBelow(n: number): void {
    while (this.head < this.at.length && this.at[this.head]! < n) this.head++;
    if (this.head >= 1024 && 2 * this.head >= this.at.length) {
      this.at.splice(0, this.head);
      this.values.splice(0, this.head);
      this.head = 0;
    }
  }

  /** The extreme of the window, or undefined when it is empty. */
  get value(): number | undefined {
    return this.head < this.values.length ? this.values[this.head] : undefined;
  }
}

/**
 * What a plot can show of `points` (sorted by x) in columns numbered by `column`: in each
 * column the lowest and the highest point, in x order, and always the newest point. A spike
 * keeps its column however many points share it. The points are the caller's objects
 * (tooltips read them); the array is new, so Chart.js never holds (and patches) the caller's.
 */
export function thin<T extends Point>(points: readonly T[], column: (x: number) => number): T[] {
  const out: T[] = [];
  let col = NaN;
  let lo = 0;
  let hi = 0;
  const flush = () => {
    if (Number.isNaN(col)) return;
    if (lo === hi) out.push(points[lo]!);
    else out.push(points[Math.min(lo, hi)]!, points[Math.max(lo, hi)]!);
  };
  for (let i = 0; i < points.length; i++) {
    const c = column(points[i]!.x);
    if (c !== col) {
      flush();
      col = c;
      lo = hi = i;
    } else {
      const y = points[i]!.y;
      if (y < points[lo]!.y) lo = i;
      if (y > points[hi]!.y) hi = i;
    }
  }
  flush();
  const last = points.at(-1);
  if (last !== undefined && out.at(-1) !== last) out.push(last);
  return out;
}

/** The share of the plot's width the x axis may leave empty at the left before it is laid out
 *  again with a new column duration (the data grows into it). */
export const AXIS_SLACK = 0.03;

/** Columns (CSS px) the x axis runs on past the newest point, so that its mark is whole. */
export const AXIS_PAD_PX = 4;

/**
 * Where the x axis goes for data from `x0` to `x1` on a plot `width` CSS px wide, given the
 * column duration in use (ms per CSS px, or undefined): the axis ends AXIS_PAD_PX columns
 * after the first column boundary at or after `x1` and is `width` columns long. The duration is kept while the data
 * fits with at most `slack` of the width empty at the left, so the axis moves a whole column
 * at a time; otherwise a new one leaves half the slack empty.
 */
export function xAxis(
  x0: number,
  x1: number,
  width: number,
  perPx: number | undefined,
  slack = AXIS_SLACK,
): { perPx: number; min: number; max: number } {
  const place = (per: number) => {
    const max = (Math.ceil(x1 / per) + AXIS_PAD_PX) * per;
    return { perPx: per, min: max - width * per, max };
  };
  if (perPx !== undefined && perPx > 0) {
    const a = place(perPx);
    if (x0 >= a.min && x0 - a.min <= slack * (a.max - a.min)) return a;
  }
  // The pad and one column of rounding at the right, half the slack at the left.
  const span = Math.max(x1 - x0, 1000);
  return place(span / Math.max(1, width * (1 - slack / 2) - 1 - AXIS_PAD_PX));
}

/** A y axis is laid out again when the span of the data shrinks below this share of the span
 *  it was laid out for (a spike scrolling off), so it may stay up to 1/0.8 of what the data
 *  needs meanwhile; a point outside it is laid out at once. */
export const Y_SHRINK = 0.8;

/**
 * Whether a y axis from `axis.min` to `axis.max`, laid out for data from `laid.lo` to
 * `laid.hi`, still serves data from `lo` to `hi`: it holds them, and their span has not shrunk
 * below Y_SHRINK of the span it was laid out for.
 */
export function yAxisHolds(
  axis: { min: number; max: number },
  laid: { lo: number | undefined; hi: number | undefined },
  lo: number | undefined,
  hi: number | undefined,
): boolean {
  if (lo === undefined || hi === undefined || laid.lo === undefined || laid.hi === undefined) {
    return lo === laid.lo && hi === laid.hi;
  }
  if (lo < axis.min || hi > axis.max) return false;
  return hi - lo >= Y_SHRINK * (laid.hi - laid.lo);
}

/** The margin a y axis leaves above and below its data: a share of their span (of the value
 *  when they are all one). */
export const Y_MARGIN = 0.15;

/**
 * The y axis for data from `lo` to `hi`: their span and a margin of Y_MARGIN of it each way,
 * never below zero for data that are not. What lies outside (the band's far ends, which may
 * be much wider than the data) is cut at the plot's edge.
 */
export function yLimits(lo: number, hi: number): { min: number; max: number } {
  const pad = (hi - lo) * Y_MARGIN || Math.abs(hi) * Y_MARGIN || 1;
  return { min: lo >= 0 ? Math.max(0, lo - pad) : lo - pad, max: hi + pad };
}

/** The live graphs measured each period, and those measured less often (a longer step). */
export type Pace = "period" | "spaced";

/**
 * The pace of each graph, by the step of its next forecast (undefined: none yet): "spaced"
 * when that step is longer than the shortest of them (a bandwidth series the budget spaces),
 * else "period".
 */
export function paceOf(steps: readonly (number | undefined)[]): Pace[] {
  const shortest = Math.min(...steps.filter((s) => s !== undefined));
  return steps.map((s) => (s !== undefined && s > shortest ? "spaced" : "period"));
}
