// What a probe can fail with, and what the scheduler makes of it: a timeout is a measurement
// (recorded and fed back), a server's refusal with a stated wait is a back-off, anything else
// is shown and the next round tries again.

import { retryAfterSeconds } from "./probe-math";

/** A probe ran out of time after `elapsedMs`. */
export class ProbeTimeout extends Error {
  constructor(readonly elapsedMs: number) {
    super(`probe timed out after ${Math.round(elapsedMs)} ms`);
    this.name = "ProbeTimeout";
  }
}

/** The server refused or ended the connection; its reason may name a wait (`retry-after=N`). */
export class ConnectionClosed extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
  ) {
    super(`connection closed (${code}${reason === "" ? "" : `: ${reason}`})`);
    this.name = "ConnectionClosed";
  }
}

/** The server asked us to wait (HTTP 429). */
export class RetryLater extends Error {
  constructor(readonly seconds: number) {
    super(`server asked to wait ${seconds} s`);
    this.name = "RetryLater";
  }
}

/**
 * Seconds the server asked the page to wait before probing again: an HTTP 429's Retry-After,
 * or a WebSocket close over a limit whose reason names one (echo-node PROTOCOL.md); undefined
 * for any other failure.
 */
export function backoffSeconds(e: unknown): number | undefined {
  if (e instanceof RetryLater) return e.seconds;
  if (e instanceof ConnectionClosed) {
    return retryAfterSeconds(/retry-after/.test(e.reason) ? e.reason : null);
  }
  return undefined;
}

/** The wait a connection's opening (or its first echo) ran out of. */
export class ConnectTimeout extends Error {
  constructor(readonly afterMs: number) {
    super(`no answer within ${Math.round(afterMs / 1000)} s`);
    this.name = "ConnectTimeout";
  }
}

/**
 * Why a probe failed, in words a person can act on, for the record's `error` and the page's
 * banner: a refused or cut connection (WebSocket code 1006, a fetch that never got a
 * response) looks the same from a page, so it is said as one.
 */
export function failureReason(e: unknown): string {
  if (e instanceof ConnectionClosed) {
    if (e.code === 1006) return "no connection (refused, unreachable or cut off)";
    return e.reason === ""
      ? `the server closed the connection (code ${e.code})`
      : `the server closed the connection: ${e.reason}`;
  }
  // fetch rejects with a TypeError when no response came at all.
  if (e instanceof TypeError) return "no connection (refused, unreachable or blocked)";
  if (e instanceof Error) return e.message || e.name;
  return String(e);
}
