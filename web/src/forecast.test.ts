import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { ecdf, histogram, loadForecasting, methods, Series } from "./forecast";
import { goldenMismatches, parseGolden } from "./golden";

const testdata = (name: string) =>
  readFileSync(new URL(`../../core/testdata/${name}`, import.meta.url), "utf8");
const golden = parseGolden(testdata("nws-golden-trace.csv"));
const goldenLong = parseGolden(
  testdata("nws-golden-long.csv"),
  testdata("nws-golden-long-input.txt"),
);

beforeAll(async () => {
  const wasm = readFileSync(new URL("../../core/pkg/nowcast_core_bg.wasm", import.meta.url));
  await loadForecasting(wasm);
});

describe("the real the core crate (nowcast-core) module", () => {
  it("reproduces every golden number of the original NWS library in faithful mode", () => {
    const s = Series.create("faithful");
    const wrong = goldenMismatches(
      golden,
      (x) => s.update(x),
      () => s.forecast(),
    );
    expect(wrong).toEqual([]);
    expect(s.count).toBe(golden.rows.length);
  });

  it("reproduces every column of the original's state over 2,000 values in faithful mode", () => {
    // The long trace: every primary's own forecast (the adaptive medians adapt here), the
    // reported forecasts, their errors and methods, to 1e-9 relative.
    const s = Series.withoutTimeouts("faithful");
    const wrong = goldenMismatches(
      goldenLong,
      (x) => s.update(x),
      () => s.forecast(),
      { tolerance: 1e-9, primaries: () => s.table().map((r) => r.forecast) },
    );
    expect(wrong.slice(0, 10)).toEqual([]);
    expect(s.count).toBe(goldenLong.rows.length);
    expect(goldenLong.rows.length).toBe(1999);
    expect(goldenLong.rows[0]!.primaries!.length).toBe(18);
    s.dispose();
  });

  it("gives the same forecasts from a batch as from single updates", () => {
    const a = Series.create();
    const b = Series.create();
    const xs = Float64Array.from({ length: 500 }, (_, i) => 20 + 5 * Math.sin(i / 7) + (i % 3));
    a.updateBatch(xs);
    xs.forEach((x) => b.update(x));
    expect(a.forecast()).toEqual(b.forecast());
    expect(a.table()).toEqual(b.table());
  });

  it("forecasts the same without timeout rules, which then answer undefined", () => {
    const a = Series.create("faithful");
    const b = Series.withoutTimeouts("faithful");
    const xs = [10, 12, 11, 13, 50, 12, 11, 12, 13, 12];
    a.updateBatch(xs);
    b.updateBatch(xs);
    expect(b.forecast()).toEqual(a.forecast());
    expect(a.timeout("rfc6298")).toBeGreaterThan(0);
    expect(b.timeout("rfc6298")).toBeUndefined();
    expect(b.timeoutOutcomes()).toEqual([]);
  });

  it("refuses NaN and infinities with a clear error and keeps earlier values", () => {
    const s = Series.create();
    expect(() => s.update(Number.NaN)).toThrow(/not a finite number/);
    expect(() => s.update(Number.POSITIVE_INFINITY)).toThrow(/not a finite number/);
    expect(() => s.updateBatch([1, 2, Number.NaN, 4])).toThrow(/index 2/);
    expect(s.count).toBe(2);
    expect(() => Series.create("bogus" as "improved")).toThrow(/unknown mode/);
  });

  it("saves and restores to bit-identical next forecasts", () => {
    const s = Series.create();
    s.updateBatch([10, 12, 11, 13, 50, 12, 11]);
    const r = Series.restore(s.save());
    for (const x of [12, 13, 12, 9.5]) {
      s.update(x);
      r.update(x);
      expect(r.forecast()).toEqual(s.forecast());
    }
    expect(() => Series.restore('{"format":"nowcast.series-state","version":99}')).toThrow(
      /version 99/,
    );
  });

  it("reports a table row for every forecaster, timeouts and statistics", () => {
    const s = Series.create();
    s.setTimeoutBounds(1, 1000, 5);
    s.updateBatch([10, 11, 10, 12, 10, 11, 10, 13]);
    const table = s.table();
    expect(table.map((r) => r.id)).toEqual(methods().map((m) => m.id));
    expect(table[0]).toMatchObject({ id: "last_value", name: "Last Value" });
    expect(s.timeout("nws")).toBeGreaterThan(10);
    expect(s.timedOut(100)).toBe(105);
    expect(s.summary().timeouts).toBe(1);
    expect(s.timeoutOutcomes().map((o) => o.rule)).toContain("windowed_k2_w20");
    const h = histogram([0, 1, 2, 3, 4], 100)!;
    expect(h.counts.length).toBe(100);
    expect(h.counts.reduce((a, b) => a + b)).toBe(5);
    expect(ecdf([2, 1, 2])).toEqual([
      { x: 1, p: 1 / 3 },
      { x: 2, p: 1 },
    ]);
    expect(s.forecast()!.mse.methodId).toMatch(/^[a-z0-9_]+$/);
  });
});
