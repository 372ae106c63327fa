// Files in and out: NDJSON measurement records, iperf3 `-J` output and CSV (`time,value`,
// optionally a third column naming the series) are read into series; measurements are written
// as NDJSON and CSV. Pure text in and out; one bad line loses nothing else (spec, "One record
// format").

import { readNdjson, toLine, type LineError, type Metric, type Record, type Unit } from "./record";

export interface ImportedPoint {
  /** ms since epoch */
  t: number;
  value: number;
}

export interface ImportedSeries {
  /** Shown in the console and on the graph, e.g. "rtt from nowcast tcp to host:9000". */
  label: string;
  metric: Metric | "value";
  unit: Unit | "";
  points: ImportedPoint[];
}

export interface ImportResult {
  format: "ndjson" | "iperf3" | "csv";
  series: ImportedSeries[];
  errors: LineError[];
}

/**
 * Reads `text` in whichever format it is: a JSON document with iperf3's keys is iperf3 output
 * (pretty-printed or not), other text starting with "{" is NDJSON, the rest CSV.
 */
export function importText(text: string, fileName: string): ImportResult {
  if (text.trimStart()[0] !== "{") return importCsv(text, fileName);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return importNdjson(text);
  }
  const iperf = typeof doc === "object" && doc !== null && ("intervals" in doc || "error" in doc);
  return iperf ? importIperf3(doc as Iperf3) : importNdjson(text);
}

/** NDJSON records, one series per metric, source and target; timeouts carry no value. */
export function importNdjson(text: string): ImportResult {
  const { records, errors } = readNdjson(text);
  const byKey = new Map<string, ImportedSeries>();
  for (const r of records) {
    if (r.status !== "ok" || r.value === null) continue;
    const label = `${r.metric} from ${r.source} to ${r.to}`;
    let s = byKey.get(label);
    if (s === undefined) {
      s = { label, metric: r.metric, unit: r.unit, points: [] };
      byKey.set(label, s);
    }
    s.points.push({ t: r.timestamp_ms, value: r.value });
  }
  return { format: "ndjson", series: [...byKey.values()], errors };
}

interface Iperf3 {
  start?: {
    timestamp?: { timesecs?: number };
    connecting_to?: { host?: string; port?: number };
    test_start?: { reverse?: number };
  };
  intervals?: { sum?: { end?: number; bits_per_second?: number; omitted?: boolean } }[];
  error?: string;
}

/**
 * iperf3 `-J`: one throughput point per interval, at the start time plus the interval's end.
 * A reverse test (`-R`) measured the download, else the upload, as seen from the client.
 */
export function importIperf3(doc: Iperf3): ImportResult {
  const fail = (message: string): ImportResult => ({
    format: "iperf3",
    series: [],
    errors: [{ line: 1, message }],
  });
  if (typeof doc.error === "string") return fail(`iperf3 reported an error: ${doc.error}`);
  const startS = doc.start?.timestamp?.timesecs;
  if (typeof startS !== "number") return fail("start.timestamp.timesecs is missing");
  if (!Array.isArray(doc.intervals)) return fail("intervals is missing");
  const points: ImportedPoint[] = [];
  const errors: LineError[] = [];
  doc.intervals.forEach((iv, i) => {
    const end = iv.sum?.end;
    const bps = iv.sum?.bits_per_second;
    if (typeof end !== "number" || typeof bps !== "number" || !Number.isFinite(bps)) {
      errors.push({
        line: 1,
        field: `intervals[${i}].sum`,
        message: "needs end and bits_per_second",
      });
    } else if (iv.sum?.omitted !== true) {
      points.push({ t: Math.round((startS + end) * 1000), value: bps / 1e6 });
    }
  });
  const to = doc.start?.connecting_to;
  const host = to?.host === undefined ? "" : ` to ${to.host}${to.port ? `:${to.port}` : ""}`;
  const metric = doc.start?.test_start?.reverse === 1 ? "bandwidth_down" : "bandwidth_up";
  return {
    format: "iperf3",
    series:
      points.length === 0
        ? []
        : [{ label: `iperf3 ${metric}${host}`, metric, unit: "Mbit/s", points }],
    errors,
  };
}

/**
 * CSV `time,value[,series]`: time in ms since the epoch or an ISO 8601 date, value a number,
 * and, as this page exports it, the series' name (else the file name). A header line is
 * allowed; lines starting with "#" are comments.
 */
export function importCsv(text: string, fileName: string): ImportResult {
  const bySeries = new Map<string, ImportedSeries>();
  const errors: LineError[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const [time = "", value = "", name = ""] = line.split(",").map((c) => c.trim());
    if (i === 0 && !/^[\d.+-]/.test(value)) return;
    const t = /^\d+(\.\d+)?$/.test(time) ? Number(time) : Date.parse(time);
    const v = Number(value);
    if (!Number.isFinite(t)) {
      errors.push({ line: i + 1, field: "time", message: `"${time}" is not a time` });
    } else if (value === "" || !Number.isFinite(v)) {
      errors.push({ line: i + 1, field: "value", message: `"${value}" is not a number` });
    } else {
      const label = name === "" ? fileName : name;
      let s = bySeries.get(label);
      if (s === undefined) {
        s = { label, metric: "value", unit: "", points: [] };
        bySeries.set(label, s);
      }
      s.points.push({ t, value: v });
    }
  });
  return { format: "csv", series: [...bySeries.values()], errors };
}

/** Records as an NDJSON file. */
export function toNdjson(records: readonly Record[]): string {
  return records.map((r) => toLine(r) + "\n").join("");
}

/**
 * Measured values as CSV `time,value,series`, which {@link importCsv} reads back into the same
 * series; timeouts have no value and are left out (NDJSON keeps them).
 */
export function toCsv(series: readonly { label: string; records: readonly Record[] }[]): string {
  const lines = ["time,value,series"];
  for (const s of series) {
    const label = s.label.replaceAll(",", ";");
    for (const r of s.records) {
      if (r.value !== null) lines.push(`${r.timestamp_ms},${r.value},${label}`);
    }
  }
  return lines.join("\n") + "\n";
}
