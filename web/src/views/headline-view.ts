// The headline: the answer at a glance, one card per direction (download, upload, round trip)
// with the latest value, where the next one will likely fall in plain words, a sparkline and
// a one-word verdict of how steady the link is (headline-math.ts), greyed with the time of the
// last value when it is stale (the last probe failed or timed out, or none came for a while).

import { clock, formatValue, formatWithError, UNKNOWN_SPREAD_TITLE } from "../format";
import type { BandwidthSchedule, NextForecast, Outage, SeriesKey, StatusEvent } from "../messages";
import type { Record } from "../record";
import type { Announcer, Pace } from "./announcer";
import { el } from "./dom";
import {
  COMPARED,
  likelyRange,
  measuredLately,
  median,
  periodPhrase,
  pickSeries,
  rangeText,
  seriesPeriodS,
  shortAdvice,
  shortProbe,
  sparkPath,
  transportReason,
  verdict,
  yRange,
  type Verdict,
} from "./headline-math";

/** The headline is announced when its figures first come, then when a verdict changes or a
 *  figure goes stale, at most once a minute: a summary, not every probe. */
const ANNOUNCE: Pace = { settleMs: 3000, gapMs: 60_000 };

/** Values a sparkline shows, the newest. */
const SPARK_POINTS = 60;
const SPARK_W = 100;
const SPARK_H = 30;

interface Direction {
  id: string;
  name: string;
  keys: SeriesKey[];
  better: "higher" | "lower";
}

const DIRECTIONS: Direction[] = [
  {
    id: "down",
    name: "Download",
    keys: ["bandwidth_down/http", "bandwidth_down/websocket"],
    better: "higher",
  },
  {
    id: "up",
    name: "Upload",
    keys: ["bandwidth_up/http", "bandwidth_up/websocket"],
    better: "higher",
  },
  { id: "rtt", name: "Round trip (RTT)", keys: ["rtt/websocket", "rtt/http"], better: "lower" },
];

const TRANSPORT_NAMES: { [t: string]: string } = { websocket: "WebSocket", http: "fetch" };
const transportOf = (key: string) => TRANSPORT_NAMES[key.split("/")[1]!] ?? key;

const VERDICT_TEXT: { [v in Verdict]: string } = {
  learning: "learning",
  steady: "Steady",
  variable: "Variable",
  erratic: "Erratic",
};

/** A series as the headline keeps it: its newest probes and its next forecast. */
interface Kept {
  unit: string;
  /** Newest last: time, value (null: no value), and why not; `short` when the probe was a
   *  transfer too short to be timed (headline-math.ts `shortProbe`). */
  points: {
    t: number;
    value: number | null;
    status: Record["status"];
    error?: string;
    short: boolean;
    rawMs?: number;
  }[];
  next: NextForecast | undefined;
  /** Values in its bank: the forecasts checked are one fewer. */
  count: number;
  /** The period its newest record was measured at (a bandwidth series spaced by the budget
   *  is probed less often than the page's period), when the record says. */
  periodMs?: number;
}

/** One card's elements. */
class Card {
  readonly root = document.createElement("article");
  private readonly verdict = document.createElement("p");
  private readonly value = document.createElement("span");
  private readonly unit = document.createElement("span");
  private readonly next = document.createElement("p");
  private readonly line: SVGPathElement;
  private readonly range: SVGRectElement;
  private readonly forecast: SVGLineElement;
  private readonly meta = document.createElement("p");
  private readonly name: string;
  /** What a screen reader is told of the card (announcer.ts): its gist (the verdict, and
   *  whether its figure is stale) and its words; undefined while it has no value. */
  spoken: { gist: string; text: string } | undefined;

  constructor(d: Direction) {
    this.name = d.name;
    const svg = "http://www.w3.org/2000/svg";
    this.root.className = "card";
    this.root.dataset.direction = d.id;
    this.root.setAttribute("aria-labelledby", `card-${d.id}`);
    const name = document.createElement("h3");
    name.id = `card-${d.id}`;
    name.textContent = d.name;
    this.verdict.className = "verdict";
    const now = document.createElement("p");
    now.className = "now";
    this.value.className = "value";
    this.unit.className = "unit";
    now.append(this.value, " ", this.unit);
    this.next.className = "next";
    const spark = document.createElementNS(svg, "svg");
    spark.setAttribute("class", "spark");
    spark.setAttribute("viewBox", `0 0 ${SPARK_W} ${SPARK_H}`);
    spark.setAttribute("preserveAspectRatio", "none");
    spark.setAttribute("aria-hidden", "true");
    this.range = document.createElementNS(svg, "rect");
    this.range.setAttribute("class", "range");
    this.forecast = document.createElementNS(svg, "line");
    this.forecast.setAttribute("class", "forecast");
    this.line = document.createElementNS(svg, "path");
    this.line.setAttribute("class", "line");
    spark.append(this.range, this.forecast, this.line);
    this.meta.className = "meta";
    this.root.append(name, this.verdict, now, this.next, spark, this.meta);
    this.show(undefined, "", 0, undefined, "running");
  }

  /**
   * Shows `key`'s series (undefined: none yet): its latest value, next range and verdict,
   * stale when its last probe did not give a value or the last value is older than `staleMs`.
   * `periodS` is the page's period, which the series' own (its records' `period_ms`)
   * overrides.
   * `other` is the other transport's recent median, when there is one. `outage` is the
   * target's, as the banner above says it: a failure's own words ("no connection") would
   * contradict a banner that says the target answered, but is not an echo-node.
   */
  show(
    s: Kept | undefined,
    key: string,
    periodS: number,
    other: { key: string; median: number } | undefined,
    state: string,
    better: "higher" | "lower" = "higher",
    schedule?: BandwidthSchedule,
    outage?: Outage,
  ): void {
    // The series' own period: its forecast is of its next probe, and its values go stale
    // at its pace.
    const ownS = seriesPeriodS(schedule?.everyS[key as SeriesKey], s?.periodMs, periodS);
    const lastOk = s && [...s.points].reverse().find((p) => p.value !== null);
    const newest = s?.points.at(-1);
    if (s === undefined || newest === undefined) {
      this.value.textContent = "–";
      this.unit.textContent = "";
      this.next.textContent = "Waiting for the first measurement";
      this.setVerdict("learning");
      this.meta.textContent = "";
      this.line.setAttribute("d", "");
      this.hideNext();
      this.root.classList.remove("stale");
      this.spoken = undefined;
      return;
    }
    const unit = s.unit;
    if (lastOk === undefined) {
      this.value.textContent = "–";
      this.unit.textContent = "";
    } else {
      // "1.20 ms", "1.24 Gbit/s": the number and its unit apart, for their sizes.
      const text = formatValue(lastOk.value!, unit);
      const at = text.lastIndexOf(" ");
      this.value.textContent = text.slice(0, at);
      this.unit.textContent = text.slice(at + 1);
    }
    const next = s.next;
    // Bandwidth probes held by the hourly budget: the forecast is of the next probe, whenever
    // the budget lets it run, not of the next period ("next 2 s" beside a pause of an hour).
    const held = state === "over-budget" && key.startsWith("bandwidth");
    this.next.textContent =
      next === undefined
        ? "Forecast after the first measurement"
        : // One value: no range yet, said as the series table says it.
          `${held ? "next probe, once the budget allows" : periodPhrase(ownS)}: ${
            next.errorKnown
              ? rangeText(...likelyRange(next), unit)
              : formatWithError(next.value, 0, unit, false)
          }`;
    this.next.title = next !== undefined && !next.errorKnown ? UNKNOWN_SPREAD_TITLE : "";
    const v = verdict(next, s.count - 1);
    this.setVerdict(v);

    const ageMs = Date.now() - (lastOk?.t ?? 0);
    const staleMs = Math.max(3 * ownS * 1000, ownS * 1000 + 30_000);
    const why =
      newest.status === "error"
        ? `last probe failed: ${
            outage?.notEchoNode === true
              ? "the target is not an echo-node (see above)"
              : (newest.error ?? "error")
          }`
        : newest.status === "timeout"
          ? "last probe timed out"
          : state === "suspended"
            ? "paused"
            : held
              ? "bandwidth probes paused by the hourly budget"
              : ageMs > staleMs
                ? "no newer measurement"
                : "";
    const stale = why !== "" || lastOk === undefined;
    this.root.classList.toggle("stale", stale);
    // Paused figures are not news: the status line says "Paused".
    this.spoken =
      lastOk === undefined
        ? undefined
        : {
            gist: `${this.name}: ${v}${stale && why !== "paused" ? ", stale" : ""}`,
            text:
              `${this.name} ${formatValue(lastOk.value!, unit)}, ` +
              (v === "learning" ? "forecasts still learning" : VERDICT_TEXT[v].toLowerCase()) +
              (stale ? ` (as of ${clock(lastOk.t)}: ${why || "no newer measurement"})` : ""),
          };
    const others =
      other === undefined
        ? ""
        : ` · ${transportOf(other.key)} reads ${formatValue(other.median, unit)}`;
    // Which transport's figure this is and why; a transfer too short to be timed is said to
    // be so, since it reads low.
    const reason = transportReason(key, other?.key, better);
    const short = lastOk?.short === true;
    this.root.dataset.trust = short ? "short" : "timed";
    const caution = short
      ? `probe too short to time (${lastOk.rawMs?.toFixed(1)} ms), likely reads low: ` +
        `${shortAdvice(schedule)} · `
      : "";
    this.meta.textContent =
      lastOk === undefined
        ? why
        : stale
          ? `as of ${clock(lastOk.t)} · ${why || "no newer measurement"}`
          : `${caution}via ${transportOf(key)}${reason === "" ? "" : ` (${reason})`} at ` +
            `${clock(lastOk.t)}${others}`;

    const values = s.points.slice(-SPARK_POINTS).map((p) => p.value);
    const measured = values.filter((v): v is number => v !== null);
    const y = yRange(next === undefined ? measured : [...measured, next.value]);
    if (y === undefined) {
      this.line.setAttribute("d", "");
      this.hideNext();
      return;
    }
    // The line leaves room at the right for the next value's range.
    this.line.setAttribute("d", sparkPath(values, SPARK_W - 6, SPARK_H, y[0], y[1]));
    if (next === undefined) {
      this.hideNext();
    } else {
      // Cut to the plot, as the graphs cut their band.
      const toY = (v: number) =>
        Math.min(SPARK_H, Math.max(0, SPARK_H - ((v - y[0]) / (y[1] - y[0])) * SPARK_H));
      const [lo, hi] = likelyRange(next);
      this.range.setAttribute("x", String(SPARK_W - 4));
      this.range.setAttribute("width", "4");
      this.range.setAttribute("y", String(toY(hi)));
      this.range.setAttribute("height", String(Math.max(0.5, toY(lo) - toY(hi))));
      const at = String(toY(next.value));
      this.forecast.setAttribute("x1", String(SPARK_W - 5));
      this.forecast.setAttribute("x2", String(SPARK_W + 1));
      this.forecast.setAttribute("y1", at);
      this.forecast.setAttribute("y2", at);
    }
  }

  /** No next value to mark on the sparkline. */
  private hideNext(): void {
    this.range.setAttribute("height", "0");
    this.forecast.setAttribute("x2", this.forecast.getAttribute("x1") ?? "0");
  }

  private setVerdict(v: Verdict): void {
    this.verdict.dataset.verdict = v;
    this.verdict.textContent = VERDICT_TEXT[v];
  }
}

export class HeadlineView {
  private readonly kept = new Map<SeriesKey, Kept>();
  private readonly cards = new Map<Direction, Card>();
  private state = "starting";
  private schedule: BandwidthSchedule | undefined;
  private outage: Outage | undefined;

  /**
   * @param periodS the period in force.
   * @param announcer tells a screen reader the figures in a sentence, now and then.
   */
  constructor(
    private readonly periodS: () => number,
    private readonly announcer: Announcer,
  ) {
    const parent = el("cards");
    for (const d of DIRECTIONS) {
      const card = new Card(d);
      this.cards.set(d, card);
      parent.append(card.root);
    }
    this.render();
  }

  /** Whether `key` is one of the series the headline shows. */
  static shows(key: string): key is SeriesKey {
    return DIRECTIONS.some((d) => d.keys.includes(key as SeriesKey));
  }

  private series(key: SeriesKey, unit: string): Kept {
    let s = this.kept.get(key);
    if (s === undefined) this.kept.set(key, (s = { unit, points: [], next: undefined, count: 0 }));
    return s;
  }

  private push(s: Kept, r: Record): void {
    s.points.push({
      t: r.timestamp_ms,
      value: r.status === "ok" ? r.value : null,
      status: r.status,
      ...(r.error === undefined ? {} : { error: r.error }),
      short: r.status === "ok" && shortProbe(r.metric, r.probe),
      ...(r.probe?.raw_ms === undefined ? {} : { rawMs: r.probe.raw_ms }),
    });
    if (r.period_ms !== undefined) s.periodMs = r.period_ms;
    if (s.points.length > SPARK_POINTS) s.points.splice(0, s.points.length - SPARK_POINTS);
  }

  /** A new probe of a series of the target. */
  measurement(key: SeriesKey, r: Record, next: NextForecast | undefined, count: number): void {
    const s = this.series(key, r.unit);
    this.push(s, r);
    s.next = next;
    s.count = count;
    this.render();
  }

  /** A series of the target as restored from the history. */
  restored(
    key: SeriesKey,
    records: readonly Record[],
    next: NextForecast | undefined,
    count: number,
  ): void {
    const last = records.at(-1);
    if (last === undefined) return;
    const s = this.series(key, last.unit);
    s.points = [];
    for (const r of records.slice(-SPARK_POINTS)) this.push(s, r);
    s.next = next;
    s.count = count;
    this.render();
  }

  /** The target changed or the history was cleared: no series until new ones come. */
  clear(): void {
    this.kept.clear();
    this.render();
  }

  /** The worker's state ("suspended" marks the figures as paused), the bandwidth probes'
   *  schedule and the target's outage, which the status line and the banner say too. */
  status(ev: Pick<StatusEvent, "state" | "bandwidth" | "outage">): void {
    const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
    if (
      ev.state === this.state &&
      same(ev.bandwidth, this.schedule) &&
      same(ev.outage, this.outage)
    ) {
      return;
    }
    this.state = ev.state;
    this.schedule = ev.bandwidth;
    this.outage = ev.outage;
    this.render();
  }

  /** Shows every card afresh (also each second: a value goes stale with time). */
  render(): void {
    for (const [d, card] of this.cards) {
      const candidates = d.keys.flatMap((key) => {
        const s = this.kept.get(key);
        if (s === undefined) return [];
        const values = s.points.flatMap((p) => (p.value === null ? [] : [p.value]));
        const periodMs =
          seriesPeriodS(this.schedule?.everyS[key], s.periodMs, this.periodS()) * 1000;
        return [{ key, s, values, last: s.points.at(-1)?.t, periodMs }];
      });
      // A series that only failed so far still shows (its failures are the news); one no
      // longer measured (its transport switched off) gives way to those that are.
      const lately = measuredLately(candidates);
      const chosen = pickSeries(lately, d.better) ?? lately[0] ?? candidates[0];
      const rest = lately.find((c) => c !== chosen && c.values.length > 0);
      const other = rest && { key: rest.key, median: median(rest.values.slice(-COMPARED))! };
      card.show(
        chosen?.s,
        chosen?.key ?? "",
        this.periodS(),
        other,
        this.state,
        d.better,
        this.schedule,
        this.outage,
      );
    }
    const spoken = [...this.cards.values()].flatMap((c) =>
      c.spoken === undefined ? [] : [c.spoken],
    );
    this.announcer.say(
      "headline",
      spoken.map((c) => c.gist).join("; "),
      spoken.length === 0 ? "" : `Latest: ${spoken.map((c) => c.text).join("; ")}.`,
      ANNOUNCE,
    );
  }
}
