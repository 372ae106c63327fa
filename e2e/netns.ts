/**
 * Emulated links for the browser tests: a network
 * namespace joined to the root namespace by a veth pair, with a tbf bottleneck on the
 * namespace side's egress, which is the direction the page downloads over (server → browser).
 * Chromium stays in the root namespace and reaches the namespace's address over the veth;
 * servers (echo-node, iperf3, sockperf, `nowcast delay`) run inside it as child processes.
 *
 * Names and addresses are derived from this process's id, so parallel runs cannot collide;
 * `close()` kills every process it started, by PID, before deleting the namespace (deleting a
 * namespace kills nothing), and an exit hook does the same if a test run dies first.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const REPO = fileURLToPath(new URL("..", import.meta.url));
/** The `nowcast` binary (`cargo build --release -p native-probes`; `npm test` builds it). */
export const NOWCAST = `${REPO}target/release/nowcast`;
const DIST = `${REPO}web/dist`;

function has(tool: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Why emulated links cannot be made here (with the tools in `tools`), or undefined. */
export function netnsMissing(tools: readonly string[] = []): string | undefined {
  if (process.getuid?.() !== 0) return "not running as root (network namespaces need it)";
  for (const tool of ["ip", "tc", ...tools]) {
    if (!has(tool)) return `${tool} is not installed`;
  }
  return undefined;
}

/** Why `nowcast delay` is not available, or undefined. */
export function nowcastMissing(): string | undefined {
  return existsSync(NOWCAST)
    ? undefined
    : `${NOWCAST} is missing (cargo build --release -p native-probes)`;
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * The tbf bucket for `mbit`: two milliseconds of the rate, and never less than two full
 * frames. The bucket is what a link passes at line speed after an idle moment, so a probe
 * that starts on an idle link gets it free: 2 ms is under 1 % of a 250 ms probe, where the
 * 10 ms of a coarse-timer configuration would read 4 % high. tbf waits on high-resolution
 * timers, so a small bucket still sustains the rate (iperf3 reads the rate through it).
 */
export function tbfBurstBytes(mbit: number): number {
  return Math.max(2 * 1514, Math.round((mbit * 1e6) / 8 / 500));
}

/** Picks a /30 in 10.233.0.0/16 for this process and tag that no root interface uses. */
function freeSubnet(seed: number): number {
  const used = execFileSync("ip", ["-o", "-4", "addr", "show"], { encoding: "utf8" });
  for (let i = 0; i < 16384; i++) {
    const n = (seed + i) % 16384;
    const base = `10.233.${n >> 6}.${(n & 63) << 2}`;
    const prefix = base.slice(0, base.lastIndexOf(".") + 1);
    const taken = [1, 2].some((h) => used.includes(` ${prefix}${((n & 63) << 2) + h}/`));
    if (!taken) return n;
  }
  throw new Error("no free /30 in 10.233.0.0/16");
}

/**
 * A tbf bottleneck of `mbit` on `dev`'s egress. `latency` bounds the queue at 50 ms, as in
 * the Rust accuracy test: TCP fills it, and the page and iperf3 see the same queue.
 */
function shape(prefix: string[], dev: string, mbit: number): void {
  const [bin, ...args] = [...prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf"];
  const burst = String(tbfBurstBytes(mbit));
  execFileSync(bin!, [...args, "rate", `${mbit}mbit`, "burst", burst, "latency", "50ms"]);
}

let tags = 0;
const open = new Set<Link>();
process.once("exit", () => {
  for (const link of open) link.closeNow();
});

export interface Started {
  child: ChildProcess;
  /** What the process has printed so far (stdout and stderr), for error messages. */
  output: () => string;
}

/** A namespace behind a veth pair from the root namespace, shaped towards the root side. */
export class Link {
  readonly ns: string;
  /** The namespace side's address: servers listen here. */
  readonly serverIp: string;
  /** The root side's address (the browser's, as the servers see it). */
  readonly clientIp: string;
  private readonly rootDev: string;
  private readonly children: ChildProcess[] = [];

  /**
   * @param downMbit the rate of the namespace's egress (server → browser: downloads), or
   *   undefined for none.
   * @param upMbit the rate of the root side's egress (browser → server: uploads and the
   *   acknowledgements of downloads), or undefined for none.
   */
  constructor(
    readonly downMbit: number | undefined,
    readonly upMbit?: number,
  ) {
    const tag = tags++;
    const id = `${process.pid}x${tag}`;
    this.ns = `nwe${id}`;
    this.rootDev = `nwr${id}`;
    const nsDev = `nwn${id}`;
    const n = freeSubnet(process.pid * 8 + tag);
    const prefix = `10.233.${n >> 6}.`;
    this.clientIp = `${prefix}${((n & 63) << 2) + 1}`;
    this.serverIp = `${prefix}${((n & 63) << 2) + 2}`;
    open.add(this);
    try {
      ip("netns", "add", this.ns);
      ip("link", "add", this.rootDev, "type", "veth", "peer", "name", nsDev, "netns", this.ns);
      // No IPv6 link-local address on the root side: the kernel adds one a moment after the
      // link comes up (after duplicate address detection), and Chromium, which watches the
      // root namespace's addresses, then fails every request in flight with
      // ERR_NETWORK_CHANGED (a CI run on 2026-12-05 saw it in the mirror ranking test).
      ip("link", "set", this.rootDev, "addrgenmode", "none");
      ip("addr", "add", `${this.clientIp}/30`, "dev", this.rootDev);
      ip("-n", this.ns, "addr", "add", `${this.serverIp}/30`, "dev", nsDev);
      ip("link", "set", this.rootDev, "up");
      ip("-n", this.ns, "link", "set", nsDev, "up");
      ip("-n", this.ns, "link", "set", "lo", "up");
      if (downMbit !== undefined) shape(["ip", "netns", "exec", this.ns], nsDev, downMbit);
      if (upMbit !== undefined) shape([], this.rootDev, upMbit);
    } catch (e) {
      this.closeNow();
      throw e;
    }
  }

  /** The base URL of a server on `port` in the namespace. */
  url(port: number): string {
    return `http://${this.serverIp}:${port}`;
  }

  /**
   * Starts `command` inside the namespace (`ip netns exec` execs it, so the child's PID is
   * the command's own). `cpu`, when given, pins it to that core with taskset.
   */
  spawn(command: string[], cpu?: number): Started {
    const pin = cpu === undefined ? [] : ["taskset", "-c", String(cpu)];
    const child = spawn("ip", ["netns", "exec", this.ns, ...pin, ...command], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.children.push(child);
    let text = "";
    for (const s of [child.stdout, child.stderr]) {
      s.setEncoding("utf8");
      s.on("data", (d: string) => {
        if (text.length < 20_000) text += d;
      });
    }
    return { child, output: () => text };
  }

  /** Waits until a line of the child's stdout matches `re` (or fails after `ms`). */
  async waitFor(started: Started, re: RegExp, ms = 15_000): Promise<RegExpMatchArray> {
    const { child } = started;
    const lines = createInterface({ input: child.stdout! });
    try {
      return await new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no ${re} within ${ms} ms:\n${started.output()}`)),
          ms,
        );
        child.once("exit", (code) => {
          clearTimeout(timer);
          reject(new Error(`exited (${code}) before ${re}:\n${started.output()}`));
        });
        lines.on("line", (line) => {
          const m = re.exec(line);
          if (m !== null) {
            clearTimeout(timer);
            resolve(m);
          }
        });
      });
    } finally {
      lines.close();
    }
  }

  /**
   * A real echo-node (its own `node` process, TypeScript through tsx) serving the built page
   * on the namespace's address; resolves with its base URL.
   */
  async echoNode(args: string[] = [], cpu?: number): Promise<string> {
    const node = this.spawn(
      [
        process.execPath,
        "--import",
        "tsx",
        "echo-node/src/main.ts",
        ...["--host", this.serverIp, "--port", "0", "--static", DIST, ...args],
      ],
      cpu,
    );
    const m = await this.waitFor(node, /listening on (http:\/\/\S+)/);
    return m[1]!;
  }

  /** A `nowcast delay` relay on `port` adding `oneWayMs` each way to `to`; its address. */
  async delay(port: number, to: string, oneWayMs: number): Promise<string> {
    const at = `${this.serverIp}:${port}`;
    this.spawn([NOWCAST, "delay", "tcp", "--listen", at, "--to", to, "--one-way", `${oneWayMs}`]);
    await this.listening(port);
    return at;
  }

  /** Waits (bounded) until something listens on TCP `port` in the namespace. */
  async listening(port: number, ms = 10_000): Promise<void> {
    const until = Date.now() + ms;
    for (;;) {
      const out = execFileSync("ip", ["netns", "exec", this.ns, "ss", "-Hltn"], {
        encoding: "utf8",
      });
      if (out.includes(`${this.serverIp}:${port} `)) return;
      if (Date.now() > until) throw new Error(`nothing listens on ${port} in ${this.ns}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Kills every child by PID, waits for them, then deletes the namespace (and the veth). */
  async close(): Promise<void> {
    const exits = this.children
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => new Promise((r) => c.once("exit", r)));
    for (const c of this.children) c.kill("SIGKILL");
    await Promise.race([Promise.all(exits), new Promise((r) => setTimeout(r, 5000))]);
    this.closeNow();
  }

  /** The synchronous part of close(), also run from the exit hook. */
  closeNow(): void {
    for (const c of this.children) {
      if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    }
    try {
      ip("netns", "del", this.ns);
    } catch {
      // Already gone (or never made): nothing to remove.
    }
    // The root end goes with its peer; this only matters when the namespace was never made.
    try {
      ip("link", "del", this.rootDev);
    } catch {
      // Gone with the namespace.
    }
    open.delete(this);
  }
}

/** Runs a command in the root namespace, bounded by `timeoutMs`; resolves with its output. */
export function runRoot(command: string[], timeoutMs = 30_000, cpu?: number): Promise<string> {
  const pin = cpu === undefined ? [] : ["taskset", "-c", String(cpu)];
  const [bin, ...args] = [...pin, ...command];
  return new Promise((resolve, reject) => {
    execFile(
      bin!,
      args,
      { encoding: "utf8", timeout: timeoutMs, maxBuffer: 1 << 24 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${command.join(" ")}: ${err.message}\n${stderr}`));
        else resolve(stdout + stderr);
      },
    );
  });
}
