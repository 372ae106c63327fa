// One graph per series (JavaNws §2.1.3): measurements light, forecasts dark, the newest
// forecast one period ahead of the newest measurement, and a band of forecast ± k·error.
// Chart.js is imported piece by piece so the page ships only what it draws.

import {
  Chart,
  Decimation,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartDataset,
} from "chart.js";
import { clock, formatValue } from "./format";
import type { NextForecast } from "./messages";

Chart.register(
  LineController,
  LineElement,
  PointElement,
  LinearScale,
  Filler,
  Tooltip,
  Legend,
  Decimation,
);

/** Width of the band in forecast errors (√MSE): ±2 covers most of a normal error. */
export const BAND_K = 2;
/** Points kept on a graph; older ones scroll off (the worker's series keeps everything). */
export const MAX_POINTS = 10_000;

interface Point {
  x: number;
  y: number;
}

export class SeriesChart {
  readonly figure: HTMLElement;
  private readonly chart: Chart<"line", Point[]>;
  private readonly measured: Point[] = [];
  private readonly forecasts: Point[] = [];
  private readonly upper: Point[] = [];
  private readonly lower: Point[] = [];
  /** Whether the last forecast point is the pending one, plotted one step ahead. */
  private pending = false;
  private dirty = false;

  constructor(parent: HTMLElement, title: string, unit: string) {
    this.figure = document.createElement("figure");
    this.figure.className = "graph";
    const caption = document.createElement("figcaption");
    caption.textContent = `${title} (${unit})`;
    const box = document.createElement("div");
    box.className = "graph-box";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", `${title}: measurements and forecasts over time`);
    box.append(canvas);
    this.figure.append(caption, box);
    parent.append(this.figure);

    const css = getComputedStyle(document.documentElement);
    const color = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback;
    const light = color("--measured", "#7fb3e6");
    const dark = color("--forecast", "#0b3d91");
    const band = color("--band", "rgba(11, 61, 145, 0.15)");
    const text = color("--text", "#222");
    const grid = color("--grid", "rgba(128,128,128,0.2)");
    const line = (label: string, data: Point[], extra: Partial<ChartDataset<"line", Point[]>>) =>
      ({
        label,
        data,
        parsing: false,
        normalized: true,
        pointRadius: 0,
        borderWidth: 0,
        ...extra,
      }) as ChartDataset<"line", Point[]>;
    this.chart = new Chart<"line", Point[]>(canvas, {
      type: "line",
      data: {
        datasets: [
          line(`forecast ± ${BAND_K}·error`, this.upper, { fill: "+1", backgroundColor: band }),
          line("forecast − k·error", this.lower, { fill: false }),
          line("measured", this.measured, {
            showLine: false,
            pointRadius: 2,
            pointBackgroundColor: light,
            pointBorderColor: light,
            backgroundColor: light,
            borderColor: light,
          }),
          line("forecast", this.forecasts, {
            showLine: false,
            pointRadius: 2.5,
            pointStyle: "rectRot",
            pointBackgroundColor: dark,
            pointBorderColor: dark,
            backgroundColor: dark,
            borderColor: dark,
          }),
        ],
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        parsing: false,
        normalized: true,
        interaction: { mode: "nearest", intersect: false },
        scales: {
          x: {
            type: "linear",
            ticks: { color: text, maxTicksLimit: 6, callback: (v) => clock(Number(v)) },
            grid: { color: grid },
          },
          y: {
            ticks: { color: text, callback: (v) => formatValue(Number(v), unit) },
            grid: { color: grid },
            title: { display: true, text: unit, color: text },
          },
        },
        plugins: {
          legend: {
            labels: {
              color: text,
              filter: (item) => !item.text.includes("−"),
            },
          },
          tooltip: {
            callbacks: {
              title: (items) => clock(items[0]?.parsed.x ?? 0),
              label: (item) => `${item.dataset.label}: ${formatValue(item.parsed.y ?? 0, unit)}`,
            },
          },
          decimation: { enabled: true, algorithm: "lttb", samples: 1000, threshold: 2000 },
        },
      },
    });
  }

  /**
   * Adds a measurement at `x` and the forecast of the next one at `x + stepMs`. The forecast
   * made for this measurement moves from its guessed time to the measurement's own.
   */
  add(x: number, value: number | null, next: NextForecast | undefined, stepMs: number): void {
    if (this.pending) {
      const last = this.forecasts.length - 1;
      this.forecasts[last]!.x = x;
      this.upper[last]!.x = x;
      this.lower[last]!.x = x;
    }
    if (value !== null) this.measured.push({ x, y: value });
    this.pending = next !== undefined;
    if (next !== undefined) {
      const at = x + stepMs;
      this.forecasts.push({ x: at, y: next.value });
      this.upper.push({ x: at, y: next.value + BAND_K * next.error });
      this.lower.push({ x: at, y: Math.max(0, next.value - BAND_K * next.error) });
    }
    for (const list of [this.measured, this.forecasts, this.upper, this.lower]) {
      if (list.length > MAX_POINTS) list.splice(0, list.length - MAX_POINTS);
    }
    this.dirty = true;
  }

  /** Removes the graph from the page and frees the chart. */
  destroy(): void {
    this.chart.destroy();
    this.figure.remove();
  }

  /** Redraws if anything changed; the figure's data attributes say what is plotted. */
  draw(): void {
    if (!this.dirty) return;
    this.dirty = false;
    this.chart.update("none");
    const d = this.figure.dataset;
    d.measurements = String(this.measured.length);
    d.forecasts = String(this.forecasts.length);
    d.lastMeasuredX = String(this.measured.at(-1)?.x ?? "");
    d.lastForecastX = String(this.forecasts.at(-1)?.x ?? "");
  }
}
