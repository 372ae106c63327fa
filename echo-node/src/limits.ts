/**
 * Per-client bookkeeping for the abuse limits (spec "Limits that keep a public mirror safe").
 * Pure: time is an argument, nothing here touches a socket. A client is a key from
 * `limitKey` (an address, or an IPv6 /64), so every limit below is per key.
 *
 * - Connections: open WebSockets plus in-flight HTTP probes, per client and in total. Counting
 *   requests rather than TCP sockets keeps this meaningful behind a reverse proxy, where one
 *   TCP connection carries many clients.
 * - Sockets: open TCP connections of every kind (idle keep-alive, half-sent headers, WebSocket)
 *   per peer (trusted proxies exempt) and in total, so that idle connections cannot pile up.
 *   The total is SOCKETS_PER_CONNECTION times the connection limit: a WebSocket or probe
 *   refused for capacity then still gets its documented close code or 429 first.
 * - Bytes: one token bucket per client for every byte the server reads or writes for it, on
 *   any path. Probes are charged their full size up front, all or nothing; everything else
 *   (headers, files, refusals, framing, echoes) is charged as it is moved, and may put the
 *   bucket in debt, which refuses anything new until it is repaid.
 * - Messages: a token bucket per client for WebSocket messages (control frames, and fragments
 *   too short to be paid for by their bytes, included: frame-count.ts), handshakes, TCP
 *   connections and HTTP requests. Bytes do not bound the work a stream of tiny messages or
 *   frames costs; this does, so that one client cannot raise everyone else's RTT.
 */
import { TokenBucket } from "./token-bucket.js";

export type LimitName =
  | "payload_cap"
  | "byte_budget"
  | "message_rate"
  | "connections_per_client"
  | "connections_total"
  | "sockets_per_client"
  | "sockets_total"
  | "origin"
  | "cross_site"
  | "request_body"
  | "idle_timeout"
  | "slow_client"
  | "header_timeout"
  | "bad_request";

export const LIMIT_NAMES: readonly LimitName[] = [
  "payload_cap",
  "byte_budget",
  "message_rate",
  "connections_per_client",
  "connections_total",
  "sockets_per_client",
  "sockets_total",
  "origin",
  "cross_site",
  "request_body",
  "idle_timeout",
  "slow_client",
  "header_timeout",
  "bad_request",
];

/** Open TCP connections allowed in total per allowed connection (see above). */
export const SOCKETS_PER_CONNECTION = 2;

/** How long a client refused for too many connections should wait: a guess, since we cannot
 *  know when its other connections end; short enough that a page recovers quickly. */
export const CONNECTION_RETRY_AFTER_S = 5;

/** A message bucket holds this many seconds of its rate: a page's burst (the page load's
 *  requests, a 32 MiB upload's 128 messages) passes. Kept short because a flooder's burst is
 *  handled in one go (ws parses a whole socket read at once): 1,000 echoes stall the event
 *  loop for a few milliseconds, 4,000 for about ten. */
export const MESSAGE_BURST_SECONDS = 0.5;

/** Message tokens the smallest exchange takes at once: a new connection and its first request
 *  (or WebSocket handshake) take one each, back to back. A message bucket smaller than this
 *  drops every connection, /healthz included. */
export const MESSAGES_PER_EXCHANGE = 2;

/** The least `--messages-per-second` whose bucket (MESSAGE_BURST_SECONDS of it) holds one
 *  exchange. */
export const MIN_MESSAGES_PER_SECOND = Math.ceil(MESSAGES_PER_EXCHANGE / MESSAGE_BURST_SECONDS);

/**
 * The least byte budget (capacity and refill per minute) that holds one exchange: a request
 * as large as Node accepts (16 KiB of request line and headers, `http.maxHeaderSize`) and the
 * largest answer that is neither a file nor a probe (`/metrics`, about 4 KiB), with room to
 * spare. Bytes are charged after they move, so a smaller budget lets a client's first request
 * through and then holds it in debt, dropping its next connections unanswered.
 */
export const MIN_BUDGET_BYTES = 32 * 1024;

export interface LimitsOptions {
  maxConnectionsPerClient: number;
  maxSocketsPerClient: number;
  maxConnections: number;
  bytesPerMinute: number;
  /** Capacity of the byte bucket. */
  burstBytes: number;
  messagesPerSecond: number;
}

export type Admission<L extends LimitName = LimitName> =
  { ok: true; release: () => void } | { ok: false; limit: L; retryAfterS: number };

export type Grant = { ok: true } | { ok: false; retryAfterS: number };

/** Concurrent things per key and in total, with idempotent release. */
class Concurrency<PerClient extends LimitName, Total extends LimitName> {
  private readonly counts = new Map<string, number>();
  total = 0;

  constructor(
    private readonly perClient: number,
    private readonly max: number,
    private readonly names: { perClient: PerClient; total: Total },
  ) {}

  of(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /** Counts one in; `exempt` keys (trusted proxies) count towards the total only. */
  admit(key: string, exempt = false): Admission<PerClient | Total> {
    if (this.total >= this.max) {
      return { ok: false, limit: this.names.total, retryAfterS: CONNECTION_RETRY_AFTER_S };
    }
    const mine = this.counts.get(key) ?? 0;
    if (!exempt && mine >= this.perClient) {
      return { ok: false, limit: this.names.perClient, retryAfterS: CONNECTION_RETRY_AFTER_S };
    }
    this.counts.set(key, mine + 1);
    this.total++;
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.counts.get(key) ?? 1) - 1;
        if (left <= 0) this.counts.delete(key);
        else this.counts.set(key, left);
      },
    };
  }
}

const seconds = (ms: number) => (Number.isFinite(ms) ? Math.max(1, Math.ceil(ms / 1000)) : 60);

export class ClientLimits {
  private readonly connections: Concurrency<"connections_per_client", "connections_total">;
  private readonly sockets: Concurrency<"sockets_per_client", "sockets_total">;
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly messages = new Map<string, TokenBucket>();

  constructor(private readonly opts: LimitsOptions) {
    // config.validate refuses this with a message naming the flag; here it would fail silently.
    if (!(opts.messagesPerSecond >= MIN_MESSAGES_PER_SECOND)) {
      throw new RangeError(
        `messagesPerSecond ${opts.messagesPerSecond} is below ${MIN_MESSAGES_PER_SECOND}: ` +
          "its bucket could not hold a connection and its first request",
      );
    }
    this.connections = new Concurrency(opts.maxConnectionsPerClient, opts.maxConnections, {
      perClient: "connections_per_client",
      total: "connections_total",
    });
    const maxSockets = opts.maxConnections * SOCKETS_PER_CONNECTION;
    this.sockets = new Concurrency(opts.maxSocketsPerClient, maxSockets, {
      perClient: "sockets_per_client",
      total: "sockets_total",
    });
  }

  get totalConnections(): number {
    return this.connections.total;
  }

  connectionsOf(key: string): number {
    return this.connections.of(key);
  }

  /** Counts a WebSocket or an HTTP probe in; `release` is idempotent so error paths can call
   *  it freely without corrupting the counts. */
  admit(key: string): Admission<"connections_per_client" | "connections_total"> {
    return this.connections.admit(key);
  }

  /** Counts a TCP connection in. */
  admitSocket(
    key: string,
    trustedProxy: boolean,
  ): Admission<"sockets_per_client" | "sockets_total"> {
    return this.sockets.admit(key, trustedProxy);
  }

  private bucket(key: string, now: number): TokenBucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      bucket = new TokenBucket(this.opts.burstBytes, this.opts.bytesPerMinute / 60_000, now);
      this.buckets.set(key, bucket);
    }
    return bucket;
  }

  /** Charges a probe's `bytes` up front, all or nothing; refused while the client is in debt. */
  takeBytes(key: string, bytes: number, now: number): Grant {
    const waitMs = this.bucket(key, now).take(bytes, now);
    // Infinity cannot happen when maxPayload <= the capacity (config.validate), but a finite
    // header is still owed to the client if it ever does.
    return waitMs === 0 ? { ok: true } : { ok: false, retryAfterS: seconds(waitMs) };
  }

  /** Charges bytes already moved; they may put the client in debt. */
  chargeBytes(key: string, bytes: number, now: number): void {
    if (bytes > 0) this.bucket(key, now).charge(bytes, now);
  }

  /** Whether the client may start something new: refused while its budget is in debt. */
  budgetLeft(key: string, now: number): Grant {
    const bucket = this.buckets.get(key);
    const waitMs = bucket === undefined ? 0 : bucket.debtWaitMs(now);
    return waitMs === 0 ? { ok: true } : { ok: false, retryAfterS: seconds(waitMs) };
  }

  /** Bytes the client owes (0 when not in debt). */
  debtOf(key: string, now: number): number {
    const bucket = this.buckets.get(key);
    return bucket === undefined ? 0 : Math.max(0, -bucket.available(now));
  }

  /** Takes `count` message tokens (all or none): one for a WebSocket message or handshake,
   *  an HTTP request, or a short WebSocket frame beyond a message's first (frame-count.ts). */
  takeMessage(key: string, now: number, count = 1): Grant {
    let bucket = this.messages.get(key);
    if (!bucket) {
      const rate = this.opts.messagesPerSecond;
      bucket = new TokenBucket(rate * MESSAGE_BURST_SECONDS, rate / 1000, now);
      this.messages.set(key, bucket);
    }
    const waitMs = bucket.take(count, now);
    if (waitMs === 0) return { ok: true };
    // A refused message still cost its parsing: it is owed, so a client that keeps flooding
    // (or reconnecting) waits longer (the debt is bounded: TokenBucket.charge).
    bucket.charge(count, now);
    return { ok: false, retryAfterS: seconds(bucket.debtWaitMs(now) + 1 / bucket.ratePerMs) };
  }

  /** Forgets buckets that have refilled completely: they hold no information, and keeping
   *  them would let a client spraying source addresses grow the maps without bound. */
  sweep(now: number): void {
    for (const map of [this.buckets, this.messages]) {
      for (const [key, bucket] of map) {
        if (bucket.available(now) >= bucket.capacity) map.delete(key);
      }
    }
  }

  get trackedAddresses(): number {
    return this.buckets.size;
  }
}
