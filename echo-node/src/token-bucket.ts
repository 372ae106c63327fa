/**
 * A token bucket (one token = one byte). Pure: the caller passes the time, so tests can drive
 * it with exact numbers and the server with `performance.now()`.
 *
 * Starts full, so a new client can run one maximum-size probe immediately; afterwards it may
 * average `ratePerMs` with bursts up to `capacity`. Tokens may go negative through `charge`
 * (a debt), never through `take`.
 */
/** Debt is bounded at this many capacities (see `charge`). */
export const MAX_DEBT = 4;

export class TokenBucket {
  private tokens: number;
  private updatedAt: number;

  constructor(
    readonly capacity: number,
    readonly ratePerMs: number,
    now: number,
  ) {
    if (!(capacity > 0) || !(ratePerMs > 0)) {
      throw new RangeError("token bucket capacity and rate must be positive");
    }
    this.tokens = capacity;
    this.updatedAt = now;
  }

  private refill(now: number): void {
    // A clock that goes backwards (it should not with a monotonic clock) must not drain tokens.
    const elapsed = Math.max(0, now - this.updatedAt);
    this.tokens = Math.min(this.capacity, this.tokens + elapsed * this.ratePerMs);
    this.updatedAt = Math.max(now, this.updatedAt);
  }

  /**
   * Takes `n` tokens if all are available and returns 0; otherwise takes nothing and returns
   * the milliseconds until `n` would be available (Infinity if `n` exceeds the capacity: such
   * a bucket can never grant `n`, which is why config.validate refuses capacities below the
   * smallest thing each bucket must grant). All-or-nothing, because a probe granted half its
   * bytes would measure nothing useful.
   */
  take(n: number, now: number): number {
    this.refill(now);
    if (n <= this.tokens) {
      this.tokens -= n;
      return 0;
    }
    if (n > this.capacity) return Infinity;
    return (n - this.tokens) / this.ratePerMs;
  }

  /**
   * Takes `n` tokens whatever is left: for bytes that were already moved (a refusal's answer,
   * a file, WebSocket framing), which can only be counted after the fact. The bucket may go
   * into debt, so that a client that overspent waits before anything new is granted; the
   * debt is bounded (MAX_DEBT capacities) only so that a Retry-After stays meaningful.
   */
  charge(n: number, now: number): void {
    this.refill(now);
    this.tokens = Math.max(-MAX_DEBT * this.capacity, this.tokens - n);
  }

  /** Milliseconds until the bucket is out of debt (0 if it is not in debt). */
  debtWaitMs(now: number): number {
    this.refill(now);
    return this.tokens >= 0 ? 0 : -this.tokens / this.ratePerMs;
  }

  /** Tokens available at `now` (for tests and for dropping idle buckets). */
  available(now: number): number {
    this.refill(now);
    return this.tokens;
  }
}
