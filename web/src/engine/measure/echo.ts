// RTT over the WebSocket: the NWS small exchange (JavaNws §2.1.1), timed as close to the wire
// as a browser allows.
//
// Where the server has the timed PING (echo-node PROTOCOL.md, "RTT (timed ping)"), it sends
// WebSocket pings and times their pongs on its own clock. The browser's network stack answers
// a ping by itself, so the figure leaves out the hops an echo timed on this page carries (this
// worker → the browser's IO thread → its network process, and back), which on a quiet 2-core
// machine were ~0.5 ms of a 0.6 ms loopback echo. On a short path the pings go back to back,
// a warm-up first, and the median of the rest is the RTT, as sockperf's ping-pong (the
// reference) keeps every thread on the path awake; on a long path one or two pings suffice.
//
// A server without it gets the echo: an untimed warm-up and a timed one on this page's clock.

import type { WsConnection } from "../ws-probe";
import type { Measurement } from "./measurement";

/** Bytes an echo costs on the wire, both ways (type, seq, 2-byte payload, frame headers). */
export const ECHO_BYTES = 2 * (7 + 6);
/** Bytes a timed ping costs on the wire: the server's ping frame (2-byte header, 2-byte
 *  payload) and the browser's pong (2-byte header, 4-byte mask, 2-byte payload). */
const PING_BYTES = 4 + 8;
/** The most pings one probe sends: a warm-up and a train of eight. */
const MAX_PINGS = 9;
/** Bytes `count` timed pings cost: theirs, a PING (6 bytes, masked frame) and its reply's
 *  frame (6 bytes and 4 a ping). */
export const pingBytes = (count: number) => count * PING_BYTES + 6 + 6 + 2 + 6 + 4 * count;

/** Below this predicted RTT (ms) the pings go as a warm-up and a train of eight: the train
 *  lasts under 50 ms, far within the round trip's timeout (1 s at least, core probed.rs). */
const TRAIN_BELOW_MS = 5;
/** From here up a probe is one ping: a thread's wake-up (well under 1 ms) is within the
 *  3 % the RTT goal allows, and a second round trip would risk the timeout. */
const SINGLE_FROM_MS = 50;

/** How many pings, and how many of them lead as a warm-up, for a predicted RTT (ms). */
export function pingPlan(predictedMs: number | undefined): { count: number; warmUp: number } {
  if (predictedMs !== undefined && predictedMs < TRAIN_BELOW_MS) {
    return { count: MAX_PINGS, warmUp: 1 };
  }
  if (predictedMs !== undefined && predictedMs >= SINGLE_FROM_MS) return { count: 1, warmUp: 0 };
  return { count: 2, warmUp: 1 };
}

/** The median of the timed pings (after the warm-up). */
export function pingRtt(rttsMs: readonly number[], warmUp: number): number {
  const timed = rttsMs.slice(Math.min(warmUp, rttsMs.length - 1)).sort((a, b) => a - b);
  const mid = timed.length >> 1;
  return timed.length % 2 === 1 ? timed[mid]! : (timed[mid - 1]! + timed[mid]!) / 2;
}

/** The pings that follow a warm-up that took `warmUpMs` when there was no forecast (the
 *  page's first probe): the plan that round trip would have asked for, less its warm-up. */
export function afterWarmUp(warmUpMs: number): number {
  const { count, warmUp } = pingPlan(warmUpMs);
  return Math.max(1, count - warmUp);
}

/**
 * One RTT by timed pings (median of a train) where the server has them, else by echo. With no
 * forecast yet, the warm-up goes alone and its own round trip picks the plan: a short path gets
 * its train on the first probe too. A first probe of one timed ping read 0.8 and 1.15 ms on
 * loopback where trains read 0.04–0.14 ms, and a transfer's rate has that forecast taken off
 * and is judged against it (headline-math.ts `shortProbe`).
 */
export async function measureRtt(
  conn: WsConnection,
  predictedMs: number | undefined,
  timeoutMs: number,
): Promise<number> {
  if (conn.timedPing) {
    if (predictedMs === undefined) {
      const t0 = performance.now();
      const warm = await conn.ping(1, timeoutMs);
      const left = Math.max(1, timeoutMs - (performance.now() - t0));
      return pingRtt(await conn.ping(afterWarmUp(warm.at(-1)!), left), 0);
    }
    const { count, warmUp } = pingPlan(predictedMs);
    return pingRtt(await conn.ping(count, timeoutMs), warmUp);
  }
  await conn.echo(timeoutMs);
  return conn.echo(timeoutMs);
}

export const echo: Measurement = {
  // The largest plan (a first probe's warm-up alone, then a train) or the warm-up echo and
  // the timed one, whichever the server takes.
  cost: () => Math.max(pingBytes(1) + pingBytes(MAX_PINGS - 1), 2 * ECHO_BYTES),
  probe: () => ({ transport: "websocket", payload_bytes: 2 }),
  async run(link, { timeoutMs, predictedRttMs }) {
    const rtt = await measureRtt(link.conn, predictedRttMs, timeoutMs);
    return {
      value: rtt,
      durationMs: rtt,
      probe: { transport: "websocket", payload_bytes: 2, raw_ms: rtt },
    };
  },
};
