/**
 * Accessibility scan: axe-core over the page with measurements, the headline, the details
 * table, the mirror list, the ranking and the predictability view shown, in light and dark
 * mode, on desktop and phone widths. Serious and critical
 * violations fail the test; minor ones are printed, not hidden.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AxeResults } from "axe-core";
import { missing, startRig, type Rig } from "./harness.js";

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the accessibility scan: ${why}`);

const AXE_SOURCE = readFileSync(
  createRequire(import.meta.url).resolve("axe-core/axe.min.js"),
  "utf8",
);

describe.skipIf(why !== undefined)("accessibility (axe-core)", () => {
  let rig: Rig;
  beforeAll(async () => {
    // A mirror to list (never probed: nothing listens on port 9, and the box stays unticked).
    rig = await startRig({
      mirrors: [{ name: "Listed", url: "http://127.0.0.1:9/", location: "loopback" }],
    });
  });
  afterAll(async () => {
    await rig?.close();
  });

  it.each([
    { name: "desktop", viewport: { width: 1366, height: 900 }, scheme: "light" },
    { name: "desktop", viewport: { width: 1366, height: 900 }, scheme: "dark" },
    { name: "phone", viewport: { width: 390, height: 844 }, scheme: "light" },
    { name: "phone", viewport: { width: 390, height: 844 }, scheme: "dark" },
  ] as const)(
    "finds no serious or critical violations ($name, $scheme)",
    async ({ viewport, scheme }) => {
      // Only this context bypasses the page's CSP, which (rightly) refuses the injected axe
      // script; the CSP itself is exercised by every other test.
      const context = await rig.browser.newContext({
        bypassCSP: true,
        viewport,
        colorScheme: scheme,
      });
      try {
        const page = await context.newPage();
        await page.goto(`${rig.node.url}/?period=1`);
        await page.waitForSelector('figure[data-series="bandwidth_up/http"][data-measurements]', {
          timeout: 10_000,
        });
        await page.waitForSelector("#mirror-list li", { timeout: 5000 });
        // The details under the headline open, so that their table is scanned too.
        await page.click("#details summary");
        await page.waitForSelector("#predictability table tbody tr", { timeout: 10_000 });
        await page.addScriptTag({ content: AXE_SOURCE });
        const results = await page.evaluate(() =>
          (window as unknown as { axe: { run(): Promise<AxeResults> } }).axe.run(),
        );
        const found = results.violations.map((v) => ({
          id: v.id,
          impact: v.impact,
          help: v.help,
          nodes: v.nodes.map((n) => n.target.join(" ")),
        }));
        if (found.length > 0) console.log(`e2e: axe findings ${JSON.stringify(found, null, 1)}`);
        expect(found.filter((v) => v.impact === "serious" || v.impact === "critical")).toEqual([]);
      } finally {
        await context.close();
      }
    },
  );
});
