// When rounds run: one period after the last one started (JavaNws §2.1.3: the period is the
// user's), never two at once, none while suspended, and none before the end of a wait the
// server asked for. Time and timers are arguments, so tests run exact schedules.

export interface Clock {
  /** Monotonic ms (performance.now). */
  now(): number;
  /** Runs `run` after `ms`; returns what `cancel` takes. */
  after(ms: number, run: () => void): unknown;
  cancel(timer: unknown): void;
}

export class Scheduler {
  private timer: unknown;
  private running = false;
  private lastStart = -Infinity;
  private backoffUntil = 0;
  private paused = false;
  /** Waiting for the round that runs to end. */
  private readonly idle: (() => void)[] = [];

  /**
   * @param periodMs the period now (read whenever the next round is scheduled).
   * @param round one round; the next is scheduled when it settles.
   */
  constructor(
    private readonly clock: Clock,
    private readonly periodMs: () => number,
    private readonly round: () => Promise<void>,
  ) {}

  get suspended(): boolean {
    return this.paused;
  }

  /** Whether a round is running. */
  get inRound(): boolean {
    return this.running;
  }

  /** Whether the server's wait ({@link backOff}) is still on. */
  get backingOff(): boolean {
    return this.clock.now() < this.backoffUntil;
  }

  /** No round starts until {@link resume}; the one running (if any) ends at its next step. */
  suspend(): void {
    this.paused = true;
    this.schedule();
  }

  resume(): void {
    this.paused = false;
    this.schedule();
  }

  /** The next round starts at once, whatever the period (the target changed). */
  soon(): void {
    this.lastStart = -Infinity;
  }

  /** Rounds that start in the next `seconds` do nothing but say so (a 429 or a close over a
   *  limit named the wait). */
  backOff(seconds: number): void {
    this.backoffUntil = this.clock.now() + seconds * 1000;
  }

  /** Forgets a wait: it was another server's. */
  clearBackoff(): void {
    this.backoffUntil = 0;
  }

  /** Resolves when no round is running: work that holds the worker for a while (replaying
   *  an import) then cannot delay a probe's timestamp. */
  betweenRounds(): Promise<void> {
    return this.running ? new Promise((resolve) => this.idle.push(resolve)) : Promise.resolve();
  }

  /** Starts the next round one period after the last one started (at once if that has
   *  passed); after a settings change, the period in force now counts. */
  schedule(): void {
    this.clock.cancel(this.timer);
    this.timer = undefined;
    if (this.paused || this.running) return;
    const wait = Math.max(0, this.lastStart + this.periodMs() - this.clock.now());
    this.timer = this.clock.after(wait, () => {
      this.timer = undefined;
      this.running = true;
      this.lastStart = this.clock.now();
      void this.round().finally(() => {
        this.running = false;
        this.schedule();
        for (const resolve of this.idle.splice(0)) resolve();
      });
    });
  }
}
