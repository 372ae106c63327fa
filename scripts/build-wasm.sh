#!/usr/bin/env bash
# Builds the core crate (nowcast-core) for wasm32 and generates its JavaScript glue and TypeScript types in
# core/pkg (one ES module that loads in the browser and, given the bytes, in Node).
# The module is then shrunk by wasm-opt from the npm package `binaryen` (a devDependency of
# web; Debian's binaryen 108 cannot read the externref table wasm-bindgen 0.2.130 emits):
# names and producers stripped, -Os with GUFA, repeated until nothing changes (0.5 KB gzip
# smaller than -Os alone for ~10 s more; -Oz is no smaller).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p nowcast-core --lib --target wasm32-unknown-unknown --profile wasm-release
wasm-bindgen --target web --out-dir core/pkg \
  target/wasm32-unknown-unknown/wasm-release/nowcast_core.wasm
wasm=core/pkg/nowcast_core_bg.wasm
wasm_opt=node_modules/.bin/wasm-opt
if [ -x "$wasm_opt" ]; then
  # The features come from the module's target_features section (simd128, reference types,
  # bulk memory, …), so nothing is lowered; the section itself is dropped from the output.
  "$wasm_opt" -Os --gufa --converge --strip-debug --strip-producers --strip-target-features "$wasm" -o "$wasm.opt"
  mv "$wasm.opt" "$wasm"
else
  echo "build-wasm: $wasm_opt is missing (npm install): $wasm left unoptimised" >&2
fi
