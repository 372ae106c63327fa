// A round is a plan: the measurements to run against one site, in order, as data (the shape of
// Cloudflare speedtest's test plan: a list of measurement descriptors that one engine runs,
// round.ts). The site the page measures and every mirror it probes get a plan of this kind,
// and the measurements the ranking compares sites by are the same steps in every plan.

import type { SeriesKey } from "../messages";
import type { SizeChoice, Settings } from "../settings";

/** What a step measures: an RTT (WebSocket echo or fetch ping), or a timed transfer. */
export type Measure = "rtt" | "download" | "upload";
export type StepTransport = "websocket" | "http";

/** One measurement of a round. */
export interface Step {
  measure: Measure;
  /** Also the group the step belongs to: a transport whose connection closed, or whose
   *  transfer did not fit the byte budget, skips its remaining steps in that round. */
  transport: StepTransport;
  /** The series its values feed. */
  key: SeriesKey;
  /** Transfers: bytes, or "auto" (long enough to be accurate, within the budget's share). */
  size?: SizeChoice;
  /** Transfers: parallel streams, fixed or as the stream-count pretest finds them needed. */
  streams?: "pretest" | number;
  /** Transfers: the series of echoes run beside the transfer on a second connection, the
   *  queueing it causes (loaded latency). */
  loaded?: SeriesKey;
  /** Echoes: the series of differences between consecutive RTTs (jitter), worked out from
   *  the echoes themselves (no traffic of its own). */
  jitter?: SeriesKey;
  /**
   * The step's place among the ranking's measurements ({@link rankingSteps}): a round over
   * several sites runs each of these phase by phase across the sites (round.ts `runSites`),
   * so every site's echo is timed in the same moment and alone, then every site's download.
   */
  ranking?: number;
}

export type Plan = readonly Step[];

export const isTransfer = (s: Step) => s.measure !== "rtt";

/** A site's series the ranking reads (messages.ts `MirrorEvent`, rank.ts). */
export const MIRROR_RTT = "rtt/websocket";
export const MIRROR_DOWN = "bandwidth_down/http";

/**
 * What the ranking compares sites by, the same for the target and every mirror: a WebSocket
 * echo with nothing else on the wire, then a download over fetch of the chosen size, with its
 * stream-count pretest and nothing beside it (no loaded-latency echoes: they would load one
 * site's download and not another's). Transfers go over fetch ({@link UPLOAD_KEY} says why).
 */
export function rankingSteps(size: SizeChoice): Step[] {
  return [
    { measure: "rtt", transport: "websocket", key: MIRROR_RTT, ranking: 0 },
    {
      measure: "download",
      transport: "http",
      key: MIRROR_DOWN,
      size,
      streams: "pretest",
      ranking: 1,
    },
  ];
}

/**
 * The upload every plan of the target runs: over fetch, whatever the transport, as the
 * download is. A browser sends a fetch body from its network process's memory, as fast as the
 * path takes it, and a fetch response is read by the network process too; a WebSocket message
 * goes through a pipe of ~128 KB between the page's thread and the network process that the
 * page's thread must keep refilling (upload) or draining (download). On a fast path with
 * little delay, or a busy machine, that pipe runs dry or full: the WebSocket upload read
 * 0.81-0.88 of iperf3 at 300 Mbit/s (issue 12), and the WebSocket download 0.90 at 500 Mbit/s
 * and 0.46 at 1 Gbit/s, where fetch held within 2.5 % both ways. With WebSocket in use, the
 * loaded RTT is measured beside the upload.
 */
export const UPLOAD_KEY = "bandwidth_up/http";

/**
 * The plan of the site the page measures (the target): the WebSocket echo (with jitter) with
 * WebSocket in use, a ping over fetch with fetch in use; the download and the upload over
 * fetch ({@link UPLOAD_KEY}), with the loaded RTT beside the upload when WebSocket is in use;
 * and, when both transports are, the WebSocket download and upload too, to compare. With
 * mirrors to rank (`ranked`), the ranking's steps (the echo, the download) run whatever the
 * transport, so that the target is compared on the same measurements as they are.
 */
export function targetPlan(s: Pick<Settings, "transport" | "size">, ranked = false): Plan {
  const plan: Step[] = [];
  const ws = s.transport !== "http";
  // Without mirrors the steps run in plan order (a round over several sites runs the ranking's
  // steps phase by phase, before the others: round.ts `runSites`).
  const [echo, down] = rankingSteps(s.size).map((step) =>
    ranked ? step : { ...step, ranking: undefined },
  ) as [Step, Step];
  if (ws || ranked) plan.push({ ...echo, jitter: "jitter/websocket" });
  if (s.transport !== "websocket")
    plan.push({ measure: "rtt", transport: "http", key: "rtt/http" });
  plan.push(down);
  if (s.transport === "both") {
    plan.push(
      {
        measure: "download",
        transport: "websocket",
        key: "bandwidth_down/websocket",
        size: s.size,
        streams: "pretest",
      },
      {
        measure: "upload",
        transport: "websocket",
        key: "bandwidth_up/websocket",
        size: s.size,
        streams: "pretest",
        loaded: "loaded_rtt/websocket",
      },
    );
  }
  plan.push({
    measure: "upload",
    transport: "http",
    key: UPLOAD_KEY,
    size: s.size,
    streams: "pretest",
    ...(ws ? { loaded: "loaded_rtt/websocket" as const } : {}),
  });
  return plan;
}

/** The plan of a mirror: the ranking's steps, run like the target's (same sizes, pretests
 *  and timeouts), and nothing more (its traffic is a third party's). */
export function mirrorPlan(s: Pick<Settings, "size">): Plan {
  return rankingSteps(s.size);
}
