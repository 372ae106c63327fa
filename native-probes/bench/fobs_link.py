#!/usr/bin/env python3
"""FOBS on emulated links (docs/testing.md): two network namespaces joined by veth, a tbf
bottleneck, and loss made the two ways the classifier must tell apart.

  fobs_link.py signatures OUTDIR   labelled signatures for training (train-*) and held-out
                                   evaluation (eval-*), from separate runs
  fobs_link.py bench [--quick]     FOBS against iperf3 (cubic, bbr) on the same link

Network loss: nft `numgen random` drops at the receiver's input, and a tbf queue overflowing
under competing iperf3 traffic. CPU loss: the receiver descheduled (SIGSTOP/SIGCONT bursts of
random length, busy processes pinned to its core) with a small SO_RCVBUF, so that runs of
packets are lost while it is not reading. Needs root, iproute2, nft, iperf3, taskset.
Namespaces are named nwf-<pid>-*, processes are killed by PID before they are deleted.
"""
import os, random, signal, subprocess, sys, time, json, shutil, tempfile

BIN = os.environ.get("NOWCAST", os.path.join(os.path.dirname(__file__), "../../target/release/nowcast"))
TOKEN = "0123456789abcdef0123456789abcdef"
A_IP, B_IP = "10.233.0.1", "10.233.0.2"


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{args}: {r.stderr}")
    return r


class DelayedLink:
    """A, a router M and B: A - veth - M - veth - B. M's egress towards B is a tbf of
    `rate_mbit` (the bottleneck of A's sending); every packet from B to A goes through two
    TUN devices in M with `nowcast delay-tun` between them (policy routing by input device),
    so the round trip gains `rtt_ms` and TCP sees it as path delay."""

    def __init__(self, tag, rate_mbit, rtt_ms, queue_ms=30):
        global A_IP, B_IP
        A_IP, B_IP = "10.233.1.1", "10.233.2.1"
        pid = os.getpid() % 100000
        self.a, self.m, self.b = (f"nwf-{os.getpid()}-{tag}{x}" for x in "amb")
        self.procs = []
        for ns in (self.a, self.m, self.b):
            sh("ip", "netns", "add", ns)
        d = lambda x: f"v{x}{pid}{tag}"[:15]
        sh("ip", "link", "add", d("a"), "type", "veth", "peer", "name", d("ma"))
        sh("ip", "link", "add", d("b"), "type", "veth", "peer", "name", d("mb"))
        sh("ip", "link", "set", d("a"), "netns", self.a)
        sh("ip", "link", "set", d("b"), "netns", self.b)
        sh("ip", "link", "set", d("ma"), "netns", self.m)
        sh("ip", "link", "set", d("mb"), "netns", self.m)
        sh("ip", "-n", self.a, "addr", "add", f"{A_IP}/24", "dev", d("a"))
        sh("ip", "-n", self.b, "addr", "add", f"{B_IP}/24", "dev", d("b"))
        sh("ip", "-n", self.m, "addr", "add", "10.233.1.254/24", "dev", d("ma"))
        sh("ip", "-n", self.m, "addr", "add", "10.233.2.254/24", "dev", d("mb"))
        for ns, dev in [(self.a, d("a")), (self.b, d("b")), (self.m, d("ma")), (self.m, d("mb"))]:
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.a, "route", "add", "default", "via", "10.233.1.254")
        sh("ip", "-n", self.b, "route", "add", "default", "via", "10.233.2.254")
        m = ["ip", "netns", "exec", self.m]
        sh(*m, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
        self.tun_in, self.tun_out = f"ti{pid}{tag}"[:15], f"to{pid}{tag}"[:15]
        for t in (self.tun_in, self.tun_out):
            sh(*m, "ip", "tuntap", "add", "dev", t, "mode", "tun")
            sh(*m, "ip", "link", "set", t, "up")
            sh(*m, "sysctl", "-qw", f"net.ipv4.conf.{t}.rp_filter=0")
        sh(*m, "ip", "rule", "add", "iif", d("mb"), "lookup", "100")
        sh(*m, "ip", "route", "add", "default", "dev", self.tun_in, "table", "100")
        burst = max(rate_mbit * 1000 // 8 // 100, 32)
        sh(*m, "tc", "qdisc", "add", "dev", d("mb"), "root", "tbf", "rate", f"{rate_mbit}mbit",
           "burst", f"{burst}kb", "latency", f"{queue_ms}ms")
        p = self.keep(self.run(self.m, [BIN, "delay-tun", "--from", self.tun_in, "--to", self.tun_out,
                                         "--one-way", str(rtt_ms)], stdout=subprocess.PIPE, text=True))
        p.stdout.readline()

    def run(self, ns, args, **kw):
        return subprocess.Popen(["ip", "netns", "exec", ns] + args, **kw)

    def keep(self, p):
        self.procs.append(p)
        return p

    def random_drop(self, per_100k):
        Link.random_drop(self, per_100k)

    def clear_drop(self):
        Link.clear_drop(self)

    def close(self):
        Link.close(self)
        sh("ip", "netns", "del", self.m, check=False)


class Link:
    def __init__(self, tag, rate_mbit, queue_ms=20):
        pid = os.getpid()
        self.a, self.b = f"nwf-{pid}-{tag}a", f"nwf-{pid}-{tag}b"
        self.da, self.db = f"vfa{pid % 100000}{tag}"[:15], f"vfb{pid % 100000}{tag}"[:15]
        self.procs = []
        sh("ip", "netns", "add", self.a)
        sh("ip", "netns", "add", self.b)
        sh("ip", "link", "add", self.da, "type", "veth", "peer", "name", self.db)
        sh("ip", "link", "set", self.da, "netns", self.a)
        sh("ip", "link", "set", self.db, "netns", self.b)
        sh("ip", "-n", self.a, "addr", "add", f"{A_IP}/24", "dev", self.da)
        sh("ip", "-n", self.b, "addr", "add", f"{B_IP}/24", "dev", self.db)
        for ns, dev in [(self.a, self.da), (self.b, self.db)]:
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        burst = max(rate_mbit * 1000 // 8 // 100, 32)
        sh("ip", "netns", "exec", self.a, "tc", "qdisc", "add", "dev", self.da, "root", "tbf",
           "rate", f"{rate_mbit}mbit", "burst", f"{burst}kb", "latency", f"{queue_ms}ms")

    def run(self, ns, args, **kw):
        return subprocess.Popen(["ip", "netns", "exec", ns] + args, **kw)

    def keep(self, p):
        self.procs.append(p)
        return p

    def random_drop(self, per_100k):
        sh("ip", "netns", "exec", self.b, "nft", "add", "table", "inet", "nwfloss")
        sh("ip", "netns", "exec", self.b, "nft", "add", "chain", "inet", "nwfloss", "input",
           "{ type filter hook input priority 0; policy accept; }")
        sh("ip", "netns", "exec", self.b, "nft", "add", "rule", "inet", "nwfloss", "input",
           "ip", "saddr", A_IP, "meta", "l4proto", "udp", "numgen", "random", "mod", "100000",
           "<", str(per_100k), "counter", "drop")

    def clear_drop(self):
        sh("ip", "netns", "exec", self.b, "nft", "delete", "table", "inet", "nwfloss", check=False)

    def close(self):
        for p in self.procs:
            try:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass
            p.wait()
        sh("ip", "netns", "del", self.a, check=False)
        sh("ip", "netns", "del", self.b, check=False)


def receiver(link, outdir, extra=(), cpu=None):
    args = [BIN, "fobs", "recv", "--dir", outdir, "--listen", B_IP, "--token", TOKEN, "-q"] + list(extra)
    if cpu is not None:
        args = ["taskset", "-c", str(cpu)] + args
    p = link.keep(link.run(link.b, args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    p.stdout.readline()  # listening
    return p


def send(link, path, extra=(), timeout=300, name=None):
    args = [BIN, "fobs", "send", path, f"{B_IP}:8070", "--token", TOKEN, "-q"] + list(extra)
    if name:
        args += ["--name", name]
    r = subprocess.run(["ip", "netns", "exec", link.a] + args, capture_output=True, text=True, timeout=timeout)
    return r


def stall_loop(pid, stop_at, lo_ms, hi_ms, gap_lo_ms, gap_hi_ms, rng):
    """SIGSTOP/SIGCONT bursts until stop_at: the receiver descheduled for lo–hi ms every gap."""
    while time.time() < stop_at:
        time.sleep(rng.uniform(gap_lo_ms, gap_hi_ms) / 1e3)
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(rng.uniform(lo_ms, hi_ms) / 1e3)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return


def child_pid(p):
    """The nowcast process under `ip netns exec` (exec replaces it, so it is the same pid)."""
    return p.pid


def make_file(path, mb):
    with open(path, "wb") as f:
        f.write(os.urandom(mb << 20))


def signatures(outdir):
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="nwf-")
    src = os.path.join(tmp, "src.bin")
    make_file(src, 128)
    rx_dir = os.path.join(tmp, "rx")
    os.makedirs(rx_dir)
    link = Link("s", 1000)
    n = 0
    try:
        for split, seed in [("train", 1), ("eval", 2)]:
            rng = random.Random(seed)
            # Network: random drops, from 1 in 10^4 to 4 in 100.
            for per_100k in [10, 20, 50, 100, 200, 500, 1000, 2000, 4000]:
                link.random_drop(per_100k)
                rx = receiver(link, rx_dir)
                for _ in range(3):
                    n += 1
                    send(link, src, ["--fixed-rate", "300M", "--signatures", f"{outdir}/{split}-network-random.sig", "--label", "network"], name=f"f{n}")
                link.clear_drop()
                rx.kill(); rx.wait()
            # Network: the tbf queue (1 Gbit/s) overflowing under competing iperf3 UDP traffic.
            ip = link.keep(link.run(link.b, ["iperf3", "-s", "-p", "5299"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(0.3)
            rx = receiver(link, rx_dir)
            for cross, fobs_rate in [("700M", "320M"), ("650M", "400M"), ("600M", "450M")]:
                cp = link.run(link.a, ["iperf3", "-c", B_IP, "-p", "5299", "-u", "-b", cross, "-t", "8", "-l", "1400"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.5)
                n += 1
                send(link, src, ["--fixed-rate", fobs_rate, "--signatures", f"{outdir}/{split}-network-queue.sig", "--label", "network"], name=f"f{n}")
                cp.wait()
            rx.kill(); rx.wait()
            ip.kill(); ip.wait()
            # CPU: the receiver stopped for 1–8 ms at random gaps, with a small socket buffer.
            for (lo, hi, glo, ghi) in [(1, 3, 20, 200), (2, 6, 50, 400), (3, 8, 100, 800), (0.5, 2, 5, 60), (0.3, 1, 300, 1500)]:
                rx = receiver(link, rx_dir, ["--rcvbuf", "65536"])
                stop_at = time.time() + 60
                import threading
                t = threading.Thread(target=stall_loop, args=(child_pid(rx), stop_at, lo, hi, glo, ghi, rng), daemon=True)
                t.start()
                for _ in range(3):
                    n += 1
                    send(link, src, ["--fixed-rate", "300M", "--signatures", f"{outdir}/{split}-cpu-stall.sig", "--label", "cpu"], name=f"f{n}")
                stop_at = 0
                rx.kill(); rx.wait()
            # CPU: busy processes on the receiver's core, a random number at random times.
            rx = receiver(link, rx_dir, ["--rcvbuf", "65536"], cpu=1)
            busy = []
            for k in range(3):
                for _ in range(rng.randint(1, 3)):
                    busy.append(subprocess.Popen(["taskset", "-c", "1", "sh", "-c", "while :; do :; done"]))
                n += 1
                send(link, src, ["--fixed-rate", "300M", "--signatures", f"{outdir}/{split}-cpu-busy.sig", "--label", "cpu"], name=f"f{n}")
                for b in busy:
                    b.kill(); b.wait()
                busy = []
            rx.kill(); rx.wait()
            for f in os.listdir(rx_dir):
                os.remove(os.path.join(rx_dir, f))
    finally:
        link.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in sorted(os.listdir(outdir)):
        with open(os.path.join(outdir, f)) as fh:
            print(f, sum(1 for _ in fh), "signatures")


def iperf(link, secs, cc, cpu_stall=None, rng=None):
    """iperf3 TCP goodput (Mbit/s), received bytes over the run."""
    srv = link.keep(link.run(link.b, ["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.3)
    if cpu_stall:
        import threading
        threading.Thread(target=stall_loop, args=(srv.pid, time.time() + secs + 2, *cpu_stall, rng), daemon=True).start()
    r = subprocess.run(["ip", "netns", "exec", link.a, "iperf3", "-c", B_IP, "-p", "5201", "-t", str(secs), "-C", cc, "-J"],
                       capture_output=True, text=True, timeout=secs + 30)
    srv.wait()
    try:
        return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    except Exception:
        return float("nan")


def fobs(link, src, rx_dir, extra=(), cpu_stall=None, rng=None, rcvbuf=None):
    rx = receiver(link, rx_dir, ["--rcvbuf", str(rcvbuf)] if rcvbuf else [])
    stop = [False]
    if cpu_stall:
        import threading
        threading.Thread(target=stall_loop, args=(rx.pid, time.time() + 300, *cpu_stall, rng), daemon=True).start()
    t = time.time()
    r = send(link, src, ["--json"] + list(extra), name=f"b{time.time_ns()}")
    el = time.time() - t
    rx.kill(); rx.wait()
    for f in os.listdir(rx_dir):
        os.remove(os.path.join(rx_dir, f))
    recs = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    tp = [x["value"] for x in recs if x["metric"] == "throughput"]
    events = [x for x in recs if x.get("congestion")]
    ignored = sum(1 for x in events if x["congestion"]["action"] == "no_corrective_action")
    ok = r.returncode == 0
    return (tp[0] if tp and ok else float("nan")), len(events), ignored, el


def bench(quick):
    mb = 50 if quick else 200
    secs = 5 if quick else 10
    tmp = tempfile.mkdtemp(prefix="nwf-")
    src = os.path.join(tmp, "src.bin")
    make_file(src, mb)
    rx_dir = os.path.join(tmp, "rx")
    os.makedirs(rx_dir)
    rows = []
    rtt = float(os.environ.get("FOBS_BENCH_RTT_MS", "30"))
    rate = int(os.environ.get("FOBS_BENCH_RATE_MBIT", "1000"))
    link = DelayedLink("b", rate, rtt)
    print(f"link: tbf {rate} Mbit/s, +{rtt} ms round trip (nowcast delay-tun on the return path), {mb} MB file")
    rng = random.Random(3)
    try:
        # 1. Clean 1 Gbit/s link.
        for cc in ["cubic", "bbr"]:
            rows.append(("clean", f"iperf3 {cc}", iperf(link, secs, cc), ""))
        for name, extra in [("fobs", []), ("fobs --no-classifier", ["--no-classifier"])]:
            g, ev, ig, _ = fobs(link, src, rx_dir, extra)
            rows.append(("clean", name, g, f"{ev} congestion events, {ig} not answered"))
        # 2. Receiver CPU contention: stopped 0.2-1 ms every 20-200 ms, small socket buffer.
        stall = (0.2, 1.0, 20, 200)
        for cc in ["cubic", "bbr"]:
            rows.append(("cpu", f"iperf3 {cc}", iperf(link, secs, cc, stall, rng), ""))
        for name, extra in [("fobs", []), ("fobs --no-classifier", ["--no-classifier"])]:
            g, ev, ig, _ = fobs(link, src, rx_dir, extra, stall, rng, rcvbuf=262144)
            rows.append(("cpu", name, g, f"{ev} congestion events, {ig} not answered"))
        # 3. 0.5 % random loss, FOBS and one iperf3 cubic flow sharing the bottleneck.
        link.random_drop(500)
        sh("ip", "netns", "exec", link.b, "nft", "add", "rule", "inet", "nwfloss", "input", "ip", "saddr", A_IP,
           "meta", "l4proto", "tcp", "numgen", "random", "mod", "100000", "<", "500", "counter", "drop")
        srv = link.keep(link.run(link.b, ["iperf3", "-s", "-1", "-p", "5202"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        rx = receiver(link, rx_dir)
        time.sleep(0.3)
        ip = subprocess.Popen(["ip", "netns", "exec", link.a, "iperf3", "-c", B_IP, "-p", "5202", "-t", str(secs * 2), "-C", "cubic", "-J"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(1)
        r = send(link, src, ["--json", "--max-rate", "1G"], name="share", timeout=secs * 2 + 60)
        out, _ = ip.communicate(timeout=secs * 2 + 60)
        recs = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        f = next((x["value"] for x in recs if x["metric"] == "throughput"), float("nan"))
        try:
            t = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
        except Exception:
            t = float("nan")
        jain = (f + t) ** 2 / (2 * (f * f + t * t)) if f == f and t == t else float("nan")
        rows.append(("0.5% loss, shared", "fobs", f, ""))
        rows.append(("0.5% loss, shared", "iperf3 cubic", t, f"Jain's index {jain:.3f}"))
        rx.kill(); rx.wait()
        link.clear_drop()
    finally:
        link.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'scenario':<20} {'tool':<22} {'goodput Mbit/s':>15}  note")
    for sc, tool, g, note in rows:
        print(f"{sc:<20} {tool:<22} {g:>15.1f}  {note}")


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces)")
        sys.exit(0)
    if sys.argv[1] == "signatures":
        signatures(sys.argv[2])
    elif sys.argv[1] == "bench":
        bench("--quick" in sys.argv)
