// The page's history in IndexedDB: every record the worker makes, so that a reload shows the
// same graphs and the forecaster banks are rebuilt exactly (the bank is deterministic: the
// same values in the same order give the same state). Used from the worker.

import type { Record } from "./record";

const DB_NAME = "nowcast";
const DB_VERSION = 1;
const STORE = "records";
/** Records kept per series; older ones are pruned when the page opens. */
export const MAX_RECORDS_PER_SERIES = 10_000;

interface Row {
  id?: number;
  key: string;
  record: Record;
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

  /** Opens the history, or undefined where IndexedDB is not available (private modes). */
  static async open(): Promise<History | undefined> {
    if (typeof indexedDB === "undefined") return undefined;
    const req = indexedDB.open(DB_NAME, DB_VERSION);
    req.onupgradeneeded = () => {
      req.result.createObjectStore(STORE, { keyPath: "id", autoIncrement: true });
    };
    try {
      await done(req);
    } catch {
      return undefined;
    }
    return new History(req.result);
  }

  append(key: string, record: Record): Promise<void> {
    const tx = this.db.transaction(STORE, "readwrite");
    tx.objectStore(STORE).add({ key, record } satisfies Row);
    return done(tx);
  }

  /**
   * Every series' records in the order they were made, at most
   * {@link MAX_RECORDS_PER_SERIES} each; the older ones are deleted.
   */
  async load(): Promise<Map<string, Record[]>> {
    const tx = this.db.transaction(STORE, "readwrite");
    const store = tx.objectStore(STORE);
    const all = store.getAll();
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

  clear(): Promise<void> {
    const tx = this.db.transaction(STORE, "readwrite");
    tx.objectStore(STORE).clear();
    return done(tx);
  }
}
