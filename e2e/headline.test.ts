/**
 * The page as a person first sees it, against a real echo-node: the headline (download,
 * upload and round trip, each with its next range and verdict) above the fold on a desktop and
 * on a phone, in light and dark mode, with screenshots of each saved to e2e/artifacts/; the
 * graphs' captions naming the colours they use in either theme; the predictability view's
 * opening sentence without a click; Clear history asking first; the byte budget kept across a
 * reload.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { ARTIFACTS, exportedRecords, missing, startRig, type Rig } from "./harness.js";
import { openPage, plotted, sleep, waitForMeasurements } from "./page-helpers.js";

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the headline tests: ${why}`);

const VIEWS = [
  { name: "desktop", viewport: { width: 1366, height: 900 }, scheme: "light" },
  { name: "desktop", viewport: { width: 1366, height: 900 }, scheme: "dark" },
  { name: "phone", viewport: { width: 390, height: 844 }, scheme: "light" },
  { name: "phone", viewport: { width: 390, height: 844 }, scheme: "dark" },
] as const;

/** An RGB colour as the browser computes it ("rgb(0, 114, 178)"). */
function rgb(css: string): [number, number, number] {
  const m = /rgba?\((\d+), (\d+), (\d+)/.exec(css);
  if (m === null) throw new Error(`not an rgb() colour: ${css}`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** Bytes from the status line's "2.82 MiB of 500 MiB this hour". */
async function usedThisHour(page: Page): Promise<number> {
  const text = (await page.textContent("#bytes")) ?? "";
  const m = /^([\d.]+) (B|KiB|MiB|GiB) of/.exec(text);
  if (m === null) return NaN;
  const scale = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }[m[2] as "B"];
  return Number(m[1]) * scale;
}

describe.skipIf(why !== undefined)("the page at a glance", () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig();
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => {
    await rig?.close();
  });

  it.each(VIEWS)(
    "shows the headline without scrolling ($name, $scheme) and saves its screenshots",
    async ({ name, viewport, scheme }) => {
      const context = await rig.browser.newContext({ viewport, colorScheme: scheme });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(e.message));
      try {
        await page.goto(`${rig.node.url}/?period=1&transport=both&size=64k`);
        await waitForMeasurements(page, "bandwidth_down/http", 3, 15_000);
        await waitForMeasurements(page, "bandwidth_up/websocket", 3, 5000);
        // A few more rounds, so that the sparklines and the graphs have something to show.
        await sleep(1500);
        for (const card of ["down", "up", "rtt"]) {
          const c = page.locator(`.card[data-direction="${card}"]`);
          expect(await c.locator(".value").textContent(), card).toMatch(/^\d/);
          expect(await c.locator(".unit").textContent(), card).toMatch(/^(ms|Mbit\/s|Gbit\/s)$/);
          expect(await c.locator(".next").textContent(), card).toMatch(
            /^next 1 s: (about )?[\d.]+(–[\d.]+)? (ms|Mbit\/s|Gbit\/s)$/,
          );
          expect(await c.locator(".verdict").textContent(), card).toMatch(
            /^(learning|Steady|Variable|Erratic)$/,
          );
          const box = await c.boundingBox();
          // Whole, above the fold.
          expect(box!.y + box!.height, card).toBeLessThanOrEqual(viewport.height);
          expect(box!.x + box!.width, card).toBeLessThanOrEqual(viewport.width);
        }
        // 64 KiB on loopback lasts well under 50 ms. Whether that is too short to time depends
        // on how many of the path's round trips it lasted (headline-math.ts SHORT_PROBE_RTTS:
        // on a loaded machine a 64 KiB probe can last 40 loopback RTTs and be timed truly), so
        // the card's verdict and its words must agree, whichever it is; and each card says
        // which transport its figure is from and why (with both transports measuring, the
        // faster of the two lately).
        const down = page.locator('.card[data-direction="down"]');
        const trust = await down.getAttribute("data-trust");
        expect(["short", "timed"]).toContain(trust);
        const downMeta = (await down.locator(".meta").textContent()) ?? "";
        if (trust === "short") expect(downMeta).toMatch(/too short to time/);
        else expect(downMeta).not.toMatch(/too short to time/);
        const up = (await page.textContent('.card[data-direction="up"] .meta')) ?? "";
        expect(up).toMatch(/via (fetch|WebSocket) \(the faster of the two lately\)/);
        const sideways = await page.evaluate(
          () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
        );
        expect(sideways).toBeLessThanOrEqual(0);

        // The captions name the colours the marks have, in this theme too.
        const note = (await page.textContent("#graphs-section .legend-note")) ?? "";
        expect(note).toContain("Blue dots are measurements");
        expect(note).toContain("orange diamonds are the forecast");
        const [measured, forecast] = await page.$$eval(
          'figure[data-series="rtt/websocket"] .graph-key span[aria-hidden]',
          (marks) => marks.slice(0, 2).map((m) => getComputedStyle(m).color),
        );
        const [mr, , mb] = rgb(measured!);
        const [fr, , fb] = rgb(forecast!);
        expect(mb, `measured ${measured}`).toBeGreaterThan(mr + 60);
        expect(fr, `forecast ${forecast}`).toBeGreaterThan(fb + 120);
        expect(rgb(await page.$eval(".mark.measured", (m) => getComputedStyle(m).color))).toEqual(
          rgb(measured!),
        );

        const file = `${name}-${scheme}`;
        await page.screenshot({ path: join(ARTIFACTS, `${file}.png`) });
        await page.screenshot({ path: join(ARTIFACTS, `${file}-full.png`), fullPage: true });
        expect(errors).toEqual([]);
      } finally {
        await context.close();
      }
    },
    40_000,
  );

  it("opens the predictability view with a sentence, without a click", async () => {
    const { page, done } = await openPage(rig, "?period=1");
    await waitForMeasurements(page, "rtt/websocket", 13, 20_000);
    await page.waitForFunction(
      () =>
        /^The next RTT is usually within ±[\d.]+ ms of its forecast \(9 in 10 of the \d+ forecasts so far were\)/.test(
          document.querySelector("#predictability-summary")?.textContent ?? "",
        ),
      undefined,
      { timeout: 10_000, polling: 100 },
    );
    console.log(`e2e: predictability ${await page.textContent("#predictability-summary")}`);
    // The page's forecasts combine the bank's forecasters (improved mode): the sentence says
    // so, with the largest weight's share, rather than naming one as if it were the forecast.
    const verdict = (await page.textContent("#predictability-verdict")) ?? "";
    console.log(`e2e: ${verdict}`);
    expect(verdict).toMatch(
      /^In use: a combination of the forecasters below, .*; the largest weight \((<1|\d+) %\) is \S.*'s(, for its recent forecasts)?\. The forecasts are off by \S+ ms on average\./,
    );
    // The histogram's axis says the unit.
    const x = await page.$$eval("#predictability figure", (f) => f.length);
    expect(x).toBe(2);
    expect(await page.textContent("#predictability tr.in-use th")).toMatch(
      /\(largest weight, (<1|\d+) %\)$/,
    );
    await done();
  });

  it("keeps the graphs measured each period on their own time axis while the budget spaces bandwidth probes", async () => {
    // The defaults on loopback: the automatic size grows until a probe lasts 250 ms, and the
    // budget spaces such probes minutes apart; the RTT is measured every second.
    const { page, done } = await openPage(rig, "?period=1");
    await waitForMeasurements(page, "bandwidth_down/http", 1, 20_000);
    await waitForMeasurements(page, "rtt/websocket", 6, 10_000);
    const axis = (series: string) =>
      page.$eval(`figure[data-series="${series}"]`, (f) => {
        const d = (f as HTMLElement).dataset;
        return {
          min: Number(d.axisMin),
          max: Number(d.axisMax),
          measured: Number(d.lastMeasuredX),
          forecast: Number(d.lastForecastX),
        };
      });
    const down = await axis("bandwidth_down/http");
    // The download's next forecast stands minutes ahead, and its graph shows it.
    expect(down.forecast - down.measured).toBeGreaterThan(60_000);
    expect(down.max).toBeGreaterThanOrEqual(down.forecast);
    // The RTT's graphs span their seconds of measurements, not those minutes.
    for (const series of ["rtt/websocket", "jitter/websocket"]) {
      const a = await axis(series);
      expect(a.max, series).toBeGreaterThanOrEqual(a.forecast);
      expect(a.max - a.min, series).toBeLessThan(60_000);
    }
    await done();
  });

  it("keeps a phone's tables and mirror list readable: the figures beside the row names, text wrapped whole", async () => {
    const viewport = { width: 390, height: 844 };
    const context = await rig.browser.newContext({ viewport, hasTouch: true, isMobile: true });
    try {
      const page = await context.newPage();
      // A mirror named in the link, by a URL long enough to wrap (never probed: unticked).
      await page.goto(
        `${rig.node.url}/?period=1&size=64k&mirrors=http://127.0.0.1:9/a/mirror/of/this/site/`,
      );
      await waitForMeasurements(page, "loaded_rtt/websocket", 1, 15_000);
      await page.click("#details summary");
      const right = (selector: string) =>
        page.$eval(selector, (e) => e.getBoundingClientRect().right);
      // The series table scrolls sideways, but its row names wrap: the last measurement is
      // on the screen beside them, and the caption wraps to the screen, not to the table.
      expect(await right("#series-table thead th:nth-child(2)")).toBeLessThanOrEqual(
        viewport.width,
      );
      expect(await right("#series-table caption")).toBeLessThanOrEqual(viewport.width);
      expect(await right("#ranking-table caption")).toBeLessThanOrEqual(viewport.width);
      // The mirror's name and URL wrap as one sentence beside its box: the URL's second line
      // starts under the name, not in a column of its own.
      const [name, where] = await page.$$eval(
        "#mirror-list li .mirror-name, #mirror-list li .mirror-where",
        (spans) =>
          spans.map((s) =>
            Array.from(s.getClientRects()).map((r) => ({ left: r.left, top: r.top })),
          ),
      );
      expect(where!.length).toBeGreaterThan(1);
      expect(Math.min(...where!.map((r) => r.left))).toBeLessThanOrEqual(name![0]!.left + 1);
      // No control sticks out of its panel: a select as wide as its longest option (the
      // loaded RTT's title) shrinks with its label.
      const sticking = await page.$$eval("section select, section input, section button", (els) =>
        els
          .filter((e) => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.right > e.closest("section")!.getBoundingClientRect().right;
          })
          .map((e) => e.id || e.tagName),
      );
      expect(sticking).toEqual([]);
      const sideways = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(sideways).toBeLessThanOrEqual(0);
    } finally {
      await context.close();
    }
  });

  it("asks before clearing the history, and keeps it when told to", async () => {
    const { page, done } = await openPage(rig, "?period=1");
    await waitForMeasurements(page, "rtt/websocket", 3, 10_000);
    await page.click("#clear-history");
    const dialog = page.locator("#clear-dialog");
    await dialog.waitFor({ state: "visible", timeout: 2000 });
    expect(await dialog.textContent()).toContain("cannot be undone");
    await page.click("#clear-dialog button[value=cancel]");
    await dialog.waitFor({ state: "hidden", timeout: 2000 });
    await sleep(1500);
    expect((await plotted(page, "rtt/websocket")).measurements).toBeGreaterThanOrEqual(3);

    // An export says what it wrote, beside the download.
    const exported = await exportedRecords(page);
    expect(await page.textContent("#import-report")).toContain(
      `Exported ${exported.length} records to nowcast-`,
    );
    await page.click("#clear-history");
    await page.click("#clear-confirm");
    await page.waitForSelector('figure[data-series="rtt/websocket"]', {
      state: "detached",
      timeout: 5000,
    });
    // The clearing is said, and the reports of what went with it are gone.
    expect(await page.textContent("#import-report")).toBe(
      "History cleared: every measurement and imported series in this browser is gone.",
    );
    await done();
  });

  it("keeps the hour's byte budget across a reload", async () => {
    const { page, done } = await openPage(rig, "?period=1&size=256k");
    await waitForMeasurements(page, "bandwidth_up/http", 3, 15_000);
    await page.click("#suspend");
    await sleep(1500);
    const before = await usedThisHour(page);
    expect(before).toBeGreaterThan(1024 * 1024);
    await page.reload();
    await page.waitForFunction(
      () => /of 500 MiB this hour/.test(document.querySelector("#bytes")?.textContent ?? ""),
      undefined,
      { timeout: 5000, polling: 50 },
    );
    const after = await usedThisHour(page);
    console.log(`e2e: budget used ${before} B before the reload, ${after} B after it`);
    // The formatted figures round to three digits.
    expect(after).toBeGreaterThanOrEqual(before * 0.99);
    await done();
  });

  it("measures truly by default: after the first-run burst the download reads as large probes do", async () => {
    // The defaults: automatic size, 500 MiB an hour. On loopback a 64 KiB probe lasts well
    // under a millisecond; the burst ramps the size until a probe lasts long enough (or
    // reaches the 32 MiB cap), and the first recorded probe has that size. Five first runs,
    // each in a browser context of its own (no history, a fresh budget).
    const RUNS = 5;
    const firsts: number[] = [];
    const rates: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const { page, done } = await openPage(rig, "?period=1");
      await waitForMeasurements(page, "bandwidth_down/http", 1, 20_000);
      const down = page.locator('.card[data-direction="down"]');
      const value = Number(await down.locator(".value").textContent());
      const unit = (await down.locator(".unit").textContent()) ?? "";
      const trust = await down.getAttribute("data-trust");
      const meta = (await down.locator(".meta").textContent()) ?? "";
      const next = (await down.locator(".next").textContent()) ?? "";
      firsts.push(unit === "Gbit/s" ? value * 1000 : unit === "Mbit/s" ? value : NaN);
      console.log(`e2e: first-run download: ${value} ${unit} (${trust}; "${next}"; ${meta})`);
      expect(trust).toBe("timed");
      expect(meta).not.toMatch(/too short/);
      // The budget cannot afford a probe that long every second: the forecast is of the
      // next probe, minutes away, and the card says so.
      expect(next).toMatch(/^next (~?\d+ minutes|\d+ s):/);
      expect(next).not.toMatch(/^next 1 s/);
      // The status line says so too, once the round has ended.
      await page.waitForFunction(
        () =>
          /(bandwidth|download) every \d+ min.*, as often as the hourly budget/.test(
            document.querySelector("#state")?.textContent ?? "",
          ),
        undefined,
        { timeout: 10_000, polling: 50 },
      );
      // An echo is no transfer: the RTT card is never "too short".
      const rtt = page.locator('.card[data-direction="rtt"]');
      expect(await rtt.getAttribute("data-trust")).toBe("timed");
      if (run === 0) {
        await page.screenshot({ path: join(ARTIFACTS, "first-run.png") });
        // A new period keeps the bandwidth schedule's minutes until the next round works it out
        // again (a round's share of the budget grows with the period): going to a minute, the
        // status line said "bandwidth every 4 h 14 min", 254 rounds of 2 s counted at 60 s.
        const span = (text: string) => /(?:bandwidth|download) every ([^,]+),/.exec(text)?.[1];
        const before = span((await page.locator("#state").textContent()) ?? "");
        await page.selectOption("#period", "60");
        await page.waitForFunction(
          () => /^Measuring every 1 min/.test(document.querySelector("#state")?.textContent ?? ""),
          undefined,
          { timeout: 5_000, polling: 50 },
        );
        const after = span((await page.locator("#state").textContent()) ?? "");
        console.log(
          `e2e: bandwidth every ${before} at 1 s, every ${after} after the period went to 1 min`,
        );
        expect(after).toBe(before);
      }
      // The page's measuring stops, so that the large probes below have the wire to
      // themselves (its bandwidth probes are spaced minutes apart anyway).
      await page.click("#suspend");
      await sleep(1000);
      // The page's own large probes, taken between the first runs so that both see the
      // machine in the same state: 32 MiB fetched and read to its end, twice a run.
      const large = await page.evaluate(async (tag) => {
        const out: number[] = [];
        for (let i = 0; i < 2; i++) {
          const bytes = 32 * 1024 * 1024;
          const t0 = performance.now();
          const res = await fetch(`/api/download?bytes=${bytes}&n=large${tag}-${i}`, {
            cache: "no-store",
          });
          const reader = res.body!.getReader();
          let got = 0;
          for (;;) {
            const r = await reader.read();
            if (r.done) break;
            got += r.value.byteLength;
          }
          out.push((got * 8) / ((performance.now() - t0) * 1000));
        }
        return out;
      }, run);
      rates.push(...large);
      await done();
    }
    // On a loaded two-core machine one 32 MiB fetch on loopback varies 1.6-3.3x from one to
    // the next (the scheduling of the browser's and echo-node's threads decides it), and
    // the page's periodic 32 MiB probes as much, so the comparison is of typical figures:
    // the median of the five first runs against the median of the ten large fetches. The
    // ratio to their best is printed. Ratios seen (2026-11-24/25): 0.90-1.14 in most runs,
    // 0.71 once in a full `npm test` (four of five first runs at 2.0-2.3 Gbit/s against
    // fetches of 2.6-3.8), and 0.627 once (2026-12-02, a fresh clone's `npm test`: first
    // runs 2.3-3.8 Gbit/s against fetches of 3.5-4.6; 0.855 in the run before), so the
    // bound is ±40 %: it still fails a default that reads a fast link at half its rate, and
    // the page's accuracy to ±5 % is asserted on emulated links (emulated-links.test.ts),
    // where the rate is known.
    const mid = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2;
    };
    const first = mid(firsts);
    const typical = mid(rates);
    const best = Math.max(...rates);
    console.log(
      `e2e: first-run downloads ${firsts.map((r) => r.toFixed(0)).join(", ")} Mbit/s; ` +
        `32 MiB fetches ${rates.map((r) => r.toFixed(0)).join(", ")} Mbit/s; median ` +
        `${(first / typical).toFixed(3)} of theirs, ${(first / best).toFixed(3)} of their best`,
    );
    expect(Math.abs(first / typical - 1)).toBeLessThanOrEqual(0.4);
  }, 120_000);
});
