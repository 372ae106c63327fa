// The fetch side of the probes: the tiny ping timed with Resource Timing, and downloads of N
// random bytes on one or more parallel streams. Each fetch is aborted at its timeout.

import {
  endpointUrl,
  fetchRtt,
  parseServerTiming,
  retryAfterSeconds,
  type StreamSpan,
  type UploadStream,
} from "./probe-math";
import { ProbeTimeout, RetryLater } from "./errors";

let counter = 0;

async function timedFetch(
  url: string,
  timeoutMs: number,
  abort = new AbortController(),
  init: RequestInit = {},
): Promise<{ res: Response; t0: number; body: ArrayBuffer }> {
  const t0 = performance.now();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const res = await fetch(url, { ...init, cache: "no-store", signal: abort.signal });
    if (res.status === 429) {
      throw new RetryLater(retryAfterSeconds(res.headers.get("Retry-After")) ?? 60);
    }
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    // Reading the body inside the timer bounds the whole transfer, not just the headers.
    const body = await res.arrayBuffer();
    return { res, t0, body };
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
  const url = endpointUrl(origin, `api/ping?n=${++counter}`).href;
  const { res, t0 } = await timedFetch(url, timeoutMs);
  const wall = performance.now() - t0;
  const server = parseServerTiming(res.headers.get("Server-Timing")).get("proc");
  const entry = takeEntry(url);
  return (entry && fetchRtt(entry, server)) ?? Math.max(0, wall - (server ?? 0));
}

/**
 * Downloads over fetch, one per entry of `sizes`, all at once (parallel streams, each on its
 * own connection as the browser sees fit): each stream's span from request sent to last byte
 * (Resource Timing; the fetch's own start and end where the entry has no detail). The
 * entries are taken together once every stream is done, so one stream's clean-up never takes
 * another's entry.
 */
export async function httpDownloads(
  origin: string,
  sizes: readonly number[],
  timeoutMs: number,
): Promise<StreamSpan[]> {
  const urls = sizes.map((b) => endpointUrl(origin, `api/download?bytes=${b}&n=${++counter}`).href);
  const abort = new AbortController();
  const walls = await Promise.all(
    urls.map(async (url) => {
      const { t0 } = await timedFetch(url, timeoutMs, abort).catch((e: unknown) => {
        // One stream failing ends the others: their bytes would no longer be a measurement.
        abort.abort();
        throw e;
      });
      return { startMs: t0, endMs: performance.now() };
    }),
  );
  const entries = urls.map(
    (url) =>
      performance.getEntriesByName(url, "resource").at(-1) as PerformanceResourceTiming | undefined,
  );
  performance.clearResourceTimings();
  return entries.map((entry, i) => {
    const span =
      entry !== undefined && entry.requestStart > 0
        ? { startMs: entry.requestStart, endMs: entry.responseEnd }
        : walls[i]!;
    return { ...span, bytes: sizes[i]! };
  });
}

/** What `POST /api/upload` answers (echo-node PROTOCOL.md, "HTTP probes"). */
interface UploadAnswer {
  bytes: number;
  firstByteAt: number;
  lastByteAt: number;
  /** Absent from servers before it was added: the rate then comes from the client's time. */
  firstReadBytes?: number;
}

/** Zeros to upload, as a Blob grown to the largest upload so far (their contents do not
 *  matter: request bodies are never compressed). A slice of a Blob costs no copy. */
let zeros = new Blob([]);

/**
 * Uploads over fetch, one `POST /api/upload` per entry of `sizes`, all at once, each with its
 * span on the client's clock and the server's receive times. The body is a slice of a Blob:
 * the browser's network process reads it from the browser's own blob storage and writes it to
 * the socket as fast as the path takes it, without the page's thread. (A WebSocket message
 * goes through a pipe of ~128 KB between the page and the network process that the page's
 * thread must keep refilling: on a fast path with little delay, and a busy machine, that pipe
 * runs dry and the upload reads low. An ArrayBuffer body is as fast on the wire, but the page
 * copies it out first: 16 MiB took 850-1000 ms in all at 300 Mbit/s against 480 ms from a
 * Blob, and a fetch download in the second after it ran 4-7 times slower, which read as a
 * slow link.) No Content-Type, so a mirror's upload is a simple CORS request, without a
 * preflight.
 */
export async function httpUploads(
  origin: string,
  sizes: readonly number[],
  timeoutMs: number,
): Promise<UploadStream[]> {
  const largest = Math.max(0, ...sizes);
  if (zeros.size < largest) zeros = new Blob([new Uint8Array(largest)]);
  const abort = new AbortController();
  return Promise.all(
    sizes.map(async (bytes) => {
      const url = endpointUrl(origin, `api/upload?n=${++counter}`).href;
      const init = { method: "POST", body: zeros.slice(0, bytes) };
      const { t0, body } = await timedFetch(url, timeoutMs, abort, init).catch((e: unknown) => {
        abort.abort();
        throw e;
      });
      const endMs = performance.now();
      const a = JSON.parse(new TextDecoder().decode(body)) as UploadAnswer;
      if (a.bytes !== bytes || !Number.isFinite(a.firstByteAt) || !Number.isFinite(a.lastByteAt)) {
        throw new Error(`${url}: the server counted ${a.bytes} of ${bytes} bytes`);
      }
      return {
        startMs: t0,
        endMs,
        bytes,
        firstByteAt: a.firstByteAt,
        lastByteAt: a.lastByteAt,
        firstReadBytes: Number.isFinite(a.firstReadBytes) ? a.firstReadBytes : undefined,
      };
    }),
  );
}
