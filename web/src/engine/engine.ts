// The engine (JavaNws §2.1.1, the Communicator, and §2.1.2, the Forecaster): every period, a
// round runs the target's plan and then each opted-in mirror's (round.ts), feeds each site's
// series, keeps their records (the one store: history, export and restore), and reports to
// the page in the plain messages of messages.ts. Off the main thread (worker.ts), so that
// drawing never delays a timestamp.

import { exportCsv, loadForecasting, loadReader, methods, toNdjson } from "../forecast";
import {
  parseMirrorKey,
  type BandwidthSchedule,
  type MeasurementEvent,
  type MirrorEvent,
  type MirrorSeries,
  type Outage,
  type SeriesKey,
  type StatusEvent,
  type WorkerEvent,
} from "../messages";
import type { Record } from "../record";
import { DEFAULT_SETTINGS, endpointName, type Settings } from "../settings";
import { ByteBudget } from "./budget";
import { askHost, notEchoNodeReason } from "./diagnose";
import { History } from "./history";
import { Imports } from "./imports";
import { MEASUREMENTS } from "./measure";
import type { PretestResult } from "./measure/pretest";
import { MIRROR_DOWN, MIRROR_RTT, mirrorPlan, targetPlan } from "./plan";
import { ranking } from "./rank";
import { runSites, type RoundEnv, type SitePart, type SiteReport, type Spacing } from "./round";
import { Scheduler, type Clock } from "./scheduler";
import { predictability, type RestoredSeries } from "./series";
import { Site } from "./site";
import { endpointUrl } from "./probe-math";

const MIB = 1024 * 1024;
/** The byte budget keeps what was spent in slots of this length (budget.ts): an hour is at
 *  most 360 entries to keep across reloads, and bytes leave the hour at most this late. */
const BUDGET_SLOT_MS = 10_000;
/** How long the diagnosis of an unreachable target waits for each of its two answers. */
const DIAGNOSE_TIMEOUT_MS = 5000;
/** A mirror's limits: its own echo-node's cap (its HELLO); no allowance stated (only the
 *  serving one's is read). */
const NO_LIMITS: ServerLimits = { maxPayload: Infinity, perMinute: Infinity };

/** What the serving echo-node states of its limits (`/api/config`). */
export interface ServerLimits {
  maxPayload: number;
  perMinute: number;
}

/** Where the engine runs: the page's origin and host, and how its events reach the page. */
export interface EngineHost {
  /** The serving site's base URL (its origin, or the path echo-node is served under) and its
   *  name in records (its host). */
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
  /** Wall-clock ms until which it asked not to be probed (0: no wait). */
  waitUntil: number;
}

const browserClock: Clock = {
  now: () => performance.now(),
  after: (ms, run) => setTimeout(run, ms),
  cancel: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

export class Engine {
  private settings: Settings = { ...DEFAULT_SETTINGS };
  private readonly budget = new ByteBudget(DEFAULT_SETTINGS.budgetMiB * MIB, BUDGET_SLOT_MS);
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
  /** Rounds started: turns the order the sites are probed in (round.ts `runSites`). */
  private rounds = 0;
  /** The history's write of the last round's records: the next round's probes wait for it,
   *  so that no echo is timed beside it. */
  private writing: Promise<unknown> = Promise.resolve();
  /** The smallest transfer the budget held back (bytes), until a round holds none back. */
  private heldBytes: number | undefined;
  /** Bytes the last round spent: the pace the budget's warning reckons with. */
  private roundBytes = 0;
  /** The target's automatically sized bandwidth series and how each is spaced, as the round
   *  that ran last set them. */
  private readonly spacing = new Map<SeriesKey, Spacing>();
  /** Wall-clock ms at which the wait the target's server asked for ends. */
  private waitUntil = 0;

  private constructor(
    private readonly host: EngineHost,
    private history: History | undefined,
    private readonly limits: ServerLimits,
    private readonly readerUrl: string,
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
      () => loadReader(this.readerUrl),
    );
  }

  /** Loads the forecasters (`wasmUrl`), opens the history and reads the serving echo-node's
   *  limits; the series imported before a reload come back between the first rounds. The
   *  file readers (`readerUrl`) are loaded when a file is first imported or exported. */
  static async start(host: EngineHost, wasmUrl: string, readerUrl: string): Promise<Engine> {
    const [history, limits] = await Promise.all([
      loadForecasting(wasmUrl).then(() => History.open()),
      serverLimits(host.origin),
    ]);
    const engine = new Engine(host, history, limits, readerUrl);
    // The forecasters' display names, for the page's tables (it never loads the bank).
    host.post({ type: "methods", names: methods().map(({ id, name }) => [id, name]) });
    engine.imports.restore();
    return engine;
  }

  // ---------------------------------------------------------------- the page's commands

  applySettings(s: Settings): void {
    // Another size or transport plans other transfers: their spacing comes with their round.
    if (s.size !== this.settings.size || s.transport !== this.settings.transport) {
      this.spacing.clear();
    }
    this.settings = s;
    this.budget.perHour = s.budgetMiB * MIB;
    if (s.target !== this.appliedTarget) {
      // The new target's first round starts at once; a round on the wire ends first.
      this.scheduler.soon();
      if (!this.scheduler.inRound) void this.applyTarget();
    }
    this.scheduler.schedule();
    // The status line says the new period and budget now, not at the next round (up to a
    // period later: "Measuring every 2 s" stood for 10 s after the period went to 10 s).
    if (this.told !== undefined) this.status(this.told.state, this.told.message);
  }

  /** Takes back what the budget had spent in the hour before a reload (budget.ts
   *  `snapshot`, kept by the page). */
  restoreBudget(spends: readonly (readonly [number, number])[]): void {
    this.budget.restore(spends, Date.now());
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
  async exportRecords(
    format: "ndjson" | "csv",
    shown: readonly { key: string; label: string }[],
  ): Promise<void> {
    try {
      // The core's writers are in the file readers' module, loaded on the first export.
      await loadReader(this.readerUrl);
    } catch (e) {
      this.status("running", `export failed: ${(e as Error).message}`);
      return;
    }
    const series = shown.map(({ key, label }) => {
      const found = this.shown(key);
      return { label, records: found?.site.series.records(found.key) ?? [] };
    });
    let text: string;
    if (format === "csv") {
      text = exportCsv(series);
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
      site = new Site(name, base, (bytes) => this.budget.spend(bytes, Date.now()), saved);
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
      const m: MirrorRole = { url, site, problem: "", ready: Promise.resolve(), waitUntil: 0 };
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
      problem: m.site.outage?.notEchoNode === true ? m.site.outage.reason : m.problem,
      unreachableSince: m.site.outage?.since,
      ...(m.site.outage?.notEchoNode === true ? { notEchoNode: true } : {}),
    };
  }

  private closeConnections(): void {
    for (const site of this.sites.values()) site.link.close();
  }

  // ---------------------------------------------------------------- rounds

  /**
   * One round: the target's plan and each mirror's, fairly interleaved (round.ts `runSites`:
   * every site's echo, then every site's download, then the target's other steps), one probe
   * at a time so that transfers never overlap. Measurements (and mirror reports) wait for the
   * round's end to be posted and written: the page's drawing and IndexedDB's writes then
   * never run beside a probe, where on a small machine they take CPU that a browser's upload
   * needs to keep its socket fed (100 Mbit/s uploads on two streams dipped more often beside
   * them), and that would time one site's echo slower than another's.
   */
  private async round(): Promise<void> {
    this.held = [];
    this.spacing.clear();
    const spentBefore = this.budget.usedSinceStart;
    const entered: Site[] = [];
    try {
      await this.applyTarget();
      await this.writing;
      if (this.scheduler.backingOff) {
        this.status("backing-off", "the server asked to wait");
        return;
      }
      const target = this.target;
      // The history was cleared meanwhile: the next round measures the new series.
      if (target === undefined) return;
      const startedAt = Date.now();
      // A mirror that is the target is measured as the target, not twice.
      const mirrors = [...this.mirrors.values()].filter(
        (m) => m.site !== target && m.waitUntil <= startedAt,
      );
      await Promise.all(mirrors.map((m) => m.ready));
      const live = mirrors.filter((m) => this.mirrors.get(m.url) === m);
      this.status("running", "");
      const reported = new Map<MirrorRole, MeasurementEvent[]>(live.map((m) => [m, []]));
      const parts: SitePart[] = [
        {
          site: target,
          plan: targetPlan(this.settings, live.length > 0),
          env: this.env(target, this.limits, (e) => this.post(e)),
        },
        ...live.map((m) => ({
          site: m.site,
          plan: mirrorPlan(this.settings),
          env: this.env(m.site, NO_LIMITS, (e) => reported.get(m)!.push(e)),
        })),
      ];
      for (const p of parts) {
        (p.site as Site).enter();
        entered.push(p.site as Site);
      }
      const held = this.heldBytes;
      this.heldBytes = undefined;
      const reports = await runSites(parts, MEASUREMENTS, this.rounds++);
      // Held back before and not tried again (suspended): still held.
      if (this.scheduler.suspended) this.heldBytes ??= held;
      const t = reports[0]!;
      this.reached(target, t, startedAt);
      if (t.waitS !== undefined) {
        this.scheduler.backOff(t.waitS);
        this.waitUntil = Date.now() + t.waitS * 1000;
        this.status("backing-off", t.problem ?? "");
      } else {
        const partial = t.failed > 0 && !target.unreachable;
        this.status(
          this.heldBytes === undefined ? "running" : "over-budget",
          partial ? `some probes failed: ${t.problem}` : "",
        );
      }
      live.forEach((m, i) => {
        const r = reports[i + 1]!;
        this.reached(m.site, r, startedAt);
        m.problem = r.failed > 0 ? (r.problem ?? "") : "";
        if (r.waitS !== undefined) m.waitUntil = Date.now() + r.waitS * 1000;
        if (r.failed > 0) m.site.link.close();
        // Posted only while still opted in: an answer after the user unticked it would bring
        // it back.
        if (this.mirrors.get(m.url) === m) this.post(this.mirrorEvent(m, reported.get(m)!));
      });
    } finally {
      for (const site of entered) site.leave();
      const spent = this.budget.usedSinceStart - spentBefore;
      // Automatic sizes are spaced to stay within the budget (round.ts `size`): a round that
      // ran a first-run burst or a spaced probe spends more than its share, and is no pace to
      // warn of; the hour's own pace bounds theirs.
      this.roundBytes =
        this.settings.size === "auto"
          ? Math.min(spent, (this.budget.perHour * this.settings.periodS) / 3600)
          : spent;
      this.flush();
      if (this.scheduler.suspended) this.closeConnections();
    }
  }

  /** The schedule of the target's automatically sized bandwidth series, in seconds at the
   *  period in force: what the status line and the headline's cards both say. */
  private bandwidthSchedule(): BandwidthSchedule {
    const auto = this.settings.size === "auto";
    const spacings = auto ? [...this.spacing] : [];
    const everyS: BandwidthSchedule["everyS"] = {};
    // In the seconds of the period the spacing was worked out at: after a new period, until
    // the next round works it out again, the same seconds hold (the budget's share per round
    // scales with the period), where its rounds at the new period did not ("bandwidth every
    // 4 h 14 min": 254 rounds of 2 s counted at a minute). Never more often than each round.
    for (const [key, s] of spacings) {
      everyS[key] = Math.max(s.every * s.periodS, this.settings.periodS);
    }
    const limited = spacings.find(([, s]) => s.limit !== undefined)?.[1];
    return {
      everyS,
      limit: limited?.limit,
      capped: spacings.some(([, s]) => s.capped),
    };
  }

  /** Whether `site` was reached in a round that started at `at`: a site that answered no
   *  step and failed some is unreachable (ranked last), and its outage dates from the first
   *  such round. A server that asks to wait has answered. */
  private reached(site: Site, r: SiteReport, at: number): void {
    site.unreachable = r.answered === 0 && r.failed > 0 && r.waitS === undefined;
    if (!site.unreachable) site.outage = undefined;
    else if (site.outage === undefined) {
      site.outage = { since: at, reason: r.problem ?? "" };
      void this.diagnose(site, site.outage);
    }
  }

  /** Asks a site's host (the target's or a mirror's) why nothing reached it (diagnose.ts):
   *  a host that answers over HTTP but not as an echo-node is named as such, with what to do,
   *  for as long as the outage lasts (a mirror's status says so from its next round). */
  private async diagnose(site: Site, outage: Outage): Promise<void> {
    const reason = notEchoNodeReason(await askHost(site.link.base, DIAGNOSE_TIMEOUT_MS));
    if (reason === undefined || site.outage !== outage) return;
    outage.reason = reason;
    outage.notEchoNode = true;
    if (site === this.target && this.told !== undefined) {
      this.status(this.told.state, this.told.message);
    }
  }

  /** What a round needs to run a site's plan: each measurement is kept in its store, then
   *  `report`ed. */
  private env(site: Site, limits: ServerLimits, report: (e: MeasurementEvent) => void): RoundEnv {
    return {
      budget: this.budget,
      periodS: this.settings.periodS,
      limits: () => ({
        maxPayload: Math.min(limits.maxPayload, site.link.maxPayload),
        perMinute: limits.perMinute,
      }),
      now: () => Date.now(),
      wallClock: () => Date.now(),
      suspended: () => this.scheduler.suspended,
      record: (e) => {
        // Not after the site went (unticked, another target, history cleared) mid-round.
        if (site.retired) return;
        this.unsaved.push({ key: e.key, record: e.record });
        report(e);
      },
      overBudget: (bytes) => {
        this.heldBytes = Math.min(this.heldBytes ?? Infinity, bytes);
        this.status("over-budget", "");
      },
      pretested: (key, results, streams) => this.pretested(site, key, results, streams),
      spaced: (key, spacing) => {
        if (site === this.target) this.spacing.set(key, spacing);
      },
      bursting: () => {
        // The round's measurements so far (its echo) go to the page before the burst's
        // transfers, which may take a second on a slow link; the rest wait for the round's end.
        const events = this.held ?? [];
        if (this.held !== undefined) this.held = [];
        for (const e of events) this.host.post(e);
      },
    };
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
    // For the console and the accuracy tests, not the page: the stream count is engine detail.
    console.info(`nowcast: ${note}`);
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

  /** Ends a round: posts what it held, the ranking after it and what the budget spent in
   *  the hour (the page keeps it across reloads), and writes its records to the history. */
  private flush(): void {
    const events = this.held ?? [];
    this.held = undefined;
    for (const e of events) this.post(e);
    this.postRanking();
    this.post({ type: "budget", spends: this.budget.snapshot(Date.now()) });
    const rows = this.unsaved;
    this.unsaved = [];
    if (rows.length === 0 || this.history === undefined) return;
    this.writing = this.history.append(rows).catch((err: unknown) => {
      // Storage can fill up or be revoked; measuring goes on without it.
      this.status("running", `history not saved: ${(err as Error).message}`);
      this.history = undefined;
    });
  }

  /** The last state and message told, which a change of settings tells again with them. */
  private told: { state: StatusEvent["state"]; message: string } | undefined;

  private status(state: StatusEvent["state"], message: string): void {
    this.told = { state, message };
    const now = Date.now();
    const held = this.heldBytes;
    this.post({
      type: "status",
      // A round on the wire when the user suspended ends after the "suspended" it was told:
      // what it says then must not put "Measuring" back in the status line (a live region,
      // which a screen reader reads out) while nothing is measured.
      state:
        this.scheduler.suspended && (state === "running" || state === "over-budget")
          ? "suspended"
          : state,
      message: [message, this.blockedNote].filter((m) => m !== "").join("; "),
      bytesThisHour: this.budget.used(now),
      bytesSinceStart: this.budget.usedSinceStart,
      budgetBytes: this.budget.perHour,
      periodS: this.settings.periodS,
      bandwidth: this.bandwidthSchedule(),
      roundBytes: this.roundBytes,
      budgetResumesAt: held === undefined ? undefined : this.budget.resumesAt(held, now),
      outage: this.target?.outage,
      waitUntil: this.scheduler.backingOff ? this.waitUntil : undefined,
    });
  }
}

/** The serving echo-node's limits (`/api/config`), or none stated where it says nothing. */
async function serverLimits(origin: string): Promise<ServerLimits> {
  const limits = { maxPayload: 64 * MIB, perMinute: Infinity };
  try {
    const r = await fetch(endpointUrl(origin, "api/config"), { cache: "no-store" });
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
