// What every measurement module is (Cloudflare speedtest: each measurement type its own small
// class, results plain data): given a site's connections and a request, it runs one probe and
// reports a sample; the round (round.ts) turns samples into records.

import type { Probe } from "../../record";
import type { Measure, StepTransport } from "../plan";
import type { WsConnection } from "../ws-probe";

/** What one probe measured: the value its series is fed, and how it was obtained. */
export interface Sample {
  /** ms for RTTs, Mbit/s for rates. */
  value: number;
  /** The probe's duration as its adaptive timeout sees it (ms). */
  durationMs: number;
  /** The probe parameters its record carries. */
  probe: Probe;
}

export interface ProbeRequest {
  timeoutMs: number;
  /** Transfers: payload bytes, and the parallel streams they are split over. */
  bytes: number;
  streams: number;
  /** The site's predicted RTT over the step's transport, taken off a transfer's time
   *  (JavaNws §2.1.1). */
  predictedRttMs: number | undefined;
}

/** A site's connections as the measurements use them (link.ts). */
export interface Link {
  /** The echo-node's base URL. */
  readonly base: string;
  /** The WebSocket connection of this round; the second one, for loaded latency. */
  readonly conn: WsConnection;
  readonly load: WsConnection;
  /** Opens what `transport` needs, unless open; true when a new WebSocket was opened. */
  connect(transport: StepTransport): Promise<boolean>;
  /** Whether what `transport` needs is still open. */
  connected(transport: StepTransport): boolean;
  /** Opens the second connection, unless open. */
  connectLoad(): Promise<void>;
}

export interface Measurement {
  /** Bytes one probe of `bytes` costs on the wire, charged to the hourly budget. */
  cost(bytes: number): number;
  /** The parameters the record of a probe that timed out carries. */
  probe(bytes: number, streams: number): Probe;
  /** Runs one probe; rejects with ProbeTimeout (errors.ts) when it ran out of time. */
  run(link: Link, r: ProbeRequest): Promise<Sample>;
}

/** Echoes run beside a transfer (loaded-latency.ts), and how they ended. */
export interface LoadedEchoes {
  /** RTTs of the echoes answered before the transfer ended (ms). */
  samples: number[];
  /** The echo that ran out of time, if one did (it ends the echoes). */
  timedOut: { atMs: number; elapsedMs: number } | undefined;
}

export interface LoadedLatency {
  /** Runs echoes on the link's second connection for as long as `work` runs. */
  during<T>(
    link: Link,
    work: Promise<T>,
    timeoutMs: number,
    spend: (bytes: number) => void,
  ): Promise<{ work: PromiseSettledResult<T>; echoes: LoadedEchoes }>;
}

/** The measurement modules a round runs: by measure and transport, and loaded latency. */
export type Measurements = { [K in `${Measure}/${StepTransport}`]?: Measurement } & {
  loaded: LoadedLatency;
};
