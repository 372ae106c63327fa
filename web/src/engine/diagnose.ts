// Why a target that answered no probe is out of reach: nothing answers at its address, or a
// host answers over HTTP but not as an echo-node (a static web server, nginx, a typo'd port).
// From a page both look alike, a WebSocket closed with code 1006 and a fetch rejected with a
// TypeError, and "no connection" sent people looking for a network fault that was not there.
// Two requests tell them apart: a no-cors GET of the host's root, which resolves (opaquely)
// whenever any HTTP server answers, and a CORS GET of echo-node's `/api/config`. The page is
// cross-origin isolated (COEP require-corp), under which a no-cors answer without a
// Cross-Origin-Resource-Policy is blocked too, as a network error; but the browser then
// reports the block (a "coep" report, ReportingObserver), and only for a response that came.

/** What the target's host answered to the two requests. */
export type HostAnswer =
  /** Nothing over HTTP either: refused, unreachable, or blocked before the request. */
  | { http: false }
  /** An HTTP answer; `/api/config` unreadable from the page (no CORS answer). */
  | { http: true; config: "blocked" }
  /** `/api/config` answered with an HTTP error status. */
  | { http: true; config: "status"; status: number }
  /** `/api/config` answered, but not with an echo-node's configuration. */
  | { http: true; config: "not-echo-node" }
  /** An echo-node's configuration: the probes failed for another reason. */
  | { http: true; config: "echo-node" };

/** Whether `body` is an echo-node's `/api/config` (echo-node/src/server.ts `configJson`). */
export function isEchoNodeConfig(body: unknown): boolean {
  if (typeof body !== "object" || body === null) return false;
  const c = body as { protocolVersion?: unknown; websocket?: { subprotocol?: unknown } };
  return typeof c.protocolVersion === "number" && typeof c.websocket?.subprotocol === "string";
}

/**
 * Asks the host of `base` the two questions, each bounded by `timeoutMs`; `get` is fetch (a
 * test gives a scripted one).
 */
export async function askHost(
  base: string,
  timeoutMs: number,
  get: typeof fetch = fetch,
  blocked: (url: string) => Promise<boolean> = coepBlocked,
): Promise<HostAnswer> {
  const within = (url: URL, init: RequestInit) =>
    get(url, { ...init, cache: "no-store", signal: AbortSignal.timeout(timeoutMs) });
  const root = new URL(base);
  // A query of its own: the report it may bring is told from any other's.
  root.searchParams.set("nowcast-check", String(Math.random()).slice(2));
  try {
    await within(root, { mode: "no-cors" });
  } catch {
    if (!(await blocked(root.href))) return { http: false };
  }
  let res: Response;
  try {
    res = await within(new URL("api/config", base.endsWith("/") ? base : `${base}/`), {
      mode: "cors",
    });
  } catch {
    return { http: true, config: "blocked" };
  }
  if (!res.ok) return { http: true, config: "status", status: res.status };
  try {
    return {
      http: true,
      config: isEchoNodeConfig(await res.json()) ? "echo-node" : "not-echo-node",
    };
  } catch {
    return { http: true, config: "not-echo-node" };
  }
}

/** How long a COEP report may take to come after its fetch failed (they are queued). */
const REPORT_WAIT_MS = 300;

/** Whether the browser reported blocking the answer to `url` under the page's COEP (so an
 *  answer came): false where there are no reports to observe. */
async function coepBlocked(url: string): Promise<boolean> {
  type Report = { type: string; body?: { blockedURL?: string; toJSON?: () => unknown } };
  const Observer = (globalThis as { ReportingObserver?: new (...a: unknown[]) => unknown })
    .ReportingObserver as
    | (new (
        cb: (reports: Report[]) => void,
        options: { types: string[]; buffered: boolean },
      ) => { observe(): void; disconnect(): void; takeRecords(): Report[] })
    | undefined;
  if (Observer === undefined) return false;
  let seen = false;
  const look = (reports: Report[]) => {
    for (const r of reports) {
      const json = r.body?.toJSON?.() as { blockedURL?: string } | undefined;
      if ((json?.blockedURL ?? r.body?.blockedURL ?? url) === url) seen = true;
    }
  };
  const observer = new Observer(look, { types: ["coep"], buffered: true });
  observer.observe();
  await new Promise((resolve) => setTimeout(resolve, REPORT_WAIT_MS));
  look(observer.takeRecords());
  observer.disconnect();
  return seen;
}

/** Where the page sends a person who wants an echo-node of their own. */
export const SELF_HOST = 'run echo-node there ("Self-hosting echo-node" in Nowcast\'s README)';

/**
 * The outage's reason when the host answered over HTTP but not as an echo-node (the page's
 * banner names the host before it), in words a person can act on; undefined when the answer
 * says nothing new (no HTTP answer at all, or an echo-node: the probes' own failure is the
 * reason).
 */
export function notEchoNodeReason(a: HostAnswer): string | undefined {
  if (!a.http || a.config === "echo-node") return undefined;
  const what =
    a.config === "blocked"
      ? "it has no probe endpoint this page may use (/api/config gave no CORS answer) and " +
        "refused the WebSocket upgrade"
      : a.config === "status"
        ? `/api/config answered HTTP ${a.status} and the WebSocket upgrade was refused`
        : "/api/config did not answer as an echo-node does, and the WebSocket upgrade was " +
          "refused";
  const fix =
    a.config === "blocked"
      ? "If it runs echo-node, that must allow this page's origin (--allow-origin); " +
        `if not, to measure it, ${SELF_HOST}`
      : `To measure it, ${SELF_HOST}`;
  return `${what}. ${fix}`;
}
