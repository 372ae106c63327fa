// The measurement modules a round runs in the page, by measure and transport.

import { echo } from "./echo";
import { httpPing } from "./http-ping";
import { loadedLatency } from "./loaded-latency";
import type { Measurements } from "./measurement";
import { httpDownload, httpUpload, wsDownload, wsUpload } from "./transfer";

export const MEASUREMENTS: Measurements = {
  "rtt/websocket": echo,
  "rtt/http": httpPing,
  "download/websocket": wsDownload,
  "download/http": httpDownload,
  "upload/websocket": wsUpload,
  "upload/http": httpUpload,
  loaded: loadedLatency,
};
