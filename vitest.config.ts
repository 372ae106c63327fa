import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: ["web", "echo-node", "e2e/vitest.config.ts", "e2e/vitest.views.config.ts"],
    // Two files at a time (Vitest's default is one fewer than the cores: one on the 2-core
    // machine the suite is sized for, where this took the step from 331 to 245 s).
    maxWorkers: 2,
  },
});
