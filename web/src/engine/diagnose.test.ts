import { describe, expect, it } from "vitest";
import { askHost, isEchoNodeConfig, notEchoNodeReason, type HostAnswer } from "./diagnose";

/** A fetch that answers the root and `/api/config` as a script says (undefined: rejects, as
 *  fetch does with no answer or a CORS refusal). */
function scripted(root: boolean | "coep", config: (() => Response) | undefined): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input));
    if (url.pathname.endsWith("/api/config")) {
      expect(init?.mode).toBe("cors");
      if (config === undefined) throw new TypeError("Failed to fetch");
      return config();
    }
    expect(init?.mode).toBe("no-cors");
    expect(url.searchParams.has("nowcast-check")).toBe(true);
    if (root !== true) throw new TypeError("Failed to fetch");
    return new Response(null, { status: 200 });
  }) as typeof fetch;
}

const ECHO_NODE_CONFIG = {
  version: "0.1.0",
  protocolVersion: 1,
  websocket: { path: "/ws", subprotocol: "nowcast.v1", subprotocols: [] },
  limits: {},
};

describe("asking a target's host why nothing reached it", () => {
  it.each<[string, boolean | "coep", (() => Response) | undefined, HostAnswer]>([
    ["nothing answers", false, undefined, { http: false }],
    // Cross-origin isolated, the page sees its answer blocked, and the browser reports it.
    [
      "a web server, its answer blocked by COEP",
      "coep",
      undefined,
      { http: true, config: "blocked" },
    ],
    // A static server or nginx: no CORS headers, so the page cannot read its answer.
    ["a web server without CORS", true, undefined, { http: true, config: "blocked" }],
    [
      "a web server with CORS and no such file",
      true,
      () => new Response("Not Found", { status: 404 }),
      { http: true, config: "status", status: 404 },
    ],
    [
      "a server answering something else",
      true,
      () => new Response("<html>hello</html>", { status: 200 }),
      { http: true, config: "not-echo-node" },
    ],
    [
      "an echo-node",
      true,
      () => Response.json(ECHO_NODE_CONFIG),
      { http: true, config: "echo-node" },
    ],
  ])("tells %s", async (_, root, config, expected) => {
    const reported = async (url: string) => root === "coep" && url.includes("nowcast-check");
    expect(
      await askHost("http://example.test:8000/", 1000, scripted(root, config), reported),
    ).toEqual(expected);
  });

  it("recognises echo-node's /api/config and nothing else", () => {
    expect(isEchoNodeConfig(ECHO_NODE_CONFIG)).toBe(true);
    expect(isEchoNodeConfig({ version: "1" })).toBe(false);
    expect(isEchoNodeConfig(null)).toBe(false);
    expect(isEchoNodeConfig("ok")).toBe(false);
  });

  it("says what answered and what to do, only when a host answered but not as an echo-node", () => {
    expect(notEchoNodeReason({ http: false })).toBeUndefined();
    expect(notEchoNodeReason({ http: true, config: "echo-node" })).toBeUndefined();
    const blocked = notEchoNodeReason({ http: true, config: "blocked" })!;
    expect(blocked).toMatch(/no probe endpoint this page may use/);
    expect(blocked).toMatch(/WebSocket upgrade/);
    expect(blocked).toMatch(/--allow-origin/);
    expect(blocked).toMatch(/Self-hosting echo-node/);
    expect(notEchoNodeReason({ http: true, config: "status", status: 404 })).toMatch(
      /^\/api\/config answered HTTP 404 .*run echo-node there/,
    );
    expect(notEchoNodeReason({ http: true, config: "not-echo-node" })).toMatch(
      /did not answer as an echo-node does/,
    );
  });
});
