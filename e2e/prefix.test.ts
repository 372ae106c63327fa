/**
 * The page under a path, as a mirror behind a reverse proxy serves it
 * (`https://mirror.example.edu/nowcast/`, README's example): a real echo-node behind a small
 * reverse proxy of this test that passes `/nowcast/…` on to echo-node's `/…` (WebSocket
 * upgrades included) and answers 404 to everything else, and the real page in Chromium at
 * `/nowcast/`. Its assets, worker, forecasters, samples, server limits, mirror list and every
 * probe must stay under the path: before, the page asked for `/assets/…` at the root and was
 * blank there.
 */
import { createServer, request, type IncomingMessage, type Server } from "node:http";
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { missing, startRig, type Rig } from "./harness.js";
import { waitForMeasurements } from "./page-helpers.js";

const why = missing();
if (why !== undefined) console.warn(`e2e: skipping the path-prefix test: ${why}`);

const PREFIX = "/nowcast";

/** The proxy: `PREFIX/x` → echo-node's `/x`; what it was asked outside the prefix. */
interface Proxy {
  server: Server;
  url: string;
  strays: string[];
}

async function startProxy(upstream: () => number): Promise<Proxy> {
  const strays: string[] = [];
  const inside = (req: IncomingMessage): string | undefined => {
    const url = req.url ?? "";
    return url.startsWith(`${PREFIX}/`) ? url.slice(PREFIX.length) : undefined;
  };
  const server = createServer((req, res) => {
    const path = inside(req);
    if (path === undefined) {
      strays.push(req.url ?? "");
      res.writeHead(404).end("not under the prefix");
      return;
    }
    const up = request(
      { host: "127.0.0.1", port: upstream(), method: req.method, path, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  server.on("upgrade", (req, socket, head) => {
    const path = inside(req);
    if (path === undefined) {
      strays.push(req.url ?? "");
      socket.destroy();
      return;
    }
    const up = connect(upstream(), "127.0.0.1", () => {
      const lines = [`${req.method} ${path} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      }
      up.write(`${lines.join("\r\n")}\r\n\r\n`);
      up.write(head);
      up.pipe(socket);
      socket.pipe(up);
    });
    up.on("error", () => socket.destroy());
    socket.on("error", () => up.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}`, strays };
}

describe.skipIf(why !== undefined)("the page under a path", () => {
  let rig: Rig;
  let proxy: Proxy;
  beforeAll(async () => {
    let port = 0;
    proxy = await startProxy(() => port);
    rig = await startRig({ origins: [proxy.url] });
    port = Number(new URL(rig.node.url).port);
  });
  afterAll(async () => {
    await rig?.close();
    proxy?.server.closeAllConnections();
    await new Promise((r) => proxy?.server.close(r));
  });

  it("loads, measures over fetch and WebSocket, and asks for nothing outside its path", async () => {
    const page = await rig.newPage();
    const errors: string[] = [];
    const failed: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    page.on("response", (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    try {
      await page.goto(`${proxy.url}${PREFIX}/?period=1&transport=both&size=64k`);
      await waitForMeasurements(page, "rtt/websocket", 3, 15_000);
      await waitForMeasurements(page, "bandwidth_down/http", 2, 15_000);
      // The sample files' links stay under the path too.
      const sample = await page.getAttribute('a[download][href$="rtt.csv"]', "href");
      expect(new URL(sample!, page.url()).pathname).toBe(`${PREFIX}/samples/rtt.csv`);
      const r = await page.request.get(new URL(sample!, page.url()).href);
      expect(r.status()).toBe(200);
      expect(proxy.strays).toEqual([]);
      expect(failed).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
