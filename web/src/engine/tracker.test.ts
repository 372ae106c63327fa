import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../forecast";
import { parseRecord, toLine } from "../record";
import { BANDWIDTH_BOUNDS, predictability, RTT_BOUNDS, Tracker } from "./tracker";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

const outcome = (durationMs: number, timeoutMs = 3000) => ({
  timestampMs: 1_700_000_000_000,
  durationMs,
  timeoutMs,
  probe: { transport: "websocket" as const, payload_bytes: 2 },
});

describe("a tracked series", () => {
  it("records each value with the forecast made before it, in the schema's form", () => {
    const t = new Tracker("rtt/websocket", "duration", RTT_BOUNDS, "browser", "127.0.0.1:1");
    const first = t.measured(10, outcome(10));
    expect(first.record.forecast).toBeUndefined();
    expect(first.next?.value).toBe(10);
    const second = t.measured(12, outcome(12));
    expect(second.record.forecast).toMatchObject({ value: 10, selector: "mse" });
    expect(second.record).toMatchObject({ metric: "rtt", unit: "ms", value: 12, seq: 1 });
    expect(second.count).toBe(2);
    expect(second.mae).toBeGreaterThan(0);
    for (const e of [first, second]) expect(parseRecord(toLine(e.record))).toEqual(e.record);
    t.dispose();
  });

  it("starts with the initial timeout and then learns one within the bounds", () => {
    const t = new Tracker("rtt/websocket", "duration", RTT_BOUNDS, "browser", "h");
    expect(t.timeoutMs()).toBe(RTT_BOUNDS.initialMs);
    for (let i = 0; i < 20; i++) t.measured(5 + (i % 3), outcome(5 + (i % 3)));
    // A loopback RTT forecast is far below the floor, so the floor holds.
    expect(t.timeoutMs()).toBe(RTT_BOUNDS.floorMs);
    t.dispose();
  });

  it("records a timed-out probe and feeds it back with the penalty, never drops it", () => {
    const t = new Tracker("rtt/websocket", "duration", RTT_BOUNDS, "browser", "h");
    t.measured(5, outcome(5));
    const e = t.timedOut(outcome(3000), 2);
    expect(e.record).toMatchObject({ status: "timeout", value: null, timeout_ms: 3000 });
    expect(e.timeouts).toBe(1);
    expect(e.count).toBe(2);
    // The bank saw elapsed + penalty, so the next forecast moved up towards it.
    expect(e.next!.value).toBeGreaterThan(5);
    expect(parseRecord(toLine(e.record))).toEqual(e.record);
    t.dispose();
  });

  it("keeps rates and durations apart: the timeout follows the probe time", () => {
    const t = new Tracker("bandwidth_down/websocket", "rate", BANDWIDTH_BOUNDS, "browser", "h");
    for (let i = 0; i < 10; i++) t.measured(800, outcome(20_000));
    expect(t.next()!.value).toBeCloseTo(800, 9);
    expect(t.timeoutMs()).toBeGreaterThanOrEqual(20_000);
    expect(t.timeoutMs()).toBeLessThanOrEqual(BANDWIDTH_BOUNDS.ceilingMs);
    const e = t.timedOut(outcome(60_000), 1_250_000);
    expect(e.record).toMatchObject({ status: "timeout", unit: "Mbit/s", value: null });
    // What 1.25 MB would have achieved in elapsed + penalty: 1.25e6 B / 65 000 ms / 125.
    expect(e.count).toBe(11);
    t.dispose();
  });
});

describe("imported series and predictability", () => {
  it("replays points in time order through the bank, each with the forecast after it", () => {
    const r = Tracker.replay([
      { t: 3000, value: 14 },
      { t: 1000, value: 10 },
      { t: 2000, value: 12 },
    ]);
    expect(r.points.map((p) => p.t)).toEqual([1000, 2000, 3000]);
    expect(r.points[0]!.next.value).toBe(10);
    expect(r.errors).toHaveLength(2);
    expect(r.series.timeout("nws")).toBeUndefined();
    const p = predictability("import/1", r.series, r.errors);
    expect(p.histogram?.counts.reduce((a, b) => a + b, 0)).toBe(2);
    expect(p.cdf.at(-1)?.p).toBe(1);
    expect(p.table.some((row) => row.id === p.selected)).toBe(true);
    r.series.dispose();
  });

  it("collects a live series' forecast errors for the view", () => {
    const t = new Tracker("rtt/websocket", "duration", RTT_BOUNDS, "browser", "h");
    for (const v of [10, 12, 11, 30, 12]) t.measured(v, outcome(v));
    const p = t.predictability();
    expect(p.histogram!.counts).toHaveLength(100);
    expect(p.cdf).toHaveLength(4);
    t.dispose();
  });
});

describe("restoring a series from its records", () => {
  it("rebuilds the same banks, timeouts included, and goes on numbering", () => {
    const live = new Tracker("bandwidth_up/websocket", "rate", BANDWIDTH_BOUNDS, "browser", "h");
    const records = [];
    for (let i = 0; i < 30; i++) {
      const o = {
        ...outcome(100 + (i % 7)),
        probe: { payload_bytes: 65536, raw_ms: 100 + (i % 7) },
      };
      records.push(
        i === 12
          ? live.timedOut({ ...o, durationMs: o.timeoutMs }, 65536).record
          : live.measured(50 + (i % 5), o).record,
      );
    }
    const back = new Tracker("bandwidth_up/websocket", "rate", BANDWIDTH_BOUNDS, "browser", "h");
    back.restore(records);
    expect(back.state()).toEqual(live.state());
    expect(back.timeoutMs()).toBe(live.timeoutMs());
    expect(back.predictability()).toEqual(live.predictability());
    expect(back.measured(51, outcome(100)).record.seq).toBe(30);
    live.dispose();
    back.dispose();
  });
});
