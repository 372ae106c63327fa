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
