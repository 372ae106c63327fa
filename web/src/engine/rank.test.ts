import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../forecast";
import { BAND_K } from "../messages";
import { MIRROR_DOWN, MIRROR_RTT } from "./plan";
import { ranking } from "./rank";
import { SeriesSet } from "./series";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

/** A site's ranking series (plan.ts `rankingSteps`) with `rtt` (ms) and `down` (Mbit/s)
 *  measured three times each; with `other`, the other transports' series too, at 1000 times
 *  the rate (the ranking must not read them). */
function measured(to: string, rtt: number, down: number, other = false, times = 3) {
  const s = new SeriesSet(to);
  for (let i = 0; i < times; i++) {
    const o = { timestampMs: i, status: "ok", timeoutMs: 3000, probe: {} } as const;
    const r = s.get(MIRROR_RTT).observe({ ...o, value: rtt, durationMs: rtt });
    s.keep(MIRROR_RTT, r.record);
    const d = s.get(MIRROR_DOWN).observe({ ...o, value: down, durationMs: 100 });
    s.keep(MIRROR_DOWN, d.record);
    if (other) {
      s.get("bandwidth_down/websocket").observe({ ...o, value: 1000 * down, durationMs: 100 });
    }
  }
  return s;
}

describe("the ranking of the sites the page lists", () => {
  it("ranks a site measured once by its forecast, with no range and never as slower", () => {
    const sites = new Map([
      ["http://once/", { series: measured("once", 10, 10, false, 1), unreachable: false }],
      ["http://fast/", { series: measured("fast", 10, 100), unreachable: false }],
    ]);
    const r = ranking(["http://once/", "http://fast/"], 1e6, (u) => sites.get(u));
    expect(r.map((s) => [s.url, s.standing])).toEqual([
      ["http://fast/", "best"],
      ["http://once/", "likely_slower"],
    ]);
    const once = r[1]!;
    expect(Number.isNaN(once.bandwidth!.error)).toBe(true);
    expect(once.timeMs).toBeCloseTo(10 + 800, 6);
    expect([once.lowMs, once.highMs]).toEqual([undefined, undefined]);
  });

  it("puts the fastest first, with the forecasts it ranked by; those not measured after", () => {
    const sites = new Map([
      ["http://slow/", { series: measured("slow", 10, 10, true), unreachable: false }],
      ["http://fast/", { series: measured("fast", 10, 100), unreachable: false }],
    ]);
    const r = ranking(["http://none/", "http://slow/", "http://fast/"], 1e6, (u) => sites.get(u));
    expect(r.map((s) => s.url)).toEqual(["http://fast/", "http://slow/", "http://none/"]);
    // By the ranking's series alone, whatever else a site measured.
    expect(r[0]).toMatchObject({ rtt: { value: 10 }, bandwidth: { value: 100 }, standing: "best" });
    expect(r[0]!.timeMs).toBeCloseTo(10 + 80, 6);
    // Steady series: no error, so no overlap.
    expect(r[1]!.standing).toBe("slower");
    expect(r[2]).toMatchObject({
      timeMs: undefined,
      rtt: undefined,
      bandwidth: undefined,
      standing: "no_forecast",
    });
  });

  it("ranks a site its last round could not reach last, and says so", () => {
    const sites = new Map([
      ["http://down/", { series: measured("down", 1, 1000), unreachable: true }],
      ["http://up/", { series: measured("up", 10, 10), unreachable: false }],
    ]);
    const r = ranking(["http://down/", "http://new/", "http://up/"], 1e6, (u) => sites.get(u));
    expect(r.map((s) => [s.url, s.standing])).toEqual([
      ["http://up/", "best"],
      ["http://new/", "no_forecast"],
      ["http://down/", "unreachable"],
    ]);
    // Its forecasts are still shown beside it.
    expect(r[2]).toMatchObject({ timeMs: undefined, rtt: { value: 1 } });
  });

  it("draws the ranges and the standings with the page's ± (BAND_K errors)", () => {
    const noisy = (to: string, downs: number[]) => {
      const s = new SeriesSet(to);
      downs.forEach((down, i) => {
        const o = { timestampMs: i, status: "ok", timeoutMs: 3000, probe: {} } as const;
        s.get("rtt/websocket").observe({ ...o, value: 10, durationMs: 10 });
        s.get(MIRROR_DOWN).observe({ ...o, value: down, durationMs: 100 });
      });
      return { series: s, unreachable: false };
    };
    const sites = new Map([
      ["http://a/", noisy("a", [100, 80, 120, 90, 110])],
      ["http://b/", noisy("b", [95, 75, 115, 85, 105])],
    ]);
    const [a, b] = ranking(["http://b/", "http://a/"], 1e6, (u) => sites.get(u));
    const bw = a!.bandwidth!;
    expect(a!.lowMs).toBeCloseTo(
      Math.max(0, 10 - BAND_K * a!.rtt!.error) + 8e3 / (bw.value + BAND_K * bw.error),
      6,
    );
    expect([a!.standing, b!.standing]).toEqual(["best", "about_the_same"]);
  });

  it("ranks a site alone by its fetch ping when it has no WebSocket echo, and never beside others", () => {
    // The transport HTTP and no mirror: the target measures rtt/http only.
    const httpOnly = () => {
      const s = new SeriesSet("site");
      for (let i = 0; i < 3; i++) {
        const o = { timestampMs: i, status: "ok", timeoutMs: 3000, probe: {} } as const;
        s.keep("rtt/http", s.get("rtt/http").observe({ ...o, value: 5, durationMs: 5 }).record);
        s.keep(
          MIRROR_DOWN,
          s.get(MIRROR_DOWN).observe({ ...o, value: 80, durationMs: 100 }).record,
        );
      }
      return s;
    };
    const site = { series: httpOnly(), unreachable: false };
    const [alone] = ranking(["http://site/"], 1e6, () => site);
    expect(alone).toMatchObject({ rtt: { value: 5 }, bandwidth: { value: 80 }, standing: "best" });
    expect(alone!.timeMs).toBeCloseTo(5 + 100, 6);
    // Beside a mirror measured by the ranking's own steps, only those compare.
    const sites = new Map([
      ["http://site/", site],
      ["http://fast/", { series: measured("fast", 10, 100), unreachable: false }],
    ]);
    const r = ranking(["http://site/", "http://fast/"], 1e6, (u) => sites.get(u));
    expect(r.find((s) => s.url === "http://site/")!.rtt).toBeUndefined();
  });
});
