/**
 * Outages are data, against real echo-nodes on loopback: a target that stops answers every
 * later probe with a failure record (status "error" and the reason), the page says so in a
 * banner within two periods, its figures go stale with the time of the last value, and the
 * ranking calls it unreachable; a target that is down from the start writes failure records
 * every period.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { defaultConfig } from "../echo-node/src/config.js";
import { startEchoNode, type EchoNode } from "../echo-node/src/server.js";
import {
  ARTIFACTS,
  exportedRecords,
  missing,
  startRig,
  type ExportedRecord,
  type Rig,
} from "./harness.js";
import { chooseLinkTarget, sleep, waitForMeasurements } from "./page-helpers.js";

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the outage tests: ${why}`);

/** Chromium's own report of a connection it could not make: expected here, nothing else. */
const REFUSED = /net::ERR_CONNECTION_REFUSED|WebSocket connection to .* failed/;

/** Opens the page at `query` collecting its errors, but not those of refused connections. */
async function open(rig: Rig, query: string): Promise<{ page: Page; done: () => Promise<void> }> {
  const page = await rig.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && !REFUSED.test(m.text())) errors.push(m.text());
  });
  await chooseLinkTarget(page, query);
  await page.goto(`${rig.node.url}/${query}`);
  return {
    page,
    done: async () => {
      await page.context().close();
      expect(errors).toEqual([]);
    },
  };
}

/** The banner's text once it names an outage (`what`), and when it did (ms since the epoch). */
async function outageBanner(
  page: Page,
  timeout: number,
  what = "Can't reach",
): Promise<{ text: string; at: number }> {
  await page.waitForFunction(
    (w) => (document.querySelector("#banner")?.textContent ?? "").includes(w),
    what,
    { timeout, polling: 20 },
  );
  return { text: (await page.textContent("#banner")) ?? "", at: Date.now() };
}

const failures = (records: ExportedRecord[], metric: string) =>
  records.filter(
    (r) => r.metric === metric && (r as { status?: string }).status === "error",
  ) as (ExportedRecord & { status: string; error: string; timestamp_ms: number })[];

describe.skipIf(why !== undefined)("outages", () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig();
  });
  afterAll(async () => {
    await rig?.close();
  });

  it("records a target that stops, says so within two periods, and ranks it unreachable", async () => {
    const target = await startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      name: "e2e-stopping",
      allowOrigins: ["*"],
    });
    const url = new URL(target.url).href;
    const host = new URL(target.url).host;
    const periodS = 2;
    const { page, done } = await open(
      rig,
      `?period=${periodS}&size=64k&target=${encodeURIComponent(url)}`,
    );
    try {
      await waitForMeasurements(page, "bandwidth_up/http", 2, 15_000);
      expect(await page.isHidden("#banner")).toBe(true);
      const stoppedAt = Date.now();
      await target.close();
      const banner = await outageBanner(page, 4 * periodS * 1000);
      const after = banner.at - stoppedAt;
      console.log(`e2e: the outage banner ${after} ms after the target stopped: ${banner.text}`);
      expect(after).toBeLessThanOrEqual(2 * periodS * 1000);
      expect(banner.text).toMatch(
        new RegExp(
          `Can't reach ${host.replace(/\./g, "\\.")} since \\d\\d:\\d\\d:\\d\\d — retrying every ${periodS} s`,
        ),
      );
      // The figures are the last ones measured, marked as such.
      expect(banner.text).toContain("The figures below are the last ones measured.");
      await page.waitForSelector('.card[data-direction="rtt"].stale', { timeout: 5000 });
      expect(await page.textContent('.card[data-direction="rtt"] .meta')).toMatch(
        /^as of \d\d:\d\d:\d\d · last probe failed: /,
      );
      await page.waitForFunction(
        (u) =>
          document
            .querySelector(`#ranking-table tr[data-url="${u}"]`)
            ?.getAttribute("data-standing") === "unreachable",
        url,
        { timeout: 5000, polling: 50 },
      );
      // Two more rounds: each probe of each is a record of its failure.
      await sleep(2 * periodS * 1000);
      const records = await exportedRecords(page);
      for (const metric of ["rtt", "bandwidth_down", "bandwidth_up"]) {
        const failed = failures(records, metric);
        expect(failed.length, metric).toBeGreaterThanOrEqual(2);
        expect(failed.every((r) => r.value === null && r.error !== "" && r.to === host)).toBe(true);
      }
      console.log(
        `e2e: failure reasons ${[...new Set(failures(records, "rtt").map((r) => r.error))]}`,
      );
    } finally {
      await target.close().catch(() => undefined);
    }
    await done();
  });

  it("names a target that answers HTTP but is not an echo-node, and says what to do", async () => {
    // A plain web server, as a static file host or nginx answers: 200 for its page, 404
    // for anything else, no CORS headers, no WebSocket upgrade.
    const server = createServer((req, res) => {
      res.writeHead(req.url === "/" ? 200 : 404, { "content-type": "text/html" });
      res.end(req.url === "/" ? "<h1>It works</h1>" : "Not Found");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const { page, done } = await open(
        rig,
        `?period=1&target=${encodeURIComponent(`http://${host}/`)}`,
      );
      const banner = await outageBanner(page, 10_000, "is not an echo-node");
      console.log(`e2e: a web server as the target: ${banner.text}`);
      expect(banner.text).toContain(`${host} answered, but is not an echo-node`);
      expect(banner.text).toMatch(/no probe endpoint this page may use/);
      expect(banner.text).toMatch(/refused the WebSocket upgrade/);
      expect(banner.text).toMatch(/Self-hosting echo-node/);
      expect(banner.text).not.toMatch(/no connection/);
      expect(await page.textContent("#state")).toMatch(/^The target is not an echo-node/);
      // The cards under the banner agree with it: their failures' own words ("no
      // connection") would say that nothing answered.
      const cards = '.card[data-direction="%"] .meta';
      await page.waitForFunction(
        (sel) =>
          ["rtt", "down", "up"].every((d) =>
            (document.querySelector(sel.replace("%", d))?.textContent ?? "").includes("failed"),
          ),
        cards,
        { timeout: 10_000, polling: 100 },
      );
      for (const d of ["rtt", "down", "up"]) {
        expect(await page.textContent(cards.replace("%", d)), d).toBe(
          "last probe failed: the target is not an echo-node (see above)",
        );
      }
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.screenshot({ path: join(ARTIFACTS, "not-echo-node.png") });
      await done();
    } finally {
      server.close();
    }
  });

  it("records a target down from the start every period, and ranks it unreachable", async () => {
    // The discard port: nothing listens, every connection is refused.
    const gone = "http://127.0.0.1:9/";
    const periodS = 1;
    const { page, done } = await open(
      rig,
      `?period=${periodS}&transport=both&target=${encodeURIComponent(gone)}`,
    );
    const banner = await outageBanner(page, 5000);
    expect(banner.text).toContain("Can't reach 127.0.0.1:9 since");
    // A target never reached has no figures to speak of.
    expect(banner.text).toContain("Nothing has been measured from it yet.");
    expect(banner.text).not.toContain("last ones measured");
    await sleep(3500);
    const records = await exportedRecords(page);
    for (const metric of ["rtt", "bandwidth_down", "bandwidth_up"]) {
      const failed = failures(records, metric);
      expect(failed.length, metric).toBeGreaterThanOrEqual(3);
      // The WebSocket's words (cut off) or fetch's (blocked): transfers go over fetch.
      expect(failed[0]!.error).toMatch(
        /^no connection \(refused, unreachable or (cut off|blocked)\)$/,
      );
    }
    // Over fetch too, and one record of each series every period.
    const pings = failures(records, "rtt").filter((r) => r.probe?.transport === "http");
    expect(pings.length).toBeGreaterThanOrEqual(3);
    const rtt = failures(records, "rtt").filter((r) => r.probe?.transport === "websocket");
    const gaps = rtt.slice(1).map((r, i) => r.timestamp_ms - rtt[i]!.timestamp_ms);
    for (const gap of gaps) expect(gap).toBeLessThan(periodS * 1000 + 1000);
    expect(await page.textContent('.card[data-direction="down"] .meta')).toMatch(/failed/);
    await page.waitForFunction(
      (u) =>
        document
          .querySelector(`#ranking-table tr[data-url="${u}"]`)
          ?.getAttribute("data-standing") === "unreachable",
      gone,
      { timeout: 5000, polling: 50 },
    );
    await done();
  });
});
