// Jitter: how much consecutive echo RTTs differ, forecast like any series.

/** Jitter: mean absolute difference of consecutive RTTs; undefined below two values. */
export function jitter(rtts: readonly number[]): number | undefined {
  if (rtts.length < 2) return undefined;
  let sum = 0;
  for (let i = 1; i < rtts.length; i++) sum += Math.abs(rtts[i]! - rtts[i - 1]!);
  return sum / (rtts.length - 1);
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
