// The page's settings and their URL form (`?period=5&size=64k&transport=websocket`), so that a
// link reproduces what the user chose. Pure: parsing never throws, a bad value keeps the
// default (and, for the target, says so: a mistyped target must not silently measure another
// endpoint than the one the link meant).

import { WS_PATH } from "../../echo-node/src/protocol";

export type TransportChoice = "websocket" | "http" | "both";
/** Bytes, or "auto" (probe-math.ts `autoSize`). */
export type SizeChoice = number | "auto";

export interface Settings {
  /** Seconds between probe rounds, 1 s to 5 min (JavaNws §2.1.3). */
  periodS: number;
  size: SizeChoice;
  transport: TransportChoice;
  /** Byte budget per hour, MiB. */
  budgetMiB: number;
  /** Mirrors named in the URL (`?mirrors=url1,url2`), besides those the server lists. */
  mirrors: string[];
  /**
   * The echo-node the main series measure (`?target=`), as an http(s) base URL; undefined for
   * the serving site. Choosing a third party's echo-node here is the opt-in to probing it.
   */
  target: string | undefined;
}

export const PERIOD_MIN_S = 1;
export const PERIOD_MAX_S = 300;
const BUDGET_MAX_MIB = 1_048_576;

export const DEFAULT_SETTINGS: Readonly<Settings> = {
  periodS: 2,
  size: "auto",
  transport: "websocket",
  budgetMiB: 500,
  mirrors: [],
  target: undefined,
};
/** A link may name this many mirrors; more would only be probed slower, not better. */
const MIRRORS_MAX = 16;

/** The http(s) URLs of a comma-separated list, normalised, without repeats; the rest ignored. */
export function parseMirrorList(text: string): string[] {
  const out: string[] = [];
  for (const part of text.split(",")) {
    try {
      const url = new URL(part.trim());
      if (url.protocol !== "http:" && url.protocol !== "https:") continue;
      if (!out.includes(url.href)) out.push(url.href);
    } catch {
      // Not a URL: ignored like any unreadable setting.
    }
  }
  return out.slice(0, MIRRORS_MAX);
}

/** The schemes a target may have, and the one the page keeps (a ws(s) URL names the same server). */
const TARGET_SCHEMES = new Map([
  ["http:", "http:"],
  ["https:", "https:"],
  ["ws:", "http:"],
  ["wss:", "https:"],
]);

/**
 * An echo-node's base URL from `?target=`: http(s) as is, ws(s) as the http(s) URL of the same
 * server (the page reaches it over both; a ws(s) URL ending in the WebSocket path names the
 * server it belongs to), normalised by `new URL`. An Error says why not.
 */
export function parseTarget(text: string): string | Error {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    return new Error(`target "${text}" is not a URL`);
  }
  const scheme = TARGET_SCHEMES.get(url.protocol);
  if (scheme === undefined) {
    return new Error(`target "${text}" must be an http(s) or ws(s) URL, not ${url.protocol}`);
  }
  if (url.protocol.startsWith("ws") && url.pathname.endsWith(WS_PATH)) {
    url.pathname = url.pathname.slice(0, -WS_PATH.length) + "/";
  }
  url.protocol = scheme;
  url.search = "";
  url.hash = "";
  return url.href;
}

/**
 * How a target is named in records (`to`), the history and the console: host and port, and
 * the path when the echo-node is served under one (`mirror.example/nowcast`).
 */
export function endpointName(base: string): string {
  const url = new URL(base);
  const path = url.pathname.replace(/\/+$/, "");
  return url.host + path;
}

/** "64k", "1m", "65536", "auto" → a size; undefined when unreadable. */
export function parseSize(text: string): SizeChoice | undefined {
  const t = text.trim().toLowerCase();
  if (t === "auto") return "auto";
  const m = /^(\d+)([km]?)$/.exec(t);
  if (m === null) return undefined;
  const bytes = Number(m[1]) * (m[2] === "k" ? 1024 : m[2] === "m" ? 1024 * 1024 : 1);
  return bytes >= 1024 && bytes <= 2 ** 32 - 1 ? bytes : undefined;
}

/** A size as the URL and the controls write it: "auto", "64k", "4m" or plain bytes. */
export function formatSize(size: SizeChoice): string {
  if (size === "auto") return "auto";
  if (size % (1024 * 1024) === 0) return `${size / (1024 * 1024)}m`;
  if (size % 1024 === 0) return `${size / 1024}k`;
  return String(size);
}

export function parseSettings(search: string): Settings {
  return readSettings(search).settings;
}

/** The settings of a query string, and a message for each value refused that the user should
 *  hear about (today: a bad target, which falls back to the serving site). */
export function readSettings(search: string): { settings: Settings; problems: string[] } {
  const q = new URLSearchParams(search);
  const problems: string[] = [];
  const s: Settings = { ...DEFAULT_SETTINGS };
  const period = Number(q.get("period") ?? NaN);
  if (Number.isFinite(period)) {
    s.periodS = Math.min(PERIOD_MAX_S, Math.max(PERIOD_MIN_S, period));
  }
  const size = parseSize(q.get("size") ?? "");
  if (size !== undefined) s.size = size;
  const transport = q.get("transport");
  if (transport === "websocket" || transport === "http" || transport === "both") {
    s.transport = transport;
  }
  const budget = Number(q.get("budget") ?? NaN);
  if (Number.isFinite(budget) && budget > 0) s.budgetMiB = Math.min(BUDGET_MAX_MIB, budget);
  s.mirrors = parseMirrorList(q.get("mirrors") ?? "");
  const target = q.get("target") ?? "";
  if (target.trim() !== "") {
    const parsed = parseTarget(target);
    if (parsed instanceof Error) problems.push(`${parsed.message}; measuring this site instead`);
    else s.target = parsed;
  }
  return { settings: s, problems };
}

/** The query string for `s`, leaving out what equals the default so links stay short. */
export function settingsQuery(s: Settings): string {
  const q = new URLSearchParams();
  if (s.periodS !== DEFAULT_SETTINGS.periodS) q.set("period", String(s.periodS));
  if (s.size !== DEFAULT_SETTINGS.size) q.set("size", formatSize(s.size));
  if (s.transport !== DEFAULT_SETTINGS.transport) q.set("transport", s.transport);
  if (s.budgetMiB !== DEFAULT_SETTINGS.budgetMiB) q.set("budget", String(s.budgetMiB));
  if (s.mirrors.length > 0) q.set("mirrors", s.mirrors.join(","));
  if (s.target !== undefined) q.set("target", s.target);
  const text = q.toString();
  return text === "" ? "" : `?${text}`;
}

/** Bandwidth probes a round makes for the target: a download and an upload over fetch, and
 *  with both transports the WebSocket ones too; and one download per mirror probed
 *  (plan.ts). */
export function transfersPerRound(transport: TransportChoice, mirrors = 0): number {
  return (transport === "both" ? 4 : 2) + mirrors;
}

/**
 * Whether a chosen probe size at this period runs through the hourly budget in less than an
 * hour: then how long the budget lasts (s) and what an hour of it would move (bytes), at
 * least (stream-count pretests add to it). Undefined when it fits, and for the automatic
 * size, which is sized within the budget.
 */
export function budgetStrain(
  s: Pick<Settings, "periodS" | "size" | "transport" | "budgetMiB">,
  mirrors = 0,
): { lastsS: number; hourBytes: number } | undefined {
  if (s.size === "auto") return undefined;
  const perRound = s.size * transfersPerRound(s.transport, mirrors);
  const hourBytes = (perRound * 3600) / s.periodS;
  const budget = s.budgetMiB * 1024 * 1024;
  if (hourBytes <= budget) return undefined;
  return { lastsS: (budget / perRound) * s.periodS, hourBytes };
}

/** Seconds until the budget's `left` bytes are spent at `roundBytes` every `periodS`;
 *  Infinity when rounds spend nothing. */
export function budgetLastsS(left: number, roundBytes: number, periodS: number): number {
  return roundBytes > 0 ? (Math.max(0, left) / roundBytes) * periodS : Infinity;
}
