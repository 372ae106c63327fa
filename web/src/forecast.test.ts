import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  coreErrorKnown,
  ecdf,
  histogram,
  loadForecasting,
  loadReader,
  methods,
  parseRecord,
  ProbedSeries,
  rankSites,
  Series,
  type ProbeObservation,
  type ProbedSeriesOptions,
  toLine,
  type SiteForecast,
} from "./forecast";
import { goldenMismatches, parseGolden } from "./golden";
import type { Probe, Record } from "./record";

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
  await loadReader(
    readFileSync(new URL("../../core/pkg/reader/nowcast_reader_bg.wasm", import.meta.url)),
  );
});

describe("the real nowcast-core module", () => {
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

const RTT: ProbedSeriesOptions = { metric: "rtt", source: "browser", to: "h", periodMs: 1000 };
const DOWN: ProbedSeriesOptions = { metric: "bandwidth_down", source: "browser", to: "h" };
const T0 = 1_700_000_000_000;

/** A history with values, timeouts, an overrun and a failure, as a page meets them. */
function history(s: ProbedSeries, n = 60): Record[] {
  const out: Record[] = [];
  for (let i = 0; i < n; i++) {
    const timeoutMs = s.timeoutMs()!;
    const durationMs = 100 + ((i * 37) % 23) * 7.5;
    const probe: Probe = { transport: "websocket", payload_bytes: 65536 };
    const base = { timestampMs: T0 + i * 1000, timeoutMs, probe };
    const o: ProbeObservation =
      i % 13 === 5
        ? { ...base, status: "timeout", durationMs: timeoutMs + 0.25 }
        : i % 13 === 7
          ? { ...base, status: "ok", value: 9, durationMs: timeoutMs * 2 }
          : i % 13 === 9
            ? { ...base, status: "error", error: "reset" }
            : { ...base, status: "ok", value: (8e3 / durationMs) * (1 + i / 100), durationMs };
    out.push(s.observe(o).record);
  }
  return out;
}

describe("a probed series in the shared core", () => {
  it("says a forecast's error is unknown after one value, known from the second", () => {
    expect(coreErrorKnown(1, 0)).toBe(false);
    expect(coreErrorKnown(2, 0)).toBe(true);
    expect(coreErrorKnown(1, 0.5)).toBe(true);
    const s = ProbedSeries.create({ metric: "rtt", kind: "statistic", source: "import", to: "x" });
    const next = s.observeValues([
      { t: 0, value: 10 },
      { t: 1, value: 10 },
      { t: 2, value: 12 },
    ]);
    expect(next.map((f) => f?.errorKnown)).toEqual([false, true, true]);
    expect(next[1]!.error).toBe(0);
  });

  it("starts at its profile's initial timeout and records each probe in the schema's form", () => {
    const s = ProbedSeries.create(RTT);
    expect(s.timeoutMs()).toBe(3000);
    const first = s.observe({
      timestampMs: T0,
      status: "ok",
      value: 10,
      durationMs: 10,
      timeoutMs: 3000,
    });
    expect(first.record.forecast).toBeUndefined();
    expect(first.record).toMatchObject({ metric: "rtt", unit: "ms", seq: 0, period_ms: 1000 });
    expect(first.state.next?.value).toBe(10);
    const second = s.observe({
      timestampMs: T0 + 1,
      status: "ok",
      value: 12,
      durationMs: 12,
      timeoutMs: 3000,
    });
    expect(second.record.forecast).toMatchObject({ value: 10, selector: "mse", error: 0 });
    expect(second.record).toMatchObject({ value: 12, seq: 1, to: "h" });
    expect(second.state).toMatchObject({ count: 2, timeouts: 0, seq: 2, mae: 2 });
    for (const r of [first.record, second.record]) expect(parseRecord(toLine(r))).toEqual(r);
    expect(Array.from(s.errors())).toEqual([2]);
    expect(ProbedSeries.create(DOWN).timeoutMs()).toBe(15_000);
    expect(ProbedSeries.create({ ...RTT, metric: "loss" }).timeoutMs()).toBeUndefined();
    expect(ProbedSeries.create({ ...RTT, floorMs: 5, initialMs: 50 }).timeoutMs()).toBe(50);
    expect(() => ProbedSeries.create({ ...RTT, floorMs: 20, ceilingMs: 10 })).toThrow(/floor/);
    s.dispose();
  });

  it("learns a timeout within its bounds: a loopback RTT's is the floor", () => {
    const s = ProbedSeries.create(RTT);
    for (let i = 0; i < 20; i++) {
      const rtt = 5 + (i % 3);
      s.observe({ timestampMs: T0 + i, status: "ok", value: rtt, durationMs: rtt });
    }
    expect(s.timeoutMs()).toBe(1000);
    s.dispose();
  });

  it("feeds a timed-out round trip back as elapsed + penalty, and counts it", () => {
    const s = ProbedSeries.create(RTT);
    s.observe({ timestampMs: T0, status: "ok", value: 5, durationMs: 5, timeoutMs: 3000 });
    const e = s.observe({
      timestampMs: T0 + 1,
      status: "timeout",
      durationMs: 3000,
      timeoutMs: 3000,
    });
    expect(e.record).toMatchObject({ status: "timeout", value: null, timeout_ms: 3000 });
    expect(e.state).toMatchObject({ count: 2, timeouts: 1 });
    // The bank saw 3000 + 1000 ms, so the next forecast moved up towards it.
    expect(e.state.next!.value).toBeGreaterThan(5);
    expect(parseRecord(toLine(e.record))).toEqual(e.record);
    s.dispose();
  });

  it("keeps a rate's durations apart: its timeout follows the probe time", () => {
    const s = ProbedSeries.create(DOWN);
    for (let i = 0; i < 10; i++) {
      s.observe({ timestampMs: T0 + i, status: "ok", value: 800, durationMs: 20_000 });
    }
    expect(s.state().next!.value).toBeCloseTo(800, 9);
    expect(s.timeoutMs()).toBeGreaterThanOrEqual(20_000);
    expect(s.timeoutMs()).toBeLessThanOrEqual(60_000);
    const e = s.observe({
      timestampMs: T0 + 10,
      status: "timeout",
      durationMs: 60_000,
      timeoutMs: s.timeoutMs(),
      probe: { payload_bytes: 1_250_000 },
    });
    expect(e.record).toMatchObject({ status: "timeout", unit: "Mbit/s", value: null });
    expect(e.state.count).toBe(11);
    s.dispose();
  });

  it("reads the page's objects as they are, and names what it refuses", () => {
    expect(() => ProbedSeries.create({ ...RTT, metric: "latency" as "rtt" })).toThrow(
      /metric: unknown variant `latency`/,
    );
    const s = ProbedSeries.create(RTT);
    const ok = { timestampMs: T0, status: "ok", value: 1, durationMs: 1 } as const;
    expect(() => s.observe({ ...ok, probe: { payload_bytes: 1.5 } })).toThrow(
      /probe.payload_bytes: 1.5 is not a count/,
    );
    expect(() => s.observe({ ...ok, value: undefined })).toThrow(/needs a value/);
    const jitter = s.observe(ok).record;
    jitter.metric = "jitter";
    expect(() => s.replay([s.observe(ok).record, jitter])).toThrow(
      /record 1: metric Jitter does not belong to this Rtt series/,
    );
    s.dispose();
  });

  it("forecasts values that were not probes, without timeouts, as it forecasts probes' values", () => {
    const imported = ProbedSeries.create({ ...RTT, kind: "statistic" });
    const probed = ProbedSeries.create(RTT);
    const points = [10, 12, 11, 13, 50, 12].map((value, i) => ({ t: T0 + i, value }));
    const after = imported.observeValues(points);
    for (const p of points) {
      probed.observe({ timestampMs: p.t, status: "ok", value: p.value });
    }
    expect(imported.timeoutMs()).toBeUndefined();
    expect(after[0]).toEqual({ value: 10, error: 0, errorKnown: false, method: "last_value" });
    const { value, error, method } = probed.state().next!;
    expect(after.at(-1)).toEqual({ value, error, errorKnown: true, method });
    expect(imported.errors()).toEqual(probed.errors());
    expect(imported.state()).toMatchObject({ count: 6, timeouts: 0, mae: probed.state().mae });
    // A value the bank refuses is left out; the forecast stays as it was.
    expect(imported.observeValues([{ t: T0 + 9, value: 1e200 }])).toEqual([after.at(-1)]);
    imported.dispose();
    probed.dispose();
  });

  it("feeds a timed-out rate probe back as the rate its payload reached at most", () => {
    const s = ProbedSeries.create(DOWN);
    s.observe({ timestampMs: T0, status: "ok", value: 800, durationMs: 20_000, timeoutMs: 60_000 });
    const e = s.observe({
      timestampMs: T0 + 1,
      status: "timeout",
      durationMs: 60_000,
      timeoutMs: 60_000,
      probe: { payload_bytes: 1_250_000 },
    });
    expect(e.record).toMatchObject({ status: "timeout", value: null, timeout_ms: 60_000 });
    expect(e.record.probe?.raw_ms).toBe(60_000);
    expect(e.state.count).toBe(2);
    expect(e.state.timeouts).toBe(1);
    expect(parseRecord(toLine(e.record))).toEqual(e.record);
    s.dispose();
  });

  it("replays saved records to the same state, timeouts, errors and next records", () => {
    for (const options of [RTT, DOWN]) {
      const live = ProbedSeries.create(options);
      const saved = history(live).map((r) => parseRecord(toLine(r)));
      const back = ProbedSeries.create(options);
      expect(back.replay(saved)).toBe(saved.length);
      expect(back.state()).toEqual(live.state());
      expect(back.timeoutMs()).toBe(live.timeoutMs());
      expect(back.errors()).toEqual(live.errors());
      expect(back.table()).toEqual(live.table());
      const o: ProbeObservation = {
        timestampMs: T0 + 1e6,
        status: "ok",
        value: 70,
        durationMs: 110,
      };
      expect(back.observe(o)).toEqual(live.observe(o));
      live.dispose();
      back.dispose();
    }
  });

  it("costs little per probe across the WASM boundary", () => {
    const s = ProbedSeries.create(DOWN);
    const n = 2000;
    const probe: Probe = { transport: "websocket", payload_bytes: 65536, raw_ms: 0 };
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      const t = s.timeoutMs()!;
      s.observe({
        timestampMs: T0 + i,
        status: "ok",
        value: 50 + (i % 7),
        durationMs: 100 + (i % 5),
        timeoutMs: t,
        probe,
      });
    }
    const perProbeUs = ((performance.now() - started) / n) * 1000;
    console.log(`ProbedSeries: ${perProbeUs.toFixed(1)} µs per probe (timeout + observe + record)`);
    // A probe takes milliseconds at the least; its bookkeeping must not.
    expect(perProbeUs).toBeLessThan(500);
    s.dispose();
  });
});

describe("ranking by predicted download time", () => {
  const MB = 1_000_000;
  const site = (url: string, rtt?: number, mbits?: number, unreachable = false): SiteForecast => ({
    url,
    rtt: rtt === undefined ? undefined : { value: rtt, error: 1 },
    bandwidth: mbits === undefined ? undefined : { value: mbits, error: 1 },
    unreachable,
  });

  it.each([
    {
      name: "fastest first",
      sites: [site("slow", 10, 8), site("fast", 10, 80)],
      want: ["fast", "slow"],
    },
    {
      name: "a lower RTT wins a small file",
      bytes: 1000,
      sites: [site("far-wide", 100, 1000), site("near-narrow", 5, 10)],
      want: ["near-narrow", "far-wide"],
    },
    {
      name: "a wider link wins a large file",
      sites: [site("near-narrow", 5, 10), site("far-wide", 100, 1000)],
      want: ["far-wide", "near-narrow"],
    },
    {
      name: "sites without data last, in their order; NaN is no forecast",
      sites: [
        site("new1"),
        site("ok", 10, 8),
        site("zero", 10, 0),
        site("nan", 10, NaN),
        site("new2", 5),
      ],
      want: ["ok", "new1", "zero", "nan", "new2"],
    },
    {
      name: "an unreachable site last",
      sites: [site("down", 1, 1000, true), site("new"), site("ok", 10, 8)],
      want: ["ok", "new", "down"],
    },
    { name: "nothing to rank", sites: [], want: [] },
  ])("$name", ({ sites, bytes, want }) => {
    expect(rankSites(sites, bytes ?? MB, 1).map((r) => r.url)).toEqual(want);
  });

  it("gives times, ranges and standings, with no upper bound as Infinity", () => {
    const ranked = rankSites(
      [
        { url: "slower", rtt: { value: 10, error: 1 }, bandwidth: { value: 4, error: 0.5 } },
        { url: "best", rtt: { value: 20, error: 5 }, bandwidth: { value: 8, error: 2 } },
        { url: "close", rtt: { value: 12, error: 1 }, bandwidth: { value: 7, error: 2 } },
        { url: "open", rtt: { value: 30, error: 1 }, bandwidth: { value: 8, error: 8 } },
        // 1610 ms, beyond the best's 1358 ms, but its range reaches down to 1009 ms.
        { url: "likely", rtt: { value: 10, error: 1 }, bandwidth: { value: 5, error: 3 } },
        { url: "new", rtt: undefined, bandwidth: undefined },
        { url: "gone", rtt: undefined, bandwidth: undefined, unreachable: true },
      ],
      MB,
      1,
    );
    expect(ranked[0]).toEqual({
      url: "best",
      timeMs: 1020,
      lowMs: 815,
      highMs: 25 + 8e6 / 6e3,
      standing: "best",
    });
    expect(ranked.map((r) => [r.url, r.standing])).toEqual([
      ["best", "best"],
      ["open", "about_the_same"],
      ["close", "about_the_same"],
      ["likely", "likely_slower"],
      ["slower", "slower"],
      ["new", "no_forecast"],
      ["gone", "unreachable"],
    ]);
    expect(ranked[1]!.highMs).toBe(Infinity);
    expect(ranked[5]).toEqual({
      url: "new",
      timeMs: undefined,
      lowMs: undefined,
      highMs: undefined,
      standing: "no_forecast",
    });
  });
});
