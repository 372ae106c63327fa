// The round runner with scripted measurements: each module returns the results, timeouts or
// errors a test gives it, so the order of the steps, what is skipped, what the series learn
// and the records they make are checked exactly, without a browser or a server.

import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../forecast";
import type { MeasurementEvent } from "../messages";
import type { Record } from "../record";
import { ByteBudget } from "./budget";
import { ConnectionClosed, ProbeTimeout, RetryLater } from "./errors";
import { ECHO_BYTES } from "./measure/echo";
import { Jitter } from "./measure/jitter";
import type { Link, Measurement, Measurements, ProbeRequest } from "./measure/measurement";
import type { PretestResult } from "./measure/pretest";
import { mirrorPlan, targetPlan, type Plan, type StepTransport } from "./plan";
import {
  autoMinBytes,
  pretestBytes,
  PRETEST_AFTER,
  PRETEST_PASSES,
  rateMinusRtt,
} from "./probe-math";
import { runRound, runSites, type RoundEnv, type Spacing } from "./round";
import { SeriesSet } from "./series";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

const KIB = 1024;
const MODULES = [
  "rtt/websocket",
  "rtt/http",
  "download/websocket",
  "download/http",
  "upload/websocket",
  "upload/http",
] as const;
type Module = (typeof MODULES)[number];

/** What a scripted probe does: measure `value` (taking `durationMs`), run out of its time,
 *  or fail. */
type Outcome = { value: number; durationMs?: number } | { timedOut: true } | { error: string };

interface Call extends Omit<ProbeRequest, "predictedRttMs"> {
  module: Module;
  predictedRttMs: number | undefined;
}

/**
 * A site whose probes follow a script: each module takes its next outcome (or `fallback`),
 * and every call is logged in order. A timed-out WebSocket probe closes the connection, as
 * the real one does; `reconnects` says which rounds find it closed and open a new one.
 */
class ScriptedSite {
  readonly series = new SeriesSet("scripted.example");
  readonly jitter = new Jitter();
  readonly calls: Call[] = [];
  readonly script = new Map<Module, Outcome[]>();
  /** Echoes beside transfers: their RTTs, per transfer (default one echo of 5 ms). */
  readonly loadedEchoes: number[][] = [];
  private open = false;
  connects = 0;
  /** Times the second connection (for loaded-RTT echoes) was asked for. */
  loadConnects = 0;
  /** What opening a WebSocket fails with, when it does. */
  refuse: Error | undefined;

  constructor(private readonly fallback: (m: Module, r: ProbeRequest) => Outcome) {}

  readonly link: Link = {
    base: "http://scripted.example/",
    get conn(): never {
      throw new Error("scripted: no connection");
    },
    get load(): never {
      throw new Error("scripted: no connection");
    },
    connect: async (transport: StepTransport) => {
      if (transport === "http" || this.open) return false;
      if (this.refuse !== undefined) throw this.refuse;
      this.open = true;
      this.connects++;
      return true;
    },
    connected: (transport: StepTransport) => transport === "http" || this.open,
    connectLoad: async () => {
      this.loadConnects++;
      if (this.refuse !== undefined) throw this.refuse;
    },
  };

  private module(name: Module): Measurement {
    const [, transport] = name.split("/") as [string, "websocket" | "http"];
    return {
      cost: (bytes) => (name.startsWith("rtt") ? ECHO_BYTES : bytes),
      probe: (bytes, streams) => ({ transport, payload_bytes: bytes, streams }),
      run: async (_link, r) => {
        this.calls.push({ module: name, ...r });
        // A site that refuses connections refuses fetch too.
        if (this.refuse !== undefined) throw this.refuse;
        const o = this.script.get(name)?.shift() ?? this.fallback(name, r);
        if ("timedOut" in o) {
          if (transport === "websocket") this.open = false;
          throw new ProbeTimeout(r.timeoutMs);
        }
        if ("error" in o) throw new Error(o.error);
        return {
          value: o.value,
          durationMs: o.durationMs ?? o.value,
          probe: { transport, payload_bytes: r.bytes, streams: r.streams },
        };
      },
    };
  }

  readonly measurements: Measurements = {
    ...Object.fromEntries(MODULES.map((m) => [m, this.module(m)])),
    loaded: {
      during: async (_link, work, _timeoutMs, spend) => {
        const samples = this.loadedEchoes.shift() ?? [5];
        for (const _ of samples) spend(ECHO_BYTES);
        return {
          work: (await Promise.allSettled([work]))[0]!,
          echoes: { samples, timedOut: undefined },
        };
      },
    },
  };

  /** Closes the connection, as a server or a suspend does between rounds. */
  drop(): void {
    this.open = false;
  }
}

/** Each module's usual result: RTTs of 10 ms, transfers at 100 Mbit/s. */
const steady = (m: Module): Outcome => (m.startsWith("rtt") ? { value: 10 } : { value: 100 });

class Env implements RoundEnv {
  readonly budget: ByteBudget;
  readonly records: MeasurementEvent[] = [];
  readonly pretests: { key: string; results: readonly PretestResult[]; streams: number }[] = [];
  overBudgets = 0;
  bursts = 0;
  readonly spacing = new Map<string, number>();
  readonly spacings = new Map<string, Spacing>();
  suspend = () => false;
  private t = 0;

  constructor(
    readonly periodS = 2,
    perHour = 1e12,
    private readonly maxPayload = 16 * 1024 * KIB,
  ) {
    this.budget = new ByteBudget(perHour);
  }

  limits() {
    return { maxPayload: this.maxPayload, perMinute: Infinity };
  }
  now() {
    return this.t++;
  }
  wallClock() {
    return 1_795_000_000_000 + this.t;
  }
  suspended() {
    return this.suspend();
  }
  record(e: MeasurementEvent) {
    this.records.push(e);
  }
  overBudget() {
    this.overBudgets++;
  }
  spaced(key: string, spacing: Spacing) {
    this.spacing.set(key, spacing.every);
    this.spacings.set(key, spacing);
  }
  bursting() {
    this.bursts++;
  }
  pretested(key: string, results: readonly PretestResult[], streams: number) {
    this.pretests.push({ key, results, streams });
  }

  /** The records made, as `metric/transport status`. */
  made(): string[] {
    return this.records.map((e) => `${e.key} ${e.record.status}`);
  }
}

const run = (site: ScriptedSite, plan: Plan, env: Env) =>
  runRound(site, plan, env, site.measurements);

const WS_64K = targetPlan({ transport: "websocket", size: 64 * KIB });

describe("a round", () => {
  it("runs the target's plan in order, and records each step with its period", async () => {
    const site = new ScriptedSite(steady);
    const env = new Env(2);
    await run(site, WS_64K, env);
    expect(site.calls.map((c) => c.module)).toEqual([
      "rtt/websocket",
      "download/http",
      "upload/http",
    ]);
    // The download is the ranking's, alone on the wire; both transfers go over fetch, the
    // upload with the WebSocket's loaded RTT beside it, which comes before its own record.
    expect(env.made()).toEqual([
      "rtt/websocket ok",
      "bandwidth_down/http ok",
      "loaded_rtt/websocket ok",
      "bandwidth_up/http ok",
    ]);
    for (const e of env.records) expect(e.record.period_ms).toBe(2000);
    // The echo, both transfers and one loaded echo beside the upload.
    expect(env.budget.usedSinceStart).toBe(ECHO_BYTES + 2 * 64 * KIB + ECHO_BYTES);
  });

  it("runs both transports' steps, RTTs first, and a mirror's plan the same way", async () => {
    const site = new ScriptedSite(steady);
    await run(site, targetPlan({ transport: "both", size: 64 * KIB }), new Env());
    expect(site.calls.map((c) => c.module)).toEqual([
      "rtt/websocket",
      "rtt/http",
      "download/http",
      "download/websocket",
      "upload/websocket",
      "upload/http",
    ]);
    const mirror = new ScriptedSite(steady);
    const env = new Env();
    await run(mirror, mirrorPlan({ size: 64 * KIB }), env);
    expect(mirror.calls.map((c) => c.module)).toEqual(["rtt/websocket", "download/http"]);
    // No loaded latency, no jitter.
    expect(env.made()).toEqual(["rtt/websocket ok", "bandwidth_down/http ok"]);
  });

  it("records a timed-out probe and feeds it back; a closed connection ends its transport", async () => {
    const site = new ScriptedSite(steady);
    site.script.set("rtt/websocket", [{ timedOut: true }]);
    const env = new Env();
    await run(site, targetPlan({ transport: "both", size: 64 * KIB }), env);
    // The echo timed out and closed the WebSocket: its transfers wait; fetch goes on.
    expect(site.calls.map((c) => c.module)).toEqual([
      "rtt/websocket",
      "rtt/http",
      "download/http",
      "upload/http",
    ]);
    const timedOut = env.records[0]!;
    expect(timedOut.record).toMatchObject({ status: "timeout", value: null, timeout_ms: 3000 });
    expect(timedOut.timeouts).toBe(1);
    expect(site.series.get("rtt/websocket").state().count).toBe(1);
  });

  it("records a failure with its reason, and each of its transport's steps after it", async () => {
    const site = new ScriptedSite(steady);
    site.script.set("download/websocket", [{ error: "refused" }]);
    const env = new Env();
    const report = await run(site, targetPlan({ transport: "both", size: 64 * KIB }), env);
    // The WebSocket's upload is not tried; fetch goes on.
    expect(site.calls.map((c) => c.module)).toEqual([
      "rtt/websocket",
      "rtt/http",
      "download/http",
      "download/websocket",
      "upload/http",
    ]);
    expect(env.made()).toEqual([
      "rtt/websocket ok",
      "rtt/http ok",
      "bandwidth_down/http ok",
      "bandwidth_down/websocket error",
      "bandwidth_up/websocket error",
      "loaded_rtt/websocket ok",
      "bandwidth_up/http ok",
    ]);
    expect(env.records[3]!.record).toMatchObject({
      status: "error",
      value: null,
      error: "refused",
      probe: { transport: "websocket" },
    });
    expect(report).toEqual({ answered: 4, failed: 2, problem: "refused", waitS: undefined });
    // A failure teaches the forecasters nothing.
    expect(site.series.get("bandwidth_down/websocket").state().count).toBe(0);
  });

  it("records every step of a site it cannot connect to, each round", async () => {
    const site = new ScriptedSite(steady);
    site.refuse = new ConnectionClosed(1006, "");
    const env = new Env();
    for (let round = 0; round < 2; round++) {
      const report = await run(site, WS_64K, env);
      expect(report).toMatchObject({ answered: 0, failed: 3 });
    }
    // The fetch transfers are tried (fetch needs no connection of the page's own): the
    // download fails, and the upload after it is recorded with its reason.
    expect(site.calls.map((c) => c.module)).toEqual(["download/http", "download/http"]);
    expect(env.made()).toEqual(
      Array.from({ length: 2 }, () => [
        "rtt/websocket error",
        "bandwidth_down/http error",
        "bandwidth_up/http error",
      ]).flat(),
    );
    const reasons = new Set(env.records.flatMap((e) => e.record.error ?? []));
    expect(reasons).toEqual(new Set(["no connection (refused, unreachable or cut off)"]));
    // Numbered like any probe: an outage is part of the series.
    expect(env.records.filter((e) => e.key === "rtt/websocket").map((e) => e.record.seq)).toEqual([
      0, 1,
    ]);
  });

  it("stops a site that asks to wait, and says how long", async () => {
    const site = new ScriptedSite(steady);
    site.script.set("rtt/http", [{ error: "unused" }]);
    const http = site.measurements["rtt/http"]!;
    site.measurements["rtt/http"] = { ...http, run: () => Promise.reject(new RetryLater(30)) };
    const env = new Env();
    const report = await run(site, targetPlan({ transport: "http", size: 64 * KIB }), env);
    expect(report).toMatchObject({ answered: 0, failed: 1, waitS: 30 });
    expect(env.made()).toEqual(["rtt/http error"]);
    expect(env.records[0]!.record.error).toBe("the server asked to wait 30 s");
  });

  it("stops before its next step once suspended", async () => {
    const site = new ScriptedSite(steady);
    const env = new Env();
    env.suspend = () => site.calls.length > 0;
    await run(site, targetPlan({ transport: "both", size: 64 * KIB }), env);
    expect(site.calls.map((c) => c.module)).toEqual(["rtt/websocket"]);
  });

  it("holds a transfer that does not fit in the hour's budget, with its transport's others", async () => {
    const site = new ScriptedSite(steady);
    // Room for the echoes and the pings, not for a 64 KiB transfer.
    const env = new Env(2, 10 * KIB);
    await run(site, targetPlan({ transport: "both", size: 64 * KIB }), env);
    expect(site.calls.map((c) => c.module)).toEqual(["rtt/websocket", "rtt/http"]);
    expect(env.overBudgets).toBe(2);
    expect(env.budget.used(env.now())).toBeLessThanOrEqual(10 * KIB);
  });

  it("keeps a transfer within the server's payload cap", async () => {
    const site = new ScriptedSite(steady);
    await run(
      site,
      targetPlan({ transport: "websocket", size: 4096 * KIB }),
      new Env(2, 1e12, 1000 * KIB),
    );
    expect(site.calls.filter((c) => c.module !== "rtt/websocket").map((c) => c.bytes)).toEqual([
      1000 * KIB,
      1000 * KIB,
    ]);
  });
});

/** Runs the sites' plans in one round, each site's probes its own script's. */
function runSitesEach(
  sites: readonly ScriptedSite[],
  plans: readonly Plan[],
  envs: readonly Env[],
  turn: number,
) {
  const of = (link: Link) => sites.find((s) => s.link === link)!.measurements;
  const dispatch: Measurements = {
    ...Object.fromEntries(
      MODULES.map((m) => {
        const first = sites[0]!.measurements[m]!;
        return [m, { ...first, run: (link: Link, r: ProbeRequest) => of(link)[m]!.run(link, r) }];
      }),
    ),
    loaded: {
      during: (link, work, timeoutMs, spend) =>
        of(link).loaded.during(link, work, timeoutMs, spend),
    },
  };
  return runSites(
    sites.map((site, i) => ({ site, plan: plans[i]!, env: envs[i]! })),
    dispatch,
    turn,
  );
}

describe("a round over several sites", () => {
  it("times every site's echo back to back, then every download, then the target's others", async () => {
    const target = new ScriptedSite(steady);
    const mirrors = [new ScriptedSite(steady), new ScriptedSite(steady)];
    const log: string[] = [];
    for (const [name, s] of [
      ["target", target],
      ["a", mirrors[0]!],
      ["b", mirrors[1]!],
    ] as const) {
      for (const m of MODULES) {
        const module = s.measurements[m]!;
        s.measurements[m] = {
          ...module,
          run: (l, r) => (log.push(`${name} ${m}`), module.run(l, r)),
        };
      }
    }
    const envs = [new Env(), new Env(), new Env()];
    const sites = [target, ...mirrors];
    const plans = [
      targetPlan({ transport: "websocket", size: 64 * KIB }, true),
      mirrorPlan({ size: 64 * KIB }),
      mirrorPlan({ size: 64 * KIB }),
    ];
    for (const turn of [0, 1]) {
      log.length = 0;
      const reports = await runSitesEach(sites, plans, envs, turn);
      expect(reports.map((r) => r.answered)).toEqual([3, 2, 2]);
      const order = turn === 0 ? ["target", "a", "b"] : ["a", "b", "target"];
      expect(log).toEqual([
        ...order.map((n) => `${n} rtt/websocket`),
        ...order.map((n) => `${n} download/http`),
        "target upload/http",
      ]);
    }
  });

  it("goes on with the other sites when one cannot be reached", async () => {
    const target = new ScriptedSite(steady);
    const gone = new ScriptedSite(steady);
    gone.refuse = new ConnectionClosed(1006, "");
    const envs = [new Env(), new Env()];
    const reports = await runSitesEach(
      [target, gone],
      [
        targetPlan({ transport: "websocket", size: 64 * KIB }, true),
        mirrorPlan({ size: 64 * KIB }),
      ],
      envs,
      0,
    );
    expect(reports.map((r) => [r.answered, r.failed])).toEqual([
      [3, 0],
      [0, 2],
    ]);
    expect(envs[1]!.made()).toEqual(["rtt/websocket error", "bandwidth_down/http error"]);
  });
});

describe("the series a round feeds", () => {
  it("carry the forecast made before each value, and the timeouts their bank sets", async () => {
    const site = new ScriptedSite(steady);
    site.script.set("rtt/websocket", [{ value: 10 }, { value: 12 }]);
    const env = new Env();
    await run(site, WS_64K, env);
    await run(site, WS_64K, env);
    const rtts = env.records.filter((e) => e.key === "rtt/websocket").map((e) => e.record);
    expect(rtts[0]!.forecast).toBeUndefined();
    expect(rtts[1]).toMatchObject({ value: 12, seq: 1, forecast: { value: 10, selector: "mse" } });
    // Each probe ran under the timeout its series set before it.
    const echoes = site.calls.filter((c) => c.module === "rtt/websocket");
    expect(echoes.map((c) => c.timeoutMs)).toEqual(rtts.map((r) => r.timeout_ms));
    // The records are the store's: what the history and the export read.
    expect(site.series.records("rtt/websocket")).toEqual(rtts);
  });

  it("have the predicted RTT of their transport taken off the transfers", async () => {
    const site = new ScriptedSite(steady);
    const env = new Env();
    await run(site, targetPlan({ transport: "both", size: 64 * KIB }), env);
    const transfers = site.calls.filter((c) => !c.module.startsWith("rtt"));
    // The echo and the ping of this round came first: their forecasts are 10 ms.
    expect(transfers.map((c) => c.predictedRttMs)).toEqual([10, 10, 10, 10]);
  });

  it("measure jitter between consecutive echoes, afresh on a new connection", async () => {
    const site = new ScriptedSite(steady);
    site.script.set("rtt/websocket", [{ value: 10 }, { value: 13 }, { value: 20 }, { value: 18 }]);
    const env = new Env();
    for (let round = 0; round < 4; round++) {
      if (round === 2) site.drop();
      await run(site, WS_64K, env);
    }
    const jitter = env.records.filter((e) => e.key === "jitter/websocket");
    // Rounds 2 and 4: 13 − 10 and 18 − 20; round 3 opened a new connection.
    expect(jitter.map((e) => e.record.value)).toEqual([3, 2]);
    expect(site.connects).toBe(2);
  });

  it("size an automatic probe from the forecast rate, and run a stream pretest when due", async () => {
    // Two streams move 150 Mbit/s where one moves 100; four add nothing.
    const rates: { [streams: number]: number } = { 1: 100, 2: 150, 4: 150 };
    const site = new ScriptedSite((m, r) =>
      m.startsWith("rtt") ? { value: 10 } : { value: rates[r.streams]!, durationMs: 250 },
    );
    const env = new Env(2);
    const plan = mirrorPlan({ size: "auto" });
    for (let round = 0; round <= PRETEST_AFTER; round++) await run(site, plan, env);
    const downloads = site.calls.filter((c) => c.module === "download/http");
    // The first-run burst's one try is the smallest automatic size (it lasted 250 ms, long
    // enough); then every probe has the size its rate (100 Mbit/s for 250 ms: 3.125 MB)
    // rounds up to.
    expect(downloads[0]!.bytes).toBe(autoMinBytes());
    expect(downloads[1]!.bytes).toBe(4096 * KIB);
    expect(downloads[2]!.bytes).toBe(4096 * KIB);
    // After PRETEST_AFTER measurements: each candidate tried PRETEST_PASSES times, half a
    // probe each, interleaved, then the probe on the streams chosen.
    const tries = downloads.slice(PRETEST_AFTER + 1, -1);
    expect(tries.map((c) => c.streams)).toEqual(
      Array.from({ length: PRETEST_PASSES }, () => [1, 2, 4]).flat(),
    );
    expect(tries.every((c) => c.bytes === pretestBytes(downloads.at(-1)!.bytes))).toBe(true);
    expect(downloads.at(-1)!.streams).toBe(2);
    expect(env.pretests).toEqual([
      { key: "bandwidth_down/http", results: expect.any(Array), streams: 2 },
    ]);
    // The tries are not measurements of the series.
    const down = env.records.filter((e) => e.key === "bandwidth_down/http");
    expect(down).toHaveLength(PRETEST_AFTER + 1);
  });

  it("ramp an automatic size in a first-run burst until a probe lasts long enough", async () => {
    // 16 Gbit/s behind 3 ms of request and slow start: a 64 KiB probe reads ~170 Mbit/s.
    const site = new ScriptedSite((m, r) => {
      if (m.startsWith("rtt")) return { value: 10 };
      const durationMs = 3 + (r.bytes * 8) / 16e6;
      return { value: (r.bytes * 8) / (durationMs * 1000), durationMs };
    });
    const env = new Env(2);
    await run(site, mirrorPlan({ size: "auto" }), env);
    const sizes = site.calls.filter((c) => c.module === "download/http").map((c) => c.bytes);
    // 64 KiB reads ~170 Mbit/s (8 MiB, but 64 times 64 KiB at most: 4 MiB), 4 MiB ~6.6 Gbit/s
    // (the 16 MiB cap), 16 MiB is the cap: the burst ends and the round's probe has that size.
    expect(sizes).toEqual([64 * KIB, 4096 * KIB, 16384 * KIB, 16384 * KIB]);
    // Only the probe is a record; the tries were charged to the budget.
    const down = env.records.filter((e) => e.key === "bandwidth_down/http");
    expect(down.map((e) => e.record.probe?.payload_bytes)).toEqual([16384 * KIB]);
    expect(env.budget.usedSinceStart).toBe(ECHO_BYTES + (64 + 4096 + 2 * 16384) * KIB);
    expect(env.bursts).toBe(1);
    // The next rounds run no burst.
    await run(site, mirrorPlan({ size: "auto" }), env);
    expect(env.bursts).toBe(1);
    expect(site.calls.filter((c) => c.module === "download/http")).toHaveLength(5);
  });

  it("size automatic probes and the burst for two round trips on a long path", async () => {
    // 100 Mbit/s behind 300 ms, each transfer read as the page reads it: the RTT is taken off
    // only a transfer that lasted at least that long. Sized for a quarter second, the burst
    // ended at its 64 KiB try (305 ms) and every probe read 1.7 Mbit/s.
    const site = new ScriptedSite((m, r) => {
      if (m.startsWith("rtt")) return { value: 300 };
      const raw = 300 + (r.bytes * 8) / (100 * 1000);
      return { value: rateMinusRtt(r.bytes, raw, r.predictedRttMs).mbits, durationMs: raw };
    });
    const env = new Env(2);
    const plan = mirrorPlan({ size: "auto" });
    for (let round = 0; round < 2; round++) await run(site, plan, env);
    const sizes = site.calls.filter((c) => c.module === "download/http").map((c) => c.bytes);
    // Tries until one lasts 900 ms (the RTT and two round trips of transfer), then probes of
    // 600 ms of transfer: 100 Mbit/s × 600 ms = 7.5 MB → 8 MiB.
    expect(sizes).toEqual([
      64 * KIB,
      256 * KIB,
      1024 * KIB,
      4096 * KIB,
      16384 * KIB,
      8192 * KIB,
      8192 * KIB,
    ]);
    const down = env.records.filter((e) => e.key === "bandwidth_down/http");
    expect(down.map((e) => Math.round(e.record.value!))).toEqual([100, 100]);
  });

  it("space automatic probes by the budget, and record the period they are taken at", async () => {
    const site = new ScriptedSite((m) =>
      m.startsWith("rtt") ? { value: 10 } : { value: 100, durationMs: 250 },
    );
    // 100 MiB an hour at 2 s, one transfer and its pretests: a share of 52,958 bytes a
    // round, where 100 Mbit/s wants 4 MiB probes: one every ⌈4 MiB / 52,958⌉ = 80 rounds.
    const env = new Env(2, 100 * 1024 * KIB);
    const plan = mirrorPlan({ size: "auto" });
    for (let round = 0; round <= 80; round++) await run(site, plan, env);
    const down = env.records.filter((e) => e.key === "bandwidth_down/http");
    expect(down.map((e) => e.record.probe?.payload_bytes)).toEqual([4096 * KIB, 4096 * KIB]);
    expect(down.map((e) => e.record.period_ms)).toEqual([160_000, 160_000]);
    expect(env.spacing.get("bandwidth_down/http")).toBe(80);
    // The RTT keeps the page's period.
    const rtt = env.records.filter((e) => e.key === "rtt/websocket");
    expect(rtt).toHaveLength(81);
    expect(rtt.every((e) => e.record.period_ms === 2000)).toBe(true);
    // Every probe fitted: none held back, and the hour's spend is within its budget.
    expect(env.overBudgets).toBe(0);
    expect(env.budget.usedSinceStart).toBeLessThanOrEqual(100 * 1024 * KIB);
  });

  it("keep an automatic probe within a small budget, probed as often as it allows", async () => {
    // 1 MiB an hour at 2 s where 100 Mbit/s wants 4 MiB probes: a probe larger than the whole
    // hour was spaced ~21,000 rounds (12 h) apart and could never fit when due. Capped at a
    // quarter of the hour (the burst's share), the 256 KiB probe is spaced so that the hour
    // holds it, and the page is told that the budget both spaces and shortens it.
    const site = new ScriptedSite((m) =>
      m.startsWith("rtt") ? { value: 10 } : { value: 100, durationMs: 250 },
    );
    const env = new Env(2, 1024 * KIB);
    const plan = mirrorPlan({ size: "auto" });
    await run(site, plan, env);
    await run(site, plan, env);
    const spacing = env.spacings.get("bandwidth_down/http")!;
    expect(spacing).toMatchObject({ limit: "budget", capped: true });
    const down = env.records.filter((e) => e.key === "bandwidth_down/http");
    expect(down.map((e) => e.record.probe?.payload_bytes)).toEqual([256 * KIB]);
    // The record's period is the schedule the page is told: within the hour, and so is the
    // probe.
    expect(down[0]!.record.period_ms).toBe(spacing.every * 2000);
    expect(spacing.every * 2).toBeLessThan(3600);
    expect(256 * KIB).toBeLessThanOrEqual(env.budget.perHour);
  });

  it("open nothing for an upload that is not due", async () => {
    const site = new ScriptedSite((m) =>
      m.startsWith("rtt") ? { value: 10 } : { value: 100, durationMs: 250 },
    );
    const env = new Env(2, 100 * 1024 * KIB);
    const plan = targetPlan({ transport: "websocket", size: "auto" });
    for (let round = 0; round < 5; round++) await run(site, plan, env);
    // Probed in the first round only (4 MiB each way is ~160 rounds of this budget's share):
    // the loaded-RTT connection was asked for then and not in the four skipped rounds.
    expect(env.records.filter((e) => e.key === "bandwidth_up/http")).toHaveLength(1);
    expect(site.loadConnects).toBe(1);
    expect(env.records.filter((e) => e.key === "rtt/websocket")).toHaveLength(5);
  });

  it("probe a chosen size every round, with no burst", async () => {
    const site = new ScriptedSite(steady);
    const env = new Env(2, 100 * 1024 * KIB);
    for (let round = 0; round < 3; round++) await run(site, mirrorPlan({ size: 1024 * KIB }), env);
    const sizes = site.calls.filter((c) => c.module === "download/http").map((c) => c.bytes);
    expect(sizes).toEqual([1024 * KIB, 1024 * KIB, 1024 * KIB]);
  });

  it("leave a pretest's loaded echoes unrecorded, and stop it at a timeout", async () => {
    const site = new ScriptedSite(steady);
    const env = new Env(2);
    // An echo and the WebSocket upload, which has echoes beside it.
    const upload = targetPlan({ transport: "both", size: 64 * KIB }).find(
      (s) => s.key === "bandwidth_up/websocket",
    )!;
    expect(upload.key).toBe("bandwidth_up/websocket");
    const plan: Plan = [mirrorPlan({ size: 64 * KIB })[0]!, upload];
    for (let round = 0; round < PRETEST_AFTER; round++) await run(site, plan, env);
    const before = env.records.length;
    // The second try times out (and closes the connection): the pretest keeps the one rate
    // it has, and the probe waits for the next round.
    site.script.set("upload/websocket", [{ value: 100 }, { timedOut: true }]);
    await run(site, plan, env);
    const made = env.records.slice(before).map((e) => `${e.key} ${e.record.status}`);
    expect(made).toEqual(["rtt/websocket ok"]);
    expect(env.pretests.map((p) => p.results.length)).toEqual([1]);
  });
});

describe("records", () => {
  it("read back as the history keeps them rebuild the same series", async () => {
    const site = new ScriptedSite(steady);
    site.script.set("download/http", [{ value: 90 }, { timedOut: true }, { value: 110 }]);
    const env = new Env();
    for (let round = 0; round < 3; round++) {
      site.drop();
      await run(site, WS_64K, env);
    }
    const saved = new Map<string, Record[]>();
    for (const e of env.records) saved.set(e.key, [...(saved.get(e.key) ?? []), e.record]);
    const back = new SeriesSet("scripted.example");
    back.load(saved);
    for (const key of saved.keys() as Iterable<MeasurementEvent["key"]>) {
      expect(back.get(key).state()).toEqual(site.series.get(key).state());
      expect(back.records(key)).toEqual(site.series.records(key));
    }
  });
});
