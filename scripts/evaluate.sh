#!/usr/bin/env bash
# `npm run evaluate -- DATA_DIR`: improved vs faithful forecasts on the dev traces, settings
# chosen on one half and reported on the other (core/examples/evaluate.rs), beside
# statsforecast's AutoARIMA and AutoETS fitted on each trace's first half
# (scripts/statsforecast-baseline.py), and the timeout rules' miss rates and mean timeouts.
# statsforecast goes into a venv under target/eval-venv; if it cannot be installed the
# comparison runs without it and says so. Its results are cached in target/eval/, keyed by
# the data files' names and sizes and the baseline script.
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-../shared/data/dev}"
data="$(cd "$data" && pwd)"
mkdir -p target/eval
venv=target/eval-venv
baseline=""
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import statsforecast" 2>/dev/null; then
  echo "evaluate: installing statsforecast into $venv" >&2
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet "statsforecast==2.1.1"; } >&2; then
    echo "evaluate: statsforecast could not be installed: comparing without it" >&2
  fi
fi
if "$venv/bin/python" -c "import statsforecast" 2>/dev/null; then
  key=$( { (cd "$data" && find pensieve-cooked tyrell-rtt -type f -printf '%p %s\n' | sort); cat scripts/statsforecast-baseline.py; } | sha256sum | cut -c1-16)
  baseline="target/eval/statsforecast-$key.json"
  if [ ! -s "$baseline" ]; then
    "$venv/bin/python" scripts/statsforecast-baseline.py "$data" "$baseline"
  fi
fi
cargo run --quiet --release -p nowcast-core --example evaluate -- "$data" $baseline
