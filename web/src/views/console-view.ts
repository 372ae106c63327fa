// The console (JavaNws §2.1.3): the time, the worker's state and the bytes used, the target
// measured, and a row per series with its last measurement, next forecast, forecaster,
// cumulative mean absolute error, probes and timeouts.

import { clock, formatBytes, formatValue } from "../format";
import { BAND_K, type NextForecast, type StatusEvent } from "../messages";
import { el, placeInOrder, type Rank } from "./dom";

/** One series' row. */
export class ConsoleRow {
  readonly row: HTMLTableRowElement;
  private readonly cells: HTMLTableCellElement[];

  constructor(
    title: string,
    private readonly unit: string,
  ) {
    this.row = document.createElement("tr");
    const head = document.createElement("th");
    head.scope = "row";
    head.textContent = title;
    this.cells = Array.from({ length: 6 }, () => document.createElement("td"));
    this.row.append(head, ...this.cells);
  }

  show(
    last: string,
    next: NextForecast | undefined,
    mae: number | undefined,
    count: number,
    timeouts: number,
  ): void {
    const [lastCell, nextCell, method, maeCell, probes, timedOut] = this.cells as [
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
    ];
    lastCell.textContent = last;
    nextCell.textContent =
      next === undefined
        ? "–"
        : `${formatValue(next.value, this.unit)} ± ${formatValue(BAND_K * next.error, this.unit)}`;
    method.textContent = next?.method ?? "–";
    maeCell.textContent = mae === undefined ? "–" : formatValue(mae, this.unit);
    probes.textContent = String(count);
    timedOut.textContent = String(timeouts);
  }
}

export class ConsoleView {
  private readonly now = el<HTMLTimeElement>("now");
  private readonly state = el("state");
  private readonly bytes = el<HTMLOutputElement>("bytes");
  private readonly tbody = el<HTMLTableElement>("series-table").tBodies[0]!;
  private readonly targetName = el<HTMLOutputElement>("target-name");
  private readonly targetHeading = el("target");

  constructor(private readonly rank: Rank) {
    const tick = () => {
      const now = Date.now();
      this.now.dateTime = new Date(now).toISOString();
      this.now.textContent = clock(now);
    };
    tick();
    setInterval(tick, 1000);
  }

  /** Adds a series' row in its place. */
  add(key: string, title: string, unit: string): ConsoleRow {
    const row = new ConsoleRow(title, unit);
    placeInOrder(this.tbody as unknown as HTMLElement, row.row, key, this.rank);
    return row;
  }

  /** The worker's state, and the bytes used since the page opened and this hour. */
  status(ev: StatusEvent): void {
    this.state.textContent = ev.message === "" ? ev.state : `${ev.state}: ${ev.message}`;
    this.bytes.textContent =
      `${formatBytes(ev.bytesSinceStart)} (${formatBytes(ev.bytesThisHour)} ` +
      `of ${formatBytes(ev.budgetBytes)} this hour)`;
  }

  failed(message: string): void {
    this.state.textContent = message;
  }

  /** Names the target measured, here and in the heading. */
  showTarget(name: string): void {
    this.targetName.textContent = name;
    this.targetHeading.textContent = name;
  }
}
