// RTT by WebSocket echo: the NWS 2-byte exchange (JavaNws §2.1.1), timed on the page's clock.

import type { Measurement } from "./measurement";

/** Bytes an echo costs on the wire, both ways (type, seq, 2-byte payload, frame headers). */
export const ECHO_BYTES = 2 * (7 + 6);

export const echo: Measurement = {
  cost: () => ECHO_BYTES,
  probe: () => ({ transport: "websocket", payload_bytes: 2 }),
  async run(link, { timeoutMs }) {
    const rtt = await link.conn.echo(timeoutMs);
    return {
      value: rtt,
      durationMs: rtt,
      probe: { transport: "websocket", payload_bytes: 2, raw_ms: rtt },
    };
  },
};
