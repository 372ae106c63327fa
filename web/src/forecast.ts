// Typed wrapper around the shared Rust core (crate nowcast-core) compiled to WebAssembly: the
// forecaster bank, the probed series every probe keeps, and the ranking of sites. The page, its
// worker and the tests import this module, never the generated glue.

import init, {
  Forecaster as RawForecaster,
  ProbedSeries as RawProbedSeries,
  ecdf as rawEcdf,
  histogramJson,
  methodsJson,
  rankJson,
  transferRate as rawTransferRate,
  autoMinBytes as rawAutoMinBytes,
  autoSize as rawAutoSize,
  autoTargetMs as rawAutoTargetMs,
  autoTargetFor as rawAutoTargetFor,
  timedBytes as rawTimedBytes,
  burstNext as rawBurstNext,
  errorKnown as rawErrorKnown,
  jitter,
  type InitInput,
} from "../../core/pkg/nowcast_core.js";
import type { ImportResult, ImportedSeries } from "./files";
import {
  RecordError,
  type LineError,
  type Metric,
  type Probe,
  type Record,
  type RecordForecast,
  type Transport,
} from "./record";

/** The forecast of a series' next value (MSE-selected, JavaNws §2.1.2). */
export interface NextForecast {
  value: number;
  /** Root of the whole-history MSE: the band is value ± BAND_K·error (messages.ts). */
  error: number;
  /** Whether `error` says anything: not after one value, whose forecast nothing has checked
   *  (its error is 0 then, and "± 0" would claim a certainty nothing measured; shown "± ?").
   *  The core's rule ({@link coreErrorKnown}), as `nowcast`'s summaries apply it. */
  errorKnown: boolean;
  /** The forecaster whose forecast it is; in improved mode, where the forecast combines
   *  every forecaster, the one with the largest weight, and `share` its weight. */
  method: string;
  share?: number;
}

/** "improved" is the default; "faithful" reproduces the original NWS library, quirks included. */
export type Mode = "improved" | "faithful";

/** Timeout rules, by the ids the Rust library gives them. */
export type TimeoutRule = "nws" | "allen_k1" | "allen_k2" | "rfc6298" | "windowed_k2_w20";

/** One reported forecast: its value, the primary that made it and its whole-history error. */
export interface Selected {
  value: number;
  /** Index of the primary forecaster (0–17 are the NWS primaries). */
  method: number;
  /** Id of that forecaster, e.g. "median_31". */
  methodId: string;
  /** MSE for the MSE-selected forecast, MAE for the MAE-selected one. */
  error: number;
}

export interface Prediction {
  mse: Selected;
  mae: Selected;
}

export interface ForecasterRow {
  index: number;
  id: string;
  name: string;
  forecast: number | null;
  n: number;
  mse: number;
  mae: number;
}

export interface ErrorSummary {
  n: number;
  mae: number;
  mse: number;
  rmse: number;
}

export interface Summary {
  mse_selected: ErrorSummary;
  mae_selected: ErrorSummary;
  oracle: ErrorSummary;
  timeouts: number;
}

export interface TimeoutOutcome {
  rule: TimeoutRule;
  judged: number;
  miss_rate: number;
  mean_timeout: number;
}

export interface Histogram {
  min: number;
  max: number;
  counts: number[];
}

let loading: Promise<unknown> | undefined;
const methodIds = new Map<Mode, string[]>();

/**
 * Loads the WebAssembly module once. In the browser the default fetches it next to the glue
 * code; Node passes the bytes.
 */
export async function loadForecasting(input?: InitInput): Promise<void> {
  loading ??= input === undefined ? init() : init({ module_or_path: input });
  await loading;
}

function ids(mode: Mode): string[] {
  let list = methodIds.get(mode);
  if (list === undefined) {
    list = (JSON.parse(methodsJson(mode)) as [string, string][]).map(([id]) => id);
    methodIds.set(mode, list);
  }
  return list;
}

/** A measured series: the NWS forecaster bank plus adaptive timeouts, running in WASM. */
export class Series {
  private constructor(
    private raw: RawForecaster,
    readonly mode: Mode,
  ) {}

  /** A new, empty series. Call {@link loadForecasting} first. */
  static create(mode: Mode = "improved"): Series {
    return new Series(new RawForecaster(mode), mode);
  }

  /**
   * A series without timeout rules ({@link Series.timeout} answers undefined), for values that
   * are not probe results, such as an imported file.
   */
  static withoutTimeouts(mode: Mode = "improved"): Series {
    return new Series(RawForecaster.withoutTimeouts(mode), mode);
  }

  /** Feeds one measurement; throws on NaN, ±Infinity or magnitudes above 1e100. */
  update(x: number): void {
    this.raw.update(x);
  }

  /** Feeds a batch; throws at the first bad value, naming its index (earlier values stay). */
  updateBatch(xs: Float64Array | number[]): void {
    this.raw.updateBatch(xs);
  }

  /** Records a probe that timed out after `elapsed`; returns the value fed back. */
  timedOut(elapsed: number): number {
    return this.raw.timedOut(elapsed);
  }

  get count(): number {
    return this.raw.count();
  }

  /** Forecasts of the next value, or undefined before the first value. */
  forecast(): Prediction | undefined {
    const p = this.raw.forecast();
    if (p === undefined) return undefined;
    const names = ids(this.mode);
    const out: Prediction = {
      mse: {
        value: p.mse_value,
        method: p.mse_method,
        methodId: names[p.mse_method] ?? "unknown",
        error: p.mse_error,
      },
      mae: {
        value: p.mae_value,
        method: p.mae_method,
        methodId: names[p.mae_method] ?? "unknown",
        error: p.mae_error,
      },
    };
    p.free();
    return out;
  }

  table(): ForecasterRow[] {
    return JSON.parse(this.raw.tableJson()) as ForecasterRow[];
  }

  summary(): Summary {
    return JSON.parse(this.raw.summaryJson()) as Summary;
  }

  /** Floor, ceiling and timed-out penalty of the timeouts, in the series' unit. */
  setTimeoutBounds(floor: number, ceiling: number, penalty: number): void {
    this.raw.setTimeoutBounds(floor, ceiling, penalty);
  }

  /** The timeout a rule sets for the next probe, or undefined until it has data. */
  timeout(rule: TimeoutRule): number | undefined {
    return this.raw.timeout(rule);
  }

  timeoutOutcomes(): TimeoutOutcome[] {
    return JSON.parse(this.raw.timeoutsJson()) as TimeoutOutcome[];
  }

  /** Frees the WASM memory; the series cannot be used afterwards. */
  dispose(): void {
    this.raw.free();
  }
}

/** Histogram with `bins` bins between min and max of the finite values (JavaNws: 100). */
export function histogram(values: Float64Array | number[], bins = 100): Histogram | undefined {
  const json = histogramJson(values, bins);
  return json === undefined ? undefined : (JSON.parse(json) as Histogram);
}

/** Empirical CDF: distinct values ascending, each with the fraction of values ≤ it. */
export function ecdf(values: Float64Array | number[]): { x: number; p: number }[] {
  const flat = rawEcdf(values);
  const out: { x: number; p: number }[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push({ x: flat[i]!, p: flat[i + 1]! });
  return out;
}

/** Ids and display names of every forecaster of a bank in `mode`. */
export function methods(mode: Mode = "improved"): { id: string; name: string }[] {
  return (JSON.parse(methodsJson(mode)) as [string, string][]).map(([id, name]) => ({ id, name }));
}

/** Where a probed series' timeout comes from (core/src/probed.rs). */
export type ProbeKind =
  /** The value is the probe's duration (an RTT): one series serves both. */
  | "duration"
  /** The value is payload over time (Mbit/s): the durations get their own series. */
  | "rate"
  /** A figure summarising probes another series times (jitter, loss): no timeout of its own. */
  | "statistic";

/** A probed series' settings; what is left out comes from the core's table for the metric. */
export interface ProbedSeriesOptions {
  metric: Metric;
  /** The records' `source`, e.g. "browser". */
  source: string;
  /** The records' `to`: whose series this is. */
  to: string;
  from?: string;
  /** Picks the defaults row (an RTT over UDP is a burst's wait). */
  transport?: Transport;
  /** The configured period, written to every record as `period_ms`. */
  periodMs?: number;
  mode?: Mode;
  /** Keep every forecast error for the predictability view (default true). */
  keepErrors?: boolean;
  kind?: ProbeKind;
  floorMs?: number;
  ceilingMs?: number;
  /** Added to a timed-out probe's elapsed time when it is fed back (NWS). */
  penaltyMs?: number;
  /** The timeout until the durations' spread is known (the cold start). */
  initialMs?: number;
}

/** One probe as it ended. */
export interface ProbeObservation {
  /** Wall-clock time of the probe (ms since epoch); recorded as given. */
  timestampMs: number;
  status: "ok" | "timeout" | "error";
  /** The measured value, when `status` is "ok". */
  value?: number;
  /** "ok": the probe's duration (ms) as its timeout saw it; "timeout": the time it ran. */
  durationMs?: number;
  /** What went wrong, when `status` is "error". */
  error?: string;
  /** The timeout the probe ran under, ms (recorded as given). */
  timeoutMs?: number;
  /** Probe parameters; a rate's `payload_bytes` is what a timeout feeds back. */
  probe?: Probe;
  /** The record's `from`, when it differs from the series'. */
  from?: string;
}

/** What the console shows of a probed series. */
export interface ProbedState {
  /** The forecast of the next value: MSE-selected, `error` the root of its MSE. */
  next: RecordForecast | undefined;
  /** Mean absolute error of the forecasts so far. */
  mae: number | undefined;
  /** In improved mode, the share of `next` that its method (the forecaster with the largest
   *  weight) has, in (0, 1]; undefined where that method is the whole forecast. */
  share: number | undefined;
  count: number;
  timeouts: number;
  /** The sequence number of the next probe. */
  seq: number;
}

interface RawState {
  next: RecordForecast | null;
  mae: number | null;
  share?: number;
  count: number;
  timeouts: number;
  seq: number;
}

function state(raw: RawState): ProbedState {
  return {
    next: raw.next ?? undefined,
    mae: raw.mae ?? undefined,
    share: raw.share,
    count: raw.count,
    timeouts: raw.timeouts,
    seq: raw.seq,
  };
}

/**
 * One metric measured by repeated probes, in the shared Rust core: the adaptive timeout (its
 * rule, cold start and bounds), the forecast made before each value, what a timed-out probe
 * feeds back, sequence numbers, and the record of every probe. The CLI keeps its series with
 * the same code; {@link ProbedSeries.replay} rebuilds one from its records exactly.
 */
export class ProbedSeries {
  private constructor(
    private raw: RawProbedSeries,
    readonly mode: Mode,
  ) {}

  /** A new series. Call {@link loadForecasting} first. */
  static create(o: ProbedSeriesOptions): ProbedSeries {
    return new ProbedSeries(new RawProbedSeries(o), o.mode ?? "improved");
  }

  /** The timeout of the next probe (ms); undefined for a statistic. */
  timeoutMs(): number | undefined {
    return this.raw.timeoutMs();
  }

  /** Feeds one probe; its record (with the forecast made before it) and the state after. */
  observe(o: ProbeObservation): { record: Record; state: ProbedState } {
    const out = JSON.parse(this.raw.observe(o)) as { record: Record; state: RawState };
    return { record: out.record, state: state(out.state) };
  }

  /**
   * Feeds values that were not probes (an imported series: make it with `kind: "statistic"`,
   * so that it has no timeout), oldest first, through the same code as probes' values; returns
   * the forecast after each (MSE-selected, `error` the root of its MSE), undefined before
   * there is one.
   */
  observeValues(points: readonly { t: number; value: number }[]): (NextForecast | undefined)[] {
    const flat = this.raw.observeValues(
      Float64Array.from(points, (p) => p.t),
      Float64Array.from(points, (p) => p.value),
    );
    const names = ids(this.mode);
    return points.map((_, i) =>
      Number.isNaN(flat[3 * i]!)
        ? undefined
        : {
            value: flat[3 * i]!,
            error: flat[3 * i + 1]!,
            errorKnown: coreErrorKnown(i + 1, flat[3 * i + 1]!),
            method: names[flat[3 * i + 2]!] ?? "unknown",
          },
    );
  }

  /**
   * Rebuilds the series from its saved records, oldest first, through the same code as live
   * probes (so its forecasts and timeouts come back bit for bit); returns how many were fed.
   */
  replay(records: readonly Record[]): number {
    return this.raw.replay([...records]);
  }

  state(): ProbedState {
    return state(JSON.parse(this.raw.stateJson()) as RawState);
  }

  /** Each measured value minus the forecast made before it, oldest first. */
  errors(): Float64Array {
    return this.raw.errors();
  }

  /** Every forecaster of the values' bank, for the predictability view. */
  table(): ForecasterRow[] {
    return JSON.parse(this.raw.tableJson()) as ForecasterRow[];
  }

  /** Sets the period written to the next records (ms; undefined: none). */
  setPeriodMs(periodMs: number | undefined): void {
    this.raw.setPeriodMs(periodMs);
  }

  /** Frees the WASM memory; the series cannot be used afterwards. */
  dispose(): void {
    this.raw.free();
  }
}

/** A forecast and its error (root MSE), in the series' unit. */
export interface Estimate {
  value: number;
  error: number;
}

/** A download site to rank: its forecasts, and whether the caller could reach it. */
export interface SiteForecast {
  /** The site's base URL, which also identifies it in the result. */
  url: string;
  /** Forecast RTT, ms; undefined before the first measurement. */
  rtt: Estimate | undefined;
  /** Forecast download bandwidth, Mbit/s; undefined before the first measurement. */
  bandwidth: Estimate | undefined;
  /** Its last probes failed: it ranks last and says so. */
  unreachable?: boolean;
}

/** Where a site stands (core/src/rank.rs `Standing`): "about_the_same" when its predicted time
 *  lies in the best one's range, "likely_slower" when only its range overlaps that range. */
export type Standing =
  "best" | "about_the_same" | "likely_slower" | "slower" | "no_forecast" | "unreachable";

export interface RankedSite {
  url: string;
  /** Predicted time to fetch the file, ms; undefined without a usable forecast. */
  timeMs: number | undefined;
  /** Best case: RTT − k·error and bandwidth + k·error. */
  lowMs: number | undefined;
  /** Worst case: RTT + k·error and bandwidth − k·error; Infinity when that bandwidth is ≤ 0. */
  highMs: number | undefined;
  standing: Standing;
}

/**
 * Sites fastest first by the predicted time to fetch `bytes` (RTT + size / bandwidth, errors
 * scaled by `k`), each with its standing; those without a forecast after them and the
 * unreachable ones last, each group in the order given.
 */
export function rankSites(sites: readonly SiteForecast[], bytes: number, k: number): RankedSite[] {
  const raw = JSON.parse(rankJson([...sites], bytes, k)) as {
    url: string;
    time_ms: number | null;
    low_ms: number | null;
    high_ms: number | null;
    standing: Standing;
  }[];
  return raw.map((r) => ({
    url: r.url,
    timeMs: r.time_ms ?? undefined,
    lowMs: r.low_ms ?? undefined,
    // JSON has no infinity: a known range with no upper bound comes as a null high; a time
    // whose errors are unknown (one value) has no range at all (low and high null).
    highMs: r.time_ms === null || r.low_ms === null ? undefined : (r.high_ms ?? Infinity),
    standing: r.standing,
  }));
}

/**
 * The rate of `bytes` moved in `rawMs` less the predicted RTT, by the core's one rule (shared
 * with `nowcast tcp`): the prediction is subtracted only when it leaves at least half of the
 * raw time. Undefined when `rawMs` is not a positive time.
 */
export function transferRate(
  bytes: number,
  rawMs: number,
  predictedRttMs: number | undefined,
): { mbits: number; subtractedMs: number } | undefined {
  const r = rawTransferRate(bytes, rawMs, predictedRttMs);
  return r.length === 2 ? { mbits: r[0]!, subtractedMs: r[1]! } : undefined;
}

/**
 * The automatic size of a bandwidth probe, bytes: a quarter second of the predicted rate, or
 * two predicted round trips of it on a longer path, as a power of two within 64 KiB and
 * `maxBytes` (the core's `transfer::auto_size`, the rule of `nowcast tcp --size auto`).
 */
export function coreAutoSize(
  predictedMbits: number | undefined,
  maxBytes: number,
  predictedRttMs?: number,
): number {
  return rawAutoSize(predictedMbits, maxBytes, predictedRttMs);
}

/** How long an automatically sized transfer should last on a path of `predictedRttMs`, ms
 *  (the core's `transfer::auto_target_ms`). */
export function coreAutoTargetFor(predictedRttMs: number | undefined): number {
  return rawAutoTargetFor(predictedRttMs);
}

/** The bytes a transfer needs to be timed on a long path: two predicted round trips of the
 *  predicted rate, as a power of two within 64 KiB and `maxBytes`; 0 without a rate or an RTT
 *  (the core's `transfer::timed_bytes`). */
export function coreTimedBytes(
  predictedMbits: number | undefined,
  predictedRttMs: number | undefined,
  maxBytes: number,
): number {
  return rawTimedBytes(predictedMbits, predictedRttMs, maxBytes);
}

/** How long an automatically sized probe should last, ms (the core's
 *  `transfer::AUTO_TARGET_MS`). */
export function coreAutoTargetMs(): number {
  return rawAutoTargetMs();
}

/** The smallest automatic size, bytes, and where a first run's tries start (the core's
 *  `transfer::AUTO_MIN_BYTES`). */
export function coreAutoMinBytes(): number {
  return rawAutoMinBytes();
}

/** Whether a forecast's `error`, made after `values` values, says anything (the core's
 *  `record::error_known`: not after one value that left it 0). */
export function coreErrorKnown(values: number, error: number): boolean {
  return rawErrorKnown(values, error);
}

/**
 * The first run's next try after one of `bytes` that read `mbits` over a raw time of `rawMs`,
 * or undefined when the tries are over (the core's `transfer::burst_next`; on a path of
 * `predictedRttMs`, a try must last the round trip and two more).
 */
export function coreBurstNext(
  bytes: number,
  mbits: number,
  rawMs: number,
  maxBytes: number,
  predictedRttMs?: number,
): number | undefined {
  return rawBurstNext(bytes, mbits, rawMs, maxBytes, predictedRttMs);
}

/** Jitter of consecutive RTTs: their mean absolute difference; undefined below two values. */
export { jitter };

// The readers of files (core/src/record.rs and core/src/import): the same code as the CLI's
// `nowcast forecast`, through a second WebAssembly module (core/src/wasm_reader.rs) that the
// page loads only when a file is imported or exported, so that its bytes are not in the first
// open. Call {@link loadReader} first.

type Reader = typeof import("../../core/pkg/reader/nowcast_reader.js");
let reader: Reader | undefined;
let readerLoading: Promise<void> | undefined;

/**
 * Loads the file readers' WebAssembly module once (its glue is a chunk of its own, fetched
 * here). In the browser pass its URL; Node passes the bytes. A failed load is tried again on
 * the next call.
 */
export function loadReader(input?: InitInput): Promise<void> {
  readerLoading ??= import("../../core/pkg/reader/nowcast_reader.js")
    .then(async (m) => {
      await (input === undefined ? m.default() : m.default({ module_or_path: input }));
      reader = m;
    })
    .catch((e: unknown) => {
      readerLoading = undefined;
      throw e;
    });
  return readerLoading;
}

function loadedReader(): Reader {
  if (reader === undefined) throw new Error("the file reader is not loaded (loadReader first)");
  return reader;
}

/**
 * Parses and validates one NDJSON line by the core's record reader; throws a
 * {@link RecordError} naming the field at fault.
 */
export function parseRecord(line: string): Record {
  const out = JSON.parse(loadedReader().parseRecordJson(line)) as
    { record: Record } | { error: { field?: string; message: string } };
  if ("error" in out) throw new RecordError(out.error.field, out.error.message);
  return out.record;
}

/**
 * Reads NDJSON text by the core's record reader: every valid record, and every refused line
 * (1-based) with its reason. Blank lines are skipped; one bad line loses nothing else.
 */
export function readNdjson(text: string): { records: Record[]; errors: LineError[] } {
  return JSON.parse(loadedReader().readNdjsonJson(text)) as {
    records: Record[];
    errors: LineError[];
  };
}

interface RawImported {
  format: ImportResult["format"] | null;
  series: (Omit<ImportedSeries, "points" | "metric" | "unit" | "to" | "transport" | "column"> & {
    metric: ImportedSeries["metric"] | null;
    unit: ImportedSeries["unit"] | null;
    to: string | null;
    transport: ImportedSeries["transport"] | null;
    column: string | null;
    times: number[];
    values: number[];
  })[];
  errors: LineError[];
  error_count: number;
  unsupported: string | null;
  notes: string[];
}

/**
 * Reads a file in whichever format the core's reader finds in its content (NDJSON records,
 * CSV including the page's export, TSV, one number a line, iperf3 -J, ping, mtr --json, irtt
 * JSON, sockperf --full-log): its series with their points, the first refused lines, and the
 * one message of an unsupported file.
 */
export function importText(text: string): ImportResult {
  const raw = JSON.parse(loadedReader().importTextJson(text)) as RawImported;
  return {
    format: raw.format ?? undefined,
    series: raw.series.map((s) => ({
      name: s.name,
      metric: s.metric ?? undefined,
      unit: s.unit ?? undefined,
      to: s.to ?? undefined,
      transport: s.transport ?? undefined,
      column: s.column ?? undefined,
      clock: s.clock,
      points: s.times.map((t, i) => ({ t, value: s.values[i]! })),
    })),
    errors: raw.errors,
    errorCount: raw.error_count,
    unsupported: raw.unsupported ?? undefined,
    notes: raw.notes,
  };
}

/**
 * Measured values as the core's CSV export (`time,value,metric,unit,transport,to,series,source,from`),
 * which {@link importText} and `nowcast forecast` read back one series per metric, target and
 * transport; timeouts have no value and are left out (NDJSON keeps them).
 */
export function exportCsv(
  series: readonly { label: string; records: readonly Record[] }[],
): string {
  return loadedReader().exportCsv(
    series.map((s) => s.label),
    // The core reads each record (and names the series and record it refuses).
    series.map((s) => s.records.map((r) => JSON.stringify(r)).join("\n")),
  );
}

/**
 * The record as one NDJSON line (without the newline) as the core writes it, the line
 * `nowcast` writes: fields in the schema's order, absent optional fields left out. Throws a
 * RecordError naming the field when the record is not one the schema allows.
 */
export function toLine(record: Record): string {
  const r = loadedReader();
  try {
    return r.recordLine(JSON.stringify(record));
  } catch (e) {
    throw new RecordError(undefined, (e as Error).message);
  }
}

/** Records as an NDJSON file, each line the core's ({@link toLine}). */
export function toNdjson(records: readonly Record[]): string {
  return records.map((r) => toLine(r) + "\n").join("");
}
