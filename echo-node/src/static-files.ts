/**
 * Serves the built page (Vite's output, which includes `public/`). The rules that matter:
 * hashed assets are immutable, everything else is revalidated, every response has a strict
 * Content-Security-Policy and `nosniff`, and no path can escape the static directory.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";

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
 * configured mirrors (http(s) for fetch probes, ws(s) for WebSocket probes).
 */
export function contentSecurityPolicy(mirrorOrigins: readonly string[]): string {
  const connect = ["'self'"];
  for (const origin of mirrorOrigins) {
    connect.push(origin, origin.replace(/^http/, "ws"));
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

export class StaticFiles {
  private readonly root: string;

  constructor(
    root: string,
    private readonly csp: string,
  ) {
    this.root = resolve(root);
  }

  /** Maps a URL path to a file under the root, or undefined for anything that tries to leave
   *  it (`..`, encoded separators, NUL bytes). */
  resolvePath(urlPath: string): string | undefined {
    let decoded: string;
    try {
      decoded = decodeURIComponent(urlPath);
    } catch {
      return undefined;
    }
    if (decoded.includes("\0") || decoded.includes("\\")) return undefined;
    const relative = decoded === "/" ? "index.html" : decoded.replace(/^\/+/, "");
    const full = resolve(join(this.root, relative));
    return full === this.root || full.startsWith(this.root + sep) ? full : undefined;
  }

  /** Serves GET/HEAD for `urlPath`; returns false when there is no such file (the caller
   *  answers 404), so routing stays in one place. */
  async serve(req: IncomingMessage, res: ServerResponse, urlPath: string): Promise<boolean> {
    const rootExists = await stat(this.root).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!rootExists) {
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
    const file = this.resolvePath(urlPath);
    if (file === undefined) return false;
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) return false;
    res.writeHead(200, {
      "Content-Type": contentType(file),
      "Content-Length": info.size,
      "Cache-Control": cacheControl(urlPath),
      "Last-Modified": info.mtime.toUTCString(),
      "Content-Security-Policy": this.csp,
      "X-Content-Type-Options": "nosniff",
      "Referrer-Policy": "no-referrer",
    });
    if (req.method === "HEAD") {
      res.end();
      return true;
    }
    // pipeline destroys both ends on error, so a client that disconnects mid-file does not
    // leak a file descriptor.
    await pipeline(createReadStream(file), res).catch(() => undefined);
    return true;
  }
}
