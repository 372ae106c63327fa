// The hourly byte budget: a page left open must not flood a link. A sliding window over the
// last hour of probe bytes; pure (time is an argument, wall-clock ms so that what was spent
// survives a reload: the page keeps `snapshot()` and gives it back to `restore()`), so tests
// replay exact schedules.

export const HOUR_MS = 3_600_000;

export class ByteBudget {
  private spent: { at: number; bytes: number }[] = [];
  private total = 0;
  private lifetime = 0;

  /**
   * @param perHour bytes allowed in any sliding hour.
   * @param slotMs spends within one slot of this length are kept as one entry, stamped with
   *   the latest of them: the bytes then leave the hour up to `slotMs` late (never early), and
   *   an hour of echoes every few milliseconds is a few hundred entries to keep and store.
   */
  constructor(
    public perHour: number,
    private readonly slotMs = 0,
  ) {}

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

  /** Every byte spent since the page opened (what a reload restored not included). */
  get usedSinceStart(): number {
    return this.lifetime;
  }

  /** Whether a probe of `bytes` fits in what is left of the hour. */
  allows(bytes: number, now: number): boolean {
    return this.used(now) + bytes <= this.perHour;
  }

  spend(bytes: number, now: number): void {
    this.add(bytes, now);
    this.lifetime += bytes;
  }

  private add(bytes: number, now: number): void {
    this.expire(now);
    const last = this.spent.at(-1);
    // A clock set back must not unsort the window.
    const at = Math.max(now, last?.at ?? -Infinity);
    if (
      last !== undefined &&
      this.slotMs > 0 &&
      slot(last.at, this.slotMs) === slot(at, this.slotMs)
    ) {
      last.at = at;
      last.bytes += bytes;
    } else {
      this.spent.push({ at, bytes });
    }
    this.total += bytes;
  }

  /**
   * When a probe of `bytes` fits again: undefined when it fits now, Infinity when it never
   * will (more than the whole budget), else the time the oldest bytes in the way leave the
   * hour.
   */
  resumesAt(bytes: number, now: number): number | undefined {
    let over = this.used(now) + bytes - this.perHour;
    if (over <= 0) return undefined;
    if (bytes > this.perHour) return Infinity;
    for (const e of this.spent) {
      over -= e.bytes;
      if (over <= 0) return e.at + HOUR_MS;
    }
    return Infinity;
  }

  /** The hour's spends, oldest first, as `[at, bytes]` pairs (plain data to keep). */
  snapshot(now: number): [number, number][] {
    this.expire(now);
    return this.spent.map((e) => [e.at, e.bytes]);
  }

  /** Takes back spends kept by {@link snapshot} (after a reload): those of the hour before
   *  `now` count again; anything else in the list is ignored. */
  restore(spends: readonly (readonly [number, number])[], now: number): void {
    const kept = spends
      .filter(
        ([at, bytes]) =>
          Number.isFinite(at) &&
          at > now - HOUR_MS &&
          at <= now &&
          Number.isFinite(bytes) &&
          bytes > 0,
      )
      .sort((a, b) => a[0] - b[0]);
    const mine = this.spent;
    this.spent = [];
    this.total = 0;
    for (const [at, bytes] of [...kept, ...mine.map((e) => [e.at, e.bytes] as const)].sort(
      (a, b) => a[0] - b[0],
    )) {
      this.add(bytes, at);
    }
  }
}

const slot = (at: number, slotMs: number) => Math.floor(at / slotMs);

/**
 * The most one bandwidth probe may move so that probing every `periodS` with
 * `probesPerRound` bandwidth probes stays within `perHour`, and within the server's own
 * per-minute allowance when it states one (`/api/config` `limits.bytesPerMinute`); and which
 * of the two sets it (what the page tells when the share spaces probes).
 */
export function probeShare(
  perHour: number,
  periodS: number,
  probesPerRound: number,
  serverPerMinute = Infinity,
): { bytes: number; limit: "budget" | "server" } {
  const ours = perHour / (probesPerRound * Math.max(1, 3600 / periodS));
  const server = serverPerMinute / (probesPerRound * Math.max(1, 60 / periodS));
  return server < ours
    ? { bytes: Math.floor(server), limit: "server" }
    : { bytes: Math.floor(ours), limit: "budget" };
}
