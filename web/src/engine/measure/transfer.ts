// Timed transfers, the bandwidth probes: downloads and uploads over WebSocket and fetch, each of the chosen size split over one or more parallel streams. A rate has the
// predicted RTT taken off its time (JavaNws §2.1.1); an upload is timed by the server's own
// receive times instead, where no round trip is in the span (probe-math.ts `uploadRate`).

import type { Probe } from "../../record";
import { httpDownloads, httpUploads } from "../http-probe";
import {
  aggregateRate,
  splitBytes,
  uploadRate,
  type StreamSpan,
  type TransferRate,
} from "../probe-math";
import { OPEN_TIMEOUT_MS, WsConnection } from "../ws-probe";
import type { Link, Measurement, Sample } from "./measurement";

/** A transfer's rate as a sample, with its streams, bytes, raw time and the RTT taken off. */
function rateSample(rate: TransferRate, streams: number, transport: "websocket" | "http"): Sample {
  return {
    value: rate.mbits,
    durationMs: rate.rawMs,
    probe: {
      transport,
      payload_bytes: rate.bytes,
      streams,
      raw_ms: rate.rawMs,
      rtt_subtracted_ms: rate.rttSubtractedMs,
    },
  };
}

/**
 * Runs one transfer of `bytes` split over `streams` WebSocket streams at once: the first on
 * the link's connection, the others on connections opened for it and closed after it (a
 * refused one leaves the transfer with fewer streams: the spans say how many ran). A failed
 * stream fails the transfer and closes the link's connection, whose exchange may still be
 * running.
 */
async function wsStreams<T extends StreamSpan>(
  link: Link,
  bytes: number,
  streams: number,
  run: (on: WsConnection, bytes: number) => Promise<T>,
): Promise<T[]> {
  const c = link.conn;
  const opened = await Promise.allSettled(
    Array.from({ length: streams - 1 }, () => WsConnection.open(link.base, OPEN_TIMEOUT_MS)),
  );
  const extras = opened.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
  const on = [c, ...extras];
  try {
    return await Promise.all(splitBytes(bytes, on.length).map((b, i) => run(on[i]!, b)));
  } catch (e) {
    c.close();
    throw e;
  } finally {
    for (const x of extras) x.close();
  }
}

const transferProbe =
  (transport: "websocket" | "http") =>
  (bytes: number, streams: number): Probe => ({ transport, payload_bytes: bytes, streams });

export const wsDownload: Measurement = {
  cost: (bytes) => bytes,
  probe: transferProbe("websocket"),
  async run(link, r) {
    const spans = await wsStreams(link, r.bytes, r.streams, (on, b) => on.download(b, r.timeoutMs));
    return rateSample(aggregateRate(spans, r.predictedRttMs), spans.length, "websocket");
  },
};

export const wsUpload: Measurement = {
  cost: (bytes) => bytes,
  probe: transferProbe("websocket"),
  async run(link, r) {
    const spans = await wsStreams(link, r.bytes, r.streams, (on, b) => on.upload(b, r.timeoutMs));
    return rateSample(uploadRate(spans, r.predictedRttMs), spans.length, "websocket");
  },
};

export const httpDownload: Measurement = {
  cost: (bytes) => bytes,
  probe: transferProbe("http"),
  async run(link, r) {
    const spans = await httpDownloads(link.base, splitBytes(r.bytes, r.streams), r.timeoutMs);
    return rateSample(aggregateRate(spans, r.predictedRttMs), spans.length, "http");
  },
};

export const httpUpload: Measurement = {
  cost: (bytes) => bytes,
  probe: transferProbe("http"),
  async run(link, r) {
    const spans = await httpUploads(link.base, splitBytes(r.bytes, r.streams), r.timeoutMs);
    return rateSample(uploadRate(spans, r.predictedRttMs), spans.length, "http");
  },
};
