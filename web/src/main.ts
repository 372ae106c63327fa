// The page (JavaNws §2.1.3, the Display, and the console): starts the probe worker, shows each
// series' last measurement, next forecast and accuracy, draws the graphs, and keeps the
// settings in the URL.

import "./style.css";
import { SeriesChart } from "./chart-view";
import { toCsv, toNdjson } from "./files";
import { clock, formatBytes, formatDuration, formatValue } from "./format";
import type {
  HistoryEvent,
  ImportedEvent,
  MeasurementEvent,
  MirrorEvent,
  NextForecast,
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
import { rank, type Estimate, type Site } from "./ranking";

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
  fileSize: el<HTMLInputElement>("file-size"),
  mirrorList: el<HTMLUListElement>("mirror-list"),
  ranking: el<HTMLTableElement>("ranking-table").tBodies[0]!,
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

/** The serving site, as the ranking names it. */
const SITE_URL = new URL("/", location.href).href;
/** The newest forecast of each of the site's series, for the ranking. */
const siteForecasts = new Map<string, NextForecast>();

interface MirrorEntry {
  url: string;
  name: string;
  location: string;
  probing: boolean;
  rtt: NextForecast | undefined;
  bandwidth: NextForecast | undefined;
  item: HTMLLIElement;
  status: HTMLElement;
}
const mirrorEntries = new Map<string, MirrorEntry>();

const estimate = (f: NextForecast | undefined): Estimate | undefined =>
  f && { value: f.value, error: f.error };

function fileBytes(): number {
  const mb = Number(ui.fileSize.value);
  // 1 MB = 10^6 bytes, as download sites state file sizes.
  return Number.isFinite(mb) && mb > 0 ? mb * 1e6 : 100e6;
}

/** Redraws the ranking table: the site and every mirror, fastest first (ranking.ts). */
function showRanking(): void {
  const sites: (Site & { name: string })[] = [
    {
      url: SITE_URL,
      name: `${location.host} (this site)`,
      // The WebSocket series when measured, else those over fetch (transport "http").
      rtt: estimate(siteForecasts.get("rtt/websocket") ?? siteForecasts.get("rtt/http")),
      bandwidth: estimate(
        siteForecasts.get("bandwidth_down/websocket") ?? siteForecasts.get("bandwidth_down/http"),
      ),
    },
    ...[...mirrorEntries.values()].map((m) => ({
      url: m.url,
      name: m.name,
      rtt: estimate(m.rtt),
      bandwidth: estimate(m.bandwidth),
    })),
  ];
  const byUrl = new Map(sites.map((site) => [site.url, site]));
  const rows = rank(sites, fileBytes(), 1).map((r) => {
    const site = byUrl.get(r.url)!;
    const row = document.createElement("tr");
    row.dataset.url = r.url;
    const head = document.createElement("th");
    head.scope = "row";
    head.textContent = site.name;
    const cells = Array.from({ length: 4 }, () => document.createElement("td"));
    const probing = r.url === SITE_URL || mirrorEntries.get(r.url)?.probing === true;
    cells[0]!.textContent =
      r.timeMs === undefined
        ? probing
          ? "waiting for data"
          : "not probed"
        : formatDuration(r.timeMs);
    cells[1]!.textContent =
      r.lowMs === undefined || r.highMs === undefined
        ? "–"
        : `${formatDuration(r.lowMs)} – ${formatDuration(r.highMs)}`;
    const withError = (e: Estimate | undefined, unit: string) =>
      e === undefined ? "–" : `${formatValue(e.value, unit)} ± ${formatValue(e.error, unit)}`;
    cells[2]!.textContent = withError(site.rtt, "ms");
    cells[3]!.textContent = withError(site.bandwidth, "Mbit/s");
    row.append(head, ...cells);
    return row;
  });
  ui.ranking.replaceChildren(...rows);
}

function probedMirrors(): string[] {
  return [...mirrorEntries.values()].filter((m) => m.probing).map((m) => m.url);
}

/** Lists a mirror with its opt-in checkbox (off: probing a third party is the user's call). */
function addMirror(url: string, name: string, where: string): void {
  // A server that lists itself: it is already ranked, as "this site".
  if (url === SITE_URL) return;
  const known = mirrorEntries.get(url);
  if (known !== undefined) {
    // The server's name and location describe it better than a bare URL from the link.
    known.name = name;
    known.location = where;
    known.item.querySelector(".mirror-name")!.textContent = `Probe ${name}`;
    known.item.querySelector(".mirror-where")!.textContent = ` — ${url}${where && `, ${where}`}`;
    return;
  }
  const item = document.createElement("li");
  item.dataset.url = url;
  const label = document.createElement("label");
  label.className = "check";
  const box = document.createElement("input");
  box.type = "checkbox";
  const text = document.createElement("span");
  text.className = "mirror-name";
  text.textContent = `Probe ${name}`;
  const whereText = document.createElement("span");
  whereText.className = "mirror-where";
  whereText.textContent = ` — ${url}${where && `, ${where}`}`;
  label.append(box, text, whereText);
  const status = document.createElement("span");
  status.className = "mirror-status";
  status.textContent = "not probed";
  item.append(label, status);
  ui.mirrorList.append(item);
  const entry: MirrorEntry = {
    url,
    name,
    location: where,
    probing: false,
    rtt: undefined,
    bandwidth: undefined,
    item,
    status,
  };
  mirrorEntries.set(url, entry);
  box.addEventListener("change", () => {
    entry.probing = box.checked;
    item.dataset.probes = "0";
    entry.rtt = undefined;
    entry.bandwidth = undefined;
    status.textContent = box.checked ? "waiting for the first probe" : "not probed";
    send({ type: "mirrors", urls: probedMirrors() });
    showRanking();
  });
  showRanking();
}

function onMirror(ev: MirrorEvent): void {
  const m = mirrorEntries.get(ev.url);
  if (m === undefined || !m.probing) return;
  m.rtt = ev.rtt?.next;
  m.bandwidth = ev.bandwidth?.next;
  m.item.dataset.probes = String(Math.min(ev.rtt?.count ?? 0, ev.bandwidth?.count ?? 0));
  const last = (s: MirrorEvent["rtt"], unit: string) =>
    s === undefined
      ? "–"
      : s.last === null
        ? "timed out"
        : `${formatValue(s.last, unit)} (${s.count} probes, ${s.timeouts} timeouts)`;
  m.status.textContent =
    `RTT ${last(ev.rtt, "ms")}; download ${last(ev.bandwidth, "Mbit/s")}` +
    (ev.problem === "" ? "" : `; last round failed: ${ev.problem}`);
  m.status.classList.toggle("problem", ev.problem !== "");
  showRanking();
}

/** The mirrors named in the link at once, then those the server lists (`/api/mirrors`). */
async function loadMirrors(): Promise<void> {
  for (const url of settings.mirrors) addMirror(url, new URL(url).host, "named in the link");
  showRanking();
  try {
    const r = await fetch("/api/mirrors", { cache: "no-store" });
    if (!r.ok) return;
    const data = (await r.json()) as {
      mirrors?: { name?: unknown; url?: unknown; location?: unknown }[];
    };
    for (const m of data.mirrors ?? []) {
      if (typeof m.url !== "string" || typeof m.name !== "string") continue;
      let url: string;
      try {
        url = new URL(m.url).href;
      } catch {
        continue;
      }
      addMirror(url, m.name, typeof m.location === "string" ? m.location : "");
    }
  } catch {
    // A server without mirrors (or an old one without the endpoint): the link's list stands.
  }
}

function noteForecast(key: string, next: NextForecast | undefined): void {
  if (next === undefined) siteForecasts.delete(key);
  else siteForecasts.set(key, next);
}

function onMeasurement(m: MeasurementEvent): void {
  const { record, next } = m;
  noteForecast(m.key, next);
  showRanking();
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
    noteForecast(s.key, s.next);
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
  showRanking();
  requestDraw();
}

/** Removes the live series after the history was cleared; imported ones stay. */
function onCleared(): void {
  siteForecasts.clear();
  showRanking();
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
  } else if (ev.type === "mirror") {
    onMirror(ev);
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
    mirrors: settings.mirrors,
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
ui.fileSize.addEventListener("input", showRanking);
showSettings(settings);
send({ type: "settings", settings });
void loadMirrors();
