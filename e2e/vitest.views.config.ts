import { defineConfig } from "vitest/config";
import { browserTests } from "./vitest.shared.js";

// The page's views, controls and imported files: nothing here rates a measurement, so these
// run two at a time, beside the web and echo-node tests (the measuring files of
// `vitest.config.ts` run after them, alone).
export default defineConfig(
  browserTests(
    "e2e-views",
    [
      "accessibility.test.ts",
      "chart.test.ts",
      "nowcast-files.test.ts",
      "prefix.test.ts",
      "report-html.test.ts",
      "target.test.ts",
      "tool-files.test.ts",
    ],
    true,
  ),
);
