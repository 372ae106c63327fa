/**
 * The target and the mirrors' graphs, against two real echo-nodes on loopback: the serving one
 * lists the second as its mirror. Choosing the second as the target (in the link or in the
 * controls) sends the main probes there and nowhere else, with series of its own; a bad
 * target is named and the site measured instead; an opted-in mirror gets graphs with points
 * and its series in the predictability view.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { defaultConfig } from "../echo-node/src/config.js";
import { startEchoNode, type EchoNode } from "../echo-node/src/server.js";
import { exportedRecords, missing, probeCounts, startRig, total, type Rig } from "./harness.js";
import { openPage, plotted, setTicked, waitForMeasurements } from "./page-helpers.js";

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the target tests: ${why}`);

describe.skipIf(why !== undefined)("the target: two echo-nodes on loopback", () => {
  let second: EchoNode;
  let rig: Rig;
  let secondUrl: string;
  let secondHost: string;
  let siteHost: string;
  beforeAll(async () => {
    second = await startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      name: "e2e-target",
      // The page's origin (the first node's port) is not known before that node starts.
      allowOrigins: ["*"],
    });
    secondUrl = new URL(second.url).href;
    secondHost = new URL(second.url).host;
    try {
      rig = await startRig({
        mirrors: [{ name: "Second", url: secondUrl, location: "loopback" }],
        // The stricter policy, so a target outside the mirrors list is blocked (below).
        connectSrc: "mirrors",
      });
    } catch (e) {
      await second.close();
      throw e;
    }
    siteHost = new URL(rig.node.url).host;
  });
  afterAll(async () => {
    await rig?.close();
    await second?.close();
  });

  it("sends the main probes to ?target=, WebSocket and fetch, and none to the site", async () => {
    const siteBefore = total(await probeCounts(rig.node));
    const before = await probeCounts(second);
    const { page, done } = await openPage(
      rig,
      `?period=1&transport=both&size=64k&target=${encodeURIComponent(secondUrl)}`,
    );
    for (const series of ["rtt/websocket", "bandwidth_up/websocket", "bandwidth_down/http"]) {
      await waitForMeasurements(page, series, 2, 10_000);
    }
    const after = await probeCounts(second);
    for (const kind of [
      "ping",
      "download",
      "upload",
      "http_ping",
      "http_download",
      "http_upload",
    ]) {
      expect(after.get(kind) ?? 0, kind).toBeGreaterThan(before.get(kind) ?? 0);
    }
    expect(total(await probeCounts(rig.node))).toBe(siteBefore);
    expect(await page.textContent("#target-name")).toBe(secondHost);
    expect(await page.inputValue("#target-select")).toBe(secondUrl);
    // Records name the target they measured.
    const records = await exportedRecords(page);
    expect(records.length).toBeGreaterThan(5);
    expect(new Set(records.map((r) => r.to))).toEqual(new Set([secondHost]));
    await done();
  });

  it("asks before it probes a target named in a link, and probes it once chosen", async () => {
    // A link must not make its visitors' browsers probe a host they did not pick: the
    // target it names is offered, and this site measured, until the user chooses it.
    const before = total(await probeCounts(second));
    const { page, done } = await openPage(
      rig,
      `?period=1&target=${encodeURIComponent(secondUrl)}`,
      undefined,
      false,
    );
    await waitForMeasurements(page, "rtt/websocket", 3, 10_000);
    expect(total(await probeCounts(second))).toBe(before);
    expect(await page.textContent("#target-ask-text")).toBe(
      `This link asks to measure ${secondHost}, another site. ` +
        "The page measures this site until you choose it.",
    );
    expect(await page.inputValue("#target-select")).toBe("");
    await page.click("#target-ask-yes");
    expect(await page.isHidden("#target-ask")).toBe(true);
    expect(await page.inputValue("#target-select")).toBe(secondUrl);
    await page.waitForFunction(
      (h) => document.querySelector("#target-name")?.textContent === h,
      secondHost,
      { timeout: 5000, polling: 50 },
    );
    await waitForMeasurements(page, "rtt/websocket", 2, 10_000);
    expect(total(await probeCounts(second))).toBeGreaterThan(before);
    // Chosen once, it is measured at once after a reload.
    await page.reload();
    expect(await page.isHidden("#target-ask")).toBe(true);
    expect(await page.inputValue("#target-select")).toBe(secondUrl);
    await done();
  });

  it("switches the target from the controls: URL, fresh series, and each target's own history", async () => {
    const { page, done } = await openPage(rig, "?period=1");
    await waitForMeasurements(page, "rtt/websocket", 3, 10_000);
    const siteSeries = (await plotted(page, "rtt/websocket")).measurements;
    const secondBefore = total(await probeCounts(second));

    await page.selectOption("#target-select", secondUrl);
    expect(new URL(page.url()).searchParams.get("target")).toBe(secondUrl);
    await page.waitForFunction(
      (host) => document.querySelector("#target-name")?.textContent === host,
      secondHost,
      { timeout: 5000, polling: 20 },
    );
    // A fresh series: nothing of the site's is drawn for the new target.
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    expect((await plotted(page, "rtt/websocket")).measurements).toBeLessThan(siteSeries);
    await waitForMeasurements(page, "rtt/websocket", 2, 5000);
    expect(total(await probeCounts(second))).toBeGreaterThan(secondBefore);
    expect(new Set((await exportedRecords(page)).map((r) => r.to))).toEqual(new Set([secondHost]));

    // Back to the site: its own series come back from the history, the second's stay apart.
    await page.selectOption("#target-select", "");
    expect(new URL(page.url()).searchParams.has("target")).toBe(false);
    await page.waitForFunction(
      (host) => document.querySelector("#target-name")?.textContent === host,
      siteHost,
      { timeout: 5000, polling: 20 },
    );
    await waitForMeasurements(page, "rtt/websocket", siteSeries, 3000);
    expect(new Set((await exportedRecords(page)).map((r) => r.to))).toEqual(new Set([siteHost]));
    await done();
  });

  it("names a bad ?target= and measures the site instead", async () => {
    const siteBefore = await probeCounts(rig.node);
    const { page, done } = await openPage(rig, "?period=1&target=ftp%3A%2F%2F127.0.0.1%2F");
    const problem = page.locator("#settings-problem");
    await problem.waitFor({ state: "visible", timeout: 5000 });
    expect(await problem.textContent()).toBe(
      'target "ftp://127.0.0.1/" must be an http(s) or ws(s) URL, not ftp:; measuring this site instead',
    );
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    expect((await probeCounts(rig.node)).get("ping")).toBeGreaterThan(siteBefore.get("ping") ?? 0);
    expect(await page.textContent("#target-name")).toBe(siteHost);
    expect(await page.inputValue("#target-select")).toBe("");
    await done();
  });

  it("says so when the site's Content-Security-Policy keeps it from a target", async () => {
    // A well-formed target the serving echo-node does not list as a mirror: its CSP
    // (`--connect-src mirrors`: itself and its mirrors) blocks the connection before it is made.
    const { page, done } = await openPage(rig, "?period=1&target=http%3A%2F%2F127.0.0.1%3A9%2F");
    await page.waitForFunction(
      () =>
        /Content-Security-Policy does not allow connecting to ws:\/\/127\.0\.0\.1:9\/ws/.test(
          document.querySelector("#state")?.textContent ?? "",
        ),
      undefined,
      { timeout: 5000, polling: 50 },
    );
    expect(await page.textContent("#target-name")).toBe("127.0.0.1:9");
    await done();
  });

  it("draws an opted-in mirror's series and offers them to the predictability view", async () => {
    const { page, done } = await openPage(rig, "?period=1&size=64k");
    const item = page.locator(`#mirror-list li[data-url="${secondUrl}"]`);
    await item.waitFor({ timeout: 5000 });
    await setTicked(item.locator("input[type=checkbox]"), true);
    const rtt = `mirror/rtt/websocket@${secondUrl}`;
    const down = `mirror/bandwidth_down/http@${secondUrl}`;
    await waitForMeasurements(page, rtt, 3, 10_000);
    await waitForMeasurements(page, down, 3, 10_000);
    for (const key of [rtt, down]) {
      const p = await plotted(page, key);
      expect(p.forecasts).toBe(p.measurements);
    }
    expect(await page.textContent(`figure[data-series="${rtt}"] figcaption`)).toContain("Second");

    await page.selectOption("#predictability-series", rtt);
    // The view shows the chosen series once its caption names it: the figure's points were
    // already above 0 from the series shown before, so waiting on them alone raced the switch.
    await page.waitForFunction(
      () =>
        (document.querySelector("#predictability caption")?.textContent ?? "").includes("Second") &&
        Number(document.querySelector<HTMLElement>("#predictability figure")?.dataset.points) > 0,
      undefined,
      { timeout: 5000, polling: 50 },
    );
    expect(await page.textContent("#predictability caption")).toContain("Second");
    expect(await page.$$eval("#predictability tr.in-use", (rows) => rows.length)).toBe(1);

    // Opting out takes its graphs away with its probes.
    await setTicked(item.locator("input[type=checkbox]"), false);
    await page.waitForSelector(`figure[data-series="${rtt}"]`, { state: "detached" });
    expect(await page.$$eval('figure[data-series^="mirror/"]', (f) => f.length)).toBe(0);
    await done();
  });

  it("measures a ticked mirror that is the target once, as the target", async () => {
    const { page, done } = await openPage(rig, `?period=1&target=${encodeURIComponent(secondUrl)}`);
    const item = page.locator(`#mirror-list li[data-url="${secondUrl}"]`);
    await item.waitFor({ timeout: 5000 });
    await setTicked(item.locator("input[type=checkbox]"), true);
    await waitForMeasurements(page, "rtt/websocket", 3, 10_000);
    const rtt = `mirror/rtt/websocket@${secondUrl}`;
    const mirrorBefore = (await plotted(page, rtt)).measurements;
    const targetBefore = (await plotted(page, "rtt/websocket")).measurements;
    await waitForMeasurements(page, "rtt/websocket", targetBefore + 2, 10_000);
    // The target's series go on; the mirror's gain nothing (no second set of probes), and
    // the mirror says why.
    expect((await plotted(page, rtt)).measurements).toBe(mirrorBefore);
    expect(await item.locator(".mirror-status").textContent()).toBe("measured as the target");
    await done();
  });

  it("says an unticked mirror that is the target is measured, and not probed once it is not", async () => {
    const { page, done } = await openPage(rig, `?period=1&target=${encodeURIComponent(secondUrl)}`);
    const item = page.locator(`#mirror-list li[data-url="${secondUrl}"]`);
    await item.waitFor({ timeout: 5000 });
    await waitForMeasurements(page, "rtt/websocket", 2, 10_000);
    expect(await item.locator("input[type=checkbox]").isChecked()).toBe(false);
    expect(await item.locator(".mirror-status").textContent()).toBe("measured as the target");
    // Back to this site: the mirror, unticked, is probed no more.
    await page.selectOption("#target-select", "");
    await page.waitForFunction(
      (u) =>
        document.querySelector(`#mirror-list li[data-url="${u}"] .mirror-status`)?.textContent ===
        "not probed",
      secondUrl,
      { timeout: 5000, polling: 50 },
    );
    await done();
  });
});

describe.skipIf(why !== undefined)("a target named only in the link", () => {
  let other: EchoNode;
  let rig: Rig;
  beforeAll(async () => {
    other = await startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      name: "e2e-unlisted",
      allowOrigins: ["*"],
    });
    try {
      // The default policy (`--connect-src any`), and no mirrors at all.
      rig = await startRig();
    } catch (e) {
      await other.close();
      throw e;
    }
  });
  afterAll(async () => {
    await rig?.close();
    await other?.close();
  });

  it("is measured though the serving echo-node does not list it", async () => {
    const before = await probeCounts(other);
    const { page, done } = await openPage(
      rig,
      `?period=1&transport=both&target=${encodeURIComponent(other.url)}`,
    );
    for (const series of ["rtt/websocket", "rtt/http"]) {
      await waitForMeasurements(page, series, 2, 10_000);
    }
    const after = await probeCounts(other);
    for (const kind of ["ping", "http_ping"]) {
      expect(after.get(kind) ?? 0, kind).toBeGreaterThan(before.get(kind) ?? 0);
    }
    expect(await page.textContent("#target-name")).toBe(new URL(other.url).host);
    await done();
  });
});
