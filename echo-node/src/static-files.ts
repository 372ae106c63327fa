/**
 * Serves the built page (Vite's output, which includes `public/`). The rules that matter:
 * hashed assets are immutable, everything else is revalidated, every response has a strict
 * Content-Security-Policy and `nosniff`, and no path can escape the static directory: not by
 * `..`, not by a symbolic link that leads out of it, and no dotfile (`.env`, `.git/`) is served.
 *
 * Text and WebAssembly are sent compressed when the client accepts it (RFC 9110 §12.5.3):
 * each file is read and gzipped once, on its first request, and kept in memory with its
 * Brotli version, which is made in the background (quality 11 takes ~0.6 s for the 400 KB
 * WASM; until it is ready, such clients get gzip). Probe responses are never compressed; they
 * are not served from here.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import type { Stats } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { brotliCompress, constants as zlibConstants, gzip } from "node:zlib";

/**
 * The headers that make the page cross-origin isolated (`crossOriginIsolated` true in the
 * page and its worker). Sent with every static file: the worker's script must carry COEP
 * too, or the isolated page may not start it.
 */
export const ISOLATION_HEADERS = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
  "Cross-Origin-Resource-Policy": "same-origin",
} as const;

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".webmanifest": "application/manifest+json; charset=utf-8",
  ".wasm": "application/wasm",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
  ".csv": "text/csv; charset=utf-8",
  ".ndjson": "application/x-ndjson; charset=utf-8",
};

export function contentType(path: string): string {
  return CONTENT_TYPES[extname(path).toLowerCase()] ?? "application/octet-stream";
}

/** Vite names built assets `name-<hash>.ext` with an 8+ character base64url hash. Such a
 *  file never changes content under the same name, so browsers may keep it for a year. */
const HASHED = /-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/;

export function cacheControl(urlPath: string): string {
  if (urlPath.startsWith("/assets/") && HASHED.test(urlPath)) {
    return "public, max-age=31536000, immutable";
  }
  // index.html and unhashed public files must be revalidated, or a deploy would leave
  // browsers running an old page against a new server.
  return "no-cache";
}

/**
 * The page may load only its own scripts, compile WebAssembly ('wasm-unsafe-eval' allows
 * WebAssembly.compile without allowing JavaScript eval), and connect to this server and the
 * configured mirrors (http(s) for fetch probes, ws(s) for WebSocket probes) or, with
 * `anyEchoNode`, to any host: mirrors and targets named in a link (`?mirrors=`, `?target=`)
 * are probed only after the user opts in, and each answers only the origins it allows.
 */
export function contentSecurityPolicy(
  mirrorOrigins: readonly string[],
  anyEchoNode = false,
): string {
  const connect = ["'self'"];
  if (anyEchoNode) {
    connect.push("http:", "https:", "ws:", "wss:");
  } else {
    for (const origin of mirrorOrigins) {
      connect.push(origin, origin.replace(/^http/, "ws"));
    }
  }
  return [
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",
    "worker-src 'self'",
    `connect-src ${connect.join(" ")}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

/** Content codings offered, best first: on equal q-values Brotli wins (it is smaller). */
export type Coding = "br" | "gzip" | "identity";
const CODINGS: readonly Coding[] = ["br", "gzip", "identity"];

/** Types worth compressing: text and WebAssembly. Images and fonts are compressed already. */
const COMPRESSIBLE = new Set([
  ".html",
  ".js",
  ".mjs",
  ".css",
  ".json",
  ".map",
  ".webmanifest",
  ".wasm",
  ".svg",
  ".txt",
  ".csv",
  ".ndjson",
]);

/** Files whose real path was checked, remembered at once; beyond this the oldest are checked
 *  again when next asked for (a symbolic link loop inside the directory gives a file endless
 *  names). */
const MAX_CHECKED_PATHS = 4096;

/** Whether a path component is hidden (`.env`, `.git`), or `.`/`..`: never served. */
const hidden = (segment: string) => segment.startsWith(".");

/** Larger files are streamed from disk as they are, never held in memory. */
const MAX_CACHED_BYTES = 16 * 1024 * 1024;

/**
 * The coding to send for an `Accept-Encoding` header (RFC 9110 §12.5.3): the highest q-value
 * among `available`, ties broken by the order of CODINGS. No header means identity only;
 * `*` stands for any coding not named, identity included; identity is acceptable unless
 * refused (`identity;q=0`, or `*;q=0` without it). When nothing acceptable is available,
 * identity is sent anyway (the RFC allows it, and a page that loads beats a 406).
 */
export function negotiate(header: string | undefined, available: readonly Coding[]): Coding {
  if (header === undefined || header.trim() === "") return "identity";
  const q = new Map<string, number>();
  for (const part of header.split(",")) {
    const [name, ...params] = part.split(";");
    const coding = name!.trim().toLowerCase();
    if (coding === "") continue;
    let weight = 1;
    for (const param of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(param);
      if (m) weight = Number(m[1]);
    }
    if (Number.isFinite(weight)) q.set(coding, Math.min(1, Math.max(0, weight)));
  }
  const star = q.get("*");
  const weightOf = (c: Coding) => q.get(c) ?? star ?? (c === "identity" ? 1 : 0);
  let best: Coding = "identity";
  let bestQ = 0;
  for (const c of CODINGS) {
    if (!available.includes(c)) continue;
    const w = weightOf(c);
    if (w > bestQ) {
      best = c;
      bestQ = w;
    }
  }
  return best;
}

interface Variant {
  body: Buffer;
  etag: string;
}

/** A file's forms by coding: identity, and gzip and Brotli once made (if smaller). */
type Forms = Map<Coding, Variant>;

export class StaticFiles {
  private readonly root: string;
  /** By real path: the version of the file (mtime and size as stat saw them) and its
   *  forms, a promise so that concurrent requests for a new version read it once. */
  private readonly cache = new Map<
    string,
    { mtimeMs: number; size: number; forms: Promise<Forms> }
  >();
  /** The real path of the root, for the directory `stat` last found there (a deploy that
   *  swaps a symbolic link at the root changes it). */
  private realRoot: { dev: number; ino: number; path: Promise<string | undefined> } | undefined;
  /** By path under the root: its real path, checked to lie inside the real root, for the file
   *  (device, inode, ctime) it was then; any change to the file is checked again. */
  private readonly checked = new Map<
    string,
    { dev: number; ino: number; ctimeMs: number; real: string }
  >();

  constructor(
    root: string,
    private readonly csp: string,
  ) {
    this.root = resolve(root);
  }

  /** Maps a URL path to a file under the root, or undefined for anything that tries to leave
   *  it (`..`, encoded separators, NUL bytes) or names a hidden file or directory (a component
   *  starting with a dot). Symbolic links are checked when the file is served (`inside`). */
  resolvePath(urlPath: string): string | undefined {
    let decoded: string;
    try {
      decoded = decodeURIComponent(urlPath);
    } catch {
      return undefined;
    }
    if (decoded.includes("\0") || decoded.includes("\\")) return undefined;
    if (decoded.split("/").some(hidden)) return undefined;
    const relative = decoded === "/" ? "index.html" : decoded.replace(/^\/+/, "");
    const full = resolve(join(this.root, relative));
    return full === this.root || full.startsWith(this.root + sep) ? full : undefined;
  }

  /**
   * The real path of `file` (found by `stat` as `info`, the root as `rootInfo`) when it lies
   * inside the real root and no component of it under the root is hidden; else undefined.
   * `realpath` is asked once per file, not per request: a file that is still the same
   * (device, inode, ctime) under the same root is known.
   */
  private async inside(file: string, info: Stats, rootInfo: Stats): Promise<string | undefined> {
    let root = this.realRoot;
    if (root?.dev !== rootInfo.dev || root.ino !== rootInfo.ino) {
      root = {
        dev: rootInfo.dev,
        ino: rootInfo.ino,
        path: realpath(this.root).catch(() => undefined),
      };
      this.realRoot = root;
      this.checked.clear();
    }
    const known = this.checked.get(file);
    if (known?.dev === info.dev && known.ino === info.ino && known.ctimeMs === info.ctimeMs) {
      return known.real;
    }
    const [realRoot, real] = await Promise.all([root.path, realpath(file).catch(() => undefined)]);
    if (realRoot === undefined || real === undefined) return undefined;
    const prefix = realRoot.endsWith(sep) ? realRoot : realRoot + sep;
    if (!real.startsWith(prefix) || real.slice(prefix.length).split(sep).some(hidden)) {
      return undefined;
    }
    if (this.realRoot === root) {
      this.checked.delete(file);
      this.checked.set(file, { dev: info.dev, ino: info.ino, ctimeMs: info.ctimeMs, real });
      if (this.checked.size > MAX_CHECKED_PATHS) {
        const oldest = this.checked.keys().next().value;
        if (oldest !== undefined) this.checked.delete(oldest);
      }
    }
    return real;
  }

  /**
   * The file's bytes and gzip form, read and compressed once per version of the file (a
   * rebuilt page has new mtimes). Brotli follows in the background; a compressed form that is
   * no smaller than the file (tiny files) is dropped.
   */
  private load(file: string, mtimeMs: number, size: number): Promise<Forms> {
    const known = this.cache.get(file);
    if (known?.mtimeMs === mtimeMs && known.size === size) return known.forms;
    const forms = (async (): Promise<Forms> => {
      const body = await readFile(file);
      const tag = createHash("sha256").update(body).digest("base64url").slice(0, 22);
      const forms: Forms = new Map([["identity", { body, etag: `"${tag}"` }]]);
      const keep = (coding: Coding, compressed: Buffer) => {
        if (compressed.length < body.length) {
          forms.set(coding, { body: compressed, etag: `"${tag}-${coding}"` });
        }
      };
      keep("gzip", await gzipAsync(body, { level: 9 }));
      brotliAsync(body, {
        params: {
          [zlibConstants.BROTLI_PARAM_QUALITY]: zlibConstants.BROTLI_MAX_QUALITY,
          [zlibConstants.BROTLI_PARAM_SIZE_HINT]: body.length,
        },
      }).then(
        (br) => keep("br", br),
        () => undefined,
      );
      return forms;
    })();
    const entry = { mtimeMs, size, forms };
    this.cache.set(file, entry);
    // A failed read (the file went away) must not stick: the next request tries again.
    forms.catch(() => {
      if (this.cache.get(file) === entry) this.cache.delete(file);
    });
    return forms;
  }

  /** Serves GET/HEAD for `urlPath`; returns false when there is no such file (the caller
   *  answers 404), so routing stays in one place. */
  async serve(req: IncomingMessage, res: ServerResponse, urlPath: string): Promise<boolean> {
    const rootInfo = await stat(this.root).catch(() => undefined);
    if (!rootInfo?.isDirectory()) {
      if (urlPath !== "/" && urlPath !== "/index.html") return false;
      res.writeHead(503, {
        "Content-Type": "text/plain; charset=utf-8",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
      });
      res.end(
        `echo-node is running and answering probes, but the Nowcast page is not built:\n` +
          `${this.root} does not exist.\n` +
          `Build it with \`npm start\` at the top of the repository (or \`npm -w web run build\`),\n` +
          `or point echo-node at the build with --static <dir>.\n`,
      );
      return true;
    }
    const path = this.resolvePath(urlPath);
    if (path === undefined) return false;
    const info = await stat(path).catch(() => undefined);
    if (!info?.isFile()) return false;
    // Read by its real path from here: the one that was checked.
    const file = await this.inside(path, info, rootInfo);
    if (file === undefined) return false;
    const headers: Record<string, string | number> = {
      "Content-Type": contentType(path),
      "Cache-Control": cacheControl(urlPath),
      "Last-Modified": info.mtime.toUTCString(),
      "Content-Security-Policy": this.csp,
      "X-Content-Type-Options": "nosniff",
      "Referrer-Policy": "no-referrer",
      // Cross-origin isolation (HTML: COOP same-origin with COEP require-corp): the browser
      // then gives the page and its worker timers of 5 µs instead of 100 µs, which the RTT
      // probes need. Everything the page loads must then be same-origin or say it may be
      // loaded: a mirror's probe answers carry CORS headers (and CORP), its WebSocket needs
      // neither (README, "Mirrors").
      ...ISOLATION_HEADERS,
      // Ranges are not served: a range of a compressed body would be a range of bytes the
      // client never sees whole, and the page never asks for one.
      "Accept-Ranges": "none",
    };
    if (!COMPRESSIBLE.has(extname(path).toLowerCase()) || info.size > MAX_CACHED_BYTES) {
      res.writeHead(200, { ...headers, "Content-Length": info.size });
      if (req.method === "HEAD") {
        res.end();
        return true;
      }
      // pipeline destroys both ends on error, so a client that disconnects mid-file does not
      // leak a file descriptor.
      await pipeline(createReadStream(file), res).catch(() => undefined);
      return true;
    }
    const forms = await this.load(file, info.mtimeMs, info.size).catch(() => undefined);
    if (forms === undefined) return false;
    const coding = negotiate(req.headers["accept-encoding"], [...forms.keys()]);
    const variant = forms.get(coding)!;
    headers["Vary"] = "Accept-Encoding";
    headers["ETag"] = variant.etag;
    if (coding !== "identity") headers["Content-Encoding"] = coding;
    if (notModified(req.headers["if-none-match"], variant.etag)) {
      const { "Content-Type": _type, "Content-Encoding": _coding, ...validators } = headers;
      res.writeHead(304, validators);
      res.end();
      return true;
    }
    res.writeHead(200, { ...headers, "Content-Length": variant.body.length });
    res.end(req.method === "HEAD" ? undefined : variant.body);
    return true;
  }
}

/** Whether `If-None-Match` names this representation (weak comparison, RFC 9110 §13.1.2). */
function notModified(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((t) => t.trim().replace(/^W\//, "") === etag);
}
