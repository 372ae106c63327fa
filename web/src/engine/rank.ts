// The ranking of download sites: the core's (forecast.ts `rankSites`: RTT + size / bandwidth
// from each site's forecasts, a range of ±BAND_K forecast errors, and each site's standing),
// over the series and the reach of the sites the page lists.

import { rankSites, type Estimate } from "../forecast";
import { BAND_K, type RankedSite, type SeriesKey } from "../messages";
import { MIRROR_DOWN, MIRROR_RTT } from "./plan";
import { shown, type SeriesSet } from "./series";

/** A site's forecast of the ranking's series `key` (plan.ts `rankingSteps`): every site is
 *  ranked by the same measurements. Its error is NaN, unknown, while it comes from one
 *  value (the core ranks it then without a range, never "slower"). */
function forecast(series: SeriesSet, key: SeriesKey): Estimate | undefined {
  if (!series.has(key)) return undefined;
  const f = shown(series.get(key).state()).next;
  return f && { value: f.value, error: f.errorKnown ? f.error : NaN };
}

/** The round trip over fetch: a site ranked alone, with nothing to compare it with, may be
 *  ranked by it (with the transport HTTP and no mirror ticked, the target measures no
 *  WebSocket echo, and was never ranked). */
const FETCH_RTT: SeriesKey = "rtt/http";

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
  const alone = urls.length === 1;
  const sites = urls.map((url) => {
    const site = measured(url);
    return {
      url,
      rtt:
        site &&
        (forecast(site.series, MIRROR_RTT) ??
          (alone ? forecast(site.series, FETCH_RTT) : undefined)),
      bandwidth: site && forecast(site.series, MIRROR_DOWN),
      unreachable: site?.unreachable ?? false,
    };
  });
  const byUrl = new Map(sites.map((s) => [s.url, s]));
  return rankSites(sites, bytes, BAND_K).map((r) => {
    const { rtt, bandwidth } = byUrl.get(r.url)!;
    return { ...r, rtt, bandwidth };
  });
}
