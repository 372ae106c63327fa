/**
 * What the operator's log says behind a reverse proxy, and about refused origins: a proxy that
 * is not trusted (`--trust-proxy` forgotten or naming another address) is pointed out once,
 * naming the flag to set, while its header is still never believed; a refused origin is named,
 * quoted and cut; and neither can be made to flood the log (one line per client per minute,
 * one forwarding warning per peer and per minute in all).
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { ForwardingWarnings, ProxyTrust } from "../src/client-address.js";
import { CLOSE } from "../src/protocol.js";
import { RefusalLog } from "../src/refusal-log.js";
import {
  cleanups,
  eventually,
  runCleanups,
  sleep,
  startTestNode,
  TestClient,
  withTimeout,
} from "./helpers.js";
import { rawExchange } from "./raw-client.js";

afterEach(runCleanups);
afterAll(runCleanups);

const WARNING = /echo-node: warning: requests from/;

/** Lines echo-node writes to stderr while the test runs (in-process servers). */
function captureLog(): string[] {
  const lines: string[] = [];
  const spy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
    lines.push(args.map(String).join(" "));
  });
  cleanups.push(() => spy.mockRestore());
  return lines;
}

/** `count` WebSockets from `peer`, the n-th carrying `X-Forwarded-For: 127.0.0.<10+n>` as
 *  nginx's `$proxy_add_x_forwarded_for` would: "open" or the close code each got. */
async function throughProxy(url: string, count: number, peer = "127.0.0.1"): Promise<string[]> {
  const clients = Array.from(
    { length: count },
    (_, i) =>
      new TestClient(url, {
        localAddress: peer,
        headers: { "X-Forwarded-For": `127.0.0.${10 + i}` },
      }),
  );
  return Promise.all(
    clients.map((c) =>
      withTimeout(
        Promise.race([c.open().then(() => "open"), c.closed.then((x) => `close ${x.code}`)]),
        5000,
        "WebSocket answer",
      ),
    ),
  );
}

function get(port: number, localAddress: string, headers: string): Promise<unknown> {
  return rawExchange(
    port,
    `GET /api/ping HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n`,
    { localAddress, timeoutMs: 2000 },
  );
}

/** echo-node as the command line runs it (no --trust-proxy), and its stderr. */
async function startProcess(): Promise<{ url: string; port: number; stderr: () => string }> {
  const main = join(dirname(fileURLToPath(import.meta.url)), "../src/main.ts");
  const child = spawn(
    process.execPath,
    ["--import", "tsx", main, "--port", "0", "--host", "127.0.0.1", "--static", "/nonexistent"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  cleanups.push(() => void child.kill("SIGKILL"));
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  await eventually(() => /listening on http:\/\/[^:]+:\d+/.test(stdout), 15_000, "listening");
  const port = Number(/listening on http:\/\/[^:]+:(\d+)/.exec(stdout)![1]);
  return { url: `http://127.0.0.1:${port}`, port, stderr: () => stderr };
}

describe("forwarding headers from a peer that is not a trusted proxy", () => {
  it("are pointed out once, naming the peer and the flag, and never believed", async () => {
    const node = await startProcess();
    // The README's nginx on 127.0.0.1, ten users behind it, --trust-proxy forgotten.
    const got = await throughProxy(node.url, 10);
    // Not believed: the proxy is one client, with the default 8 connections.
    expect(got.filter((g) => g === "open")).toHaveLength(8);
    expect(got.filter((g) => g === `close ${CLOSE.CONNECTIONS_PER_CLIENT.code}`)).toHaveLength(2);
    for (let i = 0; i < 10; i++)
      await get(node.port, "127.0.0.1", `X-Forwarded-For: 10.9.9.${i}\r\n`);
    await eventually(() => WARNING.test(node.stderr()), 3000, "the warning");
    // A hostile client sends the headers too, from many addresses: still one line.
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        get(node.port, `127.0.3.${i + 1}`, `X-Forwarded-For: 1.2.3.${i}\r\nForwarded: for=x\r\n`),
      ),
    );
    await sleep(200);
    const warnings = node
      .stderr()
      .split("\n")
      .filter((l) => WARNING.test(l));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      "requests from 127.0.0.1 carry X-Forwarded-For: behind a proxy? --trust-proxy 127.0.0.1",
    );
  }, 20_000);

  it("adds the peer to a --trust-proxy that names another address", async () => {
    const log = captureLog();
    const node = await startTestNode({ trustProxy: ["10.0.0.4"] });
    expect(await throughProxy(node.url, 1)).toEqual(["open"]);
    const warnings = log.filter((l) => WARNING.test(l));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("behind a proxy? --trust-proxy 10.0.0.4,127.0.0.1");
  });

  it("says nothing behind a trusted proxy, whose users are told apart", async () => {
    const log = captureLog();
    const node = await startTestNode({ trustProxy: ["127.0.0.1"] });
    expect(await throughProxy(node.url, 10)).toEqual(Array(10).fill("open"));
    expect(log.filter((l) => /warning/.test(l))).toEqual([]);
  });

  it("points out Forwarded, which is not read, from trusted and untrusted peers", async () => {
    const log = captureLog();
    const node = await startTestNode({ trustProxy: ["127.0.0.1"] });
    await get(node.port, "127.0.0.1", "Forwarded: for=192.0.2.1\r\n");
    expect(log.filter((l) => WARNING.test(l))).toEqual([
      expect.stringContaining(
        "requests from 127.0.0.1, a trusted proxy, carry Forwarded but no X-Forwarded-For",
      ),
    ]);
    const w = new ForwardingWarnings(new ProxyTrust([]));
    expect(w.check(0, "10.0.0.7", false, false, true)).toMatch(
      /^requests from 10\.0\.0\.7 carry Forwarded, which echo-node does not read: .* Have it set X-Forwarded-For, and --trust-proxy 10\.0\.0\.7\./,
    );
  });

  it("never spells out a --trust-proxy for a peer on the internet, which may be any client", () => {
    const say = (peer: string, xff: boolean) =>
      new ForwardingWarnings(new ProxyTrust(["loopback"])).check(0, peer, false, xff, !xff) ?? "";
    for (const peer of ["192.0.2.7", "8.8.8.8", "2001:db8::1", "172.32.0.1", "100.128.0.1"]) {
      for (const xff of [true, false]) {
        const line = say(peer, xff);
        expect(line).toMatch(new RegExp(`^requests from ${peer} carry .*, which is ignored`));
        expect(line).not.toMatch(/--trust-proxy [^ ]*\d/);
        expect(line).toContain("never a client's");
      }
    }
    for (const peer of ["10.1.2.3", "172.16.0.1", "192.168.0.9", "100.64.0.1", "fd12::3"]) {
      expect(say(peer, true)).toContain(`behind a proxy? --trust-proxy loopback,${peer}.`);
    }
  });

  it("names each peer once, and writes at most one warning a minute in all", () => {
    const w = new ForwardingWarnings(new ProxyTrust(["loopback"]), 60_000);
    const say = (t: number, peer: string, trusted = false) =>
      w.check(t, peer, trusted, true, false);
    expect(say(0, "127.0.0.1", true)).toBeUndefined(); // configured right
    expect(say(0, "192.168.1.1")).toContain("--trust-proxy loopback,192.168.1.1");
    expect(say(1, "192.168.1.1")).toBeUndefined();
    expect(say(2, "192.168.1.2")).toBeUndefined(); // within the minute
    expect(say(60_000, "192.168.1.1")).toBeUndefined(); // once per peer
    expect(say(60_001, "fd00::1")).toContain("--trust-proxy loopback,fd00::1");
    let lines = 0;
    for (let i = 0; i < 100_000; i++) {
      if (say(120_000 + i / 2, `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`) !== undefined) lines++;
    }
    expect(lines).toBe(1);
    expect(w.check(0, "192.0.2.3", false, false, false)).toBeUndefined();
  });
});

describe("refused origins in the log", () => {
  it("names the origin a WebSocket was refused for, and one an HTTP probe was", async () => {
    const log = captureLog();
    const node = await startTestNode();
    const ws = new TestClient(node.url, {
      localAddress: "127.0.4.1",
      headers: { Origin: "https://evil.example" },
    });
    expect(await withTimeout(ws.closed, 5000, "close")).toMatchObject({
      code: CLOSE.ORIGIN.code,
      reason: CLOSE.ORIGIN.reason,
    });
    await get(node.port, "127.0.4.2", "Origin: https://other.example\r\n");
    await eventually(() => log.length >= 2, 3000, "two log lines");
    expect(log).toEqual([
      'echo-node: refused 127.0.4.1: WebSocket refused: origin "https://evil.example" not allowed',
      'echo-node: refused 127.0.4.2: "GET" "/api/ping": origin "https://other.example" not allowed',
    ]);
  });

  it("quotes and cuts a hostile origin", async () => {
    const log = captureLog();
    const node = await startTestNode();
    const origin = 'https://a"b\\c\t.example/' + "x".repeat(500);
    const ws = new TestClient(node.url, { localAddress: "127.0.4.3", headers: { Origin: origin } });
    await withTimeout(ws.closed, 5000, "close");
    await eventually(() => log.length >= 1, 3000, "a log line");
    expect(log[0]).toContain('origin "https://a\\"b\\\\c?.example/xxx');
    expect(log[0]).toContain('…" not allowed');
    expect(log[0]!.length).toBeLessThan(200);
  });

  it("a flood of distinct origins is one line a minute per client", async () => {
    const log = captureLog();
    // Clients are /24 networks here, so that loopback addresses can stand for IPv6 addresses
    // of one /64: a client's addresses share its line as they share its limits.
    const node = await startTestNode({ ipv4Prefix: 24, maxConnectionsPerClient: 100 });
    const refused = async (localAddress: string, i: number) => {
      const ws = new TestClient(node.url, {
        localAddress,
        headers: { Origin: `https://evil-${i}.example` },
      });
      await withTimeout(ws.closed, 5000, "close");
    };
    await refused("127.0.5.1", 0);
    await Promise.all(Array.from({ length: 40 }, (_, i) => refused(`127.0.5.${2 + i}`, i + 1)));
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        get(node.port, `127.0.5.${50 + i}`, `Origin: https://evil-http-${i}.example\r\n`),
      ),
    );
    await refused("127.0.6.1", 99);
    await eventually(() => log.length >= 2, 3000, "two log lines");
    await sleep(100);
    // The 60 left out are the first client's, and are never put on the other's line.
    expect(log).toEqual([
      'echo-node: refused 127.0.5.1: WebSocket refused: origin "https://evil-0.example" not allowed',
      'echo-node: refused 127.0.6.1: WebSocket refused: origin "https://evil-99.example" not allowed',
    ]);
    // They are told with the first client's last line, once its minute is over (here, as the
    // server stops).
    await node.close();
    expect(log).toHaveLength(3);
    expect(log[2]).toMatch(
      /^echo-node: refused 127\.0\.5\.\d+: "GET" "\/api\/ping": origin "https:\/\/evil-http-\d+\.example" not allowed \(59 similar lines from this client suppressed\)$/,
    );
  });

  it("groups by the given client, not the address", () => {
    const lines: string[] = [];
    const log = new RefusalLog((l) => lines.push(l), 60_000);
    for (let i = 1; i <= 1000; i++)
      log.note(i, `2001:db8::${i.toString(16)}`, "x", "2001:db8::/64");
    log.note(60_001, "2001:db8::1", "y", "2001:db8::/64");
    expect(lines).toEqual([
      "echo-node: refused 2001:db8::1: x",
      "echo-node: refused 2001:db8::1: y (999 similar lines from this client suppressed)",
    ]);
  });

  it("counts what it leaves out per client and kind, and tells it with that client only", () => {
    const lines: string[] = [];
    const log = new RefusalLog((l) => lines.push(l), 60_000);
    // The review's case: 50 refusals of one client, then one of another.
    for (let i = 0; i < 50; i++) log.note(i, "127.0.0.100", `origin ${i}`, "127.0.0.100", "origin");
    log.note(100, "127.0.0.101", "takes no request body", "127.0.0.101", "request_body");
    // Another kind of refusal of the first client has a line of its own.
    log.note(200, "127.0.0.100", "byte budget exceeded", "127.0.0.100", "byte_budget");
    log.note(300, "127.0.0.100", "byte budget exceeded", "127.0.0.100", "byte_budget");
    expect(lines).toEqual([
      "echo-node: refused 127.0.0.100: origin 0",
      "echo-node: refused 127.0.0.101: takes no request body",
      "echo-node: refused 127.0.0.100: byte budget exceeded",
    ]);
    log.flush(59_999); // nobody's minute is over
    expect(lines).toHaveLength(3);
    log.flush(60_300);
    expect(lines.slice(3)).toEqual([
      "echo-node: refused 127.0.0.100: origin 49 (48 similar lines from this client suppressed)",
      "echo-node: refused 127.0.0.100: byte budget exceeded",
    ]);
    // Still one line a minute: the flushed line counts as the client's line.
    log.note(60_400, "127.0.0.100", "origin 50", "127.0.0.100", "origin");
    log.note(60_500, "127.0.0.101", "takes no request body", "127.0.0.101", "request_body");
    expect(lines).toHaveLength(6);
    expect(lines[5]).toBe("echo-node: refused 127.0.0.101: takes no request body");
  });
});
