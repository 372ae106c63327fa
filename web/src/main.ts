// The page (JavaNws §2.1.3, the Display, and the console): starts the probe worker, shows each
// series' last measurement, next forecast and accuracy, draws the graphs, and keeps the
// settings in the URL.

import "./style.css";
import { SeriesChart } from "./chart-view";
import { toCsv, toNdjson } from "./files";
import { clock, formatBytes, formatValue } from "./format";
import type {
  HistoryEvent,
  ImportedEvent,
  MeasurementEvent,
  PageCommand,
  SeriesKey,
  WorkerEvent,
} from "./messages";
import { PredictabilityView } from "./predictability-view";
import type { Record as MeasurementRecord } from "./record";
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
  "jitter/websocket": "Jitter, WebSocket echo",
  "loaded_rtt/websocket": "Loaded RTT, WebSocket echo during transfers",
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
  importInput: el<HTMLInputElement>("import"),
  importReport: el("import-report"),
  exportNdjson: el<HTMLButtonElement>("export-ndjson"),
  exportCsv: el<HTMLButtonElement>("export-csv"),
  predictabilitySeries: el<HTMLSelectElement>("predictability-series"),
  predictabilityRefresh: el<HTMLButtonElement>("predictability-refresh"),
  predictability: el("predictability"),
  clearHistory: el<HTMLButtonElement>("clear-history"),
};

let settings = parseSettings(location.search);
const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
const send = (cmd: PageCommand) => worker.postMessage(cmd);

interface View {
  row: HTMLTableRowElement;
  title: string;
  unit: string;
  cells: HTMLTableCellElement[];
  chart: SeriesChart;
  /** The page's own measurements, kept for export (imported series are not re-exported). */
  records: MeasurementRecord[];
}
const views = new Map<string, View>();

/** Puts `node` among its siblings in ORDER, so series appear in the same place every time. */
function placeInOrder(parent: HTMLElement, node: HTMLElement, key: string): void {
  node.dataset.series = key;
  // Imported series (not in ORDER) go after the live ones, in arrival order.
  const rank = (k: string | undefined) => {
    const i = ORDER.indexOf(k ?? "");
    return i < 0 ? Infinity : i;
  };
  const after = [...parent.children].find(
    (c) => rank((c as HTMLElement).dataset.series) > rank(key),
  );
  parent.insertBefore(node, after ?? null);
}

function view(key: string, unit: string, label?: string): View {
  let v = views.get(key);
  if (v !== undefined) return v;
  const title = label ?? TITLES[key as SeriesKey] ?? key;
  const row = document.createElement("tr");
  const head = document.createElement("th");
  head.scope = "row";
  head.textContent = title;
  const cells = Array.from({ length: 6 }, () => document.createElement("td"));
  row.append(head, ...cells);
  placeInOrder(ui.tbody as unknown as HTMLElement, row, key);
  const chart = new SeriesChart(ui.graphs, title, unit);
  placeInOrder(ui.graphs, chart.figure, key);
  v = { row, title, unit, cells, chart, records: [] };
  views.set(key, v);
  ui.predictabilitySeries.add(new Option(title, key));
  return v;
}

type Cells = [
  HTMLTableCellElement,
  HTMLTableCellElement,
  HTMLTableCellElement,
  HTMLTableCellElement,
  HTMLTableCellElement,
  HTMLTableCellElement,
];

function showRow(
  v: View,
  last: string,
  next: { value: number; error: number; method: string } | undefined,
  mae: number | undefined,
  count: number,
  timeouts: number,
): void {
  const cells = v.cells as Cells;
  cells[0].textContent = last;
  cells[1].textContent =
    next === undefined
      ? "–"
      : `${formatValue(next.value, v.unit)} ± ${formatValue(BAND_K * next.error, v.unit)}`;
  cells[2].textContent = next?.method ?? "–";
  cells[3].textContent = mae === undefined ? "–" : formatValue(mae, v.unit);
  cells[4].textContent = String(count);
  cells[5].textContent = String(timeouts);
}

function onMeasurement(m: MeasurementEvent): void {
  const { record, next } = m;
  const v = view(m.key, record.unit);
  v.records.push(record);
  showRow(
    v,
    record.value === null
      ? `timed out (${record.timeout_ms} ms)`
      : formatValue(record.value, record.unit),
    next,
    m.mae,
    m.count,
    m.timeouts,
  );
  v.chart.add(record.timestamp_ms, record.value, next, settings.periodS * 1000);
  requestDraw();
}

/** Draws the series saved before the reload, with the forecasts as they were made. */
function onHistory(ev: HistoryEvent): void {
  for (const s of ev.series) {
    const last = s.records.at(-1);
    if (last === undefined) continue;
    const v = view(s.key, last.unit);
    v.records.push(...s.records);
    s.records.forEach((r, i) => {
      // The forecast made after a record is the one the next record carries.
      const f = i + 1 < s.records.length ? s.records[i + 1]!.forecast : undefined;
      const next =
        i + 1 < s.records.length
          ? f && { value: f.value, error: f.error, method: f.method }
          : s.next;
      v.chart.add(r.timestamp_ms, r.value, next, settings.periodS * 1000);
    });
    showRow(
      v,
      last.value === null
        ? `timed out (${last.timeout_ms} ms)`
        : formatValue(last.value, last.unit),
      s.next,
      s.mae,
      s.count,
      s.timeouts,
    );
  }
  requestDraw();
}

/** Removes the live series after the history was cleared; imported ones stay. */
function onCleared(): void {
  for (const [key, v] of views) {
    if (key.startsWith("import/")) continue;
    v.row.remove();
    v.chart.destroy();
    [...ui.predictabilitySeries.options].find((o) => o.value === key)?.remove();
    views.delete(key);
  }
}

/** Shows each imported series like a live one, and what was refused, line by line. */
function onImported(ev: ImportedEvent): void {
  for (const s of ev.series) {
    const v = view(s.key, s.unit, s.label);
    const gaps = s.points.slice(1).map((p, i) => p.t - s.points[i]!.t);
    const step = gaps.sort((a, b) => a - b)[gaps.length >> 1] ?? 1000;
    for (const p of s.points) v.chart.add(p.t, p.value, p.next, step);
    const last = s.points.at(-1);
    showRow(
      v,
      last === undefined ? "–" : formatValue(last.value, s.unit),
      last?.next,
      s.mae,
      s.points.length,
      0,
    );
  }
  const report = document.createElement("div");
  const kept = ev.series.reduce((n, s) => n + s.points.length, 0);
  const summary = document.createElement("p");
  summary.textContent =
    `${ev.file} (${ev.format}): ${kept} values in ${ev.series.length} series` +
    (ev.errorCount === 0 ? "." : `; ${ev.errorCount} line(s) refused:`);
  report.append(summary);
  if (ev.errorCount > 0) {
    summary.className = "problem";
    const list = document.createElement("ul");
    for (const e of ev.errors) {
      const item = document.createElement("li");
      item.textContent = `line ${e.line}${e.field === undefined ? "" : `, ${e.field}`}: ${e.message}`;
      list.append(item);
    }
    if (ev.errorCount > ev.errors.length) {
      const item = document.createElement("li");
      item.textContent = `… and ${ev.errorCount - ev.errors.length} more`;
      list.append(item);
    }
    report.append(list);
  }
  ui.importReport.prepend(report);
  requestDraw();
}

async function importFiles(files: Iterable<File>): Promise<void> {
  for (const f of files) send({ type: "import", file: f.name, text: await f.text() });
}

function download(name: string, type: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function stamp(): string {
  return new Date().toISOString().replace(/[:.]/g, "-");
}

const predictabilityView = new PredictabilityView(ui.predictability);

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
  } else if (ev.type === "history") {
    onHistory(ev);
  } else if (ev.type === "cleared") {
    onCleared();
  } else if (ev.type === "imported") {
    onImported(ev);
  } else if (ev.type === "predictability") {
    const v = views.get(ev.key);
    if (v !== undefined) predictabilityView.show(ev, v.title, v.unit);
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

ui.importInput.addEventListener("change", () => {
  // Copied first: clearing the input empties its live FileList.
  void importFiles([...(ui.importInput.files ?? [])]);
  ui.importInput.value = "";
});
document.addEventListener("dragover", (e) => {
  e.preventDefault();
  document.body.classList.add("dropping");
});
document.addEventListener("dragleave", () => document.body.classList.remove("dropping"));
document.addEventListener("drop", (e) => {
  e.preventDefault();
  document.body.classList.remove("dropping");
  void importFiles(e.dataTransfer?.files ?? []);
});
ui.exportNdjson.addEventListener("click", () => {
  const records = [...views.values()].flatMap((v) => v.records);
  records.sort((a, b) => a.timestamp_ms - b.timestamp_ms);
  download(`nowcast-${stamp()}.ndjson`, "application/x-ndjson", toNdjson(records));
});
ui.exportCsv.addEventListener("click", () => {
  const series = [...views.values()].map((v) => ({ label: v.title, records: v.records }));
  download(`nowcast-${stamp()}.csv`, "text/csv", toCsv(series));
});
const analyse = () => {
  if (ui.predictabilitySeries.value !== "") {
    send({ type: "predictability", key: ui.predictabilitySeries.value });
  }
};
ui.predictabilityRefresh.addEventListener("click", analyse);
ui.clearHistory.addEventListener("click", () => send({ type: "clear" }));
ui.predictabilitySeries.addEventListener("change", analyse);

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
