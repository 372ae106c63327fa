/**
 * Per-client-address bookkeeping for the abuse limits (spec "Limits that keep a public mirror
 * safe"): concurrent connections per address and in total, and probe bytes per address per
 * minute. Pure: time is an argument, nothing here touches a socket.
 *
 * A "connection" is an open WebSocket or an in-flight HTTP probe request. Counting requests
 * rather than TCP sockets is what makes the limit meaningful behind a reverse proxy, where
 * one TCP connection carries many clients and the address comes from X-Forwarded-For.
 */
import { TokenBucket } from "./token-bucket.js";

export type LimitName =
  | "payload_cap"
  | "byte_budget"
  | "connections_per_client"
  | "connections_total"
  | "origin"
  | "idle_timeout"
  | "slow_client"
  | "bad_request";

export const LIMIT_NAMES: readonly LimitName[] = [
  "payload_cap",
  "byte_budget",
  "connections_per_client",
  "connections_total",
  "origin",
  "idle_timeout",
  "slow_client",
  "bad_request",
];

/** How long a client refused for too many connections should wait: a guess, since we cannot
 *  know when its other connections end; short enough that a page recovers quickly. */
export const CONNECTION_RETRY_AFTER_S = 5;

export interface LimitsOptions {
  maxConnectionsPerClient: number;
  maxConnections: number;
  bytesPerMinute: number;
}

export type Admission =
  | { ok: true; release: () => void }
  | { ok: false; limit: "connections_per_client" | "connections_total"; retryAfterS: number };

export type ByteGrant = { ok: true } | { ok: false; retryAfterS: number };

export class ClientLimits {
  private readonly connections = new Map<string, number>();
  private readonly buckets = new Map<string, TokenBucket>();
  private total = 0;

  constructor(private readonly opts: LimitsOptions) {}

  get totalConnections(): number {
    return this.total;
  }

  connectionsOf(address: string): number {
    return this.connections.get(address) ?? 0;
  }

  /** Counts a connection in; the returned `release` is idempotent so error paths can call it
   *  freely without corrupting the counts. */
  admit(address: string): Admission {
    if (this.total >= this.opts.maxConnections) {
      return { ok: false, limit: "connections_total", retryAfterS: CONNECTION_RETRY_AFTER_S };
    }
    const mine = this.connections.get(address) ?? 0;
    if (mine >= this.opts.maxConnectionsPerClient) {
      return { ok: false, limit: "connections_per_client", retryAfterS: CONNECTION_RETRY_AFTER_S };
    }
    this.connections.set(address, mine + 1);
    this.total++;
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.connections.get(address) ?? 1) - 1;
        if (left <= 0) this.connections.delete(address);
        else this.connections.set(address, left);
      },
    };
  }

  /** Charges `bytes` against the address's budget, all or nothing. */
  takeBytes(address: string, bytes: number, now: number): ByteGrant {
    let bucket = this.buckets.get(address);
    if (!bucket) {
      bucket = new TokenBucket(this.opts.bytesPerMinute, this.opts.bytesPerMinute / 60_000, now);
      this.buckets.set(address, bucket);
    }
    const waitMs = bucket.take(bytes, now);
    if (waitMs === 0) return { ok: true };
    // Infinity cannot happen when maxPayload <= bytesPerMinute (config.validate), but a
    // finite header is still owed to the client if it ever does.
    const seconds = Number.isFinite(waitMs) ? Math.ceil(waitMs / 1000) : 60;
    return { ok: false, retryAfterS: Math.max(1, seconds) };
  }

  /** Forgets buckets that have refilled completely: they hold no information, and keeping
   *  them would let a client spraying source addresses grow the map without bound. */
  sweep(now: number): void {
    for (const [address, bucket] of this.buckets) {
      if (bucket.available(now) >= bucket.capacity) this.buckets.delete(address);
    }
  }

  get trackedAddresses(): number {
    return this.buckets.size;
  }
}
