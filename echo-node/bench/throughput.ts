/**
 * Throughput benchmark (`npm -w echo-node run bench`): on loopback, one connection per
 * transfer, WebSocket download and upload and HTTP download and upload of BENCH_BYTES
 * (default 1 GiB) each, next to iperf3 single-stream TCP measured in the same run. Runs are
 * interleaved (iperf3, then each echo-node transfer, repeated) so that noise on a shared
 * machine hits all of them alike; the table reports medians, the spread (min–max), the ratio
 * of medians to iperf3 and the server's CPU time per GB.
 *
 * The client side avoids work a browser would do in native code: WebSocket frames are sent
 * with a zero mask (valid per RFC 6455; the server still runs its unmasking pass), and every
 * buffer is allocated once. Node clients in the same process family compete with the server
 * for the two cores and are often the bottleneck, so HTTP is also measured with curl, a C
 * client like iperf3's.
 */
import { execFile, spawn } from "node:child_process";
import { randomFillSync } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { WebSocket } from "ws";
import { decodeServerMessage, encodeDownload, encodeUploadStart, MSG } from "../src/protocol.js";
import { envNumber, machine, median, startServerProcess, type ServerProcess } from "./common.js";

const BYTES = Math.round(envNumber("BENCH_BYTES", 1024 ** 3));
const RUNS = Math.round(envNumber("BENCH_RUNS", 5));
const CHUNK = 1024 * 1024;
/** WebSocket download message size: 64 KiB messages spare the Node client most of the
 *  copying it does to reassemble larger messages from 64 KiB socket reads. */
const WS_DOWNLOAD_CHUNK = Math.round(envNumber("BENCH_WS_CHUNK", 64 * 1024));
const IPERF = "/usr/bin/iperf3";
const CURL = "/usr/bin/curl";

interface Sample {
  seconds: number;
  cpuSeconds: number;
}

const run = promisify(execFile);

async function iperf(port: number): Promise<number> {
  const server = spawn(IPERF, ["-s", "-1", "-p", String(port), "-B", "127.0.0.1"], {
    stdio: "ignore",
  });
  await new Promise((r) => setTimeout(r, 300));
  try {
    const { stdout } = await run(
      IPERF,
      ["-c", "127.0.0.1", "-p", String(port), "-n", String(BYTES), "-J"],
      {
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    const result = JSON.parse(stdout) as { end: { sum_received: { bits_per_second: number } } };
    return result.end.sum_received.bits_per_second;
  } finally {
    server.kill();
  }
}

function openWs(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, "ws") + "/ws", {
      perMessageDeflate: false,
      generateMask: (mask) => mask.fill(0),
    });
    ws.binaryType = "nodebuffer";
    ws.once("message", () => resolve(ws)); // HELLO
    ws.once("error", reject);
  });
}

async function wsDownload(url: string): Promise<number> {
  const ws = await openWs(url);
  const started = performance.now();
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    ws.on("message", (data: Buffer) => {
      if (data[0] === MSG.DOWNLOAD_DATA) received += data.byteLength - 1;
      else if (data[0] === MSG.DOWNLOAD_END) resolve();
    });
    ws.once("close", (code) => reject(new Error(`closed with ${code}`)));
    ws.send(encodeDownload(1, BYTES, WS_DOWNLOAD_CHUNK));
  });
  const seconds = (performance.now() - started) / 1000;
  ws.terminate();
  if (received !== BYTES) throw new Error(`WebSocket download received ${received} of ${BYTES}`);
  return seconds;
}

async function wsUpload(url: string, payload: Buffer): Promise<number> {
  const ws = await openWs(url);
  const started = performance.now();
  const ack = await new Promise<Buffer>((resolve, reject) => {
    ws.on("message", (data: Buffer) => {
      if (data[0] === MSG.UPLOAD_ACK) resolve(data);
    });
    ws.once("close", (code) => reject(new Error(`closed with ${code}`)));
    ws.send(encodeUploadStart(1, BYTES));
    let sent = 0;
    // Keep a few megabytes queued, no more: the benchmark must respect backpressure too.
    const pump = () => {
      while (sent < BYTES && ws.bufferedAmount < 8 * CHUNK) {
        const n = Math.min(CHUNK, BYTES - sent);
        sent += n;
        ws.send(payload.subarray(0, 1 + n), pump);
      }
    };
    pump();
  });
  const seconds = (performance.now() - started) / 1000;
  ws.terminate();
  const m = decodeServerMessage(ack);
  if (m.type !== "upload_ack" || m.bytes !== BYTES)
    throw new Error(`bad upload ack ${JSON.stringify(m)}`);
  return seconds;
}

const agent = new Agent({ keepAlive: false, maxSockets: 1 });

async function httpDownload(url: string): Promise<number> {
  const started = performance.now();
  const received = await new Promise<number>((resolve, reject) => {
    request(`${url}/api/download?bytes=${BYTES}`, { agent }, (res) => {
      let n = 0;
      res.on("data", (d: Buffer) => (n += d.byteLength));
      res.on("end", () => resolve(n));
      res.on("error", reject);
    })
      .on("error", reject)
      .end();
  });
  if (received !== BYTES) throw new Error(`HTTP download received ${received} of ${BYTES}`);
  return (performance.now() - started) / 1000;
}

async function httpUpload(url: string, payload: Buffer): Promise<number> {
  const body = payload.subarray(1, 1 + CHUNK);
  const started = performance.now();
  const reply = await new Promise<string>((resolve, reject) => {
    const req = request(
      `${url}/api/upload`,
      {
        method: "POST",
        agent,
        headers: { "Content-Length": BYTES, "Content-Type": "application/octet-stream" },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve(text));
      },
    );
    req.on("error", reject);
    let sent = 0;
    const write = () => {
      while (sent < BYTES) {
        const n = Math.min(CHUNK, BYTES - sent);
        sent += n;
        if (!req.write(n === CHUNK ? body : body.subarray(0, n))) {
          req.once("drain", write);
          return;
        }
      }
      req.end();
    };
    write();
  });
  const seconds = (performance.now() - started) / 1000;
  if ((JSON.parse(reply) as { bytes: number }).bytes !== BYTES)
    throw new Error(`bad upload reply ${reply}`);
  return seconds;
}

/** HTTP transfers with curl as the client: like iperf3, a C client that is unlikely to be the
 *  bottleneck, so the figure is the server's. */
async function curlDownload(url: string): Promise<number> {
  const started = performance.now();
  const { stdout } = await run(CURL, [
    "-sS",
    "-o",
    "/dev/null",
    "-w",
    "%{size_download}",
    `${url}/api/download?bytes=${BYTES}`,
  ]);
  if (Number(stdout) !== BYTES) throw new Error(`curl downloaded ${stdout} of ${BYTES}`);
  return (performance.now() - started) / 1000;
}

async function curlUpload(url: string, file: string): Promise<number> {
  const started = performance.now();
  const { stdout } = await run(CURL, [
    "-sS",
    "-X",
    "POST",
    "-H",
    "Content-Type: application/octet-stream",
    "-H",
    "Expect:",
    "-T",
    file,
    `${url}/api/upload`,
  ]);
  if ((JSON.parse(stdout) as { bytes: number }).bytes !== BYTES)
    throw new Error(`bad upload reply ${stdout}`);
  return (performance.now() - started) / 1000;
}

async function measure(server: ServerProcess, transfer: () => Promise<number>): Promise<Sample> {
  const cpuBefore = server.cpuSeconds();
  const seconds = await transfer();
  return { seconds, cpuSeconds: server.cpuSeconds() - cpuBefore };
}

async function main(): Promise<void> {
  console.log(`echo-node throughput benchmark: ${machine()}`);
  console.log(
    `${(BYTES / 1024 ** 2).toFixed(0)} MiB per transfer, ${RUNS} runs, loopback, one connection each\n`,
  );
  const haveIperf = existsSync(IPERF);
  if (!haveIperf)
    console.log(`${IPERF} is missing: absolute figures only (apt-get install iperf3)\n`);

  const payload = Buffer.allocUnsafe(1 + CHUNK);
  randomFillSync(payload);
  payload[0] = MSG.UPLOAD_DATA;

  const kinds: [string, () => Promise<number>][] = [
    ["WebSocket download (ws)", () => wsDownload(server.url)],
    ["WebSocket upload (ws)", () => wsUpload(server.url, payload)],
    ["HTTP download (Node)", () => httpDownload(server.url)],
    ["HTTP upload (Node)", () => httpUpload(server.url, payload)],
  ];
  const uploadFile = join(mkdtempSync(join(tmpdir(), "echo-node-bench-")), "upload.bin");
  if (existsSync(CURL)) {
    // A sparse file: curl reads zeros from the page cache, so the disk is not in the path.
    writeFileSync(uploadFile, "");
    truncateSync(uploadFile, BYTES);
    kinds.push(["HTTP download (curl)", () => curlDownload(server.url)]);
    kinds.push(["HTTP upload (curl)", () => curlUpload(server.url, uploadFile)]);
  } else {
    console.log(`${CURL} is missing: HTTP measured with the Node client only\n`);
  }
  const server = await startServerProcess([
    "--max-payload",
    String(Math.max(BYTES, 1024)),
    "--max-message",
    "2MiB",
    "--bytes-per-minute",
    "1000GiB",
    // A 1 GiB upload in 1 MiB messages at 20 Gbit/s is ~2,400 messages a second: this
    // measures throughput, not the flood limit.
    "--messages-per-second",
    "1000000",
  ]);
  const iperfRates: number[] = [];
  const samples = new Map<string, Sample[]>(kinds.map(([name]) => [name, []]));
  try {
    // Warm-up: JIT and socket buffers, not counted.
    for (const [, transfer] of kinds) await transfer();
    for (let r = 0; r < RUNS; r++) {
      if (haveIperf) iperfRates.push(await iperf(server.port + 1));
      for (const [name, transfer] of kinds)
        samples.get(name)!.push(await measure(server, transfer));
      process.stderr.write(`run ${r + 1}/${RUNS} done\n`);
    }
  } finally {
    await server.stop();
    rmSync(dirname(uploadFile), { recursive: true, force: true });
  }

  const gbit = (bitsPerSecond: number) => (bitsPerSecond / 1e9).toFixed(2);
  const iperfMedian = haveIperf ? median(iperfRates) : NaN;
  const rows: string[][] = [
    ["transfer", "median Gbit/s", "min–max Gbit/s", "vs iperf3", "server CPU s/GB"],
  ];
  if (haveIperf) {
    rows.push([
      "iperf3 TCP (1 stream)",
      gbit(iperfMedian),
      `${gbit(Math.min(...iperfRates))}–${gbit(Math.max(...iperfRates))}`,
      "1.00",
      "",
    ]);
  }
  for (const [name] of kinds) {
    const s = samples.get(name)!;
    const rates = s.map((x) => (BYTES * 8) / x.seconds);
    const cpuPerGB = median(s.map((x) => x.cpuSeconds / (BYTES / 1e9)));
    rows.push([
      name,
      gbit(median(rates)),
      `${gbit(Math.min(...rates))}–${gbit(Math.max(...rates))}`,
      haveIperf ? (median(rates) / iperfMedian).toFixed(2) : "n/a",
      cpuPerGB.toFixed(2),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join("  "));
  console.log(
    `\ndate ${new Date().toISOString()}; CPU s/GB is the server process's user+system time.`,
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
