/**
 * The pure rules behind the security limits: addresses and their limit keys, trusted proxies,
 * the origin policy against the headers Chromium really sends (test/corpus), the traffic
 * meter, the budget's debt, receive compaction, and the configuration of it all.
 */
import { describe, expect, it } from "vitest";
import {
  clientAddress,
  limitKey,
  normalizeAddress,
  parseCidr,
  ProxyTrust,
} from "../src/client-address.js";
import { burstBytes, defaultConfig, parseConfig } from "../src/config.js";
import { ClientLimits } from "../src/limits.js";
import { OriginPolicy } from "../src/origin-policy.js";
import { compactPieces, receiveBackstop } from "../src/receive-buffers.js";
import { TokenBucket } from "../src/token-bucket.js";
import { TrafficMeter } from "../src/traffic-meter.js";
import { chromiumRows } from "./corpus.js";

describe("addresses and limit keys", () => {
  const cases: [string, string][] = [
    ["::ffff:10.0.0.1", "10.0.0.1"],
    ["::FFFF:0a00:0001", "10.0.0.1"],
    ["2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["2001:db8::", "2001:db8::"],
    ["fe80::1%eth0", "fe80::1"],
    ["[::1]", "::1"],
    ["not an address", "not an address"],
  ];
  it.each(cases)("normalises %s to %s", (input, canonical) => {
    expect(normalizeAddress(input)).toBe(canonical);
  });

  it("keys IPv6 clients by /64 and IPv4 clients by address, both configurable", () => {
    const defaults = { ipv4: 32, ipv6: 64 };
    expect(limitKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd", defaults)).toBe("2001:db8:1:2::/64");
    expect(limitKey("2001:db8:1:2::1", defaults)).toBe(limitKey("2001:db8:1:2:ffff::9", defaults));
    expect(limitKey("2001:db8:1:3::1", defaults)).not.toBe(limitKey("2001:db8:1:2::1", defaults));
    expect(limitKey("192.0.2.7", defaults)).toBe("192.0.2.7");
    expect(limitKey("192.0.2.7", { ipv4: 24, ipv6: 48 })).toBe("192.0.2.0/24");
    expect(limitKey("2001:db8:1:2::1", { ipv4: 24, ipv6: 48 })).toBe("2001:db8:1::/48");
    expect(limitKey("2001:db8::1", { ipv4: 32, ipv6: 128 })).toBe("2001:db8::1");
  });

  it("parses CIDRs and refuses what is not one", () => {
    expect(parseCidr("10.0.0.0/8")).toEqual({ bytes: Uint8Array.of(10, 0, 0, 0), bits: 8 });
    expect(parseCidr("::1")?.bits).toBe(128);
    for (const bad of [
      "10.0.0.0/33",
      "10.0.0.0/-1",
      "10.0.0.0/8/8",
      "example.org",
      "::1/129",
      "",
    ]) {
      expect(parseCidr(bad), bad).toBeUndefined();
    }
    expect(() => new ProxyTrust(["10.0.0.0/8", "nope"])).toThrow(/'nope' is not an IP address/);
  });

  it("believes X-Forwarded-For only from trusted proxies, walking right to left past them", () => {
    const trust = new ProxyTrust(["loopback", "10.0.0.0/8"]);
    // The client wrote 6.6.6.6 itself; the proxy appended 1.2.3.4; a second proxy 10.0.0.5.
    expect(clientAddress("127.0.0.1", "6.6.6.6, 1.2.3.4, 10.0.0.5", trust)).toBe("1.2.3.4");
    expect(clientAddress("192.0.2.9", "1.2.3.4", trust)).toBe("192.0.2.9");
    expect(clientAddress("::ffff:127.0.0.1", "garbage", trust)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", "10.1.1.1, 10.2.2.2", trust)).toBe("10.1.1.1");
    expect(clientAddress("127.0.0.1", undefined, trust)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", "1.2.3.4", new ProxyTrust([]))).toBe("127.0.0.1");
  });
});

describe("origin policy against Chromium's requests", () => {
  const page = new OriginPolicy({ pageOrigins: [], ownAddresses: ["192.0.2.10"], allowed: [] });
  const mirror = new OriginPolicy({ pageOrigins: [], ownAddresses: [], allowed: ["*"] });
  for (const row of chromiumRows()) {
    it(`${row.ok ? "allows" : "refuses"} ${row.what}${row.captured ? " (captured)" : ""}`, () => {
      const headers = Object.fromEntries(
        Object.entries(row.headers).map(([k, v]) => [k, v.replace("PAGE", "8080")]),
      );
      const verdict = (row.server === "A" ? page : mirror).check(row.kind, headers);
      expect(verdict.ok).toBe(row.ok);
    });
  }

  it("takes the page's origin from --origin when configured, and nothing from Host", () => {
    const p = new OriginPolicy({
      pageOrigins: ["https://nowcast.example.org"],
      ownAddresses: ["192.0.2.10"],
      allowed: [],
    });
    expect(p.check("websocket", { origin: "https://nowcast.example.org" }).ok).toBe(true);
    expect(p.check("websocket", { origin: "http://127.0.0.1:8080" }).ok).toBe(false);
    expect(p.check("api", { origin: "https://evil.example" })).toMatchObject({
      ok: false,
      limit: "origin",
    });
  });
});

describe("traffic meter and budget debt", () => {
  it("charges every byte moved, less what a probe prepaid", () => {
    const m = new TrafficMeter();
    expect(m.settle(300, 200)).toEqual({ in: 300, out: 200, charge: 500 });
    m.prepay(10_000);
    expect(m.settle(400, 10_300)).toEqual({ in: 100, out: 10_100, charge: 200 });
    m.forfeit();
    expect(m.settle(500, 10_300).charge).toBe(100);
  });

  it("goes into debt for bytes already moved, which refuses new work until repaid", () => {
    const b = new TokenBucket(1000, 1, 0);
    b.charge(1500, 0);
    expect(b.available(0)).toBe(-500);
    expect(b.debtWaitMs(0)).toBe(500);
    expect(b.take(10, 0)).toBe(510);
    b.charge(1e9, 0);
    expect(b.available(0)).toBe(-4000); // debt is bounded at four capacities
    const l = new ClientLimits({
      maxConnectionsPerClient: 1,
      maxSocketsPerClient: 1,
      maxConnections: 1,
      bytesPerMinute: 60_000,
      burstBytes: 1000,
      messagesPerSecond: 10,
    });
    l.chargeBytes("a", 1500, 0);
    expect(l.budgetLeft("a", 0)).toEqual({ ok: false, retryAfterS: 1 });
    expect(l.budgetLeft("b", 0)).toEqual({ ok: true });
    expect(l.budgetLeft("a", 600)).toEqual({ ok: true });
  });

  it("allows bursts of half a second of messages, then the rate", () => {
    const l = new ClientLimits({
      maxConnectionsPerClient: 1,
      maxSocketsPerClient: 1,
      maxConnections: 1,
      bytesPerMinute: 60_000,
      burstBytes: 1000,
      messagesPerSecond: 10,
    });
    for (let i = 0; i < 5; i++) expect(l.takeMessage("a", 0).ok).toBe(true);
    expect(l.takeMessage("a", 0)).toEqual({ ok: false, retryAfterS: 1 });
    // A refused message is owed too: the flooder waits for what it sent, not just the rate.
    expect(l.takeMessage("a", 100).ok).toBe(false);
    expect(l.takeMessage("a", 300).ok).toBe(true);
  });
});

describe("receive compaction", () => {
  it("merges a trickle of 1-byte reads into few pieces and leaves large reads alone", () => {
    const pieces: Buffer[] = [];
    for (let i = 0; i < 100_000; i++) {
      pieces.push(Buffer.of(i & 0xff));
      compactPieces(pieces);
    }
    expect(pieces.length).toBeLessThan(100_000 / 4096 + 64 + 1);
    expect(pieces.reduce((s, p) => s + p.length, 0)).toBe(100_000);
    const big = [Buffer.alloc(65536), Buffer.alloc(65536)];
    expect(compactPieces(big)).toBe(false);
    expect(big.length).toBe(2);
  });

  it("keeps ws's own limits above what a legitimate client can send", () => {
    // The largest message in reads of a 536-byte minimum TCP segment.
    expect(receiveBackstop(1024 * 1024).maxBufferedChunks).toBeGreaterThan((1024 * 1024) / 536);
  });
});

describe("configuration of the limits", () => {
  it("takes proxies, prefixes, origins and the new limits from flags and environment", () => {
    const r = parseConfig(
      [
        "--trust-proxy",
        "10.0.0.0/8,::1",
        "--ipv6-prefix",
        "56",
        "--origin",
        "https://nowcast.example.org",
        "--messages-per-second",
        "500",
      ],
      { ECHO_NODE_MAX_SOCKETS_PER_CLIENT: "16", ECHO_NODE_HEADER_TIMEOUT: "5s" },
    );
    if (r.kind !== "run") return expect.fail(r.kind);
    expect(r.config).toMatchObject({
      trustProxy: ["10.0.0.0/8", "::1"],
      ipv6Prefix: 56,
      origins: ["https://nowcast.example.org"],
      messagesPerSecond: 500,
      maxSocketsPerClient: 16,
      headerTimeoutMs: 5000,
      name: undefined,
    });
    expect(r.warnings).toEqual([]);
  });

  it("migrates the old boolean --trust-proxy to loopback, with a warning", () => {
    for (const [argv, env] of [
      [["--trust-proxy", "--port", "1"], {}],
      [[], { ECHO_NODE_TRUST_PROXY: "true" }],
    ] as [string[], Record<string, string>][]) {
      const r = parseConfig(argv, env);
      if (r.kind !== "run") return expect.fail(r.kind);
      expect(r.config.trustProxy).toEqual(["loopback"]);
      expect(r.warnings).toHaveLength(1);
    }
    const off = parseConfig([], { ECHO_NODE_TRUST_PROXY: "0" });
    expect(off.kind === "run" && off.config.trustProxy).toEqual([]);
  });

  it("refuses origins that are not origins and prefixes out of range", () => {
    expect(() => parseConfig(["--origin", "https://a.example/page"], {})).toThrow(/not an origin/);
    expect(() => parseConfig(["--ipv6-prefix", "129"], {})).toThrow(/between 0 and 128/);
    expect(() => parseConfig(["--trust-proxy", "10.0.0.0/40"], {})).toThrow(/not an IP address/);
  });

  it("lets a page's automatic probes reach 250 ms at 1 Gbit/s with the default budget", () => {
    // web/src: AUTO_TARGET_MS 250, rounded up to a power of two (32 MiB at 1 Gbit/s); at the
    // shortest period, 1 s, a download and an upload a round plus 10 % of stream pretests:
    // the page's share is bytesPerMinute / (2.2 probes × 60 rounds).
    const c = defaultConfig();
    const share = c.bytesPerMinute / (2 * 1.1 * 60);
    expect(share).toBeGreaterThanOrEqual(32 * 1024 * 1024);
    expect(burstBytes(c)).toBeGreaterThanOrEqual(c.maxPayload);
  });
});
