// RTT by fetch of a tiny resource: Resource Timing's request-to-first-byte, minus the time
// the server says it spent (`Server-Timing`).

import { httpPing as ping } from "../http-probe";
import type { Measurement } from "./measurement";

/** Bytes a ping costs on the wire, request and response headers. */
const PING_BYTES = 400;

export const httpPing: Measurement = {
  cost: () => PING_BYTES,
  probe: () => ({ transport: "http", payload_bytes: 0 }),
  async run(link, { timeoutMs }) {
    const rtt = await ping(link.base, timeoutMs);
    return {
      value: rtt,
      durationMs: rtt,
      probe: { transport: "http", payload_bytes: 0, raw_ms: rtt },
    };
  },
};
