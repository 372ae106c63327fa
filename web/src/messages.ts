// Messages between the page and its probe worker. Plain data (structured clone), no classes.

import type {
  Estimate,
  ForecasterRow,
  Histogram,
  NextForecast,
  RankedSite as Ranked,
} from "./forecast";
import type { LineError, Metric, Record, Transport } from "./record";
import type { Settings } from "./settings";

export type { NextForecast } from "./forecast";

/** One series: a metric measured over one transport, e.g. "rtt/websocket". */
export type SeriesKey = `${Metric}/${Transport}`;

/**
 * What "±" means wherever the page shows it (graphs, console, ranking): this many forecast
 * errors (√MSE) either side of a forecast; ±2 covers most of a normal error.
 */
export const BAND_K = 2;

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

/** How often the target's automatically sized bandwidth series are probed, and why not more. */
export interface BandwidthSchedule {
  /** Seconds between each series' probes (the period times the rounds it is spaced by),
   *  as the last round sized it; a series missing is probed as its records say. */
  everyS: Partial<globalThis.Record<SeriesKey, number>>;
  /** What spaces them beyond the period: the page's hourly budget or the server's own
   *  allowance per minute; undefined when each is probed every round. */
  limit: "budget" | "server" | undefined;
  /** Whether that limit also keeps a probe shorter than the time it should last
   *  (probe-math.ts `budgetProbeCap`): it may read low. */
  capped: boolean;
}

/** Since when (wall-clock ms) no probe has reached a site, and why the first failed;
 *  `notEchoNode` when its host answered over HTTP, but not as an echo-node (engine/diagnose.ts). */
export interface Outage {
  since: number;
  reason: string;
  notEchoNode?: boolean;
}

export interface StatusEvent {
  type: "status";
  state: "starting" | "running" | "suspended" | "backing-off" | "over-budget";
  message: string;
  bytesThisHour: number;
  bytesSinceStart: number;
  budgetBytes: number;
  /** The period in force, s. */
  periodS: number;
  /** The schedule of the target's automatically sized bandwidth series (engine/round.ts
   *  `size`), the one source of what the status line and the headline's cards say of it. */
  bandwidth: BandwidthSchedule;
  /** Bytes the last round spent: the pace at which the budget goes. */
  roundBytes: number;
  /** When the hour's budget has room again for the bandwidth probe it held back (wall-clock
   *  ms; Infinity: never, the probe is larger than the budget); undefined when none is held. */
  budgetResumesAt: number | undefined;
  /** Since when (wall-clock ms) no probe has reached the target, and why the first failed. */
  outage: Outage | undefined;
  /** When the wait the target's server asked for ends (wall-clock ms), while it lasts. */
  waitUntil: number | undefined;
}

/** The forecasters' ids and display names (the core's), sent once when the worker starts. */
export interface MethodsEvent {
  type: "methods";
  names: [id: string, name: string][];
}

/** What the byte budget spent in the last hour (`[wall-clock ms, bytes]`), after every round:
 *  the page keeps it so that a reload does not start the hour afresh. */
export interface BudgetEvent {
  type: "budget";
  spends: [number, number][];
}

/** A point of an imported series, with the forecast made after it (none after a value the
 *  bank refused before it had any). */
export interface ReplayedPoint {
  t: number;
  value: number;
  next: NextForecast | undefined;
}

/**
 * An imported file: its series, already run through the bank, and the lines refused; or, with
 * `restored`, series imported before the page was reloaded (no report to show again).
 */
export interface ImportedEvent {
  type: "imported";
  file: string;
  format: string;
  series: {
    /** "import/…": stable across reloads, the handle to remove the series by. */
    key: string;
    label: string;
    unit: string;
    points: ReplayedPoint[];
    mae: number | undefined;
  }[];
  /** The first refused lines, and how many there were in all. */
  errors: LineError[];
  errorCount: number;
  /** What was trimmed or left out to keep within the import limits, said plainly. */
  notes: string[];
  restored: boolean;
}

/** An imported series is gone (the user removed it). */
export interface ImportRemovedEvent {
  type: "import-removed";
  key: string;
}

/** What the predictability view shows for one series (JavaNws §5). */
export interface PredictabilityEvent {
  type: "predictability";
  key: string;
  histogram: Histogram | undefined;
  cdf: { x: number; p: number }[];
  table: ForecasterRow[];
  /** The forecaster in use (MSE-selected), or in improved mode the one with the largest
   *  weight in the combination that forecasts. */
  selected: string | undefined;
  /** In improved mode, that forecaster's share of the forecast, in (0, 1]; undefined where
   *  it is the whole forecast. */
  share: number | undefined;
  /** Mean absolute error of the forecasts made so far (what the page shows). */
  mae: number | undefined;
}

/**
 * The target's series restored from IndexedDB, before any new measurement of it: sent when the
 * page opens and whenever the target changes. They replace the series shown (series are per
 * target; a switch starts the new target's own, empty or saved).
 */
export interface HistoryEvent {
  type: "history";
  /** The target's name, as records' `to` (settings.ts `endpointName`). */
  to: string;
  series: (Omit<MeasurementEvent, "type" | "record"> & { records: Record[] })[];
}

/** The last measurement of one series of a mirror, and how many probes it has had. */
export interface MirrorSeries {
  /** null for a timeout. */
  last: number | null;
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
  /** This round's measurements, each with the forecast made before it and the next one. */
  measurements: MeasurementEvent[];
  /** Its series as rebuilt from the history, when it is opted in again (after a reload). */
  history?: HistoryEvent["series"];
  /** Why the last round's probes failed, or "". */
  problem: string;
  /** Since when (wall-clock ms) no probe has reached it, while none does. */
  unreachableSince: number | undefined;
  /** It answers over HTTP but not as an echo-node (diagnose.ts): `problem` says what to do. */
  notEchoNode?: boolean;
}

/** The key of a mirror's series in the page's views and in predictability requests. */
export function mirrorKey(url: string, key: SeriesKey): string {
  return `mirror/${key}@${url}`;
}

/** The mirror and series a {@link mirrorKey} names; undefined for any other key. */
export function parseMirrorKey(key: string): { url: string; key: SeriesKey } | undefined {
  const m = /^mirror\/([^@]+)@(.+)$/.exec(key);
  return m === null ? undefined : { key: m[1] as SeriesKey, url: m[2]! };
}

/** A site of the ranking (its time, range and standing), with the forecasts it was ranked by. */
export interface RankedSite extends Ranked {
  /** Forecast RTT (ms) and download bandwidth (Mbit/s), when it has them. */
  rtt: Estimate | undefined;
  bandwidth: Estimate | undefined;
}

/**
 * The sites the page lists (its last {@link PageCommand} "rank"), fastest first by the
 * predicted time to download the file: sent when asked, and again whenever a round or a
 * restore changed the forecasts.
 */
export interface RankingEvent {
  type: "ranking";
  sites: RankedSite[];
}

/** The records of the series the page shows, as a file to download. */
export interface ExportEvent {
  type: "export";
  format: "ndjson" | "csv";
  text: string;
}

export type WorkerEvent =
  | MeasurementEvent
  | MirrorEvent
  | StatusEvent
  | ImportedEvent
  | PredictabilityEvent
  | HistoryEvent
  | ImportRemovedEvent
  | ExportEvent
  | RankingEvent
  | MethodsEvent
  | BudgetEvent
  | { type: "cleared" };

export type PageCommand =
  | { type: "settings"; settings: Settings }
  /** What the budget had spent before a reload ({@link BudgetEvent}), sent before the
   *  settings. */
  | { type: "budget"; spends: [number, number][] }
  | { type: "suspend" }
  | { type: "resume" }
  | { type: "import"; file: string; text: string }
  | { type: "predictability"; key: string }
  | { type: "clear" }
  | { type: "remove-import"; key: string }
  /** The mirrors the user opted in to probing; all others stop. */
  | { type: "mirrors"; urls: string[] }
  /** Ranks these sites (base URLs) by the time to download a file of `fileBytes`. */
  | { type: "rank"; fileBytes: number; sites: string[] }
  /** The records of the series shown under these keys (each with its title, for CSV). */
  | { type: "export"; format: ExportEvent["format"]; series: { key: string; label: string }[] };
