// The graphs (JavaNws §2.1.3): one per series (chart-view.ts), redrawn at most once a frame
// and not at all while hidden; measurements go on either way. The live graphs (the target's
// and the mirrors') share one time axis, so that a moment is at the same place in each;
// imported series keep their own. While the byte budget spaces bandwidth probes further apart
// than the period (engine/round.ts), the graphs of those slower series share a second axis:
// their next forecast stands minutes ahead, and on the one axis it would squeeze every
// graph measured each period into a sliver at its left.

import { SeriesChart } from "./chart-view";
import { paceOf, xAxis, type Pace } from "./chart-math";
import { el, OncePerFrame, placeInOrder, type Rank } from "./dom";

export class GraphsView {
  private readonly section = el("graphs-section");
  private readonly graphs = el("graphs");
  private readonly shown = el<HTMLInputElement>("show-graphs");
  /** Each graph, and whether it shares a time axis. */
  private readonly charts = new Map<SeriesChart, boolean>();
  /** The shared time axes in use (each one's column duration is kept while the data fit it). */
  private readonly axes = new Map<Pace, { perPx: number; min: number; max: number }>();
  private readonly draw = new OncePerFrame(() => this.drawAll());

  constructor(private readonly rank: Rank) {
    this.shown.addEventListener("change", () => {
      this.section.hidden = !this.shown.checked;
      if (this.shown.checked) this.drawAll();
    });
  }

  /** Adds a series' graph in its place; `aligned`: on a shared time axis. */
  add(key: string, title: string, unit: string, aligned: boolean): SeriesChart {
    const chart = new SeriesChart(
      this.graphs,
      title,
      unit,
      aligned ? () => this.requestDraw() : undefined,
    );
    placeInOrder(this.graphs, chart.figure, key, this.rank);
    this.charts.set(chart, aligned);
    return chart;
  }

  remove(chart: SeriesChart): void {
    chart.destroy();
    this.charts.delete(chart);
  }

  /** Redraws what changed, once, at the next frame. */
  requestDraw(): void {
    if (this.shown.checked) this.draw.request();
  }

  private drawAll(): void {
    const aligned = [...this.charts].filter(([, a]) => a).map(([c]) => c);
    const paces = paceOf(aligned.map((c) => c.step));
    const paceOfChart = new Map(aligned.map((c, i) => [c, paces[i]!]));
    const shared = new Map(
      (["period", "spaced"] as const).map((pace) => [
        pace,
        this.sharedAxis(
          pace,
          aligned.filter((c) => paceOfChart.get(c) === pace),
        ),
      ]),
    );
    for (const c of this.charts.keys()) {
      const pace = paceOfChart.get(c);
      c.draw(pace === undefined ? undefined : shared.get(pace));
    }
  }

  /** The time axis of the graphs of one pace: all their times, on the narrowest plot's width
   *  (chart-math.ts `xAxis`). */
  private sharedAxis(
    pace: Pace,
    charts: readonly SeriesChart[],
  ): { min: number; max: number } | undefined {
    let x0 = Infinity;
    let x1 = -Infinity;
    let width = Infinity;
    for (const c of charts) {
      const e = c.extent();
      if (e === undefined) continue;
      x0 = Math.min(x0, e.x0);
      x1 = Math.max(x1, e.x1);
      const w = c.plotWidth();
      if (w > 0) width = Math.min(width, w);
    }
    if (!Number.isFinite(x0) || !Number.isFinite(width)) {
      this.axes.delete(pace);
      return undefined;
    }
    const axis = xAxis(x0, x1, width, this.axes.get(pace)?.perPx);
    this.axes.set(pace, axis);
    return axis;
  }
}
