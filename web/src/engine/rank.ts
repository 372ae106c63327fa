// The ranking of download sites: the core's (forecast.ts `rankSites`: RTT + size / bandwidth
// from each site's forecasts, a range of ±BAND_K forecast errors, and each site's standing),
// over the series and the reach of the sites the page lists.

import { rankSites, type Estimate } from "../forecast";
import { BAND_K, type RankedSite } from "../messages";
import type { SeriesSet } from "./series";

/** A site's forecast of `metric`: over WebSocket when it has one, else over fetch. */
function forecast(series: SeriesSet, metric: "rtt" | "bandwidth_down"): Estimate | undefined {
  const f = series.next(`${metric}/websocket`) ?? series.next(`${metric}/http`);
  return f && { value: f.value, error: f.error };
}

/**
 * `urls` fastest first by the predicted time to fetch `bytes`, each with its range, its
 * standing and the forecasts it was ranked by; `measured` gives a URL's series and whether
 * its last round reached it, undefined for a site not measured (it ranks after those with
 * forecasts, in the order given).
 */
export function ranking(
  urls: readonly string[],
  bytes: number,
  measured: (url: string) => { series: SeriesSet; unreachable: boolean } | undefined,
): RankedSite[] {
  const sites = urls.map((url) => {
    const site = measured(url);
    return {
      url,
      rtt: site && forecast(site.series, "rtt"),
      bandwidth: site && forecast(site.series, "bandwidth_down"),
      unreachable: site?.unreachable ?? false,
    };
  });
  const byUrl = new Map(sites.map((s) => [s.url, s]));
  return rankSites(sites, bytes, BAND_K).map((r) => {
    const { rtt, bandwidth } = byUrl.get(r.url)!;
    return { ...r, rtt, bandwidth };
  });
}
