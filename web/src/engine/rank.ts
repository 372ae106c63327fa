// The ranking of download sites (ranking.ts: RTT + size / bandwidth, from each site's
// forecasts): the one place it is computed.

import type { RankedSite } from "../messages";
import { rank, type Estimate } from "../ranking";
import type { SeriesSet } from "./series";

/** A site's forecast of `metric`: over WebSocket when it has one, else over fetch. */
function forecast(series: SeriesSet, metric: "rtt" | "bandwidth_down"): Estimate | undefined {
  const f = series.next(`${metric}/websocket`) ?? series.next(`${metric}/http`);
  return f && { value: f.value, error: f.error };
}

/**
 * `urls` fastest first by the predicted time to fetch `bytes` (ranges of ±1 forecast error),
 * each with the forecasts it was ranked by; `measured` gives a URL's series, undefined for a
 * site not measured (it ranks last, in the order given).
 */
export function ranking(
  urls: readonly string[],
  bytes: number,
  measured: (url: string) => SeriesSet | undefined,
): RankedSite[] {
  const sites = urls.map((url) => {
    const series = measured(url);
    return {
      url,
      rtt: series && forecast(series, "rtt"),
      bandwidth: series && forecast(series, "bandwidth_down"),
    };
  });
  const byUrl = new Map(sites.map((s) => [s.url, s]));
  return rank(sites, bytes, 1).map((r) => ({ ...r, ...byUrl.get(r.url)! }));
}
