// The stream-count pretest: whether a series' transfers need parallel streams, found by
// trying each candidate count (probe-math.ts has the rules and their reasons).

import { ProbeTimeout } from "../errors";
import {
  chooseStreams,
  pretestBytes,
  pretestDue,
  PRETEST_PASSES,
  STREAM_CANDIDATES,
  type StreamPlan,
} from "../probe-math";

/** What the pretest can do with the site. */
export interface PretestTries {
  /** Whether one more try of `bytes` may run now (not suspended, within the budget); a try
   *  that may is charged to the budget. */
  take(bytes: number): boolean;
  /** One try's rate over `streams` streams, Mbit/s; rejects with ProbeTimeout when it ran
   *  out of time. */
  rate(bytes: number, streams: number): Promise<number>;
}

export interface PretestResult {
  streams: number;
  mbits: number;
}

/**
 * The stream count for this round's probe of `probeBytes`. When a pretest is due
 * ({@link pretestDue}), runs {@link PRETEST_PASSES} transfers of {@link pretestBytes} (at least
 * `minTryBytes`) for each
 * of {@link STREAM_CANDIDATES}, interleaved, and keeps the fewest streams whose slowest try
 * comes close to the fastest ({@link chooseStreams}); `results` then says what it measured.
 * Pretest transfers are not measurements of the series; a timed-out one ends the pretest with
 * the rates it has (the tries left wait for the next pretest).
 */
export async function streamCount(
  plan: StreamPlan,
  probeBytes: number,
  minTryBytes: number,
  tries: PretestTries,
): Promise<{ streams: number; results?: PretestResult[] }> {
  if (plan.sincePretest !== undefined) plan.sincePretest++;
  if (!pretestDue(plan)) return { streams: plan.streams };
  const bytes = pretestBytes(probeBytes, minTryBytes);
  const results: PretestResult[] = [];
  passes: for (let pass = 0; pass < PRETEST_PASSES; pass++) {
    for (const streams of STREAM_CANDIDATES) {
      if (!tries.take(bytes)) break passes;
      try {
        results.push({ streams, mbits: await tries.rate(bytes, streams) });
      } catch (e) {
        if (!(e instanceof ProbeTimeout)) throw e;
        break passes;
      }
    }
  }
  if (results.length === 0) return { streams: plan.streams };
  plan.streams = chooseStreams(results);
  plan.sincePretest = 0;
  return { streams: plan.streams, results };
}
