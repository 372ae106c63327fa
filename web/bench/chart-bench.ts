// The graph benchmark page (built and driven by e2e/bench/page-bench.ts in headless Chromium):
// one SeriesChart, as the page makes it, filled with 10,000 measurements and their forecasts,
// then one point added and the graph redrawn per animation frame, as the page does when a
// measurement arrives. Each addition is timed twice: the script alone (add + draw, which
// renders synchronously with animations off), and up to a 1-pixel read of the canvas, which
// makes Chromium rasterise the drawing it may otherwise defer to the compositor.

import "../src/style.css";
import { Chart, Decimation, Filler } from "chart.js";
import { MAX_POINTS, SeriesChart } from "../src/views/chart-view";
import type { NextForecast } from "../src/messages";

export interface ChartBenchResult {
  /** ms per addition, script only. */
  script: number[];
  /** ms per addition, script and raster. */
  raster: number[];
  points: number;
  /** How many of the additions had Chart.js lay the graph out again. */
  layouts: number;
  canvas: { width: number; height: number };
}

declare global {
  interface Window {
    runChartBench(additions: number, warmup: number): Promise<ChartBenchResult>;
    runPeerBench(additions: number, warmup: number): Promise<ChartBenchResult>;
  }
}

const STEP_MS = 1000;

/** A deterministic RTT-like series (ms): a slow wave, noise, and a spike now and then. */
function value(i: number): number {
  const noise = Math.sin(i * 12.9898) * 43758.5453;
  const r = noise - Math.floor(noise);
  return 0.3 + 0.05 * Math.sin(i / 300) + 0.1 * r + (i % 97 === 0 ? 1 : 0);
}

/** Forecasts as smooth as the bank's (exponential smoothing, 10 %), with the error as the
 *  root of the running mean squared error, so the graph looks like a live page's. */
function forecaster(): (measured: number) => NextForecast {
  let f: number | undefined;
  let mse = 0;
  let n = 0;
  return (x) => {
    if (f !== undefined) mse += ((x - f) ** 2 - mse) / ++n;
    f = f === undefined ? x : f + 0.1 * (x - f);
    return { value: f, error: Math.sqrt(mse), errorKnown: true, method: "exp_smooth_10" };
  };
}

const nextFrame = () => new Promise<number>((resolve) => requestAnimationFrame(resolve));

/**
 * Times `warmup + additions` additions, one per animation frame as the page makes them: `add`
 * (add a point and draw) alone, and up to a 1-pixel read of each of `ctxs`, which makes
 * Chromium rasterise what it may otherwise defer to the compositor.
 */
async function timeAdditions(
  additions: number,
  warmup: number,
  add: () => void,
  ctxs: readonly CanvasRenderingContext2D[],
): Promise<{ script: number[]; raster: number[] }> {
  const script: number[] = [];
  const raster: number[] = [];
  for (let n = 0; n < warmup + additions; n++) {
    await nextFrame();
    const t0 = performance.now();
    add();
    const t1 = performance.now();
    for (const c of ctxs) c.getImageData(0, 0, 1, 1);
    const t2 = performance.now();
    if (n >= warmup) {
      script.push(t1 - t0);
      raster.push(t2 - t0);
    }
  }
  return { script, raster };
}

/** The graph, made and filled with MAX_POINTS on the first run; later runs go on adding. */
let graph: { chart: SeriesChart; addOne(): void } | undefined;

function filledGraph(parent: HTMLElement): { chart: SeriesChart; addOne(): void } {
  if (graph !== undefined) return graph;
  const chart = new SeriesChart(parent, "RTT, WebSocket echo", "ms");
  const start = Date.UTC(2026, 0, 1);
  const next = forecaster();
  let i = 0;
  const addOne = () => {
    chart.add(start + i * STEP_MS, value(i), next(value(i)), STEP_MS);
    i++;
  };
  while (i < MAX_POINTS) addOne();
  chart.draw();
  graph = { chart, addOne };
  return graph;
}

window.runChartBench = async (additions, warmup) => {
  const parent = document.getElementById("graphs")!;
  const { chart, addOne } = filledGraph(parent);
  const layoutsBefore = Number(chart.figure.dataset.layouts);
  // Chart.js's canvas and the layers of band and marks around it (all read back, so all are
  // drawn).
  const canvas = parent.querySelector<HTMLCanvasElement>("canvas[role=img]")!;
  const ctxs = Array.from(parent.querySelectorAll("canvas"), (c) => c.getContext("2d")!);
  const { script, raster } = await timeAdditions(
    additions,
    warmup,
    () => {
      addOne();
      chart.draw();
    },
    ctxs,
  );
  return {
    script,
    raster,
    points: Number(chart.figure.dataset.measurements),
    layouts: Number(chart.figure.dataset.layouts) - layoutsBefore,
    canvas: { width: canvas.width, height: canvas.height },
  };
};

/**
 * The peer: the same graph drawn the way Chart.js offers, in a box of the same size. Points of
 * both series as Chart.js point elements, the band as two line datasets filled between (its
 * Filler plugin), and its Decimation plugin (min-max) thinning the data to the plot's width;
 * every addition is an update of the whole chart.
 */
window.runPeerBench = async (additions, warmup) => {
  Chart.register(Decimation, Filler);
  const parent = document.getElementById("graphs")!;
  const figure = document.createElement("figure");
  figure.className = "graph";
  const box = document.createElement("div");
  box.className = "graph-box";
  const canvas = document.createElement("canvas");
  box.append(canvas);
  figure.append(box);
  parent.append(figure);
  type P = { x: number; y: number };
  const measured: P[] = [];
  const forecasts: P[] = [];
  const hi: P[] = [];
  const lo: P[] = [];
  const start = Date.UTC(2026, 0, 1);
  const next = forecaster();
  let i = 0;
  const addOne = () => {
    const x = start + i * STEP_MS;
    const f = next(value(i));
    measured.push({ x, y: value(i) });
    forecasts.push({ x: x + STEP_MS, y: f.value });
    hi.push({ x: x + STEP_MS, y: f.value + 2 * f.error });
    lo.push({ x: x + STEP_MS, y: Math.max(0, f.value - 2 * f.error) });
    for (const list of [measured, forecasts, hi, lo]) if (list.length > MAX_POINTS) list.shift();
    i++;
  };
  while (i < MAX_POINTS) addOne();
  const points = (data: P[], color: string) => ({
    data,
    showLine: false,
    pointRadius: 2,
    pointBackgroundColor: color,
    pointBorderWidth: 0,
  });
  const band = (data: P[], fill: string | boolean) => ({
    data,
    borderWidth: 0,
    pointRadius: 0,
    fill,
    backgroundColor: "rgba(11, 61, 145, 0.15)",
  });
  const chart = new Chart(canvas, {
    type: "line",
    data: {
      datasets: [
        points(measured, "#7fb3e6"),
        points(forecasts, "#0b3d91"),
        band(hi, false),
        band(lo, "-1"),
      ],
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      interaction: { mode: "nearest", axis: "x", intersect: false },
      scales: { x: { type: "linear", bounds: "data" } },
      plugins: { decimation: { enabled: true, algorithm: "min-max" } },
    },
  });
  const { script, raster } = await timeAdditions(
    additions,
    warmup,
    () => {
      addOne();
      chart.update("none");
    },
    [canvas.getContext("2d")!],
  );
  return {
    script,
    raster,
    points: measured.length,
    layouts: additions + warmup,
    canvas: { width: canvas.width, height: canvas.height },
  };
};
