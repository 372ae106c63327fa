/**
 * One WebSocket probe connection: the I/O edge around protocol.ts. Implements echo, timed
 * ping, upload and download probes (PROTOCOL.md), charges probes to the client's byte budget up front and
 * every message (control frames, and fragments too short to pay for themselves, included:
 * frame-count.ts) to its message rate, and enforces the
 * per-connection limits (payload cap, idle and slow-client timeouts, bounded send buffer).
 * Every other byte on the socket is metered by the server (traffic-meter.ts).
 */
import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { WebSocket } from "ws";
import type { Config } from "./config.js";
import type { ClientLimits, LimitName } from "./limits.js";
import type { Metrics } from "./metrics.js";
import {
  CLOSE,
  DEFAULT_DOWNLOAD_CHUNK,
  MAX_DOWNLOAD_CHUNK,
  MIN_DOWNLOAD_CHUNK,
  ProtocolError,
  decodeClientMessage,
  encodeDownloadEnd,
  encodeEchoReply,
  encodeHello,
  encodePingReply,
  encodeProgress,
  encodeUploadAck,
  pingPayload,
  type ClientMessage,
} from "./protocol.js";
import type { RandomPool } from "./random-pool.js";
import { Arrivals } from "./arrival.js";
import { cut } from "./cut.js";
import { FrameCounter } from "./frame-count.js";

/**
 * Bytes a download may have queued in user space (ws + socket buffers) before the server
 * waits for the kernel to take them. Large enough to keep a fast loopback or LAN link busy
 * between event-loop turns, small enough that thousands of connections stay within memory.
 */
export const SEND_WINDOW = 4 * 1024 * 1024;
/** Queued bytes beyond which a connection is cut off at once as a slow reader: echo replies
 *  and counters are sent without waiting, so this is their bound. */
export const MAX_QUEUED = 2 * SEND_WINDOW;
/** UPLOAD_START on the wire from a client: 2-byte frame header, 4-byte mask (clients must
 *  mask, RFC 6455 §5.3), 11-byte message. A start read longer than this carried upload data. */
const UPLOAD_START_FRAME = 2 + 4 + 11;
/** After close(), how long a client gets to complete the closing handshake before its socket
 *  is destroyed. A client that is not reading would otherwise hold the socket for ws's 30 s. */
const CLOSE_GRACE_MS = 1000;

export interface SessionDeps {
  config: Config;
  limits: ClientLimits;
  metrics: Metrics;
  pool: RandomPool;
}

/** Whom the session's limits count against. */
export interface SessionClient {
  /** The client's limit key (limitKey of its address). */
  key: string;
  /** Tells the connection's traffic meter that a probe's bytes were charged up front. */
  prepay(bytes: number): void;
  /** Called once for a refusal worth a log line (the server writes one per client and limit
   *  per interval). */
  refused(what: string, limit: LimitName): void;
}

interface Upload {
  probeId: number;
  expected: number;
  received: number;
  /** Index of the socket read that carried UPLOAD_START. */
  startRead: number;
  /** The socket reads that carried its data, counted at the socket (arrival.ts). */
  arrivals: Arrivals;
  lastByteAt: number;
  progress: NodeJS.Timeout | undefined;
}

interface Download {
  probeId: number;
  bytes: number;
  chunk: number;
  /** Payload bytes handed to ws. */
  queued: number;
  /** Payload bytes ws has written to the kernel (send callbacks). */
  flushed: number;
  progress: NodeJS.Timeout | undefined;
}

/** A PING's train: one WebSocket ping out at a time, the next sent when its pong arrives. */
interface PingTrain {
  seq: number;
  count: number;
  /** Round-trip times of the pings answered so far (ms). */
  rttsMs: number[];
  /** When the ping awaiting its pong was handed to the socket. */
  sentAt: number;
}

export class ProbeSession {
  /** Last message from the client, or last moment a transfer was still running. */
  private lastActivityAt = performance.now();
  private lastSeq = -1;
  private upload: Upload | undefined;
  private download: Download | undefined;
  private ping: PingTrain | undefined;
  /** Arrival time and index of the socket read being parsed (see onSocketData). */
  private readAt = performance.now();
  private readIndex = 0;
  private readLength = 0;
  /** Incremented by every send callback: evidence that the client is reading. */
  private flushes = 0;
  private stall = { flushes: 0, since: performance.now() };
  private closing = false;
  private graceTimer: NodeJS.Timeout | undefined;
  /** Frames the message tokens do not pay for (frame-count.ts). */
  private readonly frames = new FrameCounter();

  constructor(
    private readonly ws: WebSocket,
    private readonly socket: Socket,
    private readonly client: SessionClient,
    private readonly deps: SessionDeps,
  ) {
    // Prepended so it runs before ws parses the same chunk: while a message handler runs,
    // readAt is the arrival time of the read that completed that message. This is what makes
    // the upload receive times mean "when the bytes arrived", not "when we got round to them".
    socket.prependListener("data", this.onSocketData);
    ws.on("message", (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    // ws answers pings by itself; they cost the same work as a message, so they count too.
    ws.on("ping", () => this.takeMessage());
    ws.on("pong", (data) => {
      if (this.takeMessage()) this.onPong(data);
    });
    ws.on("error", () => {
      // ws reports frame-level violations (bad opcode, oversized message, invalid UTF-8) as
      // errors and closes with the RFC 6455 code itself; we only count them.
      deps.metrics.protocolErrors.malformed++;
    });
    ws.send(encodeHello(deps.config.maxPayload, deps.config.maxMessage));
  }

  private readonly onSocketData = (chunk: Buffer): void => {
    this.readAt = performance.now();
    this.readIndex++;
    this.readLength = chunk.byteLength;
    // Charged before ws parses the read: over the rate, the connection is closed and no
    // further read is parsed.
    const frames = this.frames.count(chunk);
    if (frames > 0 && !this.takeMessage(frames)) return;
    const up = this.upload;
    if (up !== undefined && this.readIndex > up.startRead) {
      up.arrivals.read(this.readAt, chunk.byteLength, chunk.byteLength);
    }
  };

  /** Takes `count` message tokens; over the rate, closes with the retry time and returns
   *  false. */
  private takeMessage(count = 1): boolean {
    const grant = this.deps.limits.takeMessage(this.client.key, performance.now(), count);
    // Messages that arrive after the close was sent (the rest of a flood's socket read) are
    // not handled, but they are counted.
    if (this.closing) return false;
    if (grant.ok) return true;
    this.deps.metrics.reject("message_rate");
    this.client.refused("message rate exceeded", "message_rate");
    this.close(
      CLOSE.MESSAGE_RATE.code,
      `${CLOSE.MESSAGE_RATE.reason}; retry-after=${grant.retryAfterS}`,
    );
    this.stopReading();
    return false;
  }

  /**
   * Stops reading from a client closed for flooding: parsing the rest of its flood while
   * waiting for its close frame (queued behind that flood) would be the very work the limit
   * refuses. The close frame still goes out; the grace timer ends the connection.
   */
  private stopReading(): void {
    this.ws.pause();
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (!this.takeMessage()) return;
    this.lastActivityAt = this.readAt;
    this.deps.metrics.bytesIn += data.byteLength;
    if (!isBinary) {
      this.fail(new ProtocolError(CLOSE.MALFORMED, "text messages are not part of the protocol"));
      return;
    }
    try {
      this.handle(decodeClientMessage(data));
    } catch (e) {
      if (e instanceof ProtocolError) {
        this.fail(e);
        return;
      }
      // A bug must cost this connection, never the process (this runs inside ws's event
      // emitter, where a throw would be an uncaught exception).
      console.error("echo-node: error handling a WebSocket message:", e);
      this.close(1011, "internal error");
    }
  }

  private handle(m: ClientMessage): void {
    switch (m.type) {
      case "echo":
        this.checkSeq(m.seq, "echo");
        this.deps.metrics.probes.echo++;
        this.send(encodeEchoReply(m.seq, m.payload));
        return;
      case "ping":
        this.checkSeq(m.seq, "ping");
        if (this.ping !== undefined) {
          throw new ProtocolError(
            CLOSE.OUT_OF_ORDER,
            `PING ${m.seq} while the pings of ${this.ping.seq} are running`,
          );
        }
        this.deps.metrics.probes.ping++;
        this.ping = { seq: m.seq, count: m.count, rttsMs: [], sentAt: 0 };
        this.sendPing(this.ping);
        return;
      case "upload_start":
        this.checkIdle("UPLOAD_START");
        this.checkCap(m.bytes);
        if (!this.charge(m.bytes)) return;
        this.deps.metrics.probes.upload++;
        this.upload = {
          probeId: m.probeId,
          expected: m.bytes,
          received: 0,
          startRead: this.readIndex,
          arrivals: new Arrivals(),
          lastByteAt: this.readAt,
          progress: undefined,
        };
        // Data may have begun in the read that carried UPLOAD_START (which is then longer
        // than that message: the rest is data, possibly of a message completed reads later).
        // Counted at the socket, so a few bytes of framing are included, which errs towards
        // a lower rate by tens of bytes.
        this.upload.arrivals.read(
          this.readAt,
          this.readLength,
          this.readLength - UPLOAD_START_FRAME,
        );
        if (m.bytes === 0) this.finishUpload();
        else if (m.progressMs > 0) {
          const up = this.upload;
          up.progress = setInterval(
            () => this.send(encodeProgress(up.probeId, up.received, performance.now())),
            m.progressMs,
          );
        }
        return;
      case "upload_data":
        this.onUploadData(m.bytes);
        return;
      case "download":
        this.checkIdle("DOWNLOAD");
        this.checkCap(m.bytes);
        if (!this.charge(m.bytes)) return;
        this.deps.metrics.probes.download++;
        this.startDownload(m.probeId, m.bytes, m.chunk, m.progressMs);
        return;
    }
  }

  private checkIdle(what: string): void {
    if (this.upload !== undefined || this.download !== undefined) {
      throw new ProtocolError(CLOSE.OUT_OF_ORDER, `${what} while another transfer is running`);
    }
  }

  private checkCap(bytes: number): void {
    if (bytes > this.deps.config.maxPayload) {
      this.deps.metrics.reject("payload_cap");
      throw new ProtocolError(
        CLOSE.PAYLOAD_CAP,
        `${bytes} bytes requested, cap is ${this.deps.config.maxPayload}`,
      );
    }
  }

  /** Charges a probe's bytes to the client's budget up front; on refusal closes with the
   *  retry time and returns false. */
  private charge(bytes: number): boolean {
    const grant = this.deps.limits.takeBytes(this.client.key, bytes, performance.now());
    if (grant.ok) {
      this.client.prepay(bytes);
      return true;
    }
    this.deps.metrics.reject("byte_budget");
    this.client.refused("byte budget exceeded", "byte_budget");
    this.close(
      CLOSE.BYTE_BUDGET.code,
      `${CLOSE.BYTE_BUDGET.reason}; retry-after=${grant.retryAfterS}`,
    );
    return false;
  }

  private onUploadData(bytes: number): void {
    const up = this.upload;
    if (up === undefined) {
      throw new ProtocolError(CLOSE.OUT_OF_ORDER, "UPLOAD_DATA without UPLOAD_START");
    }
    if (up.received + bytes > up.expected) {
      throw new ProtocolError(
        CLOSE.OUT_OF_ORDER,
        `UPLOAD_DATA beyond the declared ${up.expected} bytes`,
      );
    }
    up.received += bytes;
    up.lastByteAt = this.readAt;
    if (up.received === up.expected) this.finishUpload();
  }

  private finishUpload(): void {
    const up = this.upload!;
    clearInterval(up.progress);
    this.upload = undefined;
    // The timed span starts at the first read that left nothing in the kernel (arrival.ts);
    // an empty upload has no data read: no bytes, no duration.
    const start = up.arrivals.start(up.expected) ?? { at: up.lastByteAt, bytes: up.received };
    this.send(encodeUploadAck(up.probeId, up.received, start.at, up.lastByteAt, start.bytes));
  }

  private startDownload(probeId: number, bytes: number, chunk: number, progressMs: number): void {
    const size = chunk === 0 ? DEFAULT_DOWNLOAD_CHUNK : chunk;
    const d: Download = {
      probeId,
      bytes,
      chunk: Math.min(MAX_DOWNLOAD_CHUNK, Math.max(MIN_DOWNLOAD_CHUNK, size)),
      queued: 0,
      flushed: 0,
      progress: undefined,
    };
    this.download = d;
    if (progressMs > 0) {
      d.progress = setInterval(
        () => this.send(encodeProgress(d.probeId, d.flushed, performance.now())),
        progressMs,
      );
    }
    this.pump();
  }

  /**
   * Queues download data while less than SEND_WINDOW is buffered, then waits for send
   * callbacks. The window is what keeps memory flat with a slow reader: the server never
   * holds more than SEND_WINDOW of a download, whatever the client's speed.
   */
  private readonly pump = (): void => {
    const d = this.download;
    if (d === undefined || this.closing) return;
    const { pool, metrics } = this.deps;
    while (d.queued < d.bytes && this.ws.bufferedAmount < SEND_WINDOW) {
      const n = Math.min(d.chunk, d.bytes - d.queued);
      d.queued += n;
      metrics.bytesOut += n;
      this.ws.send(pool.downloadMessage(n), (err) => {
        this.flushes++;
        if (err) return;
        d.flushed += n;
        this.pump();
      });
    }
    if (d.queued === d.bytes) {
      clearInterval(d.progress);
      this.download = undefined;
      this.send(encodeDownloadEnd(d.probeId, d.bytes));
    }
  };

  /** ECHO and PING sequence numbers: strictly increasing, so a client can tell a lost reply
   *  from a late one and the server can tell a replayed or confused client from a correct one. */
  private checkSeq(seq: number, what: string): void {
    if (seq <= this.lastSeq) {
      throw new ProtocolError(
        CLOSE.OUT_OF_ORDER,
        `${what} sequence ${seq} not above previous ${this.lastSeq}`,
      );
    }
    this.lastSeq = seq;
  }

  /**
   * Sends the train's next WebSocket ping. Timed from when the frame has been handed to the
   * socket (ws writes it at once) to the arrival of the read that carries its pong (`readAt`,
   * before ws parses it), so the server's own parsing and framing are not in the figure.
   */
  private sendPing(t: PingTrain): void {
    if (this.closing) return;
    if (this.ws.bufferedAmount > MAX_QUEUED) {
      this.cutOffSlowClient();
      return;
    }
    this.deps.metrics.bytesOut += 2 + 2;
    this.ws.ping(pingPayload(t.seq, t.rttsMs.length));
    t.sentAt = performance.now();
  }

  /** A pong: the next ping of the train, or its reply. A pong that answers no ping of the
   *  running train is ignored (RFC 6455 §5.5.3 allows unsolicited pongs). */
  private onPong(data: Buffer): void {
    const t = this.ping;
    if (t === undefined || !data.equals(pingPayload(t.seq, t.rttsMs.length))) return;
    this.lastActivityAt = this.readAt;
    t.rttsMs.push(Math.max(0, this.readAt - t.sentAt));
    if (t.rttsMs.length < t.count) {
      this.sendPing(t);
      return;
    }
    this.ping = undefined;
    this.send(encodePingReply(t.seq, t.rttsMs));
  }

  /** Sends a small message, unless the client has stopped reading. */
  private send(message: Buffer): void {
    if (this.closing) return;
    if (this.ws.bufferedAmount > MAX_QUEUED) {
      this.cutOffSlowClient();
      return;
    }
    this.deps.metrics.bytesOut += message.byteLength;
    this.ws.send(message, this.onFlush);
  }

  private readonly onFlush = (): void => {
    this.flushes++;
  };

  /** Called by the server's timer sweep. */
  tick(now: number): void {
    if (this.closing) return;
    const { idleTimeoutMs, slowClientTimeoutMs } = this.deps.config;
    // A download, or data still queued for the client, is activity even though the client
    // sends nothing; a stalled one is the slow-client check's business.
    if (this.download !== undefined || this.ws.bufferedAmount > 0) this.lastActivityAt = now;
    else if (now - this.lastActivityAt > idleTimeoutMs) {
      this.deps.metrics.reject("idle_timeout");
      this.close(CLOSE.IDLE.code, CLOSE.IDLE.reason);
      return;
    }
    if (this.ws.bufferedAmount === 0 || this.flushes !== this.stall.flushes) {
      this.stall = { flushes: this.flushes, since: now };
    } else if (now - this.stall.since > slowClientTimeoutMs) {
      this.cutOffSlowClient();
    }
  }

  private cutOffSlowClient(): void {
    this.deps.metrics.reject("slow_client");
    // Logged as the HTTP cut-off is (an idle close is housekeeping, not a refusal).
    this.client.refused("client reads too slowly: connection cut", "slow_client");
    this.close(CLOSE.SLOW_CLIENT.code, CLOSE.SLOW_CLIENT.reason);
  }

  private fail(e: ProtocolError): void {
    const kind = e.close === CLOSE.OUT_OF_ORDER ? "out_of_order" : "malformed";
    if (e.close !== CLOSE.PAYLOAD_CAP) this.deps.metrics.protocolErrors[kind]++;
    // The reason is limited to 123 bytes (RFC 6455 §5.5); the detail is worth sending when
    // it fits because it is what a developer debugging a client will see.
    const reason = `${e.close.reason}: ${e.message}`;
    this.close(e.close.code, Buffer.byteLength(reason) <= 123 ? reason : e.close.reason);
  }

  /** Starts the closing handshake and makes sure the socket goes away even if the client
   *  never answers it: then with a reset, which frees what was queued for it (cut.ts). */
  close(code: number, reason: string): void {
    if (this.closing) return;
    this.closing = true;
    this.stopTransfers();
    this.ws.close(code, reason);
    this.graceTimer = setTimeout(() => {
      cut(this.socket);
      this.ws.terminate();
    }, CLOSE_GRACE_MS);
  }

  private stopTransfers(): void {
    clearInterval(this.upload?.progress);
    clearInterval(this.download?.progress);
    this.upload = undefined;
    this.download = undefined;
    this.ping = undefined;
  }

  /** Called once when the connection is gone, whatever the cause. */
  dispose(): void {
    this.closing = true;
    this.stopTransfers();
    clearTimeout(this.graceTimer);
  }

  /** For tests and metrics: bytes queued for this client in user space. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }
}
