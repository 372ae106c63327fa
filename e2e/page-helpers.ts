/**
 * What the page tests read off the page: the points a series' graph has drawn (its figure's
 * data attributes, chart-view.ts `draw`), and a page opened with its errors collected.
 */
import { expect } from "vitest";
import type { Locator, Page } from "playwright-core";
import type { Rig } from "./harness.js";

export interface Plotted {
  measurements: number;
  forecasts: number;
  lastMeasuredX: number;
  lastForecastX: number;
}

/** What the graph of `series` has drawn, read from its figure's data attributes. */
export async function plotted(page: Page, series: string): Promise<Plotted> {
  return page.evaluate((key) => {
    const d = document.querySelector<HTMLElement>(
      `figure[data-series="${CSS.escape(key)}"]`,
    )?.dataset;
    return {
      measurements: Number(d?.measurements ?? 0),
      forecasts: Number(d?.forecasts ?? 0),
      lastMeasuredX: Number(d?.lastMeasuredX ?? NaN),
      lastForecastX: Number(d?.lastForecastX ?? NaN),
    };
  }, series);
}

/** Waits until the graph of `series` shows at least `n` measurements. */
export async function waitForMeasurements(
  page: Page,
  series: string,
  n: number,
  timeout: number,
): Promise<void> {
  await page.waitForFunction(
    ([key, count]) =>
      Number(
        document.querySelector<HTMLElement>(`figure[data-series="${CSS.escape(key)}"]`)?.dataset
          .measurements ?? 0,
      ) >= Number(count),
    [series, String(n)] as const,
    { timeout, polling: 20 },
  );
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Makes the `target=` of `query`, if any, one the user chose before, where the page keeps
 * those (controls-view.ts), so that the page measures it at once instead of asking.
 */
export async function chooseLinkTarget(page: Page, query: string): Promise<void> {
  const target = new URLSearchParams(query).get("target");
  if (target === null) return;
  // As the page writes a target: the URL's own form (a trailing slash on a bare host).
  const url = new URL(target);
  url.search = "";
  url.hash = "";
  await page.addInitScript((t) => {
    localStorage.setItem("nowcast.targets", JSON.stringify([t]));
  }, url.href);
}

/**
 * Opens the page at `query` in its own browser context; `done` closes it and checks that it
 * logged no error (CSP violations included). `prepare` runs on the page before it navigates.
 * A `target=` in the query is one the user chose before (kept where the page keeps that), so
 * that the page measures it at once, unless `chooseTarget` is false: then the page asks.
 */
export async function openPage(
  rig: Rig,
  query: string,
  prepare?: (page: Page) => Promise<unknown>,
  chooseTarget = true,
): Promise<{ page: Page; startedAt: number; done: () => Promise<void> }> {
  const page = await rig.newPage();
  if (chooseTarget) await chooseLinkTarget(page, query);
  await prepare?.(page);
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && !insecureIsolation(m.text())) errors.push(m.text());
  });
  const startedAt = Date.now();
  await page.goto(`${rig.node.url}/${query}`);
  const done = async () => {
    // The context, not just the page: closed before the test ends, so that the browser's own
    // closing (afterAll) never races a context still closing.
    await page.context().close();
    expect(errors).toEqual([]);
  };
  return { page, startedAt, done };
}

/**
 * Ticks (or unticks) a checkbox from the keyboard, as a keyboard user would: focus and Space.
 * A mouse click lands where the box was when it looked stable, and the live graphs above it
 * may still push it down between that check and the click.
 */
export async function setTicked(box: Locator, ticked: boolean, timeout = 10_000): Promise<void> {
  await box.waitFor({ timeout });
  if ((await box.isChecked()) !== ticked) {
    await box.focus();
    await box.press("Space");
  }
  expect(await box.isChecked()).toBe(ticked);
}

/**
 * Chromium's console notice that a page served over plain http from an address other than
 * loopback cannot be cross-origin isolated (echo-node sends COOP/COEP with every page; the
 * browser honours them over https and on loopback only). Not an error of the page.
 */
export function insecureIsolation(text: string): boolean {
  return /Cross-Origin-(Opener|Embedder)-Policy header has been ignored/.test(text);
}
