/**
 * Which address a request comes from, and whether its Origin may use this server.
 */
import { isIP } from "node:net";
import type { IncomingMessage } from "node:http";

/** IPv4-mapped IPv6 addresses ("::ffff:1.2.3.4") are the same client as "1.2.3.4"; without
 *  this, a dual-stack listener would give one client two budgets. */
export function normalizeAddress(address: string): string {
  const lower = address.toLowerCase();
  return lower.startsWith("::ffff:") && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower;
}

/**
 * The client address. With `trustProxy`, the rightmost X-Forwarded-For entry: that is the one
 * our own reverse proxy appended; entries to its left were written by the client and can be
 * forged. Without `trustProxy` the header is ignored entirely, since any client can send it.
 */
export function clientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  trustProxy: boolean,
): string {
  if (trustProxy && forwardedFor !== undefined) {
    const header = Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor;
    const last = header.split(",").pop()?.trim() ?? "";
    if (isIP(last) !== 0) return normalizeAddress(last);
  }
  return normalizeAddress(socketAddress ?? "unknown");
}

export function requestAddress(req: IncomingMessage, trustProxy: boolean): string {
  return clientAddress(req.socket.remoteAddress, req.headers["x-forwarded-for"], trustProxy);
}

/**
 * Origin allowlist for WebSocket handshakes and CORS: the page's own origin (the Host the
 * request was sent to), the configured mirrors, and extra origins from the configuration.
 * Requests without an Origin header are not from a browser page and are allowed: the check
 * exists to stop other sites' pages from spending this server's bandwidth, not to
 * authenticate tools.
 */
export class OriginPolicy {
  private readonly allowed: Set<string>;
  private readonly any: boolean;

  constructor(origins: readonly string[]) {
    this.any = origins.includes("*");
    this.allowed = new Set(origins.filter((o) => o !== "*").map((o) => o.replace(/\/+$/, "")));
  }

  allows(origin: string | undefined, host: string | undefined): boolean {
    if (origin === undefined) return true;
    if (this.any || this.allowed.has(origin)) return true;
    if (host === undefined) return false;
    try {
      // Same origin: the scheme may differ behind a TLS-terminating proxy, the host must not.
      return new URL(origin).host === host.toLowerCase();
    } catch {
      return false;
    }
  }
}
