// Messages between the page and its probe worker. Plain data (structured clone), no classes.

import type { ForecasterRow, Histogram } from "./forecast";
import type { LineError, Metric, Record, Transport } from "./record";
import type { Settings } from "./settings";

/** One series: a metric measured over one transport, e.g. "rtt/websocket". */
export type SeriesKey = `${Metric}/${Transport}`;

/** The forecast of a series' next value (MSE-selected, JavaNws §2.1.2). */
export interface NextForecast {
  value: number;
  /** Root of the whole-history MSE: the band is value ± k·error. */
  error: number;
  method: string;
}

export interface MeasurementEvent {
  type: "measurement";
  key: SeriesKey;
  /** The record as exported, with the forecast made for it before it was measured. */
  record: Record;
  next: NextForecast | undefined;
  /** Cumulative mean absolute error of the forecasts made so far. */
  mae: number | undefined;
  count: number;
  timeouts: number;
}

export interface StatusEvent {
  type: "status";
  state: "starting" | "running" | "suspended" | "backing-off" | "over-budget";
  message: string;
  bytesThisHour: number;
  bytesSinceStart: number;
  budgetBytes: number;
}

/** A point of an imported series, with the forecast made after it. */
export interface ReplayedPoint {
  t: number;
  value: number;
  next: NextForecast;
}

/** An imported file: its series, already run through the bank, and the lines refused. */
export interface ImportedEvent {
  type: "imported";
  file: string;
  format: string;
  series: {
    key: string;
    label: string;
    unit: string;
    points: ReplayedPoint[];
    mae: number | undefined;
  }[];
  /** The first refused lines, and how many there were in all. */
  errors: LineError[];
  errorCount: number;
}

/** What the predictability view shows for one series (JavaNws §5). */
export interface PredictabilityEvent {
  type: "predictability";
  key: string;
  histogram: Histogram | undefined;
  cdf: { x: number; p: number }[];
  table: ForecasterRow[];
  /** The forecaster in use (MSE-selected). */
  selected: string | undefined;
}

/** The series restored from IndexedDB when the page opens, before any new measurement. */
export interface HistoryEvent {
  type: "history";
  series: (Omit<MeasurementEvent, "type" | "record"> & { records: Record[] })[];
}

/** The last measurement and next forecast of one series of a mirror. */
export interface MirrorSeries {
  /** null for a timeout. */
  last: number | null;
  next: NextForecast | undefined;
  count: number;
  timeouts: number;
}

/** A mirror's series after one of its probe rounds (it is probed only when the user opts in). */
export interface MirrorEvent {
  type: "mirror";
  url: string;
  /** WebSocket echo RTT, ms, and WebSocket download bandwidth, Mbit/s. */
  rtt: MirrorSeries | undefined;
  bandwidth: MirrorSeries | undefined;
  /** Why the last round failed, or "". */
  problem: string;
}

export type WorkerEvent =
  | MeasurementEvent
  | MirrorEvent
  | StatusEvent
  | ImportedEvent
  | PredictabilityEvent
  | HistoryEvent
  | { type: "cleared" };

export type PageCommand =
  | { type: "settings"; settings: Settings }
  | { type: "suspend" }
  | { type: "resume" }
  | { type: "import"; file: string; text: string }
  | { type: "predictability"; key: string }
  | { type: "clear" }
  /** The mirrors the user opted in to probing; all others stop. */
  | { type: "mirrors"; urls: string[] };
