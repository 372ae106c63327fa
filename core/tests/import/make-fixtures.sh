#!/usr/bin/env bash
# Regenerates the tool outputs in this folder by running the tools (as root: a path of three
# network namespaces, client — router — server, joined by veth pairs; the router drops one in
# ten forwarded ICMP and UDP packets at random (nftables `numgen`; this kernel has no netem),
# so that the files hold real losses and two hops):
#
#   client 10.231.81.1 ── 10.231.81.2 router 10.231.82.1 ── 10.231.82.2 server
#
# iperf3 3.12, ping (iputils 20221126), mtr 0.95, irtt 0.9.0 and sockperf 3.7 write the files;
# nothing is edited by hand. The tests (core/src/import/tests.rs) check what they read against
# figures taken from the same files by other means (jq, the tools' own summaries).
#
# bash core/tests/import/make-fixtures.sh   (from the repository root, as root)
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "make-fixtures: run as root (network namespaces)" >&2; exit 1; }
for t in ip nft jq iperf3 ping mtr irtt sockperf; do
  command -v "$t" >/dev/null || { echo "make-fixtures: $t is not installed" >&2; exit 1; }
done

tag=nci$$
c=$tag-c r=$tag-r s=$tag-s
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for n in "$c" "$r" "$s"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
for n in "$c" "$r" "$s"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add "$tag-a" netns "$c" type veth peer name "$tag-b" netns "$r"
ip link add "$tag-d" netns "$r" type veth peer name "$tag-e" netns "$s"
ip -n "$c" addr add 10.231.81.1/24 dev "$tag-a"
ip -n "$r" addr add 10.231.81.2/24 dev "$tag-b"
ip -n "$r" addr add 10.231.82.1/24 dev "$tag-d"
ip -n "$s" addr add 10.231.82.2/24 dev "$tag-e"
for dev in "$c:$tag-a" "$r:$tag-b" "$r:$tag-d" "$s:$tag-e"; do
  ip -n "${dev%%:*}" link set "${dev#*:}" up
done
ip -n "$c" route add default via 10.231.81.2
ip -n "$s" route add default via 10.231.82.1
ip netns exec "$r" sysctl -q -w net.ipv4.ip_forward=1
# The router answers ICMP (mtr's middle hop) without the kernel's rate limit.
ip netns exec "$r" sysctl -q -w net.ipv4.icmp_ratelimit=0
ip netns exec "$s" sysctl -q -w net.ipv4.icmp_ratelimit=0
ip netns exec "$r" nft add table inet loss
ip netns exec "$r" nft add chain inet loss forward_loss '{ type filter hook forward priority 0 ; }'
ip netns exec "$r" nft add rule inet loss forward_loss meta l4proto '{ icmp, udp }' numgen random mod 10 0 drop

in_c() { ip netns exec "$c" "$@"; }
in_s() { ip netns exec "$s" "$@"; }
server=10.231.82.2

# iperf3: TCP, TCP both ways at once, UDP each way (the server with -J so that the client
# gets its per-interval report with --get-server-output), and a refused connection.
iperf_server() { in_s iperf3 -s -1 "$@" >/dev/null 2>&1 & pids+=($!); sleep 0.5; }
iperf_server
in_c iperf3 -c $server -t 2 -i 0.5 -J >iperf3-tcp.json
iperf_server
in_c iperf3 -c $server -t 2 -i 0.5 --bidir -J >iperf3-tcp-bidir.json
iperf_server -J
in_c iperf3 -c $server -u -b 5M -t 2 -i 0.5 --get-server-output -J >iperf3-udp.json
iperf_server
in_c iperf3 -c $server -u -b 5M -t 2 -i 0.5 -R -J >iperf3-udp-reverse.json
in_c iperf3 -c $server -p 5999 -t 1 -J >iperf3-refused.json || true

# ping: without and with -D timestamps (losses on the way show as missing icmp_seq).
in_c ping -c 12 -i 0.2 $server >ping.txt || true
in_c ping -D -c 12 -i 0.2 $server >ping-timestamps.txt || true

# mtr: two hops, and a second report compacted to one line per report (mtr --json run twice).
in_c mtr --json -n -c 10 -i 0.2 $server >mtr.json
{ in_c mtr --json -n -c 5 -i 0.2 $server | jq -c .; in_c mtr --json -n -c 5 -i 0.2 $server | jq -c .; } >mtr-lines.ndjson

# irtt: 40 round trips, about one in five lost (a tenth each way).
in_s irtt server -b $server:2112 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
in_c irtt client -q -i 50ms -d 2s -o irtt.json $server:2112 >/dev/null

# sockperf: ping-pong over TCP (a lost UDP message stalls its ping-pong), with the full
# round trip and with its default half.
in_s sockperf server --tcp -i $server -p 11111 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
in_c sockperf ping-pong --tcp -i $server -p 11111 -t 1 --mps 20 --full-rtt --full-log sockperf-rtt.csv >/dev/null 2>&1
in_c sockperf ping-pong --tcp -i $server -p 11111 -t 1 --mps 20 --full-log sockperf-latency.csv >/dev/null 2>&1
ls -l
