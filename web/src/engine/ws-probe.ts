// The WebSocket side of the probes: one connection to echo-node speaking protocol v1
// (echo-node/PROTOCOL.md), whose codec this module shares with the server. Timed with
// performance.now(); every probe is bounded by its timeout, after which the connection is
// closed, because closing is the only way the protocol offers to abandon a transfer.

import {
  decodeServerMessage,
  encodeDownload,
  encodeEcho,
  encodePing,
  encodeUploadStart,
  MAX_PING_COUNT,
  MSG,
  SUBPROTOCOL,
  SUBPROTOCOL_PING,
  WS_PATH,
  type ServerMessage,
} from "../../../echo-node/src/protocol";
import { ConnectionClosed, ProbeTimeout } from "./errors";
import { endpointUrl, type StreamSpan, type UploadStream } from "./probe-math";

/** The 2-byte exchange of the NWS RTT probe. */
const ECHO_PAYLOAD = new Uint8Array([0x4e, 0x57]);
/** Upload data waiting in the browser above this is not topped up (bufferedAmount). */
const UPLOAD_HIGH_WATER = 4 * 1024 * 1024;
const UPLOAD_CHUNK = 256 * 1024;

/**
 * How long opening a connection (and its first echo, which pays for its warm-up) may take:
 * the longest any round trip may (the core's round-trip ceiling, core/src/probed.rs). It is
 * no probe of a series, so no series' adaptive timeout applies.
 */
export const OPEN_TIMEOUT_MS = 10_000;

export interface Hello {
  maxPayload: number;
  maxMessage: number;
}

export class WsConnection {
  private waiter: ((m: ServerMessage) => void) | undefined;
  private failer: ((e: Error) => void) | undefined;
  private seq = 0;
  private probeId = 0;
  closedWith: ConnectionClosed | undefined;

  private constructor(
    private readonly ws: WebSocket,
    readonly hello: Hello,
  ) {
    ws.onmessage = (e: MessageEvent<ArrayBuffer>) => {
      const m = decodeServerMessage(new Uint8Array(e.data));
      this.waiter?.(m);
    };
    ws.onclose = (e) => {
      this.closedWith = new ConnectionClosed(e.code, e.reason);
      this.failer?.(this.closedWith);
    };
  }

  /** Opens a connection to the echo-node at `base` and waits for HELLO, within `timeoutMs`. */
  static open(base: string, timeoutMs: number): Promise<WsConnection> {
    const url = endpointUrl(base, WS_PATH);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    // Offered newest first: a server with the timed PING selects SUBPROTOCOL_PING.
    const ws = new WebSocket(url, [SUBPROTOCOL_PING, SUBPROTOCOL]);
    ws.binaryType = "arraybuffer";
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        ws.close();
        reject(new ProbeTimeout(timeoutMs));
      }, timeoutMs);
      ws.onmessage = (e: MessageEvent<ArrayBuffer>) => {
        clearTimeout(timer);
        const m = decodeServerMessage(new Uint8Array(e.data));
        if (m.type !== "hello") {
          ws.close();
          reject(new Error(`expected HELLO, got ${m.type}`));
        } else {
          resolve(new WsConnection(ws, { maxPayload: m.maxPayload, maxMessage: m.maxMessage }));
        }
      };
      ws.onclose = (e) => {
        clearTimeout(timer);
        reject(new ConnectionClosed(e.code, e.reason));
      };
    });
  }

  /** Whether the server times WebSocket pings for this client (PING, PROTOCOL.md). */
  get timedPing(): boolean {
    return this.ws.protocol === SUBPROTOCOL_PING;
  }

  get open(): boolean {
    return this.closedWith === undefined && this.ws.readyState === WebSocket.OPEN;
  }

  close(): void {
    this.ws.close();
  }

  /**
   * Runs one exchange: `start` sends, `onMessage` returns a result to finish or undefined to
   * wait for more. Rejects on timeout (and closes) or when the connection closes.
   */
  private exchange<T>(
    timeoutMs: number,
    start: () => void,
    onMessage: (m: ServerMessage) => T | undefined,
  ): Promise<T> {
    if (this.closedWith !== undefined) return Promise.reject(this.closedWith);
    const t0 = performance.now();
    return new Promise<T>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiter = undefined;
        this.failer = undefined;
      };
      const timer = setTimeout(() => {
        done();
        this.ws.close();
        reject(new ProbeTimeout(performance.now() - t0));
      }, timeoutMs);
      this.failer = (e) => {
        done();
        reject(e);
      };
      this.waiter = (m) => {
        const out = onMessage(m);
        if (out !== undefined) {
          done();
          resolve(out);
        }
      };
      try {
        start();
      } catch (e) {
        done();
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  /** RTT of one 2-byte echo (ms). */
  echo(timeoutMs: number): Promise<number> {
    const seq = ++this.seq;
    let t0 = 0;
    return this.exchange(
      timeoutMs,
      () => {
        t0 = performance.now();
        this.ws.send(encodeEcho(seq, ECHO_PAYLOAD));
      },
      (m) => (m.type === "echo_reply" && m.seq === seq ? performance.now() - t0 : undefined),
    );
  }

  /**
   * Round-trip times of `count` WebSocket pings sent back to back by the server and timed on
   * its clock (ms, in the order sent). The browser's network stack answers a ping itself
   * (RFC 6455 §5.5.2), so these times leave out the hops between it and this thread that an
   * echo's time carries. Only where `timedPing`.
   */
  ping(count: number, timeoutMs: number): Promise<number[]> {
    const seq = ++this.seq;
    const n = Math.max(1, Math.min(MAX_PING_COUNT, Math.round(count)));
    return this.exchange(
      timeoutMs,
      () => this.ws.send(encodePing(seq, n)),
      (m) => (m.type === "ping_reply" && m.seq === seq ? m.rttsMs : undefined),
    );
  }

  /** Download of `bytes`: request to DOWNLOAD_END on the client's clock (ms). */
  download(bytes: number, timeoutMs: number): Promise<StreamSpan> {
    const id = ++this.probeId;
    let startMs = 0;
    return this.exchange(
      timeoutMs,
      () => {
        startMs = performance.now();
        this.ws.send(encodeDownload(id, bytes));
      },
      (m) =>
        m.type === "download_end" && m.probeId === id
          ? { startMs, endMs: performance.now(), bytes: m.bytes }
          : undefined,
    );
  }

  /**
   * Upload of `bytes` in messages below the server's maxMessage, topped up as the browser's
   * buffer drains; resolves with the client's span and the server's receive times.
   */
  upload(bytes: number, timeoutMs: number): Promise<UploadStream> {
    const id = ++this.probeId;
    const chunk = Math.max(1, Math.min(UPLOAD_CHUNK, this.hello.maxMessage - 1));
    // Contents do not matter: compression is never negotiated, so bytes cross as they are.
    const data = new Uint8Array(chunk + 1);
    data[0] = MSG.UPLOAD_DATA;
    let startMs = 0;
    let left = bytes;
    const pump = () => {
      while (left > 0 && this.open && this.ws.bufferedAmount < UPLOAD_HIGH_WATER) {
        const n = Math.min(chunk, left);
        this.ws.send(n === chunk ? data : data.subarray(0, n + 1));
        left -= n;
      }
      if (left > 0 && this.open) setTimeout(pump, 1);
    };
    return this.exchange(
      timeoutMs,
      () => {
        startMs = performance.now();
        this.ws.send(encodeUploadStart(id, bytes));
        pump();
      },
      (m) =>
        m.type === "upload_ack" && m.probeId === id
          ? {
              startMs,
              endMs: performance.now(),
              bytes: m.bytes,
              firstByteAt: m.firstByteAt,
              lastByteAt: m.lastByteAt,
              firstReadBytes: m.firstReadBytes,
            }
          : undefined,
    );
  }
}
