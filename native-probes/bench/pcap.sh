#!/usr/bin/env bash
# `nowcast pcap` against tshark and tcptrace on the same 1 GB capture, made here: iperf3
# (4 streams, offloads off) between two network namespaces, captured with tcpdump at a snap
# length of 96 bytes (headers only, as a passive monitor keeps them). Then, on one core
# (taskset), several runs of each analyser over the file from the page cache: wall time,
# packets/s, MB/s and peak memory, medians with their spread, and the ratios.
# Then the live capture: `nowcast pcap --live` on the sender's veth while iperf3 sends at
# 1 Gbit/s; libpcap's drop counter and the analyser's CPU.
#
# Needs root, iproute2, ethtool, tcpdump, iperf3, tshark, tcptrace, taskset. Environment:
# PCAP_BENCH_BYTES (default 1 GB), PCAP_BENCH_RUNS (default 5); PCAP_BENCH_PEER_RUNS for tshark and tcptrace (default 1:
# tshark takes minutes on 1 GB), BENCH_QUICK=1 for 200 MB and 3 runs.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" != 0 ]; then echo "pcap bench: skipped (needs root for namespaces)"; exit 0; fi
for t in ip ethtool tcpdump iperf3 tshark tcptrace taskset; do
  command -v "$t" >/dev/null || { echo "pcap bench: skipped ($t is not installed)"; exit 0; }
done

bytes=${PCAP_BENCH_BYTES:-1000000000}
runs=${PCAP_BENCH_RUNS:-5}
if [ -n "${BENCH_QUICK:-}" ]; then bytes=${PCAP_BENCH_BYTES:-200000000}; runs=${PCAP_BENCH_RUNS:-3}; fi
peer_runs=${PCAP_BENCH_PEER_RUNS:-1}

cargo build --quiet --release -p native-probes
bin=$PWD/target/release/nowcast
tmp=$(mktemp -d /tmp/nwp-bench.XXXXXX)
id=$$
A=nwba$id; B=nwbb$id; VA=ba$id; VB=bb$id
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$A"; ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"; ip link set "$VB" netns "$B"
ip -n "$A" addr add 10.231.88.1/24 dev "$VA"; ip -n "$B" addr add 10.231.88.2/24 dev "$VB"
for x in "$A $VA" "$B $VB"; do
  set -- $x
  ip -n "$1" link set "$2" up; ip -n "$1" link set lo up
  ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null
done
ip netns exec "$B" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
sleep 0.5

# The capture: until the file holds the bytes asked for (at most 180 s). PCAP_BENCH_FILE
# names a capture to use (or to make and keep) instead.
file=${PCAP_BENCH_FILE:-$tmp/big.pcap}
if [ ! -s "$file" ]; then
ip netns exec "$A" tcpdump -i "$VA" -s 96 -B 262144 -w "$file" tcp >/dev/null 2>&1 & dump=$!; pids+=($dump)
sleep 0.7
ip netns exec "$A" iperf3 -c 10.231.88.2 -p 5201 -P 4 -t 180 >/dev/null 2>&1 & ipf=$!; pids+=($ipf)
for _ in $(seq 1800); do
  [ "$(stat -c %s "$file" 2>/dev/null || echo 0)" -ge "$bytes" ] && break
  sleep 0.1
done
kill "$ipf" 2>/dev/null || true; wait "$ipf" 2>/dev/null || true
sleep 0.3; kill -INT "$dump"; wait "$dump" 2>/dev/null || true
fi
size=$(stat -c %s "$file")
packets=$(capinfos -Mc "$file" 2>/dev/null | awk -F: '/Number of packets/ {gsub(/ /,"",$2); print $2}')
echo "capture: $size bytes, $packets packets (snap length 96, 4 iperf3 streams)"
cat "$file" >/dev/null # into the page cache

median() { sort -n | awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]; printf "%s (%s–%s)", m, v[1], v[NR] }'; }
measure() { # name runs command…
  local name=$1 n=$2; shift 2
  : >"$tmp/$name"
  for _ in $(seq "$n"); do
    /usr/bin/time -f '%e %M' -o "$tmp/t" taskset -c 1 "$@" >/dev/null 2>&1
    cat "$tmp/t" >>"$tmp/$name"
  done
  local wall mem
  wall=$(cut -d' ' -f1 "$tmp/$name" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  mem=$(cut -d' ' -f2 "$tmp/$name" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  printf '%-34s wall s %-22s %12.0f packets/s %8.1f MB/s  peak %6.1f MB  (%s runs)\n' \
    "$name" "$(cut -d' ' -f1 "$tmp/$name" | median)" \
    "$(echo "$packets / $wall" | bc -l)" "$(echo "$size / $wall / 1000000" | bc -l)" \
    "$(echo "$mem / 1024" | bc -l)" "$n"
  echo "$wall" >"$tmp/$name.wall"
}

echo "one core (taskset -c 1), file in the page cache; medians (min–max)"
measure "nowcast pcap (all analyses)" "$runs" "$bin" pcap "$file"
measure "nowcast pcap --json" "$runs" "$bin" pcap --json "$file"
measure "tshark -q -z conv,tcp" "$peer_runs" tshark -n -q -z conv,tcp -r "$file"
tcptrace_file=$tmp/big_us.pcap
editcap -F pcap "$file" "$tcptrace_file" 2>/dev/null || cp "$file" "$tcptrace_file"
measure "tcptrace -l -r -n" "$peer_runs" tcptrace -l -r -n "$tcptrace_file"
rm -f "$tcptrace_file"
ours=$(cat "$tmp/nowcast pcap (all analyses).wall")
printf 'ratio: nowcast pcap is %.1f× tshark conv,tcp and %.1f× tcptrace (packets/s; goal ≥ 20× tshark, ≥ 2 M packets/s, ≤ 100 MB)\n' \
  "$(echo "$(cat "$tmp/tshark -q -z conv,tcp.wall") / $ours" | bc -l)" \
  "$(echo "$(cat "$tmp/tcptrace -l -r -n.wall") / $ours" | bc -l)"
[ -z "${PCAP_BENCH_FILE:-}" ] && rm -f "$file"

# Live: nowcast pcap --live on the sender's veth at 1 Gbit/s of iperf3 for 10 s.
secs=${PCAP_BENCH_LIVE_SECS:-10}
[ -n "${BENCH_QUICK:-}" ] && secs=5
ip netns exec "$A" "$bin" pcap --live "$VA" --duration "$secs" >"$tmp/live" 2>&1 & live=$!; pids+=($live)
sleep 1
ip netns exec "$A" iperf3 -c 10.231.88.2 -p 5201 -b 1G -t $((secs - 2)) >"$tmp/iperf" 2>&1 || true
wait "$live" || true
echo "live capture at $(awk '/sender/ {print $7, $8}' "$tmp/iperf") of iperf3 on veth for $secs s:"
grep -E "libpcap received" "$tmp/live" || tail -3 "$tmp/live"
