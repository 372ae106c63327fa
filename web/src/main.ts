// The page (JavaNws §2.1.3, the Display, and the console): starts the probe worker, shows each
// series' last measurement, next forecast and accuracy, draws the graphs, and keeps the
// settings in the URL.

import "./style.css";
import { SeriesChart } from "./chart-view";
import { clock, formatBytes, formatValue } from "./format";
import type { MeasurementEvent, PageCommand, SeriesKey, WorkerEvent } from "./messages";
import {
  formatSize,
  parseSettings,
  parseSize,
  settingsQuery,
  type Settings,
  type TransportChoice,
} from "./settings";
import { BAND_K } from "./chart-view";

const TITLES: Partial<Record<SeriesKey, string>> = {
  "rtt/websocket": "RTT, WebSocket echo",
  "rtt/http": "RTT, fetch",
  "bandwidth_down/websocket": "Download, WebSocket",
  "bandwidth_up/websocket": "Upload, WebSocket",
  "bandwidth_down/http": "Download, fetch",
};
/** Console and graph order, whatever order the probes report in. */
const ORDER = Object.keys(TITLES);

function el<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`#${id} is missing from index.html`);
  return e as T;
}

const ui = {
  now: el<HTMLTimeElement>("now"),
  state: el("state"),
  bytes: el<HTMLOutputElement>("bytes"),
  tbody: el<HTMLTableElement>("series-table").tBodies[0]!,
  period: el<HTMLSelectElement>("period"),
  size: el<HTMLSelectElement>("size"),
  transport: el<HTMLSelectElement>("transport"),
  budget: el<HTMLInputElement>("budget"),
  suspend: el<HTMLButtonElement>("suspend"),
  showGraphs: el<HTMLInputElement>("show-graphs"),
  graphsSection: el("graphs-section"),
  graphs: el("graphs"),
};

let settings = parseSettings(location.search);
const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
const send = (cmd: PageCommand) => worker.postMessage(cmd);

interface View {
  cells: HTMLTableCellElement[];
  chart: SeriesChart;
  row: HTMLTableRowElement;
}
const views = new Map<SeriesKey, View>();

/** Puts `node` among its siblings in ORDER, so series appear in the same place every time. */
function placeInOrder(parent: HTMLElement, node: HTMLElement, key: SeriesKey): void {
  node.dataset.series = key;
  const rank = (k: string | undefined) => ORDER.indexOf(k ?? "");
  const after = [...parent.children].find(
    (c) => rank((c as HTMLElement).dataset.series) > rank(key),
  );
  parent.insertBefore(node, after ?? null);
}

function view(key: SeriesKey, unit: string): View {
  let v = views.get(key);
  if (v !== undefined) return v;
  const title = TITLES[key] ?? key;
  const row = document.createElement("tr");
  const head = document.createElement("th");
  head.scope = "row";
  head.textContent = title;
  const cells = Array.from({ length: 6 }, () => document.createElement("td"));
  row.append(head, ...cells);
  placeInOrder(ui.tbody as unknown as HTMLElement, row, key);
  const chart = new SeriesChart(ui.graphs, title, unit);
  placeInOrder(ui.graphs, chart.figure, key);
  v = { cells, chart, row };
  views.set(key, v);
  return v;
}

function onMeasurement(m: MeasurementEvent): void {
  const { record, next } = m;
  const v = view(m.key, record.unit);
  const [last, nextCell, method, mae, count, timeouts] = v.cells as [
    HTMLTableCellElement,
    HTMLTableCellElement,
    HTMLTableCellElement,
    HTMLTableCellElement,
    HTMLTableCellElement,
    HTMLTableCellElement,
  ];
  last.textContent =
    record.value === null
      ? `timed out (${record.timeout_ms} ms)`
      : formatValue(record.value, record.unit);
  nextCell.textContent =
    next === undefined
      ? "–"
      : `${formatValue(next.value, record.unit)} ± ${formatValue(BAND_K * next.error, record.unit)}`;
  method.textContent = next?.method ?? "–";
  mae.textContent = m.mae === undefined ? "–" : formatValue(m.mae, record.unit);
  count.textContent = String(m.count);
  timeouts.textContent = String(m.timeouts);
  v.chart.add(record.timestamp_ms, record.value, next, settings.periodS * 1000);
  requestDraw();
}

let drawQueued = false;
/** Redraws at most once a frame, and not at all while the graphs are hidden: measurements go
 *  on either way (JavaNws §2.1.3). */
function requestDraw(): void {
  if (drawQueued || !ui.showGraphs.checked) return;
  drawQueued = true;
  requestAnimationFrame(() => {
    drawQueued = false;
    for (const v of views.values()) v.chart.draw();
  });
}

worker.onmessage = (e: MessageEvent<WorkerEvent>) => {
  const ev = e.data;
  if (ev.type === "measurement") {
    onMeasurement(ev);
  } else {
    ui.state.textContent = ev.message === "" ? ev.state : `${ev.state}: ${ev.message}`;
    ui.bytes.textContent =
      `${formatBytes(ev.bytesSinceStart)} (${formatBytes(ev.bytesThisHour)} ` +
      `of ${formatBytes(ev.budgetBytes)} this hour)`;
  }
};
worker.onerror = (e) => {
  ui.state.textContent = `the probe worker failed: ${e.message}`;
};

function showSettings(s: Settings): void {
  const period = String(s.periodS);
  if (![...ui.period.options].some((o) => o.value === period)) {
    ui.period.add(new Option(`${period} s`, period));
  }
  ui.period.value = period;
  const size = formatSize(s.size);
  if (![...ui.size.options].some((o) => o.value === size)) ui.size.add(new Option(size, size));
  ui.size.value = size;
  ui.transport.value = s.transport;
  ui.budget.value = String(s.budgetMiB);
}

function applySettings(): void {
  const budget = Number(ui.budget.value);
  settings = {
    periodS: Number(ui.period.value),
    size: parseSize(ui.size.value) ?? settings.size,
    transport: ui.transport.value as TransportChoice,
    budgetMiB: Number.isFinite(budget) && budget > 0 ? budget : settings.budgetMiB,
  };
  history.replaceState(null, "", settingsQuery(settings) || location.pathname);
  send({ type: "settings", settings });
}

for (const input of [ui.period, ui.size, ui.transport, ui.budget]) {
  input.addEventListener("change", applySettings);
}
ui.suspend.addEventListener("click", () => {
  const suspending = ui.suspend.getAttribute("aria-pressed") !== "true";
  ui.suspend.setAttribute("aria-pressed", String(suspending));
  ui.suspend.textContent = suspending ? "Resume" : "Suspend";
  send({ type: suspending ? "suspend" : "resume" });
});
ui.showGraphs.addEventListener("change", () => {
  ui.graphsSection.hidden = !ui.showGraphs.checked;
  if (ui.showGraphs.checked) {
    for (const v of views.values()) v.chart.draw();
  }
});

el("target").textContent = location.host;
const tick = () => {
  const now = Date.now();
  ui.now.dateTime = new Date(now).toISOString();
  ui.now.textContent = clock(now);
};
tick();
setInterval(tick, 1000);
showSettings(settings);
send({ type: "settings", settings });
