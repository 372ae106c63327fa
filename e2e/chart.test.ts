/**
 * A graph of 10,000 points in a real Chromium (the graph bench page, web/bench/chart-bench.ts):
 * after points are added without Chart.js laying the graph out again, the tooltip still finds
 * the newest point, and the band and the marks are drawn where the axes put them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser, type Page } from "playwright-core";
import { CHROMIUM, missing, serveChartBench } from "./harness.js";

const why = missing();

describe.skipIf(why !== undefined)("a graph of 10,000 points", () => {
  let bench: Awaited<ReturnType<typeof serveChartBench>>;
  let browser: Browser;
  let page: Page;
  beforeAll(async () => {
    bench = await serveChartBench();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await browser.newPage({ viewport: { width: 900, height: 500 } });
    await page.goto(bench.url);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await bench?.close();
  });

  const run = (additions: number) =>
    page.evaluate(
      (n) =>
        (
          window as unknown as {
            runChartBench(additions: number, warmup: number): Promise<{ points: number }>;
          }
        ).runChartBench(n, 0),
      additions,
    );
  const figure = () => page.locator("figure.graph");
  const layouts = async () => Number(await figure().getAttribute("data-layouts"));

  /** Each layer canvas's pixels that hold paint: their share of the canvas, how many fall in
   *  the strip of the y axis's labels (5 % of the width at the left), and the rightmost
   *  painted column in CSS px from the canvas's left. */
  const paint = () =>
    page.evaluate(() => {
      const canvases = Array.from(document.querySelectorAll<HTMLCanvasElement>("figure canvas"));
      return canvases
        .filter((c) => c.getAttribute("role") !== "img")
        .map((c) => {
          const { data, width, height } = c.getContext("2d")!.getImageData(0, 0, c.width, c.height);
          const strip = Math.floor(width * 0.05);
          let painted = 0;
          let inStrip = 0;
          let right = -1;
          for (let y = 0; y < height; y++) {
            for (let x = 0; x < width; x++) {
              if (data[4 * (y * width + x) + 3] === 0) continue;
              painted++;
              if (x < strip) inStrip++;
              right = Math.max(right, x);
            }
          }
          const dpr = c.width / c.clientWidth;
          return { share: painted / (width * height), inStrip, rightCss: (right + 0.5) / dpr };
        });
    });

  it("adds most points without laying Chart.js out again", async () => {
    expect((await run(1)).points).toBe(10_000);
    const before = await layouts();
    await run(60);
    // The x axis moves one column (~15 s of this 10,000 s graph) at a time: about four of
    // sixty additions, and a few more where the y axis's extremes change.
    const laid = (await layouts()) - before;
    expect(laid).toBeGreaterThan(0);
    expect(laid).toBeLessThan(20);
  });

  it("puts the tooltip on the newest forecast after points added between layouts", async () => {
    // An addition that left Chart.js's own points behind the graph's.
    let tries = 0;
    for (;;) {
      const before = await layouts();
      await run(1);
      if ((await layouts()) === before) break;
      expect(++tries).toBeLessThan(50);
    }
    // The band ends at the newest forecast, and the axis runs on a few pixels past it: a
    // pointer there is nearest to the newest forecast of all the points.
    const band = (await paint())[0]!;
    const box = (await figure().locator("canvas[role=img]").boundingBox())!;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.move(box.x + band.rightCss + 2, box.y + box.height / 2, { steps: 3 });
    const newest = await figure().getAttribute("data-last-forecast-x");
    expect(newest).not.toBe("");
    await expect
      .poll(() => figure().getAttribute("data-hovered-x"), { timeout: 2000 })
      .toBe(newest);
  });

  it("draws the band and the marks inside the plot, and nothing outside it", async () => {
    await run(3);
    const layers = await paint();
    // Two layers (the band under Chart.js's canvas, the marks over it), both drawn, and
    // nothing where the y axis's labels are.
    expect(layers).toHaveLength(2);
    for (const l of layers) {
      expect(l.share).toBeGreaterThan(0.02);
      expect(l.inStrip).toBe(0);
    }
  });
});
