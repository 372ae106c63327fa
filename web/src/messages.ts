// Messages between the page and its probe worker. Plain data (structured clone), no classes.

import type { Metric, Record, Transport } from "./record";
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

export type WorkerEvent = MeasurementEvent | StatusEvent;

export type PageCommand =
  { type: "settings"; settings: Settings } | { type: "suspend" } | { type: "resume" };
