// Ranking of download sites (the serving site and its mirrors) by the predicted time to fetch
// a file of the size the user enters: RTT + size / bandwidth, both from the site's own
// forecasts (server selection, Zangrilli & Lowekamp §5). Pure, so the arithmetic is tested
// without a browser.

/** A forecast and its error (root MSE), in the series' unit. */
export interface Estimate {
  value: number;
  error: number;
}

export interface Site {
  /** The site's base URL, which also identifies it in the table. */
  url: string;
  /** Forecast RTT, ms; undefined before the first measurement. */
  rtt: Estimate | undefined;
  /** Forecast download bandwidth, Mbit/s; undefined before the first measurement. */
  bandwidth: Estimate | undefined;
}

export interface Ranked {
  url: string;
  /** Predicted time, ms; undefined while the site has no usable forecasts. */
  timeMs: number | undefined;
  /** Best case: RTT − k·error and bandwidth + k·error. */
  lowMs: number | undefined;
  /** Worst case: RTT + k·error and bandwidth − k·error; Infinity when that bandwidth is ≤ 0,
   *  since a link that may carry nothing gives no upper bound. */
  highMs: number | undefined;
}

/** Milliseconds to move `bytes` at `mbits` Mbit/s; Infinity when the rate is not positive. */
export function transferMs(bytes: number, mbits: number): number {
  if (!(mbits > 0)) return Infinity;
  return (bytes * 8) / (mbits * 1000);
}

function usable(e: Estimate | undefined): e is Estimate {
  return e !== undefined && Number.isFinite(e.value) && Number.isFinite(e.error);
}

/** Predicted time and its range for one site; every field undefined when a forecast is missing
 *  or the forecast bandwidth is not positive (no data yet, or only timeouts). */
export function predict(site: Site, bytes: number, k: number): Ranked {
  const { rtt, bandwidth } = site;
  if (!usable(rtt) || !usable(bandwidth) || !(bandwidth.value > 0)) {
    return { url: site.url, timeMs: undefined, lowMs: undefined, highMs: undefined };
  }
  const spread = (e: Estimate) => k * Math.abs(e.error);
  const rttMs = Math.max(0, rtt.value);
  return {
    url: site.url,
    timeMs: rttMs + transferMs(bytes, bandwidth.value),
    lowMs:
      Math.max(0, rtt.value - spread(rtt)) + transferMs(bytes, bandwidth.value + spread(bandwidth)),
    highMs: rttMs + spread(rtt) + transferMs(bytes, bandwidth.value - spread(bandwidth)),
  };
}

/** Sites fastest first; those without a prediction last, in the order given (sort is stable). */
export function rank(sites: readonly Site[], bytes: number, k: number): Ranked[] {
  const key = (r: Ranked) => r.timeMs ?? Infinity;
  // Compared, not subtracted: Infinity − Infinity would be NaN.
  const order = (a: Ranked, b: Ranked) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
  return sites.map((s) => predict(s, bytes, k)).sort(order);
}
