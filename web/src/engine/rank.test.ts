import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../forecast";
import { ranking } from "./rank";
import { SeriesSet } from "./series";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

/** A site's series with `rtt` (ms) and `down` (Mbit/s) measured three times each. */
function measured(
  to: string,
  rtt: number,
  down: number,
  transport: "websocket" | "http" = "websocket",
) {
  const s = new SeriesSet(to);
  for (let i = 0; i < 3; i++) {
    const o = { timestampMs: i, durationMs: rtt, timeoutMs: 3000, probe: {} };
    s.keep(`rtt/${transport}`, s.tracker(`rtt/${transport}`).measured(rtt, o).record);
    s.keep(
      `bandwidth_down/${transport}`,
      s.tracker(`bandwidth_down/${transport}`).measured(down, { ...o, durationMs: 100 }).record,
    );
  }
  return s;
}

describe("the ranking of the sites the page lists", () => {
  it("puts the fastest first, with the forecasts it ranked by; those not measured last", () => {
    const sites = new Map([
      ["http://slow/", measured("slow", 10, 10)],
      ["http://fast/", measured("fast", 10, 100, "http")],
    ]);
    const r = ranking(["http://none/", "http://slow/", "http://fast/"], 1e6, (u) => sites.get(u));
    expect(r.map((s) => s.url)).toEqual(["http://fast/", "http://slow/", "http://none/"]);
    // Over fetch when a site has no WebSocket series.
    expect(r[0]).toMatchObject({ rtt: { value: 10 }, bandwidth: { value: 100 } });
    expect(r[0]!.timeMs).toBeCloseTo(10 + 80, 6);
    expect(r[2]).toMatchObject({ timeMs: undefined, rtt: undefined, bandwidth: undefined });
  });
});
