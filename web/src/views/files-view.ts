// Files in and out: imports (picker or drag-and-drop) with a report of what was kept and what
// refused, line by line; the imported series listed with their remove buttons; export of the
// series shown (NDJSON or CSV, written by the worker from its records); clearing the history,
// once confirmed.

import { formatBytes } from "../format";
import type { ExportEvent, ImportedEvent, PageCommand } from "../messages";
import { el } from "./dom";
import { importSummary, unreadable } from "./import-report";
import type { SeriesViews } from "./series-views";

/** Files larger than this are refused before they are read (the worker keeps 20,000 values
 *  of a series anyway; a file this large is most likely not measurements). */
const MAX_IMPORT_FILE_BYTES = 32 * 1024 * 1024;

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

export class FilesView {
  private readonly input = el<HTMLInputElement>("import");
  private readonly reports = el("import-report");
  private readonly importedList = el<HTMLUListElement>("imported-list");

  constructor(
    private readonly send: (cmd: PageCommand) => void,
    private readonly series: SeriesViews,
  ) {
    this.input.addEventListener("change", () => {
      // Copied first: clearing the input empties its live FileList.
      void this.importFiles([...(this.input.files ?? [])]);
      this.input.value = "";
    });
    document.addEventListener("dragover", (e) => {
      e.preventDefault();
      document.body.classList.add("dropping");
    });
    document.addEventListener("dragleave", () => document.body.classList.remove("dropping"));
    document.addEventListener("drop", (e) => {
      e.preventDefault();
      document.body.classList.remove("dropping");
      void this.importFiles(e.dataTransfer?.files ?? []);
    });
    const exportAs = (format: ExportEvent["format"]) => () =>
      send({ type: "export", format, series: series.list() });
    el("export-ndjson").addEventListener("click", exportAs("ndjson"));
    el("export-csv").addEventListener("click", exportAs("csv"));
    // Clearing cannot be undone: the dialog says what goes and asks first.
    const dialog = el<HTMLDialogElement>("clear-dialog");
    el("clear-history").addEventListener("click", () => dialog.showModal());
    dialog.addEventListener("close", () => {
      if (dialog.returnValue === "clear") send({ type: "clear" });
      dialog.returnValue = "";
    });
  }

  private async importFiles(files: Iterable<File>): Promise<void> {
    for (const f of files) {
      if (f.size > MAX_IMPORT_FILE_BYTES) {
        this.report(
          `${f.name}: not imported, ${formatBytes(f.size)} is more than the ` +
            `${formatBytes(MAX_IMPORT_FILE_BYTES)} a file may have`,
          [],
          true,
        );
        continue;
      }
      const text = await f.text();
      // An empty or binary file is told so here: the reader would find nothing, or echo its
      // bytes back.
      const why = unreadable(text);
      if (why !== undefined) {
        this.report(`${f.name}: nothing imported, ${why}.`, [], true);
        continue;
      }
      this.send({ type: "import", file: f.name, text });
    }
  }

  /** Adds a report at the top of the import reports: a summary, and its details as a list. */
  private report(summary: string, details: string[], problem: boolean): void {
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
    this.reports.prepend(div);
  }

  /** Lists an imported series with the button that removes it. */
  private list(key: string, label: string): void {
    const item = document.createElement("li");
    item.dataset.series = key;
    const text = document.createElement("span");
    text.textContent = label;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", `Remove ${label}`);
    remove.addEventListener("click", () => this.send({ type: "remove-import", key }));
    item.append(text, remove);
    this.importedList.append(item);
  }

  /** Shows each imported series like a live one, and what was refused, line by line. */
  imported(ev: ImportedEvent): void {
    for (const s of ev.series) {
      this.series.imported(s);
      this.list(s.key, s.label);
    }
    this.series.requestDraw();
    // Restored after a reload: reported when it was imported.
    if (ev.restored) return;
    const { summary, details, problem } = importSummary(ev);
    this.report(summary, details, problem);
  }

  removed(key: string): void {
    this.series.remove(key);
    this.importedList.querySelector(`li[data-series="${CSS.escape(key)}"]`)?.remove();
  }

  /** The history was cleared: the imported series went with it. */
  cleared(): void {
    this.series.removeWhere((key) => key.startsWith("import/"));
    this.importedList.replaceChildren();
    // The reports of earlier imports told of series that are gone: they go too, and the
    // clearing is said (it was silent, under reports of files no longer there).
    this.reports.replaceChildren();
    this.report(
      "History cleared: every measurement and imported series in this browser is gone.",
      [],
      false,
    );
  }

  /** The worker's export: downloaded as a file, and said. */
  exported(ev: ExportEvent): void {
    const type = ev.format === "csv" ? "text/csv" : "application/x-ndjson";
    const name = `nowcast-${stamp()}.${ev.format}`;
    download(name, type, ev.text);
    this.report(`Exported ${exportedCount(ev)} to ${name}.`, [], false);
  }
}

/** What an export holds, in words: its records (NDJSON lines, CSV rows after the header). */
export function exportedCount(ev: Pick<ExportEvent, "format" | "text">): string {
  const lines = ev.text.split("\n").filter((l) => l.trim() !== "").length;
  const n = ev.format === "csv" ? Math.max(0, lines - 1) : lines;
  return n === 0
    ? "no records (nothing measured or imported yet)"
    : n === 1
      ? "1 record"
      : `${n} records`;
}
