/**
 * Counters for `/metrics`, rendered in the Prometheus text exposition format (version 0.0.4).
 * Pure: the server increments fields, `render` turns a snapshot into text.
 */
import { LIMIT_NAMES, type LimitName } from "./limits.js";

export const PROBE_KINDS = [
  "echo",
  "ping",
  "upload",
  "download",
  "http_ping",
  "http_download",
  "http_upload",
] as const;
export type ProbeKind = (typeof PROBE_KINDS)[number];

export const PROTOCOL_ERRORS = ["malformed", "out_of_order"] as const;
export type ProtocolErrorKind = (typeof PROTOCOL_ERRORS)[number];

/** Configured limits, reported as gauges so a dashboard can put refusals next to them. */
export type LimitValues = Record<string, number>;

export interface RuntimeGauges {
  /** Event-loop delay over the last sampling window, seconds. */
  eventLoopLag: { p50: number; p99: number; max: number };
  rssBytes: number;
  uptimeSeconds: number;
}

function zeroed<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

export class Metrics {
  readonly probes = zeroed(PROBE_KINDS);
  readonly limitRejections = zeroed(LIMIT_NAMES);
  readonly protocolErrors = zeroed(PROTOCOL_ERRORS);
  /** Open WebSocket connections. */
  wsOpen = 0;
  wsAccepted = 0;
  /** HTTP probe requests in flight. */
  httpProbesInFlight = 0;
  /** Probe payload bytes received from and sent to clients (WebSocket and HTTP). */
  bytesIn = 0;
  bytesOut = 0;
  /** Every byte read from and written to client sockets, as charged to their budgets. */
  clientBytesIn = 0;
  clientBytesOut = 0;
  /** Open TCP connections. */
  socketsOpen = 0;

  constructor(private readonly limitValues: LimitValues = {}) {}

  reject(limit: LimitName): void {
    this.limitRejections[limit]++;
  }

  render(runtime: RuntimeGauges): string {
    const out: string[] = [];
    const metric = (
      name: string,
      type: "counter" | "gauge",
      help: string,
      samples: [labels: string, value: number][],
    ) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) out.push(`${name}${labels} ${value}`);
    };
    const byLabel = (label: string, record: Record<string, number>): [string, number][] =>
      Object.entries(record).map(([k, v]) => [`{${label}="${k}"}`, v]);

    metric(
      "echo_node_probes_total",
      "counter",
      "Probes started, by kind.",
      byLabel("kind", this.probes),
    );
    metric("echo_node_websocket_connections", "gauge", "Open WebSocket connections.", [
      ["", this.wsOpen],
    ]);
    metric("echo_node_websocket_connections_total", "counter", "WebSocket connections accepted.", [
      ["", this.wsAccepted],
    ]);
    metric("echo_node_http_probes_in_flight", "gauge", "HTTP probe requests being served.", [
      ["", this.httpProbesInFlight],
    ]);
    metric(
      "echo_node_bytes_received_total",
      "counter",
      "Probe payload bytes received from clients.",
      [["", this.bytesIn]],
    );
    metric("echo_node_bytes_sent_total", "counter", "Probe payload bytes sent to clients.", [
      ["", this.bytesOut],
    ]);
    metric(
      "echo_node_client_bytes_total",
      "counter",
      "Every byte read from or written to client sockets (what the byte budgets count).",
      [
        ['{direction="in"}', this.clientBytesIn],
        ['{direction="out"}', this.clientBytesOut],
      ],
    );
    metric("echo_node_sockets", "gauge", "Open TCP connections.", [["", this.socketsOpen]]);
    metric(
      "echo_node_limit",
      "gauge",
      "Configured limits (bytes, counts, per second or milliseconds as named).",
      byLabel("name", this.limitValues),
    );
    metric(
      "echo_node_limit_rejections_total",
      "counter",
      "Requests or connections refused or cut off, by limit.",
      byLabel("limit", this.limitRejections),
    );
    metric(
      "echo_node_protocol_errors_total",
      "counter",
      "WebSocket connections closed for a protocol violation.",
      byLabel("error", this.protocolErrors),
    );
    metric(
      "echo_node_event_loop_lag_seconds",
      "gauge",
      "Event-loop delay over the last 5 s window.",
      [
        ['{quantile="0.5"}', runtime.eventLoopLag.p50],
        ['{quantile="0.99"}', runtime.eventLoopLag.p99],
        ['{quantile="1"}', runtime.eventLoopLag.max],
      ],
    );
    metric("process_resident_memory_bytes", "gauge", "Resident set size.", [
      ["", runtime.rssBytes],
    ]);
    metric("echo_node_uptime_seconds", "gauge", "Seconds since the server started.", [
      ["", runtime.uptimeSeconds],
    ]);
    return out.join("\n") + "\n";
  }
}
