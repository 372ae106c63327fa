import { defineConfig } from "vitest/config";
import { browserTests } from "./vitest.shared.js";

// The files whose tests time or rate what the page measures (first plot within 2 s, downloads
// against 32 MiB fetches, mirrors ranked behind emulated links, an outage said within two
// periods): one after another, and (Vitest runs a project whose files go one at a time after
// the others) alone, so that nothing competes with them for the cores. The page's views and
// files are `vitest.views.config.ts`.
export default defineConfig(
  browserTests(
    "e2e",
    [
      "page.test.ts",
      "headline.test.ts",
      "mirrors.test.ts",
      "outage.test.ts",
      "emulated-links.test.ts",
    ],
    false,
  ),
);
