#!/usr/bin/env python3
"""`nowcast tcp`'s bandwidth probe on emulated links with real path delay (docs/testing.md):
namespaces A - M - B, a tbf of the link's rate on each of M's two egresses, and every packet
from B to A delayed in M by `nowcast delay-tun` (fobs_link.DelayedLink), so that TCP sees the
round trip as path delay, slow start and all. Each link: `nowcast tcp --direction both` with
no other flag (what a user gets), beside iperf3 (-t 8, both ways) in the same run; the
reference is the link's ceiling, its rate times 1448/1514 (TCP payload per Ethernet frame):
on a long path a short iperf3 run reads its own slow start.

  tcp_link.py bench [--quick] [--check LOW:HIGH] [--links RATE:RTT,...] [--trace DIR] [--cc NAME]

--quick runs one link (40 Mbit/s behind 150 ms, where the probe read 2.3 Mbit/s until
2026-12-06) without iperf3; --check fails (exit 1) when a median of nowcast's readings is
below LOW or above HIGH times the ceiling. --trace DIR keeps, per link, nowcast's records
(RATE-RTT.ndjson) and the TCP_INFO of the probes' connections as each sender saw it, sampled
every 50 ms (`ss -tin`: RATE-RTT-up.ss from the client, RATE-RTT-down.ss from the server;
each sample a line `--- UNIX-TIME` then ss's output): where a reading came out low, the
sender's window, losses and retransmissions say why (native-probes/BENCHMARKS.md, stop 47).
--cc NAME sets both ends' congestion control (the namespaces' net.ipv4.tcp_congestion_control:
cubic, reno, bbr; the machine's default otherwise), for nowcast and iperf3 alike; it must be
in the machine's net.ipv4.tcp_allowed_congestion_control.
Needs root, iproute2, iperf3.
"""
import json, os, statistics, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fobs_link as F  # noqa: E402  (the link and the binary's path)

# Mbit/s, added round trip ms: long paths, slow ones, and one without delay.
LINKS = [(100, 50), (40, 150), (20, 50), (5, 300), (100, 0), (300, 20)]


def queue_ms(rate):
    """A tbf queue of 20 ms, and at least 64 kB."""
    return max(20, 64 * 8 / rate)


class Tracer:
    """Samples `ss -tin` for the probes' connections (port 8060) in the client's and the
    server's namespaces until stopped."""

    def __init__(self, link, prefix):
        self.done = threading.Event()
        self.files = [(link.a, "dport", open(prefix + "-up.ss", "w")),
                      (link.b, "sport", open(prefix + "-down.ss", "w"))]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.05):
            for ns, side, f in self.files:
                o = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tin", side, "= :8060"],
                                   capture_output=True, text=True).stdout
                f.write(f"--- {time.time():.3f}\n{o}")

    def stop(self):
        self.done.set()
        self.thread.join()
        for _, _, f in self.files:
            f.close()


def one(rate, rtt, count, peer, trace=None, cc=None):
    link = F.DelayedLink("t", rate, rtt, queue_ms=queue_ms(rate))
    tracer = None
    try:
        for ns in (link.a, link.b) if cc else ():
            r = F.sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}",
                     check=False)
            if r.returncode != 0:
                sys.exit(f"--cc {cc}: a namespace may use only the machine's allowed congestion controls "
                         f"(net.ipv4.tcp_allowed_congestion_control): {r.stderr.strip()}")
        m = ["ip", "netns", "exec", link.m]
        burst = max(rate * 1000 // 8 // 100, 32)
        F.sh(*m, "tc", "qdisc", "add", "dev", link.d("ma"), "root", "tbf", "rate", f"{rate}mbit",
             "burst", f"{burst}kb", "latency", f"{queue_ms(rate)}ms")
        link.keep(link.run(link.b, [F.BIN, "serve", "--bind", link.b_ip, "--port", "8060"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if peer:
            link.keep(link.run(link.b, ["iperf3", "-s", "-B", link.b_ip], stdout=subprocess.DEVNULL))
        time.sleep(0.5)
        prefix = os.path.join(trace, f"{rate}-{rtt}") if trace else None
        tracer = Tracer(link, prefix) if trace else None
        out = subprocess.run(["ip", "netns", "exec", link.a, F.BIN, "tcp", link.b_ip, "--direction", "both",
                              "--count", str(count), "--json"], capture_output=True, text=True, timeout=900)
        if tracer:
            tracer.stop()
            tracer = None
            with open(prefix + ".ndjson", "w") as f:
                f.write(out.stdout)
        got = {"up": [], "down": []}
        for line in out.stdout.splitlines():
            r = json.loads(line)
            if r["metric"] in ("bandwidth_up", "bandwidth_down") and r["status"] == "ok":
                got[r["metric"][len("bandwidth_"):]].append(r["value"])
        if out.returncode != 0:
            print(out.stderr.strip()[-2000:])
        theirs = {}
        for way, flags in (("up", []), ("down", ["-R"])):
            if peer:
                o = subprocess.run(["ip", "netns", "exec", link.a, "iperf3", "-c", link.b_ip, "-t", "8", "-J"] + flags,
                                   capture_output=True, text=True, timeout=60)
                theirs[way] = json.loads(o.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
        return got, theirs
    finally:
        if tracer:
            tracer.stop()
        link.close()


def bench(quick, check, links, trace=None, cc=None):
    failed = []
    print(f"{'link':>22} {'way':>4} {'nowcast (median; each)':>44} {'ceiling':>8} {'ratio':>6} {'iperf3':>7}")
    for rate, rtt in links:
        ceiling = rate * 1448 / 1514
        got, theirs = one(rate, rtt, 3 if quick else 8, not quick, trace, cc)
        for way in ("up", "down"):
            v = got[way]
            med = statistics.median(v) if v else float("nan")
            ratio = med / ceiling
            each = " ".join(f"{x:.1f}" for x in v)
            peer = f"{theirs[way]:7.1f}" if way in theirs else "      -"
            name = f"{rate} Mbit/s +{rtt} ms"
            print(f"{name:>22} {way:>4} {med:8.2f} ({each})"[:78].ljust(78) + f" {ceiling:8.2f} {ratio:6.3f} {peer}")
            if check and not (check[0] <= ratio <= check[1]):
                failed.append(f"{name} {way}: {med:.2f} Mbit/s is {ratio:.3f} of the ceiling {ceiling:.2f}")
    if failed:
        print("outside " + ":".join(map(str, check)) + " of the ceiling:\n  " + "\n  ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    F.unwind_on_term()
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces)")
        sys.exit(0)
    args = sys.argv[1:]
    if not args or args[0] != "bench":
        sys.exit(__doc__)
    check = tuple(map(float, args[args.index("--check") + 1].split(":"))) if "--check" in args else None
    links = LINKS
    if "--links" in args:
        links = [tuple(int(v) for v in x.split(":")) for x in args[args.index("--links") + 1].split(",")]
    elif "--quick" in args:
        links = [(40, 150)]
    trace = args[args.index("--trace") + 1] if "--trace" in args else None
    if trace:
        os.makedirs(trace, exist_ok=True)
    cc = args[args.index("--cc") + 1] if "--cc" in args else None
    bench("--quick" in args, check, links, trace, cc)
