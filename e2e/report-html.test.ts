/**
 * `nowcast report --html` as a person opens it, on a phone and on a desktop: records from real
 * probes (`nowcast serve` on loopback, `nowcast tcp` and `nowcast udp` against it, a few
 * seconds), the report written by the real binary and opened in Chromium. On a phone the plots
 * are scaled down to the screen, so their tick labels must still be readable, their titles and
 * legends must wrap instead of shrinking, and nothing may scroll sideways. A run of a few
 * seconds must spread over its time axis, not stand in one upright line.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Browser, BrowserContextOptions } from "playwright-core";
import { launchChromium, missing } from "./harness.js";
import { NOWCAST, nowcastMissing } from "./netns.js";
import { freePort } from "./ports.js";

const skip = missing() ?? nowcastMissing();
if (skip) console.warn(`report-html: skipped: ${skip}`);

function run(args: string[]): string {
  return execFileSync(NOWCAST, args, { encoding: "utf8", timeout: 20_000 });
}

interface Seen {
  scrollWidth: number;
  innerWidth: number;
  /** The rendered height, px, of the smallest tick or axis label in any plot. */
  smallestLabel: number;
  plots: number;
  legendOverlaps: number;
  /** The first time plot's points: how much of its plotting width they cover. */
  timeSpread: number;
  timeLabels: number;
  /** The first time plot's rendered height, px. */
  timeHeight: number;
}

describe.skipIf(skip)("nowcast report --html", () => {
  let dir = "";
  let server: ChildProcess | undefined;
  let browser: Browser | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "nowcast-report-html-"));
    const port = await freePort();
    server = spawn(NOWCAST, ["serve", "--bind", "127.0.0.1", "--port", String(port)], {
      stdio: "ignore",
    });
    await new Promise((r) => setTimeout(r, 300));
    const target = `127.0.0.1:${port}`;
    const tcp = run(["tcp", target, "--count", "12", "--period", "0.25", "--size", "1M", "--json"]);
    const udp = run([
      "udp",
      target,
      "--count",
      "10",
      "--period",
      "0.25",
      "--probes",
      "10",
      "--json",
    ]);
    writeFileSync(join(dir, "records.ndjson"), tcp + udp);
    run(["report", join(dir, "records.ndjson"), "--html", join(dir, "report.html")]);
    browser = await launchChromium();
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function look(opts: BrowserContextOptions): Promise<Seen> {
    const ctx = await browser!.newContext(opts);
    try {
      const page = await ctx.newPage();
      await page.goto(`file://${join(dir, "report.html")}`);
      return await page.evaluate(() => {
        const labels = Array.from(document.querySelectorAll("svg.plot text"));
        const heights = labels.map((t) => t.getBoundingClientRect().height).filter((h) => h > 0);
        let overlaps = 0;
        for (const legend of Array.from(document.querySelectorAll(".legend"))) {
          const boxes = Array.from(legend.querySelectorAll("span")).map((s) =>
            s.getBoundingClientRect(),
          );
          boxes.forEach((a, i) =>
            boxes.slice(i + 1).forEach((b) => {
              const apart =
                a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;
              if (!apart) overlaps += 1;
            }),
          );
        }
        const first = document.querySelector("svg.plot");
        const frame = first?.querySelector("rect.frame")?.getBoundingClientRect();
        const xs = Array.from(first?.querySelectorAll("circle") ?? []).map(
          (c) => c.getBoundingClientRect().x,
        );
        return {
          scrollWidth: document.documentElement.scrollWidth,
          innerWidth: window.innerWidth,
          smallestLabel: Math.min(...heights),
          plots: document.querySelectorAll("figure.fig").length,
          legendOverlaps: overlaps,
          timeSpread: frame && xs.length ? (Math.max(...xs) - Math.min(...xs)) / frame.width : 0,
          timeLabels: first?.querySelectorAll("text.xl").length ?? 0,
          timeHeight: first?.getBoundingClientRect().height ?? 0,
        };
      });
    } finally {
      await ctx.close();
    }
  }

  test("on a phone: readable labels, wrapped legends, nothing wider than the screen", async () => {
    const seen = await look({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
    });
    expect(seen.plots).toBeGreaterThanOrEqual(10);
    expect(seen.scrollWidth).toBeLessThanOrEqual(seen.innerWidth);
    // 10 px labels in a 760-wide plot scaled to ~344 px were 5 px tall before.
    expect(seen.smallestLabel).toBeGreaterThanOrEqual(9);
    expect(seen.legendOverlaps).toBe(0);
    expect(seen.timeSpread).toBeGreaterThan(0.2);
    expect(seen.timeLabels).toBeGreaterThanOrEqual(3);
    // A plot over time is drawn wider than the screen, to scroll within its figure: scaled
    // down to the screen it was a band ~118 px tall.
    expect(seen.timeHeight).toBeGreaterThan(180);
  });

  test("on a desktop, dark", async () => {
    const seen = await look({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" });
    expect(seen.scrollWidth).toBeLessThanOrEqual(seen.innerWidth);
    expect(seen.smallestLabel).toBeGreaterThanOrEqual(9);
    expect(seen.legendOverlaps).toBe(0);
    expect(seen.timeSpread).toBeGreaterThan(0.2);
  });
});
