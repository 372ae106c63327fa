/**
 * The page in a real Chromium against a real echo-node: the first measurement is plotted
 * quickly, forecasts stand one period ahead, controls take effect, and suspending stops the
 * probe traffic that echo-node counts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import {
  exportedRecords,
  missing,
  probeCounts,
  startRig,
  total,
  type ExportedRecord,
  type Rig,
} from "./harness.js";
import { openPage, plotted, sleep, waitForMeasurements } from "./page-helpers.js";

const SAMPLES = fileURLToPath(new URL("../public/samples/", import.meta.url));

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the browser tests: ${why}`);

describe.skipIf(why !== undefined)("the page against a real echo-node", () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig();
  });
  afterAll(async () => {
    await rig?.close();
  });

  const open = (query: string) => openPage(rig, query);

  it("plots the first measurement within 2 s of navigation", async () => {
    const { page, startedAt, done } = await open("");
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    const elapsed = Date.now() - startedAt;
    console.log(`e2e: first measurement plotted ${elapsed} ms after navigation started`);
    expect(elapsed).toBeLessThan(2000);
    expect(await page.locator("#series-table tbody tr").first().textContent()).toContain("RTT");
    // Cross-origin isolated (echo-node's COOP and COEP): timers of 5 µs, not 100 µs.
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(true);
    await done();
  });

  it("shows a forecast for each measurement and the newest one period ahead", async () => {
    const { page, done } = await open("?period=1&size=64k");
    await waitForMeasurements(page, "rtt/websocket", 3, 10_000);
    for (const series of [
      "rtt/websocket",
      "jitter/websocket",
      "loaded_rtt/websocket",
      "bandwidth_down/http",
      "bandwidth_up/http",
    ]) {
      await waitForMeasurements(page, series, 3, 5000);
      const p = await plotted(page, series);
      // Every measurement brings the forecast of the next one; the forecast made for it
      // moves onto its own time.
      expect(p.forecasts).toBe(p.measurements);
      expect(p.lastForecastX - p.lastMeasuredX).toBe(1000);
    }
    const next = page.locator('tr[data-series="rtt/websocket"] td').nth(1);
    expect(await next.textContent()).toContain("±");
    await done();
  });

  it("takes a period change at once and writes it to the URL", async () => {
    const { page, done } = await open("?period=10");
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    const before = (await plotted(page, "rtt/websocket")).measurements;
    await page.selectOption("#period", "1");
    expect(new URL(page.url()).searchParams.get("period")).toBe("1");
    await waitForMeasurements(page, "rtt/websocket", before + 2, 4000);
    await done();
  });

  it("takes a probe size change at once and writes it to the URL", async () => {
    const { page, done } = await open("?period=1&size=64k");
    const series = "bandwidth_down/http";
    await waitForMeasurements(page, series, 2, 8000);
    await page.selectOption("#size", "256k");
    expect(new URL(page.url()).searchParams.get("size")).toBe("256k");
    const before = (await plotted(page, series)).measurements;
    await waitForMeasurements(page, series, before + 2, 8000);
    // The records say what each probe moved: 64 KiB before the change, 256 KiB after it.
    const sizes = (await exportedRecords(page))
      .filter((r) => r.metric === "bandwidth_down")
      .map((r) => r.probe?.payload_bytes);
    expect(sizes[0]).toBe(64 * 1024);
    expect(sizes.at(-1)).toBe(256 * 1024);
    // Once changed, the size stays changed: no 64 KiB probe after the first 256 KiB one.
    expect(sizes.slice(sizes.indexOf(256 * 1024))).not.toContain(64 * 1024);
    await done();
  });

  it("stops probe traffic on suspend and restarts it on resume", async () => {
    const { page, done } = await open("?period=1&size=64k");
    await waitForMeasurements(page, "rtt/websocket", 2, 5000);
    await page.click("#suspend");
    expect(await page.getAttribute("#suspend", "aria-pressed")).toBe("true");
    // A probe already on the wire may finish; after that nothing more may start.
    await sleep(1500);
    const quiet = total(await probeCounts(rig.node));
    await sleep(2500);
    expect(total(await probeCounts(rig.node))).toBe(quiet);
    await page.click("#suspend");
    const deadline = Date.now() + 5000;
    while (total(await probeCounts(rig.node)) === quiet && Date.now() < deadline) await sleep(50);
    expect(total(await probeCounts(rig.node))).toBeGreaterThan(quiet);
    await done();
  });

  it("measures over fetch too: ping RTT, download and upload", async () => {
    const { page, done } = await open("?period=1&transport=both&size=64k");
    await waitForMeasurements(page, "rtt/http", 2, 8000);
    await waitForMeasurements(page, "bandwidth_down/http", 2, 8000);
    await waitForMeasurements(page, "bandwidth_up/http", 2, 8000);
    const counts = await probeCounts(rig.node);
    expect(counts.get("http_ping")).toBeGreaterThan(0);
    expect(counts.get("http_download")).toBeGreaterThan(0);
    expect(counts.get("http_upload")).toBeGreaterThan(0);
    await done();
  });

  it("imports the sample files, forecasts them, and names the broken file's bad lines", async () => {
    // The file readers are a WebAssembly module of their own, fetched on the first import.
    const readers: string[] = [];
    const { page, done } = await openPage(rig, "?period=300", async (p) =>
      p.context().on("request", (r) => {
        if (r.url().includes("/assets/nowcast_reader")) readers.push(r.url());
      }),
    );
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    expect(readers).toEqual([]);
    await page.setInputFiles(
      "#import",
      ["rtt-browser.ndjson", "iperf3-reverse.json", "rtt.csv", "broken.ndjson"].map((f) =>
        join(SAMPLES, f),
      ),
    );
    await page.waitForFunction(
      () =>
        document.querySelectorAll('figure[data-series^="import/"][data-forecasts]').length === 4,
      undefined,
      { timeout: 10_000, polling: 50 },
    );
    const counts = await page.$$eval('figure[data-series^="import/"]', (figs) =>
      figs.map((f) => [Number(f.dataset.measurements), Number(f.dataset.forecasts)]),
    );
    // Each series is forecast with the same bank: a forecast for every value after the first,
    // plus the next one.
    expect(counts).toEqual([
      [298, 298],
      [30, 30],
      [240, 240],
      [5, 5],
    ]);
    const report = (await page.textContent("#import-report")) ?? "";
    expect(report).toContain("broken.ndjson (ndjson): 5 values in 1 series; 4 lines refused");
    expect(report).toContain("line 5, schema_version");
    expect(report).toContain("line 8, value");
    expect(report).toContain("rtt-browser.ndjson (ndjson): 298 values in 1 series.");
    expect(readers.some((u) => u.endsWith(".wasm"))).toBe(true);
    await done();
  });

  it("shows the error histogram, CDF and forecaster table of a series", async () => {
    const { page, done } = await open("?period=1");
    await waitForMeasurements(page, "rtt/websocket", 4, 10_000);
    await page.selectOption("#predictability-series", "rtt/websocket");
    await page.waitForFunction(
      () =>
        Number(document.querySelector<HTMLElement>("#predictability figure")?.dataset.points) > 0,
      undefined,
      { timeout: 5000, polling: 50 },
    );
    const inUse = await page.$$eval("#predictability tr.in-use", (rows) => rows.length);
    expect(inUse).toBe(1);
    expect(await page.$$eval("#predictability tbody tr", (rows) => rows.length)).toBeGreaterThan(2);
    await done();
  });

  it("restores the history after a reload, and clears it on request", async () => {
    const { page, done } = await open("?period=1");
    await waitForMeasurements(page, "rtt/websocket", 4, 10_000);
    const before = await plotted(page, "rtt/websocket");
    await page.reload();
    // The saved series are drawn before any new probe could add to them.
    await waitForMeasurements(page, "rtt/websocket", before.measurements, 3000);
    const after = await plotted(page, "rtt/websocket");
    expect(after.forecasts).toBe(after.measurements);
    const probes = Number(
      await page.textContent('tr[data-series="rtt/websocket"] td:nth-of-type(5)'),
    );
    expect(probes).toBeGreaterThanOrEqual(before.measurements);
    await page.click("#suspend");
    await page.click("#clear-history");
    await page.click("#clear-confirm");
    await page.waitForSelector('figure[data-series="rtt/websocket"]', {
      state: "detached",
      timeout: 5000,
    });
    await page.reload();
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    // At most a probe that was on the wire when the history was cleared came back.
    expect((await plotted(page, "rtt/websocket")).measurements).toBeLessThan(
      before.measurements - 1,
    );
    await done();
  });

  it("exports the same records before and after a reload, each with its period", async () => {
    const { page, done } = await open("?period=1&size=64k");
    await waitForMeasurements(page, "bandwidth_up/http", 2, 10_000);
    await page.click("#suspend");
    // Read once the round on the wire has ended: the export holds still for a second and a
    // half (what it holds is in the history by then).
    let before = await exportedRecords(page);
    for (let settled = false; !settled;) {
      await sleep(1500);
      const now = await exportedRecords(page);
      settled = now.length === before.length;
      before = now;
    }
    expect(before.length).toBeGreaterThan(5);
    expect(before.filter((r) => r.period_ms !== 1000)).toEqual([]);

    // A long period after the reload (the same size: an automatic one is spaced by the budget,
    // and its records carry that spacing): the saved records, then one round at most.
    await page.goto(`${rig.node.url}/?period=300&size=64k`);
    await waitForMeasurements(page, "rtt/websocket", 3, 5000);
    const after = await exportedRecords(page);
    const bySeries = (records: ExportedRecord[]) => {
      const out = new Map<string, ExportedRecord[]>();
      for (const r of records) {
        const key = `${r.metric}/${r.probe?.transport}`;
        out.set(key, [...(out.get(key) ?? []), r]);
      }
      for (const list of out.values()) list.sort((a, b) => a.seq! - b.seq!);
      return out;
    };
    const saved = bySeries(before);
    for (const [key, list] of bySeries(after)) {
      const old = saved.get(key) ?? [];
      expect(list.slice(0, old.length), key).toEqual(old);
      // What the round after the reload measured carries the new period.
      for (const r of list.slice(old.length)) expect(r.period_ms, key).toBe(300_000);
    }
    expect([...saved.keys()].every((k) => bySeries(after).has(k))).toBe(true);
    await done();
  });

  /** The imported series listed for removal, by label. */
  const importedList = (page: Page) =>
    page.$$eval("#imported-list li", (items) =>
      items.map((i) => ({ key: (i as HTMLElement).dataset.series, text: i.textContent ?? "" })),
    );

  it("keeps imported series across a reload until removed or cleared", async () => {
    const { page, done } = await open("?period=300");
    await page.setInputFiles(
      "#import",
      ["rtt.csv", "rtt-browser.ndjson"].map((f) => join(SAMPLES, f)),
    );
    await page.waitForFunction(() => document.querySelectorAll("#imported-list li").length === 2);
    const [csv, ndjson] = await importedList(page);
    expect(csv!.text).toContain("(rtt.csv)");
    expect(ndjson!.text).toContain("(rtt-browser.ndjson)");
    const csvPlotted = await plotted(page, csv!.key!);
    expect(csvPlotted.measurements).toBe(240);

    // Back after a reload, under the same keys, forecast the same way.
    await page.reload();
    await waitForMeasurements(page, ndjson!.key!, 298, 5000);
    expect(await plotted(page, csv!.key!)).toEqual(csvPlotted);
    expect((await importedList(page)).map((i) => i.key)).toEqual([csv!.key, ndjson!.key]);

    // Removed: gone from the page, and still gone after a reload.
    await page.click(`#imported-list li[data-series="${csv!.key}"] button`);
    await page.waitForSelector(`figure[data-series="${csv!.key}"]`, { state: "detached" });
    expect(
      await page.$$eval("#predictability-series option", (o) =>
        o.map((x) => (x as HTMLOptionElement).value),
      ),
    ).not.toContain(csv!.key);
    await page.reload();
    await waitForMeasurements(page, ndjson!.key!, 298, 5000);
    expect((await importedList(page)).map((i) => i.key)).toEqual([ndjson!.key]);
    expect(await page.$$eval('figure[data-series^="import/"]', (f) => f.length)).toBe(1);

    // Clear history clears the imported series too.
    await page.click("#clear-history");
    await page.click("#clear-confirm");
    await page.waitForSelector('figure[data-series^="import/"]', { state: "detached" });
    expect(await importedList(page)).toEqual([]);
    await page.reload();
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    // Restoring happens between rounds: the first round has ended, and with it any restore.
    await sleep(500);
    expect(await page.$$eval('figure[data-series^="import/"]', (f) => f.length)).toBe(0);
    await done();
  });

  it("keeps the newest 20,000 values of a larger import and says so", async () => {
    const { page, done } = await open("?period=300");
    const lines = ["time,value"];
    for (let i = 0; i < 25_000; i++) lines.push(`${1_795_176_000_000 + i * 1000},${40 + (i % 7)}`);
    await page.setInputFiles("#import", {
      name: "long.csv",
      mimeType: "text/csv",
      buffer: Buffer.from(lines.join("\n")),
    });
    await page.waitForSelector("#imported-list li", { timeout: 10_000 });
    const report = (await page.textContent("#import-report")) ?? "";
    expect(report).toContain("long.csv (csv): 20000 values in 1 series.");
    expect(report).toContain("long.csv: kept the newest 20000 of 25000 values");
    const [item] = await importedList(page);
    expect(await page.textContent(`tr[data-series="${item!.key}"] td:nth-of-type(5)`)).toBe(
      "20000",
    );
    await done();
  });

  it("says why an empty or a binary file imports nothing, and reports a clean import plainly", async () => {
    const { page, done } = await open("?period=300");
    // Bytes of a PNG and of random data, which no text file has (a NUL among them).
    const binary = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
    const noise = Buffer.from(Array.from({ length: 4000 }, (_, i) => 0x80 + ((i * 37) % 0x80)));
    await page.setInputFiles("#import", [
      { name: "empty.ndjson", mimeType: "application/x-ndjson", buffer: Buffer.alloc(0) },
      { name: "image.csv", mimeType: "text/csv", buffer: binary },
      { name: "noise.ndjson", mimeType: "application/x-ndjson", buffer: noise },
    ]);
    await page.setInputFiles("#import", join(SAMPLES, "rtt-browser.ndjson"));
    await page.waitForSelector("#imported-list li", { timeout: 10_000 });
    const reports = await page.$$eval("#import-report > div > p", (ps) =>
      ps.map((p) => ({ text: p.textContent ?? "", problem: p.classList.contains("problem") })),
    );
    // Newest first.
    expect(reports).toEqual([
      { text: "rtt-browser.ndjson (ndjson): 298 values in 1 series.", problem: false },
      {
        text: expect.stringMatching(/^noise\.ndjson: nothing imported, it is not UTF-8 text/),
        problem: true,
      },
      {
        text: expect.stringMatching(/^image\.csv: nothing imported, it is not UTF-8 text/),
        problem: true,
      },
      { text: "empty.ndjson: nothing imported, the file is empty.", problem: true },
    ]);
    // A binary file's bytes are not echoed back as text.
    expect(await page.textContent("#import-report")).not.toContain("\ufffd");
    // The clean file's note is told, not as a problem.
    expect(await page.textContent("#import-report li")).toBe(
      "2 records without a value (timeouts, errors) not read as values",
    );
    await done();
  });

  it("names a rate of Gbit/s in Gbit/s: its graph, the graph's summary and the next forecast", async () => {
    const { page, done } = await open("?period=300");
    const records = Array.from({ length: 40 }, (_, i) =>
      JSON.stringify({
        schema_version: "1.0",
        timestamp_ms: 1_795_176_000_000 + i * 5000,
        source: "nowcast tcp",
        metric: "bandwidth_down",
        status: "ok",
        value: 1500 + 400 * Math.sin(i / 3),
        unit: "Mbit/s",
        to: "fast.example:443",
      }),
    );
    await page.setInputFiles("#import", {
      name: "fast.ndjson",
      mimeType: "application/x-ndjson",
      buffer: Buffer.from(records.join("\n")),
    });
    await page.waitForSelector('figure[data-series^="import/"][data-measurements="40"]', {
      timeout: 10_000,
    });
    const figure = page.locator('figure[data-series^="import/"]');
    expect(await figure.locator("figcaption").textContent()).toMatch(/\(Gbit\/s\)$/);
    const summary = (await figure.locator(".summary").textContent()) ?? "";
    expect(summary).toMatch(/Next forecast [\d.]+ Gbit\/s ± [\d.]+ Gbit\/s\.$/);
    expect(summary).not.toContain("Mbit/s");
    const key = await figure.getAttribute("data-series");
    expect(await page.textContent(`tr[data-series="${key}"] td:nth-of-type(2)`)).toMatch(
      /^[\d.]+ Gbit\/s ± [\d.]+ Gbit\/s$/,
    );
    // One value: its forecast has no error yet, and the page says so rather than "± 0".
    await page.setInputFiles("#import", {
      name: "one.ndjson",
      mimeType: "application/x-ndjson",
      buffer: Buffer.from(records[0]!.replace("fast.example", "one.example")),
    });
    await page.waitForSelector('figure[data-series^="import/"][data-measurements="1"]', {
      timeout: 10_000,
    });
    const one = page.locator('figure[data-series^="import/"][data-measurements="1"]');
    expect((await one.locator(".summary").textContent()) ?? "").toMatch(
      /Next forecast [\d.]+ Gbit\/s ± — \(needs 2 values\)\.$/,
    );
    const oneKey = await one.getAttribute("data-series");
    expect(await page.textContent(`tr[data-series="${oneKey}"] td:nth-of-type(2)`)).toMatch(
      /^[\d.]+ Gbit\/s ± — \(needs 2 values\)$/,
    );
    await done();
  });

  it("names a CSV column of numbers without a unit, and dates a span of days", async () => {
    const { page, done } = await open("?period=300");
    const lines = ["time,value"];
    for (let i = 0; i < 3 * 288; i++)
      lines.push(`${1_795_132_800_000 + i * 300_000},${30 + (i % 7)}`);
    await page.setInputFiles("#import", {
      name: "days.csv",
      mimeType: "text/csv",
      buffer: Buffer.from(lines.join("\n")),
    });
    await page.waitForSelector('figure[data-series^="import/"][data-measurements="864"]', {
      timeout: 10_000,
    });
    const figure = page.locator('figure[data-series^="import/"]');
    expect(await figure.locator("figcaption").textContent()).toBe("value (days.csv)");
    expect(await figure.locator(".summary").textContent()).toMatch(
      /^value \(days\.csv\): 864 measurements from \d+ [A-Z][a-z]{2} \d\d:\d\d:\d\d to \d+ [A-Z][a-z]{2} \d\d:\d\d:\d\d, between 30\.0 and 36\.0; latest \d\d\.0\. Next forecast [\d.]+ ± [\d.]+\.$/,
    );
    await done();
  });

  it("takes a budget on Enter without reloading, and puts a refused one back, saying why", async () => {
    const { page, done } = await open("?period=300");
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    // Loads, not the link's updates (history.replaceState, which Playwright also reports as
    // navigations).
    let navigations = 0;
    page.on("load", () => navigations++);
    // Enter submits the controls' form: the budget takes, and the page stays.
    await page.fill("#budget", "300");
    await page.press("#budget", "Enter");
    await page.waitForFunction(() => new URL(location.href).searchParams.get("budget") === "300");
    await sleep(500);
    expect(navigations).toBe(0);
    expect(new URL(page.url()).search).toBe("?period=300&budget=300");

    // Zero is refused: the box shows the budget in force again, and says why.
    await page.fill("#budget", "0");
    await page.press("#budget", "Enter");
    expect(await page.inputValue("#budget")).toBe("300");
    const problem = page.locator("#settings-problem");
    await problem.waitFor({ state: "visible", timeout: 2000 });
    expect(await problem.textContent()).toBe(
      "The budget must be a number of MiB above 0; it stays at 300 MiB per hour.",
    );
    expect(new URL(page.url()).searchParams.get("budget")).toBe("300");
    // A good one takes, and the complaint goes.
    await page.fill("#budget", "200");
    await page.locator("#budget").blur();
    await problem.waitFor({ state: "hidden", timeout: 2000 });
    expect(new URL(page.url()).searchParams.get("budget")).toBe("200");
    expect(navigations).toBe(0);
    await done();
  });

  it("refuses a file over 32 MiB before reading it", async () => {
    const { page, done } = await open("?period=300");
    // A sparse file: its size is all the page looks at before refusing it.
    const dir = mkdtempSync(join(tmpdir(), "nowcast-e2e-"));
    const huge = join(dir, "huge.csv");
    writeFileSync(huge, "");
    truncateSync(huge, 33 * 1024 * 1024);
    try {
      await page.setInputFiles("#import", huge);
    } finally {
      rmSync(dir, { recursive: true });
    }
    await page.waitForSelector("#import-report p.problem", { timeout: 10_000 });
    expect(await page.textContent("#import-report")).toBe(
      "huge.csv: not imported, 33.0 MiB is more than the 32.0 MiB a file may have",
    );
    expect(await page.$$eval("#imported-list li", (items) => items.length)).toBe(0);
    await done();
  });

  it("opens a history saved before series were per target, and keeps other targets' apart", async () => {
    const host = new URL(rig.node.url).host;
    // Version 1 of the history, written before the page's own scripts run; the page's worker
    // opens version 2, which waits for this connection to close.
    const { page, done } = await openPage(rig, "?period=300", (p) =>
      p.addInitScript((site) => {
        const req = indexedDB.open("nowcast", 1);
        req.onupgradeneeded = () => {
          const store = req.result.createObjectStore("records", {
            keyPath: "id",
            autoIncrement: true,
          });
          const t0 = Date.now() - 60_000;
          for (const [to, n] of [
            [site, 5],
            ["elsewhere.example", 3],
          ] as const) {
            for (let seq = 0; seq < n; seq++) {
              const value = 1 + seq / 10;
              store.add({
                key: "rtt/websocket",
                record: {
                  schema_version: "1.0",
                  timestamp_ms: t0 + seq * 1000,
                  source: "browser",
                  metric: "rtt",
                  status: "ok",
                  value,
                  unit: "ms",
                  from: "browser",
                  to,
                  seq,
                  timeout_ms: 3000,
                  probe: { transport: "websocket", payload_bytes: 2, raw_ms: value },
                },
              });
            }
          }
        };
        req.onsuccess = () => req.result.close();
      }, host),
    );
    // The site's five come back (with the first new probe at most), the other target's not.
    await waitForMeasurements(page, "rtt/websocket", 5, 3000);
    expect((await plotted(page, "rtt/websocket")).measurements).toBeLessThanOrEqual(6);
    await done();
  });

  it("measures without a history while another tab holds an older one open", async () => {
    const { page, done } = await openPage(rig, "?period=1", async (p) => {
      // A tab of the page before series were per target: version 1, open, never closed.
      const other = await p.context().newPage();
      await other.goto(`${rig.node.url}/healthz`);
      await other.evaluate(
        () =>
          new Promise((resolve) => {
            const req = indexedDB.open("nowcast", 1);
            req.onupgradeneeded = () => req.result.createObjectStore("records");
            req.onsuccess = resolve;
          }),
      );
    });
    await waitForMeasurements(page, "rtt/websocket", 2, 5000);
    await done();
  });
});
