// The page (JavaNws §2.1.3, the Display, and the console): starts the probe worker and wires
// the views (views/) to its messages (messages.ts); they never see the engine itself.

import "./style.css";
import type { HistoryEvent, PageCommand, WorkerEvent } from "./messages";
import { endpointName } from "./settings";
import { Announcer, liveRegion } from "./views/announcer";
import { ConsoleView } from "./views/console-view";
import { ControlsView } from "./views/controls-view";
import { FilesView } from "./views/files-view";
import { GraphsView } from "./views/graphs-view";
import { HeadlineView } from "./views/headline-view";
import { MirrorsView } from "./views/mirrors-view";
import { PredictabilityPanel } from "./views/predictability-view";
import { RankingView } from "./views/ranking-view";
import { isTargetSeries, seriesRank, SeriesViews } from "./views/series-views";
import { el } from "./views/dom";

const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
const send = (cmd: PageCommand) => worker.postMessage(cmd);

/** The serving site, as the ranking and the target control name it: the page's own
 *  directory, which is the site's root or the path a reverse proxy serves echo-node under. */
const SITE_URL = new URL("./", location.href).href;

/** Where the byte budget's spends of the last hour are kept across reloads (the worker has
 *  no localStorage; it sends them after every round). */
const BUDGET_KEY = "nowcast.budget";

/** What a screen reader is told as it happens: summaries, never every probe. */
const announcer = new Announcer(liveRegion(el("announcer")));
const controls = new ControlsView(
  SITE_URL,
  send,
  () => ranking.show(),
  (): number => [...mirrors.entries.values()].filter((m) => m.probing).length,
);
const headline = new HeadlineView((): number => controls.settings.periodS, announcer);
const consoleView = new ConsoleView(seriesRank, () => headline.render(), announcer);
const predictability = new PredictabilityPanel(
  (key) => send({ type: "predictability", key }),
  announcer,
);
const series = new SeriesViews(
  consoleView,
  new GraphsView(seriesRank),
  predictability,
  headline,
  (): number => controls.settings.periodS * 1000,
);
const ranking = new RankingView(
  SITE_URL,
  () => mirrors.entries.values(),
  () => controls.settings.target,
  (fileBytes, sites) => send({ type: "rank", fileBytes, sites }),
  announcer,
);
const mirrors = new MirrorsView({
  siteUrl: SITE_URL,
  series,
  probe: (urls) => send({ type: "mirrors", urls }),
  offerTarget: (url, text) => controls.offerTarget(url, text),
  changed: () => {
    ranking.show();
    controls.warn();
  },
});
const files = new FilesView(send, series);

/**
 * Shows the target's series as saved, with the forecasts as they were made, in place of those
 * shown: at load, and when the target changes (series are per target).
 */
function onHistory(ev: HistoryEvent): void {
  series.removeWhere(isTargetSeries);
  consoleView.showTarget(ev.to);
  for (const s of ev.series) series.restored(s);
  ranking.show();
  series.requestDraw();
}

/** After the history was cleared: the target's, the mirrors' and the imported series are
 *  gone (the mirrors stay opted in and start new series). */
function onCleared(): void {
  series.removeWhere(isTargetSeries);
  mirrors.cleared();
  ranking.show();
  series.removeWhere((key) => key.startsWith("mirror/"));
  files.cleared();
}

worker.onmessage = (e: MessageEvent<WorkerEvent>) => {
  const ev = e.data;
  switch (ev.type) {
    case "measurement":
      series.measurement(ev);
      series.requestDraw();
      break;
    case "history":
      onHistory(ev);
      break;
    case "mirror":
      mirrors.mirror(ev);
      break;
    case "cleared":
      onCleared();
      break;
    case "imported":
      files.imported(ev);
      break;
    case "import-removed":
      files.removed(ev.key);
      break;
    case "predictability": {
      const v = series.get(ev.key);
      if (v !== undefined) predictability.show(ev, v.title, v.unit, v.next, consoleView.names);
      break;
    }
    case "methods":
      for (const [id, name] of ev.names) consoleView.names.set(id, name);
      break;
    case "budget":
      try {
        localStorage.setItem(BUDGET_KEY, JSON.stringify(ev.spends));
      } catch {
        // Storage refused (private mode, quota): the budget starts afresh after a reload.
      }
      break;
    case "export":
      files.exported(ev);
      break;
    case "ranking":
      ranking.ranking(ev);
      break;
    case "status":
      consoleView.status(ev, series.targetMeasured());
      headline.status(ev);
      break;
  }
};
worker.onerror = (e) => consoleView.failed(`the probe worker failed: ${e.message}`);

/** The budget's spends kept before a reload (none when unreadable). */
function keptBudget(): [number, number][] {
  try {
    const v: unknown = JSON.parse(localStorage.getItem(BUDGET_KEY) ?? "[]");
    return Array.isArray(v)
      ? v.filter(
          (e): e is [number, number] =>
            Array.isArray(e) && typeof e[0] === "number" && typeof e[1] === "number",
        )
      : [];
  } catch {
    return [];
  }
}

const target = controls.settings.target;
consoleView.showTarget(target === undefined ? location.host : endpointName(target));
send({ type: "budget", spends: keptBudget() });
controls.start();
void mirrors.load(controls.settings.mirrors);
