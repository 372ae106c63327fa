/**
 * Static files (content types, caching, CSP, traversal), the not-built page, and mirrors
 * from a file or flags, including a clear error for a bad file.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MirrorsError } from "../src/mirrors.js";
import { encodeEcho } from "../src/protocol.js";
import { openClient, runCleanups, startTestNode, tempDir } from "./helpers.js";

afterEach(runCleanups);

function makePage(): string {
  const dir = tempDir();
  mkdirSync(join(dir, "assets"));
  mkdirSync(join(dir, "schema"));
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>Nowcast</title>");
  writeFileSync(join(dir, "assets", "index-D4nX_q1z.js"), "console.log(1)");
  writeFileSync(
    join(dir, "assets", "forecast_bg-0a1B2c3D.wasm"),
    Buffer.from([0, 0x61, 0x73, 0x6d]),
  );
  writeFileSync(join(dir, "schema", "record.schema.json"), "{}");
  return dir;
}

/** Raw GET, because fetch normalises `..` out of paths before sending them. */
function rawGet(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("static files", () => {
  it("serves the page with content types, caching rules, CSP and nosniff", async () => {
    const node = await startTestNode({
      staticDir: makePage(),
      mirrors: [{ name: "M", url: "https://m.example/", location: "" }],
      connectSrc: "mirrors",
    });
    const cases: [string, string, string][] = [
      ["/", "text/html; charset=utf-8", "no-cache"],
      ["/index.html", "text/html; charset=utf-8", "no-cache"],
      [
        "/assets/index-D4nX_q1z.js",
        "text/javascript; charset=utf-8",
        "public, max-age=31536000, immutable",
      ],
      [
        "/assets/forecast_bg-0a1B2c3D.wasm",
        "application/wasm",
        "public, max-age=31536000, immutable",
      ],
      ["/schema/record.schema.json", "application/json; charset=utf-8", "no-cache"],
    ];
    for (const [path, type, cache] of cases) {
      const res = await fetch(node.url + path, { headers: { "Accept-Encoding": "gzip" } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type"), path).toBe(type);
      expect(res.headers.get("cache-control"), path).toBe(cache);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      // Cross-origin isolation, for the page's 5 µs timers.
      expect(res.headers.get("cross-origin-opener-policy"), path).toBe("same-origin");
      expect(res.headers.get("cross-origin-embedder-policy"), path).toBe("require-corp");
      expect(res.headers.get("content-encoding")).toBeNull();
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self' 'wasm-unsafe-eval'");
      expect(csp).toContain("connect-src 'self' https://m.example wss://m.example");
      expect(csp).not.toMatch(/unsafe-inline|'unsafe-eval'|\*/);
      await res.arrayBuffer();
    }
    const head = await fetch(node.url + "/index.html", { method: "HEAD" });
    expect(head.headers.get("content-length")).toBe("37");
  });

  it("answers 404 for missing files and anything outside the directory", async () => {
    const node = await startTestNode({ staticDir: makePage() });
    expect((await fetch(node.url + "/nope.js")).status).toBe(404);
    expect((await fetch(node.url + "/assets")).status).toBe(404);
    for (const path of [
      "/../package.json",
      "/%2e%2e/%2e%2e/etc/passwd",
      "/assets/..%2f..%2fetc%2fpasswd",
      "/%00",
    ]) {
      expect(await rawGet(node.port, path), path).toBe(404);
    }
    expect((await fetch(node.url + "/index.html", { method: "POST" })).status).toBe(405);
  });

  it("still serves probes, with a plain message at /, when the page is not built", async () => {
    const node = await startTestNode({ staticDir: join(tempDir(), "web", "dist") });
    const res = await fetch(node.url + "/");
    expect(res.status).toBe(503);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await res.text()).toMatch(/page is not built:\n.*web\/dist does not exist/);
    expect((await fetch(node.url + "/api/ping")).status).toBe(204);
    const c = await openClient(node);
    c.send(encodeEcho(1));
    expect(await c.next()).toMatchObject({ type: "echo_reply" });
  });
});

describe("mirrors", () => {
  it("lists mirrors from a file and from flags, and allows their origins", async () => {
    const dir = tempDir();
    const file = join(dir, "mirrors.json");
    writeFileSync(
      file,
      JSON.stringify({
        mirrors: [{ name: "Lyon", url: "https://lyon.example", location: "Lyon, France" }],
      }),
    );
    const node = await startTestNode({
      mirrorsFile: file,
      mirrors: [{ name: "Flag", url: "http://flag.example:8080/", location: "" }],
    });
    const res = await fetch(node.url + "/api/mirrors");
    expect(res.headers.get("cache-control")).toBe("no-store, no-transform");
    expect(await res.json()).toEqual({
      mirrors: [
        { name: "Flag", url: "http://flag.example:8080/", location: "" },
        { name: "Lyon", url: "https://lyon.example/", location: "Lyon, France" },
      ],
    });
    const cors = await fetch(node.url + "/api/ping", {
      headers: { Origin: "https://lyon.example" },
    });
    expect(cors.headers.get("access-control-allow-origin")).toBe("https://lyon.example");
  });

  it("refuses to start with a bad mirrors file, naming the file and the problem", async () => {
    const dir = tempDir();
    const bad = join(dir, "bad.json");
    writeFileSync(
      bad,
      JSON.stringify([
        { name: "ok", url: "https://ok.example" },
        { name: "x", url: "nope" },
      ]),
    );
    await expect(startTestNode({ mirrorsFile: bad })).rejects.toThrow(MirrorsError);
    await expect(startTestNode({ mirrorsFile: bad })).rejects.toThrow(
      `${bad}: mirror #2: "url" 'nope' is not an absolute URL`,
    );
    const broken = join(dir, "broken.json");
    // A missing comma on line 3: the message says where, as LINE:COLUMN an editor jumps to.
    writeFileSync(
      broken,
      '{"mirrors": [\n  {"name": "a", "url": "https://a.example"},\n  {"name": "b" "url": "https://b.example"}\n]}\n',
    );
    await expect(startTestNode({ mirrorsFile: broken })).rejects.toThrow(
      `mirrors file ${broken}:3:16 is not valid JSON`,
    );
    await expect(startTestNode({ mirrorsFile: join(dir, "missing.json") })).rejects.toThrow(
      /cannot read mirrors file/,
    );
  });
});
