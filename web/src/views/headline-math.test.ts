import { describe, expect, it } from "vitest";
import {
  forecasterVerdict,
  sharePercent,
  SHORT_PROBE_MS,
  SHORT_PROBE_RTTS,
  shortProbe,
  transportReason,
  likelyRange,
  periodPhrase,
  pickSeries,
  rangeText,
  sparkPath,
  typicalError,
  verdict,
  verdictOf,
  yRange,
  measuredLately,
  bandwidthPhrase,
  seriesPeriodS,
  shortAdvice,
} from "./headline-math";

describe("the headline's verdict", () => {
  it.each([
    // value, error (√MSE), verdict: the likely range is ± 2 errors.
    [100, 5, "steady"],
    [100, 5.01, "variable"],
    [100, 25, "variable"],
    [100, 25.01, "erratic"],
    [0, 1, "erratic"],
  ] as const)("of %d ± 2·%d is %s", (value, error, expected) => {
    expect(verdict({ value, error }, 10)).toBe(expected);
  });

  it("is 'learning' until five forecasts have been checked", () => {
    expect(verdict({ value: 100, error: 0 }, 4)).toBe("learning");
    expect(verdict(undefined, 50)).toBe("learning");
    expect(verdictOf(0.05, 1)).toBe("steady");
  });
});

describe("the headline's range in words", () => {
  it("is the forecast ± 2 errors, never below zero, in one unit", () => {
    expect(likelyRange({ value: 95, error: 1.5 })).toEqual([92, 98]);
    expect(likelyRange({ value: 1, error: 2 })).toEqual([0, 5]);
    expect(rangeText(92, 98, "Mbit/s")).toBe("92.0–98.0 Mbit/s");
    expect(rangeText(880, 1240, "Mbit/s")).toBe("0.880–1.24 Gbit/s");
    expect(rangeText(12, 12.001, "ms")).toBe("about 12.0 ms");
  });

  it("names the next period plainly", () => {
    expect(periodPhrase(2)).toBe("next 2 s");
    expect(periodPhrase(60)).toBe("next minute");
    expect(periodPhrase(300)).toBe("next 5 minutes");
    expect(periodPhrase(90)).toBe("next 90 s");
    // A bandwidth series probed every 254 rounds of 2 s.
    expect(periodPhrase(508)).toBe("next ~8 minutes");
    expect(periodPhrase(0.5)).toBe("next 0.5 s");
  });
});

describe("the transport the headline shows", () => {
  const ws = (values: number[]) => ({ key: "websocket", values });
  const http = (values: number[]) => ({ key: "http", values });

  it("is the one with the better recent median once both have a few values", () => {
    expect(pickSeries([ws([10, 11, 12]), http([20, 21, 19])], "higher")?.key).toBe("http");
    expect(pickSeries([ws([10, 11, 12]), http([20, 21, 19])], "lower")?.key).toBe("websocket");
    // Only the last ten count: fetch was faster long ago.
    const old = [...Array<number>(20).fill(50), ...Array<number>(10).fill(5)];
    expect(pickSeries([ws(Array<number>(10).fill(10)), http(old)], "higher")?.key).toBe(
      "websocket",
    );
  });

  it("is the one with more values before that, and the first on a tie", () => {
    expect(pickSeries([ws([10]), http([20, 21])], "higher")?.key).toBe("http");
    expect(pickSeries([ws([10, 10, 10]), http([10, 10, 10])], "higher")?.key).toBe("websocket");
    expect(pickSeries([ws([]), http([])], "higher")).toBeUndefined();
  });
});

describe("the trust in a transfer and the transport's reason", () => {
  it("calls a transfer shorter than 50 ms too short to time, and nothing else", () => {
    const D = "bandwidth_down";
    expect(shortProbe(D, { payload_bytes: 65536, raw_ms: 0.4 })).toBe(true);
    expect(shortProbe("bandwidth_up", { payload_bytes: 65536, raw_ms: 0.4 })).toBe(true);
    expect(shortProbe(D, { payload_bytes: 65536, raw_ms: SHORT_PROBE_MS })).toBe(false);
    expect(shortProbe(D, { payload_bytes: 0, raw_ms: 0.1 })).toBe(false);
    expect(shortProbe(D, { raw_ms: 1 })).toBe(false);
    expect(shortProbe(D, undefined)).toBe(false);
    // An echo's record (2 bytes, its raw time the RTT) is no transfer.
    expect(shortProbe("rtt", { payload_bytes: 2, raw_ms: 0.8 })).toBe(false);
    expect(shortProbe("loaded_rtt", { payload_bytes: 2, raw_ms: 0.8 })).toBe(false);
  });

  it("holds a transfer of 40 round trips or more timed, under 50 ms too", () => {
    const D = "bandwidth_down";
    const big = 32 * 1024 * 1024;
    // Loopback: 32 MiB in 43.5 ms after a 0.3 ms RTT was subtracted is 145 round trips.
    expect(shortProbe(D, { payload_bytes: big, raw_ms: 43.5, rtt_subtracted_ms: 0.3 })).toBe(false);
    expect(shortProbe(D, { payload_bytes: 65536, raw_ms: 0.4, rtt_subtracted_ms: 0.3 })).toBe(true);
    expect(shortProbe(D, { payload_bytes: big, raw_ms: 11.9, rtt_subtracted_ms: 0.3 })).toBe(true);
    expect(shortProbe(D, { payload_bytes: big, raw_ms: 12, rtt_subtracted_ms: 0.3 })).toBe(false);
    // A longer path keeps the 50 ms floor; an unknown RTT (0) too.
    expect(shortProbe(D, { payload_bytes: big, raw_ms: 49, rtt_subtracted_ms: 20 })).toBe(true);
    expect(shortProbe(D, { payload_bytes: big, raw_ms: 20, rtt_subtracted_ms: 0 })).toBe(true);
    expect(SHORT_PROBE_RTTS * 0.3).toBe(12);
    // However short the path, under 10 ms a browser's own work on the request is a large
    // part: on loopback 64 KiB in 1.85 ms read 285 Mbit/s of several Gbit/s, unflagged.
    expect(shortProbe(D, { payload_bytes: 65536, raw_ms: 1.85, rtt_subtracted_ms: 0.014 })).toBe(
      true,
    );
    expect(shortProbe(D, { payload_bytes: big, raw_ms: 10, rtt_subtracted_ms: 0.014 })).toBe(false);
  });

  it("says why the upload is over fetch, and why one of two transports is shown", () => {
    expect(transportReason("bandwidth_up/http", undefined, "higher")).toMatch(/WebSocket/);
    expect(transportReason("bandwidth_down/http", undefined, "higher")).toMatch(/WebSocket/);
    expect(transportReason("bandwidth_down/websocket", undefined, "higher")).toBe("");
    expect(transportReason("rtt/websocket", undefined, "lower")).toBe("");
    expect(transportReason("bandwidth_down/http", "bandwidth_down/websocket", "higher")).toBe(
      "the faster of the two lately",
    );
    expect(transportReason("rtt/websocket", "rtt/http", "lower")).toBe(
      "pings timed by the server; the shorter of the two lately",
    );
  });
});

describe("the sparkline", () => {
  it("draws the values across the box, broken where one is missing", () => {
    expect(sparkPath([0, 10, null, 5, 10], 100, 10, 0, 10)).toBe("M0 10L25 0M75 5L100 0");
    expect(sparkPath([3], 100, 10, 0, 10)).toBe("M100 7");
    expect(sparkPath([], 100, 10, 0, 10)).toBe("");
  });

  it("holds the data with a margin, not below zero", () => {
    expect(yRange([10, 20])).toEqual([9, 21]);
    expect(yRange([0.5, 0.5])).toEqual([0.45, 0.55]);
    expect(yRange([0, 0])).toEqual([0, 1]);
    expect(yRange([])).toBeUndefined();
  });
});

describe("the typical forecast error", () => {
  it("is what 9 in 10 errors are within, either side", () => {
    // Errors −3, −1 ×8, 2: 9 of 10 within ±2 (the −3 is out).
    const cdf = [
      { x: -3, p: 0.1 },
      { x: -1, p: 0.9 },
      { x: 2, p: 1 },
    ];
    expect(typicalError(cdf)).toBe(2);
    expect(typicalError(cdf, 0.8)).toBe(1);
    expect(typicalError([])).toBeUndefined();
  });
});

describe("the verdict on the forecaster in use", () => {
  const row = (id: string, name: string, mae: number, mse = mae * mae) => ({
    index: 0,
    id,
    name,
    forecast: 1,
    n: 6,
    mse,
    mae,
  });
  const names = new Map<string, string>();
  /** Faithful mode: the forecaster named is the whole forecast. */
  const ONE = { share: undefined, mae: undefined };

  it("says that an improved forecast combines them all, with the largest weight and its share", () => {
    // As the page showed it: 7 values in, the largest weight was on the forecaster of the
    // largest error in the table, and the forecast was not its own.
    const table = [
      row("last_value", "Last Value", 0.0139),
      row("sliding_mean_5", "Sliding Mean Window 5", 0.0109),
      row("exp_1", "Exp Smooth 1%", 0.0141),
    ];
    const text = forecasterVerdict(
      { table, selected: "exp_1", share: 0.052, mae: 0.0112 },
      "ms",
      names,
    );
    expect(text).toMatch(/^In use: a combination of the forecasters below/);
    // Its error over the whole series is not the least: the weight is for its recent ones.
    expect(text).toMatch(
      /the largest weight \(5 %\) is Exp Smooth 1%'s, for its recent forecasts\./,
    );
    // The error and the comparison are the combination's, not the largest weight's.
    expect(text).toMatch(/off by 0\.0112 ms on average\./);
    expect(text).toMatch(/would be off by 0\.0139 ms: the forecasts are 19 % closer\.$/);
    // Even when all the weight is on the last value, the sentence compares.
    const all = forecasterVerdict(
      { table, selected: "last_value", share: 0.999, mae: 0.0139 },
      "ms",
      names,
    );
    expect(all).toMatch(
      /\(100 %\) is Last Value's, for its recent forecasts\..*would do about as well/,
    );
    // On the forecaster of the least error, nothing more is said.
    const best = forecasterVerdict(
      { table, selected: "sliding_mean_5", share: 0.6, mae: 0.0109 },
      "ms",
      names,
    );
    expect(best).toMatch(/\(60 %\) is Sliding Mean Window 5's\. The forecasts/);
    expect(sharePercent(0.004)).toBe("<1 %");
  });

  it("never calls the one in use the one of the least error, which it need not be", () => {
    // As the page showed it: the selection's pick had a larger MSE than others in the table.
    const table = [
      row("last_value", "Last Value", 0.0812),
      row("exp_5", "Exp Smooth 5%", 0.2, 0.123),
      row("exp_50", "Exp Smooth 50%", 0.13, 0.0353),
      row("median_31", "Median Window 31", 0.1, 0.0325),
    ];
    const text = forecasterVerdict({ table, selected: "exp_50", ...ONE }, "ms", names);
    expect(text).not.toMatch(/smallest/);
    expect(text).toMatch(/^In use: Exp Smooth 50%, chosen from the forecasters' errors/);
    // Repeating the last value did better: said so, not "about as well".
    expect(text).toMatch(
      /Repeating the last value has done better so far \(off by 0\.0812 ms\)\.$/,
    );
  });

  it("says how much closer the forecasts are, or that they are as close", () => {
    const table = [row("last_value", "Last Value", 2), row("median_31", "Median Window 31", 1)];
    expect(forecasterVerdict({ table, selected: "median_31", ...ONE }, "ms", names)).toMatch(
      /would be off by 2\.00 ms: the forecasts are 50 % closer\.$/,
    );
    const even = [row("last_value", "Last Value", 1), row("median_31", "Median Window 31", 1.001)];
    expect(forecasterVerdict({ table: even, selected: "median_31", ...ONE }, "ms", names)).toMatch(
      /would do about as well \(1\.00 ms\)\.$/,
    );
  });

  it("makes no claim about the others when the last value is in use", () => {
    const table = [row("last_value", "Last Value", 1.92), row("exp_5", "Exp Smooth 5%", 1.2)];
    const text = forecasterVerdict({ table, selected: "last_value", ...ONE }, "ms", names);
    expect(text).not.toMatch(/as well as anything/);
    expect(text).toMatch(
      /off by 1\.92 ms on average\. It forecasts that the next value repeats the last\.$/,
    );
  });
});

describe("measuredLately", () => {
  it("drops a series the page stopped measuring, keeps those a period or two behind", () => {
    const ws = { key: "rtt/websocket", last: 100_000, periodMs: 2_000 };
    const fetch = { key: "rtt/http", last: 130_000, periodMs: 2_000 };
    // WebSocket's last value is 30 s old while fetch goes on: the transport was switched off.
    expect(measuredLately([ws, fetch]).map((c) => c.key)).toEqual(["rtt/http"]);
    // Both measured within three periods (or 10 s): both compared.
    expect(measuredLately([{ ...ws, last: 125_000 }, fetch]).map((c) => c.key)).toEqual([
      "rtt/websocket",
      "rtt/http",
    ]);
    // A slow series' own period counts: bandwidth every 60 s is not stale after 30 s.
    expect(measuredLately([{ ...ws, periodMs: 60_000 }, fetch])).toHaveLength(2);
    // Nothing measured yet: all of them.
    expect(measuredLately([{ ...ws, last: undefined }])).toHaveLength(1);
  });
});

describe("the bandwidth schedule, said once for the status line and the cards", () => {
  const MIB = 1024 * 1024;
  // 1 MiB an hour at 2 s: the download spaced 8 minutes, the upload 33.
  const schedule = {
    everyS: { "bandwidth_down/http": 480, "bandwidth_up/http": 1980 },
    limit: "budget" as const,
    capped: true,
  };

  it("gives each card the period the status line names, not its last record's", () => {
    // The download's newest record was measured 35 h apart under an older sizing.
    const down = seriesPeriodS(schedule.everyS["bandwidth_down/http"], 126_000_000, 2);
    expect(periodPhrase(down)).toBe("next 8 minutes");
    expect(periodPhrase(seriesPeriodS(schedule.everyS["bandwidth_up/http"], undefined, 2))).toBe(
      "next 33 minutes",
    );
    const status = bandwidthPhrase(schedule, 2, MIB);
    expect(status).toBe(
      ", download every 8 min, upload every 33 min, as often as the hourly budget (1.00 MiB) allows",
    );
    // Series the engine does not schedule: their records' period, else the page's.
    expect(seriesPeriodS(undefined, 10_000, 2)).toBe(10);
    expect(seriesPeriodS(undefined, undefined, 2)).toBe(2);
  });

  it("names the limit, and nothing while every series is probed each period", () => {
    const alike = { ...schedule, everyS: { "bandwidth_down/http": 480, "bandwidth_up/http": 480 } };
    expect(bandwidthPhrase(alike, 2, 500 * MIB)).toBe(
      ", bandwidth every 8 min, as often as the hourly budget (500 MiB) allows",
    );
    expect(bandwidthPhrase({ ...alike, limit: "server", capped: false }, 2, MIB)).toMatch(
      /as often as the server's allowance per minute allows$/,
    );
    expect(
      bandwidthPhrase(
        { everyS: { "bandwidth_down/http": 2 }, limit: undefined, capped: false },
        2,
        MIB,
      ),
    ).toBe("");
  });

  it("tells why a probe was too short: the budget, or the size chosen", () => {
    expect(shortAdvice(schedule)).toMatch(/^the hourly budget allows no larger probe/);
    expect(shortAdvice({ ...schedule, capped: false })).toBe(
      "use the automatic size or a larger one",
    );
    expect(shortAdvice(undefined)).toBe("use the automatic size or a larger one");
  });
});
