// Loaded latency: echoes (timed pings where the server has them) on a second connection while a transfer runs, one every
// LOADED_ECHO_GAP_MS, for as long as it lasts. Their median is one loaded RTT, the queueing
// the transfer causes; a timed-out echo ends them (and is recorded as a loaded-RTT timeout).

import { ProbeTimeout } from "../errors";
import { ECHO_BYTES, pingBytes } from "./echo";
import type { LoadedEchoes, LoadedLatency } from "./measurement";

/** Gap between loaded-RTT echoes, so that they measure the queue without loading the server. */
const LOADED_ECHO_GAP_MS = 10;

export const loadedLatency: LoadedLatency = {
  async during(link, work, timeoutMs, spend) {
    const lc = link.load;
    let finished = false;
    const settled = Promise.allSettled([work]).then(([r]) => {
      finished = true;
      return r!;
    });
    const echoes: LoadedEchoes = { samples: [], timedOut: undefined };
    while (!finished && lc.open) {
      spend(lc.timedPing ? pingBytes(1) : ECHO_BYTES);
      try {
        // One timed ping where the server has them (no warm-up: the transfer keeps the path
        // awake), timed as the idle RTT is (echo.ts), so the two compare.
        echoes.samples.push(
          lc.timedPing ? (await lc.ping(1, timeoutMs))[0]! : await lc.echo(timeoutMs),
        );
      } catch (e) {
        if (e instanceof ProbeTimeout)
          echoes.timedOut = { atMs: Date.now(), elapsedMs: e.elapsedMs };
        break;
      }
      if (!finished) await new Promise((r) => setTimeout(r, LOADED_ECHO_GAP_MS));
    }
    return { work: await settled, echoes };
  },
};
