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
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(3);
}

/** A value in its unit: ms, Mbit/s (as Gbit/s from 1000), or a fraction. */
export function formatValue(v: number, unit: string): string {
  if (unit === "Mbit/s" && Math.abs(v) >= 1000) return `${significant(v / 1000)} Gbit/s`;
  return `${significant(v)} ${unit}`;
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
  return ms < 1000 ? `${significant(ms)} ms` : `${significant(ms / 1000)} s`;
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
