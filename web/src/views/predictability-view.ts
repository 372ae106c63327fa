// The predictability view (JavaNws §5): for one series, a sentence of how close its forecasts
// come, the histogram (100 bins, min..max) and the empirical CDF of its forecast errors, and
// every forecaster's MSE and MAE with the one in use marked and a plain verdict on it.

import { Chart, type ChartDataset } from "chart.js";
import { displayUnit, formatSquared, formatValue, significant, tickLabels } from "../format";
import type { PredictabilityEvent } from "../messages";
import { AT_ONCE, type Announcer } from "./announcer";
import { el, OncePerFrame } from "./dom";
import { forecasterVerdict, sharePercent, typicalError, verdictOf } from "./headline-math";

interface Point {
  x: number;
  y: number;
}

/** A graph of the view; `counts`: its y axis counts (whole ticks only). */
function lineChart(
  parent: HTMLElement,
  label: string,
  xTitle: string,
  yTitle: string,
  counts = false,
) {
  const figure = document.createElement("figure");
  figure.className = "graph";
  const caption = document.createElement("figcaption");
  caption.textContent = label;
  const box = document.createElement("div");
  box.className = "graph-box";
  const canvas = document.createElement("canvas");
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  // The graphs in words: the sentence above them (how close the forecasts come, 9 in 10
  // times) and the verdict on the forecaster in use; the table below lists every one.
  canvas.setAttribute("aria-describedby", "predictability-summary predictability-verdict");
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
  // The unit is in the axis's title; the labels have one number of decimals each axis.
  const axis = (title: string, precision?: number) => ({
    ticks: { color: text, maxTicksLimit: 6, precision },
    afterTickToLabelConversion: (scale: { ticks: { value: number; label?: unknown }[] }) => {
      const { labels } = tickLabels(
        scale.ticks.map((t) => t.value),
        "",
      );
      scale.ticks.forEach((t, i) => (t.label = labels[i]));
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
      scales: {
        x: { type: "linear", ...axis(xTitle) },
        y: { ...axis(yTitle, counts ? 0 : undefined), min: 0 },
      },
      plugins: { legend: { display: false } },
    },
  });
  return { chart, dataset, data, figure };
}

class PredictabilityView {
  private readonly histogram;
  private readonly cdf;
  private readonly table: HTMLTableElement;
  private unit = "";

  constructor(private readonly parent: HTMLElement) {
    parent.hidden = true;
    this.histogram = lineChart(
      parent,
      "Forecast errors: histogram",
      "forecast error",
      "forecasts",
      true,
    );
    this.histogram.dataset.stepped = "before";
    this.histogram.dataset.fill = "origin";
    this.cdf = lineChart(
      parent,
      "Forecast errors: cumulative distribution",
      "forecast error",
      "share at or below",
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

  show(
    p: PredictabilityEvent,
    title: string,
    unit: string,
    names: ReadonlyMap<string, string>,
  ): void {
    this.parent.hidden = false;
    // The errors are in the series' unit, and shown as its values are: a loss rate's (a
    // fraction) in percentage points, as its graph shows it in %.
    const percent = displayUnit(0, unit).unit === "%";
    const scale = percent ? 100 : 1;
    if (unit !== this.unit) {
      this.unit = unit;
      // The axes say the unit (none for a CSV column of numbers).
      const shown = percent ? "percentage points" : unit;
      const x = `forecast error${shown === "" ? "" : `, ${shown}`} (measured − forecast)`;
      for (const c of [this.histogram, this.cdf]) {
        const scale = c.chart.options.scales!.x as { title: { text: string } };
        scale.title.text = x;
      }
    }
    const h = p.histogram;
    this.histogram.data.length = 0;
    if (h !== undefined) {
      const width = (h.max - h.min) / h.counts.length;
      h.counts.forEach((c, i) =>
        this.histogram.data.push({ x: (h.min + i * width) * scale, y: c }),
      );
      this.histogram.data.push({ x: h.max * scale, y: h.counts.at(-1) ?? 0 });
    }
    this.cdf.data.length = 0;
    for (const { x, p: frac } of p.cdf) this.cdf.data.push({ x: x * scale, y: frac });
    for (const c of [this.histogram, this.cdf]) {
      c.chart.update("none");
      c.figure.dataset.points = String(c.data.length);
    }

    this.table.replaceChildren();
    const caption = this.table.createCaption();
    caption.textContent =
      p.share === undefined
        ? `Every forecaster on ${title}; the one in use is marked`
        : `Every forecaster on ${title}, all combined in the forecast, weighted by their recent errors; the one with the largest weight is marked`;
    const head = this.table.createTHead().insertRow();
    for (const name of [
      "Forecaster",
      "Next forecast",
      "Mean square error",
      "Mean error",
      "Values",
    ]) {
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
      const name = names.get(row.id) ?? row.name;
      th.textContent = !inUse
        ? name
        : p.share === undefined
          ? `${name} (in use)`
          : `${name} (largest weight, ${sharePercent(p.share)})`;
      tr.append(th);
      const cells = [
        row.forecast === null ? "–" : formatValue(row.forecast, unit),
        row.n === 0 ? "–" : formatSquared(row.mse, unit),
        row.n === 0 ? "–" : formatValue(row.mae, unit),
        String(row.n),
      ];
      for (const text of cells) tr.insertCell().textContent = text;
    }
  }
}

/** What a series is called in a sentence: "RTT", "download", or its title. */
function subject(key: string, title: string): string {
  const plain = key.replace(/^mirror\//, "").split(/[/@]/)[0];
  const words: { [metric: string]: string } = {
    rtt: "RTT",
    loaded_rtt: "loaded RTT",
    jitter: "jitter",
    bandwidth_down: "download rate",
    bandwidth_up: "upload rate",
  };
  return key.startsWith("import/") ? title : (words[plain ?? ""] ?? title);
}

/** Forecast errors a series needs before the page says how predictable it is. */
const FEW_ERRORS = 10;

/** The predictability section: the choice of series, and its analysis, asked of the worker by
 *  itself (when a series is first offered, when the choice changes, and as measurements of the
 *  one chosen arrive). */
export class PredictabilityPanel {
  private readonly select = el<HTMLSelectElement>("predictability-series");
  private readonly summary = el("predictability-summary");
  private readonly verdict = el("predictability-verdict");
  private readonly view = new PredictabilityView(el("predictability"));
  /** The analysis of the chosen series, asked again once a frame while its data changes:
   *  on a timer (every 5 s) it lagged the series table's figures for the same series. */
  private readonly again = new OncePerFrame(() => this.analyse());
  /** The series the user chose, until its analysis is announced. */
  private chosen: string | undefined;

  /**
   * @param ask requests the analysis of the series shown under `key`.
   * @param announcer tells a screen reader the analysis of a series the user chose (the
   *   sentence is rewritten as measurements arrive, and is not live).
   */
  constructor(
    private readonly ask: (key: string) => void,
    private readonly announcer: Announcer,
  ) {
    this.select.addEventListener("change", () => {
      this.chosen = this.select.value;
      this.analyse();
    });
  }

  private analyse(): void {
    if (this.select.value === "") return;
    this.ask(this.select.value);
  }

  offer(key: string, title: string): void {
    this.select.add(new Option(title, key));
    // The first series, or the target's echo RTT once it comes: analysed without a click.
    if (this.select.options.length === 1 || key === "rtt/websocket") {
      this.select.value = key;
      this.analyse();
    }
  }

  withdraw(key: string): void {
    const chosen = this.select.value === key;
    [...this.select.options].find((o) => o.value === key)?.remove();
    if (chosen) this.analyse();
  }

  /** A series has new data: the chosen one's analysis is asked again at the next frame. */
  measured(key: string): void {
    if (key === this.select.value) this.again.request();
  }

  /**
   * Shows the analysis of the series `key` (titled `title`, in `unit`): first a sentence of
   * how close its forecasts come, then the graphs and the forecasters, with a plain verdict on
   * the one in use. `next` is its latest forecast, the scale of the verdict.
   */
  show(
    p: PredictabilityEvent,
    title: string,
    unit: string,
    next: { value: number } | undefined,
    names: ReadonlyMap<string, string>,
  ): void {
    if (p.key !== this.select.value) return;
    const n = p.histogram?.counts.reduce((a, b) => a + b, 0) ?? 0;
    const what = subject(p.key, title);
    const typical = typicalError(p.cdf);
    if (n < FEW_ERRORS || typical === undefined) {
      // An imported file gets no more values: it is too short, not early.
      this.summary.textContent = p.key.startsWith("import/")
        ? `Too few values to say how predictable the ${what} is (${n} forecasts checked ` +
          `against a value of the file; at least ${FEW_ERRORS} are needed).`
        : `Too few forecasts yet to say how predictable the ${what} is ` +
          `(${n} checked against a measurement so far); this fills in as probes arrive.`;
    } else {
      const steadiness =
        next === undefined
          ? ""
          : `: ${verdictOf(typical, next.value)}, within ±${percent(typical, next.value)} of the value`;
      // A loss rate's error is a difference of percentages, said so beside the "within ±…
      // % of the value" that follows.
      const spread =
        displayUnit(0, unit).unit === "%"
          ? `${significant(typical * 100)} percentage points`
          : formatValue(typical, unit);
      this.summary.textContent =
        `The next ${what} is usually within ±${spread} of its forecast ` +
        `(9 in 10 of the ${n} forecasts so far were)${steadiness}.`;
    }
    this.verdict.textContent = forecasterVerdict(p, unit, names);
    this.view.show(p, title, unit, names);
    if (this.chosen === p.key) {
      this.chosen = undefined;
      // Said each time the user chooses, the same series again too.
      this.announcer.say(
        "predictability",
        `${p.key}@${Date.now()}`,
        this.summary.textContent ?? "",
        AT_ONCE,
      );
    }
  }
}

const percent = (part: number, of: number) =>
  `${significant((100 * part) / Math.abs(of || 1)).replace(/\.0+$/, "")} %`;
