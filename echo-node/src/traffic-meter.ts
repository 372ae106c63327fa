/**
 * What one connection has cost its client in bytes: every byte read from and written to its
 * socket since the last settlement, less what a probe paid up front. Pure: the edge passes the
 * socket's running totals (`bytesRead`, `bytesWritten`).
 *
 * Probes are charged their announced size before they start (all or nothing, so a probe is
 * never cut halfway for budget); the meter then lets that much of the connection's traffic
 * through uncharged. Everything else, on any path (request headers, files, refusals, WebSocket
 * framing and control frames, echoes, bytes of a body that was refused), is charged as it is
 * moved.
 */
export interface Settlement {
  /** Bytes read and written since the last settlement. */
  in: number;
  out: number;
  /** What the client owes for them, after prepaid probe bytes. */
  charge: number;
}

export class TrafficMeter {
  private read: number;
  private written: number;
  private credit = 0;

  constructor(totalRead = 0, totalWritten = 0) {
    this.read = totalRead;
    this.written = totalWritten;
  }

  /** A probe of `bytes` was charged up front: that much traffic is already paid for. */
  prepay(bytes: number): void {
    this.credit += bytes;
  }

  /** Drops what is left of the prepaid bytes (an HTTP request ended: its credit must not pay
   *  for the next request on the connection, which may be another client's behind a proxy). */
  forfeit(): void {
    this.credit = 0;
  }

  settle(totalRead: number, totalWritten: number): Settlement {
    const inBytes = Math.max(0, totalRead - this.read);
    const outBytes = Math.max(0, totalWritten - this.written);
    this.read = Math.max(this.read, totalRead);
    this.written = Math.max(this.written, totalWritten);
    const paid = Math.min(this.credit, inBytes + outBytes);
    this.credit -= paid;
    return { in: inBytes, out: outBytes, charge: inBytes + outBytes - paid };
  }
}
