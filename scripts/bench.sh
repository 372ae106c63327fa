#!/usr/bin/env bash
# `npm run bench`: every component's benchmark. Each prints medians over several runs with
# their spread, and its ratio to the peer measured in the same run on the same machine.
# Benchmarks are not tests: they never fail on a number. BENCH_QUICK=1 shortens the runs.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
quick=${BENCH_QUICK:-}

bash scripts/setup.sh >/dev/null
step "machine"
printf 'cpu: %s, %s cores; %s; node %s; %s\n' \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$(nproc)" \
  "$(free -g | awk '/Mem:/{print $2 " GiB"}')" "$(node --version)" "$(rustc --version)"
uptime

step "forecaster bank, native (1 M points; goal: faithful ≤ 0.5 µs/update; original C ≈ 2.2 µs)"
cargo build --quiet --release -p nowcast-core --example bench_bank
target/release/examples/bench_bank

step "forecaster bank under Node: WASM and the TypeScript faithful bank (goal: WASM faithful ≤ 1 µs)"
bash scripts/build-wasm.sh
npx tsx web/bench/bank-bench.ts

step "nowcast forecast on a 1 M-point file (goal: ≤ 1 s wall, ≤ 50 MB peak memory)"
cargo build --quiet --release -p native-probes
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
target/release/examples/bench_bank --write "$tmp/series.txt"
runs=${quick:+3}
runs=${runs:-7}
# Both modes (the default) and each alone, interleaved so that the VM's drift touches all.
for _ in $(seq "$runs"); do
  /usr/bin/time -f '%e %M' -o "$tmp/t" target/release/nowcast forecast "$tmp/series.txt" >/dev/null
  cat "$tmp/t" >>"$tmp/times"
  for mode in improved faithful; do
    /usr/bin/time -f '%e %M' -o "$tmp/t" target/release/nowcast forecast --mode "$mode" "$tmp/series.txt" >/dev/null
    cat "$tmp/t" >>"$tmp/times-$mode"
  done
done
# Peer in the same run: reading and parsing the same file with the same reader and nothing
# else (`--format plain` through `wc` would not parse numbers; awk does).
for _ in $(seq "$runs"); do
  /usr/bin/time -f '%e %M' -o "$tmp/t" awk '{ s += $1 } END { print s }' "$tmp/series.txt" >/dev/null
  cat "$tmp/t" >>"$tmp/awk"
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] " (" v[1] "–" v[NR] ")" }'; }
echo "nowcast forecast: wall s median $(cut -d' ' -f1 "$tmp/times" | median), peak KB median $(cut -d' ' -f2 "$tmp/times" | median), $runs runs"
for mode in improved faithful; do
  echo "nowcast forecast --mode $mode: wall s median $(cut -d' ' -f1 "$tmp/times-$mode" | median), peak KB median $(cut -d' ' -f2 "$tmp/times-$mode" | median)"
done
echo "awk sum of the same file (peer, parse only): wall s median $(cut -d' ' -f1 "$tmp/awk" | median)"

step "nowcast probes and server against sockperf and iperf3 on loopback; binary size and start-up"
bash native-probes/bench/probes.sh

step "nowcast serve under hostile clients (corpus, 1,000 connections from one address, the byte budget over every request type, UDP floods, kernel memory of stalled downloads), then the long fuzz run of every decoder"
cargo bench --quiet -p native-probes --bench hostile
fuzz_cases=${quick:+20000}
NOWCAST_FUZZ_CASES=${fuzz_cases:-200000} cargo test --quiet --release -p native-probes --test fuzz
NOWCAST_FUZZ_CASES=${fuzz_cases:-200000} cargo test --quiet --release -p nowcast-core --test import_fuzz
NOWCAST_FUZZ_CASES=${fuzz_cases:-200000} cargo test --quiet --release -p native-probes --test fobs_fuzz

step "nowcast pcap on a 1 GB capture against tshark and tcptrace, one core (goals: ≥ 2 M packets/s, ≥ 20× tshark, ≤ 100 MB); live capture at 1 Gbit/s"
bash native-probes/bench/pcap.sh

step "Wren's lower bounds on emulated links, long phases (goals: phase medians within 10 % of the available bandwidth, never 5 % above; changes seen within 2 s)"
PCAP_WREN_SECS=${PCAP_WREN_SECS:-$([ -n "$quick" ] && echo 6 || echo 20)} \
  cargo test --quiet --release -p native-probes --test pcap_wren -- --nocapture

step "FOBS loss classifier on the held-out signatures (goals: ≥ 99 % correct for each cause, ≤ 0.2 % wrong; inconclusive reported) and its cost"
target/release/nowcast classify native-probes/models/signatures/eval-*.sig
for f in native-probes/models/signatures/eval-*.sig; do
  echo "$(basename "$f"):"
  target/release/nowcast classify "$f" | sed -n 2p
done

step "FOBS loss classifier on fresh signatures from settings it was not trained on (fobs_link.py unseen: other drop rates, stall shapes and buffers)"
unseen_dir=$(mktemp -d)
FOBS_SIGNATURE_SECONDS=$([ -n "$quick" ] && echo 5 || echo 20) python3 native-probes/bench/fobs_link.py unseen "$unseen_dir"
if compgen -G "$unseen_dir/*.sig" >/dev/null; then target/release/nowcast classify "$unseen_dir"/*.sig; fi
rm -rf "$unseen_dir"

step "FOBS against iperf3 TCP (cubic, bbr) and QUIC (ngtcp2) on an emulated 1 Gbit/s, 30 ms link: clean, receiver CPU contention, 0.5 % loss shared with iperf3 (goals: ≥ 90 % of the link; ≥ 10× without the classifier and ahead of TCP and QUIC; Jain's index ≥ 0.9)"
python3 native-probes/bench/fobs_link.py bench ${quick:+--quick}

step "nowcast tcp's bandwidth probe on emulated links with path delay (5–300 Mbit/s, 0–300 ms), beside iperf3, against each link's ceiling"
python3 native-probes/bench/tcp_link.py bench ${quick:+--quick}

step "nowcast proxy on emulated links, long halves, and where the replicas do not differ (goals: ≥ 95 % to the better replica within 2 s of the change, total within 10 % of the oracle, mean and p95 ≥ 20 % better than round-robin, least-connections, P2C peak-EWMA and nearest)"
PROXY_LINKS_SECS=${PROXY_LINKS_SECS:-$([ -n "$quick" ] && echo 8 || echo 30)} PROXY_LINKS_EQUAL=1 \
  cargo test --quiet --release -p native-probes --test proxy_links -- --nocapture

step "nowcast proxy on emulated links with a mix of request sizes (9 of 10 uploads 16 KiB, 1 of 10 2 MiB, at the same 16.8 Mbit/s): every rule's mean and p95, overall and per size, where the replicas differ and where they do not (a second comparison, printed; no request may fail)"
PROXY_LINKS_SIZES="16K:9,2M:1" PROXY_LINKS_SECS=${PROXY_LINKS_SECS:-$([ -n "$quick" ] && echo 8 || echo 30)} PROXY_LINKS_EQUAL=1 \
  cargo test --quiet --release -p native-probes --test proxy_links -- --nocapture

step "nowcast proxy's Wren on its own uploads, long phase (goal: median lower bound within 15 % of the available bandwidth; TCP_INFO's rates of the same run printed beside it)"
PROXY_WREN_SECS=${PROXY_WREN_SECS:-$([ -n "$quick" ] && echo 8 || echo 30)} \
  cargo test --quiet --release -p native-probes --test proxy_wren -- --nocapture on_emulated_links

step "nowcast proxy's overhead on loopback next to nginx (goals: ≥ 80 % of nginx's throughput, ≤ 1 ms p99 added)"
cargo bench --quiet -p native-probes --bench proxy

step "nowcast bench timeouts: the reduction tree on loopback, 10 sets of 100 reductions per policy (goals: best dynamic p95 ≥ 20 % and variance ≥ 50 % below the best static, mean no worse, ≤ 5 % of sends retried)"
if [ -n "$quick" ]; then
  target/release/nowcast bench timeouts --sets 3 --reductions 30 --scale 0.005
else
  target/release/nowcast bench timeouts --sets 10 --reductions 100 --scale 0.01
fi

step "echo-node throughput against iperf3 on loopback"
if [ -n "$quick" ]; then
  BENCH_BYTES=${BENCH_BYTES:-268435456} npm -w echo-node run --silent bench
else
  npm -w echo-node run --silent bench
fi

step "echo-node under hostile clients (corpus, trickled frames, 1,000 connections from one address, one budget over every path, echo flood vs a control client), then the long fuzz run"
npm -w echo-node run --silent bench:hostile

step "the page in headless Chromium against echo-node on loopback (goals: first plot ≤ 1 s, add a point to 10,000 + redraw ≤ 4 ms, JS + WASM + CSS on first open ≤ 200 KB gzip, download ≥ 5 Gbit/s)"
npm -w web run --silent build
npx tsx e2e/bench/page-bench.ts

step "the page's accuracy on emulated links, the full rate sweep (goal: the download and the upload, both over fetch as the page runs them, each within ±5 % of iperf3, 10 Mbit/s to 1 Gbit/s; root only, says why when it skips)"
if [ -n "$quick" ]; then rates=20,300,1000; else rates=10,20,50,100,200,300,500,1000; fi
NOWCAST_E2E_RATES=${NOWCAST_E2E_RATES:-$rates} npx vitest run --project e2e emulated-links -t "Mbit" ||
  echo "bench: a rate was outside ±5 % of iperf3 (the figures are above)"
