// The graphs (JavaNws §2.1.3): one per series (chart-view.ts), redrawn at most once a frame
// and not at all while hidden; measurements go on either way.

import { SeriesChart } from "./chart-view";
import { el, placeInOrder, type Rank } from "./dom";

export class GraphsView {
  private readonly section = el("graphs-section");
  private readonly graphs = el("graphs");
  private readonly shown = el<HTMLInputElement>("show-graphs");
  private readonly charts = new Set<SeriesChart>();
  private drawQueued = false;

  constructor(private readonly rank: Rank) {
    this.shown.addEventListener("change", () => {
      this.section.hidden = !this.shown.checked;
      if (this.shown.checked) for (const c of this.charts) c.draw();
    });
  }

  /** Adds a series' graph in its place. */
  add(key: string, title: string, unit: string): SeriesChart {
    const chart = new SeriesChart(this.graphs, title, unit);
    placeInOrder(this.graphs, chart.figure, key, this.rank);
    this.charts.add(chart);
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
      for (const c of this.charts) c.draw();
    });
  }
}
