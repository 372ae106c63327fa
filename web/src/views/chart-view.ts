// One graph per series (JavaNws §2.1.3): measurements as blue dots, forecasts as orange
// diamonds (hue and shape both differ), the newest forecast one period ahead of the newest
// measurement, a band of forecast ± k·error that breaks where probes stopped and is cut to
// the height the points need, stripes where probes failed, and a sentence that says in words
// what the graph shows (for a screen reader, and for anyone).
//
// Three canvases on top of each other: the band (one polygon), Chart.js's (axes, grid,
// tooltips and the hovered point) and the marks (sprites stamped into one ImageData). Chart.js
// lays out only when an axis changes. The x axis moves in whole columns of a fixed duration
// (a CSS pixel's worth of time), chosen anew only when the data no longer fits, and the y
// axis changes only with the extremes of the data; between those a new point redraws the band
// and the marks alone, and Chart.js's tooltip data is brought up to date when a pointer
// comes over the graph. A graph of 10,000 points then costs a millisecond or two per point,
// where a full Chart.js layout and render costs about two on its own.

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
import {
  clock,
  clockIn,
  clockTickLabel,
  clockTicks,
  displayUnit,
  formatValue,
  formatWithError,
  tickLabels,
} from "../format";
import { thin, WindowExtreme, xAxis, yAxisHolds, yLimits, type Point } from "./chart-math";
import { BAND_K, type NextForecast } from "../messages";

Chart.register(LineController, LineElement, PointElement, LinearScale, Tooltip);

/** Points kept on a graph; older ones scroll off (their series' forecasters saw them all). */
export const MAX_POINTS = 10_000;

/** A forecast and its error (√MSE when it was made): the band is y ± BAND_K·e. */
interface Forecast extends Point {
  e: number;
  /** The band breaks before this forecast: the one before it is far older (a gap). */
  gap?: boolean;
}

/** Forecasts further apart than this many periods (or typical spacings, whichever is
 *  longer) have a gap between them: the band is not drawn across it. */
const GAP_STEPS = 3;

const bandLow = (f: Forecast) => Math.max(0, f.y - BAND_K * f.e);
const bandHigh = (f: Forecast) => f.y + BAND_K * f.e;

/** One column of the band: from `x` (its first forecast), up to `hi` and down to `lo`;
 *  `gap` when the band breaks before it. */
interface BandColumn {
  col: number;
  x: number;
  hi: number;
  lo: number;
  gap: boolean;
}

/** The room a time tick's label takes on the x axis, with space around it (CSS px). */
const TIME_LABEL_PX = 80;

/** Dataset order: the measurements, then the forecasts (Chart.js lays them out for the
 *  tooltips and the hovered point; the mark layer draws them). */
const MEASURED = 0;
const FORECAST = 1;
/** Marks closer than this (CSS px, both ways) are drawn once: they would cover each other. */
const CELL_PX = 4;
/** Chart.js gets a column's extremes per this many CSS px: it only places the axes and the
 *  tooltips, and each point it holds costs it time on every update. */
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
 * The band of forecast ± k·error, one polygon along its columns, on a canvas under Chart.js's
 * (so the grid shows through it), clipped to the plot.
 */
class BandLayer {
  readonly canvas = document.createElement("canvas");
  private readonly ctx: CanvasRenderingContext2D | null;

  constructor(private readonly color: string) {
    this.canvas.setAttribute("aria-hidden", "true");
    this.canvas.style.cssText = "position:absolute;left:0;top:0;pointer-events:none";
    this.ctx = this.canvas.getContext("2d");
  }

  draw(
    chart: Chart<"line">,
    columns: readonly BandColumn[],
    newest: Forecast | undefined,
    failures: readonly number[],
    failedColor: string,
  ): void {
    const ctx = this.ctx;
    if (ctx === null) return;
    const main = chart.canvas;
    if (this.canvas.width !== main.width || this.canvas.height !== main.height) {
      this.canvas.width = main.width;
      this.canvas.height = main.height;
    } else {
      ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    }
    this.canvas.style.width = main.style.width;
    this.canvas.style.height = main.style.height;
    if (columns.length === 0 && newest === undefined && failures.length === 0) return;
    const dpr = chart.currentDevicePixelRatio;
    const a = chart.chartArea;
    const toX = linear(chart.scales.x!);
    const toY = linear(chart.scales.y!);
    const px = (x: number) => toX.at + (x - toX.from) * toX.per;
    const py = (y: number) => toY.at + (y - toY.from) * toY.per;
    ctx.save();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.beginPath();
    ctx.rect(a.left, a.top, a.right - a.left, a.bottom - a.top);
    ctx.clip();
    // A failed probe: a stripe the height of the plot, at least a pixel wide.
    ctx.fillStyle = failedColor;
    for (const x of failures) ctx.fillRect(px(x) - 1, a.top, 2, a.bottom - a.top);
    // One polygon per run of columns between gaps; the newest forecast is not yet in a column
    // (its time moves when it is measured) and ends the last run.
    ctx.fillStyle = this.color;
    let start = 0;
    for (let i = 1; i <= columns.length; i++) {
      if (i < columns.length && !columns[i]!.gap) continue;
      const run = columns.slice(start, i);
      const last = i === columns.length;
      this.polygon(ctx, run, last ? newest : undefined, px, py);
      start = i;
    }
    if (columns.length === 0 && newest !== undefined) this.polygon(ctx, [], newest, px, py);
    ctx.restore();
  }

  private polygon(
    ctx: CanvasRenderingContext2D,
    run: readonly BandColumn[],
    newest: Forecast | undefined,
    px: (x: number) => number,
    py: (y: number) => number,
  ): void {
    ctx.beginPath();
    for (const c of run) ctx.lineTo(px(c.x), py(c.hi));
    if (newest !== undefined) {
      ctx.lineTo(px(newest.x), py(bandHigh(newest)));
      ctx.lineTo(px(newest.x), py(bandLow(newest)));
    }
    for (let i = run.length - 1; i >= 0; i--) ctx.lineTo(px(run[i]!.x), py(run[i]!.lo));
    ctx.closePath();
    ctx.fill();
  }
}

/** Makes Chart.js's y axis hold every point the graph has (not only those it was given),
 *  with a margin; the band is cut to it (chart-math.ts `yLimits`). */
function pointLimits(extremes: () => { lo: number | undefined; hi: number | undefined }): Plugin {
  return {
    id: "nowcastPointLimits",
    afterDataLimits(_chart, args) {
      const scale = args.scale;
      if (scale.axis !== "y") return;
      const { lo, hi } = extremes();
      if (lo === undefined || hi === undefined) return;
      const limits = yLimits(lo, hi);
      scale.min = limits.min;
      scale.max = limits.max;
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

/** A graph's caption: its title and its unit, if it has one. */
const captionOf = (title: string, unit: string) => (unit === "" ? title : `${title} (${unit})`);

/** Numbers the graphs' summaries (their ids). */
let summaries = 0;

export class SeriesChart {
  readonly figure: HTMLElement;
  private readonly box: HTMLElement;
  private readonly chart: Chart<"line", Point[]>;
  private readonly band: BandLayer;
  private readonly marks = new MarkLayer();
  private readonly measuredColor: readonly number[];
  private readonly forecastColor: readonly number[];
  private readonly measured: Point[] = [];
  private readonly forecasts: Forecast[] = [];
  /** How many points have scrolled off the front (so the n-th point ever added is
   *  `measured[n − measuredGone]`): the window extremes number their values this way. */
  private measuredGone = 0;
  private forecastsGone = 0;
  private readonly measuredMin = new WindowExtreme((a, b) => a < b);
  private readonly measuredMax = new WindowExtreme((a, b) => a > b);
  private readonly forecastMin = new WindowExtreme((a, b) => a < b);
  private readonly forecastMax = new WindowExtreme((a, b) => a > b);
  /** Times of the probes that failed (no value, no forecast), oldest first. */
  private readonly failures: number[] = [];
  private readonly failedColor: string;
  /** The typical spacing of the settled forecasts (ms), for telling a gap (GAP_STEPS). */
  private spacing: number | undefined;
  private readonly title: string;
  private readonly unit: string;
  private readonly caption: HTMLElement;
  /** The unit the y axis is labelled in (Mbit/s or Gbit/s for a rate, by its largest value). */
  private axisUnit: string;
  private readonly summary: HTMLElement;
  /** The band per column of the x axis's duration, for the forecasts whose time is final. */
  private columns: BandColumn[] = [];
  /** The x axis in use: its column duration (ms per CSS px) and its ends. */
  private axis: { perPx: number; min: number; max: number } | undefined;
  /** What Chart.js last laid out: the x axis's ends, and the y axis for the extremes of the
   *  data on y. */
  private laidOut:
    | {
        min: number;
        max: number;
        /** The y axis Chart.js made of them. */
        y: { min: number; max: number };
        lo: number | undefined;
        hi: number | undefined;
      }
    | undefined;
  /** Whether the last forecast point is the pending one, plotted one step ahead. */
  private pending = false;
  /** How far ahead of its measurement the pending forecast stands (ms): the series' period. */
  private pendingStep: number | undefined;
  /** Whether the pending forecast's error says anything (NextForecast.errorKnown). */
  private pendingKnown = true;
  private dirty = false;
  /** Whether Chart.js's points (for the tooltips) are behind the series. */
  private stale = false;
  private wasResized = false;
  /** How many times Chart.js has laid the graph out (the figure's data-layouts). */
  private layouts = 0;
  /** The time axis given by the graphs around it (aligned with theirs), if any. */
  private shared: { min: number; max: number } | undefined;

  /**
   * @param resized a new size needs a new layout: called instead of drawing at once, when the
   *   graph shares its time axis with others (they are drawn together).
   */
  constructor(
    parent: HTMLElement,
    title: string,
    unit: string,
    private readonly resized?: () => void,
  ) {
    const css = getComputedStyle(document.documentElement);
    const color = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback;
    const measuredCss = color("--measured", "#0072b2");
    const forecastCss = color("--forecast", "#c85400");
    const band = color("--band", "rgba(200, 84, 0, 0.16)");
    const text = color("--text", "#222");
    const grid = color("--grid", "rgba(128,128,128,0.2)");
    this.failedColor = color("--failed", "rgba(179, 38, 30, 0.28)");
    this.measuredColor = rgba(measuredCss);
    this.forecastColor = rgba(forecastCss);
    this.band = new BandLayer(band);
    this.title = title;
    this.unit = unit;
    // Until the first layout says what the values need (Gbit/s for a fast rate): the unit
    // the values are shown in (a fraction as %).
    this.axisUnit = displayUnit(0, unit).unit;

    this.figure = document.createElement("figure");
    this.figure.className = "graph";
    const caption = document.createElement("figcaption");
    caption.textContent = captionOf(title, this.axisUnit);
    this.caption = caption;
    this.box = document.createElement("div");
    this.box.className = "graph-box";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", `${title}: measurements and forecasts over time`);
    // Positioned, so it stacks over the band (before it) and under the marks (after it).
    canvas.style.position = "relative";
    this.box.append(this.band.canvas, canvas, this.marks.canvas);
    const legend = key([
      ["●", measuredCss, "measured"],
      ["◆", forecastCss, "forecast"],
      ["■", band, `likely range (± ${BAND_K} errors)`],
    ]);
    // What the graph shows, in words: read by a screen reader as the canvas's description.
    this.summary = document.createElement("p");
    this.summary.className = "summary";
    this.summary.id = `summary-${++summaries}`;
    canvas.setAttribute("aria-describedby", this.summary.id);
    this.figure.append(caption, legend, this.box, this.summary);
    parent.append(this.figure);
    // Chart.js's points are brought up to date before it handles a pointer over the graph
    // (listeners on the box in the capture phase run before Chart.js's on the canvas).
    const refresh = () => this.refreshTooltips();
    for (const type of ["pointermove", "pointerdown"] as const) {
      this.box.addEventListener(type, refresh, { capture: true, passive: true });
    }

    // Points only, drawn by the mark layer; Chart.js draws the hovered one.
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
        datasets: [
          points("measured", measuredCss, "circle"),
          points("forecast", forecastCss, "rectRot"),
        ],
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        parsing: false,
        normalized: true,
        // The point nearest in time to the pointer, whatever its value.
        interaction: { mode: "nearest", axis: "x", intersect: false },
        // The figure says which point the tooltip is on (its time), for tests and tools.
        onHover: (_event, active) => {
          const a = active[0];
          const p = a && this.chart.data.datasets[a.datasetIndex]?.data[a.index];
          if (p !== undefined) this.figure.dataset.hoveredX = String(p.x);
        },
        // A new size needs a new layout and new layers: drawn as soon as Chart.js has
        // finished its own resize (it renders after this callback), in the same frame.
        onResize: () => {
          this.wasResized = true;
          this.dirty = true;
          queueMicrotask(() => (this.resized === undefined ? this.draw() : this.resized()));
        },
        scales: {
          x: {
            type: "linear",
            // min and max are set by draw() (xAxis); the ticks fall on round clock times.
            // At most six, and one per TIME_LABEL_PX of the axis: a phone's narrow graph
            // would run its clock times into each other.
            afterBuildTicks: (scale) => {
              const most = Math.max(2, Math.min(6, Math.floor(scale.width / TIME_LABEL_PX)));
              scale.ticks = clockTicks(scale.min, scale.max, most).map((value) => ({ value }));
            },
            ticks: {
              color: text,
              maxRotation: 0,
              // A tick on a midnight of an axis of hours or days says its date.
              callback: (v, i, ticks) =>
                clockTickLabel(
                  Number(v),
                  ticks.length > 1 ? ticks[1]!.value - ticks[0]!.value : Infinity,
                ),
            },
            grid: { color: grid },
          },
          y: {
            ticks: { color: text },
            // One unit and one number of decimals for every label (format.ts `tickLabels`),
            // the unit the largest value of the axis is shown in, as its title says.
            afterTickToLabelConversion: (scale) => {
              const { labels } = tickLabels(
                scale.ticks.map((t) => t.value),
                unit,
                Math.max(Math.abs(scale.min), Math.abs(scale.max)),
              );
              scale.ticks.forEach((t, i) => (t.label = labels[i]));
            },
            grid: { color: grid },
            title: { display: true, text: this.axisUnit, color: text },
          },
        },
        plugins: {
          tooltip: {
            callbacks: {
              title: (items) => clock(items[0]?.parsed.x ?? 0),
              label: (item) => {
                const e = (item.raw as Partial<Forecast>).e;
                return e === undefined
                  ? `${item.dataset.label}: ${formatValue(item.parsed.y ?? 0, unit)}`
                  : `${item.dataset.label}: ${formatWithError(item.parsed.y ?? 0, BAND_K * e, unit)}`;
              },
            },
          },
        },
      },
      plugins: [pointLimits(() => this.yExtremes())],
    });
  }

  /**
   * Adds a measurement at `x` and the forecast of the next one at `x + stepMs`. The forecast
   * made for this measurement moves from its guessed time to the measurement's own.
   */
  add(x: number, value: number | null, next: NextForecast | undefined, stepMs: number): void {
    if (this.pending) {
      const settled = this.forecasts.at(-1)!;
      settled.x = x;
      const before = this.forecasts.at(-2);
      if (before !== undefined) {
        const dx = x - before.x;
        if (dx > GAP_STEPS * Math.max(stepMs, this.spacing ?? 0)) settled.gap = true;
        else this.spacing = this.spacing === undefined ? dx : 0.8 * this.spacing + 0.2 * dx;
      }
      if (this.axis !== undefined) this.addToColumns(settled, this.axis.perPx);
    }
    if (value !== null) {
      const n = this.measuredGone + this.measured.length;
      this.measured.push({ x, y: value });
      this.measuredMin.push(n, value);
      this.measuredMax.push(n, value);
    }
    this.pending = next !== undefined;
    this.pendingStep = next === undefined ? undefined : stepMs;
    this.pendingKnown = next?.errorKnown ?? true;
    if (next !== undefined) {
      const f = { x: x + stepMs, y: next.value, e: next.error };
      const n = this.forecastsGone + this.forecasts.length;
      this.forecasts.push(f);
      this.forecastMin.push(n, f.y);
      this.forecastMax.push(n, f.y);
    }
    const over = (list: readonly unknown[]) => Math.max(0, list.length - MAX_POINTS);
    const measuredOver = over(this.measured);
    if (measuredOver > 0) {
      this.measured.splice(0, measuredOver);
      this.measuredGone += measuredOver;
      this.measuredMin.dropBelow(this.measuredGone);
      this.measuredMax.dropBelow(this.measuredGone);
    }
    const forecastsOver = over(this.forecasts);
    if (forecastsOver > 0) {
      this.forecasts.splice(0, forecastsOver);
      this.forecastsGone += forecastsOver;
      this.forecastMin.dropBelow(this.forecastsGone);
      this.forecastMax.dropBelow(this.forecastsGone);
      if (this.axis !== undefined) this.trimColumns(this.axis.perPx);
    }
    this.dirty = true;
    this.stale = true;
  }

  /** Marks a probe at `x` that failed: it has no value, and the forecast waits for one. */
  fail(x: number): void {
    this.failures.push(x);
    if (this.failures.length > MAX_POINTS) this.failures.shift();
    this.dirty = true;
  }

  /** How far ahead of the newest measurement the next forecast stands (ms), if there is one:
   *  the period the series is measured at. */
  get step(): number | undefined {
    return this.pending ? this.pendingStep : undefined;
  }

  /** The forecast of the next value, as last added. */
  get next(): NextForecast | undefined {
    const f = this.pending ? this.forecasts.at(-1) : undefined;
    return f && { value: f.y, error: f.e, errorKnown: this.pendingKnown, method: "" };
  }

  /** The times the graph spans (its points and failed probes); undefined when empty. */
  extent(): { x0: number; x1: number } | undefined {
    const { measured, forecasts, failures } = this;
    const x0 = Math.min(
      measured[0]?.x ?? Infinity,
      forecasts[0]?.x ?? Infinity,
      failures[0] ?? Infinity,
    );
    const x1 = Math.max(
      measured.at(-1)?.x ?? -Infinity,
      forecasts.at(-1)?.x ?? -Infinity,
      failures.at(-1) ?? -Infinity,
    );
    return Number.isFinite(x0) && Number.isFinite(x1) ? { x0, x1 } : undefined;
  }

  /** The plot's width (CSS px), once laid out. */
  plotWidth(): number {
    const a = this.chart.chartArea;
    return a === undefined ? this.box.clientWidth : a.right - a.left;
  }

  /** Removes the graph from the page and frees the chart. */
  destroy(): void {
    this.chart.destroy();
    this.figure.remove();
  }

  /**
   * Redraws if anything changed (or the time axis it is given moved); the figure's data
   * attributes say what is plotted. `shared` is the time axis of the graphs it is aligned
   * with; without it the graph places its own (chart-math.ts `xAxis`).
   */
  draw(shared?: { min: number; max: number }): void {
    // A hidden graph (no width) waits: showing it resizes it, and that draws it.
    const moved =
      shared !== undefined && (shared.min !== this.shared?.min || shared.max !== this.shared?.max);
    this.shared = shared;
    if ((!this.dirty && !moved) || this.box.clientWidth === 0) return;
    this.dirty = false;
    const { measured, forecasts } = this;
    const extent = this.extent();
    if (extent === undefined) {
      this.axis = undefined;
      this.columns = [];
      this.layout(undefined);
    } else {
      // A layout can change the plot's width (the y labels' width), and the width the axis.
      for (let pass = 0; pass < 3; pass++) {
        const width = Math.max(1, this.plotWidth());
        const axis =
          shared === undefined
            ? xAxis(extent.x0, extent.x1, width, this.axis?.perPx)
            : { ...shared, perPx: (shared.max - shared.min) / width };
        if (axis.perPx !== this.axis?.perPx) this.rebuildColumns(axis.perPx);
        this.axis = axis;
        const { lo, hi } = this.yExtremes();
        const l = this.laidOut;
        const same =
          l !== undefined &&
          !this.wasResized &&
          l.min === axis.min &&
          l.max === axis.max &&
          yAxisHolds(l.y, l, lo, hi);
        if (same) break;
        this.layout(axis);
      }
    }
    this.drawLayers();
    const d = this.figure.dataset;
    d.measurements = String(measured.length);
    d.forecasts = String(forecasts.length);
    d.lastMeasuredX = String(measured.at(-1)?.x ?? "");
    d.lastForecastX = String(forecasts.at(-1)?.x ?? "");
    d.layouts = String(this.layouts);
    d.failures = String(this.failures.length);
    // The time axis's ends (ms since the epoch), shared or its own.
    d.axisMin = String(this.axis?.min ?? "");
    d.axisMax = String(this.axis?.max ?? "");
    this.summary.textContent = this.describe();
  }

  /** What the graph shows, in one or two sentences. */
  private describe(): string {
    const { measured, failures, unit } = this;
    const v = (x: number) => formatValue(x, unit);
    const failed =
      failures.length === 0
        ? ""
        : ` ${failures.length} probe${failures.length === 1 ? "" : "s"} failed, the last at ${clock(failures.at(-1)!)}.`;
    const first = measured[0];
    const last = measured.at(-1);
    if (first === undefined || last === undefined) return `No measurement yet.${failed}`;
    const lo = this.measuredMin.value!;
    const hi = this.measuredMax.value!;
    const next = this.next;
    const forecast =
      next === undefined
        ? ""
        : ` Next forecast ${formatWithError(next.value, BAND_K * next.error, unit, next.errorKnown)}.`;
    // One measurement has no span, and values all alike no range: said plainly, never
    // "from 12:00:01 to 12:00:01, between 3 ms and 3 ms".
    const what =
      measured.length === 1
        ? `1 measurement at ${clock(last.x)}: ${v(last.y)}.`
        : `${measured.length} measurements from ${clockIn(first.x, last.x)} to ` +
          `${clockIn(last.x, first.x)}, ` +
          (v(lo) === v(hi)
            ? `all ${v(lo)}.`
            : `between ${v(lo)} and ${v(hi)}; latest ${v(last.y)}.`);
    return `${this.title}: ${what}${forecast}${failed}`;
  }

  /** The lowest and highest value the y axis must hold: the points (the band is cut to
   *  them, with a margin). */
  private yExtremes(): { lo: number | undefined; hi: number | undefined } {
    const pick = (
      a: number | undefined,
      b: number | undefined,
      f: (a: number, b: number) => number,
    ) => (a === undefined ? b : b === undefined ? a : f(a, b));
    return {
      lo: pick(this.measuredMin.value, this.forecastMin.value, Math.min),
      hi: pick(this.measuredMax.value, this.forecastMax.value, Math.max),
    };
  }

  /** Chart.js lays out the axes (and renders them) for `axis` and the current points. */
  private layout(axis: { perPx: number; min: number; max: number } | undefined): void {
    const x = this.chart.options.scales!.x!;
    x.min = axis?.min;
    x.max = axis?.max;
    this.setTooltipPoints();
    this.chart.update("none");
    this.layouts++;
    this.wasResized = false;
    const y = this.chart.scales.y!;
    // The axis's title and the graph's caption name the unit its labels are in: a rate's
    // axis in Gbit/s once it reaches 1000 Mbit/s.
    const shown = displayUnit(Math.max(Math.abs(y.min), Math.abs(y.max)), this.unit).unit;
    if (shown !== this.axisUnit) {
      this.axisUnit = shown;
      (this.chart.options.scales!.y as { title: { text: string } }).title.text = shown;
      this.caption.textContent = captionOf(this.title, shown);
      this.chart.update("none");
    }
    this.laidOut =
      axis === undefined
        ? undefined
        : { min: axis.min, max: axis.max, y: { min: y.min, max: y.max }, ...this.yExtremes() };
  }

  /** Before Chart.js handles a pointer: its points, if they are behind the series. */
  private refreshTooltips(): void {
    if (!this.stale || this.laidOut === undefined) return;
    // A layout: Chart.js makes its y axis of the extremes as they are now, which the axis in
    // use may only hold, so the layers are drawn again on its scales.
    this.layout(this.axis);
    this.drawLayers();
  }

  /** The band and the marks, on the scales Chart.js last laid out. */
  private drawLayers(): void {
    const { measured, forecasts } = this;
    this.band.draw(
      this.chart,
      this.columns,
      this.pending ? forecasts.at(-1) : undefined,
      this.failures,
      this.failedColor,
    );
    this.marks.draw(this.chart, [
      { points: forecasts, shape: "diamond", color: this.forecastColor },
      { points: measured, shape: "dot", color: this.measuredColor },
    ]);
  }

  /** Chart.js's points: the extremes of each TOOLTIP_PX of columns, and the newest. */
  private setTooltipPoints(): void {
    const per = (this.axis?.perPx ?? 1) * TOOLTIP_PX;
    const column = (x: number) => Math.floor(x / per);
    const sets = this.chart.data.datasets;
    sets[MEASURED]!.data = thin(this.measured, column);
    sets[FORECAST]!.data = thin(this.forecasts, column);
    this.stale = false;
  }

  /** The forecasts whose time is final: all but a pending one. */
  private get settledForecasts(): number {
    return this.forecasts.length - (this.pending ? 1 : 0);
  }

  private addToColumns(f: Forecast, perPx: number): void {
    const col = Math.floor(f.x / perPx);
    const last = this.columns.at(-1);
    if (last !== undefined && last.col === col && f.gap !== true) {
      last.hi = Math.max(last.hi, bandHigh(f));
      last.lo = Math.min(last.lo, bandLow(f));
    } else {
      this.columns.push({ col, x: f.x, hi: bandHigh(f), lo: bandLow(f), gap: f.gap === true });
    }
  }

  private rebuildColumns(perPx: number): void {
    this.columns = [];
    const n = this.settledForecasts;
    for (let i = 0; i < n; i++) this.addToColumns(this.forecasts[i]!, perPx);
  }

  /** After forecasts left the front: the columns they alone held go, and the first column is
   *  rebuilt from the forecasts still in it. */
  private trimColumns(perPx: number): void {
    const first = this.forecasts[0];
    if (first === undefined) {
      this.columns = [];
      return;
    }
    const col = Math.floor(first.x / perPx);
    let drop = 0;
    while (drop < this.columns.length && this.columns[drop]!.col < col) drop++;
    if (drop > 0) this.columns.splice(0, drop);
    const head = this.columns[0];
    if (head === undefined || head.col !== col) return;
    head.x = first.x;
    head.hi = -Infinity;
    head.lo = Infinity;
    const n = this.settledForecasts;
    for (let i = 0; i < n && Math.floor(this.forecasts[i]!.x / perPx) === col; i++) {
      head.hi = Math.max(head.hi, bandHigh(this.forecasts[i]!));
      head.lo = Math.min(head.lo, bandLow(this.forecasts[i]!));
    }
  }
}
