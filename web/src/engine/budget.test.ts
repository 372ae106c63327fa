import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../forecast";
import { ByteBudget, probeShare } from "./budget";
import {
  pretestBytes,
  PRETEST_EVERY,
  PRETEST_PASSES,
  PRETEST_SHARE,
  STREAM_CANDIDATES,
} from "./probe-math";

const HOUR = 3_600_000;

// pretestBytes's floor is the core's smallest automatic size.
beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

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

describe("the budget across reloads and its warnings", () => {
  it("keeps spends of one slot as one entry, freed at the slot's latest spend", () => {
    const b = new ByteBudget(1000, 10_000);
    b.spend(100, 0);
    b.spend(200, 9_999);
    b.spend(300, 10_000);
    expect(b.snapshot(10_000)).toEqual([
      [9_999, 300],
      [10_000, 300],
    ]);
    // Never early: the first slot's bytes leave an hour after its latest spend.
    expect(b.used(HOUR + 9_998)).toBe(600);
    expect(b.used(HOUR + 9_999)).toBe(300);
  });

  it("comes back from its snapshot after a reload, with the hour's spends only", () => {
    const b = new ByteBudget(1000, 10_000);
    b.spend(400, 1000);
    b.spend(300, HOUR / 2);
    const kept = b.snapshot(HOUR / 2);
    const again = new ByteBudget(1000, 10_000);
    // The page reloaded 20 minutes later, and spent a little before the snapshot arrived.
    again.spend(50, HOUR / 2 + 1_200_000);
    again.restore([...kept, [HOUR * 5, 999], [Number.NaN, 1]], HOUR / 2 + 1_200_000);
    expect(again.used(HOUR / 2 + 1_200_000)).toBe(750);
    expect(again.usedSinceStart).toBe(50);
    expect(again.allows(300, HOUR / 2 + 1_200_000)).toBe(false);
    expect(again.allows(300, HOUR + 1000)).toBe(true);
  });

  it("says when a held-back probe fits again", () => {
    const b = new ByteBudget(1000);
    b.spend(500, 0);
    b.spend(300, 60_000);
    b.spend(100, 120_000);
    expect(b.resumesAt(100, 130_000)).toBeUndefined();
    // 900 used: 400 more fit once the first 500 have left the hour.
    expect(b.resumesAt(400, 130_000)).toBe(HOUR);
    // 700 more need the second spend gone too.
    expect(b.resumesAt(700, 130_000)).toBe(HOUR + 60_000);
    expect(b.resumesAt(1001, 130_000)).toBe(Infinity);
  });
});

describe("the share of one probe", () => {
  it("spreads the hour's budget over the rounds of the hour", () => {
    // 500 MiB per hour, a round every 10 s with 2 bandwidth probes: 720 probes.
    expect(probeShare(500 * 1024 * 1024, 10, 2).bytes).toBe(Math.floor((500 * 1024 * 1024) / 720));
  });

  it("keeps within the server's per-minute allowance", () => {
    expect(probeShare(1e12, 1, 3, 512 * 1024 * 1024).bytes).toBe(
      Math.floor((512 * 1024 * 1024) / 180),
    );
  });

  it("gives a slow period at most the whole budget", () => {
    expect(probeShare(1000, 7200, 1).bytes).toBe(1000);
  });
});

describe("an hour of rounds", () => {
  it("at the automatic size's share, pretests included, fits in the budget", () => {
    // Large enough that a probe's share is above two of the smallest pretest tries.
    const perHour = 1024 * 1024 * 1024;
    const periodS = 2;
    const transfers = 2;
    const share = probeShare(perHour, periodS, transfers * (1 + PRETEST_SHARE)).bytes;
    expect(pretestBytes(share)).toBe(Math.floor(share / 2));
    const b = new ByteBudget(perHour);
    let refused = 0;
    const spend = (bytes: number, now: number) => {
      if (b.allows(bytes, now)) b.spend(bytes, now);
      else refused++;
    };
    for (let round = 0; round < 3600 / periodS; round++) {
      const now = round * periodS * 1000;
      for (let t = 0; t < transfers; t++) {
        // A pretest every PRETEST_EVERY rounds: each candidate twice, half a probe a try.
        if (round % PRETEST_EVERY === PRETEST_EVERY - 1) {
          for (let i = 0; i < STREAM_CANDIDATES.length * PRETEST_PASSES; i++) {
            spend(pretestBytes(share), now);
          }
        }
        spend(share, now);
      }
    }
    expect(refused).toBe(0);
    expect(b.used(3600_000 - 1)).toBeLessThanOrEqual(perHour);
  });
});
