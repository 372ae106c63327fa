/**
 * The echo-node server: accepts TCP connections under the per-client limits, routes HTTP
 * requests, accepts WebSocket probe connections, and owns the shared state (limits, metrics,
 * the random pool, the timer sweep). Everything is started and stopped through
 * `startEchoNode`, so tests run the same server the command line does.
 *
 * Every path a client can reach runs under error handling that answers that one client (a
 * 4xx/5xx, a close with a reason, or a closed socket) and keeps serving everyone else; refusals
 * are logged one line per client per interval (refusal-log.ts).
 */
import {
  createServer,
  STATUS_CODES,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { networkInterfaces } from "node:os";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { WebSocketServer, type WebSocket } from "ws";
import {
  clientAddress,
  ForwardingWarnings,
  limitKey,
  normalizeAddress,
  ProxyTrust,
  type KeyPrefixes,
} from "./client-address.js";
import { burstBytes, VERSION, type Config } from "./config.js";
import { apiHeaders, HttpProbes, sendLimited, sendText, type ProbeClient } from "./http-probes.js";
import { ClientLimits, type LimitName } from "./limits.js";
import { Metrics } from "./metrics.js";
import { loadMirrorsFile, mirrorOrigins, type Mirror } from "./mirrors.js";
import { OriginPolicy, type Verdict } from "./origin-policy.js";
import { CLOSE, PROTOCOL_VERSION, SUBPROTOCOL, SUBPROTOCOL_PING, WS_PATH } from "./protocol.js";
import { RandomPool } from "./random-pool.js";
import { install as boundReceiveBuffering, receiveBackstop } from "./receive-buffers.js";
import { excerpt, RefusalLog } from "./refusal-log.js";
import { contentSecurityPolicy, StaticFiles } from "./static-files.js";
import { cut } from "./cut.js";
import { TrafficMeter } from "./traffic-meter.js";
import { ProbeSession } from "./ws-session.js";

/** What /api/config and /healthz report: package.json's version (config.ts VERSION). */
export const SERVER_VERSION = VERSION;
/** Window over which event-loop delay quantiles are reported. */
const LAG_WINDOW_MS = 5000;
const BUCKET_SWEEP_MS = 10_000;
const LAG_RESOLUTION_MS = 10;
/** How long a whole request (headers and body) may take: a 64 MiB upload at 2 Mbit/s. Uploads
 *  that stall are cut sooner by the slow-client timeout. */
const REQUEST_TIMEOUT_MS = 300_000;
/**
 * Debt beyond which a connection that is still moving unpaid bytes (a file, echoes, framing)
 * is cut, and new connections are dropped unanswered: at most this, or a quarter of the
 * budget's capacity. New work is refused (429, a close) as soon as there is any debt; running
 * work is given this slack so that a page at the edge of its budget is never cut in the
 * middle of a probe by the few bytes of framing and echoes around it.
 */
const DEBT_CUT_BYTES = 4 * 1024 * 1024;
/** Lingering close (RFC 9112 §9.6) after answering a request whose body is not wanted. */
const LINGER_MS = 1000;
const LINGER_BYTES = 256 * 1024;
/**
 * Header fields a request may have. Node accepts 2,000 within its 16 KiB of headers, and a
 * request costs one message token however many it has: 1,500 one-byte headers made each
 * request cost about five times a plain one, and one client within its rate took most of a
 * core. Browsers send about 20, a proxy adds a few; 100 is Apache's LimitRequestFields.
 */
export const MAX_REQUEST_HEADERS = 100;

export interface EchoNode {
  /** e.g. http://127.0.0.1:8080 */
  readonly url: string;
  readonly port: number;
  readonly metrics: Metrics;
  readonly mirrors: readonly Mirror[];
  readonly limits: ClientLimits;
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

/** Whether a request announces content (RFC 9112 §6.1, §6.2); Node has checked the framing. */
function hasBody(headers: IncomingMessage["headers"]): boolean {
  if (headers["transfer-encoding"] !== undefined) return true;
  const length = headers["content-length"];
  return length !== undefined && Number(length) > 0;
}

/** This machine's interface addresses: what a page's own origin may be derived from. */
function ownAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) =>
    (list ?? []).map((i) => i.address.replace(/%.*$/, "")),
  );
}

/** A raw HTTP answer for a socket that has no request object (refused at accept, or a
 *  request Node could not parse). */
function rawAnswer(status: number, text: string, extra = ""): string {
  const body = text + "\n";
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\nConnection: close\r\n` +
    `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Cache-Control: no-store\r\n${extra}\r\n${body}`
  );
}

/** Whether a request has more than MAX_REQUEST_HEADERS header fields. Node keeps at most
 *  `server.maxHeadersCount` of them, set to one more than that. */
function tooManyHeaders(req: IncomingMessage): boolean {
  return req.rawHeaders.length / 2 > MAX_REQUEST_HEADERS;
}

const TOO_MANY_HEADERS = `more than ${MAX_REQUEST_HEADERS} header fields`;

/**
 * A refusal by the origin policy as the log says it: naming the refused origin, which is
 * client-controlled text and so quoted and cut like any other (refusal-log.ts `excerpt`).
 * The other verdicts' reasons are fixed text.
 */
function policyRefusal(
  verdict: Extract<Verdict, { ok: false }>,
  headers: IncomingMessage["headers"],
): string {
  return verdict.limit === "origin" ? `origin ${excerpt(headers.origin)} not allowed` : verdict.why;
}

/** One accepted TCP connection. */
interface Connection {
  socket: Socket;
  /** The TCP peer, normalised. */
  peer: string;
  /** Whether the peer is a trusted proxy (`--trust-proxy`). */
  trusted: boolean;
  /** The client its traffic is charged to: the peer's key, or that of the latest request. */
  key: string;
  address: string;
  meter: TrafficMeter;
  session?: ProbeSession;
  /** Handed to `ws` (which then owns its closing). */
  upgraded: boolean;
  /** The server has begun to close it (closeGracefully). */
  closing: boolean;
  /** Its close discards request bytes still arriving for a while (RFC 9112 §9.6). */
  linger: boolean;
}

export async function startEchoNode(config: Config): Promise<EchoNode> {
  const mirrors = [
    ...config.mirrors,
    ...(config.mirrorsFile !== undefined ? await loadMirrorsFile(config.mirrorsFile) : []),
  ];
  const origins = mirrorOrigins(mirrors);
  const policy = new OriginPolicy({
    pageOrigins: config.origins,
    ownAddresses: ownAddresses(),
    allowed: [...origins, ...config.allowOrigins],
  });
  const trust = new ProxyTrust(config.trustProxy);
  const forwarding = new ForwardingWarnings(trust);
  const prefixes: KeyPrefixes = { ipv4: config.ipv4Prefix, ipv6: config.ipv6Prefix };
  const burst = burstBytes(config);
  const debtCut = Math.min(DEBT_CUT_BYTES, burst / 4);
  const metrics = new Metrics({
    max_payload_bytes: config.maxPayload,
    max_message_bytes: config.maxMessage,
    bytes_per_minute: config.bytesPerMinute,
    burst_bytes: burst,
    messages_per_second: config.messagesPerSecond,
    max_connections_per_client: config.maxConnectionsPerClient,
    max_sockets_per_client: config.maxSocketsPerClient,
    max_connections: config.maxConnections,
    idle_timeout_ms: config.idleTimeoutMs,
    slow_client_timeout_ms: config.slowClientTimeoutMs,
    header_timeout_ms: config.headerTimeoutMs,
    keep_alive_timeout_ms: config.keepAliveTimeoutMs,
  });
  const limits = new ClientLimits({ ...config, burstBytes: burst });
  const pool = new RandomPool();
  const probes = new HttpProbes({ config, limits, metrics, pool });
  const staticFiles = new StaticFiles(
    config.staticDir,
    contentSecurityPolicy(origins, config.connectSrc === "any"),
  );
  const connections = new Map<Socket, Connection>();
  const sessions = new Set<ProbeSession>();
  const refusals = new RefusalLog();
  /** Counts a refusal under `limit` (unless the caller counted it) and logs it, one line per
   *  client and `kind` (by default the limit) per minute. */
  const refused = (
    address: string,
    limit: LimitName | undefined,
    what: string,
    kind: string = limit ?? "error",
  ) => {
    if (limit !== undefined) metrics.reject(limit);
    // Grouped by client (an IPv6 /64), not by address: a client has 2^64 addresses to log from.
    refusals.note(performance.now(), address, what, limitKey(address, prefixes), kind);
  };
  const startedAt = performance.now();

  /** Charges what the connection moved since the last time to the client it serves. */
  const settle = (c: Connection, now: number) => {
    const s = c.meter.settle(c.socket.bytesRead, c.socket.bytesWritten);
    metrics.clientBytesIn += s.in;
    metrics.clientBytesOut += s.out;
    limits.chargeBytes(c.key, s.charge, now);
  };

  /**
   * Closes a connection the server is done with (the keep-alive timeout, an answer with
   * `Connection: close`, a refusal) so that it stays counted, against the client's socket cap
   * and in `echo_node_sockets`, until it is really gone. It is half-closed (FIN after whatever
   * is queued), then reset as soon as the client closes its side too (resetWhenDone), or
   * after the slow-client timeout if it does not. Closed the ordinary way, a socket whose
   * client reads nothing would keep what is queued for it in the kernel (FIN-WAIT-1, minutes)
   * while no cap counts it any longer (cut.ts).
   *
   * A lingering close (RFC 9112 §9.6), after refusing a request whose body is still arriving,
   * also discards what arrives (metered and charged like any byte) for at most LINGER_MS or
   * LINGER_BYTES: closing a socket that has unread request bytes makes TCP send a reset, which
   * can destroy the answer before the client reads it (a client still sending a refused
   * 64 MiB body would see a reset, not its 413).
   */
  const closeGracefully = (c: Connection, graceMs = config.slowClientTimeoutMs) => {
    const socket = c.socket;
    if (c.closing || socket.destroyed) return;
    c.closing = true;
    socket.end();
    const timer = setTimeout(() => cut(socket), c.linger ? LINGER_MS : graceMs);
    socket.once("close", () => clearTimeout(timer));
    // Reading on is what shows the client's FIN. What arrives is metered and charged like any
    // byte (a client deep in debt is cut by the sweep); a request is answered with a reset
    // (onRequest), garbage with one too (clientError).
    socket.resume();
    if (!c.linger) return;
    let left = LINGER_BYTES;
    socket.on("data", (d: Buffer) => {
      left -= d.length;
      if (left <= 0) cut(socket);
    });
  };

  /**
   * Sends a last answer on a socket no request object owns (CONNECT, a refused upgrade, a
   * request Node could not parse) and closes it: a few hundred bytes, which a client that
   * reads has had long before LINGER_MS. `end()` alone would close only this side, and the
   * socket would stay open, counted, for as long as the client chose not to close its own.
   */
  const answerAndClose = (socket: Socket, answer: string) => {
    socket.end(answer);
    const c = connections.get(socket);
    if (c !== undefined) closeGracefully(c, Math.min(LINGER_MS, config.slowClientTimeoutMs));
    else socket.destroySoon();
  };

  /** The client a request on `c` is from; the connection's traffic is charged to it from now. */
  const attribute = (c: Connection, req: IncomingMessage) => {
    const forwardedFor = req.headers["x-forwarded-for"];
    const forwarded = req.headers["forwarded"];
    if (forwardedFor !== undefined || forwarded !== undefined) {
      // Never believed from an untrusted peer; but the operator is told (once) that the peer
      // looks like a proxy, or every user behind it is silently one client.
      const warning = forwarding.check(
        performance.now(),
        c.peer,
        c.trusted,
        forwardedFor !== undefined,
        forwarded !== undefined,
      );
      if (warning !== undefined) console.error(`echo-node: warning: ${warning}`);
    }
    const address = clientAddress(c.peer, forwardedFor, trust);
    const key = limitKey(address, prefixes);
    if (key !== c.key) settle(c, performance.now()); // what came before is the previous client's
    c.key = key;
    c.address = address;
    return { address, key };
  };

  const configJson = JSON.stringify({
    ...(config.name !== undefined ? { server: config.name } : {}),
    version: SERVER_VERSION,
    protocolVersion: PROTOCOL_VERSION,
    websocket: {
      path: WS_PATH,
      subprotocol: SUBPROTOCOL,
      subprotocols: [SUBPROTOCOL_PING, SUBPROTOCOL],
    },
    limits: {
      maxPayloadBytes: config.maxPayload,
      maxMessageBytes: config.maxMessage,
      bytesPerMinute: config.bytesPerMinute,
      burstBytes: burst,
      messagesPerSecond: config.messagesPerSecond,
      maxConnectionsPerClient: config.maxConnectionsPerClient,
      maxSocketsPerClient: config.maxSocketsPerClient,
      maxConnections: config.maxConnections,
      idleTimeoutMs: config.idleTimeoutMs,
      slowClientTimeoutMs: config.slowClientTimeoutMs,
      headerTimeoutMs: config.headerTimeoutMs,
      keepAliveTimeoutMs: config.keepAliveTimeoutMs,
    },
  });
  const mirrorsJson = JSON.stringify({ mirrors });

  const json = (res: ServerResponse, body: string, headers: OutgoingHttpHeaders) => {
    const data = Buffer.from(body);
    res.writeHead(200, {
      ...headers,
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": data.byteLength,
    });
    res.end(data);
  };

  interface RequestContext {
    conn: Connection;
    address: string;
    key: string;
    started: number;
    expectsContinue: boolean;
  }

  async function route(req: IncomingMessage, res: ServerResponse, ctx: RequestContext) {
    const { address, key, started } = ctx;
    /** Refuses this request. A body that was sent is never read: the connection closes. */
    const refuse = (
      status: number,
      limit: LimitName | undefined,
      text: string,
      headers: OutgoingHttpHeaders = { "Cache-Control": "no-store" },
      logged = text,
    ) => {
      refused(address, limit, `${excerpt(req.method, 16)} ${excerpt(req.url)}: ${logged}`);
      res.shouldKeepAlive = false;
      sendText(res, status, text, { ...headers, Connection: "close" });
    };

    const url = requestTarget(req.url);
    if (url === undefined) return refuse(400, "bad_request", "unparseable request-target");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const api = path.startsWith("/api/");
    const verdict: Verdict = policy.check(api ? "api" : "page", req.headers);
    const headers: OutgoingHttpHeaders = api
      ? apiHeaders(verdict.ok ? verdict.corsOrigin : undefined)
      : { "Cache-Control": "no-store" };

    // Cheapest refusals first, before anything reads a byte of a body.
    if (hasBody(req.headers) && !(method === "POST" && path === "/api/upload")) {
      // RFC 9110 §15.5.14: the content is larger than this path accepts (none at all).
      return refuse(413, "request_body", `${method} ${path} takes no request body`, headers);
    }
    const now = performance.now();
    const rate = limits.takeMessage(key, now);
    if (!rate.ok) {
      refused(address, undefined, "message rate exceeded", "message_rate");
      return sendLimited(
        res,
        metrics,
        "message_rate",
        rate.retryAfterS,
        "message rate exceeded",
        headers,
      );
    }
    const budget = limits.budgetLeft(key, now);
    if (!budget.ok) {
      refused(address, undefined, "byte budget exceeded", "byte_budget");
      return sendLimited(
        res,
        metrics,
        "byte_budget",
        budget.retryAfterS,
        "byte budget exceeded",
        headers,
      );
    }

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
    if (!verdict.ok) {
      const why = verdict.limit === "origin" ? `${verdict.why} to use this server` : verdict.why;
      const vary = { "Cache-Control": "no-store", Vary: "Origin" };
      return refuse(403, verdict.limit, why, vary, policyRefusal(verdict, req.headers));
    }
    if (api) {
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
          const admission = limits.admit(key);
          if (!admission.ok) {
            const text =
              admission.limit === "connections_total"
                ? CLOSE.CONNECTIONS_TOTAL.reason
                : CLOSE.CONNECTIONS_PER_CLIENT.reason;
            refused(address, undefined, text, admission.limit);
            sendLimited(res, metrics, admission.limit, admission.retryAfterS, text, headers);
            return;
          }
          metrics.httpProbesInFlight++;
          res.once("close", () => {
            admission.release();
            metrics.httpProbesInFlight--;
          });
          const client: ProbeClient = {
            key,
            prepay: (bytes) => ctx.conn.meter.prepay(bytes),
            expectsContinue: ctx.expectsContinue,
          };
          if (path === "/api/ping") probes.ping(res, started, headers);
          else if (path === "/api/download")
            probes.download(req, res, url, client, started, headers);
          else probes.upload(req, res, client, started, headers);
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

  const onRequest = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
    const conn = connections.get(req.socket);
    if (conn === undefined || conn.closing) {
      // Refused at accept (its 429 is on its way), or being closed (closeGracefully): Node
      // parsed a request that was already on the wire.
      if (conn !== undefined) cut(req.socket);
      res.destroy();
      return;
    }
    if (tooManyHeaders(req)) {
      // Before anything reads a header: those past the count are not in `req.headers`.
      refused(
        conn.address,
        "bad_request",
        `${excerpt(req.method, 16)} ${excerpt(req.url)}: ${TOO_MANY_HEADERS}`,
      );
      res.shouldKeepAlive = false;
      sendText(res, 431, `${TOO_MANY_HEADERS}`, {
        "Cache-Control": "no-store",
        Connection: "close",
      });
      return;
    }
    const started = performance.now();
    const { address, key } = attribute(conn, req);
    // A client in debt gets no lingering: discarding its body would be reading it for free.
    conn.linger = hasBody(req.headers) && limits.budgetLeft(key, started).ok;
    // A client that reads nothing of its answer (a file, a probe, a refusal: any response)
    // for the slow-client timeout loses its socket; the timeout is reset by every successful
    // read or write on it. It is cut with a reset, so that what is queued for it does not
    // outlive the socket (cut.ts). Node replaces the timeout with the keep-alive timeout once
    // the answer is written.
    res.setTimeout(config.slowClientTimeoutMs, () => {
      refused(
        address,
        "slow_client",
        `${excerpt(req.method, 16)} ${excerpt(req.url)}: client reads too slowly: connection cut`,
      );
      cut(conn.socket);
      res.destroy();
    });
    res.once("close", () => {
      // The request's bytes (headers, body, answer) are its client's; prepaid bytes left
      // over (a HEAD of a download) must not pay for the next request on the connection.
      settle(conn, performance.now());
      conn.meter.forfeit();
    });
    route(req, res, { conn, address, key, started, expectsContinue }).catch((e: unknown) => {
      // A bug must cost one request, never the process (nor a stack trace per request).
      refused(address, undefined, `${excerpt(req.method, 16)} ${excerpt(req.url)}: ${String(e)}`);
      if (!res.headersSent) {
        res.shouldKeepAlive = false;
        sendText(res, 500, "internal error", { "Cache-Control": "no-store", Connection: "close" });
      } else res.destroy();
    });
  };

  const server = createServer(
    {
      headersTimeout: config.headerTimeoutMs,
      requestTimeout: Math.max(REQUEST_TIMEOUT_MS, config.headerTimeoutMs),
      keepAliveTimeout: config.keepAliveTimeoutMs,
      // Node checks the two timeouts above on this interval (30 s by default, which would let
      // a slowloris client hold its sockets three times longer than configured).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, config.headerTimeoutMs / 4)),
    },
    (req, res) => onRequest(req, res, false),
  );
  // One more than accepted, so that tooManyHeaders can tell (Node drops fields past this).
  server.maxHeadersCount = MAX_REQUEST_HEADERS + 1;
  // Answering `Expect: 100-continue` ourselves means a body is invited only where it is read.
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) =>
    onRequest(req, res, true),
  );

  server.on("connection", (socket: Socket) => {
    const peer = normalizeAddress(socket.remoteAddress ?? "unknown");
    const fromProxy = trust.trusts(peer);
    const key = limitKey(peer, prefixes);
    socket.on("error", () => socket.destroy());
    if (!fromProxy) {
      // A connection is work too: it takes a message token. A client already over its message
      // rate, or deep in debt, is dropped without an answer (it had its 429s with Retry-After
      // on earlier requests): answering every retry politely would itself be a flood.
      const now = performance.now();
      const over = !limits.takeMessage(key, now).ok
        ? "message_rate"
        : limits.debtOf(key, now) > debtCut
          ? "byte_budget"
          : undefined;
      if (over !== undefined) {
        refused(peer, over, "connection dropped: over its limits");
        socket.destroy();
        return;
      }
    }
    const admission = limits.admitSocket(key, fromProxy);
    if (!admission.ok) {
      // Not the words of the WebSocket and probe limits (4007, 4008): this one counts every
      // open TCP connection, idle keep-alive included.
      const [text, flag] =
        admission.limit === "sockets_total"
          ? ["server at its open TCP connection capacity", "twice --max-connections"]
          : ["too many open TCP connections from this address", "--max-sockets-per-client"];
      refused(peer, admission.limit, `connection refused: ${text} (${flag})`);
      // Answered without reading a request, then closed at once: a refused connection must
      // cost next to nothing, or refusing would not protect anyone.
      socket.end(
        rawAnswer(
          429,
          `${text}; retry after ${admission.retryAfterS} s`,
          `Retry-After: ${admission.retryAfterS}\r\n`,
        ),
      );
      socket.destroySoon();
      return;
    }
    const conn: Connection = {
      socket,
      peer,
      trusted: fromProxy,
      key,
      address: peer,
      meter: new TrafficMeter(),
      upgraded: false,
      closing: false,
      linger: false,
    };
    connections.set(socket, conn);
    metrics.socketsOpen++;
    // Node closes a connection after an answer with `Connection: close` through destroySoon.
    socket.destroySoon = () => closeGracefully(conn);
    // Once both sides have sent their FIN, the socket is reset rather than closed: closed, it
    // would keep in the kernel whatever the client has not read (cut.ts), no longer counted.
    // A client that reads its answers has read them all by then.
    const resetWhenDone = () => {
      if (!conn.upgraded && socket.readableEnded && socket.writableFinished) cut(socket);
    };
    socket.on("end", resetWhenDone);
    socket.on("finish", resetWhenDone);
    socket.once("close", () => {
      settle(conn, performance.now());
      connections.delete(socket);
      admission.release();
      metrics.socketsOpen--;
    });
  });

  // Requests Node cannot parse, and headers that did not arrive within the header timeout
  // (slowloris): answered on the raw socket, since there is no request object.
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    const conn = connections.get(socket);
    if (err.code === "ECONNRESET" || !socket.writable) {
      cut(socket);
      return;
    }
    const timeout = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
    const status = timeout ? 408 : err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400;
    const address = conn?.address ?? normalizeAddress(socket.remoteAddress ?? "unknown");
    refused(
      address,
      timeout ? "header_timeout" : "bad_request",
      `unparseable or incomplete request (${err.code ?? "error"})`,
    );
    answerAndClose(
      socket,
      rawAnswer(status, timeout ? "request headers took too long" : "bad request"),
    );
  });

  // A connection idle between requests for the keep-alive timeout (Node emits this instead of
  // destroying the socket when there is a listener).
  server.on("timeout", (socket: Socket) => {
    const conn = connections.get(socket);
    if (conn !== undefined && !conn.upgraded) closeGracefully(conn);
    else socket.destroy();
  });

  // CONNECT (a proxy tunnel) would otherwise be dropped without an answer.
  server.on("connect", (_req: IncomingMessage, socket: Socket) => {
    socket.on("error", () => socket.destroy());
    answerAndClose(
      socket,
      rawAnswer(405, "CONNECT is not supported", "Allow: GET, HEAD, POST, OPTIONS\r\n"),
    );
  });

  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: config.maxMessage,
    ...receiveBackstop(config.maxMessage),
    clientTracking: false,
    allowSynchronousEvents: true,
    // The newest revision the client offers: `nowcast.v1.1` says PING may be sent.
    handleProtocols: (offered) =>
      offered.has(SUBPROTOCOL_PING)
        ? SUBPROTOCOL_PING
        : offered.has(SUBPROTOCOL)
          ? SUBPROTOCOL
          : false,
  });

  /** Refuses an accepted WebSocket with a documented code: a browser cannot read the status
   *  of a refused handshake, but it can read a close code and reason. */
  const refuseWebSocket = (ws: WebSocket, socket: Socket, code: number, reason: string) => {
    ws.close(code, reason);
    const timer = setTimeout(() => {
      cut(socket);
      ws.terminate();
    }, 1000);
    ws.once("close", () => clearTimeout(timer));
    ws.on("error", () => undefined);
  };

  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    try {
      upgrade(req, socket, head);
    } catch (e) {
      // A bug must cost one connection, never the process.
      refused(normalizeAddress(socket.remoteAddress ?? "unknown"), undefined, String(e));
      socket.destroy();
    }
  });

  function upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const conn = connections.get(socket);
    if (conn === undefined || conn.closing) {
      if (conn === undefined) socket.destroy();
      else cut(socket);
      return;
    }
    if (tooManyHeaders(req)) {
      refused(conn.address, "bad_request", `${excerpt(req.url)}: ${TOO_MANY_HEADERS}`);
      answerAndClose(socket, rawAnswer(431, TOO_MANY_HEADERS));
      return;
    }
    const { address, key } = attribute(conn, req);
    const path = requestTarget(req.url)?.pathname;
    if (path === undefined) {
      refused(address, "bad_request", `${excerpt(req.url)}: unparseable request-target`);
      answerAndClose(socket, rawAnswer(400, "bad request-target"));
      return;
    }
    if (path !== WS_PATH) {
      answerAndClose(socket, rawAnswer(404, `no WebSocket endpoint at ${path}`));
      return;
    }
    const verdict = policy.check("websocket", req.headers);
    conn.upgraded = true;
    wss.handleUpgrade(req, socket, head, (ws) => {
      const refuse = (limit: LimitName, code: number, reason: string, logged = reason) => {
        refused(address, limit, `WebSocket refused: ${logged}`);
        refuseWebSocket(ws, socket, code, reason);
      };
      if (!verdict.ok) {
        const { code, reason } = CLOSE.ORIGIN;
        return refuse(verdict.limit, code, reason, policyRefusal(verdict, req.headers));
      }
      const now = performance.now();
      const rate = limits.takeMessage(key, now);
      if (!rate.ok) {
        const c = CLOSE.MESSAGE_RATE;
        return refuse("message_rate", c.code, `${c.reason}; retry-after=${rate.retryAfterS}`);
      }
      const budget = limits.budgetLeft(key, now);
      if (!budget.ok) {
        const c = CLOSE.BYTE_BUDGET;
        return refuse("byte_budget", c.code, `${c.reason}; retry-after=${budget.retryAfterS}`);
      }
      const admission = limits.admit(key);
      if (!admission.ok) {
        const c =
          admission.limit === "connections_total"
            ? CLOSE.CONNECTIONS_TOTAL
            : CLOSE.CONNECTIONS_PER_CLIENT;
        return refuse(admission.limit, c.code, `${c.reason}; retry-after=${admission.retryAfterS}`);
      }
      if (!boundReceiveBuffering(ws, socket)) {
        refusals.note(performance.now(), "ws", "ws internals changed: receive compaction off");
      }
      metrics.wsOpen++;
      metrics.wsAccepted++;
      const session = new ProbeSession(
        ws,
        socket,
        {
          key,
          prepay: (bytes) => conn.meter.prepay(bytes),
          refused: (what, limit) => refused(address, undefined, what, limit),
        },
        { config, limits, metrics, pool },
      );
      conn.session = session;
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

  // Timers start only once listening: a server that failed to listen must leave nothing
  // behind that keeps the process alive (main exits with the error).
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

  // One sweep for every connection's timers and meters instead of timers per connection:
  // thousands of echo clients would otherwise re-arm thousands of timers per second.
  const tickMs = Math.max(
    20,
    Math.min(1000, config.idleTimeoutMs / 4, config.slowClientTimeoutMs / 4),
  );
  let lastBucketSweep = performance.now();
  const sweepTimer = setInterval(() => {
    const now = performance.now();
    for (const session of sessions) session.tick(now);
    for (const c of connections.values()) {
      settle(c, now);
      if (limits.debtOf(c.key, now) <= debtCut) continue;
      const left = limits.budgetLeft(c.key, now);
      const retry = left.ok ? 1 : left.retryAfterS;
      refused(c.address, "byte_budget", "byte budget overspent: connection cut");
      if (c.session !== undefined) {
        c.session.close(
          CLOSE.BYTE_BUDGET.code,
          `${CLOSE.BYTE_BUDGET.reason}; retry-after=${retry}`,
        );
      } else cut(c.socket);
    }
    if (now - lastBucketSweep > BUCKET_SWEEP_MS) {
      limits.sweep(now);
      refusals.flush(now);
      lastBucketSweep = now;
    }
  }, tickMs);

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
    limits,
    bufferedBytes: () => {
      let total = 0;
      for (const s of sessions) total += s.bufferedAmount;
      return total;
    },
    close: async () => {
      clearInterval(lagTimer);
      clearInterval(sweepTimer);
      // What the refusal log left out is still told, each count with its client.
      refusals.flush(Infinity);
      lag.disable();
      for (const s of sessions) s.close(1001, "server shutting down");
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Give WebSockets their closing handshake, then cut whatever is left.
      await new Promise((r) => setTimeout(r, sessions.size > 0 ? 200 : 0));
      server.closeAllConnections();
      // Upgraded and refused sockets are no longer the HTTP server's to close.
      for (const c of connections.values()) cut(c.socket);
      await closed;
    },
  };
}
