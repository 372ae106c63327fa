// The ranking table: the serving site, the target and every mirror listed, fastest first by
// the predicted time to download a file of the size the user enters (ranking.ts), with the
// range from the forecasts' errors.

import { formatDuration, formatValue } from "../format";
import type { NextForecast } from "../messages";
import { rank, type Estimate, type Site } from "../ranking";
import { endpointName } from "../settings";
import { el } from "./dom";
import type { MirrorEntry } from "./mirrors-view";

const estimate = (f: NextForecast | undefined): Estimate | undefined =>
  f && { value: f.value, error: f.error };

export class RankingView {
  private readonly tbody = el<HTMLTableElement>("ranking-table").tBodies[0]!;
  private readonly fileSize = el<HTMLInputElement>("file-size");
  /** The newest forecast of each of the target's series. */
  private readonly targetForecasts = new Map<string, NextForecast>();

  /**
   * @param siteUrl the serving site's URL.
   * @param mirrors the mirrors listed, in their order.
   * @param target the target's URL (undefined: the serving site).
   */
  constructor(
    private readonly siteUrl: string,
    private readonly mirrors: () => Iterable<MirrorEntry>,
    private readonly target: () => string | undefined,
  ) {
    this.fileSize.addEventListener("input", () => this.show());
  }

  /** The newest forecast of one of the target's series (none: it has no data). */
  forecast(key: string, next: NextForecast | undefined): void {
    if (next === undefined) this.targetForecasts.delete(key);
    else this.targetForecasts.set(key, next);
  }

  /** The target's series are gone (another target, or the history cleared). */
  forgetTarget(): void {
    this.targetForecasts.clear();
  }

  private fileBytes(): number {
    const mb = Number(this.fileSize.value);
    // 1 MB = 10^6 bytes, as download sites state file sizes.
    return Number.isFinite(mb) && mb > 0 ? mb * 1e6 : 100e6;
  }

  /**
   * Redraws the table: the site and every mirror, fastest first. The target's main series
   * stand for the target, unless it is a mirror with its own opted-in probes.
   */
  show(): void {
    const target = this.target() ?? this.siteUrl;
    const mirrors = new Map([...this.mirrors()].map((m) => [m.url, m]));
    const sites: (Site & { name: string })[] = [
      {
        url: this.siteUrl,
        name: `${new URL(this.siteUrl).host} (this site)`,
        rtt: undefined,
        bandwidth: undefined,
      },
      ...[...mirrors.values()].map((m) => ({
        url: m.url,
        name: m.name,
        rtt: estimate(m.rtt),
        bandwidth: estimate(m.bandwidth),
      })),
    ];
    let measured = sites.find((s) => s.url === target);
    if (measured === undefined) {
      measured = {
        url: target,
        name: `${endpointName(target)} (target)`,
        rtt: undefined,
        bandwidth: undefined,
      };
      sites.push(measured);
    }
    // The WebSocket series when measured, else those over fetch (transport "http"). A mirror
    // that is the target is measured as the target (the worker does not probe it twice): its
    // own forecasts are from before.
    const f = this.targetForecasts;
    measured.rtt = estimate(f.get("rtt/websocket") ?? f.get("rtt/http")) ?? measured.rtt;
    measured.bandwidth =
      estimate(f.get("bandwidth_down/websocket") ?? f.get("bandwidth_down/http")) ??
      measured.bandwidth;
    const asTarget = mirrors.get(target);
    if (asTarget?.probing === true) asTarget.status.textContent = "measured as the target";
    const byUrl = new Map(sites.map((site) => [site.url, site]));
    const rows = rank(sites, this.fileBytes(), 1).map((r) => {
      const site = byUrl.get(r.url)!;
      const row = document.createElement("tr");
      row.dataset.url = r.url;
      const head = document.createElement("th");
      head.scope = "row";
      head.textContent = site.name;
      const cells = Array.from({ length: 4 }, () => document.createElement("td"));
      const probing = r.url === target || mirrors.get(r.url)?.probing === true;
      cells[0]!.textContent =
        r.timeMs === undefined
          ? probing
            ? "waiting for data"
            : "not probed"
          : formatDuration(r.timeMs);
      cells[1]!.textContent =
        r.lowMs === undefined || r.highMs === undefined
          ? "–"
          : `${formatDuration(r.lowMs)} – ${formatDuration(r.highMs)}`;
      const withError = (e: Estimate | undefined, unit: string) =>
        e === undefined ? "–" : `${formatValue(e.value, unit)} ± ${formatValue(e.error, unit)}`;
      cells[2]!.textContent = withError(site.rtt, "ms");
      cells[3]!.textContent = withError(site.bandwidth, "Mbit/s");
      row.append(head, ...cells);
      return row;
    });
    this.tbody.replaceChildren(...rows);
  }
}
