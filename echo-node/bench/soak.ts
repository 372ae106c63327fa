/**
 * Bounded soak (`npm -w echo-node run soak`), loopback only. One echo-node process; client
 * processes (forked from this file) so their load does not count as the server's:
 *  - echo clients: SOAK_CLIENTS (2000) WebSockets, each sending one echo per second, checking
 *    that every reply comes back, in order;
 *  - bandwidth clients: SOAK_BW_CLIENTS (20) WebSockets, each doing a 1 MiB upload and a 1 MiB
 *    download probe every second, checking the byte counts;
 *  - a latency probe: one lightly loaded process sending 20 echoes per second, first before
 *    the load (baseline) and then during it. The increase of its RTT is the latency the
 *    loaded server adds (an upper bound: it also contains the probe's own scheduling delay
 *    on a shared machine).
 * The orchestrator samples the server's RSS every second and reads its /metrics at the end.
 * Runs SOAK_SECONDS (60) of load; clients are spread over many 127.x.y.z source addresses.
 */
import { fork, type ChildProcess } from "node:child_process";
import { setPriority } from "node:os";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { WebSocket } from "ws";
import {
  decodeServerMessage,
  encodeDownload,
  encodeEcho,
  encodeUploadStart,
  MSG,
  type ServerMessage,
} from "../src/protocol.js";
import {
  envNumber,
  machine,
  median,
  openFileLimit,
  percentile,
  startServerProcess,
} from "./common.js";

const SECONDS = envNumber("SOAK_SECONDS", 60);
const CLIENTS = Math.round(envNumber("SOAK_CLIENTS", 2000));
const BW_CLIENTS = Math.round(envNumber("SOAK_BW_CLIENTS", 20));
const ECHO_PROCESSES = 2;
const PER_ADDRESS = 100;
const MiB = 1024 * 1024;
const BASELINE_MS = 3000;
const DRAIN_MS = 3000;

interface ClientReport {
  role: string;
  connected: number;
  sent: number;
  received: number;
  dropped: number;
  reordered: number;
  errors: string[];
  rtts: number[];
  baselineRtts: number[];
  probes: number;
}

function emptyReport(role: string): ClientReport {
  return {
    role,
    connected: 0,
    sent: 0,
    received: 0,
    dropped: 0,
    reordered: 0,
    errors: [],
    rtts: [],
    baselineRtts: [],
    probes: 0,
  };
}

/** 127.<hi>.<lo>.1-style loopback source addresses, PER_ADDRESS clients on each. */
function sourceAddress(index: number, block: number): string {
  const a = Math.floor(index / PER_ADDRESS);
  return `127.${block}.${a >> 8}.${(a & 0xff) + 1}`;
}

function connect(url: string, localAddress: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, "ws") + "/ws", {
      perMessageDeflate: false,
      localAddress,
    });
    ws.once("message", () => resolve(ws)); // HELLO
    ws.once("error", reject);
  });
}

/** Echo clients: one echo per second each, replies checked for order and completeness. */
async function echoClients(
  url: string,
  count: number,
  block: number,
  stopAt: number,
): Promise<ClientReport> {
  const report = emptyReport("echo");
  const sockets: WebSocket[] = [];
  const pending: { seq: number; at: number }[][] = [];
  let finishing = false;
  for (let i = 0; i < count; i++) {
    // Ramp up gently so the server's accept backlog never overflows.
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 50));
    const queue: { seq: number; at: number }[] = [];
    let ws: WebSocket;
    try {
      ws = await connect(url, sourceAddress(i, block));
    } catch (e) {
      report.errors.push(`connect: ${(e as Error).message}`);
      continue;
    }
    report.connected++;
    sockets.push(ws);
    pending.push(queue);
    ws.on("message", (data: Buffer) => {
      const m = decodeServerMessage(data);
      if (m.type !== "echo_reply") return;
      const now = performance.now();
      const expected = queue.shift();
      report.received++;
      if (expected === undefined || expected.seq !== m.seq) {
        report.reordered++;
        return;
      }
      report.rtts.push(now - expected.at);
    });
    ws.on("error", (e) => report.errors.push(`socket: ${e.message}`));
    ws.on("close", (code) => {
      if (!finishing) report.errors.push(`closed by server: ${code}`);
    });
    let seq = 0;
    const payload = new Uint8Array([0x4e, 0x57]); // the NWS 2-byte exchange
    const timer = setInterval(() => {
      if (performance.now() >= stopAt) {
        clearInterval(timer);
        return;
      }
      queue.push({ seq, at: performance.now() });
      report.sent++;
      ws.send(encodeEcho(seq++, payload));
    }, 1000);
    ws.once("close", () => clearInterval(timer));
  }
  await new Promise((r) => setTimeout(r, Math.max(0, stopAt - performance.now()) + DRAIN_MS));
  for (const q of pending) report.dropped += q.length;
  finishing = true;
  for (const ws of sockets) ws.terminate();
  return report;
}

/** Server messages in order, as promises; rejects once the connection is closed. */
function messages(ws: WebSocket): () => Promise<ServerMessage> {
  const queue: ServerMessage[] = [];
  const waiters: { resolve(m: ServerMessage): void; reject(e: Error): void }[] = [];
  let closed: Error | undefined;
  ws.on("message", (d: Buffer) => {
    const m = decodeServerMessage(d);
    const w = waiters.shift();
    if (w) w.resolve(m);
    else queue.push(m);
  });
  ws.on("close", (code) => {
    closed = new Error(`closed by server: ${code}`);
    for (const w of waiters.splice(0)) w.reject(closed);
  });
  return () => {
    const m = queue.shift();
    if (m) return Promise.resolve(m);
    if (closed) return Promise.reject(closed);
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  };
}

/** Bandwidth clients: a 1 MiB upload and a 1 MiB download per second each. */
async function bandwidthClients(
  url: string,
  count: number,
  block: number,
  stopAt: number,
): Promise<ClientReport> {
  const report = emptyReport("bandwidth");
  const data = Buffer.alloc(1 + 256 * 1024, 0x5a);
  data[0] = MSG.UPLOAD_DATA;
  const one = async (index: number) => {
    const ws = await connect(url, sourceAddress(index, block));
    report.connected++;
    const next = messages(ws);
    let probeId = 0;
    while (performance.now() < stopAt) {
      const started = performance.now();
      ws.send(encodeUploadStart(++probeId, MiB));
      for (let i = 0; i < 4; i++) ws.send(data);
      const ack = await next();
      if (ack.type !== "upload_ack" || ack.bytes !== MiB)
        report.errors.push(`bad ack ${JSON.stringify(ack)}`);
      ws.send(encodeDownload(++probeId, MiB, 256 * 1024));
      let received = 0;
      for (;;) {
        const m = await next();
        if (m.type === "download_data") received += m.bytes;
        else {
          if (m.type !== "download_end" || received !== MiB)
            report.errors.push(`download got ${received}`);
          break;
        }
      }
      report.probes += 2;
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - started))));
    }
    ws.terminate();
  };
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      one(i).catch((e: Error) => void report.errors.push(e.message)),
    ),
  );
  return report;
}

/** The latency probe: 20 echoes per second from an otherwise idle process. */
async function latencyProbe(url: string, stopAt: number, loadAt: number): Promise<ClientReport> {
  const report = emptyReport("latency");
  const ws = await connect(url, "127.0.0.1");
  report.connected = 1;
  let seq = 0;
  while (performance.now() < stopAt) {
    const at = performance.now();
    const reply = new Promise<void>((resolve) => ws.once("message", () => resolve()));
    ws.send(encodeEcho(seq++, new Uint8Array([0x4e, 0x57])));
    report.sent++;
    await reply;
    report.received++;
    // The first second warms up the JIT and is not counted.
    const rtt = performance.now() - at;
    if (seq > 20) (at < loadAt ? report.baselineRtts : report.rtts).push(rtt);
    await new Promise((r) => setTimeout(r, 50));
  }
  ws.terminate();
  return report;
}

/** Child process entry: role and parameters from argv, report over IPC. Times are sent as
 *  offsets because each process has its own performance.now() origin. */
async function child(): Promise<void> {
  const [, , role, url, countText, blockText, stopInText, loadInText] = process.argv;
  const stopAt = performance.now() + Number(stopInText);
  let report: ClientReport;
  if (role === "echo")
    report = await echoClients(url!, Number(countText), Number(blockText), stopAt);
  else if (role === "bandwidth")
    report = await bandwidthClients(url!, Number(countText), Number(blockText), stopAt);
  else report = await latencyProbe(url!, stopAt, performance.now() + Number(loadInText));
  process.send!(report, () => process.exit(0));
}

function runChild(args: string[]): { proc: ChildProcess; report: Promise<ClientReport> } {
  const proc = fork(fileURLToPath(import.meta.url), args, {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const report = new Promise<ClientReport>((resolve, reject) => {
    proc.once("message", (m) => resolve(m as ClientReport));
    proc.once("exit", (code) =>
      reject(new Error(`${args[0]} clients exited with ${code} before reporting`)),
    );
  });
  return { proc, report };
}

async function orchestrate(): Promise<void> {
  console.log(`echo-node soak: ${machine()}`);
  console.log(
    `${CLIENTS} echo clients (1 echo/s each), ${BW_CLIENTS} bandwidth clients (1 MiB up + down per s), ${SECONDS} s\n`,
  );
  const needed = CLIENTS + BW_CLIENTS + 100;
  const limit = openFileLimit();
  if (limit < needed) {
    throw new Error(
      `open-file limit ${limit} is below the ${needed} sockets needed; raise it (ulimit -n ${needed * 2})`,
    );
  }
  const server = await startServerProcess([
    "--max-connections",
    String(CLIENTS * 2),
    "--max-connections-per-client",
    String(PER_ADDRESS * 2),
    "--max-sockets-per-client",
    String(PER_ADDRESS * 2),
    "--idle-timeout",
    "5m",
    "--max-payload",
    "64MiB",
    "--bytes-per-minute",
    "2GiB",
  ]);
  const loadMs = SECONDS * 1000;
  const rss: { t: number; bytes: number }[] = [];
  const started = performance.now();
  const sampler = setInterval(
    () => rss.push({ t: (performance.now() - started) / 1000, bytes: server.rssBytes() }),
    1000,
  );
  try {
    const probe = runChild([
      "latency",
      server.url,
      "0",
      "0",
      String(BASELINE_MS + loadMs),
      String(BASELINE_MS),
    ]);
    await new Promise((r) => setTimeout(r, BASELINE_MS));
    const loadStarted = (performance.now() - started) / 1000;
    const perProcess = Math.ceil(CLIENTS / ECHO_PROCESSES);
    const echo = Array.from({ length: ECHO_PROCESSES }, (_, i) =>
      runChild([
        "echo",
        server.url,
        String(Math.min(perProcess, CLIENTS - i * perProcess)),
        String(10 + i),
        String(loadMs),
      ]),
    );
    const bw = runChild(["bandwidth", server.url, String(BW_CLIENTS), "200", String(loadMs)]);
    // The load generators stand in for other machines: on this shared 2-core host they run
    // at lower priority so that they do not pre-empt the server and the latency probe.
    for (const c of [...echo, bw]) setPriority(c.proc.pid!, 10);
    const reports = await Promise.all([...echo.map((e) => e.report), bw.report, probe.report]);
    clearInterval(sampler);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    report(reports, rss, loadStarted, metrics);
  } finally {
    clearInterval(sampler);
    await server.stop();
  }
}

function report(
  reports: ClientReport[],
  rss: { t: number; bytes: number }[],
  loadStarted: number,
  metrics: string,
) {
  const echo = reports.filter((r) => r.role === "echo");
  const bw = reports.find((r) => r.role === "bandwidth")!;
  const probe = reports.find((r) => r.role === "latency")!;
  const sum = (k: "connected" | "sent" | "received" | "dropped" | "reordered") =>
    echo.reduce((a, r) => a + r[k], 0);
  const errors = reports.flatMap((r) => r.errors);
  const echoRtts = echo.flatMap((r) => r.rtts);
  const base = median(probe.baselineRtts);
  const mb = (b: number) => (b / MiB).toFixed(1);
  const load = rss.filter((s) => s.t >= loadStarted);
  const end = load.at(-1)?.t ?? 0;
  const last30 = load.filter((s) => s.t >= end - 30);
  const maxRss = Math.max(...load.map((s) => s.bytes));
  const last30Min = Math.min(...last30.map((s) => s.bytes));
  const last30Max = Math.max(...last30.map((s) => s.bytes));
  const metric = (name: string) =>
    new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(metrics)?.[1] ?? "?";
  const lines = [
    `echo clients connected   ${sum("connected")} / ${CLIENTS}`,
    `echoes sent / replied    ${sum("sent")} / ${sum("received")}`,
    `dropped / reordered      ${sum("dropped")} / ${sum("reordered")}`,
    `bandwidth probes         ${bw.probes} (1 MiB each, ${bw.connected} clients)`,
    `client errors            ${errors.length}${errors.length ? ": " + [...new Set(errors)].slice(0, 5).join("; ") : ""}`,
    `echo RTT, load clients   p50 ${median(echoRtts).toFixed(2)} ms, p99 ${percentile(echoRtts, 99).toFixed(2)} ms (includes the client processes' own delays)`,
    `probe RTT baseline       p50 ${base.toFixed(3)} ms, p99 ${percentile(probe.baselineRtts, 99).toFixed(3)} ms`,
    `probe RTT under load     p50 ${median(probe.rtts).toFixed(3)} ms, p99 ${percentile(probe.rtts, 99).toFixed(3)} ms, max ${Math.max(...probe.rtts).toFixed(3)} ms`,
    `server-added latency     p99 under load − p99 idle: ${(percentile(probe.rtts, 99) - percentile(probe.baselineRtts, 99)).toFixed(3)} ms; upper bound (whole probe RTT p99): ${percentile(probe.rtts, 99).toFixed(3)} ms`,
    `server event-loop lag    p99 ${(Number(metric('echo_node_event_loop_lag_seconds{quantile="0.99"}')) * 1000).toFixed(2)} ms, max ${(Number(metric('echo_node_event_loop_lag_seconds{quantile="1"}')) * 1000).toFixed(2)} ms (last 5 s window)`,
    `server RSS               max ${mb(maxRss)} MiB; last 30 s ${mb(last30Min)}–${mb(last30Max)} MiB`,
    `server protocol errors   ${metric('echo_node_protocol_errors_total{error="malformed"}')} malformed, ${metric('echo_node_protocol_errors_total{error="out_of_order"}')} out of order`,
    `RSS every 5 s (MiB)      ${load
      .filter((_, i) => i % 5 === 0)
      .map((s) => mb(s.bytes))
      .join(" ")}`,
  ];
  console.log(lines.join("\n"));
  console.log(`\ndate ${new Date().toISOString()}`);
}

if (process.send !== undefined) void child();
else
  orchestrate().catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
