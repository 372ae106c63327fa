/**
 * Static files never come from outside the page's directory, whatever its symbolic links say,
 * and hidden files (`.env`, `.git/`) are never served: both are 404, as traversal is. Links
 * that stay inside the directory, a directory that is itself a link, and a deploy that swaps
 * that link still work.
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runCleanups, startTestNode, tempDir } from "./helpers.js";

afterEach(runCleanups);

/** Raw GET (fetch would normalise the path): status and body. */
function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** A page, and beside it (outside it) a directory of secrets its links point into. */
function makePage(): { page: string; outside: string } {
  const base = tempDir();
  const page = join(base, "page");
  const outside = join(base, "outside");
  mkdirSync(join(page, "assets"), { recursive: true });
  mkdirSync(join(page, ".git"));
  mkdirSync(outside);
  writeFileSync(join(page, "index.html"), "<!doctype html><title>page</title>");
  writeFileSync(join(page, "assets", "app-D4nX_q1z.js"), "console.log('page')");
  writeFileSync(join(page, "assets", ".hidden.js"), "hidden");
  writeFileSync(join(page, ".env"), "SECRET=1");
  writeFileSync(join(page, ".git", "config"), "[core]");
  writeFileSync(join(outside, "secret.txt"), "outside secret");
  writeFileSync(join(outside, "secret.wasm"), Buffer.alloc(64, 7));
  symlinkSync(outside, join(page, "outdir")); // the review's `ln -s /etc etcdir`
  symlinkSync(join(outside, "secret.txt"), join(page, "leak.txt"));
  symlinkSync("../outside/secret.wasm", join(page, "leak.wasm"));
  symlinkSync(".env", join(page, "env.txt")); // inside, but to a hidden file
  symlinkSync("index.html", join(page, "alias.html")); // inside: served
  symlinkSync("assets", join(page, "latest")); // inside: served
  return { page, outside };
}

describe("static files and symbolic links", () => {
  it("answers 404 for links out of the directory and for hidden files", async () => {
    const { page } = makePage();
    const node = await startTestNode({ staticDir: page });
    for (const path of [
      "/outdir/secret.txt",
      "/outdir/secret.wasm",
      "/leak.txt",
      "/leak.wasm",
      "/.env",
      "/%2eenv",
      "/.git/config",
      "/assets/.hidden.js",
      "/latest/.hidden.js",
      "/env.txt",
    ]) {
      const r = await rawGet(node.port, path);
      expect(r.status, path).toBe(404);
      expect(r.body, path).toMatch(/^not found: /);
    }
    // Links that stay inside, and the page itself, are served.
    expect(await rawGet(node.port, "/")).toMatchObject({ status: 200, body: /title>page/ });
    expect(await rawGet(node.port, "/alias.html")).toMatchObject({ status: 200 });
    expect(await rawGet(node.port, "/latest/app-D4nX_q1z.js")).toMatchObject({
      status: 200,
      body: "console.log('page')",
    });
  });

  it("checks again a file replaced by a link out of the directory", async () => {
    const { page, outside } = makePage();
    const node = await startTestNode({ staticDir: page });
    writeFileSync(join(page, "notes.txt"), "page notes");
    expect(await rawGet(node.port, "/notes.txt")).toMatchObject({
      status: 200,
      body: "page notes",
    });
    rmSync(join(page, "notes.txt"));
    symlinkSync(join(outside, "secret.txt"), join(page, "notes.txt"));
    expect(await rawGet(node.port, "/notes.txt")).toMatchObject({ status: 404 });
  });

  it("serves a directory that is itself a link, and follows a deploy that swaps it", async () => {
    const base = tempDir();
    for (const release of ["r1", "r2"]) {
      mkdirSync(join(base, release));
      writeFileSync(join(base, release, "index.html"), `<title>${release}</title>`);
    }
    const current = join(base, "current");
    symlinkSync(join(base, "r1"), current);
    const node = await startTestNode({ staticDir: current });
    expect(await rawGet(node.port, "/index.html")).toMatchObject({ status: 200, body: /r1/ });
    // An atomic deploy: a new link renamed over the old one.
    symlinkSync(join(base, "r2"), join(base, "next"));
    renameSync(join(base, "next"), current);
    expect(await rawGet(node.port, "/index.html")).toMatchObject({ status: 200, body: /r2/ });
  });
});
