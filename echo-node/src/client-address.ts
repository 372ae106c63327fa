/**
 * Which client a request comes from, and under which key the per-client limits count it.
 * Pure: strings in, strings out; nothing here touches a socket.
 *
 * - The client address is the TCP peer, unless that peer is a configured reverse proxy: only
 *   then is X-Forwarded-For read, right to left, skipping the configured proxies, so a client
 *   can never choose its own address by sending the header.
 * - Limits count a client by its address masked to a prefix: IPv6 by /64 by default, since one
 *   subscriber, host or VM usually gets a whole /64 (RFC 6177, RFC 7934 §6) and could
 *   otherwise use 2^64 addresses to get 2^64 budgets; IPv4 by the whole address.
 */
import { isIP } from "node:net";

/** An IP address as bytes: 4 for IPv4, 16 for IPv6. */
export type IpBytes = Uint8Array;

/** At most this many X-Forwarded-For entries are looked at: a chain of real proxies is short,
 *  and the header is client-controlled text. */
const MAX_FORWARDED_HOPS = 16;

function parseIpv4(text: string): IpBytes {
  return Uint8Array.from(text.split(".").map(Number));
}

/** Parses an IPv6 address that `isIP` has already accepted (RFC 4291 §2.2 text forms). */
function parseIpv6(text: string): IpBytes {
  let t = text;
  const words: number[] = [];
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(t);
  if (dotted) {
    const b = parseIpv4(dotted[2]!);
    words.push((b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!);
    t = dotted[1]!.endsWith("::") ? dotted[1]! : dotted[1]!.slice(0, -1);
  }
  const groups = (s: string) => (s === "" ? [] : s.split(":").map((g) => parseInt(g, 16)));
  const gap = t.indexOf("::");
  let all: number[];
  if (gap < 0) all = [...groups(t), ...words];
  else {
    const front = groups(t.slice(0, gap));
    const back = [...groups(t.slice(gap + 2)), ...words];
    all = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  }
  const out = new Uint8Array(16);
  all.forEach((w, i) => {
    out[2 * i] = w >> 8;
    out[2 * i + 1] = w & 0xff;
  });
  return out;
}

/**
 * The address as bytes, or undefined when `text` is not an IP address. An IPv4-mapped IPv6
 * address ("::ffff:1.2.3.4", RFC 4291 §2.5.5.2) is the IPv4 address: a dual-stack listener
 * reports IPv4 clients that way, and one client must not get two budgets.
 */
export function parseIp(text: string): IpBytes | undefined {
  const t = text.trim().replace(/^\[(.*)\]$/, "$1");
  const zoneless = t.replace(/%.*$/, "");
  const family = isIP(zoneless);
  if (family === 4) return parseIpv4(zoneless);
  if (family !== 6) return undefined;
  const b = parseIpv6(zoneless);
  const mapped = b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
  return mapped ? b.slice(12) : b;
}

/** Text form: dotted IPv4, or IPv6 as RFC 5952 §4 says (lower case, longest zero run as ::). */
export function formatIp(b: IpBytes): string {
  if (b.length === 4) return b.join(".");
  const words = Array.from({ length: 8 }, (_, i) => (b[2 * i]! << 8) | b[2 * i + 1]!);
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(":");
  if (best.at < 0) return hex(words);
  return `${hex(words.slice(0, best.at))}::${hex(words.slice(best.at + best.len))}`;
}

/** The canonical text of an address (so that one client always has one key); text that is
 *  not an address is kept, lower-cased (it then only ever matches itself). */
export function normalizeAddress(address: string): string {
  const b = parseIp(address);
  return b === undefined ? address.toLowerCase() : formatIp(b);
}

/** A network prefix: an address and how many leading bits count. */
export interface Cidr {
  bytes: IpBytes;
  bits: number;
}

/** Names accepted in a list of proxies beside CIDRs. */
const NAMED_NETWORKS: Record<string, string[]> = {
  loopback: ["127.0.0.0/8", "::1/128"],
};

/** "10.0.0.0/8", "2001:db8::/32", "192.0.2.7" (a single address), or undefined. */
export function parseCidr(text: string): Cidr | undefined {
  const [addr, bitsText, ...extra] = text.trim().split("/");
  if (extra.length > 0 || addr === undefined) return undefined;
  const bytes = parseIp(addr);
  if (bytes === undefined) return undefined;
  const max = bytes.length * 8;
  let bits = max;
  if (bitsText !== undefined) {
    if (!/^\d{1,3}$/.test(bitsText)) return undefined;
    bits = Number(bitsText);
    // A mapped IPv4 prefix ("::ffff:10.0.0.0/104") counts bits of the IPv6 form.
    if (bytes.length === 4 && addr.includes(":")) bits -= 96;
    if (bits < 0 || bits > max) return undefined;
  }
  return { bytes, bits };
}

/** Whether `address` lies in `cidr` (IPv4 and IPv6 never match each other). */
export function inCidr(address: IpBytes, cidr: Cidr): boolean {
  if (address.length !== cidr.bytes.length) return false;
  const whole = cidr.bits >> 3;
  for (let i = 0; i < whole; i++) if (address[i] !== cidr.bytes[i]) return false;
  const rest = cidr.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (address[whole]! & mask) === (cidr.bytes[whole]! & mask);
}

/** The address with every bit past `bits` cleared. */
function masked(b: IpBytes, bits: number): IpBytes {
  const out = b.slice();
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - 8 * i));
    out[i]! &= (0xff << (8 - keep)) & 0xff;
  }
  return out;
}

/** The reverse proxies whose X-Forwarded-For is believed (`--trust-proxy`). */
export class ProxyTrust {
  private readonly networks: Cidr[];
  /** The entries as given, for advice that adds to them. */
  readonly entries: readonly string[];

  /** @throws RangeError naming the first entry that is neither a CIDR nor a known name. */
  constructor(entries: readonly string[]) {
    this.entries = entries.map((e) => e.trim()).filter((e) => e !== "");
    this.networks = entries.flatMap((entry) => {
      const named = NAMED_NETWORKS[entry.trim().toLowerCase()];
      return (named ?? [entry]).map((text) => {
        const cidr = parseCidr(text);
        if (cidr === undefined) {
          throw new RangeError(`'${entry}' is not an IP address, a CIDR prefix or 'loopback'`);
        }
        return cidr;
      });
    });
  }

  trusts(address: string): boolean {
    if (this.networks.length === 0) return false;
    const b = parseIp(address);
    return b !== undefined && this.networks.some((n) => inCidr(b, n));
  }
}

/**
 * The client address. The TCP peer, unless it is a trusted proxy: then X-Forwarded-For is read
 * from the right (each proxy appends the address it received the request from), skipping
 * entries that are trusted proxies themselves; the first that is not is the client. Entries to
 * its left were written by the client and are never used. An entry that is not an address
 * stops the walk at the last trusted hop, which then stands for the client: a broken header
 * must not let a client pick a fresh key.
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: string | string[] | undefined,
  trust: ProxyTrust,
): string {
  let address = normalizeAddress(peer ?? "unknown");
  if (forwardedFor === undefined || !trust.trusts(address)) return address;
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor;
  const hops = header.split(",");
  for (let i = hops.length - 1; i >= Math.max(0, hops.length - MAX_FORWARDED_HOPS); i--) {
    const hop = parseIp(hops[i]!);
    if (hop === undefined) return address;
    address = formatIp(hop);
    if (!trust.trusts(address)) return address;
  }
  return address;
}

/** Prefix lengths under which addresses share their limits. */
export interface KeyPrefixes {
  ipv4: number;
  ipv6: number;
}

/**
 * The key the per-client limits count `address` under: the address itself for a full-length
 * prefix, else its network as CIDR text ("2001:db8:1:2::/64").
 */
export function limitKey(address: string, prefixes: KeyPrefixes): string {
  const b = parseIp(address);
  if (b === undefined) return address;
  const bits = b.length === 4 ? prefixes.ipv4 : prefixes.ipv6;
  if (bits >= b.length * 8) return formatIp(b);
  return `${formatIp(masked(b, bits))}/${bits}`;
}

/** Networks a reverse proxy of the operator's may well be on (loopback, private, shared and
 *  link-local addresses: RFC 1918, 6598, 3927, 4193, 4291) and a client on the internet is not. */
const LOCAL_NETWORKS: readonly Cidr[] = [
  "127.0.0.0/8",
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "100.64.0.0/10",
  "169.254.0.0/16",
  "::1/128",
  "fc00::/7",
  "fe80::/10",
].map((text) => parseCidr(text)!);

/** Whether `address` is loopback or on a private, shared or link-local network. */
export function isLocalAddress(address: string): boolean {
  const b = parseIp(address);
  return b !== undefined && LOCAL_NETWORKS.some((n) => inCidr(b, n));
}

/** How often a warning about forwarding headers may be written, whoever sends them. */
export const FORWARDING_WARNING_INTERVAL_MS = 60_000;
/** Peers remembered as warned about; beyond this the oldest are forgotten (bounded memory). */
const MAX_WARNED_PEERS = 1024;

/**
 * Notices the mistake that makes every user behind a reverse proxy one client: requests that
 * carry X-Forwarded-For (or Forwarded) from a peer echo-node does not trust (`--trust-proxy`
 * forgotten, or naming another address), or Forwarded without X-Forwarded-For from one it
 * does. Only says so: the header of an untrusted peer is never believed. Any client can send
 * these headers, so each peer is named at most once, and at most one warning is written per
 * interval in all: a client rotating addresses gets one line a minute, never one a request.
 * The `--trust-proxy` to give is spelled out only for a peer on a loopback or private network
 * (where the operator's proxy is, and an internet client is not): for any other, following the
 * advice could mean trusting a client, which could then name itself a fresh address (and get
 * a fresh budget) with every request. Pure: time is an argument.
 */
export class ForwardingWarnings {
  /** Peers already named, in insertion order. */
  private readonly warned = new Set<string>();
  private lastWarning = -Infinity;

  constructor(
    private readonly trust: ProxyTrust,
    private readonly intervalMs = FORWARDING_WARNING_INTERVAL_MS,
  ) {}

  /**
   * The warning for a request from `peer` (normalised; `trusted` is whether it is a trusted
   * proxy) that carries X-Forwarded-For (`xff`) and/or Forwarded (`forwarded`), or undefined
   * when there is nothing to say or it was said.
   */
  check(
    now: number,
    peer: string,
    trusted: boolean,
    xff: boolean,
    forwarded: boolean,
  ): string | undefined {
    if (!xff && !forwarded) return undefined;
    if (trusted && xff) return undefined; // as configured
    if (this.warned.has(peer) || now - this.lastWarning < this.intervalMs) return undefined;
    if (parseIp(peer) === undefined) return undefined; // not an address: nothing to advise
    this.lastWarning = now;
    this.warned.add(peer);
    if (this.warned.size > MAX_WARNED_PEERS) {
      const oldest = this.warned.values().next().value;
      if (oldest !== undefined) this.warned.delete(oldest);
    }
    const flag = `--trust-proxy ${[...this.trust.entries, peer].join(",")}`;
    const meanwhile =
      `every client behind ${peer} counts as ${peer} and shares its limits ` +
      `(said once per address)`;
    if (trusted) {
      return (
        `requests from ${peer}, a trusted proxy, carry Forwarded but no X-Forwarded-For, ` +
        `the only header echo-node reads: have the proxy set X-Forwarded-For; until then ` +
        meanwhile
      );
    }
    const header = xff ? "X-Forwarded-For" : "Forwarded";
    if (!isLocalAddress(peer)) {
      return (
        `requests from ${peer} carry ${header}, which is ignored: ${peer} is not a trusted ` +
        `proxy, and any client can send the header. Name an address in --trust-proxy only ` +
        `if it is a reverse proxy you run${xff ? "" : " (set to send X-Forwarded-For)"}, ` +
        `never a client's (said once per address)`
      );
    }
    if (xff) {
      return (
        `requests from ${peer} carry X-Forwarded-For: behind a proxy? ${flag}. ` +
        `The header is believed only from the proxies --trust-proxy names; until then ` +
        meanwhile
      );
    }
    return (
      `requests from ${peer} carry Forwarded, which echo-node does not read: behind a proxy? ` +
      `Have it set X-Forwarded-For, and ${flag}. Until then ${meanwhile}`
    );
  }
}
