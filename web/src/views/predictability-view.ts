// The predictability view (JavaNws §5): for one series, the histogram (100 bins, min..max) and
// the empirical CDF of its forecast errors, and every forecaster's MSE and MAE with the one in
// use marked.

import { Chart, type ChartDataset } from "chart.js";
import { formatValue, significant } from "../format";
import type { PredictabilityEvent } from "../messages";
import { el } from "./dom";

interface Point {
  x: number;
  y: number;
}

function lineChart(parent: HTMLElement, label: string, xTitle: string, yTitle: string) {
  const figure = document.createElement("figure");
  figure.className = "graph";
  const caption = document.createElement("figcaption");
  caption.textContent = label;
  const box = document.createElement("div");
  box.className = "graph-box";
  const canvas = document.createElement("canvas");
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  box.append(canvas);
  figure.append(caption, box);
  parent.append(figure);
  const css = getComputedStyle(document.documentElement);
  const text = css.getPropertyValue("--text").trim();
  const grid = css.getPropertyValue("--grid").trim();
  const dark = css.getPropertyValue("--forecast").trim();
  const data: Point[] = [];
  const dataset: ChartDataset<"line", Point[]> = {
    label,
    data,
    parsing: false,
    borderColor: dark,
    backgroundColor: css.getPropertyValue("--band").trim(),
    pointRadius: 0,
    borderWidth: 1.5,
  };
  const axis = (title: string) => ({
    ticks: {
      color: text,
      maxTicksLimit: 6,
      callback: (v: string | number) => significant(Number(v)),
    },
    grid: { color: grid },
    title: { display: true, text: title, color: text },
  });
  const chart = new Chart<"line", Point[]>(canvas, {
    type: "line",
    data: { datasets: [dataset] },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      scales: { x: { type: "linear", ...axis(xTitle) }, y: { ...axis(yTitle), min: 0 } },
      plugins: { legend: { display: false } },
    },
  });
  return { chart, dataset, data, figure };
}

class PredictabilityView {
  private readonly histogram;
  private readonly cdf;
  private readonly table: HTMLTableElement;

  constructor(parent: HTMLElement) {
    this.histogram = lineChart(parent, "Forecast errors: histogram", "error", "count");
    this.histogram.dataset.stepped = "before";
    this.histogram.dataset.fill = "origin";
    this.cdf = lineChart(
      parent,
      "Forecast errors: cumulative distribution",
      "error",
      "fraction ≤ error",
    );
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    // It scrolls sideways on a phone: focusable so the keyboard can scroll it, and named.
    wrap.tabIndex = 0;
    wrap.setAttribute("role", "region");
    wrap.setAttribute("aria-label", "Forecasters (scrollable)");
    this.table = document.createElement("table");
    wrap.append(this.table);
    parent.append(wrap);
  }

  show(p: PredictabilityEvent, title: string, unit: string): void {
    const h = p.histogram;
    this.histogram.data.length = 0;
    if (h !== undefined) {
      const width = (h.max - h.min) / h.counts.length;
      h.counts.forEach((c, i) => this.histogram.data.push({ x: h.min + i * width, y: c }));
      this.histogram.data.push({ x: h.max, y: h.counts.at(-1) ?? 0 });
    }
    this.cdf.data.length = 0;
    for (const { x, p: frac } of p.cdf) this.cdf.data.push({ x, y: frac });
    for (const c of [this.histogram, this.cdf]) {
      c.chart.update("none");
      c.figure.dataset.points = String(c.data.length);
    }

    this.table.replaceChildren();
    const caption = this.table.createCaption();
    caption.textContent = `Every forecaster on ${title}; the one in use is marked`;
    const head = this.table.createTHead().insertRow();
    for (const name of ["Forecaster", "Next forecast", "MSE", "MAE", "Values"]) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = name;
      head.append(th);
    }
    const body = this.table.createTBody();
    for (const row of p.table) {
      const tr = body.insertRow();
      const inUse = row.id === p.selected;
      if (inUse) tr.className = "in-use";
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = inUse ? `${row.name} (in use)` : row.name;
      tr.append(th);
      const cells = [
        row.forecast === null ? "–" : formatValue(row.forecast, unit),
        row.n === 0 ? "–" : significant(row.mse),
        row.n === 0 ? "–" : formatValue(row.mae, unit),
        String(row.n),
      ];
      for (const text of cells) tr.insertCell().textContent = text;
    }
  }
}

/** The predictability section: the choice of series, and its analysis when the worker sends
 *  it. */
export class PredictabilityPanel {
  private readonly select = el<HTMLSelectElement>("predictability-series");
  private readonly view = new PredictabilityView(el("predictability"));

  /** @param ask requests the analysis of the series shown under `key`. */
  constructor(ask: (key: string) => void) {
    const analyse = () => {
      if (this.select.value !== "") ask(this.select.value);
    };
    el("predictability-refresh").addEventListener("click", analyse);
    this.select.addEventListener("change", analyse);
  }

  offer(key: string, title: string): void {
    this.select.add(new Option(title, key));
  }

  withdraw(key: string): void {
    [...this.select.options].find((o) => o.value === key)?.remove();
  }

  show(p: PredictabilityEvent, title: string, unit: string): void {
    this.view.show(p, title, unit);
  }
}
