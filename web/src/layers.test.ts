// The page's layers, checked on the sources: the engine (worker.ts and engine/) and the views
// (main.ts and views/) never import each other, and talk only through messages.ts; the shared
// modules (the rest of src/) import neither; the views take nothing but types from the WASM
// wrapper, so the page's thread never loads the forecasters.

import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = dirname(fileURLToPath(import.meta.url));

type Layer = "engine" | "view" | "shared";

function layerOf(file: string): Layer {
  const rel = relative(SRC, file);
  if (rel === "worker.ts" || rel.startsWith("engine/")) return "engine";
  if (rel === "main.ts" || rel.startsWith("views/")) return "view";
  return "shared";
}

/** Each source file's imports of other source files: where to, and whether types only. */
function imports(): { from: string; to: string; typeOnly: boolean }[] {
  const out = [];
  const files = readdirSync(SRC, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
    .map((f) => join(SRC, f));
  for (const from of files) {
    const text = readFileSync(from, "utf8");
    for (const m of text.matchAll(/^import (type )?[^"']*?["']([^"']+)["'];?$/gms)) {
      const spec = m[2]!;
      if (!spec.startsWith(".")) continue;
      const to = resolve(dirname(from), spec.replace(/\?.*$/, ""));
      if (!to.startsWith(SRC)) continue;
      out.push({
        from,
        to: to.endsWith(".ts") || to.endsWith(".css") ? to : `${to}.ts`,
        typeOnly: m[1] !== undefined,
      });
    }
  }
  return out;
}

describe("the page's layers", () => {
  const all = imports();
  const named = (list: typeof all) =>
    list.map(({ from, to }) => `${relative(SRC, from)} → ${relative(SRC, to)}`);

  it("reads the imports (the check itself works)", () => {
    expect(named(all)).toContain("worker.ts → engine/engine.ts");
    expect(named(all)).toContain("main.ts → views/series-views.ts");
  });

  it("keep the engine and the views apart", () => {
    const crossing = all.filter(({ from, to }) => {
      const [a, b] = [layerOf(from), layerOf(to)];
      return a !== b && b !== "shared";
    });
    expect(named(crossing)).toEqual([]);
  });

  it("take nothing but types from the WASM wrapper into the page", () => {
    const wasm = all.filter(
      ({ from, to, typeOnly }) =>
        layerOf(from) === "view" && relative(SRC, to) === "forecast.ts" && !typeOnly,
    );
    expect(named(wasm)).toEqual([]);
  });
});
