// One graph per series (JavaNws §2.1.3): measurements light, forecasts dark, the newest
// forecast one period ahead of the newest measurement, and a band of forecast ± k·error.
// Chart.js (imported piece by piece, so the page ships only what it draws) lays out the axes
// and the tooltips; the marks and the band are drawn by a plugin of this module, one path per
// kind, because 10,000 points drawn one path each by Chart.js cost more than a frame.

import {
  Chart,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartDataset,
  type Plugin,
} from "chart.js";
import { clock, formatValue } from "./format";
import type { NextForecast } from "./messages";

Chart.register(LineController, LineElement, PointElement, LinearScale, Tooltip);

/** Width of the band in forecast errors (√MSE): ±2 covers most of a normal error. */
export const BAND_K = 2;
/** Points kept on a graph; older ones scroll off (the worker's series keeps everything). */
export const MAX_POINTS = 10_000;

interface Point {
  x: number;
  y: number;
}

/** A forecast and its error (√MSE when it was made): the band is y ± BAND_K·e. */
interface Forecast extends Point {
  e: number;
}

const bandLow = (f: Forecast) => Math.max(0, f.y - BAND_K * f.e);
const bandHigh = (f: Forecast) => f.y + BAND_K * f.e;

/** One column of the band: from `x`, up to `hi` and down to `lo`. */
interface BandColumn {
  x: number;
  hi: number;
  lo: number;
}

/** Where the columns of a plot `columns` wide fall on the x axis from `x0` to `x1`. */
function columnOf(x0: number, x1: number, columns: number): (x: number) => number {
  const perMs = columns / Math.max(1, x1 - x0);
  return (x) => Math.floor((x - x0) * perMs);
}

/**
 * What a plot `columns` wide can show of `points` (sorted by x): in each column the lowest and
 * the highest point, in x order, and always the newest point. A spike keeps its column however
 * many points share it; a graph of 10,000 points draws about two per pixel. The points are
 * the caller's objects (tooltips read them); the array is new, so Chart.js never holds (and
 * patches) the caller's.
 */
function thin<T extends Point>(points: readonly T[], column: (x: number) => number): T[] {
  const out: T[] = [];
  let col = NaN;
  let lo = 0;
  let hi = 0;
  const flush = () => {
    if (Number.isNaN(col)) return;
    if (lo === hi) out.push(points[lo]!);
    else out.push(points[Math.min(lo, hi)]!, points[Math.max(lo, hi)]!);
  };
  for (let i = 0; i < points.length; i++) {
    const c = column(points[i]!.x);
    if (c !== col) {
      flush();
      col = c;
      lo = hi = i;
    } else {
      const y = points[i]!.y;
      if (y < points[lo]!.y) lo = i;
      if (y > points[hi]!.y) hi = i;
    }
  }
  flush();
  const last = points.at(-1);
  if (last !== undefined && out.at(-1) !== last) out.push(last);
  return out;
}

/** The band per column: the highest upper and the lowest lower bound of its forecasts, and
 *  the newest forecast's own, so the band reaches it. */
function bandColumns(forecasts: readonly Forecast[], column: (x: number) => number): BandColumn[] {
  const out: BandColumn[] = [];
  let col = NaN;
  for (const f of forecasts) {
    const c = column(f.x);
    const last = out.at(-1);
    if (c === col && last !== undefined) {
      last.hi = Math.max(last.hi, bandHigh(f));
      last.lo = Math.min(last.lo, bandLow(f));
    } else {
      col = c;
      out.push({ x: f.x, hi: bandHigh(f), lo: bandLow(f) });
    }
  }
  const newest = forecasts.at(-1);
  if (newest !== undefined && out.at(-1)!.x !== newest.x) {
    out.push({ x: newest.x, hi: bandHigh(newest), lo: bandLow(newest) });
  }
  return out;
}

/** Dataset order: the measurements, then the forecasts (Chart.js lays them out for the
 *  tooltips; drawingPlugin draws them, measurements over forecasts). */
const MEASURED = 0;
const FORECAST = 1;
/** Marks closer than this (CSS px, both ways) are drawn once: they would cover each other. */
const CELL_PX = 4;
/** Chart.js gets a column's extremes per this many CSS px: it only places the axes and the
 *  tooltips, and each point it holds costs it time on every update (0.3 ms of ~4 at 10,000). */
const TOOLTIP_PX = 16;

/** A linear scale's pixel for a value as plain arithmetic (at + (v − from)·per), for loops
 *  over thousands of points where a method call per coordinate shows. */
function linear(scale: { min: number; getPixelForValue(v: number): number }) {
  const from = scale.min;
  const at = scale.getPixelForValue(from);
  return { from, at, per: scale.getPixelForValue(from + 1) - at };
}

type Shape = "dot" | "diamond";
/** The size Chart.js gave these marks (radius 2 and 2.5 plus its 1-pixel border). */
const RADIUS: Record<Shape, number> = { dot: 2.5, diamond: 3 };

/** A mark on a square of `size` device pixels around its centre: each pixel's alpha
 *  (0–255) and its value ready to store (the colour at that alpha, as a 32-bit word). */
interface Sprite {
  size: number;
  half: number;
  coverage: Uint8Array;
  packed: Uint32Array;
  /** The colour's bytes where a word holds them (alpha bits 0). */
  rgb: number;
}

/** A mark of `radius` device pixels in `color` (RGBA, alpha 0–1), anti-aliased by 4×4
 *  samples a pixel. */
function sprite(shape: Shape, radius: number, color: readonly number[]): Sprite {
  const half = Math.ceil(radius);
  const size = 2 * half + 1;
  const cover = new Float32Array(size * size);
  const n = 4;
  for (let j = 0; j < size; j++) {
    for (let i = 0; i < size; i++) {
      let hits = 0;
      for (let sj = 0; sj < n; sj++) {
        for (let si = 0; si < n; si++) {
          const dx = i - half + (si + 0.5) / n - 0.5;
          const dy = j - half + (sj + 0.5) / n - 0.5;
          const inside =
            shape === "dot"
              ? dx * dx + dy * dy <= radius * radius
              : Math.abs(dx) + Math.abs(dy) <= radius;
          if (inside) hits++;
        }
      }
      cover[j * size + i] = hits / (n * n);
    }
  }
  const [r, g, b, alpha] = color as [number, number, number, number];
  const rgb = LITTLE_ENDIAN ? (b << 16) | (g << 8) | r : (r << 24) | (g << 16) | (b << 8);
  const coverage = Uint8Array.from(cover, (c) => Math.round(alpha * c * 255));
  const packed = Uint32Array.from(coverage, (a) => (LITTLE_ENDIAN ? (a << 24) | rgb : rgb | a));
  return { size, half, coverage, packed, rgb };
}

/** Whether this machine stores a 32-bit word's low byte first (RGBA bytes = ABGR words). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** A CSS colour as RGBA (0–255 each, alpha 0–1), as the browser parses it. */
function rgba(css: string): [number, number, number, number] {
  const c = document.createElement("canvas").getContext("2d", { willReadFrequently: true });
  if (c === null) return [0, 0, 0, 1];
  c.fillStyle = css;
  c.fillRect(0, 0, 1, 1);
  const [r, g, b, a] = c.getImageData(0, 0, 1, 1).data;
  return [r!, g!, b!, a! / 255];
}

/**
 * The marks of a graph, drawn on a canvas laid over Chart.js's: thousands of anti-aliased
 * paths cost the 2D canvas ~2 ms to record and rasterise on every redraw, while stamping
 * pre-computed sprites into one ImageData and putting it costs a fraction of that. Each
 * series is drawn from all its points, one mark per cell of CELL_PX where several fall, so a
 * dense graph keeps its cloud and its outliers; the forecasts' diamonds first, the
 * measurements' dots over them (source-over blending).
 */
class MarkLayer {
  readonly canvas = document.createElement("canvas");
  private readonly ctx: CanvasRenderingContext2D | null;
  private image: ImageData | undefined;
  private seen = new Uint8Array(0);
  private sprites = new Map<string, Sprite>();

  constructor() {
    this.canvas.setAttribute("aria-hidden", "true");
    this.canvas.style.cssText = "position:absolute;left:0;top:0;pointer-events:none";
    this.ctx = this.canvas.getContext("2d");
  }

  private spriteFor(shape: Shape, dpr: number, color: readonly number[]): Sprite {
    const key = `${shape}@${dpr}/${color.join()}`;
    let s = this.sprites.get(key);
    if (s === undefined) {
      s = sprite(shape, RADIUS[shape] * dpr, color);
      this.sprites.set(key, s);
    }
    return s;
  }

  draw(
    chart: Chart<"line">,
    layers: readonly { points: readonly Point[]; shape: Shape; color: readonly number[] }[],
  ): void {
    const ctx = this.ctx;
    if (ctx === null) return;
    const main = chart.canvas;
    if (
      this.image === undefined ||
      this.canvas.width !== main.width ||
      this.canvas.height !== main.height
    ) {
      this.canvas.width = main.width;
      this.canvas.height = main.height;
      this.image = ctx.createImageData(Math.max(1, main.width), Math.max(1, main.height));
    } else {
      this.image.data.fill(0);
    }
    this.canvas.style.width = main.style.width;
    this.canvas.style.height = main.style.height;
    const { data, width: w } = this.image;
    const words = new Uint32Array(data.buffer, data.byteOffset, data.length / 4);
    const dpr = chart.currentDevicePixelRatio;
    const a = chart.chartArea;
    // The chart area in device pixels: marks are clipped to it, as Chart.js clips its own.
    const left = Math.floor(a.left * dpr);
    const right = Math.ceil(a.right * dpr);
    const top = Math.floor(a.top * dpr);
    const bottom = Math.ceil(a.bottom * dpr);
    const toX = linear(chart.scales.x!);
    const toY = linear(chart.scales.y!);
    const cols = Math.ceil((a.right - a.left) / CELL_PX) + 1;
    const cells = cols * (Math.ceil((a.bottom - a.top) / CELL_PX) + 1);
    for (const { points, shape, color } of layers) {
      if (this.seen.length < cells) this.seen = new Uint8Array(cells);
      else this.seen.fill(0, 0, cells);
      const { size, half, coverage, packed, rgb } = this.spriteFor(shape, dpr, color);
      const [r, g, b] = color as [number, number, number, number];
      const rgbMask = LITTLE_ENDIAN ? 0x00ffffff : 0xffffff00;
      for (const p of points) {
        const x = toX.at + (p.x - toX.from) * toX.per;
        const y = toY.at + (p.y - toY.from) * toY.per;
        if (!(x >= a.left && x <= a.right && y >= a.top && y <= a.bottom)) continue;
        const cell = Math.floor((y - a.top) / CELL_PX) * cols + Math.floor((x - a.left) / CELL_PX);
        if (this.seen[cell] === 1) continue;
        this.seen[cell] = 1;
        const x0 = Math.floor(x * dpr) - half;
        const y0 = Math.floor(y * dpr) - half;
        for (let j = 0; j < size; j++) {
          const py = y0 + j;
          if (py < top || py >= bottom) continue;
          for (let i = 0; i < size; i++) {
            const px = x0 + i;
            if (px < left || px >= right) continue;
            const s = j * size + i;
            const sa = coverage[s]!;
            if (sa === 0) continue;
            const at = py * w + px;
            const under = words[at]!;
            if (under === 0) {
              // Nothing under it yet (the usual case).
              words[at] = packed[s]!;
              continue;
            }
            const k = 4 * at;
            const da = data[k + 3]! / 255;
            const sf = sa / 255;
            const out = sf + da * (1 - sf);
            if (((under ^ rgb) & rgbMask) === 0) {
              // The same colour under it (a neighbouring mark of the series): alpha only.
              data[k + 3] = out * 255;
              continue;
            }
            const keep = (da * (1 - sf)) / out;
            const put = sf / out;
            data[k] = r * put + data[k]! * keep;
            data[k + 1] = g * put + data[k + 1]! * keep;
            data[k + 2] = b * put + data[k + 2]! * keep;
            data[k + 3] = out * 255;
          }
        }
      }
    }
    ctx.putImageData(this.image, 0, 0);
  }
}

/**
 * Draws the band of forecast ± k·error (a polygon along its columns) on Chart.js's canvas,
 * under everything, and the marks on the layer above it once Chart.js has drawn. Chart.js lays
 * out the axes, the tooltips and the hovered point from datasets thinned per column (`thin`)
 * whose own points have radius 0.
 */
function drawingPlugin(
  series: () => {
    band: readonly BandColumn[];
    measured: readonly Point[];
    forecasts: readonly Point[];
  },
  style: { band: string; measured: string; forecast: string },
  layer: MarkLayer,
): Plugin<"line"> {
  const measuredColor = rgba(style.measured);
  const forecastColor = rgba(style.forecast);
  return {
    id: "nowcastDrawing",
    afterDataLimits(chart, args) {
      // The y axis must hold the whole band, not just the points.
      const scale = args.scale;
      if (scale.axis !== "y") return;
      for (const c of series().band) {
        scale.max = Math.max(scale.max, c.hi);
        scale.min = Math.min(scale.min, c.lo);
      }
    },
    beforeDatasetsDraw(chart) {
      const { band } = series();
      if (band.length === 0) return;
      const { ctx, chartArea: a } = chart;
      const xs = chart.scales.x!;
      const ys = chart.scales.y!;
      ctx.save();
      ctx.beginPath();
      ctx.rect(a.left, a.top, a.right - a.left, a.bottom - a.top);
      ctx.clip();
      ctx.beginPath();
      for (const c of band) ctx.lineTo(xs.getPixelForValue(c.x), ys.getPixelForValue(c.hi));
      for (let i = band.length - 1; i >= 0; i--) {
        ctx.lineTo(xs.getPixelForValue(band[i]!.x), ys.getPixelForValue(band[i]!.lo));
      }
      ctx.closePath();
      ctx.fillStyle = style.band;
      ctx.fill();
      ctx.restore();
    },
    afterDraw(chart) {
      const { measured, forecasts } = series();
      layer.draw(chart, [
        { points: forecasts, shape: "diamond", color: forecastColor },
        { points: measured, shape: "dot", color: measuredColor },
      ]);
    },
  };
}

/**
 * The key under a graph's title, in the page's text rather than on the canvas (a screen
 * reader reads it, and the page does not ship Chart.js's legend): a mark in each colour, then
 * what it stands for.
 */
function key(entries: [glyph: string, color: string, label: string][]): HTMLElement {
  const p = document.createElement("p");
  p.className = "graph-key";
  p.style.margin = "0 0 0.25rem";
  p.style.fontSize = "0.85rem";
  for (const [glyph, color, label] of entries) {
    const entry = document.createElement("span");
    entry.style.marginRight = "0.75rem";
    const mark = document.createElement("span");
    mark.setAttribute("aria-hidden", "true");
    mark.textContent = glyph;
    mark.style.color = color;
    entry.append(mark, ` ${label}`);
    p.append(entry);
  }
  return p;
}

export class SeriesChart {
  readonly figure: HTMLElement;
  private readonly box: HTMLElement;
  private readonly chart: Chart<"line", Point[]>;
  private readonly measured: Point[] = [];
  private readonly forecasts: Forecast[] = [];
  private band: BandColumn[] = [];
  private readonly marks = new MarkLayer();
  /** Whether the last forecast point is the pending one, plotted one step ahead. */
  private pending = false;
  private dirty = false;

  constructor(parent: HTMLElement, title: string, unit: string) {
    const css = getComputedStyle(document.documentElement);
    const color = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback;
    const light = color("--measured", "#7fb3e6");
    const dark = color("--forecast", "#0b3d91");
    const band = color("--band", "rgba(11, 61, 145, 0.15)");
    const text = color("--text", "#222");
    const grid = color("--grid", "rgba(128,128,128,0.2)");

    this.figure = document.createElement("figure");
    this.figure.className = "graph";
    const caption = document.createElement("figcaption");
    caption.textContent = `${title} (${unit})`;
    this.box = document.createElement("div");
    this.box.className = "graph-box";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", `${title}: measurements and forecasts over time`);
    this.box.append(canvas, this.marks.canvas);
    const legend = key([
      ["●", light, "measured"],
      ["◆", dark, "forecast"],
      ["■", band, `forecast ± ${BAND_K}·error`],
    ]);
    this.figure.append(caption, legend, this.box);
    parent.append(this.figure);

    // Points only, drawn by drawingPlugin; Chart.js draws the hovered one.
    const points = (label: string, fill: string, style: "circle" | "rectRot") =>
      ({
        label,
        data: [],
        showLine: false,
        pointRadius: 0,
        pointHoverRadius: 4,
        pointStyle: style,
        pointBorderWidth: 0,
        pointBackgroundColor: fill,
        backgroundColor: fill,
        borderColor: fill,
      }) as ChartDataset<"line", Point[]>;
    this.chart = new Chart<"line", Point[]>(canvas, {
      type: "line",
      data: {
        datasets: [points("measured", light, "circle"), points("forecast", dark, "rectRot")],
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        parsing: false,
        normalized: true,
        interaction: { mode: "nearest", intersect: false },
        // A new width needs new columns.
        onResize: () => {
          this.dirty = true;
          requestAnimationFrame(() => this.draw());
        },
        scales: {
          x: {
            type: "linear",
            // The axis ends at the newest forecast, not at the next round tick.
            bounds: "data",
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
          tooltip: {
            callbacks: {
              title: (items) => clock(items[0]?.parsed.x ?? 0),
              label: (item) => {
                const value = `${item.dataset.label}: ${formatValue(item.parsed.y ?? 0, unit)}`;
                const e = (item.raw as Partial<Forecast>).e;
                return e === undefined ? value : `${value} ± ${formatValue(BAND_K * e, unit)}`;
              },
            },
          },
        },
      },
      plugins: [
        drawingPlugin(
          () => ({ band: this.band, measured: this.measured, forecasts: this.forecasts }),
          { band, measured: light, forecast: dark },
          this.marks,
        ),
      ],
    });
  }

  /**
   * Adds a measurement at `x` and the forecast of the next one at `x + stepMs`. The forecast
   * made for this measurement moves from its guessed time to the measurement's own.
   */
  add(x: number, value: number | null, next: NextForecast | undefined, stepMs: number): void {
    if (this.pending) this.forecasts[this.forecasts.length - 1]!.x = x;
    if (value !== null) this.measured.push({ x, y: value });
    this.pending = next !== undefined;
    if (next !== undefined) this.forecasts.push({ x: x + stepMs, y: next.value, e: next.error });
    for (const list of [this.measured, this.forecasts]) {
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
    const { measured, forecasts } = this;
    const x0 = Math.min(measured[0]?.x ?? Infinity, forecasts[0]?.x ?? Infinity);
    const x1 = Math.max(measured.at(-1)?.x ?? -Infinity, forecasts.at(-1)?.x ?? -Infinity);
    // The band has a column per CSS pixel of the box (the plot is a little narrower); Chart.js,
    // which only places the tooltips and the axes (the extremes are kept), one per
    // TOOLTIP_PX. A hidden graph (width 0) is redrawn on resize.
    const width = Math.max(1, this.box.clientWidth);
    const perMark = columnOf(x0, x1, width / TOOLTIP_PX);
    const sets = this.chart.data.datasets;
    sets[MEASURED]!.data = thin(measured, perMark);
    sets[FORECAST]!.data = thin(forecasts, perMark);
    this.band = bandColumns(forecasts, columnOf(x0, x1, width));
    this.chart.update("none");
    const d = this.figure.dataset;
    d.measurements = String(measured.length);
    d.forecasts = String(forecasts.length);
    d.lastMeasuredX = String(measured.at(-1)?.x ?? "");
    d.lastForecastX = String(forecasts.at(-1)?.x ?? "");
  }
}
