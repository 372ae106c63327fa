/**
 * Probe correctness against a real echo-node on loopback with real `ws` and `fetch` clients:
 * echo with sequence numbers, exact byte counts for every size up to the cap, server receive
 * timing, progress counters, and the headers every probe response must carry.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  encodeDownload,
  encodeEcho,
  encodePing,
  encodeUploadStart,
  MAX_PING_COUNT,
  MSG,
  PROTOCOL_VERSION,
  SUBPROTOCOL,
  SUBPROTOCOL_PING,
  type ServerMessage,
} from "../src/protocol.js";
import type { EchoNode } from "../src/server.js";
import { openClient, runCleanups, startTestNode, TestClient } from "./helpers.js";

/** Small so that every size from 0 to the cap can be tried in a few seconds. */
const CAP = 4096;
/** These tests send tens of thousands of messages as fast as loopback allows, which the
 *  default message rate (a flood limit, tested in limits.test.ts) would rightly refuse. */
const UNLIMITED_MESSAGES = 1_000_000;
let node: EchoNode;

beforeAll(async () => {
  node = await startTestNode({
    maxPayload: CAP,
    maxMessage: 1024,
    bytesPerMinute: 1024 ** 3,
    messagesPerSecond: UNLIMITED_MESSAGES,
  });
});
afterAll(runCleanups);

function uploadData(bytes: number): Uint8Array {
  const m = new Uint8Array(1 + bytes).fill(0xa5);
  m[0] = MSG.UPLOAD_DATA;
  return m;
}

/** Sends an upload of `bytes` in messages of at most `chunk` bytes and returns the ack. */
async function upload(c: TestClient, probeId: number, bytes: number, chunk: number) {
  c.send(encodeUploadStart(probeId, bytes));
  for (let sent = 0; sent < bytes; sent += chunk) c.send(uploadData(Math.min(chunk, bytes - sent)));
  return c.next();
}

/** Requests a download and returns the payload bytes received and the END message. */
async function download(c: TestClient, probeId: number, bytes: number, chunk = 0) {
  c.send(encodeDownload(probeId, bytes, chunk));
  let received = 0;
  let messages = 0;
  for (;;) {
    const m = await c.next();
    if (m.type === "download_data") {
      received += m.bytes;
      messages++;
    } else return { received, messages, end: m };
  }
}

describe("WebSocket probes", () => {
  it("greets with the protocol version and limits, and selects the subprotocol when offered", async () => {
    const c = new TestClient(node.url, {}, [SUBPROTOCOL]);
    const c2 = new TestClient(node.url);
    const hello = await c.open();
    expect(hello).toEqual({
      type: "hello",
      version: PROTOCOL_VERSION,
      maxPayload: CAP,
      maxMessage: 1024,
    });
    expect(c.ws.protocol).toBe(SUBPROTOCOL);
    await c2.open();
    expect(c2.ws.protocol).toBe("");
  });

  it("echoes with sequence numbers and payload, in order", async () => {
    const c = await openClient(node);
    for (let seq = 0; seq < 200; seq++) {
      c.send(encodeEcho(seq * 3 + 1, new Uint8Array([seq & 0xff, 0x42])));
    }
    for (let seq = 0; seq < 200; seq++) {
      const m = await c.next();
      expect(m.type).toBe("echo_reply");
      if (m.type !== "echo_reply") return;
      expect(m.seq).toBe(seq * 3 + 1);
      expect([...m.payload]).toEqual([seq & 0xff, 0x42]);
    }
    // The NWS 2-byte exchange and an empty echo are both valid.
    c.send(encodeEcho(1000));
    expect(await c.next()).toMatchObject({ type: "echo_reply", seq: 1000 });
  });

  it("selects the timed-ping revision when offered, and plain v1 to a client without it", async () => {
    const both = new TestClient(node.url, {}, [SUBPROTOCOL_PING, SUBPROTOCOL]);
    const old = new TestClient(node.url, {}, [SUBPROTOCOL]);
    await both.open();
    await old.open();
    expect(both.ws.protocol).toBe(SUBPROTOCOL_PING);
    expect(old.ws.protocol).toBe(SUBPROTOCOL);
    // The server allows few connections per address: the tests after this one need theirs.
    both.terminate();
    old.terminate();
  });

  it("times a train of WebSocket pings answered by the client's stack, one at a time", async () => {
    const c = new TestClient(node.url, {}, [SUBPROTOCOL_PING, SUBPROTOCOL]);
    await c.open();
    // What the server sends: each ping only after the previous one's pong (a client that
    // answers nothing gets one ping, never a burst).
    const pings: Buffer[] = [];
    c.ws.on("ping", (data: Buffer) => pings.push(Buffer.from(data)));
    c.send(encodePing(7, 9));
    const reply = await c.next();
    expect(reply.type).toBe("ping_reply");
    if (reply.type !== "ping_reply") return;
    expect(reply.seq).toBe(7);
    expect(reply.rttsMs).toHaveLength(9);
    for (const ms of reply.rttsMs) {
      expect(ms).toBeGreaterThan(0);
      expect(ms).toBeLessThan(1000);
    }
    expect(pings.map((p) => [...p])).toEqual(Array.from({ length: 9 }, (_, i) => [7, i]));
    // PING and ECHO share the sequence: an echo after it must be above 7.
    c.send(encodeEcho(8));
    expect(await c.next()).toMatchObject({ type: "echo_reply", seq: 8 });
    c.send(encodePing(MAX_PING_COUNT + 100, MAX_PING_COUNT));
    const full = await c.next();
    expect(full).toMatchObject({ type: "ping_reply", seq: MAX_PING_COUNT + 100 });
    c.terminate();
  });

  it("sends a client that does not answer one ping and waits, and refuses a second PING", async () => {
    const c = new TestClient(node.url, { autoPong: false }, [SUBPROTOCOL_PING]);
    await c.open();
    let pings = 0;
    c.ws.on("ping", () => pings++);
    c.send(encodePing(1, 16));
    await new Promise((r) => setTimeout(r, 200));
    expect(pings).toBe(1);
    // An unsolicited or wrong pong is ignored (RFC 6455 §5.5.3), not counted as the answer.
    c.ws.pong(Buffer.from([9, 9]));
    await new Promise((r) => setTimeout(r, 100));
    expect(pings).toBe(1);
    c.send(encodePing(2, 1));
    expect(await c.closed).toEqual({
      code: 4001,
      reason: "message out of order: PING 2 while the pings of 1 are running",
    });
  });

  it("refuses a PING asking for no pings or more than its bound", async () => {
    for (const count of [0, MAX_PING_COUNT + 1]) {
      const c = await openClient(node);
      c.send(encodePing(1, count));
      const closed = await c.closed;
      expect(closed.code).toBe(4000);
      expect(closed.reason).toContain(`PING count ${count}`);
    }
  });

  it("acknowledges uploads of every size from 0 to the cap with the exact count", async () => {
    const c = await openClient(node);
    for (let bytes = 0; bytes <= CAP; bytes++) {
      // Alternate message sizes so single- and multi-message uploads are both covered.
      const ack = await upload(c, bytes, bytes, bytes % 2 === 0 ? 1023 : 333).catch((e: Error) => {
        throw new Error(`upload of ${bytes}: ${e.message}`);
      });
      if (ack.type !== "upload_ack" || ack.bytes !== bytes || ack.probeId !== bytes) {
        expect.fail(`upload of ${bytes}: got ${JSON.stringify(ack)}`);
      }
      if (!(ack.lastByteAt >= ack.firstByteAt)) expect.fail(`upload of ${bytes}: times reversed`);
    }
  });

  it("sends downloads of every size from 0 to the cap with the exact count", async () => {
    const c = await openClient(node);
    for (let bytes = 0; bytes <= CAP; bytes++) {
      const chunk = bytes % 3 === 0 ? 0 : 1024;
      const { received, end } = await download(c, bytes + 1, bytes, chunk);
      if (
        received !== bytes ||
        end.type !== "download_end" ||
        end.bytes !== bytes ||
        end.probeId !== bytes + 1
      ) {
        expect.fail(`download of ${bytes}: received ${received}, end ${JSON.stringify(end)}`);
      }
    }
  });

  it("splits downloads into messages of the requested size, clamped", async () => {
    const c = await openClient(node);
    expect((await download(c, 1, 4096, 1024)).messages).toBe(4);
    expect((await download(c, 2, 4096, 1)).messages).toBe(4); // clamped up to 1 KiB
    expect((await download(c, 3, 4096, 0)).messages).toBe(1); // default 256 KiB
  });

  it("reports receive times of a spread-out upload from the server's clock, sub-millisecond", async () => {
    const c = await openClient(node);
    c.send(encodeUploadStart(9, 3000));
    const sentAt = performance.now();
    c.send(uploadData(1000));
    await new Promise((r) => setTimeout(r, 60));
    c.send(uploadData(1000));
    await new Promise((r) => setTimeout(r, 60));
    c.send(uploadData(1000));
    const ack = await c.next();
    const elapsed = performance.now() - sentAt;
    expect(ack.type).toBe("upload_ack");
    if (ack.type !== "upload_ack") return;
    const span = ack.lastByteAt - ack.firstByteAt;
    // Same host, same clock source: the server's span lies within what the client saw.
    expect(span).toBeGreaterThan(100);
    expect(span).toBeLessThanOrEqual(elapsed + 1);
    expect(Number.isInteger(ack.firstByteAt) && Number.isInteger(ack.lastByteAt)).toBe(false);
    // The first read carried the first message: its bytes are the ones without a duration.
    // Counted at the socket, so with that message's frame header (8 bytes at this size).
    expect(ack.firstReadBytes).toBeGreaterThanOrEqual(1000);
    expect(ack.firstReadBytes).toBeLessThanOrEqual(1000 + 14);
  });

  it("counts the upload data that shares a read with UPLOAD_START as the first read's", async () => {
    const c = await openClient(node);
    // One write, so one read on loopback: the start and a first message of 500 bytes.
    const start = encodeUploadStart(10, 1500);
    const first = uploadData(500);
    const frames = (m: Uint8Array) => {
      // A masked client frame as ws would send it (mask of zeros, so the payload is as is).
      const f = new Uint8Array(m.byteLength + (m.byteLength < 126 ? 6 : 8));
      f[0] = 0x82;
      if (m.byteLength < 126) f[1] = 0x80 | m.byteLength;
      else {
        f[1] = 0x80 | 126;
        new DataView(f.buffer).setUint16(2, m.byteLength);
      }
      f.set(m, f.byteLength - m.byteLength);
      return f;
    };
    const socket = (c.ws as unknown as { _socket: import("node:net").Socket })._socket;
    socket.write(Buffer.concat([frames(start), frames(first)]));
    await new Promise((r) => setTimeout(r, 50));
    c.send(uploadData(1000));
    const ack = await c.next();
    if (ack.type !== "upload_ack") return expect.fail(`got ${ack.type}`);
    expect(ack.bytes).toBe(1500);
    // 500 bytes with their type byte and 8-byte frame header, after the UPLOAD_START frame.
    expect(ack.firstReadBytes).toBe(509);
    expect(ack.lastByteAt - ack.firstByteAt).toBeGreaterThan(40);
    // The node allows 8 connections per address and the tests share it: free this one.
    c.terminate();
  });

  it("sends progress counters during long transfers", async () => {
    const slow = await startTestNode({ maxPayload: 1024 ** 2, maxMessage: 64 * 1024 });
    const c = await openClient(slow);
    c.send(encodeUploadStart(5, 3 * 1024, 50));
    const seen: ServerMessage[] = [];
    for (let i = 0; i < 3; i++) {
      c.send(uploadData(1024));
      await new Promise((r) => setTimeout(r, 80));
    }
    for (;;) {
      const m = await c.next();
      seen.push(m);
      if (m.type === "upload_ack") break;
    }
    const progress = seen.filter((m) => m.type === "progress");
    expect(progress.length).toBeGreaterThanOrEqual(2);
    const counts = progress.map((m) => (m.type === "progress" ? m.bytes : -1));
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(counts.every((n) => n > 0 && n <= 3072 && n % 1024 === 0)).toBe(true);
    expect(seen.at(-1)).toMatchObject({ type: "upload_ack", bytes: 3072 });
  });

  it("allows echoes while a download is running and answers them", async () => {
    const c = await openClient(node);
    c.send(encodeDownload(1, CAP, 1024));
    c.send(encodeEcho(1));
    const types: string[] = [];
    for (;;) {
      const m = await c.next();
      types.push(m.type);
      if (m.type === "download_end") break;
    }
    if (!types.includes("echo_reply")) expect((await c.next()).type).toBe("echo_reply");
  });
});

describe("HTTP probes", () => {
  const origin = "http://mirror.test:8080";
  let allowed: EchoNode;
  beforeAll(async () => {
    allowed = await startTestNode({
      maxPayload: CAP,
      bytesPerMinute: 1024 ** 3,
      messagesPerSecond: UNLIMITED_MESSAGES,
      allowOrigins: [origin],
    });
  });

  function expectProbeHeaders(res: Response, withOrigin: boolean) {
    expect(res.headers.get("cache-control")).toBe("no-store, no-transform");
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("server-timing")).toMatch(/^proc;dur=\d+\.\d{3}/);
    expect(res.headers.get("timing-allow-origin")).toBe(withOrigin ? origin : "*");
    if (withOrigin) {
      expect(res.headers.get("access-control-allow-origin")).toBe(origin);
      expect(res.headers.get("access-control-expose-headers")).toContain("Server-Timing");
    }
  }

  it("answers the ping, download and upload with timing and CORS headers", async () => {
    for (const withOrigin of [false, true]) {
      const headers: Record<string, string> = { "Accept-Encoding": "gzip, br" };
      if (withOrigin) headers.Origin = origin;
      const ping = await fetch(`${allowed.url}/api/ping`, { headers });
      expect(ping.status).toBe(204);
      expectProbeHeaders(ping, withOrigin);
      const down = await fetch(`${allowed.url}/api/download?bytes=1000`, { headers });
      expect(down.status).toBe(200);
      expect(down.headers.get("content-type")).toBe("application/octet-stream");
      expectProbeHeaders(down, withOrigin);
      expect((await down.arrayBuffer()).byteLength).toBe(1000);
      const up = await fetch(`${allowed.url}/api/upload`, {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/octet-stream" },
        body: new Uint8Array(777),
      });
      expectProbeHeaders(up, withOrigin);
      expect(up.headers.get("server-timing")).toMatch(/recv;dur=/);
      const body = (await up.json()) as {
        bytes: number;
        firstByteAt: number;
        lastByteAt: number;
        firstReadBytes: number;
      };
      expect(body.bytes).toBe(777);
      expect(body.lastByteAt).toBeGreaterThanOrEqual(body.firstByteAt);
      // One read on loopback: every byte in the first, none timed.
      expect(body.firstReadBytes).toBe(777);
    }
  });

  it("answers the CORS preflight for uploads", async () => {
    const res = await fetch(`${allowed.url}/api/upload`, {
      method: "OPTIONS",
      headers: {
        Origin: origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    expect(res.headers.get("access-control-allow-headers")).toContain("Content-Type");
  });

  it("downloads and uploads exactly N bytes for every size from 0 to the cap (sampled densely)", async () => {
    const sizes: number[] = [];
    for (let n = 0; n <= CAP; n += n < 300 ? 1 : 7) sizes.push(n);
    sizes.push(CAP - 1, CAP);
    for (const n of sizes) {
      const down = await fetch(`${allowed.url}/api/download?bytes=${n}`);
      const got = (await down.arrayBuffer()).byteLength;
      if (down.status !== 200 || got !== n || down.headers.get("content-length") !== String(n)) {
        expect.fail(`download ${n}: status ${down.status}, ${got} bytes`);
      }
      const up = await fetch(`${allowed.url}/api/upload`, {
        method: "POST",
        body: new Uint8Array(n),
      });
      const body = (await up.json()) as { bytes: number };
      if (body.bytes !== n) expect.fail(`upload ${n}: server counted ${body.bytes}`);
    }
  });

  it("serves random, incompressible bytes", async () => {
    const a = new Uint8Array(
      await (await fetch(`${allowed.url}/api/download?bytes=4096`)).arrayBuffer(),
    );
    const counts = new Array(256).fill(0);
    for (const b of a) counts[b]++;
    expect(Math.max(...counts)).toBeLessThan(60); // uniform: about 16 each
  });

  it("rejects bad sizes and methods with a clear message", async () => {
    for (const q of ["", "bytes=", "bytes=-1", "bytes=1e3", "bytes=0x10", "bytes=12345678901"]) {
      const res = await fetch(`${allowed.url}/api/download?${q}`);
      expect(res.status).toBe(400);
      expect(await res.text()).toMatch(/bytes must be a whole number|exceeds the payload cap/);
    }
    const res = await fetch(`${allowed.url}/api/upload`);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect((await fetch(`${allowed.url}/api/nope`)).status).toBe(404);
  });

  it("serves health, config and metrics", async () => {
    expect(await (await fetch(`${allowed.url}/healthz`)).text()).toBe("ok\n");
    const config = (await (await fetch(`${allowed.url}/api/config`)).json()) as Record<
      string,
      unknown
    >;
    expect(config).toMatchObject({
      server: "test-node",
      protocolVersion: PROTOCOL_VERSION,
      websocket: { path: "/ws", subprotocol: SUBPROTOCOL },
      limits: { maxPayloadBytes: CAP, maxConnectionsPerClient: 8, idleTimeoutMs: 60000 },
    });
    const metrics = await (await fetch(`${allowed.url}/metrics`)).text();
    for (const kind of [
      "echo",
      "ping",
      "upload",
      "download",
      "http_ping",
      "http_download",
      "http_upload",
    ]) {
      expect(metrics).toMatch(new RegExp(`^echo_node_probes_total\\{kind="${kind}"\\} \\d+$`, "m"));
    }
    expect(metrics).toMatch(/^echo_node_probes_total\{kind="http_ping"\} [1-9]/m);
    for (const name of [
      "echo_node_websocket_connections",
      "echo_node_bytes_received_total",
      "echo_node_bytes_sent_total",
      'echo_node_limit_rejections_total{limit="byte_budget"}',
      'echo_node_event_loop_lag_seconds{quantile="0.99"}',
      "process_resident_memory_bytes",
    ]) {
      expect(metrics).toContain(`\n${name} `);
    }
  });
});
