import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting, Series } from "../src/forecast";
import { goldenMismatches, parseGolden } from "../src/golden";
import { NwsFaithfulBank } from "./nws-faithful";
import { benchSeries } from "./series";

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

const close = (a: number, b: number, rel: number) =>
  Math.abs(a - b) <= rel * Math.max(1, Math.abs(a), Math.abs(b));

describe("the TypeScript faithful NWS bank", () => {
  it("reproduces every golden number of the original NWS library", () => {
    const bank = new NwsFaithfulBank();
    expect(bank.forecast()).toBeUndefined();
    const wrong = goldenMismatches(
      golden,
      (x) => bank.update(x),
      () => bank.forecast(),
    );
    expect(wrong).toEqual([]);
    expect(bank.count).toBe(golden.rows.length);
  });

  it("reproduces every column of the original's state over 2,000 values", () => {
    const bank = new NwsFaithfulBank();
    const wrong = goldenMismatches(
      goldenLong,
      (x) => bank.update(x),
      () => bank.forecast(),
      {
        tolerance: 1e-9,
        primaries: () => Array.from({ length: 18 }, (_, j) => bank.primaryForecast(j)),
      },
    );
    expect(wrong.slice(0, 10)).toEqual([]);
  });

  it("charges only the smoothers, for starting at 0, on a constant series", () => {
    const bank = new NwsFaithfulBank();
    for (let i = 0; i < 6; i++) bank.update(100);
    for (let j = 0; j < 18; j++) {
      const acc = bank.primaryAccum(j);
      const smoother = j >= 2 && j <= 9;
      expect(acc.n).toBe(smoother ? 6 : 5);
      expect(acc.sumSe / acc.n).toBeCloseTo(smoother ? 1666.67 : 0, 2);
      expect(bank.primaryForecast(j)).toBe(100);
    }
  });

  it("agrees with the WASM faithful bank at every step of a series with spikes", () => {
    const xs = benchSeries(4000);
    const wasm = Series.create("faithful");
    const bank = new NwsFaithfulBank();
    for (let i = 0; i < xs.length; i++) {
      wasm.update(xs[i]!);
      bank.update(xs[i]!);
      const w = wasm.forecast()!;
      const t = bank.forecast()!;
      const at = `step ${i}`;
      expect(t.mse.method, at).toBe(w.mse.method);
      expect(t.mae.method, at).toBe(w.mae.method);
      for (const [a, b] of [
        [t.mse.value, w.mse.value],
        [t.mae.value, w.mae.value],
        [t.mse.error, w.mse.error],
        [t.mae.error, w.mae.error],
      ] as const) {
        expect(close(a, b, 1e-9), `${at}: ${a} vs ${b}`).toBe(true);
      }
      if (i % 250 === 0) {
        for (const row of wasm.table()) {
          expect(close(bank.primaryForecast(row.index)!, row.forecast!, 1e-9), at).toBe(true);
          expect(bank.primaryAccum(row.index).n, at).toBe(row.n);
        }
      }
    }
    const oracle = bank.oracleAccum();
    const expected = wasm.summary().oracle;
    expect(oracle.n).toBe(expected.n);
    expect(close(oracle.sumSe / oracle.n, expected.mse, 1e-9)).toBe(true);
    expect(close(oracle.sumAe / oracle.n, expected.mae, 1e-9)).toBe(true);
    wasm.dispose();
  });

  it("refuses values the WASM bank refuses, keeping the earlier ones", () => {
    const bank = new NwsFaithfulBank();
    expect(() => bank.update(Number.NaN)).toThrow(/not a finite number/);
    expect(() => bank.updateAll(Float64Array.of(1, 2, 1e101))).toThrow(/index 2/);
    expect(bank.count).toBe(2);
  });
});
