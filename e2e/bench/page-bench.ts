// bench:page — from the repository root, after `npm -w web run build`:
//   npx tsx e2e/bench/page-bench.ts [sizes|navigation|chart|bandwidth ...]
// (all parts when none is named; BENCH_QUICK=1 for shorter runs)
//
// The page's performance goals, measured in Debian's headless Chromium against a
// real echo-node on loopback, as the e2e tests run them (e2e/harness.ts):
// - navigation to the first plotted measurement, in fresh browser contexts (empty HTTP cache);
// - adding one point to a graph of 10,000 and redrawing (web/bench/chart-bench.ts);
// - the page's size: what Chromium transfers from echo-node (compressed by echo-node) and the
//   gzip -9 size of the built files, on first open (the goal) and of the file readers' module,
//   which the page loads only when a file is imported or exported;
// - the highest download bandwidth the page itself measures (its own probes, read from its
//   NDJSON export), next to iperf3 on the same loopback in the same run.
// Benchmarks never fail on a number: this prints medians, spreads and ratios.

import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readdirSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { cpus } from "node:os";
import { extname, join } from "node:path";
import type { Browser, Page } from "playwright-core";
import {
  ARTIFACTS,
  DIST,
  exportedRecords,
  missing,
  serveChartBench,
  startRig,
  type ExportedRecord,
  type Rig,
} from "../harness.js";

const quick = (process.env.BENCH_QUICK ?? "") !== "";
const GIB = 1024 ** 3;

// ---------------------------------------------------------------- figures

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))));
  return sorted[i]!;
}

/** "median (min–max)", and the 90th percentile when asked. */
function spread(xs: number[], digits: number, p90 = false): string {
  const s = [...xs].sort((a, b) => a - b);
  const f = (x: number) => x.toFixed(digits);
  const base = `${f(quantile(s, 0.5))} (${f(s[0] ?? NaN)}–${f(s.at(-1) ?? NaN)})`;
  return p90 ? `${base}, p90 ${f(quantile(s, 0.9))}` : base;
}

const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} KB`;
const line = (label: string, value: string) => console.log(`${label.padEnd(48)} ${value}`);

// ---------------------------------------------------------------- sizes on disk

type Kind = "js" | "wasm" | "css" | "html" | "other";
const kindOf = (path: string): Kind => {
  const pathname = new URL(path, "http://x").pathname;
  if (pathname.endsWith("/")) return "html";
  const ext = extname(pathname).slice(1);
  return ext === "js" || ext === "wasm" || ext === "css" || ext === "html" ? ext : "other";
};

/** Bytes of `gzip -9` (the command, as the goals are stated; zlib's level 9 is ~1 % larger). */
const gzip9 = (file: string) => execFileSync("gzip", ["-9c", file], { maxBuffer: 1 << 30 }).length;

/**
 * The file readers' module (core/src/wasm_reader.rs, web/src/forecast.ts `loadReader`): its
 * glue chunk and its WASM, which the page fetches only when a file is imported or exported.
 */
const lazy = (file: string) => file.startsWith("nowcast_reader");

function distSizes(): void {
  const assets = join(DIST, "assets");
  const rows = readdirSync(assets).map((f) => {
    const path = join(assets, f);
    return { f, kind: kindOf(f), lazy: lazy(f), raw: statSync(path).size, gz: gzip9(path) };
  });
  const index = join(DIST, "index.html");
  console.log("built files (web/dist), raw and gzip -9:");
  for (const r of rows) {
    line(`  assets/${r.f}`, `${kb(r.raw)} raw, ${kb(r.gz)} gzip${r.lazy ? " (lazy)" : ""}`);
  }
  line("  index.html", `${kb(statSync(index).size)} raw, ${kb(gzip9(index))} gzip`);
  const sum = (k: Kind | "all", key: "raw" | "gz", loaded: boolean) =>
    rows
      .filter((r) => r.lazy !== loaded && (k === "all" || r.kind === k))
      .reduce((n, r) => n + r[key], 0);
  const figures = (loaded: boolean) =>
    `${kb(sum("all", "gz", loaded))} (JS ${kb(sum("js", "gz", loaded))}, ` +
    `WASM ${kb(sum("wasm", "gz", loaded))}, CSS ${kb(sum("css", "gz", loaded))}); ` +
    `raw ${kb(sum("all", "raw", loaded))}`;
  line("  JS + WASM + CSS, first open (goal ≤ 200 KB)", figures(true));
  line("  file readers, on import/export (lazy)", figures(false));
}

// ---------------------------------------------------------------- navigation and transfer

interface Transfer {
  url: string;
  kind: Kind;
  encoding: string;
  body: number;
  headers: number;
}

/** Milliseconds from navigation start to the first measurement plotted (chart-view.ts sets
 *  data-measurements on a graph's figure once it is drawn), recorded in the page itself. */
const FIRST_PLOT_PROBE = () => {
  const w = window as unknown as { __firstPlotMs?: number };
  new MutationObserver((_, observer) => {
    if (document.querySelector("figure.graph[data-measurements]:not([data-measurements='0'])")) {
      w.__firstPlotMs = performance.now();
      observer.disconnect();
    }
  }).observe(document, { attributes: true, subtree: true, attributeFilter: ["data-measurements"] });
};

async function navigate(rig: Rig): Promise<{ ms: number; transfers: Transfer[] }> {
  const context = await rig.browser.newContext();
  try {
    const page = await context.newPage();
    await page.addInitScript(FIRST_PLOT_PROBE);
    const transfers: Transfer[] = [];
    const pending: Promise<void>[] = [];
    page.on("requestfinished", (request) => {
      const url = new URL(request.url());
      if (url.pathname.startsWith("/api/") || url.protocol.startsWith("ws")) return;
      pending.push(
        (async () => {
          const [sizes, response] = await Promise.all([request.sizes(), request.response()]);
          // Chromium reports no body size for a worker's script: its Content-Length (the
          // encoded length echo-node sent) stands in.
          const length = Number((await response?.headerValue("content-length")) ?? 0);
          transfers.push({
            url: url.pathname,
            kind: kindOf(url.pathname),
            encoding: (await response?.headerValue("content-encoding")) ?? "identity",
            body: sizes.responseBodySize > 0 ? sizes.responseBodySize : length,
            headers: sizes.responseHeadersSize,
          });
        })(),
      );
    });
    await page.goto(rig.node.url + "/");
    const handle = await page.waitForFunction(
      () => (window as unknown as { __firstPlotMs?: number }).__firstPlotMs,
      undefined,
      { timeout: 20_000, polling: 20 },
    );
    const ms = (await handle.jsonValue()) as number;
    await Promise.all(pending);
    return { ms, transfers };
  } finally {
    await context.close();
  }
}

async function navigation(rig: Rig): Promise<void> {
  // A first load, not counted, lets echo-node finish its background Brotli versions (as on a
  // server that has been up for more than a second) and Chromium warm its own caches.
  await navigate(rig);
  await new Promise((r) => setTimeout(r, 1500));
  const runs = quick ? 5 : 11;
  const times: number[] = [];
  let transfers: Transfer[] = [];
  for (let i = 0; i < runs; i++) {
    const r = await navigate(rig);
    times.push(r.ms);
    transfers = r.transfers;
  }
  line(
    `navigation → first plotted measurement, ms (goal ≤ 1000)`,
    `median ${spread(times, 0)}, ${runs} fresh contexts`,
  );
  console.log("transferred by Chromium from echo-node (response bodies, last load):");
  for (const t of transfers.sort((a, b) => a.url.localeCompare(b.url))) {
    line(`  ${t.url}`, `${kb(t.body)} ${t.encoding} (+${t.headers} B headers)`);
  }
  const sum = (k: Kind | "page") =>
    transfers
      .filter((t) => (k === "page" ? ["js", "wasm", "css"].includes(t.kind) : t.kind === k))
      .reduce((n, t) => n + t.body, 0);
  line(
    "  JS + WASM + CSS as transferred (goal ≤ 200 KB)",
    `${kb(sum("page"))} (JS ${kb(sum("js"))}, WASM ${kb(sum("wasm"))}, CSS ${kb(sum("css"))}); ` +
      `HTML ${kb(sum("html"))}`,
  );
}

// ---------------------------------------------------------------- add a point and redraw

/** What `runChartBench` in web/bench/chart-bench.ts returns (the page is typed with the web
 *  project's module resolution, so its types are not imported here). */
interface ChartBenchResult {
  script: number[];
  raster: number[];
  points: number;
  layouts: number;
  canvas: { width: number; height: number };
}

async function chartRedraw(browser: Browser): Promise<void> {
  const bench = await serveChartBench();
  const additions = quick ? 150 : 600;
  const warmup = 30;
  /** One run of `fn` (runChartBench or runPeerBench) in a page of its own. */
  const run = async (fn: "runChartBench" | "runPeerBench", screenshot: string) => {
    const context = await browser.newContext();
    try {
      const page: Page = await context.newPage();
      await page.goto(bench.url);
      const r = (await page.evaluate(
        ([f, n, w]) =>
          (
            window as unknown as Record<
              string,
              (additions: number, warmup: number) => Promise<ChartBenchResult>
            >
          )[f as string]!(n as number, w as number),
        [fn, additions, warmup] as const,
      )) as ChartBenchResult;
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, screenshot) });
      return r;
    } finally {
      await context.close();
    }
  };
  try {
    const ours = await run("runChartBench", "chart-bench.png");
    const peer = await run("runPeerBench", "chart-bench-peer.png");
    line(
      "add one point to 10,000 + redraw, ms (goal ≤ 4)",
      `median ${spread(ours.raster, 2, true)}, ${ours.raster.length} additions, ` +
        `canvas ${ours.canvas.width}×${ours.canvas.height}`,
    );
    line("  of which script (add + draw)", `median ${spread(ours.script, 2, true)}`);
    line(
      "  additions that laid Chart.js out again",
      `${ours.layouts} of ${additions + warmup} (x axis moves a column, y extremes change)`,
    );
    line(
      "peer: Chart.js alone (Decimation min-max, Filler)",
      `median ${spread(peer.raster, 2, true)}; script ${spread(peer.script, 2)}`,
    );
    line("graph / peer, medians", (median(ours.raster) / median(peer.raster)).toFixed(3));
  } finally {
    await bench.close();
  }
}

// ---------------------------------------------------------------- bandwidth

/** The page's own download measurements over `seconds`, from its NDJSON export. */
async function pageBandwidth(rig: Rig, query: string, seconds: number): Promise<ExportedRecord[]> {
  const context = await rig.browser.newContext({ acceptDownloads: true });
  try {
    const page = await context.newPage();
    await page.goto(`${rig.node.url}/${query}`);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    return (await exportedRecords(page)).filter(
      (r) => r.metric === "bandwidth_down" && r.value !== null,
    );
  } finally {
    await context.close();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/** iperf3, one stream, server to client (a download) on 127.0.0.1, in Gbit/s. */
async function iperf3(seconds: number): Promise<number> {
  const port = await freePort();
  const server = spawn("iperf3", ["-s", "-1", "-B", "127.0.0.1", "-p", String(port)], {
    stdio: "ignore",
  });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const out = execFileSync(
      "iperf3",
      ["-c", "127.0.0.1", "-p", String(port), "-R", "-P", "1", "-t", String(seconds), "-J"],
      { encoding: "utf8", timeout: (seconds + 10) * 1000 },
    );
    const doc = JSON.parse(out) as { end: { sum_received: { bits_per_second: number } } };
    return doc.end.sum_received.bits_per_second / 1e9;
  } finally {
    server.kill();
  }
}

function haveIperf3(): boolean {
  try {
    execFileSync("iperf3", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

async function bandwidth(rig: Rig): Promise<void> {
  const seconds = quick ? 8 : 20;
  // The largest sizes the page offers (16 MB in its list; automatic grows to its cap on a
  // fast link), both transports, one round a second, a budget that never stops it.
  const runs: [string, string][] = [
    ["size=auto", "?period=1&size=auto&transport=both&budget=1048576"],
    ["size=16m", "?period=1&size=16m&transport=both&budget=1048576"],
  ];
  const best = new Map<string, number>();
  for (const [name, query] of runs) {
    const records = await pageBandwidth(rig, query, seconds);
    for (const transport of ["websocket", "http"]) {
      const xs = records.filter((r) => r.probe?.transport === transport).map((r) => r.value!);
      const gbit = xs.map((x) => x / 1000);
      const sizes = [
        ...new Set(
          records
            .filter((r) => r.probe?.transport === transport)
            .map((r) => r.probe?.payload_bytes),
        ),
      ];
      const streams = [
        ...new Set(
          records.filter((r) => r.probe?.transport === transport).map((r) => r.probe?.streams ?? 1),
        ),
      ];
      if (xs.length === 0) {
        line(`  page download, ${transport}, ${name}`, "no measurement");
        continue;
      }
      line(
        `  page download, ${transport}, ${name}, Gbit/s`,
        `median ${spread(gbit, 2)}, max ${Math.max(...gbit).toFixed(2)}, ${xs.length} probes, ` +
          `sizes ${sizes.map((s) => kb(s ?? 0)).join("/")}, streams ${streams.join("/")}`,
      );
      best.set(transport, Math.max(best.get(transport) ?? 0, ...gbit));
    }
  }
  const highest = Math.max(0, ...best.values());
  line("highest page download, Gbit/s (goal ≥ 5)", highest.toFixed(2));
  if (!haveIperf3()) {
    line("iperf3", "not installed (Debian package iperf3): no ratio");
    return;
  }
  const iperf = [];
  for (let i = 0; i < 3; i++) iperf.push(await iperf3(quick ? 2 : 3));
  line("iperf3 -R, one stream, loopback, Gbit/s", `median ${spread(iperf, 2)}, 3 runs`);
  line("page highest / iperf3 median", (highest / median(iperf)).toFixed(3));
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const why = missing();
  if (why !== undefined) {
    console.log(`page bench skipped: ${why}`);
    return;
  }
  if (!statSync(join(DIST, "index.html"), { throwIfNoEntry: false })) {
    console.log(`page bench skipped: ${DIST} is not built (npm -w web run build)`);
    return;
  }
  const parts = process.argv.slice(2);
  const wanted = (part: string) => parts.length === 0 || parts.includes(part);
  console.log(`machine: ${cpus()[0]?.model ?? "?"}, ${cpus().length} cores; Chromium headless`);
  if (wanted("sizes")) distSizes();
  const rig = await startRig({
    // The bandwidth probes must not meet the public server's per-client limits on loopback.
    bytesPerMinute: 1024 * GIB,
    maxPayload: 4 * GIB - 1,
  });
  try {
    if (wanted("navigation")) await navigation(rig);
    if (wanted("chart")) await chartRedraw(rig.browser);
    if (wanted("bandwidth")) await bandwidth(rig);
  } finally {
    await rig.close();
  }
}

await main();
