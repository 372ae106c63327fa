// Files in and out, as plain data: what the core's reader (core/src/import, the one reader of
// measurement files, shared with `nowcast forecast` through WebAssembly: `importText` and
// `exportCsv` of forecast.ts) makes of a file. The readers and writers themselves are not here
// (`toLine`, `toNdjson` are forecast.ts's, through the core): the page keeps no TypeScript twin.

import type { LineError, Metric, Transport, Unit } from "./record";

export interface ImportedPoint {
  /** ms since epoch (see {@link ImportedSeries.clock}) */
  t: number;
  value: number;
}

/** The formats the core reads (core/src/import `Format::name`). */
export type ImportFormat =
  "ndjson" | "csv" | "tsv" | "plain" | "iperf3" | "ping" | "mtr" | "irtt" | "sockperf";

/**
 * Where a series' times come from: ms since 1970; ms from an origin the file does not give
 * (sockperf's clock); or none (the n-th value placed at n seconds).
 */
export type Clock = "epoch" | "relative" | "count";

/** A series found in a file, as the core names it. */
export interface ImportedSeries {
  /**
   * e.g. "rtt/websocket to example.org:443", "iperf3 bandwidth_down to 10.0.0.2:5201", or a
   * CSV column's header ("column N" without one).
   */
  name: string;
  /** What it measures, when the file says (not for a CSV column of numbers). */
  metric: Metric | undefined;
  unit: Unit | undefined;
  /** The target measured, when the file names it. */
  to: string | undefined;
  transport: Transport | undefined;
  /** The CSV column read: its header, or "N" (from 0) without a header. */
  column: string | undefined;
  clock: Clock;
  /** In file order. */
  points: ImportedPoint[];
}

/** What the core's reader made of a file. */
export interface ImportResult {
  /** Undefined when no line decided it (an empty or unsupported file). */
  format: ImportFormat | undefined;
  /** Series with at least one value, in the order they were found. */
  series: ImportedSeries[];
  /** The first 100 refused lines. */
  errors: LineError[];
  /** How many lines were refused in all. */
  errorCount: number;
  /** The one message of a file in no supported format, naming those that are. */
  unsupported: string | undefined;
  /** What the reader says beyond errors: columns left out, times missing, … */
  notes: string[];
}
