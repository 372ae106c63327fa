// The engine (JavaNws §2.1.1, the Communicator, and §2.1.2, the Forecaster): every period, a
// round runs the target's plan and then each opted-in mirror's (round.ts), feeds each site's
// series, keeps their records (the one store: history, export and restore), and reports to
// the page in the plain messages of messages.ts. Off the main thread (worker.ts), so that
// drawing never delays a timestamp.

import { toCsv, toNdjson } from "../files";
import { loadForecasting } from "../forecast";
import {
  parseMirrorKey,
  type MeasurementEvent,
  type MirrorEvent,
  type MirrorSeries,
  type SeriesKey,
  type StatusEvent,
  type WorkerEvent,
} from "../messages";
import type { Record } from "../record";
import { DEFAULT_SETTINGS, endpointName, type Settings } from "../settings";
import { ByteBudget } from "./budget";
import { backoffSeconds } from "./errors";
import { History } from "./history";
import { Imports } from "./imports";
import { MEASUREMENTS } from "./measure";
import type { PretestResult } from "./measure/pretest";
import { MIRROR_DOWN, MIRROR_RTT, mirrorPlan, targetPlan, type Plan } from "./plan";
import { ranking } from "./rank";
import { runRound, type RoundEnv } from "./round";
import { Scheduler, type Clock } from "./scheduler";
import { predictability, type RestoredSeries } from "./series";
import { Site } from "./site";

const MIB = 1024 * 1024;

/** What the serving echo-node states of its limits (`/api/config`). */
export interface ServerLimits {
  maxPayload: number;
  perMinute: number;
}

/** Where the engine runs: the page's origin and host, and how its events reach the page. */
export interface EngineHost {
  /** The serving site's base URL (its origin) and its name in records (its host). */
  origin: string;
  host: string;
  post(e: WorkerEvent): void;
}

/** A mirror the user opted in to probing. */
interface MirrorRole {
  url: string;
  site: Site;
  /** Why its last round failed, or "". */
  problem: string;
  /** Resolves once its series are restored and shown (before its first round). */
  ready: Promise<void>;
}

const browserClock: Clock = {
  now: () => performance.now(),
  after: (ms, run) => setTimeout(run, ms),
  cancel: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

export class Engine {
  private settings: Settings = { ...DEFAULT_SETTINGS };
  private readonly budget = new ByteBudget(DEFAULT_SETTINGS.budgetMiB * MIB);
  private readonly scheduler: Scheduler;
  private readonly imports: Imports;
  /** Every site measured, by name (records' `to`): the target and the mirrors opted in. */
  private readonly sites = new Map<string, Site>();
  /** The site the main series measure; undefined until the first settings, and while the
   *  history is cleared. */
  private target: Site | undefined;
  /** The target the settings named when last applied; null before the first settings. */
  private appliedTarget: string | undefined | null = null;
  /** Target switches and the clearing of the history, in order: a round waits for them. */
  private switching: Promise<void> = Promise.resolve();
  private readonly mirrors = new Map<string, MirrorRole>();
  /** The mirrors the user opted in to (the page's last word), probed unless `clearing`. */
  private wantedMirrors: readonly string[] = [];
  private clearing = false;
  /** Measurements and mirror reports of the round that runs, posted when it ends ({@link
   *  round}). */
  private held: WorkerEvent[] | undefined;
  /** Records of the round that runs, written to the history when it ends. */
  private unsaved: { key: SeriesKey; record: Record }[] = [];
  /** Why the target cannot be reached at all, shown with every status until it changes. */
  private blockedNote = "";
  /** The sites the page ranks and the file size; undefined until it asks. */
  private rankQuery: { fileBytes: number; sites: readonly string[] } | undefined;

  private constructor(
    private readonly host: EngineHost,
    private history: History | undefined,
    private readonly limits: ServerLimits,
  ) {
    this.scheduler = new Scheduler(
      browserClock,
      () => this.settings.periodS * 1000,
      () => this.round(),
    );
    this.imports = new Imports(
      () => this.history,
      () => this.scheduler.betweenRounds(),
      (e) => this.post(e),
      (message) => this.status("running", message),
    );
  }

  /** Loads the forecasters (`wasmUrl`), opens the history and reads the serving echo-node's
   *  limits; the series imported before a reload come back between the first rounds. */
  static async start(host: EngineHost, wasmUrl: string): Promise<Engine> {
    const [history, limits] = await Promise.all([
      loadForecasting(wasmUrl).then(() => History.open()),
      serverLimits(host.origin),
    ]);
    const engine = new Engine(host, history, limits);
    engine.imports.restore();
    return engine;
  }

  // ---------------------------------------------------------------- the page's commands

  applySettings(s: Settings): void {
    this.settings = s;
    this.budget.perHour = s.budgetMiB * MIB;
    if (s.target !== this.appliedTarget) {
      // The new target's first round starts at once; a round on the wire ends first.
      this.scheduler.soon();
      if (!this.scheduler.inRound) void this.applyTarget();
    }
    this.scheduler.schedule();
  }

  suspend(): void {
    this.scheduler.suspend();
    if (!this.scheduler.inRound) this.closeConnections();
    this.status("suspended", "");
  }

  resume(): void {
    this.scheduler.resume();
  }

  /** Probes the mirrors in `urls` from now on, and stops (closes, forgets) the others. */
  setMirrors(urls: readonly string[]): void {
    this.wantedMirrors = urls;
    // While the history is being cleared, none is probed (nor restored from what goes).
    if (!this.clearing) this.probeMirrors(urls);
    this.scheduler.schedule();
  }

  /** Forgets every series, record and imported series, here and in the history; the target
   *  and the mirrors opted in start new series once it is empty. */
  clear(): void {
    this.imports.clear();
    // What the round on the wire measured so far goes too: neither shown nor written.
    if (this.held !== undefined) this.held = [];
    this.unsaved = [];
    for (const site of this.sites.values()) site.retire();
    this.sites.clear();
    this.mirrors.clear();
    this.target = undefined;
    this.clearing = true;
    const history = this.history;
    this.switching = this.switching
      .then(() => history?.clear())
      .catch(() => undefined)
      .then(() => {
        this.clearing = false;
        this.post({ type: "cleared" });
        if (this.appliedTarget !== null) this.target = this.targetSite(this.appliedTarget);
        this.probeMirrors(this.wantedMirrors);
        this.postRanking();
      });
  }

  /** Ranks the sites the page lists, now and whenever their forecasts change. */
  rank(fileBytes: number, sites: readonly string[]): void {
    this.rankQuery = { fileBytes, sites };
    this.postRanking();
  }

  importFile(file: string, text: string): void {
    this.imports.add(file, text);
  }

  removeImport(key: string): void {
    this.imports.remove(key);
  }

  /** Posts the predictability view of the series the page shows under `key`. */
  predictability(key: string): void {
    if (this.imports.predictability(key)) return;
    const found = this.shown(key);
    if (found === undefined || !found.site.series.has(found.key)) return;
    this.post(predictability(key, found.site.series.get(found.key)));
  }

  /**
   * Posts the records of the series the page shows (by their keys there, with their labels)
   * as an NDJSON file, or as CSV; imported series have none (they are the user's files).
   */
  exportRecords(format: "ndjson" | "csv", shown: readonly { key: string; label: string }[]): void {
    const series = shown.map(({ key, label }) => {
      const found = this.shown(key);
      return { label, records: found?.site.series.records(found.key) ?? [] };
    });
    let text: string;
    if (format === "csv") {
      text = toCsv(series);
    } else {
      // A series shown twice (a mirror that is the target) is written once.
      const records = [...new Set(series.map((s) => s.records))].flat();
      text = toNdjson(records.sort((a, b) => a.timestamp_ms - b.timestamp_ms));
    }
    this.post({ type: "export", format, text });
  }

  /** A connection the serving echo-node's Content-Security-Policy refused (it lists only
   *  itself and its mirrors): said with every status when it is the target's. */
  blocked(uri: string): void {
    const note =
      `this site's Content-Security-Policy does not allow connecting to ${uri} ` +
      "(only to itself and the mirrors its server lists)";
    try {
      if (this.target !== undefined && new URL(uri).host === new URL(this.target.link.base).host) {
        this.blockedNote = note;
      }
    } catch {
      // Not a URL: nothing to match against the target.
    }
    this.status("running", this.blockedNote === note ? "" : note);
  }

  // ---------------------------------------------------------------- sites

  /** The site named `name`, made (and its history loaded) if it is not measured yet. */
  private site(name: string, base: string): Site {
    let site = this.sites.get(name);
    if (site === undefined) {
      const saved = this.history?.load(name).catch(() => undefined) ?? Promise.resolve(undefined);
      site = new Site(name, base, (bytes) => this.budget.spend(bytes, performance.now()), saved);
      this.sites.set(name, site);
    }
    return site;
  }

  /** The site of the target `target` names (undefined: the serving site). */
  private targetSite(target: string | undefined): Site {
    return target === undefined
      ? this.site(this.host.host, this.host.origin)
      : this.site(endpointName(target), target);
  }

  /** Retires `site` once it is neither the target nor a mirror. */
  private letGo(site: Site): void {
    if (site === this.target || [...this.mirrors.values()].some((m) => m.site === site)) return;
    this.sites.delete(site.name);
    site.retire();
  }

  /** The site and series the page shows under `key` (messages.ts `mirrorKey` for a
   *  mirror's). */
  private shown(key: string): { site: Site; key: SeriesKey } | undefined {
    const mirror = parseMirrorKey(key);
    if (mirror !== undefined) {
      const site = this.mirrors.get(mirror.url)?.site;
      return site && { site, key: mirror.key };
    }
    return this.target && { site: this.target, key: key as SeriesKey };
  }

  /**
   * Makes the settings' target the one measured, if it is not already. Called only between
   * rounds, so that no probe of one endpoint ever feeds another's series.
   */
  private applyTarget(): Promise<void> {
    if (this.settings.target !== this.appliedTarget) {
      const target = this.settings.target;
      this.appliedTarget = target;
      this.switching = this.switching.then(() => this.switchTo(target));
    }
    return this.switching;
  }

  /**
   * Measures `target` (undefined: the serving site) from now on: the old target's
   * connections close and, unless it is a mirror, its forecasters go; the new one's series
   * are rebuilt from its saved records and shown before its first new probe.
   */
  private async switchTo(target: string | undefined): Promise<void> {
    const old = this.target;
    this.target = undefined;
    if (old !== undefined) {
      old.replan();
      this.letGo(old);
    }
    // A wait the old target asked for, or a block on reaching it, is not the new one's.
    this.scheduler.clearBackoff();
    this.blockedNote = "";
    const site = this.targetSite(target);
    site.replan();
    this.target = site;
    await site.loaded;
    this.post({ type: "history", to: site.name, series: site.series.restored() });
    this.postRanking();
  }

  /** Starts probing the mirrors in `urls` and stops the others. */
  private probeMirrors(urls: readonly string[]): void {
    for (const [url, m] of this.mirrors) {
      if (urls.includes(url)) continue;
      this.mirrors.delete(url);
      this.letGo(m.site);
    }
    for (const url of urls) {
      if (this.mirrors.has(url)) continue;
      // Named as a target is (records' `to`), so its history is the same whichever way it
      // is measured, and a mirror that is the target is one site.
      const site = this.site(endpointName(url), url);
      const m: MirrorRole = { url, site, problem: "", ready: Promise.resolve() };
      this.mirrors.set(url, m);
      // A history that cannot be read leaves the mirror with new series, probed all the same.
      m.ready = site.loaded
        .then(() => this.showMirrorHistory(m))
        .catch((e: unknown) => {
          m.problem = `history not restored: ${(e as Error).message}`;
        });
    }
  }

  /** Shows a mirror's series as saved, so that a reload, or ticking it again, goes on from
   *  where its graphs were. */
  private showMirrorHistory(m: MirrorRole): void {
    if (this.mirrors.get(m.url) !== m) return;
    const history = m.site.series.restored([MIRROR_RTT, MIRROR_DOWN]);
    if (history.length === 0) return;
    this.post(this.mirrorEvent(m, [], history));
    this.postRanking();
  }

  private mirrorEvent(
    m: MirrorRole,
    measurements: MeasurementEvent[],
    history?: RestoredSeries[],
  ): MirrorEvent {
    const series = (key: SeriesKey): MirrorSeries | undefined => {
      const last = m.site.series.records(key).at(-1);
      if (last === undefined) return undefined;
      const { count, timeouts } = m.site.series.get(key).state();
      return { last: last.value, count, timeouts };
    };
    return {
      type: "mirror",
      url: m.url,
      rtt: series(MIRROR_RTT),
      bandwidth: series(MIRROR_DOWN),
      measurements,
      ...(history === undefined ? {} : { history }),
      problem: m.problem,
    };
  }

  private closeConnections(): void {
    for (const site of this.sites.values()) site.link.close();
  }

  // ---------------------------------------------------------------- rounds

  /**
   * One round: the target's plan, then each mirror's, one at a time so that their transfers
   * never overlap. Measurements (and mirror reports) wait for the round's end to be posted
   * and written: the page's drawing and IndexedDB's writes then never run beside a probe,
   * where on a small machine they take CPU that a browser's upload needs to keep its socket
   * fed (100 Mbit/s uploads on two streams dipped more often beside them).
   */
  private async round(): Promise<void> {
    this.held = [];
    try {
      await this.applyTarget();
      if (this.scheduler.backingOff) {
        this.status("backing-off", "the server asked to wait");
        return;
      }
      const target = this.target;
      // The history was cleared meanwhile: the next round measures the new series.
      if (target === undefined) return;
      this.status("running", "");
      try {
        await this.run(target, targetPlan(this.settings), this.limits, (e) => this.post(e));
      } catch (e) {
        const wait = backoffSeconds(e);
        if (wait !== undefined) this.scheduler.backOff(wait);
        const message = (e as Error).message;
        if (wait !== undefined) this.status("backing-off", `${message}; waiting ${wait} s`);
        else this.status("running", message);
      }
      // A mirror that is the target is measured as the target, not twice.
      for (const m of [...this.mirrors.values()]) {
        if (this.scheduler.suspended || this.scheduler.backingOff) break;
        if (m.site !== this.target) await this.mirrorRound(m);
      }
    } finally {
      this.flush();
      if (this.scheduler.suspended) this.closeConnections();
    }
  }

  /**
   * One round against a mirror, with the same probes and timeouts as the target's. A failure
   * is shown beside the mirror and never stops the target's measurements, nor those of the
   * other mirrors.
   */
  private async mirrorRound(m: MirrorRole): Promise<void> {
    await m.ready;
    if (this.mirrors.get(m.url) !== m) return;
    const measurements: MeasurementEvent[] = [];
    try {
      // Its own echo-node's cap; no allowance stated (only the serving one's is read).
      const limits = { maxPayload: Infinity, perMinute: Infinity };
      await this.run(m.site, mirrorPlan(this.settings), limits, (e) => measurements.push(e));
      m.problem = "";
    } catch (e) {
      m.problem = (e as Error).message || (e as Error).name;
      m.site.link.close();
    } finally {
      // Posted only while still opted in: an answer after the user unticked it would bring
      // it back.
      if (this.mirrors.get(m.url) === m) this.post(this.mirrorEvent(m, measurements));
    }
  }

  /** Runs `plan` against `site`; each measurement is kept in its store, then `report`ed. A
   *  round that cannot reach the site leaves it unreachable until one does. */
  private async run(
    site: Site,
    plan: Plan,
    limits: ServerLimits,
    report: (e: MeasurementEvent) => void,
  ): Promise<void> {
    const now = () => performance.now();
    const env: RoundEnv = {
      budget: this.budget,
      periodS: this.settings.periodS,
      limits: () => ({
        maxPayload: Math.min(limits.maxPayload, site.link.maxPayload),
        perMinute: limits.perMinute,
      }),
      now,
      wallClock: () => Date.now(),
      suspended: () => this.scheduler.suspended,
      record: (e) => {
        // Not after the site went (unticked, another target, history cleared) mid-round.
        if (site.retired) return;
        this.unsaved.push({ key: e.key, record: e.record });
        report(e);
      },
      overBudget: () =>
        this.status("over-budget", "hourly byte budget reached: bandwidth probes wait"),
      pretested: (key, results, streams) => this.pretested(site, key, results, streams),
    };
    try {
      await site.round(() => runRound(site, plan, env, MEASUREMENTS));
      site.unreachable = false;
    } catch (e) {
      // A server that answers, if only to ask for a wait, is reachable.
      site.unreachable = backoffSeconds(e) === undefined;
      throw e;
    }
  }

  private pretested(
    site: Site,
    key: SeriesKey,
    results: readonly PretestResult[],
    streams: number,
  ): void {
    const label = site === this.target ? key : `${key} of mirror ${site.link.base}`;
    const figures = results.map((r) => `${r.streams}: ${r.mbits.toFixed(1)}`).join(", ");
    const note = `${label} pretest (streams: Mbit/s) ${figures} → ${streams}`;
    console.info(`nowcast: ${note}`);
    this.status("running", note);
  }

  // ---------------------------------------------------------------- to the page

  /** Posts an event to the page; during a round, measurements and mirror reports wait for
   *  its end ({@link round}). */
  private post(e: WorkerEvent): void {
    if (this.held !== undefined && (e.type === "measurement" || e.type === "mirror")) {
      this.held.push(e);
      return;
    }
    this.host.post(e);
  }

  /** The ranking the page asked for, as the forecasts stand now. */
  private postRanking(): void {
    if (this.rankQuery === undefined) return;
    const { fileBytes, sites } = this.rankQuery;
    const measured = (url: string) => this.sites.get(endpointName(url));
    this.post({ type: "ranking", sites: ranking(sites, fileBytes, measured) });
  }

  /** Ends a round: posts what it held, the ranking after it, and writes its records to the
   *  history. */
  private flush(): void {
    const events = this.held ?? [];
    this.held = undefined;
    for (const e of events) this.post(e);
    this.postRanking();
    const rows = this.unsaved;
    this.unsaved = [];
    if (rows.length === 0) return;
    this.history?.append(rows).catch((err: unknown) => {
      // Storage can fill up or be revoked; measuring goes on without it.
      this.status("running", `history not saved: ${(err as Error).message}`);
      this.history = undefined;
    });
  }

  private status(state: StatusEvent["state"], message: string): void {
    const now = performance.now();
    this.post({
      type: "status",
      state,
      message: [message, this.blockedNote].filter((m) => m !== "").join("; "),
      bytesThisHour: this.budget.used(now),
      bytesSinceStart: this.budget.usedSinceStart,
      budgetBytes: this.budget.perHour,
    });
  }
}

/** The serving echo-node's limits (`/api/config`), or none stated where it says nothing. */
async function serverLimits(origin: string): Promise<ServerLimits> {
  const limits = { maxPayload: 64 * MIB, perMinute: Infinity };
  try {
    const r = await fetch(new URL("/api/config", origin), { cache: "no-store" });
    const c = (await r.json()) as {
      limits?: { maxPayloadBytes?: number; bytesPerMinute?: number };
    };
    limits.maxPayload = c.limits?.maxPayloadBytes ?? limits.maxPayload;
    limits.perMinute = c.limits?.bytesPerMinute ?? limits.perMinute;
  } catch {
    // No limits stated: the defaults hold.
  }
  return limits;
}
