/**
 * Shared pieces of the benchmark and the soak: the server runs in its own process (so client
 * load does not distort its CPU and memory figures), read from /proc.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, release } from "node:os";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** dist/dev/bench → echo-node/dist/main.js, the same build the top-level `npm start` runs. */
const MAIN = resolve(dirname(fileURLToPath(import.meta.url)), "../../main.js");
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

export interface ServerProcess {
  url: string;
  port: number;
  pid: number;
  /** User plus system CPU seconds used so far. */
  cpuSeconds(): number;
  rssBytes(): number;
  stop(): Promise<void>;
}

/** `quiet` drops the server's stderr (its one-line-per-client refusal log), for benchmarks
 *  that are refused on purpose from hundreds of addresses. */
export async function startServerProcess(
  args: string[],
  opts: { quiet?: boolean } = {},
): Promise<ServerProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [MAIN, "--port", "0", "--host", "127.0.0.1", ...args],
    {
      stdio: ["ignore", "pipe", opts.quiet ? "ignore" : "inherit"],
    },
  );
  const url = await new Promise<string>((resolveUrl, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolveUrl(m[1]!);
    });
    child.once("exit", (code) =>
      reject(new Error(`echo-node exited with ${code} before listening`)),
    );
  });
  const pid = child.pid!;
  return {
    url,
    port: Number(new URL(url).port),
    pid,
    cpuSeconds: () => {
      // /proc/<pid>/stat fields 14 and 15 (utime, stime) after the parenthesised name.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
    },
    rssBytes: () => rssOf(pid),
    stop: () =>
      new Promise((done) => {
        if (child.exitCode !== null) return done();
        child.once("exit", () => done());
        child.kill("SIGTERM");
      }),
  };
}

/** Resident set size of process `pid`, from /proc. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

export function machine(): string {
  const list = cpus();
  return `${list[0]?.model ?? "unknown CPU"}, ${list.length} cores, Linux ${release()}, Node ${process.version}`;
}

export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** The open-file limit of this process, from /proc (Node has no getrlimit). */
export function openFileLimit(): number {
  const m = /Max open files\s+(\d+)/.exec(readFileSync("/proc/self/limits", "utf8"));
  return m ? Number(m[1]) : NaN;
}

export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  return n;
}
