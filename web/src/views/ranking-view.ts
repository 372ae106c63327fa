// The ranking table: the serving site, the target and every mirror listed, fastest first by
// the predicted time to download a file of the size the user enters, with the range from the
// forecasts' errors (± BAND_K errors, as everywhere on the page) and each site's standing:
// "about the same" as the fastest when predicted within its range, "likely slower" when only
// the ranges overlap (the forecasts say slower, their errors not yet), "unreachable" when its
// last round could not reach it. The worker ranks them (messages.ts "rank"); this view lists
// the sites, asks again when the list or the size changes, and shows its answer.

import { formatDuration, formatWithError } from "../format";
import type { Estimate } from "../forecast";
import { BAND_K, type RankedSite, type RankingEvent } from "../messages";
import { endpointName } from "../settings";
import type { Announcer, Pace } from "./announcer";
import { el } from "./dom";
import type { MirrorEntry } from "./mirrors-view";

/** The ranking is announced when a site's standing changes (not its times, which move with
 *  every probe), once it ranks more than one site, at most every half minute. */
const ANNOUNCE: Pace = { settleMs: 3000, gapMs: 30_000 };

/** The status of a mirror that is the target. */
const AS_TARGET = "measured as the target";

const withError = (e: Estimate | undefined, unit: string) =>
  e === undefined ? "–" : formatWithError(e.value, BAND_K * e.error, unit, !Number.isNaN(e.error));

/** The predicted time, qualified by the standing where it says more than the order does. */
function time(r: Partial<RankedSite>, probing: boolean): string {
  if (r.standing === "unreachable") return "unreachable";
  if (r.timeMs === undefined) return probing ? "waiting for data" : "not probed";
  const t = formatDuration(r.timeMs);
  if (r.standing === "about_the_same") return `${t} (about the same)`;
  return r.standing === "likely_slower" ? `${t} (likely slower)` : t;
}

export class RankingView {
  private readonly tbody = el<HTMLTableElement>("ranking-table").tBodies[0]!;
  private readonly fileSize = el<HTMLInputElement>("file-size");
  private readonly summary = el("ranking-summary");
  /** The worker's last answer, fastest first. */
  private ranked: RankedSite[] = [];
  /** The last question asked, to ask only when it changes. */
  private asked = "";
  /** The last file size typed that is one (MB): what the ranking and its sentence use while
   *  the box holds something else (0, a negative, nothing). */
  private sizeMb = 100;
  /** Whether the box holds a file size. */
  private sizeOk = true;

  /**
   * @param siteUrl the serving site's URL.
   * @param mirrors the mirrors listed, in their order.
   * @param target the target's URL (undefined: the serving site).
   * @param ask asks the worker to rank `sites` for a file of `fileBytes`.
   * @param announcer tells a screen reader the ranking when a site's standing changes.
   */
  constructor(
    private readonly siteUrl: string,
    private readonly mirrors: () => Iterable<MirrorEntry>,
    private readonly target: () => string | undefined,
    private readonly ask: (fileBytes: number, sites: string[]) => void,
    private readonly announcer: Announcer,
  ) {
    this.fileSize.addEventListener("input", () => this.show());
  }

  private fileBytes(): number {
    const text = this.fileSize.value.trim();
    const mb = Number(text);
    const ok = text !== "" && Number.isFinite(mb) && mb > 0;
    if (ok) this.sizeMb = mb;
    this.sizeOk = ok;
    // Said at the box, and the ranking stays that of the last size that was one, named as
    // such: a sentence saying "a 0 MB file" beside the time of a 100 MB one misleads.
    this.fileSize.setCustomValidity(ok ? "" : "A file size is a number of MB above 0.");
    this.fileSize.setAttribute("aria-invalid", String(!ok));
    // 1 MB = 10^6 bytes, as download sites state file sizes.
    return this.sizeMb * 1e6;
  }

  /** The worker's ranking. */
  ranking(ev: RankingEvent): void {
    this.ranked = ev.sites;
    this.show();
  }

  /** Redraws the table, and asks the worker again if the sites or the file size changed. */
  show(): void {
    const target = this.target() ?? this.siteUrl;
    const mirrors = new Map([...this.mirrors()].map((m) => [m.url, m]));
    const names = new Map([
      [this.siteUrl, `${new URL(this.siteUrl).host} (this site)`],
      ...[...mirrors.values()].map((m) => [m.url, m.name] as const),
    ]);
    if (!names.has(target)) names.set(target, `${endpointName(target)} (target)`);
    const fileBytes = this.fileBytes();
    // Ticking or unticking a mirror changes the answer too (the worker probes it or not).
    const probed = [...mirrors.values()].filter((m) => m.probing).map((m) => m.url);
    const question = JSON.stringify([fileBytes, [...names.keys()], probed]);
    if (question !== this.asked) {
      this.asked = question;
      this.ask(fileBytes, [...names.keys()]);
    }
    // A mirror that is the target is measured as the target, ticked or not (the worker does
    // not probe it twice); once it is not the target, it is probed as a mirror again, or not.
    for (const m of mirrors.values()) {
      if (m.url === target) m.status.textContent = AS_TARGET;
      else if (m.status.textContent === AS_TARGET) {
        m.status.textContent = m.probing ? "waiting for the next probe" : "not probed";
      }
    }
    // In the worker's order; a site it has not ranked yet comes last, as one without
    // forecasts would.
    const answered = new Map(this.ranked.map((r) => [r.url, r]));
    const sites = [
      ...this.ranked.filter((r) => names.has(r.url)),
      ...[...names.keys()].filter((url) => !answered.has(url)).map((url) => ({ url })),
    ] as (Partial<RankedSite> & { url: string })[];
    const rows = sites.map((r) => {
      const row = document.createElement("tr");
      row.dataset.url = r.url;
      row.dataset.standing = r.standing ?? "";
      const head = document.createElement("th");
      head.scope = "row";
      head.textContent = names.get(r.url)!;
      const cells = Array.from({ length: 4 }, () => document.createElement("td"));
      const probing = r.url === target || mirrors.get(r.url)?.probing === true;
      cells[0]!.textContent = time(r, probing);
      cells[1]!.textContent =
        r.timeMs !== undefined && r.lowMs === undefined
          ? "after a second measurement"
          : r.lowMs === undefined || r.highMs === undefined
            ? "–"
            : `${formatDuration(r.lowMs)} – ${formatDuration(r.highMs)}`;
      cells[2]!.textContent = withError(r.rtt, "ms");
      cells[3]!.textContent = withError(r.bandwidth, "Mbit/s");
      row.append(head, ...cells);
      return row;
    });
    this.tbody.replaceChildren(...rows);
    const sentence =
      (this.sizeOk ? "" : `File size: a number of MB above 0 (ranked for ${this.sizeMb} MB). `) +
      summary(sites, names, String(this.sizeMb));
    this.summary.textContent = sentence;
    // Its gist: each site's standing, the fastest and those about the same as one (which of
    // them leads changes with every probe and says nothing). A site ranked alone is the
    // headline's news already.
    const ranked = sites.filter((r) => r.timeMs !== undefined || r.standing === "unreachable");
    const group = (r: Partial<RankedSite>) =>
      r.standing === "best" || r.standing === "about_the_same" ? "fastest" : r.standing;
    this.announcer.say(
      "ranking",
      ranked.length < 2
        ? ""
        : JSON.stringify(
            [...ranked].sort((a, b) => a.url.localeCompare(b.url)).map((r) => [r.url, group(r)]),
          ),
      ranked.length < 2 ? "" : sentence,
      ANNOUNCE,
    );
  }
}

/** The ranking in a sentence: which site is fastest for the file, which are about the same,
 *  which cannot be reached. */
function summary(
  sites: readonly (Partial<RankedSite> & { url: string })[],
  names: ReadonlyMap<string, string>,
  sizeMb: string,
): string {
  const name = (r: { url: string }) => names.get(r.url) ?? r.url;
  const timed = sites.filter((r) => r.timeMs !== undefined && r.standing !== "unreachable");
  const down = sites.filter((r) => r.standing === "unreachable").map(name);
  const unreachable = down.length === 0 ? "" : ` Unreachable: ${down.join(", ")}.`;
  const best = timed[0];
  if (best === undefined) return `No site has a forecast yet to rank it by.${unreachable}`;
  if (timed.length === 1) {
    // One site with a forecast is no ranking ("Fastest for a 100 MB file: this site", out of a
    // field of one, beside mirrors not probed): its time, and how to get a ranking.
    const unprobed = sites.length > 1 + down.length;
    return (
      `For a ${sizeMb} MB file, ${name(best)} takes about ${formatDuration(best.timeMs!)}` +
      `${unprobed ? "; tick a mirror below to compare" : ""}.${unreachable}`
    );
  }
  const same = timed.filter((r) => r.standing === "about_the_same").map(name);
  const tie = same.length === 0 ? "" : `; about the same: ${same.join(", ")}`;
  const likely = timed.filter((r) => r.standing === "likely_slower").map(name);
  const unsure =
    likely.length === 0
      ? ""
      : ` Likely slower, though not yet beyond the forecasts' errors: ${likely.join(", ")}.`;
  return `Fastest for a ${sizeMb} MB file: ${name(best)}, about ${formatDuration(best.timeMs!)}${tie}.${unsure}${unreachable}`;
}
