#!/usr/bin/env python3
"""The evidence behind the probed series' timeout rule (core/src/probed.rs, TIMEOUT_RULE).

Runs `nowcast forecast --json` over recorded duration series and prints each timeout rule's
miss rate (next duration above the timeout) and mean timeout relative to Allen k=2, per
family: the tyrell RTT series (ms) and the pensieve throughput traces turned into the time a
1 MB transfer takes (ms). Usage: python3 native-probes/bench/timeout_rules.py [DATA_DIR]
(default ../shared/data/dev; needs `cargo build --release -p native-probes`).
"""
import glob
import json
import os
import statistics as st
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "nowcast")
DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "data", "dev")
RULES = ["nws", "allen_k1", "allen_k2", "rfc6298", "windowed_k2_w20"]


def rules_of(path):
    out = subprocess.run([BIN, "forecast", path, "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    return {t["rule"]: (t["miss_rate"], t["mean_timeout"]) for t in doc["report"]["timeouts"]}


families = {}
for f in sorted(glob.glob(os.path.join(DATA, "tyrell-rtt", "*.csv"))):
    families.setdefault("tyrell RTT (ms)", []).append(rules_of(f))
with tempfile.TemporaryDirectory() as tmp:
    for f in sorted(glob.glob(os.path.join(DATA, "pensieve-cooked", "*"))):
        if f.endswith("LICENSE"):
            continue
        fam = "FCC" if os.path.basename(f).startswith("trace_") else "Norway"
        times = []
        for line in open(f):
            p = line.split()
            if len(p) >= 2 and float(p[1]) > 0.01:
                times.append(8000.0 / float(p[1]))  # ms to move 1 MB at that rate
        path = os.path.join(tmp, "durations.txt")
        with open(path, "w") as out:
            out.write("\n".join(map(str, times)) + "\n")
        families.setdefault(fam + " 1 MB transfer time (ms)", []).append(rules_of(path))

for fam, rows in families.items():
    print(f"== {fam}: {len(rows)} series")
    for r in RULES:
        miss = [x[r][0] * 100 for x in rows]
        ratio = [x[r][1] / x["allen_k2"][1] for x in rows]
        print(f"  {r:16} miss rate median {st.median(miss):5.2f} %, mean {st.mean(miss):5.2f} %;"
              f" mean timeout / allen_k2's, median {st.median(ratio):.3f}")
    for a in ["allen_k1", "allen_k2"]:
        n = sum(1 for x in rows if x[a][0] <= x["windowed_k2_w20"][0] and x[a][1] <= x["windowed_k2_w20"][1])
        print(f"  {a} dominates windowed_k2_w20 on {n}/{len(rows)}")
    n = sum(1 for x in rows if x["nws"][0] < x["allen_k2"][0])
    print(f"  nws misses less often than allen_k2 on {n}/{len(rows)}")
