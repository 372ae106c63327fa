/**
 * HTTP probes: a tiny ping, a download of exactly N random bytes, and an upload sink that
 * reports the byte count and the server's receive times. Every probe response carries the
 * headers a page on this or another mirror needs to time it (spec "echo-node"). A client that
 * stops reading (or sending an upload) is cut off by the server's slow-reader guard, which
 * covers every HTTP response (server.ts `onRequest`).
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import type { Config } from "./config.js";
import type { ClientLimits, LimitName } from "./limits.js";
import type { Metrics } from "./metrics.js";
import type { RandomPool } from "./random-pool.js";
import { Arrivals } from "./arrival.js";

/** Body writes are this large: big enough that per-write overhead vanishes, small enough
 *  that a slow reader holds at most one of them beyond the socket's own buffer. */
const HTTP_CHUNK = 1024 * 1024;

/** The client a probe is for: its limit key, and how to tell its connection's traffic meter
 *  that bytes were paid up front. */
export interface ProbeClient {
  key: string;
  prepay(bytes: number): void;
  /** The request asked `Expect: 100-continue` (RFC 9110 §10.1.1): its body is sent only once
   *  the server says it will read it. */
  expectsContinue: boolean;
}

export interface HttpProbeDeps {
  config: Config;
  limits: ClientLimits;
  metrics: Metrics;
  pool: RandomPool;
}

/**
 * CORS and timing headers for any /api response. `origin` is the request's Origin when the
 * allowlist accepted it. Timing-Allow-Origin is what lets Resource Timing report the phases
 * of a cross-origin probe; without it the page would only see a total duration.
 */
export function apiHeaders(origin: string | undefined): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {
    "Cache-Control": "no-store, no-transform",
    "X-Content-Type-Options": "nosniff",
    "Timing-Allow-Origin": origin ?? "*",
    // A cross-origin-isolated page (static-files.ts) may load a probe answer in any mode:
    // they hold nothing but counts, times and random bytes.
    "Cross-Origin-Resource-Policy": "cross-origin",
  };
  if (origin !== undefined) {
    headers["Access-Control-Allow-Origin"] = origin;
    headers["Access-Control-Expose-Headers"] = "Server-Timing, Retry-After";
    headers["Vary"] = "Origin";
  }
  return headers;
}

/** `Server-Timing` metric in milliseconds with microsecond resolution. */
export function serverTiming(name: string, ms: number): string {
  return `${name};dur=${ms.toFixed(3)}`;
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  headers: OutgoingHttpHeaders,
): void {
  const body = Buffer.from(text.endsWith("\n") ? text : text + "\n");
  res.writeHead(status, {
    ...headers,
    "Content-Type": "text/plain; charset=utf-8",
    "Content-Length": body.byteLength,
  });
  res.end(body);
}

/** 429 with Retry-After (also for the total-capacity limit: the client's remedy is the same). */
export function sendLimited(
  res: ServerResponse,
  metrics: Metrics,
  limit: LimitName,
  retryAfterS: number,
  message: string,
  headers: OutgoingHttpHeaders,
): void {
  metrics.reject(limit);
  sendText(res, 429, `${message}; retry after ${retryAfterS} s`, {
    ...headers,
    "Retry-After": String(retryAfterS),
    // The request body, if any, is not read: the connection is closed after the answer
    // instead of draining it (RFC 9112 §9.6), so refused bytes cost nothing more.
    Connection: "close",
  });
}

/** Parses `bytes=N` strictly: digits only, so "1e9", "0x10" or "-1" are errors, not sizes. */
export function parseByteCount(text: string | null): number | undefined {
  if (text === null || !/^\d{1,10}$/.test(text)) return undefined;
  return Number(text);
}

export class HttpProbes {
  constructor(private readonly deps: HttpProbeDeps) {}

  ping(res: ServerResponse, started: number, headers: OutgoingHttpHeaders): void {
    this.deps.metrics.probes.http_ping++;
    res.writeHead(204, {
      ...headers,
      "Server-Timing": serverTiming("proc", performance.now() - started),
    });
    res.end();
  }

  download(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    client: ProbeClient,
    started: number,
    headers: OutgoingHttpHeaders,
  ): void {
    const { config, limits, metrics, pool } = this.deps;
    const bytes = parseByteCount(url.searchParams.get("bytes"));
    if (bytes === undefined) {
      sendText(res, 400, "bytes must be a whole number, e.g. /api/download?bytes=65536", headers);
      return;
    }
    if (bytes > config.maxPayload) {
      metrics.reject("payload_cap");
      sendText(res, 400, `bytes ${bytes} exceeds the payload cap of ${config.maxPayload}`, headers);
      return;
    }
    const grant = limits.takeBytes(client.key, bytes, performance.now());
    if (!grant.ok) {
      sendLimited(res, metrics, "byte_budget", grant.retryAfterS, "byte budget exceeded", headers);
      return;
    }
    client.prepay(bytes);
    metrics.probes.http_download++;
    res.writeHead(200, {
      ...headers,
      "Content-Type": "application/octet-stream",
      "Content-Length": bytes,
      "Server-Timing": serverTiming("proc", performance.now() - started),
    });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    let sent = 0;
    // Writes until the socket pushes back, then resumes on 'drain': at most one chunk waits
    // in user space however slowly the client reads.
    const write = (): void => {
      while (sent < bytes && !res.destroyed) {
        const n = Math.min(HTTP_CHUNK, bytes - sent);
        sent += n;
        metrics.bytesOut += n;
        if (!res.write(pool.raw(n))) {
          res.once("drain", write);
          return;
        }
      }
      if (!res.destroyed) res.end();
    };
    write();
  }

  upload(
    req: IncomingMessage,
    res: ServerResponse,
    client: ProbeClient,
    started: number,
    headers: OutgoingHttpHeaders,
  ): void {
    const { config, limits, metrics } = this.deps;
    const declared = req.headers["content-length"];
    if (declared === undefined || !/^\d{1,10}$/.test(declared)) {
      sendText(res, 411, "upload needs a Content-Length (send an ArrayBuffer or Blob)", {
        ...headers,
        Connection: "close",
      });
      return;
    }
    const bytes = Number(declared);
    if (bytes > config.maxPayload) {
      metrics.reject("payload_cap");
      sendText(
        res,
        413,
        `upload of ${bytes} bytes exceeds the payload cap of ${config.maxPayload}`,
        {
          ...headers,
          Connection: "close",
        },
      );
      return;
    }
    const grant = limits.takeBytes(client.key, bytes, performance.now());
    if (!grant.ok) {
      sendLimited(res, metrics, "byte_budget", grant.retryAfterS, "byte budget exceeded", headers);
      return;
    }
    client.prepay(bytes);
    if (client.expectsContinue) res.writeContinue();
    metrics.probes.http_upload++;
    let received = 0;
    // Each body piece is one socket read's share of the body; the first shares its read with
    // the request head, so its read's length is not known (arrival.ts).
    const arrivals = new Arrivals();
    req.on("data", (chunk: Buffer) => {
      const now = performance.now();
      arrivals.read(now, received === 0 ? undefined : chunk.byteLength, chunk.byteLength);
      received += chunk.byteLength;
      metrics.bytesIn += chunk.byteLength;
    });
    req.on("end", () => {
      const now = performance.now();
      const lastByteAt = received === 0 ? now : arrivals.lastAt;
      const start = arrivals.start(received) ?? { at: lastByteAt, bytes: 0 };
      const firstByteAt = start.at;
      const body = Buffer.from(
        JSON.stringify({
          bytes: received,
          firstByteAt,
          lastByteAt,
          firstReadBytes: start.bytes,
          durationMs: lastByteAt - firstByteAt,
        }),
      );
      res.writeHead(200, {
        ...headers,
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": body.byteLength,
        "Server-Timing": [
          serverTiming("proc", now - started),
          serverTiming("recv", lastByteAt - firstByteAt),
        ].join(", "),
      });
      res.end(body);
    });
  }
}
