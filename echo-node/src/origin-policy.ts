/**
 * Which browser pages may make a visitor's browser use this server. Pure: headers in, a
 * verdict out.
 *
 * The threat is other sites' pages spending this server's bandwidth through their visitors'
 * browsers. Two browser-set headers tell such requests apart, and neither can be chosen by the
 * page that causes the request:
 * - `Origin` (RFC 6454 §7, Fetch §3.1) is sent on every CORS request, every WebSocket handshake
 *   and every non-GET/HEAD request. It must name this server's page (configured with
 *   `--origin`, or derived from this machine's own addresses), a mirror, or an origin the
 *   operator allowed. It is never compared with the request's `Host`: a page reached through a
 *   DNS name the attacker controls (DNS rebinding) sends a matching `Host` of its choosing.
 * - `Sec-Fetch-Site` (Fetch Metadata, W3C) is sent by current browsers to https and loopback
 *   origins. A no-cors GET (an `<img>`, `fetch(url, {mode: "no-cors"})`) carries no `Origin`,
 *   but a browser marks it `cross-site` or `same-site`; the page never makes such a request to
 *   the API (its own fetches are `same-origin`, its mirror probes are CORS with an `Origin`).
 *
 * Requests with neither header come from tools (curl, the benchmarks) or from a browser over
 * plain http to a non-loopback host, which sends no Fetch Metadata: such requests cannot be
 * told from a tool's, which is why SECURITY.md asks public servers to use https.
 */
import { isIP } from "node:net";

export type RequestKind = "api" | "websocket" | "page";

export type Verdict =
  | {
      ok: true;
      /** the Origin to answer with CORS headers, when there is one */ corsOrigin?: string;
    }
  | { ok: false; limit: "origin" | "cross_site"; why: string };

/** The headers the policy reads (Node lower-cases header names). */
export interface BrowserHeaders {
  origin?: string | undefined;
  "sec-fetch-site"?: string | undefined;
  "sec-fetch-mode"?: string | undefined;
  "sec-fetch-dest"?: string | undefined;
}

/** `https://Example.org:443/` → `https://example.org`; undefined unless an http(s) origin. */
export function canonicalOrigin(text: string): string | undefined {
  try {
    const url = new URL(text);
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/** Whether `host` (a URL hostname: IPv6 in brackets) is loopback: "localhost", 127.0.0.0/8 or
 *  ::1. Nobody else can make a browser reach those names (RFC 6761 §6.3). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (h === "localhost" || h === "::1") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}

export interface OriginPolicyOptions {
  /** `--origin`: the origins the page is served from. When empty, any origin whose host is
   *  loopback or one of `ownAddresses` (any scheme and port) is the page's. */
  pageOrigins: readonly string[];
  /** This machine's interface addresses (derivation only; not from any request). */
  ownAddresses: readonly string[];
  /** Mirror origins and `--allow-origin` entries; `*` allows every origin. */
  allowed: readonly string[];
}

export class OriginPolicy {
  private readonly any: boolean;
  private readonly exact: Set<string>;
  private readonly ownHosts: Set<string> | undefined;

  constructor(opts: OriginPolicyOptions) {
    this.any = opts.allowed.includes("*");
    const listed = [...opts.pageOrigins, ...opts.allowed.filter((o) => o !== "*")];
    this.exact = new Set(listed.map((o) => canonicalOrigin(o) ?? o));
    this.ownHosts =
      opts.pageOrigins.length > 0
        ? undefined
        : new Set(opts.ownAddresses.map((a) => (a.includes(":") ? `[${a}]` : a).toLowerCase()));
  }

  /** Whether a page of `origin` may use the probes. */
  allowsOrigin(origin: string): boolean {
    if (this.any) return true;
    if (this.exact.has(origin)) return true;
    if (this.ownHosts === undefined) return false;
    const canonical = canonicalOrigin(origin);
    if (canonical === undefined || canonical !== origin) return false;
    const host = new URL(canonical).hostname;
    return isLoopbackHost(host) || this.ownHosts.has(host);
  }

  check(kind: RequestKind, h: BrowserHeaders): Verdict {
    const site = h["sec-fetch-site"];
    if (kind === "page") {
      // The page may be linked from anywhere (a top-level navigation), but another site has
      // no business embedding or fetching its files: that only spends this server's bytes.
      const navigation =
        h["sec-fetch-mode"] === "navigate" && (h["sec-fetch-dest"] ?? "document") === "document";
      if (site === "cross-site" && !navigation) {
        return { ok: false, limit: "cross_site", why: "another site may not load this file" };
      }
      return { ok: true };
    }
    const origin = h.origin;
    if (origin !== undefined) {
      if (this.allowsOrigin(origin)) return { ok: true, corsOrigin: origin };
      return { ok: false, limit: "origin", why: `origin ${origin} is not allowed` };
    }
    if (site === "cross-site" || site === "same-site") {
      return {
        ok: false,
        limit: "cross_site",
        why: `a ${site} request without CORS (no Origin) may not use the probes`,
      };
    }
    return { ok: true };
  }
}
