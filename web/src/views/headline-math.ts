// The arithmetic of the headline (headline-view.ts) and of the predictability view's verdict,
// apart from the DOM: how steady a series is, which transport's figure to show, the likely
// range in words, the sparkline's path, and the typical forecast error.

import { formatBytes, formatSpan, formatValue, significant } from "../format";
import { BAND_K, type BandwidthSchedule, type PredictabilityEvent } from "../messages";

/** How steady a series is, from its forecast error relative to its forecast. */
export type Verdict = "learning" | "steady" | "variable" | "erratic";

/** Likely range within ±10 % of the forecast: steady. */
export const STEADY_WITHIN = 0.1;
/** Within ±50 %: variable; wider: erratic. */
export const VARIABLE_WITHIN = 0.5;
/** Forecasts a series needs made before its error says anything. */
export const LEARNING_FORECASTS = 5;

/**
 * The verdict of a spread: `halfRange` either side of `value` (the likely range's half
 * width, or the typical error) as a share of the value.
 */
export function verdictOf(halfRange: number, value: number): Exclude<Verdict, "learning"> {
  const share = Math.abs(value) > 0 ? halfRange / Math.abs(value) : Infinity;
  if (share <= STEADY_WITHIN) return "steady";
  if (share <= VARIABLE_WITHIN) return "variable";
  return "erratic";
}

/** How steady a series is by the forecast of its next value (± BAND_K errors), once
 *  `forecasts` forecasts have been checked against measurements. */
export function verdict(
  next: { value: number; error: number } | undefined,
  forecasts: number,
): Verdict {
  if (next === undefined || forecasts < LEARNING_FORECASTS) return "learning";
  return verdictOf(BAND_K * next.error, next.value);
}

/** The likely range of the next value: the forecast ± BAND_K errors, never below zero. */
export function likelyRange(next: { value: number; error: number }): [number, number] {
  return [Math.max(0, next.value - BAND_K * next.error), next.value + BAND_K * next.error];
}

/** A range in one unit, both ends alike: "88–97 Mbit/s", "1.1–1.4 Gbit/s", or "about
 *  12.0 ms" when the ends read the same. */
export function rangeText(lo: number, hi: number, unit: string): string {
  let u = unit;
  if (unit === "Mbit/s" && hi >= 1000) {
    lo /= 1000;
    hi /= 1000;
    u = "Gbit/s";
  }
  const a = significant(lo);
  const b = significant(hi);
  return a === b ? `about ${a} ${u}` : `${a}–${b} ${u}`;
}

/** The span one period covers, as the headline says it: "next 2 s", "next minute", and for
 *  a bandwidth series spaced by the budget (engine/round.ts), "next ~8 minutes". */
export function periodPhrase(periodS: number): string {
  if (periodS === 60) return "next minute";
  if (periodS > 60 && periodS % 60 === 0) return `next ${periodS / 60} minutes`;
  if (periodS >= 150) return `next ~${Math.round(periodS / 60)} minutes`;
  return `next ${Math.round(periodS * 10) / 10} s`;
}

/**
 * Seconds between a series' probes: the engine's schedule for it (`everyS`: a bandwidth
 * series spaced by the budget, engine/round.ts `size`), else the period its newest record was
 * measured at, else the page's. The status line and the cards read this one schedule, so
 * they cannot disagree (they did: "bandwidth every 35 h" above "next ~8 minutes").
 */
export function seriesPeriodS(
  everyS: number | undefined,
  recordPeriodMs: number | undefined,
  pageS: number,
): number {
  if (everyS !== undefined && everyS > 0) return everyS;
  return recordPeriodMs !== undefined && recordPeriodMs > 0 ? recordPeriodMs / 1000 : pageS;
}

/**
 * What the status line says of the bandwidth probes after "Measuring every 2 s": nothing
 * while each series is probed every period; else how often each direction is, and what
 * limits it (", bandwidth every 22 min, as often as the hourly budget (1.00 MiB) allows").
 */
export function bandwidthPhrase(
  b: BandwidthSchedule,
  periodS: number,
  budgetBytes: number,
): string {
  const spans = new Map<string, Set<string>>();
  for (const [key, everyS] of Object.entries(b.everyS)) {
    if (everyS === undefined || everyS <= periodS) continue;
    const direction = key.startsWith("bandwidth_up") ? "upload" : "download";
    if (!spans.has(direction)) spans.set(direction, new Set());
    spans.get(direction)!.add(formatSpan(everyS * 1000));
  }
  if (spans.size === 0 && !b.capped) return "";
  const each = [...spans].map(([d, s]) => [d, [...s].join(" or ")] as const);
  const alike = new Set(each.map(([, s]) => s)).size === 1;
  const when =
    each.length === 0
      ? "bandwidth every period"
      : alike
        ? `bandwidth every ${each[0]![1]}`
        : each.map(([d, s]) => `${d} every ${s}`).join(", ");
  const limit =
    b.limit === "server"
      ? "the server's allowance per minute"
      : `the hourly budget (${formatBytes(budgetBytes)})`;
  return `, ${when}, as often as ${limit} allows`;
}

/** Why a transfer too short to be timed was: the automatic size was kept small by what limits
 *  it (`b.capped`), or a chosen size too small for the link. */
export function shortAdvice(b: BandwidthSchedule | undefined): string {
  if (b?.capped !== true) return "use the automatic size or a larger one";
  return b.limit === "server"
    ? "the server's allowance per minute allows no larger one"
    : "the hourly budget allows no larger probe; raise it to time one";
}

/** The middle value of `xs`; undefined when empty. */
export function median(xs: readonly number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Probes of each transport the headline compares (the newest of them). */
export const COMPARED = 10;
/** Below this many in either, the transport with more values is shown. */
const COMPARABLE = 3;

/**
 * Which of a direction's series the headline shows, when more than one transport measures
 * it: the one whose median over its last {@link COMPARED} values is the better (`higher` for
 * a rate, `lower` for an RTT), when both have a few; else the one with more values; the first
 * on a tie. `values` are the measured values, oldest first.
 */
export function pickSeries<T extends { values: readonly number[] }>(
  candidates: readonly T[],
  better: "higher" | "lower",
): T | undefined {
  const withData = candidates.filter((c) => c.values.length > 0);
  let best: T | undefined;
  for (const c of withData) {
    if (best === undefined) {
      best = c;
      continue;
    }
    if (c.values.length >= COMPARABLE && best.values.length >= COMPARABLE) {
      const a = median(best.values.slice(-COMPARED))!;
      const b = median(c.values.slice(-COMPARED))!;
      if (better === "higher" ? b > a : b < a) best = c;
    } else if (c.values.length > best.values.length) {
      best = c;
    }
  }
  return best;
}

/** Periods of its own a series may fall behind the newest of its direction and still be
 *  compared (and never less than {@link STALE_FLOOR_MS}). */
export const STALE_PERIODS = 3;
export const STALE_FLOOR_MS = 10_000;

/**
 * The series of a direction that are still being measured: each one whose newest value
 * (`last`, ms) is at most {@link STALE_PERIODS} of its period behind the newest of them all.
 * A series the page stopped measuring (its transport switched off) drops out, so that it
 * does not stand for the direction with an old value that only compares well. All of them
 * when none has a value yet.
 */
export function measuredLately<T extends { last: number | undefined; periodMs: number }>(
  candidates: readonly T[],
): T[] {
  const lasts = candidates.flatMap((c) => (c.last === undefined ? [] : [c.last]));
  if (lasts.length === 0) return [...candidates];
  const newest = Math.max(...lasts);
  return candidates.filter(
    (c) =>
      c.last !== undefined &&
      newest - c.last <= Math.max(STALE_PERIODS * c.periodMs, STALE_FLOOR_MS),
  );
}

/**
 * The sparkline of `values` (null: no value, the line breaks there) on a box `width` ×
 * `height`, its y axis from `lo` (bottom) to `hi` (top): an SVG path, "" without a point.
 */
export function sparkPath(
  values: readonly (number | null)[],
  width: number,
  height: number,
  lo: number,
  hi: number,
): string {
  const n = values.length;
  const span = hi - lo || 1;
  const dx = n > 1 ? width / (n - 1) : 0;
  let d = "";
  let pen = false;
  values.forEach((v, i) => {
    if (v === null) {
      pen = false;
      return;
    }
    const x = n > 1 ? i * dx : width;
    const y = height - ((v - lo) / span) * height;
    d += `${pen ? "L" : "M"}${round(x)} ${round(y)}`;
    pen = true;
  });
  return d;
}

const round = (v: number) => Math.round(v * 100) / 100;

/**
 * The y range a small plot of `values` needs, with a margin of a tenth of it each way (or of
 * the value, when they are all one), not below zero for values that are not.
 */
export function yRange(values: readonly number[]): [number, number] | undefined {
  if (values.length === 0) return undefined;
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.1 || 1;
  const floor = lo >= 0 ? 0 : -Infinity;
  lo = Math.max(floor, lo - pad);
  hi += pad;
  return [lo, hi];
}

/**
 * The error a forecast is usually within: the smallest `a` with at least `share` of the
 * errors in [−a, a], from their empirical CDF (distinct values ascending, each with the
 * fraction of errors at or below it). Undefined without errors.
 */
export function typicalError(
  cdf: readonly { x: number; p: number }[],
  share = 0.9,
): number | undefined {
  const mass = cdf.map((c, i) => ({ a: Math.abs(c.x), m: c.p - (i > 0 ? cdf[i - 1]!.p : 0) }));
  mass.sort((u, v) => u.a - v.a);
  let sum = 0;
  for (const { a, m } of mass) {
    sum += m;
    if (sum >= share - 1e-12) return a;
  }
  return mass.at(-1)?.a;
}

/**
 * A transfer shorter than this (its raw time, ms) is too short to be timed: the round trip
 * of its request, TCP's slow start and the timer's resolution are a large part of it, so it
 * reads low. A fifth of the automatic size's target (engine/probe-math.ts AUTO_TARGET_MS,
 * 250 ms): on loopback a 64 KB probe takes a fraction of a millisecond and read 82-265 Mbit/s
 * where iperf3 read 16-18 Gbit/s.
 */
export const SHORT_PROBE_MS = 50;

/**
 * A transfer that lasts this many of its path's round trips is timed well even when shorter
 * than {@link SHORT_PROBE_MS}: its rate is worked out after the predicted RTT is subtracted
 * (`rtt_subtracted_ms`), so what is left to read low is TCP's ramp, a round trip or two on a
 * path whose window fills fast, which is at most ~5 % of 40 round trips. On loopback (RTT well
 * under a millisecond) the largest probe the server allows can end in under 50 ms at several
 * Gbit/s and is still timed truly; on a path of 2 ms or more the 50 ms floor decides.
 */
export const SHORT_PROBE_RTTS = 40;

/**
 * A transfer shorter than this (raw time, ms) is too short to be timed however short its
 * path: a browser's own work on a request and its response (some tenths of a millisecond to a
 * millisecond, beside the path's round trips) is then a large part of it. On loopback, with a
 * 0.014 ms RTT, a 64 KiB download took 1.85 ms and read 285 Mbit/s where the link moved
 * several Gbit/s, and 40 round trips (0.56 ms) held it timed.
 */
export const SHORT_PROBE_FLOOR_MS = 10;

/**
 * Whether a record's probe was a transfer too short to be timed: under
 * {@link SHORT_PROBE_MS} and, where the record says which RTT was subtracted, under
 * {@link SHORT_PROBE_RTTS} of it, but always under {@link SHORT_PROBE_FLOOR_MS}.
 */
export function shortProbe(
  metric: string,
  probe: { payload_bytes?: number; raw_ms?: number; rtt_subtracted_ms?: number } | undefined,
): boolean {
  // Only a transfer's rate reads low when it is short: an echo is short by nature (its
  // payload is 2 bytes, its raw time the RTT itself).
  if (
    !metric.startsWith("bandwidth") ||
    probe?.payload_bytes === undefined ||
    probe.payload_bytes <= 0 ||
    probe.raw_ms === undefined
  ) {
    return false;
  }
  const rtt = probe.rtt_subtracted_ms;
  const enough =
    rtt !== undefined && rtt > 0
      ? Math.max(SHORT_PROBE_FLOOR_MS, Math.min(SHORT_PROBE_MS, SHORT_PROBE_RTTS * rtt))
      : SHORT_PROBE_MS;
  return probe.raw_ms < enough;
}

/**
 * Why the headline shows the figure of `key` (`metric/transport` series keys): transfers go
 * over fetch because a browser's WebSocket cannot keep up with a fast link (engine/plan.ts
 * UPLOAD_KEY); with two transports measuring a direction, the better recent median wins
 * ({@link pickSeries}). Empty when there is nothing to explain (one transport, as planned).
 */
export function transportReason(
  key: string,
  otherKey: string | undefined,
  better: "higher" | "lower",
): string {
  // The WebSocket RTT is timed by echo-node from pings the browser answers itself
  // (engine/measure/echo.ts), which is why it reads lower than a fetch timed on the page.
  const how = key === "rtt/websocket" ? "pings timed by the server; " : "";
  if (otherKey !== undefined) {
    return (
      how + (better === "higher" ? "the faster of the two lately" : "the shorter of the two lately")
    );
  }
  if (key.startsWith("bandwidth_") && key.endsWith("/http")) {
    return "a browser's WebSocket falls behind on fast links";
  }
  return "";
}

/** A forecaster's share of a combined forecast as the page says it ("38 %", "<1 %"). */
export function sharePercent(share: number): string {
  const pct = Math.round(share * 100);
  return pct < 1 ? "<1 %" : `${pct} %`;
}

/**
 * The predictability view's sentence on the forecaster in use: which one, how far off the
 * forecasts are on average, and against simply repeating the last value (better, as good, or
 * worse: the selection weighs recent errors too, and may use one that has done worse so far).
 * In improved mode (`share` known) the forecast is a weighted combination of every forecaster,
 * not one of them: the sentence says so and names the one with the largest weight and its
 * share, and the error is the combination's own (`mae`). Named as if it were the forecast, the
 * largest weight early in a series read "In use: Exp Smooth 1%", the forecaster of the largest
 * error in the table, beside a forecast that was not its own.
 */
export function forecasterVerdict(
  p: Pick<PredictabilityEvent, "table" | "selected" | "share" | "mae">,
  unit: string,
  names: ReadonlyMap<string, string>,
): string {
  const used = p.table.find((r) => r.id === p.selected);
  if (used === undefined || used.n === 0) return "";
  const name = names.get(used.id) ?? used.name;
  const combined = p.share !== undefined && p.mae !== undefined;
  const mae = combined ? p.mae! : used.mae;
  // The bank's selection (NWS's) weighs each forecaster's errors over the whole series and
  // over recent windows: the one it uses is not always the one with the lowest total in the
  // table, so the sentence does not claim it is.
  // The weights follow recent errors (and the selection's weight counts for the one it
  // picks): the largest may sit on a forecaster whose error over the whole series, in the
  // table below, is not the least, which read as a contradiction where it was not said.
  const least = Math.min(...p.table.filter((r) => r.n > 0).map((r) => r.mse));
  const recent = combined && used.mse > least ? ", for its recent forecasts" : "";
  const base = combined
    ? `In use: a combination of the forecasters below, weighted by how well each has ` +
      `forecast this series lately; the largest weight (${sharePercent(p.share!)}) is ` +
      `${name}'s${recent}. The forecasts are off by ${formatValue(mae, unit)} on average.`
    : `In use: ${name}, chosen from the forecasters' errors on this series, over all of it ` +
      `and recently; its forecasts are off by ${formatValue(mae, unit)} on average.`;
  const last = p.table.find((r) => r.id === "last_value");
  if (last === undefined || last.n === 0) return base;
  if (!combined && used.id === last.id) {
    return `${base} It forecasts that the next value repeats the last.`;
  }
  const lastMae = formatValue(last.mae, unit);
  const gain = last.mae > 0 ? 1 - mae / last.mae : 0;
  if (gain > 0.005) {
    return `${base} Repeating the last value would be off by ${lastMae}: the forecasts are ${Math.round(gain * 100)} % closer.`;
  }
  if (mae > last.mae * 1.005) {
    return `${base} Repeating the last value has done better so far (off by ${lastMae}).`;
  }
  return `${base} Repeating the last value would do about as well (${lastMae}).`;
}
