// The fetch side of the probes: the tiny ping timed with Resource Timing, and a download of N
// random bytes. Each fetch is aborted at its timeout.

import { fetchRtt, parseServerTiming, retryAfterSeconds } from "./probe-math";
import { ProbeTimeout } from "./ws-probe";

/** The server asked us to wait (HTTP 429). */
export class RetryLater extends Error {
  constructor(readonly seconds: number) {
    super(`server asked to wait ${seconds} s`);
    this.name = "RetryLater";
  }
}

let counter = 0;

async function timedFetch(url: string, timeoutMs: number): Promise<{ res: Response; t0: number }> {
  const abort = new AbortController();
  const t0 = performance.now();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const res = await fetch(url, { cache: "no-store", signal: abort.signal });
    if (res.status === 429) {
      throw new RetryLater(retryAfterSeconds(res.headers.get("Retry-After")) ?? 60);
    }
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    // Reading the body inside the timer bounds the whole transfer, not just the headers.
    await res.arrayBuffer();
    return { res, t0 };
  } catch (e) {
    if (abort.signal.aborted) throw new ProbeTimeout(performance.now() - t0);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** The Resource Timing entry of `url`, taken out of the buffer so it never fills up. */
function takeEntry(url: string): PerformanceResourceTiming | undefined {
  const entry = performance.getEntriesByName(url, "resource").at(-1) as
    PerformanceResourceTiming | undefined;
  performance.clearResourceTimings();
  return entry;
}

/** RTT of `GET /api/ping` (ms), server processing time subtracted. */
export async function httpPing(origin: string, timeoutMs: number): Promise<number> {
  const url = new URL(`/api/ping?n=${++counter}`, origin).href;
  const { res, t0 } = await timedFetch(url, timeoutMs);
  const wall = performance.now() - t0;
  const server = parseServerTiming(res.headers.get("Server-Timing")).get("proc");
  const entry = takeEntry(url);
  return (entry && fetchRtt(entry, server)) ?? Math.max(0, wall - (server ?? 0));
}

/** Download of `bytes` over fetch: request sent to last byte (ms). */
export async function httpDownload(
  origin: string,
  bytes: number,
  timeoutMs: number,
): Promise<{ rawMs: number }> {
  const url = new URL(`/api/download?bytes=${bytes}&n=${++counter}`, origin).href;
  const { t0 } = await timedFetch(url, timeoutMs);
  const wall = performance.now() - t0;
  const entry = takeEntry(url);
  const raw =
    entry !== undefined && entry.requestStart > 0 ? entry.responseEnd - entry.requestStart : wall;
  return { rawMs: raw };
}
