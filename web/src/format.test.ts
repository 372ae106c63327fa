import { describe, expect, it } from "vitest";
import { clock, clockTicks, formatPeriod, formatSpan } from "./format";

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
});
