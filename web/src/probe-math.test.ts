import { describe, expect, it } from "vitest";
import {
  autoSize,
  AUTO_MAX_BYTES,
  fetchRtt,
  jitter,
  mbits,
  median,
  parseServerTiming,
  rateMinusRtt,
  retryAfterSeconds,
  uploadRate,
} from "./probe-math";

describe("rates", () => {
  it("converts bytes per millisecond to Mbit/s", () => {
    expect(mbits(125_000, 1000)).toBe(1); // 1 Mbit in one second
    expect(mbits(64 * 1024, 0)).toBe(0);
  });

  it.each([
    // bytes, raw ms, predicted RTT, expected duration, subtracted (JavaNws §2.1.1)
    [1_250_000, 110, 10, 100, 10],
    [1_250_000, 100, undefined, 100, 0],
    [1_250_000, 100, 0, 100, 0],
    // a prediction above half the probe time is not trusted
    [1_250_000, 100, 60, 100, 0],
    [1_250_000, 100, 50, 50, 50],
  ])("%d bytes in %d ms with predicted RTT %s", (bytes, raw, rtt, duration, subtracted) => {
    const r = rateMinusRtt(bytes, raw, rtt);
    expect(r.durationMs).toBe(duration);
    expect(r.rttSubtractedMs).toBe(subtracted);
    expect(r.mbits).toBeCloseTo(bytes / duration / 125, 12);
  });

  it("takes an upload's rate from the server's receive times, without any RTT", () => {
    const r = uploadRate(1_250_000, 1000, 1100, 180, 20);
    expect(r).toEqual({ mbits: 100, durationMs: 100, rttSubtractedMs: 0 });
  });

  it("falls back to the client's time minus the RTT for a one-read upload", () => {
    const r = uploadRate(125_000, 500, 500, 30, 10);
    expect(r).toEqual({ mbits: 50, durationMs: 20, rttSubtractedMs: 10 });
  });
});

describe("Server-Timing and Resource Timing", () => {
  it("reads durations by metric name", () => {
    const t = parseServerTiming('proc;dur=0.42, recv;desc="body";dur=12.5, cache, db;dur="3"');
    expect([...t]).toEqual([
      ["proc", 0.42],
      ["recv", 12.5],
      ["db", 3],
    ]);
    expect(parseServerTiming(null).size).toBe(0);
    expect(parseServerTiming("proc;dur=abc").size).toBe(0);
  });

  it("takes the server's time off request-to-first-byte", () => {
    expect(fetchRtt({ requestStart: 100, responseStart: 101.5 }, 0.5)).toBe(1);
    expect(fetchRtt({ requestStart: 100, responseStart: 101.5 }, undefined)).toBe(1.5);
    expect(fetchRtt({ requestStart: 100, responseStart: 100.2 }, 0.5)).toBe(0);
  });

  it("refuses entries without request timing (opaque cross-origin entries)", () => {
    expect(fetchRtt({ requestStart: 0, responseStart: 0 }, 0.1)).toBeUndefined();
    expect(fetchRtt({ requestStart: 5, responseStart: 4 }, 0.1)).toBeUndefined();
  });

  it("reads retry-after from a close reason or a header", () => {
    expect(retryAfterSeconds("byte budget exceeded; retry-after=17")).toBe(17);
    expect(retryAfterSeconds("30")).toBe(30);
    expect(retryAfterSeconds("idle timeout")).toBeUndefined();
    expect(retryAfterSeconds(null)).toBeUndefined();
  });
});

describe("automatic probe size", () => {
  it("starts at 64 KiB without a prediction", () => {
    expect(autoSize(undefined, 1 << 30)).toBe(64 * 1024);
    expect(autoSize(0, 1 << 30)).toBe(64 * 1024);
  });

  it("moves a quarter second of the predicted rate, as a power of two", () => {
    // 100 Mbit/s × 250 ms = 3.125 MB → 4 MiB
    expect(autoSize(100, 1 << 30)).toBe(4 * 1024 * 1024);
    // 1 Mbit/s × 250 ms = 31 KB → the 64 KiB floor
    expect(autoSize(1, 1 << 30)).toBe(64 * 1024);
  });

  it("stays below 32 MiB and the server's cap", () => {
    expect(autoSize(100_000, 1 << 30)).toBe(AUTO_MAX_BYTES);
    expect(autoSize(100_000, 3 * 1024 * 1024)).toBe(3 * 1024 * 1024);
    expect(autoSize(100, 1024)).toBe(64 * 1024);
  });

  it("never grows past the cap for any rate", () => {
    for (let r = 0.5; r < 1e6; r *= 3) {
      const s = autoSize(r, 10 * 1024 * 1024);
      expect(s).toBeGreaterThanOrEqual(64 * 1024);
      expect(s).toBeLessThanOrEqual(10 * 1024 * 1024);
    }
  });
});

describe("jitter", () => {
  it("is the mean absolute difference of consecutive RTTs", () => {
    expect(jitter([10, 12, 11, 15])).toBeCloseTo((2 + 1 + 4) / 3, 12);
    expect(jitter([10])).toBeUndefined();
  });
});

describe("median", () => {
  it.each([
    [[], undefined],
    [[5], 5],
    [[3, 1, 2], 2],
    [[4, 1, 3, 2], 2.5],
  ])("of %j is %s", (xs, m) => {
    expect(median(xs)).toBe(m);
  });
});
