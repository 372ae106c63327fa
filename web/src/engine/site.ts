// A site: one echo-node the page measures, the target or a mirror (or both: it is one site,
// measured once, with one set of series and records). It holds its connections, its series
// and its records; the engine decides which plan it runs.

import type { Record } from "../record";
import type { Outage } from "../messages";
import { SiteLink } from "./link";
import { Jitter } from "./measure/jitter";
import { SeriesSet } from "./series";

export class Site {
  readonly series: SeriesSet;
  readonly link: SiteLink;
  readonly jitter = new Jitter();
  /** Resolves once the series hold the site's saved records (before its first round). */
  readonly loaded: Promise<void>;
  /** Whether the site has gone (unticked, another target, history cleared): it measures
   *  nothing more, and its forecasters are freed once no round uses them. */
  retired = false;
  /** Whether its last round could not reach it (a connection or a request failed): it ranks
   *  last, and says so, until a round does. */
  unreachable = false;
  /** Since when (wall-clock ms) no round has reached it, and why the first one failed. */
  outage: Outage | undefined;
  private rounds = 0;

  /**
   * @param name records' `to` and the history's key (settings.ts `endpointName`).
   * @param saved its records from the history; undefined without one.
   */
  constructor(
    readonly name: string,
    base: string,
    spend: (bytes: number) => void,
    saved: Promise<ReadonlyMap<string, readonly Record[]> | undefined>,
  ) {
    this.series = new SeriesSet(name);
    this.link = new SiteLink(base, spend);
    this.loaded = saved.then((records) => {
      if (records !== undefined && !this.retired) this.series.load(records);
    });
  }

  /** A round that uses the site starts: its forecasters stay until the last one ends. */
  enter(): void {
    this.rounds++;
  }

  /** A round that used the site ended. */
  leave(): void {
    if (--this.rounds === 0 && this.retired) this.series.dispose();
  }

  /** Stops measuring the site: its connections close now (a probe in flight fails), its
   *  forecasters go when no round uses them. */
  retire(): void {
    if (this.retired) return;
    this.retired = true;
    this.link.close();
    if (this.rounds === 0) this.series.dispose();
  }

  /** A new plan (it became, or stopped being, the target): new connections, and stream
   *  counts found afresh. */
  replan(): void {
    this.link.close();
    this.jitter.reset();
    this.series.resetStreams();
  }
}
