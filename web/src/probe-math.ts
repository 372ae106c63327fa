// Probe arithmetic: raw timings in, measurements out. Pure, so the worker's I/O stays thin and
// every rule here is tested with exact numbers.

/** 1 Mbit/s in bytes per millisecond: 1e6 bit/s = 125 000 B/s = 125 B/ms. */
const BYTES_PER_MS_PER_MBITS = 125;

/** A bandwidth measurement and how its duration was obtained. */
export interface Rate {
  mbits: number;
  /** The duration the rate was computed from, after any subtraction. */
  durationMs: number;
  /** The predicted RTT taken off the raw time (0 when none was). */
  rttSubtractedMs: number;
}

/**
 * Rate of a timed transfer whose clock also ran through one acknowledgement round trip
 * (JavaNws §2.1.1: the client waits for the ack, so the predicted RTT is subtracted from the
 * observed probe time). The subtraction is skipped when it would leave less than half of the
 * raw time: then the probe was too short for the prediction to be trusted, and the raw time
 * is the honest (lower-bound) answer.
 */
export function rateMinusRtt(
  bytes: number,
  rawMs: number,
  predictedRttMs: number | undefined,
): Rate {
  const rtt = predictedRttMs !== undefined && predictedRttMs > 0 ? predictedRttMs : 0;
  const subtract = rtt > 0 && rawMs - rtt >= rawMs / 2 ? rtt : 0;
  const durationMs = rawMs - subtract;
  return { mbits: mbits(bytes, durationMs), durationMs, rttSubtractedMs: subtract };
}

/** Bytes over milliseconds as Mbit/s; 0 for a non-positive duration. */
export function mbits(bytes: number, durationMs: number): number {
  return durationMs > 0 ? bytes / durationMs / BYTES_PER_MS_PER_MBITS : 0;
}

/**
 * Upload rate from the server's own receive times (echo-node PROTOCOL.md, "Upload
 * bandwidth"): no acknowledgement RTT is in it. When the upload arrived in one read the two
 * times are equal and carry no duration, so the client's time minus the predicted RTT is used.
 */
export function uploadRate(
  bytes: number,
  firstByteAt: number,
  lastByteAt: number,
  clientMs: number,
  predictedRttMs: number | undefined,
): Rate {
  const serverMs = lastByteAt - firstByteAt;
  if (serverMs > 0)
    return { mbits: mbits(bytes, serverMs), durationMs: serverMs, rttSubtractedMs: 0 };
  return rateMinusRtt(bytes, clientMs, predictedRttMs);
}

/**
 * `Server-Timing` header → metric name → duration (ms). Unknown parameters are ignored; a
 * metric without `dur` is left out (RFC: Server Timing, W3C, §3).
 */
export function parseServerTiming(header: string | null): Map<string, number> {
  const out = new Map<string, number>();
  if (header === null) return out;
  for (const entry of header.split(",")) {
    const [name, ...params] = entry.split(";").map((s) => s.trim());
    if (name === undefined || name === "") continue;
    for (const p of params) {
      const m = /^dur=("?)([0-9.eE+-]+)\1$/.exec(p);
      if (m !== null && Number.isFinite(Number(m[2]))) out.set(name, Number(m[2]));
    }
  }
  return out;
}

/** The part of a Resource Timing entry the RTT needs. */
export interface RequestTiming {
  requestStart: number;
  responseStart: number;
}

/**
 * RTT of a tiny fetch: request sent to first response byte, which leaves out DNS, the
 * connection handshake and queueing in the browser, minus the time the server says it spent
 * (`Server-Timing: proc`). Undefined when the entry has no usable request timing (an opaque
 * cross-origin entry reports zeros).
 */
export function fetchRtt(entry: RequestTiming, serverMs: number | undefined): number | undefined {
  if (entry.requestStart <= 0 || entry.responseStart < entry.requestStart) return undefined;
  const raw = entry.responseStart - entry.requestStart;
  return Math.max(0, raw - (serverMs ?? 0));
}

/** Seconds from a `retry-after=N` suffix of a close reason, or from a Retry-After header. */
export function retryAfterSeconds(text: string | null): number | undefined {
  if (text === null) return undefined;
  const m = /(?:retry-after=)?\s*(\d+)\s*$/i.exec(text);
  return m === null ? undefined : Number(m[1]);
}

/** Probe sizes offered (JavaNws: 64, 128, 256, 512 KB; the larger ones are for fast links). */
export const PROBE_SIZES = [
  64 * 1024,
  128 * 1024,
  256 * 1024,
  512 * 1024,
  1024 * 1024,
  4 * 1024 * 1024,
  16 * 1024 * 1024,
] as const;

/** How long an automatically sized probe should last: long enough that timer resolution and
 *  TCP slow start are small next to it, short enough to stay cheap. */
export const AUTO_TARGET_MS = 250;
export const AUTO_MIN_BYTES = 64 * 1024;
export const AUTO_MAX_BYTES = 32 * 1024 * 1024;

/**
 * The automatic probe size: the bytes the predicted rate moves in {@link AUTO_TARGET_MS},
 * rounded up to a power of two (so sizes repeat and durations stay comparable), between 64 KiB
 * and the smaller of 32 MiB and the server's cap. Starts at 64 KiB with no prediction.
 */
export function autoSize(predictedMbits: number | undefined, capBytes: number): number {
  const max = Math.max(AUTO_MIN_BYTES, Math.min(AUTO_MAX_BYTES, capBytes));
  if (predictedMbits === undefined || !(predictedMbits > 0)) return Math.min(AUTO_MIN_BYTES, max);
  const want = predictedMbits * BYTES_PER_MS_PER_MBITS * AUTO_TARGET_MS;
  let size = AUTO_MIN_BYTES;
  while (size < want && size < max) size *= 2;
  return Math.min(size, max);
}

/** Median of `xs` (mean of the middle two for an even count); undefined when empty. */
export function median(xs: readonly number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Jitter: mean absolute difference of consecutive RTTs; undefined below two values. */
export function jitter(rtts: readonly number[]): number | undefined {
  if (rtts.length < 2) return undefined;
  let sum = 0;
  for (let i = 1; i < rtts.length; i++) sum += Math.abs(rtts[i]! - rtts[i - 1]!);
  return sum / (rtts.length - 1);
}
