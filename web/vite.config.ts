import { defineConfig } from "vite";

// The page is served by echo-node, whose Content-Security-Policy allows only same-origin
// scripts and workers: no inline code, and the worker must be a file of its own (ES module).
export default defineConfig({
  root: import.meta.dirname,
  // Relative URLs throughout, so that the page works at the root of its site and under a
  // path a reverse proxy gives it (https://mirror.example.edu/nowcast/) alike.
  base: "./",
  publicDir: "../public",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    // Terser (two compress passes) ships ~7 KB (gzip) less than the default minifier: the
    // page's JS + WASM + CSS must stay within 200 KB.
    minify: "terser",
    terserOptions: { compress: { passes: 2 }, module: true },
  },
  // The worker's bundle is minified by Rolldown itself: with terser chosen above, Vite would
  // leave its whitespace in.
  worker: { format: "es", rolldownOptions: { output: { minify: true } } },
  // The dev server isolates the page as echo-node does (static-files.ts ISOLATION_HEADERS).
  server: {
    fs: { allow: [".."] },
    headers: {
      "Cross-Origin-Opener-Policy": "same-origin",
      "Cross-Origin-Embedder-Policy": "require-corp",
    },
  },
});
