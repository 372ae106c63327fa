import type { ViteUserConfig } from "vitest/config";

// Browser tests: one Chromium and one echo-node per file.
export const browserTests = (
  name: string,
  include: string[],
  fileParallelism: boolean,
): ViteUserConfig => ({
  test: {
    name,
    include,
    environment: "node",
    fileParallelism,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
