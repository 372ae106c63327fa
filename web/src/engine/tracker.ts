// One measured series in the worker: the forecaster bank for its values, the adaptive timeout
// of its probes (Allen, Wolski & Plank: forecast + k·error, floor and ceiling, learned from the
// probe durations), and the record of every probe, timed out or not.

import { ecdf, histogram, Series } from "../forecast";
import type {
  MeasurementEvent,
  NextForecast,
  PredictabilityEvent,
  ReplayedPoint,
  SeriesKey,
} from "../messages";
import { SCHEMA_VERSION, type Probe, type Record, type RecordForecast } from "../record";

export interface TimeoutBounds {
  floorMs: number;
  ceilingMs: number;
  /** Added to a timed-out probe's duration when it is fed back (NWS). */
  penaltyMs: number;
  /** The timeout before the series has data. */
  initialMs: number;
}

export const RTT_BOUNDS: TimeoutBounds = {
  floorMs: 1000,
  ceilingMs: 10_000,
  penaltyMs: 1000,
  initialMs: 3000,
};
export const BANDWIDTH_BOUNDS: TimeoutBounds = {
  floorMs: 3000,
  ceilingMs: 60_000,
  penaltyMs: 5000,
  initialMs: 15_000,
};

/** What the probe that ran reports. */
export interface Outcome {
  /** Wall-clock time of the measurement (ms since epoch). */
  timestampMs: number;
  probe: Probe;
  /** The probe's duration as the timeout saw it (ms). */
  durationMs: number;
  /** The timeout the probe ran under (from {@link Tracker.timeoutMs} before it started). */
  timeoutMs: number;
}

export class Tracker {
  /** The series forecast and shown (ms for RTTs, Mbit/s for rates). */
  private readonly values: Series;
  /** Probe durations (ms), whose forecasts set the timeouts; the value series for RTTs. */
  private readonly durations: Series;
  private seq = 0;
  timeouts = 0;
  /** Forecast errors (measured − forecast made before it), for the predictability view. */
  private readonly errors: number[] = [];

  /**
   * @param kind "duration": the value is the probe time itself (RTT), so one series serves
   *   both; "rate": the value is bytes over time, and the durations get their own series.
   */
  constructor(
    readonly key: SeriesKey,
    private readonly kind: "duration" | "rate",
    private readonly bounds: TimeoutBounds,
    private readonly from: string,
    /** Whose series this is: records' `to`, and the history's key. */
    readonly to: string,
  ) {
    this.durations = Series.create();
    this.durations.setTimeoutBounds(bounds.floorMs, bounds.ceilingMs, bounds.penaltyMs);
    this.values = kind === "duration" ? this.durations : Series.withoutTimeouts();
  }

  /**
   * Runs an imported series through the same bank, in time order, without timeouts (its values
   * were not probes), and returns each point with the forecast made after it.
   */
  static replay(points: readonly { t: number; value: number }[]): {
    series: Series;
    errors: number[];
    points: ReplayedPoint[];
  } {
    const series = Series.withoutTimeouts();
    const errors: number[] = [];
    const out: ReplayedPoint[] = [];
    for (const p of [...points].sort((a, b) => a.t - b.t)) {
      const before = series.forecast()?.mse.value;
      series.update(p.value);
      if (before !== undefined) errors.push(p.value - before);
      const f = series.forecast()!.mse;
      out.push({
        t: p.t,
        value: p.value,
        next: { value: f.value, error: Math.sqrt(f.error), method: f.methodId },
      });
    }
    return { series, errors, points: out };
  }

  /** The timeout of the next probe (ms): the NWS rule, MAE forecast + 3·√MSE, within bounds. */
  timeoutMs(): number {
    return this.durations.timeout("nws") ?? this.bounds.initialMs;
  }

  /** The forecast of the next value, MSE-selected as JavaNws reports it. */
  next(): NextForecast | undefined {
    const f = this.values.forecast()?.mse;
    return f && { value: f.value, error: Math.sqrt(f.error), method: f.methodId };
  }

  private forecastBefore(): RecordForecast | undefined {
    const f = this.next();
    return f && { value: f.value, method: f.method, selector: "mse", error: f.error };
  }

  private feedValue(value: number, forecast: RecordForecast | undefined, durationMs?: number) {
    this.values.update(value);
    if (forecast !== undefined) this.errors.push(value - forecast.value);
    if (this.kind === "rate" && durationMs !== undefined) this.durations.update(durationMs);
  }

  private feedTimeout(elapsedMs: number, payloadBytes: number): void {
    const fed = this.durations.timedOut(elapsedMs);
    if (this.kind === "rate") this.values.update(payloadBytes / fed / 125);
    this.timeouts++;
  }

  /** A probe that completed with `value`. */
  measured(value: number, o: Outcome): MeasurementEvent {
    const forecast = this.forecastBefore();
    this.feedValue(value, forecast, o.durationMs);
    return this.event(o, forecast, "ok", value);
  }

  /**
   * Rebuilds the banks from this series' saved records, fed as the probes fed them; the bank is
   * deterministic, so this restores the forecaster state exactly. A timeout is fed with its
   * timeout as the elapsed time (the record keeps the timeout, which the elapsed time only
   * exceeds by a timer tick).
   */
  restore(records: readonly Record[]): void {
    for (const r of records) {
      if (r.status === "ok" && r.value !== null) {
        this.feedValue(r.value, this.forecastBefore(), r.probe?.raw_ms);
      } else if (r.status === "timeout") {
        this.feedTimeout(r.timeout_ms ?? this.bounds.initialMs, r.probe?.payload_bytes ?? 0);
      }
      this.seq = (r.seq ?? this.seq) + 1;
    }
  }

  /**
   * A probe that ran out of time after `elapsedMs`. It is fed back, never dropped: the
   * duration as elapsed + penalty (NWS), and a rate as what the payload would have achieved in
   * that time, so the forecasts learn that the path got slower.
   */
  timedOut(o: Outcome, payloadBytes: number): MeasurementEvent {
    const forecast = this.forecastBefore();
    this.feedTimeout(o.durationMs, payloadBytes);
    return this.event(o, forecast, "timeout", null);
  }

  private event(
    o: Outcome,
    forecast: RecordForecast | undefined,
    status: "ok" | "timeout",
    value: number | null,
  ): MeasurementEvent {
    const [metric] = this.key.split("/") as [Record["metric"]];
    const record: Record = {
      schema_version: SCHEMA_VERSION,
      timestamp_ms: Math.round(o.timestampMs),
      source: "browser",
      metric,
      status,
      value,
      unit: this.kind === "duration" ? "ms" : "Mbit/s",
      from: this.from,
      to: this.to,
      seq: this.seq++,
      timeout_ms: Math.round(o.timeoutMs),
      probe: o.probe,
    };
    if (forecast !== undefined) record.forecast = forecast;
    return { type: "measurement", key: this.key, record, ...this.state() };
  }

  /** What the console shows of this series besides its last record. */
  state(): Omit<MeasurementEvent, "type" | "key" | "record"> {
    const summary = this.values.summary().mse_selected;
    return {
      next: this.next(),
      mae: summary.n > 0 ? summary.mae : undefined,
      count: this.values.count,
      timeouts: this.timeouts,
    };
  }

  predictability(): PredictabilityEvent {
    return predictability(this.key, this.values, this.errors);
  }

  dispose(): void {
    if (this.values !== this.durations) this.values.dispose();
    this.durations.dispose();
  }
}

/** Error histogram (100 bins, min..max) and CDF, and every forecaster's MSE and MAE (JavaNws §5). */
export function predictability(key: string, values: Series, errors: number[]): PredictabilityEvent {
  return {
    type: "predictability",
    key,
    histogram: histogram(errors, 100),
    cdf: ecdf(errors),
    table: values.table(),
    selected: values.forecast()?.mse.methodId,
  };
}
