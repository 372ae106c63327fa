// Imported series: read from the user's files, forecast by the core's series like the live
// ones (as a statistic, without timeouts: their values were not probes), kept in the history
// until removed, and replayed between rounds so that replaying never delays a probe's
// timestamp.

import { importText, ProbedSeries } from "../forecast";
import type { ImportedEvent, WorkerEvent } from "../messages";
import type { History, StoredImport } from "./history";
import { predictability } from "./series";

/** The page shows at most this many refused lines of a file (the core keeps 100); the count
 *  says how many more. */
const MAX_REPORTED_ERRORS = 50;
/**
 * Values kept of one imported series: the newest ones. Replaying takes about 10 µs a value
 * (180 ms for 20,000 in Node on the test machine), and the graph shows the newest 10,000.
 */
const MAX_IMPORTED_POINTS = 20_000;
/** Imported series kept at once (each is a bank in memory and a copy in IndexedDB). */
const MAX_IMPORTED_SERIES = 20;
/**
 * The core's series names a metric for the records it writes; an imported series keeps none
 * (its values are the user's file, whatever they measure), so this one only fills the field.
 */
const IMPORTED_METRIC = "throughput";

export class Imports {
  /** Their series, by key ("import/…"), and their id in the history. */
  private readonly series = new Map<string, { series: ProbedSeries; id: number | undefined }>();
  /** Series without an IndexedDB id (storage unavailable) are numbered from here. */
  private unsaved = 0;
  /** Imports and their restoring, one after another, so that the limits count what came
   *  before. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly history: () => History | undefined,
    private readonly betweenRounds: () => Promise<void>,
    private readonly post: (e: WorkerEvent) => void,
    private readonly failed: (message: string) => void,
    /** Loads the file readers' module (forecast.ts `loadReader`), which a file's reading
     *  needs and restoring saved imports does not. */
    private readonly loadReader: () => Promise<void>,
  ) {}

  /** Queues work after what is queued, starting between rounds. */
  private enqueue(work: () => Promise<void>): void {
    this.queue = this.queue
      .then(this.betweenRounds)
      .then(work)
      .catch((e: unknown) => this.failed(`import failed: ${(e as Error).message}`));
  }

  /** Shows the series imported before the page was reloaded, one between rounds at a time. */
  restore(): void {
    this.enqueue(async () => {
      const stored =
        (await this.history()
          ?.imports()
          .catch(() => undefined)) ?? [];
      for (const s of stored) {
        await this.betweenRounds();
        // A saved item that cannot be shown (damaged storage, an older page's shape) is
        // skipped with a message: it never stops the others from coming back.
        let series;
        try {
          series = [this.replay(checkStored(s), `import/${s.id}`)];
        } catch (e) {
          this.failed(
            `a saved import (${nameOf(s)}) could not be restored and was skipped: ` +
              (e as Error).message,
          );
          continue;
        }
        this.post({
          type: "imported",
          file: s.file,
          format: s.format,
          series,
          errors: [],
          errorCount: 0,
          notes: [],
          restored: true,
        });
      }
    });
  }

  /** Runs an imported series (in time order: the core's reader sorts each series) through a
   *  series of the core and keeps it under `key`; returns it as shown, each point with the
   *  forecast made after it. */
  private replay(s: StoredImport, key: string): ImportedEvent["series"][number] {
    const series = ProbedSeries.create({
      metric: IMPORTED_METRIC,
      kind: "statistic",
      source: "import",
      to: s.label,
    });
    this.series.set(key, { series, id: s.id });
    const points = s.points;
    const next = series.observeValues(points);
    return {
      key,
      label: s.label,
      unit: s.unit,
      points: points.map((p, i) => ({ ...p, next: next[i] })),
      mae: series.state().mae,
    };
  }

  /**
   * Reads a file the user dropped or picked, forecasts its series and stores them, within the
   * limits: at most {@link MAX_IMPORTED_SERIES} series kept, each trimmed to its newest
   * {@link MAX_IMPORTED_POINTS} values; the report says what was left out.
   */
  add(file: string, text: string): void {
    this.enqueue(() => this.read(file, text));
  }

  private async read(file: string, text: string): Promise<void> {
    // The core's reader (the CLI's): the format from the content, each series named and with
    // its unit, a file in no supported format told so once.
    await this.loadReader();
    const r = importText(text);
    const notes: string[] = r.unsupported === undefined ? [] : [r.unsupported];
    notes.push(...r.notes);
    const room = Math.max(0, MAX_IMPORTED_SERIES - this.series.size);
    if (r.series.length > room) {
      notes.push(
        `${r.series.length - room} series left out: at most ${MAX_IMPORTED_SERIES} imported ` +
          "series are kept at once; remove some to import more",
      );
    }
    const series = [];
    for (const s of r.series.slice(0, room)) {
      // In a note, a file of one series is named by the file alone.
      const named = r.series.length === 1 ? file : s.name;
      let points = s.points;
      if (points.length > MAX_IMPORTED_POINTS) {
        notes.push(
          `${named}: kept the newest ${MAX_IMPORTED_POINTS} of ${points.length} values ` +
            `(at most ${MAX_IMPORTED_POINTS} per series)`,
        );
        points = points.slice(-MAX_IMPORTED_POINTS);
      }
      if (s.clock === "relative") {
        notes.push(`${named}: the times are the tool's own clock, not dates`);
      }
      const stored: StoredImport = {
        file,
        format: r.format ?? "unknown",
        label: `${s.name} (${file})`,
        unit: s.unit ?? "",
        points,
      };
      const history = this.history();
      try {
        stored.id = await history?.addImport(stored);
      } catch (e) {
        notes.push(`${named}: not kept for the next visit (${(e as Error).message})`);
      }
      if (history === undefined) {
        notes.push(`${named}: not kept for the next visit (no IndexedDB in this browser)`);
      }
      await this.betweenRounds();
      series.push(this.replay(stored, `import/${stored.id ?? `unsaved-${++this.unsaved}`}`));
    }
    this.post({
      type: "imported",
      file,
      format: r.format ?? "unknown",
      series,
      errors: r.errors.slice(0, MAX_REPORTED_ERRORS),
      errorCount: r.errorCount,
      notes,
      restored: false,
    });
  }

  /** Forgets an imported series, here and in the history. */
  remove(key: string): void {
    const i = this.series.get(key);
    if (i === undefined) return;
    this.series.delete(key);
    i.series.dispose();
    if (i.id !== undefined)
      void this.history()
        ?.removeImport(i.id)
        .catch(() => undefined);
    this.post({ type: "import-removed", key });
  }

  /** The predictability view of an imported series, if `key` is one. */
  predictability(key: string): boolean {
    const i = this.series.get(key);
    if (i === undefined) return false;
    this.post(predictability(key, i.series));
    return true;
  }

  /** Forgets them all (the history is being cleared). */
  clear(): void {
    for (const i of this.series.values()) i.series.dispose();
    this.series.clear();
  }
}

/** A stored import as the page keeps it, or an error that says what is wrong with it. */
function checkStored(s: StoredImport): StoredImport {
  if (typeof s !== "object" || s === null) throw new Error("not an object");
  for (const key of ["file", "format", "label", "unit"] as const) {
    if (typeof s[key] !== "string") throw new Error(`its ${key} is not text`);
  }
  if (!Array.isArray(s.points)) throw new Error("it has no list of points");
  if (s.points.length > MAX_IMPORTED_POINTS)
    throw new Error(`it has ${s.points.length} points (at most ${MAX_IMPORTED_POINTS})`);
  s.points.forEach((p, i) => {
    if (!Number.isFinite(p?.t) || !Number.isFinite(p?.value))
      throw new Error(`point ${i + 1} is not a finite time and value`);
    // The core's reader stores each series in time order; one that is not was not stored
    // by it.
    if (i > 0 && p.t < s.points[i - 1]!.t)
      throw new Error(`point ${i + 1} is earlier than the one before it`);
  });
  return s;
}

/** A few words naming a stored import in a message. */
function nameOf(s: unknown): string {
  const label = (s as StoredImport | null)?.label;
  return typeof label === "string" ? `"${label.slice(0, 80)}"` : "without a name";
}
