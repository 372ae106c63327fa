// The console (JavaNws §2.1.3): the worker's state, the time and the bytes used in the header;
// a banner that says in words what is wrong (the target unreachable, the server's wait, the
// byte budget spent or about to be); and, in the details under the headline, a row per series
// with its last measurement, next forecast, forecaster, mean absolute error, probes, timeouts
// and failures.

import {
  clock,
  formatBytes,
  formatPeriod,
  formatSpan,
  formatValue,
  formatWithError,
  UNKNOWN_SPREAD_TITLE,
} from "../format";
import { BAND_K, type NextForecast, type StatusEvent } from "../messages";
import { budgetLastsS } from "../settings";
import { AT_ONCE, type Announcer } from "./announcer";
import { el, placeInOrder, setText, type Rank } from "./dom";
import { bandwidthPhrase, sharePercent } from "./headline-math";

/** The budget is said to be about to run out when, at the last round's pace, it lasts less
 *  than this (s). */
const BUDGET_WARN_S = 15 * 60;

/** A problem or warning of the banner that comes back within this long is not announced
 *  again (ms). */
const REANNOUNCE_MS = 2 * 60_000;

/** What the last probe of a series came to, as its row says it. */
/** The "last" column: its text, and the value it shows (which the row's unit may rescale). */
export type LastText = { text: string; failed: boolean; value?: number };

/** One series' row. */
export class ConsoleRow {
  readonly row: HTMLTableRowElement;
  private readonly cells: HTMLTableCellElement[];

  constructor(
    title: string,
    private readonly unit: string,
    private readonly names: ReadonlyMap<string, string>,
  ) {
    this.row = document.createElement("tr");
    const head = document.createElement("th");
    head.scope = "row";
    head.textContent = title;
    this.cells = Array.from({ length: 7 }, () => document.createElement("td"));
    this.row.append(head, ...this.cells);
  }

  show(
    last: LastText,
    next: NextForecast | undefined,
    mae: number | undefined,
    count: number,
    timeouts: number,
    failed: number,
  ): void {
    const [lastCell, nextCell, method, maeCell, probes, timedOut, failures] = this.cells as [
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
      HTMLTableCellElement,
    ];
    // One unit for the row's figures, that of the largest (a row read "326 Mbit/s" beside
    // an error of "2.63 Gbit/s").
    const figures = [last.value, next?.value, mae].filter(
      (x): x is number => x !== undefined && Number.isFinite(x),
    );
    const magnitude = figures.length === 0 ? 0 : Math.max(...figures.map(Math.abs));
    lastCell.textContent =
      last.value === undefined ? last.text : formatValue(last.value, this.unit, magnitude);
    lastCell.classList.toggle("failure", last.failed);
    nextCell.textContent =
      next === undefined
        ? "–"
        : formatWithError(next.value, BAND_K * next.error, this.unit, next.errorKnown, magnitude);
    nextCell.title = next !== undefined && !next.errorKnown ? UNKNOWN_SPREAD_TITLE : "";
    // An improved forecast combines every forecaster: the largest weight, with its share.
    const name = next === undefined ? "–" : (this.names.get(next.method) ?? next.method);
    method.textContent = next?.share === undefined ? name : `${name} (${sharePercent(next.share)})`;
    if (next !== undefined) method.title = next.method;
    maeCell.textContent = mae === undefined ? "–" : formatValue(mae, this.unit, magnitude);
    probes.textContent = String(count);
    timedOut.textContent = String(timeouts);
    failures.textContent = String(failed);
  }
}

/** The state in words for the status line. An unreachable target comes first, whatever
 *  else holds (the budget's pause said "Measuring every 2 s (bandwidth paused)" under a
 *  banner saying the target could not be reached). */
export function stateText(ev: StatusEvent): string {
  if (ev.outage !== undefined && ev.state !== "suspended" && ev.state !== "starting") {
    return ev.outage.notEchoNode === true
      ? "The target is not an echo-node"
      : "Cannot reach the target";
  }
  switch (ev.state) {
    case "starting":
      return "Starting";
    case "suspended":
      return "Paused";
    case "backing-off":
      return "Waiting (the server asked)";
    case "over-budget":
      return `Measuring every ${formatPeriod(ev.periodS)} (bandwidth paused)`;
    default:
      // The budget spaces bandwidth probes long enough to be timed further apart.
      return (
        `Measuring every ${formatPeriod(ev.periodS)}` +
        bandwidthPhrase(ev.bandwidth, ev.periodS, ev.budgetBytes)
      );
  }
}

export class ConsoleView {
  private readonly now = el<HTMLTimeElement>("now");
  private readonly state = el("state");
  private readonly bytes = el("bytes");
  private readonly banner = el("banner");
  private readonly tbody = el<HTMLTableElement>("series-table").tBodies[0]!;
  private readonly targetName = el("target-name");
  /** Forecasters' display names by id (the worker's "methods"). */
  readonly names = new Map<string, string>();
  private target = "";
  private last: StatusEvent | undefined;
  /** Whether the target has a value on the page (the outage banner says what is shown). */
  private measured = true;
  /** The headings of the banner's paragraphs shown, and when each was last announced. */
  private shown = new Set<string>();
  private readonly announced = new Map<string, number>();

  /**
   * @param tick runs each second, after the clock is set.
   * @param announcer says a new problem or warning of the banner once.
   */
  constructor(
    private readonly rank: Rank,
    tick: () => void,
    private readonly announcer: Announcer,
  ) {
    const each = () => {
      const now = Date.now();
      this.now.dateTime = new Date(now).toISOString();
      this.now.textContent = clock(now);
      tick();
    };
    each();
    setInterval(each, 1000);
  }

  /** Adds a series' row in its place. */
  add(key: string, title: string, unit: string): ConsoleRow {
    const row = new ConsoleRow(title, unit, this.names);
    placeInOrder(this.tbody as unknown as HTMLElement, row.row, key, this.rank);
    return row;
  }

  /** The worker's state, the bytes used this hour, and what is wrong, in words. */
  status(ev: StatusEvent, measured = true): void {
    this.last = ev;
    this.measured = measured;
    // A live region: written only when it says something new (a screen reader reads it
    // again whenever its text is replaced, even by the same words, and the worker reports
    // its state every round).
    setText(this.state, ev.message === "" ? stateText(ev) : `${stateText(ev)}: ${ev.message}`);
    this.state.dataset.state =
      ev.outage !== undefined
        ? "problem"
        : ev.state === "suspended"
          ? "paused"
          : ev.state === "running" || ev.state === "starting"
            ? "measuring"
            : "waiting";
    this.bytes.textContent = `${formatBytes(ev.bytesThisHour)} of ${formatBytes(ev.budgetBytes)} this hour`;
    this.bytes.title = `${formatBytes(ev.bytesSinceStart)} since the page opened`;
    this.showBanner(ev);
  }

  private showBanner(ev: StatusEvent): void {
    const problems: Node[][] = [];
    const warnings: Node[][] = [];
    const strong = (text: string) => {
      const s = document.createElement("strong");
      s.textContent = text;
      return s;
    };
    const text = (t: string) => document.createTextNode(t);
    if (ev.outage !== undefined) {
      const every = formatPeriod(ev.periodS);
      // A host that answered, but not as an echo-node, was reached: its reason says what
      // answered and what to do.
      const why = `${ev.outage.reason}${ev.message === "" ? "" : `; ${ev.message}`}. `;
      problems.push([
        strong(
          ev.outage.notEchoNode === true
            ? `${this.target} answered, but is not an echo-node`
            : `Can't reach ${this.target}`,
        ),
        text(
          (ev.outage.notEchoNode === true
            ? `: ${why}Asking again every ${every}. `
            : ` since ${clock(ev.outage.since)} — retrying every ${every}. Why: ${why}`) +
            (this.measured
              ? "The figures below are the last ones measured."
              : "Nothing has been measured from it yet."),
        ),
      ]);
    }
    if (ev.waitUntil !== undefined) {
      warnings.push([
        strong("The server asked the page to wait"),
        text(`: probes resume at ${clock(ev.waitUntil)}.`),
      ]);
    }
    if (ev.budgetResumesAt !== undefined) {
      warnings.push(
        ev.budgetResumesAt === Infinity
          ? [
              strong("One bandwidth probe is larger than the whole hourly budget"),
              text(": choose a smaller probe size or a larger budget. RTT probes go on."),
            ]
          : [
              // "Used up" beside "4.00 MiB of 5.00 MiB" read as a contradiction: what is left
              // is less than the next probe needs.
              strong(
                `This hour's byte budget (${formatBytes(ev.budgetBytes)}) has too little left ` +
                  "for the next bandwidth probe",
              ),
              text(
                `: bandwidth probes resume at ${clock(ev.budgetResumesAt)}, ` +
                  "as older bytes leave the hour; RTT probes go on.",
              ),
            ],
      );
    } else if (ev.state !== "suspended") {
      const left = ev.budgetBytes - ev.bytesThisHour;
      const lasts = budgetLastsS(left, ev.roundBytes, ev.periodS);
      const paceHour = (ev.roundBytes * 3600) / ev.periodS;
      if (lasts < BUDGET_WARN_S && paceHour > ev.budgetBytes) {
        warnings.push([
          strong("The hourly byte budget is running out"),
          text(
            `: at this pace its last ${formatBytes(left)} last about ` +
              `${formatSpan(lasts * 1000)} (until ${clock(Date.now() + lasts * 1000)}); ` +
              "bandwidth probes then pause until older bytes leave the hour. A smaller probe, " +
              "a longer period or a larger budget keeps them going.",
          ),
        ]);
      }
    }
    const paragraphs = [...problems, ...warnings].map((nodes) => {
      const p = document.createElement("p");
      p.append(...nodes);
      return p;
    });
    this.banner.replaceChildren(...paragraphs);
    this.banner.hidden = paragraphs.length === 0;
    this.banner.classList.toggle("warning", problems.length === 0);
    // The banner is rewritten every round (its times move on): a screen reader is told of a
    // problem or warning when it appears, in the banner's words, and not again if it comes
    // back within REANNOUNCE_MS (the budget's warning comes and goes with the pace; the
    // status line, live too, says when the target cannot be reached).
    const now = Date.now();
    const heading = (p: HTMLParagraphElement) => p.querySelector("strong")?.textContent ?? "";
    const fresh = paragraphs.filter((p) => {
      const h = heading(p);
      const said = this.announced.get(h);
      return !this.shown.has(h) && (said === undefined || now - said >= REANNOUNCE_MS);
    });
    for (const p of fresh) this.announced.set(heading(p), now);
    this.shown = new Set(paragraphs.map(heading));
    this.announcer.say(
      "banner",
      [...this.shown].join("\n"),
      fresh.map((p) => p.textContent).join(" "),
      AT_ONCE,
    );
  }

  failed(message: string): void {
    setText(this.state, message);
  }

  /** Names the target measured. */
  showTarget(name: string): void {
    this.target = name;
    this.targetName.textContent = name;
    if (this.last !== undefined) this.showBanner(this.last);
  }
}
