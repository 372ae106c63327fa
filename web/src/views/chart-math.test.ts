import { describe, expect, it } from "vitest";
import {
  AXIS_PAD_PX,
  AXIS_SLACK,
  paceOf,
  thin,
  WindowExtreme,
  xAxis,
  Y_SHRINK,
  yAxisHolds,
  yLimits,
} from "./chart-math";

/** A deterministic pseudo-random sequence in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe("WindowExtreme", () => {
  it("agrees with a scan of the window as values come and go", () => {
    const r = random(7);
    const max = new WindowExtreme((a, b) => a > b);
    const min = new WindowExtreme((a, b) => a < b);
    const values: number[] = [];
    let gone = 0;
    for (let n = 0; n < 5000; n++) {
      // Ties on purpose: values from a small set.
      const v = Math.floor(r() * 20);
      values.push(v);
      max.push(n, v);
      min.push(n, v);
      // A window that grows to 300 values, then slides; sometimes several leave at once.
      const keep = n < 1000 ? 300 : 50 + Math.floor(r() * 250);
      while (n + 1 - gone > keep) gone++;
      max.dropBelow(gone);
      min.dropBelow(gone);
      const window = values.slice(gone);
      expect(max.value).toBe(Math.max(...window));
      expect(min.value).toBe(Math.min(...window));
    }
  });

  it("is empty when every value has left", () => {
    const max = new WindowExtreme((a, b) => a > b);
    expect(max.value).toBeUndefined();
    max.push(0, 3);
    max.push(1, 1);
    max.dropBelow(2);
    expect(max.value).toBeUndefined();
  });
});

describe("xAxis", () => {
  const width = 500;

  it("holds the data, ends on a column boundary, and is width columns long", () => {
    const a = xAxis(1_000_000, 1_100_000, width, undefined);
    expect(a.min).toBeLessThanOrEqual(1_000_000);
    expect(a.max).toBeGreaterThanOrEqual(1_100_000);
    // The newest point's mark is whole: a few columns of axis past it, then a boundary.
    expect(a.max - 1_100_000).toBeGreaterThanOrEqual(AXIS_PAD_PX * a.perPx);
    expect(a.max - 1_100_000).toBeLessThan((AXIS_PAD_PX + 1) * a.perPx);
    expect(Math.abs(a.max / a.perPx - Math.round(a.max / a.perPx))).toBeLessThan(1e-6);
    expect((a.max - a.min) / a.perPx).toBeCloseTo(width, 6);
    // At most the slack is left empty at the left.
    expect(1_000_000 - a.min).toBeLessThanOrEqual(AXIS_SLACK * (a.max - a.min));
  });

  it("keeps its column duration while a full window slides, moving whole columns", () => {
    // 10,000 points a second apart, the oldest leaving as each new one comes.
    let axis = xAxis(0, 10_000_000, width, undefined);
    const per = axis.perPx;
    let moves = 0;
    for (let i = 1; i <= 2000; i++) {
      const next = xAxis(i * 1000, 10_000_000 + i * 1000, width, axis.perPx);
      expect(next.perPx).toBe(per);
      expect(next.min).toBeLessThanOrEqual(i * 1000);
      if (next.max !== axis.max) {
        moves++;
        expect((next.max - axis.max) / per).toBeCloseTo(1, 6);
      }
      axis = next;
    }
    // 2,000 s over columns of ~20 s: about 100 moves, not 2,000 relayouts.
    expect(moves).toBeGreaterThan(90);
    expect(moves).toBeLessThan(110);
  });

  it("takes a new duration when the data outgrows the axis or leaves too much empty", () => {
    const a = xAxis(0, 100_000, width, undefined);
    const grown = xAxis(0, 200_000, width, a.perPx);
    expect(grown.perPx).toBeGreaterThan(a.perPx);
    expect(grown.min).toBeLessThanOrEqual(0);
    const shrunk = xAxis(150_000, 200_000, width, grown.perPx);
    expect(shrunk.perPx).toBeLessThan(grown.perPx);
    expect(shrunk.min).toBeLessThanOrEqual(150_000);
  });

  it("gives a single point a second of axis", () => {
    const a = xAxis(5000, 5000, width, undefined);
    expect(a.max - a.min).toBeGreaterThanOrEqual(1000);
    expect(a.min).toBeLessThanOrEqual(5000);
    expect(a.max).toBeGreaterThanOrEqual(5000);
  });
});

describe("thin", () => {
  it("keeps each column's lowest and highest point in order, and the newest", () => {
    const points = [
      { x: 0, y: 5 },
      { x: 1, y: 9 },
      { x: 2, y: 1 },
      { x: 3, y: 4 },
      { x: 10, y: 2 },
      { x: 11, y: 2 },
      { x: 20, y: 7 },
      { x: 21, y: 6 },
    ];
    const out = thin(points, (x) => Math.floor(x / 10));
    expect(out).toEqual([
      { x: 1, y: 9 },
      { x: 2, y: 1 },
      { x: 10, y: 2 },
      { x: 20, y: 7 },
      { x: 21, y: 6 },
    ]);
    // The caller's objects, in a new array.
    expect(out[0]).toBe(points[1]);
    expect(thin([], (x) => x)).toEqual([]);
  });
});

describe("yAxisHolds", () => {
  const axis = { min: 0, max: 3 };
  const laid = { lo: 0, hi: 2.9 };

  it("holds data inside it whose span has not shrunk much", () => {
    expect(yAxisHolds(axis, laid, 0, 2.9)).toBe(true);
    expect(yAxisHolds(axis, laid, 0.1, 2.5)).toBe(true);
  });

  it("gives way to a point outside it", () => {
    expect(yAxisHolds(axis, laid, 0, 3.01)).toBe(false);
    expect(yAxisHolds(axis, laid, -0.01, 2)).toBe(false);
  });

  it("gives way when the data's span shrinks below Y_SHRINK of the span it was made for", () => {
    expect(yAxisHolds(axis, laid, 0, Y_SHRINK * 2.9 + 0.001)).toBe(true);
    expect(yAxisHolds(axis, laid, 0, Y_SHRINK * 2.9 - 0.001)).toBe(false);
  });

  it("holds flat data as long as it stays flat inside it", () => {
    const flat = { lo: 1, hi: 1 };
    expect(yAxisHolds({ min: 0, max: 2 }, flat, 1, 1)).toBe(true);
    expect(yAxisHolds({ min: 0, max: 2 }, flat, 0.5, 1.5)).toBe(true);
  });

  it("compares no data only with no data", () => {
    const none = { lo: undefined, hi: undefined };
    expect(yAxisHolds(axis, none, undefined, undefined)).toBe(true);
    expect(yAxisHolds(axis, none, 0, 1)).toBe(false);
    expect(yAxisHolds(axis, laid, undefined, undefined)).toBe(false);
  });
});

describe("the y axis", () => {
  it("holds the data and a margin, not below zero for data that are not", () => {
    expect(yLimits(10, 20)).toEqual({ min: 8.5, max: 21.5 });
    expect(yLimits(0.5, 20)).toEqual({ min: 0, max: 20 + 19.5 * 0.15 });
    expect(yLimits(-2, 2)).toEqual({ min: -2.6, max: 2.6 });
    expect(yLimits(4, 4)).toEqual({ min: 3.4, max: 4.6 });
    expect(yLimits(0, 0)).toEqual({ min: 0, max: 1 });
  });
});

describe("paceOf", () => {
  it("puts the graphs whose next forecast stands further ahead than the period on their own axis", () => {
    // RTT, jitter and a mirror's RTT each period (2 s); download and upload spaced by the
    // budget (8 and 7 min); a graph without a forecast yet goes with the period.
    expect(paceOf([2000, 2000, 480_000, 420_000, undefined, 2000])).toEqual([
      "period",
      "period",
      "spaced",
      "spaced",
      "period",
      "period",
    ]);
    // Nothing spaced: one axis for all, as before the budget spaced anything.
    expect(paceOf([1000, 1000, 1000])).toEqual(["period", "period", "period"]);
    expect(paceOf([undefined])).toEqual(["period"]);
    expect(paceOf([])).toEqual([]);
  });
});
