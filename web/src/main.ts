// The page (JavaNws §2.1.3, the Display, and the console): starts the probe worker, shows each
// series' last measurement, next forecast and accuracy, draws the graphs, and keeps the
// settings in the URL.

import "./style.css";
import { SeriesChart } from "./chart-view";
import { toCsv, toNdjson } from "./files";
import { clock, formatBytes, formatDuration, formatValue } from "./format";
import {
  mirrorKey,
  type HistoryEvent,
  type ImportedEvent,
  type MeasurementEvent,
  type MirrorEvent,
  type NextForecast,
  type PageCommand,
  type SeriesKey,
  type WorkerEvent,
} from "./messages";
import { PredictabilityView } from "./predictability-view";
import type { Record as MeasurementRecord } from "./record";
import {
  endpointName,
  formatSize,
  parseSize,
  readSettings,
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
/** The target's own series (those in ORDER), as opposed to mirrors' and imported ones. */
const isTargetSeries = (key: string) => ORDER.includes(key);
/** Files larger than this are refused before they are read (the limits in worker.ts keep
 *  20,000 values of a series anyway; a file this large is most likely not measurements). */
const MAX_IMPORT_FILE_BYTES = 32 * 1024 * 1024;

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
  target: el<HTMLSelectElement>("target-select"),
  targetName: el<HTMLOutputElement>("target-name"),
  targetHeading: el("target"),
  settingsProblem: el("settings-problem"),
  budget: el<HTMLInputElement>("budget"),
  suspend: el<HTMLButtonElement>("suspend"),
  showGraphs: el<HTMLInputElement>("show-graphs"),
  graphsSection: el("graphs-section"),
  graphs: el("graphs"),
  importInput: el<HTMLInputElement>("import"),
  importReport: el("import-report"),
  importedList: el<HTMLUListElement>("imported-list"),
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

/** The serving site, as the ranking and the target control name it. */
const SITE_URL = new URL("/", location.href).href;

const read = readSettings(location.search);
let settings: Settings = {
  ...read.settings,
  // A link naming this site as its target means the site.
  target: read.settings.target === SITE_URL ? undefined : read.settings.target,
};
if (read.problems.length > 0) {
  ui.settingsProblem.textContent = read.problems.join("; ");
  ui.settingsProblem.hidden = false;
}
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
  // Then the mirrors' series, then the imported ones, each in arrival order.
  const rank = (k: string | undefined) => {
    const i = ORDER.indexOf(k ?? "");
    return i >= 0 ? i : k?.startsWith("mirror/") ? ORDER.length : Infinity;
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

/** Takes a series off the page: its console row, graph and predictability choice. */
function removeView(key: string): void {
  const v = views.get(key);
  if (v === undefined) return;
  v.row.remove();
  v.chart.destroy();
  [...ui.predictabilitySeries.options].find((o) => o.value === key)?.remove();
  views.delete(key);
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

/** The newest forecast of each of the target's series, for the ranking. */
const targetForecasts = new Map<string, NextForecast>();

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

/**
 * Redraws the ranking table: the site and every mirror, fastest first (ranking.ts). The
 * target's main series stand for the target, unless it is a mirror with its own opted-in probes.
 */
function showRanking(): void {
  const target = settings.target ?? SITE_URL;
  const sites: (Site & { name: string })[] = [
    { url: SITE_URL, name: `${location.host} (this site)`, rtt: undefined, bandwidth: undefined },
    ...[...mirrorEntries.values()].map((m) => ({
      url: m.url,
      name: m.name,
      rtt: estimate(m.rtt),
      bandwidth: estimate(m.bandwidth),
    })),
  ];
  let measured = sites.find((s) => s.url === target);
  if (measured === undefined) {
    measured = {
      url: target,
      name: `${endpointName(target)} (target)`,
      rtt: undefined,
      bandwidth: undefined,
    };
    sites.push(measured);
  }
  // The WebSocket series when measured, else those over fetch (transport "http"). A mirror
  // that is the target is measured as the target (the worker does not probe it twice): its
  // own forecasts are from before.
  measured.rtt =
    estimate(targetForecasts.get("rtt/websocket") ?? targetForecasts.get("rtt/http")) ??
    measured.rtt;
  measured.bandwidth =
    estimate(
      targetForecasts.get("bandwidth_down/websocket") ?? targetForecasts.get("bandwidth_down/http"),
    ) ?? measured.bandwidth;
  const asTarget = mirrorEntries.get(target);
  if (asTarget?.probing === true) asTarget.status.textContent = "measured as the target";
  const byUrl = new Map(sites.map((site) => [site.url, site]));
  const rows = rank(sites, fileBytes(), 1).map((r) => {
    const site = byUrl.get(r.url)!;
    const row = document.createElement("tr");
    row.dataset.url = r.url;
    const head = document.createElement("th");
    head.scope = "row";
    head.textContent = site.name;
    const cells = Array.from({ length: 4 }, () => document.createElement("td"));
    const probing = r.url === target || mirrorEntries.get(r.url)?.probing === true;
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

/** Offers `url` as a target in the controls, named `text` (renamed if already offered). */
function offerTarget(url: string, text: string): void {
  const known = [...ui.target.options].find((o) => o.value === url);
  if (known !== undefined) known.textContent = text;
  else ui.target.add(new Option(text, url));
}

/** The keys of a mirror's series on the page (mirrorKey in messages.ts). */
const mirrorViews = (url: string) =>
  [...views.keys()].filter((k) => k.startsWith("mirror/") && k.endsWith(`@${url}`));

/** Where the mirrors the user opted in to probing are remembered across reloads. */
const PROBED_KEY = "nowcast.probed-mirrors";

/** The mirrors the user opted in to on an earlier visit (none if storage is unavailable). */
function rememberedMirrors(): Set<string> {
  try {
    const v: unknown = JSON.parse(localStorage.getItem(PROBED_KEY) ?? "[]");
    return new Set(Array.isArray(v) ? v.filter((u): u is string => typeof u === "string") : []);
  } catch {
    return new Set();
  }
}

/** Remembers (or forgets) that the user opted in to probing `url`. */
function rememberMirror(url: string, probing: boolean): void {
  const urls = rememberedMirrors();
  if (probing) urls.add(url);
  else urls.delete(url);
  try {
    localStorage.setItem(PROBED_KEY, JSON.stringify([...urls]));
  } catch {
    // Storage refused (private mode, quota): the choice holds for this visit only.
  }
}

/** Lists a mirror with its opt-in checkbox (off: probing a third party is the user's call,
 *  and a choice made on an earlier visit is kept). */
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
    offerTarget(url, `${name} (${endpointName(url)})`);
    return;
  }
  offerTarget(url, `${name} (${endpointName(url)})`);
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
  const optIn = () => {
    entry.probing = box.checked;
    item.dataset.probes = "0";
    entry.rtt = undefined;
    entry.bandwidth = undefined;
    status.textContent = box.checked ? "waiting for the first probe" : "not probed";
    // Its graphs go with its probes; ticked again, its series come back from the history.
    if (!box.checked) mirrorViews(url).forEach(removeView);
    send({ type: "mirrors", urls: probedMirrors() });
    showRanking();
  };
  box.addEventListener("change", () => {
    rememberMirror(url, box.checked);
    optIn();
  });
  if (rememberedMirrors().has(url)) {
    box.checked = true;
    optIn();
  }
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
  const mirrorView = (key: SeriesKey, unit: string) =>
    view(mirrorKey(ev.url, key), unit, `${TITLES[key] ?? key} — ${m.name}`);
  for (const s of ev.history ?? []) {
    const unit = s.records.at(-1)?.unit;
    if (unit !== undefined) showRestored(mirrorView(s.key, unit), s);
  }
  for (const e of ev.measurements) addMeasurement(mirrorView(e.key, e.record.unit), e);
  showRanking();
  requestDraw();
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
  if (next === undefined) targetForecasts.delete(key);
  else targetForecasts.set(key, next);
}

/** Shows a measurement and the next forecast in its series' row and graph. */
function addMeasurement(v: View, m: MeasurementEvent): void {
  const { record, next } = m;
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
}

function onMeasurement(m: MeasurementEvent): void {
  noteForecast(m.key, m.next);
  showRanking();
  addMeasurement(view(m.key, m.record.unit), m);
  requestDraw();
}

/** Takes the target's series off the page (not the mirrors' nor the imported ones). */
function removeTargetSeries(): void {
  targetForecasts.clear();
  for (const key of [...views.keys()]) if (isTargetSeries(key)) removeView(key);
}

/** Names the target measured in the console and the heading. */
function showTarget(name: string): void {
  ui.targetName.textContent = name;
  ui.targetHeading.textContent = name;
}

/**
 * Shows the target's series as saved, with the forecasts as they were made, in place of those
 * shown: at load, and when the target changes (series are per target).
 */
function onHistory(ev: HistoryEvent): void {
  removeTargetSeries();
  showTarget(ev.to);
  for (const s of ev.series) {
    const last = s.records.at(-1);
    if (last === undefined) continue;
    noteForecast(s.key, s.next);
    showRestored(view(s.key, last.unit), s);
  }
  showRanking();
  requestDraw();
}

/** Shows a series rebuilt from the history: its records, their forecasts, its row. */
function showRestored(v: View, s: HistoryEvent["series"][number]): void {
  const last = s.records.at(-1);
  if (last === undefined) return;
  v.records.push(...s.records);
  s.records.forEach((r, i) => {
    // The forecast made after a record is the one the next record carries.
    const f = i + 1 < s.records.length ? s.records[i + 1]!.forecast : undefined;
    const next =
      i + 1 < s.records.length ? f && { value: f.value, error: f.error, method: f.method } : s.next;
    v.chart.add(r.timestamp_ms, r.value, next, settings.periodS * 1000);
  });
  showRow(
    v,
    last.value === null ? `timed out (${last.timeout_ms} ms)` : formatValue(last.value, last.unit),
    s.next,
    s.mae,
    s.count,
    s.timeouts,
  );
}

/** After the history was cleared: the target's, the mirrors' and the imported series are
 *  gone (the mirrors stay opted in and start new series). */
function onCleared(): void {
  removeTargetSeries();
  for (const m of mirrorEntries.values()) {
    m.rtt = undefined;
    m.bandwidth = undefined;
    if (!m.probing) continue;
    m.item.dataset.probes = "0";
    m.status.textContent = "waiting for the first probe";
  }
  showRanking();
  for (const key of [...views.keys()]) {
    if (key.startsWith("import/") || key.startsWith("mirror/")) removeView(key);
  }
  ui.importedList.replaceChildren();
}

/** Lists an imported series with the button that removes it. */
function listImport(key: string, label: string): void {
  const item = document.createElement("li");
  item.dataset.series = key;
  const text = document.createElement("span");
  text.textContent = label;
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "Remove";
  remove.setAttribute("aria-label", `Remove ${label}`);
  remove.addEventListener("click", () => send({ type: "remove-import", key }));
  item.append(text, remove);
  ui.importedList.append(item);
}

function onImportRemoved(key: string): void {
  removeView(key);
  ui.importedList.querySelector(`li[data-series="${CSS.escape(key)}"]`)?.remove();
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
    listImport(s.key, s.label);
  }
  requestDraw();
  // Restored after a reload: reported when it was imported.
  if (ev.restored) return;
  const kept = ev.series.reduce((n, s) => n + s.points.length, 0);
  const lines = ev.errors.map(
    (e) => `line ${e.line}${e.field === undefined ? "" : `, ${e.field}`}: ${e.message}`,
  );
  if (ev.errorCount > ev.errors.length)
    lines.push(`… and ${ev.errorCount - ev.errors.length} more`);
  report(
    `${ev.file} (${ev.format}): ${kept} values in ${ev.series.length} series` +
      (ev.errorCount === 0 ? "." : `; ${ev.errorCount} line(s) refused:`),
    [...ev.notes, ...lines],
    ev.errorCount > 0 || ev.notes.length > 0,
  );
}

/** Adds a report at the top of the import reports: a summary, and its details as a list. */
function report(summary: string, details: string[], problem: boolean): void {
  const div = document.createElement("div");
  const p = document.createElement("p");
  p.textContent = summary;
  if (problem) p.className = "problem";
  div.append(p);
  if (details.length > 0) {
    const list = document.createElement("ul");
    for (const d of details) {
      const item = document.createElement("li");
      item.textContent = d;
      list.append(item);
    }
    div.append(list);
  }
  ui.importReport.prepend(div);
}

async function importFiles(files: Iterable<File>): Promise<void> {
  for (const f of files) {
    if (f.size > MAX_IMPORT_FILE_BYTES) {
      report(
        `${f.name}: not imported, ${formatBytes(f.size)} is more than the ` +
          `${formatBytes(MAX_IMPORT_FILE_BYTES)} a file may have`,
        [],
        true,
      );
      continue;
    }
    send({ type: "import", file: f.name, text: await f.text() });
  }
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
  } else if (ev.type === "import-removed") {
    onImportRemoved(ev.key);
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
  // A target named only in the link is offered too, so that the control shows what is measured.
  if (s.target !== undefined) offerTarget(s.target, `${endpointName(s.target)} (from the link)`);
  ui.target.value = s.target ?? "";
}

function applySettings(): void {
  const budget = Number(ui.budget.value);
  settings = {
    periodS: Number(ui.period.value),
    size: parseSize(ui.size.value) ?? settings.size,
    transport: ui.transport.value as TransportChoice,
    budgetMiB: Number.isFinite(budget) && budget > 0 ? budget : settings.budgetMiB,
    mirrors: settings.mirrors,
    target: ui.target.value === "" ? undefined : ui.target.value,
  };
  history.replaceState(null, "", settingsQuery(settings) || location.pathname);
  send({ type: "settings", settings });
}

for (const input of [ui.period, ui.size, ui.transport, ui.budget]) {
  input.addEventListener("change", applySettings);
}
ui.target.addEventListener("change", () => {
  // The user chose: a complaint about the link's target no longer applies.
  ui.settingsProblem.hidden = true;
  applySettings();
  showRanking();
});
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

ui.target.options[0]!.textContent = `this site (${location.host})`;
showTarget(settings.target === undefined ? location.host : endpointName(settings.target));
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
