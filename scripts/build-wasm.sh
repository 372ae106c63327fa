#!/usr/bin/env bash
# Builds the core crate (nowcast-core) for wasm32 twice, once per module of the page, and
# generates each one's JavaScript glue and TypeScript types:
# - core/pkg (feature `wasm-page`): the forecasters, probed series and ranking, which the page
#   loads on first open;
# - core/pkg/reader (feature `wasm-reader`): the readers and writers of files (import, export),
#   which the page loads only when a file is imported or exported (web/src/forecast.ts
#   `loadReader`), so that its bytes are not in the first open.
# Each is one ES module that loads in the browser and, given the bytes, in Node.
# The modules are then shrunk by wasm-opt from the npm package `binaryen` (a devDependency of
# web; Debian's binaryen 108 cannot read the externref table wasm-bindgen 0.2.130 emits):
# names and producers stripped, -Os with GUFA, repeated until nothing changes (0.5 KB gzip
# smaller than -Os alone for ~10 s more; -Oz is no smaller).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
wasm_opt=node_modules/.bin/wasm-opt
# NOWCAST_WASM_QUICK=1 (`npm test`): one wasm-opt pass instead of passes until nothing
# changes. The modules behave the same; what ships (`npm start`, `npm run bench`) is built
# without it.
converge=--converge
[ -n "${NOWCAST_WASM_QUICK:-}" ] && converge=

build() { # feature, output directory, output name
  cargo build --quiet -p nowcast-core --lib --target wasm32-unknown-unknown --profile wasm-release \
    --features "$1"
  wasm-bindgen --target web --out-dir "$2" --out-name "$3" \
    "$target/wasm32-unknown-unknown/wasm-release/nowcast_core.wasm"
  local wasm="$2/$3_bg.wasm"
  if [ -x "$wasm_opt" ]; then
    # The features come from the module's target_features section (simd128, reference types,
    # bulk memory, …), so nothing is lowered; the section itself is dropped from the output.
    "$wasm_opt" -Os --gufa $converge --strip-debug --strip-producers --strip-target-features "$wasm" -o "$wasm.opt"
    mv "$wasm.opt" "$wasm"
  else
    echo "build-wasm: $wasm_opt is missing (npm install): $wasm left unoptimised" >&2
  fi
}

build wasm-page core/pkg nowcast_core
build wasm-reader core/pkg/reader nowcast_reader
