// The page's history in IndexedDB: every record the worker makes, so that a reload shows the
// same graphs and the forecaster banks are rebuilt exactly (the bank is deterministic: the
// same values in the same order give the same state), and the series the user imported, so
// that they come back too. The engine's sites read their records from it when they start
// and write each round's when it ends.
//
// Series are per target: a record's `to` names the echo-node it measured, and the history of
// one target is loaded without the others', so forecasts never mix two endpoints.

import type { ImportedPoint } from "../files";
import type { Record } from "../record";

const DB_NAME = "nowcast";
/** 1: records; 2: records indexed by target (`record.to`), and imported series. */
const DB_VERSION = 2;
const STORE = "records";
const BY_TARGET = "to";
const IMPORTS = "imports";
/** Records kept per series; older ones are pruned when the page opens (and a site's store,
 *  series.ts, keeps as many, so that an export says what a reload will show). */
export const MAX_RECORDS_PER_SERIES = 10_000;

interface Row {
  id?: number;
  key: string;
  record: Record;
}

/** An imported series as stored: its points, not its forecasts (replaying them is exact). */
export interface StoredImport {
  /** Given by IndexedDB when stored. */
  id?: number;
  file: string;
  format: string;
  label: string;
  unit: string;
  points: ImportedPoint[];
}

function done(req: IDBRequest | IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    if (req instanceof IDBTransaction) {
      req.oncomplete = () => resolve();
      req.onerror = () => reject(req.error ?? new Error("IndexedDB transaction failed"));
      req.onabort = () => reject(req.error ?? new Error("IndexedDB transaction aborted"));
    } else {
      req.onsuccess = () => resolve();
      req.onerror = () => reject(req.error ?? new Error("IndexedDB request failed"));
    }
  });
}

export class History {
  private constructor(private readonly db: IDBDatabase) {}

  /**
   * Opens the history, or undefined where IndexedDB is not available (private modes) or where
   * another tab holds an older version open: the page then measures without a history rather
   * than wait for that tab to close.
   */
  static async open(): Promise<History | undefined> {
    if (typeof indexedDB === "undefined") return undefined;
    const req = indexedDB.open(DB_NAME, DB_VERSION);
    req.onupgradeneeded = (e) => {
      const db = req.result;
      // Version 1's records already carry `to`: indexing them is the whole migration.
      const records =
        e.oldVersion < 1
          ? db.createObjectStore(STORE, { keyPath: "id", autoIncrement: true })
          : req.transaction!.objectStore(STORE);
      if (e.oldVersion < 2) {
        records.createIndex(BY_TARGET, "record.to");
        db.createObjectStore(IMPORTS, { keyPath: "id", autoIncrement: true });
      }
    };
    const db = await new Promise<IDBDatabase | undefined>((resolve) => {
      let gaveUp = false;
      req.onblocked = () => {
        gaveUp = true;
        resolve(undefined);
      };
      req.onsuccess = () => {
        if (gaveUp) req.result.close();
        else resolve(req.result);
      };
      req.onerror = () => resolve(undefined);
    });
    if (db === undefined) return undefined;
    // A newer version of the page in another tab must not wait for this one (see above).
    db.onversionchange = () => db.close();
    return new History(db);
  }

  /** Keeps records (a round's), in the order given. */
  append(rows: readonly { key: string; record: Record }[]): Promise<void> {
    const tx = this.db.transaction(STORE, "readwrite");
    const store = tx.objectStore(STORE);
    for (const { key, record } of rows) store.add({ key, record } satisfies Row);
    return done(tx);
  }

  /**
   * The records of every series of the target named `to` (records' `to`), in the order they
   * were made, at most {@link MAX_RECORDS_PER_SERIES} each; the older ones are deleted.
   */
  async load(to: string): Promise<Map<string, Record[]>> {
    const tx = this.db.transaction(STORE, "readwrite");
    const store = tx.objectStore(STORE);
    const all = store.index(BY_TARGET).getAll(to);
    await done(all);
    const rows = all.result as Row[];
    const bySeries = new Map<string, Row[]>();
    for (const row of rows) {
      const list = bySeries.get(row.key) ?? [];
      list.push(row);
      bySeries.set(row.key, list);
    }
    const out = new Map<string, Record[]>();
    for (const [key, list] of bySeries) {
      const drop = list.length - MAX_RECORDS_PER_SERIES;
      for (let i = 0; i < drop; i++) store.delete(list[i]!.id!);
      out.set(
        key,
        list.slice(Math.max(0, drop)).map((r) => r.record),
      );
    }
    await done(tx);
    return out;
  }

  /** Stores an imported series and returns its id. */
  async addImport(series: StoredImport): Promise<number> {
    const tx = this.db.transaction(IMPORTS, "readwrite");
    const req = tx.objectStore(IMPORTS).add(series);
    await done(tx);
    return req.result as number;
  }

  /** The imported series, in the order they were imported. */
  async imports(): Promise<StoredImport[]> {
    const req = this.db.transaction(IMPORTS, "readonly").objectStore(IMPORTS).getAll();
    await done(req);
    return req.result as StoredImport[];
  }

  removeImport(id: number): Promise<void> {
    const tx = this.db.transaction(IMPORTS, "readwrite");
    tx.objectStore(IMPORTS).delete(id);
    return done(tx);
  }

  /** Forgets everything: every target's records and the imported series. */
  clear(): Promise<void> {
    const tx = this.db.transaction([STORE, IMPORTS], "readwrite");
    tx.objectStore(STORE).clear();
    tx.objectStore(IMPORTS).clear();
    return done(tx);
  }
}
