/**
 * Compressed static files: Brotli and gzip bodies that decompress to the file's exact bytes,
 * identity without Accept-Encoding or when a coding is refused with q=0, Vary and an ETag per
 * coding, HEAD with the length of the body GET would send, revalidation, and the Accept-Encoding
 * negotiation on its own (table-driven).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { request, type IncomingHttpHeaders } from "node:http";
import { join } from "node:path";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { negotiate, type Coding } from "../src/static-files.js";
import { runCleanups, sleep, startTestNode, tempDir } from "./helpers.js";

afterEach(runCleanups);

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A request with exactly these headers (fetch would add its own Accept-Encoding and decode
 *  the body), returning the bytes as sent. */
function rawRequest(
  port: number,
  path: string,
  headers: Record<string, string> = {},
  method = "GET",
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** A page with text that compresses well, WebAssembly-like bytes, an incompressible image and
 *  a file too small to gain from compression. */
function makePage(): { dir: string; files: Map<string, Buffer> } {
  const dir = tempDir();
  mkdirSync(join(dir, "assets"));
  const line = (i: number) => `export const value${i} = "${"nowcast ".repeat(i % 7)}";\n`;
  const files = new Map<string, Buffer>([
    ["/index.html", Buffer.from(`<!doctype html><title>Nowcast</title>${"<p>x</p>".repeat(500)}`)],
    [
      "/assets/index-D4nX_q1z.js",
      Buffer.from(Array.from({ length: 2000 }, (_, i) => line(i)).join("")),
    ],
    [
      "/assets/nowcast_core_bg-0a1B2c3D.wasm",
      Buffer.concat([Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]), Buffer.alloc(50_000, 7)]),
    ],
    ["/assets/logo-0a1B2c3D.png", randomBytes(4096)],
    ["/tiny.json", Buffer.from("{}")],
  ]);
  for (const [path, bytes] of files) writeFileSync(join(dir, path), bytes);
  return { dir, files };
}

/** Waits (bounded) until the background Brotli version of `path` is being served. */
async function untilBrotli(port: number, path: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const res = await rawRequest(port, path, { "Accept-Encoding": "gzip, br" }, "HEAD");
    if (res.headers["content-encoding"] === "br") return;
    await sleep(25);
  }
  throw new Error(`Brotli for ${path} not ready after 200 tries`);
}

const JS = "/assets/index-D4nX_q1z.js";
const WASM = "/assets/nowcast_core_bg-0a1B2c3D.wasm";

describe("compressed static files", () => {
  it("sends gzip and Brotli bodies that decompress to the exact file bytes", async () => {
    const { dir, files } = makePage();
    const node = await startTestNode({ staticDir: dir });
    for (const path of ["/index.html", JS, WASM]) {
      const file = files.get(path)!;
      const gz = await rawRequest(node.port, path, { "Accept-Encoding": "gzip" });
      expect(gz.status, path).toBe(200);
      expect(gz.headers["content-encoding"], path).toBe("gzip");
      expect(gz.headers["vary"], path).toBe("Accept-Encoding");
      expect(Number(gz.headers["content-length"]), path).toBe(gz.body.length);
      expect(gz.body.length, path).toBeLessThan(file.length);
      expect(gunzipSync(gz.body).equals(file), path).toBe(true);

      // Brotli is made in the background after the first request; until then gzip is sent.
      await untilBrotli(node.port, path);
      const br = await rawRequest(node.port, path, { "Accept-Encoding": "br" });
      expect(br.headers["content-encoding"], path).toBe("br");
      expect(br.headers["vary"], path).toBe("Accept-Encoding");
      expect(Number(br.headers["content-length"]), path).toBe(br.body.length);
      expect(brotliDecompressSync(br.body).equals(file), path).toBe(true);

      const etags = new Set([gz.headers.etag, br.headers.etag]);
      const plain = await rawRequest(node.port, path);
      etags.add(plain.headers.etag);
      expect(etags.size, `one ETag per coding for ${path}`).toBe(3);
    }
  });

  it("sends the file as it is without Accept-Encoding, and for codings refused with q=0", async () => {
    const { dir, files } = makePage();
    const node = await startTestNode({ staticDir: dir });
    const file = files.get(JS)!;
    for (const accept of [
      undefined,
      "gzip;q=0",
      "br;q=0, gzip;q=0",
      "identity",
      "*;q=0, identity",
    ]) {
      const res = await rawRequest(
        node.port,
        JS,
        accept === undefined ? {} : { "Accept-Encoding": accept },
      );
      expect(res.headers["content-encoding"], String(accept)).toBeUndefined();
      expect(res.headers["vary"], String(accept)).toBe("Accept-Encoding");
      expect(Number(res.headers["content-length"])).toBe(file.length);
      expect(res.body.equals(file), String(accept)).toBe(true);
    }
    // Preferences by q-value: gzip when Brotli is refused, even once Brotli is ready.
    await untilBrotli(node.port, JS);
    const gz = await rawRequest(node.port, JS, { "Accept-Encoding": "br;q=0, gzip" });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    // Incompressible types and files that compression would not shrink go as they are.
    for (const path of ["/assets/logo-0a1B2c3D.png", "/tiny.json"]) {
      const res = await rawRequest(node.port, path, { "Accept-Encoding": "gzip, br" });
      expect(res.headers["content-encoding"], path).toBeUndefined();
      expect(res.body.equals(files.get(path)!), path).toBe(true);
    }
  });

  it("answers HEAD with the headers and length of the GET, and no body", async () => {
    const { dir, files } = makePage();
    const node = await startTestNode({ staticDir: dir });
    for (const accept of ["", "gzip"]) {
      const headers: Record<string, string> = accept === "" ? {} : { "Accept-Encoding": accept };
      const get = await rawRequest(node.port, WASM, headers);
      const head = await rawRequest(node.port, WASM, headers, "HEAD");
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      expect(head.headers["content-length"]).toBe(String(get.body.length));
      expect(head.headers["content-encoding"]).toBe(get.headers["content-encoding"]);
      expect(head.headers["etag"]).toBe(get.headers["etag"]);
      expect(head.headers["vary"]).toBe("Accept-Encoding");
      expect(head.headers["content-type"]).toBe("application/wasm");
    }
    expect((await rawRequest(node.port, WASM, {}, "HEAD")).headers["content-length"]).toBe(
      String(files.get(WASM)!.length),
    );
  });

  it("revalidates by ETag per coding and never serves ranges", async () => {
    const { dir, files } = makePage();
    const node = await startTestNode({ staticDir: dir });
    const gz = await rawRequest(node.port, "/index.html", { "Accept-Encoding": "gzip" });
    const again = await rawRequest(node.port, "/index.html", {
      "Accept-Encoding": "gzip",
      "If-None-Match": gz.headers.etag!,
    });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers.etag).toBe(gz.headers.etag);
    // The gzip ETag does not validate the identity representation.
    const plain = await rawRequest(node.port, "/index.html", { "If-None-Match": gz.headers.etag! });
    expect(plain.status).toBe(200);
    expect(plain.body.equals(files.get("/index.html")!)).toBe(true);

    const ranged = await rawRequest(node.port, JS, {
      Range: "bytes=0-9",
      "Accept-Encoding": "gzip",
    });
    expect(ranged.status).toBe(200);
    expect(ranged.headers["accept-ranges"]).toBe("none");
    expect(gunzipSync(ranged.body).equals(files.get(JS)!)).toBe(true);
  });

  it("serves a rebuilt file, not the copy kept in memory", async () => {
    const { dir } = makePage();
    const node = await startTestNode({ staticDir: dir });
    await rawRequest(node.port, JS, { "Accept-Encoding": "gzip" });
    const rebuilt = Buffer.from("export const rebuilt = true;\n".repeat(100));
    writeFileSync(join(dir, JS), rebuilt);
    const res = await rawRequest(node.port, JS, { "Accept-Encoding": "gzip" });
    expect(gunzipSync(res.body).equals(rebuilt)).toBe(true);
  });
});

describe("Accept-Encoding negotiation", () => {
  const all: Coding[] = ["identity", "gzip", "br"];
  const cases: [string | undefined, Coding[], Coding][] = [
    [undefined, all, "identity"],
    ["", all, "identity"],
    ["gzip, deflate, br, zstd", all, "br"],
    ["gzip, deflate, br, zstd", ["identity", "gzip"], "gzip"],
    ["br;q=0.5, gzip", all, "gzip"],
    ["BR;Q=1, GZIP;q=0.9", all, "br"],
    ["br;q=0, gzip;q=0", all, "identity"],
    ["gzip;q=0.2, identity;q=0.5", all, "identity"],
    ["*", all, "br"],
    ["*;q=0.1, gzip;q=0", all, "br"],
    ["*;q=0", all, "identity"],
    ["*;q=0, identity;q=0.3, gzip;q=0.4", all, "gzip"],
    ["br;q=0", ["identity", "br"], "identity"],
    ["deflate", all, "identity"],
    // Everything refused: identity all the same, rather than a 406.
    ["identity;q=0", ["identity"], "identity"],
    ["gzip;q=abc, br", all, "br"],
  ];
  it.each(cases)("%s with %j gives %s", (header, available, want) => {
    expect(negotiate(header, available)).toBe(want);
  });
});
