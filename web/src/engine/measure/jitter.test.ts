import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../../forecast";
import { Jitter, jitter } from "./jitter";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

describe("jitter", () => {
  it("is the mean absolute difference of consecutive RTTs", () => {
    expect(jitter([10, 12, 11, 15])).toBeCloseTo((2 + 1 + 4) / 3, 12);
    expect(jitter([10])).toBeUndefined();
  });

  it("of each echo is its difference from the one before, afresh on a new connection", () => {
    const j = new Jitter();
    expect([10, 12, 11].map((rtt) => j.next(rtt))).toEqual([undefined, 2, 1]);
    j.reset();
    expect([20, 15].map((rtt) => j.next(rtt))).toEqual([undefined, 5]);
  });
});
