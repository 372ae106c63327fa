// The page's colours, read from style.css in both themes: the graphs' marks stand out from the
// panel (WCAG 2.2 §1.4.11, non-text contrast ≥ 3:1), and coloured text reads (§1.4.3, ≥ 4.5:1)
// on the backgrounds it is set on.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const css = readFileSync(new URL("../style.css", import.meta.url), "utf8");

/** The custom properties of the first block after `marker`. */
function theme(marker: string): Map<string, string> {
  const start = css.indexOf(marker);
  const block = css.slice(css.indexOf("{", start), css.indexOf("}", start));
  return new Map([...block.matchAll(/(--[a-z-]+):\s*([^;]+);/g)].map((m) => [m[1]!, m[2]!.trim()]));
}

const LIGHT = theme(":root {");
const DARK = theme("@media (prefers-color-scheme: dark)");

function rgb(hex: string): [number, number, number] {
  const m = /^#([0-9a-f]{6})$/i.exec(hex);
  if (m === null) throw new Error(`not a #rrggbb colour: ${hex}`);
  const n = parseInt(m[1]!, 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/** Relative luminance (WCAG 2.2, "relative luminance"). */
function luminance(hex: string): number {
  const [r, g, b] = rgb(hex).map((c) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

describe.each([
  ["light", LIGHT],
  ["dark", DARK],
])("the %s theme", (_, t) => {
  const v = (name: string) => t.get(name) ?? LIGHT.get(name)!;

  it("draws measurements and forecasts with marks that stand out from the panel", () => {
    for (const mark of ["--measured", "--forecast"]) {
      for (const under of ["--panel", "--bg"]) {
        expect(contrast(v(mark), v(under)), `${mark} on ${under}`).toBeGreaterThanOrEqual(3);
      }
    }
  });

  it("sets coloured text that reads on its background", () => {
    for (const [text, under] of [
      ["--text", "--panel"],
      ["--muted", "--panel"],
      ["--muted", "--bg"],
      ["--steady", "--bg"],
      ["--variable", "--bg"],
      ["--erratic", "--bg"],
      ["--problem", "--panel"],
      ["--problem", "--problem-bg"],
      ["--text", "--problem-bg"],
      ["--warning", "--warning-bg"],
      ["--warning", "--panel"],
      ["--accent", "--panel"],
    ]) {
      expect(contrast(v(text!), v(under!)), `${text} on ${under}`).toBeGreaterThanOrEqual(4.5);
    }
  });
});
