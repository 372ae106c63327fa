#!/usr/bin/env bash
# Builds wasm-forecast for wasm32 and generates its JavaScript glue and TypeScript types in
# wasm-forecast/pkg (one ES module that loads in the browser and, given the bytes, in Node).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p wasm-forecast --lib --target wasm32-unknown-unknown --release
wasm-bindgen --target web --out-dir wasm-forecast/pkg \
  target/wasm32-unknown-unknown/release/wasm_forecast.wasm
