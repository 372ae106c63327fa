/**
 * Accessibility, against a real echo-node and a second one as its mirror (and a listed mirror
 * nothing answers at):
 * - axe-core over the page in each of its states — as it opens, measuring, with the mirrors
 *   ranked and the details open, with files imported and their predictability shown,
 *   suspended, with the clear-history dialog open, and with a target it cannot reach (the
 *   banner) — in light and dark mode, on desktop and phone widths. Serious and critical
 *   violations fail the test; the others are printed, not hidden. No rule is disabled.
 * - the keyboard alone: Tab reaches every control, each with a name (Chromium's own
 *   accessibility tree) and a visible focus ring; Space and Enter suspend and resume the
 *   measurements, tick a mirror (which is then measured), and open and close the dialog.
 * - the live regions: a summary of the figures is announced, politely, and not each probe.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AxeResults } from "axe-core";
import type { CDPSession, Page } from "playwright-core";
import { defaultConfig } from "../echo-node/src/config.js";
import { startEchoNode, type EchoNode } from "../echo-node/src/server.js";
import { missing, probeCounts, startRig, total, type Rig } from "./harness.js";
import { openPage, plotted, setTicked, sleep, waitForMeasurements } from "./page-helpers.js";

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the accessibility tests: ${why}`);

const AXE_SOURCE = readFileSync(
  createRequire(import.meta.url).resolve("axe-core/axe.min.js"),
  "utf8",
);
const SAMPLES = fileURLToPath(new URL("../public/samples/", import.meta.url));
/** A listed mirror nothing answers at (connections to it are refused at once). */
const DEAD = "http://127.0.0.1:9/";

interface Finding {
  state: string;
  id: string;
  impact: string | null | undefined;
  help: string;
  nodes: string[];
}

/** axe-core's violations on the page as it stands, every rule as axe ships it. */
async function scan(page: Page, state: string): Promise<Finding[]> {
  if (!(await page.evaluate(() => "axe" in window))) {
    await page.addScriptTag({ content: AXE_SOURCE });
  }
  const results = await page.evaluate(() =>
    (window as unknown as { axe: { run(): Promise<AxeResults> } }).axe.run(),
  );
  return results.violations.map((v) => ({
    state,
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.map((n) => n.target.join(" ")),
  }));
}

/** Waits until `count` sites of the ranking table have a predicted time or are unreachable. */
async function waitForRanked(page: Page, count: number, timeout: number): Promise<void> {
  await page.waitForFunction(
    (n) =>
      Array.from(document.querySelectorAll("#ranking-table tbody tr td:first-of-type")).filter(
        (c) => /\d (ms|s|min|h|days)|unreachable/.test(c.textContent ?? ""),
      ).length >= n,
    count,
    { timeout, polling: 100 },
  );
}

/** The focused element as Chromium's accessibility tree has it, and how its focus shows. */
async function focused(page: Page, cdp: CDPSession) {
  {
    const { result } = await cdp.send("Runtime.evaluate", { expression: "document.activeElement" });
    const { nodes } = await cdp.send("Accessibility.getPartialAXTree", {
      objectId: result.objectId!,
      fetchRelatives: false,
    });
    const ax = nodes[0];
    const dom = await page.evaluate(() => {
      const e = document.activeElement as HTMLElement | null;
      if (e === null || e === document.body) return undefined;
      e.dataset.tabbed = "";
      const style = getComputedStyle(e);
      const r = e.getBoundingClientRect();
      return {
        what: `${e.tagName.toLowerCase()}${e.id === "" ? "" : `#${e.id}`}`,
        id: e.id,
        focusVisible: e.matches(":focus-visible"),
        outline: `${style.outlineStyle} ${style.outlineWidth}`,
        outlineWidth: parseFloat(style.outlineWidth),
        outlineStyle: style.outlineStyle,
        inView: r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < innerHeight,
      };
    });
    return (
      dom && { ...dom, role: String(ax?.role?.value ?? ""), name: String(ax?.name?.value ?? "") }
    );
  }
}

/**
 * Activates the control `selector` from the keyboard (focus, then Enter): a mouse click lands
 * where the control was when it looked stable, and rows and graphs added above it while the
 * page measures may push it down between that check and the click.
 */
async function activate(page: Page, selector: string): Promise<void> {
  await page.focus(selector);
  await page.keyboard.press("Enter");
}

/** Presses Tab until the element `selector` has the focus (at most `max` presses). */
async function tabTo(page: Page, selector: string, max = 60): Promise<void> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement?.matches(s) === true, selector)) return;
  }
  throw new Error(`Tab never reached ${selector}`);
}

describe.skipIf(why !== undefined)("accessibility", () => {
  let mirror: EchoNode;
  let rig: Rig;
  let mirrorUrl: string;
  beforeAll(async () => {
    mirror = await startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      name: "e2e-a11y-mirror",
      // The page's origin is not known before the first node starts: any, on loopback only.
      allowOrigins: ["*"],
    });
    mirrorUrl = new URL(mirror.url).href;
    try {
      rig = await startRig({
        mirrors: [
          { name: "Second", url: mirrorUrl, location: "loopback" },
          { name: "Dead", url: DEAD, location: "nowhere" },
        ],
      });
    } catch (e) {
      await mirror.close();
      throw e;
    }
  });
  afterAll(async () => {
    await rig?.close();
    await mirror?.close();
  });

  // Each theme once and each layout once: colours (contrast) change with the scheme, the
  // layout with the viewport, and the suite's time budget is better spent than on the two
  // other pairs (all four were clean when this was written).
  it.each([
    { name: "desktop", viewport: { width: 1366, height: 900 }, scheme: "light" },
    { name: "phone", viewport: { width: 390, height: 844 }, scheme: "dark" },
  ] as const)(
    "axe finds no serious or critical violation in any state ($name, $scheme)",
    async ({ viewport, scheme }) => {
      // Only this context bypasses the page's CSP, which (rightly) refuses the injected axe
      // script; the CSP itself is exercised by every other test.
      const context = await rig.browser.newContext({
        bypassCSP: true,
        viewport,
        colorScheme: scheme,
      });
      const found: Finding[] = [];
      try {
        const page = await context.newPage();
        await page.goto(`${rig.node.url}/?period=1&size=64k`);
        await page.waitForSelector("#cards .card", { timeout: 5000 });
        found.push(...(await scan(page, "as it opens")));

        await waitForMeasurements(page, "rtt/websocket", 3, 10_000);
        await page.waitForSelector('figure[data-series="bandwidth_up/http"][data-measurements]', {
          timeout: 10_000,
        });
        found.push(...(await scan(page, "measuring")));

        await setTicked(page.locator(`#mirror-list li[data-url="${mirrorUrl}"] input`), true);
        await setTicked(page.locator(`#mirror-list li[data-url="${DEAD}"] input`), true);
        await waitForRanked(page, 3, 15_000);
        await activate(page, "#details summary");
        found.push(...(await scan(page, "mirrors ranked, details open")));

        await page.setInputFiles(
          "#import",
          ["rtt-browser.ndjson", "broken.ndjson"].map((f) => join(SAMPLES, f)),
        );
        await page.waitForFunction(
          () =>
            document.querySelectorAll('figure[data-series^="import/"][data-forecasts]').length ===
            2,
          undefined,
          { timeout: 10_000, polling: 50 },
        );
        await page.waitForSelector("#predictability table tbody tr", { timeout: 10_000 });
        found.push(...(await scan(page, "files imported")));

        await activate(page, "#suspend");
        await page.waitForSelector('#state[data-state="paused"]', { timeout: 5000 });
        found.push(...(await scan(page, "suspended")));

        await activate(page, "#clear-history");
        found.push(...(await scan(page, "dialog open")));
        await page.keyboard.press("Escape");
        await activate(page, "#suspend");

        // The target nothing answers at: the banner says so.
        await page.selectOption("#target-select", DEAD);
        await page.waitForSelector("#banner:not([hidden])", { timeout: 15_000 });
        found.push(...(await scan(page, "target unreachable")));
      } finally {
        await context.close();
      }
      if (found.length > 0) console.log(`e2e: axe findings ${JSON.stringify(found, null, 1)}`);
      expect(found.filter((v) => v.impact === "serious" || v.impact === "critical")).toEqual([]);
    },
    90_000,
  );

  it("reaches every control by Tab, named and with a visible focus ring, and measures from the keyboard alone", async () => {
    const { page, done } = await openPage(rig, "?period=1&size=64k");
    await page.waitForFunction(() => document.querySelectorAll("#mirror-list li").length === 2);
    await waitForMeasurements(page, "rtt/websocket", 2, 10_000);

    // Tab from the top of the page until the focus leaves it or comes round again.
    const walk: NonNullable<Awaited<ReturnType<typeof focused>>>[] = [];
    const cdp = await page.context().newCDPSession(page);
    try {
      for (let i = 0; i < 60; i++) {
        await page.keyboard.press("Tab");
        const f = await focused(page, cdp);
        if (f === undefined || (walk.length > 0 && f.what === walk[0]!.what)) break;
        walk.push(f);
      }
    } finally {
      await cdp.detach();
    }
    const order = walk.map((f) => f.id).filter((id) => id !== "");
    expect(order).toEqual([
      "period",
      "size",
      "transport",
      "target-select",
      "budget",
      "suspend",
      "show-graphs",
      "file-size",
      "predictability-series",
      "import",
      "export-ndjson",
      "export-csv",
      "clear-history",
    ]);
    for (const f of walk) {
      const where = `${f.what} (${f.role} "${f.name}")`;
      expect(f.name.trim(), `${where} has a name`).not.toBe("");
      expect(f.focusVisible, `${where} shows its focus`).toBe(true);
      expect(f.outlineStyle, `${where}'s focus ring`).not.toBe("none");
      expect(f.outlineWidth, `${where}'s focus ring`).toBeGreaterThanOrEqual(2);
      expect(f.inView, `${where} is scrolled into view`).toBe(true);
    }
    // The mirrors' boxes, the scrolling tables and the sample links are on the way too.
    expect(walk.filter((f) => f.role === "checkbox").map((f) => f.name)).toEqual([
      "Show graphs",
      `Probe Second — ${mirrorUrl}, loopback`,
      `Probe Dead — ${DEAD}, nowhere`,
    ]);
    // Nothing that can take the focus and is shown was skipped.
    const skipped = await page.evaluate(() =>
      Array.from(
        document.querySelectorAll<HTMLElement>(
          "a[href], button, input, select, textarea, summary, [tabindex]",
        ),
      )
        .filter((e) => e.tabIndex >= 0 && e.checkVisibility() && !("tabbed" in e.dataset))
        .map((e) => e.outerHTML.slice(0, 80)),
    );
    expect(skipped).toEqual([]);

    // Suspend with Space, resume with Enter: the measurements stop, then start again.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await tabTo(page, "#suspend");
    await page.keyboard.press("Space");
    expect(await page.getAttribute("#suspend", "aria-pressed")).toBe("true");
    await page.waitForSelector('#state[data-state="paused"]', { timeout: 5000 });
    await sleep(1500); // a probe already on the wire may finish
    const quiet = total(await probeCounts(rig.node));
    const drawn = (await plotted(page, "rtt/websocket")).measurements;
    await sleep(2000);
    expect(total(await probeCounts(rig.node))).toBe(quiet);
    await page.keyboard.press("Enter");
    expect(await page.getAttribute("#suspend", "aria-pressed")).toBe("false");
    expect(await page.textContent("#suspend")).toBe("Suspend");
    await waitForMeasurements(page, "rtt/websocket", drawn + 1, 5000);
    expect(total(await probeCounts(rig.node))).toBeGreaterThan(quiet);

    // Tick the mirror with Space: it is measured; untick it again.
    const box = `#mirror-list li[data-url="${mirrorUrl}"] input`;
    await tabTo(page, box);
    await page.keyboard.press("Space");
    const deadline = Date.now() + 8000;
    while (total(await probeCounts(mirror)) === 0 && Date.now() < deadline) await sleep(100);
    expect(total(await probeCounts(mirror))).toBeGreaterThan(0);
    await page.keyboard.press("Space");
    expect(await page.isChecked(box)).toBe(false);

    // The dialog: Enter opens it on its safe choice, Escape closes it, the focus comes back.
    await tabTo(page, "#clear-history");
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Keep the history");
    await page.keyboard.press("Escape");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("clear-history");
    expect(await page.isVisible("#clear-dialog")).toBe(false);
    expect((await plotted(page, "rtt/websocket")).measurements).toBeGreaterThan(drawn);
    await done();
  }, 60_000);

  it("announces a summary of the figures politely, not every probe", async () => {
    const { page, done } = await openPage(rig, "?period=1&size=64k");
    await waitForMeasurements(page, "rtt/websocket", 1, 5000);
    // Five rounds: every live region (explicit or implicit, such as <output>) is watched.
    const changes = await page.evaluate(async () => {
      const live = Array.from(
        document.querySelectorAll<HTMLElement>(
          "[aria-live]:not([aria-live=off]), [role=status], [role=alert], [role=log], output",
        ),
      );
      const seen: string[] = [];
      const observer = new MutationObserver((records) => {
        for (const r of records) {
          const node = r.target instanceof Element ? r.target : r.target.parentElement;
          const region = live.find((l) => l.contains(node));
          if (region !== undefined) seen.push(`#${region.id}: ${region.textContent ?? ""}`);
        }
      });
      for (const l of live) {
        observer.observe(l, { childList: true, subtree: true, characterData: true });
      }
      await new Promise((r) => setTimeout(r, 5000));
      observer.disconnect();
      return seen;
    });
    // Only the announcements, and few: the first figures, the banner's warning that the budget
    // runs out (64 KB every second would spend it early), once. Never the state, the bytes
    // used, the ranking or the predictability sentence at every round.
    expect(
      changes.filter((c) => !c.startsWith("#announcer:")),
      changes.join("\n"),
    ).toEqual([]);
    expect(changes.length, changes.join("\n")).toBeLessThanOrEqual(3);

    expect(
      await page.evaluate(() => document.querySelector("#announcer")?.getAttribute("aria-live")),
    ).toBe("polite");
    await page.waitForFunction(
      () => /Latest: /.test(document.querySelector("#announcer")?.textContent ?? ""),
      undefined,
      { timeout: 10_000, polling: 100 },
    );
    const said = (await page.textContent("#announcer")) ?? "";
    for (const direction of ["Download", "Upload", "Round trip (RTT)"]) {
      expect(said).toContain(direction);
    }
    await done();
  }, 30_000);
});
