/**
 * Configuration: every setting has a flag and an environment variable, and `--help` is
 * generated from the same table so the two can never disagree. Pure: argv and env in, a
 * validated `Config` (or a `ConfigError` a user can act on) out.
 */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { ProxyTrust } from "./client-address.js";
import {
  MESSAGE_BURST_SECONDS,
  MESSAGES_PER_EXCHANGE,
  MIN_BUDGET_BYTES,
  MIN_MESSAGES_PER_SECOND,
} from "./limits.js";
import { parseMirrorFlag, type Mirror } from "./mirrors.js";
import { canonicalOrigin } from "./origin-policy.js";

export interface Config {
  /** TCP port; 0 picks an ephemeral one (tests). */
  port: number;
  /** Bind address; undefined means all interfaces (IPv6 and IPv4 where available). */
  host: string | undefined;
  /** Directory with the built page (Vite's `web/dist`, which includes `public/`). */
  staticDir: string;
  /** Shown in `/api/config` so a page can tell mirrors apart; not reported when unset (the
   *  machine's host name is nobody else's business). */
  name: string | undefined;
  /** Path of a JSON mirrors file, if any (read by the caller, see mirrors.ts). */
  mirrorsFile: string | undefined;
  /** Mirrors given on the command line or in the environment. */
  mirrors: Mirror[];
  /** The origins the page is served from (`https://nowcast.example.org`). Empty: derived from
   *  this machine's own addresses (loopback and interface addresses, any port). */
  origins: string[];
  /** Extra origins allowed for WebSocket and CORS; `*` allows every origin. */
  allowOrigins: string[];
  /** Reverse proxies (CIDRs, addresses or `loopback`) whose X-Forwarded-For is believed. */
  trustProxy: string[];
  /** Prefix lengths under which client addresses share their limits. */
  ipv4Prefix: number;
  ipv6Prefix: number;
  /**
   * Where the served page may connect (its Content-Security-Policy connect-src): "any"
   * echo-node, so mirrors and targets named in a link work (each still decides which origins
   * it answers), or only this server and its configured "mirrors".
   */
  connectSrc: "any" | "mirrors";
  /** Largest upload or download a single probe may ask for, in bytes. */
  maxPayload: number;
  /** Largest single WebSocket message a client may send, in bytes. */
  maxMessage: number;
  /** Bytes (read plus written, any path) per client per minute: the budget's refill rate. */
  bytesPerMinute: number;
  /** The budget's capacity (what a new client may move at once); undefined: the smaller of
   *  `bytesPerMinute` and DEFAULT_BURST_BYTES, but at least `maxPayload`. */
  burstBytes: number | undefined;
  /** WebSocket messages (control frames included), handshakes and HTTP requests per client
   *  per second; bursts of half a second's worth. */
  messagesPerSecond: number;
  /** Concurrent WebSockets plus in-flight HTTP probes per client address. */
  maxConnectionsPerClient: number;
  /** Open TCP connections of any kind (idle keep-alive included) per client address. */
  maxSocketsPerClient: number;
  /** Concurrent WebSockets plus in-flight HTTP probes, and open TCP connections, in total. */
  maxConnections: number;
  /** A WebSocket with no message from the client and no transfer running is closed after this. */
  idleTimeoutMs: number;
  /** A client that has data waiting and reads none of it for this long is cut off. */
  slowClientTimeoutMs: number;
  /** A connection must deliver a request's complete headers within this (slowloris). */
  headerTimeoutMs: number;
  /** An HTTP connection idle between requests is closed after this. */
  keepAliveTimeoutMs: number;
}

/** Default budget capacity: a page's round at 1 Gbit/s with its stream pretests (README). */
export const DEFAULT_BURST_BYTES = 512 * 1024 * 1024;

/** The budget's capacity in force for `c`: a probe of the maximum size can always be granted. */
export function burstBytes(
  c: Pick<Config, "burstBytes" | "bytesPerMinute" | "maxPayload">,
): number {
  return c.burstBytes ?? Math.max(c.maxPayload, Math.min(c.bytesPerMinute, DEFAULT_BURST_BYTES));
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Kind = "int" | "bytes" | "ms" | "string" | "list" | "mirrors" | "proxies";

interface OptionSpec {
  key: keyof Config;
  flag: string;
  env: string;
  kind: Kind;
  /** Default as shown in --help. */
  shown: string;
  help: string;
}

/** Repository root as seen from `echo-node/src` or `echo-node/dist` (both one level deep). */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * echo-node's version, from its package.json (the one place it is written): the nearest
 * package.json above this file, which is echo-node's from `src/`, `dist/` and `dist/dev/src/`.
 */
export const VERSION: string = (() => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ;) {
    try {
      const pkg = JSON.parse(readFileSync(resolve(dir, "package.json"), "utf8")) as {
        version?: unknown;
      };
      if (typeof pkg.version === "string") return pkg.version;
    } catch {
      // no package.json here: look further up
    }
    const up = dirname(dir);
    if (up === dir) return "unknown";
    dir = up;
  }
})();

export const OPTIONS: readonly OptionSpec[] = [
  {
    key: "port",
    flag: "port",
    env: "PORT",
    kind: "int",
    shown: "8080",
    help: "TCP port to listen on (0 = any free port)",
  },
  {
    key: "host",
    flag: "host",
    env: "ECHO_NODE_HOST",
    kind: "string",
    shown: "all interfaces",
    help: "address to bind, e.g. 127.0.0.1 or ::1 (or [::1]); the port goes in --port",
  },
  {
    key: "staticDir",
    flag: "static",
    env: "ECHO_NODE_STATIC",
    kind: "string",
    shown: "<repo>/web/dist",
    help: "directory of the built page (served at /)",
  },
  {
    key: "name",
    flag: "name",
    env: "ECHO_NODE_NAME",
    kind: "string",
    shown: "none (not reported)",
    help: "server name reported in /api/config",
  },
  {
    key: "mirrorsFile",
    flag: "mirrors",
    env: "ECHO_NODE_MIRRORS",
    kind: "string",
    shown: "none",
    help: "JSON file listing mirrors (see README)",
  },
  {
    key: "mirrors",
    flag: "mirror",
    env: "ECHO_NODE_MIRROR",
    kind: "mirrors",
    shown: "none",
    help: "a mirror 'name|url|location'; flag repeatable, env entries separated by ';'",
  },
  {
    key: "origins",
    flag: "origin",
    env: "ECHO_NODE_ORIGIN",
    kind: "list",
    shown: "this machine's addresses and localhost, any port",
    help: "origins the page is served from, comma-separated, e.g. https://nowcast.example.org",
  },
  {
    key: "allowOrigins",
    flag: "allow-origin",
    env: "ECHO_NODE_ALLOW_ORIGIN",
    kind: "list",
    shown: "the page's origins + mirrors",
    help: "extra allowed origins, comma-separated; '*' allows all",
  },
  {
    key: "trustProxy",
    flag: "trust-proxy",
    env: "ECHO_NODE_TRUST_PROXY",
    kind: "proxies",
    shown: "none",
    help: "reverse proxies whose X-Forwarded-For is believed: CIDRs, addresses or 'loopback', comma-separated",
  },
  {
    key: "ipv4Prefix",
    flag: "ipv4-prefix",
    env: "ECHO_NODE_IPV4_PREFIX",
    kind: "int",
    shown: "32",
    help: "IPv4 clients in one prefix of this length share their limits",
  },
  {
    key: "ipv6Prefix",
    flag: "ipv6-prefix",
    env: "ECHO_NODE_IPV6_PREFIX",
    kind: "int",
    shown: "64",
    help: "IPv6 clients in one prefix of this length share their limits",
  },
  {
    key: "connectSrc",
    flag: "connect-src",
    env: "ECHO_NODE_CONNECT_SRC",
    kind: "string",
    shown: "any",
    help: "where the page may connect: 'any' (mirrors and targets named in a link work) or 'mirrors' (this server and its mirrors only)",
  },
  {
    key: "maxPayload",
    flag: "max-payload",
    env: "ECHO_NODE_MAX_PAYLOAD",
    kind: "bytes",
    shown: "64MiB",
    help: "largest upload or download per probe",
  },
  {
    key: "maxMessage",
    flag: "max-message",
    env: "ECHO_NODE_MAX_MESSAGE",
    kind: "bytes",
    shown: "1MiB",
    help: "largest WebSocket message a client may send",
  },
  {
    key: "bytesPerMinute",
    flag: "bytes-per-minute",
    env: "ECHO_NODE_BYTES_PER_MINUTE",
    kind: "bytes",
    shown: "5GiB",
    help: "bytes read plus written per client per minute, any path (token bucket refill); at least 32KiB",
  },
  {
    key: "burstBytes",
    flag: "burst-bytes",
    env: "ECHO_NODE_BURST_BYTES",
    kind: "bytes",
    shown: "512MiB (at most --bytes-per-minute, at least --max-payload)",
    help: "bytes a client may move at once (token bucket capacity); at least 32KiB",
  },
  {
    key: "messagesPerSecond",
    flag: "messages-per-second",
    env: "ECHO_NODE_MESSAGES_PER_SECOND",
    kind: "int",
    shown: "2000",
    help: "WebSocket messages, handshakes, connections and HTTP requests per client per second (bursts of half a second's worth); at least 4",
  },
  {
    key: "maxConnectionsPerClient",
    flag: "max-connections-per-client",
    env: "ECHO_NODE_MAX_CONNECTIONS_PER_CLIENT",
    kind: "int",
    shown: "8",
    help: "concurrent WebSockets and HTTP probes per client address",
  },
  {
    key: "maxSocketsPerClient",
    flag: "max-sockets-per-client",
    env: "ECHO_NODE_MAX_SOCKETS_PER_CLIENT",
    kind: "int",
    shown: "32",
    help: "open TCP connections of any kind per client address (trusted proxies exempt)",
  },
  {
    key: "maxConnections",
    flag: "max-connections",
    env: "ECHO_NODE_MAX_CONNECTIONS",
    kind: "int",
    shown: "10000",
    help: "concurrent WebSockets and HTTP probes in total (TCP connections: twice this)",
  },
  {
    key: "idleTimeoutMs",
    flag: "idle-timeout",
    env: "ECHO_NODE_IDLE_TIMEOUT",
    kind: "ms",
    shown: "60s",
    help: "close a WebSocket idle this long",
  },
  {
    key: "slowClientTimeoutMs",
    flag: "slow-client-timeout",
    env: "ECHO_NODE_SLOW_CLIENT_TIMEOUT",
    kind: "ms",
    shown: "10s",
    help: "cut off a client that reads nothing this long",
  },
  {
    key: "headerTimeoutMs",
    flag: "header-timeout",
    env: "ECHO_NODE_HEADER_TIMEOUT",
    kind: "ms",
    shown: "10s",
    help: "close a connection that has not sent a request's complete headers in this time",
  },
  {
    key: "keepAliveTimeoutMs",
    flag: "keep-alive-timeout",
    env: "ECHO_NODE_KEEP_ALIVE_TIMEOUT",
    kind: "ms",
    shown: "5s",
    help: "close an HTTP connection idle this long between requests",
  },
];

export function defaultConfig(): Config {
  return {
    port: 8080,
    host: undefined,
    staticDir: resolve(repoRoot, "web/dist"),
    name: undefined,
    mirrorsFile: undefined,
    mirrors: [],
    origins: [],
    allowOrigins: [],
    trustProxy: [],
    ipv4Prefix: 32,
    ipv6Prefix: 64,
    connectSrc: "any",
    maxPayload: 64 * 1024 * 1024,
    maxMessage: 1024 * 1024,
    // The page's automatic probes last their 250 ms at 1 Gbit/s at its shortest period
    // (README, "Budget defaults: the arithmetic").
    bytesPerMinute: 5 * 1024 * 1024 * 1024,
    burstBytes: undefined,
    messagesPerSecond: 2000,
    maxConnectionsPerClient: 8,
    maxSocketsPerClient: 32,
    maxConnections: 10_000,
    idleTimeoutMs: 60_000,
    slowClientTimeoutMs: 10_000,
    headerTimeoutMs: 10_000,
    keepAliveTimeoutMs: 5_000,
  };
}

const BYTE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** "65536", "64k", "64KiB", "1.5MiB" → bytes. Units are binary: a probe size is a buffer size. */
export function parseBytes(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  if (!m) return undefined;
  const unit = BYTE_UNITS[m[2]!.toLowerCase()];
  if (unit === undefined) return undefined;
  const value = Math.round(Number(m[1]) * unit);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** "500", "500ms", "10s", "2m" → milliseconds (a bare number is milliseconds). */
export function parseDuration(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|)\s*$/i.exec(text);
  if (!m) return undefined;
  const scale = { "": 1, ms: 1, s: 1000, m: 60_000 }[m[2]!.toLowerCase() as "" | "ms" | "s" | "m"];
  return Math.round(Number(m[1]) * scale);
}

function parseBool(text: string): boolean | undefined {
  const t = text.trim().toLowerCase();
  if (["1", "true", "yes", "on"].includes(t)) return true;
  if (["0", "false", "no", "off", ""].includes(t)) return false;
  return undefined;
}

function convert(spec: OptionSpec, raw: string, source: string): Config[keyof Config] {
  const fail = (expected: string): never => {
    throw new ConfigError(`invalid ${source} '${raw}': expected ${expected}`);
  };
  switch (spec.kind) {
    case "int": {
      const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
      return Number.isSafeInteger(n) ? n : fail("a whole number");
    }
    case "bytes":
      return parseBytes(raw) ?? fail("a byte size like 65536, 64KiB or 64MiB");
    case "ms":
      return parseDuration(raw) ?? fail("a duration like 500ms, 10s or 2m");
    case "string":
      return raw;
    case "list":
    case "proxies": {
      const list = raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
      if (spec.kind === "proxies") {
        try {
          new ProxyTrust(list);
        } catch (e) {
          fail(`a list of proxy addresses or CIDRs: ${(e as Error).message}`);
        }
      }
      return list;
    }
    case "mirrors":
      return raw
        .split(";")
        .map((s) => s.trim())
        .filter((s) => s !== "")
        .map((s) => {
          try {
            return parseMirrorFlag(s);
          } catch (e) {
            throw new ConfigError(`invalid ${source}: ${(e as Error).message}`);
          }
        });
  }
}

export type ParseResult =
  | { kind: "run"; config: Config; /** deprecations to print at start */ warnings: string[] }
  | { kind: "help"; text: string }
  | { kind: "version" };

/** What the old boolean `--trust-proxy` (echo-node 1.0) now means: the proxy on this host. */
const LEGACY_TRUST_PROXY = ["loopback"];
const LEGACY_TRUST_PROXY_WARNING =
  "--trust-proxy without a list (or ECHO_NODE_TRUST_PROXY=true) is deprecated: it now trusts " +
  "X-Forwarded-For from loopback proxies only (127.0.0.0/8, ::1); name your proxies, e.g. " +
  "--trust-proxy 127.0.0.1,10.0.0.0/8";

/**
 * echo-node 1.0's `--trust-proxy` took no value. A bare one (last, or followed by another flag)
 * becomes `--trust-proxy=loopback`, with a warning, so old command lines keep starting.
 */
function migrateArgv(argv: readonly string[], warnings: string[]): string[] {
  return argv.map((arg, i) => {
    const next = argv[i + 1];
    if (arg !== "--trust-proxy" || (next !== undefined && !next.startsWith("-"))) return arg;
    warnings.push(LEGACY_TRUST_PROXY_WARNING);
    return `--trust-proxy=${LEGACY_TRUST_PROXY.join(",")}`;
  });
}

/**
 * Flags override environment variables, which override defaults. Unknown flags and stray
 * arguments are errors rather than being ignored: a typo in a limit must not silently leave a
 * public server with the default.
 */
export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParseResult {
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean }> = {
    help: { type: "boolean" },
    version: { type: "boolean" },
  };
  for (const spec of OPTIONS) {
    options[spec.flag] = { type: "string", multiple: spec.kind === "mirrors" };
  }
  const warnings: string[] = [];
  let parsed;
  try {
    parsed = parseArgs({
      args: migrateArgv(argv, warnings),
      options,
      strict: true,
      allowPositionals: false,
    });
  } catch (e) {
    throw new ConfigError(`${(e as Error).message}; see --help`);
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (values.help) return { kind: "help", text: helpText() };
  if (values.version) return { kind: "version" };

  const config = defaultConfig() as unknown as Record<string, unknown>;
  for (const spec of OPTIONS) {
    const fromEnv = env[spec.env];
    if (fromEnv !== undefined && fromEnv !== "") {
      const legacy = spec.kind === "proxies" ? parseBool(fromEnv) : undefined;
      if (legacy !== undefined) {
        if (legacy) warnings.push(LEGACY_TRUST_PROXY_WARNING);
        config[spec.key] = legacy ? LEGACY_TRUST_PROXY : [];
      } else config[spec.key] = convert(spec, fromEnv, `environment variable ${spec.env}`);
    }
    const fromFlag = values[spec.flag];
    if (fromFlag === undefined || typeof fromFlag === "boolean") continue;
    if (Array.isArray(fromFlag)) {
      config[spec.key] = fromFlag.flatMap(
        (v) => convert(spec, v, `--${spec.flag}`) as unknown as Mirror[],
      );
    } else config[spec.key] = convert(spec, fromFlag, `--${spec.flag}`);
  }
  const result = config as unknown as Config;
  if (result.host !== undefined) result.host = checkHost(result.host);
  validate(result);
  return { kind: "run", config: result, warnings };
}

/**
 * `--host`: an IP address (IPv6 with or without the brackets echo-node prints) or a host name,
 * returned as `listen` takes it. A port or a URL is refused with what to give instead: `listen`
 * would look them up as host names and fail with a resolver error that names neither.
 */
export function checkHost(raw: string): string {
  const value = raw.trim();
  const anAddress = "an address of this machine such as 127.0.0.1 or ::1, or a name for one";
  if (value === "") {
    throw new ConfigError(
      `--host is empty: give ${anAddress}, or leave --host out to listen on all interfaces`,
    );
  }
  if (isIP(value) !== 0) return value;
  const bracketed = /^\[([^\]]*)\]$/.exec(value);
  if (bracketed !== null) {
    if (isIP(bracketed[1]!) === 6) return bracketed[1]!;
    throw new ConfigError(`--host '${raw}' is not an IPv6 address in brackets`);
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    let instead = "the address alone, e.g. --host 127.0.0.1";
    try {
      const url = new URL(value);
      const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
      if (host !== "") instead = `the address alone: --host ${host}`;
      if (host !== "" && url.port !== "") instead += ` --port ${url.port}`;
    } catch {
      // not even a URL: the general advice stands
    }
    throw new ConfigError(`--host '${raw}' is a URL, not an address: give ${instead}`);
  }
  const withPort = /^\[([^\]]+)\]:(\d+)$/.exec(value) ?? /^([^:]+):(\d+)$/.exec(value);
  if (withPort !== null) {
    throw new ConfigError(
      `--host '${raw}' includes a port: give the address alone and the port with --port: ` +
        `--host ${withPort[1]} --port ${withPort[2]}`,
    );
  }
  const label = "[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?";
  if (!new RegExp(`^${label}(?:\\.${label})*\\.?$`, "i").test(value)) {
    throw new ConfigError(`--host '${raw}' is not an address or a host name: give ${anAddress}`);
  }
  return value;
}

/** Refuses an `--origin` or `--allow-origin` entry that is not exactly an origin. */
function checkOrigin(flag: string, origin: string, orElse = ""): void {
  const url = canonicalOrigin(origin) === undefined ? undefined : new URL(origin);
  if (
    url === undefined ||
    url.pathname !== "/" ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    const guess =
      !origin.includes("://") && canonicalOrigin(`https://${origin}`) !== undefined
        ? ` (did you mean https://${origin}?)`
        : "";
    throw new ConfigError(
      `--${flag} '${origin}' is not an origin: write scheme://host[:port], ` +
        `e.g. https://nowcast.example.org${orElse}${guess}`,
    );
  }
}

const kib = (bytes: number) => `${bytes / 1024}KiB`;

/** The longest timeout accepted: Node's timers hold at most 2^31 - 1 ms (about 24.8 days;
 *  longer ones fire after 1 ms, with a TimeoutOverflowWarning), and it adds a second to the
 *  keep-alive timeout. */
export const MAX_TIMEOUT_MS = 24 * 24 * 60 * 60 * 1000;

/** Cross-field rules: a configuration that cannot work is refused at start, not at 3 a.m. */
export function validate(c: Config): void {
  const positive: [keyof Config, string][] = [
    ["maxPayload", "max-payload"],
    ["maxMessage", "max-message"],
    ["bytesPerMinute", "bytes-per-minute"],
    ["maxConnectionsPerClient", "max-connections-per-client"],
    ["maxConnections", "max-connections"],
    ["idleTimeoutMs", "idle-timeout"],
    ["slowClientTimeoutMs", "slow-client-timeout"],
    ["messagesPerSecond", "messages-per-second"],
    ["maxSocketsPerClient", "max-sockets-per-client"],
    ["headerTimeoutMs", "header-timeout"],
    ["keepAliveTimeoutMs", "keep-alive-timeout"],
  ];
  if (c.burstBytes !== undefined) positive.push(["burstBytes", "burst-bytes"]);
  for (const [key, flag] of positive) {
    if (!((c[key] as number) > 0)) throw new ConfigError(`--${flag} must be greater than 0`);
  }
  // Each token bucket must be able to grant the smallest thing it is asked for, or it refuses
  // everything (TokenBucket.take: never, when asked for more than it holds).
  if (c.messagesPerSecond < MIN_MESSAGES_PER_SECOND) {
    throw new ConfigError(
      `--messages-per-second ${c.messagesPerSecond} is too low: the least accepted is ` +
        `${MIN_MESSAGES_PER_SECOND}. A client's message bucket holds ${MESSAGE_BURST_SECONDS} s ` +
        `of the rate (${c.messagesPerSecond * MESSAGE_BURST_SECONDS} here), and a new ` +
        `connection with its first request or WebSocket handshake takes ` +
        `${MESSAGES_PER_EXCHANGE} at once: every connection, /healthz included, would be dropped`,
    );
  }
  const budgets: [number | undefined, string][] = [
    [c.bytesPerMinute, "bytes-per-minute"],
    [c.burstBytes, "burst-bytes"],
  ];
  for (const [bytes, flag] of budgets) {
    if (bytes !== undefined && bytes < MIN_BUDGET_BYTES) {
      throw new ConfigError(
        `--${flag} ${bytes} is too low: the least accepted is ` +
          `${kib(MIN_BUDGET_BYTES)} (${MIN_BUDGET_BYTES} bytes). One request (up to 16 KiB of ` +
          "headers) and its answer must fit in a client's byte budget, or its first request " +
          "leaves it in debt and its next connections are dropped unanswered",
      );
    }
  }
  if (c.connectSrc !== "any" && c.connectSrc !== "mirrors") {
    throw new ConfigError(`--connect-src must be 'any' or 'mirrors', not '${c.connectSrc}'`);
  }
  if (c.port > 65535) throw new ConfigError(`--port ${c.port} is not a TCP port (0-65535)`);
  if (c.maxPayload > 0xffff_ffff) {
    throw new ConfigError("--max-payload must be below 4GiB (sizes travel as 32-bit numbers)");
  }
  if (c.maxMessage > 0xffff_ffff) {
    throw new ConfigError(
      "--max-message must be below 4GiB (HELLO tells it to clients as a 32-bit number)",
    );
  }
  const timeouts: [keyof Config, string][] = [
    ["idleTimeoutMs", "idle-timeout"],
    ["slowClientTimeoutMs", "slow-client-timeout"],
    ["headerTimeoutMs", "header-timeout"],
    ["keepAliveTimeoutMs", "keep-alive-timeout"],
  ];
  for (const [key, flag] of timeouts) {
    if ((c[key] as number) > MAX_TIMEOUT_MS) {
      throw new ConfigError(
        `--${flag} must be at most 24 days (${MAX_TIMEOUT_MS}ms): Node's timers hold no more`,
      );
    }
  }
  if (c.maxPayload > c.bytesPerMinute) {
    throw new ConfigError(
      `--max-payload (${c.maxPayload}) exceeds --bytes-per-minute (${c.bytesPerMinute}): ` +
        "a probe of the maximum size could never be granted",
    );
  }
  if (c.burstBytes !== undefined && c.maxPayload > c.burstBytes) {
    throw new ConfigError(
      `--max-payload (${c.maxPayload}) exceeds --burst-bytes (${c.burstBytes}): ` +
        "a probe of the maximum size could never be granted",
    );
  }
  if (c.ipv4Prefix > 32) throw new ConfigError("--ipv4-prefix must be between 0 and 32");
  if (c.ipv6Prefix > 128) throw new ConfigError("--ipv6-prefix must be between 0 and 128");
  for (const origin of c.origins) checkOrigin("origin", origin);
  for (const origin of c.allowOrigins) {
    if (origin !== "*") checkOrigin("allow-origin", origin, ", or '*' for every origin");
  }
  if (c.maxMessage < 64) throw new ConfigError("--max-message must be at least 64 bytes");
  if (c.maxConnectionsPerClient > c.maxConnections) {
    throw new ConfigError("--max-connections-per-client exceeds --max-connections");
  }
}

/** Width of --help's lines: an 80–100 column terminal shows them unwrapped. */
const HELP_WIDTH = 96;

/** `words` wrapped at spaces into lines of at most `width` after `indent`; `last` ends
 * the text unbroken (on a line of its own when it does not fit). */
function wrap(words: string, last: string, indent: string, width = HELP_WIDTH): string[] {
  const lines: string[] = [];
  let line = "";
  const put = (w: string) => {
    if (line && indent.length + line.length + 1 + w.length > width) {
      lines.push(indent + line);
      line = w;
    } else {
      line = line ? `${line} ${w}` : w;
    }
  };
  for (const w of words.split(" ")) put(w);
  put(last);
  lines.push(indent + line);
  return lines;
}

export function helpText(): string {
  const lines = OPTIONS.flatMap((o) => {
    const value = ` <${o.kind === "mirrors" ? "mirror" : o.kind === "proxies" ? "list" : o.kind}>`;
    return [
      `  --${o.flag}${value}   (env ${o.env})`,
      ...wrap(`${o.help};`, `default: ${o.shown}`, "      "),
    ];
  });
  return [
    "echo-node: the Nowcast probe server. Serves the page, answers WebSocket and HTTP probes,",
    "and enforces per-client limits so it can run on a public host.",
    "",
    "Usage: node echo-node/dist/main.js [options]",
    "",
    "Options (flags win over environment variables):",
    ...lines,
    "  --help",
    "      print this help",
    "  --version",
    "      print the server and protocol version",
    "",
    "Sizes take binary units (65536, 64KiB, 1MiB, 1GiB); durations take ms, s or m",
    "(a bare number is milliseconds). A bare --trust-proxy (echo-node 1.0) means 'loopback'.",
    "",
  ].join("\n");
}
