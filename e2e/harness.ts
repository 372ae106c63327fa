/**
 * The e2e harness: a real echo-node serving the built page on an ephemeral loopback port, and
 * Debian's Chromium driven by playwright-core (never a downloaded browser; Playwright
 * gives each launch a fresh temporary --user-data-dir). Each page gets its own browser context,
 * so one test's IndexedDB history never shows up in another. Everything started here is
 * closed by `close()`.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { defaultConfig, type Config } from "../echo-node/src/config.js";
import { startEchoNode, type EchoNode } from "../echo-node/src/server.js";
import { build } from "vite";

export const CHROMIUM = "/usr/bin/chromium";
export const DIST = fileURLToPath(new URL("../web/dist", import.meta.url));
export const ARTIFACTS = fileURLToPath(new URL("./artifacts", import.meta.url));
const WEB = fileURLToPath(new URL("../web/", import.meta.url));

/** Why the browser tests cannot run here, or undefined when they can. */
export function missing(): string | undefined {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is not installed (Debian package chromium)`;
  return undefined;
}

const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface Rig {
  node: EchoNode;
  browser: Browser;
  /** A page in a new browser context (its own storage), closed with its context. */
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Debian's Chromium, headless, with the rig's flags and `extra` ones. */
export function launchChromium(extra: readonly string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...FLAGS, ...extra],
    timeout: 20_000,
  });
}

export async function startRig(overrides: Partial<Config> = {}): Promise<Rig> {
  if (!existsSync(join(DIST, "index.html"))) {
    throw new Error(`${DIST}/index.html is missing: build the page first (npm -w web run build)`);
  }
  const node = await startEchoNode({
    ...defaultConfig(),
    port: 0,
    host: "127.0.0.1",
    staticDir: DIST,
    name: "e2e-node",
    ...overrides,
  });
  let browser: Browser;
  try {
    browser = await launchChromium();
  } catch (e) {
    await node.close();
    throw e;
  }
  return {
    node,
    browser,
    async newPage() {
      const context = await browser.newContext();
      const page = await context.newPage();
      // The browser may be closing too: a context already gone is not an error.
      page.once("close", () => void context.close().catch(() => undefined));
      return page;
    },
    async close() {
      await browser.close();
      await node.close();
    },
  };
}

/** Probes echo-node has started, by kind, from its Prometheus text. */
export async function probeCounts(node: EchoNode): Promise<Map<string, number>> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^echo_node_probes_total\{kind="([a-z_]+)"\} (\d+)/gm)) {
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

export function total(counts: Map<string, number>): number {
  return [...counts.values()].reduce((a, b) => a + b, 0);
}

/** A record as the page exports it, with the fields the tests and benchmarks read. */
export interface ExportedRecord {
  metric: string;
  to: string;
  value: number | null;
  seq?: number;
  /** The period of the series when it was measured (schema 1.1). */
  period_ms?: number;
  probe?: { transport?: string; payload_bytes?: number; streams?: number };
}

/** The records the page exports (its "Export NDJSON" button), as the user would download them. */
export async function exportedRecords(page: Page): Promise<ExportedRecord[]> {
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.click("#export-ndjson"),
  ]);
  return readFileSync(await download.path(), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as ExportedRecord);
}

/**
 * The graph bench page (web/bench/chart-bench.html: one graph, as the page makes it, filled
 * with 10,000 points and driven from the caller), built by Vite into a temporary directory and
 * served by an echo-node of its own. `close()` stops the server and removes the build.
 */
export async function serveChartBench(): Promise<{ url: string; close(): Promise<void> }> {
  const out = mkdtempSync(join(tmpdir(), "nowcast-chart-bench-"));
  try {
    await build({
      configFile: join(WEB, "vite.config.ts"),
      logLevel: "warn",
      build: {
        outDir: out,
        emptyOutDir: true,
        rolldownOptions: { input: join(WEB, "bench", "chart-bench.html") },
      },
    });
    const node = await startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      staticDir: out,
      name: "chart-bench",
    });
    return {
      url: `${node.url}/bench/chart-bench.html`,
      close: async () => {
        await node.close();
        rmSync(out, { recursive: true, force: true });
      },
    };
  } catch (e) {
    rmSync(out, { recursive: true, force: true });
    throw e;
  }
}
