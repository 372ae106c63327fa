/**
 * The WebSocket probe protocol, version 1 (echo-node/PROTOCOL.md is the normative text; keep
 * the two in step). Pure encode/decode: bytes in, typed messages or a `ProtocolError` out.
 *
 * Every message is one binary WebSocket message whose first byte is its type. Integers are
 * unsigned big-endian (network order); times are float64 milliseconds on the server's
 * monotonic clock (`performance.now()`), so only differences between them mean anything.
 * Client→server types are 0x01..0x7f, server→client types 0x80..0xff.
 */

export const PROTOCOL_VERSION = 1;
/** Optional WebSocket subprotocol; selected when a client offers it. */
export const SUBPROTOCOL = "nowcast.v1";
/** Protocol 1 with the timed PING (revision 1): a server that has PING selects this name when
 *  a client offers it, so a client learns from `WebSocket.protocol` whether it may send PING;
 *  a server without it selects plain `nowcast.v1` (PROTOCOL.md, "Versioning"). */
export const SUBPROTOCOL_PING = "nowcast.v1.1";
export const WS_PATH = "/ws";

export const MSG = {
  ECHO: 0x01,
  UPLOAD_START: 0x02,
  UPLOAD_DATA: 0x03,
  DOWNLOAD: 0x04,
  PING: 0x05,
  HELLO: 0x80,
  ECHO_REPLY: 0x81,
  UPLOAD_ACK: 0x82,
  PROGRESS: 0x83,
  DOWNLOAD_DATA: 0x84,
  DOWNLOAD_END: 0x85,
  PING_REPLY: 0x86,
} as const;

/** The most WebSocket pings one PING asks the server to time (PROTOCOL.md, "RTT (timed
 *  ping)"): a warm-up and a back-to-back train are a handful; the bound keeps every reply in
 *  one short frame and the server's work per message fixed. */
export const MAX_PING_COUNT = 16;
/** The payload of the pings a PING sends: the request's sequence number's low byte and the
 *  ping's index, so that a pong is matched to its ping (RFC 6455 §5.5.3: a pong carries the
 *  ping's payload). Two bytes, as the NWS RTT probe's exchange (JavaNws §2.1.1). */
export const PING_PAYLOAD_BYTES = 2;

/** Echo payloads are small by design: the NWS RTT probe is a 2-byte exchange (JavaNws
 *  §2.1.1). 120 keeps every echo message within a 125-byte WebSocket frame. */
export const MAX_ECHO_PAYLOAD = 120;
/** Bounds on the progress interval a client may ask for: 0 means none; below 50 ms the
 *  counters would cost more than they tell. */
export const MIN_PROGRESS_MS = 50;
/** Download data messages: the client picks the size, the server clamps it to this range.
 *  Large messages keep per-message overhead negligible; 1 MiB bounds the send granularity. */
export const MIN_DOWNLOAD_CHUNK = 1024;
export const MAX_DOWNLOAD_CHUNK = 1024 * 1024;
export const DEFAULT_DOWNLOAD_CHUNK = 256 * 1024;

/** UPLOAD_ACK's length: type, probeId, bytes, firstByteAt, lastByteAt, firstReadBytes. */
export const UPLOAD_ACK_BYTES = 29;

/** Close codes (private-use range 4000–4999, RFC 6455 §7.4.2). Reasons are fixed texts,
 *  except that the retry-able ones end in `; retry-after=<seconds>`. */
export const CLOSE = {
  MALFORMED: { code: 4000, reason: "malformed message" },
  OUT_OF_ORDER: { code: 4001, reason: "message out of order" },
  PAYLOAD_CAP: { code: 4002, reason: "payload cap exceeded" },
  ORIGIN: { code: 4003, reason: "origin not allowed" },
  IDLE: { code: 4004, reason: "idle timeout" },
  SLOW_CLIENT: { code: 4005, reason: "client reads too slowly" },
  BYTE_BUDGET: { code: 4006, reason: "byte budget exceeded" },
  CONNECTIONS_PER_CLIENT: { code: 4007, reason: "too many connections from this address" },
  CONNECTIONS_TOTAL: { code: 4008, reason: "server at connection capacity" },
  MESSAGE_RATE: { code: 4009, reason: "message rate exceeded" },
} as const;

export type ClientMessage =
  | { type: "echo"; seq: number; payload: Uint8Array }
  | { type: "upload_start"; probeId: number; bytes: number; progressMs: number }
  | { type: "upload_data"; bytes: number }
  | { type: "download"; probeId: number; bytes: number; chunk: number; progressMs: number }
  | { type: "ping"; seq: number; count: number };

export type ServerMessage =
  | { type: "hello"; version: number; maxPayload: number; maxMessage: number }
  | { type: "echo_reply"; seq: number; payload: Uint8Array }
  | {
      type: "upload_ack";
      probeId: number;
      bytes: number;
      firstByteAt: number;
      lastByteAt: number;
      /** Payload bytes that arrived in the read at `firstByteAt` (they carry no duration);
       *  undefined from a server older than this field (a 25-byte ack). */
      firstReadBytes: number | undefined;
    }
  | { type: "progress"; probeId: number; bytes: number; at: number }
  | { type: "download_data"; bytes: number }
  | { type: "download_end"; probeId: number; bytes: number }
  /** The round-trip times of the pings a PING asked for, in the order sent (ms). */
  | { type: "ping_reply"; seq: number; rttsMs: number[] };

/** A message the server cannot accept; `close` says which close code the connection gets. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
  constructor(
    readonly close: (typeof CLOSE)[keyof typeof CLOSE],
    detail: string,
  ) {
    super(detail);
  }
}

const malformed = (detail: string) => new ProtocolError(CLOSE.MALFORMED, detail);

function view(data: Uint8Array): DataView {
  return new DataView(data.buffer, data.byteOffset, data.byteLength);
}

function checkLength(data: Uint8Array, expected: number, name: string): void {
  if (data.byteLength !== expected) {
    throw malformed(`${name} must be ${expected} bytes, got ${data.byteLength}`);
  }
}

function checkProgress(ms: number): number {
  if (ms !== 0 && ms < MIN_PROGRESS_MS) {
    throw malformed(`progress interval ${ms} ms is below ${MIN_PROGRESS_MS} ms (0 = none)`);
  }
  return ms;
}

/**
 * Decodes one client message. Validates shape only (lengths, known type, ranges that are
 * wrong for every server); limits that depend on configuration, such as the payload cap, and
 * ordering rules are the session's job.
 *
 * Cost: O(1) — even for UPLOAD_DATA, whose content is never read.
 */
export function decodeClientMessage(data: Uint8Array): ClientMessage {
  if (data.byteLength === 0) throw malformed("empty message");
  const v = view(data);
  const type = data[0]!;
  switch (type) {
    case MSG.ECHO: {
      if (data.byteLength < 5) throw malformed("ECHO needs a 4-byte sequence number");
      if (data.byteLength > 5 + MAX_ECHO_PAYLOAD) {
        throw malformed(`ECHO payload exceeds ${MAX_ECHO_PAYLOAD} bytes`);
      }
      return { type: "echo", seq: v.getUint32(1), payload: data.subarray(5) };
    }
    case MSG.UPLOAD_START:
      checkLength(data, 11, "UPLOAD_START");
      return {
        type: "upload_start",
        probeId: v.getUint32(1),
        bytes: v.getUint32(5),
        progressMs: checkProgress(v.getUint16(9)),
      };
    case MSG.UPLOAD_DATA:
      return { type: "upload_data", bytes: data.byteLength - 1 };
    case MSG.DOWNLOAD:
      checkLength(data, 15, "DOWNLOAD");
      return {
        type: "download",
        probeId: v.getUint32(1),
        bytes: v.getUint32(5),
        chunk: v.getUint32(9),
        progressMs: checkProgress(v.getUint16(13)),
      };
    case MSG.PING: {
      checkLength(data, 6, "PING");
      const count = data[5]!;
      if (count < 1 || count > MAX_PING_COUNT) {
        throw malformed(`PING count ${count} is outside 1–${MAX_PING_COUNT}`);
      }
      return { type: "ping", seq: v.getUint32(1), count };
    }
    default:
      throw malformed(`unknown message type 0x${type.toString(16).padStart(2, "0")}`);
  }
}

/** Encoders for the client side (tests, benchmarks, the page's worker can mirror these). */
export function encodeEcho(seq: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(5 + payload.byteLength);
  out[0] = MSG.ECHO;
  view(out).setUint32(1, seq);
  out.set(payload, 5);
  return out;
}

/** PING: `count` WebSocket pings timed on the server's clock (PROTOCOL.md). */
export function encodePing(seq: number, count: number): Uint8Array {
  const out = new Uint8Array(6);
  out[0] = MSG.PING;
  view(out).setUint32(1, seq);
  out[5] = count;
  return out;
}

export function encodeUploadStart(probeId: number, bytes: number, progressMs = 0): Uint8Array {
  const out = new Uint8Array(11);
  const v = view(out);
  out[0] = MSG.UPLOAD_START;
  v.setUint32(1, probeId);
  v.setUint32(5, bytes);
  v.setUint16(9, progressMs);
  return out;
}

export function encodeDownload(
  probeId: number,
  bytes: number,
  chunk = 0,
  progressMs = 0,
): Uint8Array {
  const out = new Uint8Array(15);
  const v = view(out);
  out[0] = MSG.DOWNLOAD;
  v.setUint32(1, probeId);
  v.setUint32(5, bytes);
  v.setUint32(9, chunk);
  v.setUint16(13, progressMs);
  return out;
}

/** Server-side encoders. Small fixed-size messages; data messages are built elsewhere
 *  without copying (see random-pool.ts). */
export function encodeHello(maxPayload: number, maxMessage: number): Buffer {
  const out = Buffer.alloc(10);
  out[0] = MSG.HELLO;
  out[1] = PROTOCOL_VERSION;
  out.writeUInt32BE(maxPayload, 2);
  out.writeUInt32BE(maxMessage, 6);
  return out;
}

export function encodeEchoReply(seq: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + payload.byteLength);
  out[0] = MSG.ECHO_REPLY;
  out.writeUInt32BE(seq, 1);
  out.set(payload, 5);
  return out;
}

/** The payload of ping `index` of the PING with sequence number `seq`. */
export function pingPayload(seq: number, index: number): Buffer {
  return Buffer.from([seq & 0xff, index]);
}

/** PING_REPLY: each round-trip time as float32 ms, so that the reply is no larger than the
 *  pongs that earned it (4 bytes a ping against a pong's 8 on the wire). */
export function encodePingReply(seq: number, rttsMs: readonly number[]): Buffer {
  const out = Buffer.alloc(6 + 4 * rttsMs.length);
  out[0] = MSG.PING_REPLY;
  out.writeUInt32BE(seq, 1);
  out[5] = rttsMs.length;
  rttsMs.forEach((ms, i) => out.writeFloatBE(ms, 6 + 4 * i));
  return out;
}

export function encodeUploadAck(
  probeId: number,
  bytes: number,
  firstByteAt: number,
  lastByteAt: number,
  firstReadBytes: number,
): Buffer {
  const out = Buffer.alloc(UPLOAD_ACK_BYTES);
  out[0] = MSG.UPLOAD_ACK;
  out.writeUInt32BE(probeId, 1);
  out.writeUInt32BE(bytes, 5);
  out.writeDoubleBE(firstByteAt, 9);
  out.writeDoubleBE(lastByteAt, 17);
  out.writeUInt32BE(firstReadBytes, 25);
  return out;
}

export function encodeProgress(probeId: number, bytes: number, at: number): Buffer {
  const out = Buffer.alloc(17);
  out[0] = MSG.PROGRESS;
  out.writeUInt32BE(probeId, 1);
  out.writeUInt32BE(bytes, 5);
  out.writeDoubleBE(at, 9);
  return out;
}

export function encodeDownloadEnd(probeId: number, bytes: number): Buffer {
  const out = Buffer.alloc(9);
  out[0] = MSG.DOWNLOAD_END;
  out.writeUInt32BE(probeId, 1);
  out.writeUInt32BE(bytes, 5);
  return out;
}

/** Decodes a server message (for clients: tests, benchmarks, the soak). */
export function decodeServerMessage(data: Uint8Array): ServerMessage {
  if (data.byteLength === 0) throw malformed("empty message");
  const v = view(data);
  switch (data[0]) {
    case MSG.HELLO:
      checkLength(data, 10, "HELLO");
      return {
        type: "hello",
        version: data[1]!,
        maxPayload: v.getUint32(2),
        maxMessage: v.getUint32(6),
      };
    case MSG.ECHO_REPLY:
      if (data.byteLength < 5) throw malformed("ECHO_REPLY too short");
      return { type: "echo_reply", seq: v.getUint32(1), payload: data.subarray(5) };
    case MSG.UPLOAD_ACK:
      // 25 bytes from servers that predate firstReadBytes; they are still protocol 1.
      if (data.byteLength !== 25) checkLength(data, UPLOAD_ACK_BYTES, "UPLOAD_ACK");
      return {
        type: "upload_ack",
        probeId: v.getUint32(1),
        bytes: v.getUint32(5),
        firstByteAt: v.getFloat64(9),
        lastByteAt: v.getFloat64(17),
        firstReadBytes: data.byteLength === UPLOAD_ACK_BYTES ? v.getUint32(25) : undefined,
      };
    case MSG.PROGRESS:
      checkLength(data, 17, "PROGRESS");
      return {
        type: "progress",
        probeId: v.getUint32(1),
        bytes: v.getUint32(5),
        at: v.getFloat64(9),
      };
    case MSG.DOWNLOAD_DATA:
      return { type: "download_data", bytes: data.byteLength - 1 };
    case MSG.DOWNLOAD_END:
      checkLength(data, 9, "DOWNLOAD_END");
      return { type: "download_end", probeId: v.getUint32(1), bytes: v.getUint32(5) };
    case MSG.PING_REPLY: {
      const count = data[5] ?? 0;
      if (data.byteLength < 6 || data.byteLength !== 6 + 4 * count) {
        throw malformed(`PING_REPLY of ${data.byteLength} bytes does not hold its ${count} times`);
      }
      const rttsMs = Array.from({ length: count }, (_, i) => v.getFloat32(6 + 4 * i));
      return { type: "ping_reply", seq: v.getUint32(1), rttsMs };
    }
    default:
      throw malformed(`unknown server message type ${data[0]}`);
  }
}
