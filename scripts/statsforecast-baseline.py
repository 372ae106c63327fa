"""Out-of-sample statsforecast baselines for `npm run evaluate` (README, "Forecast accuracy").

For every dev trace (the same traces, names and quarters as core/examples/evaluate.rs), fits
AutoARIMA and AutoETS (statsforecast, non-seasonal, default search) on the first half
(values 0..n//2; for traces longer than 8,000 values, on the last 4,000 values of that half,
to keep the fit to seconds), then scores one-step-ahead forecasts on the second half
(values n//2..n) with that fitted model held fixed: statsforecast's `forward(y, h=1,
fitted=True)` runs the fitted model over the whole trace with its coefficients (ARIMA) or
smoothing parameters and initial state (ETS) unchanged, each forecast made from the values
before it, without refitting. Writes {"traces": {name: {model: {n, sum_se, sum_ae}}}}.

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
        xs = read_series(os.path.join(data_dir, "tyrell-rtt", f"tyrell_roundtrip{sid}.csv"))
        q = len(xs) // 4
        for k in range(4):
            end = len(xs) if k == 3 else (k + 1) * q
            yield f"tyrell{sid} q{k + 1}", xs[k * q : end]


def score(model, y):
    half = len(y) // 2
    train = y[:half]
    if len(y) > LONG:
        train = train[-FIT_TAIL:]
    fitted = model.fit(train).forward(y=y, h=1, fitted=True)["fitted"]
    e = y[half:] - fitted[half:]
    e = e[np.isfinite(e)]
    return {"n": int(len(e)), "sum_se": float(np.sum(e * e)), "sum_ae": float(np.sum(np.abs(e)))}


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
