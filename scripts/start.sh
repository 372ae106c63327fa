#!/usr/bin/env bash
# `npm start`: install what is missing, build the WASM forecaster and the page, then serve
# them with echo-node on PORT (default 8080). echo-node prints the URL.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build-wasm.sh
if [ -f web/index.html ]; then
  npm -w web run --silent build
else
  echo "[start] web/index.html is not there yet: echo-node serves the probes, and / says the page is not built"
fi
npm -w echo-node run --silent build
exec node echo-node/dist/main.js --port "${PORT:-8080}" "$@"
