/**
 * A raw TCP client for hostile input: bytes the `http` and `ws` clients would never send, from
 * a chosen loopback source address (Linux routes all of 127/8 to lo, so one process can be
 * many clients). Shared by the tests and the hostile bench.
 */
import { connect, type Socket } from "node:net";

export interface RawResult {
  /** Everything the server sent. */
  answer: Buffer;
  /** The HTTP status of the first answer, if any. */
  status: number | undefined;
  /** The server closed the connection before the timeout. */
  closed: boolean;
  /** Milliseconds from connect to close (or to the timeout). */
  ms: number;
  /** Bytes this client wrote and read, as the server's meter would count them. */
  bytesWritten: number;
  bytesRead: number;
}

export interface RawOptions {
  localAddress?: string;
  timeoutMs?: number;
  /** Writes after the connection opens, in order, each after the previous one's delay. */
  then?: { afterMs: number; data: Buffer | string }[];
}

export function statusOf(answer: Buffer): number | undefined {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(answer.subarray(0, 16).toString("latin1"));
  return m ? Number(m[1]) : undefined;
}

/** The close code of the first WebSocket close frame after a 101 answer, if any. */
export function closeCodeOf(answer: Buffer): number | undefined {
  const end = answer.indexOf("\r\n\r\n");
  if (statusOf(answer) !== 101 || end < 0) return undefined;
  let i = end + 4;
  while (i + 2 <= answer.length) {
    const opcode = answer[i]! & 0x0f;
    let len = answer[i + 1]! & 0x7f;
    let at = i + 2;
    if (len === 126) {
      len = answer.readUInt16BE(at);
      at += 2;
    } else if (len === 127) {
      len = Number(answer.readBigUInt64BE(at));
      at += 8;
    }
    if (opcode === 0x8) return len >= 2 ? answer.readUInt16BE(at) : 1005;
    i = at + len;
  }
  return undefined;
}

/** Opens a connection, writes `data`, and collects the answer until the server closes or
 *  `timeoutMs` passes (then the client closes). */
export function rawExchange(
  port: number,
  data: Buffer | string,
  opts: RawOptions = {},
): Promise<RawResult> {
  return new Promise((resolve) => {
    const started = performance.now();
    const chunks: Buffer[] = [];
    const timers: NodeJS.Timeout[] = [];
    let closed = false;
    let finished = false;
    let socket: Socket;
    const done = () => {
      if (finished) return;
      finished = true;
      timers.forEach(clearTimeout);
      const answer = Buffer.concat(chunks);
      resolve({
        answer,
        status: statusOf(answer),
        closed,
        ms: performance.now() - started,
        bytesWritten: socket.bytesWritten,
        bytesRead: socket.bytesRead,
      });
      socket.destroy();
    };
    socket = connect({ port, host: "127.0.0.1", localAddress: opts.localAddress }, () => {
      const write = (d: Buffer | string) => {
        if (socket.writable) socket.write(typeof d === "string" ? Buffer.from(d, "latin1") : d);
      };
      write(data);
      let at = 0;
      for (const step of opts.then ?? []) {
        at += step.afterMs;
        timers.push(setTimeout(() => write(step.data), at));
      }
    });
    timers.push(setTimeout(done, opts.timeoutMs ?? 3000));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      closed = true;
      done();
    });
  });
}
