"""Out-of-sample statsforecast baselines for `npm run evaluate` (README, "Forecast accuracy").

For every dev trace (the same traces and names as core/examples/evaluate.rs: each throughput
trace, each tyrell RTT series whole), fits AutoARIMA and AutoETS (statsforecast,
non-seasonal, default search) on the first half (values 0..n//2; for traces longer than
8,000 values, on the last 4,000 values of that half, to keep the fit to seconds), then scores
one-step-ahead forecasts on the second half (values n//2..n) with that fitted model held
fixed: statsforecast's `forward(y, h=1, fitted=True)` runs the fitted model over the whole
trace with its coefficients (ARIMA) or smoothing parameters and initial state (ETS)
unchanged, each forecast made from the values before it, without refitting. Writes
{"traces": {name: {model: {n, sum_se, sum_ae, q3: {...}, q4: {...}}}}}: the second half's
sums, and those of its two quarters (values i with 4i//n = 2 and 3), which are in the
evaluation's halves A and B of a long series.

Usage: python statsforecast-baseline.py DATA_DIR OUT_JSON
"""

import json
import os
import sys
import time

import numpy as np
from statsforecast.models import AutoARIMA, AutoETS

LONG = 8000
FIT_TAIL = 4000


def read_series(path):
    out = []
    with open(path) as f:
        for line in f:
            last = line.replace(",", "\t").split("\t")[-1].strip()
            try:
                out.append(float(last))
            except ValueError:
                pass
    return np.array(out)


def traces(data_dir):
    cooked = os.path.join(data_dir, "pensieve-cooked")
    for name in sorted(os.listdir(cooked)):
        if name != "LICENSE":
            yield name, read_series(os.path.join(cooked, name))
    for sid in ["005", "006", "010"]:
        yield f"tyrell{sid}", read_series(
            os.path.join(data_dir, "tyrell-rtt", f"tyrell_roundtrip{sid}.csv"))


def sums(e):
    e = e[np.isfinite(e)]
    return {"n": int(len(e)), "sum_se": float(np.sum(e * e)), "sum_ae": float(np.sum(np.abs(e)))}


def score(model, y):
    n = len(y)
    half = n // 2
    train = y[:half]
    if n > LONG:
        train = train[-FIT_TAIL:]
    fitted = model.fit(train).forward(y=y, h=1, fitted=True)["fitted"]
    e = y - fitted
    quarter = (np.arange(n) * 4) // n
    out = sums(e[half:])
    out["q3"] = sums(e[quarter == 2])
    out["q4"] = sums(e[quarter == 3])
    return out


def main():
    data_dir, out = sys.argv[1], sys.argv[2]
    result = {"traces": {}, "fit": "first half (last 4,000 values of it above 8,000)"}
    start = time.time()
    for name, y in traces(data_dir):
        entry = {}
        for label, make in [("AutoARIMA", lambda: AutoARIMA(season_length=1)),
                            ("AutoETS", lambda: AutoETS(season_length=1))]:
            try:
                entry[label] = score(make(), y)
            except Exception as e:  # a fit that fails is reported, not fatal
                entry[label] = {"error": str(e)}
        result["traces"][name] = entry
    result["seconds"] = round(time.time() - start, 1)
    with open(out, "w") as f:
        json.dump(result, f)
    print(f"statsforecast: {len(result['traces'])} traces in {result['seconds']} s -> {out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
