import { defineConfig } from "vitest/config";

// Browser tests: one Chromium and one echo-node per file, files one after another (the machine
// is small and the timings in these tests must not compete with each other).
export default defineConfig({
  test: {
    name: "e2e",
    include: ["*.test.ts"],
    environment: "node",
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
