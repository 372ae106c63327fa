// The series of one site, by key: each one's tracker (the only way the engine touches a
// series: its forecasts, its probes' timeouts, its records' numbering), its records (the one
// store of them: what the page exports, what the history holds and what a restore replays),
// and its stream-count plan.

import type { NextForecast, SeriesKey } from "../messages";
import type { Record } from "../record";
import { MAX_RECORDS_PER_SERIES } from "./history";
import { newStreamPlan, type StreamPlan } from "./probe-math";
import { BANDWIDTH_BOUNDS, RTT_BOUNDS, Tracker } from "./tracker";

/** A series as the history and the page's restored graphs take it. */
export type RestoredSeries = ReturnType<Tracker["state"]> & { key: SeriesKey; records: Record[] };

export class SeriesSet {
  private readonly trackers = new Map<SeriesKey, Tracker>();
  private readonly stored = new Map<SeriesKey, Record[]>();
  private readonly streamPlans = new Map<SeriesKey, StreamPlan>();

  /** @param to whose series these are: records' `to`, and the history's key. */
  constructor(readonly to: string) {}

  /** Takes the records saved in the history, before the series are first used. */
  load(saved: ReadonlyMap<string, readonly Record[]>): void {
    for (const [key, records] of saved) this.stored.set(key as SeriesKey, [...records]);
  }

  /** The tracker of `key`; the first time, rebuilt from its stored records (the bank is
   *  deterministic, so this restores its forecasters exactly). */
  tracker(key: SeriesKey): Tracker {
    let t = this.trackers.get(key);
    if (t === undefined) {
      const rate = key.startsWith("bandwidth");
      t = new Tracker(
        key,
        rate ? "rate" : "duration",
        rate ? BANDWIDTH_BOUNDS : RTT_BOUNDS,
        "browser",
        this.to,
      );
      t.restore(this.records(key));
      this.trackers.set(key, t);
    }
    return t;
  }

  /** Whether `key` has a tracker or records. */
  has(key: SeriesKey): boolean {
    return this.trackers.has(key) || this.records(key).length > 0;
  }

  /** The forecast of `key`'s next value; undefined, and no series started, before it has any. */
  next(key: SeriesKey): NextForecast | undefined {
    return this.has(key) ? this.tracker(key).next() : undefined;
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

  /** The series with records, each with its records and where its tracker stands; only
   *  those of `keys` when given. */
  restored(keys?: readonly SeriesKey[]): RestoredSeries[] {
    const out: RestoredSeries[] = [];
    for (const [key, records] of this.stored) {
      if (records.length === 0 || (keys !== undefined && !keys.includes(key))) continue;
      // A copy: the event may wait for the round's end, when this series holds more.
      out.push({ key, records: [...records], ...this.tracker(key).state() });
    }
    return out;
  }

  /** `key`'s stream count and pretest schedule. */
  streams(key: SeriesKey): StreamPlan {
    let plan = this.streamPlans.get(key);
    if (plan === undefined) this.streamPlans.set(key, (plan = newStreamPlan()));
    return plan;
  }

  /** Starts the stream counts afresh (the site's plan changed: it became or stopped being
   *  the target). */
  resetStreams(): void {
    this.streamPlans.clear();
  }

  dispose(): void {
    for (const t of this.trackers.values()) t.dispose();
    this.trackers.clear();
  }
}
