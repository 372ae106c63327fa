// The hourly byte budget: a page left open must not flood a link. A sliding window over the
// last hour of probe bytes; pure (time is an argument), so tests replay exact schedules.

const HOUR_MS = 3_600_000;

export class ByteBudget {
  private spent: { at: number; bytes: number }[] = [];
  private total = 0;
  private lifetime = 0;

  /** @param perHour bytes allowed in any sliding hour. */
  constructor(public perHour: number) {}

  private expire(now: number): void {
    let drop = 0;
    while (drop < this.spent.length && this.spent[drop]!.at <= now - HOUR_MS) {
      this.total -= this.spent[drop]!.bytes;
      drop++;
    }
    if (drop > 0) this.spent.splice(0, drop);
  }

  /** Bytes spent in the hour before `now`. */
  used(now: number): number {
    this.expire(now);
    return this.total;
  }

  /** Every byte spent since the page opened. */
  get usedSinceStart(): number {
    return this.lifetime;
  }

  /** Whether a probe of `bytes` fits in what is left of the hour. */
  allows(bytes: number, now: number): boolean {
    return this.used(now) + bytes <= this.perHour;
  }

  spend(bytes: number, now: number): void {
    this.expire(now);
    this.spent.push({ at: now, bytes });
    this.total += bytes;
    this.lifetime += bytes;
  }
}

/**
 * The most one bandwidth probe may move so that probing every `periodS` with
 * `probesPerRound` bandwidth probes stays within `perHour`, and within the server's own
 * per-minute allowance when it states one (`/api/config` `limits.bytesPerMinute`).
 */
export function probeShare(
  perHour: number,
  periodS: number,
  probesPerRound: number,
  serverPerMinute = Infinity,
): number {
  const rounds = probesPerRound * Math.max(1, 3600 / periodS);
  const serverRounds = probesPerRound * Math.max(1, 60 / periodS);
  return Math.floor(Math.min(perHour / rounds, serverPerMinute / serverRounds));
}
