import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    name: "echo-node",
    include: ["test/**/*.test.ts"],
    environment: "node",
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
