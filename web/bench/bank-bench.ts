// bench:bank — from the repository root: npx tsx web/bench/bank-bench.ts [--json]
//
// Nanoseconds per update of the NWS forecaster bank under Node, on the 1,000,000-point series
// of core/examples/bench_bank.rs: the WASM build in faithful mode (one updateBatch
// over the whole series, and one update call per value), in improved mode (batch), and the
// TypeScript faithful bank (nws-faithful.ts). Each is run once to warm up, then measured in
// BENCH_RUNS runs (default 5) on a fresh bank; the table shows the median and the spread.
// BENCH_POINTS overrides the number of points, as in the Rust benchmark. With --json, one
// object per line: bench, mode, impl, ns_per_update_median, min, max, points.
//
// The bank alone (Series.withoutTimeouts) is what the goal and the TypeScript comparison are
// about; "series" rows add the five timeout rules that every probe series of the page feeds.

import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { performance } from "node:perf_hooks";
import { loadForecasting, Series, type Mode } from "../src/forecast";
import { NwsFaithfulBank } from "./nws-faithful";
import { benchSeries } from "./series";

type Impl = "wasm_batch" | "wasm_per_call" | "wasm_series_batch" | "ts";

interface Case {
  mode: Mode;
  impl: Impl;
  /** Feeds the whole series to a fresh bank; returns ns per update and the last forecast. */
  run(xs: Float64Array): { ns: number; last: number };
}

function timed(xs: Float64Array, feed: () => number): { ns: number; last: number } {
  const start = performance.now();
  const last = feed();
  return { ns: ((performance.now() - start) * 1e6) / xs.length, last };
}

function wasmCase(mode: Mode, impl: Exclude<Impl, "ts">): Case {
  return {
    mode,
    impl,
    run(xs) {
      const s = impl === "wasm_series_batch" ? Series.create(mode) : Series.withoutTimeouts(mode);
      const result = timed(xs, () => {
        if (impl === "wasm_per_call") for (let i = 0; i < xs.length; i++) s.update(xs[i]!);
        else s.updateBatch(xs);
        return s.forecast()!.mse.value;
      });
      s.dispose();
      return result;
    },
  };
}

const tsCase: Case = {
  mode: "faithful",
  impl: "ts",
  run(xs) {
    const bank = new NwsFaithfulBank();
    return timed(xs, () => {
      bank.updateAll(xs);
      return bank.forecast()!.mse.value;
    });
  },
};

interface Result {
  mode: Mode;
  impl: string;
  median: number;
  min: number;
  max: number;
  last: number;
}

function measure(c: Case, xs: Float64Array, runs: number): Result {
  c.run(xs);
  const outcomes = Array.from({ length: runs }, () => c.run(xs));
  const ns = outcomes.map((o) => o.ns).sort((a, b) => a - b);
  return {
    mode: c.mode,
    impl: c.impl,
    median: ns[Math.floor(runs / 2)]!,
    min: ns[0]!,
    max: ns[runs - 1]!,
    last: outcomes[0]!.last,
  };
}

function cpuModel(): string {
  try {
    const line = readFileSync("/proc/cpuinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("model name"));
    return line?.split(":")[1]?.trim() ?? "unknown CPU";
  } catch {
    return "unknown CPU (no /proc/cpuinfo)";
  }
}

function positiveInt(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined) return fallback;
  const v = Number(text);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
}

async function main(): Promise<void> {
  const json = process.argv.includes("--json");
  const points = positiveInt("BENCH_POINTS", 1_000_000);
  const runs = positiveInt("BENCH_RUNS", 5);
  const wasmUrl = new URL("../../core/pkg/nowcast_core_bg.wasm", import.meta.url);
  let wasm: Buffer;
  try {
    wasm = readFileSync(wasmUrl);
  } catch {
    throw new Error(
      `${wasmUrl.pathname} is missing: build the core crate (nowcast-core)'s pkg first`,
    );
  }
  await loadForecasting(wasm);
  const xs = benchSeries(points);
  if (!json) {
    console.log(`machine: ${cpuModel()}, ${availableParallelism()} cores, Node ${process.version}`);
    console.log(
      `series: ${points} points (bench_bank.rs), first ${[...xs.slice(0, 3)].join(", ")}`,
    );
    console.log(`median of ${runs} runs after a warm-up run, ns per update (min–max)\n`);
  }
  const cases = [
    wasmCase("faithful", "wasm_batch"),
    wasmCase("faithful", "wasm_per_call"),
    wasmCase("faithful", "wasm_series_batch"),
    wasmCase("improved", "wasm_batch"),
    wasmCase("improved", "wasm_series_batch"),
    tsCase,
  ];
  const results: Result[] = [];
  for (const c of cases) {
    const r = measure(c, xs, runs);
    results.push(r);
    const fmt = (v: number) => v.toFixed(1);
    if (json) {
      const line = {
        bench: "bank_node",
        mode: r.mode,
        impl: r.impl,
        ns_per_update_median: Number(fmt(r.median)),
        min: Number(fmt(r.min)),
        max: Number(fmt(r.max)),
        points,
      };
      console.log(JSON.stringify(line));
    } else {
      const label = `${r.impl} ${r.mode}`.padEnd(24);
      console.log(`${label}${fmt(r.median).padStart(9)}  (${fmt(r.min)}–${fmt(r.max)})`);
    }
  }
  const find = (impl: string, mode: Mode) =>
    results.find((r) => r.impl === impl && r.mode === mode)!;
  const [batch, perCall, ts] = [
    find("wasm_batch", "faithful"),
    find("wasm_per_call", "faithful"),
    find("ts", "faithful"),
  ];
  // The same work, checked: both end on the same forecast (to rounding, should the Rust side
  // ever add in another order).
  if (!(Math.abs(ts.last - batch.last) <= 1e-9 * Math.abs(batch.last))) {
    throw new Error(`TS and WASM faithful banks disagree: ${ts.last} vs ${batch.last}`);
  }
  if (!json) {
    console.log(
      `\nTS/WASM faithful: ${(ts.median / batch.median).toFixed(2)} (batch), ` +
        `${(ts.median / perCall.median).toFixed(2)} (per call)`,
    );
    const met = Math.max(batch.median, perCall.median) <= 1000;
    console.log(`goal, WASM faithful ≤ 1 µs per update under Node: ${met ? "met" : "NOT met"}`);
  }
}

await main();
