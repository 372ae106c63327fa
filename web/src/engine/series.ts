// The series of one site, by key: each one is the core's probed series (forecast.ts
// `ProbedSeries`: the adaptive timeout of its probes, the forecast made before each value,
// what a timed-out probe feeds back, the records; the only way the engine touches a series),
// with its records (the one store of them: what the page exports, what the history holds and
// what a restore replays) and its stream-count plan.

import { coreErrorKnown, ecdf, histogram, ProbedSeries, type ProbedState } from "../forecast";
import type { MeasurementEvent, PredictabilityEvent, SeriesKey } from "../messages";
import type { Metric, Record, Transport } from "../record";
import { MAX_RECORDS_PER_SERIES } from "./history";
import {
  newBandwidthSchedule,
  newStreamPlan,
  type BandwidthSchedule,
  type StreamPlan,
} from "./probe-math";

/** What the page's messages carry of a series besides a record. */
export type Shown = Omit<MeasurementEvent, "type" | "key" | "record">;

/** A series as the history and the page's restored graphs take it. */
export type RestoredSeries = Shown & { key: SeriesKey; records: Record[] };

/** A series' state as the page shows it: the next forecast as its graphs and console take it. */
export function shown(s: ProbedState): Shown {
  const f = s.next;
  return {
    next: f && {
      value: f.value,
      error: f.error,
      errorKnown: coreErrorKnown(s.count, f.error),
      method: f.method,
      ...(s.share === undefined ? {} : { share: s.share }),
    },
    mae: s.mae,
    count: s.count,
    timeouts: s.timeouts,
  };
}

/** The event of a probe its series recorded. */
export function measurement(
  key: SeriesKey,
  observed: { record: Record; state: ProbedState },
): MeasurementEvent {
  return { type: "measurement", key, record: observed.record, ...shown(observed.state) };
}

/** Error histogram (100 bins, min..max) and CDF, and every forecaster's MSE and MAE (JavaNws §5). */
export function predictability(key: string, s: ProbedSeries): PredictabilityEvent {
  const errors = s.errors();
  const state = s.state();
  return {
    type: "predictability",
    key,
    histogram: histogram(errors, 100),
    cdf: ecdf(errors),
    table: s.table(),
    selected: state.next?.method,
    share: state.share,
    mae: state.mae,
  };
}

export class SeriesSet {
  private readonly probed = new Map<SeriesKey, ProbedSeries>();
  private readonly stored = new Map<SeriesKey, Record[]>();
  private readonly streamPlans = new Map<SeriesKey, StreamPlan>();
  private readonly schedules = new Map<SeriesKey, BandwidthSchedule>();

  /** @param to whose series these are: records' `to`, and the history's key. */
  constructor(readonly to: string) {}

  /** Takes the records saved in the history, before the series are first used. */
  load(saved: ReadonlyMap<string, readonly Record[]>): void {
    for (const [key, records] of saved) this.stored.set(key as SeriesKey, [...records]);
  }

  /** The series of `key`; the first time, rebuilt from its stored records through the same
   *  code as live probes (the core's replay), so its forecasts and timeouts come back exactly. */
  get(key: SeriesKey): ProbedSeries {
    let s = this.probed.get(key);
    if (s === undefined) {
      const [metric, transport] = key.split("/") as [Metric, Transport];
      s = ProbedSeries.create({
        metric,
        transport,
        source: "browser",
        from: "browser",
        to: this.to,
      });
      try {
        s.replay(this.records(key));
      } catch {
        // A damaged history: the series goes on from the records before the bad one.
      }
      this.probed.set(key, s);
    }
    return s;
  }

  /** Whether `key` has a series or records. */
  has(key: SeriesKey): boolean {
    return this.probed.has(key) || this.records(key).length > 0;
  }

  /** The forecast of `key`'s next value; undefined, and no series started, before it has any. */
  next(key: SeriesKey): Shown["next"] {
    return this.has(key) ? shown(this.get(key).state()).next : undefined;
  }

  /** Keeps a record of `key`, the newest {@link MAX_RECORDS_PER_SERIES} as the history does. */
  keep(key: SeriesKey, record: Record): void {
    let list = this.stored.get(key);
    if (list === undefined) this.stored.set(key, (list = []));
    list.push(record);
    if (list.length > MAX_RECORDS_PER_SERIES) list.shift();
  }

  records(key: SeriesKey): readonly Record[] {
    return this.stored.get(key) ?? [];
  }

  /** The series with records, each with its records and where its series stands; only
   *  those of `keys` when given. */
  restored(keys?: readonly SeriesKey[]): RestoredSeries[] {
    const out: RestoredSeries[] = [];
    for (const [key, records] of this.stored) {
      if (records.length === 0 || (keys !== undefined && !keys.includes(key))) continue;
      // A copy: the event may wait for the round's end, when this series holds more.
      out.push({ key, records: [...records], ...shown(this.get(key).state()) });
    }
    return out;
  }

  /** `key`'s stream count and pretest schedule. */
  streams(key: SeriesKey): StreamPlan {
    let plan = this.streamPlans.get(key);
    if (plan === undefined) this.streamPlans.set(key, (plan = newStreamPlan()));
    return plan;
  }

  /** `key`'s first-run burst and bandwidth spacing (probe-math.ts `bandwidthDue`). */
  schedule(key: SeriesKey): BandwidthSchedule {
    let s = this.schedules.get(key);
    if (s === undefined) this.schedules.set(key, (s = newBandwidthSchedule()));
    return s;
  }

  /** Starts the stream counts and the bandwidth schedules afresh (the site's plan changed: it
   *  became or stopped being the target). */
  resetStreams(): void {
    this.streamPlans.clear();
    this.schedules.clear();
  }

  dispose(): void {
    for (const s of this.probed.values()) s.dispose();
    this.probed.clear();
  }
}
