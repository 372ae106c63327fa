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
