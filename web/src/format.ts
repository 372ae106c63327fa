// Readable numbers and times for the console and the graphs.

/** "12:03:04" in local time. */
export function clock(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** Three significant digits, without exponent notation for the ranges a network shows. */
export function significant(v: number): string {
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a === 0) return "0";
  // The decimals for the value as it rounds: 99.97 is "100", not "100.0" (four digits).
  if (a >= 99.95) return v.toFixed(0);
  if (a >= 9.995) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(3);
}

/** The unit a value of `magnitude` is shown in: Mbit/s as Gbit/s from 1000, a fraction (a
 *  loss rate, as records keep it) as a percentage, the rest as is; `divisor` turns the value
 *  into that unit. */
export function displayUnit(magnitude: number, unit: string): { unit: string; divisor: number } {
  if (unit === "fraction") return { unit: "%", divisor: 0.01 };
  return unit === "Mbit/s" && Math.abs(magnitude) >= 1000
    ? { unit: "Gbit/s", divisor: 1000 }
    : { unit, divisor: 1 };
}

/** " ms", or nothing for a value without a unit (a CSV column of numbers). */
const spaced = (unit: string) => (unit === "" ? "" : ` ${unit}`);

/** A value in its unit: ms, Mbit/s (as Gbit/s from 1000), or a fraction (as %); in the unit
 *  a value of `magnitude` is shown in when given (one unit for a row of figures). */
export function formatValue(v: number, unit: string, magnitude = v): string {
  const d = displayUnit(magnitude, unit);
  return `${significant(v / d.divisor)}${spaced(d.unit)}`;
}

/** The spread of a forecast from one value, which no measurement has checked yet: a "± 0"
 *  would claim a certainty nothing measured, and a bare "± ?" left people guessing why. */
export const UNKNOWN_SPREAD = "± — (needs 2 values)";
/** What {@link UNKNOWN_SPREAD} means, for a title (tooltip). */
export const UNKNOWN_SPREAD_TITLE =
  "The forecast's error is known once a second value has been measured to check it against.";

/** A value and its spread in the value's unit, both alike: "2.23 Gbit/s ± 0.150 Gbit/s",
 *  never "2.23 Gbit/s ± 150 Mbit/s". With `known` false (a forecast from one value; the
 *  engine tells which with `errorKnown`, the core's rule), "2.23 Gbit/s ± — (needs 2
 *  values)" ({@link UNKNOWN_SPREAD}). A loss rate whose spread reaches past 0 or 100 % is
 *  shown as its range within them, "19.7 % (likely 0–100 %)": "± 103 %" of a percentage
 *  read as a relative error, and no loss rate lies outside 0–100 %. */
export function formatWithError(
  v: number,
  error: number,
  unit: string,
  known = true,
  magnitude = v,
): string {
  const d = displayUnit(magnitude, unit);
  const u = spaced(d.unit);
  if (known && unit === "fraction" && (v - error < 0 || v + error > 1)) {
    const [lo, hi] = [Math.max(0, v - error), Math.min(1, v + error)];
    return `${significant(v / d.divisor)}${u} (likely ${significant(lo / d.divisor)}–${significant(hi / d.divisor)}${u})`;
  }
  const spread = known ? `± ${significant(error / d.divisor)}${u}` : UNKNOWN_SPREAD;
  return `${significant(v / d.divisor)}${u} ${spread}`;
}

/** A mean square error (of values in `unit`) in the square of the unit those values are
 *  shown in: "0.368 ms²", "12.5 %²" for a loss rate's (whose values are shown as %). */
export function formatSquared(v: number, unit: string, magnitude = 0): string {
  const d = displayUnit(magnitude, unit);
  return `${significant(v / d.divisor ** 2)}${d.unit === "" ? "" : ` ${d.unit}²`}`;
}

/**
 * The labels of an axis's ticks (`values`, in `unit`): all in the unit a value of `magnitude`
 * (the axis's largest, by default the largest tick's) is shown in, with as many decimals as
 * the ticks need and the same for each ("0.5 ms", "1.0 ms", "1.5 ms"; "1.6 Gbit/s" …
 * "2.2 Gbit/s"), so that a column of labels reads as one scale.
 */
export function tickLabels(
  values: readonly number[],
  unit: string,
  magnitude = values.reduce((m, v) => Math.max(m, Math.abs(v)), 0),
): { unit: string; labels: string[] } {
  const d = displayUnit(magnitude, unit);
  const scaled = values.map((v) => v / d.divisor);
  const exact = (places: number) =>
    scaled.every((v) => {
      const x = v * 10 ** places;
      return Math.abs(x - Math.round(x)) <= 1e-6 * Math.max(1, Math.abs(x));
    });
  let places = 0;
  while (places < 6 && !exact(places)) places++;
  // Ticks that no number of decimals writes exactly (not Chart.js's round steps) keep three
  // significant digits each.
  const fixed = exact(places);
  // Number() first: a tick a rounding error below zero reads "0.0", not "-0.0".
  const label = (v: number) => (fixed ? Number(v.toFixed(places)).toFixed(places) : significant(v));
  return { unit: d.unit, labels: scaled.map((v) => `${label(v)}${spaced(d.unit)}`) };
}

/** Bytes as KiB/MiB/GiB. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : significant(v)} ${units[i]}`;
}

/** A duration: ms below a second, s above; "unbounded" for Infinity (no upper bound). */
export function formatDuration(ms: number): string {
  if (ms === Infinity) return "unbounded";
  if (ms < 1000) return `${significant(ms)} ms`;
  // Seconds up to two minutes, then the largest unit that keeps the figure readable: a
  // 1 TB file at a slow rate read "about 19699097 s".
  const s = ms / 1000;
  if (s < 120) return `${significant(s)} s`;
  if (s < 7200) return `${significant(s / 60)} min`;
  if (s < 172_800) return `${significant(s / 3600)} h`;
  return `${significant(s / 86_400)} days`;
}

/** Spacings of time ticks, ms: round seconds, minutes, hours, then days. */
const TICK_STEPS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
]
  .map((s) => s * 1000)
  .concat([1, 2, 7, 14, 28].map((d) => d * 86_400_000));

/**
 * Times from `min` to `max` (ms since the epoch) at the smallest round spacing that gives at
 * most `most` of them, on round local clock times (12:05:00, 12:10:00, …), for a time axis
 * labelled by `clock`.
 */
export function clockTicks(min: number, max: number, most: number): number[] {
  if (!(max >= min) || most < 1) return [];
  // Round in local time: shift by the zone's offset at the start of the axis.
  const offset = -new Date(min).getTimezoneOffset() * 60_000;
  const lo = min + offset;
  const hi = max + offset;
  const fits = (s: number) => Math.floor(hi / s) - Math.ceil(lo / s) + 1 <= most;
  const day = 86_400_000;
  const step = TICK_STEPS.find(fits) ?? Math.ceil((hi - lo) / most / day + 1) * day;
  const out: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(t - offset);
  return out;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * A time axis's tick at `ms` (from `clockTicks`, `stepMs` apart): its clock time, or its
 * date ("21 Nov") when it falls on a local midnight of an axis that spans hours or days, where
 * "00:00:00" would not say which day it is.
 */
export function clockTickLabel(ms: number, stepMs: number): string {
  const d = new Date(ms);
  const midnight = d.getHours() === 0 && d.getMinutes() === 0 && d.getSeconds() === 0;
  return midnight && stepMs >= 3_600_000 ? `${d.getDate()} ${MONTHS[d.getMonth()]}` : clock(ms);
}

/** A time as a graph's summary says it: the clock time, with the date ("21 Nov 12:03:04")
 *  when the span it is part of (`otherMs`, its other end) crosses a day. */
export function clockIn(ms: number, otherMs: number): string {
  const a = new Date(ms);
  const b = new Date(otherMs);
  const sameDay =
    a.getFullYear() === b.getFullYear() &&
    a.getMonth() === b.getMonth() &&
    a.getDate() === b.getDate();
  return sameDay ? clock(ms) : `${a.getDate()} ${MONTHS[a.getMonth()]} ${clock(ms)}`;
}

/** A period as the page says it: "2 s", "1 min", "5 min", "90 s". */
export function formatPeriod(s: number): string {
  return s >= 60 && s % 60 === 0 ? `${s / 60} min` : `${s} s`;
}

/** A span of time in round words: "16 s", "4 min", "2 h 5 min". */
export function formatSpan(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
}
