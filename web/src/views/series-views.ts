// The series on the page: each one a console row, a graph and a choice in the predictability
// view, in one order: the target's (ORDER), then the mirrors', then the imported ones, each in
// arrival order.

import { formatValue } from "../format";
import type {
  HistoryEvent,
  ImportedEvent,
  MeasurementEvent,
  NextForecast,
  SeriesKey,
} from "../messages";
import type { Record as MeasurementRecord } from "../record";
import type { SeriesChart } from "./chart-view";
import type { ConsoleRow, ConsoleView, LastText } from "./console-view";
import type { Rank } from "./dom";
import type { GraphsView } from "./graphs-view";
import { HeadlineView } from "./headline-view";
import type { PredictabilityPanel } from "./predictability-view";

const TITLES: Partial<Record<SeriesKey, string>> = {
  "rtt/websocket": "RTT, WebSocket ping",
  "jitter/websocket": "Jitter, WebSocket ping",
  "loaded_rtt/websocket": "Loaded RTT, WebSocket ping during transfers",
  "rtt/http": "RTT, fetch",
  "bandwidth_down/http": "Download, fetch",
  "bandwidth_up/http": "Upload, fetch",
  "bandwidth_down/websocket": "Download, WebSocket",
  "bandwidth_up/websocket": "Upload, WebSocket",
};
/** Console and graph order, whatever order the probes report in. */
const ORDER = Object.keys(TITLES);

/** A series' title, as its row and graph name it. */
export const titleOf = (key: SeriesKey) => TITLES[key] ?? key;

/** The target's own series (those in ORDER), as opposed to mirrors' and imported ones. */
export const isTargetSeries = (key: string) => ORDER.includes(key);

export const seriesRank: Rank = (k) => {
  const i = ORDER.indexOf(k ?? "");
  return i >= 0 ? i : k?.startsWith("mirror/") ? ORDER.length : Infinity;
};

interface Shown {
  title: string;
  unit: string;
  row: ConsoleRow;
  chart: SeriesChart;
  /** Probes that failed (no connection, refused): the core counts no value for them. */
  failed: number;
  /** Values measured (not timeouts, not failures), live or restored. */
  values: number;
}

/** A record as the console's "last" column shows it: its value, or what became of it. */
function lastText(r: MeasurementRecord): LastText {
  if (r.status === "error") return { text: `failed: ${r.error ?? "error"}`, failed: true };
  if (r.value === null) return { text: `timed out (${r.timeout_ms} ms)`, failed: true };
  return { text: formatValue(r.value, r.unit), failed: false, value: r.value };
}

export class SeriesViews {
  private readonly shown = new Map<string, Shown>();

  /** @param stepMs the period: how far ahead of a measurement its next forecast is drawn. */
  constructor(
    private readonly console: ConsoleView,
    private readonly graphs: GraphsView,
    private readonly predictability: PredictabilityPanel,
    private readonly headline: HeadlineView,
    private readonly stepMs: () => number,
  ) {}

  private view(key: string, unit: string, label?: string): Shown {
    let v = this.shown.get(key);
    if (v !== undefined) return v;
    const title = label ?? TITLES[key as SeriesKey] ?? key;
    const row = this.console.add(key, title, unit);
    const chart = this.graphs.add(key, title, unit, !key.startsWith("import/"));
    v = { title, unit, row, chart, failed: 0, values: 0 };
    this.shown.set(key, v);
    this.predictability.offer(key, title);
    return v;
  }

  /** The title and unit of the series shown under `key`, and its latest forecast. */
  get(key: string): { title: string; unit: string; next: NextForecast | undefined } | undefined {
    const v = this.shown.get(key);
    return v && { title: v.title, unit: v.unit, next: v.chart.next };
  }

  /** Every series shown, by key and title, in the order they came. */
  list(): { key: string; label: string }[] {
    return [...this.shown].map(([key, v]) => ({ key, label: v.title }));
  }

  /** Whether any of the target's series (not a mirror's, not an import) holds a value. */
  targetMeasured(): boolean {
    for (const [key, v] of this.shown) if (isTargetSeries(key) && v.values > 0) return true;
    return false;
  }

  /** Takes a series off the page: its console row, graph and predictability choice. */
  remove(key: string): void {
    const v = this.shown.get(key);
    if (v === undefined) return;
    v.row.row.remove();
    this.graphs.remove(v.chart);
    this.predictability.withdraw(key);
    this.shown.delete(key);
  }

  /** Takes off every series whose key `drop` accepts (the target's: the headline's too). */
  removeWhere(drop: (key: string) => boolean): void {
    for (const key of [...this.shown.keys()]) if (drop(key)) this.remove(key);
    if (drop("rtt/websocket")) this.headline.clear();
  }

  /** Adds a record to a series' graph: a value (and the forecast after it), a timeout (the
   *  forecast moves on, as its bank was fed), or a failure (marked; the forecast waits). */
  private plot(
    v: Shown,
    r: MeasurementRecord,
    next: NextForecast | undefined,
    stepMs: number,
  ): void {
    if (r.status === "error") {
      v.failed++;
      v.chart.fail(r.timestamp_ms);
    } else {
      if (r.value !== null) v.values++;
      v.chart.add(r.timestamp_ms, r.value, next, stepMs);
    }
  }

  /** Shows a measurement and the next forecast in its series' row and graph (under `key`, and
   *  named `label`, for a mirror's). */
  measurement(m: MeasurementEvent, key: string = m.key, label?: string): void {
    const { record, next } = m;
    const v = this.view(key, record.unit, label);
    // A record's own period (a bandwidth series spaced by the budget is probed less often
    // than the page's period) places its next forecast.
    this.plot(v, record, next, record.period_ms ?? this.stepMs());
    v.row.show(lastText(record), next, m.mae, m.count, m.timeouts, v.failed);
    if (key === m.key && HeadlineView.shows(key)) {
      this.headline.measurement(m.key, record, next, m.count);
    }
    this.predictability.measured(key);
  }

  /** Shows a series rebuilt from the history: its records, their forecasts, its row. */
  restored(s: HistoryEvent["series"][number], key: string = s.key, label?: string): void {
    const last = s.records.at(-1);
    if (last === undefined) return;
    const v = this.view(key, last.unit, label);
    const step = this.stepMs();
    s.records.forEach((r, i) => {
      // The forecast made after a record is the one the next record carries. Only the last
      // one's error is ever shown in words (the engine's `s.next`, which says whether it is
      // known); the others are settled forecasts, drawn with their band.
      const f = i + 1 < s.records.length ? s.records[i + 1]!.forecast : undefined;
      const next: NextForecast | undefined =
        i + 1 < s.records.length
          ? f && { value: f.value, error: f.error, errorKnown: true, method: f.method }
          : s.next;
      this.plot(v, r, next, r.period_ms ?? step);
    });
    v.row.show(lastText(last), s.next, s.mae, s.count, s.timeouts, v.failed);
    if (key === s.key && HeadlineView.shows(key)) {
      this.headline.restored(s.key, s.records, s.next, s.count);
    }
    this.predictability.measured(key);
  }

  /** Shows an imported series like a live one, its forecasts one median gap ahead. */
  imported(s: ImportedEvent["series"][number]): void {
    const v = this.view(s.key, s.unit, s.label);
    const gaps = s.points.slice(1).map((p, i) => p.t - s.points[i]!.t);
    const step = gaps.sort((a, b) => a - b)[gaps.length >> 1] ?? 1000;
    for (const p of s.points) v.chart.add(p.t, p.value, p.next, step);
    const last = s.points.at(-1);
    v.row.show(
      last === undefined
        ? { text: "–", failed: false }
        : { text: formatValue(last.value, s.unit), failed: false, value: last.value },
      last?.next,
      s.mae,
      s.points.length,
      0,
      0,
    );
    this.predictability.measured(s.key);
  }

  requestDraw(): void {
    this.graphs.requestDraw();
  }
}
