import { describe, expect, it } from "vitest";
import { ByteBudget, probeShare } from "./budget";

const HOUR = 3_600_000;

describe("the hourly byte budget", () => {
  it("allows probes until the hour's bytes are spent", () => {
    const b = new ByteBudget(1000);
    expect(b.allows(1000, 0)).toBe(true);
    b.spend(600, 0);
    expect(b.allows(400, 10)).toBe(true);
    expect(b.allows(401, 10)).toBe(false);
    expect(b.used(10)).toBe(600);
  });

  it("frees bytes as they leave the sliding hour", () => {
    const b = new ByteBudget(1000);
    b.spend(600, 0);
    b.spend(300, 1000);
    expect(b.allows(500, HOUR - 1)).toBe(false);
    expect(b.allows(500, HOUR)).toBe(true);
    expect(b.used(HOUR + 1000)).toBe(0);
    expect(b.usedSinceStart).toBe(900);
  });

  it("follows a changed limit at once", () => {
    const b = new ByteBudget(1000);
    b.spend(800, 0);
    b.perHour = 500;
    expect(b.allows(1, 1)).toBe(false);
  });
});

describe("the share of one probe", () => {
  it("spreads the hour's budget over the rounds of the hour", () => {
    // 500 MiB per hour, a round every 10 s with 2 bandwidth probes: 720 probes.
    expect(probeShare(500 * 1024 * 1024, 10, 2)).toBe(Math.floor((500 * 1024 * 1024) / 720));
  });

  it("keeps within the server's per-minute allowance", () => {
    expect(probeShare(1e12, 1, 3, 512 * 1024 * 1024)).toBe(Math.floor((512 * 1024 * 1024) / 180));
  });

  it("gives a slow period at most the whole budget", () => {
    expect(probeShare(1000, 7200, 1)).toBe(1000);
  });
});
