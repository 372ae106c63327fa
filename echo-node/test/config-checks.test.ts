/**
 * Settings that cannot work are refused at start with a message naming the flag, the value and
 * what to give instead; the least accepted values do work against the real server.
 */
import { writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  checkHost,
  ConfigError,
  defaultConfig,
  MAX_TIMEOUT_MS,
  parseConfig,
  type Config,
} from "../src/config.js";
import { MIN_BUDGET_BYTES, MIN_MESSAGES_PER_SECOND } from "../src/limits.js";
import { duplicateMirrors, MirrorsError, parseMirrorFlag } from "../src/mirrors.js";
import { startEchoNode } from "../src/server.js";
import {
  cleanups,
  openClient,
  runCleanups,
  startTestNode,
  tempDir,
  withTimeout,
} from "./helpers.js";

afterEach(runCleanups);
afterAll(runCleanups);

const KiB = 1024;

function refused(argv: string[], env: Record<string, string> = {}): string {
  try {
    parseConfig(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  return expect.fail(`${argv.join(" ")} was accepted`);
}

function accepted(argv: string[], env: Record<string, string> = {}): Config {
  const r = parseConfig(argv, env);
  if (r.kind !== "run") return expect.fail(r.kind);
  return r.config;
}

/** One request on a new connection: the status, or "dropped" when the server closes it
 *  unanswered (its answer to a client over its limits). */
function statusOnNewConnection(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<number | "dropped"> {
  return withTimeout(
    new Promise((resolve) => {
      const req = request(
        { host: "127.0.0.1", port, path, headers: { Connection: "close", ...headers } },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode!));
        },
      );
      req.on("error", () => resolve("dropped"));
      req.end();
    }),
    5000,
    `GET ${path}`,
  );
}

describe("token buckets that could never grant what they must", () => {
  it("refuses a message rate whose bucket cannot hold a connection and its request", () => {
    expect(MIN_MESSAGES_PER_SECOND).toBe(4);
    for (const rate of [1, 2, 3]) {
      const message = refused(["--messages-per-second", String(rate)]);
      expect(message).toContain(`--messages-per-second ${rate} is too low`);
      expect(message).toContain("the least accepted is 4");
      expect(message).toMatch(/holds 0\.5 s of the rate \(.+ here\).*takes 2 at once/);
    }
    expect(refused([], { ECHO_NODE_MESSAGES_PER_SECOND: "1" })).toContain(
      "--messages-per-second 1",
    );
    expect(accepted(["--messages-per-second", "4"]).messagesPerSecond).toBe(4);
  });

  it("serves /healthz and a WebSocket at the least accepted message rate", async () => {
    const node = await startTestNode({ messagesPerSecond: MIN_MESSAGES_PER_SECOND });
    expect(await statusOnNewConnection(node.port, "/healthz")).toBe(200);
    const other = await startTestNode({ messagesPerSecond: MIN_MESSAGES_PER_SECOND });
    const hello = await openClient(other);
    hello.terminate();
    // Built around validate (an embedding), a rate that would drop everything still fails
    // at start rather than serving nothing.
    await expect(
      startEchoNode({ ...defaultConfig(), port: 0, host: "127.0.0.1", messagesPerSecond: 1 }),
    ).rejects.toThrow(RangeError);
  });

  it("refuses a byte budget that one request and its answer would overspend", () => {
    expect(MIN_BUDGET_BYTES).toBe(32 * KiB);
    const perMinute = refused(["--max-payload", "1", "--bytes-per-minute", "1"]);
    expect(perMinute).toContain("--bytes-per-minute 1 is too low");
    expect(perMinute).toContain("the least accepted is 32KiB (32768 bytes)");
    expect(perMinute).toMatch(/its next connections are dropped/);
    const burst = refused(["--max-payload", "1KiB", "--burst-bytes", "1KiB"]);
    expect(burst).toContain("--burst-bytes 1024 is too low");
    const c = accepted(["--max-payload", "16KiB", "--bytes-per-minute", "32KiB"]);
    expect(c.bytesPerMinute).toBe(32 * KiB);
  });

  it("keeps answering a client at the least accepted byte budget, and not below it", async () => {
    const atFloor = await startTestNode({
      maxPayload: 16 * KiB,
      bytesPerMinute: MIN_BUDGET_BYTES,
    });
    // A request with nearly as many header bytes as Node accepts, then others.
    const big = { "X-Filler": "x".repeat(15 * KiB) };
    expect(await statusOnNewConnection(atFloor.port, "/healthz", big)).toBe(200);
    expect(await statusOnNewConnection(atFloor.port, "/metrics")).toBe(200);
    expect(await statusOnNewConnection(atFloor.port, "/healthz")).toBe(200);
    // What the floor prevents (started around validate): the first answer leaves the client
    // in debt, and its next connection is dropped unanswered.
    const below = await startTestNode({ maxPayload: 1, bytesPerMinute: 1 });
    expect(await statusOnNewConnection(below.port, "/healthz")).toBe(200);
    await new Promise((r) => setTimeout(r, 1100)); // the sweep charges what the exchange moved
    expect(await statusOnNewConnection(below.port, "/healthz")).toBe("dropped");
  });
});

describe("numeric settings that must be positive", () => {
  it("refuses a payload cap or burst of 0", () => {
    expect(refused(["--max-payload", "0"])).toBe("--max-payload must be greater than 0");
    expect(refused([], { ECHO_NODE_MAX_PAYLOAD: "0" })).toMatch(/--max-payload must be greater/);
    expect(refused(["--burst-bytes", "0"])).toMatch(/--burst-bytes must be greater than 0/);
  });
});

describe("numbers a client or a timer could not hold", () => {
  it("refuses a --max-message of 4GiB or more, which HELLO cannot carry, and takes 4GiB - 1", async () => {
    // Accepted before, and then every WebSocket failed (a RangeError writing HELLO).
    expect(refused(["--max-message", "5GiB"])).toMatch(/^--max-message must be below 4GiB/);
    expect(refused(["--max-message", "4GiB"])).toMatch(/^--max-message must be below 4GiB/);
    const largest = accepted(["--max-message", String(0xffff_ffff)]).maxMessage;
    const node = await startTestNode({ maxMessage: largest });
    const c = await openClient(node);
    expect(c.ws.readyState).toBe(1);
    c.terminate();
  });

  it("refuses a timeout longer than Node's timers hold (they would fire at once)", () => {
    for (const flag of [
      "idle-timeout",
      "slow-client-timeout",
      "header-timeout",
      "keep-alive-timeout",
    ]) {
      expect(refused([`--${flag}`, "99999999m"])).toBe(
        `--${flag} must be at most 24 days (${MAX_TIMEOUT_MS}ms): Node's timers hold no more`,
      );
      expect(accepted([`--${flag}`, `${24 * 24 * 60}m`])).toBeDefined();
    }
  });
});

describe("--allow-origin", () => {
  it("is validated as --origin is", () => {
    const message = refused(["--allow-origin", "nowcast.example.org"]);
    expect(message).toContain("--allow-origin 'nowcast.example.org' is not an origin");
    expect(message).toContain("did you mean https://nowcast.example.org?");
    for (const bad of ["https://a.example/page", "https://a.example/?q", "ftp://a.example"]) {
      expect(refused(["--allow-origin", `https://ok.example,${bad}`])).toContain(`'${bad}'`);
    }
    expect(refused([], { ECHO_NODE_ALLOW_ORIGIN: "a.example" })).toMatch(/not an origin/);
    expect(accepted(["--allow-origin", "*"]).allowOrigins).toEqual(["*"]);
    expect(
      accepted(["--allow-origin", "https://A.example:443, http://b.example:81"]),
    ).toMatchObject({ allowOrigins: ["https://A.example:443", "http://b.example:81"] });
  });

  it("allows the origin an accepted entry names", async () => {
    const { allowOrigins } = accepted(["--allow-origin", "https://Nowcast.Example.org:443"]);
    const node = await startTestNode({ allowOrigins });
    const allowed = await fetch(`${node.url}/api/ping`, {
      headers: { Origin: "https://nowcast.example.org" },
    });
    expect(allowed.status).toBe(204);
    const other = await fetch(`${node.url}/api/ping`, {
      headers: { Origin: "https://other.example.org" },
    });
    expect(other.status).toBe(403);
  });
});

describe("--host", () => {
  it("takes addresses, bracketed IPv6 and names, and refuses a port or a URL", () => {
    expect(checkHost("127.0.0.1")).toBe("127.0.0.1");
    expect(checkHost("::1")).toBe("::1");
    expect(checkHost("[::1]")).toBe("::1");
    expect(checkHost("localhost")).toBe("localhost");
    expect(accepted(["--host", "[::1]"]).host).toBe("::1");
    expect(accepted([], { ECHO_NODE_HOST: "[::1]" }).host).toBe("::1");
    expect(refused(["--host", "127.0.0.1:18094"])).toBe(
      "--host '127.0.0.1:18094' includes a port: give the address alone and the port with " +
        "--port: --host 127.0.0.1 --port 18094",
    );
    expect(refused(["--host", "[::1]:8080"])).toContain("--host ::1 --port 8080");
    expect(refused(["--host", "http://127.0.0.1"])).toBe(
      "--host 'http://127.0.0.1' is a URL, not an address: give the address alone: --host 127.0.0.1",
    );
    expect(refused(["--host", "https://[::1]:8443/x"])).toContain("--host ::1 --port 8443");
    expect(refused(["--host", "[nope]"])).toMatch(/not an IPv6 address in brackets/);
    expect(refused(["--host", "a b"])).toMatch(/--host 'a b' is not an address or a host name/);
  });

  it("listens on the bracketed form echo-node prints", async () => {
    const host = accepted(["--host", "[::1]"]).host;
    const node = await startTestNode({ host });
    expect(node.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
  });
});

describe("mirror URLs", () => {
  const secret = "s3cret";

  it("refuses credentials, a query or a fragment in --mirror, without repeating a password", () => {
    const creds = refused(["--mirror", `Lyon|https://admin:${secret}@lyon.example.org/|Lyon`]);
    expect(creds).toMatch(/"url" .* carries a user name or password, which is not allowed/);
    expect(creds).not.toContain(secret);
    expect(refused(["--mirror", "Lyon|https://lyon.example.org/?x=1#y|Lyon"])).toMatch(
      /has a query and a fragment, which is not allowed/,
    );
    expect(refused(["--mirror", "Lyon|https://lyon.example.org/#|Lyon"])).toMatch(/has a fragment/);
    expect(
      refused([], { ECHO_NODE_MIRROR: `A|https://a.example|x;B|https://u@b.example|y` }),
    ).toMatch(/user name or password/);
    const ok = accepted(["--mirror", "Austin|https://mirror.example.edu/nowcast|Austin, TX"]);
    expect(ok.mirrors[0]!.url).toBe("https://mirror.example.edu/nowcast");
  });

  it("reads a mirrors file that starts with a byte order mark", async () => {
    const file = join(tempDir(), "mirrors.json");
    const entry = { name: "Austin", url: "https://mirror.example.edu/nowcast", location: "TX" };
    writeFileSync(file, "\ufeff" + JSON.stringify([entry]));
    const node = await startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      mirrorsFile: file,
    });
    cleanups.push(() => node.close());
    expect(node.mirrors).toEqual([entry]);
  });

  it("points out a mirror listed twice, by URL or by name", () => {
    const [a, b, c] = ["A|https://a.example|x", "B|https://b.example|y", "b|https://c.example|z"];
    const list = [a, b, a, c].map(parseMirrorFlag);
    expect(duplicateMirrors(list)).toEqual([
      "mirror 'A' (https://a.example/) has the URL of mirror 'A' (https://a.example/): list each mirror once",
      "mirror 'b' (https://c.example/) has the name of mirror 'B' (https://b.example/): list each mirror once",
    ]);
    expect(duplicateMirrors([a, b].map(parseMirrorFlag))).toEqual([]);
  });

  it("refuses them in a mirrors file, naming the entry, and publishes none", async () => {
    const dir = tempDir();
    const file = join(dir, "mirrors.json");
    writeFileSync(
      file,
      JSON.stringify([
        { name: "Austin", url: "https://mirror.example.edu/nowcast", location: "TX" },
        { name: "Lyon", url: `https://admin:${secret}@lyon.example.org/?x=1#y`, location: "" },
      ]),
    );
    const start = startEchoNode({
      ...defaultConfig(),
      port: 0,
      host: "127.0.0.1",
      mirrorsFile: file,
    });
    await expect(start).rejects.toThrow(MirrorsError);
    const message = await start.catch((e: Error) => e.message);
    expect(message).toContain(`${file}: mirror #2: "url"`);
    expect(message).toContain("user name or password");
    expect(message).not.toContain(secret);
  });
});
