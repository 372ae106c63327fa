// The mirrors: other echo-nodes serving the same files, from the server's `/api/mirrors` and
// from the link (`?mirrors=`), each with its opt-in box (probing a third party is the user's
// call; a choice made on an earlier visit is kept), what its last round measured, and its own
// graphs while it is probed.

import { clock, formatValue } from "../format";
import { mirrorKey, type MirrorEvent, type SeriesKey } from "../messages";
import { endpointName } from "../settings";
import { el } from "./dom";
import { titleOf, type SeriesViews } from "./series-views";

/** "1 probe", "2 probes". */
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

export interface MirrorEntry {
  url: string;
  name: string;
  location: string;
  probing: boolean;
  item: HTMLLIElement;
  status: HTMLElement;
}

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

export interface MirrorsViewDeps {
  /** The serving site's URL: a server that lists itself is ranked already, as "this site". */
  siteUrl: string;
  series: SeriesViews;
  /** Tells the worker which mirrors to probe. */
  probe(urls: string[]): void;
  /** Offers a mirror as a target in the controls. */
  offerTarget(url: string, text: string): void;
  /** What the ranking shows changed. */
  changed(): void;
}

export class MirrorsView {
  readonly entries = new Map<string, MirrorEntry>();
  private readonly list = el<HTMLUListElement>("mirror-list");

  constructor(private readonly deps: MirrorsViewDeps) {}

  private probed(): string[] {
    return [...this.entries.values()].filter((m) => m.probing).map((m) => m.url);
  }

  /** Takes a mirror's graphs off the page (messages.ts `mirrorKey`). */
  private removeSeries(url: string): void {
    this.deps.series.removeWhere((k) => k.startsWith("mirror/") && k.endsWith(`@${url}`));
  }

  /** Lists a mirror with its opt-in checkbox, off unless ticked on an earlier visit. */
  add(url: string, name: string, where: string): void {
    if (url === this.deps.siteUrl) return;
    const known = this.entries.get(url);
    if (known !== undefined) {
      // The server's name and location describe it better than a bare URL from the link.
      known.name = name;
      known.location = where;
      known.item.querySelector(".mirror-name")!.textContent = `Probe ${name}`;
      known.item.querySelector(".mirror-where")!.textContent = ` — ${url}${where && `, ${where}`}`;
      this.deps.offerTarget(url, `${name} (${endpointName(url)})`);
      return;
    }
    this.deps.offerTarget(url, `${name} (${endpointName(url)})`);
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
    // One box of text beside the checkbox, so that a long name or URL wraps as one sentence.
    const words = document.createElement("span");
    words.append(text, whereText);
    label.append(box, words);
    const status = document.createElement("span");
    status.className = "mirror-status";
    status.textContent = "not probed";
    item.append(label, status);
    this.list.append(item);
    const entry: MirrorEntry = {
      url,
      name,
      location: where,
      probing: false,
      item,
      status,
    };
    this.entries.set(url, entry);
    const optIn = () => {
      entry.probing = box.checked;
      item.dataset.probes = "0";
      status.textContent = box.checked ? "waiting for the first probe" : "not probed";
      // Its graphs go with its probes; ticked again, its series come back from the history.
      if (!box.checked) this.removeSeries(url);
      this.deps.probe(this.probed());
      this.deps.changed();
    };
    box.addEventListener("change", () => {
      rememberMirror(url, box.checked);
      optIn();
    });
    if (rememberedMirrors().has(url)) {
      box.checked = true;
      optIn();
    }
    this.deps.changed();
  }

  /** Lists the mirrors named in the link at once, then those the server lists. */
  async load(fromLink: readonly string[]): Promise<void> {
    for (const url of fromLink) this.add(url, new URL(url).host, "named in the link");
    this.deps.changed();
    try {
      const r = await fetch(new URL("api/mirrors", this.deps.siteUrl), { cache: "no-store" });
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
        this.add(url, m.name, typeof m.location === "string" ? m.location : "");
      }
    } catch {
      // A server without mirrors (or an old one without the endpoint): the link's list stands.
    }
  }

  /** A mirror's round (or its restored series): its status, forecasts and graphs. */
  mirror(ev: MirrorEvent): void {
    const m = this.entries.get(ev.url);
    if (m === undefined || !m.probing) return;
    m.item.dataset.probes = String(Math.min(ev.rtt?.count ?? 0, ev.bandwidth?.count ?? 0));
    const last = (s: MirrorEvent["rtt"], unit: string) =>
      s === undefined
        ? "–"
        : s.last === null
          ? "no value (timed out or failed)"
          : `${formatValue(s.last, unit)} (${plural(s.count, "probe")}, ${plural(s.timeouts, "timeout")})`;
    m.status.textContent =
      ev.notEchoNode === true
        ? `answered, but is not an echo-node (no probe reached it since ${clock(ev.unreachableSince ?? Date.now())}): ${ev.problem}`
        : ev.unreachableSince !== undefined
          ? `unreachable since ${clock(ev.unreachableSince)}: ${ev.problem}`
          : `RTT ${last(ev.rtt, "ms")}; download ${last(ev.bandwidth, "Mbit/s")}` +
            (ev.problem === "" ? "" : `; some probes failed: ${ev.problem}`);
    m.status.classList.toggle("problem", ev.problem !== "");
    const label = (key: SeriesKey) => `${titleOf(key)} — ${m.name}`;
    for (const s of ev.history ?? []) {
      this.deps.series.restored(s, mirrorKey(ev.url, s.key), label(s.key));
    }
    for (const e of ev.measurements) {
      this.deps.series.measurement(e, mirrorKey(ev.url, e.key), label(e.key));
    }
    this.deps.changed();
    this.deps.series.requestDraw();
  }

  /** After the history was cleared: the mirrors stay opted in and start new series. */
  cleared(): void {
    for (const m of this.entries.values()) {
      if (!m.probing) continue;
      m.item.dataset.probes = "0";
      m.status.textContent = "waiting for the first probe";
    }
  }
}
