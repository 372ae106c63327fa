/**
 * Properties of every decoder in echo-node that reads bytes a client chose: the probe message
 * decoder, request-target and query parsing, client addresses and X-Forwarded-For, the origin
 * policy's headers, Accept-Encoding and If-None-Match, the mirrors file reader, the
 * configuration, and the WebSocket receive compaction. Each must answer every input with a
 * value or its own documented error, never anything else (style.md: "the decoder never
 * panics"). The seeds are the corpus in test/corpus/.
 *
 * `fuzz.test.ts` runs them for a few seconds in `npm test`; `bench/fuzz.ts` runs them for
 * minutes (`npm -w echo-node run bench:hostile`).
 */
import fc from "fast-check";
import {
  clientAddress,
  limitKey,
  normalizeAddress,
  parseCidr,
  parseIp,
  ProxyTrust,
} from "../src/client-address.js";
import { ConfigError, parseConfig } from "../src/config.js";
import { parseByteCount } from "../src/http-probes.js";
import { MirrorsError, parseMirrorsText } from "../src/mirrors.js";
import { OriginPolicy } from "../src/origin-policy.js";
import {
  decodeClientMessage,
  decodeServerMessage,
  encodeDownload,
  encodeEcho,
  encodeUploadStart,
  ProtocolError,
} from "../src/protocol.js";
import { compactPieces, MAX_SMALL_RUN, SMALL_PIECE } from "../src/receive-buffers.js";
import { requestTarget } from "../src/server.js";
import { negotiate, StaticFiles, type Coding } from "../src/static-files.js";
import { mirrorsFileCorpus, probeMessageCorpus, targetCorpus } from "./corpus.js";

export interface FuzzProperty {
  name: string;
  property: fc.IRawProperty<unknown>;
  /** Seeds tried before the random inputs (as fast-check examples). */
  examples: unknown[][];
}

/** Throws unless `e` is one of the errors the decoder documents. */
function expected(e: unknown, ...kinds: (abstract new (...a: never[]) => Error)[]): void {
  if (!kinds.some((k) => e instanceof k)) throw e;
}

const bytes = fc.uint8Array({ maxLength: 300 });
/** Messages that look like the protocol's: a known type byte and fields of the right size. */
const probeLike = fc.oneof(
  bytes,
  fc
    .tuple(fc.constantFrom(0x01, 0x02, 0x03, 0x04, 0x7f, 0x81), fc.uint8Array({ maxLength: 20 }))
    .map(([t, rest]) => Uint8Array.of(t, ...rest)),
  fc
    .tuple(fc.nat({ max: 0xffffffff }), fc.uint8Array({ maxLength: 130 }))
    .map(([s, p]) => encodeEcho(s, p)),
  fc
    .tuple(fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffff }))
    .map(([id, n, ms]) => encodeUploadStart(id, n, ms)),
  fc
    .tuple(
      fc.nat({ max: 0xffffffff }),
      fc.nat({ max: 0xffffffff }),
      fc.nat({ max: 0xffffffff }),
      fc.nat({ max: 0xffff }),
    )
    .map(([id, n, c, ms]) => encodeDownload(id, n, c, ms)),
);

/** Text a client can put in a request line or header: any byte as Latin-1, and Unicode. */
const headerText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.string({ unit: "grapheme-ascii", maxLength: 200 }),
  fc.string({ unit: fc.constantFrom(...":/[]%?&=#.,@ 0123456789abcdefxAF:"), maxLength: 80 }),
);
const maybe = (a: fc.Arbitrary<string>) => fc.option(a, { nil: undefined });
const addressText = fc.oneof(fc.ipV4(), fc.ipV6(), fc.ipV4Extended(), headerText);

const policy = new OriginPolicy({
  pageOrigins: [],
  ownAddresses: ["192.0.2.1", "2001:db8::1"],
  allowed: ["https://mirror.example"],
});
const trust = new ProxyTrust(["loopback", "10.0.0.0/8", "2001:db8::/32"]);
const files = new StaticFiles("/srv/page", "");

export function fuzzProperties(): FuzzProperty[] {
  return [
    {
      name: "probe message decoder (protocol.ts) answers a message or a ProtocolError",
      examples: probeMessageCorpus().map((m) => [m]),
      property: fc.property(probeLike, (data) => {
        try {
          const m = decodeClientMessage(data);
          // Whatever decodes re-encodes to the same bytes: nothing was misread.
          const again =
            m.type === "echo"
              ? encodeEcho(m.seq, m.payload)
              : m.type === "upload_start"
                ? encodeUploadStart(m.probeId, m.bytes, m.progressMs)
                : m.type === "download"
                  ? encodeDownload(m.probeId, m.bytes, m.chunk, m.progressMs)
                  : data;
          if (Buffer.compare(Buffer.from(again), Buffer.from(data)) !== 0) {
            throw new Error(`decoded ${JSON.stringify(m)} does not re-encode to its bytes`);
          }
          if (m.type === "upload_data" && m.bytes !== data.byteLength - 1) throw new Error("size");
        } catch (e) {
          expected(e, ProtocolError);
        }
      }),
    },
    {
      name: "server message decoder (clients' side) answers a message or a ProtocolError",
      examples: probeMessageCorpus().map((m) => [m]),
      property: fc.property(bytes, (data) => {
        try {
          decodeServerMessage(data);
        } catch (e) {
          expected(e, ProtocolError);
        }
      }),
    },
    {
      name: "request-target, query and static path: a URL or a refusal, never outside the root",
      examples: targetCorpus().map((t) => [t]),
      property: fc.property(headerText, (target) => {
        const url = requestTarget(target);
        if (url === undefined) return;
        const n = parseByteCount(url.searchParams.get("bytes"));
        if (n !== undefined && !(Number.isSafeInteger(n) && n >= 0 && n <= 9_999_999_999)) {
          throw new Error(`bytes=${n}`);
        }
        const file = files.resolvePath(url.pathname);
        if (file !== undefined && file !== "/srv/page" && !file.startsWith("/srv/page/")) {
          throw new Error(`${target} resolved outside the root: ${file}`);
        }
      }),
    },
    {
      name: "client address from X-Forwarded-For: canonical, trusted hops only",
      examples: [
        ["127.0.0.1", ["1.2.3.4", " 10.0.0.1"]],
        ["::ffff:127.0.0.1", ["garbage", "::1"]],
        ["8.8.8.8", ["1.1.1.1"]],
      ],
      property: fc.property(addressText, fc.array(addressText, { maxLength: 20 }), (peer, hops) => {
        const got = clientAddress(peer, hops.join(","), trust);
        if (normalizeAddress(got) !== got) throw new Error(`${got} is not canonical`);
        // An untrusted peer's header is never read.
        if (!trust.trusts(normalizeAddress(peer)) && got !== normalizeAddress(peer)) {
          throw new Error(`untrusted peer ${peer} became ${got}`);
        }
        for (const prefixes of [
          { ipv4: 32, ipv6: 64 },
          { ipv4: 0, ipv6: 0 },
          { ipv4: 24, ipv6: 128 },
        ]) {
          const key = limitKey(got, prefixes);
          if (parseIp(got) !== undefined && parseCidr(key) === undefined) {
            throw new Error(`key ${key} of ${got} is not a prefix`);
          }
        }
      }),
    },
    {
      name: "origin policy: any headers give a verdict; unknown origins are refused",
      examples: [["http://127.0.0.1:8080", "same-origin", "cors", "empty"]],
      property: fc.property(
        maybe(fc.oneof(headerText, fc.webUrl({ withQueryParameters: false }))),
        maybe(
          fc.oneof(fc.constantFrom("same-origin", "same-site", "cross-site", "none"), headerText),
        ),
        maybe(headerText),
        maybe(headerText),
        (origin, site, mode, dest) => {
          const h = {
            origin,
            "sec-fetch-site": site,
            "sec-fetch-mode": mode,
            "sec-fetch-dest": dest,
          };
          for (const kind of ["api", "websocket", "page"] as const) {
            const v = policy.check(kind, h);
            if (kind === "page" || h.origin === undefined || !v.ok) continue;
            const host = URL.canParse(h.origin) ? new URL(h.origin).hostname : "";
            const known =
              h.origin === "https://mirror.example" ||
              ["localhost", "[::1]", "192.0.2.1", "[2001:db8::1]"].includes(host) ||
              host.startsWith("127.");
            if (!known) throw new Error(`origin ${h.origin} was allowed`);
          }
        },
      ),
    },
    {
      name: "Accept-Encoding negotiation picks an offered coding",
      examples: [["gzip;q=0, br;q=1e999, *;q=NaN", ["gzip", "identity"]]],
      property: fc.property(
        headerText,
        fc.subarray(["br", "gzip", "identity"] as Coding[]),
        (h, offered) => {
          const c = negotiate(h, offered);
          if (c !== "identity" && !offered.includes(c)) throw new Error(`${c} not offered`);
        },
      ),
    },
    {
      name: "mirrors file reader answers mirrors or a MirrorsError; only http(s) URLs",
      examples: mirrorsFileCorpus().map((t) => [t]),
      property: fc.property(
        fc.oneof(
          headerText,
          fc.json(),
          fc
            .array(
              fc.record({
                name: fc.oneof(headerText, fc.integer()),
                url: fc.oneof(fc.webUrl(), headerText),
              }),
              { maxLength: 5 },
            )
            .map((list) => JSON.stringify({ mirrors: list })),
        ),
        (text) => {
          try {
            for (const m of parseMirrorsText(text, "mirrors.json")) {
              if (!/^https?:\/\//.test(m.url)) throw new Error(`mirror URL ${m.url}`);
            }
          } catch (e) {
            expected(e, MirrorsError);
          }
        },
      ),
    },
    {
      name: "configuration answers a config or a ConfigError",
      examples: [
        [["--trust-proxy"], {}],
        [["--trust-proxy", "10.0.0.0/33"], {}],
      ],
      property: fc.property(
        fc.array(
          fc.oneof(
            fc.constantFrom(
              "--port",
              "--max-payload",
              "--trust-proxy",
              "--origin",
              "--ipv6-prefix",
              "--bytes-per-minute",
              "--burst-bytes",
              "--mirror",
              "--header-timeout",
            ),
            headerText,
          ),
          { maxLength: 6 },
        ),
        fc.dictionary(
          fc.constantFrom(
            "PORT",
            "ECHO_NODE_TRUST_PROXY",
            "ECHO_NODE_ORIGIN",
            "ECHO_NODE_MAX_PAYLOAD",
          ),
          headerText,
        ),
        (argv, env) => {
          try {
            parseConfig(argv, env);
          } catch (e) {
            expected(e, ConfigError);
          }
        },
      ),
    },
    {
      name: "receive compaction keeps the bytes and bounds the pieces",
      examples: [[Array.from({ length: 5000 }, () => 1)]],
      property: fc.property(fc.array(fc.nat({ max: 20_000 }), { maxLength: 400 }), (sizes) => {
        const pieces: Buffer[] = [];
        const all: Buffer[] = [];
        for (const [i, n] of sizes.entries()) {
          const piece = Buffer.alloc(n, i & 0xff);
          all.push(piece);
          pieces.push(piece);
          compactPieces(pieces);
        }
        if (!Buffer.concat(pieces).equals(Buffer.concat(all))) throw new Error("bytes changed");
        const total = all.reduce((s, b) => s + b.length, 0);
        // Large pieces hold SMALL_PIECE bytes or more; a small piece is kept alone only
        // behind a large one, so at most one per large piece, plus the trailing run.
        if (pieces.length > (2 * total) / SMALL_PIECE + MAX_SMALL_RUN + 1) {
          throw new Error(`${pieces.length} pieces for ${total} bytes`);
        }
      }),
    },
  ];
}
