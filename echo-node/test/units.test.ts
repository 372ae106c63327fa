/**
 * The pure modules: token bucket, limits, protocol codec, configuration, mirrors, addresses,
 * origins and static-file rules. Table-driven where there is a table.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { clientAddress, ProxyTrust } from "../src/client-address.js";
import { descriptorWarning, openFileLimits } from "../src/descriptors.js";
import {
  ConfigError,
  OPTIONS,
  helpText,
  parseBytes,
  parseConfig,
  parseDuration,
} from "../src/config.js";
import { Arrivals, READ_SIZE } from "../src/arrival.js";
import { FrameCounter, FREE_FRAGMENT_BYTES } from "../src/frame-count.js";
import { ClientLimits } from "../src/limits.js";
import { OriginPolicy } from "../src/origin-policy.js";
import { MirrorsError, parseMirrorFlag, parseMirrors } from "../src/mirrors.js";
import {
  CLOSE,
  ProtocolError,
  decodeClientMessage,
  decodeServerMessage,
  encodeDownload,
  encodeEcho,
  encodeEchoReply,
  encodeUploadAck,
  encodeUploadStart,
} from "../src/protocol.js";
import {
  cacheControl,
  contentSecurityPolicy,
  contentType,
  StaticFiles,
} from "../src/static-files.js";
import { TokenBucket } from "../src/token-bucket.js";

describe("TokenBucket", () => {
  it("starts full, refuses all-or-nothing, and refills at its rate", () => {
    const b = new TokenBucket(1000, 1, 0); // 1 token per ms
    expect(b.take(600, 0)).toBe(0);
    expect(b.take(600, 0)).toBe(200); // 400 left: 200 ms until 600
    expect(b.available(0)).toBe(400); // nothing was taken by the refusal
    expect(b.take(600, 200)).toBe(0);
    expect(b.take(2000, 10_000)).toBe(Infinity); // larger than the bucket
    expect(b.available(1e9)).toBe(1000); // capped at capacity
  });

  it("ignores a clock that goes backwards", () => {
    const b = new TokenBucket(100, 1, 50);
    expect(b.take(100, 50)).toBe(0);
    expect(b.available(10)).toBe(0);
    expect(b.available(60)).toBe(10);
  });
});

describe("ClientLimits", () => {
  it("counts connections per address and in total, with idempotent release", () => {
    const l = new ClientLimits({
      maxConnectionsPerClient: 2,
      maxSocketsPerClient: 2,
      maxConnections: 3,
      bytesPerMinute: 60_000,
      burstBytes: 60_000,
      messagesPerSecond: 100,
    });
    const a1 = l.admit("a");
    const a2 = l.admit("a");
    expect(a1.ok && a2.ok).toBe(true);
    expect(l.admit("a")).toMatchObject({ ok: false, limit: "connections_per_client" });
    const b1 = l.admit("b");
    expect(b1.ok).toBe(true);
    expect(l.admit("c")).toMatchObject({ ok: false, limit: "connections_total" });
    if (a1.ok) {
      a1.release();
      a1.release();
    }
    expect(l.totalConnections).toBe(2);
    expect(l.connectionsOf("a")).toBe(1);
  });

  it("charges bytes per address and reports when to retry", () => {
    const l = new ClientLimits({
      maxConnectionsPerClient: 1,
      maxSocketsPerClient: 1,
      maxConnections: 1,
      bytesPerMinute: 60_000,
      burstBytes: 60_000,
      messagesPerSecond: 100,
    });
    expect(l.takeBytes("a", 60_000, 0)).toEqual({ ok: true });
    expect(l.takeBytes("b", 1, 0)).toEqual({ ok: true }); // separate budget
    expect(l.takeBytes("a", 30_000, 0)).toEqual({ ok: false, retryAfterS: 30 });
    expect(l.takeBytes("a", 30_000, 30_000)).toEqual({ ok: true });
    l.sweep(10_000_000);
    expect(l.trackedAddresses).toBe(0);
  });
});

describe("WebSocket frame counting", () => {
  /** A masked client frame (RFC 6455 §5.2) of `length` zero bytes. */
  function frame(opcode: number, fin: boolean, length: number): Buffer {
    const ext =
      length < 126
        ? Buffer.of(0x80 | length)
        : length < 65536
          ? Buffer.of(0x80 | 126, length >> 8, length & 0xff)
          : Buffer.concat([
              Buffer.of(0x80 | 127),
              Buffer.from(length.toString(16).padStart(16, "0"), "hex"),
            ]);
    return Buffer.concat([Buffer.of((fin ? 0x80 : 0) | opcode), ext, Buffer.alloc(4 + length)]);
  }

  it("counts the continuation frames too short to pay for themselves, however the bytes come", () => {
    const stream = Buffer.concat([
      frame(0x2, false, 10), // a message's first frame: its token pays
      frame(0x0, false, 0),
      frame(0x0, false, 0),
      frame(0x0, false, FREE_FRAGMENT_BYTES - 1),
      frame(0x0, false, FREE_FRAGMENT_BYTES), // paid for by its bytes
      frame(0x9, true, 4), // a ping: counted by ws as a message
      frame(0x0, false, 70_000),
      frame(0x0, true, 100),
      frame(0x2, true, 300),
    ]);
    expect(new FrameCounter().count(stream)).toBe(4);
    for (const size of [1, 3, 7, 4096]) {
      const c = new FrameCounter();
      let n = 0;
      for (let at = 0; at < stream.length; at += size) n += c.count(stream.subarray(at, at + size));
      expect(n, `reads of ${size}`).toBe(4);
    }
  });
});

describe("upload arrivals", () => {
  it("times from the first short read, leaving out every byte read up to it", () => {
    const a = new Arrivals();
    // A server woken late: three full reads of what waited in the kernel, then short ones.
    for (const [at, n] of [
      [10, READ_SIZE],
      [10.01, READ_SIZE],
      [10.02, 30_000],
      [11, 20_000],
      [12, 20_000],
    ] as const) {
      a.read(at, n, n);
    }
    expect(a.start(1e9)).toEqual({ at: 10.02, bytes: 2 * READ_SIZE + 30_000 });
    expect(a.lastAt).toBe(12);
  });

  it("starts at the first read when no short read came before the last", () => {
    const a = new Arrivals();
    a.read(1, READ_SIZE, READ_SIZE);
    a.read(2, READ_SIZE, READ_SIZE);
    a.read(3, 100, 100);
    expect(a.start(1e9)).toEqual({ at: 1, bytes: READ_SIZE });
    // A read of unknown length (an HTTP body's first piece) proves nothing either.
    const h = new Arrivals();
    h.read(5, undefined, 1000);
    h.read(6, 500, 500);
    h.read(7, 500, 500);
    expect(h.start(1e9)).toEqual({ at: 6, bytes: 1500 });
  });

  it("ignores reads without upload data and caps the untimed bytes at the upload", () => {
    const a = new Arrivals();
    a.read(1, 17, 0);
    expect(a.start(100)).toBeUndefined();
    a.read(2, 200, 200);
    expect(a.start(100)).toEqual({ at: 2, bytes: 100 });
  });
});

describe("protocol codec", () => {
  it("round-trips client messages", () => {
    expect(decodeClientMessage(encodeEcho(7, new Uint8Array([1, 2])))).toEqual({
      type: "echo",
      seq: 7,
      payload: new Uint8Array([1, 2]),
    });
    expect(decodeClientMessage(encodeUploadStart(3, 65536, 100))).toEqual({
      type: "upload_start",
      probeId: 3,
      bytes: 65536,
      progressMs: 100,
    });
    expect(decodeClientMessage(encodeDownload(4, 0xffffffff, 4096, 0))).toEqual({
      type: "download",
      probeId: 4,
      bytes: 0xffffffff,
      chunk: 4096,
      progressMs: 0,
    });
    expect(decodeClientMessage(new Uint8Array([0x03, 9, 9, 9]))).toEqual({
      type: "upload_data",
      bytes: 3,
    });
  });

  it("round-trips server messages with sub-millisecond times", () => {
    expect(decodeServerMessage(encodeUploadAck(1, 2, 1234.5678, 1300.0001, 1))).toEqual({
      type: "upload_ack",
      probeId: 1,
      bytes: 2,
      firstByteAt: 1234.5678,
      lastByteAt: 1300.0001,
      firstReadBytes: 1,
    });
    // An ack from a server before firstReadBytes (25 bytes) still decodes, without it.
    const old = encodeUploadAck(1, 2, 3, 4, 0).subarray(0, 25);
    expect(decodeServerMessage(old)).toMatchObject({ bytes: 2, firstReadBytes: undefined });
    expect(() => decodeServerMessage(encodeUploadAck(1, 2, 3, 4, 0).subarray(0, 27))).toThrow(
      /UPLOAD_ACK must be 29 bytes/,
    );
    const reply = decodeServerMessage(encodeEchoReply(5, new Uint8Array([7])));
    expect(reply.type === "echo_reply" && [reply.seq, [...reply.payload]]).toEqual([5, [7]]);
  });

  const malformed: [string, number[], RegExp][] = [
    ["empty", [], /empty/],
    ["unknown type", [0x7f], /unknown message type 0x7f/],
    ["server type from client", [0x81, 0, 0, 0, 1], /unknown message type 0x81/],
    ["short echo", [0x01, 0, 0], /sequence number/],
    ["long echo", [0x01, 0, 0, 0, 1, ...new Array(121).fill(0)], /exceeds 120/],
    ["short upload start", [0x02, 0, 0, 0, 1], /UPLOAD_START must be 11 bytes/],
    ["long download", [0x04, ...new Array(15).fill(0)], /DOWNLOAD must be 15 bytes/],
    ["tiny progress interval", [0x02, 0, 0, 0, 1, 0, 0, 0, 1, 0, 10], /below 50 ms/],
  ];
  it.each(malformed)("rejects %s", (_name, bytes, message) => {
    expect(() => decodeClientMessage(new Uint8Array(bytes))).toThrow(message);
    try {
      decodeClientMessage(new Uint8Array(bytes));
    } catch (e) {
      expect(e).toBeInstanceOf(ProtocolError);
      expect((e as ProtocolError).close).toBe(CLOSE.MALFORMED);
    }
  });

  it("never throws anything but a ProtocolError on random input", () => {
    for (let i = 0; i < 5000; i++) {
      const data = randomBytes(i % 40);
      try {
        decodeClientMessage(data);
      } catch (e) {
        expect(e).toBeInstanceOf(ProtocolError);
      }
    }
  });

  it("keeps every close code in the private range with a reason under 123 bytes", () => {
    const codes = Object.values(CLOSE).map((c) => c.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const c of Object.values(CLOSE)) {
      expect(c.code).toBeGreaterThanOrEqual(4000);
      expect(c.code).toBeLessThan(5000);
      expect(Buffer.byteLength(c.reason + "; retry-after=3600")).toBeLessThanOrEqual(123);
    }
  });
});

describe("configuration", () => {
  it("parses sizes and durations", () => {
    expect(parseBytes("65536")).toBe(65536);
    expect(parseBytes("64KiB")).toBe(65536);
    expect(parseBytes("1.5m")).toBe(1.5 * 1024 * 1024);
    expect(parseBytes("1GiB")).toBe(1024 ** 3);
    expect(parseBytes("-1")).toBeUndefined();
    expect(parseBytes("12x")).toBeUndefined();
    expect(parseDuration("500")).toBe(500);
    expect(parseDuration("10s")).toBe(10_000);
    expect(parseDuration("2m")).toBe(120_000);
    expect(parseDuration("soon")).toBeUndefined();
  });

  it("takes flags over environment over defaults", () => {
    const r = parseConfig(["--port", "9000", "--max-payload", "1MiB", "--trust-proxy"], {
      PORT: "7000",
      ECHO_NODE_IDLE_TIMEOUT: "5s",
      ECHO_NODE_MAX_PAYLOAD: "2MiB",
      ECHO_NODE_ALLOW_ORIGIN: "https://a.example, https://b.example",
      ECHO_NODE_MIRROR: "One|https://one.example|Lyon;Two|http://two.example:8080|",
    });
    expect(r.kind).toBe("run");
    if (r.kind !== "run") return;
    expect(r.config.port).toBe(9000);
    expect(r.config.maxPayload).toBe(1024 * 1024);
    expect(r.config.idleTimeoutMs).toBe(5000);
    // Was a boolean; a bare --trust-proxy now means the proxy on this host, with a warning.
    expect(r.config.trustProxy).toEqual(["loopback"]);
    expect(r.warnings.join()).toMatch(/--trust-proxy without a list .* is deprecated/);
    expect(r.config.allowOrigins).toEqual(["https://a.example", "https://b.example"]);
    expect(r.config.mirrors.map((m) => m.name)).toEqual(["One", "Two"]);
    expect(r.config.staticDir).toMatch(/web[/\\]dist$/);
  });

  const bad: [string[], Record<string, string>, RegExp][] = [
    [["--max-payload", "12x"], {}, /invalid --max-payload '12x': expected a byte size/],
    [[], { ECHO_NODE_IDLE_TIMEOUT: "soon" }, /environment variable ECHO_NODE_IDLE_TIMEOUT/],
    [["--bogus"], {}, /Unknown option '--bogus'.*see --help/],
    [["stray"], {}, /see --help/],
    [["--port", "70000"], {}, /not a TCP port/],
    [["--max-payload", "2GiB", "--bytes-per-minute", "1GiB"], {}, /could never be granted/],
    [["--max-connections-per-client", "0"], {}, /must be greater than 0/],
    [["--mirror", "nameonly"], {}, /name\|https:\/\/host\|location/],
    // Was /true or false/: the variable now takes a list of proxies (or a legacy boolean).
    [["--trust-proxy"], { ECHO_NODE_TRUST_PROXY: "maybe" }, /'maybe' is not an IP address/],
    [["--connect-src", "everything"], {}, /--connect-src must be 'any' or 'mirrors'/],
  ];
  it.each(bad)("refuses %j %j with a clear message", (argv, env, message) => {
    expect(() => parseConfig(argv, env)).toThrow(ConfigError);
    expect(() => parseConfig(argv, env)).toThrow(message);
  });

  it("lists every flag, its environment variable and default in --help", () => {
    const r = parseConfig(["--help"], {});
    expect(r.kind).toBe("help");
    const text = helpText();
    for (const o of OPTIONS) {
      expect(text).toContain(`--${o.flag}`);
      expect(text).toContain(o.env);
      expect(text).toContain(`default: ${o.shown}`);
    }
    // Readable in an 80–100 column terminal: no line wider than 100.
    for (const line of text.split("\n")) expect(line.length, line).toBeLessThanOrEqual(100);
  });
});

describe("mirrors", () => {
  it("accepts an array or an object with a mirrors array", () => {
    const m = { name: " Paris ", url: "https://paris.example/", location: "Paris, France" };
    expect(parseMirrors([m], "f")).toEqual([
      { name: "Paris", url: "https://paris.example/", location: "Paris, France" },
    ]);
    expect(
      parseMirrors({ mirrors: [{ name: "x", url: "http://x.example:8080" }] }, "f")[0]?.location,
    ).toBe("");
    expect(parseMirrorFlag("A|https://a.example|Somewhere | else").location).toBe(
      "Somewhere | else",
    );
  });

  const bad: [unknown, RegExp][] = [
    [{}, /f: expected an array of mirrors/],
    [[1], /f: mirror #1: expected an object/],
    [[{ url: "https://a" }], /mirror #1: "name" must be a non-empty string/],
    [
      [
        { name: "a", url: "https://a" },
        { name: "b", url: "not a url" },
      ],
      /mirror #2: "url" 'not a url' is not an absolute URL/,
    ],
    [[{ name: "a", url: "ftp://a" }], /must be http:\/\/ or https:\/\//],
    [[{ name: "a", url: "https://a", location: 3 }], /"location" must be a string/],
  ];
  it.each(bad)("rejects %j", (data, message) => {
    expect(() => parseMirrors(data, "f")).toThrow(MirrorsError);
    expect(() => parseMirrors(data, "f")).toThrow(message);
  });
});

describe("client address and origin", () => {
  it("uses X-Forwarded-For only behind a trusted proxy, rightmost entry", () => {
    const none = new ProxyTrust([]);
    const proxy = new ProxyTrust(["10.0.0.1"]);
    expect(clientAddress("::ffff:10.0.0.1", "1.2.3.4", none)).toBe("10.0.0.1");
    expect(clientAddress("10.0.0.1", "6.6.6.6, 1.2.3.4", proxy)).toBe("1.2.3.4");
    expect(clientAddress("10.0.0.1", "garbage", proxy)).toBe("10.0.0.1");
    expect(clientAddress("10.0.0.1", ["1.1.1.1", "2001:DB8::1"], proxy)).toBe("2001:db8::1");
  });

  // Was: an Origin equal to the request's Host passed as "same origin". Host is chosen by the
  // client (DNS rebinding sends a matching pair), so the page's origin is now configured or
  // derived from this machine's own addresses instead.
  it("allows the page's own origin, listed origins and non-browser clients only", () => {
    const p = new OriginPolicy({
      pageOrigins: [],
      ownAddresses: ["192.0.2.10"],
      allowed: ["https://mirror.example/"],
    });
    const api = (origin?: string) => p.check("api", { origin }).ok;
    expect(api(undefined)).toBe(true);
    expect(api("http://127.0.0.1:8080")).toBe(true);
    expect(api("http://localhost:5173")).toBe(true);
    expect(api("https://192.0.2.10")).toBe(true);
    expect(api("https://mirror.example")).toBe(true);
    expect(api("http://a:1")).toBe(false);
    expect(api("https://evil.example")).toBe(false);
    expect(api("null")).toBe(false);
    const star = new OriginPolicy({ pageOrigins: [], ownAddresses: [], allowed: ["*"] });
    expect(star.check("api", { origin: "https://evil.example" }).ok).toBe(true);
  });
});

describe("static file rules", () => {
  it("marks only hashed assets immutable", () => {
    expect(cacheControl("/assets/index-BxYz12_-.js")).toBe("public, max-age=31536000, immutable");
    expect(cacheControl("/assets/logo.svg")).toBe("no-cache");
    expect(cacheControl("/index.html")).toBe("no-cache");
    expect(cacheControl("/schema/record-v1.json")).toBe("no-cache");
  });

  it("maps content types", () => {
    expect(contentType("a.wasm")).toBe("application/wasm");
    expect(contentType("a.JS")).toBe("text/javascript; charset=utf-8");
    expect(contentType("a.unknown")).toBe("application/octet-stream");
  });

  it("allows own scripts, WebAssembly and mirror connections, nothing else", () => {
    const csp = contentSecurityPolicy(["https://m.example"]);
    expect(csp).toContain("script-src 'self' 'wasm-unsafe-eval'");
    expect(csp).toContain("connect-src 'self' https://m.example wss://m.example");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("'unsafe-eval'");
    expect(csp).toContain("default-src 'self'");
  });

  it("lets the page connect to any echo-node when asked, still running only its own code", () => {
    const csp = contentSecurityPolicy(["https://m.example"], true);
    expect(csp).toContain("connect-src 'self' http: https: ws: wss:");
    expect(csp).toContain("script-src 'self' 'wasm-unsafe-eval'");
    expect(csp).toContain("default-src 'self'");
  });

  it("never resolves outside the root", () => {
    const s = new StaticFiles("/srv/page", "");
    expect(s.resolvePath("/")).toBe("/srv/page/index.html");
    expect(s.resolvePath("/assets/a.js")).toBe("/srv/page/assets/a.js");
    for (const p of [
      "/../etc/passwd",
      "/%2e%2e/etc/passwd",
      "/a/%2e%2e/%2e%2e/x",
      "/a%00b",
      "/%5c..%5cx",
      "/%E0%A4%A",
    ]) {
      expect(s.resolvePath(p)).toBeUndefined();
    }
  });
});

describe("the open-descriptor limit", () => {
  const limits = (soft: string, hard: string) =>
    "Limit                     Soft Limit           Hard Limit           Units     \n" +
    "Max processes             95594                95594                processes \n" +
    `Max open files            ${soft.padEnd(20)} ${hard.padEnd(20)} files     \n`;

  it("reads this process's limits, as /proc writes them", () => {
    const l = openFileLimits(readFileSync("/proc/self/limits", "utf8"));
    expect(l?.soft).toBeGreaterThan(0);
    expect(l!.hard).toBeGreaterThanOrEqual(l!.soft);
    expect(openFileLimits(limits("unlimited", "unlimited"))).toBeUndefined();
    expect(openFileLimits("no such line")).toBeUndefined();
  });

  it("warns when the soft limit is under two descriptors a connection, saying what to raise", () => {
    expect(descriptorWarning(10_000, limits("1024", "524288"))).toBe(
      "open files are limited to 1024 (`ulimit -n`), fewer than the 20064 that " +
        "--max-connections 10000 may need (two a connection): clients beyond it are refused " +
        "at accept. Raise it before starting echo-node (`ulimit -n 20064`; LimitNOFILE= in a " +
        "systemd unit), or lower --max-connections",
    );
    expect(descriptorWarning(10_000, limits("1024", "4096"))).toContain(
      "The hard limit is 4096 (`ulimit -Hn`): raise both",
    );
    expect(descriptorWarning(10_000, limits("20064", "20064"))).toBeUndefined();
    expect(descriptorWarning(100, limits("1024", "1024"))).toBeUndefined();
    // Not Linux: nothing to say.
    expect(descriptorWarning(10_000, null)).toBeUndefined();
  });
});
