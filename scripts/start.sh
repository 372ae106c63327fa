#!/usr/bin/env bash
# `npm start`: install what is missing, build what changed (the WASM forecaster, the page,
# echo-node), then serve them with echo-node on PORT (default 8080). echo-node prints the URL.
#
# Each build is skipped when its stamp (node_modules/.cache/nowcast-start/NAME) says it was
# made from its inputs as they are now AND its outputs are still the files it made: the stamp
# holds a hash of the inputs (paths and contents, and the versions of the tools that build
# them) and a hash of the outputs, so an edit, a checkout, a deleted output or a build by other
# means (npm test, a bench, a hand edit) all make it build again. NOWCAST_REBUILD=1 builds all.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[start]\033[0m %s\n' "$*"; }

STAMPS=node_modules/.cache/nowcast-start

# Hash of the files under the given paths (their paths and contents); a path that does not
# exist counts as empty.
tree_hash() {
  local paths=()
  for p in "$@"; do if [ -e "$p" ]; then paths+=("$p"); fi; done
  {
    printf '%s\n' "$@"
    if [ ${#paths[@]} -gt 0 ]; then
      find "${paths[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
    fi
  } | sha256sum | cut -d' ' -f1
}

# Hash of a directory's files as built (for the outputs), `-not -path` patterns left out.
out_hash() {
  local dir=$1
  shift
  if [ ! -d "$dir" ]; then
    echo missing
    return
  fi
  (cd "$dir" && find . -type f "$@" -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) |
    sha256sum | cut -d' ' -f1
}

# Builds NAME with the command after `--` unless its stamp matches INPUTS and OUTPUTS-COMMAND's
# hash; then stamps it.
build() {
  local name=$1 inputs=$2 outputs=$3
  shift 4
  local stamp="$STAMPS/$name"
  if [ "${NOWCAST_REBUILD:-}" = "" ] && [ -f "$stamp" ] &&
    [ "$(cat "$stamp")" = "$inputs $($outputs)" ]; then
    log "$name: unchanged, not rebuilt"
    return
  fi
  log "$name: building"
  rm -f "$stamp"
  "$@"
  mkdir -p "$STAMPS"
  echo "$inputs $($outputs)" >"$stamp"
}

bash scripts/setup.sh

tool_versions() {
  rustc --version
  cargo --version
  wasm-bindgen --version
  node --version
  grep -m1 '"version"' node_modules/binaryen/package.json 2>/dev/null || true
}

wasm_inputs=$( {
  tool_versions
  tree_hash core/src core/Cargo.toml Cargo.toml Cargo.lock .cargo scripts/build-wasm.sh
} | sha256sum | cut -d' ' -f1)
wasm_outputs() { out_hash core/pkg; }
build wasm "$wasm_inputs" wasm_outputs -- bash scripts/build-wasm.sh

if [ -f web/index.html ]; then
  # The page imports core/pkg and echo-node's protocol codec; tests and benches are not in it.
  page_inputs=$( {
    node --version
    tree_hash web/index.html web/vite.config.ts web/package.json web/tsconfig.json public \
      core/pkg echo-node/src/protocol.ts package-lock.json tsconfig.base.json
    find web/src -type f ! -name '*.test.ts' -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
  } | sha256sum | cut -d' ' -f1)
  page_outputs() { out_hash web/dist; }
  build page "$page_inputs" page_outputs -- npm -w web run --silent build
else
  log "web/index.html is not there yet: echo-node serves the probes, and / says the page is not built"
fi

# What `node echo-node/dist/main.js` runs: the build configuration only (the dev one compiles
# tests and benches).
echo_inputs=$( {
  node --version
  tree_hash echo-node/src echo-node/tsconfig.build.json echo-node/package.json \
    tsconfig.base.json package-lock.json
} | sha256sum | cut -d' ' -f1)
echo_outputs() { out_hash echo-node/dist -not -path './dev/*'; }
build echo-node "$echo_inputs" echo_outputs -- npx tsc -b echo-node/tsconfig.build.json

exec node echo-node/dist/main.js --port "${PORT:-8080}" "$@"
