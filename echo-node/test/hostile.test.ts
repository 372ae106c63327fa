/**
 * Hostile requests sent as raw bytes to a real echo-node: each is answered or refused for that
 * one client while the server keeps serving a control client.
 */
import { connect } from "node:net";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { encodeEcho } from "../src/protocol.js";
import type { EchoNode } from "../src/server.js";
import { openClient, runCleanups, startTestNode, withTimeout } from "./helpers.js";

afterEach(runCleanups);
afterAll(runCleanups);

/** Sends `bytes` on a fresh TCP connection and resolves with everything the server answered
 *  until it closed (or 2 s passed). */
function raw(node: EchoNode, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(node.port, "127.0.0.1");
    const chunks: Buffer[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString("latin1"));
    };
    const timer = setTimeout(done, 2000);
    socket.on("data", (c) => chunks.push(c));
    socket.on("close", done);
    socket.on("error", done);
    socket.write(bytes, "latin1");
  });
}

async function controlClientServed(node: EchoNode): Promise<void> {
  const c = await openClient(node);
  c.send(encodeEcho(7, new Uint8Array([1, 2])));
  expect(await c.next()).toMatchObject({ type: "echo_reply", seq: 7 });
  c.terminate();
  const res = await withTimeout(fetch(`${node.url}/healthz`), 2000, "healthz");
  expect(res.status).toBe(200);
}

describe("hostile request-targets", () => {
  it("an unparseable absolute URL with Upgrade is refused 400 and the server lives", async () => {
    const node = await startTestNode();
    const answer = await raw(
      node,
      "GET http://[/ HTTP/1.1\r\nHost: x\r\nUpgrade: a\r\nConnection: Upgrade\r\n\r\n",
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(node.metrics.limitRejections.bad_request).toBe(1);
    await controlClientServed(node);
  });

  it("the same target without Upgrade is answered 400, not 500", async () => {
    const node = await startTestNode();
    const answer = await raw(node, "GET http://[/ HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    await controlClientServed(node);
  });
});
