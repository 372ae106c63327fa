// Typed wrapper around the forecasting library compiled to WebAssembly (the core crate (nowcast-core)).
// The page, its worker and the tests import this module, never the generated glue.

import init, {
  Forecaster as RawForecaster,
  ecdf as rawEcdf,
  histogramJson,
  methodsJson,
  type InitInput,
} from "../../core/pkg/nowcast_core.js";

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

  /** Restores a series saved with {@link Series.save}; throws on another format or version. */
  static restore(text: string): Series {
    const mode = (JSON.parse(text) as { state?: { bank?: { mode?: Mode } } }).state?.bank?.mode;
    return new Series(RawForecaster.restore(text), mode ?? "improved");
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

  save(): string {
    return this.raw.save();
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
