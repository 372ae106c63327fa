// Probe arithmetic: raw timings in, measurements out. Pure, so the worker's I/O stays thin and
// every rule here is tested with exact numbers.

import {
  coreAutoMinBytes,
  coreAutoSize,
  coreAutoTargetFor,
  coreAutoTargetMs,
  coreBurstNext,
  coreTimedBytes,
  transferRate,
} from "../forecast";

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
 * observed probe time). The rule is the core's (`core/src/transfer.rs`, the one `nowcast tcp`
 * uses): the subtraction is skipped when it would leave less than half of the raw time, when
 * the probe was too short for the prediction to be trusted and the raw time is the honest
 * (lower-bound) answer.
 */
export function rateMinusRtt(
  bytes: number,
  rawMs: number,
  predictedRttMs: number | undefined,
): Rate {
  const r = transferRate(bytes, rawMs, predictedRttMs);
  const subtract = r?.subtractedMs ?? 0;
  return { mbits: r?.mbits ?? 0, durationMs: rawMs - subtract, rttSubtractedMs: subtract };
}

/** One stream of a transfer on the client's clock (`performance.now()`, ms). */
export interface StreamSpan {
  startMs: number;
  endMs: number;
  bytes: number;
}

/** A transfer's rate and what it was computed from. */
export interface TransferRate extends Rate {
  bytes: number;
  /** From the first stream's start to the last stream's end, before any subtraction. */
  rawMs: number;
}

/**
 * Rate of one or more streams run at once, each timed from its request to its last byte: all
 * their bytes over the span from the first stream's start to the last stream's end, with the
 * predicted RTT subtracted once (JavaNws §2.1.1), because the streams' request-to-first-byte
 * round trips overlap and the span holds one of them. With one stream this is
 * {@link rateMinusRtt} of its own time.
 */
export function aggregateRate(
  streams: readonly StreamSpan[],
  predictedRttMs: number | undefined,
): TransferRate {
  let start = Infinity;
  let end = -Infinity;
  let bytes = 0;
  for (const s of streams) {
    start = Math.min(start, s.startMs);
    end = Math.max(end, s.endMs);
    bytes += s.bytes;
  }
  const rawMs = streams.length === 0 ? 0 : end - start;
  return { ...rateMinusRtt(bytes, rawMs, predictedRttMs), bytes, rawMs };
}

/** One upload stream: the client's span and the server's receive times (UPLOAD_ACK). */
export interface UploadStream extends StreamSpan {
  firstByteAt: number;
  lastByteAt: number;
  /** Bytes that arrived in the server's read at `firstByteAt`; undefined from an older
   *  server, which did not say. */
  firstReadBytes: number | undefined;
}

/**
 * Upload rate from the server's own receive times (echo-node PROTOCOL.md, "Upload
 * bandwidth"): no acknowledgement RTT is in it. The bytes of a first read have no duration
 * (they arrived before the first time the server saw), so they are left out:
 * `(bytes − firstReadBytes) / (lastByteAt − firstByteAt)`. Parallel streams to one server
 * share its clock: the span runs from the earliest first read to the latest last one, and
 * every stream's first read is left out, so that every byte counted arrived inside the span
 * (a later stream's first read may hold bytes that waited in the kernel from before it, and
 * small streams arrive in one read each). When the server saw no duration (one-read
 * uploads) or did not say how much its first reads carried, the client's own time minus the
 * predicted RTT is used ({@link aggregateRate}).
 */
export function uploadRate(
  streams: readonly UploadStream[],
  predictedRttMs: number | undefined,
): TransferRate {
  const client = aggregateRate(streams, predictedRttMs);
  let first = Infinity;
  let last = -Infinity;
  let timed = 0;
  for (const s of streams) {
    if (s.firstReadBytes === undefined) return client;
    first = Math.min(first, s.firstByteAt);
    last = Math.max(last, s.lastByteAt);
    timed += s.bytes - s.firstReadBytes;
  }
  const serverMs = last - first;
  if (!(serverMs > 0) || !(timed > 0)) return client;
  return {
    // The core's rate (no RTT in the server's span, so none is subtracted).
    mbits: rateMinusRtt(timed, serverMs, undefined).mbits,
    durationMs: serverMs,
    rttSubtractedMs: 0,
    ...pick(client),
  };
}

function pick(r: TransferRate): { bytes: number; rawMs: number } {
  return { bytes: r.bytes, rawMs: r.rawMs };
}

/** `total` bytes split over `streams` streams as evenly as whole bytes allow. */
export function splitBytes(total: number, streams: number): number[] {
  const n = Math.max(1, Math.floor(streams));
  const each = Math.floor(total / n);
  return Array.from({ length: n }, (_, i) => each + (i < total - each * n ? 1 : 0));
}

/** Stream counts a pretest tries: one, then doubling, up to 4 (the page keeps its own and
 *  the loaded-RTT connection within echo-node's 8 connections per address). */
export const STREAM_CANDIDATES: readonly number[] = [1, 2, 4];
/**
 * More streams are used when they are faster than this fraction over fewer: a probe that
 * reads a few per cent low is a wrong measurement, not a saving, and a stream costs only a
 * connection. Where one stream fills the path, a pretest's candidates agree within ~1 %.
 */
export const STREAMS_GAIN = 0.01;
/**
 * ... and fewer streams are kept when one of their tries reached that (within the gain) and
 * none fell further below it than this: a single try a per cent or two low is the machine's
 * scheduling (at 1 Gbit/s one stream's tries read 962 and 952 Mbit/s where two streams' read
 * 962 and 963, and the two-stream probes then varied 839-949), while a dip beyond the page's
 * ±5 % accuracy goal says the streams cannot be relied on to fill the path.
 */
export const STREAMS_DIP = 0.05;
/**
 * Each candidate is tried this many times, the candidates interleaved, and its slowest try
 * counts: a stream count that the browser cannot keep fed shows it in one try or another.
 * One browser WebSocket stream uploading at 100 Mbit/s on a path of little delay reads 4-12 %
 * low (the browser refills the kernel's small send buffer late), and two streams dip 5-15 %
 * in some probes, though either can come within 2 % of four in a single try. (The worker
 * also runs the tries as it runs the probes: beside the loaded-RTT echoes, with the page's
 * drawing and the history's writes held until the round ends.)
 */
export const PRETEST_PASSES = 2;
/** The first pretest waits for this many measurements, so the automatic size has grown. */
export const PRETEST_AFTER = 3;
/** Pretests are repeated every this many probes of the series (rounds in which it is probed:
 *  a series spaced by the budget, round.ts, counts only those), since paths change. */
export const PRETEST_EVERY = 30;
/** A pretest's bytes as a share of the probes' between two pretests: its candidates move
 *  half a probe a try ({@link pretestBytes}), {@link PRETEST_PASSES} tries each, once every
 *  {@link PRETEST_EVERY} rounds. The automatic size leaves room for it, so pretests fit in the
 *  hourly budget too. */
export const PRETEST_SHARE = (STREAM_CANDIDATES.length * PRETEST_PASSES) / 2 / PRETEST_EVERY;
/** A measurement this many forecast errors away from its forecast calls for a pretest. */
export const PRETEST_SURPRISE = 3;
/** ... but not sooner than this many rounds after the last one. */
export const PRETEST_MIN_GAP = 5;

/**
 * Bytes of each pretest transfer: half a probe, so that a pretest of three candidates tried
 * twice costs three probes, but never less than the smallest automatic probe, nor than
 * `minBytes` (what a try needs to be timed on a long path, {@link timedBytes}), nor more
 * than the probe itself.
 */
export function pretestBytes(probeBytes: number, minBytes = 0): number {
  return Math.min(probeBytes, Math.max(autoMinBytes(), minBytes, Math.floor(probeBytes / 2)));
}

/**
 * The stream count a pretest settles on. The rate more streams give for sure is the best of
 * the candidates' slowest tries ({@link PRETEST_PASSES} each); the fewest streams are kept
 * whose fastest try came within {@link STREAMS_GAIN} of it and whose slowest stayed within
 * {@link STREAMS_DIP}. More streams cost connections and server work and are kept only for
 * what they add (a path that one TCP stream cannot fill: a long RTT with small windows,
 * per-flow shaping, or a sender that cannot keep one stream fed). Tries without a rate are
 * ignored; with none, 1.
 */
export function chooseStreams(results: readonly { streams: number; mbits: number }[]): number {
  const tries = new Map<number, { slowest: number; fastest: number }>();
  for (const r of results) {
    if (!(r.mbits > 0)) continue;
    const t = tries.get(r.streams) ?? { slowest: Infinity, fastest: 0 };
    tries.set(r.streams, {
      slowest: Math.min(t.slowest, r.mbits),
      fastest: Math.max(t.fastest, r.mbits),
    });
  }
  const ok = [...tries].sort((a, b) => a[0] - b[0]);
  const sure = Math.max(0, ...ok.map(([, t]) => t.slowest));
  const enough = ([, t]: [number, { slowest: number; fastest: number }]) =>
    t.fastest >= sure * (1 - STREAMS_GAIN) && t.slowest >= sure * (1 - STREAMS_DIP);
  return ok.find(enough)?.[0] ?? 1;
}

/** Where a bandwidth series stands with its stream count. */
export interface StreamPlan {
  /** Streams its probes use now. */
  streams: number;
  /** Rounds since the last pretest; undefined before the first. */
  sincePretest: number | undefined;
  /** Measurements of the series so far. */
  measurements: number;
  /** Whether the last measurement missed its forecast ({@link surprised}). */
  surprised: boolean;
}

export function newStreamPlan(): StreamPlan {
  return { streams: 1, sincePretest: undefined, measurements: 0, surprised: false };
}

/**
 * Whether this round should run a pretest: the first once the series has
 * {@link PRETEST_AFTER} measurements, then every {@link PRETEST_EVERY} rounds, or sooner
 * (but at least {@link PRETEST_MIN_GAP} rounds after the last) when the last measurement
 * missed its forecast by more than {@link PRETEST_SURPRISE} forecast errors: the path
 * changed, and so may the streams it needs.
 */
export function pretestDue(plan: StreamPlan): boolean {
  if (plan.sincePretest === undefined) return plan.measurements >= PRETEST_AFTER;
  if (plan.sincePretest >= PRETEST_EVERY) return true;
  return plan.surprised && plan.sincePretest >= PRETEST_MIN_GAP;
}

/** Whether `value` lies more than {@link PRETEST_SURPRISE} errors from its forecast. */
export function surprised(
  value: number,
  forecast: { value: number; error: number } | undefined,
): boolean {
  if (forecast === undefined || !(forecast.error > 0)) return false;
  return Math.abs(value - forecast.value) > PRETEST_SURPRISE * forecast.error;
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

/** How long an automatically sized probe should last, ms (the core's
 *  `transfer::AUTO_TARGET_MS`): long enough that timer resolution and TCP slow start are
 *  small next to it, short enough to stay cheap. */
export const autoTargetMs = coreAutoTargetMs;
/** The smallest automatic size, bytes (the core's `transfer::AUTO_MIN_BYTES`). */
export const autoMinBytes = coreAutoMinBytes;
/** The page's own cap on an automatic size: its hourly budget's scale. */
export const AUTO_MAX_BYTES = 32 * 1024 * 1024;

/**
 * How long an automatically sized transfer should last, ms: {@link autoTargetMs}, or two
 * predicted round trips on a longer path (the core's `transfer::auto_target_ms`). A rate has
 * the predicted RTT taken off its raw time only when that leaves at least half of it, and a
 * shorter probe's rate, read over the raw time, asked for a size no longer: 100 Mbit/s read
 * 29 Mbit/s on every probe behind 200 ms, 1.7 Mbit/s behind 300 ms.
 */
export function autoTargetFor(predictedRttMs: number | undefined): number {
  return coreAutoTargetFor(predictedRttMs);
}

/**
 * The automatic probe size: the bytes the predicted rate moves in {@link autoTargetFor} (a
 * quarter second, or two predicted round trips on a longer path), rounded up to a power of
 * two (so sizes repeat and durations stay comparable), between 64 KiB and the smaller of
 * 32 MiB and the server's cap. Starts at 64 KiB with no prediction. The rule is the
 * core's (`core/src/transfer.rs`, the one `nowcast tcp --size auto` uses).
 */
export function autoSize(
  predictedMbits: number | undefined,
  capBytes: number,
  predictedRttMs?: number,
): number {
  return coreAutoSize(predictedMbits, Math.min(AUTO_MAX_BYTES, capBytes), predictedRttMs);
}

/** The share of the hourly budget one series' burst may spend before it settles with the
 *  rate it reached (the rest of the hour's budget is for the probes after it), and the most
 *  one automatic probe may take of it ({@link budgetProbeCap}). */
export const BURST_BUDGET_SHARE = 0.25;

/**
 * The largest automatic probe an hourly budget of `perHour` lets run, with `transfers`
 * transfers in a round: {@link BURST_BUDGET_SHARE} of the hour shared among them, as the
 * first-run burst is. Without it a budget smaller than the size a link asks for (1 MiB an
 * hour against 4 MiB for a quarter second at 100 Mbit/s) spaced the probes hours apart, each
 * larger than the hour could ever hold: never probed, while the page said when it would be.
 * A probe so capped lasts less than it should, and may read low; the page says why.
 */
export function budgetProbeCap(perHour: number, transfers: number): number {
  return Math.floor((perHour * BURST_BUDGET_SHARE) / Math.max(1, transfers));
}

/**
 * The bytes the predicted rate moves in two predicted round trips (a power of two, at least
 * 64 KiB, at most `capBytes`): what a transfer needs on a long path to have the
 * RTT taken off its time; 0 without a rate or an RTT. A pretest's tries are no smaller. The
 * core's `transfer::timed_bytes`.
 */
export function timedBytes(
  predictedMbits: number | undefined,
  predictedRttMs: number | undefined,
  capBytes: number,
): number {
  return coreTimedBytes(predictedMbits, predictedRttMs, Math.min(AUTO_MAX_BYTES, capBytes));
}

/**
 * The first-run burst's next size after a try of `bytes` that read `mbits` over a raw time of
 * `rawMs`, or undefined when the burst is over: the try lasted {@link autoTargetMs} (long
 * enough to be timed) and, on a long path, the predicted RTT its raw time holds plus two round
 * trips of transfer; or it was already at `capBytes` (the server's cap, or 32 MiB), or it
 * read no rate. The next size is the larger of four times this one and
 * the automatic size of the rate it read, at most 64 times this one (a short try can read a
 * shaper's burst, far above the path), never above the cap. The rule is the core's
 * (`transfer::burst_next`).
 */
export function burstNext(
  bytes: number,
  mbits: number,
  rawMs: number,
  capBytes: number,
  predictedRttMs?: number,
): number | undefined {
  return coreBurstNext(bytes, mbits, rawMs, Math.min(AUTO_MAX_BYTES, capBytes), predictedRttMs);
}

/**
 * Every how many rounds a bandwidth series is probed: `1` when a probe of the wanted size fits
 * in one round's share of the hourly budget, else ⌈wanted / share⌉, so that every probe is
 * long enough to be timed and the probes together stay within the budget (the RTT keeps the
 * page's period: it costs no budget). At 500 MiB an hour, a 2 s period and two transfers a
 * round (and room for pretests), the share is ~129 KiB: a link that wants 32 MiB probes is
 * probed every 254 rounds (8.5 minutes).
 */
export function bandwidthEvery(wantedBytes: number, shareBytes: number): number {
  if (!(wantedBytes > 0)) return 1;
  if (!(shareBytes > 0)) return Infinity;
  return Math.max(1, Math.ceil(wantedBytes / shareBytes));
}

/** Where a bandwidth series stands with the first-run burst and its spacing. */
export interface BandwidthSchedule {
  /** Whether the burst ran (this page's first probe of the series has its size). */
  ramped: boolean;
  /** Seconds of rounds since its last probe (each round counts the period it ran at);
   *  undefined before the first. */
  sinceProbeS: number | undefined;
}

export function newBandwidthSchedule(): BandwidthSchedule {
  return { ramped: false, sinceProbeS: undefined };
}

/**
 * Whether a bandwidth series spaced every `every` rounds of `periodS` seconds
 * ({@link bandwidthEvery}) is probed this round; counts the round. The first round probes at
 * once; a wait that the spacing shortened (the rate fell, or the budget grew) ends early. The
 * wait is kept in seconds, not rounds, so that a new period neither restarts nor stretches
 * it: the spacing in rounds scales with the period's inverse (its share of the budget scales
 * with the period), and 60 rounds counted at 2 s are two minutes, not an hour, once the
 * period is a minute.
 */
export function bandwidthDue(schedule: BandwidthSchedule, every: number, periodS: number): boolean {
  if (schedule.sinceProbeS === undefined) return true;
  schedule.sinceProbeS += periodS;
  // Half a period's slack: sums of fractional periods must not miss a round by a rounding.
  return schedule.sinceProbeS >= every * periodS - periodS / 2;
}

/** Median of `xs` (mean of the middle two for an even count); undefined when empty. */
export function median(xs: readonly number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * The URL of an echo-node endpoint (`api/ping`, `ws`, …) under `base`, which may carry a path:
 * a node served at https://host/nowcast answers at https://host/nowcast/api/ping.
 */
export function endpointUrl(base: string, path: string): URL {
  return new URL(path.replace(/^\//, ""), base.endsWith("/") ? base : `${base}/`);
}
