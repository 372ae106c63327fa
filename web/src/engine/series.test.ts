import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  loadForecasting,
  loadReader,
  parseRecord,
  toLine,
  type ProbeObservation,
} from "../forecast";
import type { Record } from "../record";
import { measurement, predictability, SeriesSet } from "./series";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
  await loadReader(
    readFileSync(new URL("../../../core/pkg/reader/nowcast_reader_bg.wasm", import.meta.url)),
  );
});

const T0 = 1_700_000_000_000;

describe("a site's series", () => {
  it("are the core's, named after their key, and their events carry the state after each probe", () => {
    const set = new SeriesSet("h:1");
    const s = set.get("bandwidth_up/websocket");
    // The core's bulk-transfer row: a rate, timed by its durations.
    expect(s.timeoutMs()).toBe(15_000);
    const o: ProbeObservation = { timestampMs: T0, status: "ok", value: 50, durationMs: 100 };
    const e = measurement("bandwidth_up/websocket", s.observe(o));
    expect(e).toMatchObject({ type: "measurement", key: "bandwidth_up/websocket", count: 1 });
    expect(e.record).toMatchObject({
      metric: "bandwidth_up",
      unit: "Mbit/s",
      source: "browser",
      from: "browser",
      to: "h:1",
      probe: { raw_ms: 100 },
    });
    // After one value every forecaster repeats it: the combination's weight is all on the
    // first of them, the last value (the page's forecasts are improved mode's).
    expect(e.next).toEqual({
      value: 50,
      error: 0,
      errorKnown: false,
      method: "last_value",
      share: 1,
    });
    expect(set.get("jitter/websocket").timeoutMs()).toBeUndefined();
    set.dispose();
  });

  it("come back from their records: same state, timeout and predictability; numbering goes on", () => {
    const key = "bandwidth_up/websocket";
    const live = new SeriesSet("h");
    const records: Record[] = [];
    for (let i = 0; i < 30; i++) {
      const s = live.get(key);
      const timeoutMs = s.timeoutMs()!;
      const base = {
        timestampMs: T0 + i * 1000,
        timeoutMs,
        probe: { payload_bytes: 65536, raw_ms: 100 + (i % 7) },
      };
      const o: ProbeObservation =
        i === 12
          ? { ...base, status: "timeout", durationMs: timeoutMs }
          : { ...base, status: "ok", value: 50 + (i % 5), durationMs: 100 + (i % 7) };
      records.push(s.observe(o).record);
    }
    const back = new SeriesSet("h");
    back.load(new Map([[key, records.map((r) => parseRecord(toLine(r)))]]));
    expect(back.has(key)).toBe(true);
    expect(back.get(key).state()).toEqual(live.get(key).state());
    expect(back.get(key).timeoutMs()).toBe(live.get(key).timeoutMs());
    expect(predictability(key, back.get(key))).toEqual(predictability(key, live.get(key)));
    const next = back.get(key).observe({ timestampMs: T0, status: "ok", value: 51, durationMs: 1 });
    expect(next.record.seq).toBe(30);
    live.dispose();
    back.dispose();
  });

  it("give the predictability view their forecast errors, table and forecaster in use", () => {
    const set = new SeriesSet("h");
    const s = set.get("rtt/websocket");
    for (const v of [10, 12, 11, 30, 12]) {
      s.observe({ timestampMs: T0, status: "ok", value: v, durationMs: v });
    }
    const p = predictability("rtt/websocket", s);
    expect(p.histogram!.counts).toHaveLength(100);
    expect(p.histogram!.counts.reduce((a, b) => a + b, 0)).toBe(4);
    expect(p.cdf).toHaveLength(4);
    expect(p.table.some((row) => row.id === p.selected)).toBe(true);
    // The page's series are improved: the forecast combines every forecaster, and the
    // event says the named one's share and the combination's own error.
    expect(p.share).toBeGreaterThan(0);
    expect(p.share).toBeLessThanOrEqual(1 + 1e-9);
    expect(p.mae).toBeGreaterThan(0);
    set.dispose();
  });
});
