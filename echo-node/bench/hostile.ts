/**
 * The hostile bench (`npm -w echo-node run bench:hostile`), loopback only: echo-node in its own
 * process, attacked the ways the security review did, with a control client measured
 * alongside. Prints, in one run:
 *  1. the hostile-input corpus (test/corpus), several passes: cases, how each was answered,
 *     5xx answers, the server alive, its RSS before and after; and the 1 MiB-frame trickle
 *     (8 sockets from one address sending 1-byte segments) with RSS before, during and after;
 *  2. 1,000 connections from one address: how many were held, how the rest were refused, and
 *     a control client's echo RTT meanwhile;
 *  3. one client trying every path at once for a while: the bytes it made the server move
 *     (the server's own meters) against its budget (capacity + rate × time);
 *  4. an echo flooder beside a control client: the control's echo RTT idle, under a flood with
 *     the message rate lifted, and under a flood with the default limits (the flooder
 *     reconnecting whenever it is closed).
 * Scale with HOSTILE_SECONDS (per timed phase, default 8) and BENCH_QUICK=1; HOSTILE_ONLY=flood
 * (or corpus, connections, budget) runs one part.
 * Then `bench/fuzz.ts` runs the decoders' properties for longer than `npm test` does.
 */
import { fork } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { createServer } from "node:http";
import { WebSocket, WebSocketServer } from "ws";
import {
  decodeServerMessage,
  encodeDownload,
  encodeEcho,
  encodeUploadStart,
  MSG,
} from "../src/protocol.js";
import { frameCorpus, httpCorpus, WS_HANDSHAKE } from "../test/corpus.js";
import { rawExchange, type RawResult } from "../test/raw-client.js";
import {
  envNumber,
  machine,
  median,
  percentile,
  rssOf,
  startServerProcess,
  type ServerProcess,
} from "./common.js";

const QUICK = process.env.BENCH_QUICK !== undefined && process.env.BENCH_QUICK !== "";
const SECONDS = envNumber("HOSTILE_SECONDS", QUICK ? 3 : 8);
const MiB = 1024 * 1024;
const mb = (b: number) => (b / MiB).toFixed(1);
const ms = (x: number) => x.toFixed(2);
const sleep = (t: number) => new Promise((r) => setTimeout(r, t));

function pageDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "echo-node-hostile-"));
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>x</title>");
  writeFileSync(join(dir, "big.bin"), Buffer.alloc(4 * MiB, 1));
  return dir;
}

async function metricsOf(server: ServerProcess): Promise<(name: string) => number> {
  const text = await (
    await fetch(`${server.url}/metrics`, { headers: { Connection: "close" } })
  ).text();
  return (name) => {
    const m = new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : NaN;
  };
}

function openWs(url: string, localAddress: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, "ws") + "/ws", {
      perMessageDeflate: false,
      localAddress,
    });
    ws.once("message", () => resolve(ws)); // HELLO
    ws.once("error", reject);
    ws.once("close", (code) => reject(new Error(`closed ${code}`)));
  });
}

/** Echo RTTs of a control client: one echo every `gapMs` for `seconds`. */
async function controlRtts(
  url: string,
  seconds: number,
  gapMs = 5,
  localAddress = "127.200.0.1",
): Promise<number[]> {
  const ws = await openWs(url, localAddress);
  const rtts: number[] = [];
  let seq = 0;
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until && ws.readyState === WebSocket.OPEN) {
    const at = performance.now();
    const reply = new Promise<void>((resolve) => ws.once("message", () => resolve()));
    ws.send(encodeEcho(++seq, Uint8Array.of(0x4e, 0x57)));
    await Promise.race([reply, sleep(2000)]);
    rtts.push(performance.now() - at);
    await sleep(gapMs);
  }
  ws.terminate();
  return rtts;
}

const rttText = (r: number[]) =>
  r.length === 0
    ? "no replies"
    : `p50 ${ms(median(r))} ms, p99 ${ms(percentile(r, 99))} ms (${r.length} echoes)`;

// 1. The corpus and the trickle ---------------------------------------------------------------

async function corpus(): Promise<void> {
  const dir = pageDir();
  const server = await startServerProcess(
    [
      "--static",
      dir,
      "--header-timeout",
      "1s",
      "--keep-alive-timeout",
      "500ms",
      "--idle-timeout",
      "1s",
      "--max-message",
      "1MiB",
    ],
    { quiet: true },
  );
  try {
    const requests = httpCorpus();
    const frames = frameCorpus();
    const pass = (n: number): Promise<RawResult[]> =>
      Promise.all([
        ...requests.map((c, i) =>
          rawExchange(server.port, c.raw, {
            localAddress: `127.20.${n}.${i + 1}`,
            timeoutMs: 5000,
          }),
        ),
        ...frames.map((c, i) =>
          rawExchange(
            server.port,
            Buffer.concat([Buffer.from(WS_HANDSHAKE), Buffer.from(c.hex, "hex")]),
            {
              localAddress: `127.21.${n}.${i + 1}`,
              timeoutMs: 5000,
            },
          ),
        ),
      ]);
    await pass(0);
    const before = server.rssBytes();
    const PASSES = QUICK ? 3 : 10;
    const all: RawResult[] = [];
    for (let n = 1; n <= PASSES; n++) all.push(...(await pass(n)));
    await sleep(1500);
    const after = server.rssBytes();
    const answered = all.filter((r) => r.status !== undefined).length;
    const cut = all.filter((r) => r.status === undefined && r.closed).length;
    const open = all.filter((r) => !r.closed).length;
    const fivexx = all.filter((r) => (r.status ?? 0) >= 500).length;
    const statuses = new Map<number, number>();
    for (const r of all)
      if (r.status !== undefined) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const alive =
      (await fetch(`${server.url}/healthz`, { headers: { Connection: "close" } })).status === 200;
    console.log(
      `corpus cases                 ${requests.length} raw requests + ${frames.length} frame sequences, ${PASSES} passes after a warm-up`,
    );
    console.log(
      `answered / cut / still open  ${answered} / ${cut} / ${open} (of ${all.length}); 5xx answers: ${fivexx}`,
    );
    console.log(
      `statuses                     ${[...statuses.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([s, n]) => `${s}×${n}`)
        .join(" ")}`,
    );
    console.log(
      `server alive                 ${alive ? "yes" : "NO"}; RSS ${mb(before)} → ${mb(after)} MiB`,
    );

    await trickleAttack("1 MiB frame trickled", server.port, () => server.rssBytes());
    // The peer: ws with its defaults (as echo-node ran before), same message cap.
    const peer = fork(fileURLToPath(import.meta.url), ["plain-ws"], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    try {
      const port = await new Promise<number>((resolve) =>
        peer.once("message", (p) => resolve(p as number)),
      );
      await trickleAttack("same, plain ws (peer)", port, () => rssOf(peer.pid!));
    } finally {
      peer.kill();
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A frame declaring ~1 MiB sent a byte at a time on 8 sockets from one address. */
async function trickleAttack(label: string, port: number, rss: () => number): Promise<void> {
  const SOCKETS = 8;
  const BYTES = QUICK ? 50_000 : 300_000;
  const before = rss();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rss())), 100);
  const started = performance.now();
  const sockets = await Promise.all(
    Array.from({ length: SOCKETS }, () => trickle(port, "127.22.0.1", BYTES)),
  );
  const seconds = (performance.now() - started) / 1000;
  const during = rss();
  sockets.forEach((s) => s.destroy());
  await sleep(1500);
  clearInterval(sampler);
  console.log(
    `${label.padEnd(29)}${SOCKETS} sockets × ${(BYTES / 1000).toFixed(0)} KB in 1-byte writes (${((SOCKETS * BYTES) / 1e6).toFixed(1)} MB, ${seconds.toFixed(1)} s): RSS ${mb(before)} → ${mb(during)} MiB while held (peak ${mb(peak)}), ${mb(rss())} MiB after close`,
  );
}

/** Child process: a bare ws server, the peer of the trickle attack. */
async function plainWs(): Promise<void> {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MiB });
  server.on("upgrade", (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => ws.on("error", () => undefined)),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  process.send!((server.address() as { port: number }).port);
}

function trickle(port: number, localAddress: string, bytes: number): Promise<Socket> {
  return new Promise((resolve) => {
    const s = connect({ port, host: "127.0.0.1", localAddress });
    s.setNoDelay(true);
    s.on("error", () => resolve(s));
    s.once("connect", () => s.write(WS_HANDSHAKE));
    s.once("data", () => {
      s.write(Buffer.from("82ff0000000000100000" + "00000000", "hex"));
      let sent = 0;
      const step = () => {
        if (sent++ >= bytes || s.destroyed) return resolve(s);
        s.write(Buffer.of(sent & 0xff));
        setImmediate(step);
      };
      step();
    });
  });
}

// 2. 1,000 connections from one address ----------------------------------------------------

async function thousandConnections(): Promise<void> {
  const server = await startServerProcess(["--header-timeout", "10s"], { quiet: true });
  const sockets: Socket[] = [];
  try {
    const idle = await controlRtts(server.url, 2);
    const control = controlRtts(server.url, 4, 5, "127.200.0.2");
    const outcomes = await Promise.all(
      Array.from(
        { length: 1000 },
        () =>
          new Promise<string>((resolve) => {
            const s = connect({ port: server.port, host: "127.0.0.1", localAddress: "127.30.0.1" });
            sockets.push(s);
            let got = "";
            s.on("data", (d) => (got += d.toString("latin1")));
            s.on("error", () => undefined);
            s.on("close", () =>
              resolve(
                got.startsWith("HTTP/1.1 429") ? "refused 429" : got === "" ? "reset" : "other",
              ),
            );
            setTimeout(
              () =>
                resolve(
                  got === "" ? "held" : got.startsWith("HTTP/1.1 429") ? "refused 429" : "other",
                ),
              3000,
            );
          }),
      ),
    );
    const during = await control;
    const count = (k: string) => outcomes.filter((o) => o === k).length;
    const m = await metricsOf(server);
    console.log(
      `1,000 idle connections       held ${count("held")}, refused with 429 ${count("refused 429")}, reset ${count("reset")}, other ${count("other")} (server counted ${m('echo_node_limit_rejections_total{limit="sockets_per_client"}')} sockets_per_client)`,
    );
    console.log(`control echo RTT             idle ${rttText(idle)}; during ${rttText(during)}`);
  } finally {
    sockets.forEach((s) => s.destroy());
    await server.stop();
  }
}

// 3. The budget under a client trying every path -------------------------------------------

async function everyPath(): Promise<void> {
  const dir = pageDir();
  const perMinute = 256 * MiB;
  const burst = 32 * MiB;
  const server = await startServerProcess(
    [
      "--static",
      dir,
      "--bytes-per-minute",
      "256MiB",
      "--burst-bytes",
      "32MiB",
      "--max-payload",
      "16MiB",
    ],
    { quiet: true },
  );
  try {
    const m0 = await metricsOf(server);
    const moved0 =
      m0('echo_node_client_bytes_total{direction="in"}') +
      m0('echo_node_client_bytes_total{direction="out"}');
    const from = "127.40.0.1";
    const body = "b".repeat(1 << 20);
    const http = [
      "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
      "OPTIONS /api/download HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /api/download?bytes=16777216 HTTP/1.1\r\nHost: x\r\n\r\n",
      `POST /api/upload HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n${body}`,
      `PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n${body}`,
      `POST /api/ping HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n${body}`,
      "GET /api/config HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    const started = performance.now();
    const until = started + SECONDS * 1000;
    let requests = 0;
    let wsSessions = 0;
    const httpWorker = async (w: number) => {
      for (let i = w; performance.now() < until; i++) {
        const req = http[i % http.length]!.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
        await rawExchange(server.port, req, { localAddress: from, timeoutMs: 2000 });
        requests++;
      }
    };
    const wsWorker = async () => {
      while (performance.now() < until) {
        const ws = await openWs(server.url, from).catch(() => undefined);
        if (ws === undefined) {
          await sleep(20);
          continue;
        }
        wsSessions++;
        const closed = new Promise<void>((r) => ws.once("close", () => r()));
        ws.on("error", () => undefined);
        ws.send(encodeDownload(1, 16 * MiB));
        ws.send(encodeUploadStart(2, 8 * MiB));
        const data = new Uint8Array(1 << 20);
        data[0] = MSG.UPLOAD_DATA;
        for (let i = 0; i < 8; i++) ws.send(data);
        for (let s = 1; s <= 200; s++) ws.send(encodeEcho(s));
        ws.ping();
        await Promise.race([closed, sleep(1000)]);
        ws.terminate();
      }
    };
    await Promise.all([
      ...Array.from({ length: 6 }, (_, w) => httpWorker(w)),
      wsWorker(),
      wsWorker(),
    ]);
    const seconds = (performance.now() - started) / 1000;
    await sleep(1500); // closes settle their meters
    const m = await metricsOf(server);
    const moved =
      m('echo_node_client_bytes_total{direction="in"}') +
      m('echo_node_client_bytes_total{direction="out"}') -
      moved0;
    const allowed = burst + (perMinute / 60) * seconds;
    const refusals = [
      "byte_budget",
      "message_rate",
      "request_body",
      "payload_cap",
      "connections_per_client",
      "sockets_per_client",
    ]
      .map((l) => `${l} ${m(`echo_node_limit_rejections_total{limit="${l}"}`)}`)
      .join(", ");
    console.log(
      `every path, one client       ${seconds.toFixed(1)} s, ${requests} HTTP requests, ${wsSessions} WebSocket sessions (downloads, uploads, echoes, pings)`,
    );
    console.log(
      `bytes moved vs budget        ${mb(moved)} MiB moved (server meters, in + out) vs ${mb(allowed)} MiB allowed (${mb(burst)} MiB burst + ${mb(perMinute)} MiB/min × ${seconds.toFixed(1)} s): ${(moved / allowed).toFixed(2)}×`,
    );
    console.log(`refusals                     ${refusals}`);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// 4. Echo flood vs a control client --------------------------------------------------------

/** Child process: floods echoes from one address for `seconds`, reconnecting when closed;
 *  reports the replies it got per second. */
async function flooder(url: string, seconds: number): Promise<void> {
  const until = performance.now() + seconds * 1000;
  let replies = 0;
  let connections = 0;
  let closes = 0;
  while (performance.now() < until) {
    const ws = await openWs(url, "127.210.0.1").catch(() => undefined);
    if (ws === undefined) {
      await sleep(10);
      continue;
    }
    connections++;
    let open = true;
    ws.on("message", (d: Buffer) => {
      if (decodeServerMessage(d).type === "echo_reply") replies++;
    });
    ws.on("close", () => {
      open = false;
      closes++;
    });
    ws.on("error", () => undefined);
    let seq = 0;
    while (open && performance.now() < until) {
      // As fast as the socket takes them, never more than 1 MiB queued.
      while (ws.bufferedAmount < MiB && open) ws.send(encodeEcho(++seq, Uint8Array.of(1, 2)));
      await new Promise((r) => setImmediate(r));
    }
    ws.terminate();
  }
  process.send!({ replies, connections, closes, seconds }, () => process.exit(0));
}

async function flood(): Promise<void> {
  const phase = async (label: string, args: string[], withFlood: boolean) => {
    const server = await startServerProcess(args, { quiet: true });
    try {
      const warm = await controlRtts(server.url, 1); // warm-up
      const cpu0 = server.cpuSeconds();
      const child = withFlood
        ? fork(fileURLToPath(import.meta.url), ["flooder", server.url, String(SECONDS)], {
            stdio: ["ignore", "inherit", "inherit", "ipc"],
          })
        : undefined;
      const report = child
        ? new Promise<{ replies: number; connections: number; closes: number }>((resolve) =>
            child.once("message", (m) =>
              resolve(m as { replies: number; connections: number; closes: number }),
            ),
          )
        : undefined;
      await sleep(500);
      const rtts = await controlRtts(server.url, SECONDS - 1);
      const r = await report;
      const cpu = (server.cpuSeconds() - cpu0) / SECONDS;
      const m = await metricsOf(server);
      // The server's count of echoes answered: a flooder busy writing misses many replies
      // (the connection is reset under it), so its own count says less.
      const echoes = m('echo_node_probes_total{kind="echo"}') - rtts.length - warm.length;
      const flood = r
        ? `; server answered ${(echoes / SECONDS).toFixed(0)} flood echoes/s over ${r.connections} flooder connections (${m('echo_node_limit_rejections_total{limit="message_rate"}')} message_rate refusals)`
        : "";
      console.log(
        `${label.padEnd(29)}control ${rttText(rtts)}; server CPU ${(cpu * 100).toFixed(0)} %${flood}`,
      );
    } finally {
      await server.stop();
    }
  };
  await phase("no flood", [], false);
  await phase("flood, message rate lifted", ["--messages-per-second", "100000000"], true);
  await phase("flood, default limits", [], true);
}

async function main(): Promise<void> {
  console.log(`echo-node hostile bench: ${machine()}`);
  console.log(`timed phases ${SECONDS} s${QUICK ? " (BENCH_QUICK)" : ""}\n`);
  const only = process.env.HOSTILE_ONLY;
  const parts: [string, string, () => Promise<void>][] = [
    ["corpus", "hostile input", corpus],
    ["connections", "1,000 connections from one address", thousandConnections],
    ["budget", "one budget, every path", everyPath],
    ["flood", "echo flood vs a control client (control: one 2-byte echo every 5 ms)", flood],
  ];
  for (const [name, title, run] of parts) {
    if (only !== undefined && only !== "" && only !== name) continue;
    console.log(`== ${title}`);
    await run();
    console.log();
  }
  console.log(`date ${new Date().toISOString()}`);
}

if (process.argv[2] === "flooder") void flooder(process.argv[3]!, Number(process.argv[4]));
else if (process.argv[2] === "plain-ws") void plainWs();
else
  main().catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
