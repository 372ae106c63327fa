/**
 * The echo-node server: routes HTTP requests, accepts WebSocket probe connections, and owns
 * the shared state (limits, metrics, the random pool, the timer sweep). Everything is started
 * and stopped through `startEchoNode`, so tests run the same server the command line does.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { WebSocketServer, type WebSocket } from "ws";
import { OriginPolicy, requestAddress } from "./client-address.js";
import type { Config } from "./config.js";
import { apiHeaders, HttpProbes, sendLimited, sendText } from "./http-probes.js";
import { ClientLimits } from "./limits.js";
import { Metrics } from "./metrics.js";
import { loadMirrorsFile, mirrorOrigins, type Mirror } from "./mirrors.js";
import { CLOSE, PROTOCOL_VERSION, SUBPROTOCOL, WS_PATH } from "./protocol.js";
import { RandomPool } from "./random-pool.js";
import { excerpt, RefusalLog } from "./refusal-log.js";
import { contentSecurityPolicy, StaticFiles } from "./static-files.js";
import { ProbeSession } from "./ws-session.js";

export const SERVER_VERSION = "1.0.0";
/** Window over which event-loop delay quantiles are reported. */
const LAG_WINDOW_MS = 5000;
const BUCKET_SWEEP_MS = 10_000;
const LAG_RESOLUTION_MS = 10;

export interface EchoNode {
  /** e.g. http://127.0.0.1:8080 */
  readonly url: string;
  readonly port: number;
  readonly metrics: Metrics;
  readonly mirrors: readonly Mirror[];
  /** Bytes queued in user space for all WebSocket clients (for tests and the soak). */
  bufferedBytes(): number;
  /** Stops accepting, closes WebSockets with 1001, and resolves when the listener is closed. */
  close(): Promise<void>;
}

/** The request-target as a URL, or undefined when it cannot be parsed (a client can send
 *  any bytes there, e.g. `GET http://[/ HTTP/1.1`). */
export function requestTarget(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? "/", "http://placeholder");
  } catch {
    return undefined;
  }
}

export async function startEchoNode(config: Config): Promise<EchoNode> {
  const mirrors = [
    ...config.mirrors,
    ...(config.mirrorsFile !== undefined ? await loadMirrorsFile(config.mirrorsFile) : []),
  ];
  const origins = mirrorOrigins(mirrors);
  const originPolicy = new OriginPolicy([...origins, ...config.allowOrigins]);
  const metrics = new Metrics();
  const limits = new ClientLimits(config);
  const pool = new RandomPool();
  const probes = new HttpProbes({ config, limits, metrics, pool });
  const staticFiles = new StaticFiles(
    config.staticDir,
    contentSecurityPolicy(origins, config.connectSrc === "any"),
  );
  const sessions = new Set<ProbeSession>();
  const refusals = new RefusalLog();
  const logRefusal = (req: IncomingMessage, why: unknown) =>
    refusals.note(
      performance.now(),
      requestAddress(req, config.trustProxy),
      `${excerpt(req.method, 16)} ${excerpt(req.url)}: ${why instanceof Error ? why.message : String(why)}`,
    );
  const refuseBadTarget = (req: IncomingMessage, res: ServerResponse) => {
    metrics.reject("bad_request");
    logRefusal(req, "unparseable request-target");
    res.shouldKeepAlive = false;
    sendText(res, 400, "bad request-target", { "Cache-Control": "no-store", Connection: "close" });
  };
  const startedAt = performance.now();

  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  lag.enable();
  let lagSnapshot = { p50: 0, p99: 0, max: 0 };
  const lagTimer = setInterval(() => {
    // The histogram records whole sampling intervals (an idle loop reads ≈ the resolution),
    // so the lag is what exceeds the interval.
    const s = (ns: number) =>
      Number.isFinite(ns) ? Math.max(0, ns / 1e9 - LAG_RESOLUTION_MS / 1000) : 0;
    lagSnapshot = { p50: s(lag.percentile(50)), p99: s(lag.percentile(99)), max: s(lag.max) };
    lag.reset();
  }, LAG_WINDOW_MS);

  // One sweep for every connection's timers instead of a timer per connection: thousands of
  // echo clients would otherwise re-arm thousands of timers per second.
  const tickMs = Math.max(
    20,
    Math.min(1000, config.idleTimeoutMs / 4, config.slowClientTimeoutMs / 4),
  );
  let lastBucketSweep = performance.now();
  const sweepTimer = setInterval(() => {
    const now = performance.now();
    for (const session of sessions) session.tick(now);
    if (now - lastBucketSweep > BUCKET_SWEEP_MS) {
      limits.sweep(now);
      lastBucketSweep = now;
    }
  }, tickMs);

  const configJson = JSON.stringify({
    server: config.name,
    version: SERVER_VERSION,
    protocolVersion: PROTOCOL_VERSION,
    websocket: { path: WS_PATH, subprotocol: SUBPROTOCOL },
    limits: {
      maxPayloadBytes: config.maxPayload,
      maxMessageBytes: config.maxMessage,
      bytesPerMinute: config.bytesPerMinute,
      maxConnectionsPerClient: config.maxConnectionsPerClient,
      maxConnections: config.maxConnections,
      idleTimeoutMs: config.idleTimeoutMs,
      slowClientTimeoutMs: config.slowClientTimeoutMs,
    },
  });
  const mirrorsJson = JSON.stringify({ mirrors });

  const json = (res: ServerResponse, body: string, headers: Record<string, unknown>) => {
    const data = Buffer.from(body);
    res.writeHead(200, {
      ...headers,
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": data.byteLength,
    });
    res.end(data);
  };

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const url = requestTarget(req.url);
    if (url === undefined) {
      refuseBadTarget(req, res);
      return;
    }
    const path = url.pathname;
    const method = req.method ?? "GET";
    const origin = req.headers.origin;

    if (path === "/healthz") {
      sendText(res, 200, "ok", { "Cache-Control": "no-store" });
      return;
    }
    if (path === "/metrics") {
      const body = metrics.render({
        eventLoopLag: lagSnapshot,
        rssBytes: process.memoryUsage.rss(),
        uptimeSeconds: (performance.now() - startedAt) / 1000,
      });
      res.writeHead(200, {
        "Content-Type": "text/plain; version=0.0.4; charset=utf-8",
        "Cache-Control": "no-store",
      });
      res.end(body);
      return;
    }
    if (path.startsWith("/api/")) {
      if (!originPolicy.allows(origin, req.headers.host)) {
        metrics.reject("origin");
        sendText(res, 403, `origin ${origin} is not allowed to use this server`, {
          "Cache-Control": "no-store",
          Vary: "Origin",
        });
        return;
      }
      const headers = apiHeaders(origin);
      if (method === "OPTIONS") {
        res.writeHead(204, {
          ...headers,
          "Access-Control-Allow-Methods": "GET, HEAD, POST, OPTIONS",
          "Access-Control-Allow-Headers": "Content-Type",
          "Access-Control-Max-Age": "600",
        });
        res.end();
        return;
      }
      const expect = (allowed: string[]): boolean => {
        if (allowed.includes(method)) return true;
        sendText(res, 405, `${method} not allowed on ${path}`, {
          ...headers,
          Allow: allowed.join(", "),
        });
        return false;
      };
      switch (path) {
        case "/api/config":
          if (expect(["GET", "HEAD"])) json(res, configJson, headers);
          return;
        case "/api/mirrors":
          if (expect(["GET", "HEAD"])) json(res, mirrorsJson, headers);
          return;
        case "/api/ping":
        case "/api/download":
        case "/api/upload": {
          if (!expect(path === "/api/upload" ? ["POST"] : ["GET", "HEAD"])) return;
          const address = requestAddress(req, config.trustProxy);
          const admission = limits.admit(address);
          if (!admission.ok) {
            const text =
              admission.limit === "connections_total"
                ? CLOSE.CONNECTIONS_TOTAL.reason
                : CLOSE.CONNECTIONS_PER_CLIENT.reason;
            sendLimited(res, metrics, admission.limit, admission.retryAfterS, text, headers);
            return;
          }
          metrics.httpProbesInFlight++;
          res.once("close", () => {
            admission.release();
            metrics.httpProbesInFlight--;
          });
          if (path === "/api/ping") probes.ping(res, started, headers);
          else if (path === "/api/download")
            probes.download(req, res, url, address, started, headers);
          else probes.upload(req, res, address, started, headers);
          return;
        }
        default:
          sendText(res, 404, `no API endpoint ${path}`, headers);
          return;
      }
    }
    if (method !== "GET" && method !== "HEAD") {
      sendText(res, 405, `${method} not allowed`, { Allow: "GET, HEAD" });
      return;
    }
    if (!(await staticFiles.serve(req, res, path))) {
      sendText(res, 404, `not found: ${path}`, { "Cache-Control": "no-cache" });
    }
  }

  const server = createServer((req, res) => {
    route(req, res).catch((e: unknown) => {
      // A bug must cost one request, never the process (nor a stack trace per request).
      logRefusal(req, e);
      if (!res.headersSent) sendText(res, 500, "internal error", { "Cache-Control": "no-store" });
      else res.destroy();
    });
  });

  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: config.maxMessage,
    clientTracking: false,
    allowSynchronousEvents: true,
    handleProtocols: (offered) => (offered.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
  });

  /** Refuses an accepted WebSocket with a documented code: a browser cannot read the status
   *  of a refused handshake, but it can read a close code and reason. */
  const refuse = (ws: WebSocket, code: number, reason: string) => {
    ws.close(code, reason);
    const timer = setTimeout(() => ws.terminate(), 1000);
    ws.once("close", () => clearTimeout(timer));
    ws.on("error", () => undefined);
  };

  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    try {
      upgrade(req, socket, head);
    } catch (e) {
      // A bug must cost one connection, never the process.
      logRefusal(req, e);
      socket.destroy();
    }
  });

  function upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const path = requestTarget(req.url)?.pathname;
    if (path === undefined) {
      metrics.reject("bad_request");
      logRefusal(req, "unparseable request-target");
      socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    if (path !== WS_PATH) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const address = requestAddress(req, config.trustProxy);
      if (!originPolicy.allows(req.headers.origin, req.headers.host)) {
        metrics.reject("origin");
        refuse(ws, CLOSE.ORIGIN.code, CLOSE.ORIGIN.reason);
        return;
      }
      const admission = limits.admit(address);
      if (!admission.ok) {
        metrics.reject(admission.limit);
        const c =
          admission.limit === "connections_total"
            ? CLOSE.CONNECTIONS_TOTAL
            : CLOSE.CONNECTIONS_PER_CLIENT;
        refuse(ws, c.code, `${c.reason}; retry-after=${admission.retryAfterS}`);
        return;
      }
      metrics.wsOpen++;
      metrics.wsAccepted++;
      const session = new ProbeSession(ws, socket, address, { config, limits, metrics, pool });
      sessions.add(session);
      ws.once("close", () => {
        sessions.delete(session);
        session.dispose();
        admission.release();
        metrics.wsOpen--;
      });
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: config.port, host: config.host }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (e) => console.error("echo-node: server error:", e));

  const address = server.address() as AddressInfo;
  const shownHost =
    config.host === undefined || config.host === "::" || config.host === "0.0.0.0"
      ? "localhost"
      : address.family === "IPv6"
        ? `[${address.address}]`
        : address.address;

  return {
    url: `http://${shownHost}:${address.port}`,
    port: address.port,
    metrics,
    mirrors,
    bufferedBytes: () => {
      let total = 0;
      for (const s of sessions) total += s.bufferedAmount;
      return total;
    },
    close: async () => {
      clearInterval(lagTimer);
      clearInterval(sweepTimer);
      lag.disable();
      for (const s of sessions) s.close(1001, "server shutting down");
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Give WebSockets their closing handshake, then cut whatever is left.
      await new Promise((r) => setTimeout(r, sessions.size > 0 ? 200 : 0));
      server.closeAllConnections();
      await closed;
    },
  };
}
