// A round is a plan: the measurements to run against one site, in order, as data (the shape of
// Cloudflare speedtest's test plan: a list of measurement descriptors that one engine runs,
// round.ts). The site the page measures and every mirror it probes get a plan of this kind.

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
  /** Echoes: the series of differences between consecutive RTTs (jitter). */
  jitter?: SeriesKey;
}

export type Plan = readonly Step[];

export const isTransfer = (s: Step) => s.measure !== "rtt";

function transfers(transport: StepTransport, size: SizeChoice, loaded: boolean): Step[] {
  const load = loaded ? { loaded: "loaded_rtt/websocket" as const } : {};
  const down: Step = {
    measure: "download",
    transport,
    key: `bandwidth_down/${transport}`,
    size,
    streams: "pretest",
    ...load,
  };
  // echo-node takes uploads over WebSocket only.
  if (transport === "http") return [down];
  return [down, { ...down, measure: "upload", key: "bandwidth_up/websocket" }];
}

/**
 * The plan of the site the page measures (the target): over WebSocket an echo (with jitter),
 * a download and an upload, each with the loaded RTT beside it; over fetch a ping and a
 * download; both when the settings say so, WebSocket first.
 */
export function targetPlan(s: Pick<Settings, "transport" | "size">): Plan {
  const plan: Step[] = [];
  if (s.transport !== "http") {
    plan.push(
      { measure: "rtt", transport: "websocket", key: "rtt/websocket", jitter: "jitter/websocket" },
      ...transfers("websocket", s.size, true),
    );
  }
  if (s.transport !== "websocket") {
    plan.push(
      { measure: "rtt", transport: "http", key: "rtt/http" },
      ...transfers("http", s.size, false),
    );
  }
  return plan;
}

/**
 * The plan of a mirror: what the ranking needs, an echo and a WebSocket download, run like
 * the target's (same sizes, pretests and timeouts) but without loaded latency or jitter.
 */
export function mirrorPlan(s: Pick<Settings, "size">): Plan {
  return [
    { measure: "rtt", transport: "websocket", key: MIRROR_RTT },
    transfers("websocket", s.size, false)[0]!,
  ];
}

/** A mirror's series, those the page ranks it by (messages.ts `MirrorEvent`). */
export const MIRROR_RTT = "rtt/websocket";
export const MIRROR_DOWN = "bandwidth_down/websocket";
