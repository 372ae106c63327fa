// RTT by WebSocket echo: the NWS 2-byte exchange (JavaNws §2.1.1), timed on the page's clock.
//
// Each probe sends an untimed echo first and times the one right after it. The first message
// after a period's idle second pays for waking every thread on its path (the page's worker,
// the browser's IO thread and network process, the server's event loop), which is not the
// network's time: sockperf's ping-pong, the reference, keeps them awake by running back to
// back. Measured on a veth with no delay (load ~5-10, one probe every 250 ms, isolated page):
// median 1.6-2.2 ms without the warm-up echo, 1.0-1.6 ms with it; sockperf 0.016 ms.

import type { Measurement } from "./measurement";

/** Bytes an echo costs on the wire, both ways (type, seq, 2-byte payload, frame headers). */
export const ECHO_BYTES = 2 * (7 + 6);

export const echo: Measurement = {
  // The warm-up echo and the timed one.
  cost: () => 2 * ECHO_BYTES,
  probe: () => ({ transport: "websocket", payload_bytes: 2 }),
  async run(link, { timeoutMs }) {
    await link.conn.echo(timeoutMs);
    const rtt = await link.conn.echo(timeoutMs);
    return {
      value: rtt,
      durationMs: rtt,
      probe: { transport: "websocket", payload_bytes: 2, raw_ms: rtt },
    };
  },
};
