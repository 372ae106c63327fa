import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: ["web", "echo-node", "e2e"],
  },
});
