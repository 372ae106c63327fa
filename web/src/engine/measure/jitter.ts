// Jitter: how much consecutive echo RTTs differ, forecast like any series.

import { jitter as coreJitter } from "../../forecast";

/** Jitter: mean absolute difference of consecutive RTTs (the core's definition, shared with
 *  `nowcast udp`); undefined below two values. */
export function jitter(rtts: readonly number[]): number | undefined {
  return coreJitter(Float64Array.from(rtts));
}

/** The jitter of each echo RTT with the one before it on the same connection. */
export class Jitter {
  private last: number | undefined;

  /** A new connection: its first echo has no predecessor. */
  reset(): void {
    this.last = undefined;
  }

  /** The jitter of `rtt` and the RTT before it; undefined for the first. */
  next(rtt: number): number | undefined {
    const j = this.last === undefined ? undefined : jitter([this.last, rtt]);
    this.last = rtt;
    return j;
  }
}
