import { describe, expect, it } from "vitest";
import {
  clock,
  clockIn,
  clockTickLabel,
  clockTicks,
  formatDuration,
  formatPeriod,
  formatSpan,
  formatSquared,
  formatValue,
  formatWithError,
  significant,
  tickLabels,
} from "./format";

describe("clockTicks", () => {
  const at = (h: number, m: number, s: number) => new Date(2026, 10, 21, h, m, s).getTime();

  it("puts at most the asked number of ticks on round local times", () => {
    const ticks = clockTicks(at(12, 0, 7), at(12, 47, 3), 6);
    expect(ticks.map(clock)).toEqual(["12:10:00", "12:20:00", "12:30:00", "12:40:00"]);
  });

  it("takes the smallest round spacing that fits", () => {
    // 50 s: a tick every 5 s would make 11; every 10 s makes 6.
    const ticks = clockTicks(at(9, 0, 0), at(9, 0, 50), 6);
    expect(ticks.map(clock)).toEqual([
      "09:00:00",
      "09:00:10",
      "09:00:20",
      "09:00:30",
      "09:00:40",
      "09:00:50",
    ]);
    // Ten hours: every two hours, on the hour.
    const hours = clockTicks(at(1, 30, 0), at(11, 29, 0), 6);
    expect(hours.map(clock)).toEqual(["02:00:00", "04:00:00", "06:00:00", "08:00:00", "10:00:00"]);
  });

  it("keeps ticks inside the axis, spans of weeks included", () => {
    const min = at(0, 0, 1);
    const max = min + 90 * 86_400_000;
    const ticks = clockTicks(min, max, 6);
    expect(ticks.length).toBeGreaterThan(0);
    expect(ticks.length).toBeLessThanOrEqual(6);
    for (const t of ticks) expect(t >= min && t <= max).toBe(true);
  });

  it("gives nothing for an empty or reversed axis", () => {
    expect(clockTicks(10, 5, 6)).toEqual([]);
    expect(clockTicks(0, 1000, 0)).toEqual([]);
  });
});

describe("periods and spans in words", () => {
  it("says a period in seconds or whole minutes", () => {
    expect([1, 2, 60, 90, 300].map(formatPeriod)).toEqual(["1 s", "2 s", "1 min", "90 s", "5 min"]);
  });

  it("rounds a span to seconds, minutes or hours and minutes", () => {
    expect([15_600, 59_400, 250_000, 3_600_000, 7_500_000].map(formatSpan)).toEqual([
      "16 s",
      "59 s",
      "4 min",
      "1 h",
      "2 h 5 min",
    ]);
  });

  it("says a predicted time in the unit that keeps it readable", () => {
    expect(
      [199, 1_500, 45_200, 150_000, 5_400_000, 36_000_000, 19_699_097_000, Infinity].map(
        formatDuration,
      ),
    ).toEqual([
      "199 ms",
      "1.50 s",
      "45.2 s",
      "2.50 min",
      "90.0 min",
      "10.0 h",
      "228 days",
      "unbounded",
    ]);
  });
});

describe("values with their spread", () => {
  it("gives no spread for a forecast from one value, which nothing has checked", () => {
    expect(formatWithError(3870, 0, "Mbit/s", false)).toBe("3.87 Gbit/s ± — (needs 2 values)");
    // From two values on, a spread of 0 is what was measured (a constant series).
    expect(formatWithError(12, 0, "ms", true)).toBe("12.0 ms ± 0 ms");
  });

  it("says the spread in the value's unit, Gbit/s included", () => {
    expect(formatWithError(2230, 0, "Mbit/s")).toBe("2.23 Gbit/s ± 0 Gbit/s");
    expect(formatWithError(2230, 150, "Mbit/s")).toBe("2.23 Gbit/s ± 0.150 Gbit/s");
    expect(formatWithError(92.4, 6.1, "Mbit/s")).toBe("92.4 Mbit/s ± 6.10 Mbit/s");
    expect(formatWithError(0.0534, 0.111, "ms")).toBe("0.0534 ms ± 0.111 ms");
    // A CSV column of numbers has no unit: nothing after its figures.
    expect(formatWithError(30.9, 2.07, "")).toBe("30.9 ± 2.07");
    expect(formatValue(32, "")).toBe("32.0");
    // A single value still switches at 1000 Mbit/s.
    expect(formatValue(999, "Mbit/s")).toBe("999 Mbit/s");
    expect(formatValue(1000, "Mbit/s")).toBe("1.00 Gbit/s");
  });
});

describe("a loss rate, kept as a fraction", () => {
  it("is shown as a percentage: value, spread, mean square error and axis alike", () => {
    expect(formatValue(0.13, "fraction")).toBe("13.0 %");
    expect(formatValue(0, "fraction")).toBe("0 %");
    expect(formatValue(0.0005, "fraction")).toBe("0.0500 %");
    expect(formatWithError(0.097, 0.02, "fraction")).toBe("9.70 % ± 2.00 %");
    expect(formatWithError(0.13, 0, "fraction", false)).toBe("13.0 % ± — (needs 2 values)");
    // irtt's per-packet loss (0 or 1 each) has a spread past 0–100 %: its range within them,
    // not "19.7 % ± 103 %", which reads as a relative error.
    expect(formatWithError(0.197, 1.03, "fraction")).toBe("19.7 % (likely 0–100 %)");
    expect(formatWithError(0.05, 0.2, "fraction")).toBe("5.00 % (likely 0–25.0 %)");
    expect(formatWithError(0.97, 0.05, "fraction")).toBe("97.0 % (likely 92.0–100 %)");
    expect(formatSquared(0.0004, "fraction")).toBe("4.00 %²");
    // Chart.js's ticks of a fraction's axis, 0 to 1.
    expect(tickLabels([0, 0.1, 0.2, 0.30000000000000004, 1], "fraction")).toEqual({
      unit: "%",
      labels: ["0 %", "10 %", "20 %", "30 %", "100 %"],
    });
  });

  it("leaves the other units' squares as they were, and none on a bare number", () => {
    expect(formatSquared(0.368, "ms")).toBe("0.368 ms²");
    expect(formatSquared(2500, "Mbit/s")).toBe("2500 Mbit/s²");
    // A CSV column of numbers has no unit: no "²" dangling after its figures.
    expect(formatSquared(4.5, "")).toBe("4.50");
  });
});

describe("three significant digits", () => {
  it("counts the digits of the value as it rounds", () => {
    expect(significant(99.97)).toBe("100");
    expect(significant(-99.97)).toBe("-100");
    expect(significant(99.94)).toBe("99.9");
    expect(significant(9.996)).toBe("10.0");
    expect(significant(9.994)).toBe("9.99");
    expect(significant(0.9996)).toBe("1.00");
    expect(significant(123.4)).toBe("123");
    expect(significant(0.0534)).toBe("0.0534");
  });
});

describe("an axis's tick labels", () => {
  it("gives every label one unit, by the largest, and one number of decimals", () => {
    // Chart.js's round steps, as a rate axis across 1 Gbit/s gets them.
    expect(tickLabels([1600, 1700, 1800, 1900, 2000, 2100, 2200], "Mbit/s")).toEqual({
      unit: "Gbit/s",
      labels: ["1.6", "1.7", "1.8", "1.9", "2.0", "2.1", "2.2"].map((l) => `${l} Gbit/s`),
    });
    expect(tickLabels([800, 900, 1000, 1100], "Mbit/s").labels).toEqual([
      "0.8 Gbit/s",
      "0.9 Gbit/s",
      "1.0 Gbit/s",
      "1.1 Gbit/s",
    ]);
    expect(tickLabels([0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5], "ms").labels).toEqual(
      ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0", "3.5"].map((l) => `${l} ms`),
    );
    // Binary fractions of Chart.js's arithmetic, and a tick a rounding error below zero.
    expect(tickLabels([-1e-17, 0.02, 0.04, 0.06000000000000001, 0.08], "ms").labels).toEqual([
      "0.00 ms",
      "0.02 ms",
      "0.04 ms",
      "0.06 ms",
      "0.08 ms",
    ]);
    expect(tickLabels([0, 5, 10, 15, 20, 25], "ms").labels).toEqual(
      ["0", "5", "10", "15", "20", "25"].map((l) => `${l} ms`),
    );
  });

  it("takes the unit from the axis's end when the ticks stop short of it", () => {
    expect(tickLabels([900, 950], "Mbit/s", 1001)).toEqual({
      unit: "Gbit/s",
      labels: ["0.90 Gbit/s", "0.95 Gbit/s"],
    });
  });

  it("leaves the unit out when the axis's title says it", () => {
    expect(tickLabels([-0.1, -0.05, 0, 0.05, 0.1], "").labels).toEqual([
      "-0.10",
      "-0.05",
      "0.00",
      "0.05",
      "0.10",
    ]);
    expect(tickLabels([0, 1, 2, 3], "").labels).toEqual(["0", "1", "2", "3"]);
  });
});

describe("a time axis's tick labels", () => {
  const at = (d: number, h: number, m: number) => new Date(2026, 10, d, h, m, 0).getTime();

  it("says the date at midnight on an axis of hours or days, the clock time elsewhere", () => {
    const day = 86_400_000;
    expect([at(21, 0, 0), at(22, 0, 0)].map((t) => clockTickLabel(t, day))).toEqual([
      "21 Nov",
      "22 Nov",
    ]);
    expect(
      [at(21, 18, 0), at(22, 0, 0), at(22, 6, 0)].map((t) => clockTickLabel(t, 6 * 3_600_000)),
    ).toEqual(["18:00:00", "22 Nov", "06:00:00"]);
    // Seconds apart, midnight is a clock time like any other.
    expect(clockTickLabel(at(22, 0, 0), 10_000)).toBe("00:00:00");
  });

  it("dates the ends of a span that crosses a day, not those of one that does not", () => {
    expect([clockIn(at(20, 0, 0), at(22, 23, 55)), clockIn(at(22, 23, 55), at(20, 0, 0))]).toEqual([
      "20 Nov 00:00:00",
      "22 Nov 23:55:00",
    ]);
    expect(clockIn(at(21, 12, 0), at(21, 12, 30))).toBe("12:00:00");
  });
});

describe("one unit for a row", () => {
  it("shows every figure in the unit of the largest when a magnitude is given", () => {
    expect(formatValue(326, "Mbit/s", 2630)).toBe("0.326 Gbit/s");
    expect(formatWithError(326, 5261, "Mbit/s", true, 2630)).toBe("0.326 Gbit/s ± 5.26 Gbit/s");
    expect(formatValue(326, "Mbit/s")).toBe("326 Mbit/s");
  });
});
