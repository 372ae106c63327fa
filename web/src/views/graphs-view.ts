// The graphs (JavaNws §2.1.3): one per series (chart-view.ts), redrawn at most once a frame
// and not at all while hidden; measurements go on either way. The live graphs (the target's
// and the mirrors') share one time axis, so that a moment is at the same place in each;
// imported series keep their own.

import { SeriesChart } from "./chart-view";
import { xAxis } from "./chart-math";
import { el, placeInOrder, type Rank } from "./dom";

export class GraphsView {
  private readonly section = el("graphs-section");
  private readonly graphs = el("graphs");
  private readonly shown = el<HTMLInputElement>("show-graphs");
  /** Each graph, and whether it shares the time axis. */
  private readonly charts = new Map<SeriesChart, boolean>();
  /** The shared time axis in use (its column duration is kept while the data fit it). */
  private axis: { perPx: number; min: number; max: number } | undefined;
  private drawQueued = false;

  constructor(private readonly rank: Rank) {
    this.shown.addEventListener("change", () => {
      this.section.hidden = !this.shown.checked;
      if (this.shown.checked) this.drawAll();
    });
  }

  /** Adds a series' graph in its place; `aligned`: on the shared time axis. */
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
    if (this.drawQueued || !this.shown.checked) return;
    this.drawQueued = true;
    requestAnimationFrame(() => {
      this.drawQueued = false;
      this.drawAll();
    });
  }

  private drawAll(): void {
    const shared = this.sharedAxis();
    for (const [c, aligned] of this.charts) c.draw(aligned ? shared : undefined);
  }

  /** The time axis of the aligned graphs: all their times, on the narrowest plot's width
   *  (chart-math.ts `xAxis`). */
  private sharedAxis(): { min: number; max: number } | undefined {
    let x0 = Infinity;
    let x1 = -Infinity;
    let width = Infinity;
    for (const [c, aligned] of this.charts) {
      const e = aligned ? c.extent() : undefined;
      if (e === undefined) continue;
      x0 = Math.min(x0, e.x0);
      x1 = Math.max(x1, e.x1);
      const w = c.plotWidth();
      if (w > 0) width = Math.min(width, w);
    }
    if (!Number.isFinite(x0) || !Number.isFinite(width)) return (this.axis = undefined);
    this.axis = xAxis(x0, x1, width, this.axis?.perPx);
    return this.axis;
  }
}
