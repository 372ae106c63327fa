#!/usr/bin/env bash
# Benchmarks of the nowcast probes and server on loopback, each against its peer measured in
# the same run (docs/testing.md): medians of several runs with their spread (min–max) and
# the ratio to the peer. For throughput, servers run on core 0 and clients on core 1
# (taskset), so "one core" is what a server gets. For the probe overhead, both ends of both
# tools share core 1: a wake-up across cores (and out of an idle state) costs tens of µs
# that vary from run to run and would hide what the tools themselves add. BENCH_QUICK=1 shortens the runs. Needs sockperf, iperf3,
# hyperfine and jq (scripts/setup.sh installs them); a missing one skips its section.
set -euo pipefail
cd "$(dirname "$0")/../.."

quick=${BENCH_QUICK:-}
runs=${quick:+3}
runs=${runs:-5}
cargo build --quiet --release -p native-probes
bin=$PWD/target/release/nowcast
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

have() { command -v "$1" >/dev/null || { echo "skipped: $1 is not installed"; return 1; }; }
# "median (min–max)" of the numbers on stdin, one per line.
stats() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit } m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.4g (%.4g–%.4g)\n", m, v[1], v[NR] }'; }
med() { stats | cut -d' ' -f1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# CPU seconds (user + system) a process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }

# Starts `nowcast serve` on core CORE with free ports; sets srv_pid, srv_tcp, srv_udp.
start_serve() {
  local core=$1 out
  shift
  # A file of its own: the shell may open it after this function has begun reading.
  out=$(mktemp -p "$tmp")
  # A measurement lab's limits: 4 GiB transfers back to back and 20,000 probes a second are
  # far above what the defaults give one client of a public server (README: "nowcast serve
  # on a public address").
  taskset -c "$core" "$bin" serve --bind 127.0.0.1 --port 0 --max-payload 8G \
    --burst-bytes 64G --bytes-per-minute 1024G --udp-packets-per-second 1000000 \
    --udp-bytes-per-second 1G --udp-total-packets-per-second 1000000 \
    --udp-total-bytes-per-second 1G "$@" >"$out" &
  srv_pid=$!
  pids+=("$srv_pid")
  for _ in $(seq 100); do
    grep -q listening "$out" && break
    sleep 0.05
  done
  srv_tcp=$(awk '/listening/ { for (i = 1; i < NF; i++) if ($i == "tcp") print $(i + 1) }' "$out")
  srv_udp=$(awk '/listening/ { for (i = 1; i < NF; i++) if ($i == "udp") print $(i + 1) }' "$out")
  [ -n "$srv_tcp" ] && [ -n "$srv_udp" ] || { echo "nowcast serve did not start" >&2; exit 1; }
}
# Starts a peer server on core CORE and waits until it listens on tcp/udp PORT.
start_peer() {
  local core=$1 port=$2
  shift 2
  taskset -c "$core" "$@" >/dev/null 2>&1 &
  pids+=("$!")
  for _ in $(seq 100); do
    ss -Htuln "sport = :$port" | grep -q . && break
    sleep 0.05
  done
}
# Median of a metric's values in NDJSON records on stdin.
metric() { jq -r --arg m "$1" 'select(.metric == $m and .status == "ok") | .value'; }

have jq && have taskset || exit 0
printf 'machine: %s, %s cores; load %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"

echo "-- probe overhead: 2-byte TCP RTT with Nagle off on loopback (goal: within 10 % of sockperf)"
if have sockperf; then
  start_serve 1
  sp_port=$(free_port)
  start_peer 1 "$sp_port" sockperf server --tcp -i 127.0.0.1 -p "$sp_port"
  sessions=${quick:+100}
  sessions=${sessions:-400}
  for _ in $(seq "$runs"); do
    # nowcast: one RTT per session, sessions back to back. sockperf: back-to-back
    # ping-pongs on one connection for two seconds.
    taskset -c 1 "$bin" tcp "$srv_tcp" --size 1B --count "$sessions" --period 0 --json >"$tmp/tcp.json"
    metric rtt <"$tmp/tcp.json" | awk '{ print $1 * 1000 }' | med >>"$tmp/nc_rtt"
    metric rtt_nagle <"$tmp/tcp.json" | awk '{ print $1 * 1000 }' | med >>"$tmp/nc_rtt2"
    taskset -c 1 sockperf ping-pong --tcp --full-rtt -i 127.0.0.1 -p "$sp_port" -t 2 2>&1 |
      sed -n 's/.*percentile 50.000 = *//p' >>"$tmp/sp_rtt"
  done
  nc=$(med <"$tmp/nc_rtt")
  sp=$(med <"$tmp/sp_rtt")
  echo "nowcast tcp rtt µs, median of run medians: $(stats <"$tmp/nc_rtt"), $runs runs of $sessions sessions"
  echo "sockperf ping-pong --tcp --full-rtt µs:     $(stats <"$tmp/sp_rtt"), $runs runs of 2 s"
  echo "ratio nowcast / sockperf: $(ratio "$nc" "$sp")"
  # Each session makes an un-timed warm-up echo after the hello (a connection's first data
  # exchange is slower whichever probe makes it), then rtt; rtt_nagle, the same 2-byte
  # echo on an idle connection (so Nagle holds nothing back), comes after it.
  echo "nowcast tcp rtt_nagle µs (the session's next echo): $(stats <"$tmp/nc_rtt2"), ratio to sockperf $(ratio "$(med <"$tmp/nc_rtt2")" "$sp")"
  kill "$srv_pid"
  wait "$srv_pid" 2>/dev/null || true
fi

echo
echo "-- UDP probe overhead: 64-byte UDP RTT on loopback, one probe per ms (peers: sockperf, irtt)"
if have sockperf && have irtt; then
  start_serve 1
  sp_port=$(free_port)
  start_peer 1 "$sp_port" sockperf server -i 127.0.0.1 -p "$sp_port"
  irtt_port=$(free_port)
  start_peer 1 "$irtt_port" env GOMAXPROCS=1 irtt server -i 0 -b "127.0.0.1:$irtt_port"
  secs=${quick:+2}
  secs=${secs:-4}
  for _ in $(seq "$runs"); do
    taskset -c 1 "$bin" udp "$srv_udp" --probes $((secs * 1000)) --interval 1 --json | metric rtt |
      awk '{ print $1 * 1000 }' >>"$tmp/nu_rtt"
    taskset -c 1 sockperf ping-pong --full-rtt -i 127.0.0.1 -p "$sp_port" -m 64 --mps 1000 -t "$secs" 2>&1 |
      sed -n 's/.*percentile 50.000 = *//p' >>"$tmp/su_rtt"
    taskset -c 1 env GOMAXPROCS=1 irtt client -Q -o - -d "${secs}s" -i 1ms -l 64 "127.0.0.1:$irtt_port" |
      jq -r '.stats.rtt.median / 1000' >>"$tmp/iu_rtt"
  done
  echo "nowcast udp rtt µs (burst median):  $(stats <"$tmp/nu_rtt"), $runs runs of $secs s"
  echo "sockperf ping-pong (UDP) µs:        $(stats <"$tmp/su_rtt")"
  echo "irtt client µs:                     $(stats <"$tmp/iu_rtt")"
  echo "ratio nowcast / sockperf: $(ratio "$(med <"$tmp/nu_rtt")" "$(med <"$tmp/su_rtt")"), nowcast / irtt: $(ratio "$(med <"$tmp/nu_rtt")" "$(med <"$tmp/iu_rtt")")"
  kill "$srv_pid"
  wait "$srv_pid" 2>/dev/null || true
fi

echo
echo "-- nowcast serve on one core: 20,000 UDP RTT probes/s (peer: iperf3 -u at the same packet rate)"
if have iperf3; then
  start_serve 0
  ip_port=$(free_port)
  start_peer 0 "$ip_port" iperf3 -s -B 127.0.0.1 -p "$ip_port"
  secs=${quick:+2}
  secs=${secs:-5}
  probes=$((20000 * secs))
  for _ in $(seq "$runs"); do
    c0=$(cpu_s "$srv_pid")
    t0=$(date +%s%N)
    taskset -c 1 "$bin" udp "$srv_udp" --probes "$probes" --interval 0.05 --json >"$tmp/udp.json"
    t1=$(date +%s%N)
    c1=$(cpu_s "$srv_pid")
    # Achieved rate: answered probes over the command's wall time (which also holds its
    # start-up and its wait for the last replies, so it is a lower bound).
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')
    loss=$(metric loss <"$tmp/udp.json")
    echo "$loss" >>"$tmp/udp_loss"
    awk -v n="$probes" -v l="$loss" -v w="$wall" 'BEGIN { print n * (1 - l) / w }' >>"$tmp/udp_rate"
    metric rtt <"$tmp/udp.json" | awk '{ print $1 * 1000 }' >>"$tmp/udp_rtt"
    awk -v a="$c0" -v b="$c1" -v w="$wall" 'BEGIN { print 100 * (b - a) / w }' >>"$tmp/udp_cpu"
    taskset -c 1 iperf3 -c 127.0.0.1 -p "$ip_port" -u -l 64 -b $((64 * 8 * 20000)) -t "$secs" -J >"$tmp/iperf.json"
    jq -r '.end.sum.packets / .end.sum.seconds' "$tmp/iperf.json" >>"$tmp/ip_rate"
    jq -r '.end.sum.lost_percent / 100' "$tmp/iperf.json" >>"$tmp/ip_loss"
  done
  echo "nowcast udp → serve: probes/s $(stats <"$tmp/udp_rate"), loss $(stats <"$tmp/udp_loss"), median rtt µs $(stats <"$tmp/udp_rtt"), server cpu % of one core $(stats <"$tmp/udp_cpu")"
  echo "iperf3 -u -l 64 (one way, peer):  packets/s $(stats <"$tmp/ip_rate"), loss $(stats <"$tmp/ip_loss")"
  echo "ratio of rates nowcast / iperf3: $(ratio "$(med <"$tmp/udp_rate")" "$(med <"$tmp/ip_rate")")"

  echo
  echo "-- nowcast serve on one core: TCP sink (goal: 10 Gbit/s; peer: iperf3 with its server on the same core)"
  size=${quick:+1G}
  size=${size:-4G}
  bytes=$(("${size%G}" << 30))
  for _ in $(seq "$runs"); do
    taskset -c 1 "$bin" tcp "$srv_tcp" --size "$size" --json | metric bandwidth_up | awk '{ print $1 / 1000 }' >>"$tmp/tcp_bw"
    taskset -c 1 iperf3 -c 127.0.0.1 -p "$ip_port" -n "$bytes" -J >"$tmp/iperf.json"
    jq -r '.end.sum_received.bits_per_second / 1e9' "$tmp/iperf.json" >>"$tmp/ip_bw"
  done
  echo "nowcast tcp --size $size → serve: Gbit/s $(stats <"$tmp/tcp_bw"), $runs runs"
  echo "iperf3 -n $size:                   Gbit/s $(stats <"$tmp/ip_bw"), $runs runs"
  echo "ratio nowcast / iperf3: $(ratio "$(med <"$tmp/tcp_bw")" "$(med <"$tmp/ip_bw")")"

  echo
  echo "-- nowcast serve on one core: TCP source (--direction down; peer: iperf3 -R with its server on the same core)"
  for _ in $(seq "$runs"); do
    taskset -c 1 "$bin" tcp "$srv_tcp" --direction down --size "$size" --json | metric bandwidth_down | awk '{ print $1 / 1000 }' >>"$tmp/tcp_down"
    taskset -c 1 iperf3 -c 127.0.0.1 -p "$ip_port" -R -n "$bytes" -J >"$tmp/iperf.json"
    jq -r '.end.sum_received.bits_per_second / 1e9' "$tmp/iperf.json" >>"$tmp/ip_down"
  done
  echo "nowcast tcp --direction down --size $size ← serve: Gbit/s $(stats <"$tmp/tcp_down"), $runs runs"
  echo "iperf3 -R -n $size:                             Gbit/s $(stats <"$tmp/ip_down"), $runs runs"
  echo "ratio nowcast / iperf3: $(ratio "$(med <"$tmp/tcp_down")" "$(med <"$tmp/ip_down")")"
fi

echo
echo "-- binary size and start-up (goal: start-up ≤ 20 ms)"
strip -o "$tmp/nowcast.stripped" "$bin"
echo "target/release/nowcast: $(stat -c %s "$bin") bytes, $(stat -c %s "$tmp/nowcast.stripped") stripped"
if have hyperfine; then
  hyperfine -N --warmup 10 --runs $((runs * 20)) --export-json "$tmp/start.json" \
    "$bin --version" "iperf3 --version" >/dev/null 2>&1
  jq -r '.results[] | "\(.command): median \(.median * 1000 | . * 1000 | round / 1000) ms (\(.min * 1000 | . * 1000 | round / 1000)–\(.max * 1000 | . * 1000 | round / 1000)), \(.times | length) runs"' "$tmp/start.json"
  nc=$(jq '.results[0].median' "$tmp/start.json")
  ip=$(jq '.results[1].median' "$tmp/start.json")
  echo "ratio nowcast / iperf3: $(ratio "$nc" "$ip")"
fi
