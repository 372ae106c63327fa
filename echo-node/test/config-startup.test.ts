/**
 * The command itself (`node echo-node/dist/main.js`, run here from source): what it says at
 * start, how it refuses what cannot work (one line, exit 2, no stack), and that a log whose
 * reader went away does not take it down.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { VERSION } from "../src/config.js";
import { SERVER_VERSION } from "../src/server.js";
import { cleanups, runCleanups, tempDir, withTimeout } from "./helpers.js";

afterEach(runCleanups);
afterAll(runCleanups);

const here = dirname(fileURLToPath(import.meta.url));
const MAIN = join(here, "../src/main.ts");

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function launch(args: string[]): Run {
  const child = spawn(
    process.execPath,
    // A small --max-connections keeps the open-files warning out of the way.
    ["--import", "tsx", MAIN, "--port", "0", "--max-connections", "100", ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  cleanups.push(() => void child.kill("SIGKILL"));
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Runs echo-node with `args` until it exits; its status and what it wrote. */
async function refusal(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const run = launch(["--host", "127.0.0.1", ...args]);
  const code = await withTimeout(run.exited, 15_000, `echo-node ${args.join(" ")} exits`);
  return { code, stderr: run.stderr() };
}

/** Starts echo-node with `args`, waits for its start-up lines and returns them with the URL. */
async function started(args: string[]): Promise<Run & { url: string; lines: string }> {
  const run = launch(args);
  const lines = await withTimeout(
    new Promise<string>((resolve, reject) => {
      const check = () => {
        if (run.stdout().includes("page origins:")) {
          // The lines after it are written in the same tick.
          setTimeout(() => resolve(run.stdout()), 100);
          run.child.stdout!.off("data", check);
        }
      };
      run.child.stdout!.on("data", check);
      void run.exited.then((code) =>
        reject(new Error(`echo-node exited with ${code}: ${run.stderr()}`)),
      );
    }),
    15_000,
    "echo-node starts",
  );
  const url = /listening on (http:\/\/\S+)/.exec(lines)![1]!;
  return { ...run, url, lines };
}

async function stop(run: Run): Promise<number | null> {
  run.child.kill("SIGTERM");
  return withTimeout(run.exited, 10_000, "echo-node stops");
}

const oneLine = (stderr: string) => {
  expect(stderr).not.toMatch(/^\s+at /m); // no stack
  expect(stderr).not.toContain("failed to start");
  return stderr.trim().split("\n").at(-1)!;
};

describe("echo-node refuses at start", () => {
  it.each([
    [["--messages-per-second", "1"], "--messages-per-second 1 is too low: the least accepted is 4"],
    [["--max-payload", "0"], "--max-payload must be greater than 0"],
    [["--max-message", "5GiB"], "--max-message must be below 4GiB"],
    [["--allow-origin", "nowcast.example.org"], "--allow-origin 'nowcast.example.org' is not"],
    [["--mirror", "Lyon|https://admin:s3cret@lyon.example.org/?x=1#y|Lyon"], "user name or"],
  ])("%j, exit 2", async (args, message) => {
    const { code, stderr } = await refusal(args);
    expect(code).toBe(2);
    expect(oneLine(stderr)).toContain(message);
    expect(stderr).not.toContain("s3cret");
  });

  it.each([
    ["127.0.0.1:18094", "--host '127.0.0.1:18094' includes a port"],
    ["http://127.0.0.1", "--host 'http://127.0.0.1' is a URL, not an address"],
  ])("--host %s, exit 2", async (host, message) => {
    const { code, stderr } = await refusal(["--host", host]);
    expect(code).toBe(2);
    expect(oneLine(stderr)).toContain(message);
  });

  it("names --host and its value when the name does not resolve", async () => {
    const { code, stderr } = await refusal(["--host", "no-such-host.invalid"]);
    const line = oneLine(stderr);
    // ENOTFOUND, or EAI_AGAIN from a machine without a working resolver.
    expect(line).toMatch(/--host 'no-such-host\.invalid' (does not resolve|could not be resolved)/);
    expect(code === 2 || code === 1).toBe(true);
  });

  it("names --host, not the port, when the address is not this machine's", async () => {
    const { code, stderr } = await refusal(["--host", "203.0.113.77"]);
    expect(code).toBe(2);
    const line = oneLine(stderr);
    expect(line).toContain("--host '203.0.113.77' is not an address of this machine");
    expect(line).not.toContain("port");
  });
});

describe("echo-node's start-up lines", () => {
  it("listens on a bracketed IPv6 --host and prints the allowed origins", async () => {
    const run = await started([
      "--host",
      "[::1]",
      "--allow-origin",
      "https://Nowcast.Example.org:443",
      "--mirror",
      "Lyon|https://lyon.example.org/nowcast|Lyon",
    ]);
    expect(run.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    expect(run.lines).toContain(
      "  other origins allowed: https://nowcast.example.org, https://lyon.example.org (mirrors)",
    );
    expect((await fetch(`${run.url}/healthz`)).status).toBe(200);
    expect(await stop(run)).toBe(0);
  });

  it("warns on the page line when --static holds no page, and still serves the probes", async () => {
    const dir = tempDir();
    const file = join(dir, "file");
    writeFileSync(file, "x");
    mkdirSync(join(dir, "empty"));
    const page = join(dir, "page");
    mkdirSync(page);
    writeFileSync(join(page, "index.html"), "<!doctype html><title>x</title>");
    const cases: [string, string | undefined][] = [
      [join(dir, "nonexistent"), "it does not exist, so only the probes are served"],
      [file, "it is not a directory, so only the probes are served"],
      [join(dir, "empty"), "it holds no index.html, so / shows no page"],
      [page, undefined],
    ];
    for (const [staticDir, warning] of cases) {
      const run = await started(["--host", "127.0.0.1", "--static", staticDir]);
      const line = run.lines.split("\n").find((l) => l.startsWith("  page: "))!;
      if (warning === undefined) expect(line).toBe(`  page: ${staticDir}`);
      else {
        expect(line).toContain(`  page: ${staticDir} (warning: ${warning}; build the page`);
        expect(line).toContain("--static");
      }
      // A probes-only mirror (README): the probes answer whatever the page directory holds.
      expect((await fetch(`${run.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${run.url}/api/ping`)).status).toBe(204);
      expect(await stop(run)).toBe(0);
    }
  }, 60_000);
});

describe("echo-node's log", () => {
  it("survives its reader going away (echo-node | head -1, then SIGTERM)", async () => {
    const run = await started(["--host", "127.0.0.1"]);
    run.child.stdout!.destroy(); // the reader is gone: the next write is EPIPE
    const code = await stop(run);
    expect(run.stderr()).not.toMatch(/EPIPE|Unhandled|^\s+at /m);
    expect(code).toBe(0);
  });
});

describe("echo-node's version", () => {
  it("comes from package.json, which /api/config and --version agree with", async () => {
    const pkg = JSON.parse(readFileSync(join(here, "../package.json"), "utf8")) as {
      version: string;
    };
    expect(VERSION).toBe(pkg.version);
    expect(SERVER_VERSION).toBe(pkg.version);
    const run = launch(["--version"]);
    expect(await withTimeout(run.exited, 15_000, "--version")).toBe(0);
    expect(run.stdout()).toMatch(new RegExp(`^echo-node ${pkg.version.replace(/\./g, "\\.")} `));
  });

  it("is asked for with the command the documents give, which exists", () => {
    const security = readFileSync(join(here, "../../SECURITY.md"), "utf8");
    expect(security).toContain("`node echo-node/dist/main.js --version`");
    expect(security).toContain("`node echo-node/dist/main.js --help`");
    // A bare `echo-node` is no command (the package is private, with no bin), and `npx
    // echo-node` outside a linked workspace would fetch a stranger's package of that name.
    expect(security).not.toMatch(/`(npx )?echo-node --(help|version)`/);
  });
});
