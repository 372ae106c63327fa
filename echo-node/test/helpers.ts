/**
 * Test helpers: a real echo-node on an ephemeral loopback port and a small promise-based
 * WebSocket client speaking protocol v1. Every helper that opens something registers it for
 * closing, so a failing test cannot leave a server or socket behind.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocket } from "ws";
import { defaultConfig, type Config } from "../src/config.js";
import { decodeServerMessage, type ServerMessage } from "../src/protocol.js";
import { startEchoNode, type EchoNode } from "../src/server.js";

export const cleanups: (() => Promise<void> | void)[] = [];

export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!();
}

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "echo-node-test-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function startTestNode(overrides: Partial<Config> = {}): Promise<EchoNode> {
  const node = await startEchoNode({
    ...defaultConfig(),
    port: 0,
    host: "127.0.0.1",
    staticDir: join(tmpdir(), "echo-node-test-no-such-dir"),
    name: "test-node",
    ...overrides,
  });
  cleanups.push(() => node.close());
  return node;
}

export interface Closed {
  code: number;
  reason: string;
}

/** A protocol client: `next()` resolves with the next server message, `closed` with the close
 *  code and reason. */
export class TestClient {
  readonly ws: WebSocket;
  readonly closed: Promise<Closed>;
  private queue: ServerMessage[] = [];
  private waiters: ((m: ServerMessage) => void)[] = [];

  constructor(
    url: string,
    options: ConstructorParameters<typeof WebSocket>[2] = {},
    protocols: string[] = [],
  ) {
    this.ws = new WebSocket(url.replace(/^http/, "ws") + "/ws", protocols, {
      perMessageDeflate: false,
      ...options,
    });
    this.ws.on("error", () => undefined);
    this.ws.on("message", (data: Buffer) => {
      const m = decodeServerMessage(data);
      const waiter = this.waiters.shift();
      if (waiter) waiter(m);
      else this.queue.push(m);
    });
    this.closed = new Promise((resolve) =>
      this.ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    cleanups.push(() => this.terminate());
  }

  /** Waits for the connection and its HELLO. */
  async open(): Promise<ServerMessage & { type: "hello" }> {
    const hello = await this.next();
    if (hello.type !== "hello") throw new Error(`expected hello, got ${hello.type}`);
    return hello;
  }

  next(timeoutMs = 5000): Promise<ServerMessage> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error("timed out waiting for a message")),
        timeoutMs,
      );
      this.waiters.push((m) => {
        clearTimeout(timer);
        resolve(m);
      });
    });
  }

  send(data: Uint8Array | string): void {
    this.ws.send(data);
  }

  terminate(): void {
    this.ws.terminate();
  }
}

export async function openClient(
  node: EchoNode,
  options: ConstructorParameters<typeof WebSocket>[2] = {},
): Promise<TestClient> {
  const client = new TestClient(node.url, options);
  await client.open();
  return client;
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)),
  ]);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until true, for states reached asynchronously (counts after a close). */
export async function eventually(
  check: () => boolean,
  ms = 3000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
